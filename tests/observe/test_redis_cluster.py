"""A live 3-node `hotshard cluster` driven with the incident-event profile's keys, observed two
ways at once: `observe redis-cluster://` (every node's INFO at the window's edges) and
`observe prometheus --preset redis` through Debian's redis_exporter (one exporter, the
multi-target ``/scrape?target=`` form, scraped every second by a real Prometheus).

Tolerance (as in tests/cluster/test_cluster.py): with N commands a node's measured share has
sd <= 0.5 / sqrt(N); at N >= 22,000 that is <= 0.34 pp. Beside the drive's commands the nodes
count a few of their own (logins, the slot map, the exporter's ~10 questions a scrape, the
same on every node): under 1% of N, which moves a share by less than 1% of its distance to
1/3, ~0.1 pp. The prediction's own error is ~0.1 pp. So 1 pp is over twice the sum. The two
observations see the same commands over nearly the same window (the exporter's scrapes and
the INFO snapshots differ by under a second of idle time), so they agree to ~0.1 pp.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
import urllib.request

import pytest

from hotshard.cluster import local
from hotshard.observe.redis_cluster import observe_redis_cluster
from tests.cluster._clusters import free_base, predicted_node_shares
from tests.conftest import ROOT, run_cli
from tests.observe._prom import free_port, need, prometheus, scrapes, stop

pytestmark = pytest.mark.slow

PROFILE = str(ROOT / "examples" / "incident-event.profile.json")


@contextlib.contextmanager
def redis_exporter(password: str):
    """Debian's prometheus-redis-exporter on a free port (the password in its environment,
    not on its command line); yields HOST:PORT; stopped by its pid."""
    binary = need("prometheus-redis-exporter")
    port = free_port()
    proc = subprocess.Popen([binary, f"-web.listen-address=127.0.0.1:{port}",
                             "-redis.addr=", "-log-format=json"],
                            env={**os.environ, "REDIS_PASSWORD": password},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), \
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1):
                break
            assert proc.poll() is None, "redis_exporter exited"
            assert time.monotonic() < deadline, "redis_exporter not up within 20 s"
            time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc)


def _shares(obs: dict) -> list[float]:
    counts = [s["requests"] for s in obs["shards"]]
    return [c / sum(counts) for c in counts]


def test_redis_cluster_observed_directly_and_through_redis_exporter(tmp_path):
    state = local.up(tmp_path / "c", nodes=3, port=free_base(3), persist=False)
    try:
        expected, hot = predicted_node_shares(PROFILE, state)
        with redis_exporter(state.password) as exporter:
            targets = [f"redis://127.0.0.1:{p}" for p in state.ports]
            jobs = {"redis": {"metrics_path": "/scrape",
                              "static_configs": [{"targets": targets}],
                              "relabel_configs": [
                                  {"source_labels": ["__address__"],
                                   "target_label": "__param_target"},
                                  {"source_labels": ["__param_target"],
                                   "target_label": "instance"},
                                  {"target_label": "__address__", "replacement": exporter}]}}
            with prometheus(tmp_path / "prom", jobs) as prom:
                t0 = time.time()
                scrapes(prom, "redis", t0, targets=3)
                sampled, finish, result = threading.Event(), threading.Event(), {}

                def hold(_seconds: float) -> None:  # the window: the drive runs meanwhile
                    sampled.set()
                    finish.wait(120)

                def watch() -> None:
                    try:
                        result["obs"] = observe_redis_cluster(state.url, duration=1.0,
                                                              sleep=hold)
                    except Exception as exc:  # re-raised in the test's thread
                        result["error"] = exc
                        sampled.set()

                watcher = threading.Thread(target=watch)
                watcher.start()
                try:
                    assert sampled.wait(30)
                    r = run_cli("drive", state.url, PROFILE, "--rps", "2500",
                                "--duration", "10s", "--seed", "5", "-q", "-o",
                                str(tmp_path / "drive.json"))
                    assert r.returncode == 0, r.stderr
                finally:
                    finish.set()
                    watcher.join(60)
                assert "error" not in result, result.get("error")
                scrapes(prom, "redis", time.time(), targets=3)
                t1 = time.time()
                out = tmp_path / "redis-prod.json"
                r = run_cli("observe", "prometheus", prom, "--start", f"{t0:.3f}", "--end",
                            f"{t1:.3f}", "--preset", "redis", "-o", str(out))
                assert r.returncode == 0, r.stderr
    finally:
        local.down(tmp_path / "c")
    direct = result["obs"].to_dict()
    through = json.loads(out.read_text())
    assert [s["node"] for s in direct["shards"]] == [f"127.0.0.1:{p}" for p in state.ports]
    assert [s["id"] for s in through["shards"]] == targets  # natural order: by port
    assert sum(s["requests"] for s in direct["shards"]) > 22_000
    # what the driver saw answered by each node (numbered by address, as the ports are): the
    # truth the server-side counts must match, but for what the driver does not count as a
    # request (its CLUSTER SLOTS reads, a redirected try, one cut off by the run's end)
    driven = json.loads((tmp_path / "drive.json").read_text())
    sent = [s["requests"] for s in sorted(driven["shards"], key=lambda s: int(s["id"]))]
    sent_shares = [n / sum(sent) for n in sent]
    for name, obs in (("INFO", direct), ("redis_exporter", through)):
        for node, (m, d, p) in enumerate(zip(_shares(obs), sent_shares, expected, strict=True)):
            assert abs(m - d) < 0.01, (name, node, _shares(obs), sent_shares)
            # the model's shares are the whole profile's; a 10 s run sends a stretch of its
            # locality-ordered stream (cut short when the machine lags), so it sits within
            # two points of them rather than exactly on them
            assert abs(m - p) < 0.02, (name, node, _shares(obs), expected)
    for a, b in zip(_shares(direct), _shares(through), strict=True):
        assert abs(a - b) < 0.005, (_shares(direct), _shares(through))
    for obs in (direct, through):  # the hot node's single core works hardest
        cpus = [s["cpu"] for s in obs["shards"]]
        assert max(range(3), key=cpus.__getitem__) == hot, cpus
    commands = direct["shards"][hot]["commands"]
    assert commands["xrevrange"] + commands["xadd"] > 0.9 * direct["shards"][hot]["requests"]
