"""The key-frequency profile (format ``hotshard.profile/1``): model, validation, JSON, scaling.

A profile holds counts per key and nothing else of the events: the head (most frequent keys,
exact counts), the tail as a fitted discrete power law plus its count-of-counts histogram, and
optional per-operation distributions, payload-size quantiles and rates. It is validated on load
with errors that name the offending field (read with the field readers observations use too,
``hotshard._validate``; the format's JSON Schema is ``hotshard/schemas/profile.schema.json``),
and it stays small (log-binned histogram) whatever the input size.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hotshard._validate import MAX_INT, Fields, at, got, item, number_rule, show
from hotshard.errors import ProfileError
from hotshard.profile import KEY_SCALINGS, MAX_KEYS
from hotshard.profile.arrivals import ArrivalModel
from hotshard.profile.locality import Locality
from hotshard.profile.placement import PlacementRecord, parse_placement
from hotshard.profile.timelines import Timelines

__all__ = ["DEFAULT_OPS", "FORMAT", "KEY_SCALINGS", "KeyDistribution", "Profile", "ProfileError",
           "TailModel", "bin_tail"]

# the largest payload a profile's sizes may name (a chat message, not a file)
MAX_PAYLOAD_BYTES = 16 * 1024 * 1024
FORMAT = "hotshard.profile/1"
# Count values up to this are kept exactly in the tail histogram; above, log bins.
EXACT_LIMIT = 1024
BINS_PER_DECADE = 16
# A chat-history service mostly reads history: the mix assumed when a profile records none.
DEFAULT_OPS = {"read": 0.9, "write": 0.1}


@dataclass(frozen=True)
class TailModel:
    """Keys outside the head: counts only, as a count-of-counts histogram plus a fitted law.

    ``values[i]`` is a per-key count seen exactly, ``keys[i]`` how many tail keys had it.
    Counts above ``EXACT_LIMIT`` are log-binned: ``bin_keys[j]`` keys with counts in
    [bin_lo[j], bin_hi[j]) carrying ``bin_events[j]`` events in all.
    """

    keys: float
    events: float
    values: NDArray[np.float64]
    value_keys: NDArray[np.float64]
    bin_lo: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    bin_hi: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    bin_keys: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    bin_events: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    power_law: dict[str, Any] | None = None

    def to_dict(self) -> dict:
        hist: dict[str, Any] = {"values": _num_list(self.values),
                                "keys": _num_list(self.value_keys)}
        if self.bin_lo.size:
            hist["bins"] = {
                "lo": _num_list(self.bin_lo),
                "hi": _num_list(self.bin_hi),
                "keys": _num_list(self.bin_keys),
                "events": _num_list(self.bin_events),
            }
        return {
            "keys": _num(self.keys),
            "events": _num(self.events),
            "power_law": self.power_law,
            "histogram": hist,
        }

    def classes(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(per-key count, number of keys) classes; a bin counts as its mean count per key."""
        means = np.divide(self.bin_events, self.bin_keys, out=np.zeros_like(self.bin_events),
                          where=self.bin_keys > 0)
        return (np.concatenate([self.values, means]),
                np.concatenate([self.value_keys, self.bin_keys]))


