"""Benchmark: the locality pass and the locality order, against named baselines in one run;
and the hit-rate table of the README (real trace, locality order, independent draws).

1. ``measure_locality`` (what ``hotshard profile`` runs for its locality section: dense ids,
   one Mattson pass, every cache size's LRU hit rate at once) on a real trace, against
   libCacheSim's C LRU simulating the same stream at *one* cache size.
2. ``hotshard profile`` of the trace with and without the locality section (its cost).
3. The key order of ``generate``: ``plan_workload`` with ``order="locality"`` (counts, renewal
   order, one correction) against ``order="irm"`` plus the independent draws of the same
   number of keys (what IRM generation pays for its keys).
4. Hit rates (LRU, FIFO, S3-FIFO at 0.1%, 1%, 5%, 20% of the distinct keys) of each trace,
   its locality-ordered stream and its independent-draw stream, by libCacheSim.

    python benchmarks/bench_locality.py [--repeats 3] [--no-table]

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
from hotshard.profile.locality import measure_locality  # noqa: E402
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
    ours, loc = best_time(lambda: measure_locality(keys), repeats)
    path = _trace_file(keys)
    try:
        size = int(loc.keys * 0.01)
        base, _ = best_time(lambda: _lcs(path, "LRU", size), repeats)
    finally:
        os.unlink(path)
    print(f"locality pass, orm-busy ({n:,} references, {loc.keys:,} keys): "
          f"{n / ours / 1e6:.1f} M refs/s, every cache size at once")
    print(f"  libCacheSim LRU, one size ({size:,}): {n / base / 1e6:.1f} M refs/s "
          f"-> ratio {base / ours:.2f}x (ours vs one C simulation)")
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
          f"{events / t_loc / 1e6:.1f} M/s, independent draws {events / t_irm / 1e6:.1f} M/s "
          f"(ratio {t_loc / t_irm:.1f}x)")


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
    parser.add_argument("--no-table", action="store_true")
    args = parser.parse_args()
    timings(args.repeats)
    if not args.no_table:
        table()


if __name__ == "__main__":
    main()
