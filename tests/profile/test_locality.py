"""The locality section: Mattson's pass against a brute-force LRU stack, exactly; the section's
JSON and its validation; what `hotshard profile` writes on real traces."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hotshard.errors import ProfileError
from hotshard.profile._locality_kernels import joint_pass, stack_pass
from hotshard.profile.locality import (
    BINS_PER_OCTAVE,
    N_BINS,
    SAMPLE_RATE,
    Locality,
    StreamLocality,
    bin_bounds,
    bin_lows,
    class_of,
    measure_locality,
)
from tests.conftest import run_cli, shared


def _brute_force(stream: list[int]) -> tuple[list[int | None], list[int | None]]:
    """Each reference's stack distance and reuse time (None for a first reference), by
    keeping the LRU stack as a list."""
    stack: list[int] = []
    last: dict[int, int] = {}
    distances, reuses = [], []
    for i, key in enumerate(stream):
        if key in stack:
            distances.append(stack.index(key))
            reuses.append(i - last[key])
            stack.remove(key)
        else:
            distances.append(None)
            reuses.append(None)
        stack.insert(0, key)
        last[key] = i
    return distances, reuses


@pytest.mark.parametrize("seed", range(6))
def test_the_stack_pass_equals_a_brute_force_lru_stack(seed):
    rng = np.random.default_rng(seed)
    n_keys = int(rng.integers(1, 300))
    # long enough to renumber the marker positions several times (4K + 4096 of them)
    stream = (rng.zipf(1.2 + 0.2 * seed, 20_000) % n_keys).astype(np.int64)
    _, dense = np.unique(stream, return_inverse=True)
    k = int(dense.max()) + 1
    counts = np.bincount(dense, minlength=k)
    key_class = class_of(counts)
    stack, reuse, first = stack_pass(dense, k, key_class, int(key_class.max()) + 1, N_BINS,
                                     bin_lows(), BINS_PER_OCTAVE)
    distances, reuses = _brute_force(dense.tolist())
    assert first.sum() == k == sum(d is None for d in distances)
    # the binned histograms, class by class (with the curve's test below: every distance)
    for c in range(key_class.max() + 1):
        mine = [i for i, key in enumerate(dense) if key_class[key] == c and
                distances[i] is not None]
        s_bins = np.floor(BINS_PER_OCTAVE * np.log2([distances[i] + 1 for i in mine]) + 1e-9)
        r_bins = np.floor(BINS_PER_OCTAVE * np.log2([reuses[i] for i in mine]) + 1e-9)
        assert np.array_equal(stack[c], np.bincount(s_bins.astype(int), minlength=N_BINS))
        assert np.array_equal(reuse[c], np.bincount(r_bins.astype(int), minlength=N_BINS))


@pytest.mark.parametrize("every", [1, 3])
def test_the_joint_pass_counts_every_chosen_reference_as_the_brute_force_stack(every):
    """joint[c, r, s] holds each counted re-reference's (reuse bin, distance bin) exactly;
    with ``every`` > 1 only references i with i % every == 0 are counted (the correction's
    even sample of P(distance | reuse)), while the stack still moves on every one."""
    rng = np.random.default_rng(7)
    stream = (rng.zipf(1.3, 12_000) % 200).astype(np.int64)
    _, dense = np.unique(stream, return_inverse=True)
    k = int(dense.max()) + 1
    key_class = class_of(np.bincount(dense, minlength=k))
    n_classes = int(key_class.max()) + 1
    used = 80
    joint = joint_pass(dense, k, key_class, n_classes, used, bin_lows(), BINS_PER_OCTAVE,
                       every=every)
    distances, reuses = _brute_force(dense.tolist())
    want = np.zeros_like(joint)
    for i, key in enumerate(dense.tolist()):
        if distances[i] is None or i % every:
            continue
        s_bin = int(np.floor(BINS_PER_OCTAVE * np.log2(distances[i] + 1) + 1e-9))
        r_bin = int(np.floor(BINS_PER_OCTAVE * np.log2(reuses[i]) + 1e-9))
        want[key_class[key], min(r_bin, used - 1), min(s_bin, used - 1)] += 1
    assert np.array_equal(joint, want)


def test_the_marker_count_equals_a_popcount_at_every_level():
    """The count of markers between two positions (bitmap, then counts of 1,024, 2^16 and
    2^22 positions, as the pass keeps them) against numpy's popcount of the same bits, over
    2^26 positions: every level's sums, near and far."""
    from hotshard.profile._locality_kernels import _after

    rng = np.random.default_rng(3)
    full = rng.integers(0, 2**63, 1 << 20, dtype=np.uint64) & rng.integers(
        0, 2**63, 1 << 20, dtype=np.uint64)   # about a quarter of the bits set
    for _ in range(120):
        old = int(rng.integers(0, (1 << 26) - 2))
        pos = old + 1 + int(np.exp(rng.uniform(0, np.log((1 << 26) - old - 1))))
        bits = full.copy()
        bits[old >> 6] |= np.uint64(1) << np.uint64(old & 63)   # old holds a marker
        bits[pos >> 6] &= (np.uint64(1) << np.uint64(pos & 63)) - np.uint64(1)
        bits[(pos >> 6) + 1:] = 0                               # none at or past pos
        per_word = np.bitwise_count(bits).astype(np.int64)
        c1, c2, c3 = (np.append(per_word.reshape(-1, 16 * 64 ** j).sum(axis=1), 0)
                      for j in (0, 1, 2))
        want = per_word[(old >> 6) + 1:].sum() + int(
            np.bitwise_count(bits[old >> 6] >> np.uint64(old & 63) >> np.uint64(1)))
        assert _after(bits, c1, c2, c3, old, pos) == want, (old, pos)


