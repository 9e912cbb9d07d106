"""A local Redis Cluster: start N redis-server nodes on 127.0.0.1, assign the 16384 slots
evenly (exactly as ``redis-cli --cluster create`` does, and as ``hotshard predict -p
redis-cluster -n N`` assumes), wait for ``cluster_state:ok``; stop exactly those processes.

Each node is one single-threaded redis-server process, so a hot key saturates one node's core
as the incident's hot channel saturated one shard. The pids, ports and directories are recorded
in ``DIR/cluster.json``; ``down`` stops the processes recorded there and nothing else (it
checks each pid still runs redis-server on its port before signalling it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from hotshard.errors import HotshardError, InputError

__all__ = ["ClusterState", "NodeStatus", "STATE_FILE", "down", "find_redis_server",
           "live_slot_map", "status", "up"]

STATE_FILE = "cluster.json"
REDIS_SLOTS = 16384
BUS_OFFSET = 10000
INSTALL_HINT = ("install Debian's redis-server package (sudo apt-get install redis-server; "
                "`make test` does it)")


@dataclass(frozen=True)
class ClusterState:
    """What ``up`` started: node addresses and pids, and where their files are."""

    host: str
    ports: tuple[int, ...]
    pids: tuple[int, ...]
    dir: str
    persist: bool

    @property
    def url(self) -> str:
        return f"redis-cluster://{self.host}:{self.ports[0]}"

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "url": self.url}


@dataclass(frozen=True)
class NodeStatus:
    """One node as ``cluster status`` shows it (from CLUSTER SLOTS and INFO)."""

    address: str
    slots: tuple[tuple[int, int], ...]
    ops_per_sec: int
    cpu_seconds: float
    used_memory: str
    keys: int
    commands: int

    @property
    def slot_count(self) -> int:
        return sum(b - a + 1 for a, b in self.slots)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "slot_count": self.slot_count}


def find_redis_server() -> str:
    """The redis-server binary, or InputError saying how to install it."""
    path = shutil.which("redis-server")
    if path is None:
        raise InputError(f"redis-server not found on PATH: {INSTALL_HINT}")
    return path


def even_slot_ranges(n: int) -> list[tuple[int, int]]:
    """The slot range of each of n masters, as ``redis-cli --cluster create`` assigns them."""
    from hotshard.shards.partitioners import _even_slots

    slot_node = _even_slots(n)
    ranges = []
    for node in range(n):
        where = (slot_node == node).nonzero()[0]
        ranges.append((int(where[0]), int(where[-1])))
    return ranges


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as redis does: TIME_WAIT ok
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _client(host: str, port: int, timeout: float = 5.0):
    import redis

    return redis.Redis(host=host, port=port, socket_timeout=timeout,
                       socket_connect_timeout=timeout, decode_responses=True)


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except HotshardError:
            raise
        except Exception as e:  # not up yet
            last = e
        time.sleep(0.05)
    raise HotshardError(f"{what} within {timeout:g} s" + (f" ({last})" if last else ""))


def up(directory: str | os.PathLike[str], *, nodes: int = 3, port: int = 7000,
       host: str = "127.0.0.1", persist: bool = True, timeout: float = 30.0,
       replicas: int = 0) -> ClusterState:
    """Start an N-master cluster (and ``replicas`` replica nodes per master, on the ports
    after the masters'); return once every node reports ``cluster_state:ok`` and every replica
    has synced with its master.

    Raises
    ------
    InputError
        No redis-server, fewer than 1 or more than 1000 nodes, a port (or its cluster bus port,
        +10000) in use, or a directory that already holds a running cluster.
    """
    if not 1 <= nodes <= 1000:
        raise InputError(f"nodes must be in 1..1000, got {nodes}")
    if not 0 <= replicas <= 5:
        raise InputError(f"replicas must be in 0..5 per master, got {replicas}")
    masters = nodes
    nodes = masters * (1 + replicas)
    if not 1 <= port <= 65535 - BUS_OFFSET - nodes:
        raise InputError(f"port must leave room for {nodes} nodes and their bus ports "
                         f"(+{BUS_OFFSET}), got {port}")
    binary = find_redis_server()
    root = Path(directory)
    if (root / STATE_FILE).exists():
        raise InputError(f"{root} already holds a cluster (see {root / STATE_FILE}): "
                         f"`hotshard cluster down --dir {root}` first")
    ports = tuple(range(port, port + nodes))
    busy = [p for p in ports if not _port_free(host, p) or not _port_free(host, p + BUS_OFFSET)]
    if busy:
        raise InputError(f"port {busy[0]} (or its cluster bus port {busy[0] + BUS_OFFSET}) on "
                         f"{host} is in use: pick another --port")
    root.mkdir(parents=True, exist_ok=True)
    procs = []
    try:
        for p in ports:
            node_dir = root / f"node-{p}"
            node_dir.mkdir(exist_ok=True)
            for stale in ("nodes.conf", "appendonly.aof", "dump.rdb"):
                with contextlib.suppress(FileNotFoundError):
                    (node_dir / stale).unlink()
            shutil.rmtree(node_dir / "appendonlydir", ignore_errors=True)
            argv = [binary, "--port", str(p), "--bind", host, "--cluster-enabled", "yes",
                    "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000",
                    "--dir", str(node_dir.resolve()), "--daemonize", "no",
                    "--protected-mode", "no", "--save", "", "--logfile", "redis.log"]
            argv += (["--appendonly", "yes", "--appendfsync", "everysec"] if persist
                     else ["--appendonly", "no"])
            procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                          start_new_session=True))
        state = ClusterState(host, ports, tuple(pr.pid for pr in procs), str(root.resolve()),
                             persist)
        (root / STATE_FILE).write_text(json.dumps(state.to_dict(), indent=2) + "\n")
        for p, proc in zip(ports, procs, strict=True):
            def answers(p: int = p, proc: subprocess.Popen = proc) -> bool:
                if proc.poll() is not None:
                    log = root / f"node-{p}" / "redis.log"
                    lines = [ln for ln in (log.read_text(errors="replace").splitlines()
                                           if log.exists() else []) if " # " in ln]
                    reason = lines[-1].split(" # ", 1)[1] if lines else "see its redis.log"
                    raise InputError(f"node {host}:{p} exited at start: {reason}")
                return bool(_client(host, p).ping())

            _wait(answers, timeout, f"node {host}:{p} did not answer")
        for p, (first, last) in zip(ports[:masters], even_slot_ranges(masters), strict=True):
            _client(host, p).execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
        first_node = _client(host, ports[0])
        for p in ports[1:]:
            first_node.execute_command("CLUSTER", "MEET", host, p)
        if replicas:
            ids = {p: _client(host, p).execute_command("CLUSTER", "MYID") for p in ports}

            def everyone_knows_everyone() -> bool:
                return all(f"cluster_known_nodes:{nodes}" in str(
                    _client(host, p).execute_command("CLUSTER", "INFO")) for p in ports)

            _wait(everyone_knows_everyone, timeout, "the nodes did not meet")
            for k, p in enumerate(ports[masters:]):
                master = ports[k % masters]
                _client(host, p).execute_command("CLUSTER", "REPLICATE", ids[master])

        def all_ok() -> bool:
            for p in ports:
                info = _client(host, p).execute_command("CLUSTER", "INFO")
                text = info if isinstance(info, str) else str(info)
                if "cluster_state:ok" not in text or \
                        f"cluster_known_nodes:{nodes}" not in text:
                    return False
            return True

        _wait(all_ok, timeout, "the cluster did not reach cluster_state:ok")
        if replicas:
            def synced() -> bool:
                return all(_client(host, p).info("replication").get("master_link_status")
                           == "up" for p in ports[masters:])

            _wait(synced, timeout, "the replicas did not sync with their masters")

            def announced() -> bool:  # every node's slot map lists the replicas (gossip)
                return all(len(r[3]) == replicas for p in ports
                           for r in _slots_with_replicas(host, p))

            _wait(announced, timeout, "the replicas were not announced to every node")
        return state
    except BaseException:
        for pr in procs:
            with contextlib.suppress(ProcessLookupError):
                pr.kill()
            pr.wait()
        with contextlib.suppress(FileNotFoundError):
            (root / STATE_FILE).unlink()
        raise


def _load_state(directory: str | os.PathLike[str]) -> ClusterState:
    path = Path(directory) / STATE_FILE
    if not path.exists():
        raise InputError(f"no cluster recorded in {directory} (no {STATE_FILE}): start one "
                         f"with `hotshard cluster up --dir {directory}`")
    try:
        doc = json.loads(path.read_text())
        return ClusterState(doc["host"], tuple(doc["ports"]), tuple(doc["pids"]), doc["dir"],
                            bool(doc["persist"]))
    except (ValueError, KeyError, TypeError) as e:
        raise InputError(f"{path} is damaged ({e})") from None


def _is_our_node(pid: int, port: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    # redis-server retitles itself "redis-server HOST:PORT [cluster]"; before that its argv
    # holds "--port PORT": either way the port is in the command line
    words = raw.replace(b"\0", b" ").replace(b":", b" ").split()
    return b"redis-server" in raw and str(port).encode() in words


def down(directory: str | os.PathLike[str], *, timeout: float = 10.0) -> list[int]:
    """Stop the processes ``up`` recorded in ``directory``; the pids stopped."""
    state = _load_state(directory)
    stopped = []
    for pid, port in zip(state.pids, state.ports, strict=True):
        if _is_our_node(pid, port):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                stopped.append(pid)
    deadline = time.monotonic() + timeout
    for pid, port in zip(state.pids, state.ports, strict=True):
        while _is_our_node(pid, port) and time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == pid:
                    break
            time.sleep(0.05)
        if _is_our_node(pid, port):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    (Path(directory) / STATE_FILE).unlink()
    return stopped


def _parse_address(url: str) -> tuple[str, int]:
    from urllib.parse import urlsplit

    parts = urlsplit(url if "://" in url else f"redis://{url}")
    if parts.scheme not in ("redis", "redis-cluster") or not parts.hostname:
        raise InputError(f"expected redis://HOST:PORT or redis-cluster://HOST:PORT, got {url!r}")
    try:
        return parts.hostname, parts.port or 6379
    except ValueError:
        raise InputError(f"bad port in {url!r}") from None


def _slots(host: str, port: int) -> list[tuple[int, int, str]]:
    """CLUSTER SLOTS as (first, last, "host:port" of the master)."""
    return [(a, b, master) for a, b, master, _ in _slots_with_replicas(host, port)]


def _slots_with_replicas(host: str, port: int) -> list[tuple[int, int, str, tuple[str, ...]]]:
    """CLUSTER SLOTS as (first, last, master address, replica addresses)."""
    import redis

    try:
        client = _client(host, port)
        info = client.execute_command("CLUSTER", "INFO")
        rows = client.execute_command("CLUSTER", "SLOTS")
    except redis.exceptions.ConnectionError as e:
        raise InputError(f"cannot reach Redis at {host}:{port}: {e}") from None
    except redis.exceptions.ResponseError as e:
        raise InputError(f"{host}:{port} is not a cluster node: {e}") from None
    text = info if isinstance(info, str) else str(info)
    if "cluster_state:ok" not in text:
        state = next((ln for ln in text.splitlines() if ln.startswith("cluster_state")), "?")
        raise InputError(f"the cluster at {host}:{port} is not ok ({state.strip()}): wait for "
                         "it or fix it before measuring")
    out = []
    if isinstance(rows, dict):  # redis-py may parse CLUSTER SLOTS into {(a, b): {...}}
        for (a, b), desc in rows.items():
            primary = desc["primary"]
            replicas = tuple(f"{r[0] or host}:{r[1]}" for r in desc.get("replicas", []))
            out.append((int(a), int(b), f"{primary[0] or host}:{primary[1]}", replicas))
    else:
        for row in rows:
            replicas = tuple(f"{r[0] or host}:{r[1]}" for r in row[3:])
            out.append((int(row[0]), int(row[1]), f"{row[2][0] or host}:{row[2][1]}",
                        replicas))
    return sorted(out)


def replica_map(url: str) -> dict[str, tuple[str, ...]]:
    """Each master's replica addresses, from a live CLUSTER SLOTS."""
    host, port = _parse_address(url)
    out: dict[str, tuple[str, ...]] = {}
    for _, _, master, replicas in _slots_with_replicas(host, port):
        out[master] = tuple(sorted(set(out.get(master, ())) | set(replicas), key=_node_key))
    return out


def _node_key(address: str) -> tuple[str, int]:
    h, _, p = address.rpartition(":")
    return h, int(p)


def live_slot_map(url: str):
    """(slot -> node index array, node addresses in index order) from a live CLUSTER SLOTS.

    Nodes are numbered by (host, port), so node 0 of a local cluster is its first port.
    """
    import numpy as np

    host, port = _parse_address(url)
    rows = _slots(host, port)
    nodes = sorted({r[2] for r in rows}, key=_node_key)
    slot_node = np.full(REDIS_SLOTS, -1, dtype=np.int64)
    for first, last, address in rows:
        slot_node[first:last + 1] = nodes.index(address)
    if (slot_node < 0).any():
        raise InputError(f"the cluster at {url} leaves {(slot_node < 0).sum()} slots "
                         "unassigned")
    return slot_node, nodes


def status(url: str) -> list[NodeStatus]:
    """Every master's slots, ops/s, CPU seconds and memory, from the nodes themselves."""
    host, port = _parse_address(url)
    rows = _slots(host, port)
    by_node: dict[str, list[tuple[int, int]]] = {}
    for first, last, address in rows:
        by_node.setdefault(address, []).append((first, last))
    out = []
    for address in sorted(by_node, key=_node_key):
        h, p = _node_key(address)
        info = _client(h, p).info("all")
        commands = sum(v.get("calls", 0) for k, v in info.items()
                       if k.startswith("cmdstat_") and isinstance(v, dict))
        keys = sum(v.get("keys", 0) for k, v in info.items()
                   if k.startswith("db") and isinstance(v, dict))
        out.append(NodeStatus(address, tuple(by_node[address]),
                              int(info.get("instantaneous_ops_per_sec", 0)),
                              float(info.get("used_cpu_sys", 0)) +
                              float(info.get("used_cpu_user", 0)),
                              str(info.get("used_memory_human", "?")), keys, commands))
    return out
