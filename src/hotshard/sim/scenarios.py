"""Named scenarios: the incident's load test, its production, and production mitigated.

The service model behind them is chosen once, here, with the reason for each value, and every
scenario reuses it unchanged: what differs between the load test and production is only what
differed in the incident (the keys, the rate, the arrival pattern), so the gap between them is
the incident's own explanation, not a tuned parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from hotshard.errors import InputError, Phrase

__all__ = ["INCIDENT_SERVICE", "PROFILE_RUN_REQUESTS", "SCENARIOS", "SCENARIO_OPTIONS",
           "RunLength", "Scenario", "Simulation", "measured_rate", "prepare", "run_length",
           "run_scenario", "run_simulation", "scenario", "scenario_options"]


# The incident's service, once, each value with its reason:
INCIDENT_SERVICE = {
    # 64 shards, one worker each: a typical partition count for a chat-history store, and the
    # one the worked example uses; one worker makes a hot shard's queue the whole story
    "shards": 64,
    # Kafka-style murmur2 placement of integer channel IDs (LongSerializer)
    "partitioner": "kafka",
    "workers": 1,
    # 5.25 ms mean, exponential: the value at which production's ordinary shards sit at ~20%
    # CPU (3000 req/s / 64 shards x 5.25 ms = 0.25 at the median share) and the load test at
    # 5000 req/s runs at rho ~ 0.41, whose M/M/1 p99 is ln(100) x 5.25 ms / 0.59 ~ 41 ms
    "service": "exp:5.25ms",
}
# Production's arrivals are the incident profile's own (its ``arrivals`` section: per-minute
# swings and live chat's waves, measured from the timestamps examples/make_incident_profile.py
# makes, where each parameter is named and explained); a load generator's requests are
# Poisson. That burstiness is what turns a 95%-busy shard's ~90 ms queue into ~800 ms at p99
# (Kingman: the wait scales with the arrivals' variability at the same utilisation).
PRODUCTION_ARRIVALS = "profile"
# Production's key order: independent draws, each head channel at the share its measured
# timeline gives each window ("irm": with the profile's timelines, irm+timelines). The incident
# profile carries a locality section too, and `--order locality` lays the keys out by it, but
# that order places a key's requests by the reuse times of its popularity class, pooled over
# the class's keys, and the head channels of one class differ in rate by up to 2x (ranks 2 and
# 3 share a class at 227k and 157k requests): each one's requests wrap its circle twice over
# part of the run or leave part of it empty. Measured on this profile (one seed): ranks 2-10
# varied by 27-38% over the twelve 5-minute windows (coefficient of variation; one of them
# 4%), where the profile's timelines, which the scenarios keep, vary by 1.5-2.6%; the hot
# shard, at 95% on average, was saturated for a quarter of an hour and p99 was ~10 s instead
# of ~800 ms. The order now keeps every key of at least 0.5% of the requests on its timeline
# (``locality_order.TIMELINE_SHARE``: ranks 1-9 here), but ranks 10 and beyond still swing
# by ~25-30%, so the scenarios keep independent draws. What they lose is the tail's reuse,
# which only a cache would see (``--cache-size``; the scenarios run without one).
PRODUCTION_ORDER = "irm"
# The mitigations the incident's fix would combine (hotshard.mitigations): the ten hottest
# channels split over 8 time-bucket sub-partitions, reads over 2 replicas per shard (the primary
# and one more), identical in-flight reads coalesced.
INCIDENT_MITIGATIONS = {"split_hot": (10, 8), "replicas": 2, "coalesce": True}


@dataclass(frozen=True)
class Scenario:
    """A named set of simulate options; explicit options override any of them."""

    name: str
    summary: str
    options: dict = field(default_factory=dict)


SCENARIOS = {
    s.name: s for s in (
        Scenario("incident-test",
                 "the load test: uniform channel IDs over the same 300k channels, 5000 req/s, "
                 "Poisson arrivals",
                 {"dist": "uniform:{channels}", "rps": 5000.0, "duration": 3600.0,
                  "arrivals": "poisson", **INCIDENT_SERVICE}),
        Scenario("incident-production",
                 "production: the incident profile at 3000 req/s, bursty live-chat arrivals",
                 {"profile": "incident.profile.json", "rps": 3000.0, "duration": 3600.0,
                  "arrivals": PRODUCTION_ARRIVALS, "order": PRODUCTION_ORDER,
                  **INCIDENT_SERVICE}),
        Scenario("incident-mitigated",
                 "production with hot channels split, read replicas and read coalescing",
                 {"profile": "incident.profile.json", "rps": 3000.0, "duration": 3600.0,
                  "arrivals": PRODUCTION_ARRIVALS, "order": PRODUCTION_ORDER,
                  **INCIDENT_SERVICE, **INCIDENT_MITIGATIONS}),
    )
}


def scenario(name: str) -> Scenario:
    """The scenario called ``name``; an InputError listing the others if there is none."""
    from hotshard.errors import InputError

    if name not in SCENARIOS:
        raise InputError(f"no scenario {name!r}; the scenarios are {', '.join(SCENARIOS)}")
    return SCENARIOS[name]


def example_path(name: str) -> Path:
    """One of the incident profiles the scenarios name: package data (``hotshard/data``,
    made by examples/make_incident_profile.py), so the scenarios run from an installed
    wheel as from a checkout."""
    from importlib.resources import as_file, files

    resource = files("hotshard") / "data" / name
    with as_file(resource) as path:  # a real file for a wheel or a checkout (no zip import)
        return Path(path)


DEFAULTS = {"rps": 3000.0, "duration": 600.0, "shards": 64, "partitioner": "kafka",
            "workers": 1, "service": "exp:5.25ms", "arrivals": "auto", "order": "auto",
            "replicas": 1,
            "coalesce": False, "split_hot": None, "dist": None, "profile": None,
            "cache_size": 0, "hit_ms": 0.5, "cache_hit": 0.0, "hot_keys": 10,
            "timelines": "stretched"}


@dataclass(frozen=True)
class Prepared:
    """What ``simulate`` needs, built from options (a scenario's, a command line's)."""

    sampler: object
    model: object
    mitigations: object
    op_mix: object
    key_generator: str
    profile: object
    key_order: object = None     # (n, seed) -> positions in production's order, or None
    notes: tuple[str, ...] = ()  # what the user should know (a profile without time sections)


def _arrivals(spec: str, profile) -> object:
    """``auto``: a profile's measured arrivals when it has them, else Poisson; ``profile``:
    the profile's, required; anything else a ``parse_arrivals`` spec."""
    from hotshard.errors import InputError
    from hotshard.sim.arrivals import ProfileArrivals, parse_arrivals

    if spec in ("auto", "profile"):
        if profile is not None and profile.arrivals is not None:
            return ProfileArrivals(profile.arrivals)
        if spec == "profile":
            raise InputError("${arrivals} profile needs a profile with an arrivals section "
                             "(hotshard profile ... --time COL writes one)")
        return parse_arrivals("poisson")
    return parse_arrivals(spec)


