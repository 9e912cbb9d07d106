"""examples/: the committed incident profiles are what their script makes, in the right shape."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import sys
from pathlib import Path

import pytest

from hotshard.profile.document import Profile
from tests.conftest import ROOT, run_cli

EXAMPLES = ROOT / "examples"
SCRIPT = EXAMPLES / "make_incident_profile.py"


def _load_script():
    spec = importlib.util.spec_from_file_location("make_incident_profile", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being made
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def script():
    return _load_script()


def _run(script, out: Path, *args: str):
    """The script's main() into ``out``: (what it returned, what it printed)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        made = script.main(["--out-dir", str(out), *args])
    return made, printed.getvalue()


@pytest.fixture(scope="module")
def default_run(script, tmp_path_factory):
    out = tmp_path_factory.mktemp("examples")
    made, printed = _run(script, out)
    return out, {m.path.name: m for m in made}, printed


@pytest.mark.slow
def test_committed_files_are_what_the_script_makes(script, default_run):
    out, made, _ = default_run
    assert sorted(made) == sorted([script.EVERYDAY_FILE, script.EVENT_FILE])
    for name in made:
        committed = EXAMPLES / name
        assert committed.exists(), f"{committed} is missing: run {SCRIPT.name} and commit it"
        assert (out / name).read_bytes() == committed.read_bytes(), (
            f"examples/{name} differs from what `python examples/{SCRIPT.name}` makes: "
            "regenerate and commit it (and update examples/README.md's numbers)")
        assert committed.stat().st_size < 100_000


def test_the_incident_shape(script, default_run):
    out, made, printed = default_run
    everyday = Profile.load(out / script.EVERYDAY_FILE)
    assert everyday.events == script.TOTAL_REQUESTS == 10_800_000
    assert everyday.source["key_type"] == "int64"
    # the top 1% of channels carries about half of all requests, as the profile computes it
    share = everyday.dist.shares()["top1pct"]
    assert 0.45 <= share <= 0.55
    m = made[script.EVERYDAY_FILE]
    assert m.top1pct_share == pytest.approx(share)
    assert f"top-1% channels  {share:.2%}" in printed
    # the exponent is solved, not tried: the model's expected share is the target exactly
    s = script.solve_zipf_exponent()
    assert script.top_share(script.N_CHANNELS, s) == pytest.approx(script.TOP_SHARE, abs=1e-9)
    law = everyday.tail.power_law
    assert law is not None and abs(law["alpha"] - (1 + 1 / s)) < 5 * law["alpha_se"] + 0.02
    # reads dominate; the rate is production's
    assert everyday.operations["read"].events / everyday.events == pytest.approx(
        1 - script.WRITE_FRACTION, abs=0.005)
    assert everyday.rate["mean_rps"] == script.MEAN_RPS
    assert script.MEAN_RPS < everyday.rate["p99_rps"] <= everyday.rate["peak_rps"]


def test_the_event_channel_carries_what_the_script_says(script, default_run):
    out, made, printed = default_run
    event = Profile.load(out / script.EVENT_FILE)
    m = made[script.EVENT_FILE]
    assert event.events == script.TOTAL_REQUESTS  # the same traffic, redistributed
    assert event.head_keys[0] == str(m.event_channel)
    share = float(event.head_counts[0]) / event.events
    assert share == pytest.approx(script.EVENT_SHARE, abs=1e-6)
    assert m.event_share == pytest.approx(share)
    assert f"event channel    {m.event_channel} carries {share:.2%}" in printed
    # the event channel is an everyday head channel, and the everyday top channel stays hot
    everyday = Profile.load(out / script.EVERYDAY_FILE)
    assert str(m.event_channel) in everyday.head_keys
    assert everyday.head_keys[0] in event.head_keys[:5]


def test_hotshard_inspect_loads_both(script, default_run):
    out, made, _ = default_run
    for name, m in made.items():
        res = run_cli("inspect", str(out / name), "--json")
        assert res.returncode == 0, res.stderr
        summary = json.loads(res.stdout)
        assert summary["events"] == script.TOTAL_REQUESTS
        assert summary["keys"] == m.channels
        assert summary["top1pct_share"] == pytest.approx(m.top1pct_share)
        assert set(summary["operations"]) == {"read", "write"}
        assert summary["rate"]["mean_rps"] == script.MEAN_RPS
        assert summary["sizes"]["0.5"] > 0


@pytest.mark.slow
def test_another_seed_other_bytes_same_shape(script, default_run, tmp_path):
    out, _, _ = default_run
    made, _ = _run(script, tmp_path, "--seed", "7")
    for m in made:
        assert m.path.read_bytes() != (out / m.path.name).read_bytes()
    everyday = next(m for m in made if m.path.name == script.EVERYDAY_FILE)
    assert 0.45 <= everyday.top1pct_share <= 0.55
    event = next(m for m in made if m.path.name == script.EVENT_FILE)
    assert event.event_share == pytest.approx(script.EVENT_SHARE, abs=1e-6)
