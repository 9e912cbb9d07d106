"""A local Redis Cluster: start N redis-server nodes on 127.0.0.1, assign the 16384 slots
evenly (exactly as ``redis-cli --cluster create`` does, and as ``hotshard predict -p
redis-cluster -n N`` assumes), wait for ``cluster_state:ok``; stop exactly those processes.

Each node is one single-threaded redis-server process, so a hot key saturates one node's core
as the incident's hot channel saturated one shard. The pids, ports, directories and the
cluster's password are recorded in ``DIR/cluster.json`` (mode 0600, in a 0700 directory);
``down`` stops the processes recorded there and nothing else (it checks each pid still runs
redis-server on its port before signalling it).

Closed by default: every node requires a password generated at start (``requirepass``, and
``masterauth`` so replicas can sync), kept in a 0600 config file per node rather than on the
command line, where ``ps`` shows it to every user. Clients give it in the URL form redis
clients accept: ``redis-cluster://:PASSWORD@HOST:PORT`` (``USER:PASSWORD@`` for an ACL user).
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
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from hotshard.errors import HotshardError, InputError

__all__ = ["ClusterState", "ClusterStatus", "NodeStatus", "NodeUnreachable", "RedisURL",
           "STATE_FILE", "check_resources", "down", "find_redis_server", "live_slot_map",
           "load_state", "parse_url", "redact_url", "replica_map", "status", "topology", "up"]

STATE_FILE = "cluster.json"
REDIS_SLOTS = 16384
BUS_OFFSET = 10000
INSTALL_HINT = ("install Debian's redis-server package (sudo apt-get install redis-server; "
                "`make test` does it)")
PASSWORD_HINT = ("give the URL `hotshard cluster up` printed, redis-cluster://:PASSWORD@HOST:PORT "
                 "(`hotshard cluster status --dir DIR` shows it again)")
FAILURE_FLAGS = ("fail", "fail?", "handshake", "noaddr")  # CLUSTER NODES flags that mean trouble


class NodeUnreachable(InputError):
    """A node did not answer as a Redis server does: refused, reset, silent, or not RESP."""


@dataclass(frozen=True)
class RedisURL:
    """A node to talk to and how to log in: ``redis[-cluster]://[[USER]:PASSWORD@]HOST[:PORT]``."""

    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    scheme: str = "redis-cluster"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def at(self, address: str) -> RedisURL:
        """Another node of the same cluster, with the same credentials."""
        host, port = _node_key(address)
        return replace(self, host=host or self.host, port=port)

    def __str__(self) -> str:
        return self._format(quote(self.password, safe="") if self.password is not None
                            else None)

    def redacted(self) -> str:
        """The URL without its password: for messages, logs and recorded results."""
        return self._format("***" if self.password is not None else None)

    def _format(self, password: str | None) -> str:
        user = quote(self.username or "", safe="")
        login = f"{user}:{password}@" if password is not None else f"{user}@" if user else ""
        return f"{self.scheme}://{login}{self.address}"


def parse_url(url: str | RedisURL) -> RedisURL:
    """``redis://`` or ``redis-cluster://`` URL (or bare ``HOST:PORT``) -> RedisURL.

    The password may be given as ``:PASSWORD@`` or ``USER:PASSWORD@``, percent-encoded as in
    any URL; the port defaults to 6379.
    """
    if isinstance(url, RedisURL):
        return url
    parts = urlsplit(url if "://" in url else f"redis://{url}")
    if parts.scheme not in ("redis", "redis-cluster") or not parts.hostname:
        raise InputError("expected redis://HOST:PORT or redis-cluster://[:PASSWORD@]HOST:PORT, "
                         f"got {_redact_text(url)!r}")
    try:
        port = parts.port or 6379
    except ValueError:
        raise InputError(f"bad port in {_redact_text(url)!r}") from None
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    return RedisURL(parts.hostname, port, username, password, parts.scheme)


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (a URL that does not parse is returned
    with its login part cut), so a recorded target or a message never carries a secret."""
    try:
        return parse_url(url).redacted()
    except InputError:
        return _redact_text(url)


def _redact_text(url: str) -> str:
    scheme, sep, rest = url.rpartition("://")
    login, at, host = rest.rpartition("@")
    return f"{scheme}{sep}***@{host}" if at else url


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


def _client(url: RedisURL, timeout: float = 5.0):
    """A redis-py client for one node. No retries: redis-py's default retries a timed-out
    command three times with backoff, so a silent peer took ~25 s instead of ``timeout``."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis(host=url.host, port=url.port, username=url.username,
                       password=url.password, socket_timeout=timeout,
                       socket_connect_timeout=timeout, decode_responses=True,
                       retry=Retry(NoBackoff(), 0))


