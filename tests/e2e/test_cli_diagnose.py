"""`hotshard diagnose` as a user runs it: the incident's files, --json, and wrong inputs."""

from __future__ import annotations

import json
from pathlib import Path

from hotshard.diagnose import CAUSES
from tests.conftest import ROOT, run_cli

PROD = str(ROOT / "examples" / "incident-production.json")
TEST = str(ROOT / "examples" / "incident-loadtest.json")
PROFILE = str(ROOT / "examples" / "incident.profile.json")


def test_incident_text_ranks_key_skew_first():
    r = run_cli("diagnose", PROD, "--baseline", TEST, "--profile", PROFILE)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    ranked = [line for line in lines if line[:2].rstrip(".").isdigit()]
    assert ranked[0].split()[1:3] == ["key-skew", "FITS"]
    assert all("contradicted" in line for line in ranked[1:])
    assert "Next steps:" in r.stdout and "Split the 10 hottest keys" in r.stdout


def test_incident_json_contract():
    r = run_cli("diagnose", PROD, "--baseline", TEST, "--profile", PROFILE, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    ranking = doc["ranking"]
    assert [f["cause"] for f in ranking][0] == "key-skew"
    assert {f["cause"] for f in ranking} == set(CAUSES)
    for f in ranking:
        assert {"cause", "verdict", "score", "evidence"} <= set(f)
        assert f["verdict"] in ("fits", "contradicted", "cannot judge")
        assert 0 <= f["score"] <= 1 and f["evidence"]
    assert ranking[0]["verdict"] == "fits"
    verdict = {f["cause"]: f["verdict"] for f in ranking}
    for cause in ("coordinated-omission", "cache-warmth", "network", "payload-size"):
        assert verdict[cause] == "contradicted"
    assert doc["recommendations"][0]["hottest_after"] < doc["recommendations"][0][
        "hottest_before"]


def test_a_malformed_field_is_dropped_with_a_note(tmp_path):
    doc = json.loads(Path(PROD).read_text())
    doc["shards"][3]["cpu"] = 95  # percent instead of a fraction
    doc["payload_bytes_mean"] = "big"
    bad = tmp_path / "prod.json"
    bad.write_text(json.dumps(doc))
    r = run_cli("diagnose", str(bad), "--baseline", TEST, "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    notes = " ".join(out["notes"])
    assert "shards[3].cpu" in notes and "write 0.95 for 95%" in notes
    assert "payload_bytes_mean" in notes
    # per-shard requests survive: the skew is still found
    assert out["ranking"][0]["cause"] == "key-skew"


def test_half_a_dashboard_still_gets_answers(tmp_path):
    path = tmp_path / "prod.json"
    path.write_text(json.dumps({"format": "hotshard.observations/1", "label": "production",
                                "latency_ms": {"p99": 800}}))
    r = run_cli("diagnose", str(path))
    assert r.returncode == 0, r.stderr
    assert "CANNOT JUDGE" in r.stdout and "missing:" in r.stdout


def test_wrong_inputs_are_one_line_exit_2(tmp_path):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"format": "grafana/7", "label": "x"}))
    empty = tmp_path / "empty.json"
    empty.write_text("")
    notjson = tmp_path / "notjson.json"
    notjson.write_text("{cpu: 95%}")
    cases = [
        ((str(other),), "hotshard.observations/1"),
        ((str(empty),), "empty"),
        ((str(notjson),), "not JSON"),
        ((str(tmp_path / "nope.json"),), "nope.json"),
        ((PROD, "--profile", PROD), "profile"),
        ((PROD, "--baseline", str(other)), "other.json"),
    ]
    for args, words in cases:
        r = run_cli("diagnose", *args)
        assert r.returncode == 2, (args, r.stdout)
        assert words in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
