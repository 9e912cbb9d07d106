"""The simulator calibrated from a measured run, and its prediction set beside the measurement.

A user asked to believe "split the hot channel and p99 falls from 800 ms to 33 ms" first asks
whether the model predicts the system they can measure. ``calibrate`` reads a run (the
``hotshard.observations/1`` that ``drive``, Locust or ``observe`` wrote) and estimates the
service model behind it, each value with where it came from:

- **Service time** of one request on its shard (the time the shard's worker is busy with it):
  its mean is the shards' CPU seconds per request (sum of CPU x duration over the requests
  served), its spread comes from the run's service-time percentiles (send to answer). Those
  percentiles also hold a delay no shard queue causes (the gateway hop, the network, a write's
  commit, the driver): the run's service time X is modelled as that fixed delay D plus a
  log-normal shard time S with the CPU's mean, and (D, S's median, S's spread) are solved
  from X's p50 and p99 and the CPU mean (three equations, three unknowns). X is measured
  with some queueing in it, so a run whose hottest shard is under ~50% CPU calibrates best;
  the model says so when it is not.
- **Workers per shard**: 1 unless given (a ``hotshard serve`` shard and a Redis node are
  single-threaded).
- **Arrivals, keys, order, reads**: the run's own (its driver's record: Poisson or a profile's
  measured arrivals, the profile or distribution it drew keys from, their order, the share of
  reads it sent).
- **Shards and placement**: as many as the run measured; the store's partitioner as given
  (``hotshard serve``'s default, kafka, else).

``replay`` simulates the same run with that model and ``compare`` sets predicted against
measured shard by shard (CPU in points, p50 and p99 as ratios). What the model leaves out
shows there: the gateway's own queueing (D is a constant, so at high total load the measured
p99 runs ahead), CPU the machine's other processes take from the shards (on a 2-core machine
the driver and gateway share the cores), and a write's commit wait beyond its CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hotshard.errors import InputError
from hotshard.observations import Observations, ShardObservation

if TYPE_CHECKING:
    from hotshard.sim.scenarios import Prepared

__all__ = ["Calibration", "LikeDetection", "ReplayComparison", "ShardComparison", "calibrate",
           "compare", "like_detection", "predict_like", "replay", "run_detection", "run_events",
           "run_mitigations"]

_Z99 = 2.3263478740408408   # the standard normal's 99th percentile
_MAX_SIGMA = 2.0             # p99 / mean = exp(2 z99 - 2) ~ 14.2
CALIBRATE_BELOW_CPU = 0.5    # a run's hottest shard above this: its service time holds queueing
# A replay simulates runs of the measured run's own length, each from an empty system as the
# live run started, as many as give this many requests together (at most MAX_REPLICATES),
# pooled: the percentiles are then the model's for a run of that length, not one draw's (a
# 10 s run at 60 req/s has 6 requests above its p99). Not one longer window: near saturation
# a queue needs longer than a live run to reach its steady state (at 95% CPU and 18 ms a
# request, ~7 s to relax), and a 40 s run's p99 is far below the steady state's
MODEL_REQUESTS = 200_000
MAX_REPLICATES = 64
FIT_REQUESTS = 60_000   # the fit's bisection runs this many per step (16 steps)


@dataclass(frozen=True)
class Calibration:
    """The service model estimated from a run, and what it was estimated from."""

    run_label: str
    shards: int
    partitioner: str
    workers: int
    service_mean_ms: float       # the shard's busy time per request (CPU seconds / requests)
    service_p99_ms: float        # of the log-normal fitted to the run's service time
    extra_ms: float              # the fixed delay outside the shard queues (gateway, network)
    rps: float
    duration_s: float
    arrivals: str                # a simulate --arrivals spec
    keys: str                    # a profile path, or a distribution spec
    order: str
    read_share: float
    sources: dict[str, str] = field(default_factory=dict)   # value name -> where it came from
    notes: tuple[str, ...] = ()
    profile: object = None       # the keys' Profile when one was given read (diagnose's)
    window_s: float | None = None   # the run's time windows' width, when it has windows

    @property
    def service_spec(self) -> str:
        """The service time as ``simulate --service`` takes it."""
        if self.service_p99_ms <= self.service_mean_ms * 1.0001:
            return f"const:{self.service_mean_ms:.6g}ms"
        return f"lognormal:{self.service_mean_ms:.6g}ms:{self.service_p99_ms:.6g}ms"

    def options(self, **overrides) -> dict:
        """``sim.scenarios.prepare`` options for this model (``overrides`` on top)."""
        if self.profile is not None:
            keys = {"profile": self.profile, "dist": None}
        elif _is_spec(self.keys):
            keys = {"profile": None, "dist": self.keys}
        else:
            keys = {"profile": self.keys, "dist": None}
        return {"rps": self.rps, "duration": self.duration_s, "shards": self.shards,
                "partitioner": self.partitioner, "workers": self.workers,
                "service": self.service_spec, "arrivals": self.arrivals, "order": self.order,
                "replicas": 1, "coalesce": False, "split_hot": None, "cache_size": 0,
                "hit_ms": 0.5, "cache_hit": 0.0, "hot_keys": 10, **keys, **overrides}

    def describe(self) -> list[tuple[str, str, str]]:
        """(name, value, where it came from) of every value of the model, for the reader."""
        rows = [("shards", str(self.shards), self.sources.get("shards", "")),
                ("placement", self.partitioner, self.sources.get("partitioner", "")),
                ("workers per shard", str(self.workers), self.sources.get("workers", "")),
                ("service time", f"mean {self.service_mean_ms:.3g} ms, p99 "
                                 f"{self.service_p99_ms:.3g} ms ({self.service_spec})",
                 self.sources.get("service", "")),
                ("fixed delay", f"{self.extra_ms:.3g} ms", self.sources.get("extra", "")),
                ("rate", f"{self.rps:,.4g} req/s", self.sources.get("rps", "")),
                ("arrivals", self.arrivals, self.sources.get("arrivals", "")),
                ("keys", f"{self.keys} ({self.order} order)", self.sources.get("keys", "")),
                ("reads", f"{self.read_share:.1%}", self.sources.get("reads", ""))]
        return rows


def _is_spec(keys: str) -> bool:
    return ":" in keys and not Path(keys).exists()


def _lognormal_spread(spread: float) -> float:
    """sigma with exp(-sigma^2 / 2) (exp(z99 sigma) - 1) = spread (= (p99 - p50) / mean),
    on the increasing branch, capped at ``_MAX_SIGMA`` (a tail heavier than that is a queue's,
    not a request's: ``simulate --service`` takes p99 / mean up to e^(z99^2 / 2) ~ 15)."""
    def g(s: float) -> float:
        return math.exp(-s * s / 2) * math.expm1(_Z99 * s)

    if spread <= 0:
        return 0.0
    lo, hi = 0.0, _MAX_SIGMA
    if g(hi) <= spread:
        return hi
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if g(mid) < spread else (lo, mid)
    return (lo + hi) / 2


def _drive_record(run: Observations) -> dict:
    record = run.extra.get("drive")
    return record if isinstance(record, dict) else {}


def calibrate(run: Observations, *, profile=None,
              partitioner: str | None = None, workers: int | None = None,
              where: str = "the run") -> Calibration:
    """The service model behind ``run`` (see the module's docstring for each estimate).
    ``profile``: the keys' profile (a path, or a ``Profile``), when not the run's own.

    Raises
    ------
    InputError
        The run lacks what a model needs: its duration, per-shard CPU and requests, a service
        time or latency summary, or keys the simulator can draw (give ``profile``).
    """
    if not run.is_valid:   # its CPU was spent on requests whose latencies are not in it
        raise InputError(f"{where}: {run.invalid_reason}, so its CPU per request and its "
                         "latencies describe the requests that got through, not the service: "
                         "fix the failures and calibrate on a valid run")
    if not run.duration_s:
        raise InputError(f"{where} has no duration_s: a replay needs the run's length")
    measured = [s for s in run.shards if s.cpu is not None and s.requests]
    if len(measured) < len(run.shards) or not measured:
        raise InputError(f"{where} has no CPU and request count for every shard: a replay "
                         "estimates the service time from them (drive against hotshard serve "
                         "or a Redis Cluster records both; observe prometheus too)")
    duration = float(run.duration_s)
    requests = sum(s.requests for s in measured)
    busy = sum(s.cpu * duration for s in measured)
    mean_s = busy / requests
    if not mean_s > 0:
        raise InputError(f"{where}'s shards report no CPU time: nothing to calibrate from")
    # the latency from each request's intended send: what the run's shards report and the
    # replay is compared on, so the driver's own lag belongs to the delay outside the queues
    # (on a Redis node answering in 0.1 ms, the driver's 0.5 ms lag is most of the latency)
    summary, summary_name = run.latency_ms, "latency"
    if summary is None or summary.p50 is None or summary.p99 is None:
        summary, summary_name = run.service_time_ms, "service time (send to answer)"
    if summary is None or summary.p50 is None or summary.p99 is None:
        raise InputError(f"{where} has no latency or service-time p50 and p99: a replay "
                         "needs the spread of the run's latency")
    mean_ms = mean_s * 1000.0
    x50, x99 = float(summary.p50), float(summary.p99)
    median_ms, p99_ms, extra_ms = _fit(mean_ms, x50, x99)
    notes = []
    hottest = max(s.cpu for s in measured)
    if hottest > CALIBRATE_BELOW_CPU:
        notes.append(f"the run's hottest shard was at {hottest:.0%} CPU: its service time is "
                     "mostly queueing, which the fit takes out through the model itself; a "
                     f"run below {CALIBRATE_BELOW_CPU:.0%} calibrates on firmer ground")
    record = _drive_record(run)
    loaded = profile if profile is not None and not isinstance(profile, str | Path) else None
    keys = "the profile given" if loaded is not None else (profile or record.get("keys"))
    if not keys:
        raise InputError(f"{where} does not say where its keys came from: give the profile "
                         "(${profile} PROFILE.json)")
    if loaded is None and not _is_spec(keys) and not Path(keys).is_file():
        raise InputError(f"{where} drew its keys from {keys}, which is not here: give the "
                         "profile (${profile} PROFILE.json)")
    arrivals = record.get("arrivals") or "poisson"
    if arrivals == "constant":
        notes.append("the run's arrivals were evenly spaced; simulated as Poisson, which "
                     "queues more (an upper bound on the wait)")
        arrivals = "poisson"
    reads, writes = record.get("reads"), record.get("writes")
    read_share = reads / (reads + writes) if reads is not None and writes is not None and (
        reads + writes) else 0.9
    rps = float(run.achieved_rps or run.rate_rps or requests / duration)
    sources = {
        "shards": f"the {len(run.shards)} shards {where} measured",
        "partitioner": "given" if partitioner else "hotshard serve's default",
        "workers": "given" if workers else "one worker a shard (hotshard serve and Redis "
                                           "run one)",
        "service": f"mean: the shards' CPU, {busy:.2f} s over {requests:,} requests; spread: "
                   f"the run's {summary_name} p50 {x50:.3g} ms and p99 {x99:.3g} ms, less "
                   "the queueing the model puts in them",
        "extra": f"the run's {summary_name} p50 less the shard's median time and queueing "
                 "(fitted through the model): the gateway hop, network and driver",
        "rps": "the run's achieved rate" if run.achieved_rps else "the run's rate",
        "arrivals": "the run's driver" if record.get("arrivals") else "Poisson (the run "
                                                                      "does not say)",
        "keys": "given" if profile else "the run's driver",
        "reads": "the run's reads and writes" if reads is not None else "0.9 (the run does "
                                                                        "not say)",
    }
    cal = Calibration(run_label=run.label, shards=len(run.shards),
                      partitioner=partitioner or "kafka", workers=workers or 1,
                      service_mean_ms=mean_ms, service_p99_ms=p99_ms, extra_ms=extra_ms,
                      rps=rps, duration_s=duration, arrivals=arrivals, keys=str(keys),
                      order=record.get("order") or "auto", read_share=read_share,
                      sources=sources, notes=tuple(notes), profile=loaded,
                      window_s=_window_width(run))
    return _without_queueing(cal, x50, x99)


def _window_width(run: Observations) -> float | None:
    """The median width of the run's time windows, or None."""
    widths = sorted(w.end_s - w.start_s for w in run.windows)
    return widths[len(widths) // 2] if widths else None


def _fit(mean_ms: float, x50: float, x99: float) -> tuple[float, float, float]:
    """(median, p99, fixed delay) of D + LogNormal with the given mean whose p50 and p99 are
    x50 and x99 (the delay is never negative: a run whose median is below the CPU's mean
    has none)."""
    sigma = _lognormal_spread((x99 - x50) / mean_ms)
    median = mean_ms * math.exp(-sigma * sigma / 2)
    return median, median * math.exp(_Z99 * sigma), max(x50 - median, 0.0)


REFINE_STEPS = 14   # bisection steps on sigma: 2 / 2^14 of the range, far below the noise


def _without_queueing(cal: Calibration, x50: float, x99: float) -> Calibration:
    """The fit with the run's own queueing taken out. The run's service time holds the wait
    in the shard queues as well as the delay D and the shard's time S, and at the run's load
    the model knows that wait: for a spread sigma of S (its mean fixed by the CPU), simulate
    the run without D, set D so the simulated p50 plus D is the measured p50, and the
    simulated p99 plus D is then increasing in sigma (more spread, longer tail and queue).
    Bisection on sigma finds the one whose simulated run has the measured p50 and p99 (the
    same random numbers at every step, so the curve is smooth)."""
    from hotshard.sim.scenarios import prepare
    from hotshard.sim.service_times import parse_service

    copies = _replicates(cal.rps, cal.duration_s, FIT_REQUESTS)
    # every step simulates the same keys, arrivals and placement: read the profile and build
    # its sampler once (~35 ms a step), and give each step its own service time only
    base = prepare(cal.options())

    def run_with(sigma: float) -> tuple[Calibration, float]:
        median = cal.service_mean_ms * math.exp(-sigma * sigma / 2)
        trial = replace(cal, service_p99_ms=median * math.exp(_Z99 * sigma), extra_ms=0.0)
        options = trial.options()
        ready = replace(base, model=replace(base.model,
                                            service=parse_service(options["service"])))
        sim = _simulate(trial, options, seed=_REFINE_SEED, label="fit", replicates=copies,
                        ready=ready)
        lat = sim.latency_ms
        if lat is None or lat.p50 is None or lat.p99 is None:
            return trial, 0.0
        extra = max(x50 - lat.p50, 0.0)
        return replace(trial, extra_ms=extra), extra + lat.p99 - x99

    lo, hi = 0.0, _MAX_SIGMA
    best, excess = run_with(lo)
    if excess >= 0:          # even a constant shard time queues past the measured p99
        return best
    best, excess = run_with(hi)
    if excess <= 0:          # a tail heavier than the model takes
        return best
    for _ in range(REFINE_STEPS):
        mid = (lo + hi) / 2
        trial, excess = run_with(mid)
        lo, hi = (mid, hi) if excess < 0 else (lo, mid)
        best = trial
    return best


_REFINE_SEED = 0x5EED


def _replicates(rps: float, duration: float, requests: int) -> int:
    """Runs of ``duration`` at ``rps`` that together hold about ``requests``."""
    return int(min(MAX_REPLICATES, max(1, math.ceil(requests / max(rps * duration, 1.0)))))


def _simulate(cal: Calibration, options: dict, *, seed: int, label: str,
              replicates: int = 1, ready: Prepared | None = None, hot_events=(),
              detection=None, interval: float | None = None) -> Observations:
    """``replicates`` runs of the options' length (seeds ``seed``, ``seed`` + 1, ...), each
    from an empty system, pooled: latency histograms merged per shard and overall, CPU and
    requests averaged (a run's own scale); then the fixed delay added. ``ready``: what
    ``prepare(options)`` returns, made already (it must match ``options``)."""
    from hotshard.observations import Latency
    from hotshard.sim.histogram import LatencyHistogram
    from hotshard.sim.scenarios import prepare
    from hotshard.sim.system import simulate

    if ready is None:  # else ``prepare(options)`` made already (the fit's steps share one)
        ready = prepare(options)
    # pooled runs have no one time axis, except a detection's: the first run keeps its
    # windows and actions (the transient), the others add to its per-shard numbers
    if detection is not None and interval is None:
        from hotshard.sim.series import detection_interval

        interval = detection_interval(options["duration"], detection)
    runs = [simulate(ready.sampler, rps=options["rps"], duration=options["duration"],
                     model=ready.model, mitigations=ready.mitigations,
                     read_share=cal.read_share, rng=seed + k, label=label,
                     key_generator=ready.key_generator, key_order=ready.key_order,
                     hot_events=hot_events, detection=detection, interval=interval,
                     series=detection is not None and k == 0)
            for k in range(replicates)]
    obs = runs[0].to_observations()
    if replicates > 1:
        shards = []
        for i, shard in enumerate(obs.shards):
            hist = LatencyHistogram.empty()
            for r in runs:
                if r.shards[i].latency is not None:
                    hist.merge(r.shards[i].latency)
            p50, p99 = ((float(v) for v in hist.percentile([50, 99])) if hist.count
                        else (None, None))
            demand = sum(r.shards[i].cpu for r in runs) / replicates   # beyond 1: overload
            shards.append(replace(
                shard, p50_ms=p50, p99_ms=p99, extra={**shard.extra, "cpu_unbounded": demand},
                cpu=min(1.0, sum(r.shards[i].cpu for r in runs) / replicates),
                requests=round(sum(r.shards[i].requests for r in runs) / replicates)))
        overall = LatencyHistogram.empty()
        for r in runs:
            overall.merge(r.latency)
        latency = None
        if overall.count:
            qs = overall.percentile([50, 75, 90, 95, 99, 99.9])
            latency = Latency(min=overall.min, p50=float(qs[0]), p75=float(qs[1]),
                              p90=float(qs[2]), p95=float(qs[3]), p99=float(qs[4]),
                              p999=float(qs[5]), max=overall.max, mean=overall.mean)
        extra = dict(obs.extra)
        extra["simulation"] = {**extra.get("simulation", {}), "replicates": replicates}
        obs = replace(obs, shards=tuple(shards), latency_ms=latency, extra=extra,
                      achieved_rps=sum(r.requests for r in runs) / (
                          replicates * options["duration"]))
    return _with_delay(obs, cal.extra_ms)


def _with_delay(obs: Observations, extra_ms: float) -> Observations:
    """Every latency moved by the fixed delay (a constant moves each percentile by itself)."""
    def moved(value):
        return None if value is None else value + extra_ms

    def shards_of(rows):
        return tuple(replace(s, p50_ms=moved(s.p50_ms), p99_ms=moved(s.p99_ms)) for s in rows)

    def summary(latency):
        if latency is None:
            return None
        return type(latency)(**{name: moved(getattr(latency, name))
                                for name in latency.__dataclass_fields__ if name != "extra"})

    windows = tuple(replace(w, shards=shards_of(w.shards), latency_ms=summary(w.latency_ms))
                    for w in obs.windows)
    return replace(obs, shards=shards_of(obs.shards), latency_ms=summary(obs.latency_ms),
                   windows=windows)


def replay(cal: Calibration, *, seed: int = 0) -> Observations:
    """The calibrated model run as the measured run ran (same rate, length, keys, arrivals),
    pooled over ``_replicates`` runs."""
    return _simulate(cal, cal.options(), seed=seed, label="replay",
                     replicates=_replicates(cal.rps, cal.duration_s, MODEL_REQUESTS))


def predict_like(cal: Calibration, *, rps: float | None = None, shards: int | None = None,
                 duration: float | None = None, mitigations=None, seed: int = 0,
                 detection=None, hot_events=()) -> Observations:
    """The calibrated model at another rate, shard count or length (default: the run's),
    with ``mitigations`` (``hotshard.mitigations.Mitigations``): "this service, at
    production's rate", pooled over ``_replicates`` runs. ``detection``
    (``detect.policy.Detection``) and ``hot_events``: the mitigations follow the keys the
    service's rule finds hot, through these events (``run_detection`` and ``run_events``
    read a run's own); the first run's windows and actions are kept, in windows as wide as
    the run's (so a transient is read to the same resolution on both)."""
    rate = rps or cal.rps
    length = duration or cal.duration_s
    overrides = {"rps": rate, "duration": length}
    if shards is not None:
        overrides["shards"] = shards
    if mitigations is not None:
        overrides.update(replicas=mitigations.replicas, coalesce=mitigations.coalesce,
                         split_hot=((mitigations.split_keys, mitigations.split_into)
                                    if mitigations.split_into > 1 else None),
                         cache_hit=mitigations.cache_hit, hot_keys=mitigations.hot_keys)
    return _simulate(cal, cal.options(**overrides), seed=seed, label="prediction",
                     replicates=_replicates(rate, length, MODEL_REQUESTS),
                     hot_events=tuple(hot_events), detection=detection,
                     interval=_run_width(cal) if length == cal.duration_s else None)


def _run_width(cal: Calibration) -> float | None:
    """The calibrated run's window width, when it had windows."""
    return cal.window_s


def run_detection(run: Observations):
    """The hot-key rule the run's target said it used (``drive`` records ``serve``'s), as a
    ``detect.policy.Detection``, or None."""
    from hotshard.detect.policy import Detection

    raw = _drive_record(run).get("detection")
    return None if not isinstance(raw, dict) else Detection.from_dict(
        raw, where="the run's detection")


def run_mitigations(run: Observations, events=()) -> tuple:
    """The model's mitigations for the ones the run's target had on for its hot channels
    (``drive`` records ``serve``'s), and a note on each translation; (None, ()) when it
    does not say. The service's page cache of ``cache_ttl_s`` misses once a TTL for a key
    read at rate r (Poisson reads): a hit fraction of rT / (1 + rT), taken at the busiest
    event's read rate."""
    from hotshard.mitigations import Mitigations

    raw = _drive_record(run).get("target_mitigations")
    if not isinstance(raw, dict):
        return None, ()
    try:
        service = Mitigations().updated({k: raw[k] for k in ("split_into", "replicas",
                                                             "cache_ttl_s", "coalesce")
                                         if k in raw})
    except InputError:
        return None, ()
    notes = []
    cache_hit = 0.0
    if service.cache_ttl_s > 0:
        record = _drive_record(run)
        reads, writes = record.get("reads"), record.get("writes")
        read_share = reads / (reads + writes) if isinstance(reads, int) and isinstance(
            writes, int) and reads + writes else 0.9
        rate = float(run.achieved_rps or run.rate_rps or 0.0)
        share = max((e.share for e in events), default=0.0)
        r = share * rate * read_share
        if r > 0:
            cache_hit = r * service.cache_ttl_s / (1 + r * service.cache_ttl_s)
            notes.append(f"the run's {service.cache_ttl_s:g} s page cache, for a key read "
                         f"{r:,.4g} times a second: {cache_hit:.1%} of a hot key's reads hit")
    mitigations = Mitigations(split_into=service.split_into, replicas=service.replicas,
                              coalesce=service.coalesce, cache_hit=round(cache_hit, 4))
    return (mitigations if mitigations.active else None), tuple(notes)


def run_events(run: Observations) -> tuple:
    """The events the run injected (``drive --event``), as ``workload.timing.HotEvent``."""
    from hotshard.workload.timing import HotEvent

    raw = _drive_record(run).get("events") or []
    out = []
    for i, e in enumerate(raw if isinstance(raw, list) else []):
        try:
            out.append(HotEvent(str(e["key"]), float(e["share"]), float(e["start_s"]),
                                float(e["end_s"])))
        except (KeyError, TypeError, ValueError):
            raise InputError(f"the run's event {i} is not key, share, start_s and end_s: "
                             f"{e!r}") from None
    return tuple(out)


@dataclass(frozen=True)
class ShardComparison:
    """One shard measured and predicted."""

    shard: str
    measured_cpu: float | None
    predicted_cpu: float | None
    measured_p50_ms: float | None
    predicted_p50_ms: float | None
    measured_p99_ms: float | None
    predicted_p99_ms: float | None

    @property
    def cpu_points(self) -> float | None:
        """Predicted less measured CPU, in percentage points."""
        if self.measured_cpu is None or self.predicted_cpu is None:
            return None
        return 100.0 * (self.predicted_cpu - self.measured_cpu)

    @staticmethod
    def _ratio(predicted, measured) -> float | None:
        if predicted is None or measured is None or measured <= 0 or predicted <= 0:
            return None
        return predicted / measured

    @property
    def p50_ratio(self) -> float | None:
        return self._ratio(self.predicted_p50_ms, self.measured_p50_ms)

    @property
    def p99_ratio(self) -> float | None:
        return self._ratio(self.predicted_p99_ms, self.measured_p99_ms)


@dataclass(frozen=True)
class ReplayComparison:
    """Predicted against measured, shard by shard, with the overall error."""

    rows: tuple[ShardComparison, ...]

    @property
    def hottest(self) -> ShardComparison:
        return max(self.rows, key=lambda r: r.measured_cpu or 0.0)

    @property
    def worst_cpu_points(self) -> float:
        return max((abs(r.cpu_points) for r in self.rows if r.cpu_points is not None),
                   default=float("nan"))

    @property
    def worst_p99_factor(self) -> float:
        """The largest of predicted/measured and measured/predicted p99 over the shards."""
        return max((max(r.p99_ratio, 1 / r.p99_ratio) for r in self.rows
                    if r.p99_ratio is not None), default=float("nan"))


def _shard_order(shards: tuple[ShardObservation, ...]) -> list[ShardObservation]:
    """Measured shards in the store's order: numbers as numbers, node addresses by port
    (``cluster up`` gives the masters' slot ranges in port order), else by name."""
    def key(s: ShardObservation):
        text = s.node or s.id
        tail = text.rsplit(":", 1)[-1]
        return (0, int(tail), text) if tail.isdigit() else (1, 0, text)

    return sorted(shards, key=key)


def compare(measured: Observations, predicted: Observations) -> ReplayComparison:
    """Shard i of the prediction against the i-th measured shard in the store's order."""
    mine = _shard_order(measured.shards)
    theirs = sorted(predicted.shards, key=lambda s: int(s.id) if s.id.isdigit() else 0)
    if len(mine) != len(theirs):
        raise InputError(f"the run measured {len(mine)} shards and the prediction has "
                         f"{len(theirs)}: compare runs of the same shape")
    rows = tuple(ShardComparison(shard=m.id, measured_cpu=m.cpu, predicted_cpu=p.cpu,
                                 measured_p50_ms=m.p50_ms, predicted_p50_ms=p.p50_ms,
                                 measured_p99_ms=m.p99_ms, predicted_p99_ms=p.p99_ms)
                 for m, p in zip(mine, theirs, strict=True))
    return ReplayComparison(rows)


@dataclass(frozen=True)
class LikeDetection:
    """What ``simulate like RUN --detect`` models: the run's hot-key rule (``detection``,
    the values given overriding the run's), the events it injected, the mitigations (those
    given, else the run's own, translated) and what the user should know of each choice."""

    detection: Any
    events: tuple
    mitigations: Any
    notes: tuple[str, ...]


def like_detection(run: Observations, mitigations, *, where: str,
                   window_s: float | None = None, hot_share: float | None = None,
                   apply_s: float | None = None) -> LikeDetection:
    """The run's detection, events and mitigations for a model of its service (``simulate like``
    with ``--detect``), each from the run's record when it has one, else serve's defaults."""
    from hotshard.detect.policy import Detection

    notes: list[str] = []
    recorded = run_detection(run)
    if recorded is None:
        notes.append(f"{where} does not record how its target finds hot keys (drive against "
                     "hotshard serve records it): serve's defaults, or --hot-window and "
                     "--hot-share")
    detection = (recorded or Detection()).overridden(window_s=window_s, hot_share=hot_share,
                                                     apply_s=apply_s)
    events = run_events(run)
    if not events:
        notes.append(f"{where} injected no event (drive --event): the detection is modelled "
                     "on the keys' own heat")
    if not mitigations.active:   # the run's own, as the model takes them
        theirs, said = run_mitigations(run, events)
        mitigations = theirs or mitigations
        notes.extend(said)
    return LikeDetection(detection, tuple(events), mitigations, tuple(notes))
