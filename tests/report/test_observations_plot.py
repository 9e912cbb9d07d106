"""plot_observations: per-shard CPU bars and latency percentiles, drawn from hand-built runs."""

from __future__ import annotations

import pytest

from hotshard.errors import InputError
from hotshard.observations import Latency, Observations, ShardObservation
from hotshard.report.observations_plot import observations_figure, plot_observations

pytest.importorskip("matplotlib")

PNG = b"\x89PNG\r\n\x1a\n"


def _run(label: str, hot: float | None = 0.95, *, n: int = 64, latency: Latency | None = None,
         missing: tuple[int, ...] = ()) -> Observations:
    shards = tuple(ShardObservation(id=str(i), node=f"node-{i % 4}",
                                    cpu=None if i in missing
                                    else hot if (i == 17 and hot is not None)
                                    else 0.18 + 0.04 * ((i * 7) % 5) / 4)
                   for i in range(n))
    return Observations(label=label, shards=shards, latency_ms=latency)


@pytest.fixture
def load_test() -> Observations:
    return _run("load test", latency=Latency(p50=4, p90=9, p99=40, p999=120, max=400))


@pytest.fixture
def production() -> Observations:
    return _run("production", latency=Latency(p50=12, p90=60, p99=800, p999=2500))


def _cpu_axes(fig):
    return [ax for ax in fig.axes if ax.get_ylabel().startswith("CPU")]


def _latency_axis(fig):
    (ax,) = [ax for ax in fig.axes if ax.get_ylabel().startswith("latency")]
    return ax


def test_png_of_one_observation(tmp_path, load_test):
    out = tmp_path / "obs.png"
    plot_observations(load_test, out)
    data = out.read_bytes()
    assert data[:8] == PNG
    assert len(data) > 20_000  # two panels of drawing, not an empty canvas
    assert [p.name for p in tmp_path.iterdir()] == ["obs.png"]  # no temporary left behind


def test_svg_of_several_observations(tmp_path, load_test, production):
    mitigated = _run("mitigated", hot=0.3, latency=Latency(p50=5, p99=50, max=300))
    out = tmp_path / "compare.svg"
    plot_observations([load_test, production, mitigated], out, title="incident 42")
    text = out.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert len(text) > 50_000


def test_pdf(tmp_path, load_test):
    out = tmp_path / "obs.pdf"
    plot_observations([load_test], out)
    assert out.read_bytes()[:5] == b"%PDF-"


def test_figure_axes_labels_title_and_legends(load_test, production):
    fig = observations_figure([load_test, production])
    cpu = _cpu_axes(fig)
    assert [ax.get_title(loc="left") for ax in cpu] == ["load test", "production"]
    for ax in cpu:
        assert ax.get_ylabel() == "CPU (% of one core)"
        assert ax.get_ylim() == (0, 100)
        texts = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "hottest: shard 17 (95%)" in texts
        assert any(t.startswith("median shard: 2") for t in texts)
        hot = [p for p in ax.patches if p.get_label().startswith("hottest")]
        assert len(hot) == 1 and hot[0].get_facecolor() != ax.patches[0].get_facecolor()
        assert len(ax.patches) == 64
        median = [ln for ln in ax.get_lines() if ln.get_linestyle() == "--"]
        assert len(median) == 1 and 18 <= median[0].get_ydata()[0] <= 22
    assert cpu[-1].get_xlabel() == "shard id"  # shared shard axis, labelled once
    lat = _latency_axis(fig)
    assert lat.get_xlabel() == "percentile"
    assert lat.get_ylabel() == "latency (ms, log scale)"
    assert lat.get_yscale() == "log"
    assert [t.get_text() for t in lat.get_xticklabels()] == ["p50", "p90", "p99", "p999",
                                                             "max"]
    assert [t.get_text() for t in lat.get_legend().get_texts()] == ["load test", "production"]
    prod = lat.get_lines()[1]
    assert list(prod.get_xdata()) == [0, 1, 2, 3]  # no max: its line stops at p999
    assert list(prod.get_ydata()) == [12, 60, 800, 2500]
    assert fig.get_suptitle() == "per-shard CPU and latency: load test vs production"


def test_missing_cpu_is_a_gap_and_missing_data_a_note(tmp_path):
    gaps = _run("gaps", missing=(3, 40))
    empty = Observations(label="dashboard only")
    fig = observations_figure([gaps, empty], title="t")
    cpu_gaps, cpu_empty = _cpu_axes(fig)
    assert len(cpu_gaps.patches) == 62  # no bar for the two shards without CPU
    assert cpu_gaps.get_xlabel() == "shard id" and cpu_empty.get_xlabel() == "shard id"
    texts = [t.get_text() for t in cpu_gaps.get_legend().get_texts()]
    assert "no CPU reported (2 shards)" in texts
    assert [t.get_text() for t in cpu_empty.texts] == ["no per-shard data"]
    assert [t.get_text() for t in _latency_axis(fig).texts] == ["no latency measured"]
    plot_observations([gaps, empty], tmp_path / "gaps.png")
    assert (tmp_path / "gaps.png").read_bytes()[:8] == PNG


def test_no_shard_reports_cpu_and_some_latency_missing(tmp_path, load_test):
    blind = _run("blind", n=8, missing=tuple(range(8)))
    fig = observations_figure([load_test, blind])
    assert "no shard reports CPU" in [t.get_text() for t in _cpu_axes(fig)[1].texts]
    lat = _latency_axis(fig)
    assert [t.get_text() for t in lat.texts] == ["no latency: blind"]
    assert [t.get_text() for t in lat.get_legend().get_texts()] == ["load test"]


def test_cpu_beyond_100_percent_is_clipped_and_marked(load_test):
    # the format keeps cpu in [0, 1]; a multi-core figure forced past validation still draws
    shard = load_test.shards[17]
    object.__setattr__(shard, "cpu", 1.7)
    ax = _cpu_axes(observations_figure(load_test))[0]
    assert ax.get_ylim() == (0, 100)
    assert max(p.get_height() for p in ax.patches) == 100
    assert ">100%" in [t.get_text() for t in ax.texts]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "hottest: shard 17 (170%)" in texts and "clipped at 100% (1)" in texts


def test_bad_extension_raises_input_error(tmp_path, load_test):
    for name in ("obs.jpg", "obs"):
        with pytest.raises(InputError, match="unknown image type"):
            plot_observations(load_test, tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_missing_directory_and_empty_list_raise_input_error(tmp_path, load_test):
    with pytest.raises(InputError, match="does not exist"):
        plot_observations(load_test, tmp_path / "nope" / "obs.png")
    with pytest.raises(InputError, match="no observations"):
        plot_observations([], tmp_path / "obs.png")
