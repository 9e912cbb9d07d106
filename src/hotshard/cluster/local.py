"""A local Redis Cluster: start N redis-server nodes on 127.0.0.1, assign the 16384 slots
evenly (exactly as ``redis-cli --cluster create`` does, and as ``hotshard predict -p
redis-cluster -n N`` assumes), wait for ``cluster_state:ok``; stop exactly those processes.

Each node is one single-threaded redis-server process, so a hot key saturates one node's core
as the incident's hot channel saturated one shard. The pids, ports, directories and the
cluster's password are recorded in ``DIR/cluster.json`` (mode 0600, in a 0700 directory);
``down`` stops the processes recorded there and nothing else (it checks each pid still runs
redis-server on its port before signalling it). Every file the nodes write (append-only
files, nodes.conf, redis.log) is 0600: they run with a umask of 077. A start that is refused
or interrupted (Ctrl-C, SIGTERM) stops the nodes it started and removes what it created.

Closed by default: every node requires a password generated at start (``requirepass``, and
``masterauth`` so replicas can sync), kept in a 0600 config file per node rather than on the
command line, where ``ps`` shows it to every user. Clients give it in the URL form redis
clients accept, ``redis-cluster://:PASSWORD@HOST:PORT`` (``USER:PASSWORD@`` for an ACL user),
or, to keep it off command lines too, in the environment variable ``REDISCLI_AUTH``
(redis-cli's own convention), which is used when the URL gives no password.

Every question to a node (the slot map, CLUSTER NODES, INFO) is a few commands on a new
connection, bounded as a whole by one deadline (``timeout``, default ``DEFAULT_TIMEOUT`` =
5 s) whatever the node does: see ``hotshard.cluster.resp.exchange``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from hotshard._atomic import why_not_a_directory
from hotshard.cluster.policies import MAXMEMORY_POLICIES
from hotshard.cluster.resp import (
    DEFAULT_TIMEOUT,
    PASSWORD_ENV,
    NodeLoading,
    NodeUnreachable,
    RedisURL,
    aask_all,
    ask,
    ask_all,
    node_key,
    parse_info,
    parse_url,
    redact_url,
)
from hotshard.cluster.topology import topology
from hotshard.errors import HotshardError, InputError

__all__ = ["DEFAULT_TIMEOUT", "PASSWORD_ENV", "ClusterState", "ClusterStatus", "NodeStatus",
           "NodeUnreachable", "RedisURL", "STATE_FILE", "aask_all", "ask", "ask_all",
           "check_resources", "down", "find_redis_server", "load_state", "parse_info",
           "parse_url", "redact_url", "status", "up"]

STATE_FILE = "cluster.json"
BUS_OFFSET = 10000
INSTALL_HINT = ("install Debian's redis-server package (sudo apt-get install redis-server; "
                "`make test` does it)")
FAILURE_FLAGS = ("fail", "fail?", "handshake", "noaddr")  # CLUSTER NODES flags that mean trouble


@dataclass(frozen=True)
class ClusterState:
    """What ``up`` started: node addresses and pids, where their files are, the password."""

    host: str
    ports: tuple[int, ...]
    pids: tuple[int, ...]
    dir: str
    persist: bool
    password: str | None = field(default=None, repr=False)

    @property
    def redis_url(self) -> RedisURL:
        return RedisURL(self.host, self.ports[0], None, self.password)

    @property
    def url(self) -> str:
        """``redis-cluster://:PASSWORD@HOST:PORT`` of the first node (what clients take)."""
        return str(self.redis_url)

    @property
    def addresses(self) -> tuple[str, ...]:
        return tuple(f"{self.host}:{p}" for p in self.ports)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "url": self.url}


@dataclass(frozen=True)
class NodeStatus:
    """One node as ``cluster status`` shows it: its role and slots (CLUSTER NODES of a node
    that answered) and, when it answered INFO itself, its load.

    ``status`` is ``ok``, or what is wrong: ``unreachable`` (it did not answer INFO within
    the timeout: dead, frozen, or not Redis) and the failure flags the cluster gossips about
    it (``fail?``: some node cannot reach it; ``fail``: the majority agreed).
    """

    address: str
    role: str
    status: str
    slots: tuple[tuple[int, int], ...] = ()
    master: str | None = None
    ops_per_sec: int | None = None
    cpu_seconds: float | None = None
    used_memory: str | None = None
    keys: int | None = None
    commands: int | None = None

    @property
    def slot_count(self) -> int:
        return sum(b - a + 1 for a, b in self.slots)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "slot_count": self.slot_count}


