"""Does a key space have a semantic hot spot? The shares that decide it, computed once.

Used by ``diagnose`` (is "no hot spot" the explanation?) and by ``check`` (are uniform test
keys right for this production?), so both apply the same rule.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from hotshard.profile.document import Profile
from hotshard.profile.summary import NEAR_UNIFORM_TOP1PCT_RATIO, summarize

__all__ = ["NEAR_UNIFORM_MAX_FACTOR", "ProfileShape", "profile_shape", "uuid_like"]


_UUID = re.compile(r"^(?:[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?"
                   r"[0-9a-fA-F]{12}|[0-9a-fA-F]{32,})$")


def uuid_like(keys: tuple[str, ...]) -> bool:
    """Most of the keys are random identifiers (UUIDs or long hex), which no natural grouping
    queries: the sign of a key space without semantic hot spots."""
    if not keys:
        return False
    sample = keys[:200]
    return sum(bool(_UUID.match(k)) for k in sample) >= 0.9 * len(sample)


@dataclass(frozen=True, slots=True)
class ProfileShape:
    """The profile's concentration: the shares that say whether any key is semantically hot."""

    events: float
    keys: float
    top1_share: float
    top1pct_share: float
    top1pct_vs_uniform: float  # top 1% share over 1% (1 = uniform)
    max_count: float
    uuid_keys: bool
    near_uniform: bool


# A profile is near-uniform when its top 1% of keys carry less than twice their fair share
# (inspect's rule) AND its busiest key at most this many times a key's fair share of events
# (which decides when there are too few keys for a top 1%): a Poisson-noise spread of counts
# (every key seen once or twice, as in a UUID-keyed store) sits well under both, while any
# real hot spot (a live channel, a best seller) is orders of magnitude above.
NEAR_UNIFORM_MAX_FACTOR = 10.0


def profile_shape(profile: Profile) -> ProfileShape:
    """The profile's concentration and whether it has any semantic hot spot."""
    summary = summarize(profile)
    events, keys = float(profile.events), float(profile.keys)
    counts = np.asarray(profile.head_counts, dtype=np.float64)
    max_count = float(counts.max()) if counts.size else 0.0
    if max_count == 0:
        tail_counts, tail_keys = profile.tail.classes()
        present = tail_counts[np.asarray(tail_keys) > 0]
        max_count = float(present.max()) if present.size else 0.0
    fair = events / keys if keys else math.inf
    ratio = summary.top1pct_vs_uniform
    near = (max_count <= NEAR_UNIFORM_MAX_FACTOR * max(fair, 1.0)
            and (math.isnan(ratio) or ratio < NEAR_UNIFORM_TOP1PCT_RATIO))
    return ProfileShape(events, keys, max_count / events if events else 0.0,
                        summary.top1pct_share, ratio, max_count,
                        uuid_like(tuple(profile.head_keys)), near)
