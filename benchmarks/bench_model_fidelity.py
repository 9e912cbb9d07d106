"""Benchmark: the simulator against live runs, judged against the machine's own noise.

Every live run is made as a user makes it (``hotshard drive ... -o run.json``), and every
prediction too (``hotshard simulate replay run.json`` / ``simulate like run.json --rps R``):

1. ``hotshard serve`` with 2 and then 4 shards, ``--cost-ms`` so a shard saturates at a few
   dozen requests a second (the whole demand stays well under this machine's two cores), keys
   from a profile with one hot channel; three rates that put the hot shard near 30%, 60% and
   85% CPU (from a short pilot run), each run twice. Per rate: the hot shard's CPU and p99
   measured (both runs: their difference is the machine's noise), replayed from the run
   itself, and predicted from the 30% run at the new rate (``--like``: the honest test, the
   model calibrated once); the other shards' worst CPU error.
2. A live 3-node Redis Cluster (``hotshard cluster``), the same profile at two rates through
   ``drive redis-cluster://``: the same comparison per node.
3. One mitigation switched on at run time: the service's gateway cache (``POST
   /admin/mitigations {"cache_ttl_s": 1}``) at the 60% rate; the hot shard's measured CPU
   change against the model's (``--like`` with ``--cache-hit`` from the TTL cache's hit rate,
   lambda T / (1 + lambda T) for a channel read lambda times a second).

Prints the README's table.

    python benchmarks/bench_model_fidelity.py [--seconds 40] [--cost-ms 20] [--quick]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

HOT_KEY = 7
HOT_SHARE = 0.5          # one channel with half of all requests: the only one the cache takes
TAIL_KEYS = 2000         # the rest spread evenly: no other channel near the 5% hot share
TARGETS = (0.30, 0.60, 0.85)
CACHE_TTL_S = 1.0


def hotshard(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run([sys.executable, "-m", "hotshard", *args], capture_output=True,
                         text=True)
    if check and out.returncode not in (0, 3):
        raise SystemExit(f"hotshard {' '.join(args)} failed: {out.stderr.strip()}")
    return out


def make_profile(work: Path) -> Path:
    """A profile of 200,000 events: channel 7 with half of them, 2,000 others evenly."""
    rng = np.random.default_rng(11)
    n = 200_000
    keys = np.where(rng.random(n) < HOT_SHARE, HOT_KEY,
                    1000 + rng.integers(0, TAIL_KEYS, n)).astype(np.int64)
    trace = work / "trace.parquet"
    pq.write_table(pa.table({"channel": keys}), trace)
    profile = work / "hot.profile.json"
    hotshard("profile", str(trace), "--key", "channel", "-o", str(profile))
    return profile


def drive(url: str, profile: Path, rps: float, seconds: float, seed: int, out: Path) -> dict:
    hotshard("drive", url, str(profile), "--rps", f"{rps:.3f}", "--duration",
             f"{seconds:g}s", "--seed", str(seed), "--max-error-rate", "5", "-o", str(out))
    return json.loads(out.read_text())


def simulate(*args: str) -> dict:
    return json.loads(hotshard("simulate", *args, "--json").stdout)


def shard_rows(doc: dict) -> list[dict]:
    def order(s):
        tail = str(s.get("node") or s["id"]).rsplit(":", 1)[-1]
        return int(tail) if tail.isdigit() else 0
    return sorted(doc["shards"], key=order)


def hot_index(doc: dict) -> int:
    rows = shard_rows(doc)
    return int(np.argmax([r.get("cpu") or 0.0 for r in rows]))


def cpu_points(a: dict, b: dict, i: int) -> float:
    return 100.0 * abs((shard_rows(a)[i]["cpu"] or 0.0) - (shard_rows(b)[i]["cpu"] or 0.0))


def factor(a: float, b: float) -> float:
    return max(a / b, b / a) if a > 0 and b > 0 else float("nan")


def p99(doc: dict, i: int) -> float:
    return float(shard_rows(doc)[i]["p99_ms"] or float("nan"))


def worst_other(a: dict, b: dict, hot: int) -> float:
    n = len(shard_rows(a))
    return max((cpu_points(a, b, i) for i in range(n) if i != hot), default=0.0)


def row(name: str, runs: list[dict], replayed: dict, like: dict | None) -> str:
    """One table row: measured (two runs), replay and --like for the hot shard."""
    hot = hot_index(runs[0])
    m = [100 * shard_rows(r)[hot]["cpu"] for r in runs]
    noise_cpu = abs(m[0] - m[1]) if len(m) > 1 else float("nan")
    noise_p99 = factor(p99(runs[0], hot), p99(runs[1], hot)) if len(runs) > 1 else float("nan")
    rep_cpu = 100 * shard_rows(replayed)[hot]["cpu"]
    cells = [name, " / ".join(f"{x:.0f}%" for x in m), f"{noise_cpu:.1f}",
             f"{rep_cpu:.0f}% ({rep_cpu - m[0]:+.1f})",
             f"{worst_other(runs[0], replayed, hot):.1f}",
             " / ".join(f"{p99(r, hot):.0f}" for r in runs), f"x{noise_p99:.2f}",
             f"{p99(replayed, hot):.0f} (x{factor(p99(replayed, hot), p99(runs[0], hot)):.2f})"]
    if like is not None:
        like_cpu = 100 * shard_rows(like)[hot]["cpu"]
        cells += [f"{like_cpu:.0f}% ({like_cpu - m[0]:+.1f})",
                  f"{p99(like, hot):.0f} (x{factor(p99(like, hot), p99(runs[0], hot)):.2f})"]
    else:
        cells += ["-", "-"]
    return "| " + " | ".join(cells) + " |"


HEADER = ("| run | hot CPU measured (2 runs) | noise, points | replay (error) | other shards' "
          "worst CPU error, points | hot p99 ms measured | noise | replay p99 ms | --like from "
          "the 30% run: CPU | --like p99 ms |\n|---|---|---|---|---|---|---|---|---|---|")


def serve_series(work: Path, profile: Path, shards: int, cost_ms: float, seconds: float,
                 repeats: int) -> tuple[list[str], dict]:
    from hotshard.service.launch import launched

    lines = []
    with launched(work / f"data{shards}", shards=shards, partitioner="kafka",
                  cost_ms=cost_ms) as svc:
        pilot = drive(svc.url, profile, 15.0, 10.0, 99, work / f"pilot{shards}.json")
        hot = hot_index(pilot)
        rows = shard_rows(pilot)
        per_request = sum(r["cpu"] for r in rows) * pilot["duration_s"] / sum(
            r["requests"] for r in rows)
        share = rows[hot]["requests"] / sum(r["requests"] for r in rows)
        base_path = None
        mid = None
        rps = TARGETS[0] / (share * per_request)
        for target in TARGETS:
            runs = []
            for k in range(repeats):
                path = work / f"s{shards}-{target}-{k}.json"
                runs.append(drive(svc.url, profile, rps, seconds, k + 1, path))
                if k == 0:
                    first = path
            replayed = simulate("replay", str(first))
            like = None
            if base_path is None:
                base_path = first
            else:
                like = simulate("like", str(base_path), "--rps", f"{rps:.3f}")
            lines.append(row(f"serve {shards} shards, {target:.0%} at {rps:.1f} req/s",
                             runs, replayed, like))
            if target == 0.60:
                mid = (rps, runs[0], first)
            # the next rate from this run's own hot-shard CPU (CPU is linear in the rate):
            # a pilot's 80 requests misjudge the hot share by a few points, 95% for 85%
            measured_hot = shard_rows(runs[0])[hot_index(runs[0])]["cpu"]
            following = TARGETS[min(TARGETS.index(target) + 1, len(TARGETS) - 1)]
            rps = rps * following / measured_hot
        if shards == 2 and mid is not None:
            lines.append(cache_change(svc, profile, mid, base_path, seconds, work))
    return lines, {"per_request_ms": per_request * 1000, "hot_share": share}


def cache_change(svc, profile: Path, mid, base_path: Path, seconds: float, work: Path) -> str:
    """Switch the gateway cache on at run time; the hot shard's CPU change, measured and
    predicted (the TTL cache's hit rate for the hot channel's reads)."""
    rps, before, _ = mid
    request = urllib.request.Request(
        svc.url + "/admin/mitigations", method="POST",
        data=json.dumps({"cache_ttl_s": CACHE_TTL_S}).encode(),
        headers={"Authorization": f"Bearer {svc.admin_token}",
                 "content-type": "application/json"})
    urllib.request.urlopen(request, timeout=5).read()
    # the gateway finds the hot channel from its recent traffic before it caches it
    drive(svc.url, profile, rps, 4.0, 50, work / "cache-warm.json")
    after = drive(svc.url, profile, rps, seconds, 51, work / "cache-on.json")
    reads = before["drive"]["reads"] / max(before["drive"]["reads"] + before["drive"]["writes"],
                                           1)
    lam = rps * HOT_SHARE * reads          # the hot channel's reads a second
    hit = lam * CACHE_TTL_S / (1 + lam * CACHE_TTL_S)
    without = simulate("like", str(base_path), "--rps", f"{rps:.3f}")
    with_cache = simulate("like", str(base_path), "--rps", f"{rps:.3f}", "--cache-hit",
                          f"{hit:.4f}", "--cached-keys", "1")
    hot = hot_index(before)
    measured = 100 * (shard_rows(after)[hot]["cpu"] - shard_rows(before)[hot]["cpu"])
    predicted = 100 * (shard_rows(with_cache)[hot]["cpu"] - shard_rows(without)[hot]["cpu"])
    return (f"\ngateway cache switched on at run time (TTL {CACHE_TTL_S:g} s, predicted hit "
            f"rate of the hot channel's reads {hit:.3f}): hot shard CPU "
            f"{100 * shard_rows(before)[hot]['cpu']:.0f}% -> "
            f"{100 * shard_rows(after)[hot]['cpu']:.0f}%, change {measured:+.1f} points "
            f"measured, {predicted:+.1f} predicted (error {predicted - measured:+.1f}; bar 5)")


def redis_series(work: Path, profile: Path, seconds: float, repeats: int,
                 rates: tuple[float, ...]) -> list[str]:
    from hotshard.cluster import local

    port = 17300
    state = local.up(work / "cluster", nodes=3, port=port, persist=False)
    lines = []
    try:
        url = f"redis-cluster://:{state.password}@127.0.0.1:{state.ports[0]}"
        drive(url, profile, 500.0, 4.0, 98, work / "redis-warm.json")   # fill the streams
        for rps in rates:
            runs = [drive(url, profile, rps, seconds, k + 1, work / f"r{rps}-{k}.json")
                    for k in range(repeats)]
            replayed = simulate("replay", str(work / f"r{rps}-0.json"), "-p",
                                "redis-cluster")
            lines.append(row(f"Redis 3 nodes at {rps:g} req/s", runs, replayed, None))
    finally:
        local.down(work / "cluster")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--cost-ms", type=float, default=20.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true",
                        help="2 shards only, 15 s runs, no Redis (a smoke run)")
    args = parser.parse_args()
    seconds = 15.0 if args.quick else args.seconds
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        profile = make_profile(work)
        print(HEADER)
        notes = []
        for shards in ((2,) if args.quick else (2, 4)):
            lines, info = serve_series(work, profile, shards, args.cost_ms, seconds,
                                       args.repeats)
            for line in lines:
                print(line, flush=True)
            notes.append(f"serve {shards} shards: {info['per_request_ms']:.1f} ms of shard CPU "
                         f"a request, hot shard {info['hot_share']:.0%} of requests")
        if not args.quick:
            for line in redis_series(work, profile, seconds, args.repeats, (1000.0, 2000.0)):
                print(line, flush=True)
        print("\n" + "\n".join(notes))


if __name__ == "__main__":
    main()
