"""Key-frequency profiles: counting, the head kept exactly, the tail fitted as a power law.

Submodules are imported on first use so ``import hotshard.profile`` stays instant.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["ALTERNATIVE_NAMES", "KEY_SCALINGS", "MAX_KEYS", "DiscretePowerLaw", "PowerLawFit",
           "fit_power_law", "keys_look_integer"]

# The most distinct keys a workload may have: key positions and synthetic IDs are 64-bit
# integers computed through float64, exact below 2^53; 1e15 keys is far past any real store.
MAX_KEYS = 10**15
# How a profile's key space is rescaled (Profile.scaled explains both).
KEY_SCALINGS = ("dilute", "extend")
# Alternatives a power-law fit can be compared with (Vuong tests); see profile.alternatives.
ALTERNATIVE_NAMES = ("lognormal", "exponential", "truncated_power_law")

_INT64 = re.compile(r"-?[0-9]{1,19}")


def keys_look_integer(keys: Iterable[object]) -> bool:
    """True when every key is a decimal integer that fits 64 bits (and there is at least one).

    Half of the one key-type rule (``hotshard.shards.resolve_key_type``): such keys are
    8-byte integers to the stores that type keys.
    """
    seen = False
    for key in keys:
        text = str(key)
        if not _INT64.fullmatch(text) or not -(2**63) <= int(text) < 2**63:
            return False
        seen = True
    return seen


_LAZY = {
    "DiscretePowerLaw": "hotshard.profile.powerlaw",
    "PowerLawFit": "hotshard.profile.fit",
    "fit_power_law": "hotshard.profile.fit",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hotshard.profile' has no attribute {name!r}")
