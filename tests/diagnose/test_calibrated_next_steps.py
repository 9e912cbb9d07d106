"""diagnose's next steps with a service model calibrated from a measured run: each mitigation
states the hottest shard's CPU and p99 before and after at production's rate."""

from __future__ import annotations

from dataclasses import replace

from hotshard.diagnose.engine import diagnose
from hotshard.observations import Observations
from hotshard.profile.document import Profile
from tests.conftest import ROOT, run_cli
from tests.sim.test_calibrate import _true_run

EXAMPLES = ROOT / "examples"


def _inputs():
    production = Observations.load(EXAMPLES / "incident-production.json")
    test = Observations.load(EXAMPLES / "incident-loadtest.json")
    profile = Profile.load(EXAMPLES / "incident.profile.json")
    return production, test, profile


def test_each_mitigation_states_cpu_and_p99_before_and_after():
    production, test, profile = _inputs()
    run = _true_run(rps=100.0, seconds=300.0, seed=1)
    result = diagnose(production, test, profile=profile, calibrate_from=run)
    steps = [r for r in result.recommendations if r.cpu_before is not None]
    assert len(steps) == 3   # split, replicas, both
    for step in steps:
        assert step.cpu_after < step.cpu_before
        assert step.p99_after_ms < step.p99_before_ms
        assert "calibrated on 'measured'" in step.detail and "p99" in step.detail
        assert {"cpu_before", "p99_after_ms"} <= set(step.to_dict())
    # the same model, the same production: "now" is one number for every step
    assert len({(s.cpu_before, s.p99_before_ms) for s in steps}) == 1


def test_without_a_run_the_steps_give_shares_only_and_a_bad_run_says_why():
    production, test, profile = _inputs()
    plain = diagnose(production, test, profile=profile)
    assert all(r.cpu_before is None for r in plain.recommendations)
    run = _true_run(rps=100.0, seconds=60.0, seed=1)
    no_cpu = replace(run, shards=tuple(replace(s, cpu=None) for s in run.shards))
    result = diagnose(production, test, profile=profile, calibrate_from=no_cpu)
    assert all(r.cpu_before is None for r in result.recommendations)
    assert any("no CPU and p99 in the what-ifs" in n for n in result.notes)


def test_the_command_takes_a_run_to_calibrate_from(tmp_path):
    run = tmp_path / "run.json"
    _true_run(rps=100.0, seconds=60.0, seed=1).save(run)
    args = ["diagnose", str(EXAMPLES / "incident-production.json"), "--baseline",
            str(EXAMPLES / "incident-loadtest.json")]
    out = run_cli(*args, "--profile", str(EXAMPLES / "incident.profile.json"),
                  "--calibrate", str(run))
    assert out.returncode == 0, out.stderr
    assert "predicts, at 3,000 req/s, the hottest shard at" in " ".join(out.stdout.split())
    bad = run_cli(*args, "--calibrate", str(run))
    assert bad.returncode == 2 and "give --profile too" in bad.stderr
    # a run it cannot calibrate from is the user's mistake to hear about, not a footnote
    no_cpu = tmp_path / "nocpu.json"
    made = _true_run(rps=100.0, seconds=60.0, seed=1)
    replace(made, shards=tuple(replace(s, cpu=None) for s in made.shards)).save(no_cpu)
    out = run_cli(*args, "--profile", str(EXAMPLES / "incident.profile.json"),
                  "--calibrate", str(no_cpu))
    assert out.returncode == 2 and "nocpu.json has no CPU" in out.stderr
