"""Benchmark: hotshard's FIFO queue simulator against SimPy and Ciw on M/M/1 x 64 shards.

The system is the incident's load test: Poisson arrivals at 5000 req/s split over 64 shards by
a uniform shard choice, one worker per shard, exponential service of mean 5 ms (rho 0.39 per
shard). Three simulators, same run:

* hotshard: ``hotshard.sim.queues.serve`` per shard (the vectorized Lindley recursion), timed
  twice: on the baseline's requests (grouping by shard and serving, like SimPy's run) and for
  one simulated hour with drawing the arrivals, shard choices and service times included;
* SimPy: one environment, a capacity-1 ``Resource`` per shard, a process per request, fed the
  very same arrival, shard and service arrays (drawing them is not timed), so its sojourn times
  must equal ours;
* Ciw: each shard its own single-node M/M/1 simulation with Ciw's exponential distributions
  (Ciw's fastest form here: one 64-node network scans every node per event and ran ~8x slower
  in a trial at 1e4 customers).

Prints simulated requests per second of wall time and the ratios, then hotshard's wall time at
1e6, 1e7 and 1e8 requests (cost should grow linearly; runs above --chunk requests are drawn a
group of shards at a time: a group of G of the 64 shards receives a Poisson stream at G/64 of
the rate, split uniformly among its G, the same process by Poisson thinning). Targets
(issue 9): >= 10 million simulated requests/s for single-worker shards, >= 100x SimPy, and one
simulated hour at 5000 req/s over 64 shards (1.8e7 requests) in under 10 s, drawing included.
Single-threaded throughout.

    pip install -e '.[bench]'    # simpy and ciw, for the baselines only
    python benchmarks/bench_sim.py [--baseline-requests 2e5] [--sizes 1e6,1e7,1e8]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from _timing import best_time

from hotshard.sim.queues import serve


def draw(n: int, rate: float, mean_service: float, shards: int, rng: np.random.Generator):
    """n Poisson arrivals at ``rate``, a uniform shard for each, exponential service times."""
    arrivals = np.cumsum(rng.exponential(1.0 / rate, n))
    shard = rng.integers(0, shards, n, dtype=np.uint8)
    service = rng.exponential(mean_service, n)
    return arrivals, shard, service


def split(shard, shards: int):
    """(order grouping requests by shard, time order kept; each shard's slice bounds)."""
    order = np.argsort(shard, kind="stable")  # a radix sort for uint8: O(n)
    bounds = np.concatenate([[0], np.cumsum(np.bincount(shard, minlength=shards))])
    return order, bounds


def serve_shards(arrivals, shard, service, shards: int):
    """Serve the given requests shard by shard; their sojourn times, in the input's order."""
    order, bounds = split(shard, shards)
    arrivals, service = arrivals[order], service[order]
    sojourn = np.empty(arrivals.size)
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        sojourn[order[lo:hi]] = serve(arrivals[lo:hi], service[lo:hi]).sojourn()
    return sojourn


def run_ours(n: int, rate: float, mean_service: float, shards: int, seed: int, chunk: int,
             workers: int = 1):
    """Draw and serve n requests, at most ~chunk at a time; (requests, mean sojourn).

    Service times are iid, so each shard's are drawn directly in that shard's order.
    """
    rng = np.random.default_rng(seed)
    group = max(1, min(shards, shards * chunk // max(n, 1)))
    done, total_sojourn = 0, 0.0
    for first in range(0, shards, group):
        size = min(group, shards - first)
        m = round(n * size / shards)
        arrivals = np.cumsum(rng.exponential(shards / (rate * size), m))
        order, bounds = split(rng.integers(0, size, m, dtype=np.uint8), size)
        arrivals = arrivals[order]
        service = rng.exponential(mean_service, m)
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            served = serve(arrivals[lo:hi], service[lo:hi], workers)
            total_sojourn += float(served.sojourn().sum())
        done += m
    return done, total_sojourn / done


def run_simpy(arrivals, shard, service, shards: int):
    """The same requests through SimPy; sojourn time of each, in arrival order."""
    import simpy

    env = simpy.Environment()
    workers = [simpy.Resource(env, capacity=1) for _ in range(shards)]
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


def run_ciw(n: int, rate: float, mean_service: float, shards: int, seed: int):
    """Each shard an M/M/1 in Ciw for the time n requests take; (completed, mean sojourn)."""
    import ciw

    horizon = n / rate
    done, total = 0, 0.0
    for s in range(shards):
        ciw.seed(seed + s)
        network = ciw.create_network(
            arrival_distributions=[ciw.dists.Exponential(rate=rate / shards)],
            service_distributions=[ciw.dists.Exponential(rate=1.0 / mean_service)],
            number_of_servers=[1])
        sim = ciw.Simulation(network)
        sim.simulate_until_max_time(horizon)
        records = sim.get_all_records()
        done += len(records)
        total += sum(r.exit_date - r.arrival_date for r in records)
    return done, total / done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=5000.0, help="requests per second")
    parser.add_argument("--shards", type=int, default=64, help="shards (at most 256)")
    parser.add_argument("--service-ms", type=float, default=5.0, help="mean service time")
    parser.add_argument("--baseline-requests", type=float, default=2e5,
                        help="requests for SimPy and Ciw (their rate does not depend on it)")
    parser.add_argument("--sizes", default="1e6,1e7,1e8", help="hotshard's scaling run sizes")
    parser.add_argument("--chunk", type=float, default=2e7,
                        help="most requests drawn at once (bounds memory: ~50 bytes each)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if not 1 <= args.shards <= 256:
        raise SystemExit("--shards must be 1..256 (shard ids are drawn as uint8)")
    try:
        import ciw
        import simpy
    except ImportError:
        raise SystemExit("the baselines need simpy and ciw: pip install -e '.[bench]'") from None

    rate, shards, mean_service = args.rate, args.shards, args.service_ms / 1000
    chunk, base_n = int(args.chunk), int(args.baseline_requests)
    lam, mu = rate / shards, 1 / mean_service
    theory = 1000 / (mu - lam)
    print(f"M/M/1 x {shards} shards: {rate:g} req/s, mean service {args.service_ms:g} ms, "
          f"rho {lam / mu:.3f} per shard; theory: mean sojourn {theory:.3f} ms, "
          f"p99 {theory * math.log(100):.1f} ms")
    serve([0.0, 1.0], [1.0, 1.0])  # warm-up: numpy's first calls

    # --- same run: hotshard, SimPy and Ciw at the baseline size
    arrivals, shard, service = draw(base_n, rate, mean_service, shards,
                                    np.random.default_rng(args.seed))
    ours_t, ours_sojourn = best_time(lambda: serve_shards(arrivals, shard, service, shards), 3)
    simpy_t, simpy_sojourn = best_time(lambda: run_simpy(arrivals, shard, service, shards), 1)
    ciw_t, (ciw_n, ciw_mean) = best_time(
        lambda: run_ciw(base_n, rate, mean_service, shards, args.seed), 1)
    hour_n = round(rate * 3600)
    hour_t, (_, hour_mean) = best_time(
        lambda: run_ours(hour_n, rate, mean_service, shards, args.seed, chunk), 3)

    header = (f"{'simulator':<34} {'requests':>11} {'seconds':>8} {'M req/s':>8} "
              f"{'mean sojourn ms':>15}")
    print(header)
    print("-" * len(header))
    rows = [
        ("hotshard (same requests)", base_n, ours_t, float(ours_sojourn.mean()) * 1000),
        (f"SimPy {simpy.__version__} (same requests)", base_n, simpy_t,
         float(simpy_sojourn.mean()) * 1000),
        (f"Ciw {ciw.__version__} (per-shard M/M/1)", ciw_n, ciw_t, ciw_mean * 1000),
        ("hotshard, 1 h, drawing included", hour_n, hour_t, hour_mean * 1000),
    ]
    for name, n, seconds, mean in rows:
        print(f"{name:<34} {n:>11,} {seconds:>8.3f} {n / seconds / 1e6:>8.3f} {mean:>15.3f}")
    same = np.allclose(simpy_sojourn, ours_sojourn, rtol=0, atol=1e-9)
    print(f"SimPy's sojourn times equal hotshard's (1 ns): {'yes' if same else 'NO'}")
    hour_rate = hour_n / hour_t
    for name, seconds, n in (("SimPy", simpy_t, base_n), ("Ciw", ciw_t, ciw_n)):
        print(f"ratio hotshard/{name}: {base_n / ours_t / (n / seconds):,.0f}x same size "
              f"(not drawing), {hour_rate / (n / seconds):,.0f}x at 1 h (drawing included)")
    print(f"one simulated hour ({hour_n:,} requests): {hour_t:.2f} s "
          f"({'meets' if hour_t < 10 else 'MISSES'} < 10 s); {hour_rate / 1e6:.1f} M req/s "
          f"({'meets' if hour_rate >= 1e7 else 'MISSES'} >= 10 M/s)")

    # --- linear cost: hotshard alone at growing sizes, drawing included
    print()
    header = f"{'requests':>13} {'seconds':>8} {'M req/s':>8} {'ns/request':>10} {'groups':>6}"
    print(header)
    print("-" * len(header))
    for n in (int(float(s)) for s in args.sizes.split(",")):
        repeats = 3 if n <= 2e7 else 1
        seconds, _ = best_time(lambda n=n: run_ours(n, rate, mean_service, shards, args.seed,
                                                    chunk), repeats)
        groups = math.ceil(shards / max(1, min(shards, shards * chunk // n)))
        print(f"{n:>13,} {seconds:>8.3f} {n / seconds / 1e6:>8.2f} {seconds / n * 1e9:>10.1f} "
              f"{groups:>6}")

    # --- the compiled path: four workers per shard, same load per worker
    n4 = hour_n
    seconds, _ = best_time(lambda: run_ours(n4, rate, 4 * mean_service, shards, args.seed,
                                            chunk, workers=4), 3)
    print(f"\n4 workers per shard (M/M/4, compiled earliest-free-worker), {n4:,} requests: "
          f"{seconds:.3f} s, {n4 / seconds / 1e6:.1f} M req/s, drawing included")


if __name__ == "__main__":
    main()