@dataclass(frozen=True)
class KeyDistribution:
    """One key-frequency distribution: totals, the head exactly, the tail as a model."""

    events: float
    keys: float
    head_keys: tuple[str, ...]
    head_counts: NDArray[np.float64]
    tail: TailModel

    def to_dict(self) -> dict:
        return {
            "totals": {"events": _num(self.events), "keys": _num(self.keys)},
            "head": {"keys": list(self.head_keys), "counts": _num_list(self.head_counts)},
            "tail": self.tail.to_dict(),
        }

    def popularity(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(count per key, number of such keys) for every class with keys and events: the head
        one key each, then the tail classes, most frequent first. What a cache model or a
        top-k share needs, without the keys' names."""
        counts, keys = self.tail.classes()
        order = np.argsort(counts)[::-1]
        all_counts = np.concatenate([self.head_counts, counts[order]])
        all_keys = np.concatenate([np.ones(self.head_counts.size), keys[order]])
        keep = (all_counts > 0) & (all_keys > 0)
        return all_counts[keep], all_keys[keep]

    def top_share(self, k: float) -> float:
        """Share of all events carried by the ``k`` most frequent keys (k may be fractional)."""
        counts, keys = self.popularity()
        return _top_share(counts, keys, k, self.events)

    def shares(self) -> dict[str, float]:
        """Top-1, top-10 and top-1%-of-keys shares of all events (computed, head and tail)."""
        return {"top1": self.top_share(1), "top10": self.top_share(10),
                "top1pct": self.top_share(max(1.0, 0.01 * self.keys))}


def _top_share(counts, keys, k: float, total: float) -> float:
    if total <= 0:
        return 0.0
    cum_keys = np.cumsum(keys)
    idx = int(np.searchsorted(cum_keys, k))
    taken = float(np.dot(counts[:idx], keys[:idx]))
    if idx < counts.size:
        before = cum_keys[idx - 1] if idx else 0.0
        taken += counts[idx] * (k - before)
    return min(1.0, taken / total)


@dataclass(frozen=True)
class Profile:
    """A ``hotshard.profile/1`` document. Build with ``from_dict``/``load``; never mutated."""

    source: dict[str, Any]
    dist: KeyDistribution
    privacy: dict[str, Any] = field(default_factory=lambda: {"min_count": 1,
                                                              "pseudonymized": False})
    placement: dict[str, PlacementRecord] = field(default_factory=dict)
    operations: dict[str, KeyDistribution] = field(default_factory=dict)
    sizes: dict[str, Any] | None = None
    rate: dict[str, Any] | None = None
    locality: Locality | None = None
    arrivals: ArrivalModel | None = None
    timelines: Timelines | None = None

    # -- convenience views ------------------------------------------------------------------
    @property
    def events(self) -> float:
        return self.dist.events

    @property
    def keys(self) -> float:
        return self.dist.keys

    @property
    def head_keys(self) -> tuple[str, ...]:
        return self.dist.head_keys

    @property
    def head_counts(self) -> NDArray[np.float64]:
        return self.dist.head_counts

    @property
    def tail(self) -> TailModel:
        return self.dist.tail

    @property
    def integer_column(self) -> bool:
        """Whether the key column was an integer column when profiled (the format's
        ``source.key_type`` ``"int64"``; ``"string"`` otherwise): a generator writes such keys
        as int64 IDs. The format's two words are read here and nowhere else."""
        return self.source.get("key_type") == "int64"

    @property
    def integer_keys(self) -> bool:
        """Whether the keys are integers: an integer key column, or (when the profile does not
        say) head keys that are all decimal 64-bit integers. Stores that type keys place such
        keys as 8-byte integers (``hotshard.shards.resolve_key_type``)."""
        from hotshard.profile import keys_look_integer

        kind = self.source.get("key_type")
        if kind is not None:
            return kind == "int64"
        return keys_look_integer(self.head_keys)

    # -- serialisation ----------------------------------------------------------------------
    def to_dict(self) -> dict:
        out: dict[str, Any] = {"format": FORMAT, "source": self.source, **self.dist.to_dict(),
                               "privacy": self.privacy}
        if self.placement:
            out["placement"] = {spec: rec.to_dict() for spec, rec in self.placement.items()}
        if self.operations:
            out["operations"] = {op: d.to_dict() for op, d in self.operations.items()}
        if self.sizes is not None:
            out["sizes"] = self.sizes
        if self.rate is not None:
            out["rate"] = self.rate
        if self.locality is not None:
            out["locality"] = self.locality.to_dict()
        if self.arrivals is not None:
            out["arrivals"] = self.arrivals.to_dict()
        if self.timelines is not None:
            out["timelines"] = self.timelines.to_dict()
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically: a failure never leaves a half-written profile."""
        from hotshard._atomic import atomic_write

        with atomic_write(path) as handle:
            handle.write(self.to_json())
            handle.write("\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Profile:
        from hotshard._files import require_file

        p = require_file(path, what="profile", error=ProfileError)
        try:
            with p.open("rb") as handle:
                head = handle.read(_SNIFF_BYTES)
                _reject_binary(path, head)  # before reading a large table whole
                data = head + handle.read()
        except OSError as exc:
            raise ProfileError(f"cannot read {path}: {exc.strerror}") from None
        text = data.decode("utf-8-sig", errors="replace")
        if not text.strip():
            raise ProfileError(f"{path} is empty: not a profile")
        from hotshard._http import json_depth_ok

        if not json_depth_ok(text):
            raise ProfileError(f"{path}: nested deeper than any profile is (a hostile or "
                               "broken file): not a profile")
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ProfileError(_not_json(path, text, exc)) from None
        try:
            return cls.from_dict(doc)
        except ProfileError as exc:
            raise ProfileError(f"{path}: {exc.template}") from None

    @classmethod
    def from_dict(cls, doc: Any) -> Profile:
        """Validate a decoded document (schema and consistency) and build the profile."""
        if not isinstance(doc, dict):
            raise ProfileError(f"not a hotshard profile: a profile is a JSON object, "
                               f"{got(doc)} (write one with hotshard profile)")
        if "format" not in doc:
            raise ProfileError("not a hotshard profile (it has no format field): write one "
                               "from event data with hotshard profile")
        fmt = doc["format"]
        if fmt != FORMAT:
            if isinstance(fmt, str) and fmt.startswith("hotshard.observations/"):
                raise ProfileError("this is an observations file (hotshard.observations/1), not "
                                   "a profile: pass it as observations (OBS, ${baseline}), and a "
                                   "profile from hotshard profile here")
            raise ProfileError(
                f"format is {show(fmt)}; this hotshard reads {FORMAT!r} (re-run hotshard profile)"
            )
        source = _object(doc, "source", "")
        privacy = _F.mapping(doc.get("privacy", {"min_count": 1, "pseudonymized": False}),
                             "privacy")
        dist = _parse_dist(doc, "")
        if source.get("key_type") == "int64" or (source.get("key_type") is None and all(
                k.lstrip("-").isdigit() and k.isascii() for k in dist.head_keys)):
            _check_integer_keys(dist.head_keys, "head")
        min_count = _F.number(privacy.get("min_count", 1), "privacy.min_count", low=1)
        _F.flag(privacy.get("pseudonymized", False), "privacy.pseudonymized")
        if dist.head_counts.size and dist.head_counts.min() < min_count and not source.get(
                "scaled"):
            raise ProfileError(
                f"head.counts holds a count below privacy.min_count ({min_count})"
            )
        ops_doc = _F.mapping(doc.get("operations", {}) or {}, "operations",
                             "an object of op -> distribution")
        operations = {str(op): _parse_dist(d, f"operations.{op}") for op, d in ops_doc.items()}
        if doc.get("sizes") is not None:
            _check_sizes(doc["sizes"])
        if doc.get("rate") is not None:
            _check_rate(doc["rate"])
        head_sizes = {None: len(dist.head_keys),
                      **{op: len(d.head_keys) for op, d in operations.items()}}
        placement = parse_placement(doc.get("placement"), head_sizes,
                                    bool(privacy.get("pseudonymized")))
        locality = None
        if doc.get("locality") is not None:
            locality = Locality.from_dict(doc["locality"])
            if not source.get("scaled") and abs(locality.events - dist.events) > 0.5:
                raise ProfileError(f"locality.events ({locality.events}) disagrees with the "
                                   f"profile's events ({_num(dist.events)}): the sections "
                                   "describe different streams; re-run hotshard profile")
        arrivals = None
        if doc.get("arrivals") is not None:
            arrivals = ArrivalModel.from_dict(doc["arrivals"])
            if not source.get("scaled") and arrivals.events > dist.events + 0.5:
                raise ProfileError(f"arrivals.counts hold {arrivals.events} requests but the "
                                   f"profile {_num(dist.events)}: the sections describe "
                                   "different streams; re-run hotshard profile")
        timelines = None
        if doc.get("timelines") is not None:
            timelines = Timelines.from_dict(doc["timelines"])
            if timelines.counts.shape[0] != len(dist.head_keys):
                raise ProfileError(f"timelines hold {timelines.counts.shape[0]} keys but the "
                                   f"head {len(dist.head_keys)}: one timeline per head key, "
                                   "in head order")
            # a request without a usable time (empty, NaN, infinite) is counted in head.counts
            # and in no window: a key's windows add up to its count or less, never more
            if not source.get("scaled") and np.any(
                    timelines.counts.sum(axis=1) > dist.head_counts + 0.5):
                raise ProfileError("timelines disagree with head.counts: a head key's windows "
                                   "hold more requests than its count")
            if arrivals is not None and not source.get("scaled"):
                _detail_agrees(timelines, arrivals)
            for j, d in enumerate(timelines.detail):
                if d.totals.sum() > dist.events + 0.5:
                    raise ProfileError(f"timelines.detail[{j}].totals hold {d.totals.sum():,} "
                                       f"requests, more than the profile's "
                                       f"{dist.events:,.0f}: they count every request in "
                                       "their sub-windows, once")
        return cls(source=source, dist=dist, privacy=privacy,
                   placement=placement, operations=operations,
                   sizes=doc.get("sizes"), rate=doc.get("rate"), locality=locality,
                   arrivals=arrivals, timelines=timelines)

    # -- scaling ----------------------------------------------------------------------------
    def scaled(self, *, events: float | None = None, keys: float | None = None,
               key_scaling: str = "dilute") -> Profile:
        """The same workload shape at another size.

        ``keys`` changes the number of distinct keys; head keys always stay. How the tail
        grows is ``key_scaling``:

        - ``"dilute"`` (default): every head key keeps its share and the tail keeps its share
          of events, spread over more, rarer tail keys (every tail count class gets ``g``
          times the keys at ``1/g`` the count). The hot channels stay hot: this is what a
          bigger key space with the same audience looks like.
        - ``"extend"``: new tail keys are as popular as the old ones (every class gets ``g``
          times the keys at the same count), so the tail's share grows and the head's shrinks;
          at a thousand times the keys the head all but vanishes.

        ``events`` multiplies every count so the total is ``events``, keeping every key's
        share. Scaled counts are expected counts (not necessarily integers).
        """
        if key_scaling not in KEY_SCALINGS:
            raise ProfileError(f"key_scaling must be one of {', '.join(KEY_SCALINGS)}, "
                               f"got {key_scaling!r}")
        dist = _scale_dist(self.dist, events, keys, key_scaling)
        ops = {}
        for op, d in self.operations.items():
            share = d.events / self.events if self.events else 0.0
            ops[op] = _scale_dist(d, None if events is None else events * share,
                                  None if keys is None else keys * d.keys / self.keys,
                                  key_scaling)
        scaled = {"events": events, "keys": keys}
        if keys is not None:
            scaled["key_scaling"] = key_scaling
        return replace(self, dist=dist, operations=ops, source={**self.source, "scaled": scaled})



def _scale_dist(d: KeyDistribution, events: float | None, keys: float | None,
                key_scaling: str = "dilute") -> KeyDistribution:
    if events is not None and events <= 0:
        raise ProfileError(f"events must be > 0, got {events}")
    if keys is not None and not keys <= MAX_KEYS:
        raise ProfileError(f"keys must be at most {MAX_KEYS:.0e} (64-bit key IDs stay exact "
                           f"below that), got {keys:.3g}")
    if keys is not None and keys < len(d.head_keys):
        raise ProfileError(
            f"keys must be at least the {len(d.head_keys)} head keys, got {keys}"
        )
    tail = d.tail
    g = 1.0  # tail keys multiply by g
    per_key = 1.0  # each tail key's count multiplies by this
    if keys is not None and tail.keys > 0:
        if key_scaling == "dilute" and keys <= len(d.head_keys):
            raise ProfileError(f"keys must be more than the {len(d.head_keys)} head keys: the "
                               "tail keeps its share of events and needs keys to carry it")
        g = (keys - len(d.head_keys)) / tail.keys
        per_key = 1.0 / g if key_scaling == "dilute" else 1.0
        tail = replace(tail, keys=tail.keys * g, events=tail.events * g * per_key,
                       values=tail.values * per_key, value_keys=tail.value_keys * g,
                       bin_lo=tail.bin_lo * per_key, bin_hi=tail.bin_hi * per_key,
                       bin_keys=tail.bin_keys * g, bin_events=tail.bin_events * g * per_key)
    head_events = float(d.head_counts.sum())
    total = head_events + tail.events
    f = 1.0 if events is None or total == 0 else events / total
    pl = tail.power_law
    if pl is not None:  # the law was fitted on unscaled counts: record how to map it
        pl = {**pl, "count_scale": pl.get("count_scale", 1.0) * f * per_key,
              "key_scale": pl.get("key_scale", 1.0) * g,
              "head_scale": pl.get("head_scale", 1.0) * f}
    tail = replace(tail, events=tail.events * f, values=tail.values * f,
                   bin_lo=tail.bin_lo * f, bin_hi=tail.bin_hi * f, bin_events=tail.bin_events * f,
                   power_law=pl)
    return KeyDistribution(events=total * f, keys=len(d.head_keys) + tail.keys,
                           head_keys=d.head_keys, head_counts=d.head_counts * f, tail=tail)


# -- building from exact counts ------------------------------------------------------------
def bin_tail(values: NDArray, keys: NDArray, power_law: dict | None) -> TailModel:
    """Tail model from exact count-of-counts: values up to EXACT_LIMIT kept, the rest log-binned."""
    values = np.asarray(values, dtype=np.float64)
    keys = np.asarray(keys, dtype=np.float64)
    order = np.argsort(values)
    values, keys = values[order], keys[order]
    exact = values <= EXACT_LIMIT
    big_v, big_k = values[~exact], keys[~exact]
    lo = hi = bk = be = np.zeros(0)
    if big_v.size:
        idx = np.floor(np.log10(big_v) * BINS_PER_DECADE).astype(np.int64)
        uniq, inverse = np.unique(idx, return_inverse=True)
        edges_lo = np.floor(10.0 ** (uniq / BINS_PER_DECADE))
        edges_hi = np.floor(10.0 ** ((uniq + 1) / BINS_PER_DECADE))
        # make edges consistent with the members (floating log10 at exact powers)
        lo = np.minimum(edges_lo, np.array([big_v[inverse == i].min() for i in range(uniq.size)]))
        hi = np.maximum(edges_hi, np.array([big_v[inverse == i].max() + 1
                                            for i in range(uniq.size)]))
        bk = np.bincount(inverse, weights=big_k)
        be = np.bincount(inverse, weights=big_k * big_v)
    return TailModel(
        keys=float(keys.sum()),
        events=float(np.dot(values, keys)),
        values=values[exact],
        value_keys=keys[exact],
        bin_lo=lo, bin_hi=hi, bin_keys=bk, bin_events=be,
        power_law=power_law,
    )


# -- parsing helpers -----------------------------------------------------------------------
def _detail_agrees(timelines: Timelines, arrivals: ArrivalModel) -> None:
    """Each event detail's requests per window against the arrivals' count over the same
    window (both from the profile's first request): they may differ only by where an arrival
    bin straddles a window edge, at most a bin's requests at each edge."""
    step = timelines.seconds / timelines.windows
    slack = 2.0 * float(arrivals.counts.max()) + 1.0 if arrivals.counts.size else 1.0
    for j, d in enumerate(timelines.detail):
        span = d.counts.size // d.bins_per_window
        per_window = d.totals.reshape(span, d.bins_per_window).sum(axis=1)
        edges = (d.from_window + np.arange(span + 1)) * step
        expected = arrivals.requests_between(edges)
        if np.any(np.abs(per_window - expected) > slack):
            w = int(np.argmax(np.abs(per_window - expected)))
            raise ProfileError(f"timelines.detail[{j}].totals hold {int(per_window[w]):,} "
                               f"requests in window {d.from_window + w} where the arrivals "
                               f"count {expected[w]:,.0f}: they count every request of their "
                               "sub-windows, as the arrivals do")


def _num(v: float) -> int | float:
    return int(v) if float(v).is_integer() and abs(v) < 2**63 else float(v)


def _num_list(arr) -> list:
    arr = np.asarray(arr, dtype=np.float64)
    if arr.size and np.all(arr == np.floor(arr)) and np.all(np.abs(arr) < 2**53):
        return arr.astype(np.int64).tolist()
    return arr.tolist()


# -- loading: what a file that is no profile is, and what to do -----------------------------
_SNIFF_BYTES = 4096
_EVENT_INPUT = "Parquet, CSV and JSON-lines event files are input for hotshard profile, " \
               "which makes one"


def _reject_binary(path: str | os.PathLike[str], head: bytes) -> None:
    """Refuse a binary file from its first bytes, naming what it is (Parquet, gzip)."""
    if head.startswith(b"PAR1"):
        raise ProfileError(f"{path} is a Parquet file, not a profile (JSON expected): "
                           + _EVENT_INPUT)
    if head.startswith(b"\x1f\x8b"):
        raise ProfileError(f"{path} is gzip-compressed, not a profile (plain JSON expected): "
                           "decompress it if it holds one; .csv.gz and .jsonl.gz event files "
                           "are input for hotshard profile, which makes one")
    if b"\x00" in head:
        raise ProfileError(f"{path} is a binary file, not a profile (JSON expected): "
                           + _EVENT_INPUT)


def _not_json(path: str | os.PathLike[str], text: str, exc: json.JSONDecodeError) -> str:
    """The message for text that does not decode: JSON lines, a damaged profile, or a table."""
    first = text.lstrip()[:1]
    if first == "{" and exc.msg == "Extra data":
        return f"{path} holds JSON lines (one object a line), not a profile: " + _EVENT_INPUT
    if first in ("{", "["):
        return (f"{path} is not valid JSON (line {exc.lineno}: {exc.msg}): a damaged profile? "
                "write it again with hotshard profile")
    return (f"{path} is not a profile (JSON expected; line {exc.lineno}: {exc.msg}): "
            + _EVENT_INPUT)


# -- validation: the shared typed readers; every message names the field path ------------------
_F = Fields(ProfileError)


def _number(doc: Mapping[str, Any], key: str, where: str, *, low: float,
            strict: bool = False, missing: str | None = None) -> float:
    """``doc[key]`` as a finite number >= low (> low if strict); missing and wrong say which."""
    rule = number_rule(low, strict)
    if key not in doc:
        raise _F.missing(at(where, key), missing or f"add it ({rule})")
    return float(_F.number(doc[key], at(where, key), low=low, strict=strict))


def _numbers(doc: Mapping[str, Any], key: str, where: str, *,
             positive: bool = False) -> NDArray[np.float64]:
    """The required list ``doc[key]`` of finite numbers >= 0 (> 0 if positive)."""
    values = _F.required(doc, key, where, lambda v, path: _F.numbers(v, path, strict=positive),
                         "a list of numbers")
    return np.asarray(values, dtype=np.float64)


def _object(doc: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    return _F.required(doc, key, where, _F.mapping, "an object")


def _check_integer_keys(keys: Sequence[str], where: str) -> None:
    """In a profile of integer keys (its key type, or head keys all decimal integers) every
    key is a 64-bit key ID wherever it is used (placed as 8-byte integers by the stores that
    type keys): one beyond that range cannot be one."""
    for i, key in enumerate(keys):
        text = key.lstrip("-")
        if text.isdigit() and text.isascii() and not -(2**63) <= int(key) < 2**63:
            raise _F.fail(item(f"{where}.keys", i),
                          f"is an integer beyond 64 bits ({key[:24]}...): integer key IDs are "
                          "64-bit; write it as text with a non-digit, or profile the column "
                          "as text")


def _check_sizes(doc: Any) -> None:
    """``sizes``: ``quantiles`` (probability -> payload bytes), probabilities in (0, 1],
    sizes from 1 byte to 16 MB, not decreasing with the probability."""
    _F.mapping(doc, "sizes", "an object or null")
    quantiles = doc.get("quantiles")
    if quantiles is None:
        return
    _F.mapping(quantiles, "sizes.quantiles", "an object of probability -> bytes")
    points = []
    for q, size in quantiles.items():
        try:
            p = float(q)
        except ValueError:
            raise _F.fail(f"sizes.quantiles.{q}", "must be named by a probability in (0, 1], "
                          f"got {show(q)}") from None
        if not (math.isfinite(p) and 0 < p <= 1):
            raise _F.fail(f"sizes.quantiles.{q}", "must be named by a probability in (0, 1]")
        points.append((p, float(_F.number(size, f"sizes.quantiles.{q}", low=1))))
        if points[-1][1] > MAX_PAYLOAD_BYTES:
            raise _F.fail(f"sizes.quantiles.{q}", f"must be at most {MAX_PAYLOAD_BYTES:,} "
                          f"bytes, got {_num(points[-1][1])}")
    points.sort()
    if any(b[1] < a[1] for a, b in zip(points, points[1:], strict=False)):
        raise _F.fail("sizes.quantiles", "must not decrease as the probability grows")


def _check_rate(doc: Any) -> None:
    """``rate``: requests per second (``mean_rps``, ``p99_rps``, ``peak_rps``) and the span
    in ``seconds``, finite and >= 0, the mean > 0 (a hand-scaled profile may change the mean
    alone: the peak is not held to it)."""
    _F.mapping(doc, "rate", "an object or null")
    values = {}
    for name in ("mean_rps", "p99_rps", "peak_rps", "seconds"):
        if doc.get(name) is not None:
            values[name] = float(_F.number(doc[name], f"rate.{name}", low=0))
    if "mean_rps" not in values:
        raise _F.missing("rate.mean_rps", "add it (requests per second, > 0), or set rate to "
                                          "null")
    if values["mean_rps"] <= 0:
        raise _F.fail("rate.mean_rps", f"must be > 0, got {_num(values['mean_rps'])}")


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def _parse_dist(doc: Any, where: str) -> KeyDistribution:
    _F.mapping(doc, where)
    totals = _object(doc, "totals", where)
    head = _object(doc, "head", where)
    tail = _object(doc, "tail", where)
    total_events = _number(totals, "events", at(where, "totals"), low=0)
    total_keys = _number(totals, "keys", at(where, "totals"), low=0)
    head_at = at(where, "head")
    keys = _F.required(head, "keys", head_at, _F.array, "a list of strings")
    counts = _numbers(head, "counts", head_at, positive=True)
    for i, k in enumerate(keys):
        if not isinstance(k, str):
            _F.string(k, item(f"{head_at}.keys", i))
    if len(keys) != counts.size:
        raise _F.fail(head_at, f"has {len(keys)} keys but {counts.size} counts")
    if len(set(keys)) != len(keys):
        raise _F.fail(f"{head_at}.keys", "holds a key twice")
    if counts.size > 1 and np.any(np.diff(counts) > 0):
        raise _F.fail(f"{head_at}.counts", "must be sorted, most frequent first")
    tail_model = _parse_tail(tail, at(where, "tail"))
    for name, value in (("totals.events", total_events), ("totals.keys", total_keys),
                        ("head.counts", float(counts.max()) if counts.size else 0.0),
                        ("tail.events", tail_model.events), ("tail.keys", tail_model.keys)):
        if value >= MAX_INT:   # a count of requests or keys is a 64-bit integer
            raise _F.fail(at(where, name), f"must be below 2^63 (a count), got {_num(value)}")
    dist = KeyDistribution(total_events, total_keys, tuple(keys), counts, tail_model)
    if not _close(dist.events, float(counts.sum()) + tail_model.events):
        raise _F.fail(at(where, "totals.events"),
                      f"({_num(dist.events)}) != head counts + tail.events "
                      f"({_num(float(counts.sum()) + tail_model.events)})")
    if not _close(dist.keys, len(keys) + tail_model.keys):
        raise _F.fail(at(where, "totals.keys"),
                      f"({_num(dist.keys)}) != head keys + tail.keys "
                      f"({_num(len(keys) + tail_model.keys)})")
    return dist


# Optional numbers of a power_law and their floors: the fit's standard error, KS distance,
# tail size and largest count; the factors scaling records.
_OPTIONAL_LAW_FIELDS = (("alpha_se", 0), ("ks", 0), ("n_tail", 0), ("xmax", 1),
                        ("count_scale", 0), ("key_scale", 0), ("head_scale", 0))


def _parse_tail(tail: Mapping[str, Any], where: str) -> TailModel:
    tail_events = _number(tail, "events", where, low=0)
    tail_keys = _number(tail, "keys", where, low=0)
    hist_at = f"{where}.histogram"
    hist = _object(tail, "histogram", where)
    values = _numbers(hist, "values", hist_at, positive=True)
    vkeys = _numbers(hist, "keys", hist_at)
    if values.size != vkeys.size:
        raise _F.fail(hist_at, f"has {values.size} values but {vkeys.size} keys")
    arrays = {}
    bins = hist.get("bins")
    if bins is not None:
        _F.mapping(bins, f"{hist_at}.bins", "an object or null")
        for name in ("lo", "hi", "keys", "events"):
            arrays[name] = _numbers(bins, name, f"{hist_at}.bins")
        if len({a.size for a in arrays.values()}) != 1:
            raise _F.fail(f"{hist_at}.bins", "lists differ in length")
        if np.any(arrays["hi"] <= arrays["lo"]):
            raise _F.fail(f"{hist_at}.bins:", "every hi must exceed its lo")
    pl = tail.get("power_law")
    if pl is not None:
        law_at = f"{where}.power_law"
        _F.mapping(pl, law_at, "an object or null")
        for key, low, strict in (("alpha", 1, True), ("xmin", 1, False)):
            _number(pl, key, law_at, low=low, strict=strict,
                    missing=f"add it ({number_rule(low, strict)}), or set {law_at} to null to "
                            "generate from the histogram alone")
        for key, low in _OPTIONAL_LAW_FIELDS:  # written by the fit or by scaling; null is absent
            if pl.get(key) is not None:
                _number(pl, key, law_at, low=low)
    model = TailModel(
        keys=tail_keys, events=tail_events, values=values, value_keys=vkeys,
        bin_lo=arrays.get("lo", np.zeros(0)), bin_hi=arrays.get("hi", np.zeros(0)),
        bin_keys=arrays.get("keys", np.zeros(0)), bin_events=arrays.get("events", np.zeros(0)),
        power_law=pl,
    )
    with np.errstate(over="ignore"):
        hist_keys = float(vkeys.sum() + model.bin_keys.sum())
        hist_events = float(np.dot(values, vkeys) + model.bin_events.sum())
    if not (math.isfinite(hist_keys) and math.isfinite(hist_events)):
        raise _F.fail(hist_at, "adds up past any count: its values and keys must be counts "
                               "below 2^63")
    if not _close(hist_keys, model.keys):
        raise _F.fail(hist_at, f"holds {_num(hist_keys)} keys, but {where}.keys is "
                               f"{_num(model.keys)}")
    if not _close(hist_events, model.events):
        raise _F.fail(hist_at, f"holds {_num(hist_events)} events, but {where}.events is "
                               f"{_num(model.events)}")
    return model
