"""What limited a live run's latency: its shards, the machine it ran on, or the driver.

A run's latency is evidence about a partitioned store only when the store's shards explain it.
On a shared machine they often do not: a uniform run with every shard at 18% CPU and a p50 of
1.9 s measured the machine, and "p99 from 4,069 ms to 74 ms" between two such runs is a claim
about the machine's load at two moments. ``classify_run`` says which it was, with the numbers
behind the verdict, and ``compare_p99`` states a p99 comparison only when every run behind it
measured its shards and the difference is larger than the runs' own spread.

Queueing reasoning
------------------
A shard is one worker serving requests in arrival order. Over a run of T seconds it served n
requests at CPU share rho (of one core), so each request held it S = rho T / n. An M/M/1 queue
with that S and load rho has an exponential sojourn (wait + service) of mean S / (1 - rho):
median ln 2 times that, p99 ln 100 times that. Service times more variable than the
exponential wait longer: the Pollaczek-Khinchine mean wait is (1 + CV^2) / 2 times M/M/1's,
so ``SLACK`` (4) times M/M/1's sojourn covers any service time with CV^2 up to 7 (CV 2.6,
far burstier than a shard's read). Every request also pays a path no queue causes (the
gateway hop, loopback, parsing), and the run's fastest request bounds it (that path plus one
service time, no wait). So the shards explain at most about

    p50:  fastest + busiest queue's mean sojourn           (a median is below its mean)
    p99:  fastest + ln 100 x busiest queue's mean sojourn

and a p50 or p99 more than ``SLACK`` times that was made outside the shards. A shard at
``SATURATED`` CPU or more explains any wait (its queue grows without bound).

Outside the shards, two places are measured. The driver: latency runs from each request's
intended send, so its dispatch lag adds to it directly; the lag's part of a percentile is that
percentile less the same percentile from the actual send (``lag_share``). The machine:
``/proc/stat`` over the run gives the share of all its CPUs' time that was busy (user, system,
interrupts, and steal: time the hypervisor gave elsewhere). With c cores at utilisation u, the
chance that a waking process finds every core busy is Erlang C: 0.85 for two cores at 90%,
so from ``HOST_SATURATED`` on every request waits for a core as well as for its shard.

Verdicts: ``driver-bound`` (the lag is a material share of the latency), ``shard-bound`` (a
saturated shard, or latency within what the shards explain on a machine with CPU to spare),
``host-bound`` (every shard cool and the latency beyond what they explain, or the machine
saturated), ``unknown`` (the run lacks per-shard CPU, requests or latency).
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from hotshard._format import ms, pct, times
from hotshard.errors import InputError
from hotshard.observations import Latency, Observations

__all__ = ["HOST_SATURATED", "LAG_MATERIAL", "MIN_REPEATS", "SATURATED", "SLACK", "CpuTimes",
           "LagShare", "P99Comparison", "RunBound", "classify_run", "compare_p99",
           "cpu_times", "host_cpu", "lag_share", "queue_p99", "recorded_bound",
           "recorded_comparison"]

SLACK = 4.0            # latency beyond this many times what the shards' queues explain: not them
SATURATED = 0.9        # a shard this busy explains any wait
HOST_SATURATED = 0.9   # the machine's CPUs this busy: every request also waits for a core
# The lag's share of a latency percentile from which the driver counts as a bottleneck. The
# lag adds to the latency directly; under a fifth of it, removing it would move that
# percentile by less than 1.25x, inside what repeated runs of the very same requests vary by
# on a shared 2-core machine (the demo's repeats; README's model-fidelity runs saw up to
# 2.6x), so the percentile still describes the target. Above it, a comparison of two runs can
# be the driver's.
LAG_MATERIAL = 0.2
MIN_REPEATS = 2        # a p99 comparison needs the runs' spread: at least this many each
_LN100 = math.log(100.0)

VERDICTS = ("shard-bound", "host-bound", "driver-bound", "unknown")


# -- the machine's CPU ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CpuTimes:
    """The machine's CPU time counters at one instant (``/proc/stat``, clock ticks)."""

    busy: int   # user, nice, system, irq, softirq, steal
    total: int  # busy, idle and iowait
    cores: int


def cpu_times(path: str | os.PathLike[str] = "/proc/stat") -> CpuTimes | None:
    """The machine's CPU counters now, or None where there is no ``/proc/stat``."""
    try:
        with open(path, encoding="ascii") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    total_line = next((line for line in lines if line.startswith("cpu ")), None)
    cores = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    if total_line is None:
        return None
    try:
        fields = [int(v) for v in total_line.split()[1:9]]
    except ValueError:
        return None
    if len(fields) < 5:
        return None
    fields += [0] * (8 - len(fields))
    user, nice, system, idle, iowait, irq, softirq, steal = fields
    busy = user + nice + system + irq + softirq + steal
    return CpuTimes(busy=busy, total=busy + idle + iowait, cores=max(cores, 1))


