"""build_report / write_report: sections, computed numbers, escaping, missing-data notes.

Every number the tests look for is computed here from the inputs, independently of the report
code: shares by division, the uniform band from its formula, the prediction by placing the
head keys with the partitioner and spreading the tail evenly (Kafka owns 1/n per shard).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hotshard._format import pct, times
from hotshard.diagnose.findings import Diagnosis, Finding, Recommendation
from hotshard.errors import InputError
from hotshard.observations import Latency, Observations, ShardObservation
from hotshard.profile.document import Profile
from hotshard.report.html import SECTIONS, build_report, check_report_path, write_report
from hotshard.report.runs import assign_roles, mitigations_of

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
INCIDENT = ROOT / "examples" / "incident.profile.json"
N = 16
HOT = 5


def _requests(hot_share: float, total: int = 160_000, n: int = N) -> list[int]:
    """Per-shard requests: shard HOT gets ``hot_share`` of ``total``, the rest alike."""
    hot = round(hot_share * total)
    rest = (total - hot) // (n - 1)
    return [hot if i == HOT else rest for i in range(n)]


def _run(label: str, *, hot_share: float = 0.071, hot_cpu: float | None = 0.95,
         cpu: float = 0.2, latency: Latency | None = None, model: str | None = None,
         key_generator: str | None = None, extra: dict | None = None, shards: bool = True,
         distinct_keys: int | None = None) -> Observations:
    counts = _requests(hot_share)
    rows = tuple(ShardObservation(id=str(i), node=f"node-{i % 4}", requests=counts[i],
                                  cpu=hot_cpu if i == HOT and hot_cpu is not None
                                  else cpu + 0.01 * (i % 3))
                 for i in range(N)) if shards else ()
    return Observations(label=label, rate_rps=3000.0, duration_s=600.0, model=model,
                        key_generator=key_generator, latency_ms=latency, shards=rows,
                        distinct_keys=distinct_keys, extra=extra or {})


@pytest.fixture(scope="module")
def test_run() -> Observations:
    return _run("load test", hot_share=1 / N, hot_cpu=None, cpu=0.4, model="open",
                key_generator="uniform", latency=Latency(p50=4, p90=9, p99=40, max=90))


@pytest.fixture(scope="module")
def production() -> Observations:
    return _run("production", hot_share=0.071, latency=Latency(p50=12, p90=60, p99=800,
                                                                p999=1500, max=2100),
                distinct_keys=20_000)


@pytest.fixture(scope="module")
def mitigated() -> Observations:
    extra = {"simulation": {"mitigations": {"split_hot": "10:8", "replicas": 2,
                                            "local_cache_hit": 0.0, "hot_keys": 10,
                                            "coalesce": True}}}
    return _run("after the fix", hot_share=0.08, hot_cpu=0.3, latency=Latency(p50=5, p99=50),
                model="open", key_generator="profile", extra=extra)


@pytest.fixture(scope="module")
def diagnosis() -> Diagnosis:
    return Diagnosis(
        production="production", baseline="load test",
        ranking=(Finding("network", "contradicted", 0.9, ("a hop costs ~1 ms, not 760 ms",)),
                 Finding("key-skew", "fits", 0.97,
                         ("shard 5 served 7.1% of requests <script>alert(1)</script>",)),
                 Finding("hot-node", "cannot judge", 0.3, (),
                         missing=("per-shard CPU of the load test",))),
        recommendations=(Recommendation("Split the hot keys", "top 10 keys into 8 buckets",
                                        hottest_before=0.071, hottest_after=0.019,
                                        unit="share of requests"),),
        notes=("assumed a 1 ms cross-zone hop",))


@pytest.fixture(scope="module")
def full(test_run, production, mitigated, diagnosis) -> str:
    """One report with every section filled (built once: drawing takes seconds)."""
    return build_report([test_run, production, mitigated], profile=Profile.load(INCIDENT),
                        partitioner="kafka", shards=64, diagnosis=diagnosis,
                        sources=["test.json", "prod.json", "fix.json"],
                        profile_source="incident.profile.json")


def _text(page: str) -> str:
    """The page's words: SVG and tags dropped, entities left as they are."""
    page = re.sub(r"<svg.*?</svg>", "", page, flags=re.S)
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page))


def _section(page: str, name: str) -> str:
    match = re.search(rf'<section id="{name}">(.*?)</section>', page, flags=re.S)
    assert match, name
    return match.group(1)