@dataclass(frozen=True)
class KeyOrder:
    """How a profile's keys are laid out in the simulated stream: ``name`` (locality, or
    irm+timelines) and ``make(times, duration, seed) -> positions``. ``windowed``: each
    request's key depends only on its own instant, so ``simulate`` may draw the keys a
    window at a time (timelines); else the order spans the run (locality: a key's next
    reference may come hours later) and is made for the whole run at once. ``period``:
    ``duration -> seconds``, the profile's timeline window as this order lays it on a run
    of that length (the natural width of the run's time windows), or None."""

    name: str
    make: object
    windowed: bool = False
    period: object = None

    def interval(self, duration: float) -> float | None:
        """The width of a timeline window in a run of ``duration`` seconds, or None."""
        return None if self.period is None else float(self.period(duration))

    def __call__(self, times, duration: float, seed: int):
        return self.make(times, duration, seed)


def _key_order(order: str, profile, sampler, shaped: bool,
               real_time: bool = False) -> KeyOrder | None:
    """Production's order (the locality section, head keys on their timelines), or
    independent draws whose head keys follow their timelines; None: plain draws.
    ``real_time`` (with ``shaped`` arrivals, which replay the profile in real time): the
    independent draws read the timelines in real time too, so a run shorter than the
    profile sees its first hours as they came; else the timelines are stretched over the
    run (the driver's way, which a calibration replays)."""
    from hotshard.errors import InputError

    if order not in ("auto", "locality", "irm"):
        raise InputError(f"${{order}} must be auto, locality or irm, got {order!r}")
    has = profile is not None and profile.locality is not None
    if order == "locality" and not has:
        raise InputError("${order} locality needs a profile with a locality section "
                         "(hotshard profile of event rows writes one)")
    if has and order != "irm":
        def locality(times, duration, seed):
            from hotshard.workload.locality_order import fits_in_memory, profile_positions

            n = int(times.size)
            if not fits_in_memory(n, sampler.n_keys):
                raise InputError(f"ordering {n:,} requests over {sampler.n_keys:,} keys by "
                                 "locality does not fit in memory: simulate a shorter "
                                 "window, or give ${order} irm")
            return profile_positions(profile, sampler, n, seed, shaped=shaped)

        timelines = profile.timelines
        return KeyOrder("locality", locality, period=None if timelines is None else (
            lambda duration: duration / timelines.windows))
    if profile is not None and profile.timelines is not None:
        from hotshard.workload.timeline_draws import TimelineDraws, window_events

        timelines = profile.timelines
        draws = TimelineDraws(sampler, timelines,
                              window_events(timelines, profile.arrivals, profile.events))
        if shaped and real_time:
            # the arrivals replay the profile in real time (minute m of the run is its
            # minute m, round again past its end): so do the timelines, window w of the
            # profile where its requests came, whatever the run's length
            cycle = float(profile.arrivals.seconds)

            def timed(times, duration, seed):
                at = np.mod(np.asarray(times, dtype=np.float64), cycle) / timelines.seconds
                return draws.positions(at, np.random.default_rng(seed))

            return KeyOrder("irm+timelines", timed, windowed=True,
                            period=lambda duration: timelines.seconds / timelines.windows)

        def stretched(times, duration, seed):
            return draws.positions(np.asarray(times) / duration, np.random.default_rng(seed))

        return KeyOrder("irm+timelines", stretched, windowed=True,
                        period=lambda duration: duration / timelines.windows)
    return None


