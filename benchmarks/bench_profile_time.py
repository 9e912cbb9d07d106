"""Benchmark: `hotshard profile --time` (every section: counts, arrivals, timelines, locality)
at production scale, its peak memory and time against DuckDB's own GROUP BY count of the same
file, in the same run.

The trace is made here, in row groups (constant memory) and cached under benchmarks/.cache/:
a day-like stream at ~3,000 req/s with epoch-millisecond times (a JSON log's), keys drawn
from a Zipf law over ``--keys`` channels, and one channel carrying 40% of the requests for a
tenth of the span (an event). It is in time order, as a log is; ``--shuffled`` writes it in
another order (DuckDB then sorts it out of core for the locality pass).

Both sides run as the user runs them, each in a fresh process whose peak RSS is read from
the kernel (``ru_maxrss`` of that child alone), ``--repeats`` times, the fastest time and
the largest peak printed:

* hotshard: ``hotshard profile FILE --key channel --time ts -o OUT -q``;
* baseline: DuckDB's ``SELECT channel, count(*) ... GROUP BY channel`` into a table.

    python benchmarks/bench_profile_time.py [--events 2e8 1e9] [--keys 4e6] [--shuffled]
        [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CACHE = Path(__file__).resolve().parent / ".cache"
RATE = 3000.0          # requests a second, the incident's
EVENT_SHARE = 0.4      # of the requests in the event's tenth of the span


def make_trace(events: int, keys: int, shuffled: bool, seed: int = 5) -> Path:
    """The trace (module notes), written once in row groups of 2^22 rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = CACHE / f"timed_{events}_{keys}_{int(shuffled)}_{seed}.parquet"
    if path.exists():
        return path
    CACHE.mkdir(exist_ok=True)
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".tmp")
    chunk = 1 << 22
    start_ms = 1_714_560_000_000
    now = 0.0
    event_from, event_to = 0.45 * events, 0.55 * events
    with pq.ParquetWriter(tmp, pa.schema([("channel", pa.int64()), ("ts", pa.int64())])) as w:
        for first in range(0, events, chunk):
            n = min(chunk, events - first)
            gaps = rng.exponential(1.0 / RATE, n)
            times = now + np.cumsum(gaps)
            now = float(times[-1])
            channel = (rng.zipf(1.1, n) - 1) % keys
            index = first + np.arange(n)
            hot = (index >= event_from) & (index < event_to) & (rng.random(n) < EVENT_SHARE)
            channel[hot] = keys + 7  # a channel of its own, seen only in the event
            ts = start_ms + np.floor(times * 1000).astype(np.int64)
            if shuffled:
                order = rng.permutation(n)
                channel, ts = channel[order], ts[order]
            w.write_table(pa.table({"channel": channel, "ts": ts}))
    tmp.rename(path)
    return path


_MEASURE = """
import resource, subprocess, sys, time
t0 = time.perf_counter()
rc = subprocess.call(sys.argv[1:])
elapsed = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(f"{rc} {elapsed} {peak}")
"""

_GROUP_BY = """
import sys, duckdb
con = duckdb.connect()
con.execute("CREATE TABLE counts AS SELECT channel, count(*) AS n "
            f"FROM read_parquet('{sys.argv[1]}') GROUP BY channel")
"""


def measured(command: list[str]) -> tuple[float, int]:
    """(seconds, peak RSS bytes) of ``command`` run in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *command], check=True,
                         capture_output=True, text=True).stdout.splitlines()[-1].split()
    rc, seconds, peak = int(out[0]), float(out[1]), int(out[2])
    if rc != 0:
        raise SystemExit(f"{command[0]} failed (exit {rc})")
    return seconds, peak


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, nargs="+", default=[2e8, 1e9])
    ap.add_argument("--keys", type=float, default=4e6)
    ap.add_argument("--shuffled", action="store_true")
    ap.add_argument("--repeats", type=int, default=2,
                    help="runs of each side; the fastest counts (the machine is noisy)")
    args = ap.parse_args()
    hotshard = str(Path(sys.executable).with_name("hotshard"))
    for events in (int(e) for e in args.events):
        trace = make_trace(events, int(args.keys), args.shuffled)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "profile.json"
            ours = [measured([hotshard, "profile", str(trace), "--key", "channel", "--time",
                              "ts", "-o", str(out), "-q"]) for _ in range(args.repeats)]
            base = [measured([sys.executable, "-c", _GROUP_BY, str(trace)])
                    for _ in range(args.repeats)]
            ours_s, ours_rss = min(s for s, _ in ours), max(r for _, r in ours)
            base_s, base_rss = min(s for s, _ in base), max(r for _, r in base)
            doc = json.loads(out.read_text())
        sections = [s for s in ("arrivals", "timelines", "locality") if doc.get(s)]
        loc = doc.get("locality") or {}
        print(f"{events:,} events ({'shuffled' if args.shuffled else 'time order'}), "
              f"{doc['totals']['keys']:,.0f} keys:")
        print(f"  hotshard profile --time  {ours_s:8.1f} s   peak RSS {ours_rss / 2**30:5.2f} GiB"
              f"   sections: {', '.join(sections)}; locality {loc.get('method')}"
              f" (expected error {loc.get('expected_error', 0)})")
        print(f"  DuckDB GROUP BY count    {base_s:8.1f} s   peak RSS {base_rss / 2**30:5.2f} GiB")
        print(f"  time ratio {ours_s / base_s:.2f}x the GROUP BY")


if __name__ == "__main__":
    main()
