"""The Prometheus time axis from a counter's raw samples: each rise in the window of its later
scrape, resets counted as counters are."""

from __future__ import annotations

import numpy as np

from hotshard.observe.prometheus import _Grouped, counter_increase, window_edges, window_rises


def _group(series):
    return _Grouped({}, None, {}, {"0": series})


def test_rises_tile_the_run_and_resets_count_as_increase():
    points = [(float(t), float(v)) for t, v in
              [(0, 0), (1, 5), (2, 9), (3, 2), (4, 10), (5, 10), (6, 16), (7, 20), (8, 21)]]
    g = _group([points])
    edges = window_edges([g], 0.0, 8.0)
    assert edges is not None and edges[0] == 0.0 and edges[-1] == 8.0
    rises = window_rises(g, edges)["0"]
    whole = counter_increase([[t, str(v)] for t, v in points])[0]
    assert rises.sum() == whole == 5 + 4 + 2 + 8 + 0 + 6 + 4 + 1
    # 1 s scrapes, 4 scrapes a window: two windows of 4 s, the rise at t=4 in the second
    assert edges.tolist() == [0.0, 4.0, 8.0]
    assert rises.tolist() == [5 + 4 + 2, 8 + 0 + 6 + 4 + 1]


def test_too_short_for_two_windows_gives_none():
    g = _group([[(0.0, 0.0), (1.0, 1.0), (2.0, 3.0)]])
    assert window_edges([g], 0.0, 2.0) is None
    assert np.isfinite(counter_increase([[0, "0"], [1, "1"]])[0])
