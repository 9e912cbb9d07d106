"""A Redis Cluster's own counters over a window: every node's INFO at the start and the end.

What a node counts and this module reads (``INFO all``): ``commandstats`` (calls and
microseconds per command), ``used_cpu_sys`` + ``used_cpu_user`` (the process's CPU seconds),
``keyspace_hits``/``keyspace_misses``, and on Redis 7 ``latencystats`` (percentiles per
command since the node started or its last ``CONFIG RESETSTAT``). The deltas over the window
become one shard per master, numbered as ``hotshard predict --slots-from`` numbers nodes (by
host and port), with the node's address as ``node``.

Exact accounting of our own questions: a command's call is counted after it runs, so the
start snapshot holds its own login but not itself, and the end snapshot holds the end
connection's login but not itself: the deltas include exactly one ``INFO`` (the start's) and,
with a password, one ``AUTH`` (the end's) of ours per node, which are taken out.

Nothing is written to the nodes (no ``CONFIG RESETSTAT``), so what can only be known since
start is kept as such: the latency percentiles go to each shard's ``extra``, not to
``p50_ms``/``p99_ms``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from hotshard.cluster.lfu_scan import LfuReading, read_lfu
from hotshard.cluster.resp import RedisURL, aask_all, node_key, parse_info, parse_url
from hotshard.cluster.topology import topology
from hotshard.detect.lfu import LFU_INIT_VAL, rate_range
from hotshard.errors import InputError
from hotshard.observations import Observations, ShardObservation
from hotshard.observe._common import CPU_SLACK_S, Notes, build, iso, settle_fraction

__all__ = ["NodeSample", "lfu_hot_keys", "observe_redis_cluster", "sample_nodes"]

INFO = (("INFO", "all"),)


class NodeSample:
    """One node's INFO and the (monotonic, wall) time it was answered."""

    def __init__(self, address: str, info: dict[str, Any], at: float, wall: float) -> None:
        self.address, self.info, self.at, self.wall = address, info, at, wall

    def calls(self) -> dict[str, int]:
        return {k.removeprefix("cmdstat_"): int(v.get("calls", 0))
                for k, v in self.info.items() if k.startswith("cmdstat_") and isinstance(v, dict)}

    def usec(self) -> dict[str, int]:
        return {k.removeprefix("cmdstat_"): int(v.get("usec", 0))
                for k, v in self.info.items() if k.startswith("cmdstat_") and isinstance(v, dict)}

    def number(self, name: str) -> float | None:
        try:
            return float(self.info[name])
        except (KeyError, TypeError, ValueError):
            return None

    def cpu_seconds(self) -> float | None:
        sys_s, user_s = self.number("used_cpu_sys"), self.number("used_cpu_user")
        return None if sys_s is None or user_s is None else sys_s + user_s


def sample_nodes(url: RedisURL, addresses: list[str], *, timeout: float) -> list[NodeSample]:
    """Every node's INFO, asked at once, each within ``timeout``."""

    async def one(address: str) -> NodeSample:
        sent = time.monotonic()
        wall = time.time()
        (text,) = await aask_all(url.at(address), INFO, timeout=timeout)
        done = time.monotonic()
        return NodeSample(address, parse_info(text), (sent + done) / 2,
                          wall + (done - sent) / 2)

    async def every() -> list[NodeSample]:
        return list(await asyncio.gather(*(one(a) for a in addresses)))

    return asyncio.run(every())


