"""check's peak-window gate: a test right on average that never has production's event fails,
and says which window it misses."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests._event_trace import write_event_trace


def _hotshard(*args):
    return subprocess.run([sys.executable, "-m", "hotshard", *map(str, args)],
                          capture_output=True, text=True)


@pytest.fixture(scope="module")
def production(tmp_path_factory):
    root = tmp_path_factory.mktemp("check-windows")
    trace = write_event_trace(root / "prod.parquet")
    run = _hotshard("profile", trace.path, "--key", "channel_id", "--time", "ts",
                    "-o", root / "prod.json")
    assert run.returncode == 0, run.stderr
    return root, trace


def _test_stream(root, name, trace, *, shuffle_times: bool, seed: int):
    """Another draw of production's trace (a faithful test), or the same keys with their
    times shuffled: right on average, the event spread over the whole span."""
    other = write_event_trace(root / f"{name}-raw.parquet", seed=seed)
    table = pq.read_table(other.path)
    ts = table.column("ts").to_numpy()
    keys = table.column("channel_id").to_numpy()
    if shuffle_times:
        keys = np.random.default_rng(seed).permutation(keys)
    path = root / f"{name}.parquet"
    pq.write_table(pa.table({"channel_id": keys, "timestamp": ts}), path)
    return path


def _check(root, test):
    run = _hotshard("check", test, "--against", root / "prod.json", "-p", "redis-cluster",
                    "-n", "16", "--json")
    assert run.returncode in (0, 1), run.stderr
    return run.returncode, json.loads(run.stdout)


def test_a_test_with_the_event_passes_the_peak_window(production):
    root, trace = production
    rc, out = _check(root, _test_stream(root, "faithful", trace, shuffle_times=False, seed=11))
    peak = next(c for c in out["checks"] if c["name"] == "peak-window")
    assert peak["verdict"] == "pass", peak["message"]
    assert peak["numbers"]["ratio_same_window"] > 0.9


def test_a_test_right_on_average_without_the_event_fails_and_names_the_window(production):
    root, trace = production
    test = _test_stream(root, "flat", trace, shuffle_times=True, seed=12)
    rc, out = _check(root, test)
    checks = {c["name"]: c for c in out["checks"]}
    # on average the test is production: the whole-span shard check passes
    assert checks["hot-shard"]["verdict"] == "pass", checks["hot-shard"]["message"]
    peak = checks["peak-window"]
    assert peak["verdict"] == "fail"
    assert rc == 1
    assert "60:00-70:00" in peak["message"] and "never has it" in peak["message"]
    text = _hotshard("check", test, "--against", root / "prod.json", "-p", "redis-cluster",
                     "-n", "16")
    assert text.returncode == 1
    assert "peak-window" in text.stdout and "misses production's 60:00-70:00" in text.stdout
