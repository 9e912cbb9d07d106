"""Benchmark: hot-key detectors scored on a known stream, the scoreboard in the README.

The stream: Poisson arrivals at ``--rate`` req/s for ``--span`` seconds, keys Zipf(1.1) over
100,000 channels (the top one ~9.5% of requests, the next ~4.4%: one key steadily above a 5%
threshold and one just below it), and two events: "event-big" takes 40% of the requests from
200 s to 300 s, "event-small" 8% from 400 s to 500 s. Truth: a key is hot when it has at least
``--threshold`` of the requests of the last 10 s. Each detector sees every request and is read
every 0.5 s (as ``serve`` reads its own):

* serve's sliding Space-Saving sketch (``hotshard.detect.sketch``) at capacities of 32, 256
  and 1,024 counters and windows of 2, 10 and 30 s (10 slices);
* a 1-in-N sampler (``hotshard.detect.sampler``, Pelikan's way) at N = 10 and 100, 10 s;
* Redis 7's LFU counters as ``redis-cli --hotkeys`` reads them (``hotshard.detect.lfu``: the
  counter's own rule, checked against a live redis-server in
  tests/cluster/test_lfu_live.py): every key's counter, the top 16 reported, each key's hits
  estimated from its counter; decay 1 minute (Redis's shortest), lfu-log-factor 10 (the
  default) and 1 (finer counts, saturating sooner).

Printed per detector: precision and recall of the hot keys over every reading, the mean
error of the shares it reported for the truly hot keys, the latency after each event's
onset, and its time per request against the baseline in the same run: exact counts over the
same window (a dict and a deque), the detector every sketch approximates.

    python benchmarks/bench_detectors.py [--rate 1000] [--span 600] [--threshold 0.05]
                                         [--only LFU]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hotshard.detect.lfu import LfuCounters
from hotshard.detect.sampler import SampledCounts
from hotshard.detect.score import ExactCounts, score_detector
from hotshard.detect.sketch import SlidingHotKeys

EVENTS = (("event-big", 200.0, 300.0, 0.40), ("event-small", 400.0, 500.0, 0.08))


def make_stream(rate: float, span: float, seed: int = 11) -> tuple[list[str], np.ndarray]:
    rng = np.random.default_rng(seed)
    times = np.cumsum(rng.exponential(1 / rate, int(rate * span)))
    keys = [f"ch{r}" for r in ((rng.zipf(1.1, times.size) - 1) % 100_000).tolist()]
    u = rng.random(times.size)
    for key, start, end, share in EVENTS:
        for i in np.flatnonzero((times >= start) & (times < end) & (u < share)).tolist():
            keys[i] = key
        u = np.where((times >= start) & (times < end), u - share, u)  # disjoint slices
    return keys, times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=1000.0)
    ap.add_argument("--span", type=float, default=600.0)
    ap.add_argument("--threshold", type=float, default=0.05)
    ap.add_argument("--only", metavar="TEXT", help="Score only the detectors whose name holds "
                    "TEXT (the exact baseline always runs first).")
    args = ap.parse_args()
    keys, times = make_stream(args.rate, args.span)
    events = [(key, start) for key, start, _, _ in EVENTS]
    detectors = [("exact counts, 10 s (baseline)", lambda: ExactCounts(10.0))]
    for window in (2.0, 10.0, 30.0):
        for capacity in (32, 256, 1024):
            detectors.append((f"Space-Saving {capacity}, {window:g} s",
                              lambda c=capacity, w=window: SlidingHotKeys(
                                  window_s=w, slices=10, capacity=c, clock=lambda: 0.0)))
    for every in (10, 100):
        detectors.append((f"1-in-{every} sampler, 10 s",
                          lambda e=every: SampledCounts(every=e, window_s=10.0, seed=5)))
    for factor in (10, 1):
        detectors.append((f"Redis LFU, log factor {factor}",
                          lambda f=factor: LfuCounters(log_factor=f, seed=5)))

    if args.only:
        detectors = detectors[:1] + [d for d in detectors[1:] if args.only in d[0]]

    def replay_s(detector) -> float:
        """Seconds to feed the whole stream and read it every 0.5 s (no scoring)."""
        start = time.perf_counter()
        due = float(times[0]) + 0.5
        for key, now in zip(keys, times.tolist(), strict=True):
            if now >= due:
                detector.shares(now=due, min_total=1)
                due += 0.5
            detector.add(key, now=now)
        return time.perf_counter() - start

    print(f"{len(keys):,} requests over {args.span:g} s; hot = at least "
          f"{args.threshold:.0%} of the last 10 s; events: "
          + ", ".join(f"{k} {s:.0%} from {a:g} s" for k, a, _, s in EVENTS))
    print(f"{'detector':32} {'precision':>9} {'recall':>7} {'share err':>9} "
          f"{'big event':>10} {'small event':>11} {'time/request':>13} {'vs exact':>8}")
    base = None
    for name, make in detectors:
        score = score_detector(name, make(), keys, times, threshold=args.threshold,
                               events=events, min_total=1)
        seconds = replay_s(make())
        base = base or seconds
        lat = ["never" if x is None else f"{x:.1f} s" for x in score.latency_s]

        def show(x, fmt):
            return "-" if x is None else format(x, fmt)

        print(f"{name:32} {show(score.precision, '.3f'):>9} {show(score.recall, '.3f'):>7} "
              f"{show(score.share_error, '.4f'):>9} {lat[0]:>10} {lat[1]:>11} "
              f"{seconds / len(keys) * 1e6:10.2f} us {seconds / base:7.2f}x")


if __name__ == "__main__":
    main()
