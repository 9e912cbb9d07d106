"""The incident on real software: a live 6-node Redis Cluster, uniform keys against profile keys.

Runs, on one cluster started here (`hotshard cluster up`, no persistence):

1. `redis-benchmark --cluster -r N` (the Redis project's own load generator: uniform random
   keys over N, the incident's mistake), GET/SET;
2. `hotshard drive URL --dist uniform:N` at R req/s (our driver, uniform keys);
3. `hotshard drive URL examples/incident-event.profile.json` at a lower rate (profile keys);
4. the same profile keys through `hotshard serve --store` with and without `--split 6` on the
   hot channel (the gateway is one Python process, so this runs at a few hundred req/s and the
   load is measured as each node's share of data commands).

Reads are `XREVRANGE chat:{key} + - COUNT 500` so that a read costs a node real CPU (the
streams are filled first by the writes of a warm-up run). Per node: CPU over the run from INFO
(used_cpu_sys + used_cpu_user deltas) and data commands from INFO commandstats; the baseline is
redis-benchmark on the same cluster in the same run. Prints the README's table.

    python benchmarks/bench_redis_incident.py [--seconds 10] [--rate 2000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROFILE = str(ROOT / "examples" / "incident-event.profile.json")
READ = "XREVRANGE chat:{{key}} + - COUNT 500"
DATA = ("cmdstat_xrevrange", "cmdstat_xadd", "cmdstat_get", "cmdstat_set")


def node_counters(state) -> list[tuple[float, int]]:
    import redis

    out = []
    for port in state.ports:
        client = redis.Redis(host=state.host, port=port, password=state.password)
        cpu = client.info("cpu")
        calls = client.info("commandstats")
        out.append((float(cpu["used_cpu_sys"]) + float(cpu["used_cpu_user"]),
                    sum(calls.get(k, {}).get("calls", 0) for k in DATA)))
    return out


def measure(state, run) -> dict:
    before = node_counters(state)
    started = time.monotonic()
    extra = run() or {}
    wall = time.monotonic() - started
    after = node_counters(state)
    cpu = [(a[0] - b[0]) / wall for a, b in zip(after, before, strict=True)]
    calls = [a[1] - b[1] for a, b in zip(after, before, strict=True)]
    total = sum(calls) or 1
    return {"cpu": cpu, "share": [c / total for c in calls], "wall": wall, **extra}


def hotshard(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "hotshard", *args], capture_output=True,
                          text=True, cwd=ROOT, check=True)


def drive(url: str, keys: str, rate: float, seconds: float, tmp: Path, name: str,
          read: str | None = READ) -> dict:
    out = tmp / f"{name}.json"
    source = ["--dist", keys] if ":" in keys and not keys.endswith(".json") else [keys]
    args = ["drive", url, *source, "--rps", str(rate), "--duration", f"{seconds}s",
            "--seed", "3", "-q", "-o", str(out)]
    if read:
        args += ["--read", read]
    hotshard(*args)
    obs = json.loads(out.read_text())
    return {"p50": obs["latency_ms"]["p50"], "p99": obs["latency_ms"]["p99"],
            "achieved": obs["achieved_rps"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=2000.0)
    args = parser.parse_args()
    from hotshard.cluster import local
    from tests.cluster.test_cluster import _free_base
    from tests.service._traffic import serve

    rows = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        state = local.up(tmp / "cluster", nodes=6, port=_free_base(6), persist=False)
        url = state.url
        try:
            # fill the streams: every channel gets history to read
            drive(url, PROFILE, args.rate, 5, tmp, "fill-profile", read=None)
            drive(url, "uniform:300000", args.rate, 5, tmp, "fill-uniform", read=None)

            def bench() -> dict:
                proc = subprocess.run(
                    ["redis-benchmark", "--cluster", "-h", state.host, "-a", state.password,
                     "-p", str(state.ports[0]), "-r", "300000", "-n", str(int(args.rate * 20)),
                     "-t", "get,set", "-q", "-c", "20"], capture_output=True, text=True)
                rates = [float(line.split(":")[1].split()[0]) for line in
                         proc.stdout.replace("\r", "\n").splitlines()
                         if "requests per second" in line and ":" in line]
                return {"p50": None, "p99": None,
                        "achieved": statistics.mean(rates) if rates else None}

            rows.append(("redis-benchmark --cluster -r 300000 (GET/SET, uniform)",
                         measure(state, bench)))
            rows.append((f"drive uniform:300000 at {args.rate:,.0f}/s",
                         measure(state, lambda: drive(url, "uniform:300000", args.rate,
                                                      args.seconds, tmp, "uniform"))))
            low = args.rate * 0.6
            rows.append((f"drive profile keys at {low:,.0f}/s",
                         measure(state, lambda: drive(url, PROFILE, low, args.seconds, tmp,
                                                      "profile"))))
            for split in (0, 6):
                data = tmp / f"serve-{split}"
                extra = ["--split-into", str(split), "--mitigate", "627051655"] if split else []
                with serve(data, "--store", url, *extra) as svc:
                    name = "serve --store, profile keys, 200/s" + (
                        f", split {split}" if split else "")
                    rows.append((name, measure(state, lambda svc=svc, split=split: drive(
                        svc.url, PROFILE, 200, args.seconds, tmp, f"serve{split}",
                        read="GET /channels/{key}/messages?limit=50"))))
        finally:
            local.down(tmp / "cluster")
    print("| run | nodes' CPU (each, % of a core) | hottest / median CPU | hottest node's "
          "share of commands | p50 / p99 (ms) | achieved req/s |")
    print("|---|---|---|---|---|---|")
    for name, r in rows:
        cpu = [100 * c for c in r["cpu"]]
        ratio = max(cpu) / max(statistics.median(cpu), 1e-9)
        lat = f"{r['p50']:.1f} / {r['p99']:.1f}" if r.get("p99") is not None else "-"
        achieved = f"{r['achieved']:,.0f}" if r.get("achieved") else "-"
        print(f"| {name} | {' '.join(f'{c:.0f}' for c in cpu)} | {ratio:.1f}x | "
              f"{100 * max(r['share']):.0f}% | {lat} | {achieved} |")


if __name__ == "__main__":
    main()
