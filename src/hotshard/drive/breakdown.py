"""What a drive measured, as observations (``hotshard.observations/1``), a summary, and
warnings about the driver itself.

Per shard: requests and p99 from the recorder (``X-Shard`` or the partitioner); CPU from the
reference service's ``/stats`` sampled before and after the run (CPU seconds of each shard's
processes over the run's wall time), when the target is ``hotshard serve``.
"""

from __future__ import annotations

from typing import Any

from hotshard.drive.record import percentiles_ms
from hotshard.drive.run import DriveResult
from hotshard.observations import Latency, Observations, ShardObservation

__all__ = ["LAG_WARN_MS", "RATE_SHORTFALL", "driver_warnings", "summary", "to_observations"]

RATE_SHORTFALL = 0.01  # achieved dispatch rate more than 1% under target: generator-bound
LAG_WARN_MS = 5.0      # dispatch lag p99 above this: requests left late, the driver was busy


def _shard_cpu(result: DriveResult) -> dict[str, dict[str, Any]]:
    before, after = result.server_stats
    if not before or not after:
        return {}
    out = {}
    old = {str(s["id"]): s for s in before.get("shards", [])}
    for shard in after.get("shards", []):
        prev = old.get(str(shard["id"]))
        if prev is None or shard.get("cpu_seconds") is None or prev.get("cpu_seconds") is None:
            continue
        seconds = shard["cpu_seconds"] - prev["cpu_seconds"]
        replicas = {r["replica"]: r for r in prev.get("replicas", [])}
        for rep in shard.get("replicas", []):
            if rep.get("cpu_seconds") is not None:
                seconds += rep["cpu_seconds"] - (replicas.get(rep["replica"], {})
                                                 .get("cpu_seconds") or 0.0)
        out[str(shard["id"])] = {"cpu": max(0.0, seconds / result.wall_s),
                                 "cache_hits": shard.get("cache_hits", 0)
                                 - prev.get("cache_hits", 0),
                                 "coalesced": shard.get("coalesced", 0)
                                 - prev.get("coalesced", 0)}
    return out


def driver_warnings(result: DriveResult) -> list[str]:
    """Why this run's numbers may describe the driver rather than the target."""
    out = []
    rec = result.recorder
    config = result.config
    if config.model == "open" and not result.interrupted:
        scheduled, last_due = config.schedule().extent()
        behind = rec.last_sent - last_due
        if result.sent + rec.dropped < scheduled or behind > RATE_SHORTFALL * config.duration:
            out.append(f"the driver sent {result.sent:,} of {scheduled:,} scheduled requests "
                       f"and finished sending {max(0.0, behind):.2f} s late: its achieved "
                       "rate was below target (add --processes or lower --rps)")
        lag_p99 = rec.lag.get_value_at_percentile(99) / 1000.0 if rec.lag.get_total_count() \
            else 0.0
        if lag_p99 > LAG_WARN_MS:
            out.append(f"dispatch lag p99 {lag_p99:.1f} ms (> {LAG_WARN_MS:g} ms): the driver "
                       "was the bottleneck, so latencies include its own delay; add "
                       "--processes or lower --rps")
        if rec.dropped:
            out.append(f"{rec.dropped:,} arrivals dropped at --max-inflight "
                       f"{config.max_inflight:,} (the target could not keep up)")
    if rec.overflow:
        out.append(f"{rec.overflow:,} latencies were above the histogram's 1-hour range "
                   "(counted at the top)")
    return out


