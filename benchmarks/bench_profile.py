"""Benchmark: `hotshard profile` counting against pandas value_counts and a bare DuckDB GROUP BY.

Counts 100 million events from Parquet (generated once and cached under
benchmarks/.cache/, never committed) three ways, in the same run:

* hotshard: ``count_profile`` (DuckDB engine: counts, head, count-of-counts, tail fit);
* pandas: ``pd.read_parquet(columns=[key])[key].value_counts()`` (the usual notebook way);
* bare DuckDB: ``SELECT key, count(*) FROM read_parquet(...) GROUP BY key``, fetched to numpy.

Prints rows/s for each and the ratios. Targets (issue 3): >= 5x pandas, within 1.2x of bare
DuckDB.

    pip install -e '.[bench]'     # pandas, for the baseline
    python benchmarks/bench_profile.py [--events 1e8] [--keys 2e6] [--repeats 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from _timing import best_time

CACHE = Path(__file__).resolve().parent / ".cache"


def make_events(events: int, keys: int, seed: int = 1) -> Path:
    """Zipf-skewed channel IDs, written once in row groups (constant memory)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = CACHE / f"events_{events}_{keys}_{seed}.parquet"
    if path.exists():
        return path
    CACHE.mkdir(exist_ok=True)
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".tmp")
    chunk = 10_000_000
    with pq.ParquetWriter(tmp, pa.schema([("channel_id", pa.int64())]),
                          compression="zstd") as writer:
        for start in range(0, events, chunk):
            n = min(chunk, events - start)
            ids = (rng.zipf(1.3, n) - 1) % keys
            writer.write_table(pa.table({"channel_id": ids.astype(np.int64)}))
    tmp.rename(path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=float, default=1e8)
    parser.add_argument("--keys", type=float, default=2e6)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    import duckdb
    import pandas as pd

    from hotshard.profile.count import count_profile

    events, keys = int(args.events), int(args.keys)
    t0 = time.perf_counter()
    path = make_events(events, keys)
    print(f"input: {path.name} ({path.stat().st_size / 1e6:,.0f} MB, ready in "
          f"{time.perf_counter() - t0:.1f} s)")

    def ours():
        count_profile([str(path)], key="channel_id")

    def bare_duckdb():
        con = duckdb.connect()
        con.execute(f"SELECT channel_id, count(*) AS n FROM read_parquet('{path}') "
                    "GROUP BY channel_id").fetchnumpy()
        con.close()

    def pandas_value_counts():
        pd.read_parquet(path, columns=["channel_id"])["channel_id"].value_counts()

    ours()  # first call loads the compiled kernels and DuckDB: not what is being measured
    results = {}
    for name, fn in (("hotshard", ours), ("bare duckdb", bare_duckdb),
                     ("pandas", pandas_value_counts)):
        results[name] = best_time(fn, args.repeats)[0]
        print(f"{name:>12}: {results[name]:7.2f} s  {events / results[name] / 1e6:8.1f} M rows/s")
    vs_pandas = results["pandas"] / results["hotshard"]
    vs_duck = results["hotshard"] / results["bare duckdb"]
    print(f"hotshard is {vs_pandas:.1f}x faster than pandas (target >= 5x: "
          f"{'met' if vs_pandas >= 5 else 'MISSED'})")
    print(f"hotshard takes {vs_duck:.2f}x the time of a bare DuckDB GROUP BY (target <= 1.2x: "
          f"{'met' if vs_duck <= 1.2 else 'MISSED'})")


if __name__ == "__main__":
    main()
