"""Benchmark: `hotshard check` on 10 million test events, against a bare DuckDB GROUP BY.

`check` profiles the test's key stream with the profile engine (DuckDB), counts production's
head keys in it exactly (one filtered pass), and runs every comparison, including the
hot-shard check with the test's tail placed key by key. The baseline, timed in the same run on
the same file, is the least any per-key comparison must do: ``SELECT key, count(*) ... GROUP BY
key`` fetched to numpy. Production is the real web07 trace (../shared/data).

Two test files, both timed as a user runs them (the `hotshard check` command, in a process
of its own: its start-up, reading and printing included, and its peak memory):

- ``keys``: a single key column, uniform over web07's key space (the incident's generator);
  the check fails, as it should.
- ``generated``: `hotshard generate web07.json --events N` (every column a generator writes:
  timestamp, channel_id, message_id, user_id, size, op); the check passes.

    python benchmarks/bench_check.py [--events 1e7] [--repeats 3]

Target (issue 14): seconds for 10 M events.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
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


def make_generated(events: int, profile: Path, seed: int = 1) -> Path:
    """`hotshard generate PROFILE --events N` (the command), cached."""
    path = CACHE / f"check_generated_{events}_{seed}.parquet"
    if not path.exists():
        CACHE.mkdir(exist_ok=True)
        subprocess.run([*HOTSHARD, "generate", str(profile), "--messages", str(events),
                        "--seed", str(seed), "-o", str(path), "-q"], check=True)
    return path


HOTSHARD = [sys.executable, "-m", "hotshard"]


def timed_command(args: list[str], repeats: int) -> tuple[float, float, int]:
    """(best wall seconds, peak RSS MB of that child, exit status) of ``hotshard ARGS``."""
    best, peak, code = float("inf"), 0.0, -1
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.Popen([*HOTSHARD, *args], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        took = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if took < best:
            best, peak, code = took, usage.ru_maxrss / 1024, proc.returncode
    return best, peak, code


def main() -> None:
    import duckdb
    import pyarrow.parquet as pq

    from hotshard.profile.count import count_profile

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=float, default=1e7)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    events = int(args.events)
    CACHE.mkdir(exist_ok=True)
    production = CACHE / "web07.profile.json"
    count_profile([str(TRACE)], key="key").save(production)
    space = np.unique(pq.read_table(TRACE).column("key").to_numpy())
    files = {"keys": (make_test(events, space), "key"),
             "generated": (make_generated(events, production), "channel_id")}
    print(f"test events: {events:,}; production: web07 ({space.size:,} keys); "
          "kafka, 16 partitions")
    for name, (path, column) in files.items():
        def bare(path=path, column=column):
            con = duckdb.connect()
            try:
                return con.execute(f"SELECT {column}, count(*) FROM read_parquet('{path}') "
                                   f"GROUP BY {column}").fetchnumpy()
            finally:
                con.close()

        took, peak, code = timed_command(["check", str(path), "--against", str(production),
                                          "-p", "kafka", "-n", "16"], args.repeats)
        t_bare, _ = best_time(bare, args.repeats)
        verdict = {0: "PASS", 1: "FAIL"}.get(code, f"exit {code}")
        print(f"{name:<10} hotshard check: {took:.2f} s ({events / took / 1e6:.1f} M "
              f"events/s, peak {peak:,.0f} MB, {verdict});  bare DuckDB GROUP BY "
              f"{t_bare:.2f} s;  ratio {took / t_bare:.1f}x  target: seconds for 1e7 events "
              f"({'pass' if took < 10 else 'FAIL'})")


if __name__ == "__main__":
    main()
