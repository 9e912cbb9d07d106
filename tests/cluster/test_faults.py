"""A Redis Cluster closed by default and honest under faults (issue 19).

Closed: `cluster up` sets a generated password that only its owner can read, every hotshard
command takes it from the URL (or `--data`'s state file), and a client without it is refused.
Honest: `cluster status` shows a cluster with a dead or frozen node instead of failing; a URL
that leads to something other than Redis fails within the timeout with one line; a failed
command is named after Redis's own error code, in the row of the node it was sent to.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import time
from pathlib import Path

import pytest

from hotshard.cluster import local
from hotshard.cluster.topology import REDIS_SLOTS
from hotshard.drive.transport import TransportError
from hotshard.errors import InputError
from tests.cluster._clusters import fake_peer, free_base, node_client
from tests.conftest import ROOT, run_cli

PROFILE = str(ROOT / "examples" / "incident-event.profile.json")
slow = pytest.mark.slow


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _error_line(result) -> str:
    """The one line a refused command prints: no traceback, exactly one error line."""
    assert "Traceback" not in result.stderr, result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("hotshard: error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def _gone(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


# --- closed by default ---------------------------------------------------------------------


@slow
def test_cluster_up_sets_a_password_only_its_owner_can_read(tmp_path):
    """A client without the password is refused (NOAUTH), one with a wrong one too
    (WRONGPASS); the password is in a 0600 state file in a 0700 directory and never on a
    command line, where any user's `ps` would show it."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    directory = tmp_path / "c"
    base = free_base(3)
    r = run_cli("cluster", "up", "--shards", "3", "--port", str(base), "--data", str(directory),
                "--no-persist")
    assert r.returncode == 0, r.stderr
    try:
        state = local.load_state(directory)
        assert len(state.password) >= 32
        assert r.stdout.strip() == f"redis-cluster://:{state.password}@127.0.0.1:{base}"
        assert _mode(directory) == 0o700 and _mode(directory / "cluster.json") == 0o600
        for port in state.ports:
            assert _mode(directory / f"node-{port}") == 0o700
            assert _mode(directory / f"node-{port}" / "redis.conf") == 0o600
        for pid in state.pids:
            assert state.password.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        with socket.create_connection(("127.0.0.1", base), timeout=5) as raw:
            raw.sendall(b"*1\r\n$4\r\nPING\r\n")
            assert raw.recv(100).startswith(b"-NOAUTH")
        once = Retry(NoBackoff(), 0)  # redis-py would retry the refusal with backoff
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(port=base, retry=once).get("anything")
        with pytest.raises(redis.exceptions.AuthenticationError):
            redis.Redis(port=base, password="not-it", retry=once).ping()
        assert node_client(state, base + 1).ping()
    finally:
        down = run_cli("cluster", "down", "--data", str(directory))
    assert down.returncode == 0, down.stderr


