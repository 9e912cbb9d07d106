"""What a drive measured, as observations (``hotshard.observations/1``), a summary, and
warnings about the driver itself.

Per shard: requests and p99 from the recorder (``X-Shard`` or the partitioner); CPU from the
reference service's ``/stats`` sampled before and after the run (CPU seconds of each shard's
processes over the run's wall time), when the target is ``hotshard serve``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hotshard._format import pct
from hotshard.drive.bound import classify_run, lag_share, recorded_bound
from hotshard.drive.record import percentiles_ms
from hotshard.drive.run import DriveResult
from hotshard.drive.series import drive_windows
from hotshard.errors import Phrase
from hotshard.observations import Latency, Observations, ShardObservation

__all__ = ["RATE_SHORTFALL", "driver_warnings", "error_block", "invalid_warning",
           "run_is_valid", "summary", "to_observations"]

RATE_SHORTFALL = 0.01  # achieved dispatch rate more than 1% under target: generator-bound


def _shard_cpu(result: DriveResult) -> dict[str, dict[str, Any]]:
    before, after = result.server_stats
    if not before or not after:
        return {}
    out = {}
    old = {str(s["id"]): s for s in before.get("shards", [])}
    restarted = {sid for sid, _, _ in restarted_shards(result)}
    for shard in after.get("shards", []):
        prev = old.get(str(shard["id"]))
        if prev is None or shard.get("cpu_seconds") is None or prev.get("cpu_seconds") is None:
            continue
        if str(shard["id"]) in restarted:   # the new process's CPU less the old one's: unknown
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


def restarted_shards(result: DriveResult) -> list[tuple[str, Any, Any]]:
    """(shard, pid before, pid after) of each shard whose process changed during the run (a
    crash and restart): its CPU seconds are the new process's, so a difference with the old
    one's means nothing (it read as 0% CPU: a hot shard that crashed looked idle)."""
    before, after = result.server_stats
    if not before or not after:
        return []
    old = {str(s["id"]): s for s in before.get("shards", [])}
    out = []
    for shard in after.get("shards", []):
        prev = old.get(str(shard["id"]))
        if prev is None:
            continue
        pid_a, pid_b = prev.get("pid"), shard.get("pid")
        if (pid_a is not None and pid_b is not None and pid_a != pid_b) or \
                (shard.get("restarts") or 0) > (prev.get("restarts") or 0):
            out.append((str(shard["id"]), pid_a, pid_b))
    return out


def driver_warnings(result: DriveResult) -> list[str]:
    """Why this run's numbers may describe the driver rather than the target."""
    out = []
    for shard, pid_a, pid_b in restarted_shards(result):
        out.append(f"shard {shard} restarted during the run (process {pid_a} then {pid_b}): "
                   "its CPU is unknown and left out, not 0")
    rec = result.recorder
    config = result.config
    if config.model == "open":
        if not result.interrupted:  # an interrupted run was never meant to send them all
            scheduled, last_due = config.schedule().extent()
            behind = rec.last_sent - last_due
            if result.sent + rec.dropped < scheduled or \
                    behind > RATE_SHORTFALL * config.duration:
                out.append(Phrase(
                    f"the driver sent {result.sent:,} of {scheduled:,} scheduled requests and "
                    f"finished sending {max(0.0, behind):.2f} s late: its achieved rate was "
                    "below target (add ${processes} or lower ${rate})"))
        # the lag adds to the latency directly: warn when it is a material part of it (the
        # threshold's reasoning is bound.LAG_MATERIAL's), never on its size alone (17 ms of
        # lag is nothing beside seconds of latency, and most of a 0.5 ms one)
        lag = lag_share(percentiles_ms(rec.latency), percentiles_ms(rec.service),
                        percentiles_ms(rec.lag))
        if lag is not None and lag.material:
            out.append(Phrase(f"{lag.text()}: the driver was a bottleneck, so latencies "
                              "include its own delay; add ${processes} or lower ${rate}"))
        if rec.dropped:
            out.append(Phrase(f"{rec.dropped:,} arrivals dropped at ${{max_inflight}} "
                              f"{config.max_inflight:,} (the target could not keep up)"))
    if rec.overflow:
        out.append(f"{rec.overflow:,} latencies were above the histogram's 1-hour range "
                   "(counted at the top)")
    return out


def _redacted(url: str) -> str:
    """The target as recorded: a Redis URL's password never goes into a file."""
    if url.startswith(("redis://", "redis-cluster://")):
        from hotshard.cluster.local import redact_url

        return redact_url(url)
    return url


def error_block(result: DriveResult) -> dict[str, Any]:
    """The run's failures for the observations' ``errors``: every arrival that did not get a
    successful answer (an error, an arrival dropped at --max-inflight, a request still out when
    the run ended) over every arrival that was due. A run stopped early first gives the
    requests still out a grace period (``run.stop_grace``): those still out after it are
    unfinished too."""
    rec = result.recorder
    unfinished = max(0, result.sent - rec.completed)
    attempted = result.sent + rec.dropped
    failed = rec.failed + rec.dropped + unfinished
    block: dict[str, Any] = {
        "share": failed / attempted if attempted else 1.0, "attempted": attempted,
        "failed": rec.failed, "dropped": rec.dropped, "unfinished": unfinished,
        "by_kind": dict(rec.errors.most_common()),
        "max_error_rate": result.config.max_error_rate}
    if rec.unattributed and rec.shards:
        block["unattributed"] = rec.unattributed
    lat = percentiles_ms(rec.error_latency)
    if lat:
        block["latency_ms"] = lat
    return block


