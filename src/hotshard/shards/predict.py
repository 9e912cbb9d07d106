"""Per-shard load predicted from a profile, without sampling, and mitigations as what-ifs.

Head keys are placed exactly by the store's partitioner. The tail's contribution to shard s is
a sum over its count classes of keys landing on s at random: mean = tail events x ownership(s),
variance = sum_c keys_c w_c^2 own_s (1 - own_s). When the profile recorded this partitioner's
placement, the tail is exact and only rounding remains.

After mitigations (``hotshard.mitigations``) every share is on one basis: requests before
mitigation that reach one node of the shard. A key with c events, read share r, reads kept k
(past the cache and coalescing) and R read nodes (replicas, the primary included) puts
c ((1 - r) + r k / R) on each node of its shard (writes go to every replica, surviving reads to
one); a shard's share is the sum of its keys' shares plus its tail's, so the keys listed for the
hottest shard never add up to more than the shard. The uniform band after mitigation is the
band of uniform keys carrying the same total load (the band before, scaled by the after shares'
total): it is relative, so its max/mean does not change.

Coalescing is a switch, so how many reads merge is predicted, from the rates (it needs ``rps``
and ``capacity``). Reads of one (sub-)key reach a node as a Poisson stream of rate lambda; a
read in flight for T seconds absorbs every identical read arriving meanwhile, so the reads that
reach the node form the renewal process of a non-paralysable dead-time counter and a fraction
1 / (1 + lambda T) of them remain (Knoll, *Radiation Detection and Measurement*, 4th ed., 4.VII;
renewal-reward: one read per cycle of mean T + 1/lambda, whatever T's distribution). T is at
least one service time, 1 / capacity; queueing only lengthens it, so taking T = 1 / capacity
counts fewer merges than happen: the after shares are an upper bound. Head keys are coalesced
(the tail's keys are too rare, one by one, for their reads to overlap much).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hotshard._format import pct
from hotshard.errors import InputError
from hotshard.mitigations import MODEL_FIELDS, Mitigations
from hotshard.profile.document import DEFAULT_OPS, Profile
from hotshard.shards.partitioners import Partitioner
from hotshard.shards.split import split_shards

__all__ = ["KeyLoad", "Prediction", "PredictedDetection", "head_shards", "predict",
           "predict_detection", "predict_distribution", "predict_load", "tail_placement",
           "whole_span_load"]

# rps / capacity beyond this (a million shards' worth of load) is a unit slip, not a question:
# its CPU figures would print in powers of ten or overflow.
MAX_LOAD_RATIO = 1e6

# without per-operation counts, the generator's default mix: one fact, one place
DEFAULT_READ_SHARE = DEFAULT_OPS["read"]
UNIFORM_BAND_SD = 3.0
AFTER_BASIS = ("requests before mitigation that reach one node of the shard (cache hits and "
               "coalesced reads reach none; reads are split over the replicas)")


@dataclass(frozen=True)
class Prediction:
    """Expected share of load per shard (sums to 1 before mitigations)."""

    partitioner: str
    shares: NDArray[np.float64]
    sd: NDArray[np.float64]
    hottest_keys: tuple[tuple[str, float], ...]
    uniform_low: float
    uniform_high: float
    uniform_max_over_mean: float
    tail_exact: bool
    cpu: NDArray[np.float64] | None = None
    rps: float | None = None
    capacity: float | None = None
    after: Prediction | None = None
    whatif: dict = field(default_factory=dict)
    # what the shares are a share of: every request ("all requests"), or, after mitigations,
    # the requests before mitigation as seen by one replica node (they then add up to less)
    basis: str = "all requests"
    # where the keys came from: a profile, or a classic distribution's spec (every key exact)
    keys_from: str = "profile"
    # when the profile has timelines: each window's shares, the peak window, the events
    timeline: Any = None

    @property
    def n_shards(self) -> int:
        return int(self.shares.size)

    @property
    def hottest(self) -> int:
        return int(np.argmax(self.shares))

    @property
    def saturated(self) -> tuple[int, ...]:
        """Shards whose predicted CPU exceeds 100% (their queues grow without bound), hottest
        first; empty without a CPU prediction."""
        if self.cpu is None:
            return ()
        over = np.flatnonzero(self.cpu > 1.0)
        return tuple(int(s) for s in over[np.argsort(-self.cpu[over], kind="stable")])

    @property
    def max_rps(self) -> float | None:
        """Total requests/s at which the hottest shard reaches 100% CPU (capacity / its share)."""
        if self.capacity is None:
            return None
        top = float(self.shares.max())
        return self.capacity / top if top > 0 else float("inf")

    def notable_keys(self, limit: int = 3) -> tuple[tuple[str, float], ...]:
        """The hottest shard's top keys worth naming in a sentence: at most ``limit``, each
        carrying at least a tenth of the top key's share (a 0.08% key beside a 40% one is
        noise in prose; ``hottest_keys`` keeps them all)."""
        if not self.hottest_keys:
            return ()
        top = self.hottest_keys[0][1]
        return tuple((k, v) for k, v in self.hottest_keys[:limit] if v >= 0.1 * top)

    @property
    def max_over_mean(self) -> float:
        mean = float(self.shares.mean())
        return float(self.shares.max()) / mean if mean > 0 else float("nan")

    def to_dict(self) -> dict:
        shards = []
        for s in range(self.n_shards):
            row = {"shard": s, "share": float(self.shares[s]), "sd": float(self.sd[s])}
            if self.cpu is not None:
                row["cpu"] = float(self.cpu[s])
            shards.append(row)
        out = {
            "partitioner": self.partitioner,
            "shards": shards,
            "max_over_mean": self.max_over_mean,
            "hottest": {"shard": self.hottest, "share": float(self.shares[self.hottest]),
                        "top_keys": [{"key": k, "share": v} for k, v in self.hottest_keys]},
            "uniform_band": {"low": self.uniform_low, "high": self.uniform_high,
                             "max_over_mean": self.uniform_max_over_mean},
            "tail_exact": self.tail_exact,
            "keys_from": self.keys_from,
            "basis": self.basis,
            "total_share": float(self.shares.sum()),
        }
        if self.cpu is not None:
            out["saturated"] = list(self.saturated)
            out["max_rps"] = self.max_rps
        if self.after is not None:
            out["whatif"] = self.whatif
            out["after"] = self.after.to_dict()
        if self.timeline is not None:
            out.update(self.timeline.to_dict())
        return out


def _read_share(profile: Profile) -> float:
    ops = profile.operations
    if ops and "read" in ops:
        return ops["read"].events / profile.events
    return DEFAULT_READ_SHARE


def tail_placement(profile: Profile, partitioner: Partitioner) -> NDArray[np.float64] | None:
    """The profile's recorded tail events per shard for exactly this partitioner, if any."""
    rec = profile.placement.get(partitioner.spec)
    if rec is None or not rec.matches(partitioner) or rec.tail_events_by_shard is None:
        return None
    events = np.asarray(rec.tail_events_by_shard, dtype=np.float64)
    if events.size != partitioner.n_shards:
        return None
    return events * (profile.tail.events / events.sum()) if events.sum() > 0 else events


