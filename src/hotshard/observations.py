"""What a run measured (format ``hotshard.observations/1``): frozen types, validation, JSON.

The simulator, the load driver and the reference service write this one format; ``diagnose`` and
``report`` read it; a user may write it by hand from production dashboards. So every field but
``format`` and ``label`` is optional (tools say what they could not judge for lack of it), every
value is checked where it enters with a message naming its field path, and fields this version
does not know are kept in ``extra`` so that reading and writing a file loses nothing.

This module sits at the bottom layer: it imports only the standard library and hotshard's error,
atomic-write, file-check, number-format and field-reading helpers (``_validate``, whose readers
the profile uses too), never another hotshard package. The format's JSON Schema is
``hotshard/schemas/observations.schema.json``.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Literal

from hotshard._atomic import atomic_write
from hotshard._files import require_file
from hotshard._format import pct
from hotshard._validate import Fields, at, got, show
from hotshard.errors import InputError, ObservationsError

__all__ = [
    "FORMAT",
    "LATENCY_NAMES",
    "Latency",
    "Observations",
    "ObservationsError",
    "ShardObservation",
    "TimeWindow",
    "load",
    "salvage",
]

FORMAT = "hotshard.observations/1"

# Latency summary names in the order in which their values never decrease, with the quantile
# each stands for. "mean" is also accepted; it must lie between min and max.
LATENCY_NAMES = ("min", "p50", "p75", "p90", "p95", "p99", "p999", "p9999", "max")
_QUANTILE = {"min": 0.0, "p50": 0.5, "p75": 0.75, "p90": 0.9, "p95": 0.95, "p99": 0.99,
             "p999": 0.999, "p9999": 0.9999, "max": 1.0}
_MISSING = object()
_NO_LABEL = 'is missing: name what was observed, e.g. "production" or "load test"'


# -- value checks: the shared typed readers, each (value, field path) -> plain value --------------
_F = Fields(ObservationsError, prefix="observations ")


def _model(value: Any, path: str) -> str:
    return _F.choice(value, path, ("open", "closed"), nullable=True)


def _checked(values: Mapping[str, Any], spec: Mapping[str, Callable[[Any, str], Any]],
             where: str) -> dict[str, Any]:
    """The spec'd fields of ``values`` that are not None, each checked and made plain."""
    return {name: check(values[name], at(where, name))
            for name, check in spec.items() if values.get(name) is not None}


def _settle(obj: Any, spec: Mapping[str, Callable[[Any, str], Any]], where: str) -> None:
    """Check a frozen instance's fields in place (direct construction validates too)."""
    for name, value in _checked({n: getattr(obj, n) for n in spec}, spec, where).items():
        object.__setattr__(obj, name, value)


