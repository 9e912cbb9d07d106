"""How production's hot spots moved between two profiles of one key space (``hotshard diff``).

``diff(a, b)`` compares two ``hotshard.profile/1`` profiles of the same keys (two days; a normal
day against an event): the keys that entered or left the head, the largest risers and fallers
by share of events, the drift of the tail exponent, the top-1 / top-10 / top-1% shares;
given a partitioner, how the hottest shard's share changed and which keys moved it; and, when
both profiles have head timelines, when each key was hot (``compare.window_drift``).
``to_dict`` is the JSON form; ``compare.diff_text.diff_table`` renders it for the terminal.

A profile names only its head keys. A key outside a profile's head is somewhere in its tail,
so its count there is unknown but at most the tail's largest count (never above the head's
smallest count): its share is shown as that bound (``<=``) and never silently as 0. Changes
computed with a bound are bounds too, and keys are ranked by them: a key that entered B's head
rose at least ``share_b - bound_a``; one that left fell at least ``share_a - bound_b``. When the
bound leaves the sign open (a key that left A's head with a share below B's floor may have
risen), the key's direction is ``unclear`` and it is ranked neither as a riser nor a faller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from hotshard._format import pct
from hotshard.compare.window_drift import WindowDrift, window_drift, window_notes
from hotshard.errors import InputError
from hotshard.profile.document import Profile

if TYPE_CHECKING:
    from hotshard.shards.partitioners import Partitioner

__all__ = ["DEFAULT_MOVERS", "DRIFT_SE", "KeyMove", "ProfileDiff", "ShardDrift", "ShardShift",
           "ShareChange", "TailDrift", "diff", "outside_bound"]

# Tail exponents differ significantly when further apart than this many combined standard
# errors: under a normal approximation of each MLE, 3 SE is a 0.3% false alarm rate.
DRIFT_SE = 3.0
# Risers and fallers listed, and keys named per hot shard.
DEFAULT_MOVERS = 10
SHARD_KEYS = 5
SHARES = (("top1", "top-1 key"), ("top10", "top-10 keys"), ("top1pct", "top-1% of keys"))

Status = Literal["stayed", "entered", "left", "outside"]
Direction = Literal["up", "down", "same", "unclear"]


@dataclass(frozen=True)
class KeyMove:
    """One key's share of events in A and in B.

    ``share_a`` is exact when ``exact_a``; otherwise the key is outside A's head and
    ``share_a`` is the most it can be (the same for B). ``rank_a`` is the key's 1-based rank in
    A's head, None outside it. ``status`` is relative to the top-K heads compared: ``stayed``
    (in both), ``entered`` (in B's only), ``left`` (in A's only), ``outside`` (in neither: a
    key named only for a hot shard).
    """

    key: str
    status: Status
    share_a: float
    share_b: float
    exact_a: bool
    exact_b: bool
    rank_a: int | None
    rank_b: int | None

    @property
    def change(self) -> float:
        """``share_b - share_a`` with a bound for an unknown share: the least rise when A's
        share is a bound, the least fall (an upper bound of the change) when B's is."""
        return self.share_b - self.share_a

    @property
    def direction(self) -> Direction:
        c = self.change
        if self.exact_a and self.exact_b:
            return "up" if c > 0 else "down" if c < 0 else "same"
        if not self.exact_a:  # the true change is >= c
            return "up" if c > 0 else "unclear"
        return "down" if c < 0 else "unclear"  # the true change is <= c

    @property
    def moved(self) -> float:
        """How far the key certainly moved, either way (0 when the direction is unclear)."""
        c = self.change
        if self.exact_a and self.exact_b:
            return abs(c)
        return max(c, 0.0) if not self.exact_a else max(-c, 0.0)

    def to_dict(self) -> dict:
        return {"key": self.key, "status": self.status,
                "share_a": self.share_a, "share_a_exact": self.exact_a, "rank_a": self.rank_a,
                "share_b": self.share_b, "share_b_exact": self.exact_b, "rank_b": self.rank_b,
                "change": self.change, "change_exact": self.exact_a and self.exact_b,
                "direction": self.direction}


@dataclass(frozen=True)
class ShareChange:
    """One concentration share (top-1, top-10, top-1% of keys) in A and B."""

    name: str
    label: str
    a: float
    b: float

    @property
    def change(self) -> float:
        return self.b - self.a

    def to_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "change": self.change}


