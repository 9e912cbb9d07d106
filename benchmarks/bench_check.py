"""Benchmark: `hotshard check` on 10 million test events, against a bare DuckDB GROUP BY.

`check` profiles the test's key stream with the profile engine (DuckDB), counts production's
head keys in it exactly (one filtered pass), and runs every comparison, including the
hot-shard check with the test's tail placed key by key. The baseline, timed in the same run on
the same file, is the least any per-key comparison must do: ``SELECT key, count(*) ... GROUP BY
key`` fetched to numpy. Production is the real web07 trace (../shared/data); the test keys are
uniform over web07's key space (the incident's generator), so the check fails, as it should.

    python benchmarks/bench_check.py [--events 1e7] [--repeats 3]

Target (issue 14): seconds for 10 M events.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from _timing import best_time

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT.parent / "shared" / "data" / "traces" / "web07.parquet"
CACHE = Path(__file__).resolve().parent / ".cache"


def make_test(events: int, space: np.ndarray, seed: int = 1) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = CACHE / f"check_uniform_{events}_{seed}.parquet"
    if path.exists():
        return path
    CACHE.mkdir(exist_ok=True)
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, pa.schema([("key", pa.int64())]), compression="zstd") as w:
        for start in range(0, events, 5_000_000):
            w.write_table(pa.table({"key": rng.choice(space, min(5_000_000, events - start))}))
    tmp.rename(path)
    return path


def main() -> None:
    import duckdb
    import pyarrow.parquet as pq

    from hotshard.compare.check import check, profile_test
    from hotshard.profile.count import count_profile
    from hotshard.shards.partitioners import make_partitioner

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=float, default=1e7)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    events = int(args.events)
    production = count_profile([str(TRACE)], key="key")
    space = np.unique(pq.read_table(TRACE).column("key").to_numpy())
    path = str(make_test(events, space))
    ring = make_partitioner("kafka", 16, key_type="bigint")

    def ours():  # what `hotshard check TEST --against PROD -p kafka -n 16` runs
        test, counts = profile_test([path], production=production, partitioner=ring)
        return check(test, production, partitioner=ring, cache_size=2000, test_counts=counts)

    def bare():
        con = duckdb.connect()
        try:
            return con.execute(f"SELECT key, count(*) FROM read_parquet('{path}') GROUP BY key"
                               ).fetchnumpy()
        finally:
            con.close()

    t_ours, report = best_time(ours, args.repeats)
    t_bare, _ = best_time(bare, args.repeats)
    print(f"test events: {events:,} (uniform over web07's {space.size:,} keys); "
          f"verdict {report.verdict}")
    print(f"hotshard check (profile + exact head counts + checks): {t_ours:.2f} s "
          f"({events / t_ours / 1e6:.1f} M events/s)")
    print(f"bare DuckDB GROUP BY key:                              {t_bare:.2f} s")
    print(f"ratio ours / bare: {t_ours / t_bare:.2f}x   target: seconds for 1e7 events "
          f"({'pass' if t_ours < 10 else 'FAIL'})")


if __name__ == "__main__":
    main()