# -- structure ---------------------------------------------------------------------------------
def test_every_section_is_there_in_order_with_a_plot(full):
    found = re.findall(r'<section id="([a-z]+)">', full)
    assert found == list(SECTIONS)
    for name in ("profile", "shards", "latency", "mitigations"):
        assert _section(full, name).count("<svg") == 1, name
    assert full.startswith("<!DOCTYPE html>") and full.rstrip().endswith("</html>")


def test_the_page_needs_nothing_from_outside(full):
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", full, flags=re.I)
    assert "<script" not in full.lower() and "<link" not in full.lower()
    assert "@import" not in full and "url(http" not in full
    assert "<img" not in full.lower()  # plots are inline SVG, not files


def test_svg_ids_are_unique_and_every_reference_resolves(full):
    ids = re.findall(r'\bid="([^"]+)"', full)
    repeated = [i for i, n in Counter(ids).items() if n > 1]
    assert not repeated, repeated[:5]
    refs = re.findall(r'href="#([^"]+)"', full) + re.findall(r"url\(#([^)]+)\)", full)
    assert refs and set(refs) <= set(ids)


def test_header_names_the_inputs(full):
    header = full[:full.index("</header>")]
    for word in ("test.json", "prod.json", "fix.json", "incident.profile.json",
                 "kafka, 64 shards, bigint keys", "load test (baseline)", "with mitigations"):
        assert word in header, word


def test_the_same_inputs_give_the_same_bytes(production):
    first = build_report([production])
    assert build_report([production]) == first


# -- numbers -----------------------------------------------------------------------------------
def test_production_hot_shard_sentence_has_the_computed_numbers(full, production):
    counts = np.array(production.shard_requests, dtype=float)
    share = counts[HOT] / counts.sum()
    ratio = share / (1 / N)  # over the mean shard's share
    words = _text(_section(full, "shards"))
    assert (f"Shard {HOT} carries {pct(share)} of the {counts.sum():,.0f} requests in "
            f"production, {times(ratio)} the mean shard") in words


def test_uniform_band_is_the_multinomial_band_with_the_key_count(full, production):
    from scipy.stats import norm

    # a shard's share under uniform keys: variance p(1-p)(1/K + 1/N); the busiest of 16
    # shards stays under 1 + z sd / p times the mean, z at a 0.1% family-wise rate
    p, keys, total = 1 / N, 20_000, float(sum(production.shard_requests))
    sd = math.sqrt(p * (1 - p) * (1 / keys + 1 / total))
    top = p * (1 + norm.isf(0.001 / N) * sd / p)
    share = production.shard_requests[HOT] / total
    verdict = "far above" if share > 2 * top else "above" if share > top else "within"
    words = _text(_section(full, "shards"))
    assert (f"in production, {times(share / p)} the mean shard; {verdict} the {pct(top)} "
            "uniform keys could give the busiest shard for as many requests over 20,000 keys"
            ) in words


def test_prediction_matches_head_keys_placed_plus_an_even_tail(full):
    from hotshard.shards.partitioners import make_partitioner

    profile = Profile.load(INCIDENT)
    part = make_partitioner("kafka", 64, key_type="bigint")
    head = np.bincount(part.shard_of(list(profile.head_keys)),
                       weights=profile.head_counts, minlength=64)
    shares = (head + profile.tail.events / 64) / profile.events
    hot = int(np.argmax(shares))
    words = _text(_section(full, "shards"))
    assert (f"shard {hot} is predicted to take {pct(shares[hot])} of requests, "
            f"{shares[hot] * 64:.1f}x the mean shard") in words
    assert "Uniform keys on kafka, 64 shards, bigint keys give each of the 64 shards 1.6%" \
        in words


def test_rank_frequency_paragraph_has_the_profile_numbers(full):
    profile = Profile.load(INCIDENT)
    top1 = profile.head_counts[0] / profile.events
    top10 = profile.head_counts[:10].sum() / profile.events
    alpha = profile.tail.power_law["alpha"]
    words = _text(_section(full, "profile"))
    assert f"The top key carries {pct(top1)} of events" in words
    assert f"the top 10 keys {pct(top10)}" in words
    assert f"alpha {alpha:.3f}" in words


def test_latency_compares_production_p99_with_the_test(full):
    words = _text(_section(full, "latency"))
    assert "production's p99 is 800 ms, 20x load test's 40 ms" in words
    assert "p999" in words  # a column for every percentile any run measured