def _latency_since_start(info: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Redis 7's latencystats lines -> {command: {"p50": ms, ...}} (microseconds in INFO)."""
    out: dict[str, dict[str, float]] = {}
    for key, value in info.items():
        if key.startswith("latency_percentiles_usec_") and isinstance(value, str):
            values = {}
            for pair in value.split(","):
                name, _, number = pair.partition("=")
                try:
                    values[name.replace(".", "")] = round(float(number) / 1000.0, 6)
                except ValueError:
                    continue
            out[key.removeprefix("latency_percentiles_usec_")] = values
    return out


def _deltas(before: NodeSample, after: NodeSample, *, ours: dict[str, int]
            ) -> tuple[dict[str, int], int]:
    """(calls per command over the window, our own calls removed; microseconds in all)."""
    a, b = before.calls(), after.calls()
    calls = {}
    for command, n in b.items():
        delta = n - a.get(command, 0) - ours.get(command, 0)
        if delta > 0:
            calls[command] = delta
    usec = sum(b_us - before.usec().get(c, 0) for c, b_us in after.usec().items())
    return calls, max(0, usec)


def observe_redis_cluster(url: str | RedisURL, *, duration: float, timeout: float = 5.0,
                          label: str = "production",
                          sleep: Callable[[float], None] = time.sleep,
                          hot_keys: int = 0, max_keys: int | None = None) -> Observations:
    """Every master's commands, CPU and keyspace hits over ``duration`` seconds from now.

    Parameters
    ----------
    url : str or RedisURL
        Any node of the cluster, ``redis-cluster://[:PASSWORD@]HOST:PORT`` (the password may
        be in ``REDISCLI_AUTH``).
    duration : float
        Length of the window in seconds (> 0): INFO now, then again after it.
    timeout : float
        Seconds each question to a node may take, connecting included.
    sleep : callable
        Waits the window out; injected so tests can run traffic meanwhile.
    hot_keys : int
        Also read every master's LFU counters before and after the window (``OBJECT FREQ``,
        as ``redis-cli --hotkeys``; ``cluster.lfu_scan``) and keep the ``hot_keys`` keys with
        the highest counters in ``extra.hot_keys``, each with the rate range its counters
        can mean (``detect.lfu.rate_range``); 0: no reading. The readings bracket the
        window's INFO, so their SCAN and OBJECT FREQ are not in its counts.
    max_keys : int
        Keys a reading scans on each node at most (``lfu_scan.DEFAULT_MAX_KEYS``).

    Raises
    ------
    InputError
        The node is unreachable, not a cluster node, wants another password, the cluster is
        not ok, or a node stops answering within the window.
    """
    if not duration > 0:
        raise InputError(f"duration must be > 0 seconds, got {duration!r}")
    url = parse_url(url)
    rows = topology(url, timeout=timeout)
    masters = sorted({r[2] for r in rows}, key=node_key)
    replicas = {m: sorted({a for r in rows if r[2] == m for a in r[3]}, key=node_key)
                for m in masters}
    slots = {m: sum(r[1] - r[0] + 1 for r in rows if r[2] == m) for m in masters}
    addresses = masters + [a for m in masters for a in replicas[m]]
    if hot_keys < 0:
        raise InputError(f"hot_keys must be >= 0, got {hot_keys}")
    scan = {"max_keys": max_keys} if max_keys is not None else {}
    lfu_before = read_lfu(url, timeout=timeout, **scan) if hot_keys else None
    started = sample_nodes(url, addresses, timeout=timeout)
    sleep(duration)
    try:
        ended = sample_nodes(url, addresses, timeout=timeout)
        lfu_after = read_lfu(url, timeout=timeout, **scan) if hot_keys else None
    except InputError as exc:
        raise InputError(f"a node stopped answering during the window: {exc}") from None
    notes = Notes()
    ours = {"info": 1, **({"auth": 1} if url.password is not None else {})}
    per_node: dict[str, dict[str, Any]] = {}
    for before, after in zip(started, ended, strict=True):
        calls, usec = _deltas(before, after, ours=ours)
        elapsed = after.at - before.at
        node: dict[str, Any] = {"requests": sum(calls.values()), "elapsed": elapsed}
        cpu_a, cpu_b = before.cpu_seconds(), after.cpu_seconds()
        if cpu_a is not None and cpu_b is not None and elapsed > 0:
            node["cpu"] = max(0.0, (cpu_b - cpu_a) / elapsed)
        hits = [s.number("keyspace_hits") for s in (before, after)]
        misses = [s.number("keyspace_misses") for s in (before, after)]
        extra: dict[str, Any] = {"commands": dict(sorted(calls.items())),
                                 "slots": slots.get(before.address)}
        if None not in hits and None not in misses:
            h, m = hits[1] - hits[0], misses[1] - misses[0]
            extra["keyspace_hits"], extra["keyspace_misses"] = int(h), int(m)
            if h + m > 0:
                extra["keyspace_hit_rate"] = round(h / (h + m), 6)
        if node["requests"]:
            extra["usec_per_call"] = round(usec / node["requests"], 3)
        latency = _latency_since_start(after.info)
        if latency:
            extra["latency_since_start_ms"] = latency
        node["extra"] = {k: v for k, v in extra.items() if v is not None}
        per_node[before.address] = node
    shards = []
    for i, master in enumerate(masters):
        node = per_node[master]
        extra = node["extra"]
        if replicas[master]:
            extra["replicas"] = [
                {"node": r, "requests": per_node[r]["requests"],
                 **({"cpu": round(per_node[r]["cpu"], 6)} if "cpu" in per_node[r] else {})}
                for r in replicas[master]]
        cpu = node.get("cpu")
        elapsed = node["elapsed"]
        if cpu is not None and elapsed > 0:   # a main thread busy all along: 1, not 1.002
            cpu = settle_fraction(cpu, CPU_SLACK_S / elapsed)
        if cpu is not None and cpu > 1:
            notes.add(f"node {master}: CPU {cpu:.2f} cores (Redis' I/O threads): left out, "
                      "the shard's extra.cpu_cores keeps it")
            extra["cpu_cores"] = round(cpu, 6)
            cpu = None
        shards.append(ShardObservation(
            id=str(i), node=master, requests=node["requests"],
            rate_rps=round(node["requests"] / elapsed, 3) if elapsed > 0 else None,
            cpu=None if cpu is None else round(cpu, 6), extra=extra))
    window = max(p["elapsed"] for p in per_node.values())
    total = sum(s.requests or 0 for s in shards)
    if any(replicas.values()):
        notes.add("replica nodes are in their master's extra.replicas (requests and CPU), "
                  "not counted as the shard's")
    notes.missing("per-shard latency (p50_ms, p99_ms) and the run's latency_ms",
                  "Redis keeps command latency only since the node started or its last "
                  "CONFIG RESETSTAT (each shard's extra.latency_since_start_ms on Redis 7; "
                  "extra.usec_per_call is the window's mean service time)")
    notes.missing("cache_hit_rate", "Redis' keyspace hits are a cache's hits only when Redis "
                  "is the cache: each shard's extra.keyspace_hit_rate has them")
    notes.add("requests are the commands each node counted (INFO commandstats) over the "
              "window, this observer's own INFO and AUTH taken out")
    source = {"source": "redis-cluster", "url": url.redacted(), "start": iso(started[0].wall),
              "end": iso(ended[0].wall), "nodes": len(addresses)}
    fields = {"duration_s": round(window, 3)}
    if total and window > 0:
        fields["rate_rps"] = fields["achieved_rps"] = round(total / window, 3)
    obs = build(label, source=source, notes=notes, shards=shards, fields=fields)
    if lfu_before is None or lfu_after is None:
        return obs
    found = lfu_hot_keys(lfu_before, lfu_after, hot_keys,
                         total / window if total and window > 0 else None)
    extra = dict(obs.extra)
    extra["observe"] = {**extra["observe"],
                        "notes": [*extra["observe"]["notes"], *found.pop("notes")]}
    return replace(obs, extra={**extra, "hot_keys": found})


def lfu_hot_keys(before: LfuReading, after: LfuReading, count: int,
                 total_rps: float | None) -> dict[str, Any]:
    """The ``count`` keys with the highest counters at the end, each with its counters, the
    rate range they can mean over the readings' interval, and that range as a share of the
    cluster's requests; plus notes saying what the counters are and what they are not."""
    notes = []
    if not after.lfu:
        policies = sorted({n.policy for n in after.nodes if not n.lfu})
        notes.append(f"no hot keys read: the nodes' maxmemory-policy is {', '.join(policies)}, "
                     "not an LFU one, so Redis keeps no access counters (`hotshard cluster up "
                     "--maxmemory-policy allkeys-lfu`, or CONFIG SET maxmemory-policy "
                     "allkeys-lfu on each node)")
        return {"source": "lfu", "policy": policies, "keys": [], "notes": notes}
    first = {(i, k): c for i, n in enumerate(before.nodes) for k, c in n.counters.items()}
    rows = []
    for i, node in enumerate(after.nodes):
        seconds = max(node.at - before.nodes[i].at, 1e-9)
        for key, c in node.counters.items():
            start = first.get((i, key), LFU_INIT_VAL)
            lo, hi = rate_range(start, c, seconds, node.log_factor)
            rows.append((c, key, i, start, lo, hi, seconds))
    rows.sort(key=lambda r: (-r[0], -r[4], r[1]))
    keys = []
    for c, key, i, start, lo, hi, seconds in rows[:count]:
        share = None
        if total_rps:
            share = [round(lo / total_rps, 6),
                     None if math.isinf(hi) else round(min(hi / total_rps, 1.0), 6)]
        keys.append({"key": key, "shard": str(i), "counter_before": start, "counter": c,
                     "rate_rps": [round(lo, 3), None if math.isinf(hi) else round(hi, 3)],
                     "share": share, "seconds": round(seconds, 6)})
    notes.append("hot keys from Redis's LFU counters (OBJECT FREQ, as redis-cli --hotkeys): a "
                 "counter is a logarithm of a key's hits since it was created, so each key's "
                 "rate over the window is a range (extra.hot_keys; a saturated counter, 255, "
                 "has no upper bound); keys created during the window counted from 5")
    if not all(n.complete for n in after.nodes):
        notes.append("the LFU scan stopped short of some nodes' whole keyspace (--max-keys): "
                     "a hotter key may be among those not scanned")
    return {"source": "lfu", "policy": sorted({n.policy for n in after.nodes}),
            "log_factor": after.nodes[0].log_factor if after.nodes else None,
            "keys": keys, "notes": notes}
