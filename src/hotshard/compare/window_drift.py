"""When each head key was busy, A against B: the window-by-window part of ``hotshard diff``.

Two profiles with head timelines of as many windows are compared window by window: window w of
A against window w of B, each profile's span cut in equal parts (by position, whatever the
spans' lengths). Per key in either head: its requests per window, its share of each window's
requests (``window_totals``, from the arrivals section), the windows where it was hot (at least
``HOT_FACTOR`` times its even share and beyond chance: ``HOT_P``, Bonferroni over every key and
window), and the total-variation distance between its two timelines beside what two samples of
one shape give (``expected_tv``). ``hotshard.compare.diff`` puts the result in its
``ProfileDiff``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hotshard.profile.document import Profile

__all__ = ["HOT_FACTOR", "HOT_P", "WINDOW_TOP", "KeyWindows", "WindowDrift", "expected_tv",
           "span_text", "window_drift", "window_notes", "window_totals"]

# A key is hot in a window when it has at least HOT_FACTOR times its even share of its own
# requests there (an event's channel: many times) and a key spreading its requests evenly
# over the span would be that busy by chance with probability below HOT_P, Bonferroni over
# every key and window compared (Poisson counts), so a few requests' noise is never an event.
HOT_FACTOR = 2.0
HOT_P = 0.001
# The top keys of each head always shown in the text's windows section, for context.
WINDOW_TOP = 3


@dataclass(frozen=True)
class KeyWindows:
    """One key's requests per window in A and in B (None: outside that profile's head).

    ``share_a[w]`` is the key's share of window w's requests in A (None without window
    totals: a profile without arrivals); ``hot_a`` the windows (0-based) where it was hot.
    ``tv`` is the total-variation distance between its timelines as distributions over the
    windows (half the sum of |a_w - b_w| of its requests' fractions: 0 the same shape, 1
    disjoint windows); ``tv_chance`` what two samples of its counts from one shape give on
    average (module ``expected_tv``), for reading it.
    """

    key: str
    counts_a: tuple[int, ...] | None
    counts_b: tuple[int, ...] | None
    share_a: tuple[float, ...] | None
    share_b: tuple[float, ...] | None
    hot_a: tuple[int, ...]
    hot_b: tuple[int, ...]
    tv: float | None
    tv_chance: float | None

    @property
    def hot_moved(self) -> bool:
        """Hot in a window on one side where it was not on the other (or in one head only)."""
        return self.hot_a != self.hot_b

    def to_dict(self) -> dict:
        return {"key": self.key, "counts_a": _list(self.counts_a),
                "counts_b": _list(self.counts_b), "share_a": _list(self.share_a),
                "share_b": _list(self.share_b), "hot_windows_a": list(self.hot_a),
                "hot_windows_b": list(self.hot_b), "tv": self.tv, "tv_chance": self.tv_chance,
                "hot_moved": self.hot_moved}


def _list(x: tuple | None) -> list | None:
    return None if x is None else list(x)


@dataclass(frozen=True)
class WindowDrift:
    """The head keys' timelines of A and B, window by window (window w of A against window
    w of B: each profile's span cut in ``windows`` equal parts)."""

    windows: int
    start_a: float
    seconds_a: float
    start_b: float
    seconds_b: float
    totals_a: tuple[float, ...] | None  # requests per window, from the arrivals section
    totals_b: tuple[float, ...] | None
    keys: tuple[KeyWindows, ...]  # A's top keys in order, then B's that are not among them
    top_a: tuple[str, ...] = ()  # the first WINDOW_TOP keys of A's head, and of B's
    top_b: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"windows": self.windows, "hot_factor": HOT_FACTOR, "hot_p": HOT_P,
                "a": {"start": self.start_a, "seconds": self.seconds_a,
                      "window_seconds": self.seconds_a / self.windows,
                      "requests": _list(self.totals_a)},
                "b": {"start": self.start_b, "seconds": self.seconds_b,
                      "window_seconds": self.seconds_b / self.windows,
                      "requests": _list(self.totals_b)},
                "keys": [k.to_dict() for k in self.keys]}


def expected_tv(shape: np.ndarray, n_a: np.ndarray, n_b: np.ndarray) -> np.ndarray:
    """Mean total-variation distance between the window fractions of two multinomial samples
    of ``n_a`` and ``n_b`` requests from one ``shape`` (keys x windows, rows summing to 1).

    Each window's difference of fractions is about normal with variance p (1 - p) (1/n_a +
    1/n_b), and E|N(0, s^2)| = s sqrt(2/pi); TV is half the sum over windows. The normal
    approximation holds once a window expects a few requests; with fewer it errs on the
    high side of the exact mean only by what the discreteness adds.
    """
    var = shape * (1.0 - shape) * (1.0 / n_a + 1.0 / n_b)[:, None]
    return 0.5 * np.sqrt(2.0 / np.pi) * np.sqrt(var).sum(axis=1)


