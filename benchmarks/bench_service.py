"""Benchmark: the reference service (`hotshard serve`): hop cost, bulk load, mitigations.

Three measurements on a real service started on a free loopback port:

1. **The gateway -> shard hop** at low load (20 sequential reads/s): its p50 as the gateway
   measures it (round trip to the shard minus the shard's own time, /stats ``hop_p50_ms``),
   against the named baseline of a whole HTTP request to the gateway from a client on the same
   machine (httpx, keep-alive) in the same run. Target (issue 10): hop p50 under 1 ms.
2. **Bulk load** of ``--load-events`` messages (`hotshard generate` output, Parquet) through
   ``hotshard serve --load``, against the baseline of one process inserting the same rows into
   one SQLite database with ``executemany`` in one transaction (the floor of what SQLite does,
   with no placement, no IPC, no per-shard files). Target: 1 million in well under a minute.
3. **Mitigations**: the skew experiment of tests/service/test_skew.py, with longer phases:
   4 shards, 5 ms CPU per read, Poisson 150 req/s, 90% reads, keys from
   examples/incident-event.profile.json; per phase each worker's CPU share and the hot shard's
   p99. This is the table in the README.

    python benchmarks/bench_service.py [--phase-seconds 10] [--load-events 1e6]
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.service._traffic import profile_keys, send_traffic, serve  # noqa: E402

PROFILE = ROOT / "examples" / "incident-event.profile.json"


def hop(tmp: Path) -> None:
    with serve(tmp / "hop", "--shards", "4") as svc, httpx.Client(base_url=svc.url) as client:
        client.post("/channels/bench/messages", json={"user": "u", "body": "x" * 100})
        http = []
        for _ in range(200):
            started = time.perf_counter()
            client.get("/channels/bench/messages", params={"limit": 20})
            http.append(time.perf_counter() - started)
            time.sleep(0.05)
        stats = svc.stats()["service"]
    http_p50 = statistics.median(http) * 1000
    print(f"hop: gateway->shard p50 {stats['hop_p50_ms']:.3f} ms (p99 "
          f"{stats['hop_p99_ms']:.3f} ms); baseline whole HTTP request p50 {http_p50:.3f} ms; "
          f"the hop is {stats['hop_p50_ms'] / http_p50:.2f}x of it "
          f"[{'PASS' if stats['hop_p50_ms'] < 1 else 'FAIL'}: under 1 ms]")


def load(tmp: Path, events: int) -> None:
    from hotshard.cli import main

    out = tmp / "load.parquet"
    main(["generate", str(ROOT / "examples" / "incident.profile.json"), "--messages",
          str(events), "--seed", "1", "-o", str(out)])
    import pyarrow.parquet as pq

    table = pq.read_table(out, columns=["channel_id", "user_id", "size", "timestamp"])
    rows = [(str(c), i, f"u{u}", "m" * max(1, s), int(t.timestamp() * 1000)) for i, (c, u, s, t)
            in enumerate(zip(*(table.column(n).to_pylist() for n in table.column_names),
                             strict=True))]
    db = sqlite3.connect(tmp / "baseline.sqlite3", isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE messages (channel TEXT, id INTEGER, user TEXT, body TEXT, "
               "ts_ms INTEGER, PRIMARY KEY (channel, id)) WITHOUT ROWID")
    started = time.perf_counter()
    db.execute("BEGIN")
    db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?)", rows)
    db.execute("COMMIT")
    baseline = time.perf_counter() - started
    db.close()
    started = time.perf_counter()
    with serve(tmp / "load", "--shards", "4", "--load", str(out), timeout=600):
        ours = time.perf_counter() - started
    print(f"bulk load {events:,} messages into 4 shards: {ours:.1f} s incl. start "
          f"({events / ours:,.0f}/s); baseline one-process executemany into one SQLite file "
          f"{baseline:.1f} s ({events / baseline:,.0f}/s); ratio {ours / baseline:.2f}x "
          f"[{'PASS' if ours < 60 else 'FAIL'}: under a minute]")


def preload(tmp: Path) -> Path:
    """History to read: 200,000 messages from the same profile, so the cost of a read does not
    drift upwards from phase to phase as channels fill up."""
    from hotshard.cli import main

    out = tmp / "history.parquet"
    main(["generate", str(PROFILE), "--messages", "2e5", "--seed", "2", "-o", str(out)])
    return out


def mitigations(tmp: Path, seconds: float) -> None:
    rate = 150.0
    n = int(rate * seconds)
    keys = profile_keys(PROFILE, 2 * n, seed=7)
    warm_up, traffic = keys[:n], keys[n:]  # every measured phase replays the same requests
    hot_channel = Counter(traffic).most_common(1)[0][0]
    rows = []
    history = preload(tmp)
    with serve(tmp / "mit", "--shards", "4", "--cost-ms", "5", "--load", str(history)) as svc:
        hot = int(svc.get(f"/channels/{hot_channel}/messages").headers["x-shard"])

        def phase(name: str, keys: list[str], changes: dict | None) -> None:
            if changes is not None:
                off = {"coalesce": False, "cache_ttl_s": 0, "replicas": 1}
                svc.post("/admin/mitigations", json={**off, **changes,
                                                     "channels": [hot_channel]},
                         headers=svc.admin_headers)
            before = svc.stats()
            started = time.monotonic()
            send_traffic(svc.url, keys, rate=rate, seed=1)
            wall = time.monotonic() - started
            after = svc.stats()
            cpu = {}
            for b, a in zip(before["shards"], after["shards"], strict=True):
                cpu[(a["id"], 0)] = (a["cpu_seconds"] - b["cpu_seconds"]) / wall
                old = {r["replica"]: r["cpu_seconds"] for r in b["replicas"]}
                for r in a["replicas"]:
                    cpu[(a["id"], r["replica"])] = (r["cpu_seconds"] - old.get(r["replica"], 0)
                                                    ) / wall
            total = sum(cpu.values())
            top = max(cpu, key=cpu.get)
            others = [v for (s, r), v in cpu.items() if r == 0 and s != hot]
            shard = after["shards"][hot]
            rows.append((name, 100 * cpu[(hot, 0)], 100 * statistics.median(others),
                         100 * cpu[top] / total, 100 * total, shard["p99_ms"],
                         shard["cache_hits"] - before["shards"][hot]["cache_hits"],
                         shard["coalesced"] - before["shards"][hot]["coalesced"]))

        phase("warm-up", warm_up, None)
        rows.clear()
        phase("none", traffic, None)
        phase("coalesce", traffic, {"coalesce": True})
        phase("cache 1s", traffic, {"cache_ttl_s": 1.0})
        phase("3 replicas (primary + 2)", traffic, {"replicas": 3})
        phase("split 4x250ms", traffic, {"split_into": 4, "split_bucket_ms": 250})
    print(f"\nmitigations ({seconds:g} s per phase, 150 req/s, 5 ms CPU per read; hot shard "
          f"{hot}, channel {hot_channel}):")
    print("| mitigation | hot shard CPU | median other shard | hottest process share of "
          "worker CPU | all workers' CPU | hot shard p99 (ms) | cache hits | coalesced |")
    print("|---|---|---|---|---|---|---|---|")
    for name, hot_cpu, other, share, total, p99, hits, coalesced in rows:
        print(f"| {name} | {hot_cpu:.0f}% | {other:.0f}% | {share:.0f}% | {total:.0f}% | "
              f"{p99:.0f} | {hits} | {coalesced} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--phase-seconds", type=float, default=10.0)
    parser.add_argument("--load-events", type=float, default=1e6)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        hop(Path(tmp))
        load(Path(tmp), int(args.load_events))
        mitigations(Path(tmp), args.phase_seconds)


if __name__ == "__main__":
    main()