def host_cpu(before: CpuTimes | None, after: CpuTimes | None) -> dict[str, Any] | None:
    """The share of all the machine's CPU time that was busy between two readings, as the
    drive record keeps it (``{"busy": 0.93, "cores": 2}``); None when either is missing or no
    tick passed."""
    if before is None or after is None or after.total <= before.total:
        return None
    busy = (after.busy - before.busy) / (after.total - before.total)
    return {"busy": round(min(max(busy, 0.0), 1.0), 4), "cores": after.cores}


# -- the driver's lag --------------------------------------------------------------------------
@dataclass(frozen=True)
class LagShare:
    """How much of the latency the driver's dispatch lag accounts for, at the percentile
    where it accounts for most."""

    share: float              # of the latency at ``percentile``
    percentile: str           # "p50" or "p99"
    latency_ms: float         # that percentile from the intended send
    sent_ms: float | None     # the same percentile from the actual send (None: not measured)
    lag_ms: float             # the lag's own value at that percentile

    @property
    def material(self) -> bool:
        return self.share >= LAG_MATERIAL

    def text(self) -> str:
        """One clause: the share, and the numbers it came from."""
        sent = (f" against {ms(self.sent_ms)} from the actual send" if self.sent_ms is not None
                else "")
        return (f"the driver's dispatch lag accounts for {pct(self.share)} of the latency's "
                f"{self.percentile} ({ms(self.latency_ms)} from the intended send{sent}; lag "
                f"{self.percentile} {ms(self.lag_ms)})")


def _values(summary: Latency | Mapping[str, Any] | None) -> dict[str, float]:
    if summary is None:
        return {}
    doc = summary.to_dict() if isinstance(summary, Latency) else summary
    return {k: float(v) for k, v in doc.items() if isinstance(v, int | float)}


def lag_share(latency: Latency | Mapping[str, Any] | None,
              sent: Latency | Mapping[str, Any] | None,
              lag: Latency | Mapping[str, Any] | None) -> LagShare | None:
    """The driver's part of the latency at p50 and p99, the larger of the two.

    Latency runs from each request's intended send, so the lag (how late the driver sent) adds
    to it. Its part of a percentile is that percentile less the same percentile from the actual
    send (``sent``); without ``sent``, the lag's own percentile over the latency's (an upper
    bound: the most-lagged requests need not be the slowest). None when the latency or the lag
    is not measured.
    """
    lat, sent_v, lag_v = _values(latency), _values(sent), _values(lag)
    best = None
    for q in ("p50", "p99"):
        if not lat.get(q) or q not in lag_v:
            continue
        part = lat[q] - sent_v[q] if q in sent_v else lag_v[q]
        share = min(max(part / lat[q], 0.0), 1.0)
        if best is None or share > best.share:
            best = LagShare(share, q, lat[q], sent_v.get(q), lag_v[q])
    return best