@dataclass(frozen=True)
class ClusterStatus:
    """Every node of a cluster, and the ``cluster_state`` the answering node reported
    (``unknown`` when no node answered)."""

    url: str
    cluster_state: str
    nodes: tuple[NodeStatus, ...]
    seen_from: str | None = None

    @property
    def degraded(self) -> bool:
        return self.cluster_state != "ok" or any(n.status != "ok" for n in self.nodes)

    @property
    def masters(self) -> tuple[NodeStatus, ...]:
        """The masters that serve slots, in address order: ``predict --slots-from``'s
        node numbering."""
        return tuple(n for n in self.nodes if n.role == "master" and n.slots)

    def to_dict(self) -> dict[str, Any]:
        return {"url": self.url, "cluster_state": self.cluster_state,
                "degraded": self.degraded, "seen_from": self.seen_from,
                "nodes": [n.to_dict() for n in self.nodes]}


def find_redis_server() -> str:
    """The redis-server binary, or InputError saying how to install it."""
    path = shutil.which("redis-server")
    if path is None:
        raise InputError(f"redis-server not found on PATH: {INSTALL_HINT}")
    return path


def even_slot_ranges(n: int) -> list[tuple[int, int]]:
    """The slot range of each of n masters, as ``redis-cli --cluster create`` assigns them."""
    from hotshard.shards.partitioners import even_slots

    slot_node = even_slots(n)
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


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (NodeUnreachable, NodeLoading) as e:  # not listening, or not loaded, yet
            last = e
        time.sleep(0.05)
    raise HotshardError(f"{what} within {timeout:g} s" + (f" ({last})" if last else ""))


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by its owner only (0600), atomically: the file holds the
    cluster's password, so it never exists with wider permissions, even for a moment."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


def _private_dir(path: Path) -> None:
    """Create ``path`` (and parents) with the new directory itself 0700; one that already
    exists is left as it is (it may be shared, as /tmp is)."""
    if path.is_dir():
        return
    try:
        path.mkdir(parents=True, mode=0o700)
    except (FileExistsError, NotADirectoryError):
        raise InputError(f"cannot keep the cluster in {path}: {why_not_a_directory(path)}"
                         ) from None
    except OSError as e:
        raise InputError(f"cannot create {path}: {e.strerror or e}") from None
    os.chmod(path, 0o700)  # mkdir's mode is reduced by the umask, never widened: be exact


