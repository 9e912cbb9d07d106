"""Judge every explanation against the evidence, rank them, and say what to do next.

``diagnose(production, baseline, profile=...)`` is the whole library entry point: it computes
the evidence once (``evidence``), runs each cause's judge (``causes``) and adds next steps whose
numbers come from ``hotshard predict``'s model of the same profile on the same shard count.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from hotshard._format import count, pct, rps, times
from hotshard.diagnose.causes import JUDGES, Evidence, finding_numbers
from hotshard.diagnose.evidence import cost_spread, load_spread, rate_of
from hotshard.diagnose.findings import Diagnosis, Recommendation
from hotshard.errors import InputError
from hotshard.observations import Observations
from hotshard.profile.document import Profile
from hotshard.profile.shape import profile_shape

__all__ = ["DEFAULT_PARTITIONER", "diagnose"]

# Kafka's default partitioner (murmur2 of the key bytes): the placement the incident's
# chat-history store used, and predict's usual example; used for the what-ifs when neither the
# caller nor the observations name the store's partitioner (and said so in the notes).
DEFAULT_PARTITIONER = "kafka"
# The what-ifs recommended for a hot key, as the incident's fix combines them: the hottest
# keys split over time-bucket sub-partitions, reads over replicas.
SPLIT_KEYS, SPLIT_INTO, REPLICAS = 10, 8, 2


def _is_production(obs: Observations) -> bool:
    gen = (obs.key_generator or "").lower()
    return gen == "production" or "production" in obs.label.lower() or (
        obs.model is None and gen in ("", "production"))


def _what_ifs(profile: Profile, partitioner: str, n_shards: int, hot_cpu: float | None,
              model=None, rate: float | None = None, production: Observations | None = None
              ) -> list[Recommendation]:
    """Predict the hottest shard's share before and after each mitigation on this profile;
    with a calibrated service ``model`` (``sim.calibrate``) and production's ``rate``, also
    its CPU and p99 before and after, simulated at production's rate and shard count."""
    from hotshard.mitigations import Mitigations
    from hotshard.shards.partitioners import partitioner_for
    from hotshard.shards.predict import predict

    part = partitioner_for(partitioner, n_shards, integer_keys=profile.integer_keys)
    split = min(SPLIT_KEYS, len(profile.head_keys))
    options = []
    if split:
        options.append((f"split the {split} hottest keys over {SPLIT_INTO} time-bucket "
                        "sub-partitions (writes and reads)",
                        Mitigations(split_keys=split, split_into=SPLIT_INTO)))
    options.append((f"serve reads from {REPLICAS} replicas per shard (the primary and "
                    f"{REPLICAS - 1} more)", Mitigations(replicas=REPLICAS)))
    if split:
        options.append(("both", Mitigations(split_keys=split, split_into=SPLIT_INTO,
                                            replicas=REPLICAS)))
    out = []
    base = None
    now = _simulated(model, rate, n_shards, partitioner, None) if model is not None else None
    for action, mitigations in options:
        result = predict(profile, part, mitigations=mitigations)
        if result.timeline is not None:
            # a hot shard is hot in a window: the what-if is judged where it melts
            from hotshard._format import clock

            tl = result.timeline
            peak = tl.peak
            span = float(tl.edges_s[-1])
            base = float(peak.shares.max())
            after = float(peak.after.shares.max())
            detail = (f"hotshard predict ({partitioner}, {n_shards} shards): in the profile's "
                      f"peak window ({clock(tl.peak_start_s, span)}-"
                      f"{clock(tl.peak_end_s, span)}) its hottest shard, {peak.hottest}, "
                      f"carries {pct(base)} of that window's load now, and the window's "
                      f"hottest shard {pct(after)} after (over the whole span the hottest "
                      f"shard carries {pct(float(result.shares.max()))} now, "
                      f"{pct(float(result.after.shares.max()))} after)")
            # the CPU to scale is the peak shard's in the evidence's peak window, not the
            # whole run's hottest shard's
            hot_cpu = _window_cpu(production, str(peak.hottest))
            if hot_cpu is not None and now is None:
                detail += (f"; its CPU in production's peak window, ~{pct(hot_cpu)}, would "
                           f"fall to ~{pct(hot_cpu * after / base)} at the same rate")
                hot_cpu = None  # said
        else:
            base = float(result.shares.max())
            after = float(result.after.shares.max())
            detail = (f"hotshard predict ({partitioner}, {n_shards} shards): the hottest shard "
                      f"carries {pct(base)} of the load now, {pct(after)} after")
        if hot_cpu is not None and base > 0 and now is None:
            detail += (f"; its CPU ~{pct(hot_cpu)} would fall to ~{pct(hot_cpu * after / base)}"
                       " at the same rate")
        extra = {}
        if now is not None:
            then = _simulated(model, rate, n_shards, partitioner, mitigations)
            detail += (f"; the service model calibrated on {model.run_label!r} predicts, at "
                       f"{rps(rate)}, the hottest shard at {pct(now[0])} CPU with p99 "
                       f"{now[1]:,.0f} ms now, {pct(then[0])} with p99 {then[1]:,.0f} ms "
                       "after")
            extra = {"cpu_before": now[0], "cpu_after": then[0], "p99_before_ms": now[1],
                     "p99_after_ms": then[1]}
        out.append(Recommendation(action[0].upper() + action[1:], detail, base, after,
                                  "share of load", **extra))
    return out