def _uniform_band(profile: Profile, own: NDArray[np.float64]) -> tuple[float, float, float]:
    keys = max(profile.keys, 1.0)
    sd = np.sqrt(own * (1 - own) * (1.0 / keys + 1.0 / max(profile.events, 1.0)))
    low = float(np.min(own - UNIFORM_BAND_SD * sd))
    high = float(np.max(own + UNIFORM_BAND_SD * sd))
    return max(low, 0.0), high, high / float(own.mean())


def predict(profile: Profile, partitioner: Partitioner, *, rps: float | None = None,
            capacity: float | None = None, mitigations: Mitigations | None = None
            ) -> Prediction:
    """Predict each shard's share of load for ``profile`` placed by ``partitioner``.

    Parameters
    ----------
    rps, capacity : the whole service's requests/s and what one shard (one node) serves at
        100% CPU, together or not at all: each shard's CPU, and coalescing's merges.
    mitigations : what-ifs (``MODEL_FIELDS`` of ``hotshard.mitigations.Mitigations``); when
        any is on, ``after`` holds the prediction with them on the module notes' basis.

    Raises
    ------
    InputError
        rps without capacity, or the reverse; coalescing without them; a service-only field.
    """
    if (rps is None) != (capacity is None):
        raise InputError("rps and capacity go together (CPU = rps x share / capacity)")
    if rps is not None and (rps <= 0 or capacity <= 0):
        raise InputError("rps and capacity must be > 0")
    if mitigations is not None:
        mitigations.only(MODEL_FIELDS, "predict")
        if mitigations.coalesce and rps is None:
            raise InputError("coalescing needs rps and capacity: how many reads merge depends "
                             "on how often a key's reads overlap one in flight")
    placed = head_shards(profile, partitioner, list(profile.head_keys))
    load = whole_span_load(profile, partitioner, placed)
    result = predict_load(load, partitioner, rps=rps, capacity=capacity,
                          mitigations=mitigations)
    if profile.timelines is None:
        return result
    from hotshard.shards.windows import predict_windows

    return replace(result, timeline=predict_windows(profile, partitioner, placed, load,
                                                    predict_load, rps=rps, capacity=capacity,
                                                    mitigations=mitigations))