def _first_missing(path: Path) -> Path | None:
    """The outermost of ``path`` and its parents that does not exist (what creating ``path``
    creates, and removes again), or None when ``path`` exists."""
    missing = None
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            break
        missing = candidate
    return missing


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM ignored while a cleanup runs, so a second Ctrl-C cannot cut it
    short and leave processes or files behind (main thread only; elsewhere a no-op)."""
    previous = {}
    with contextlib.suppress(ValueError):
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:
                signal.signal(signum, handler)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


# Measured on the development machine (redis-server 7.0.15, jemalloc, idle, no data): one
# cluster-enabled node has 12.3 MiB resident (VmRSS 12,600 kB), 5 threads (main, 3 bio
# threads, jemalloc's background thread) and 9 descriptors; in a 30-node cluster each node
# has 13.0 MiB and 67 descriptors, so ~20 KiB and 2 descriptors (a cluster-bus link each way)
# per other node. The limits below round those up.
NODE_RSS = 13 * 2**20
PEER_RSS = 24 * 2**10
NODE_THREADS = 5
NODE_FDS = 32 + 64  # what redis keeps for itself, and 64 client connections


def check_resources(nodes: int) -> None:
    """Refuse to start ``nodes`` idle redis-server processes this machine cannot hold.

    Checked before anything starts, because a cluster that runs out part-way fails slowly
    (nodes that cannot open their bus links never reach ``cluster_state:ok``) and leaves
    hundreds of processes behind. Needs: per node 2 descriptors per other node plus
    ``NODE_FDS`` (under the hard open-files limit, which redis raises its own soft limit
    to), ``NODE_RSS`` plus ``PEER_RSS`` per other node of memory, and ``NODE_THREADS``
    tasks; the numbers are measured on an idle node (see above), so data comes on top.

    Raises
    ------
    InputError
        One line naming what is short, what is needed and the limit.
    """
    import resource

    fds = 2 * (nodes - 1) + NODE_FDS
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and fds > hard:
        raise InputError(f"{nodes} nodes need about {fds} open files each (2 cluster-bus "
                         f"links per other node + {NODE_FDS}), but the open-files limit "
                         f"(ulimit -Hn) is {hard}: start fewer nodes or raise the limit")
    with contextlib.suppress(OSError, ValueError, IndexError):
        allocated, _, file_max = map(int, Path("/proc/sys/fs/file-nr").read_text().split())
        if nodes * fds > file_max - allocated:
            raise InputError(f"{nodes} nodes need about {nodes * fds:,} open files in all, "
                             f"but the system allows {file_max - allocated:,} more "
                             "(fs.file-max): start fewer nodes")
    memory = nodes * (NODE_RSS + (nodes - 1) * PEER_RSS)
    available, where = _available_memory()
    if available is not None and memory > available:
        raise InputError(f"{nodes} nodes need about {memory / 2**30:.1f} GiB of memory even "
                         f"idle ({NODE_RSS >> 20} MiB each + {PEER_RSS >> 10} KiB per other "
                         f"node, measured), but {where} has {available / 2**30:.1f} GiB "
                         "available: start fewer nodes")
    tasks = nodes * NODE_THREADS
    for room, limit in _task_room():
        if tasks > room:
            raise InputError(f"{nodes} nodes need {tasks:,} processes and threads "
                             f"({NODE_THREADS} per redis-server), but {limit} leaves room "
                             f"for {max(0, room):,}: start fewer nodes or raise the limit")


def _cgroup_dir(controller: str) -> Path | None:
    """This process's cgroup directory for ``controller`` (v1), or its v2 directory."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, names, path = line.split(":", 2)
            if controller in names.split(","):
                return Path("/sys/fs/cgroup", controller, path.lstrip("/"))
            if names == "" and Path("/sys/fs/cgroup/cgroup.controllers").exists():
                return Path("/sys/fs/cgroup", path.lstrip("/"))
    return None


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def _available_memory() -> tuple[int | None, str]:
    """(bytes available, where): the smaller of MemAvailable and the cgroup's headroom."""
    available, where = None, "this machine"
    with contextlib.suppress(OSError, ValueError, StopIteration):
        line = next(ln for ln in Path("/proc/meminfo").read_text().splitlines()
                    if ln.startswith("MemAvailable:"))
        available = int(line.split()[1]) * 1024
    group = _cgroup_dir("memory")
    if group is not None:
        for limit_name, usage_name in (("memory.max", "memory.current"),
                                       ("memory.limit_in_bytes", "memory.usage_in_bytes")):
            limit, usage = _read_int(group / limit_name), _read_int(group / usage_name)
            if limit is not None and usage is not None and \
                    (available is None or limit - usage < available):
                available, where = limit - usage, f"this cgroup ({group})"
    return available, where


def _task_room() -> list[tuple[int, str]]:
    """(tasks that may still start, the limit that says so) for each limit that applies."""
    import resource

    out = []
    with contextlib.suppress(OSError, ValueError, IndexError):
        running = int(Path("/proc/loadavg").read_text().split()[3].split("/")[1])
        ceiling = min(int(Path("/proc/sys/kernel/threads-max").read_text()),
                      int(Path("/proc/sys/kernel/pid_max").read_text()))
        out.append((ceiling - running, "the kernel (threads-max, pid_max)"))
    group = _cgroup_dir("pids")
    if group is not None:
        limit, current = _read_int(group / "pids.max"), _read_int(group / "pids.current")
        if limit is not None and current is not None:
            out.append((limit - current, f"this cgroup's pids.max ({limit})"))
    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft != resource.RLIM_INFINITY and os.getuid() != 0:  # root is not held to it
        uid, mine = str(os.getuid()), 0
        for status_file in Path("/proc").glob("[0-9]*/status"):
            with contextlib.suppress(OSError, IndexError):
                fields = dict(ln.split(":", 1) for ln in status_file.read_text().splitlines()
                              if ln.startswith(("Uid:", "Threads:")))
                if fields["Uid"].split()[0] == uid:
                    mine += int(fields["Threads"])
        out.append((soft - mine, f"the user's process limit (ulimit -u {soft}, {mine} in use)"))
    return out


