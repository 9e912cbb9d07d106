"""Temporal locality of a key stream: the profile's ``locality`` section.

A profile's popularity says how often each key comes; locality says how soon it comes back.
Two streams with the same popularity can hit an LRU cache of 1% of their keys at 0.22 or 0.39
(web07 shuffled against web07): production's requests to a key cluster in time, and a cache
sees exactly that. So the profile keeps, per popularity class (keys whose count lies in
[2^c, 2^(c+1)); a head key belongs to the class of its exact count), two log-binned histograms
(``BINS_PER_OCTAVE`` bins per octave: bin b holds the integers v with floor(8 log2 v) == b,
[``bin_bounds``)) over the stream's re-references:

* **stack distance**: how many distinct other keys were referenced since the key's previous
  reference (Mattson; an LRU cache of C entries hits exactly the references with distance < C),
  binned as distance + 1;
* **reuse time**: how many references came in between, plus one (what the generator draws
  from);

with first references counted apart, and the whole stream's LRU hit-rate curve as measured:
the hit rate at every other bin edge below the key count (every size up to 6, then about 4
sizes an octave, ~65 points for 76 K keys) and at the key count. Counts only: no key, no
position, and the section is a few kilobytes whatever the stream's length.

Format (JSON): ``{"order", "method": "exact"|"shards", "sample_rate", "bins_per_octave": 8,
"events", "keys", "lru_hit_curve": {"sizes": [...], "hit_rates": [...]}, "classes": [{"class",
"keys", "first", "stack": [first bin, count, count, ...], "reuse": [...]}, ...]}``: each
histogram one run of counts from its first bin with a count to its last (``[]`` when empty;
lists of [bin, count] pairs, as the first profiles with the section wrote them, still read),
hit rates to 6 decimals. An exact section's classes hold every reference (firsts plus
re-references = events); a sampled one's the sampled keys'. The section grows with the log
of the stream's length (more classes, more bins a class): 13 KB at 1 M references, 21 KB at
10 M, 24 KB at 100 M (Zipf over a tenth as many keys).

Computed exactly in one pass (``_locality_kernels.stack_pass``) up to ``EXACT_MAX_KEYS``
distinct keys, or by SHARDS (Waldspurger et al., FAST'15: the references of the keys whose
hash falls in the first R of the hash space, through a stack of their own, distances scaled
by 1/R), here with an exact window: every reference also goes through an exact LRU stack of
the ``SHARDS_WINDOW`` most recent keys, so every distance below the window is exact, and the
window's misses (exactly counted) are split by the sample's misses, which removes SHARDS'
error at small caches (its distance resolution is 1/R) and its dependence on how many
references a few sampled hot keys bring (what SHARDS-adj corrects in part).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hotshard._validate import Fields, at, item
from hotshard.errors import ProfileError

__all__ = ["BINS_PER_OCTAVE", "EXACT_MAX_KEYS", "SAMPLE_RATE", "SHARDS_GROUPS", "SHARDS_WINDOW",
           "ClassLocality", "Locality", "StreamLocality", "bin_bounds", "bin_lows", "class_of",
           "exact_fits", "key_hashes", "measure_locality"]

BINS_PER_OCTAVE = 8
MAX_OCTAVES = 48            # distances and reuse times up to 2^48 references
N_BINS = BINS_PER_OCTAVE * MAX_OCTAVES
_SHARDS_MODULUS = 1 << 24
EXACT_MAX_KEYS = 1 << 20    # beyond, measure_locality samples (see its Notes)...
EXACT_SHORT_EVENTS = 20_000_000  # ... unless the stream is this short (exact in seconds)
EXACT_SHORT_KEYS = 1 << 23       # ... and its keys' state fits (~70 bytes a key, ~600 MB)
SAMPLE_RATE = 0.1           # SHARDS' default rate (error: see Locality)
SHARDS_MAX_KEYS = 1 << 20   # fixed-size SHARDS: the rate falls so no more keys are sampled
SHARDS_WINDOW = 4096        # SHARDS' curve is exact below this many entries
SHARDS_GROUPS = 8           # parts of the sample whose spread gives its expected error


def key_hashes(values: NDArray) -> NDArray[np.int64]:
    """64-bit key hashes as the compiled passes take them: contiguous int64, an unsigned
    hash reinterpreted bit for bit (DuckDB's ``hash`` is a UBIGINT), an integer key as it
    is."""
    arr = np.asarray(values)
    return np.ascontiguousarray(arr.view(np.int64) if arr.dtype == np.uint64
                                else arr.astype(np.int64, copy=False))


def exact_fits(events: int, n_keys: int) -> bool:
    """Whether a stream of ``events`` references over ``n_keys`` keys is measured exactly:
    up to ``EXACT_MAX_KEYS`` keys whatever its length; up to ``EXACT_SHORT_KEYS`` when it is
    at most ``EXACT_SHORT_EVENTS`` long (a cold pass runs at 4-6 M references a second, so
    a few seconds; a sample would save little and cost its error). The one rule of every
    engine, so DuckDB's and Spark's profiles of one trace measure it the same way."""
    return n_keys <= EXACT_MAX_KEYS or (events <= EXACT_SHORT_EVENTS
                                        and n_keys <= EXACT_SHORT_KEYS)


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
                "stack": _run(self.stack_bins, self.stack_counts),
                "reuse": _run(self.reuse_bins, self.reuse_counts)}


def _run(bins: NDArray[np.int64], counts: NDArray[np.int64]) -> list[int]:
    """A sparse histogram as [first bin, its count, the next bin's, ..., the last bin's]:
    one number a bin from the first to the last with a count (none when empty)."""
    if bins.size == 0:
        return []
    dense = np.zeros(int(bins[-1] - bins[0]) + 1, dtype=np.int64)
    dense[bins - bins[0]] = counts
    return [int(bins[0]), *dense.tolist()]


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
        1 for an exact pass; R < 1 for SHARDS. Measured error of its hit rates at the
        default R = 0.1 (``SAMPLE_RATE``), largest over every size of the exact curve: 0.0007
        on orm-busy (5 M references, 76 K keys; asserted <= 0.01 by a test), 0.0067 on
        scarab-recs (1.2 M, 258 K); at R = 0.01, 0.006 and 0.013. Exact below 4,096 entries.
        The key counts (``keys``, each class's) are then estimates.
    expected_error : float
        0 for an exact pass. For SHARDS, the standard error of its hit rates, largest over
        the curve, computed from the sample itself: the sampled keys fall in
        ``SHARDS_GROUPS`` parts by their hash, each a SHARDS sample of its own, and the
        spread of the parts' curves over the square root of their number is the whole
        sample's standard error.
    """

    order: str
    events: int
    keys: int
    classes: tuple[ClassLocality, ...]
    curve_sizes: NDArray[np.int64]
    curve_hits: NDArray[np.float64]
    sample_rate: float = 1.0
    expected_error: float = 0.0

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
                "classes": [c.to_dict() for c in self.classes],
                **({"expected_error": round(float(self.expected_error), 6)}
                   if self.sample_rate < 1 else {})}

    @classmethod
    def from_dict(cls, doc: Any, where: str = "locality") -> Locality:
        """Validate a decoded ``locality`` section; ProfileError names the field. Fields are
        read by ``_validate.Fields``; the rules that span them (the curve's sizes against its
        hit rates, the classes' references against ``events``) are checked here."""
        f = _FIELDS
        f.mapping(doc, where)
        if doc.get("bins_per_octave") != BINS_PER_OCTAVE:
            raise f.wrong(at(where, "bins_per_octave"), str(BINS_PER_OCTAVE),
                          doc.get("bins_per_octave"))
        order = f.required(doc, "order", where, f.string, '"file" or "time:<column>"')
        if not (order == "file" or order.startswith("time:")):
            raise f.wrong(at(where, "order"), '"file" or "time:<column>"', order)
        rate = f.positive(doc.get("sample_rate", 1), at(where, "sample_rate"))
        if rate > 1:
            raise f.wrong(at(where, "sample_rate"), "a fraction in (0, 1]", rate, numeric=True)
        events = f.required(doc, "events", where, f.count, "an integer >= 0")
        keys = f.required(doc, "keys", where, f.count, "an integer >= 0")
        curve = f.required(doc, "lru_hit_curve", where, f.mapping,
                           "an object with sizes and hit_rates")
        path = at(where, "lru_hit_curve")
        sizes = np.asarray(f.required(curve, "sizes", path, f.numbers, "a list of numbers"),
                           dtype=np.float64)
        hits = np.asarray(f.required(curve, "hit_rates", path, f.numbers,
                                     "a list of fractions"), dtype=np.float64)
        if sizes.size != hits.size or sizes.size == 0:
            raise f.fail(path, "sizes and hit_rates must be non-empty lists of the same "
                               f"length, got {sizes.size} and {hits.size}")
        if np.any(np.diff(sizes) <= 0) or sizes[0] < 1:
            raise f.fail(at(path, "sizes"), "must increase from 1 or more")
        if np.any(hits > 1) or np.any(np.diff(hits) < -1e-9):
            raise f.fail(at(path, "hit_rates"), "must be fractions that never decrease with "
                                                "the cache size")
        raw = f.required(doc, "classes", where, f.array, "a list of classes")
        classes = tuple(_parse_class(c, item(at(where, "classes"), i))
                        for i, c in enumerate(raw))
        ids = [c.cls for c in classes]
        if ids != sorted(set(ids)):
            raise f.fail(at(where, "classes"), "must be in increasing class order, each once")
        total = sum(c.references for c in classes)
        # exact: every reference once; SHARDS: the sampled keys' references, R of the
        # stream's on average but as many as a few hot keys decide, never more than all
        if classes and (total > events or (rate >= 1 and total != events)):
            raise f.fail(where, f"holds {total} references in its classes but events is "
                                f"{events}: the section disagrees with itself")
        error = f.fraction(doc.get("expected_error", 0), at(where, "expected_error"))
        return cls(order, events, keys, classes, sizes.astype(np.int64), hits, float(rate),
                   float(error))


