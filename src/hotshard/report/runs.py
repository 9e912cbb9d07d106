"""What the report computes from its inputs before anything is drawn.

Which run is production, which the load test and which carry mitigations; each run's per-shard
load (share of requests, else CPU) with the band uniform keys could produce; the profile's
predicted per-shard share beside uniform keys'; each run's hottest and median shard CPU and p99.
Plain data, no matplotlib and no HTML: calculation apart from output (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray

from hotshard.errors import InputError
from hotshard.mitigations import Mitigations
from hotshard.observations import Observations

if TYPE_CHECKING:
    from hotshard.profile.document import Profile
    from hotshard.shards.predict import Prediction

__all__ = ["Layout", "Roles", "RunSummary", "ShardLoad", "assign_roles", "mitigations_of",
           "names_production", "observed_load", "predicted_loads", "resolve_layout",
           "run_summary", "runs_partitioner"]

_MITIGATED_LABEL = re.compile(r"mitigat|\bfix", re.IGNORECASE)


# -- roles ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Roles:
    """Which observation plays which part in the story.

    ``baseline`` is the load test production is compared with (None when there is none);
    ``mitigated`` are the runs with mitigations switched on, in the order given.
    """

    production: Observations
    baseline: Observations | None
    mitigated: tuple[Observations, ...]

    def of(self, obs: Observations) -> str:
        """The part ``obs`` plays, in words (a mitigated load test is both)."""
        parts = []
        if obs is self.production:
            parts.append("production")
        if obs is self.baseline:
            parts.append("load test (baseline)")
        if any(obs is m for m in self.mitigated):
            parts.append("with mitigations")
        return "; ".join(parts) or "other run"


def _mitigation_dicts(obs: Observations) -> list[Mapping[str, Any]]:
    """``extra.mitigations`` and ``extra.<tool>.mitigations`` (the simulator writes
    ``extra.simulation.mitigations``)."""
    found = [obs.extra.get("mitigations")]
    found += [v.get("mitigations") for v in obs.extra.values() if isinstance(v, Mapping)]
    return [m for m in found if isinstance(m, Mapping)]


def _number(value: Any) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else 0.0


def _whole(value: Any) -> int | None:
    number = _number(value)
    return int(number) if number.is_integer() else None


def _recorded(m: Mapping[str, Any]) -> Mitigations:
    """A run's record of its mitigations as the one type (``hotshard.mitigations``), whatever
    wrote it: today's vocabulary, or an older record's, where the simulator wrote
    ``local_cache_hit`` and the service wrote ``split`` (0: off) and counted in ``replicas``
    only the replica workers beside the primary. A field of the wrong type or out of range is
    left off: a record is evidence, not a command."""
    legacy_service = "split" in m and "split_into" not in m and "split_hot" not in m
    values: dict[str, Any] = {}
    split = m.get("split_hot")
    if isinstance(split, str) and ":" in split:
        keys, _, ways = split.partition(":")
        if keys.isdigit() and ways.isdigit():
            values.update(split_keys=int(keys), split_into=int(ways))
    elif legacy_service:
        values["split_into"] = _whole(m.get("split"))
    else:
        values.update(split_keys=_whole(m.get("split_keys")),
                      split_into=_whole(m.get("split_into")))
    replicas = _whole(m.get("replicas"))
    values["replicas"] = replicas + 1 if legacy_service and replicas is not None else replicas
    values["cache_hit"] = _number(m.get("cache_hit")) or _number(m.get("local_cache_hit"))
    values["cache_ttl_s"] = _number(m.get("cache_ttl_s"))
    # an old prediction recorded coalescing as a fraction of reads
    values["coalesce"] = m.get("coalesce") is True or _number(m.get("coalesce")) > 0
    values["hot_keys"] = _whole(m.get("hot_keys"))
    out = Mitigations()
    for name, value in values.items():
        if value is not None and value != 0:
            with contextlib.suppress(InputError):
                out = replace(out, **{name: value})
    return out


def mitigations_of(obs: Observations) -> str | None:
    """The mitigations a run records as switched on, in words; None when it records none."""
    words: list[str] = []
    for record in _mitigation_dicts(obs):
        words += [w for w in _recorded(record).phrases() if w not in words]
    return "; ".join(words) or None


def _marked(obs: Observations) -> bool:
    return mitigations_of(obs) is not None or bool(_MITIGATED_LABEL.search(obs.label))


def names_production(obs: Observations) -> bool:
    """The run says it is production: key generator "production", "production" in its label,
    or no load model (production traffic has none) and no mitigations."""
    return (obs.key_generator == "production" or "production" in obs.label.lower()
            or (obs.model is None and not _marked(obs)))


def _pick_production(items: Sequence[Observations]) -> Observations:
    """key_generator "production", else "production" in the label, else the one with no load
    model (production traffic has none), else the first."""
    rules = (lambda o: o.key_generator == "production",
             lambda o: "production" in o.label.lower(),
             lambda o: o.model is None and not _marked(o))
    plain = [o for o in items if not _marked(o)]  # a run with mitigations is not production
    for candidates in (plain, items):
        for rule in rules:
            for obs in candidates:
                if rule(obs):
                    return obs
    return items[0]


def assign_roles(observations: Sequence[Observations], *,
                 production: Observations | None = None,
                 baseline: Observations | None = None) -> Roles:
    """Name production, the baseline load test and the mitigated runs among ``observations``.

    Parameters
    ----------
    observations : sequence of Observations
        The runs, in the order the user gave them.
    production, baseline : Observations or None
        Roles already decided (e.g. by ``hotshard.diagnose``), each one of ``observations``.
        With ``production`` given, ``baseline`` is taken as given, None meaning no baseline.
        Without it: production is the run whose key generator is "production", else the first
        whose label says "production", else the first without a load model; the baseline is
        the first other run without mitigations.

    Returns
    -------
    Roles
        ``mitigated`` holds every run but production that records mitigations or whose label
        says "mitigated" or "fix", and every later run than production that is not the baseline.

    Raises
    ------
    InputError
        No observations, or a given role that is not one of them.
    """
    items = list(observations)
    if not items:
        raise InputError("no observations given: a report needs at least one run")
    for name, role in (("production", production), ("baseline", baseline)):
        if role is not None and not any(role is o for o in items):
            raise InputError(f"{name} {role.label!r} is not one of the observations given")
    if production is None:
        production = _pick_production(items)
        baseline = next((o for o in items if o is not production and not _marked(o)), None)
    after = next(i for i, o in enumerate(items) if o is production) + 1
    mitigated = tuple(o for i, o in enumerate(items) if o is not production and (
        _marked(o) or (i >= after and o is not baseline)))
    return Roles(production, baseline, mitigated)


# -- per-shard load ------------------------------------------------------------------------------
@dataclass(frozen=True)
class ShardLoad:
    """One row of per-shard load: a run's or a prediction's.

    ``values`` are fractions: each shard's share of all requests (``unit`` "share") or its busy
    fraction of one core (``unit`` "cpu"). ``band`` is the (low, high) range uniform keys could
    produce for the same total, in the same unit; ``total`` the requests behind the shares.
    """

    title: str
    ids: tuple[str, ...]
    values: NDArray[np.float64]
    unit: Literal["share", "cpu"]
    band: tuple[float, float] | None = None
    total: float | None = None

    @property
    def hottest(self) -> int:
        """Index of the busiest shard (ties go to the first, as ``Observations``' do)."""
        return int(np.argmax(self.values))

    @property
    def hottest_id(self) -> str:
        return self.ids[self.hottest]

    @property
    def peak(self) -> float:
        return float(self.values[self.hottest])

    @property
    def mean(self) -> float:
        return float(self.values.mean())

    @property
    def median(self) -> float:
        return float(np.median(self.values))

    @property
    def max_over_mean(self) -> float:
        return self.peak / self.mean if self.mean > 0 else math.nan


def observed_load(obs: Observations) -> tuple[ShardLoad | None, str | None]:
    """A run's per-shard load: its share of requests when every shard counts them, else CPU
    when every shard reports it; else (None, a note saying what is missing).

    The band is ``hotshard.diagnose``'s: how far above the mean uniform keys can push the
    busiest of these shards for this many requests over this many distinct keys (when the run
    says), at a 0.1% family-wise false-alarm rate; drawn symmetric about the mean.
    """
    from hotshard.diagnose.evidence import load_spread

    shards = obs.shards
    ids = tuple(s.id for s in shards)
    if not shards:
        return None, f"{obs.label}: no per-shard data (the observations list no shards)"
    counts, cpu = obs.shard_requests, obs.shard_cpu
    if cpu is not None and mitigations_of(obs) is not None:
        # with a cache, coalescing or replicas on, a request routed to a shard may never reach
        # its process: the work each shard did is its CPU
        counts = None
    if counts is not None and sum(counts) > 0:
        total: float | None = float(sum(counts))
        values = np.asarray(counts, dtype=np.float64) / float(sum(counts))
        unit: Literal["share", "cpu"] = "share"
    elif cpu is not None:
        total, values, unit = None, np.asarray(cpu, dtype=np.float64), "cpu"
    elif counts is not None:
        return None, (f"{obs.label}: every shard reports 0 requests and not every shard "
                      "reports CPU")
    else:
        with_requests = sum(s.requests is not None for s in shards)
        with_cpu = sum(s.cpu is not None for s in shards)
        n = len(shards)
        return None, (f"{obs.label}: {with_requests} of {n} shards report requests and "
                      f"{with_cpu} of {n} report CPU; per-shard load needs one of them from "
                      "every shard")
    spread = load_spread(obs)
    band = None
    if spread is not None and spread.band_max_over_mean is not None:
        mean, top = float(values.mean()), spread.band_max_over_mean
        band = (max(0.0, mean * (2.0 - top)), mean * top)
    return ShardLoad(obs.label, ids, values, unit, band, total), None


# -- the profile's prediction --------------------------------------------------------------------
@dataclass(frozen=True)
class Layout:
    """How the store places keys: partitioner name, shard count, key type."""

    partitioner: str
    n_shards: int
    key_type: str

    def text(self) -> str:
        return f"{self.partitioner}, {self.n_shards} shards, {self.key_type} keys"


def runs_partitioner(observations: Sequence[Observations]) -> str | None:
    """The partitioner recorded by the first run that names one
    (``Observations.recorded_partitioner``)."""
    return next((name for obs in observations
                 if (name := obs.recorded_partitioner) is not None), None)


def _recorded_shards(observations: Sequence[Observations]) -> int | None:
    """The shard count a simulated run records in ``extra.simulation.model``."""
    for obs in observations:
        sim = obs.extra.get("simulation")
        model = sim.get("model") if isinstance(sim, Mapping) else None
        n = model.get("shards") if isinstance(model, Mapping) else None
        if isinstance(n, int) and not isinstance(n, bool) and n >= 1:
            return n
    return None


def resolve_layout(observations: Sequence[Observations], profile: Profile, *,
                   partitioner: str | None = None, shards: int | None = None,
                   key_type: str | None = None) -> tuple[Layout | None, str | None]:
    """The store layout to predict ``profile`` on, or (None, what is missing).

    The partitioner is ``partitioner`` or the one a run names; the shard count is
    ``shards``, else production's (the first run's with shards) count of shards, else the one
    a simulated run records; the key type follows the key-type rule
    (``hotshard.shards.resolve_key_type``) unless ``key_type`` names one.
    """
    from hotshard.shards import PARTITIONERS, resolve_key_type

    name = partitioner or runs_partitioner(observations)
    if name is None:
        return None, ("no partitioner named and no run records one, so the profile's per-shard "
                      "load is not predicted; name the store's partitioner")
    if name not in PARTITIONERS:
        raise InputError(f"unknown partitioner {name!r}; choose from {', '.join(PARTITIONERS)}")
    n = shards or next((len(o.shards) for o in observations if o.shards), None) \
        or _recorded_shards(observations)
    if n is None:
        return None, ("no shard count given and no run lists its shards, so the profile's "
                      "per-shard load is not predicted; give the number of shards")
    chosen = resolve_key_type(name, key_type, integer_keys=profile.integer_keys)
    return Layout(name, n, chosen), None


def predicted_loads(profile: Profile, layout: Layout
                    ) -> tuple[ShardLoad, ShardLoad, Prediction]:
    """(uniform keys' load, the profile's predicted load, the prediction) on ``layout``.

    Uniform keys give each shard its ownership of the key space (1/n for hash partitioners);
    both rows carry ``predict``'s uniform band for the profile's key and event counts.

    Raises
    ------
    InputError
        The partitioner cannot be built (e.g. it needs a layout file).
    """
    from hotshard.shards.partitioners import partitioner_for
    from hotshard.shards.predict import predict

    part = partitioner_for(layout.partitioner, layout.n_shards, key_type=layout.key_type,
                           integer_keys=profile.integer_keys)
    pred = predict(profile, part)
    ids = tuple(str(i) for i in range(pred.n_shards))
    own = np.asarray(part.ownership(), dtype=np.float64)
    band = (pred.uniform_low, pred.uniform_high)
    uniform = ShardLoad(f"uniform keys ({int(profile.keys):,} keys)", ids, own / own.sum(),
                        "share", band, profile.events)
    predicted = ShardLoad(f"profile, predicted ({layout.partitioner})", ids,
                          np.asarray(pred.shares, dtype=np.float64), "share", band,
                          profile.events)
    return uniform, predicted, pred


# -- hottest, median, p99 per run ----------------------------------------------------------------
@dataclass(frozen=True)
class RunSummary:
    """A run's headline numbers for the mitigation comparison (None: not measured)."""

    label: str
    hottest_id: str | None
    hottest_cpu: float | None
    median_cpu: float | None
    p99_ms: float | None
    mitigations: str | None
    cpu_shards: int = 0  # shards that report CPU
    n_shards: int = 0


def run_summary(obs: Observations) -> RunSummary:
    """Hottest and median shard CPU (over the shards that report it) and p99 of one run."""
    with_cpu = [s for s in obs.shards if s.cpu is not None]
    hottest = max(with_cpu, key=lambda s: s.cpu or 0.0) if with_cpu else None
    median = float(np.median([s.cpu for s in with_cpu])) if with_cpu else None
    p99 = obs.latency_ms.p99 if obs.latency_ms is not None else None
    return RunSummary(obs.label, hottest.id if hottest else None,
                      hottest.cpu if hottest else None, median, p99, mitigations_of(obs),
                      len(with_cpu), len(obs.shards))
