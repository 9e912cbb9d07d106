"""`hotshard profile` and `hotshard inspect` as a user runs them."""

import json

import pytest

from tests.conftest import run_cli, shared


def test_profile_then_inspect(tmp_path):
    out = tmp_path / "web12.json"
    res = run_cli("profile", str(shared("traces", "web12.parquet")), "--key", "key",
                  "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "95,607 events, 13,756 keys" in res.stdout
    assert res.stderr == ""  # no progress bar when not a terminal
    doc = json.loads(out.read_text())
    assert doc["format"] == "hotshard.profile/1"
    assert doc["totals"] == {"events": 95607, "keys": 13756}

    res = run_cli("inspect", str(out), "--plot", str(tmp_path / "rf.png"))
    assert res.returncode == 0, res.stderr
    assert "top-1% of keys" in res.stdout and "tail power law   alpha" in res.stdout
    assert (tmp_path / "rf.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    summary = json.loads(run_cli("inspect", str(out), "--json").stdout)
    assert summary["events"] == 95607
    assert 0 < summary["top1_share"] < summary["top10_share"] < summary["top1pct_share"] < 1


def test_inspect_warns_when_keys_have_no_hot_spot(tmp_path):
    out = tmp_path / "corda.json"
    assert run_cli("profile", str(shared("traces", "corda-vault.parquet")), "--key", "key",
                   "-o", str(out)).returncode == 0
    res = run_cli("inspect", str(out))
    assert "no semantic hot spot" in res.stdout and "uniform keys would be fine" in res.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["profile", "missing.parquet", "--key", "k", "-o", "p.json"], "no such file"),
        (["profile", "in.csv", "--key", "nope", "-o", "p.json"], "no column 'nope'"),
        (["profile", "in.csv", "--key", "k", "--counts", "n", "-o", "p.json"], "negative count"),
        (["profile", ".", "--key", "k", "-o", "p.json"], "is a directory"),
        (["profile", "in.csv", "--key", "k", "--top-k", "0", "-o", "p.json"], "--top-k"),
        (["inspect", "in.csv"], "not valid JSON"),
        (["inspect", "missing.json"], "no such profile"),
    ],
)
def test_bad_input_one_line_and_no_output(tmp_path, args, message):
    (tmp_path / "in.csv").write_text("k,n\na,4\nb,-2\n")
    res = run_cli(*args, cwd=tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotshard: error: "), res.stderr
    assert message in lines[0]
    assert not (tmp_path / "p.json").exists()


def test_inspect_rejects_another_format_version(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"format": "hotshard.profile/9"}))
    res = run_cli("inspect", "p.json", cwd=tmp_path)
    assert res.returncode == 2
    assert "this hotshard reads 'hotshard.profile/1'" in res.stderr