def _auth_error(url: RedisURL, error: Exception) -> InputError:
    text = str(error)
    if "without any password" in text or "no password is set" in text:
        return InputError(f"Redis at {url.address} has no password, but the URL gives one: "
                          "remove ':PASSWORD@' from it")
    if url.password is None:
        return InputError(f"Redis at {url.address} needs a password (NOAUTH) and the URL gives "
                          f"none: {PASSWORD_HINT}")
    return InputError(f"Redis at {url.address} refused the password in the URL (WRONGPASS): "
                      f"{PASSWORD_HINT}")


def _ask(url: RedisURL, *command: Any, timeout: float = 5.0, client: Any = None) -> Any:
    """One command to one node; every way it can fail is one InputError naming the node
    (NodeUnreachable when the node is not there, silent or not Redis)."""
    import redis.exceptions as rx

    try:
        return (client or _client(url, timeout)).execute_command(*command)
    except rx.AuthenticationError as e:
        raise _auth_error(url, e) from None
    except rx.BusyLoadingError:
        raise InputError(f"Redis at {url.address} is loading its data (LOADING): wait for it"
                         ) from None
    except rx.TimeoutError:
        raise NodeUnreachable(f"{url.address} accepted the connection but sent no answer "
                              f"within {timeout:g} s: not a Redis server, or a frozen one"
                              ) from None
    except rx.ConnectionError as e:
        raise NodeUnreachable(f"cannot reach Redis at {url.address}: {e}") from None
    except (rx.InvalidResponse, UnicodeDecodeError):
        raise NodeUnreachable(f"{url.address} is not a Redis server (its answer is not the "
                              "Redis protocol)") from None
    except rx.ResponseError as e:
        if "cluster support disabled" in str(e):
            raise InputError(f"{url.address} is a Redis server without cluster mode, not a "
                             "Redis Cluster node") from None
        raise InputError(f"{url.address} answered {' '.join(map(str, command[:2]))} with an "
                         f"error: {e}") from None


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
    if not path.exists():
        path.mkdir(parents=True, mode=0o700)
        os.chmod(path, 0o700)  # mkdir's mode is reduced by the umask, never widened: be exact
    elif not path.is_dir():
        raise InputError(f"{path} is a file, not a directory: give another --dir")

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
       replicas: int = 0) -> ClusterState:
    """Start an N-master cluster (and ``replicas`` replica nodes per master, on the ports
    after the masters'), every node requiring a new random password; return once every node
    reports ``cluster_state:ok`` and every replica has synced with its master.

    Raises
    ------
    InputError
        No redis-server, fewer than 1 or more than 1000 nodes, a port (or its cluster bus port,
        +10000) in use, a directory that already holds a running cluster, or a machine that
        cannot hold that many nodes (open files, memory, processes; see ``check_resources``).
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
    check_resources(nodes)
    ports = tuple(range(port, port + nodes))
    busy = [p for p in ports if not _port_free(host, p) or not _port_free(host, p + BUS_OFFSET)]
    if busy:
        raise InputError(f"port {busy[0]} (or its cluster bus port {busy[0] + BUS_OFFSET}) on "
                         f"{host} is in use: pick another --port")
    _private_dir(root)
    password = secrets.token_urlsafe(24)  # URL-safe: the URL needs no percent-encoding
    procs = []
    try:
        for p in ports:
            procs.append(_start_node(binary, root, host, p, password, persist))
        state = ClusterState(host, ports, tuple(pr.pid for pr in procs), str(root.resolve()),
                             persist, password)
        _write_private(root / STATE_FILE, json.dumps(state.to_dict(), indent=2) + "\n")
        _form(state, procs, masters, replicas, timeout)
        return state
    except BaseException:
        for pr in procs:
            with contextlib.suppress(ProcessLookupError):
                pr.kill()
            pr.wait()
        with contextlib.suppress(FileNotFoundError):
            (root / STATE_FILE).unlink()
        raise


def _start_node(binary: str, root: Path, host: str, port: int, password: str,
                persist: bool) -> subprocess.Popen:
    """One redis-server, its secrets in a 0600 config file (the argv is world-readable)."""
    node_dir = root / f"node-{port}"
    node_dir.mkdir(mode=0o700, exist_ok=True)
    os.chmod(node_dir, 0o700)  # its append-only file holds the users' messages
    for stale in ("nodes.conf", "appendonly.aof", "dump.rdb"):
        with contextlib.suppress(FileNotFoundError):
            (node_dir / stale).unlink()
    shutil.rmtree(node_dir / "appendonlydir", ignore_errors=True)
    config = node_dir / "redis.conf"
    _write_private(config, f"requirepass {password}\nmasterauth {password}\n")
    argv = [binary, str(config.resolve()), "--port", str(port), "--bind", host,
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", "5000", "--dir", str(node_dir.resolve()),
            "--daemonize", "no", "--save", "", "--logfile", "redis.log"]
    argv += (["--appendonly", "yes", "--appendfsync", "everysec"] if persist
             else ["--appendonly", "no"])
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _form(state: ClusterState, procs: list[subprocess.Popen], masters: int, replicas: int,
          timeout: float) -> None:
    """Wait for the nodes, assign the slots, introduce the nodes, attach the replicas."""
    host, ports, root = state.host, state.ports, Path(state.dir)
    nodes = len(ports)
    at = state.redis_url.at
    for p, proc in zip(ports, procs, strict=True):
        def answers(p: int = p, proc: subprocess.Popen = proc) -> bool:
            if proc.poll() is not None:
                log = root / f"node-{p}" / "redis.log"
                lines = [ln for ln in (log.read_text(errors="replace").splitlines()
                                       if log.exists() else []) if " # " in ln]
                reason = lines[-1].split(" # ", 1)[1] if lines else "see its redis.log"
                raise InputError(f"node {host}:{p} exited at start: {reason}")
            return bool(_client(at(f"{host}:{p}")).ping())

        _wait(answers, timeout, f"node {host}:{p} did not answer")
    for p, (first, last) in zip(ports[:masters], even_slot_ranges(masters), strict=True):
        _client(at(f"{host}:{p}")).execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
    first_node = _client(at(f"{host}:{ports[0]}"))
    for p in ports[1:]:
        first_node.execute_command("CLUSTER", "MEET", host, p)
    if replicas:
        ids = {p: _client(at(f"{host}:{p}")).execute_command("CLUSTER", "MYID") for p in ports}

        def everyone_knows_everyone() -> bool:
            return all(f"cluster_known_nodes:{nodes}" in str(
                _client(at(f"{host}:{p}")).execute_command("CLUSTER", "INFO")) for p in ports)

        _wait(everyone_knows_everyone, timeout, "the nodes did not meet")
        for k, p in enumerate(ports[masters:]):
            master = ports[k % masters]
            _client(at(f"{host}:{p}")).execute_command("CLUSTER", "REPLICATE", ids[master])

    def all_ok() -> bool:
        for p in ports:
            text = str(_client(at(f"{host}:{p}")).execute_command("CLUSTER", "INFO"))
            if "cluster_state:ok" not in text or f"cluster_known_nodes:{nodes}" not in text:
                return False
        return True

    _wait(all_ok, timeout, "the cluster did not reach cluster_state:ok")
    if replicas:
        def synced() -> bool:
            return all(_client(at(f"{host}:{p}")).info("replication").get("master_link_status")
                       == "up" for p in ports[masters:])

        _wait(synced, timeout, "the replicas did not sync with their masters")

        def announced() -> bool:  # every node's slot map lists the replicas (gossip)
            return all(len(r[3]) == replicas for p in ports
                       for r in topology(at(f"{host}:{p}")))

        _wait(announced, timeout, "the replicas were not announced to every node")


def load_state(directory: str | os.PathLike[str]) -> ClusterState:
    """The cluster ``up`` recorded in ``directory``, or InputError saying there is none."""
    path = Path(directory) / STATE_FILE
    if not path.exists():
        raise InputError(f"no cluster recorded in {directory} (no {STATE_FILE}): start one "
                         f"with `hotshard cluster up --dir {directory}`")
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


def _node_key(address: str) -> tuple[str, int]:
    h, _, p = address.rpartition(":")
    return h, int(p)


def topology(url: str | RedisURL, *, timeout: float = 5.0
             ) -> list[tuple[int, int, str, tuple[str, ...]]]:
    """CLUSTER SLOTS as sorted (first, last, master address, replica addresses), from one
    node, each exchange bounded by ``timeout``.

    Raises
    ------
    InputError
        The node is unreachable, silent or not Redis (NodeUnreachable), needs another
        password, is not a cluster node, or the cluster is not ``cluster_state:ok``.
    """
    url = parse_url(url)
    client = _client(url, timeout)
    text = str(_ask(url, "CLUSTER", "INFO", timeout=timeout, client=client))
    if "cluster_state:ok" not in text:
        state = next((ln for ln in text.splitlines() if ln.startswith("cluster_state")), "?")
        raise InputError(f"the cluster at {url.address} is not ok ({state.strip()}): wait "
                         "for it or fix it before measuring (`hotshard cluster status` names "
                         "the failing nodes)")
    rows = _ask(url, "CLUSTER", "SLOTS", timeout=timeout, client=client)
    host = url.host
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


def replicas_of(rows: list[tuple[int, int, str, tuple[str, ...]]]
                ) -> dict[str, tuple[str, ...]]:
    """Each master's replica addresses, from ``topology`` rows."""
    out: dict[str, tuple[str, ...]] = {}
    for _, _, master, replicas in rows:
        out[master] = tuple(sorted(set(out.get(master, ())) | set(replicas), key=_node_key))
    return out