def prepare(options: dict) -> Prepared:
    """Parse options (``DEFAULTS`` keys; ``profile`` a path, ``dist`` a spec with an optional
    ``{channels}`` placeholder for the incident's channel count) into simulate's inputs.

    A profile's time sections are used when present: ``arrivals`` (``auto``) its measured
    arrival process, ``order`` (``auto``) its locality order, whose head keys follow their
    timelines; a profile without them is simulated with independent keys (and Poisson
    arrivals unless told), and a note says so. ``timelines``: ``stretched`` (the profile's
    timelines laid over the run, whatever its length) or ``real-time`` (with the profile's
    arrivals, independent draws read them in real time, as the arrivals come)."""
    from hotshard.mitigations import Mitigations
    from hotshard.profile.document import Profile
    from hotshard.sim.service_times import parse_service
    from hotshard.sim.system import ServiceModel
    from hotshard.workload.generate import parse_dist
    from hotshard.workload.profile_sampler import from_profile, op_mix_by_key

    o = {**DEFAULTS, **options}
    profile, op_mix = None, None
    if o["profile"]:   # a path, or a Profile already read (diagnose holds one)
        profile = o["profile"] if isinstance(o["profile"], Profile) else Profile.load(
            o["profile"])
        sampler = from_profile(profile)
        op_mix = op_mix_by_key(profile) if profile.operations else None
        generator = "profile"
    else:
        spec = o["dist"]
        if "{channels}" in spec:  # the load test's uniform keys over the incident's channels
            channels = Profile.load(example_path("incident.profile.json")).keys
            spec = spec.format(channels=int(channels))
        sampler = parse_dist(spec)
        generator = spec.split(":")[0]
    arrivals = _arrivals(str(o["arrivals"]), profile)
    if o["timelines"] not in ("stretched", "real-time"):
        raise InputError(f"timelines must be stretched or real-time, got {o['timelines']!r}")
    key_order = _key_order(str(o["order"]), profile, sampler,
                           shaped=_shaped(arrivals),
                           real_time=o["timelines"] == "real-time")
    notes = []
    if profile is not None and profile.locality is None and o["order"] == "auto":
        notes.append("the profile has no locality section: keys are drawn independently, so "
                     "a cache sees less reuse than production's (profile event rows to keep "
                     "their order)")
    if profile is not None and profile.arrivals is None and o["arrivals"] == "auto":
        notes.append(Phrase("the profile has no arrivals section: arrivals are Poisson, "
                            "smoother than production's (profile with --time to measure "
                            "them, or give ${arrivals})"))
    model = ServiceModel(shards=o["shards"], partitioner=o["partitioner"], workers=o["workers"],
                         service=parse_service(o["service"]), arrivals=arrivals,
                         cache_size=o["cache_size"], hit_seconds=o["hit_ms"] / 1000.0)
    k, s = o["split_hot"] or (0, 1)
    mitigations = Mitigations(split_keys=k, split_into=s, replicas=o["replicas"],
                              cache_hit=o["cache_hit"], hot_keys=o["hot_keys"],
                              coalesce=bool(o["coalesce"]))
    return Prepared(sampler, model, mitigations, op_mix, generator, profile, key_order,
                    tuple(notes))


