"""Redis's LFU counters live: the model (``detect.lfu``) against a real redis-server, the
cluster's hot keys read as evidence (``observe redis-cluster --hot-keys``), and what a policy
without counters gets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hotshard.cluster import local
from hotshard.cluster.lfu_scan import read_lfu
from hotshard.cluster.resp import ask_all
from hotshard.cluster.topology import topology
from hotshard.detect.lfu import distribution, rate_range
from hotshard.observe.redis_cluster import observe_redis_cluster
from hotshard.shards.partitioners import make_partitioner
from tests.cluster._clusters import free_base
from tests.conftest import run_cli

pytestmark = pytest.mark.slow


@pytest.fixture
def lfu_cluster(tmp_path):
    """A 2-master cluster under allkeys-lfu, and a function sending GETs to a key's node."""
    state = local.up(tmp_path / "c", nodes=2, port=free_base(2), persist=False,
                     maxmemory_policy="allkeys-lfu")
    url = state.redis_url
    rows = topology(url)
    part = make_partitioner("redis-cluster", 1)

    def node_of(key: str):
        slot = int(part.slots([key])[0])
        return url.at(next(r[2] for r in rows if r[0] <= slot <= r[1]))

    def hit(key: str, n: int) -> None:
        node = node_of(key)
        for i in range(0, n, 5000):
            ask_all(node, [("GET", key)] * min(5000, n - i), timeout=30)

    yield state, node_of, hit
    local.down(tmp_path / "c")


def test_the_counter_model_is_redis_own(lfu_cluster):
    """A key SET then read n times: Redis's counter must lie inside the model's exact law
    after n increments' chances (``distribution``), between its 0.05% and 99.95% quantiles
    (six keys: a false failure under 0.6%), near its median."""
    state, node_of, hit = lfu_cluster
    hits = {"k10": 10, "k100": 100, "k1k": 1000, "k10k": 10_000, "k40k": 40_000, "k0": 0}
    for key, n in hits.items():
        ask_all(node_of(key), [("SET", key, "v")])
        hit(key, n)
    reading = read_lfu(state.redis_url)
    assert reading.lfu and all(n.log_factor == 10 for n in reading.nodes)
    counters = {k: c for n in reading.nodes for k, c in n.counters.items()}
    assert set(counters) == set(hits)
    for key, n in hits.items():
        cum = np.cumsum(distribution(n))
        lo, hi = (int(np.searchsorted(cum, q)) for q in (0.0005, 0.9995))
        assert lo <= counters[key] <= hi, (key, n, counters[key], lo, hi)


def test_observe_reads_the_hot_keys_with_the_rates_their_counters_allow(lfu_cluster, tmp_path):
    """Traffic during the window: one key read 30,000 times, one 3,000, twenty 20 times.
    The hot key comes first, on its own shard, with a rate range that holds the true rate
    (30,000 over the readings' interval) within the model's spread: the range is the
    expected hits between the counters, and a counter lands within a few steps of its
    expectation (test above)."""
    state, node_of, hit = lfu_cluster
    url = state.redis_url
    keys = {"hot": 30_000, "warm": 3_000, **{f"cold{i}": 20 for i in range(20)}}
    for key in keys:
        ask_all(node_of(key), [("SET", key, "v")])

    def traffic(_seconds):
        for key, n in keys.items():
            hit(key, n)

    obs = observe_redis_cluster(url, duration=0.1, sleep=traffic, hot_keys=5, timeout=10)
    found = obs.extra["hot_keys"]
    assert found["source"] == "lfu" and found["policy"] == ["allkeys-lfu"]
    top = found["keys"]
    assert [k["key"] for k in top[:2]] == ["hot", "warm"] and len(top) == 5
    hot = top[0]
    shard = [i for i, r in enumerate(sorted({r[2] for r in topology(url)},
                                            key=lambda a: (a.rsplit(":")[0],
                                                           int(a.rsplit(":")[1]))))
             if r == node_of("hot").address][0]
    assert hot["shard"] == str(shard)
    lo, hi = rate_range(hot["counter_before"], hot["counter"], hot["seconds"])
    assert hot["rate_rps"] == pytest.approx([lo, hi], rel=1e-4)   # seconds kept to 1 us
    true = 30_000 / hot["seconds"]
    assert lo * 0.5 <= true <= hi * 2.0, (lo, true, hi)
    assert any("LFU counters" in n for n in obs.extra["observe"]["notes"])
    # the CLI writes the same evidence
    out = tmp_path / "obs.json"
    res = run_cli("observe", "redis-cluster", state.url, "--duration", "0.2s",
                  "--hot-keys", "3", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert json.loads(out.read_text())["hot_keys"]["keys"][0]["key"] == "hot"


def test_a_policy_without_counters_says_so(cluster):
    state = cluster(1)
    obs = observe_redis_cluster(state.redis_url, duration=0.05, hot_keys=16)
    assert obs.extra["hot_keys"]["keys"] == []
    assert any("not an LFU one" in n and "--maxmemory-policy allkeys-lfu" in n
               for n in obs.extra["observe"]["notes"])


def test_cluster_up_refuses_a_policy_redis_does_not_have(tmp_path):
    res = run_cli("cluster", "up", "--data", str(tmp_path / "c"), "--maxmemory-policy", "lfu")
    assert res.returncode == 2 and "'--maxmemory-policy'" in res.stderr
    assert not (tmp_path / "c").exists()
