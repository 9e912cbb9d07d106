"""Benchmark: hotshard's key sampler against numpy baselines on a 10-million-key table.

The table is profile-like: 10 million keys whose weights are per-key request counts drawn from a
discrete power law (alpha 1.8), most frequent first, as a profile's head and tail are. Three
samplers draw the same number of keys in the same run:

* hotshard: ``sampler.from_weights`` (alias table over count classes + uniform pick inside);
* ``numpy.random.Generator.choice(n, size, p=...)`` (revalidates and rebuilds its CDF per call);
* ``searchsorted`` on a precomputed cumulative table (binary search per draw).

Prints draws/s and the ratios. Targets (issue 4): >= 50 M draws/s on one core, >= 40x choice.
Then times `generate` to Parquet (messages/s) and extrapolates to the incident's 2 billion.

    python benchmarks/bench_sampler.py [--keys 1e7] [--draws 2e7]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from _timing import best_rate

from hotshard.workload import sampler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=float, default=1e7)
    parser.add_argument("--draws", type=float, default=2e7)
    parser.add_argument("--baseline-draws", type=float, default=2e6,
                        help="draws for the slow baselines (their rate does not depend on it)")
    parser.add_argument("--messages", type=float, default=2**23, help="messages for generate")
    args = parser.parse_args()
    n_keys, draws, base_draws = int(args.keys), int(args.draws), int(args.baseline_draws)

    from hotshard.profile.powerlaw import DiscretePowerLaw

    weights = np.sort(DiscretePowerLaw(1.8, 1).rvs(n_keys, rng=1).astype(np.float64))[::-1]
    p = weights / weights.sum()
    cdf = np.cumsum(p)
    ours = sampler.from_weights(weights)
    ours.sample(1000, 0)  # load the compiled kernels
    rng = np.random.default_rng(2)
    print(f"table: {n_keys:,} keys, {ours.n_classes:,} count classes, "
          f"top key {p[0]:.2%} of draws")

    def in_batches(draw_batch, batch: int, total: int):
        def run():
            for _ in range(total // batch):
                draw_batch(batch)
        return run

    def choice(k):
        return rng.choice(n_keys, k, p=p)

    def search(k):
        return np.searchsorted(cdf, rng.random(k) * cdf[-1], side="right")

    # the baselines are slow: fewer draws; their rates do not depend on the total, but they do
    # on the batch size (choice rebuilds its CDF on every call), so both sizes are shown
    rates = {"hotshard": best_rate(lambda: ours.sample(draws, rng), draws)}
    for batch in (1 << 20, 1 << 16):
        total = max(batch, base_draws // batch * batch)
        rates[f"numpy choice(p=) x{batch}"] = best_rate(in_batches(choice, batch, total), total,
                                                        repeats=1)
        rates[f"searchsorted x{batch}"] = best_rate(in_batches(search, batch, total), total,
                                                    repeats=1)
    for name, rate in rates.items():
        print(f"{name:>30}: {rate / 1e6:8.1f} M draws/s")
    for batch in (1 << 20, 1 << 16):
        r_choice = rates["hotshard"] / rates[f"numpy choice(p=) x{batch}"]
        r_search = rates["hotshard"] / rates[f"searchsorted x{batch}"]
        print(f"hotshard vs choice in batches of {batch:,}: {r_choice:,.0f}x (target >= 40x: "
              f"{'met' if r_choice >= 40 else 'MISSED'}); vs searchsorted: {r_search:,.0f}x")
    print(f"hotshard one core: {rates['hotshard'] / 1e6:.1f} M draws/s (target >= 50: "
          f"{'met' if rates['hotshard'] >= 50e6 else 'MISSED'})")

    from hotshard.workload.generate import plan_workload
    from hotshard.workload.messages import write_events
    from hotshard.workload.profile_sampler import from_profile  # noqa: F401 (import cost)

    messages = int(args.messages)
    plan = plan_workload(profile=None, dist=f"zipf:0.99:{n_keys}", events=messages, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        warm = plan_workload(profile=None, dist=f"zipf:0.99:{n_keys}", events=1000, seed=1)
        write_events(warm, str(Path(tmp) / "warm.parquet"), fmt="parquet")  # compile, import
        for workers in (1, 2):
            out = Path(tmp) / f"w{workers}.parquet"
            start = time.perf_counter()
            write_events(plan, str(out), fmt="parquet", workers=workers)
            rate = messages / (time.perf_counter() - start)
            hours = 2e9 / rate / 3600
            print(f"generate --workers {workers} to Parquet: {rate / 1e6:.2f} M messages/s "
                  f"-> 2 billion messages in {hours * 60:.0f} min on this machine")


if __name__ == "__main__":
    main()
