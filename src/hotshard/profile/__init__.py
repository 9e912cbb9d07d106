"""Key-frequency profiles: counting, the head kept exactly, the tail fitted as a power law.

Submodules are imported on first use so ``import hotshard.profile`` stays instant.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DiscretePowerLaw", "PowerLawFit", "fit_power_law"]

_LAZY = {
    "DiscretePowerLaw": "hotshard.profile.powerlaw",
    "PowerLawFit": "hotshard.profile.fit",
    "fit_power_law": "hotshard.profile.fit",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'hotshard.profile' has no attribute {name!r}")