def test_the_hit_curve_is_the_lru_hit_rate_at_each_size():
    rng = np.random.default_rng(7)
    stream = rng.zipf(1.3, 20_000) % 500
    loc = measure_locality(stream)
    distances, _ = _brute_force(np.unique(stream, return_inverse=True)[1].tolist())
    for size, rate in zip(loc.curve_sizes, loc.curve_hits, strict=True):
        hits = sum(d is not None and d < size for d in distances)
        assert rate == pytest.approx(hits / stream.size, abs=1e-12)
    assert loc.lru_hit_rate(loc.keys) == pytest.approx(1 - loc.keys / stream.size)


def test_shards_at_its_default_rate_is_within_001_of_the_exact_curve_on_orm_busy():
    """The issue's bar: SHARDS (with its exact window) at the default rate, every size of the
    exact curve, on a real trace of 5 M references over 76 K keys."""
    import pyarrow.parquet as pq

    keys = pq.read_table(shared("traces", "orm-busy.parquet"), columns=["key"])
    keys = keys.column("key").to_numpy()
    exact = measure_locality(keys)
    sampled = measure_locality(keys, sample_rate=SAMPLE_RATE)
    assert exact.method == "exact" and sampled.method == "shards"
    got = np.array([sampled.lru_hit_rate(s) for s in exact.curve_sizes])
    assert np.abs(got - exact.curve_hits).max() <= 0.01
    assert abs(sampled.keys - exact.keys) <= 0.05 * exact.keys
    doc = json.loads(json.dumps(sampled.to_dict()))
    assert Locality.from_dict(doc).to_dict() == doc


def test_shards_is_exact_below_its_window(monkeypatch):
    """Fewer keys than the window: every distance is measured exactly, whatever the rate,
    and a stream beyond ``EXACT_MAX_KEYS`` keys is sampled by default, unless it is short
    enough for the exact pass to take seconds (``exact_fits``)."""
    import hotshard.profile.locality as locality

    stream = np.random.default_rng(5).zipf(1.3, 50_000) % 3000
    exact = measure_locality(stream)
    sampled = measure_locality(stream, sample_rate=0.05)
    got = np.array([sampled.lru_hit_rate(s) for s in exact.curve_sizes])
    assert np.allclose(got[:-1], exact.curve_hits[:-1], atol=1e-12)
    monkeypatch.setattr(locality, "EXACT_MAX_KEYS", 1024)
    assert measure_locality(stream).method == "exact"   # a short stream: exact all the same
    monkeypatch.setattr(locality, "EXACT_SHORT_EVENTS", 10_000)
    assert measure_locality(stream).method == "shards"


def test_bins_hold_the_integers_that_map_to_them():
    values = np.arange(1, 5000)
    bins = np.floor(BINS_PER_OCTAVE * np.log2(values) + 1e-9).astype(int)
    lo, hi = bin_bounds(np.arange(bins.max() + 1))
    assert np.all((lo[bins] <= values) & (values < hi[bins]))


