"""Benchmark: `hotshard simulate`'s own path against SimPy and Ciw models of the same system.

The system is the incident's load test, scenario ``incident-test``: Poisson arrivals at 5000
req/s, uniform keys over 300k channels placed on 64 Kafka shards (uniform ownership), one
worker per shard, exponential service of mean 5.25 ms (rho 0.41 per shard). Same run:

* hotshard: ``run_scenario("incident-test", duration=D)``, the path
  ``hotshard simulate --scenario incident-test --duration D`` runs (``scenario_options``,
  ``prepare``, ``simulate``): drawing the arrivals, keys and service times, placement, the
  windowed queues, the latency histograms and the result object, timed end to end (after a
  warm-up run, so numba's cache is loaded);
* SimPy: one environment, a capacity-1 ``Resource`` per shard, a process per request, fed
  arrival, shard and service arrays of the same system (drawing them is not timed: SimPy's
  rate is its queueing alone);
* Ciw: each shard its own single-node M/M/1 simulation with Ciw's exponential
  distributions (its fastest form here: one 64-node network scans every node per event).

Prints simulated requests per second of wall time, mean and p99 sojourn (all three must
agree with M/M/1 theory), and the ratios. Then a check that hotshard's queues, fed SimPy's
very requests window by window (``ShardQueue``), give SimPy's sojourn times; hotshard's cost
at growing simulated durations (linear); then the command as a user runs it, each a whole
process (interpreter start-up, imports, numba's cache, the JSON it writes): one simulated hour
of ``incident-test`` (target under 5 s) and a simulated day at production's 3000 req/s over
64 shards (``incident-production``, 2.6e8 requests; targets under a minute and 2 GB): wall
time and that process's peak resident memory. Single-threaded throughout.

    pip install -e '.[bench]'    # simpy and ciw, for the baselines only
    python benchmarks/bench_sim.py [--baseline-requests 2e5] [--durations 600,3600,14400]
                                   [--day 86400 | --day 0]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
from _timing import best_time

from hotshard.sim.queues import ShardQueue
from hotshard.sim.scenarios import run_scenario

RATE, SHARDS, MEAN_SERVICE = 5000.0, 64, 0.00525   # incident-test (sim/scenarios.py)


def draw(n: int, rng: np.random.Generator):
    """n Poisson arrivals at RATE, a uniform shard for each, exponential service times."""
    arrivals = np.cumsum(rng.exponential(1.0 / RATE, n))
    shard = rng.integers(0, SHARDS, n)
    service = rng.exponential(MEAN_SERVICE, n)
    return arrivals, shard, service


def run_simpy(arrivals, shard, service):
    """The requests through SimPy; sojourn time of each, in arrival order."""
    import simpy

    env = simpy.Environment()
    workers = [simpy.Resource(env, capacity=1) for _ in range(SHARDS)]
    shard_of, work = shard.tolist(), service.tolist()
    sojourn = [0.0] * len(work)

    def request(i):
        arrived = env.now
        with workers[shard_of[i]].request() as turn:
            yield turn
            yield env.timeout(work[i])
        sojourn[i] = env.now - arrived

    def source():
        for i, t in enumerate(arrivals.tolist()):
            yield env.timeout(t - env.now)
            env.process(request(i))

    env.process(source())
    env.run()
    return np.array(sojourn)


def run_ciw(n: int, seed: int):
    """Each shard an M/M/1 in Ciw for the time n requests take; their sojourn times."""
    import ciw

    horizon = n / RATE
    sojourn = []
    for s in range(SHARDS):
        ciw.seed(seed + s)
        network = ciw.create_network(
            arrival_distributions=[ciw.dists.Exponential(rate=RATE / SHARDS)],
            service_distributions=[ciw.dists.Exponential(rate=1.0 / MEAN_SERVICE)],
            number_of_servers=[1])
        sim = ciw.Simulation(network)
        sim.simulate_until_max_time(horizon)
        sojourn += [r.exit_date - r.arrival_date for r in sim.get_all_records()]
    return np.array(sojourn)


def windowed_sojourn(arrivals, shard, service, windows: int):
    """hotshard's queues on the given requests, each shard's stream cut into ``windows``."""
    horizon = float(arrivals[-1]) + 1.0
    sojourn = np.empty(arrivals.size)
    for s in range(SHARDS):
        rows = np.flatnonzero(shard == s)
        queue = ShardQueue(horizon)
        for part in np.array_split(rows, windows):
            done = queue.serve(arrivals[part], service[part])
            sojourn[part] = done.finish - done.arrival
    return sojourn


# Runs the command and reports its wall time and peak memory. A lean launcher of its own, so
# the peak is the command's: a child forked from this benchmark (hundreds of MB by then) would
# inherit its parent's high-water mark in ru_maxrss.
LAUNCH = """
import json, os, subprocess, sys, time
start = time.perf_counter()
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
print(json.dumps({"seconds": time.perf_counter() - start, "rss_mb": usage.ru_maxrss / 1024,
                  "code": os.waitstatus_to_exitcode(status)}))
"""


def cli_process(args: list[str]) -> tuple[float, float, dict]:
    """``hotshard simulate ARGS --json`` as a user runs it, one whole process: (wall seconds,
    peak resident MB of that process, the observations it wrote)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run.json")
        done = subprocess.run([sys.executable, "-c", LAUNCH, sys.executable, "-m", "hotshard",
                               "simulate", *args, "--json", "-o", out],
                              capture_output=True, text=True, check=True)
        measured = json.loads(done.stdout)
        if measured["code"]:
            raise SystemExit(f"hotshard simulate {' '.join(args)} exited {measured['code']}: "
                             f"{done.stderr.strip()}")
        with open(out) as handle:
            return measured["seconds"], measured["rss_mb"], json.load(handle)