@dataclass(frozen=True)
class TailDrift:
    """The fitted tail exponents (alpha +/- its standard error) of A and B and their gap.

    ``significant`` is whether ``|alpha_b - alpha_a|`` exceeds ``DRIFT_SE`` combined standard
    errors ``sqrt(se_a^2 + se_b^2)`` (the two fits are independent); None when a profile has
    no fitted law or no standard error.
    """

    alpha_a: float | None
    alpha_se_a: float | None
    xmin_a: float | None
    alpha_b: float | None
    alpha_se_b: float | None
    xmin_b: float | None
    note: str | None = None

    @property
    def change(self) -> float | None:
        if self.alpha_a is None or self.alpha_b is None:
            return None
        return self.alpha_b - self.alpha_a

    @property
    def se(self) -> float | None:
        if self.change is None or self.alpha_se_a is None or self.alpha_se_b is None:
            return None
        return math.hypot(self.alpha_se_a, self.alpha_se_b)

    @property
    def z(self) -> float | None:
        """The gap in combined standard errors."""
        if self.se is None or self.change is None or self.se <= 0:
            return None
        return abs(self.change) / self.se

    @property
    def comparable(self) -> bool:
        """Both laws fit the same stretch of the tail (the same xmin): only then is the gap
        between the exponents a drift of one quantity."""
        return self.xmin_a is not None and self.xmin_a == self.xmin_b

    @property
    def significant(self) -> bool | None:
        """Beyond ``DRIFT_SE`` combined standard errors; None when not comparable."""
        return None if self.z is None or not self.comparable else self.z > DRIFT_SE

    def to_dict(self) -> dict:
        return {"a": {"alpha": self.alpha_a, "alpha_se": self.alpha_se_a, "xmin": self.xmin_a},
                "b": {"alpha": self.alpha_b, "alpha_se": self.alpha_se_b, "xmin": self.xmin_b},
                "change": self.change, "se": self.se, "z": self.z,
                "threshold_se": DRIFT_SE, "significant": self.significant, "note": self.note}


@dataclass(frozen=True)
class ShardShift:
    """One shard's predicted share in A and B, split into its named head keys and the rest,
    with the keys on it that moved most (``KeyMove.moved``, largest first)."""

    shard: int
    share_a: float
    share_b: float
    head_a: float
    head_b: float
    keys: tuple[KeyMove, ...]

    @property
    def change(self) -> float:
        return self.share_b - self.share_a

    @property
    def rest_change(self) -> float:
        """Change of what the profiles do not name on this shard (tail keys)."""
        return (self.share_b - self.head_b) - (self.share_a - self.head_a)

    def to_dict(self) -> dict:
        return {"shard": self.shard, "share_a": self.share_a, "share_b": self.share_b,
                "change": self.change, "head_keys_a": self.head_a, "head_keys_b": self.head_b,
                "rest_change": self.rest_change, "keys": [k.to_dict() for k in self.keys]}


@dataclass(frozen=True)
class ShardDrift:
    """The hottest shard of A and of B (``hotshard.shards.predict``) under one partitioner."""

    partitioner: str
    key_type: str
    n_shards: int
    hottest_a: int
    hottest_b: int
    hottest_share_a: float
    hottest_share_b: float
    max_over_mean_a: float
    max_over_mean_b: float
    shards: tuple[ShardShift, ...]  # A's hottest, then B's when it is another shard

    @property
    def change(self) -> float:
        """The hottest shard's share in B minus the hottest's in A (shards may differ)."""
        return self.hottest_share_b - self.hottest_share_a

    def to_dict(self) -> dict:
        return {"partitioner": self.partitioner, "key_type": self.key_type,
                "n_shards": self.n_shards,
                "a": {"hottest": self.hottest_a, "share": self.hottest_share_a,
                      "max_over_mean": self.max_over_mean_a},
                "b": {"hottest": self.hottest_b, "share": self.hottest_share_b,
                      "max_over_mean": self.max_over_mean_b},
                "change": self.change, "shards": [s.to_dict() for s in self.shards]}


