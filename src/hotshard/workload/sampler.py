"""Key samplers: one interface for the classic distributions and for real profiles.

Every sampler has ``sample(n, rng) -> keys`` (int64 key IDs), ``weights()`` (probability of every
key, for small key spaces), ``pmf(keys)`` and ``describe()``. Profile and explicit-weight
samplers group keys of equal weight into count classes and sample an alias table over the
classes plus a uniform pick inside the class, so memory and set-up grow with the number of
classes, not of keys: a billion tail keys cost no more than a thousand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hotshard.errors import InputError
from hotshard.profile import MAX_KEYS
from hotshard.workload import _kernels

__all__ = [
    "ClassSampler",
    "HotspotSampler",
    "KeySampler",
    "LatestSampler",
    "ScrambledZipfianSampler",
    "UniformSampler",
    "ZipfSampler",
    "from_weights",
    "hotspot",
    "latest",
    "scrambled_zipfian",
    "uniform",
    "zipf",
]

Keys = NDArray[np.int64]
# weights() materialises one float per key; refuse beyond this
_MAX_WEIGHTS = 50_000_000
# draws per inner chunk (bounded scratch memory)
_CHUNK = 1 << 16  # u, v and out stay in L2 between the fill and the lookup
_EMPTY = np.empty(0, dtype=np.int64)


def _rng(rng: np.random.Generator | int | None) -> np.random.Generator:
    return rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)


def _check_n(n: int) -> int:
    if int(n) != n or n < 0:
        raise InputError(f"number of draws must be a non-negative integer, got {n}")
    return int(n)


def _check_keys(n_keys: float, what: str = "n_keys") -> int:
    if not math.isfinite(n_keys) or int(n_keys) != n_keys or n_keys < 1:
        raise InputError(f"{what} must be an integer >= 1, got {n_keys}")
    if n_keys > MAX_KEYS:
        raise InputError(f"{what} must be at most {MAX_KEYS:.0e} (64-bit key IDs stay exact "
                         f"below that), got {n_keys:.3g}")
    return int(n_keys)


@runtime_checkable
class KeySampler(Protocol):
    """What every key sampler offers, and what the simulator and the generators use of it
    (nothing else is probed):

    ``sample(n, rng)``: ``n`` key positions (int64); ``weights()`` each key's probability;
    ``describe()`` its parameters; ``n_keys``; ``integer_keys``, whether the keys are 64-bit
    integer IDs (how a store types them, text or bigint, is the key-type rule's:
    ``hotshard.shards.resolve_key_type``); ``head_ids``, the names of the keys
    known by name (a profile's head, positions 0..k-1; none for a classic distribution);
    ``classes``, the keys grouped by equal weight (a ``ClassSampler``), or None when the
    sampler lists a weight per key.
    """

    n_keys: int
    integer_keys: bool
    head_ids: tuple[str, ...]

    @property
    def classes(self) -> ClassSampler | None: ...

    def sample(self, n: int, rng: np.random.Generator | int | None = None) -> Keys: ...

    def weights(self) -> NDArray[np.float64]: ...

    def describe(self) -> dict: ...


class _WeightsMixin:
    n_keys: int
    # a classic distribution's keys are integer IDs, none known by name
    integer_keys: ClassVar[bool] = True
    head_ids: ClassVar[tuple[str, ...]] = ()

    @property
    def classes(self) -> ClassSampler | None:
        """No classes: the sampler lists a weight per key (``KeySampler``)."""
        return None

    def pmf(self, keys: ArrayLike) -> NDArray[np.float64]:
        keys = np.asarray(keys, dtype=np.int64)
        w = self.weights()
        inside = (keys >= 0) & (keys < w.size)
        return np.where(inside, w[np.clip(keys, 0, w.size - 1)], 0.0)

    def _check_weights_size(self) -> None:
        if self.n_keys > _MAX_WEIGHTS:
            raise InputError(f"{self.n_keys:,} keys are too many to list every weight; "
                             "use pmf(keys) on the keys you need")


@dataclass(frozen=True)
class UniformSampler(_WeightsMixin):
    """Every key 0..n_keys-1 equally likely: what the incident's load test used."""

    n_keys: int

    def sample(self, n, rng=None) -> Keys:
        return _rng(rng).integers(0, self.n_keys, _check_n(n), dtype=np.int64)

    def weights(self):
        self._check_weights_size()
        return np.full(self.n_keys, 1.0 / self.n_keys)

    def pmf(self, keys):
        keys = np.asarray(keys)
        return np.where((keys >= 0) & (keys < self.n_keys), 1.0 / self.n_keys, 0.0)

    def describe(self):
        return {"distribution": "uniform", "n_keys": self.n_keys}

    @property
    def classes(self) -> ClassSampler:
        """One class: every key the same weight."""
        return ClassSampler(np.ones(1), np.array([self.n_keys], dtype=np.int64),
                            label="uniform")


@dataclass(frozen=True)
class ZipfSampler(_WeightsMixin):
    """Exact Zipf over a finite support: P(key k) proportional to (k+1)^-s, k = 0..n_keys-1.

    Key 0 is the hottest. Any s > 0 (not numpy's unbounded ``zipf``, which needs s > 1 and has
    no upper bound); drawn by rejection-inversion (Hoermann & Derflinger 1996).
    """

    s: float
    n_keys: int

    def sample(self, n, rng=None) -> Keys:
        ranks = _kernels.zipf_rejection_inversion(_rng(rng), _check_n(n), self.n_keys, self.s)
        return ranks - 1

    def weights(self):
        self._check_weights_size()
        w = np.arange(1, self.n_keys + 1, dtype=np.float64) ** (-self.s)
        return w / w.sum()

    def describe(self):
        return {"distribution": "zipf", "s": self.s, "n_keys": self.n_keys}


@dataclass(frozen=True)
class HotspotSampler(_WeightsMixin):
    """YCSB hotspot: a share ``frac_ops`` of requests goes uniformly to the first ``frac_keys``
    of the keys, the rest uniformly to the others."""

    n_keys: int
    frac_keys: float
    frac_ops: float

    @property
    def _hot(self) -> int:
        return min(self.n_keys, max(1, int(self.n_keys * self.frac_keys)))

    def sample(self, n, rng=None) -> Keys:
        gen = _rng(rng)
        n = _check_n(n)
        hot = self._hot
        is_hot = gen.random(n) < self.frac_ops if hot < self.n_keys else np.ones(n, bool)
        u = gen.random(n)
        cold = self.n_keys - hot
        keys = np.where(is_hot, (u * hot).astype(np.int64),
                        hot + (u * max(cold, 1)).astype(np.int64))
        return np.minimum(keys, self.n_keys - 1)

    def weights(self):
        self._check_weights_size()
        hot = self._hot
        w = np.empty(self.n_keys)
        if hot == self.n_keys:
            w[:] = 1.0 / hot
            return w
        w[:hot] = self.frac_ops / hot
        w[hot:] = (1.0 - self.frac_ops) / (self.n_keys - hot)
        return w

    def describe(self):
        return {"distribution": "hotspot", "n_keys": self.n_keys, "frac_keys": self.frac_keys,
                "frac_ops": self.frac_ops}


@dataclass(frozen=True)
class LatestSampler(_WeightsMixin):
    """YCSB latest: the most recently inserted keys are the hottest (key n_keys-1 first),
    popularity falling as an exact Zipf(s) of the age rank."""

    n_keys: int
    s: float = 0.99

    def sample(self, n, rng=None) -> Keys:
        return self.n_keys - 1 - ZipfSampler(self.s, self.n_keys).sample(n, rng)

    def weights(self):
        return ZipfSampler(self.s, self.n_keys).weights()[::-1].copy()

    def describe(self):
        return {"distribution": "latest", "n_keys": self.n_keys, "s": self.s}


# YCSB ScrambledZipfianGenerator constants (core/.../generator/ScrambledZipfianGenerator.java)
_YCSB_ITEM_COUNT = 10_000_000_000
_YCSB_ZETAN = 26.46902820178302
_YCSB_THETA = 0.99


@dataclass(frozen=True)
class ScrambledZipfianSampler(_WeightsMixin):
    """What YCSB's ``requestdistribution=zipfian`` really draws, bit for bit in distribution.

    YCSB draws a Zipfian(0.99) rank over 10^10 + 1 items with the Gray et al. (SIGMOD'94)
    approximation and its precomputed zeta, hashes it with FNV-1 64 and takes it modulo the
    key count. Hot keys so land at random places and are far less hot than an exact Zipf(0.99)
    over the real key count (top key 3.8% vs 6.5% at 1e6 keys).
    """

    n_keys: int

    def _ranks(self, u: NDArray[np.float64]) -> NDArray[np.int64]:
        theta = _YCSB_THETA
        items = _YCSB_ITEM_COUNT + 1  # ZipfianGenerator(0, ITEM_COUNT): max - min + 1 items
        zeta2 = 1.0 + 0.5**theta
        alpha = 1.0 / (1.0 - theta)
        eta = (1.0 - (2.0 / items) ** (1.0 - theta)) / (1.0 - zeta2 / _YCSB_ZETAN)
        uz = u * _YCSB_ZETAN
        ret = (items * np.power(eta * u - eta + 1.0, alpha)).astype(np.int64)
        ret = np.where(uz < 1.0 + 0.5**theta, 1, ret)
        return np.where(uz < 1.0, 0, ret)

    def sample(self, n, rng=None) -> Keys:
        ranks = self._ranks(_rng(rng).random(_check_n(n)))
        hashed = _kernels.fnv1_64_of_longs(ranks)
        return np.fmod(hashed, self.n_keys)  # Java %: the sign of the dividend

    def weights(self):
        self._check_weights_size()
        raise InputError("the scrambled Zipfian has no closed-form weights; estimate them by "
                         "sampling (it is defined by YCSB's generator, not by a pmf)")

    def describe(self):
        return {"distribution": "scrambled_zipfian", "n_keys": self.n_keys, "theta": _YCSB_THETA,
                "ycsb_items": _YCSB_ITEM_COUNT}


@dataclass(frozen=True)
class ClassSampler(_WeightsMixin):
    """Keys grouped in classes of equal weight: alias table over classes, uniform inside.

    Class c holds keys ``offsets[c] .. offsets[c] + sizes[c] - 1`` (key *positions*), each of
    weight ``key_weight[c]``. ``order`` (optional) maps positions to caller key IDs.
    """

    key_weight: NDArray[np.float64]
    sizes: NDArray[np.int64]
    order: NDArray[np.int64] | None = None
    label: str = "weights"

    def __post_init__(self):
        if self.key_weight.size == 0:
            raise InputError("a sampler needs at least one key")
        if np.any(self.key_weight < 0) or not np.all(np.isfinite(self.key_weight)):
            raise InputError("weights must be finite and >= 0")
        if not np.any(self.key_weight * self.sizes > 0):
            raise InputError("weights must not all be 0")
        class_w = self.key_weight * self.sizes
        prob, alias = _kernels.build_alias(class_w.astype(np.float64))
        offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        object.__setattr__(self, "_prob", prob)
        object.__setattr__(self, "_alias", alias)
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "_total", float(class_w.sum()))

    @property
    def n_keys(self) -> int:  # type: ignore[override]
        return int(self.sizes.sum())

    @property
    def n_classes(self) -> int:
        return int(self.sizes.size)

    @property
    def classes(self) -> ClassSampler:
        """Itself: it is the classes."""
        return self

    def sample(self, n, rng=None) -> Keys:
        return self._draw(n, rng, _EMPTY if self.order is None else self.order)

    def _draw(self, n: int, rng, order: NDArray[np.int64]) -> Keys:
        gen = _rng(rng)
        n = _check_n(n)
        out = np.empty(n, dtype=np.int64)
        # scratch buffers reused across chunks: filling them in place is ~2.5x faster than
        # allocating fresh uniforms (page faults dominate otherwise)
        u = np.empty(min(n, _CHUNK))
        v = np.empty(u.size)
        for start in range(0, n, _CHUNK):
            stop = min(n, start + _CHUNK)
            m = stop - start
            gen.random(out=u[:m])
            multi = _kernels.pick_classes(u[:m], self._prob, self._alias, self.sizes,
                                          out[start:stop])
            if multi:
                gen.random(out=v[:multi])
            _kernels.classes_to_keys(out[start:stop], v[:multi], self.offsets, self.sizes,
                                     order)
        return out

    def weights(self):
        self._check_weights_size()
        per_pos = np.repeat(self.key_weight / self._total, self.sizes)
        if self.order is None:
            return per_pos
        w = np.zeros(int(self.order.max()) + 1)
        w[self.order] = per_pos
        return w

    def class_probabilities(self) -> NDArray[np.float64]:
        """Probability that a draw falls in each class."""
        return self.key_weight * self.sizes / self._total

    def describe(self):
        return {"distribution": self.label, "n_keys": self.n_keys, "classes": self.n_classes}