def slot_map_of(rows: list[tuple[int, int, str, tuple[str, ...]]], where: str = "the cluster"):
    """(slot -> node index array, master addresses in index order) from ``topology`` rows.

    Nodes are numbered by (host, port), so node 0 of a local cluster is its first port.
    """
    import numpy as np

    nodes = sorted({r[2] for r in rows}, key=_node_key)
    slot_node = np.full(REDIS_SLOTS, -1, dtype=np.int64)
    for first, last, address, _ in rows:
        slot_node[first:last + 1] = nodes.index(address)
    if (slot_node < 0).any():
        raise InputError(f"{where} leaves {(slot_node < 0).sum()} slots unassigned")
    return slot_node, nodes


def replica_map(url: str | RedisURL, *, timeout: float = 5.0) -> dict[str, tuple[str, ...]]:
    """Each master's replica addresses, from a live CLUSTER SLOTS."""
    return replicas_of(topology(url, timeout=timeout))


def live_slot_map(url: str | RedisURL, *, timeout: float = 5.0):
    """(slot -> node index array, node addresses in index order) from a live CLUSTER SLOTS.

    Nodes are numbered by (host, port), so node 0 of a local cluster is its first port.
    """
    where = f"the cluster at {parse_url(url).address}"
    return slot_map_of(topology(url, timeout=timeout), where)


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