@dataclass(frozen=True)
class ProfileDiff:
    """``diff``'s result. Shares are fractions of each profile's own events."""

    label_a: str
    label_b: str
    events_a: float
    events_b: float
    keys_a: float
    keys_b: float
    head_a: int  # the profiles' full head sizes
    head_b: int
    top: int  # the top-K heads compared
    floor_a: float  # the most a key outside A's head can carry (share); likewise B
    floor_b: float
    common_head_keys: int  # keys in both full heads
    stayed: tuple[KeyMove, ...]
    entered: tuple[KeyMove, ...]
    left: tuple[KeyMove, ...]
    risers: tuple[KeyMove, ...]
    fallers: tuple[KeyMove, ...]
    unclear: tuple[KeyMove, ...]
    shares: tuple[ShareChange, ...]
    tail: TailDrift
    shards: ShardDrift | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    windows: WindowDrift | None = None  # both profiles with head timelines

    @property
    def keys(self) -> tuple[KeyMove, ...]:
        """Every key in either top-K head: A's order, then the keys that entered."""
        return tuple(sorted(self.stayed + self.left, key=lambda m: m.rank_a or 0)) + self.entered

    def to_dict(self) -> dict:
        return {
            "a": {"label": self.label_a, "events": _num(self.events_a),
                  "keys": _num(self.keys_a), "head": self.head_a, "floor": self.floor_a},
            "b": {"label": self.label_b, "events": _num(self.events_b),
                  "keys": _num(self.keys_b), "head": self.head_b, "floor": self.floor_b},
            "top": self.top,
            "common_head_keys": self.common_head_keys,
            "stayed": [m.to_dict() for m in self.stayed],
            "entered": [m.to_dict() for m in self.entered],
            "left": [m.to_dict() for m in self.left],
            "risers": [m.to_dict() for m in self.risers],
            "fallers": [m.to_dict() for m in self.fallers],
            "unclear": [m.key for m in self.unclear],
            "shares": {s.name: s.to_dict() for s in self.shares},
            "tail": self.tail.to_dict(),
            "shards": None if self.shards is None else self.shards.to_dict(),
            "windows": None if self.windows is None else self.windows.to_dict(),
            "notes": list(self.notes),
        }


def _num(x: float) -> int | float:
    return int(x) if float(x).is_integer() else float(x)


class _Side:
    """One profile as diff sees it: each head key's rank and share, and the floor below."""

    def __init__(self, profile: Profile, top: int):
        self.profile = profile
        self.events = float(profile.events)
        self.keys = tuple(profile.head_keys)
        self.index = {k: i for i, k in enumerate(self.keys)}
        self.shares = np.asarray(profile.head_counts, dtype=np.float64) / self.events
        self.top = frozenset(self.keys[:top])
        self.floor = outside_bound(profile) / self.events

    def share(self, key: str) -> tuple[float, bool, int | None]:
        """(share or its bound, exact, rank) of ``key``."""
        i = self.index.get(key)
        if i is None:
            return self.floor, self.floor == 0.0, None
        return float(self.shares[i]), True, i + 1


def outside_bound(profile: Profile) -> float:
    """The most events any key outside ``profile``'s head can have: the tail's largest count
    (a log bin's upper edge), never above the head's smallest count; 0 for an empty tail."""
    tail = profile.tail
    seen = [tail.values[tail.value_keys > 0], tail.bin_hi[tail.bin_keys > 0]]
    top = max((float(v.max()) for v in seen if v.size), default=0.0)
    head = profile.head_counts
    return min(top, float(head.min())) if head.size else top


def _move(key: str, a: _Side, b: _Side) -> KeyMove:
    sa, ea, ra = a.share(key)
    sb, eb, rb = b.share(key)
    in_a, in_b = key in a.top, key in b.top
    status: Status = ("stayed" if in_a and in_b else "left" if in_a else
                      "entered" if in_b else "outside")
    return KeyMove(key, status, sa, sb, ea, eb, ra, rb)