def up(directory: str | os.PathLike[str], *, nodes: int = 3, port: int = 7000,
       host: str = "127.0.0.1", persist: bool = True, timeout: float = 30.0,
       replicas: int = 1, maxmemory_policy: str | None = None) -> ClusterState:
    """Start an N-master cluster, each shard on ``replicas`` nodes in total: the master and
    ``replicas - 1`` replica nodes (on the ports after the masters'), every node requiring a
    new random password; return once every node reports ``cluster_state:ok`` and every
    replica has synced with its master. ``replicas`` counts read nodes as every hotshard
    command does (``Mitigations.replicas``: 1, the default, is no replica), so ``serve
    --store --replicas R`` runs on a cluster started with ``replicas=R``.
    ``maxmemory_policy``: the nodes' eviction policy (``MAXMEMORY_POLICIES``; None: Redis's
    default, noeviction); an LFU one keeps the access counters ``redis-cli --hotkeys`` and
    ``observe redis-cluster --hot-keys`` read.

    All or nothing: a start that fails or is interrupted (KeyboardInterrupt, or any other
    exception, such as the CLI's on SIGTERM) kills the nodes it started and removes what it
    created: the directory if it made it, else only the entries it added, and a previous
    cluster's node files it had set aside (nodes.conf, append-only files, redis.conf) are
    put back; a start that succeeds deletes them (the new cluster starts empty).

    Raises
    ------
    InputError
        No redis-server, fewer than 1 or more than 1000 nodes, a port (or its cluster bus port,
        +10000) in use, a directory that already holds a running cluster or that cannot be
        one (a file in the way), or a machine that cannot hold that many nodes (open files,
        memory, processes; see ``check_resources``).
    """
    if not 1 <= nodes <= 1000:
        raise InputError(f"nodes must be in 1..1000, got {nodes}")
    if maxmemory_policy is not None and maxmemory_policy not in MAXMEMORY_POLICIES:
        raise InputError(f"maxmemory-policy must be one of {', '.join(MAXMEMORY_POLICIES)}, "
                         f"got {maxmemory_policy!r}")
    if not 1 <= replicas <= 6:
        raise InputError(f"replicas counts each shard's nodes, the master included: 1..6 "
                         f"(1: no replica node), got {replicas}")
    masters = nodes
    per_master = replicas - 1   # replica nodes per master, as Redis counts them
    nodes = masters * (1 + per_master)
    if not 1 <= port <= 65535 - BUS_OFFSET - nodes:
        raise InputError(f"port must leave room for {nodes} nodes and their bus ports "
                         f"(+{BUS_OFFSET}), got {port}")
    binary = find_redis_server()
    root = Path(directory)
    existing = next((a for a in (root, *root.parents) if a.exists()), None)
    if existing is not None and not existing.is_dir():  # a file where a directory must be
        raise InputError(f"cannot keep the cluster in {root}: {why_not_a_directory(root)}")
    if root.is_dir() and not os.access(root, os.R_OK | os.W_OK | os.X_OK):
        raise InputError(f"cannot keep the cluster in {root}: no permission to write in it")
    if (root / STATE_FILE).exists():
        raise InputError(f"{root} already holds a cluster (see {root / STATE_FILE}): "
                         f"`hotshard cluster down --data {root}` first")
    check_resources(nodes)
    ports = tuple(range(port, port + nodes))
    busy = [p for p in ports if not _port_free(host, p) or not _port_free(host, p + BUS_OFFSET)]
    if busy:
        raise InputError(f"port {busy[0]} (or its cluster bus port {busy[0] + BUS_OFFSET}) on "
                         f"{host} is in use: pick another ${{port}}")
    created = _first_missing(root)
    before = {} if created is not None else _entries(root, ports)
    procs: list[subprocess.Popen] = []
    aside: list[tuple[Path, Path]] = []  # (where a previous cluster's file waits, its place)
    try:
        _private_dir(root)
        password = secrets.token_urlsafe(24)  # URL-safe: the URL needs no percent-encoding
        for p in ports:
            _start_node(binary, root, host, p, password, persist, procs, aside,
                        maxmemory_policy)
        state = ClusterState(host, ports, tuple(pr.pid for pr in procs), str(root.resolve()),
                             persist, password)
        _write_private(root / STATE_FILE, json.dumps(state.to_dict(), indent=2) + "\n")
        _form(state, procs, masters, per_master, timeout)
    except BaseException:
        with _signals_held():
            for pr in procs:
                with contextlib.suppress(ProcessLookupError):
                    pr.kill()
                pr.wait()
            if created is not None:
                _remove(created)
            else:
                for kept, place in reversed(aside):
                    _remove(place)
                    os.replace(kept, place)
                _remove_added(root, before)
        raise
    for kept, _ in aside:
        _remove(kept)
    return state