def _checked_instance(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of the frozen dataclass ``cls`` from fields ``from_dict`` has just checked
    (with the document's own path in its errors), without ``__post_init__`` checking each one
    again: that second pass was half the cost of loading a document of many shards. A field
    not in ``values`` takes its default."""
    obj = object.__new__(cls)
    for f in fields(cls):
        if f.name in values:
            value = values[f.name]
        else:
            value = f.default if f.default is not MISSING else f.default_factory()
        object.__setattr__(obj, f.name, value)
    return obj


def _split_extra(doc: Mapping[str, Any], known: Iterable[str]
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(known fields that are not null, everything else) of a decoded object."""
    names = set(known)
    return ({k: v for k, v in doc.items() if k in names and v is not None},
            {k: v for k, v in doc.items() if k not in names})


def _check_extra(extra: Any, known: Iterable[str], path: str) -> dict[str, Any]:
    out = _F.json_object(extra, path)
    clash = [k for k in out if k in set(known)]
    if clash:
        raise _F.fail(f"{path}.{clash[0]}", f"is a known field; pass it as {clash[0]}, "
                                            "not in extra")
    return out


# -- latency -------------------------------------------------------------------------------------
_LATENCY_SPEC = {name: _F.nonneg for name in (*LATENCY_NAMES, "mean")}


@dataclass(frozen=True, slots=True)
class Latency:
    """A latency distribution summarised as percentiles, in milliseconds.

    Dashboards, HDR histograms and the simulator all report a few percentiles rather than raw
    samples, so this is what diagnosis can compare. Values must be >= 0 and never decrease along
    ``LATENCY_NAMES`` (min, p50, p75, p90, p95, p99, p999, p9999, max): a p99 below the p90 is a
    copying mistake, and a tail ratio computed from it would mislead.

    Parameters
    ----------
    min, p50, p75, p90, p95, p99, p999, p9999, max : float or None
        Milliseconds at that percentile (``p999`` is the 99.9th); None when not measured.
    mean : float or None
        Mean milliseconds; must lie between ``min`` and ``max`` when those are given.

    Raises
    ------
    ObservationsError
        A value is not a finite number >= 0, or the percentiles decrease.
    """

    min: float | None = None
    p50: float | None = None
    p75: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    p999: float | None = None
    p9999: float | None = None
    max: float | None = None
    mean: float | None = None

    def __post_init__(self) -> None:
        _settle(self, _LATENCY_SPEC, "latency")
        _check_order(self.to_dict(), "latency")

    @classmethod
    def from_dict(cls, doc: Any, *, where: str = "latency_ms") -> Latency:
        """Build from a JSON object such as ``{"p50": 12, "p99": 800}``.

        ``where`` is the field path used in error messages (``service_time_ms``, ...).
        """
        _F.mapping(doc, where, 'an object of percentile -> ms such as {"p99": 800}')
        for name in doc:
            if name not in _LATENCY_SPEC:
                raise _F.fail(f"{where}.{name}", "is not a known latency name; use "
                            + ", ".join(_LATENCY_SPEC))
        values = _checked(doc, _LATENCY_SPEC, where)
        _check_order(values, where)
        return cls(**values)

    def to_dict(self) -> dict[str, float]:
        """The measured values, in ``LATENCY_NAMES`` order then ``mean``."""
        return {name: getattr(self, name) for name in _LATENCY_SPEC
                if getattr(self, name) is not None}

    def quantiles(self) -> tuple[tuple[float, float], ...]:
        """(quantile in [0, 1], ms) pairs for the measured percentiles, in increasing order.

        ``min`` counts as quantile 0 and ``max`` as 1; ``mean`` is left out (not a quantile).
        """
        return tuple((_QUANTILE[name], getattr(self, name)) for name in LATENCY_NAMES
                     if getattr(self, name) is not None)


def _check_order(values: Mapping[str, float], where: str) -> None:
    last: tuple[str, float] | None = None
    for name in LATENCY_NAMES:
        value = values.get(name)
        if value is None:
            continue
        if last is not None and value < last[1]:
            raise _F.fail(f"{where}.{name}", f"must be >= {last[0]} ({show(last[1])}), got "
                                             f"{show(value)}: percentiles never decrease")
        last = (name, value)
    mean = values.get("mean")
    if mean is not None:
        lo, hi = values.get("min"), values.get("max")
        if (lo is not None and mean < lo) or (hi is not None and mean > hi):
            raise _F.fail(f"{where}.mean", f"must lie between min and max, got {show(mean)}")


def _latency(value: Any, path: str) -> Latency:
    return value if isinstance(value, Latency) else Latency.from_dict(value, where=path)


# -- one shard -----------------------------------------------------------------------------------
_SHARD_SPEC: dict[str, Callable[[Any, str], Any]] = {
    "id": _F.text, "node": _F.text, "cpu": _F.fraction, "requests": _F.count,
    "rate_rps": _F.nonneg, "p50_ms": _F.nonneg, "p99_ms": _F.nonneg,
    "cache_hit_rate": _F.fraction, "queue_depth": _F.nonneg, "errors": _F.count,
}


@dataclass(frozen=True, slots=True)
class ShardObservation:
    """What one shard did during the run: the evidence for (or against) a hot shard.

    Parameters
    ----------
    id : str
        The shard's name as its store reports it (``"0"``, a slot range, ``"node-a:7001"``).
    node : str or None
        The machine or process hosting it; shards on one node share its CPU.
    cpu : float or None
        Busy fraction of one core in [0, 1] (0.95, not 95): a single-threaded shard saturates
        at 1, whatever the machine's core count.
    requests : int or None
        Requests the shard served during the run.
    rate_rps : float or None
        Requests per second the shard served.
    p50_ms, p99_ms : float or None
        The shard's own latency percentiles, in milliseconds (``p50_ms <= p99_ms``).
    cache_hit_rate : float or None
        Fraction of the shard's reads served from cache, in [0, 1].
    queue_depth : float or None
        Mean number of requests waiting at the shard.
    errors : int or None
        Requests to this shard that failed (included in ``requests``; its latency
        percentiles are of the others).
    extra : dict
        Fields this version does not know, kept so a round trip loses nothing.

    Raises
    ------
    ObservationsError
        A value has the wrong type or is out of range.
    """

    id: str
    node: str | None = None
    cpu: float | None = None
    requests: int | None = None
    rate_rps: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    cache_hit_rate: float | None = None
    queue_depth: float | None = None
    errors: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.id is None:
            raise _F.fail("shard.id", "is missing: every shard needs an id")
        _settle(self, _SHARD_SPEC, "shard")
        object.__setattr__(self, "extra", _check_extra(self.extra, _SHARD_SPEC, "shard.extra"))
        _check_shard({"p50_ms": self.p50_ms, "p99_ms": self.p99_ms}, "shard")

    @classmethod
    def from_dict(cls, doc: Any, *, where: str = "shard") -> ShardObservation:
        """Build from a JSON object; ``where`` (e.g. ``shards[2]``) prefixes error messages."""
        _F.mapping(doc, where, 'an object such as {"id": "0", "cpu": 0.5}')
        known, extra = _split_extra(doc, _SHARD_SPEC)
        if "id" not in known:
            raise _F.fail(f"{where}.id", 'is missing: every shard needs an id, e.g. "0"')
        values = _checked(known, _SHARD_SPEC, where)
        _check_shard(values, where)
        return _checked_instance(cls, {**values, "extra": _F.json_object(extra, where)})

    def to_dict(self) -> dict[str, Any]:
        """Measured fields in a stable order (id, node, cpu, requests, ...), then ``extra``."""
        out = {name: getattr(self, name) for name in _SHARD_SPEC
               if getattr(self, name) is not None}
        out.update(copy.deepcopy(self.extra))
        return out


def _check_shard(values: Mapping[str, Any], where: str) -> None:
    p50, p99 = values.get("p50_ms"), values.get("p99_ms")
    if p50 is not None and p99 is not None and p99 < p50:
        raise _F.fail(f"{where}.p99_ms", f"must be >= p50_ms ({show(p50)}), got {show(p99)}: "
                                       "percentiles never decrease")


# shards one document describes at most (a store of more nodes is described by node groups),
# and shard rows over all its windows: bounds what a report holds and draws
MAX_SHARDS = 16_384
MAX_WINDOW_SHARD_ROWS = 2_000_000


def _shards(value: Any, path: str) -> tuple[ShardObservation, ...]:
    if not isinstance(value, list | tuple):
        raise _F.wrong(path, "a list of shard objects", value)
    if len(value) > MAX_SHARDS:
        raise _F.fail(path, f"has {len(value):,} shards, more than the {MAX_SHARDS:,} read: "
                            "group them (by node or rack) before handing them over")
    shards = tuple(s if isinstance(s, ShardObservation)
                   else ShardObservation.from_dict(s, where=f"{path}[{i}]")
                   for i, s in enumerate(value))
    first: dict[str, int] = {}
    for i, shard in enumerate(shards):
        if shard.id in first:
            raise _F.fail(f"{path}[{i}].id", f"{show(shard.id)} repeats "
                                             f"{path}[{first[shard.id]}]: shard ids must be unique")
        first[shard.id] = i
    return shards


# -- what a run and a window share ----------------------------------------------------------------
class _PerShard:
    """Views of ``shards`` that a whole run and one window of it both give."""

    __slots__ = ()
    shards: tuple[ShardObservation, ...]

    @property
    def shard_cpu(self) -> tuple[float, ...] | None:
        """Every shard's CPU fraction in shard order; None unless all shards report it."""
        return _all_or_none(s.cpu for s in self.shards)

    @property
    def shard_requests(self) -> tuple[int, ...] | None:
        """Every shard's request count in shard order; None unless all shards report it."""
        return _all_or_none(s.requests for s in self.shards)


def _fields_dict(obj: Any, spec: Mapping[str, Any]) -> dict[str, Any]:
    """``obj``'s fields named in ``spec`` as JSON-ready data, in its order: absent (None or
    empty) ones left out, latencies and lists of objects as their ``to_dict``, then
    ``extra``."""
    out: dict[str, Any] = {}
    for name in spec:
        value = getattr(obj, name)
        if value is None or (isinstance(value, tuple) and not value):
            continue
        if isinstance(value, Latency):
            value = value.to_dict()
        elif isinstance(value, tuple):
            value = [copy.deepcopy(item) if isinstance(item, dict) else item.to_dict()
                     for item in value]
        elif isinstance(value, dict):
            value = copy.deepcopy(value)
        out[name] = value
    out.update(copy.deepcopy(obj.extra))
    return out


# -- the time axis ------------------------------------------------------------------------------
# at most this many windows in one document: a second each for 2.7 hours, a minute each for a
# week. Writers choose a width that keeps within it; a reader refuses more (a hand-made or
# hostile file of millions of windows would otherwise cost memory without bound).
MAX_WINDOWS = 10_000
_WINDOW_SPEC: dict[str, Callable[[Any, str], Any]] = {
    "start_s": _F.nonneg, "end_s": _F.positive, "requests": _F.count,
    "rate_rps": _F.nonneg, "latency_ms": _latency, "shards": _shards,
}


@dataclass(frozen=True, slots=True)
class TimeWindow(_PerShard):
    """One window of a run's time axis: what happened between ``start_s`` and ``end_s``.

    A hot shard is hot in a window: an event that takes 40% of the traffic for ten minutes is
    5% of a two-hour run, and a latency measured in its window set beside a whole-run share
    contradicts itself. So the run's evidence may carry a series of windows in the shape the
    whole run has (per-shard requests, CPU and p99, the run's latency).

    Parameters
    ----------
    start_s, end_s : float
        Seconds from the run's start, ``start_s < end_s``.
    requests : int or None
        Requests completed in the window (all shards).
    rate_rps : float or None
        Requests per second in the window.
    latency_ms : Latency or None
        The window's latency percentiles (all shards).
    shards : tuple of ShardObservation
        Each shard's load in the window (``requests``, ``cpu``, ``p99_ms``...).
    extra : dict
        Fields this version does not know.
    """

    start_s: float
    end_s: float
    requests: int | None = None
    rate_rps: float | None = None
    latency_ms: Latency | None = None
    shards: tuple[ShardObservation, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.shards is None:
            object.__setattr__(self, "shards", ())
        for name in ("start_s", "end_s"):
            if getattr(self, name) is None:
                raise _F.fail(f"window.{name}", "is missing: seconds from the run's start")
        _settle(self, _WINDOW_SPEC, "window")
        object.__setattr__(self, "extra",
                           _check_extra(self.extra, _WINDOW_SPEC, "window.extra"))
        if not self.end_s > self.start_s:
            raise _F.fail("window.end_s", f"must be > start_s ({show(self.start_s)}), got "
                                          f"{show(self.end_s)}")

    @classmethod
    def from_dict(cls, doc: Any, *, where: str = "window") -> TimeWindow:
        _F.mapping(doc, where, 'an object such as {"start_s": 0, "end_s": 1, "shards": []}')
        known, extra = _split_extra(doc, _WINDOW_SPEC)
        for name in ("start_s", "end_s"):
            if name not in known:
                raise _F.fail(f"{where}.{name}", "is missing: seconds from the run's start")
        values = _checked(known, _WINDOW_SPEC, where)
        if not values["end_s"] > values["start_s"]:
            raise _F.fail(f"{where}.end_s", f"must be > start_s ({show(values['start_s'])}), "
                                            f"got {show(values['end_s'])}")
        return _checked_instance(cls, {**values, "extra": _F.json_object(extra, where)})

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s

    def to_dict(self) -> dict[str, Any]:
        return _fields_dict(self, _WINDOW_SPEC)


def _windows(value: Any, path: str) -> tuple[TimeWindow, ...]:
    if not isinstance(value, list | tuple):
        raise _F.wrong(path, "a list of window objects", value)
    if len(value) > MAX_WINDOWS:
        raise _F.fail(path, f"has {len(value):,} windows, more than the {MAX_WINDOWS:,} "
                            "read: write coarser windows (a minute each covers a week)")
    def width(w: Any) -> int:
        shards = w.get("shards") if isinstance(w, dict) else getattr(w, "shards", ())
        return len(shards) if isinstance(shards, list | tuple) else 0

    rows = sum(width(w) for w in value)
    if rows > MAX_WINDOW_SHARD_ROWS:
        raise _F.fail(path, f"hold {rows:,} shard rows, more than the "
                            f"{MAX_WINDOW_SHARD_ROWS:,} read: fewer windows or grouped shards")
    windows = tuple(w if isinstance(w, TimeWindow)
                    else TimeWindow.from_dict(w, where=f"{path}[{i}]")
                    for i, w in enumerate(value))
    for i in range(1, len(windows)):
        if windows[i].start_s < windows[i - 1].end_s - 1e-9:
            raise _F.fail(f"{path}[{i}].start_s", f"{show(windows[i].start_s)} is before the "
                          f"end of {path}[{i - 1}] ({show(windows[i - 1].end_s)}): windows "
                          "are in time order and do not overlap")
    return windows


# -- the document --------------------------------------------------------------------------------
def _network(value: Any, path: str) -> dict[str, Any]:
    out = _F.json_object(value, path)
    if out.get("cross_zone_rtt_ms") is not None:
        out["cross_zone_rtt_ms"] = _F.nonneg(out["cross_zone_rtt_ms"],
                                             f"{path}.cross_zone_rtt_ms")
    return out


_ERRORS_COUNTS = ("attempted", "failed", "dropped", "unfinished", "unattributed")


def _errors(value: Any, path: str) -> dict[str, Any]:
    """The failures of a run: ``share`` (required) of ``attempted`` requests that failed, were
    dropped or never finished, by kind, with their own latency."""
    out = _F.json_object(value, path)
    if out.get("share") is None:
        raise _F.fail(f"{path}.share", "is missing: the fraction of requests that failed, "
                                     "e.g. 0.63")
    out["share"] = _F.fraction(out["share"], f"{path}.share")
    if out.get("max_error_rate") is not None:
        out["max_error_rate"] = _F.fraction(out["max_error_rate"], f"{path}.max_error_rate")
    for name in _ERRORS_COUNTS:
        if out.get(name) is not None:
            out[name] = _F.count(out[name], f"{path}.{name}")
    kinds = out.get("by_kind")
    if kinds is not None:
        _F.mapping(kinds, f"{path}.by_kind", "an object of kind -> count")
        out["by_kind"] = {k: _F.count(v, f"{path}.by_kind.{k}") for k, v in kinds.items()}
    if out.get("latency_ms") is not None:
        out["latency_ms"] = Latency.from_dict(out["latency_ms"],
                                              where=f"{path}.latency_ms").to_dict()
    return out


# at most this many mitigation actions in one document (a service logs a few a minute)
MAX_ACTIONS = 10_000


def _actions(value: Any, path: str) -> tuple[dict[str, Any], ...]:
    """What the target's mitigations did during the run (``serve``'s action log): each
    ``t`` (seconds into the run), ``action`` (hot, split, lifted...), ``key``, and the
    ``shard`` and ``share`` behind it when known; ``at`` (Unix seconds) and anything else
    kept as given."""
    items = list(value) if isinstance(value, tuple) else _F.array(value, path,
                                                                  "a list of actions")
    if len(items) > MAX_ACTIONS:
        raise _F.fail(path, f"has {len(items):,} actions, more than the {MAX_ACTIONS:,} read")
    return tuple(read_action(raw, f"{path}[{i}]") for i, raw in enumerate(items))


def read_action(raw: Any, where: str = "action") -> dict[str, Any]:
    """One mitigation action (``Observations.actions``), checked: ``t``, ``action`` and
    ``key`` required, ``shard`` a shard id, ``share`` a fraction, ``at`` a number, the rest
    plain JSON. For a writer that takes actions from a document it does not control (a
    target's ``/stats``) and keeps the good ones.

    Raises
    ------
    ObservationsError
        The entry breaks one of those rules; the message names the field."""
    action = _F.json_object(raw, where)
    for name in ("t", "action", "key"):
        if action.get(name) is None:
            raise _F.fail(f"{where}.{name}", "is missing")
    action["t"] = _F.number(action["t"], f"{where}.t")
    action["action"] = _F.text(action["action"], f"{where}.action")
    action["key"] = _F.text(action["key"], f"{where}.key")
    if action.get("shard") is not None:
        shard = action["shard"]
        action["shard"] = str(_F.count(shard, f"{where}.shard")) \
            if not isinstance(shard, str) else _F.text(shard, f"{where}.shard")
    if action.get("share") is not None:
        action["share"] = _F.fraction(action["share"], f"{where}.share")
    if action.get("at") is not None:
        action["at"] = _F.number(action["at"], f"{where}.at")
    return action


_TOP_SPEC: dict[str, Callable[[Any, str], Any]] = {
    "label": _F.text, "rate_rps": _F.positive, "achieved_rps": _F.nonneg,
    "duration_s": _F.positive, "model": _model, "key_generator": _F.text,
    "latency_ms": _latency, "service_time_ms": _latency, "shards": _shards,
    "cache_hit_rate": _F.fraction, "payload_bytes_mean": _F.nonneg, "distinct_keys": _F.count,
    "network": _network, "errors": _errors, "valid": _F.flag, "windows": _windows,
    "actions": _actions,
}


@dataclass(frozen=True, slots=True)
class Observations(_PerShard):
    """One run's measurements: a ``hotshard.observations/1`` document.

    Only ``label`` is required, because a user filling this in from production dashboards has
    whatever those dashboards show; tools that need a missing field say they could not judge
    without it. Build with ``from_dict``/``load`` or directly (``latency_ms`` and ``shards`` may
    then be given as plain dicts); either way every value is checked. Never mutated.

    Parameters
    ----------
    label : str
        What was observed: ``"production"``, ``"load test"``, ``"simulation"``...
    rate_rps : float or None
        Offered (target) request rate, > 0.
    achieved_rps : float or None
        Rate actually completed; below ``rate_rps`` when the system or the driver fell behind.
    duration_s : float or None
        Length of the measured window in seconds, > 0.
    model : {"open", "closed", None}
        How load was generated: open loop (arrivals on a schedule) or closed loop (each client
        waits for its answer); None for production traffic.
    key_generator : str or None
        Which key distribution drove the load (``"uniform"``, ``"zipf"``, ``"profile"``...).
    latency_ms : Latency or None
        Latency measured from each request's *intended* send time (no coordinated omission).
    service_time_ms : Latency or None
        Latency measured from the actual send; the gap to ``latency_ms`` is queueing in the
        driver or client.
    shards : tuple of ShardObservation
        Per-shard load and CPU; empty when not measured.
    cache_hit_rate : float or None
        Fraction of reads served from cache, in [0, 1].
    payload_bytes_mean : float or None
        Mean request payload size in bytes.
    distinct_keys : int or None
        Number of distinct keys touched.
    network : dict or None
        Network facts such as ``cross_zone_rtt_ms``; other keys are kept as given.
    errors : dict or None
        The run's failures: ``share`` of the ``attempted`` requests that ``failed``, were
        ``dropped`` or ``unfinished``, ``by_kind`` counts, the failures' own ``latency_ms``
        and the ``max_error_rate`` the run was held to. ``latency_ms`` above is of
        successes only.
    valid : bool or None
        False when the run's measurements do not describe the target under load (its error
        share exceeded the limit): ``diagnose`` and ``report`` then leave its latency out and
        say why. None (absent) means valid.
    windows : tuple of TimeWindow
        The run's time axis (optional): per window, each shard's load and the latency, so a
        verdict can name the window a shard was hot in. Empty when not measured.
    actions : tuple of dict
        What the target's mitigations did during the run (optional; ``drive`` copies
        ``serve``'s log): ``t`` seconds into the run, ``action`` (``hot``: the read
        mitigations apply to ``key`` from then; ``split``; ``lifted``), ``key``, ``shard``,
        the ``share`` that triggered it, ``at`` (Unix seconds).
    extra : dict
        Top-level fields this version does not know, kept so a round trip loses nothing.

    Raises
    ------
    ObservationsError
        A field has the wrong type or is out of range; the message names its path.
    """

    format: ClassVar[str] = FORMAT

    label: str
    rate_rps: float | None = None
    achieved_rps: float | None = None
    duration_s: float | None = None
    model: Literal["open", "closed"] | None = None
    key_generator: str | None = None
    latency_ms: Latency | None = None
    service_time_ms: Latency | None = None
    shards: tuple[ShardObservation, ...] = ()
    cache_hit_rate: float | None = None
    payload_bytes_mean: float | None = None
    distinct_keys: int | None = None
    network: dict[str, Any] | None = None
    errors: dict[str, Any] | None = None
    valid: bool | None = None
    windows: tuple[TimeWindow, ...] = ()
    actions: tuple[dict[str, Any], ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.label is None:
            raise _F.fail("label", _NO_LABEL)
        for name in ("shards", "windows", "actions"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, ())
        _settle(self, _TOP_SPEC, "")
        object.__setattr__(self, "extra",
                           _check_extra(self.extra, (*_TOP_SPEC, "format"), "extra"))

    # -- serialisation ---------------------------------------------------------------------------
    @classmethod
    def from_dict(cls, doc: Any) -> Observations:
        """Validate a decoded JSON document and build the observations.

        Null fields count as absent; unknown fields go to ``extra``.
        """
        if not isinstance(doc, Mapping):
            raise ObservationsError(f"observations must be a JSON object, {got(doc)}")
        fmt = doc.get("format", _MISSING)
        if isinstance(fmt, str) and fmt.startswith("hotshard.profile/"):
            raise ObservationsError("this is a profile (hotshard.profile/1), not observations: "
                                    "pass it with ${profile}, and observations (from simulate, "
                                    "drive or dashboards) here")
        if fmt is _MISSING or fmt != FORMAT or not isinstance(fmt, str):
            shown = "got nothing" if fmt is _MISSING else got(fmt)
            raise _F.fail("format", f"must be {FORMAT!r}, {shown}")
        if doc.get("label") is None:
            raise _F.fail("label", _NO_LABEL)
        known, extra = _split_extra(doc, _TOP_SPEC)
        extra.pop("format")
        return cls(**known, extra=_F.json_object(extra, ""))

    def to_dict(self) -> dict[str, Any]:
        """The document as JSON-ready data: ``format`` first, fields in a stable order, absent
        (None or empty) fields omitted, then ``extra``."""
        return {"format": FORMAT, **_fields_dict(self, _TOP_SPEC)}

    def to_json(self) -> str:
        """Indented JSON (people read and hand-edit these files), ending in a newline."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically: a failure leaves the old file (or none), never half a document.

        Raises
        ------
        InputError
            The directory does not exist or the file cannot be written.
        """
        text = self.to_json()
        try:
            with atomic_write(path) as handle:
                handle.write(text)
        except OSError as exc:
            raise InputError(f"cannot write {path}: {exc.strerror or exc}") from exc

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Observations:
        """Read and validate a ``hotshard.observations/1`` file.

        Raises
        ------
        ObservationsError
            The file is missing, empty, not JSON or not valid observations; the message starts
            with the path.
        """
        doc = _read_json(path)
        try:
            return cls.from_dict(doc)
        except ObservationsError as exc:
            raise ObservationsError(f"{path}: {exc.template}") from None

    @classmethod
    def load_salvaged(cls, path: str | os.PathLike[str]
                      ) -> tuple[Observations, tuple[str, ...]]:
        """Read a file keeping every valid field and dropping the malformed ones.

        For readers that judge what they can (``diagnose``, ``report``): a hand-written file
        with one bad value should lose that value, not the whole run. Returns the
        observations and one message per dropped field (empty when nothing was dropped).

        Raises
        ------
        ObservationsError
            The file is missing, empty or not JSON, or it is not ``hotshard.observations/1``
            at all (no object, another format, no label): nothing to salvage.
        """
        doc = _read_json(path)
        try:
            return cls.from_dict(doc), ()
        except ObservationsError as exc:
            first = exc.template
        try:
            return salvage(doc)
        except ObservationsError as exc:
            raise ObservationsError(f"{path}: {exc.template or first}") from None

    # -- views for diagnosis ---------------------------------------------------------------------
    @property
    def is_valid(self) -> bool:
        """False only when the run was marked invalid (``valid: false``)."""
        return self.valid is not False

    @property
    def invalid_reason(self) -> str | None:
        """Why the run is invalid, in words; None for a valid run."""
        if self.is_valid:
            return None
        e = self.errors or {}
        if e.get("share") is None:
            return f"{self.label!r} is marked invalid"
        limit = e.get("max_error_rate")
        return (f"{self.label!r} is not a valid run: {pct(e['share'])} of its requests "
                "failed" + (f" (limit {100 * limit:g}%)" if limit is not None else ""))

    def without_measurements(self) -> Observations:
        """A copy that keeps what the run was (label, model, offered rate, key generator) and
        leaves out what it measured (latency, achieved rate, cache hits, every shard): what an
        invalid run's evidence is worth. Its percentiles are the successes' of a failing
        system, and its per-shard spread is that of the requests that got an answer, so a
        dead shard would read as a cold one and the others as hot."""
        import dataclasses

        return dataclasses.replace(self, latency_ms=None, service_time_ms=None, shards=(),
                                   achieved_rps=None, cache_hit_rate=None, windows=())

    @property
    def total_requests(self) -> int | None:
        """Requests over all shards; None unless every shard reports its count."""
        counts = self.shard_requests
        return None if counts is None else sum(counts)

    @property
    def recorded_partitioner(self) -> str | None:
        """The store's partitioner as the tool that wrote this run recorded it
        (``extra.partitioner``, ``extra.drive.partitioner``, ``extra.simulation.partitioner``
        or ``extra.simulation.model.partitioner``); None when none is named."""
        sim = self.extra.get("simulation")
        for where in (self.extra, self.extra.get("drive"), sim,
                      sim.get("model") if isinstance(sim, Mapping) else None):
            name = where.get("partitioner") if isinstance(where, Mapping) else None
            if isinstance(name, str):
                return name
        return None

    @property
    def peak_window(self) -> TimeWindow | None:
        """The window whose busiest shard was busiest (by CPU when every shard of every window
        reports it, else by its share of the window's requests); None without a time axis."""
        best, best_value = None, -1.0
        by_cpu = bool(self.windows) and all(w.shard_cpu is not None for w in self.windows)
        for w in self.windows:
            if by_cpu:
                value = max(w.shard_cpu)
            else:
                counts = w.shard_requests
                if not counts or sum(counts) == 0:
                    continue
                value = max(counts) / sum(counts)
            if value > best_value:
                best, best_value = w, value
        return best

    @property
    def hottest_shard(self) -> ShardObservation | None:
        """The busiest shard: by CPU when every shard reports it (CPU is what saturates), else
        by requests when every shard reports those; None otherwise. Ties go to the first."""
        for values in (self.shard_cpu, self.shard_requests):
            if values is not None:
                return self.shards[values.index(max(values))]
        return None


def _read_json(path: str | os.PathLike[str]) -> Any:
    """The decoded JSON of an observations file; errors start with the path."""
    p = require_file(path, what="file of observations", error=ObservationsError)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise ObservationsError(f"{path}: observations: not JSON (not UTF-8 text)") from None
    except OSError as exc:
        raise ObservationsError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if not text.strip():
        raise ObservationsError(f'{path}: observations: the file is empty; expected a JSON '
                                f'object with "format" and "label"')
    from hotshard._http import json_depth_ok

    if not json_depth_ok(text):
        raise ObservationsError(f"{path}: observations: nested deeper than any observations "
                                "file is (a hostile or broken file)")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise ObservationsError(
            f"{path}: observations: not JSON (line {exc.lineno}: {exc.msg})") from None
    except ObservationsError as exc:
        raise ObservationsError(f"{path}: {exc.template}") from None


def _salvage_shard(doc: Any, i: int, dropped: list[tuple[str, str, Any]]
                   ) -> dict[str, Any] | None:
    """The valid fields of one shard; each dropped one goes to ``dropped`` as (field, message,
    value), field "" when the whole shard is dropped."""
    where = f"shards[{i}]"
    try:
        ShardObservation.from_dict(doc, where=where)
        return dict(doc)
    except ObservationsError as exc:
        if not isinstance(doc, Mapping) or doc.get("id") is None:
            dropped.append(("", f"{exc}; shard dropped", None))
            return None
    try:
        ShardObservation.from_dict({"id": doc["id"]}, where=where)
    except ObservationsError as exc:
        dropped.append(("", f"{exc}; shard dropped", None))
        return None
    kept: dict[str, Any] = {"id": doc["id"]}
    for name, value in doc.items():
        if name == "id":
            continue
        try:
            ShardObservation.from_dict({**kept, name: value}, where=where)
            kept[name] = value
        except ObservationsError as exc:
            dropped.append((name, f"{exc}; ignored", value))
    return kept


def _grouped(dropped: list[tuple[str, str, Any]]) -> list[str]:
    """One message per dropped shard field: a systematic slip (every CPU written in percent)
    is one line, not one per shard."""
    out: list[str] = []
    by_field: dict[str, list[tuple[str, Any]]] = {}
    for name, message, value in dropped:
        if not name:
            out.append(message)
        else:
            by_field.setdefault(name, []).append((message, value))
    for items in by_field.values():
        message = items[0][0]
        if len(items) > 1:
            numbers = [v for _, v in items if isinstance(v, int | float)
                       and not isinstance(v, bool)]
            span = f" (values {min(numbers):g} to {max(numbers):g})" if numbers else ""
            message = (message.removesuffix("; ignored")
                       + f"; the same for {len(items) - 1} more shards{span}; all ignored")
        out.append(message)
    return out


def salvage(doc: Any) -> tuple[Observations, tuple[str, ...]]:
    """Observations from a decoded document, keeping the valid fields and dropping the rest.

    Returns the observations and one message per dropped value. A document that is not an
    object, has another ``format`` or no valid ``label`` cannot be salvaged (ObservationsError).
    """
    try:
        return Observations.from_dict(doc), ()
    except ObservationsError:
        pass
    if not isinstance(doc, Mapping):
        raise ObservationsError(f"observations must be a JSON object, {got(doc)}")
    base = {"format": doc.get("format"), "label": doc.get("label")}
    Observations.from_dict(base)  # another format or no label: nothing to salvage
    problems: list[str] = []
    kept: dict[str, Any] = dict(base)
    for name, value in doc.items():
        if name in base:
            continue
        if name == "windows" and isinstance(value, list | tuple) and len(value) <= MAX_WINDOWS:
            good = []
            for i, item in enumerate(value):
                try:
                    TimeWindow.from_dict(item, where=f"windows[{i}]")
                    good.append(item)
                except ObservationsError as exc:
                    problems.append(f"{exc}; window dropped")
            try:
                Observations.from_dict({**base, "windows": good})
                kept["windows"] = good
            except ObservationsError as exc:
                problems.append(f"{exc}; windows ignored")
            continue
        if name == "shards" and isinstance(value, list | tuple):
            dropped: list[tuple[str, str, Any]] = []
            salvaged = [_salvage_shard(item, i, dropped) for i, item in enumerate(value)]
            shards = [item for item in salvaged if item is not None]
            problems.extend(_grouped(dropped))
            try:
                Observations.from_dict({**base, "shards": shards})
                kept["shards"] = shards
            except ObservationsError as exc:
                problems.append(f"{exc}; shards ignored")
            continue
        try:
            Observations.from_dict({**base, name: value})
            kept[name] = value
        except ObservationsError as exc:
            problems.append(f"{exc}; ignored")
    return Observations.from_dict(kept), tuple(problems)


def _all_or_none(values: Iterable[Any]) -> tuple[Any, ...] | None:
    out = tuple(values)
    return out if out and all(v is not None for v in out) else None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """JSON object hook: a key given twice is a hand-editing slip, not "last one wins"."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ObservationsError(f"observations: key {show(key)} appears twice in one object")
        out[key] = value
    return out


def load(path: str | os.PathLike[str]) -> Observations:
    """Read and validate an observations file; same as ``Observations.load``."""
    return Observations.load(path)