def _check_key_space(a: Profile, b: Profile, common: int, allow_disjoint: bool) -> None:
    """Refuse two profiles whose heads share no key (see ``diff``'s Raises)."""
    for name, p in (("A", a), ("B", b)):
        if not p.head_keys:
            raise InputError(f"profile {name} has no head keys (no key reached its "
                             f"privacy.min_count of {p.privacy.get('min_count')}): there are "
                             "no keys to compare; profile it again with a lower min_count")
    if common or allow_disjoint:
        return
    why = []
    kind_a = "integers" if a.integer_keys else "text"
    kind_b = "integers" if b.integer_keys else "text"
    if kind_a != kind_b:
        why.append(f"A's keys are {kind_a}, B's are {kind_b}")
    pa, pb = (bool(p.privacy.get("pseudonymized")) for p in (a, b))
    if pa != pb:
        why.append(f"{'A' if pa else 'B'}'s keys are pseudonyms, the other's are not")
    elif pa:
        why.append("both are pseudonymized: with different secrets no key matches")
    if not why:
        why.append(f"none of A's {len(a.head_keys):,} head keys is among B's "
                   f"{len(b.head_keys):,}; if the whole head really changed, pass "
                   "--allow-disjoint")
    raise InputError("no common keys at all: are A and B profiles of the same key space? ("
                     + "; ".join(why) + ")")


def _tail_drift(a: Profile, b: Profile) -> TailDrift:
    la, lb = a.tail.power_law or {}, b.tail.power_law or {}
    missing = [n for n, law in (("A", la), ("B", lb)) if law.get("alpha") is None]
    note = None
    if missing:
        note = (f"{' and '.join(missing)} {'has' if len(missing) == 1 else 'have'} no fitted "
                "tail law (histogram only): no exponent to compare")
    elif la.get("alpha_se") is None or lb.get("alpha_se") is None:
        note = "a fitted law records no standard error: the drift cannot be judged"
    elif la.get("xmin") != lb.get("xmin"):
        note = (f"the laws start at different counts (xmin {_g(la.get('xmin'))} and "
                f"{_g(lb.get('xmin'))}): each alpha describes its own stretch of the tail")

    def get(law: dict, name: str) -> float | None:
        v = law.get(name)
        return None if v is None else float(v)

    return TailDrift(get(la, "alpha"), get(la, "alpha_se"), get(la, "xmin"),
                     get(lb, "alpha"), get(lb, "alpha_se"), get(lb, "xmin"), note)


def _g(x: Any) -> str:
    return "?" if x is None else f"{x:g}"


def diff(a: Profile, b: Profile, *, top: int | None = None,
         partitioner: Partitioner | None = None, movers: int = DEFAULT_MOVERS,
         labels: tuple[str, str] = ("A", "B"), allow_disjoint: bool = False) -> ProfileDiff:
    """Compare two profiles of one key space: what moved from A to B.

    Parameters
    ----------
    a, b : Profile
        The earlier (or normal) and the later (or event) profile of the same keys.
    top : int, optional
        Compare the top ``top`` keys of each head (default: the smaller head). At most the
        smaller head: a profile names no key beyond its head.
    partitioner : Partitioner, optional
        Also compare the shards' predicted shares (``hotshard.shards.predict``) under it. Both
        profiles are placed by the same partitioner, so a key lands on the same shard in both;
        type its keys for both (bigint only when both profiles' keys are integers).
    movers : int
        How many risers and fallers to list (each), largest first.
    labels : (str, str)
        Names of A and B for the output (file names, dates).
    allow_disjoint : bool
        Accept heads that share no key at all (a complete turnover of the hot keys).

    Returns
    -------
    ProfileDiff

    Raises
    ------
    InputError
        ``top`` or ``movers`` is out of range; a profile has an empty head; or the two full
        heads share no key at all and ``allow_disjoint`` is False. That is the rule for
        "different key spaces": with the hundreds of keys a head holds, two windows of one key
        space share at least a few of their hottest keys, while integers against text keys,
        pseudonyms against real keys, or pseudonyms under different secrets share none. The
        message names which of these applies. Heads of the same key format sharing no key are
        refused too (there is nothing to match key by key), unless ``allow_disjoint``.

    Notes
    -----
    Share = key count / profile events, so profiles of different sizes compare. A key outside a
    head gets that profile's floor (``outside_bound`` / events) as an upper bound of its share,
    changes computed with it are bounds, and risers and fallers are ranked by them (module
    notes). Keys tied at the head's boundary count are in or out of it as the profile put them.
    """
    if movers < 1:
        raise InputError(f"movers must be >= 1, got {movers}")
    head = min(len(a.head_keys), len(b.head_keys))
    if top is None:
        top = head
    if top < 1:
        raise InputError(f"top must be >= 1, got {top}")
    common = len(set(a.head_keys) & set(b.head_keys))
    _check_key_space(a, b, common, allow_disjoint)
    if top > head:
        smaller = "A" if len(a.head_keys) <= len(b.head_keys) else "B"
        raise InputError(f"top must be at most the smaller head ({smaller} names {head:,} "
                         f"keys), got {top:,}: a profile names no key beyond its head")
    sa, sb = _Side(a, top), _Side(b, top)
    union = list(a.head_keys[:top]) + [k for k in b.head_keys[:top] if k not in sa.top]
    moves = [_move(k, sa, sb) for k in union]
    by_status: dict[str, list[KeyMove]] = {"stayed": [], "entered": [], "left": []}
    for m in moves:
        by_status[m.status].append(m)
    up = sorted((m for m in moves if m.direction == "up"), key=lambda m: (-m.change, m.key))
    down = sorted((m for m in moves if m.direction == "down"), key=lambda m: (m.change, m.key))
    unclear = tuple(m for m in moves if m.direction == "unclear")
    share_a, share_b = a.dist.shares(), b.dist.shares()
    shares = tuple(ShareChange(n, label, float(share_a[n]), float(share_b[n]))
                   for n, label in SHARES)
    notes = _notes(a, b, sa, sb, unclear) + window_notes(a, b)
    shards = None if partitioner is None else _shard_drift(sa, sb, partitioner)
    windows = None
    if a.timelines is not None and b.timelines is not None \
            and a.timelines.windows == b.timelines.windows:
        windows = window_drift(a, b, union)
    return ProfileDiff(
        label_a=labels[0], label_b=labels[1], events_a=sa.events, events_b=sb.events,
        keys_a=float(a.keys), keys_b=float(b.keys), head_a=len(a.head_keys),
        head_b=len(b.head_keys), top=top, floor_a=sa.floor, floor_b=sb.floor,
        common_head_keys=common, stayed=tuple(by_status["stayed"]),
        entered=tuple(by_status["entered"]), left=tuple(by_status["left"]),
        risers=tuple(up[:movers]), fallers=tuple(down[:movers]), unclear=unclear,
        shares=shares, tail=_tail_drift(a, b), shards=shards, notes=tuple(notes),
        windows=windows)


