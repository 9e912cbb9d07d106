"""Temporal locality of a key stream: the profile's ``locality`` section.

A profile's popularity says how often each key comes; locality says how soon it comes back.
Two streams with the same popularity can hit an LRU cache of 1% of their keys at 0.22 or 0.39
(web07 shuffled against web07): production's requests to a key cluster in time, and a cache
sees exactly that. So the profile keeps, per popularity class (keys whose count lies in
[2^c, 2^(c+1)); a head key belongs to the class of its exact count), two log-binned histograms
(``BINS_PER_OCTAVE`` bins per octave) over the stream's re-references:

* **stack distance**: how many distinct other keys were referenced since the key's previous
  reference (Mattson; an LRU cache of C entries hits exactly the references with distance < C);
* **reuse time**: how many references came in between (what the generator draws from);

with first references counted apart, and the whole stream's LRU hit-rate curve as measured at
log-spaced cache sizes: the target a generated stream is checked against. Counts only: no key,
no position, and the section is a few kilobytes whatever the stream's length.

Computed exactly in one pass (``_locality_kernels.stack_pass``), or from a SHARDS sample
(Waldspurger et al., FAST'15: the references of keys whose hash falls below rate R of the hash
space, distances scaled by 1/R) when ``sample_rate`` is given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hotshard.errors import ProfileError

__all__ = ["BINS_PER_OCTAVE", "ClassLocality", "Locality", "bin_bounds", "class_of",
           "measure_locality"]

BINS_PER_OCTAVE = 8
MAX_OCTAVES = 48            # distances and reuse times up to 2^48 references
N_BINS = BINS_PER_OCTAVE * MAX_OCTAVES
CURVE_POINTS = 64           # cache sizes of the measured LRU hit-rate curve (log-spaced)
_SHARDS_MODULUS = 1 << 24


def class_of(counts: NDArray) -> NDArray[np.int64]:
    """Popularity class of keys with these counts: floor(log2(count)), 0 for 1 (and 0)."""
    c = np.asarray(counts, dtype=np.float64)
    return np.floor(np.log2(np.maximum(c, 1.0)) + 1e-9).astype(np.int64)


def bin_bounds(bins: NDArray) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """[lo, hi) of the integer values v >= 1 whose log bin is ``bins``: bin b holds
    floor(BINS_PER_OCTAVE * log2 v) == b. Small bins that hold no integer have lo == hi."""
    b = np.asarray(bins, dtype=np.float64)
    lo = np.ceil(2.0 ** (b / BINS_PER_OCTAVE) - 1e-9)
    hi = np.ceil(2.0 ** ((b + 1) / BINS_PER_OCTAVE) - 1e-9)
    return lo, np.maximum(hi, lo)


@dataclass(frozen=True)
class ClassLocality:
    """The re-references of one popularity class: sparse log-binned histograms.

    ``stack_bins``/``stack_counts``: bins of (stack distance + 1); ``reuse_bins``/
    ``reuse_counts``: bins of the reuse time in references (>= 1). ``first``: first
    references (keys of the class seen in the stream).
    """

    cls: int
    keys: int
    first: int
    stack_bins: NDArray[np.int64]
    stack_counts: NDArray[np.int64]
    reuse_bins: NDArray[np.int64]
    reuse_counts: NDArray[np.int64]

    @property
    def references(self) -> int:
        return int(self.first + self.stack_counts.sum())

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.cls, "keys": self.keys, "first": self.first,
                "stack": [[int(b), int(n)] for b, n in zip(self.stack_bins,
                                                           self.stack_counts, strict=True)],
                "reuse": [[int(b), int(n)] for b, n in zip(self.reuse_bins,
                                                           self.reuse_counts, strict=True)]}


@dataclass(frozen=True)
class Locality:
    """The ``locality`` section of a profile (see the module's docstring).

    Parameters
    ----------
    order : str
        What order the stream was read in: ``"file"`` or ``"time:<column>"``.
    events, keys : int
        References and distinct keys of the stream measured.
    classes : tuple of ClassLocality
        One per popularity class present, by class.
    curve_sizes, curve_hits : arrays
        The LRU hit-rate curve as measured: the hit rate of an LRU cache of each size.
    sample_rate : float
        1 for an exact pass; R < 1 for a SHARDS sample (its hit rates carry an error of
        about 0.01 at R = 0.01, Waldspurger et al.).
    """

    order: str
    events: int
    keys: int
    classes: tuple[ClassLocality, ...]
    curve_sizes: NDArray[np.int64]
    curve_hits: NDArray[np.float64]
    sample_rate: float = 1.0

    @property
    def method(self) -> str:
        return "exact" if self.sample_rate >= 1.0 else "shards"

    def lru_hit_rate(self, size: float) -> float:
        """The measured LRU hit rate at ``size`` entries (interpolated in log size)."""
        if size < 1:
            return 0.0
        x = np.log(self.curve_sizes.astype(np.float64))
        return float(np.interp(math.log(size), x, self.curve_hits, left=0.0,
                               right=float(self.curve_hits[-1])))

    def class_by_id(self) -> dict[int, ClassLocality]:
        return {c.cls: c for c in self.classes}

    def to_dict(self) -> dict[str, Any]:
        return {"order": self.order, "method": self.method,
                "sample_rate": _plain(self.sample_rate), "bins_per_octave": BINS_PER_OCTAVE,
                "events": self.events, "keys": self.keys,
                "lru_hit_curve": {"sizes": [int(s) for s in self.curve_sizes],
                                  "hit_rates": [round(float(h), 6) for h in self.curve_hits]},
                "classes": [c.to_dict() for c in self.classes]}

    @classmethod
    def from_dict(cls, doc: Any, where: str = "locality") -> Locality:
        """Validate a decoded ``locality`` section; ProfileError names the field."""
        if not isinstance(doc, Mapping):
            raise ProfileError(f"{where} must be an object, got {type(doc).__name__}")
        if doc.get("bins_per_octave") != BINS_PER_OCTAVE:
            raise ProfileError(f"{where}.bins_per_octave must be {BINS_PER_OCTAVE}, got "
                               f"{doc.get('bins_per_octave')!r}")
        order = doc.get("order")
        if not isinstance(order, str) or not (order == "file" or order.startswith("time:")):
            raise ProfileError(f'{where}.order must be "file" or "time:<column>", got '
                               f"{order!r}")
        rate = _number(doc.get("sample_rate", 1), f"{where}.sample_rate")
        if not 0 < rate <= 1:
            raise ProfileError(f"{where}.sample_rate must be in (0, 1], got {rate}")
        events = int(_number(doc.get("events"), f"{where}.events"))
        keys = int(_number(doc.get("keys"), f"{where}.keys"))
        curve = doc.get("lru_hit_curve")
        if not isinstance(curve, Mapping):
            raise ProfileError(f"{where}.lru_hit_curve must be an object with sizes and "
                               "hit_rates")
        sizes = _array(curve.get("sizes"), f"{where}.lru_hit_curve.sizes")
        hits = _array(curve.get("hit_rates"), f"{where}.lru_hit_curve.hit_rates")
        if sizes.size != hits.size or sizes.size == 0:
            raise ProfileError(f"{where}.lru_hit_curve: sizes and hit_rates must be non-empty "
                               "lists of the same length")
        if np.any(np.diff(sizes) <= 0) or sizes[0] < 1:
            raise ProfileError(f"{where}.lru_hit_curve.sizes must increase from 1 or more")
        if np.any(hits < 0) or np.any(hits > 1) or np.any(np.diff(hits) < -1e-9):
            raise ProfileError(f"{where}.lru_hit_curve.hit_rates must be fractions that never "
                               "decrease with the cache size")
        raw = doc.get("classes")
        if not isinstance(raw, list):
            raise ProfileError(f"{where}.classes must be a list")
        classes = tuple(_parse_class(c, f"{where}.classes[{i}]") for i, c in enumerate(raw))
        ids = [c.cls for c in classes]
        if ids != sorted(set(ids)):
            raise ProfileError(f"{where}.classes must be in increasing class order, each once")
        total = sum(c.references for c in classes)
        if classes and abs(total - events * rate) > max(1.0, 0.5 * events * rate):
            raise ProfileError(f"{where}: the classes hold {total} references but events is "
                               f"{events}: the section disagrees with itself")
        return cls(order, events, keys, classes, sizes.astype(np.int64), hits, rate)


def _plain(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ProfileError(f"{where} must be a number, got {value!r}")
    if value < 0:
        raise ProfileError(f"{where} must be >= 0, got {value}")
    return float(value)


def _array(value: Any, where: str) -> NDArray[np.float64]:
    if not isinstance(value, list) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value):
        raise ProfileError(f"{where} must be a list of numbers")
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ProfileError(f"{where} must hold finite numbers")
    return arr


def _pairs(value: Any, where: str) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    if not isinstance(value, list):
        raise ProfileError(f"{where} must be a list of [bin, count] pairs")
    bins, counts = [], []
    for i, pair in enumerate(value):
        if (not isinstance(pair, list) or len(pair) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                           for v in pair)):
            raise ProfileError(f"{where}[{i}] must be a [bin, count] pair of integers >= 0")
        if pair[0] >= N_BINS:
            raise ProfileError(f"{where}[{i}]: bin {pair[0]} is beyond 2^{MAX_OCTAVES}")
        bins.append(pair[0])
        counts.append(pair[1])
    b = np.asarray(bins, dtype=np.int64)
    if b.size and np.any(np.diff(b) <= 0):
        raise ProfileError(f"{where}: bins must increase")
    return b, np.asarray(counts, dtype=np.int64)


def _parse_class(doc: Any, where: str) -> ClassLocality:
    if not isinstance(doc, Mapping):
        raise ProfileError(f"{where} must be an object")
    c = int(_number(doc.get("class"), f"{where}.class"))
    keys = int(_number(doc.get("keys"), f"{where}.keys"))
    first = int(_number(doc.get("first"), f"{where}.first"))
    sb, sc = _pairs(doc.get("stack"), f"{where}.stack")
    rb, rc = _pairs(doc.get("reuse"), f"{where}.reuse")
    if sc.sum() != rc.sum():
        raise ProfileError(f"{where}: stack and reuse histograms count {sc.sum()} and "
                           f"{rc.sum()} re-references: they must count the same ones")
    return ClassLocality(c, keys, first, sb, sc, rb, rc)


def _curve_sizes(keys: int) -> NDArray[np.int64]:
    """Log-spaced cache sizes from 1 to ``keys`` (every size when there are few)."""
    if keys <= CURVE_POINTS:
        return np.arange(1, max(keys, 1) + 1, dtype=np.int64)
    return np.unique(np.round(np.geomspace(1, keys, CURVE_POINTS)).astype(np.int64))


def _shards_keep(dense: NDArray[np.int64], hashes: NDArray[np.uint64] | None,
                 rate: float) -> NDArray[np.bool_]:
    """SHARDS' spatial filter: a reference is kept when its key's hash falls in the first
    ``rate`` of the hash space, so every reference of a sampled key is kept."""
    source = hashes if hashes is not None else dense.astype(np.uint64)
    mixed = source * np.uint64(0x9E3779B97F4A7C15)
    mixed ^= mixed >> np.uint64(29)
    mixed *= np.uint64(0xBF58476D1CE4E5B9)
    mixed ^= mixed >> np.uint64(32)
    threshold = np.uint64(int(rate * _SHARDS_MODULUS))
    return (mixed % np.uint64(_SHARDS_MODULUS)) < threshold


def measure_locality(keys: NDArray, *, order: str = "file",
                     sample_rate: float | None = None) -> Locality:
    """The locality section of the stream ``keys`` (any integers or 64-bit key hashes, in
    stream order).

    Parameters
    ----------
    keys : array of int
        One entry per reference.
    order : str
        How the stream was ordered, recorded as is (``"file"`` or ``"time:<column>"``).
    sample_rate : float, optional
        SHARDS sampling rate R in (0, 1): only keys whose hash falls in the first R of the
        hash space are passed through the stack, distances scaled by 1/R.
    """
    from hotshard.profile._locality_kernels import dense_ids, stack_pass

    arr = np.asarray(keys)
    if arr.size == 0:
        raise ProfileError("locality: the stream is empty")
    hashes = arr.astype(np.uint64, copy=False) if arr.dtype != np.uint64 else arr
    dense, n_keys = dense_ids(np.ascontiguousarray(hashes))
    counts = np.bincount(dense, minlength=n_keys)
    key_class = class_of(counts)
    n_classes = int(key_class.max()) + 1
    rate = 1.0
    stream = dense
    if sample_rate is not None and sample_rate < 1.0:
        if not 0 < sample_rate < 1:
            raise ProfileError(f"locality sample rate must be in (0, 1), got {sample_rate}")
        keep = _shards_keep(dense, hashes, sample_rate)
        stream = dense[keep]
        rate = float(sample_rate)
        if stream.size == 0:
            raise ProfileError(f"locality: a SHARDS sample at rate {sample_rate:g} keeps no "
                               "reference of this stream; use a higher rate or the exact pass")
    stack, reuse, first, exact = stack_pass(stream, n_keys, key_class.astype(np.int8),
                                            n_classes, N_BINS, BINS_PER_OCTAVE, n_keys,
                                            1.0 / rate)
    keys_per_class = np.bincount(key_class, minlength=n_classes)
    classes = []
    for c in range(n_classes):
        if keys_per_class[c] == 0:
            continue
        sb = np.flatnonzero(stack[c])
        rb = np.flatnonzero(reuse[c])
        classes.append(ClassLocality(c, int(keys_per_class[c]), int(first[c]), sb,
                                     stack[c, sb], rb, reuse[c, rb]))
    sizes = _curve_sizes(n_keys)
    cumulative = np.cumsum(exact).astype(np.float64)  # hits of an LRU of size s: distance < s
    expected = float(arr.size) * rate
    # SHARDS-adj: the sample holds more or fewer references than R N by chance (a few hot
    # keys decide it); the difference is counted as hits at distance 0, the hottest keys'
    # typical case, which removes most of the sample's bias at small caches
    cumulative += expected - stream.size
    hits = np.clip(cumulative[np.minimum(sizes, exact.size) - 1] / expected, 0.0, 1.0)
    return Locality(order, int(arr.size), int(n_keys), tuple(classes), sizes,
                    np.minimum(hits, 1.0), rate)
