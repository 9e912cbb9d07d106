"""What a skeptical SRE found after issue 19's fixes, each checked as they probed it.

Bounded: a peer that trickles bytes and never ends its reply costs one deadline (the
command's --timeout, or DEFAULT_TIMEOUT = 5 s where a command has none), then one line and
exit 2, for every command that talks to Redis, and leaves no thread behind to hang the exit.
Private: the password can stay off command lines (REDISCLI_AUTH), and every file the nodes
write is 0600. All or nothing: a refused or interrupted `cluster up` stops its nodes and
removes what it created.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from hotshard.cluster import local
from hotshard.errors import InputError
from tests.cluster._clusters import fake_peer, free_base, node_client
from tests.conftest import ROOT, run_cli

PROFILE = str(ROOT / "examples" / "incident.profile.json")
slow = pytest.mark.slow


def _error_line(result) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    errors = [ln for ln in result.stderr.splitlines() if ln.startswith("hotshard: error:")]
    assert len(errors) == 1, result.stderr
    return errors[0]


def _free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _wait_until(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return predicate()


# --- 1. bounded whatever the peer does ----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("command", ["predict", "serve"])
def test_commands_without_a_timeout_give_up_on_a_trickling_peer_after_the_default(
        command, tmp_path):
    """predict --slots-from and serve --store have no --timeout: DEFAULT_TIMEOUT (5 s) bounds
    connecting and the whole slot-map fetch; serve leaves no data directory behind."""
    with fake_peer("trickle") as port:
        url = f"redis-cluster://127.0.0.1:{port}"
        args = (["predict", PROFILE, "-p", "redis-cluster", "--slots-from", url]
                if command == "predict" else
                ["serve", "--store", url, "--data", str(tmp_path / "data"), "--port", "0"])
        started = time.monotonic()
        r = run_cli(*args)
        elapsed = time.monotonic() - started
    line = _error_line(r)
    assert r.returncode == 2
    assert f"127.0.0.1:{port} accepted the connection but sent no complete reply within " \
        f"{local.DEFAULT_TIMEOUT:g} s" in line
    assert local.DEFAULT_TIMEOUT - 0.5 < elapsed < local.DEFAULT_TIMEOUT + 3, elapsed
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("kind", ["silent", "trickle"])
def test_loading_the_slot_map_leaves_no_thread_behind(kind):
    """The driver loads the slot map on its event loop: when the deadline passes nothing is
    left running that the interpreter would wait for at exit."""
    from hotshard.drive.redis_target import RedisClusterTarget

    before = set(threading.enumerate())
    with fake_peer(kind) as port:
        target = RedisClusterTarget(f"redis-cluster://127.0.0.1:{port}", timeout=0.5)
        started = time.monotonic()
        with pytest.raises(InputError, match="sent no complete reply within 0.5 s"):
            asyncio.run(target.check())
        elapsed = time.monotonic() - started
        left = [t for t in threading.enumerate() if t not in before and not t.daemon]
    assert not left, left
    assert elapsed < 1.5, elapsed


# timing: its subject is how soon the stop ends the run (within 3 s), on the wall clock
@pytest.mark.timing
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_drive_stopped_while_a_peer_trickles_exits_at_once(signum, code):
    """The SRE's case: drive with a long --timeout on a trickling peer, then SIGTERM (or
    Ctrl-C): it used to hang at exit joining the thread that loaded the slot map, and a
    second Ctrl-C printed a traceback. Now it stops within a moment, with one line."""
    with fake_peer("trickle") as port:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hotshard", "drive", f"redis-cluster://127.0.0.1:{port}",
             "--dist", "uniform:10", "--rps", "10", "--duration", "2s", "--timeout", "60s"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            time.sleep(3.0)  # started and waiting for the slot map (start-up takes ~1-2 s)
            assert proc.poll() is None, proc.communicate()
            proc.send_signal(signum)
            stopped = time.monotonic()
            _, stderr = proc.communicate(timeout=20)
            elapsed = time.monotonic() - stopped
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr and elapsed < 3, (elapsed, stderr)


def test_one_off_exchange_is_bounded_as_a_whole():
    """The primitive itself, sync and async: 4 commands to a trickler finish (fail) at the
    deadline, not 4 x per-read timeouts, nor never."""
    from hotshard.cluster.resp import NodeUnreachable, aexchange, exchange

    with fake_peer("trickle") as port:
        for call in (lambda: exchange("127.0.0.1", port, [("PING",)] * 4, timeout=0.7),
                     lambda: asyncio.run(aexchange("127.0.0.1", port, [("PING",)] * 4,
                                                   timeout=0.7))):
            started = time.monotonic()
            with pytest.raises(NodeUnreachable, match="no complete reply within 0.7 s"):
                call()
            assert 0.6 < time.monotonic() - started < 1.2


# --- 2. the password off the command line: REDISCLI_AUTH ----------------------------------


def test_a_url_without_a_password_takes_it_from_redis_cli_auth():
    environ = {"REDISCLI_AUTH": "s3cret"}
    url = local.parse_url("redis-cluster://127.0.0.1:7000", environ=environ)
    assert url.password == "s3cret" and url.password_from == "REDISCLI_AUTH"
    assert url.given() == "redis-cluster://127.0.0.1:7000"  # shown without it
    assert url.redacted() == "redis-cluster://:***@127.0.0.1:7000"
    own = local.parse_url("redis-cluster://:mine@127.0.0.1:7000", environ=environ)
    assert own.password == "mine" and own.password_from == "url"  # the URL's wins
    assert local.parse_url("redis://h:1", environ={"REDISCLI_AUTH": ""}).password is None
    assert local.parse_url("redis://h:1", environ={}).password is None
    assert local.redact_url("redis://127.0.0.1:1") == "redis://127.0.0.1:1"


def test_a_refused_password_from_the_environment_is_named_so(monkeypatch):
    monkeypatch.setenv("REDISCLI_AUTH", "not-it")
    wrongpass = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    with fake_peer("reply", wrongpass) as port:
        r = run_cli("cluster", "status", "--url", f"redis://127.0.0.1:{port}", "--timeout",
                    "2")
    line = _error_line(r)
    assert r.returncode == 2 and "refused the password in REDISCLI_AUTH (WRONGPASS)" in line
    assert "not-it" not in r.stderr


@slow
def test_drive_status_and_predict_take_the_password_from_redis_cli_auth(cluster, tmp_path,
                                                                        monkeypatch):
    state = cluster(3)
    bare = f"redis-cluster://127.0.0.1:{state.ports[0]}"
    monkeypatch.setenv("REDISCLI_AUTH", state.password)
    status = run_cli("cluster", "status", "--url", bare, "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["url"] == bare  # shown as given: no password
    out = tmp_path / "obs.json"
    drive = run_cli("drive", bare, "--dist", "uniform:100", "--rps", "200", "--duration", "1s",
                    "-q", "-o", str(out))
    assert drive.returncode == 0, drive.stderr
    predict = run_cli("predict", PROFILE, "-p", "redis-cluster", "--slots-from", bare)
    assert predict.returncode == 0, predict.stderr
    for text in (status.stdout, status.stderr, drive.stdout, drive.stderr, out.read_text(),
                 predict.stdout, predict.stderr):
        assert state.password not in text

    monkeypatch.setenv("REDISCLI_AUTH", "not-" + state.password)
    for args in (["cluster", "status", "--url", bare],
                 ["drive", bare, "--dist", "uniform:10", "--rps", "10", "--duration", "1s"]):
        r = run_cli(*args)
        assert r.returncode == 2, r.stderr
        assert "refused the password in REDISCLI_AUTH" in _error_line(r)
    assert run_cli("cluster", "status", "--url", state.url).returncode == 0  # the URL's wins
    monkeypatch.delenv("REDISCLI_AUTH")
    r = run_cli("cluster", "status", "--url", bare)
    assert r.returncode == 2 and "REDISCLI_AUTH" in _error_line(r)  # the hint names it


# --- 3. a file in the way of --data----------------------------------------------------------


@pytest.mark.parametrize("under", ["afile/c", "afile", "afile/c/d"])
def test_up_refuses_a_dir_with_a_file_in_the_way(tmp_path, under):
    (tmp_path / "afile").write_text("mine\n")
    r = run_cli("cluster", "up", "--data", str(tmp_path / under), "--port", str(free_base(3)))
    line = _error_line(r)
    assert r.returncode == 2
    assert f"{tmp_path / 'afile'} is a file, not a directory" in line
    assert (tmp_path / "afile").read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


# --- 5. a refused or interrupted start leaves nothing -------------------------------------


def _failing_form(started: list[int]):
    def form(state, procs, *args, **kwargs):
        started.extend(pr.pid for pr in procs)
        assert (Path(state.dir) / local.STATE_FILE).exists()
        raise InputError("the cluster did not reach cluster_state:ok within 30 s")
    return form


@slow
def test_a_refused_start_removes_the_directory_it_created(tmp_path, monkeypatch):
    started: list[int] = []
    monkeypatch.setattr(local, "_form", _failing_form(started))
    base = free_base(3)
    with pytest.raises(InputError, match="cluster_state:ok"):
        local.up(tmp_path / "a" / "b" / "c", nodes=3, port=base)
    assert len(started) == 3 and not any(Path(f"/proc/{pid}").exists() for pid in started)
    assert not (tmp_path / "a").exists()  # the parents it made too
    assert all(_free(p) for p in range(base, base + 3))


def _tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() if p.is_file() else "/"
            for p in sorted(root.rglob("*"))}


@slow
def test_a_refused_start_in_an_existing_directory_removes_only_what_it_added(tmp_path,
                                                                             monkeypatch):
    """An earlier cluster's node files (set aside while the new nodes start) come back as
    they were; a start that succeeds replaces them, leaving the user's own files."""
    started: list[int] = []
    monkeypatch.setattr(local, "_form", _failing_form(started))
    base = free_base(2)
    root = tmp_path / "c"
    earlier = root / f"node-{base}"
    (earlier / "appendonlydir").mkdir(parents=True)
    (earlier / "appendonlydir" / "appendonly.aof.1.incr.aof").write_text("earlier data\n")
    (earlier / "nodes.conf").write_text("earlier cluster\n")
    (earlier / "redis.conf").write_text("requirepass earlier\n")
    (earlier / "notes.txt").write_text("mine\n")
    (root / "keep.txt").write_text("mine\n")
    had = _tree(root)
    with pytest.raises(InputError):
        local.up(root, nodes=2, port=base)
    assert _tree(root) == had
    assert len(started) == 2 and not any(Path(f"/proc/{pid}").exists() for pid in started)

    monkeypatch.undo()
    state = local.up(root, nodes=2, port=base, persist=False)
    try:
        assert node_client(state, base).ping()
        names = {p.name for p in earlier.iterdir()}
        assert "notes.txt" in names and not any("before-up" in n for n in names)
        assert "earlier" not in (earlier / "nodes.conf").read_text()
        assert (root / "keep.txt").read_text() == "mine\n"
    finally:
        local.down(root)


@slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
@pytest.mark.parametrize("existed", [False, True])
def test_an_interrupted_up_stops_its_nodes_and_leaves_nothing(tmp_path, signum, code,
                                                              existed):
    """Signalled once its nodes run (their redis.conf, holding the password, written), while
    it waits for the cluster to form: nodes stopped, what it created removed, exit 143/130."""
    root = tmp_path / "c"
    if existed:
        root.mkdir()
        (root / "keep.txt").write_text("mine\n")
    base = free_base(3)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hotshard", "cluster", "up", "--shards", "3", "--port",
         str(base), "--data", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert _wait_until(lambda: (root / local.STATE_FILE).exists(), 30), \
            proc.communicate(timeout=30)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if (root / local.STATE_FILE).exists():
            local.down(root)  # the test failed: do not leave nodes running
    assert proc.returncode == code, stderr
    assert "Traceback" not in stderr
    assert all(_wait_until(lambda p=p: _free(p), 5) for p in range(base, base + 3))
    if existed:
        assert [p.name for p in root.iterdir()] == ["keep.txt"]
    else:
        assert not root.exists()


# --- 6. every file the nodes write is private ---------------------------------------------


@slow
def test_every_file_a_persistent_cluster_writes_is_0600(tmp_path):
    """Append-only files (also those an AOF rewrite makes later), nodes.conf, redis.log:
    0600; every directory 0700. The nodes run with a umask of 077."""
    root = tmp_path / "c"
    state = local.up(root, nodes=1, port=free_base(1), persist=True)
    try:
        client = node_client(state, state.ports[0])
        for i in range(50):
            client.set(f"k{i}", "user content")
        client.bgrewriteaof()
        assert _wait_until(lambda: client.info("persistence")["aof_rewrite_in_progress"] == 0
                           and client.info("persistence")["aof_rewrite_scheduled"] == 0, 10)
        node_dir = root / f"node-{state.ports[0]}"
        names = {p.name for p in node_dir.rglob("*")}
        assert {"nodes.conf", "redis.log", "redis.conf", "appendonlydir"} <= names
        assert any(n.endswith(".aof") for n in names)
        for path in [root, *root.rglob("*")]:
            mode = stat.S_IMODE(path.stat().st_mode)
            assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    finally:
        local.down(root)


@slow
def test_up_says_how_to_keep_the_password_off_command_lines(tmp_path):
    base = free_base(1)
    r = run_cli("cluster", "up", "--shards", "1", "--port", str(base), "--data",
                str(tmp_path / "c"), "--no-persist")
    try:
        assert r.returncode == 0, r.stderr
        password = local.load_state(tmp_path / "c").password
        assert r.stdout.strip() == f"redis-cluster://:{password}@127.0.0.1:{base}"
        assert f"export REDISCLI_AUTH={password} and give redis-cluster://127.0.0.1:{base}" \
            in " ".join(r.stderr.split())
    finally:
        local.down(tmp_path / "c")
    assert os.listdir(tmp_path / "c") == [f"node-{base}"]
