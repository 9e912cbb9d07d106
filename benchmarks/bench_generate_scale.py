"""Benchmark: `hotshard generate` in production's locality order at the seed's scale (2
billion messages), end to end with Parquet written, its peak memory and events a second,
against the same command drawing keys independently (``--order irm``) in the same run.

Both run as a user runs them, each in a fresh process whose peak RSS is read from the kernel
(``ru_maxrss`` of that child alone); the files go to ``--dir`` (default: a temporary
directory) and are deleted after each run. The locality order is made window by window
(``hotshard.workload.locality_stream``): its memory does not grow with the events.

    python benchmarks/bench_generate_scale.py [--events 2e7 2e9] [--profile P] [--dir DIR]
        [--orders locality irm]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_MEASURE = """
import resource, subprocess, sys, time
t0 = time.perf_counter()
rc = subprocess.call(sys.argv[1:], stdout=subprocess.DEVNULL)
elapsed = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(f"{rc} {elapsed} {peak}")
"""


def measured(command: list[str]) -> tuple[float, int]:
    """(seconds, peak RSS bytes) of ``command`` run in a fresh process."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *command], check=True,
                         capture_output=True, text=True).stdout.splitlines()[-1].split()
    if int(out[0]) != 0:
        raise SystemExit(f"{' '.join(command[:3])} ... failed (exit {out[0]})")
    return float(out[1]), int(out[2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, nargs="+", default=[2e7, 2e9])
    ap.add_argument("--profile", default=str(ROOT / "examples" / "incident.profile.json"))
    ap.add_argument("--dir", default=None, help="where the files are written (and deleted)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--orders", nargs="+", default=["locality", "irm"],
                    choices=["locality", "irm"], help="the baseline (irm) doubles a long run")
    args = ap.parse_args()
    hotshard = str(Path(sys.executable).with_name("hotshard"))
    for events in (int(e) for e in args.events):
        print(f"{events:,} messages from {Path(args.profile).name}, Parquet, "
              f"--workers {args.workers}:")
        results = {}
        for order in args.orders:
            with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
                out = Path(tmp) / "out.parquet"
                seconds, peak = measured([hotshard, "generate", args.profile, "--messages",
                                          str(events), "--seed", "1", "--order", order,
                                          "--workers", str(args.workers), "-o", str(out),
                                          "-q"])
                size = out.stat().st_size
            results[order] = seconds
            print(f"  --order {order:8s} {seconds:8.1f} s  {events / seconds / 1e6:6.2f} M "
                  f"events/s  peak RSS {peak / 2**30:5.2f} GiB  file {size / 2**30:6.2f} GiB")
        if len(results) == 2:
            print(f"  locality order costs {results['locality'] / results['irm']:.2f}x the "
                  "independent draws")


if __name__ == "__main__":
    main()