def _window_cpu(production: Observations | None, shard: str) -> float | None:
    """``shard``'s CPU in the evidence's peak window; None without windows with its CPU."""
    w = production.peak_window if production is not None else None
    if w is None:
        return None
    return next((x.cpu for x in w.shards if x.id == shard and x.cpu is not None), None)


def _simulated(model, rate: float, n_shards: int, partitioner: str, mitigations
               ) -> tuple[float, float]:
    """(hottest shard's CPU, its p99 ms) of the calibrated model at production's rate."""
    from dataclasses import replace as changed

    from hotshard.sim.calibrate import predict_like

    obs = predict_like(changed(model, partitioner=partitioner), rps=rate, shards=n_shards,
                       mitigations=mitigations)
    hottest = max(obs.shards, key=lambda s: (s.cpu or 0.0, s.requests or 0))
    return float(hottest.cpu or 0.0), float(hottest.p99_ms or float("nan"))


def _recommend(ev: Evidence, found: dict[str, str], partitioner: str | None,
               notes: list[str], calibrate_from=None) -> list[Recommendation]:
    p, t = ev.production, ev.baseline
    recs: list[Recommendation] = []
    if found["key-skew"] == "fits":
        s = ev.spread
        hot_cpu = s.hottest.cpu
        if ev.profile is not None and s.shards >= 2:
            name = partitioner or p.recorded_partitioner
            if name is None:
                name = DEFAULT_PARTITIONER
                notes.append(f"the store's partitioner is not named: the what-ifs assume "
                             f"{DEFAULT_PARTITIONER} placement (name the partitioner to "
                             "change it)")
            model = _calibrated(calibrate_from, ev.profile, rate_of(p), notes)
            try:
                recs.extend(_what_ifs(ev.profile, name, s.shards, hot_cpu, model,
                                      rate_of(p), p))
            except InputError as exc:
                notes.append(f"what-ifs skipped: {exc}")
            recs.append(Recommendation(
                "Load-test with the profile's keys",
                "hotshard drive URL PROFILE --rps "
                + (f"{rate_of(p):.0f}" if rate_of(p) else "R")
                + ": the test then shows the hot shard; hotshard simulate PROFILE --rps R "
                  "gives its p99 at full scale, with each mitigation (--split-hot, "
                  "--replicas, --coalesce)"))
        else:
            sub = max(2, math.ceil(s.max_over_median))
            recs.append(Recommendation(
                "Profile production's keys",
                "hotshard profile EVENTS --key KEY -o prod.profile.json, then diagnose again "
                "with --profile: the what-ifs need the hot keys by name"))
            recs.append(Recommendation(
                f"Split the hot keys on shard {s.hottest.id}",
                f"it carries {times(s.max_over_median)} the median shard's load: its hottest "
                f"key needs at least {count(sub)} sub-partitions (time buckets) on distinct "
                "shards to come down to the median, or its reads served from replicas or a cache"))
    if found["hot-node"] == "fits":
        if ev.cost and ev.cost.slow_node:
            node = f"node {ev.cost.slow_node}"
        elif ev.cost:
            node = f"the node hosting shard {ev.cost.hottest.id}"
        else:
            node = "the hot shard's node"
        recs.append(Recommendation(
            f"Look at {node}",
            "compare its CPU steal, disk latency and background jobs with its peers; move its "
            "shards elsewhere to confirm: a slow node follows the machine, a hot key follows "
            "the key"))
    if found["coordinated-omission"] == "fits" and t is not None:
        rate = rate_of(p)
        recs.append(Recommendation(
            "Re-run the test open-loop",
            (f"hotshard drive URL --rps {rate:.0f}" if rate else "hotshard drive URL --rps R")
            + ": requests sent on schedule and timed from their intended send, so stalls "
              "count"))
    if found["cache-warmth"] == "fits" and t is not None:
        recs.append(Recommendation(
            "Start the test's cache cold, or match its hit rate",
            f"the test hit {pct(t.cache_hit_rate)} against production's "
            f"{pct(p.cache_hit_rate)}"))
    if found["network"] == "fits":
        recs.append(Recommendation("Run the test from production's zone",
                                   "so it pays the same hops as real clients"))
    if found["payload-size"] == "fits":
        recs.append(Recommendation("Draw payload sizes from production",
                                   "hotshard profile --size COL records them; hotshard "
                                   "generate PROFILE draws them"))
    if found["no-hot-spot"] == "fits":
        recs.append(Recommendation("Keep uniform synthetic keys",
                                   "no key concentrates traffic here: profiling buys nothing"))
    if t is not None and rate_of(t) and rate_of(p) and rate_of(t) >= rate_of(p) \
            and found["key-skew"] == "fits":
        notes.append(f"the test ran at {rps(rate_of(t))}, production at {rps(rate_of(p))}: "
                     "capacity was never the question")
    return recs