def run_is_valid(errors: dict[str, Any]) -> bool:
    """Whether a run with this ``error_block`` measured the target: something was sent and
    no more than the allowed share failed."""
    return errors["attempted"] > 0 and errors["share"] <= errors["max_error_rate"]


def target_detection(stats: Any) -> dict | None:
    """How the target finds hot keys (``serve``'s ``/stats`` ``service.detection``), checked
    by the rule itself (``detect.policy.Detection``); None when it does not say or says
    something no service could run."""
    from hotshard.detect.policy import Detection
    from hotshard.errors import InputError

    service = stats.get("service") if isinstance(stats, dict) else None
    raw = service.get("detection") if isinstance(service, dict) else None
    if not isinstance(raw, dict):
        return None
    try:
        return Detection.from_dict(raw).to_dict()
    except InputError:
        return None


def target_mitigations(stats: Any) -> dict | None:
    """The mitigations the target had on at the run's end (``serve``'s ``/stats``
    ``service.mitigations``), checked as the service checks them; None when it does not say
    or says something no service could run."""
    from hotshard.errors import InputError
    from hotshard.mitigations import Mitigations

    service = stats.get("service") if isinstance(stats, dict) else None
    raw = service.get("mitigations") if isinstance(service, dict) else None
    if not isinstance(raw, dict):
        return None
    names = ("split_into", "split_bucket_ms", "replicas", "cache_ttl_s", "coalesce",
             "channels", "hot_share")
    try:
        return Mitigations().updated({k: v for k, v in raw.items() if k in names}).to_dict(
            names)
    except InputError:
        return None


def run_actions(stats: dict, start_epoch: float, wall_s: float) -> tuple[dict, ...]:
    """The target's mitigation actions during the run (``serve``'s ``/stats`` ``actions``,
    read after it), each with ``t``, its seconds into the run: those taken from the run's
    start to a few seconds past its end (a detector acts on what it saw up to then; one
    taken before the start, such as the lift of a channel an earlier run made hot, is not
    this run's). An entry the observations would refuse (``observations.read_action``), or
    with no finite ``at``, is left out: the document is the target's, not ours."""
    import math

    from hotshard.errors import ObservationsError
    from hotshard.observations import MAX_ACTIONS, read_action

    out = []
    raw = stats.get("actions") if isinstance(stats, dict) else None
    for a in raw if isinstance(raw, list) else []:
        at = a.get("at") if isinstance(a, dict) else None
        if not (isinstance(at, int | float) and not isinstance(at, bool) and math.isfinite(at)):
            continue
        t = at - start_epoch
        if not 0.0 <= t <= wall_s + 5.0:
            continue
        try:
            out.append(read_action({"t": round(t, 3),
                                    **{k: v for k, v in a.items() if k != "t"}}))
        except ObservationsError:
            continue
        if len(out) >= MAX_ACTIONS:
            break
    return tuple(out)


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
            cpu=min(1.0, cpu[name]["cpu"]) if name in cpu else None,
            errors=tally.errors if tally else None,
            extra={**extra, "error_kinds": dict(tally.error_kinds)}
            if tally and tally.error_kinds else extra))
    latency = percentiles_ms(rec.latency)
    service = percentiles_ms(rec.service)
    completed = rec.completed
    extra = {"drive": {
        "target": _redacted(config.url), "keys": config.keys, "seed": config.seed,
        "order": result.key_order,
        "arrivals": config.arrivals if config.model == "open" else None,
        "closed_users": config.closed_users, "processes": config.processes,
        "ramp_s": config.ramp, "sent": result.sent, "completed": completed,
        "ok": rec.ok, "dropped": rec.dropped,
        "overflow": rec.overflow, "reads": rec.reads, "writes": rec.writes,
        "dispatch_lag_ms": percentiles_ms(rec.lag), "host_cpu": result.host_cpu,
        "interrupted": result.interrupted,
        "read": config.read, "write": config.write, "warnings": driver_warnings(result),
        "events": [{"key": e.key, "share": e.share, "start_s": e.start, "end_s": e.end}
                   for e in config.events] or None,
        "detection": target_detection(after),
        "target_mitigations": target_mitigations(after),
        "node_commands": {sid: s["commands"] for sid, s in
                          ((str(s["id"]), s) for s in after.get("shards", []))
                          if "commands" in s} or None}}
    errors = error_block(result)
    observations = Observations(
        label=label, rate_rps=config.rate if config.model == "open" else None,
        achieved_rps=rec.ok / result.wall_s, duration_s=result.wall_s, model=config.model,
        key_generator=result.key_generator,
        latency_ms=Latency(**latency) if latency else None,
        service_time_ms=Latency(**service) if service else None, shards=tuple(shards),
        payload_bytes_mean=(rec.payload_bytes / rec.writes) if rec.writes else None,
        distinct_keys=len(rec.keys) or None, errors=errors, valid=run_is_valid(errors),
        windows=drive_windows(rec, result.wall_s, result.cpu_samples,
                              rename=by_id),
        actions=run_actions(after, result.start_epoch, result.wall_s),
        extra=extra)
    # what made the latency (the shards, the machine or the driver), kept with the run so a
    # report never states a p99 comparison the run cannot carry
    return replace(observations, extra={
        **extra, "latency_bound": classify_run(observations).to_dict()})


