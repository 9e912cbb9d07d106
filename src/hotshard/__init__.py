"""hotshard: make load tests of partitioned stores tell the truth about hot keys.

The library's front door, in the order of the loop (docs/ARCHITECTURE.md)::

    import hotshard

    profile = hotshard.count_profile(["events.parquet"], key="channel_id")   # counts only
    sampler = hotshard.from_profile(profile)                # keys with production's skew
    kafka = hotshard.partitioner_for("kafka", 64, integer_keys=profile.integer_keys)
    prediction = hotshard.predict(profile, kafka, rps=3000, capacity=400)  # the hot shard
    run = hotshard.simulate(sampler, rps=3000, duration=600)  # latency and CPU per shard
    verdict = hotshard.diagnose(hotshard.Observations.load("prod.json"))

Importing the package is instant and has no side effects: these names are loaded on first use
(a module ``__getattr__``), every capability lives in its own subpackage (``hotshard.profile``,
...) and heavy dependencies are imported where they are used. Every error hotshard raises
derives from ``HotshardError`` (``hotshard.errors``).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from hotshard.errors import (
    FetchError,
    FitError,
    HeaderLineError,
    HotshardError,
    IdempotencyConflict,
    InputError,
    LoadError,
    NodeLoading,
    NodeUnreachable,
    ObservationsError,
    ProfileError,
    ProtocolError,
    RespError,
    ShardError,
    ShardFailure,
    ShardTimeout,
    ShardUnavailable,
    TransportError,
)

__version__ = "0.1.0"

# name -> module that defines it: the public API, loaded lazily
_LAZY = {
    "Profile": "hotshard.profile.document",
    "count_profile": "hotshard.profile.count",
    "from_profile": "hotshard.workload.profile_sampler",
    "make_partitioner": "hotshard.shards.partitioners",
    "partitioner_for": "hotshard.shards.partitioners",
    "place_keys": "hotshard.shards.place",
    "predict": "hotshard.shards.predict",
    "simulate": "hotshard.sim.system",
    "Observations": "hotshard.observations",
    "diagnose": "hotshard.diagnose",  # the subpackage, callable: see its docstring
}

__all__ = ["FetchError", "FitError", "HeaderLineError", "HotshardError", "IdempotencyConflict",
           "InputError",
           "LoadError", "NodeLoading", "NodeUnreachable", "Observations", "ObservationsError",
           "Profile", "ProfileError", "ProtocolError", "RespError", "ShardError", "ShardFailure",
           "ShardTimeout", "ShardUnavailable", "TransportError", "__version__", "count_profile",
           "diagnose", "from_profile", "make_partitioner", "partitioner_for", "place_keys",
           "predict", "simulate"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hotshard' has no attribute {name!r}")
    loaded = import_module(module)
    value = loaded if module == f"hotshard.{name}" else getattr(loaded, name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
