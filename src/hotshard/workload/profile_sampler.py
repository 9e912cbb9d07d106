"""Sampling keys from a profile: real head keys at exact weights, synthetic tail keys.

Head keys keep their real IDs and exact relative weights. Tail keys get synthetic IDs that can
never collide with a head key; their weights come from the profile's tail, either the fitted
power law (default; below xmin the exact histogram) or the exact count-of-counts histogram
(``tail="histogram"``). Tail keys of equal weight form classes (see ``ClassSampler``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from hotshard.errors import InputError
from hotshard.profile.document import BINS_PER_DECADE, EXACT_LIMIT, KeyDistribution, Profile
from hotshard.profile.powerlaw import DiscretePowerLaw
from hotshard.workload import TAIL_MODES
from hotshard.workload.placed_tail import PlacedTail, place_tail
from hotshard.workload.sampler import ClassSampler

__all__ = ["ProfileSampler", "from_profile", "largest_remainder", "stand_in_head_keys",
           "tail_classes"]



def largest_remainder(expected: NDArray[np.float64], total: int) -> NDArray[np.int64]:
    """Integer counts in proportion to ``expected`` summing to ``total``, by largest remainder
    (Hamilton's method): keys per class, events per class, events per time bin."""
    if expected.sum() <= 0:
        return np.zeros(expected.size, dtype=np.int64)
    scaled = expected * (total / expected.sum())
    base = np.floor(scaled).astype(np.int64)
    short = total - int(base.sum())
    if short > 0:
        base[np.argsort(-(scaled - base), kind="stable")[:short]] += 1
    return base


def _law_classes(pl: dict, n_keys: int, c_max: float) -> tuple[NDArray, NDArray]:
    """(per-key count, keys) classes of the fitted law on xmin..c_max (unscaled counts)."""
    xmax = pl.get("xmax")
    law = DiscretePowerLaw(float(pl["alpha"]), int(pl["xmin"]),
                           None if xmax is None else max(int(xmax), int(pl["xmin"])))
    xmin = int(pl["xmin"])
    c_max = max(float(xmin), float(np.floor(c_max)))
    exact_top = min(c_max, float(EXACT_LIMIT))
    c = np.arange(xmin, int(exact_top) + 1, dtype=np.float64)
    counts, expected = [c], [law.pmf(c)]
    if c_max > exact_top:
        edges = np.unique(np.floor(np.logspace(np.log10(exact_top + 1), np.log10(c_max + 1),
                                               max(2, int(BINS_PER_DECADE * np.log10(
                                                   (c_max + 1) / (exact_top + 1))) + 1))))
        lo, hi = edges[:-1], edges[1:]
        mass = law.ccdf(lo) - law.ccdf(hi)
        a = float(pl["alpha"])
        # mean count in [lo, hi) under the law, by the continuous approximation (c >= 1024)
        if abs(a - 2.0) < 1e-9:
            mean = (np.log(hi) - np.log(lo)) / (1.0 / lo - 1.0 / hi)
        else:
            mean = ((hi ** (2 - a) - lo ** (2 - a)) / (2 - a)) / (
                (hi ** (1 - a) - lo ** (1 - a)) / (1 - a))
        counts.append(mean)
        expected.append(mass)
    counts_arr = np.concatenate(counts)
    keys = largest_remainder(np.concatenate(expected), n_keys)
    return counts_arr, keys


def tail_classes(dist: KeyDistribution, tail: str = "power_law") -> tuple[NDArray, NDArray]:
    """(per-key weight, integer keys) of the tail classes; weights sum to the tail's events."""
    if tail not in TAIL_MODES:
        raise InputError(f"unknown tail model {tail!r}; choose from {', '.join(TAIL_MODES)}")
    model = dist.tail
    n_tail = int(round(model.keys))
    if n_tail == 0 or model.events <= 0:
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    pl = model.power_law
    if tail == "histogram" or pl is None:
        counts, keys = model.classes()
        keys = largest_remainder(keys, n_tail)
    else:
        count_scale = float(pl.get("count_scale", 1.0))
        cut = float(pl["xmin"]) * count_scale
        below = model.values < cut - 1e-9
        below_counts = model.values[below]
        below_keys = largest_remainder(model.value_keys[below],
                                       int(round(model.value_keys[below].sum())))
        law_keys = n_tail - int(below_keys.sum())
        ceiling = (dist.head_counts.min() if dist.head_counts.size else
                   max(float(model.values.max(initial=0)), float(model.bin_hi.max(initial=0))))
        # the law lives on unscaled counts, truncated where the (unscaled) head begins
        head_scale = float(pl.get("head_scale", count_scale))
        law_counts, law_k = _law_classes(pl, max(law_keys, 0), ceiling / head_scale)
        counts = np.concatenate([below_counts, law_counts * count_scale])
        keys = np.concatenate([below_keys, law_k])
    keep = keys > 0
    counts, keys = counts[keep].astype(np.float64), keys[keep].astype(np.int64)
    total = float(np.dot(counts, keys))
    weights = counts * (model.events / total) if total > 0 else counts
    order = np.argsort(-weights, kind="stable")
    return weights[order], keys[order]


def tail_prefix(head_ids) -> str:
    """Prefix of synthetic tail names: '~t', lengthened until no head key could match it."""
    prefix = "~t"
    while any(re.fullmatch(re.escape(prefix) + r"\d+", k) for k in head_ids):
        prefix = "~" + prefix
    return prefix


@dataclass(frozen=True)
class ProfileSampler:
    """Draws key positions from a profile; ``ids`` turns them into key IDs.

    Position i < head_size is the i-th head key (most frequent first); positions from
    head_size on are tail keys, hottest class first.
    """

    classes: ClassSampler
    head_ids: tuple[str, ...]
    integer_keys: bool
    tail_model: str
    n_tail_classes: int
    placed: PlacedTail | None = None

    @property
    def n_keys(self) -> int:
        return self.classes.n_keys

    @property
    def head_size(self) -> int:
        return len(self.head_ids)

    def sample(self, n: int, rng=None) -> NDArray[np.int64]:
        """Key positions (0 = hottest head key)."""
        return self.classes.sample(n, rng)

    def weights(self) -> NDArray[np.float64]:
        return self.classes.weights()

    def head_probabilities(self) -> NDArray[np.float64]:
        return self.classes.class_probabilities()[: self.head_size]

    def describe(self) -> dict:
        return {"distribution": "profile", "n_keys": self.n_keys, "head_keys": self.head_size,
                "tail_classes": self.n_tail_classes, "tail": self.tail_model,
                "integer_keys": self.integer_keys,
                "tail_placement": None if self.placed is None else self.placed.spec}

    # -- key IDs ----------------------------------------------------------------------------
    def ids(self, positions: NDArray[np.int64]):
        """Key IDs: int64 array for integer keys, a pyarrow string array otherwise."""
        positions = np.asarray(positions, dtype=np.int64)
        if self.integer_keys:
            return self._int_ids(positions)
        return self._str_ids(positions)

    def _int_ids(self, positions):
        head = np.array([int(k) for k in self.head_ids], dtype=np.int64)
        is_head = positions < self.head_size
        tail_pos = np.where(is_head, 0, positions - self.head_size)
        if self.placed is not None:
            tail_ids = self.placed.names(tail_pos)  # integers placed on their shards
        else:
            taken = np.sort(head[head >= 0])
            # the p-th non-negative integer that is not a head ID
            gaps = taken - np.arange(taken.size)
            tail_ids = tail_pos + np.searchsorted(gaps, tail_pos, side="right")
        return np.where(is_head, head[np.minimum(positions, max(self.head_size - 1, 0))]
                        if self.head_size else 0, tail_ids)

    def _str_ids(self, positions):
        import pyarrow as pa
        import pyarrow.compute as pc

        is_head = positions < self.head_size
        head = pa.array(list(self.head_ids) or [""], type=pa.string())
        head_part = pc.take(head, pa.array(np.where(is_head, positions, 0)))
        tail_pos = np.maximum(positions - self.head_size, 0)
        if self.placed is not None:
            tail_pos = self.placed.names(tail_pos)
        tail_num = pc.cast(pa.array(tail_pos), pa.string())
        tail_part = pc.binary_join_element_wise(tail_prefix(self.head_ids), tail_num, "")
        return pc.if_else(pa.array(is_head), head_part, tail_part)


def from_profile(profile: Profile | KeyDistribution, *, tail: str = "power_law",
                 op: str | None = None, follow=None) -> ProfileSampler:
    """A sampler reproducing ``profile`` (or one of its operations' distributions).

    ``follow``: a partitioner whose tail placement the profile recorded; synthetic tail keys
    are then named so that each shard gets its recorded share of the tail.
    """
    if isinstance(profile, Profile):
        integer = profile.integer_column
        if op is not None:
            if op not in profile.operations:
                raise InputError(f"the profile has no operation {op!r}; it has "
                                 f"{', '.join(profile.operations) or 'none'}")
            dist = profile.operations[op]
        else:
            dist = profile.dist
    else:
        dist, integer = profile, False
    head_ids = tuple(dist.head_keys)
    if isinstance(profile, Profile) and profile.privacy.get("pseudonymized"):
        head_ids, integer = _stand_ins(profile, dist, op)
    if integer:
        try:
            [int(k) for k in head_ids]
        except ValueError:
            integer = False
    weights, keys = tail_classes(dist, tail)
    head_w = np.asarray(dist.head_counts, dtype=np.float64)
    sampler = ClassSampler(np.concatenate([head_w, weights]),
                           np.concatenate([np.ones(head_w.size, dtype=np.int64), keys]),
                           label="profile")
    placed = None
    if follow is not None:
        if not isinstance(profile, Profile):
            raise InputError("following a placement needs the whole profile")
        placed = _placed_tail(profile, dist, weights, keys, follow, integer, head_ids)
    return ProfileSampler(sampler, head_ids, integer, tail, int(keys.size), placed)


def _placed_tail(profile, dist, weights, keys, follow, integer, head_ids):
    spec = follow.spec
    rec = profile.placement.get(spec)
    if rec is None or not rec.matches(follow) or rec.tail_events_by_shard is None:
        raise InputError(f"the profile recorded no tail placement for {spec}: profile the "
                         f"data again with partitioner {follow.name} and {follow.n_shards} "
                         "shards")
    targets = np.asarray(rec.tail_events_by_shard, dtype=np.float64)
    taken = set(head_ids)
    if integer:
        def names(idx):
            return [str(i) for i in idx]
    else:
        prefix = tail_prefix(head_ids)

        def names(idx):
            return [f"{prefix}{i}" for i in idx]
    return place_tail(weights, keys, targets, follow, names, taken, spec)


def stand_in_head_keys(profile: Profile) -> tuple[str, ...]:
    """The keys ``hotshard generate`` writes for a pseudonymized profile's head keys, in head
    order (each lands on the shard its real key did, under the recorded partitioner)."""
    return _stand_ins(profile, profile.dist, None)[0]


def _stand_ins(profile: Profile, dist: KeyDistribution, op: str | None):
    """Stand-in head keys landing where the real ones did, under the recorded partitioner."""
    from hotshard.shards.partitioners import from_spec, stand_in_keys

    for spec, rec in profile.placement.items():
        if rec.head_shards is None:
            continue
        part = from_spec(spec, rec.key_type)
        if part.fingerprint != rec.fingerprint:
            continue  # recorded with a custom ring or slot map: cannot be rebuilt from the spec
        shards = rec.head_shards if op is None else rec.op_head_shards.get(op, ())
        integer = rec.key_type == "bigint"
        keys = stand_in_keys(list(dist.head_keys), shards, part, integer)
        return tuple(keys), integer
    raise InputError("this pseudonymized profile records no placement that can be rebuilt "
                     "(custom ring or slot map): its head keys cannot be synthesised")


def op_mix_by_key(profile: Profile) -> tuple[tuple[str, ...], NDArray[np.float64],
                                             NDArray[np.float64]]:
    """Which operation each event is, given its key: (op names, per-head-key cumulative op
    probabilities [head x ops], cumulative op probabilities of a tail key).

    A profile records each operation's distribution apart, so the same key must be drawn once
    from the overall distribution and its operation chosen afterwards: drawing each operation
    from its own distribution would invent keys (two unrelated synthetic tails) and lose head
    keys that are hot overall but in no operation's head. A head key's operation counts are
    exact where it is in that operation's head; the rest of its events, and every tail key's,
    follow the operations' events left over once their head keys are accounted for.
    """
    names = tuple(profile.operations)
    head = profile.head_keys
    known = np.zeros((len(head), len(names)))
    for j, op in enumerate(names):
        dist = profile.operations[op]
        where = {key: i for i, key in enumerate(dist.head_keys)}
        for i, key in enumerate(head):
            if key in where:
                known[i, j] = dist.head_counts[where[key]]
    totals = np.array([profile.operations[op].events for op in names], dtype=np.float64)
    left = np.maximum(totals - known.sum(axis=0), 0.0)  # each op's events not yet placed
    unknown = np.maximum(np.asarray(profile.head_counts, dtype=np.float64) - known.sum(axis=1),
                         0.0)
    # Place the unplaced events: rows are the head keys' unknown parts plus the whole tail,
    # columns the operations; a head key gets none of an operation whose head it is in (its
    # count there is exact). Iterative proportional fitting matches both margins, so every
    # operation keeps its total events in expectation.
    rows = np.append(unknown, profile.tail.events)
    allowed = np.vstack([known == 0, np.ones(len(names), dtype=bool)]).astype(np.float64)
    allowed[allowed.sum(axis=1) == 0] = 1.0
    place = allowed * (left / left.sum() if left.sum() > 0 else 1.0 / len(names))
    for _ in range(200):
        place *= (rows / np.maximum(place.sum(axis=1), 1e-300))[:, None]
        place *= left / np.maximum(place.sum(axis=0), 1e-300)
        if np.allclose(place.sum(axis=1), rows, rtol=1e-12, atol=1e-9):
            break
    tail_row = place[-1]
    tail_p = tail_row / tail_row.sum() if tail_row.sum() > 0 else totals / totals.sum()
    mix = known + place[:-1]
    sums = mix.sum(axis=1, keepdims=True)
    mix = np.divide(mix, sums, out=np.tile(tail_p, (len(head), 1)), where=sums > 0)
    return names, np.cumsum(mix, axis=1), np.cumsum(tail_p)