def test_mitigations_compare_hottest_and_median_cpu_and_p99(full, production, mitigated):
    median_before = np.median(production.shard_cpu)
    median_after = np.median(mitigated.shard_cpu)
    section = _section(full, "mitigations")
    words = _text(section)
    assert "top 10 keys split into 8 time-bucket sub-partitions; reads spread over 2 replicas " \
           "per shard (the primary and 1 more); identical in-flight reads coalesced" in words
    assert "the hottest shard&#x27;s CPU goes from 95% to 30%" in words
    assert "p99 from 800 ms to 50 ms (16x lower)" in words
    assert pct(median_before) in words and pct(median_after) in words
    assert "95% (shard 5)" in words


# -- diagnosis ---------------------------------------------------------------------------------
def test_diagnosis_table_is_ranked_and_escaped(full):
    section = _section(full, "diagnosis")
    causes = re.findall(r"<code>([a-z-]+)</code>", section)
    assert causes == ["key-skew", "hot-node", "network"]  # fits, cannot judge, contradicted
    assert "<script>" not in section and "&lt;script&gt;alert(1)&lt;/script&gt;" in section
    assert "per-shard CPU of the load test" in section  # missing evidence
    assert "7.1% &rarr; 1.9% (share of requests)" in section
    assert "assumed a 1 ms cross-zone hop" in section
    assert "Most likely: <b>Key skew" in section


def test_without_a_diagnosis_the_section_says_so(production):
    page = build_report([production])
    assert "No diagnosis in this report" in _section(page, "diagnosis")


def test_the_diagnosis_labels_decide_the_roles(production, test_run):
    # "load test" given first would be production by the fallback rule's "first" clause if
    # the labels did not say; here the diagnosis names them
    other = _run("dashboards", hot_share=0.07)
    verdict = Diagnosis(production="dashboards", baseline="load test",
                        ranking=(Finding("key-skew", "fits", 0.9, ("x",)),))
    header = build_report([test_run, other], diagnosis=verdict).split("</header>")[0]
    assert re.search(r"dashboards</td><td>production", header)


# -- escaping ----------------------------------------------------------------------------------
def test_user_text_is_escaped_everywhere():
    evil = '<img src=x onerror="alert(1)">&'
    run = _run(evil, latency=Latency(p99=10))
    page = build_report([run], sources=[f"{evil}.json"], title=evil)
    assert "<img" not in page
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;" in page


# -- missing data ------------------------------------------------------------------------------
def test_missing_shards_latency_and_profile_become_notes():
    bare = Observations(label="production")
    page = build_report([bare])
    words = _text(page)
    assert "No profile given" in words
    assert "production: no per-shard data (the observations list no shards)" in words
    assert "production: no latency measured" in words
    assert "No run with mitigations given" in words
    assert "<svg" not in page  # nothing to draw, and no error


def test_partial_shards_say_how_many_report_what():
    shards = (ShardObservation(id="a", requests=10, cpu=0.5), ShardObservation(id="b"),
              ShardObservation(id="c", requests=3))
    page = build_report([Observations(label="production", shards=shards)])
    assert "2 of 3 shards report requests and 1 of 3 report CPU" in _text(page)


def test_cpu_only_shards_are_drawn_as_cpu():
    shards = tuple(ShardObservation(id=str(i), cpu=0.95 if i == 2 else 0.2) for i in range(8))
    page = build_report([Observations(label="production", shards=shards)])
    assert f"shard 2 runs at 95% CPU, {0.95 / 0.2:.1f}x the median shard's 20%" in _text(page)


def test_one_run_alone_says_there_is_no_test_to_compare(production):
    assert "No load test among the runs" in _text(build_report([production]))


def test_profile_without_a_partitioner_says_what_to_name(production):
    page = build_report([production], profile=Profile.load(INCIDENT))
    assert "no partitioner named and no run records one" in _text(page)
    assert _section(page, "profile").count("<svg") == 1  # the rank-frequency plot still


def test_a_partitioner_that_cannot_place_the_profile_leaves_a_note(production):
    page = build_report([production], profile=Profile.load(INCIDENT), partitioner="map")
    assert "the profile&#x27;s per-shard load is not predicted: the map partitioner needs a " \
           "map file" in _section(page, "shards")


