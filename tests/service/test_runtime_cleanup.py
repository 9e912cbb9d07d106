"""Nothing outlives a killed gateway: its shard workers exit and its socket directory goes."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from hotshard.service.supervisor import sweep_stale_runtime_dirs
from tests.conftest import process_state
from tests.service._traffic import serve


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper counts as gone)."""
    return process_state(pid) not in (None, "Z")


def _socket_dir(pid: int) -> Path:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return Path(argv[argv.index(b"--socket") + 1].decode()).parent


def test_kill_9_of_the_gateway_leaves_no_worker_and_no_socket_dir(tmp_path):
    with serve(tmp_path / "data", "--shards", "3", "--replicas", "2") as svc:  # + 1 replica
        workers = [p["pid"] for s in svc.stats()["shards"] for p in [s, *s["replicas"]]]
        assert len(workers) == 6 and all(_alive(pid) for pid in workers)
        runtime = _socket_dir(workers[0])
        assert runtime.is_dir() and runtime.name.startswith(f"hotshard-{svc.process.pid}-")
        svc.process.send_signal(signal.SIGKILL)
        svc.process.wait(10)
        deadline = time.monotonic() + 5
        while any(_alive(pid) for pid in workers) or runtime.exists():
            assert time.monotonic() < deadline, (
                [pid for pid in workers if _alive(pid)], runtime.exists())
            time.sleep(0.05)
    # the data is intact: a new start serves it
    with serve(tmp_path / "data", "--shards", "3") as svc:
        assert svc.get("/health").json()["status"] == "ok"


def test_a_start_sweeps_socket_dirs_of_dead_gateways_only(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()  # a pid that is not running any more
    base = Path(tempfile.mkdtemp(dir=tmp_path))
    stale = base / f"hotshard-{dead.pid}-abc123"
    live = base / f"hotshard-{os.getpid()}-def456"
    other = base / "hotshard-notapid"
    for d in (stale, live, other):
        d.mkdir()
        (d / "s0r0.sock").write_text("")
    removed = sweep_stale_runtime_dirs(str(base))
    assert removed == [str(stale)]
    assert not stale.exists() and live.exists() and other.exists()


def test_ctrl_c_stops_every_worker_gracefully(tmp_path):
    """SIGINT: the workers are stopped in order and close their databases (no -wal or -shm
    left, which a SIGKILL at the event loop's close would leave). Repeated: the race it
    guards against (uvicorn re-raising the Ctrl-C as a cancellation) is timing-dependent."""
    for _ in range(3):
        with serve(tmp_path / "data", "--shards", "2") as svc:
            assert svc.post("/channels/c/messages", json={"user": "u", "body": "b"}
                            ).status_code == 201
        assert svc.process.returncode == 0
        left = sorted(p.name for p in (tmp_path / "data").iterdir()
                      if p.name.endswith(("-wal", "-shm")))
        assert left == []