def _view(url: RedisURL, seeds: list[str], timeout: float
          ) -> tuple[str, str, list[dict[str, Any]]] | NodeUnreachable:
    """(node asked, its cluster_state, its CLUSTER NODES) from the first seed that answers;
    the first seed's NodeUnreachable when none does. Other errors (password, not a cluster)
    are raised: asking another node would not change them."""
    first: NodeUnreachable | None = None
    for address in seeds:
        node = url.at(address)
        try:
            client = _client(node, timeout)
            listing = _ask(node, "CLUSTER", "NODES", timeout=timeout, client=client)
            info = str(_ask(node, "CLUSTER", "INFO", timeout=timeout, client=client))
        except NodeUnreachable as e:
            first = first or e
            continue
        state = next((ln.split(":", 1)[1].strip() for ln in info.splitlines()
                      if ln.startswith("cluster_state:")), "?")
        return address, state, _parse_cluster_nodes(listing, node.host)
    assert first is not None  # seeds is never empty
    return first


def _node_info(url: RedisURL, timeout: float) -> dict[str, Any] | None:
    try:
        info = _ask(url, "INFO", "all", timeout=timeout)
    except NodeUnreachable:
        return None
    return info if isinstance(info, dict) else None


def status(url: str | RedisURL, *, known: tuple[str, ...] = (), timeout: float = 2.0
           ) -> ClusterStatus:
    """Every node of the cluster (those CLUSTER NODES lists, and the ``known`` addresses,
    e.g. from the state file), each with its role, slots, health and, when it answers, ops/s,
    CPU seconds, memory and keys. A dead or frozen node is shown as unreachable, not an error.

    Raises
    ------
    InputError
        No node answers and no ``known`` addresses were given (NodeUnreachable: nothing to
        show), a node wants another password, or the node is not a cluster node.
    """
    from concurrent.futures import ThreadPoolExecutor

    url = parse_url(url)
    seeds = list(dict.fromkeys([url.address, *known]))
    view = _view(url, seeds, timeout)
    if isinstance(view, NodeUnreachable):
        if not known:
            raise view
        return ClusterStatus(str(url), "unknown", tuple(
            NodeStatus(a, "?", "unreachable") for a in sorted(seeds, key=_node_key)))
    seen_from, cluster_state, listed = view
    by_id = {n["id"]: n["address"] for n in listed}
    entries = {n["address"]: n for n in listed}
    for address in known:
        entries.setdefault(address, {"address": address, "flags": ["?"], "master": "-",
                                     "slots": ()})
    addresses = sorted(entries, key=_node_key)
    with ThreadPoolExecutor(max_workers=min(16, len(addresses))) as pool:
        infos = list(pool.map(lambda a: _node_info(url.at(a), timeout), addresses))
    nodes = []
    for address, info in zip(addresses, infos, strict=True):
        entry = entries[address]
        flags = entry["flags"]
        role = "master" if "master" in flags else "replica" if "slave" in flags else "?"
        trouble = (["unreachable"] if info is None else []) + \
            [f for f in flags if f in FAILURE_FLAGS]
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
    return ClusterStatus(str(url), cluster_state, tuple(nodes), seen_from)