def _entries(root: Path, ports: tuple[int, ...]) -> dict[Path, set[str]]:
    """What ``root`` and its node directories for ``ports`` hold before a start."""
    out = {root: set(os.listdir(root))}
    for p in ports:
        node_dir = root / f"node-{p}"
        if node_dir.is_dir():
            out[node_dir] = set(os.listdir(node_dir))
    return out


def _remove_added(root: Path, before: dict[Path, set[str]]) -> None:
    """Undo a failed start in a directory that existed: remove the entries it added."""
    for name in set(os.listdir(root)) - before[root]:
        _remove(root / name)
    for node_dir, had in before.items():
        if node_dir != root and node_dir.is_dir():
            for name in set(os.listdir(node_dir)) - had:
                _remove(node_dir / name)


def _start_node(binary: str, root: Path, host: str, port: int, password: str,
                persist: bool, procs: list[subprocess.Popen],
                aside: list[tuple[Path, Path]], maxmemory_policy: str | None = None) -> None:
    """Start one redis-server into ``procs``, its secrets in a 0600 config file (the argv is
    world-readable); a previous cluster's files in its directory are set aside (recorded
    in ``aside``) so the node starts empty. It runs with a umask of 077, so every file it
    ever writes (append-only files, also those of later rewrites, nodes.conf, redis.log,
    dump.rdb) is 0600: Redis has no umask setting, and a chmod after the fact would leave
    each file readable for a moment and miss the files Redis creates later."""
    node_dir = root / f"node-{port}"
    node_dir.mkdir(mode=0o700, exist_ok=True)
    os.chmod(node_dir, 0o700)  # its append-only file holds the users' messages
    for stale in ("nodes.conf", "appendonly.aof", "dump.rdb", "appendonlydir", "redis.conf"):
        place = node_dir / stale
        if place.exists() or place.is_symlink():
            kept = node_dir / f".{stale}.before-up"
            _remove(kept)  # left by a start that was killed outright
            os.replace(place, kept)
            aside.append((kept, place))
    config = node_dir / "redis.conf"
    _write_private(config, f"requirepass {password}\nmasterauth {password}\n")
    argv = [binary, str(config.resolve()), "--port", str(port), "--bind", host,
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", "5000", "--dir", str(node_dir.resolve()),
            "--daemonize", "no", "--save", "", "--logfile", "redis.log"]
    argv += (["--appendonly", "yes", "--appendfsync", "everysec"] if persist
             else ["--appendonly", "no"])
    if maxmemory_policy is not None:
        argv += ["--maxmemory-policy", maxmemory_policy]
    # umask= is applied in the child between fork and exec (no preexec_fn, which is unsafe
    # with threads); start_new_session: the terminal's Ctrl-C reaches us, not the nodes
    procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True,
                                  umask=0o077))