# A run whose rate and length both come from what a profile measured is refused beyond this
# many requests (minutes of computing, at a few million simulated requests a second): a
# month of production is a run the user asks for by name (--rps, --duration), up to the
# simulator's own limit (system.MAX_REQUESTS).
PROFILE_RUN_REQUESTS = 1e9


@dataclass(frozen=True)
class RunLength:
    """A run's rate (requests/s) and length (seconds), and what the user should be told
    about where they came from."""

    rps: float
    duration: float
    notes: tuple[str, ...] = ()


def measured_rate(profile) -> tuple[float, float, str] | None:
    """(mean requests/s, seconds, the section they come from) that ``profile`` measured: its
    ``rate`` section (a profile made with a time column), else its ``arrivals`` section;
    None without either."""
    rate = profile.rate or {}
    mean, seconds = rate.get("mean_rps"), rate.get("seconds")
    if all(isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v) and v > 0
           for v in (mean, seconds)):
        return float(mean), float(seconds), "rate"
    arrivals = profile.arrivals
    if arrivals is not None:
        return arrivals.events / arrivals.seconds, float(arrivals.seconds), "arrivals"
    return None


def _rate_within(arrivals, duration: float) -> float:
    """The mean rate of the first ``duration`` seconds of a profile's arrivals replayed in
    real time (``sim.arrivals.ProfileArrivals``: minute m of the run is its minute m, round
    again past its end)."""
    res = float(arrivals.resolution_s)
    n_bins = max(1, int(np.ceil(duration / res - 1e-9)))
    widths = np.full(n_bins, res)
    widths[-1] = duration - (n_bins - 1) * res
    counts = np.asarray(arrivals.counts, dtype=np.float64)
    return float(np.sum(counts[np.arange(n_bins) % counts.size] * widths / res)) / duration