@dataclass(frozen=True)
class KeyLoad:
    """What a prediction is made from: the head keys' requests (in the order their rank is
    read, the top first), their shards, the tail's expected requests and variance per shard,
    and the total. The whole span's, or one window's (``hotshard.shards.windows``)."""

    keys: list[str]
    counts: NDArray[np.float64]
    placed: NDArray[np.int64]
    tail_mean: NDArray[np.float64]
    tail_var: NDArray[np.float64]
    events: float
    read_share: float
    band: tuple[float, float, float]
    tail_exact: bool


def whole_span_load(profile: Profile, partitioner: Partitioner, placed: NDArray[np.int64]
                    ) -> KeyLoad:
    """The profile's load over its whole span."""
    n = partitioner.n_shards
    own = np.asarray(partitioner.ownership(), dtype=np.float64)
    recorded = tail_placement(profile, partitioner)
    if recorded is not None:
        tail_mean, tail_var = recorded, np.zeros(n)
    else:
        class_w, class_k = profile.tail.classes()
        tail_mean = profile.tail.events * own
        tail_var = float(np.dot(class_k, class_w**2)) * own * (1 - own)
    return KeyLoad(list(profile.head_keys), np.asarray(profile.head_counts, dtype=np.float64),
                   np.asarray(placed, dtype=np.int64), tail_mean, tail_var,
                   float(profile.events), _read_share(profile), _uniform_band(profile, own),
                   recorded is not None)


def predict_load(load: KeyLoad, partitioner: Partitioner, *, rps: float | None,
                 capacity: float | None, mitigations: Mitigations | None) -> Prediction:
    """``predict`` on a ``KeyLoad``: shares, CPU and the mitigations' what-if."""
    n = partitioner.n_shards
    events = load.events
    head_keys, head_counts, placed = load.keys, load.counts, load.placed
    head_load = np.bincount(placed, weights=head_counts, minlength=n)
    shares = (head_load + load.tail_mean) / events
    sd = np.sqrt(load.tail_var) / events
    hot = int(np.argmax(shares))
    on_hot = np.flatnonzero((placed == hot) & (head_counts > 0))
    on_hot = on_hot[np.argsort(-head_counts[on_hot], kind="stable")]
    top = tuple((head_keys[i], float(head_counts[i] / events)) for i in on_hot[:5])
    low, high, u_mom = load.band
    if rps is not None and not (capacity and rps / capacity <= MAX_LOAD_RATIO):
        raise InputError(f"{rps:,.4g} requests/s on shards that each serve {capacity:,.4g}/s "
                         f"is more than {MAX_LOAD_RATIO:.0e} times one shard's capacity: check "
                         "the units (${rps}: the whole service's requests/s; ${capacity}: what "
                         "one shard serves at 100% CPU)")
    cpu = None if rps is None else rps * shares / capacity
    result = Prediction(partitioner.spec, shares, sd, top, low, high, u_mom,
                        load.tail_exact, cpu, rps, capacity)
    if mitigations is None or not mitigations.active:
        return result
    effective, described = _effective(mitigations, len(head_keys))
    after, merged = _apply_mitigations(load, partitioner, effective, rps, capacity)
    if effective.coalesce:
        described["coalesced_share"] = merged
        described["notes"].append(
            f"coalescing merges at least {pct(merged)} of all requests (reads counted as merged "
            "only while one is in service, 1/capacity; queueing merges more)")
    return replace(result, after=after, whatif=described)


def _effective(m: Mitigations, n_head: int) -> tuple[Mitigations, dict]:
    """The mitigations as they can be applied: only head keys are known by name, so at most
    the profile's head keys are split or cached; the description says so when fewer than
    asked."""
    split = min(m.split_keys, n_head) if m.splits else 0
    hot = min(m.hot_keys, n_head)
    notes = []
    if m.splits and split < m.split_keys:
        notes.append(f"the profile names only its {n_head:,} head keys, so only the top "
                     f"{split:,} are split, not the {m.split_keys:,} asked for (tail keys are "
                     "known only by their counts)")
    if m.cache_hit > 0 and hot < m.hot_keys:
        notes.append(f"the profile names only its {n_head:,} head keys, so the cache serves "
                     f"the top {hot:,}, not the {m.hot_keys:,} asked for")
    effective = replace(m, split_keys=split, split_into=m.split_into if split else 1,
                        hot_keys=max(hot, 1))
    described = {**m.to_dict(MODEL_FIELDS), "split_keys_effective": split,
                 "hot_keys_effective": hot, "text": effective.text(), "notes": notes}
    return effective, described


