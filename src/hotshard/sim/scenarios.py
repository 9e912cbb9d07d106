"""Named scenarios: the incident's load test, its production, and production mitigated.

The service model behind them is chosen once, here, with the reason for each value, and every
scenario reuses it unchanged: what differs between the load test and production is only what
differed in the incident (the keys, the rate, the arrival pattern), so the gap between them is
the incident's own explanation, not a tuned parameter.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["INCIDENT_SERVICE", "SCENARIOS", "Scenario", "prepare", "run_scenario", "scenario"]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

# The incident's service, once (shared/REFERENCES.md, "The incident's numbers, worked through"):
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
# Live chat reacts to the stream in waves: 30% of the time the rate runs 20% above its mean,
# in cycles of ~5 s (an on/off Markov-modulated Poisson process). A load generator's requests
# are Poisson. This burstiness is what turns a 95%-busy shard's ~90 ms queue into ~800 ms at p99
# (Kingman: the wait scales with the arrivals' variability at the same utilisation).
LIVE_CHAT_ARRIVALS = "onoff:1.2:0.3:5s"
# The mitigations the incident's fix would combine, as predict's what-ifs name them: the ten
# hottest channels split over 8 time-bucket sub-partitions, reads over 2 replicas, identical
# in-flight reads coalesced.
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
                  "arrivals": LIVE_CHAT_ARRIVALS, **INCIDENT_SERVICE}),
        Scenario("incident-mitigated",
                 "production with hot channels split, read replicas and read coalescing",
                 {"profile": "incident.profile.json", "rps": 3000.0, "duration": 3600.0,
                  "arrivals": LIVE_CHAT_ARRIVALS, **INCIDENT_SERVICE,
                  **INCIDENT_MITIGATIONS}),
    )
}


def scenario(name: str) -> Scenario:
    """The scenario called ``name``; an InputError listing the others if there is none."""
    from hotshard.errors import InputError

    if name not in SCENARIOS:
        raise InputError(f"no scenario {name!r}; the scenarios are {', '.join(SCENARIOS)}")
    return SCENARIOS[name]


def example_path(name: str) -> Path:
    """A file of examples/ (the incident profiles), which the scenarios name."""
    return EXAMPLES / name


DEFAULTS = {"rps": 3000.0, "duration": 600.0, "shards": 64, "partitioner": "kafka",
            "workers": 1, "service": "exp:5.25ms", "arrivals": "poisson", "replicas": 1,
            "coalesce": False, "split_hot": None, "dist": None, "profile": None,
            "cache_size": 0, "hit_ms": 0.5, "cache_hit": 0.0, "hot_keys": 10}


@dataclass(frozen=True)
class Prepared:
    """What ``simulate`` needs, built from options (a scenario's, a command line's)."""

    sampler: object
    model: object
    mitigations: object
    op_mix: object
    key_generator: str
    profile: object


def prepare(options: dict) -> Prepared:
    """Parse options (``DEFAULTS`` keys; ``profile`` a path, ``dist`` a spec with an optional
    ``{channels}`` placeholder for the incident's channel count) into simulate's inputs."""
    from hotshard.profile.model import Profile
    from hotshard.sim.arrivals import parse_arrivals
    from hotshard.sim.model import Mitigations, ServiceModel
    from hotshard.sim.service import parse_service
    from hotshard.workload.generate import parse_dist
    from hotshard.workload.profile_sampler import from_profile, op_mix_by_key

    o = {**DEFAULTS, **options}
    profile, op_mix = None, None
    if o["profile"]:
        profile = Profile.load(o["profile"])
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
    model = ServiceModel(shards=o["shards"], partitioner=o["partitioner"], workers=o["workers"],
                         service=parse_service(o["service"]),
                         arrivals=parse_arrivals(o["arrivals"]), cache_size=o["cache_size"],
                         hit_seconds=o["hit_ms"] / 1000.0)
    k, s = o["split_hot"] or (0, 1)
    mitigations = Mitigations(split_keys=k, split_into=s, replicas=o["replicas"],
                              local_cache_hit=o["cache_hit"], hot_keys=o["hot_keys"],
                              coalesce=bool(o["coalesce"]))
    return Prepared(sampler, model, mitigations, op_mix, generator, profile)


def run_scenario(name: str, *, duration: float | None = None, seed: int = 0):
    """Simulate scenario ``name`` (optionally over a shorter ``duration``) -> SimResult."""
    from hotshard.sim.model import simulate

    options = dict(scenario(name).options)
    if options.get("profile"):
        options["profile"] = str(example_path(options["profile"]))
    ready = prepare(options)
    return simulate(ready.sampler, rps=options["rps"],
                    duration=duration or options["duration"], model=ready.model,
                    mitigations=ready.mitigations, op_mix=ready.op_mix, rng=seed,
                    label=f"simulation: {name}", key_generator=ready.key_generator)