def run_length(profile, *, rps: float | None = None, duration: float | None = None,
               arrivals=None, key_order=None) -> RunLength:
    """The rate and length of a simulated run of ``profile`` when not given: the rate and
    span it measured (``measured_rate``); with ``rps`` alone, that rate over the measured
    span (profile arrivals scale their measured shape to it); with ``duration`` alone, the
    measured rate of the run's part of the profile (the first ``duration`` seconds, when
    ``arrivals`` replay the profile in real time). A profile that measured no rate gets
    ``DEFAULTS``' 3000 req/s for 10 minutes, and a note says so.

    Raises
    ------
    InputError
        The defaults taken from the profile add up to more than ``PROFILE_RUN_REQUESTS``
        requests.
    """
    from hotshard.workload.timing import format_duration

    shaped = _shaped(arrivals)
    if rps is not None and duration is not None:
        return RunLength(float(rps), float(duration),
                         _span_notes(profile, duration, key_order, shaped))
    measured = measured_rate(profile)
    if measured is None:
        rps_, duration_ = (DEFAULTS["rps"] if rps is None else rps,
                           DEFAULTS["duration"] if duration is None else duration)
        missing = " and ".join(name for name, v in (("rate", rps), ("length", duration))
                               if v is None)
        return RunLength(float(rps_), float(duration_), (Phrase(
            f"the profile measured no rate (profile with a time column to measure it): "
            f"the run's {missing} {'are' if ' and ' in missing else 'is'} the default, "
            f"{rps_:,.4g} req/s for {format_duration(duration_)} (${{rps}} and ${{duration}} "
            "set them)"),))
    mean, seconds, section = measured
    if rps is None and duration is None:
        rps, duration = mean, seconds
        text = Phrase(f"simulating the profile's measured rate, {mean:,.4g} req/s, over its "
                      f"measured span, {format_duration(seconds)} (its {section} section; "
                      "give ${rps} and ${duration} for others)")
    elif duration is None:
        duration = seconds
        text = Phrase(f"simulating {rps:,.4g} req/s "
                      + (f"(the profile's measured rate shape, scaled from its {mean:,.4g} "
                         "req/s) " if shaped else "")
                      + f"over the profile's measured span, {format_duration(seconds)} "
                        "(${duration} sets it)")
    else:
        rps = _rate_within(profile.arrivals, duration) if (
            shaped and profile.arrivals is not None) else mean
        part = (f"its first {format_duration(duration)}" if shaped and duration < seconds
                else "its measurement")
        text = Phrase(f"simulating the profile's measured rate over {part}, {rps:,.4g} req/s "
                      "(${rps} sets it)")
    total = float(rps) * float(duration)
    if total > PROFILE_RUN_REQUESTS:
        raise InputError(f"the profile measured {format_duration(seconds)} at {mean:,.4g} "
                         f"req/s: simulating {format_duration(duration)} at {rps:,.4g} req/s "
                         f"is {total:.3g} requests, more than the {PROFILE_RUN_REQUESTS:.0e} "
                         "a run takes from a profile's measurement (minutes of computing); "
                         "give both the rate and the duration to ask for it (a day is 86400 s)")
    return RunLength(float(rps), float(duration),
                     (text, *_span_notes(profile, duration, key_order, shaped)))


def _span_notes(profile, duration: float, key_order, shaped: bool) -> tuple[str, ...]:
    """A note when keys in production's order are laid over a run whose length is not the
    span the profile's timelines measured (the order stretches them over the run) while the
    arrivals replay the profile in real time."""
    from hotshard.workload.timing import format_duration

    timelines = profile.timelines
    if (timelines is None or not shaped or getattr(key_order, "name", None) != "locality"
            or abs(duration - timelines.seconds) <= timelines.seconds / timelines.windows):
        return ()
    return (Phrase(f"the run is {format_duration(duration)} long and the profile's timelines "
                   f"span {format_duration(timelines.seconds)}: keys in production's order lay "
                   "the head keys' timelines over the run (stretched), while the arrivals keep "
                   "their measured minutes; ${order} irm draws each head key by its timeline "
                   "in real time"),)


# The options a scenario sets and a user may override one by one (simulate's flags).
SCENARIO_OPTIONS = ("dist", "profile", "rps", "duration", "arrivals", "order", "shards",
                    "partitioner", "workers", "service", "split_hot", "replicas", "coalesce")


def scenario_options(name: str | None = None, **given) -> dict:
    """The options of a run: ``DEFAULTS``, then scenario ``name``'s (its example profile as a
    path), then every option in ``given`` on top, as ``hotshard simulate --scenario NAME
    [--rps ...]`` combines them. A key source given (``profile`` or ``dist``) replaces the
    scenario's, whichever kind it was.

    Raises
    ------
    InputError
        Neither a profile nor a distribution in the end, or both given; an unknown scenario.
    """
    unknown = sorted(set(given) - set(SCENARIO_OPTIONS))
    if unknown:
        raise TypeError(f"not scenario options: {', '.join(unknown)}")
    options = {key: DEFAULTS[key] for key in SCENARIO_OPTIONS}
    if name:
        options.update(scenario(name).options)
        if options.get("profile"):
            options["profile"] = str(example_path(options["profile"]))
    if given.get("profile") and "dist" not in given:
        options["dist"] = None
    if "dist" in given:
        options["profile"] = None
    options.update(given)
    if not options["profile"] and not options["dist"]:
        raise InputError("give a PROFILE, ${dist} SPEC or ${scenario} NAME")
    if options["profile"] and options["dist"]:
        raise InputError("give a PROFILE or ${dist} SPEC, not both")
    return options


def run_scenario(name: str, *, duration: float | None = None, seed: int = 0):
    """Simulate scenario ``name`` (optionally over a shorter ``duration``) -> SimResult: the
    same options ``hotshard simulate --scenario NAME`` runs (``scenario_options``)."""
    options = scenario_options(name)
    if duration is not None:
        options["duration"] = duration
    return run_simulation(options, scenario=name, rate_given=True, duration_given=True,
                          seed=seed).result