def print_process(what: str, seconds: float, rss_mb: float, run: dict, bar: str) -> None:
    requests = sum(s["requests"] for s in run["shards"])
    hot = max(run["shards"], key=lambda s: s["cpu"])
    print(f"{what:<44} {requests:>13,} {seconds:>8.2f} {requests / seconds / 1e6:>8.2f} "
          f"{rss_mb:>8,.0f}  hottest shard CPU {hot['cpu']:.0%}, p99 "
          f"{run['latency_ms']['p99']:,.0f} ms; {bar}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline-requests", type=float, default=2e5,
                        help="requests for SimPy and Ciw (their rate does not depend on it)")
    parser.add_argument("--duration", type=float, default=3600.0,
                        help="hotshard's simulated seconds in the comparison (the CLI's hour)")
    parser.add_argument("--durations", default="600,3600,14400",
                        help="hotshard's scaling run lengths, simulated seconds")
    parser.add_argument("--day", type=float, default=86400.0,
                        help="simulated seconds of the production run (0: skip it)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    try:
        import ciw
        import simpy
    except ImportError:
        raise SystemExit("the baselines need simpy and ciw: pip install -e '.[bench]'") from None

    lam, mu = RATE / SHARDS, 1 / MEAN_SERVICE
    theory = 1000 / (mu - lam)
    print(f"incident-test: M/M/1 x {SHARDS} shards, {RATE:g} req/s, mean service "
          f"{MEAN_SERVICE * 1000:g} ms, rho {lam / mu:.3f} per shard; theory: mean sojourn "
          f"{theory:.2f} ms, p99 {theory * math.log(100):.1f} ms")
    run_scenario("incident-test", duration=10, seed=args.seed)   # warm-up: numba's cache

    base_n = int(args.baseline_requests)
    arrivals, shard, service = draw(base_n, np.random.default_rng(args.seed))
    ours_t, ours = best_time(lambda: run_scenario("incident-test", duration=args.duration,
                                                  seed=args.seed), 3)
    simpy_t, simpy_sojourn = best_time(lambda: run_simpy(arrivals, shard, service), 1)
    ciw_t, ciw_sojourn = best_time(lambda: run_ciw(base_n, args.seed), 1)

    header = (f"{'simulator':<40} {'requests':>11} {'seconds':>8} {'M req/s':>8} "
              f"{'mean ms':>8} {'p99 ms':>7}")
    print(header)
    print("-" * len(header))
    q = ours.percentiles()
    rows = [
        (f"hotshard simulate ({args.duration:g} s, end to end)", ours.requests, ours_t,
         q["mean"], q["p99"]),
        (f"SimPy {simpy.__version__} (drawing not timed)", base_n, simpy_t,
         float(simpy_sojourn.mean()) * 1000, float(np.percentile(simpy_sojourn, 99)) * 1000),
        (f"Ciw {ciw.__version__} (per-shard M/M/1)", ciw_sojourn.size, ciw_t,
         float(ciw_sojourn.mean()) * 1000, float(np.percentile(ciw_sojourn, 99)) * 1000),
    ]
    for name, n, seconds, mean, p99 in rows:
        print(f"{name:<40} {n:>11,} {seconds:>8.3f} {n / seconds / 1e6:>8.3f} {mean:>8.2f} "
              f"{p99:>7.1f}")
    ours_rate = ours.requests / ours_t
    for name, seconds, n in (("SimPy", simpy_t, base_n), ("Ciw", ciw_t, ciw_sojourn.size)):
        print(f"ratio hotshard simulate / {name}: {ours_rate / (n / seconds):,.0f}x "
              "(simulated requests per second of wall time)")
    same = np.allclose(windowed_sojourn(arrivals, shard, service, 7), simpy_sojourn,
                       rtol=0, atol=1e-9)
    print(f"hotshard's queues, fed SimPy's requests in 7 windows a shard, give SimPy's "
          f"sojourn times (1 ns): {'yes' if same else 'NO'}")

    print()
    header = f"{'simulated':>10} {'requests':>13} {'seconds':>8} {'M req/s':>8} {'ns/request':>10}"
    print(header)
    print("-" * len(header))
    for duration in (float(d) for d in args.durations.split(",")):
        seconds, result = best_time(lambda d=duration: run_scenario(
            "incident-test", duration=d, seed=args.seed), 3 if duration <= 3600 else 1)
        n = result.requests
        print(f"{duration:>9g}s {n:>13,} {seconds:>8.2f} {n / seconds / 1e6:>8.2f} "
              f"{seconds / n * 1e9:>10.1f}")

    print()
    print("whole process (`python -m hotshard simulate ... --json`, start-up and output included)")
    header = (f"{'command':<44} {'requests':>13} {'seconds':>8} {'M req/s':>8} {'peak MB':>8}")
    print(header)
    print("-" * len(header))
    hour = ["--scenario", "incident-test", "--duration", "1h", "--seed", str(args.seed)]
    runs = [cli_process(hour) for _ in range(3)]
    seconds, rss, run = min(runs, key=lambda r: r[0])
    print_process("--scenario incident-test, 1h", seconds, rss, run,
                  f"{'meets' if seconds < 5 else 'MISSES'} < 5 s")
    if args.day > 0:
        day = ["--scenario", "incident-production", "--duration", f"{args.day:g}s",
               "--seed", str(args.seed)]
        seconds, rss, run = cli_process(day)
        print_process(f"--scenario incident-production, {args.day:g}s", seconds, rss, run,
                      f"{'meets' if seconds < 60 else 'MISSES'} < 1 min, "
                      f"{'meets' if rss < 2048 else 'MISSES'} < 2 GB")


if __name__ == "__main__":
    main()