_FIELDS = Fields(ProfileError)


def _plain(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


def _pairs(value: Any, where: str) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """(bins, counts) with a count of a histogram written as ``_run`` does, or as a list of
    [bin, count] pairs (the first profiles with a locality section)."""
    if not isinstance(value, list):
        raise ProfileError(f"{where} must be a list: [first bin, count, count, ...]")
    if value and all(isinstance(v, list) for v in value):
        return _old_pairs(value, where)
    _FIELDS.integers(value, where)
    if not value:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    counts = np.asarray(value[1:], dtype=np.int64)
    if value[0] + counts.size > N_BINS:
        raise ProfileError(f"{where}: bins up to {value[0] + counts.size - 1} go beyond "
                           f"2^{MAX_OCTAVES}")
    bins = value[0] + np.flatnonzero(counts)
    return bins.astype(np.int64), counts[counts > 0]


def _old_pairs(value: list, where: str) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    bins, counts = [], []
    for i, pair in enumerate(value):
        if (len(pair) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2**63
                           for v in pair)):
            raise ProfileError(f"{where}[{i}] must be a [bin, count] pair of integers >= 0 "
                               "(below 2^63)")
        if pair[0] >= N_BINS:
            raise ProfileError(f"{where}[{i}]: bin {pair[0]} is beyond 2^{MAX_OCTAVES}")
        bins.append(pair[0])
        counts.append(pair[1])
    b = np.asarray(bins, dtype=np.int64)
    if b.size and np.any(np.diff(b) <= 0):
        raise ProfileError(f"{where}: bins must increase")
    return b, np.asarray(counts, dtype=np.int64)