# -- one run -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunBound:
    """What limited one run's latency, and the measured numbers behind the verdict."""

    label: str
    verdict: str                       # one of VERDICTS
    reason: str                        # one sentence, with the numbers
    p50_ms: float | None = None
    p99_ms: float | None = None
    explained_p50_ms: float | None = None   # what the shards' queues explain (module notes)
    explained_p99_ms: float | None = None
    hottest_cpu: float | None = None        # the busiest shard's CPU
    queue_shard: str | None = None          # the shard with the longest mean sojourn
    queue_cpu: float | None = None          # its CPU
    service_ms: float | None = None         # its busy time per request
    lag_share: float | None = None          # of the latency, at lag_percentile
    lag_percentile: str | None = None
    host_busy: float | None = None          # share of the machine's CPU time, over the run
    host_cores: int | None = None
    over: float | None = None               # the larger of p50 and p99 over what is explained
    over_at: str | None = None              # at which of the two

    @property
    def shard_bound(self) -> bool:
        """Whether the run's latency describes its shards (a latency claim may use it)."""
        return self.verdict == "shard-bound"

    def summary(self) -> str:
        """The verdict's numbers in a few words (``reason`` has the whole sentence)."""
        parts = []
        if self.over is not None and self.over_at is not None:
            value = self.p50_ms if self.over_at == "p50" else self.p99_ms
            explained = self.explained_p50_ms if self.over_at == "p50" else \
                self.explained_p99_ms
            if value is not None and explained is not None:
                parts.append(f"{self.over_at} {ms(value)}, {times(self.over)} the "
                             f"{ms(explained)} its shards explain")
        if self.hottest_cpu is not None:
            parts.append(f"busiest shard {pct(self.hottest_cpu)} CPU")
        if self.lag_share is not None and self.lag_percentile is not None and \
                (self.verdict == "driver-bound" or self.lag_share >= LAG_MATERIAL / 2):
            parts.append(f"dispatch lag {pct(self.lag_share)} of the {self.lag_percentile}")
        if self.host_busy is not None:
            parts.append(f"machine {pct(self.host_busy)} busy")
        return f"{self.verdict} ({'; '.join(parts)})" if parts else self.verdict

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, doc: Any, *, where: str = "latency_bound") -> RunBound:
        """A verdict as recorded in a run's ``extra.latency_bound``.

        Raises
        ------
        InputError
            Not an object, an unknown verdict, or a field of the wrong type, named.
        """
        if not isinstance(doc, Mapping):
            raise InputError(f"{where} must be an object such as {{\"verdict\": "
                             f"\"shard-bound\", \"reason\": \"...\"}}, got {doc!r:.60}")
        if doc.get("verdict") not in VERDICTS:
            raise InputError(f"{where}.verdict must be one of {', '.join(VERDICTS)}, got "
                             f"{doc.get('verdict')!r:.60}")
        values = {}
        for name, kind in _FIELD_TYPES.items():
            value = doc.get(name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, kind) or (
                    isinstance(value, float) and not math.isfinite(value)):
                raise InputError(f"{where}.{name} has the wrong type or value: {value!r:.60}")
            values[name] = value
        if "label" not in values or "reason" not in values:
            raise InputError(f"{where} needs a label and a reason")
        return cls(**values)


_FIELD_TYPES: dict[str, Any] = {
    name: (str if name in ("label", "verdict", "reason", "queue_shard", "lag_percentile",
                           "over_at") else int if name == "host_cores" else int | float)
    for name in RunBound.__dataclass_fields__}


def _drive_record(obs: Observations) -> dict[str, Any]:
    record = obs.extra.get("drive")
    return record if isinstance(record, dict) else {}


def _queues(obs: Observations) -> list[tuple[str, float, float, float]] | None:
    """(shard, CPU, busy time per request in ms, M/M/1 mean sojourn in ms) of every shard
    that served requests; None when a shard's CPU or the run's length is missing."""
    if not obs.duration_s or not obs.shards:
        return None
    out = []
    for s in obs.shards:
        if s.cpu is None:
            return None
        if not s.requests:
            continue
        service = 1000.0 * s.cpu * float(obs.duration_s) / s.requests
        out.append((s.id, s.cpu, service, service / (1.0 - min(s.cpu, 0.99))))
    return out or None