def _form(state: ClusterState, procs: list[subprocess.Popen], masters: int, per_master: int,
          timeout: float) -> None:
    """Wait for the nodes, assign the slots, introduce the nodes, attach the replicas."""
    host, ports, root = state.host, state.ports, Path(state.dir)
    nodes = len(ports)

    def node(p: int) -> RedisURL:
        return state.redis_url.at(f"{host}:{p}")

    for p, proc in zip(ports, procs, strict=True):
        def answers(p: int = p, proc: subprocess.Popen = proc) -> bool:
            if proc.poll() is not None:
                log = root / f"node-{p}" / "redis.log"
                lines = [ln for ln in (log.read_text(errors="replace").splitlines()
                                       if log.exists() else []) if " # " in ln]
                reason = lines[-1].split(" # ", 1)[1] if lines else "see its redis.log"
                raise InputError(f"node {host}:{p} exited at start: {reason}")
            return ask(node(p), "PING", timeout=1.0) == "PONG"

        _wait(answers, timeout, f"node {host}:{p} did not answer")
    for p, (first, last) in zip(ports[:masters], even_slot_ranges(masters), strict=True):
        ask(node(p), "CLUSTER", "ADDSLOTSRANGE", first, last)
    ask_all(node(ports[0]), [("CLUSTER", "MEET", host, p) for p in ports[1:]])
    if per_master:
        ids = {p: ask(node(p), "CLUSTER", "MYID") for p in ports}

        def everyone_knows_everyone() -> bool:
            return all(f"cluster_known_nodes:{nodes}" in ask(node(p), "CLUSTER", "INFO")
                       for p in ports)

        _wait(everyone_knows_everyone, timeout, "the nodes did not meet")
        for k, p in enumerate(ports[masters:]):
            ask(node(p), "CLUSTER", "REPLICATE", ids[ports[k % masters]])

    def all_ok() -> bool:
        for p in ports:
            text = ask(node(p), "CLUSTER", "INFO")
            if "cluster_state:ok" not in text or f"cluster_known_nodes:{nodes}" not in text:
                return False
        return True

    _wait(all_ok, timeout, "the cluster did not reach cluster_state:ok")
    if per_master:
        def synced() -> bool:
            return all(parse_info(ask(node(p), "INFO", "replication")).get(
                "master_link_status") == "up" for p in ports[masters:])

        _wait(synced, timeout, "the replicas did not sync with their masters")

        def announced() -> bool:  # every node's slot map lists the replicas (gossip)
            return all(len(r[3]) == per_master for p in ports for r in topology(node(p)))

        _wait(announced, timeout, "the replicas were not announced to every node")


def load_state(directory: str | os.PathLike[str]) -> ClusterState:
    """The cluster ``up`` recorded in ``directory``, or InputError saying there is none."""
    path = Path(directory) / STATE_FILE
    if not path.exists():
        raise InputError(f"no cluster recorded in {directory} (no {STATE_FILE}): start one "
                         f"with `hotshard cluster up --data {directory}`")
    try:
        doc = json.loads(path.read_text())
        return ClusterState(doc["host"], tuple(doc["ports"]), tuple(doc["pids"]), doc["dir"],
                            bool(doc["persist"]), doc.get("password"))
    except PermissionError:
        raise InputError(f"cannot read {path}: it is private to the user who started the "
                         "cluster") from None
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
    state = load_state(directory)
    stopped = []
    for pid, port in zip(state.pids, state.ports, strict=True):
        if _is_our_node(pid, port):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
                os.kill(pid, signal.SIGCONT)  # a frozen (SIGSTOPped) node must wake to exit
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
        with contextlib.suppress(ChildProcessError):  # ours (up ran in this process): reap
            os.waitpid(pid, os.WNOHANG)  # it, or it stays a zombie (a node killed earlier)
    (Path(directory) / STATE_FILE).unlink()
    return stopped


def _parse_cluster_nodes(text: str, host: str) -> list[dict[str, Any]]:
    """CLUSTER NODES lines -> dicts: id, address, flags, master id, slot ranges."""
    out = []
    for line in str(text).splitlines():
        f = line.split()
        if len(f) < 8:
            continue
        address = f[1].split("@")[0].split(",")[0]
        h, _, p = address.rpartition(":")
        slots = []
        for s in f[8:]:
            if s.startswith("["):  # a slot being imported or migrated: not owned
                continue
            a, _, b = s.partition("-")
            slots.append((int(a), int(b or a)))
        out.append({"id": f[0], "address": f"{h or host}:{p}", "flags": f[2].split(","),
                    "master": f[3], "slots": tuple(slots)})
    return out


STATUS_QUESTIONS = (("CLUSTER", "NODES"), ("CLUSTER", "INFO"), ("INFO", "all"))
STATUS_CONNECTIONS = 128  # nodes asked at once