def test_the_section_round_trips_and_its_validation_names_the_field():
    loc = measure_locality(np.random.default_rng(1).zipf(1.5, 10_000) % 1000)
    doc = json.loads(json.dumps(loc.to_dict()))
    again = Locality.from_dict(doc)
    assert again.to_dict() == loc.to_dict()
    bad = json.loads(json.dumps(doc))
    i = next(i for i, c in enumerate(bad["classes"]) if c["reuse"])
    bad["classes"][i]["reuse"] = bad["classes"][i]["reuse"][:-1]
    with pytest.raises(ProfileError, match=rf"locality.classes\[{i}\] holds stack and reuse"):
        Locality.from_dict(bad)
    bad = {**doc, "events": doc["events"] * 3}
    with pytest.raises(ProfileError, match="disagrees with itself"):
        Locality.from_dict(bad)
    bad = {**doc, "lru_hit_curve": {"sizes": [1, 2], "hit_rates": [0.5, 0.4]}}
    with pytest.raises(ProfileError, match="never decrease"):
        Locality.from_dict(bad)


def test_a_histogram_is_one_run_of_counts_and_old_pair_lists_still_read():
    loc = measure_locality(np.random.default_rng(2).zipf(1.4, 20_000) % 2000)
    doc = json.loads(json.dumps(loc.to_dict()))
    c = next(c for c in loc.classes if c.stack_bins.size > 2)
    run = next(d for d in doc["classes"] if d["class"] == c.cls)["stack"]
    assert run[0] == c.stack_bins[0] and len(run) == c.stack_bins[-1] - c.stack_bins[0] + 2
    assert sum(run[1:]) == c.stack_counts.sum()
    old = json.loads(json.dumps(doc))   # as the first profiles with the section wrote it
    for d, k in zip(old["classes"], loc.classes, strict=True):
        d["stack"] = [[int(b), int(n)] for b, n in zip(k.stack_bins, k.stack_counts,
                                                       strict=True)]
        d["reuse"] = [[int(b), int(n)] for b, n in zip(k.reuse_bins, k.reuse_counts,
                                                       strict=True)]
    assert Locality.from_dict(old).to_dict() == doc