def classify_run(obs: Observations, *, host: Mapping[str, Any] | None = None) -> RunBound:
    """Whether ``obs``'s latency was made by its shards, the machine or the driver.

    The module's notes give the queueing bound and the thresholds. ``host``: the machine's
    CPU over the run (``{"busy": share, "cores": n}``), by default the drive record's
    ``host_cpu``; the lag comes from the drive record's ``dispatch_lag_ms``.

    Returns
    -------
    RunBound
        The verdict, a one-sentence reason and the numbers behind it.
    """
    record = _drive_record(obs)
    host = host if host is not None else record.get("host_cpu")
    busy = host.get("busy") if isinstance(host, Mapping) else None
    cores = host.get("cores") if isinstance(host, Mapping) else None
    lat = obs.latency_ms
    p50 = lat.p50 if lat is not None else None
    p99 = lat.p99 if lat is not None else None
    base = {"label": obs.label, "p50_ms": p50, "p99_ms": p99,
            "host_busy": busy, "host_cores": cores}
    cpus = f"{cores} CPUs" if cores else "CPUs"
    machine = (f"; the machine's {cpus} were {pct(busy)} busy over the run"
               if busy is not None else "; the machine's CPU was not measured")
    lag = lag_share(lat, obs.service_time_ms, record.get("dispatch_lag_ms"))
    if lag is not None:
        base.update(lag_share=round(lag.share, 4), lag_percentile=lag.percentile)
    queues = _queues(obs)
    if p50 is None or p99 is None or queues is None:
        missing = "latency p50 and p99" if p50 is None or p99 is None else \
            "every shard's CPU and the run's duration"
        return RunBound(verdict="unknown", reason=f"{obs.label} lacks {missing}: what made its "
                        "latency cannot be judged", **base)
    shard, cpu, service, sojourn = max(queues, key=lambda q: q[3])
    fastest = lat.min or 0.0
    explained_p50 = fastest + sojourn
    explained_p99 = fastest + _LN100 * sojourn
    hottest = max(q[1] for q in queues)
    base.update(explained_p50_ms=round(explained_p50, 3),
                explained_p99_ms=round(explained_p99, 3), hottest_cpu=hottest,
                queue_shard=shard, queue_cpu=cpu, service_ms=round(service, 4))
    floor = 1e-3  # ms: shards that report no CPU explain no wait
    over50 = p50 / max(explained_p50, floor)
    over99 = p99 / max(explained_p99, floor)
    which, value, explained = ("p50", p50, explained_p50) if over50 >= over99 else \
        ("p99", p99, explained_p99)
    base.update(over=round(max(over50, over99), 3), over_at=which)
    basis = (f"shard {shard} at {pct(cpu)} CPU, {ms(service)} a request, plus the fastest "
             f"request's {ms(fastest)}")
    if lag is not None and lag.material:
        return RunBound(verdict="driver-bound", reason=f"{lag.text()}: the run measured its "
                        f"driver as much as its target{machine}", **base)
    if hottest >= SATURATED:
        return RunBound(verdict="shard-bound", reason=f"a shard at {pct(hottest)} CPU is "
                        "saturated: its queue explains any wait", **base)
    if max(over50, over99) > SLACK:
        return RunBound(verdict="host-bound", reason=(
            f"its {which} {ms(value)} is {times(max(over50, over99))} the {ms(explained)} its "
            f"shards' queues explain ({basis}; no shard above {pct(hottest)} CPU){machine}: "
            "the latency was made outside the shards"), **base)
    if busy is not None and busy >= HOST_SATURATED:
        return RunBound(verdict="host-bound", reason=(
            f"the machine's {cpus} were {pct(busy)} busy over the run while its busiest "
            f"shard was at {pct(hottest)}: every request also waited for a core"), **base)
    return RunBound(verdict="shard-bound", reason=(
        f"its p50 {ms(p50)} and p99 {ms(p99)} are within {SLACK:g}x of the {ms(explained_p50)} "
        f"and {ms(explained_p99)} its shards' queues explain ({basis}){machine}"), **base)


def recorded_bound(obs: Observations) -> RunBound | None:
    """The verdict a run carries (``extra.latency_bound``, written with the run), if any.

    Raises
    ------
    InputError
        The record is malformed (``RunBound.from_dict``), named with the run.
    """
    doc = obs.extra.get("latency_bound")
    return None if doc is None else RunBound.from_dict(doc, where=f"{obs.label}: latency_bound")