@dataclass(frozen=True)
class Simulation:
    """A simulation run from its options, and what the user should be told about how."""

    result: Any            # system.SimResult
    notes: tuple[str, ...]


def run_simulation(options: dict, *, scenario: str | None = None, rate_given: bool = False,
                   duration_given: bool = False, hot_events=(), read_share: float | None = None,
                   seed: int = 0, label: str | None = None, detection=None,
                   progress=None) -> Simulation:
    """One simulation from its options (``scenario_options``' keys), as ``hotshard simulate``
    runs it: a rate trace's own rate and length, or a profile's measured rate and span
    (``run_length``) unless the rate or the duration was given (``rate_given``,
    ``duration_given``; a scenario sets its own); reads by key from the profile's operations
    unless ``read_share`` says otherwise; ``hot_events`` checked against the run;
    ``detection`` (``detect.policy.Detection``) with windows fine enough to see it.

    Raises
    ------
    InputError
        Options, events or detection a run cannot have (each says which).
    """
    from hotshard.sim.system import simulate
    from hotshard.workload.timing import check_overlaps, format_duration

    options = dict(options)
    ready = prepare(options)
    notes = list(ready.notes)
    k = (options.get("split_hot") or (0, 1))[0]
    head = len(ready.sampler.head_ids)
    if k > head:
        notes.insert(0, f"only the {head} head keys have names to split: splitting those, "
                        f"not {k}" if head else "classic distributions have no named head "
                                                "keys: nothing is split")
    arrivals = ready.model.arrivals
    if hasattr(arrivals, "mean_rate"):  # a rate trace: its own rates and length unless told
        if not rate_given:
            options["rps"] = arrivals.mean_rate
        if not duration_given:
            options["duration"] = arrivals.duration
    elif ready.profile is not None and not scenario:
        # a profile's own measured rate and span unless told (a scenario sets its own)
        length = run_length(ready.profile, rps=options["rps"] if rate_given else None,
                            duration=options["duration"] if duration_given else None,
                            arrivals=arrivals, key_order=ready.key_order)
        options["rps"], options["duration"] = length.rps, length.duration
        notes.extend(length.notes)
    op_mix = ready.op_mix
    if read_share is None:
        from hotshard.profile.document import DEFAULT_OPS

        read_share = DEFAULT_OPS["read"]
        if op_mix is not None and "read" not in op_mix[0]:
            notes.append(Phrase(
                f"the profile's operations are {', '.join(op_mix[0])}, none named 'read': "
                f"reads taken as {read_share:.0%} of requests (${{read_share}} sets it)"))
    else:
        op_mix = None  # the user's share replaces the profile's
    events = tuple(hot_events)
    check_overlaps(events)
    for event in events:
        if event.start >= options["duration"]:
            raise InputError(f"the event on key {event.key} starts at "
                             f"{format_duration(event.start)}, after the simulated "
                             f"{format_duration(options['duration'])}")
        if event.end > options["duration"]:
            notes.append(f"the event on key {event.key} is cut short at "
                         f"{format_duration(options['duration'])}")
    interval = None
    if detection is not None:
        from hotshard.sim.series import detection_interval

        interval = detection_interval(options["duration"], detection)
        if not ready.mitigations.active:
            notes.append("--detect with no mitigation (--replicas, --cache-hit, --coalesce, "
                         "--split-hot): the keys are found hot, nothing is applied to them")
    result = simulate(ready.sampler, rps=options["rps"], duration=options["duration"],
                      model=ready.model, mitigations=ready.mitigations,
                      read_share=read_share, op_mix=op_mix, hot_events=events, rng=seed,
                      label=label or (f"simulation: {scenario}" if scenario
                                      else "simulation"),
                      key_generator=ready.key_generator, key_order=ready.key_order,
                      detection=detection, interval=interval, progress=progress)
    return Simulation(result, tuple(notes))


def _shaped(arrivals) -> bool:
    """Whether the arrivals follow a profile's measured rate shape (``ProfileArrivals``)."""
    from hotshard.sim.arrivals import ProfileArrivals

    return isinstance(arrivals, ProfileArrivals)