def to_observations(result: DriveResult, label: str) -> Observations:
    """The run as ``hotshard.observations/1``."""
    rec = result.recorder
    config = result.config
    cpu = _shard_cpu(result)
    # a Redis Cluster's nodes are named by address; number them as `predict --slots-from`
    after = result.server_stats[1] or {}
    node_of = {str(s["id"]): s["node"] for s in after.get("shards", []) if s.get("node")}
    by_id = {node: sid for sid, node in node_of.items()}
    tallies = {by_id.get(name, name): tally for name, tally in rec.shards.items()}
    shards = []
    names = sorted(set(tallies) | set(cpu), key=lambda s: (len(s), s))
    for name in names:
        tally = tallies.get(name)
        lat = percentiles_ms(tally.latency) if tally else None
        extra: dict[str, Any] = {}
        if name in cpu:
            extra = {k: v for k, v in cpu[name].items() if k != "cpu"}
        shards.append(ShardObservation(
            id=name, node=node_of.get(name), requests=tally.requests if tally else 0,
            rate_rps=(tally.requests / result.wall_s) if tally else 0.0,
            p50_ms=lat["p50"] if lat else None, p99_ms=lat["p99"] if lat else None,
            cpu=min(1.0, cpu[name]["cpu"]) if name in cpu else None, extra=extra))
    latency = percentiles_ms(rec.latency)
    service = percentiles_ms(rec.service)
    completed = rec.completed
    extra = {"drive": {
        "target": config.url, "keys": config.keys, "seed": config.seed,
        "arrivals": config.arrivals if config.model == "open" else None,
        "closed_users": config.closed_users, "processes": config.processes,
        "ramp_s": config.ramp, "sent": result.sent, "completed": completed,
        "ok": rec.ok, "errors": dict(rec.errors), "dropped": rec.dropped,
        "overflow": rec.overflow, "reads": rec.reads, "writes": rec.writes,
        "dispatch_lag_ms": percentiles_ms(rec.lag), "interrupted": result.interrupted,
        "read": config.read, "write": config.write, "warnings": driver_warnings(result),
        "node_commands": {sid: s["commands"] for sid, s in
                          ((str(s["id"]), s) for s in after.get("shards", []))
                          if "commands" in s} or None}}
    return Observations(
        label=label, rate_rps=config.rate if config.model == "open" else None,
        achieved_rps=completed / result.wall_s, duration_s=result.wall_s, model=config.model,
        key_generator=result.key_generator,
        latency_ms=Latency(**latency) if latency else None,
        service_time_ms=Latency(**service) if service else None, shards=tuple(shards),
        payload_bytes_mean=(rec.payload_bytes / rec.writes) if rec.writes else None,
        distinct_keys=len(rec.keys) or None, extra=extra)


def summary(result: DriveResult, observations: Observations) -> list[str]:
    """Plain-text summary lines (the CLI prints them)."""
    rec = result.recorder
    d = observations.extra["drive"]
    lines = [f"{observations.model} loop, {result.key_generator} keys, "
             f"{result.wall_s:.1f} s: sent {result.sent:,}, completed {d['completed']:,} "
             f"({observations.achieved_rps:,.0f}/s"
             + (f" of {result.config.rate:,.0f}/s target)" if result.config.model == "open"
                else ")")
             + (f", errors {sum(rec.errors.values()):,} "
                f"({', '.join(f'{k}: {v}' for k, v in rec.errors.most_common(4))})"
                if rec.errors else ", no errors")]

    def row(name: str, lat: Latency | dict | None) -> str:
        if lat is None:
            return f"  {name:<22} -"
        values = lat.to_dict() if isinstance(lat, Latency) else lat
        return (f"  {name:<22} p50 {values['p50']:>9.2f}  p99 {values['p99']:>9.2f}  "
                f"p99.9 {values['p999']:>9.2f}  max {values['max']:>9.2f} ms")

    lines.append(row("latency (intended)", observations.latency_ms))
    lines.append(row("service time (sent)", observations.service_time_ms))
    lines.append(row("dispatch lag", d["dispatch_lag_ms"]))
    if observations.shards:
        lines.append("  shard   requests      p99 ms   CPU")
        total = sum(s.requests or 0 for s in observations.shards) or 1
        for s in sorted(observations.shards, key=lambda s: -(s.requests or 0)):
            cpu = f"{100 * s.cpu:5.0f}%" if s.cpu is not None else "     -"
            p99 = f"{s.p99_ms:10.2f}" if s.p99_ms is not None else "         -"
            lines.append(f"  {s.id:>5} {s.requests:>10,} ({100 * (s.requests or 0) / total:4.1f}%)"
                         f" {p99} {cpu}")
    return lines