# -- constructors ---------------------------------------------------------------------------
def uniform(n_keys: int) -> UniformSampler:
    """Uniform keys 0..n_keys-1."""
    return UniformSampler(_check_keys(n_keys))


def zipf(s: float, n_keys: int) -> ZipfSampler:
    """Exact Zipf(s) over keys 0..n_keys-1 (key 0 hottest), any s > 0."""
    if not (isinstance(s, int | float) and math.isfinite(s)) or s <= 0:
        raise InputError(f"zipf exponent s must be > 0, got {s}")
    return ZipfSampler(float(s), _check_keys(n_keys))


def hotspot(frac_keys: float, frac_ops: float, n_keys: int) -> HotspotSampler:
    """YCSB hotspot: ``frac_ops`` of requests on the first ``frac_keys`` of the keys."""
    for name, v in (("frac_keys", frac_keys), ("frac_ops", frac_ops)):
        if not 0.0 < v <= 1.0:
            raise InputError(f"{name} must be in (0, 1], got {v}")
    return HotspotSampler(_check_keys(n_keys), float(frac_keys), float(frac_ops))


def latest(n_keys: int, s: float = 0.99) -> LatestSampler:
    """YCSB latest: newest keys hottest, Zipf(s) over age."""
    if s <= 0:
        raise InputError(f"latest exponent s must be > 0, got {s}")
    return LatestSampler(_check_keys(n_keys), float(s))