@slow
def test_every_command_takes_the_password_from_the_url_or_the_state_file(cluster, tmp_path):
    state = cluster(3)
    status = run_cli("cluster", "status", "--data", state.dir, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["url"] == state.url  # shows the URL to use again
    as_user = state.url.replace("://:", "://default:")  # USER:PASSWORD@ (Redis's ACL user)
    assert run_cli("cluster", "status", "--url", as_user).returncode == 0
    out = tmp_path / "obs.json"
    drive = run_cli("drive", state.url, "--dist", "uniform:100", "--rps", "200", "--duration",
                    "1s", "-q", "-o", str(out))
    assert drive.returncode == 0, drive.stderr  # any failure above 1% would exit non-zero
    predict = run_cli("predict", PROFILE, "-p", "redis-cluster", "--slots-from", state.url)
    assert predict.returncode == 0, predict.stderr

    bare = f"redis-cluster://127.0.0.1:{state.ports[0]}"
    wrong = state.url.replace(state.password, "not-" + state.password)
    for url, said in ((bare, "needs a password (NOAUTH)"), (wrong, "refused the password")):
        for args in (["cluster", "status", "--url", url],
                     ["drive", url, "--dist", "uniform:10", "--rps", "10", "--duration", "1s"],
                     ["predict", PROFILE, "-p", "redis-cluster", "--slots-from", url]):
            r = run_cli(*args)
            line = _error_line(r)
            assert r.returncode == 2 and said in line, (args, r.stderr)
            assert "cluster status --data" in line and state.password not in r.stderr


def test_up_refuses_more_nodes_than_the_memory_holds(tmp_path, monkeypatch):
    """Checked before anything starts: one line naming what is short and the limit; no
    process started, no directory created."""
    monkeypatch.setattr(local, "_available_memory", lambda: (200 * 2**20, "this machine"))
    r = run_cli("cluster", "up", "--shards", "100", "--port", str(free_base(100)), "--data",
                str(tmp_path / "c"))
    line = _error_line(r)
    assert r.returncode == 2
    assert "100 nodes need about 1.5 GiB of memory" in line and "0.2 GiB available" in line
    assert not (tmp_path / "c").exists()


def test_resource_check_names_the_open_files_and_process_limits(monkeypatch):
    import resource

    real = resource.getrlimit
    monkeypatch.setattr(resource, "getrlimit", lambda which: (
        (1024, 1024) if which == resource.RLIMIT_NOFILE else real(which)))
    with pytest.raises(InputError, match=r"500 nodes need about 1094 open files each .*"
                                         r"\(ulimit -Hn\) is 1024"):
        local.check_resources(500)
    local.check_resources(3)
    monkeypatch.setattr(local, "_task_room", lambda: [(40, "the user's process limit")])
    with pytest.raises(InputError, match=r"10 nodes need 50 processes and threads .* the "
                                         r"user's process limit leaves room for 40"):
        local.check_resources(10)
    local.check_resources(8)


def test_urls_with_a_password_parse_and_are_redacted():
    url = local.parse_url("redis-cluster://:p%40ss@127.0.0.1:7000")
    assert (url.host, url.port, url.username, url.password) == ("127.0.0.1", 7000, None, "p@ss")
    assert str(url) == "redis-cluster://:p%40ss@127.0.0.1:7000"
    assert url.redacted() == "redis-cluster://:***@127.0.0.1:7000" and "p@ss" not in repr(url)
    user = local.parse_url("redis://bob:secret@h")
    assert (user.username, user.password, user.port) == ("bob", "secret", 6379)
    assert local.redact_url("redis://bob:secret@h:1") == "redis://bob:***@h:1"
    with pytest.raises(InputError) as info:
        local.parse_url("http://bob:secret@h")
    assert "secret" not in str(info.value)


# --- cluster status of a degraded cluster ---------------------------------------------------


@slow
def test_status_of_a_cluster_with_a_dead_node_shows_every_node(cluster):
    """Exit 1 (degraded), every node listed, the killed one named unreachable; --json is
    JSON; asked through a live node only (--url), the dead one is still listed (CLUSTER
    NODES)."""
    state = cluster(3)
    dead = f"127.0.0.1:{state.ports[1]}"
    os.kill(state.pids[1], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while not _gone(state.ports[1]) and time.monotonic() < deadline:
        time.sleep(0.05)

    text = run_cli("cluster", "status", "--data", state.dir)
    assert text.returncode == 1, text.stderr
    rows = {ln.split()[0]: ln for ln in text.stdout.splitlines()[2:]}
    assert sorted(rows) == sorted(state.addresses)
    assert "unreachable" in rows[dead] and "5462" in rows[dead]
    assert all(" ok " in rows[a] for a in state.addresses if a != dead)
    assert f"{dead} unreachable" in text.stdout.splitlines()[0]

    for args in (["--data", state.dir], ["--url", state.url.replace(
            str(state.ports[0]), str(state.ports[2]))]):
        r = run_cli("cluster", "status", *args, "--json")
        assert r.returncode == 1, r.stderr
        doc = json.loads(r.stdout)
        assert doc["degraded"] is True
        status = {n["address"]: n["status"] for n in doc["nodes"]}
        assert sorted(status) == sorted(state.addresses)
        assert status[dead].startswith("unreachable")
        assert [n["cpu_seconds"] is None for n in doc["nodes"]] == [False, True, False]


@slow
def test_status_of_a_frozen_node_is_bounded_by_the_timeout(cluster):
    state = cluster(3)
    frozen = f"127.0.0.1:{state.ports[2]}"
    os.kill(state.pids[2], signal.SIGSTOP)
    try:
        started = time.monotonic()
        r = run_cli("cluster", "status", "--data", state.dir, "--timeout", "1", "--json")
        elapsed = time.monotonic() - started
    finally:
        os.kill(state.pids[2], signal.SIGCONT)
    assert r.returncode == 1, r.stderr
    status = {n["address"]: n["status"] for n in json.loads(r.stdout)["nodes"]}
    assert status[frozen] == "unreachable" and len(status) == 3
    assert elapsed < 4, elapsed


# --- a URL that leads to something other than a healthy Redis -------------------------------


@pytest.mark.parametrize("kind", ["http", "silent", "trickle"])
@pytest.mark.parametrize("command", ["drive redis-cluster://", "drive redis://", "status"])
def test_a_port_that_is_not_redis_fails_within_the_timeout(kind, command):
    """Also a peer that trickles a byte every 0.3 s and never ends its reply: a timeout on
    each read would wait forever, the deadline of the whole exchange does not. `status`
    takes its --timeout as a duration, as drive does (1s)."""
    with fake_peer(kind) as port:
        if command == "status":
            args = ["cluster", "status", "--url", f"redis://127.0.0.1:{port}", "--timeout",
                    "1s"]
        else:
            args = ["drive", f"{command.split()[1]}127.0.0.1:{port}", "--dist", "uniform:10",
                    "--rps", "10", "--duration", "1s", "--timeout", "1"]
        started = time.monotonic()
        r = run_cli(*args)
        elapsed = time.monotonic() - started
    line = _error_line(r)
    assert r.returncode == 2
    if kind == "http":
        assert f"127.0.0.1:{port} is not a Redis server" in line
    else:
        assert f"127.0.0.1:{port} accepted the connection but sent no complete reply " \
            "within 1 s: not a Redis server, or a frozen one" in line
    assert elapsed < 6, elapsed  # 1 s for the topology, and at most 2 s for the node stats


# --- a failed command: named, and counted in its node's row ---------------------------------


def _routed_to(port: int, *, timeout: float, password: str | None = None):
    """A RedisClusterTarget whose every slot is on 127.0.0.1:PORT (a fake peer)."""
    from hotshard.cluster.client import RespCluster
    from hotshard.drive.redis_target import RedisClusterTarget

    target = RedisClusterTarget(f"redis-cluster://127.0.0.1:{port}", timeout=timeout)
    client = RespCluster("127.0.0.1", port, timeout=timeout, password=password)
    client.slot_node = [f"127.0.0.1:{port}"] * REDIS_SLOTS
    target._client = client
    return target


async def _failure(target, key: str = "k1") -> tuple[TransportError, float]:
    started = time.monotonic()
    try:
        with pytest.raises(TransportError) as info:
            await target.send(target.build(True, key, 10, 0))
    finally:
        await target.aclose()
    return info.value, time.monotonic() - started


@pytest.mark.parametrize(("reply", "password", "kind"), [
    (b"-LOADING Redis is loading the dataset in memory\r\n", None, "redis LOADING"),
    (b"-CLUSTERDOWN The cluster is down\r\n", None, "redis CLUSTERDOWN"),
    (b"-ERR unknown command 'XREVRANGE'\r\n", None, "redis ERR"),
    (b"-MOVED 1 127.0.0.1:{port}\r\n", None, "redis too many redirections (MOVED storm)"),
    (b"-WRONGPASS invalid username-password pair\r\n", "x", "redis WRONGPASS"),
])
def test_an_error_reply_is_named_after_the_redis_error(reply, password, kind):
    with fake_peer("reply", reply) as port:  # the MOVED one sends the client to itself
        error, _ = asyncio.run(_failure(_routed_to(port, timeout=2, password=password)))
    assert (error.kind, error.shard) == (kind, f"127.0.0.1:{port}")


@pytest.mark.parametrize(("kind", "named"), [
    ("silent", "timeout"), ("http", "not a Redis server (protocol error)"),
    ("closed", "connection refused")])
def test_no_answer_is_named_and_counted_for_the_node_within_the_timeout(kind, named):
    if kind == "closed":
        with fake_peer("silent") as port:
            pass  # closed again: nothing listens there now
        error, elapsed = asyncio.run(_failure(_routed_to(port, timeout=0.5)))
    else:
        with fake_peer(kind) as port:
            error, elapsed = asyncio.run(_failure(_routed_to(port, timeout=0.5)))
    assert (error.kind, error.shard) == (named, f"127.0.0.1:{port}")
    assert elapsed < 1.5, elapsed


def _key_on(client, node: str) -> str:
    """A channel whose stream ``chat:{channel}`` lives on ``node``."""
    return next(f"k{i}" for i in range(10_000) if client.node_of(f"chat:{{k{i}}}") == node)


@slow
def test_a_dead_and_a_frozen_node_fail_fast_and_in_their_own_row(cluster):
    """Killed: refused at once, and each later command tries to reconnect (refused again,
    fast). Frozen (SIGSTOP): a timeout within the target's timeout, in the frozen node's
    row. The live node keeps answering."""
    from hotshard.drive.redis_target import RedisClusterTarget

    state = cluster(3)
    live, frozen, dead = state.addresses
    target = RedisClusterTarget(state.url, timeout=1.0)

    async def run() -> dict:
        await target.check()
        keys = {node: _key_on(target._client, node) for node in state.addresses}
        for key in keys.values():  # connections open to every node
            assert (await target.send(target.build(True, key, 10, 0)))[0] == 200
        os.kill(state.pids[2], signal.SIGKILL)
        os.kill(state.pids[1], signal.SIGSTOP)
        while not _gone(state.ports[2]):
            await asyncio.sleep(0.02)
        out = {}
        for name, node in (("dead", dead), ("again", dead), ("frozen", frozen)):
            started = time.monotonic()
            with pytest.raises(TransportError) as info:
                await target.send(target.build(True, keys[node], 10, 0))
            out[name] = (info.value.kind, info.value.shard, time.monotonic() - started)
        out["live"] = await target.send(target.build(True, keys[live], 10, 0))
        await target.aclose()
        return out

    try:
        out = asyncio.run(run())
    finally:
        os.kill(state.pids[1], signal.SIGCONT)
    assert out["dead"][0] in ("connection error", "connection refused")
    assert out["dead"][1] == dead and out["dead"][2] < 0.5
    assert out["again"][:2] == ("connection refused", dead) and out["again"][2] < 0.5
    assert out["frozen"][:2] == ("timeout", frozen) and 0.9 < out["frozen"][2] < 2.5
    assert out["live"][:2] == (200, live)


@slow
def test_a_real_nodes_clusterdown_reply_is_named(cluster):
    """A slot its owner no longer serves: the node answers CLUSTERDOWN, which the driver
    counts as `redis CLUSTERDOWN` in that node's row (never `http 500`)."""
    from hotshard.drive.redis_target import RedisClusterTarget

    state = cluster(3)
    target = RedisClusterTarget(state.url, timeout=2.0)

    async def run() -> TransportError:
        await target.check()
        key = _key_on(target._client, state.addresses[1])
        slot = target._client.slot(f"chat:{{{key}}}")
        node_client(state, state.ports[1]).execute_command("CLUSTER", "DELSLOTS", slot)
        return (await _failure(target, key))[0]

    error = asyncio.run(run())
    assert (error.kind, error.shard) == ("redis CLUSTERDOWN", state.addresses[1])


@slow
def test_the_client_follows_a_failover_after_its_master_is_killed(tmp_path):
    """Kill a master of a cluster with replicas: its commands are refused (in its row) until
    the replica takes over (node timeout 5 s, then the election); the refusals reload the
    slot map in the background, so the commands then succeed on the promoted replica,
    although no node ever answers MOVED for the dead one."""
    from hotshard.drive.redis_target import RedisClusterTarget

    state = local.up(tmp_path / "c", nodes=3, replicas=2, port=free_base(6), persist=False)
    try:
        victim = state.addresses[1]
        target = RedisClusterTarget(state.url, timeout=1.0)

        async def run() -> tuple[set, str | None]:
            await target.check()
            key = _key_on(target._client, victim)
            os.kill(state.pids[1], signal.SIGKILL)
            failures, deadline = set(), time.monotonic() + 30
            try:
                while time.monotonic() < deadline:
                    try:
                        _, node, _ = await target.send(target.build(False, key, 10, 0))
                        return failures, node
                    except TransportError as e:
                        failures.add((e.kind, e.shard))
                    await asyncio.sleep(0.02)
                return failures, None
            finally:
                await target.aclose()

        failures, served_by = asyncio.run(run())
    finally:
        local.down(tmp_path / "c")
    assert served_by is not None and served_by not in (victim, *state.addresses[:3])
    assert ("connection refused", victim) in failures
    assert {shard for _, shard in failures} == {victim}