def _zipf_trace(path, events: int, seed: int = 1) -> None:
    """A day of Poisson arrivals, keys Zipf(1) over a tenth as many keys as events."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    rank = np.floor(np.exp(rng.random(events) * np.log(events // 10))).astype(np.int64)
    times = np.cumsum(rng.exponential(86_400 / events, events))
    pq.write_table(pa.table({"key": (rank * 0x9E3779B1) % (1 << 40), "time": times}), path)


def test_a_profile_with_every_section_stays_small_as_events_grow(tmp_path):
    """Under 100 KB with locality, arrivals and timelines, whose sizes grow with the log of
    the stream's length, not with it: from 125 K to 1 M events (8x), each less than
    8^(1/4) = 1.68x (locality: 1.5x). benchmarks/bench_locality.py measures the profile of
    100 M events itself (84 KB, locality 24 KB)."""
    from hotshard.profile.count import count_profile

    sizes = []
    for events in (125_000, 1_000_000):
        _zipf_trace(tmp_path / f"{events}.parquet", events)
        profile = count_profile([str(tmp_path / f"{events}.parquet")], key="key",
                                time_col="time")
        assert len(profile.to_json()) < 100_000
        doc = profile.to_dict()
        sizes.append({k: len(json.dumps(doc[k], separators=(",", ":")))
                      for k in ("locality", "arrivals", "timelines")})
    for section, small in sizes[0].items():
        assert sizes[1][section] < 8 ** 0.25 * small, (section, sizes)


def test_a_trace_of_one_key_has_one_class_all_hits():
    loc = measure_locality(np.full(1000, 42))
    assert loc.keys == 1 and [c.cls for c in loc.classes] == [9]
    assert loc.classes[0].first == 1 and loc.lru_hit_rate(1) == pytest.approx(0.999)


def test_profile_writes_the_section_and_refuses_one_that_disagrees(tmp_path):
    out = tmp_path / "p.json"
    res = run_cli("profile", str(shared("traces", "cloudphysics.parquet")), "--key", "lbn",
                  "--time", "time", "-o", str(out))
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    loc = doc["locality"]
    assert loc["order"] == "time:time" and loc["method"] == "exact"
    assert loc["events"] == doc["totals"]["events"] and loc["keys"] == doc["totals"]["keys"]
    assert out.stat().st_size < 100_000
    doc["locality"]["events"] += 10
    for c in doc["locality"]["classes"]:  # self-consistent, but not this profile's stream
        if c["class"] == 0:
            c["first"] += 10
    out.write_text(json.dumps(doc))
    res = run_cli("inspect", str(out))
    assert res.returncode == 2
    assert "locality.events" in res.stderr and "disagrees" in res.stderr
    res = run_cli("profile", str(shared("traces", "cloudphysics.parquet")), "--key", "lbn",
                  "--no-locality", "-o", str(out))
    assert res.returncode == 0 and "locality" not in json.loads(out.read_text())


def test_a_time_column_that_is_not_a_time_is_one_line(tmp_path):
    (tmp_path / "e.csv").write_text("k,t\na,x\nb,y\na,z\n")
    res = run_cli("profile", "e.csv", "--key", "k", "--time", "t", "-o", "p.json",
                  cwd=tmp_path)
    assert res.returncode == 2 and res.stderr.count("\n") == 1
    assert "time column 't' holds text that is not a timestamp ('x')" in res.stderr
    assert not (tmp_path / "p.json").exists()


def test_unsorted_times_are_sorted_stably(tmp_path):
    """A --time column out of order is sorted (events at one instant keep file order):
    the same stream as the file sorted by time."""
    rows = [("a", 3), ("b", 1), ("a", 1), ("c", 2), ("b", 3)]
    (tmp_path / "e.csv").write_text("k,t\n" + "".join(f"{k},{t}\n" for k, t in rows))
    (tmp_path / "s.csv").write_text("k,t\n" + "".join(
        f"{k},{t}\n" for k, t in sorted(rows, key=lambda r: r[1])))
    for name in ("e", "s"):
        assert run_cli("profile", f"{name}.csv", "--key", "k", "--time", "t", "-o",
                       f"{name}.json", cwd=tmp_path).returncode == 0
    a = json.loads((tmp_path / "e.json").read_text())["locality"]
    b = json.loads((tmp_path / "s.json").read_text())["locality"]
    assert a == b


def _key_counts(stream: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keys, counts = np.unique(stream, return_counts=True)
    return keys.astype(np.int64), counts.astype(np.int64)


@pytest.mark.parametrize("rate", [1.0, 0.2])
def test_a_stream_fed_in_chunks_is_measured_as_one_pass(rate):
    """What an engine does (batches of a stream it never holds whole) gives what one call on
    the whole array gives, to the count: the kernels carry their state across chunks."""
    stream = (np.random.default_rng(7).zipf(1.3, 60_000) % 9000).astype(np.int64)
    whole = measure_locality(stream, sample_rate=rate)
    fed = StreamLocality([_key_counts(stream)], events=stream.size, order="file",
                         sample_rate=rate)
    for chunk in np.array_split(stream, 37):
        fed.feed(chunk)
    assert fed.result().to_dict() == whole.to_dict()


def test_an_engines_sample_alone_is_within_its_expected_error_of_the_exact_curve():
    """Spark's path: only the sampled keys' references reach the pass (no window), each
    distance and reuse time scaled by 1 / R. Its curve is within 4 of its own standard errors
    (computed from the spread of its parts) of the exact one; the key count is given."""
    import pyarrow.parquet as pq

    from hotshard.profile._locality_kernels import sampled_keys

    keys = pq.read_table(shared("traces", "orm-busy.parquet"), columns=["key"])
    stream = keys.column("key").to_numpy().astype(np.int64)
    exact = measure_locality(stream)
    rate = 0.1
    threshold = int(rate * (1 << 24))
    sample = stream[sampled_keys(stream, threshold)]
    key_list, counts = _key_counts(sample)
    fed = StreamLocality([(key_list, counts)], events=stream.size, order="file",
                         sample_rate=rate, sampled_only=True, n_keys=exact.keys)
    for chunk in np.array_split(sample, 5):
        fed.feed(chunk)
    got = fed.result()
    assert got.method == "shards" and got.keys == exact.keys
    assert 0 < got.expected_error < 0.1
    estimate = np.array([got.lru_hit_rate(s) for s in exact.curve_sizes])
    assert np.abs(estimate - exact.curve_hits).max() <= 4 * got.expected_error
    doc = json.loads(json.dumps(got.to_dict()))
    assert doc["expected_error"] == pytest.approx(got.expected_error, abs=1e-6)
    assert Locality.from_dict(doc).to_dict() == doc