def test_repeated_labels_are_numbered(production):
    header = build_report([production, production]).split("</header>")[0]
    assert "<td>production</td>" in header and "<td>production (2)</td>" in header


def test_non_uniform_ownership_is_described_as_a_range():
    profile = Profile.load(INCIDENT)
    page = build_report([_run("production")], profile=profile, partitioner="cassandra",
                        shards=4)
    assert "give each shard its part of the key space" in _text(page)


# -- roles -------------------------------------------------------------------------------------
def test_roles_by_generator_label_and_model(test_run, production, mitigated):
    roles = assign_roles([test_run, mitigated, production])
    assert roles.production is production and roles.baseline is test_run
    assert roles.mitigated == (mitigated,)
    hand = Observations(label="dashboards", key_generator="production")
    assert assign_roles([test_run, hand]).production is hand
    unlabelled = Observations(label="live")  # no load model: production traffic
    assert assign_roles([test_run, unlabelled]).production is unlabelled


def test_runs_after_production_count_as_mitigated(production, test_run):
    later = _run("tuesday")
    roles = assign_roles([production, test_run, later])
    assert roles.baseline is test_run and roles.mitigated == (later,)


def test_given_roles_must_be_among_the_runs(production, test_run):
    with pytest.raises(InputError, match="not one of the observations"):
        assign_roles([production], production=test_run)


def test_mitigation_words_from_simulator_and_service_records():
    from hotshard.mitigations import MODEL_FIELDS, Mitigations
    from hotshard.service.mitigations import SERVICE_FIELDS

    sim = Observations(label="x", extra={"simulation": {"mitigations": {
        "split_hot": None, "replicas": 1, "local_cache_hit": 0.0, "coalesce": False}}})
    assert mitigations_of(sim) is None  # recorded, but all off
    words = ("hot keys split into 4 time-bucket sub-partitions; reads spread over 2 replicas "
             "per shard (the primary and 1 more); hot keys' reads cached for 2 s")
    # an older service record counted the replica workers beside the primary
    old = Observations(label="x", extra={"mitigations": {
        "split": 4, "replicas": 1, "cache_ttl_s": 2, "coalesce": False}})
    assert mitigations_of(old) == words
    m = Mitigations(split_into=4, replicas=2, cache_ttl_s=2.0)
    service = Observations(label="x", extra={"mitigations": m.to_dict(SERVICE_FIELDS)})
    assert mitigations_of(service) == words
    m = Mitigations(split_keys=10, split_into=8, cache_hit=0.5, coalesce=True)
    sim = Observations(label="x", extra={"simulation": {"mitigations": m.to_dict(MODEL_FIELDS)}})
    assert mitigations_of(sim) == m.text()
    # a malformed field is left off, the others read
    odd = Observations(label="x", extra={"mitigations": {"split_into": "four", "replicas": 3}})
    assert mitigations_of(odd) == "reads spread over 3 replicas per shard (the primary and 2 more)"


# -- writing -----------------------------------------------------------------------------------
def test_write_report_writes_one_file_atomically(tmp_path, production):
    out = tmp_path / "r.html"
    write_report(out, [production])
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]


@pytest.mark.parametrize(("name", "words"), [
    ("report.txt", "must end in .html, got .txt"),
    ("report", "must end in .html, got (no extension)"),
    ("missing/report.html", "does not exist"),
])
def test_bad_output_paths_fail_before_any_work(tmp_path, name, words):
    with pytest.raises(InputError, match=re.escape(words)):
        check_report_path(tmp_path / name)
    with pytest.raises(InputError, match=re.escape(words)):
        write_report(tmp_path / name, [Observations(label="p")])
    assert list(tmp_path.rglob("*")) == []


def test_no_observations_is_an_input_error():
    with pytest.raises(InputError, match="no observations"):
        build_report([])


def test_sources_must_match_the_runs(production):
    with pytest.raises(InputError, match="sources must name each of the 1 runs"):
        build_report([production], sources=["a.json", "b.json"])


def test_rank_frequency_figure_is_a_figure_with_head_tail_and_law():
    from hotshard.report.rank_frequency import rank_frequency_figure

    fig = rank_frequency_figure(Profile.load(INCIDENT))
    (ax,) = fig.axes
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels[0].startswith("head: top 500 keys")
    assert any(label.startswith("fitted power law: alpha 2.12") for label in labels)
    assert ax.get_xscale() == ax.get_yscale() == "log"