def scrambled_zipfian(n_keys: int) -> ScrambledZipfianSampler:
    """YCSB's default 'zipfian' request distribution, as YCSB generates it."""
    return ScrambledZipfianSampler(_check_keys(n_keys))


def from_weights(weights: ArrayLike, keys: ArrayLike | None = None) -> ClassSampler:
    """Any explicit table: key i (or ``keys[i]``) drawn with probability weights[i]/sum.

    Equal weights share a class, so a profile-like table of 10 million keys with a few
    thousand distinct counts samples from a small, cache-resident alias table.
    """
    w = np.asarray(weights, dtype=np.float64).ravel()
    if w.size == 0:
        raise InputError("weights are empty")
    if np.any(~np.isfinite(w)) or np.any(w < 0):
        raise InputError("weights must be finite and >= 0")
    ids = np.arange(w.size, dtype=np.int64) if keys is None else np.asarray(keys).ravel()
    if ids.size != w.size:
        raise InputError(f"got {w.size} weights but {ids.size} keys")
    if ids.dtype.kind not in "iu":
        raise InputError("keys must be integers (map labels to integer IDs first)")
    order = np.argsort(-w, kind="stable")
    sorted_w = w[order]
    starts = np.flatnonzero(np.r_[True, sorted_w[1:] != sorted_w[:-1]])
    sizes = np.diff(np.r_[starts, w.size]).astype(np.int64)
    mapped = ids.astype(np.int64)[order]
    identity = keys is None and np.array_equal(order, np.arange(w.size))
    return ClassSampler(sorted_w[starts], sizes, None if identity else mapped)