def summary(result: DriveResult, observations: Observations) -> list[str]:
    """Plain-text summary lines (the CLI prints them)."""
    rec = result.recorder
    d = observations.extra["drive"]
    e = observations.errors or error_block(result)
    lines = []
    if not observations.is_valid:
        lines.append(invalid_warning(e))
    order = " in production's order" if result.key_order == "locality" else ""
    lines += [f"{observations.model} loop, {result.key_generator} keys{order}, "
             f"{result.wall_s:.1f} s" + (f" of {result.config.duration:g} s (interrupted)"
                                        if result.interrupted else "")
             + f": sent {result.sent:,}, succeeded {rec.ok:,} "
             f"({observations.achieved_rps:,.0f}/s"
             + (f" of {result.config.rate:,.0f}/s target)" if result.config.model == "open"
                else ")")
             + (f", failed {pct(e['share'])}"
                if e["share"] else ", no errors")]
    for ev in result.config.events:
        lines.append(f"  event: {ev.key} took {pct(ev.share)} of the requests from "
                     f"{ev.start:g} s to {ev.end:g} s")
    for act in observations.actions[:10]:
        lines.append(f"  the target's mitigation at {act['t']:.1f} s: {act['action']} "
                     f"{act['key']}" + (f" (shard {act['shard']})" if act.get("shard") else "")
                     + (f" at {pct(act['share'])}" if act.get("share") is not None else ""))
    if len(observations.actions) > 10:
        lines.append(f"  ... and {len(observations.actions) - 10:,} more actions "
                     "(the observations' actions)")
    if rec.errors:
        kinds = ", ".join(f"{k} {v:,}" for k, v in rec.errors.most_common(6))
        lines.append(f"  errors {rec.failed:,}: {kinds}")
    if rec.unattributed and rec.shards:
        lines.append(f"  failures in no shard's row {rec.unattributed:,}: the target named no "
                     "shard for them (give -p/-n to place them by key)")
    for name, n in (("dropped at --max-inflight", rec.dropped),
                    ("unfinished (no answer by the end, counted as failed)",
                     e["unfinished"])):
        if n:
            lines.append(f"  {name} {n:,}")

    def row(name: str, lat: Latency | dict | None) -> str:
        if lat is None:
            return f"  {name:<22} -"
        values = lat.to_dict() if isinstance(lat, Latency) else lat
        return (f"  {name:<22} p50 {values['p50']:>9.2f}  p99 {values['p99']:>9.2f}  "
                f"p99.9 {values['p999']:>9.2f}  max {values['max']:>9.2f} ms")

    lines.append(row("latency (intended)", observations.latency_ms))
    lines.append(row("service time (sent)", observations.service_time_ms))
    if rec.errors:
        lines.append(row("failures (intended)", e.get("latency_ms")))
    lines.append(row("dispatch lag", d["dispatch_lag_ms"]))
    bound = recorded_bound(observations)
    if bound is not None and bound.verdict != "unknown":  # what made the latency above
        lines.append(f"  {'latency verdict':<22} {bound.summary()}")
    if observations.shards:
        lines.append("  shard   requests      p99 ms   CPU    errors")
        total = sum(s.requests or 0 for s in observations.shards) or 1
        for s in sorted(observations.shards, key=lambda s: -(s.requests or 0)):
            cpu = f"{pct(s.cpu):>6}" if s.cpu is not None else "     -"
            p99 = f"{s.p99_ms:10.2f}" if s.p99_ms is not None else "         -"
            failed = ""
            if s.errors:
                kinds = s.extra.get("error_kinds") or {}
                top = ", ".join(f"{k} {v:,}" for k, v in
                                sorted(kinds.items(), key=lambda kv: -kv[1])[:2])
                failed = f"  {s.errors:,} ({pct(s.errors / max(1, s.requests or 0))}" \
                         + (f": {top})" if top else ")")
            lines.append(f"  {s.id:>5} {s.requests:>10,} ({pct((s.requests or 0) / total):>5})"
                         f" {p99} {cpu}{failed}")
    return lines


def invalid_warning(errors: dict[str, Any]) -> str:
    """The summary's first line for a run that failed too often."""
    return (f"WARNING: invalid run: {pct(errors['share'])} of {errors['attempted']:,} "
            f"requests failed (--max-error-rate {100 * errors['max_error_rate']:g}%); the "
            "latency below is of the successes only and does not describe the target")