def _calibrated(run, profile: Profile, rate: float | None, notes: list[str]):
    """The service model calibrated from ``run`` (observations, or a ``Calibration`` made
    already) with production's keys, or None (said in ``notes`` when a run was given but
    cannot calibrate, or production has no rate)."""
    if run is None:
        return None
    if not rate:
        notes.append("production gives no request rate: the what-ifs' CPU and p99 need one")
        return None
    from hotshard.sim.calibrate import Calibration, calibrate

    if isinstance(run, Calibration):
        return run

    try:
        return calibrate(run, profile=profile, where=repr(run.label))
    except InputError as exc:
        notes.append(f"no CPU and p99 in the what-ifs: {exc}")
        return None


def diagnose(production: Observations, baseline: Observations | None = None, *,
             profile: Profile | None = None, partitioner: str | None = None,
             problems: Sequence[str] = (),
             calibrate_from=None, slo_ms: float | None = None) -> Diagnosis:
    """Rank the explanations of production's behaviour (against a load test, if given).

    Parameters
    ----------
    production : Observations
        What is to be explained: usually production's dashboards.
    baseline : Observations, optional
        The load test that did not show it.
    profile : Profile, optional
        Production's key profile: its shape decides the key-skew and no-hot-spot questions,
        its head drives the what-ifs and the cache estimate.
    partitioner : str, optional
        The store's partitioner for the what-ifs (``hotshard.shards.PARTITIONERS``); else the
        one the observations name, else ``DEFAULT_PARTITIONER`` (noted).
    problems : sequence of str, optional
        Fields dropped while reading the inputs (``Observations.load_salvaged``), carried
        into the notes so a reader knows what the verdicts could not use.
    calibrate_from : Observations or sim.calibrate.Calibration, optional
        A measured run of the service (``drive`` against it: per-shard CPU and requests,
        service-time percentiles), or the model already calibrated from one: the what-ifs
        then also state the hottest shard's CPU and p99 before and after each mitigation,
        from the service model calibrated on it (``hotshard.sim.calibrate``) simulated at
        production's rate and shard count.
    slo_ms : float, optional
        A p99 target: each event's transient (``diagnose.transient``) says how long the
        event's shard was above it.

    Returns
    -------
    Diagnosis
        One finding per cause, ranked, with next steps. Missing fields never raise: they turn
        into "cannot judge" verdicts naming what is missing.
    """
    notes: list[str] = []
    warnings: list[str] = []
    production = _usable(production, warnings)
    baseline = _usable(baseline, warnings)
    if baseline is not None and not _is_production(production) and _is_production(baseline):
        production, baseline = baseline, production
        notes.append(f"{baseline.label!r} was given first but is the load test and "
                     f"{production.label!r} says it is production: diagnosing production "
                     "against the test")
    ev = Evidence(production, baseline, profile, load_spread(production),
                  load_spread(baseline) if baseline is not None else None,
                  cost_spread(production),
                  cost_spread(baseline) if baseline is not None else None,
                  profile_shape(profile) if profile is not None else None)
    findings = [judge(ev) for judge in JUDGES]
    findings = [replace(f, numbers=finding_numbers(f.cause, ev)) for f in findings]
    found = {f.cause: f.verdict for f in findings}
    notes = list(problems) + notes
    if ev.spread is not None and ev.spread.basis == "cpu":
        notes.append("production gives per-shard CPU but not requests: the spread is judged "
                     "on CPU, taken to follow requests")
    if baseline is None:
        notes.append("no load test given: the causes that compare the test with "
                     "production cannot be judged")
    recs = _recommend(ev, found, partitioner, notes, calibrate_from)
    when = _when(production, profile, partitioner, notes, baseline)
    from hotshard.diagnose.transient import event_transients

    return Diagnosis(production.label, baseline.label if baseline is not None else None,
                     tuple(findings), tuple(recs), tuple(notes), tuple(warnings), when,
                     event_transients(production, slo_ms=slo_ms))


