"""When a key is hot: the rule ``serve`` mitigates by, written once so the models apply it the
same way (``simulate --detect`` replays it over the simulated stream).

The service counts every request in a sliding window of ``window_s`` seconds cut into
``SLICES`` slices (``sketch.SlidingHotKeys``), reads its hot set again every
``HOT_REFRESH_S`` seconds (on the next request, or a read of /stats, /metrics or /hotkeys),
and calls a key hot while its guaranteed share of the window is at least ``hot_share`` and
the window holds ``MIN_HOT_WINDOW_REQUESTS`` requests or more. An action (a split, a read
served by replicas, the cache or coalescing) then applies from the next request: ``apply_s``
is the time an action takes beyond that (0 for serve's read mitigations; a store that moves
data to split a key takes longer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hotshard.errors import InputError
from hotshard.mitigations import DEFAULT_HOT_SHARE

__all__ = ["DEFAULT_HOT_WINDOW_S", "HOT_REFRESH_S", "MAX_APPLY_S", "MAX_HOT_WINDOW_S",
           "MIN_HOT_WINDOW_REQUESTS", "SLICES", "Detection", "check_hot_window"]

# how often the hot set is read from the sketch, seconds
HOT_REFRESH_S = 0.5
# the sketch's window by default, and its longest: over an hour a "hot" key is a popular one
DEFAULT_HOT_WINDOW_S = 10.0
MAX_HOT_WINDOW_S = 3600.0
# sub-windows of the sliding window (one Space-Saving sketch each)
SLICES = 10
# No key is hot while the window holds fewer requests: at start, or after a quiet spell, the
# first key asked for would be "100% of the traffic" and be mitigated on one request
MIN_HOT_WINDOW_REQUESTS = 100
# an action that takes longer than an hour to apply is not a reaction to an event
MAX_APPLY_S = 3600.0


def check_hot_window(window_s: float) -> float:
    """``window_s`` when the sketch can work with it; else InputError saying why."""
    low = 2 * HOT_REFRESH_S
    if isinstance(window_s, bool) or not isinstance(window_s, int | float) \
            or not math.isfinite(window_s) or window_s < low:
        raise InputError(f"the hot-key window must be {low:g} s to {MAX_HOT_WINDOW_S:g} s, got "
                         f"{window_s!r}: the hot set is read from it every {HOT_REFRESH_S:g} s, "
                         "so a shorter window is over before it is read twice")
    if window_s > MAX_HOT_WINDOW_S:
        raise InputError(f"the hot-key window must be {low:g} s to {MAX_HOT_WINDOW_S:g} s, got "
                         f"{window_s:g}: over an hour, a channel's share is its popularity, "
                         "not its heat")
    return float(window_s)


def check_hot_share(share: float) -> float:
    """``share`` when it is a share a key can reach, (0, 1]; else InputError."""
    if isinstance(share, bool) or not isinstance(share, int | float) \
            or not (math.isfinite(share) and 0 < share <= 1):
        why = ": at 0 every key would be hot" if share == 0 else ""
        raise InputError(f"the hot share must be in (0, 1] (0.05: 5% of the window's "
                         f"requests), got {share!r}{why}")
    return float(share)


@dataclass(frozen=True)
class Detection:
    """How a service finds its hot keys and how soon it acts on them (module notes).

    Raises
    ------
    InputError
        A window outside 1 s..1 h, a share outside (0, 1], an apply time below 0 or over
        an hour.
    """

    window_s: float = DEFAULT_HOT_WINDOW_S
    hot_share: float = DEFAULT_HOT_SHARE
    apply_s: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "window_s", check_hot_window(self.window_s))
        object.__setattr__(self, "hot_share", check_hot_share(self.hot_share))
        apply_s = self.apply_s
        if isinstance(apply_s, bool) or not isinstance(apply_s, int | float) \
                or not (math.isfinite(apply_s) and 0 <= apply_s <= MAX_APPLY_S):
            raise InputError(f"the time to apply an action must be 0 to {MAX_APPLY_S:g} s, "
                             f"got {apply_s!r}")
        object.__setattr__(self, "apply_s", float(apply_s))

    def overridden(self, *, window_s: float | None = None, hot_share: float | None = None,
                   apply_s: float | None = None) -> Detection:
        """This rule with the values given (None: this rule's own)."""
        return Detection(window_s=self.window_s if window_s is None else window_s,
                         hot_share=self.hot_share if hot_share is None else hot_share,
                         apply_s=self.apply_s if apply_s is None else apply_s)

    @property
    def slice_s(self) -> float:
        """One slice of the window: the step the window moves in."""
        return self.window_s / SLICES

    def time_to_detect(self, share: float, before: float = 0.0) -> tuple[float, float] | None:
        """(earliest, latest) seconds from a step in a key's share, from ``before`` to
        ``share`` of the requests, to the action on it; None when ``share`` is under the
        hot share (never found). The window at a reading spans ``SLICES - 1`` to ``SLICES``
        slices, so the key's share of it reaches the hot share after a fraction
        ``(hot_share - before) / (share - before)`` of that, then waits up to one reading,
        then ``apply_s``; a key already hot before the step is found at once."""
        if share < self.hot_share:
            return None
        if before >= self.hot_share:
            return (self.apply_s, HOT_REFRESH_S + self.apply_s)
        fill = (self.hot_share - before) / max(share - before, 1e-12)
        return (fill * (self.window_s - self.slice_s) + self.apply_s,
                fill * self.window_s + HOT_REFRESH_S + self.apply_s)

    def to_dict(self) -> dict[str, Any]:
        return {"window_s": self.window_s, "hot_share": self.hot_share,
                "apply_s": self.apply_s, "refresh_s": HOT_REFRESH_S, "slices": SLICES,
                "min_requests": MIN_HOT_WINDOW_REQUESTS}

    @classmethod
    def from_dict(cls, raw: Any, where: str = "detection") -> Detection:
        """The detection a document records (``to_dict``'s fields; the fixed ones are the
        rule's own and not read back)."""
        if not isinstance(raw, dict):
            raise InputError(f"{where} must be an object with window_s and hot_share")
        try:
            return cls(window_s=raw.get("window_s", DEFAULT_HOT_WINDOW_S),
                       hot_share=raw.get("hot_share", DEFAULT_HOT_SHARE),
                       apply_s=raw.get("apply_s", 0.0))
        except InputError as exc:
            raise InputError(f"{where}: {exc.template}") from None

    def text(self) -> str:
        apply = f", actions applied {self.apply_s:g} s later" if self.apply_s else ""
        return (f"a key is hot at {self.hot_share:.0%} of a {self.window_s:g} s window "
                f"(read every {HOT_REFRESH_S:g} s){apply}")

