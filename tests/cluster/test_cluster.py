"""A live Redis Cluster started by the tests: `hotshard cluster`, and `predict` checked against
what the nodes themselves counted.

Each node's share of data commands comes from INFO commandstats deltas on the node (calls of
XREVRANGE and XADD), not from our client. Tolerance: with N requests a node's measured share
has sd <= 0.5 / sqrt(N); at N ~ 30,000 that is 0.29 pp, and the prediction's own error (tail
spread by its mean and variance) is ~0.1 pp here, so 1 pp is over 3 sd of their sum.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hotshard.cluster import local
from hotshard.cluster.topology import replica_map
from tests.cluster._clusters import free_base as _free_base  # benchmarks import it here
from tests.cluster._clusters import node_client, predicted_node_shares
from tests.conftest import ROOT, process_state, run_cli

pytestmark = pytest.mark.slow

PROFILE = str(ROOT / "examples" / "incident-event.profile.json")
DATA_COMMANDS = ("cmdstat_xrevrange", "cmdstat_xadd")


def _data_calls(state: local.ClusterState) -> list[int]:
    out = []
    for port in state.ports:
        stats = node_client(state, port).info("commandstats")
        out.append(sum(stats.get(name, {}).get("calls", 0) for name in DATA_COMMANDS))
    return out


def test_cluster_up_status_down_stops_exactly_its_processes(tmp_path):
    base = _free_base(3)
    r = run_cli("cluster", "up", "--shards", "3", "--port", str(base), "--data",
                str(tmp_path / "c"), "--no-persist")
    assert r.returncode == 0, r.stderr
    recorded = json.loads((tmp_path / "c" / "cluster.json").read_text())
    assert r.stdout.strip() == f"redis-cluster://:{recorded['password']}@127.0.0.1:{base}"
    pids = recorded["pids"]
    try:
        assert all(Path(f"/proc/{pid}").exists() for pid in pids)
        status = run_cli("cluster", "status", "--data", str(tmp_path / "c"), "--json")
        assert status.returncode == 0, status.stderr
        nodes = json.loads(status.stdout)["nodes"]
        assert [n["slot_count"] for n in nodes] == [5461, 5462, 5461]
        assert {n["status"] for n in nodes} == {"ok"}
        again = run_cli("cluster", "up", "--shards", "3", "--port", str(base), "--data",
                        str(tmp_path / "other"))
        assert again.returncode == 2 and "in use" in again.stderr
    finally:
        down = run_cli("cluster", "down", "--data", str(tmp_path / "c"))
    assert down.returncode == 0, down.stderr
    for pid in pids:
        assert process_state(pid) in (None, "Z")  # gone, or a zombie waiting for its reaper


@pytest.mark.parametrize("nodes", [3, 6])
def test_predict_from_the_live_slot_map_matches_what_the_nodes_counted(cluster, nodes,
                                                                      tmp_path):
    state = cluster(nodes)
    shares, hottest = predicted_node_shares(PROFILE, state)
    before = _data_calls(state)
    out = tmp_path / "obs.json"
    r = run_cli("drive", state.url, PROFILE, "--rps", "3000", "--duration", "10s",
                "--seed", "5", "-q", "-o", str(out))
    assert r.returncode == 0, r.stderr
    calls = [a - b for a, b in zip(_data_calls(state), before, strict=True)]
    total = sum(calls)
    assert total > 25_000
    measured = [c / total for c in calls]
    for node, (m, p) in enumerate(zip(measured, shares, strict=True)):
        assert abs(m - p) < 0.01, (node, measured, shares)
    assert max(range(nodes), key=measured.__getitem__) == hottest
    obs = json.loads(out.read_text())
    assert [s["node"] for s in obs["shards"]] == [f"127.0.0.1:{p}" for p in state.ports]


def test_wrong_inputs(tmp_path):
    r = run_cli("cluster", "status", "--url", "redis://127.0.0.1:1")
    assert r.returncode == 2 and "cannot reach" in r.stderr
    r = run_cli("cluster", "down", "--data", str(tmp_path / "none"))
    assert r.returncode == 2 and "no cluster recorded" in r.stderr
    r = run_cli("predict", PROFILE, "-p", "kafka", "--slots-from", "redis://127.0.0.1:1")
    assert r.returncode == 2 and "redis-cluster" in r.stderr
    r = run_cli("drive", "redis-cluster://127.0.0.1:1", "--dist", "uniform:10", "--rps", "10")
    assert r.returncode == 2 and "cannot reach Redis" in r.stderr


def test_serve_keeps_channels_in_the_cluster_and_splits_over_nodes(cluster, tmp_path):
    from tests.service._traffic import all_pages, serve

    state = cluster(3)
    store = state.url
    history = tmp_path / "m.parquet"
    made = run_cli("generate", "--dist", "zipf:1.1:200", "--messages", "5000", "--seed", "2",
                   "-o", str(history))
    assert made.returncode == 0, made.stderr
    with serve(tmp_path / "data", "--store", store, "--load", str(history), "--split-into", "3",
               "--split-bucket", "0.02", "--mitigate", "big") as svc:
        stats = svc.stats()
        assert [s["pid"] for s in stats["shards"]] == list(state.pids)
        written, nodes = [], set()
        for i in range(45):
            r = svc.post("/channels/big/messages", json={"user": "u", "body": f"m{i}"})
            assert r.status_code == 201, r.text
            written.append(r.json()["id"])
            nodes.add(r.headers["x-shard"])
            if i % 15 == 14:
                time.sleep(0.05)  # the 20 ms time slot moves on
        assert len(nodes) >= 2
        assert all_pages(svc, "big", limit=6) == written[::-1]
        plan = json.loads((tmp_path / "data" / "splits.json").read_text())["splits"][0]
        assert sorted(plan["shards"]) == [0, 1, 2]  # three buckets on three nodes
        r = svc.post("/admin/mitigations", json={"replicas": 2}, headers=svc.admin_headers)
        assert r.status_code == 400 and "cluster up --replicas 2" in r.json()["error"]
    streams = sum(node_client(state, p).dbsize() for p in state.ports)
    assert streams >= 150  # the loaded channels' streams (200 keys, zipf) and the buckets


def _xadd_once(client, key: str) -> tuple:
    """One XADD through ``client`` (redirections followed), then the client closed."""
    import asyncio

    from hotshard.cluster.resp import encode_command

    async def write() -> tuple:
        try:
            return await client.call(key, encode_command(["XADD", key, "*", "a", "b"]))
        finally:
            await client.aclose()

    return asyncio.run(write())


def test_client_follows_moved_after_a_slot_changes_owner(cluster):
    """Reshard one slot under a client that loaded the old map: its command is redirected
    (MOVED), it follows, updates its map, and reports no error."""

    from hotshard.cluster.client import RespCluster

    state = cluster(3)
    key = "chat:{moving}"
    admin = [node_client(state, p, decode_responses=True) for p in state.ports]
    slot = int(admin[0].execute_command("CLUSTER", "KEYSLOT", key))
    client = RespCluster(state.host, state.ports[0], password=state.password)
    client.refresh()
    old = client.node_of(key)
    target_port = next(p for p in state.ports if f"{state.host}:{p}" != old)
    target_id = node_client(state, target_port,
                            decode_responses=True).execute_command("CLUSTER", "MYID")
    # move the (empty) slot: every node is told its new owner, the new owner first (as Redis
    # documents a reshard): told in another order, the old owner may already redirect to a
    # target that still redirects back, and the client meets a MOVED ping-pong it rightly
    # gives up on (CI saw it under load)
    order = sorted(zip(state.ports, admin, strict=True), key=lambda pa: pa[0] != target_port)
    for _, a in order:
        a.execute_command("CLUSTER", "SETSLOT", slot, "NODE", target_id)

    error, _ = _xadd_once(client, key)
    assert error is None and client.redirects >= 1
    assert client.node_of(key) == f"{state.host}:{target_port}"
    assert node_client(state, target_port).xlen(key) == 1


def test_client_follows_ask_while_a_slot_migrates(cluster):
    """Mid-migration (source MIGRATING, target IMPORTING), a key the source no longer has is
    answered with ASK: the client sends ASKING then the command to the target, once, without
    changing its map (the slot still belongs to the source)."""

    from hotshard.cluster.client import RespCluster

    state = cluster(3)
    key = "chat:{asked}"
    admin = {p: node_client(state, p, decode_responses=True) for p in state.ports}
    slot = int(admin[state.ports[0]].execute_command("CLUSTER", "KEYSLOT", key))
    client = RespCluster(state.host, state.ports[0], password=state.password)
    client.refresh()
    source = client.node_of(key)
    source_port = int(source.rsplit(":", 1)[1])
    target_port = next(p for p in state.ports if p != source_port)
    source_id = admin[source_port].execute_command("CLUSTER", "MYID")
    target_id = admin[target_port].execute_command("CLUSTER", "MYID")
    admin[target_port].execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", source_id)
    admin[source_port].execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", target_id)

    error, _ = _xadd_once(client, key)
    assert error is None and client.redirects >= 1
    assert client.node_of(key) == source  # ASK is one-off: the map is unchanged
    # the stream was created on the importing node, not on the source (asking the source
    # for the key itself would be answered with ASK again: count the slot's keys instead)
    count = "CLUSTER", "COUNTKEYSINSLOT", slot
    assert admin[source_port].execute_command(*count) == 0
    assert admin[target_port].execute_command(*count) == 1


def test_replica_reads_on_a_cluster_with_replicas(tmp_path):
    """`cluster up --replicas 2` (a replica node per master); serve --store --replicas 2 (two
    read nodes per shard) reads the hot channel from the master and its replica in turn (the
    replica's own command count rises)."""
    from tests.service._traffic import serve

    base = _free_base(6)
    state = local.up(tmp_path / "c", nodes=3, port=base, replicas=2, persist=False)
    try:
        assert len(state.ports) == 6
        store = state.url
        replicas = replica_map(store)
        assert all(len(r) == 1 for r in replicas.values()) and len(replicas) == 3
        with serve(tmp_path / "data", "--store", store, "--replicas", "2",
                   "--mitigate", "hot1") as svc:
            shard = int(svc.post("/channels/hot1/messages",
                                 json={"user": "u", "body": "x"}).headers["x-shard"])
            node = sorted(replicas, key=lambda a: int(a.rsplit(":", 1)[1]))[shard]
            replica_port = int(replicas[node][0].rsplit(":", 1)[1])
            before = node_client(state, replica_port).info("commandstats").get(
                "cmdstat_xrevrange", {}).get("calls", 0)
            # asynchronous replication: wait until the replica has applied all the master sent
            master = node_client(state, int(node.rsplit(":", 1)[1]))
            replica = node_client(state, replica_port)
            deadline = time.monotonic() + 10
            while (replica.info("replication").get("slave_repl_offset", -1)
                   < master.info("replication")["master_repl_offset"]):
                assert time.monotonic() < deadline, "the replica never caught up"
                time.sleep(0.01)
            pages = [svc.get("/channels/hot1/messages").json()["messages"] for _ in range(20)]
            after = node_client(state, replica_port).info("commandstats").get(
                "cmdstat_xrevrange", {}).get("calls", 0)
        assert after - before >= 5  # the replica served some of the 20 reads
        assert all(len(p) == 1 for p in pages), [len(p) for p in pages]
    finally:
        local.down(tmp_path / "c")
