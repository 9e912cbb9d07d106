"""examples/incident-*.json are exactly what examples/make_incident_observations.py makes."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import ROOT

EXAMPLES = ROOT / "examples"


@pytest.mark.slow
def test_committed_observation_files_are_what_the_script_makes(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "make_incident_observations", EXAMPLES / "make_incident_observations.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    made = script.make(tmp_path, 2026)
    for name in made:
        assert (tmp_path / name).read_bytes() == (EXAMPLES / name).read_bytes(), name
    prod = made[script.PRODUCTION_FILE]
    test = made[script.LOADTEST_FILE]
    # the incident's numbers, reproduced by the model
    cpu = sorted(s.cpu for s in prod.shards)
    assert cpu[-1] >= 0.9 and 0.15 <= cpu[len(cpu) // 2] <= 0.3
    assert 500 <= prod.latency_ms.p99 <= 1200 and 30 <= test.latency_ms.p99 <= 50
    assert test.model == "closed" and prod.model is None
