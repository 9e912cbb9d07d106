"""What a profile says, in numbers an engineer reads first: shares, tail, warnings."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from hotshard._format import pct
from hotshard.profile.document import Profile

__all__ = ["ProfileSummary", "summarize"]

# The top 1% of keys carrying less than twice their fair share: no key stands out.
NEAR_UNIFORM_TOP1PCT_RATIO = 2.0
# KS distance above which one power law does not describe the tail.
POOR_FIT_KS = 0.1


@dataclass(frozen=True)
class ProfileSummary:
    events: float
    keys: float
    head_keys: int
    head_share: float
    top1_share: float
    top10_share: float
    top1pct_share: float
    top1pct_vs_uniform: float
    tail_alpha: float | None
    tail_alpha_se: float | None
    tail_xmin: float | None
    tail_ks: float | None
    fit_quality: str
    operations: dict[str, dict[str, float]]
    rate: dict | None
    sizes: dict | None
    warnings: tuple[str, ...]
    # the measured LRU hit rate at 0.1%, 1%, 5% and 20% of the distinct keys, and the order
    # it was measured in; None when the profile has no locality section
    lru_hits: dict[str, float] | None = None
    locality_order: str | None = None
    # the top head keys' requests per timeline window (key, counts), when the profile has them
    timelines: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def to_dict(self) -> dict:
        """JSON-ready: whole counts as integers, an undefined ratio as None (null)."""
        out = asdict(self)
        out["events"], out["keys"] = _count(self.events), _count(self.keys)
        out["operations"] = {op: {**d, "events": _count(d["events"]), "keys": _count(d["keys"])}
                             for op, d in self.operations.items()}
        if math.isnan(self.top1pct_vs_uniform):
            out["top1pct_vs_uniform"] = None
        out["warnings"] = list(self.warnings)
        return out


def _count(x: float) -> int | float:
    """A count as an int when whole (a scaled profile's expected counts may not be)."""
    return int(x) if float(x).is_integer() else float(x)


def _fit_quality(law: dict) -> str:
    if not law:
        return "no power-law fit (histogram only)"
    ks = law.get("ks")
    if ks is None:
        return "quality unknown (the profile records no KS distance)"
    if ks <= 0.02:
        return "good"
    if ks <= POOR_FIT_KS:
        return "fair"
    return "poor"


TIMELINE_KEYS = 5  # the head keys whose timelines inspect shows


def summarize(profile: Profile) -> ProfileSummary:
    """Compute the summary `hotshard inspect` shows."""
    dist = profile.dist
    shares = dist.shares()
    pl = dist.tail.power_law or {}
    ratio = shares["top1pct"] / 0.01 if dist.keys >= 100 else float("nan")
    warnings = []
    if dist.keys >= 100 and ratio < NEAR_UNIFORM_TOP1PCT_RATIO:
        warnings.append(
            f"no semantic hot spot: the top 1% of keys carry {pct(shares['top1pct'])} of events "
            f"({ratio:.1f}x their fair share); uniform keys would be fine here"
        )
    ks = pl.get("ks")
    if ks is not None and ks > POOR_FIT_KS:
        warnings.append(
            f"one power law fits the tail poorly (KS {ks:.2f}): generate from the exact "
            "histogram (tail model: histogram)"
        )
    n_tail = pl.get("n_tail")
    if n_tail is not None and n_tail < 50:
        warnings.append(f"the power-law tail rests on only {_count(n_tail)} keys")
    if len(dist.head_keys) == 0:
        warnings.append("the head is empty: no key reached privacy.min_count")
    ops = {op: {"events": d.events, "keys": d.keys,
                "share": d.events / dist.events if dist.events else 0.0,
                "top1_share": d.shares()["top1"]}
           for op, d in profile.operations.items()}
    lru, order = None, None
    if profile.locality is not None:
        loc = profile.locality
        lru = {f"{f:.1%}": round(loc.lru_hit_rate(max(1.0, f * loc.keys)), 4)
               for f in (0.001, 0.01, 0.05, 0.2)}
        order = loc.order
    else:
        warnings.append("no locality section: generate draws keys independently, so a cache "
                        "hits less often than in production (re-profile event rows to add it)")
    return ProfileSummary(
        events=dist.events, keys=dist.keys, head_keys=len(dist.head_keys),
        head_share=float(dist.head_counts.sum()) / dist.events if dist.events else 0.0,
        top1_share=shares["top1"], top10_share=shares["top10"], top1pct_share=shares["top1pct"],
        top1pct_vs_uniform=ratio,
        tail_alpha=pl.get("alpha"), tail_alpha_se=pl.get("alpha_se"), tail_xmin=pl.get("xmin"),
        tail_ks=ks, fit_quality=_fit_quality(pl), operations=ops, rate=profile.rate,
        sizes=(profile.sizes or {}).get("quantiles"), warnings=tuple(warnings),
        lru_hits=lru, locality_order=order,
        timelines=tuple((k, tuple(int(c) for c in row)) for k, row in zip(
            dist.head_keys[:TIMELINE_KEYS], profile.timelines.counts[:TIMELINE_KEYS],
            strict=False)) if profile.timelines is not None else (),
    )