def _parse_class(doc: Any, where: str) -> ClassLocality:
    f = _FIELDS
    f.mapping(doc, where)
    c, keys, first = (f.required(doc, name, where, f.count, "an integer >= 0")
                      for name in ("class", "keys", "first"))
    sb, sc = _pairs(doc.get("stack"), at(where, "stack"))
    rb, rc = _pairs(doc.get("reuse"), at(where, "reuse"))
    if sc.sum() != rc.sum():
        raise f.fail(where, f"holds stack and reuse histograms of {sc.sum()} and {rc.sum()} "
                            "re-references: they must count the same ones")
    return ClassLocality(c, keys, first, sb, sc, rb, rc)


def bin_lows() -> NDArray[np.int64]:
    """The integer lower bounds of 63 octaves of bins (``bin_bounds``), as the compiled
    passes bin by: bin b holds the integers in [lows[b], lows[b + 1])."""
    lo, _ = bin_bounds(np.arange(BINS_PER_OCTAVE * 63 + 1))
    return np.minimum(lo, 2.0**62).astype(np.int64)


def _curve(hits_upto: NDArray[np.float64], events: int, n_keys: int,
           lows: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """(sizes, hit rates) of the LRU hit-rate curve at every other bin edge below
    ``n_keys`` (about 4 sizes an octave, every size up to 6) and at ``n_keys``, from
    ``hits_upto[b]``: the hits of references whose distance plus one lies in bin b or below.
    An LRU cache of s entries hits exactly the references at distance < s, so at size
    lows[b + 1] - 1 it hits hits_upto[b]."""
    b = np.arange(1, N_BINS, 2)
    sizes = lows[b + 1] - 1
    ok = (sizes >= 1) & (sizes < n_keys)
    sizes, hits = sizes[ok], hits_upto[b[ok]]
    sizes, last = np.unique(sizes[::-1], return_index=True)   # equal sizes: equal hits
    hits = hits[::-1][last]
    sizes = np.append(sizes, max(n_keys, 1)).astype(np.int64)
    hits = np.append(hits, hits_upto[-1]) / max(events, 1)
    return sizes, np.clip(hits, 0.0, 1.0)


def _classes(stack: NDArray[np.int64], reuse: NDArray[np.int64], first: NDArray[np.int64],
             keys_per_class: NDArray[np.int64]) -> tuple[ClassLocality, ...]:
    out = []
    for c in range(keys_per_class.size):
        if keys_per_class[c] == 0 and first[c] == 0:
            continue
        sb = np.flatnonzero(stack[c])
        rb = np.flatnonzero(reuse[c])
        out.append(ClassLocality(c, int(keys_per_class[c]), int(first[c]), sb, stack[c, sb],
                                 rb, reuse[c, rb]))
    return tuple(out)


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
        None (default): exact, unless the stream has more than ``EXACT_MAX_KEYS`` distinct
        keys, then SHARDS at ``SAMPLE_RATE``. 1: exact whatever the size. R in (0, 1):
        SHARDS at rate R (``StreamLocality``, with the exact window).

    Notes
    -----
    Where sampling starts (``EXACT_MAX_KEYS`` = 2^20 distinct keys): the exact pass costs
    about 60 bytes a distinct key (hash table, stack, positions) and runs at 35-50 M
    references/s while its keys' state stays in cache (orm-busy: 5 M references, 76 K keys),
    but at 4-6 M/s once it does not (a cold stream of 3-4 M keys: every key a cache miss),
    where SHARDS at R = 0.1 with its exact window runs at 7-10 M/s with its curve within
    0.004 of the exact one (``benchmarks/bench_profile_time.py``'s trace). Past 1 M keys a
    profile's time goes mostly to this pass, so it samples there; the key count is found by
    the pass itself (or given by the engine), which stops and starts over sampled.
    """
    from hotshard.profile._locality_kernels import dense_ids, stack_pass

    arr = np.asarray(keys)
    if arr.size == 0:
        raise ProfileError("locality: the stream is empty")
    if sample_rate is not None and not 0 < sample_rate <= 1:
        raise ProfileError(f"locality sample rate must be in (0, 1], got {sample_rate}")
    hashes = key_hashes(arr)
    lows = bin_lows()
    if sample_rate is None or sample_rate >= 1:
        limit = 1 << 62
        if sample_rate is None:
            limit = EXACT_SHORT_KEYS if arr.size <= EXACT_SHORT_EVENTS else EXACT_MAX_KEYS
        ids, n_keys, counts = dense_ids(hashes, limit)
        if n_keys >= 0:
            key_class = class_of(counts)
            n_classes = int(key_class.max()) + 1
            stack, reuse, first = stack_pass(ids, n_keys, key_class.astype(np.int8),
                                             n_classes, N_BINS, lows, BINS_PER_OCTAVE)
            del ids
            sizes, hits = _curve(np.cumsum(stack.sum(axis=0)).astype(np.float64),
                                 int(arr.size), n_keys, lows)
            return Locality(order, int(arr.size), int(n_keys),
                            _classes(stack, reuse, first, np.bincount(key_class)), sizes, hits)
        sample_rate = SAMPLE_RATE
    return _measure_shards(hashes, order, float(sample_rate), lows)


def _measure_shards(hashes: NDArray[np.int64], order: str, rate: float,
                    lows: NDArray[np.int64]) -> Locality:
    """``measure_locality`` by SHARDS at ``rate`` with an exact window (see the module)."""
    from hotshard.profile._locality_kernels import dense_ids, sampled_keys

    threshold = max(int(rate * _SHARDS_MODULUS), 1)
    sampled = hashes[sampled_keys(hashes, threshold)]
    if sampled.size == 0:
        raise ProfileError(f"locality: a SHARDS sample at rate {rate:g} keeps no reference "
                           "of this stream; use a higher rate or the exact pass")
    ids, n_sampled, counts = dense_ids(sampled)
    keys = np.empty(n_sampled, dtype=np.int64)
    keys[ids] = sampled
    del sampled, ids
    pass_ = StreamLocality([(keys, counts)], events=int(hashes.size), order=order,
                           sample_rate=rate)
    pass_.feed(hashes)
    return pass_.result()


class StreamLocality:
    """The locality section of a stream fed in order, chunk by chunk, in memory that grows
    with its keys, not its length: the engines' path (``profile --time`` on a file of any
    size). Every key's count is known beforehand (the engine counted them), so each key's
    popularity class is too, and the pass needs the stream once.

    Parameters
    ----------
    keys : iterable of (hashes, counts) arrays
        Every key of the stream (its 64-bit hash as the stream has it, and its count), in
        batches; with SHARDS only the sampled ones are kept.
    events : int
        The stream's length.
    order : str
        How the stream is ordered (``Locality.order``).
    sample_rate : float, optional
        None: exact while ``exact_fits`` (``n_keys``), SHARDS at ``SAMPLE_RATE`` beyond
        (lower past ``SHARDS_MAX_KEYS`` sampled keys). 1: exact. R < 1: SHARDS at R with
        the exact window.
    sampled_only : bool
        The stream holds the sampled keys' references only (an engine drew the sample, at
        ``sample_rate``): SHARDS without the window (distances and reuse times scaled by
        1 / R, the count of sampled references corrected to its expectation, SHARDS-adj);
        ``n_keys`` is then the whole stream's key count.
    n_keys : int, optional
        The stream's distinct keys, when the caller knows it (to pick the method).
    """

    def __init__(self, keys, *, events: int, order: str, sample_rate: float | None = None,
                 sampled_only: bool = False, n_keys: int | None = None):
        from hotshard.profile._locality_kernels import (
            key_table,
            new_shards,
            new_stack,
            sampled_keys,
        )

        if sample_rate is not None and not 0 < sample_rate <= 1:
            raise ProfileError(f"locality sample rate must be in (0, 1], got {sample_rate}")
        if sample_rate is None:
            sample_rate = 1.0 if n_keys is None or exact_fits(events, n_keys) else \
                min(SAMPLE_RATE, SHARDS_MAX_KEYS / n_keys)
        if sampled_only and sample_rate >= 1:
            sampled_only = False  # a sample of everything is the stream
        self.rate = float(sample_rate)
        self.exact = self.rate >= 1
        self.sampled_only = sampled_only
        self.events, self.order, self.n_keys = int(events), order, n_keys
        self.threshold = max(int(self.rate * _SHARDS_MODULUS), 1)
        kept_h, kept_c = [], []
        for hashes, counts in keys:
            h = key_hashes(hashes)
            c = np.asarray(counts, dtype=np.int64)
            if not (self.exact or sampled_only):
                keep = sampled_keys(h, self.threshold)
                h, c = h[keep], c[keep]
            kept_h.append(h)
            kept_c.append(c)
        hashes = np.concatenate(kept_h) if kept_h else np.zeros(0, np.int64)
        counts = np.concatenate(kept_c) if kept_c else np.zeros(0, np.int64)
        if hashes.size == 0:
            raise ProfileError("locality: no key to follow (the stream is empty, or a SHARDS "
                               f"sample at rate {self.rate:g} keeps none of its keys)")
        self.table, self.shift = key_table(hashes)
        self.n_table = int(hashes.size)
        self.key_class = class_of(counts).astype(np.int8)
        n_classes = int(self.key_class.max()) + 1
        self.class_keys = np.bincount(self.key_class, minlength=n_classes)
        self.lows = bin_lows()
        self.stack = np.zeros((n_classes, N_BINS), dtype=np.int64)
        self.reuse = np.zeros((n_classes, N_BINS), dtype=np.int64)
        self.first = np.zeros(n_classes, dtype=np.int64)
        self.seen = 0
        if self.exact:
            self.state = new_stack(self.n_table)
            self.joint = np.zeros((1, 1, 1), dtype=np.int64)
        else:
            self.window = 0 if sampled_only else SHARDS_WINDOW
            self.near = np.zeros(max(self.window, 1), dtype=np.int64)
            self.far = np.zeros((SHARDS_GROUPS, N_BINS), dtype=np.int64)
            self.far_first = np.zeros(SHARDS_GROUPS, dtype=np.int64)
            self.shards = new_shards(self.n_table, self.window)

    def feed(self, hashes: NDArray) -> None:
        """The next references, in stream order (64-bit key hashes)."""
        first, second = self.stages()
        second(first(hashes))

    def stages(self) -> tuple[Callable[[NDArray], object], Callable[[object], None]]:
        """``feed`` as two steps, ``second(first(hashes))``, each a compiled pass that
        releases the GIL: a caller may run them on two threads, in chunk order each, the
        second a chunk behind (with SHARDS the window's pass over every reference, then the
        sample's over the sampled ones; the exact pass is all in ``first``)."""
        return self._first, self._second

    def _first(self, hashes: NDArray):
        from hotshard.profile._locality_kernels import lookup_ids, pass_chunk, window_chunk

        h = key_hashes(hashes)
        i0 = self.seen
        self.seen += int(h.size)
        if h.size == 0:
            return None
        if self.exact:
            ids = lookup_ids(h, self.table, self.shift)
            if int(ids.min()) < 0:
                raise ProfileError("locality: the stream holds a key its counts do not")
            self.state[-1] = pass_chunk(ids, i0, self.key_class, self.lows,
                                        BINS_PER_OCTAVE, 0, 1, self.stack, self.reuse,
                                        self.first, self.joint, *self.state)
            return None
        if self.window == 0:
            return h, i0, np.arange(h.size, dtype=np.int64), np.full(h.size, -1, np.int64), \
                h.size
        wstate, whash, table, wst = self.shards[:4]
        at = np.empty(h.size, dtype=np.int64)
        d = np.empty(h.size, dtype=np.int64)
        m = window_chunk(h, i0, self.threshold, self.window, self.near, wstate, whash, table,
                         wst, at, d)
        return h, i0, at, d, m

    def _second(self, sampled) -> None:
        from hotshard.profile._locality_kernels import sample_chunk

        if sampled is None:
            return
        h, i0, at, d, m = sampled
        sstate, sst = self.shards[4:]
        sample_chunk(h, i0, at, d, m, self.table, self.shift, self.key_class, self.lows,
                     BINS_PER_OCTAVE, self.window, self.rate, self.stack, self.reuse,
                     self.first, self.far, self.far_first, sstate, sst)

    def result(self) -> Locality:
        """The section of everything fed."""
        if self.seen == 0:
            raise ProfileError("locality: the stream is empty")
        lows = self.lows
        if self.exact:
            events = self.seen
            sizes, hits = _curve(np.cumsum(self.stack.sum(axis=0)).astype(np.float64),
                                 events, self.n_table, lows)
            return Locality(self.order, events, self.n_table,
                            _classes(self.stack, self.reuse, self.first, self.class_keys),
                            sizes, hits)
        events = self.events if self.sampled_only else self.seen
        hits_upto, n_keys = self._hits(self.far.sum(axis=0), int(self.far_first.sum()),
                                       self.rate, events)
        if self.n_keys is not None and self.sampled_only:
            n_keys = int(self.n_keys)
        sizes, hits = _curve(hits_upto, events, n_keys, lows)
        parts = []
        for g in range(SHARDS_GROUPS):
            if self.far[g].sum() + self.far_first[g] == 0:
                continue
            part, _ = self._hits(self.far[g], int(self.far_first[g]),
                                 self.rate / SHARDS_GROUPS, events)
            parts.append(_curve(part, events, n_keys, lows)[1])
        error = (float((np.std(parts, axis=0, ddof=1) / math.sqrt(len(parts))).max())
                 if len(parts) > 1 else 1.0)
        n_classes = self.class_keys.size
        per_class = np.rint(np.bincount(self.key_class, minlength=n_classes) * n_keys
                            / max(self.n_table, 1)).astype(np.int64)
        return Locality(self.order, events, n_keys,
                        _classes(self.stack, self.reuse, self.first, per_class), sizes,
                        np.maximum.accumulate(hits), self.rate, min(error, 1.0))

    def _hits(self, far: NDArray[np.int64], far_first: int, rate: float, events: int
              ) -> tuple[NDArray[np.float64], int]:
        """(hits_upto, estimated keys) from the sampled references beyond the window."""
        if self.sampled_only:
            # SHARDS-adj: the sample should hold R of the references; a few hot keys decide
            # how many it does, and the difference is put at the smallest distance
            expected = events * rate
            counted = float(far.sum() + far_first)
            hits_upto = (np.cumsum(far).astype(np.float64) + (expected - counted)) / rate
            return np.clip(hits_upto, 0.0, events), max(int(round(far_first / rate)), 1)
        # hits below the window: exact, for every reference; beyond it, the window's misses
        # (exactly known) split as the sample's misses are: by estimated distance, and first
        # references (so the key count, exact when the window never overflows)
        near_bins = np.bincount(_bins_of(np.arange(1, SHARDS_WINDOW + 1), self.lows),
                                weights=self.near, minlength=N_BINS)
        misses = events - float(self.near.sum())
        far_total = float(far.sum() + far_first)
        share = np.cumsum(far) / far_total if far_total > 0 else np.zeros(N_BINS)
        hits_upto = np.cumsum(near_bins) + misses * share
        n_keys = max(int(round(misses * far_first / far_total)) if far_total > 0 else 1, 1)
        return hits_upto, n_keys


def _bins_of(values: NDArray[np.int64], lows: NDArray[np.int64]) -> NDArray[np.int64]:
    """Bin of each integer value >= 1 (the last b with lows[b] <= value)."""
    return np.searchsorted(lows, values, side="right") - 1
