"""`hotshard report` as a user runs it: simulated runs and the example files in, one HTML out;
bad input refused in one line, exit 2, nothing left behind."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_cli, run_cli_subprocess

EXAMPLES = ROOT / "examples"
PROFILE = EXAMPLES / "incident.profile.json"

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """The incident's load test, production and mitigated production, 20 simulated s each."""
    folder = tmp_path_factory.mktemp("runs")
    out = {}
    for name in ("incident-test", "incident-production", "incident-mitigated"):
        res = run_cli("simulate", "--scenario", name, "--duration", "20s", "-o",
                      f"{name}.json", cwd=folder)
        assert res.returncode == 0, res.stderr
        out[name] = folder / f"{name}.json"
    return out


def _refused(res, folder: Path, output: str, *words: str) -> None:
    """Exit 2, one `hotshard: error:` line holding ``words``, no report nor temporary file."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotshard: error: "), res.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    name = Path(output).name
    assert not (folder / output).exists()
    assert not list(folder.rglob(f".{name}.*.tmp"))


def _section(page: str, name: str) -> str:
    return re.search(rf'<section id="{name}">(.*?)</section>', page, flags=re.S).group(1)


def test_the_incident_story_in_one_file(runs, tmp_path):
    res = run_cli("report", str(runs["incident-test"]), str(runs["incident-production"]),
                  str(runs["incident-mitigated"]), "--profile", str(PROFILE),
                  "-o", "report.html", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "wrote report.html"
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    header = page.split("</header>")[0]
    assert "kafka, 64 shards, bigint keys" in header  # the layout the simulated runs record
    assert re.search(r"simulation: incident-production</td><td>production", header)
    assert re.search(r"simulation: incident-test</td><td>load test \(baseline\)", header)
    for name in ("profile", "shards", "latency", "mitigations"):
        assert "<svg" in _section(page, name), name
    assert "top 10 keys split into 8 time-bucket sub-partitions" in _section(page, "mitigations")
    diagnosis = _section(page, "diagnosis")
    first = re.search(r"<code>([a-z-]+)</code>", diagnosis).group(1)
    assert first == "key-skew"
    assert "Most likely: <b>Key skew" in diagnosis and '<span class="fits">fits</span>' \
        in diagnosis


def test_the_example_evidence_files_without_a_profile(tmp_path):
    res = run_cli("report", str(EXAMPLES / "incident-production.json"),
                  str(EXAMPLES / "incident-loadtest.json"), "-o", "r.html", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "No profile given" in _section(page, "profile")
    assert "No run with mitigations given" in _section(page, "mitigations")
    assert "<svg" in _section(page, "shards") and "<svg" in _section(page, "latency")
    assert re.search(r"<code>key-skew</code>", _section(page, "diagnosis"))


def test_a_malformed_field_is_left_out_with_a_note(tmp_path):
    doc = json.loads((EXAMPLES / "incident-production.json").read_text())
    doc["payload_bytes_mean"] = "big"
    (tmp_path / "prod.json").write_text(json.dumps(doc))
    res = run_cli("report", "prod.json", str(EXAMPLES / "incident-loadtest.json"), "-o",
                  "r.html", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    header = (tmp_path / "r.html").read_text(encoding="utf-8").split("</header>")[0]
    assert "Notes on the inputs" in header and "payload_bytes_mean" in header


def test_options_name_the_layout_to_predict_on(runs, tmp_path):
    res = run_cli("report", str(runs["incident-production"]), "--profile", str(PROFILE),
                  "-p", "jump", "-n", "8", "--key-type", "text", "--title", "week 49",
                  "-o", "r.html", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "<title>week 49</title>" in page
    assert "jump, 8 shards, text keys" in page


@pytest.mark.parametrize(("setup", "args", "output", "words"), [
    (None, ["missing.json"], "r.html", ["missing.json"]),
    (None, ["missing.json"], "r.txt", ["must end in .html"]),  # checked before reading
    ({"empty.json": ""}, ["empty.json"], "r.html", ["empty.json", "empty"]),
    ({"x.json": "{not json"}, ["x.json"], "r.html", ["x.json", "not JSON"]),
    ({"x.json": '{"format": "hotshard.profile/1", "label": "p"}'}, ["x.json"], "r.html",
     ["x.json", "this is a profile"]),
    ({"ok.json": '{"format": "hotshard.observations/1", "label": "p"}'}, ["ok.json"],
     "r.txt", ["must end in .html"]),
    ({"ok.json": '{"format": "hotshard.observations/1", "label": "p"}'}, ["ok.json"],
     "nowhere/r.html", ["does not exist"]),
    ({"ok.json": '{"format": "hotshard.observations/1", "label": "p"}'},
     ["ok.json", "--profile", "ok.json"], "r.html", ["ok.json"]),
    ({"ok.json": '{"format": "hotshard.observations/1", "label": "p"}'},
     ["ok.json", "-p", "nosuch"], "r.html", ["nosuch"]),
])
def test_bad_input_is_refused_in_one_line(tmp_path, setup, args, output, words):
    for name, text in (setup or {}).items():
        (tmp_path / name).write_text(text)
    res = run_cli("report", *args, "-o", output, cwd=tmp_path)
    _refused(res, tmp_path, output, *words)
    assert not (tmp_path / "r.html").exists()


def test_the_output_must_be_given(tmp_path):
    res = run_cli("report", str(EXAMPLES / "incident-production.json"), cwd=tmp_path)
    assert res.returncode == 2 and "-o" in res.stderr


def test_the_installed_command_writes_the_report(tmp_path):
    res = run_cli_subprocess("report", str(EXAMPLES / "incident-production.json"), "-o",
                             "r.html", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "r.html").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_help_explains_the_roles():
    res = run_cli("report", "--help")
    assert res.returncode == 0
    assert "production" in res.stdout and "--profile" in res.stdout
