"""Benchmark: the locality pass and the locality order, against named baselines in one run;
and the hit-rate table of the README (real trace, locality order, independent draws).

1. ``measure_locality`` (what ``hotshard profile`` runs for its locality section: dense ids,
   one Mattson pass, every cache size's LRU hit rate at once) on a real trace, against
   libCacheSim's C LRU simulating the same stream at *one* cache size; and SHARDS at its
   default rate against the exact pass (time, and its curve's largest error).
2. ``hotshard profile`` of the trace with and without the locality section (its cost).
3. The key order of ``generate``: ``plan_workload`` with ``order="locality"`` (counts, renewal
   order, one correction) against ``order="irm"`` plus the independent draws of the same
   number of keys (what IRM generation pays for its keys).
4. A synthetic trace of ``--big`` events (default 100 M; Zipf(1) keys over a tenth as many
   keys, a day of Poisson arrivals, written in chunks): the locality pass, exact against
   what the profile uses there (SHARDS beyond ``EXACT_MAX_KEYS`` keys), and the size of its
   profile with every section (locality, arrivals, timelines) against the 100 KB bar.
   Needs ~10 GB of memory and a few minutes; ``--big 0`` leaves it out.
5. Hit rates (LRU, FIFO, S3-FIFO at 0.1%, 1%, 5%, 20% of the distinct keys) of each trace,
   its locality-ordered stream and its independent-draw stream, by libCacheSim.

    python benchmarks/bench_locality.py [--repeats 3] [--big 1e8] [--no-table]

Needs libcachesim (the test extra). Traces from ../shared/data/traces.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from _timing import best_time

ROOT = Path(__file__).resolve().parents[1]
TRACES = ROOT.parent / "shared" / "data" / "traces"
sys.path.insert(0, str(ROOT))

from hotshard.profile.count import count_profile  # noqa: E402
from hotshard.profile.locality import SAMPLE_RATE, measure_locality  # noqa: E402
from hotshard.workload.generate import plan_workload  # noqa: E402

CASES = (("web07", "key", None), ("web12", "key", None), ("scarab-recs", "key", None),
         ("orm-busy", "key", None), ("cloudphysics", "lbn", "time"))


def _keys(name: str, column: str, time: str | None) -> np.ndarray:
    table = pq.read_table(TRACES / f"{name}.parquet", columns=[column] + ([time] if time else []))
    keys = table.column(column).to_numpy()
    return keys[np.argsort(table.column(time).to_numpy(), kind="stable")] if time else keys


def _trace_file(stream: np.ndarray) -> str:
    _, ids = np.unique(stream, return_inverse=True)
    fd, path = tempfile.mkstemp(suffix=".txt")
    with os.fdopen(fd, "w") as handle:
        handle.write("\n".join(map(str, (ids + 1).tolist())) + "\n")
    return path


def _lcs(path: str, algorithm: str, size: int) -> float:
    import libcachesim as lcs

    reader = lcs.TraceReader(path, lcs.TraceType.PLAIN_TXT_TRACE,
                             lcs.ReaderInitParam(ignore_obj_size=True))
    return 1.0 - getattr(lcs, algorithm)(cache_size=size).process_trace(reader)[0]


def timings(repeats: int) -> None:
    keys = _keys("orm-busy", "key", None)
    n = keys.size
    measure_locality(keys[:1000])  # compile once, outside the timing
    measure_locality(keys[:1000], sample_rate=SAMPLE_RATE)
    ours, loc = best_time(lambda: measure_locality(keys), repeats)
    path = _trace_file(keys)
    try:
        size = int(loc.keys * 0.01)
        base, _ = best_time(lambda: _lcs(path, "LRU", size), repeats)
    finally:
        os.unlink(path)
    print(f"locality pass, orm-busy ({n:,} references, {loc.keys:,} keys): "
          f"{n / ours / 1e6:.1f} M refs/s, every cache size at once (target >= 20 M/s: "
          f"{'met' if n / ours >= 20e6 else 'NOT met'})")
    print(f"  libCacheSim LRU, one size ({size:,}): {n / base / 1e6:.1f} M refs/s "
          f"-> ratio {base / ours:.2f}x (ours vs one C simulation)")
    t_sh, sh = best_time(lambda: measure_locality(keys, sample_rate=SAMPLE_RATE), repeats)
    err = np.abs([sh.lru_hit_rate(s) - h for s, h in zip(loc.curve_sizes, loc.curve_hits,
                                                          strict=True)]).max()
    print(f"  SHARDS at R = {SAMPLE_RATE:g}: {n / t_sh / 1e6:.1f} M refs/s -> ratio "
          f"{ours / t_sh:.2f}x (vs exact); largest error over the curve {err:.4f} (bar 0.01)")
    trace = str(TRACES / "orm-busy.parquet")
    with_l, _ = best_time(lambda: count_profile([trace], key="key"), repeats)
    without, _ = best_time(lambda: count_profile([trace], key="key", locality=False), repeats)
    print(f"hotshard profile orm-busy: {with_l:.2f} s with locality, {without:.2f} s without "
          f"({with_l / without:.1f}x)")
    profile = count_profile([trace], key="key")
    events = 10_000_000
    plan_workload(profile=profile, dist=None, events=100_000, seed=1, order="locality")

    def irm():
        plan = plan_workload(profile=profile, dist=None, events=events, seed=1, order="irm")
        return plan.samplers["*"].sample(events, np.random.default_rng(1))

    t_loc, _ = best_time(lambda: plan_workload(profile=profile, dist=None, events=events,
                                               seed=1, order="locality"), repeats)
    t_irm, _ = best_time(irm, repeats)
    print(f"key order for {events:,} events from orm-busy's profile: locality "
          f"{events / t_loc / 1e6:.1f} M/s (target >= 10 M/s: "
          f"{'met' if events / t_loc >= 10e6 else 'NOT met'}), independent draws "
          f"{events / t_irm / 1e6:.1f} M/s (ratio {t_loc / t_irm:.1f}x)")


def synthetic_trace(path: str, events: int, seed: int = 1,
                    chunk: int = 10_000_000) -> None:
    """Zipf(1) keys over events / 10 keys (rank r with probability ~ 1/r, as hashed ids) in
    independent order, times a day of Poisson arrivals: parquet written ``chunk`` rows at a
    time."""
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    n_keys = max(events // 10, 2)
    writer, start = None, 0.0
    for first in range(0, events, chunk):
        m = min(chunk, events - first)
        rank = np.floor(np.exp(rng.random(m) * np.log(n_keys))).astype(np.int64)
        times = start + np.cumsum(rng.exponential(86_400 / events, m))
        start = float(times[-1])
        table = pa.table({"key": (rank * 0x9E3779B1) % (1 << 40), "time": times})
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
    if writer is not None:
        writer.close()


def _big_pass(path: str, events: int) -> None:
    keys = pq.read_table(path, columns=["key"]).column("key").to_numpy()
    exact, loc_e = best_time(lambda: measure_locality(keys, sample_rate=1.0), 1)
    auto, loc_a = best_time(lambda: measure_locality(keys), 1)
    err = np.abs([loc_a.lru_hit_rate(s) - h for s, h in zip(loc_e.curve_sizes,
                                                             loc_e.curve_hits,
                                                             strict=True)]).max()
    print(f"locality pass, synthetic {events:,} references over {loc_e.keys:,} keys "
          f"(independent order, Zipf 1): exact {events / exact / 1e6:.1f} M refs/s; "
          f"as profiled ({loc_a.method}) {events / auto / 1e6:.1f} M refs/s -> ratio "
          f"{exact / auto:.2f}x, largest error {err:.4f}")


def big(events: int) -> None:
    import json

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "big.parquet")
        synthetic_trace(path, events)
        _big_pass(path, events)
        took, profile = best_time(lambda: count_profile([path], key="key", time_col="time"), 1)
        doc = profile.to_dict()
        parts = ", ".join(f"{k} {len(json.dumps(doc[k], separators=(',', ':'))) / 1e3:.1f}"
                          for k in ("head", "tail", "locality", "arrivals", "timelines"))
        size = len(profile.to_json())
        print(f"profile of {events:,} events with every section: {size / 1e3:.1f} KB "
              f"(bar 100 KB: {'met' if size < 100_000 else 'NOT met'}; {parts} KB), "
              f"{took:.0f} s")


def table() -> None:
    print("\n| trace | cache | LRU real / locality / IRM | FIFO | S3-FIFO |")
    print("|---|---|---|---|---|")
    for name, column, time in CASES:
        keys = _keys(name, column, time)
        profile = count_profile([str(TRACES / f"{name}.parquet")], key=column, time_col=time)
        plan = plan_workload(profile=profile, dist=None, events=keys.size, seed=1,
                             order="locality")
        sampler = plan.samplers["*"]
        streams = [keys, np.asarray(sampler.ids(plan.positions)),
                   np.asarray(sampler.ids(sampler.sample(keys.size,
                                                         np.random.default_rng(1))))]
        paths = [_trace_file(s) for s in streams]
        try:
            for fraction in (0.001, 0.01, 0.05, 0.2):
                size = max(2, int(profile.keys * fraction))
                cells = []
                for algorithm in ("LRU", "FIFO", "S3FIFO"):
                    real, loc, irm = (_lcs(p, algorithm, size) for p in paths)
                    cells.append(f"{real:.3f} / {loc:.3f} / {irm:.3f}")
                print(f"| {name} | {fraction:.1%} ({size:,}) | " + " | ".join(cells) + " |")
        finally:
            for p in paths:
                os.unlink(p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--big", type=float, default=1e8,
                        help="events of the synthetic trace (0: leave it out)")
    parser.add_argument("--no-table", action="store_true")
    args = parser.parse_args()
    timings(args.repeats)
    if args.big:
        big(int(args.big))
    if not args.no_table:
        table()


if __name__ == "__main__":
    main()
