"""Benchmark: keys/s of each partitioner, vectorized (numba kernels) vs a per-key Python loop.

The baseline places the same keys one at a time, the way a script calling a per-key hash
function would: each key encoded and hashed on its own (same kernels, called per key, so the
ratio measures what vectorizing buys). Prints keys/s for both and the ratio.

    python benchmarks/bench_partition.py [--keys 200000] [--loop-keys 5000] [--shards 64]
"""

from __future__ import annotations

import argparse

from _timing import best_rate

from hotshard.shards.partitioners import PARTITIONERS, make_partitioner


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--loop-keys", type=int, default=5_000)
    parser.add_argument("--shards", type=int, default=64)
    args = parser.parse_args()
    keys = [f"channel-{i * 7919 % 10_000_019}" for i in range(args.keys)]
    loop_keys = keys[: args.loop_keys]
    print(f"{args.keys:,} text keys, {args.shards} shards")
    print(f"{'partitioner':>14} {'vectorized keys/s':>18} {'per-key loop keys/s':>20} "
          f"{'ratio':>7}")
    for name in PARTITIONERS:
        if name == "map":
            continue  # a dictionary lookup: nothing to vectorize
        part = make_partitioner(name, args.shards)
        part.shard_of(keys[:10])  # compile
        vec = best_rate(lambda part=part: part.shard_of(keys), len(keys))
        loop = best_rate(lambda part=part: [part.shard_of([k]) for k in loop_keys], len(loop_keys),
                    repeats=1)
        print(f"{name:>14} {vec:18,.0f} {loop:20,.0f} {vec / loop:6.0f}x")


if __name__ == "__main__":
    main()