def _apply_mitigations(load: KeyLoad, partitioner, m: Mitigations, rps, capacity
                       ) -> tuple[Prediction, float]:
    """Per-node shares after mitigations, keys and shards on the same basis, and the share of
    all requests coalescing merges (module notes)."""
    n = partitioner.n_shards
    events = load.events
    read = load.read_share
    head_keys, head_counts, head_shards = load.keys, load.counts, load.placed
    tail_mean, tail_var, band = load.tail_mean, load.tail_var, load.band
    # per-node load of one event: writes reach every replica, surviving reads one of R
    plain = (1.0 - read) + read / m.replicas
    k = m.split_keys if m.splits else 0
    past_cache = np.ones(len(head_keys))
    past_cache[:m.hot_keys] = 1.0 - m.cache_hit
    remain = np.ones(len(head_keys))  # of a node's reads of a (sub-)key, those not merged
    if m.coalesce:
        ways = np.ones(len(head_keys))
        ways[:k] = m.split_into
        rate = rps * head_counts / events / ways * read * past_cache / m.replicas
        remain = 1.0 / (1.0 + rate / capacity)
    node = (1.0 - read) + read * past_cache * remain / m.replicas
    merged = float(np.sum(head_counts * read * past_cache * (1.0 - remain))) / events
    # split the top keys into time-bucket sub-partitions, placed as serve places them
    split = split_shards(partitioner, head_keys[:k], m.split_into)
    extra_keys = [name for names in split.keys for name in names]
    extra_load = np.repeat(head_counts[:k] / m.split_into * node[:k], m.split_into)
    head_load = head_counts * node
    head_load[:k] = 0.0
    extra_shards = split.shards.reshape(-1)
    key_load = np.concatenate([head_load, extra_load])
    key_shards = np.concatenate([head_shards, extra_shards]).astype(np.int64)
    per_node = np.bincount(key_shards, weights=key_load, minlength=n) + tail_mean * plain
    shares = per_node / events
    sd = np.sqrt(tail_var) * plain / events
    hot_shard = int(np.argmax(shares))
    on_hot = np.flatnonzero((key_shards == hot_shard) & (key_load > 0))
    on_hot = on_hot[np.argsort(-key_load[on_hot], kind="stable")][:5]
    names = head_keys + extra_keys
    top = tuple((names[i], float(key_load[i] / events)) for i in on_hot)
    # uniform keys carrying the same total load: the band scales, its max/mean does not
    scale = float(per_node.sum()) / float(np.sum(head_counts) + np.sum(tail_mean))
    low, high, u_mom = band
    cpu = None if rps is None else rps * shares / capacity
    after = Prediction(partitioner.spec, shares, sd, top, low * scale, high * scale, u_mom,
                       tail_exact=False, cpu=cpu, rps=rps, capacity=capacity, basis=AFTER_BASIS)
    return after, merged


def head_shards(profile: Profile, partitioner: Partitioner, head_keys: list[str]
                ) -> NDArray[np.int64]:
    """Head keys' shards: hashed, or as recorded when the keys are pseudonyms."""
    if not profile.privacy.get("pseudonymized"):
        return partitioner.shard_of(head_keys) if head_keys else np.zeros(0, dtype=np.int64)
    spec = partitioner.spec
    rec = profile.placement.get(spec)
    if rec is None or not rec.matches(partitioner) or rec.head_shards is None:
        recorded = ", ".join(s for s, r in profile.placement.items() if r.head_shards)
        raise InputError(f"this profile is pseudonymized: its head keys can only be placed as "
                         f"recorded ({recorded}), not on {spec}; profile the data again with "
                         "that store's partitioner")
    return np.asarray(rec.head_shards, dtype=np.int64)


# a classic distribution is predicted key by key; past this many keys its placement costs
# more than the answer is worth (its shares then sit in the uniform band to 3 decimals)
MAX_DISTRIBUTION_KEYS = 10_000_000