def _ask_each(url: RedisURL, addresses: Sequence[str], commands: Sequence[Sequence[Any]],
              timeout: float) -> dict[str, list[Any] | InputError]:
    """Each node's replies to ``commands`` (or why it gave none), the nodes asked at once on
    an event loop of its own, each within ``timeout``."""
    import asyncio

    async def one(address: str, gate: asyncio.Semaphore) -> list[Any] | InputError:
        async with gate:
            try:
                return await aask_all(url.at(address), commands, timeout=timeout)
            except InputError as e:
                return e

    async def every() -> list[list[Any] | InputError]:
        gate = asyncio.Semaphore(STATUS_CONNECTIONS)
        return await asyncio.gather(*(one(a, gate) for a in addresses))

    if not addresses:
        return {}
    return dict(zip(addresses, asyncio.run(every()), strict=True))


def status(url: str | RedisURL, *, known: tuple[str, ...] = (), timeout: float = 2.0
           ) -> ClusterStatus:
    """Every node of the cluster (those CLUSTER NODES lists, and the ``known`` addresses,
    e.g. from the state file), each with its role, slots, health and, when it answers, ops/s,
    CPU seconds, memory and keys. A dead or frozen node is shown as unreachable, not an error.

    The given node and the ``known`` ones are asked at once, each within ``timeout``; then
    the nodes only CLUSTER NODES listed, so the whole takes at most about twice ``timeout``.
    Runs an event loop of its own: call it where none runs.

    Raises
    ------
    InputError
        No node answers and no ``known`` addresses were given (NodeUnreachable: nothing to
        show), a node wants another password, or the node is not a cluster node.
    """
    url = parse_url(url)
    seeds = list(dict.fromkeys([url.address, *known]))
    answers = _ask_each(url, seeds, STATUS_QUESTIONS, timeout)
    seen_from = next((a for a in seeds if isinstance(answers[a], list)), None)
    first_error = next((e for e in answers.values() if not isinstance(e, NodeUnreachable)
                        and isinstance(e, InputError)), None)
    if seen_from is None:
        if first_error is not None:  # a password or not a cluster: another node would agree
            raise first_error
        if not known:
            raise answers[url.address]  # type: ignore[misc]
        return ClusterStatus(url.given(), "unknown", tuple(
            NodeStatus(a, "?", "unreachable") for a in sorted(seeds, key=node_key)))
    listing, info, _ = answers[seen_from]  # type: ignore[misc]
    cluster_state = next((ln.split(":", 1)[1].strip() for ln in str(info).splitlines()
                          if ln.startswith("cluster_state:")), "?")
    listed = _parse_cluster_nodes(listing, url.at(seen_from).host)
    by_id = {n["id"]: n["address"] for n in listed}
    entries = {n["address"]: n for n in listed}
    for address in known:
        entries.setdefault(address, {"address": address, "flags": ["?"], "master": "-",
                                     "slots": ()})
    addresses = sorted(entries, key=node_key)
    answers.update(_ask_each(url, [a for a in addresses if a not in answers],
                             (("INFO", "all"),), timeout))
    nodes = []
    for address in addresses:
        entry, answer = entries[address], answers[address]
        flags = entry["flags"]
        role = "master" if "master" in flags else "replica" if "slave" in flags else "?"
        info = parse_info(answer[-1]) if isinstance(answer, list) else None
        trouble = [] if info is not None else ["unreachable"] if isinstance(
            answer, NodeUnreachable) else ["loading"] if isinstance(answer, NodeLoading) \
            else ["error"]
        trouble += [f for f in flags if f in FAILURE_FLAGS]
        if "?" in flags and info is not None:
            trouble.append("not in the cluster")  # answers, but no node lists it
        load: dict[str, Any] = {}
        if info is not None:
            load = {"ops_per_sec": int(info.get("instantaneous_ops_per_sec", 0)),
                    "cpu_seconds": float(info.get("used_cpu_sys", 0))
                    + float(info.get("used_cpu_user", 0)),
                    "used_memory": str(info.get("used_memory_human", "?")),
                    "keys": sum(v.get("keys", 0) for k, v in info.items()
                                if k.startswith("db") and isinstance(v, dict)),
                    "commands": sum(v.get("calls", 0) for k, v in info.items()
                                    if k.startswith("cmdstat_") and isinstance(v, dict))}
        nodes.append(NodeStatus(address, role, " ".join(trouble) or "ok", entry["slots"],
                                by_id.get(entry["master"]), **load))
    return ClusterStatus(url.given(), cluster_state, tuple(nodes), seen_from)
