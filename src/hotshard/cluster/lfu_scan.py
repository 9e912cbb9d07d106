"""Every master's keys with their LFU counters, read as ``redis-cli --hotkeys`` reads them: the
policy first (``CONFIG GET maxmemory-policy``: the counters exist only under an LFU one), then
``SCAN`` through the keyspace and ``OBJECT FREQ`` for each key found (``detect.lfu`` says what
a counter means).

Bounded, since the keyspace is the user's: at most ``max_keys`` keys a node (the note says
when a scan stopped short) and every exchange within ``timeout``; a key deleted between its
SCAN and its OBJECT FREQ is skipped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from hotshard.cluster.resp import RedisURL, ask_all, node_key, parse_url
from hotshard.cluster.topology import topology
from hotshard.detect.lfu import DEFAULT_DECAY_MINUTES, DEFAULT_LOG_FACTOR
from hotshard.errors import InputError

__all__ = ["DEFAULT_MAX_KEYS", "LfuReading", "NodeCounters", "read_lfu"]

DEFAULT_MAX_KEYS = 100_000
SCAN_COUNT = 1000          # keys a SCAN step asks for
KEY_BATCH = 1000           # OBJECT FREQ questions sent together
MAX_KEY_BYTES = 4096       # a longer key name is kept cut (it is evidence, not data)


@dataclass(frozen=True)
class NodeCounters:
    """One master's reading: its policy and LFU settings, and (under LFU) every key scanned
    with its counter, at ``at`` (monotonic seconds)."""

    address: str
    policy: str
    log_factor: float = DEFAULT_LOG_FACTOR
    decay_minutes: float = DEFAULT_DECAY_MINUTES
    counters: dict[str, int] = field(default_factory=dict)
    complete: bool = True      # the scan saw the whole keyspace
    at: float = 0.0

    @property
    def lfu(self) -> bool:
        return "lfu" in self.policy


@dataclass(frozen=True)
class LfuReading:
    """Every master's counters, masters in ``predict --slots-from``'s order."""

    nodes: tuple[NodeCounters, ...]

    @property
    def lfu(self) -> bool:
        return all(n.lfu for n in self.nodes)


def _number(value, default: float) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def _config(url: RedisURL, timeout: float) -> tuple[str, float, float]:
    replies = ask_all(url, [("CONFIG", "GET", "maxmemory-policy"),
                            ("CONFIG", "GET", "lfu-log-factor"),
                            ("CONFIG", "GET", "lfu-decay-time")], timeout=timeout)
    values = []
    for reply in replies:
        pairs = reply if isinstance(reply, list) else []
        values.append(pairs[1] if len(pairs) >= 2 else None)
    policy = values[0].decode() if isinstance(values[0], bytes) else str(values[0] or "unknown")
    return (policy, _number(values[1], DEFAULT_LOG_FACTOR),
            _number(values[2], DEFAULT_DECAY_MINUTES))


def _scan(url: RedisURL, max_keys: int, timeout: float) -> tuple[list[str | bytes], bool]:
    """Keys of the node, at most ``max_keys``; whether the scan finished."""
    keys: list[str | bytes] = []
    cursor: str | bytes = "0"
    while True:
        reply = ask_all(url, [("SCAN", cursor, "COUNT", SCAN_COUNT)], timeout=timeout)[0]
        if not (isinstance(reply, list) and len(reply) == 2 and isinstance(reply[1], list)):
            raise InputError(f"Redis at {url.address} answered SCAN oddly: not a cursor and "
                             "a list of keys")
        cursor = reply[0]
        if not isinstance(cursor, str | bytes):
            raise InputError(f"Redis at {url.address} answered SCAN with a cursor that is "
                             f"not one: {str(cursor)[:40]!r}")
        keys.extend(k for k in reply[1] if isinstance(k, str | bytes))
        done = cursor in (b"0", "0")
        if len(keys) >= max_keys:
            return keys[:max_keys], done and len(keys) == max_keys
        if done:
            return keys, True


def _name(key: str | bytes) -> str:
    if isinstance(key, str):
        return key[:MAX_KEY_BYTES]
    return key[:MAX_KEY_BYTES].decode("utf-8", errors="backslashreplace")


def read_node(url: RedisURL, *, max_keys: int = DEFAULT_MAX_KEYS, timeout: float = 5.0,
              clock=time.monotonic) -> NodeCounters:
    """One node's reading (module notes); under a policy that is not LFU, no counters."""
    policy, factor, decay = _config(url, timeout)
    if "lfu" not in policy:
        return NodeCounters(url.address, policy, factor, decay, at=clock())
    keys, complete = _scan(url, max_keys, timeout)
    counters: dict[str, int] = {}
    for i in range(0, len(keys), KEY_BATCH):
        batch = keys[i:i + KEY_BATCH]
        replies = ask_all(url, [("OBJECT", "FREQ", k) for k in batch], timeout=timeout,
                          keep_errors=True)
        for key, reply in zip(batch, replies, strict=True):
            if isinstance(reply, int) and 0 <= reply <= 255:
                counters[_name(key)] = int(reply)
    return NodeCounters(url.address, policy, factor, decay, counters, complete, clock())


def read_lfu(url: str | RedisURL, *, max_keys: int = DEFAULT_MAX_KEYS, timeout: float = 5.0,
             clock=time.monotonic) -> LfuReading:
    """Every master's reading (``read_node``), masters numbered as ``predict --slots-from``.

    Raises
    ------
    InputError
        The cluster cannot be reached or read (as ``topology``), or a node answers SCAN
        with something that is not a scan.
    """
    if max_keys < 1:
        raise InputError(f"max_keys must be >= 1, got {max_keys}")
    url = parse_url(url)
    rows = topology(url, timeout=timeout)
    masters = sorted({r[2] for r in rows}, key=node_key)
    return LfuReading(tuple(read_node(url.at(m), max_keys=max_keys, timeout=timeout,
                                      clock=clock) for m in masters))