# -- two sets of runs -------------------------------------------------------------------------
@dataclass(frozen=True)
class P99Comparison:
    """Whether "p99 went from A to B" is supported by repeated runs of each side."""

    before: str
    after: str
    before_p99_ms: tuple[float, ...]
    after_p99_ms: tuple[float, ...]
    supported: bool
    direction: str | None     # "lower" or "higher" (after against before) when supported
    factor: float | None      # median before / median after, when supported
    reason: str               # one sentence: what is claimed, or why nothing is

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _span(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    return ms(lo) if len(values) == 1 or ms(lo) == ms(hi) else \
        f"{ms(lo).removesuffix(' ms')}-{ms(hi)}"


def compare_p99(before: Sequence[tuple[RunBound | None, float]],
                after: Sequence[tuple[RunBound | None, float]], *,
                min_repeats: int = MIN_REPEATS) -> P99Comparison:
    """Compare the p99 of two sets of repeated runs of the same requests.

    Parameters
    ----------
    before, after : sequences of (verdict, p99 in ms)
        One pair per repeat, in the order they ran; a verdict of None is a run nobody judged
        (production's dashboards): it neither supports nor blocks the comparison.
    min_repeats : int
        Runs each side needs before its spread counts as measured.

    Returns
    -------
    P99Comparison
        Supported only when every judged run is shard-bound, each side has at least
        ``min_repeats`` runs, and the two ranges do not overlap: then no run of one side came
        out on the other side's ground, and the direction is not the machine's noise. (With
        three runs each, two of the 20 equally likely orderings of six exchangeable values
        separate them: a false claim in either direction 10% of the time when nothing
        changed; the runs' verdicts catch the loaded machine that makes most false ones.)
    """
    def label(runs: Sequence[tuple[RunBound | None, float]], default: str) -> str:
        return next((b.label for b, _ in runs if b is not None), default)

    b_label, a_label = label(before, "before"), label(after, "after")
    b99 = tuple(float(p) for _, p in before)
    a99 = tuple(float(p) for _, p in after)

    def result(supported: bool, reason: str, direction: str | None = None,
               factor: float | None = None) -> P99Comparison:
        return P99Comparison(b_label, a_label, b99, a99, supported, direction, factor, reason)

    for name, runs in ((b_label, before), (a_label, after)):
        bad = [(i, b) for i, (b, _) in enumerate(runs, 1) if b is not None and not b.shard_bound]
        if bad:
            i, bound = bad[0]
            which = f"run {i} of {len(runs)}" if len(runs) > 1 else "the run"
            return result(False, f"live p99 not compared: {name}, {which}, was "
                                 f"{bound.summary()}")
    if not b99 or not a99 or min(len(b99), len(a99)) < min_repeats:
        return result(False, "live p99 not compared: fewer than "
                             f"{min_repeats} runs of each, so the run-to-run noise is unknown")
    if max(a99) >= min(b99) and max(b99) >= min(a99):
        return result(False, f"live p99 not compared: {b_label} {_span(b99)} and {a_label} "
                             f"{_span(a99)} over {len(b99)} and {len(a99)} runs overlap: the "
                             "difference is within the run-to-run noise")
    factor = statistics.median(b99) / statistics.median(a99)
    direction = "lower" if factor > 1 else "higher"
    change = times(factor) if factor > 1 else times(1 / factor)
    return result(True, f"live p99 from {_span(b99)} to {_span(a99)} over {len(b99)} and "
                        f"{len(a99)} runs of the same requests ({change} {direction}; every "
                        "run shard-bound, the ranges apart)", direction, factor)


def _recorded_runs(obs: Observations) -> tuple[list[tuple[RunBound | None, float]], bool]:
    """(verdict, p99) of each repeat a run records (``extra.repeats``), else of the run
    itself; and whether repeats were recorded."""
    repeats = obs.extra.get("repeats")
    if repeats is not None:
        if not isinstance(repeats, list) or not repeats:
            raise InputError(f"{obs.label}: repeats must be a list of verdicts, one a run, "
                             f"got {repeats!r:.60}")
        runs = []
        for i, doc in enumerate(repeats):
            bound = RunBound.from_dict(doc, where=f"{obs.label}: repeats[{i}]")
            if bound.p99_ms is None:
                raise InputError(f"{obs.label}: repeats[{i}] has no p99_ms")
            runs.append((bound, float(bound.p99_ms)))
        return runs, True
    p99 = obs.latency_ms.p99 if obs.latency_ms is not None else None
    return ([(recorded_bound(obs), float(p99))] if p99 is not None else []), False


def recorded_comparison(before: Observations, after: Observations) -> P99Comparison | None:
    """``compare_p99`` on what two runs record: each one's verdict (``extra.latency_bound``,
    ``drive`` writes it) and its repeats (``extra.repeats``, the demo writes them). None when
    neither run records a verdict (production's dashboards, a simulation): nothing to judge.
    Repeats are required only when both runs record them."""
    b_runs, b_rep = _recorded_runs(before)
    a_runs, a_rep = _recorded_runs(after)
    if all(b is None for b, _ in (*b_runs, *a_runs)):
        return None
    return compare_p99(b_runs, a_runs, min_repeats=MIN_REPEATS if b_rep and a_rep else 1)


def queue_p99(obs: Observations, *, path: bool = False) -> float | None:
    """The run's p99 as its shards' queues alone would make it, in ms: each shard an M/M/1
    queue with the run's measured busy time per request and CPU (the model calibrated from
    the run's CPU and requests, not its latencies), a request on shard i taking an
    exponential sojourn of mean E_i = S_i / (1 - rho_i); the p99 t solves
    sum_i w_i exp(-t / E_i) = 0.01 (w_i: shard i's share of requests). ``path``: plus the
    fastest request's latency (the path no queue causes; on a loaded machine it is the
    machine's too). None without every shard's CPU and requests."""
    queues = _queues(obs)
    if queues is None:
        return None
    weights = {s.id: s.requests for s in obs.shards if s.requests}
    total = sum(weights.values())
    means = [(weights[q[0]] / total, q[3]) for q in queues if q[3] > 0]
    if not means:
        return None

    def tail(t: float) -> float:
        return sum(w * math.exp(-t / m) for w, m in means) - 0.01

    lo, hi = 0.0, _LN100 * max(m for _, m in means)
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tail(mid) > 0 else (lo, mid)
    fastest = obs.latency_ms.min if path and obs.latency_ms is not None and \
        obs.latency_ms.min else 0.0
    return fastest + (lo + hi) / 2