def _notes(a: Profile, b: Profile, sa: _Side, sb: _Side, unclear) -> list[str]:
    notes = []
    if a.integer_keys != b.integer_keys:
        notes.append(f"A's keys are {'integers' if a.integer_keys else 'text'} and B's "
                     f"{'integers' if b.integer_keys else 'text'}: only keys written alike "
                     "in both match")
    left = sum(1 for m in unclear if m.status == "left")
    if left:
        notes.append(f"{left:,} keys left A's head with A shares at or below B's floor "
                     f"({pct(sb.floor)}): whether they fell cannot be told from the profiles")
    entered = len(unclear) - left
    if entered:
        notes.append(f"{entered:,} keys entered B's head with B shares at or below A's floor "
                     f"({pct(sa.floor)}): whether they rose cannot be told from the profiles")
    return notes


def _shard_drift(a: _Side, b: _Side, partitioner: Partitioner) -> ShardDrift:
    from hotshard.shards.predict import head_shards, predict

    pa, pb = predict(a.profile, partitioner), predict(b.profile, partitioner)
    where: dict[str, int] = {}
    for side in (b, a):  # one partitioner: a key common to both lands on the same shard
        placed = head_shards(side.profile, partitioner, list(side.keys))
        where.update(zip(side.keys, (int(s) for s in placed), strict=True))
    rows = []
    for shard in dict.fromkeys((pa.hottest, pb.hottest)):
        on = [k for k, s in where.items() if s == shard]
        moves = sorted((_move(k, a, b) for k in on), key=lambda m: (-m.moved, m.key))
        rows.append(ShardShift(shard, float(pa.shares[shard]), float(pb.shares[shard]),
                               _head_share(a, on), _head_share(b, on),
                               tuple(m for m in moves[:SHARD_KEYS] if m.moved > 0)))
    return ShardDrift(partitioner.spec, getattr(partitioner, "key_type", "text"),
                      partitioner.n_shards, pa.hottest, pb.hottest,
                      float(pa.shares[pa.hottest]), float(pb.shares[pb.hottest]),
                      pa.max_over_mean, pb.max_over_mean, tuple(rows))


def _head_share(side: _Side, keys: list[str]) -> float:
    idx = [side.index[k] for k in keys if k in side.index]
    return float(side.shares[idx].sum()) if idx else 0.0