def _when(production: Observations, profile: Profile | None, partitioner: str | None,
          notes: list[str], baseline: Observations | None = None):
    """The time axis (``diagnose.windows``): production's peak window and the profile's."""
    from hotshard.diagnose.windows import window_evidence

    n = len(production.shards) or max((len(w.shards) for w in production.windows), default=0)
    name = partitioner or production.recorded_partitioner or DEFAULT_PARTITIONER
    when = window_evidence(production, profile, name, n, baseline)
    if not production.windows and production.shards and profile is not None \
            and profile.timelines is not None and not any("windows" in n for n in notes):
        notes.append("production's evidence has no time axis (windows): its shares are "
                     "whole-run averages, so a shard hot in one window shows only diluted; "
                     "`hotshard observe prometheus` and `drive` write windows")
    return when


def _usable(obs: Observations | None, warnings: list[str]) -> Observations | None:
    """A run marked invalid (``valid: false``: too many of its requests failed) without its
    measurements (``Observations.without_measurements``); a run whose latency was made by the
    machine or the driver, not its shards (``drive.bound``: its ``latency_bound``), without
    its latency (its per-shard load still stands). Said in ``warnings``."""
    if obs is not None and obs.is_valid:
        from hotshard.drive.bound import recorded_bound

        try:
            bound = recorded_bound(obs)
        except InputError as exc:
            warnings.append(f"{exc}: the run's latency verdict is unreadable; its latency is "
                            "judged as given")
            return obs
        if bound is not None and bound.verdict in ("host-bound", "driver-bound"):
            warnings.append(f"{obs.label!r} was {bound.summary()}: its latency describes the "
                            "machine or the driver, not its shards, so it is left out of the "
                            "judgement (its per-shard load still counts)")
            return replace(obs, latency_ms=None, service_time_ms=None)
    if obs is None or obs.is_valid:
        return obs
    warnings.append(f"{obs.invalid_reason}: its latency and per-shard figures are left out "
                    "of the judgement (they describe the requests that got through, not the "
                    "target); fix the failures and run it again")
    return obs.without_measurements()
