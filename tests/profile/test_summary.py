"""The inspect summary as data: whole counts stay integers, undefined ratios are null."""

import json

from hotshard.profile.summary import summarize
from tests.conftest import trace_profile


def test_whole_counts_are_integers_in_json():
    doc = summarize(trace_profile("corda-vault")).to_dict()
    assert doc["events"] == 135702 and isinstance(doc["events"], int)
    assert doc["keys"] == 90468 and isinstance(doc["keys"], int)


def test_per_operation_counts_are_integers_too():
    ops = summarize(trace_profile("cloudphysics", op="op")).to_dict()["operations"]
    assert ops and all(isinstance(d["events"], int) and isinstance(d["keys"], int)
                       for d in ops.values())


def test_scaled_expected_counts_stay_fractional(web07_profile):
    doc = summarize(web07_profile.scaled(events=1000.5)).to_dict()
    assert doc["events"] == 1000.5


def test_json_is_strict_when_the_uniform_ratio_is_undefined(tmp_path):
    from hotshard.profile.count import count_profile

    (tmp_path / "c.csv").write_text("k,n\n" + "".join(f"key{i},{100 // i}\n" for i in range(1, 40)))
    doc = summarize(count_profile([str(tmp_path / "c.csv")], key="k", counts="n")).to_dict()
    assert doc["keys"] == 39 and doc["top1pct_vs_uniform"] is None
    json.dumps(doc, allow_nan=False)  # NaN is not JSON: an undefined ratio is null


def test_plot_without_the_tail_size_draws_the_data(tmp_path, web07_profile):
    from hotshard.profile.document import Profile
    from hotshard.report.rank_frequency import plot_rank_frequency

    doc = web07_profile.to_dict()
    doc["tail"]["power_law"] = {k: v for k, v in doc["tail"]["power_law"].items()
                                if k in ("alpha", "xmin")}
    out = tmp_path / "rf.png"
    plot_rank_frequency(Profile.from_dict(doc), out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
