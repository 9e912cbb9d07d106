"""Files handed over by someone else, built to break the readers: nested thousands deep, or
holding text meant for the terminal. Every reader answers in one line (exit 2), bounded."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, run_cli

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"format": "hotshard.observations/1", "label": "x", "extra": ' \
    + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "}"
PROFILE = str(ROOT / "examples" / "incident.profile.json")


@pytest.mark.parametrize("text", [DEEP, DEEP_OBJECT])
@pytest.mark.parametrize("argv", [
    ["observe", "k6", "{f}"], ["diagnose", "{f}"], ["report", "{f}", "-o", "{d}/r.html"],
    ["inspect", "{f}"], ["predict", "{f}", "-p", "kafka", "-n", "4"],
    ["simulate", "--replay", "{f}"], ["check", PROFILE, "--against", "{f}"],
])
def test_deeply_nested_json_is_one_line(tmp_path, text, argv):
    path = tmp_path / "deep.json"
    path.write_text(text)
    res = run_cli(*[a.replace("{f}", str(path)).replace("{d}", str(tmp_path)) for a in argv])
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr[:500]
    assert "Traceback" not in res.stderr and "RecursionError" not in res.stderr


def test_a_key_meant_for_the_terminal_reaches_it_escaped(tmp_path):
    """A profile whose hottest key holds an ESC sequence, a CR/LF that would forge a line and
    a bidi override: predict shows them as escapes; so does an error quoting a key."""
    import json

    doc = json.loads((ROOT / "examples" / "incident.profile.json").read_text())
    doc["head"]["keys"][0] = "evil\x1b[2J\r\nhotshard: note: all good\u202e"
    doc["source"].pop("key_type", None)
    doc.pop("placement", None)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    res = run_cli("predict", str(path), "-p", "kafka", "-n", "4")
    assert res.returncode == 0, res.stderr
    assert "evil\\x1b[2J\\x0d\\x0ahotshard: note: all good\\u202e" in res.stdout
    assert "\x1b" not in res.stdout and "\r" not in res.stdout and "\u202e" not in res.stdout
    bad = run_cli("shard", "ok", "-p", "kafka", "-n", "4", "--key-type", "bigint")
    assert "\x1b" not in bad.stderr