def predict_distribution(sampler, partitioner: Partitioner, *, rps: float | None = None,
                         capacity: float | None = None, mitigations: Mitigations | None = None
                         ) -> Prediction:
    """``predict`` for a classic distribution (``--dist uniform:N``, ``zipf:S:N``...): its
    keys are the integer IDs 0..N-1 that ``generate --dist`` and ``drive --dist`` send, each
    with its exact weight, so every key is placed exactly (no tail to spread, no sampling
    error: the uniform band is the keys' own, ``sqrt(own (1 - own) / N)``).

    Raises
    ------
    InputError
        More than ``MAX_DISTRIBUTION_KEYS`` keys; a distribution without closed-form weights
        (the scrambled Zipfian); rps without capacity, as ``predict``.
    """
    n_keys = int(sampler.n_keys)
    if n_keys > MAX_DISTRIBUTION_KEYS:
        raise InputError(f"{n_keys:,} keys are too many to place one by one (at most "
                         f"{MAX_DISTRIBUTION_KEYS:,}): predict a smaller key space, whose "
                         "shares show the same skew")
    weights = np.asarray(sampler.weights(), dtype=np.float64)
    if (rps is None) != (capacity is None):
        raise InputError("${rps} and ${capacity} go together (CPU = rps x share / capacity)")
    if mitigations is not None:
        mitigations.only(MODEL_FIELDS, "predict")
    order = np.argsort(-weights, kind="stable")
    keys = [str(k) for k in order.tolist()]
    own = np.asarray(partitioner.ownership(), dtype=np.float64)
    sd = np.sqrt(own * (1 - own) / max(n_keys, 1))
    high = float(np.max(own + UNIFORM_BAND_SD * sd))
    band = (max(float(np.min(own - UNIFORM_BAND_SD * sd)), 0.0), high, high / float(own.mean()))
    zeros = np.zeros(partitioner.n_shards)
    load = KeyLoad(keys, weights[order], np.asarray(partitioner.shard_of(keys), dtype=np.int64),
                   zeros, zeros, 1.0, DEFAULT_READ_SHARE, band, True)
    result = predict_load(load, partitioner, rps=rps, capacity=capacity,
                          mitigations=mitigations)
    return replace(result, keys_from=_spec_of(sampler))


def _spec_of(sampler) -> str:
    """The distribution as ``--dist`` names it (``zipf:1.1:1000000``)."""
    described = dict(sampler.describe())
    name = described.get("distribution", "distribution")
    fields = _SPEC_FIELDS.get(name, ())
    return ":".join([name, *(f"{described[f]:g}" if isinstance(described[f], float)
                             else str(described[f]) for f in fields if f in described)])


# each distribution's parameters in the order its --dist spec gives them
_SPEC_FIELDS = {"uniform": ("n_keys",), "zipf": ("s", "n_keys"),
                "hotspot": ("frac_keys", "frac_ops", "n_keys"), "latest": ("n_keys", "s"),
                "scrambled_zipfian": ("n_keys",)}


@dataclass(frozen=True)
class PredictedDetection:
    """``predict --detect``: how a service's hot-key rule (``detect.policy.Detection``) would
    find the profile's hot keys. ``events``: each event of the prediction's timelines with
    ``found_after_s`` (earliest, latest seconds from its start to the action; None: never
    found); ``steady``: the head keys above the hot share over the whole span (hot from the
    start, found within a window, a reading and the time to apply; at most ten)."""

    events: tuple[dict[str, Any], ...]
    steady: tuple[dict[str, Any], ...]

    def to_dict(self) -> dict[str, Any]:
        return {"events": list(self.events), "steady": list(self.steady)}


def predict_detection(prediction: Prediction, profile: Profile, partitioner: Partitioner,
                      detection) -> PredictedDetection:
    """The rule's closed form (``Detection.time_to_detect``) over the prediction's events,
    and the keys hot over the whole span placed by ``partitioner``."""
    timeline = prediction.timeline
    events = []
    for e in (getattr(timeline, "events", ()) if timeline is not None else ()):
        when = detection.time_to_detect(e.share, e.overall_share)
        events.append({"key": e.key, "shard": e.shard, "start_s": e.start_s, "end_s": e.end_s,
                       "share": e.share, "found_after_s": None if when is None else
                       [round(when[0], 3), round(when[1], 3)]})
    shares = np.asarray(profile.head_counts, dtype=np.float64) / max(float(profile.events), 1.0)
    keys = [i for i in range(min(shares.size, 10)) if shares[i] >= detection.hot_share]
    steady = []
    if keys:
        placed = partitioner.shard_of([str(profile.head_keys[i]) for i in keys])
        within = detection.window_s + 0.5 + detection.apply_s
        steady = [{"key": str(profile.head_keys[i]), "shard": int(s),
                   "share": float(shares[i]), "found_within_s": within}
                  for i, s in zip(keys, placed, strict=True)]
    return PredictedDetection(tuple(events), tuple(steady))
