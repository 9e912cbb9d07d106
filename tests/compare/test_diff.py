"""hotshard.compare.diff: what moved between two profiles, checked against counts kept apart.

The real case is the web trace of one site in July (web07) and December (web12): its counts
are recounted here from the Parquet with numpy, independently of the profile engine, and every
share, bound, entered/left key and riser/faller the diff reports is checked against them.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from hotshard.compare.diff import DRIFT_SE, diff, outside_bound
from hotshard.compare.diff_text import diff_table
from hotshard.errors import InputError
from hotshard.profile.count import count_profile
from hotshard.profile.document import Profile
from tests.conftest import shared, trace_profile

K = 500  # both traces' head size


# -- independent counts of the real traces ---------------------------------------------------
_COUNTS: dict[str, tuple[dict[str, int], int]] = {}


def true_counts(name: str) -> tuple[dict[str, int], int]:
    """Events per key of a trace, counted with numpy.unique straight from the Parquet."""
    if name not in _COUNTS:
        import pyarrow.parquet as pq

        column = pq.read_table(shared("traces", f"{name}.parquet"), columns=["key"])["key"]
        assert column.null_count == 0
        keys, counts = np.unique(column.to_numpy(), return_counts=True)
        _COUNTS[name] = ({str(k): int(c) for k, c in zip(keys, counts, strict=True)},
                         int(counts.sum()))
    return _COUNTS[name]


def kth_count(counts: dict[str, int], k: int) -> int:
    return sorted(counts.values(), reverse=True)[k - 1]


@pytest.fixture(scope="module")
def web():
    return diff(trace_profile("web07"), trace_profile("web12"), labels=("web07", "web12"))


def test_every_share_is_the_true_share_or_a_bound_above_it(web):
    ca, ea = true_counts("web07")
    cb, eb = true_counts("web12")
    for m in web.keys:
        for share, exact, counts, events in ((m.share_a, m.exact_a, ca, ea),
                                             (m.share_b, m.exact_b, cb, eb)):
            truth = counts.get(m.key, 0) / events
            if exact:
                assert share == pytest.approx(truth, rel=1e-12, abs=1e-15), m
            else:
                assert truth <= share + 1e-15, m


def test_the_floors_are_the_largest_counts_outside_each_head(web):
    for name, floor, prof in (("web07", web.floor_a, trace_profile("web07")),
                              ("web12", web.floor_b, trace_profile("web12"))):
        counts, events = true_counts(name)
        head = set(prof.head_keys)
        outside = max(c for k, c in counts.items() if k not in head)
        assert floor * events == pytest.approx(outside)
        assert outside == kth_count(counts, K)  # ties at the boundary count: 14 and 34


def test_entered_and_left_are_the_keys_that_crossed_the_top_500(web):
    ca, _ = true_counts("web07")
    cb, _ = true_counts("web12")
    ta, tb = kth_count(ca, K), kth_count(cb, K)  # keys at exactly these are ties
    entered = {m.key for m in web.entered}
    left = {m.key for m in web.left}
    stayed = {m.key for m in web.stayed}
    # what the counts decide, ties aside, must be so
    keys = set(ca) | set(cb)
    assert {k for k in keys if cb.get(k, 0) > tb and ca.get(k, 0) < ta} <= entered
    assert {k for k in keys if ca.get(k, 0) > ta and cb.get(k, 0) < tb} <= left
    assert {k for k in keys if ca.get(k, 0) > ta and cb.get(k, 0) > tb} <= stayed
    # and nothing the counts contradict
    assert all(cb[k] >= tb and ca.get(k, 0) <= ta for k in entered)
    assert all(ca[k] >= ta and cb.get(k, 0) <= tb for k in left)
    assert len(stayed) + len(entered) == len(stayed) + len(left) == K
    assert (len(stayed), len(entered), len(left)) == (75, 425, 425)


def true_changes(web) -> dict[str, float]:
    ca, ea = true_counts("web07")
    cb, eb = true_counts("web12")
    ta, tb = kth_count(ca, K), kth_count(cb, K)
    wide = {k for k, c in ca.items() if c >= ta} | {k for k, c in cb.items() if c >= tb}
    return {k: cb.get(k, 0) / eb - ca.get(k, 0) / ea for k in wide}


def test_risers_and_fallers_are_the_real_ones(web):
    truth = true_changes(web)
    # the headline names, from the raw counts
    assert max(truth, key=truth.get) == web.risers[0].key == "55"
    assert min(truth, key=truth.get) == web.fallers[0].key == "107"
    for m in web.risers:
        assert truth[m.key] > 0
        if m.exact_a:
            assert truth[m.key] == pytest.approx(m.change, abs=1e-12)
        else:  # A's share is a bound: the rise shown is the least rise
            assert m.change - 1e-12 <= truth[m.key] <= m.change + web.floor_a + 1e-12
    for m in web.fallers:
        assert truth[m.key] < 0
        if m.exact_b:
            assert truth[m.key] == pytest.approx(m.change, abs=1e-12)
        else:
            assert m.change - web.floor_b - 1e-12 <= truth[m.key] <= m.change + 1e-12
    # complete: a key that certainly beats the last one listed is listed
    listed_up = {m.key for m in web.risers}
    listed_down = {m.key for m in web.fallers}
    assert {k for k, c in truth.items() if c > web.risers[-1].change + web.floor_a} <= listed_up
    assert {k for k, c in truth.items() if c < web.fallers[-1].change - web.floor_b} \
        <= listed_down
    # the true top five of each way are all among the ten listed
    assert set(sorted(truth, key=truth.get)[-5:]) <= listed_up
    assert set(sorted(truth, key=truth.get)[:5]) <= listed_down


def test_a_key_whose_direction_the_bounds_cannot_tell_is_neither_riser_nor_faller(web):
    truth = true_changes(web)
    assert web.unclear  # web12's floor (34 events) is above many of web07's head keys' shares
    for m in web.unclear:
        assert m.status == "left" and m.share_a <= web.floor_b
        assert m.key not in {x.key for x in web.risers + web.fallers}
        assert m.key in truth
    assert any("cannot be told" in n for n in web.notes)


def test_shares_and_tail_drift_of_the_real_traces(web):
    a, b = trace_profile("web07"), trace_profile("web12")
    for s in web.shares:
        assert s.a == pytest.approx(float(a.dist.shares()[s.name]))
        assert s.b == pytest.approx(float(b.dist.shares()[s.name]))
    ca, ea = true_counts("web07")
    assert web.shares[0].a == pytest.approx(max(ca.values()) / ea)  # top-1 from the counts
    t = web.tail
    la, lb = a.tail.power_law, b.tail.power_law
    assert t.change == pytest.approx(lb["alpha"] - la["alpha"])
    assert t.se == pytest.approx(math.sqrt(la["alpha_se"] ** 2 + lb["alpha_se"] ** 2))
    # 2.76 -> 2.01 is about ten standard errors apart, but the fits start at different counts
    # (xmin 4 and 6): not one quantity drifting, so no verdict
    assert t.z > DRIFT_SE and not t.comparable and t.significant is None
    assert "xmin" in t.note  # 4 against 6


def test_hottest_shard_change_names_the_keys_on_it():
    from hotshard.shards.partitioners import make_partitioner
    from hotshard.shards.predict import predict

    a, b = trace_profile("web07"), trace_profile("web12")
    part = make_partitioner("kafka", 64, key_type="bigint")
    d = diff(a, b, partitioner=part)
    s = d.shards
    pa, pb = predict(a, part), predict(b, part)
    assert (s.hottest_a, s.hottest_b) == (pa.hottest, pb.hottest)
    assert s.hottest_share_a == pytest.approx(pa.shares.max())
    assert s.hottest_share_b == pytest.approx(pb.shares.max())
    assert s.change == pytest.approx(pb.shares.max() - pa.shares.max())
    ca, ea = true_counts("web07")
    cb, eb = true_counts("web12")
    for row in s.shards:
        assert row.keys
        assert set(part.shard_of([m.key for m in row.keys]).tolist()) == {row.shard}
        # the named part of the shard: the head keys on it, recounted from the traces
        on_a = [k for k, sh in zip(a.head_keys, part.shard_of(list(a.head_keys)), strict=True)
                if sh == row.shard]
        on_b = [k for k, sh in zip(b.head_keys, part.shard_of(list(b.head_keys)), strict=True)
                if sh == row.shard]
        assert row.head_a == pytest.approx(sum(ca[k] for k in on_a) / ea)
        assert row.head_b == pytest.approx(sum(cb[k] for k in on_b) / eb)
        assert row.change == pytest.approx(row.head_b - row.head_a + row.rest_change)
        moved = [m.moved for m in row.keys]
        assert moved == sorted(moved, reverse=True)
    text = diff_table(d)
    assert f"shard {s.hottest_a}" in text and "moved by" in text


# -- small hand-made profiles ----------------------------------------------------------------
def profile_of(tmp_path, name: str, counts: dict[str, int], top_k: int = 5) -> Profile:
    """A profile from a (key, count) table: its head is the top ``top_k`` keys."""
    path = tmp_path / f"{name}.csv"
    path.write_text("k,n\n" + "".join(f"{k},{n}\n" for k, n in counts.items()))
    return count_profile([str(path)], key="k", counts="n", top_k=top_k)


TAIL = {f"t{i}": 1 + i % 3 for i in range(40)}  # 40 tail keys of 1 to 3 events


@pytest.fixture
def small(tmp_path):
    a = profile_of(tmp_path, "a", {"hot": 400, "warm": 200, "mild": 100, "cool": 50,
                                   "gone": 40, **TAIL})
    b = profile_of(tmp_path, "b", {"new": 500, "hot": 100, "warm": 200, "mild": 100,
                                   "cool": 60, **TAIL})
    return a, b


def test_small_profiles_entered_left_and_exact_shares(small):
    a, b = small
    d = diff(a, b)
    assert d.top == 5
    assert [m.key for m in d.entered] == ["new"]
    assert [m.key for m in d.left] == ["gone"]
    by = {m.key: m for m in d.keys}
    ea, eb = a.events, b.events
    assert by["warm"].share_a == 200 / ea and by["warm"].share_b == 200 / eb
    assert by["warm"].direction == "down"  # same count, more events in B: a smaller share
    # outside a head: the tail's largest count (3), never shown as 0
    assert not by["new"].exact_a and by["new"].share_a == 3 / ea
    assert not by["gone"].exact_b and by["gone"].share_b == 3 / eb
    assert by["new"].change == pytest.approx(500 / eb - 3 / ea)
    assert d.risers[0].key == "new" and d.fallers[0].key == "hot"
    assert "gone" in {m.key for m in d.fallers}
    assert d.floor_a == 3 / ea and outside_bound(a) == 3


def test_top_k_below_the_head_keeps_shares_exact_beyond_it(small):
    a, b = small
    d = diff(a, b, top=2)  # A's top 2: hot, warm; B's: new, warm
    assert {m.key for m in d.entered} == {"new"} and {m.key for m in d.left} == {"hot"}
    hot = next(m for m in d.left if m.key == "hot")
    assert hot.exact_b and hot.share_b == 100 / b.events and hot.rank_b == 3


def test_direction_unclear_when_the_bound_straddles(tmp_path):
    a = profile_of(tmp_path, "a", {"x": 100, "y": 50, "lo": 5, **{f"t{i}": 1 for i in range(40)}},
                   top_k=3)
    b = profile_of(tmp_path, "b", {"x": 100, "y": 50, "z": 20, **{f"t{i}": 6 for i in range(10)}},
                   top_k=3)
    assert 5 / a.events < 6 / b.events
    d = diff(a, b)
    lo = next(m for m in d.left if m.key == "lo")
    # lo had 5 of A's events; in B it is somewhere in a tail reaching 6: up or down, unknown
    assert lo.direction == "unclear" and lo in d.unclear
    assert lo not in d.risers + d.fallers
    assert "<=" in diff_table(d)


def test_an_empty_tail_makes_outside_keys_exactly_zero(tmp_path):
    a = profile_of(tmp_path, "a", {"p": 10, "q": 5}, top_k=5)
    b = profile_of(tmp_path, "b", {"p": 10, "r": 5}, top_k=5)
    d = diff(a, b)
    r = d.entered[0]
    assert r.key == "r" and r.exact_a and r.share_a == 0.0 and r.direction == "up"
    assert d.floor_a == 0.0


def test_log_binned_tail_bound_is_at_least_its_largest_count(tmp_path):
    a = profile_of(tmp_path, "a", {"h1": 9000, "h2": 8000, "t1": 3000, "t2": 1500, "t3": 2},
                   top_k=2)
    assert a.tail.bin_hi.size  # counts above 1024 are log-binned
    assert 3000 <= outside_bound(a) <= 8000


def test_tail_drift_threshold_and_missing_laws(small):
    a, b = small

    def with_law(p: Profile, law: dict | None) -> Profile:
        doc = p.to_dict()
        doc["tail"]["power_law"] = law
        return Profile.from_dict(doc)

    base = {"xmin": 2, "n_tail": 40, "ks": 0.05}
    a1 = with_law(a, {"alpha": 2.0, "alpha_se": 0.03, **base})
    near = with_law(b, {"alpha": 2.1, "alpha_se": 0.04, **base})  # 0.1 = 2 SE
    far = with_law(b, {"alpha": 2.2, "alpha_se": 0.04, **base})  # 0.2 = 4 SE
    assert diff(a1, near).tail.z == pytest.approx(2.0)
    assert diff(a1, near).tail.significant is False
    assert diff(a1, far).tail.significant is True
    none = diff(a1, with_law(b, None)).tail
    assert none.change is None and none.significant is None and "B has no fitted" in none.note
    assert "no fit" in diff_table(diff(a1, with_law(b, None)))


def test_profiles_of_different_key_spaces_are_refused(tmp_path):
    ints = profile_of(tmp_path, "i", {str(i): 100 - i for i in range(1, 20)})
    text = profile_of(tmp_path, "t", {f"user{i}": 100 - i for i in range(1, 20)})
    with pytest.raises(InputError, match="no common keys at all: are A and B profiles of the "
                                         "same key space") as err:
        diff(ints, text)
    assert "A's keys are integers, B's are text" in str(err.value)


def test_same_format_without_a_common_key_needs_allow_disjoint(tmp_path):
    a = profile_of(tmp_path, "a", {str(i): 100 - i for i in range(1, 20)})
    b = profile_of(tmp_path, "b", {str(i): 100 - i for i in range(50, 69)}, top_k=5)
    with pytest.raises(InputError, match="--allow-disjoint"):
        diff(a, b)
    d = diff(a, b, allow_disjoint=True)
    assert len(d.entered) == len(d.left) == 5 and not d.stayed


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"top": 6}, "top must be at most the smaller head (A names 5 keys), got 6"),
    ({"top": 0}, "top must be >= 1"),
    ({"movers": 0}, "movers must be >= 1"),
])
def test_bad_arguments_name_the_parameter(small, kwargs, words):
    with pytest.raises(InputError) as err:
        diff(*small, **kwargs)
    assert words in str(err.value)


def test_to_dict_is_strict_json_with_every_key(small):
    d = diff(*small, movers=3)
    doc = json.loads(json.dumps(d.to_dict(), allow_nan=False))
    assert set(doc) == {"a", "b", "top", "common_head_keys", "stayed", "entered", "left",
                        "risers", "fallers", "unclear", "shares", "tail", "shards", "windows",
                        "notes"}
    assert doc["a"]["events"] == int(small[0].events)
    assert len(doc["risers"]) <= 3
    row = doc["entered"][0]
    assert row == {"key": "new", "status": "entered", "share_a": row["share_a"],
                   "share_a_exact": False, "rank_a": None, "share_b": row["share_b"],
                   "share_b_exact": True, "rank_b": 1, "change": row["change"],
                   "change_exact": False, "direction": "up"}
    assert set(doc["shares"]) == {"top1", "top10", "top1pct"}
    assert doc["shards"] is None
    assert doc["windows"] is None  # no timelines without a time column


def test_plot_writes_a_png_and_an_svg(tmp_path, small):
    from hotshard.report.diff_plot import plot_diff

    d = diff(*small)
    plot_diff(d, tmp_path / "d.png")
    assert (tmp_path / "d.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plot_diff(d, tmp_path / "d.svg")
    assert b"<svg" in (tmp_path / "d.svg").read_bytes()[:2000]
    with pytest.raises(InputError, match="unknown image type .gif"):
        plot_diff(d, tmp_path / "d.gif")
    assert not (tmp_path / "d.gif").exists()


def test_label_spreading_keeps_lone_labels_level():
    from hotshard.report.diff_plot import _spread

    ys = _spread([1.0, 1.01, 1.02, 0.01], 0.01, 1.0)
    assert ys[3] == pytest.approx(0.01)  # alone: level with its point
    logs = np.log10(ys[:3])
    assert np.all(np.diff(np.sort(logs)) >= 0.02 * 2 - 1e-9)  # stacked apart
    assert np.mean(logs) == pytest.approx(np.mean(np.log10([1.0, 1.01, 1.02])))
