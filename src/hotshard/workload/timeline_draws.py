"""Independent draws whose head keys are hot when they were hot (a profile's ``timelines``).

Without a locality section there is no order to follow, but a profile measured with
``--time`` still says, for every head key, how its requests fell over the windows of the
profile's span: an event channel carried 45% for half an hour, not its total's 30% all
hour. Here each request's key is drawn from its window's mix: head key i with its share of
that window's requests (its timeline count over the window's requests, from the arrivals
section's per-minute counts, or the window's even share without one), and the window's rest
from the tail classes at their weights. The run's span is mapped onto the profile's (as
``generate`` stretches the arrivals), so window w of the profile is window w of the run.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from hotshard.errors import InputError

__all__ = ["TimelineDraws", "timeline_positions", "window_events"]


def window_events(timelines, arrivals, events: float) -> NDArray[np.float64]:
    """Requests of the profile in each timeline window: from the arrivals' per-minute
    counts (both sections start at the first request), else ``events`` spread evenly."""
    windows = timelines.windows
    if arrivals is None:
        return np.full(windows, float(events) / windows)
    return arrivals.requests_between(np.linspace(0.0, timelines.seconds, windows + 1))


class TimelineDraws:
    """``timeline_positions`` for one sampler, timelines and window counts, with what does
    not depend on the requests (each window's cumulative mix, the tail's sampler) made once:
    a simulation draws every block of its run through one, and a calibration draws its many
    short replicates through one.

    Raises
    ------
    InputError
        The timelines do not name the sampler's head keys (a profile whose sections
        disagree).
    """

    def __init__(self, sampler, timelines, per_window: NDArray[np.float64]) -> None:
        head = int(sampler.head_size)
        counts = np.asarray(timelines.counts, dtype=np.float64)
        if counts.shape[0] != head:
            raise InputError(f"timelines hold {counts.shape[0]} keys but the head has {head}: "
                             "the profile's sections disagree")
        share = counts / np.maximum(per_window, 1.0)[None, :]
        total = share.sum(axis=0)
        classes = sampler.classes
        tail = None
        if classes.sizes.size > head and np.any(classes.key_weight[head:]
                                                * classes.sizes[head:]):
            from hotshard.workload.sampler import ClassSampler

            tail = ClassSampler(np.asarray(classes.key_weight[head:], dtype=np.float64),
                                np.asarray(classes.sizes[head:], dtype=np.int64))
        # a window whose head keys took all of it (or, rounded, a little more), or a profile
        # with no tail: the head's shares are the whole mix
        full = (total >= 1.0) | (tail is None)
        share[:, full] /= np.maximum(total[full], 1e-300)
        self.head, self.windows, self.tail = head, int(timelines.windows), tail
        self.cumulative = [np.cumsum(share[:, w]) for w in range(self.windows)]

    def positions(self, fractions: NDArray[np.float64], rng: np.random.Generator
                  ) -> NDArray[np.int64]:
        """Key positions for requests at ``fractions`` of the run (in [0, 1))."""
        windows, head = self.windows, self.head
        window = np.minimum((np.asarray(fractions) * windows).astype(np.int64), windows - 1)
        order = np.argsort(window, kind="stable")
        bounds = np.searchsorted(window[order], np.arange(windows + 1))
        out = np.empty(window.size, dtype=np.int64)
        for w in range(windows):
            rows = order[bounds[w]:bounds[w + 1]]
            if rows.size == 0:
                continue
            pick = np.searchsorted(self.cumulative[w], rng.random(rows.size), side="right")
            in_head = pick < head
            out[rows[in_head]] = pick[in_head]
            rest = rows[~in_head]
            if rest.size:
                out[rest] = self.tail.sample(rest.size, rng) + head  # positions: no order
        return out


def timeline_positions(sampler, timelines, per_window: NDArray[np.float64],
                       fractions: NDArray[np.float64], rng: np.random.Generator
                       ) -> NDArray[np.int64]:
    """Key positions (``ProfileSampler`` numbering) for requests at ``fractions`` of the run
    (in [0, 1)), each drawn from its window's mix (see the module's docstring); many calls
    on the same inputs go through one ``TimelineDraws``.

    Raises
    ------
    InputError
        The timelines do not name the sampler's head keys (a profile whose sections
        disagree).
    """
    return TimelineDraws(sampler, timelines, per_window).positions(fractions, rng)