def window_totals(profile: Profile) -> np.ndarray | None:
    """Requests in each timeline window, from the arrivals section's bins (a bin cut by a
    window edge split in proportion, as if even inside); None without both sections."""
    arr, tl = profile.arrivals, profile.timelines
    if arr is None or tl is None:
        return None
    cuts = np.linspace(0.0, tl.seconds, tl.windows + 1)
    cuts[-1] = arr.counts.size * arr.resolution_s  # the span's last instant: the last window
    return arr.requests_between(cuts)


def _hot(counts: np.ndarray, tests: int) -> np.ndarray:
    """Per key and window: hot (see ``HOT_FACTOR``, ``HOT_P``)."""
    from hotshard.compare import _poisson as poisson

    even = counts.sum(axis=1, keepdims=True) / counts.shape[1]
    p = poisson.sf(counts - 1, np.maximum(even, 1e-300))
    return (counts >= HOT_FACTOR * even) & (counts > 0) & (p < HOT_P / max(tests, 1))


def window_drift(a: Profile, b: Profile, keys: list[str]) -> WindowDrift:
    ta, tb = a.timelines, b.timelines
    assert ta is not None and tb is not None
    n_w = ta.windows
    idx_a = {k: i for i, k in enumerate(a.head_keys)}
    idx_b = {k: i for i, k in enumerate(b.head_keys)}
    rows_a = [idx_a.get(k) for k in keys]
    rows_b = [idx_b.get(k) for k in keys]
    tests = sum(r is not None for r in rows_a + rows_b) * n_w
    ca = ta.counts[[r for r in rows_a if r is not None]]
    cb = tb.counts[[r for r in rows_b if r is not None]]
    hot_a, hot_b = _hot(ca, tests), _hot(cb, tests)
    tot_a, tot_b = window_totals(a), window_totals(b)
    pos_a = {k: j for j, k in enumerate(k for k, r in zip(keys, rows_a, strict=True)
                                        if r is not None)}
    pos_b = {k: j for j, k in enumerate(k for k, r in zip(keys, rows_b, strict=True)
                                        if r is not None)}
    both = [k for k in keys if k in pos_a and k in pos_b]
    tv: dict[str, tuple[float, float]] = {}
    if both:
        xa = ca[[pos_a[k] for k in both]].astype(np.float64)
        xb = cb[[pos_b[k] for k in both]].astype(np.float64)
        na, nb = xa.sum(axis=1), xb.sum(axis=1)
        fa, fb = xa / np.maximum(na, 1)[:, None], xb / np.maximum(nb, 1)[:, None]
        dist = 0.5 * np.abs(fa - fb).sum(axis=1)
        chance = expected_tv((xa + xb) / np.maximum(na + nb, 1)[:, None],
                             np.maximum(na, 1), np.maximum(nb, 1))
        tv = {k: (float(d), float(c)) for k, d, c in zip(both, dist, chance, strict=True)}

    def side(k: str, pos: dict, counts: np.ndarray, hot: np.ndarray, totals):
        j = pos.get(k)
        if j is None:
            return None, None, ()
        row = counts[j]
        share = None if totals is None else tuple(
            float(f"{c / t:.6g}") if t > 0 else 0.0 for c, t in zip(row, totals, strict=True))
        return tuple(int(c) for c in row), share, tuple(int(w) for w in np.flatnonzero(hot[j]))

    out = []
    for k in keys:
        c_a, s_a, h_a = side(k, pos_a, ca, hot_a, tot_a)
        c_b, s_b, h_b = side(k, pos_b, cb, hot_b, tot_b)
        d, chance = tv.get(k, (None, None))
        out.append(KeyWindows(k, c_a, c_b, s_a, s_b, h_a, h_b, d, chance))
    return WindowDrift(n_w, ta.start, ta.seconds, tb.start, tb.seconds,
                       None if tot_a is None else tuple(float(x) for x in tot_a),
                       None if tot_b is None else tuple(float(x) for x in tot_b), tuple(out),
                       tuple(a.head_keys[:WINDOW_TOP]), tuple(b.head_keys[:WINDOW_TOP]))


def window_notes(a: Profile, b: Profile) -> list[str]:
    """Why the windows are not compared, or how to read them."""
    ta, tb = a.timelines, b.timelines
    if ta is None and tb is None:
        return []
    if ta is None or tb is None:
        has, lacks = ("A", "B") if tb is None else ("B", "A")
        return [f"only {has} has head timelines: profile {lacks} with its time column "
                "(--time) to compare when the keys were hot"]
    if ta.windows != tb.windows:
        return [f"A's timelines have {ta.windows} windows and B's {tb.windows}: windows are "
                "not compared"]
    notes = []
    if max(ta.seconds, tb.seconds) > 1.5 * min(ta.seconds, tb.seconds):
        notes.append(f"A's windows last {span_text(ta.seconds / ta.windows)} and B's "
                     f"{span_text(tb.seconds / tb.windows)}: window w of A is compared with "
                     "window w of B, by position in each span")
    return notes


def span_text(seconds: float) -> str:
    """A duration in its largest unit, to three digits (1.5 h, 20 min, 7.5 s)."""
    for unit, size in (("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:.3g} s"
