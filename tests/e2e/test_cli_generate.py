"""`hotshard generate` as a user runs it."""

import json

import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli


@pytest.fixture(scope="module")
def profile_path(web07_path):
    return web07_path


def test_generate_verify_and_reproduce(tmp_path, profile_path):
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    res = run_cli("generate", str(profile_path), "--messages", "2e5", "--seed", "4", "-o", str(a),
                  "--workers", "1")
    assert res.returncode == 0, res.stderr
    assert run_cli("generate", str(profile_path), "--messages", "2e5", "--seed", "4", "-o", str(b),
                   "--workers", "2").returncode == 0
    assert a.read_bytes() == b.read_bytes()
    table = pq.read_table(a)
    assert table.num_rows == 200_000
    assert table.column_names == ["timestamp", "channel_id", "message_id", "user_id", "size",
                                  "op"]
    res = run_cli("generate", "verify", str(profile_path), str(a))
    assert res.returncode == 0, res.stdout
    # in locality order the counts are given, not drawn: both checks are exact
    assert "PASS  head counts: 0 of 500 head keys off their exact count" in res.stdout
    assert "their counts exactly the profile's classes" in res.stdout
    c = tmp_path / "c.parquet"  # independent draws: the statistical bands
    assert run_cli("generate", str(profile_path), "--messages", "2e5", "--seed", "4", "-o",
                   str(c), "--order", "irm").returncode == 0
    res = run_cli("generate", "verify", str(profile_path), str(c))
    assert res.returncode == 0, res.stdout
    assert "PASS  head shares" in res.stdout and "PASS  tail counts" in res.stdout


def test_verify_fails_for_uniform_keys(tmp_path, profile_path):
    out = tmp_path / "u.parquet"
    assert run_cli("generate", "--dist", "uniform:20484", "--messages", "1e5", "-o",
                   str(out)).returncode == 0
    res = run_cli("generate", "verify", str(profile_path), str(out))
    assert res.returncode == 1
    assert "FAIL  head shares" in res.stdout


def test_classic_distribution_to_stdout_csv():
    res = run_cli("generate", "--dist", "zipf:0.99:1000", "--messages", "5", "--seed", "1",
                  "-o", "-")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert lines[0] == '"timestamp","channel_id","message_id","user_id","size","op"'
    assert len(lines) == 6


def test_jsonl_with_event_and_rate(tmp_path, profile_path):
    out = tmp_path / "e.jsonl"
    res = run_cli("generate", str(profile_path), "--rps", "1000", "--duration", "20s",
                  "--event", "4711:0.5:5s:10s", "-o", str(out))
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 20_000
    hot = [r for r in rows if r["channel_id"] == 4711]
    assert 2000 < len(hot) < 3000  # 5000 events in the window, half of them (sd 35)


@pytest.mark.parametrize(("args", "message"), [
    (["--dist", "gauss:3", "--messages", "10", "-o", "x.parquet"], "unknown distribution"),
    (["--dist", "zipf:0:10", "--messages", "10", "-o", "x.parquet"], "s must be > 0"),
    (["--dist", "zipf:-1:10", "--messages", "10", "-o", "x.parquet"], "s must be > 0"),
    (["--dist", "uniform:10", "--messages", "0", "-o", "x.parquet"], "--messages"),
    (["--dist", "uniform:10", "--messages", "-5", "-o", "x.parquet"], "--messages"),
    (["--dist", "uniform:10", "--messages", "10", "-o", "nodir/x.parquet"], "does not exist"),
    (["old.json", "--messages", "10", "-o", "x.parquet"], "this hotshard reads"),
    (["--dist", "uniform:10", "--messages", "10"], "-o OUT"),
    (["--dist", "uniform:10", "--messages", "10", "-o", "x.parquet", "--event", "a:2:1s:2s"],
     "--event"),
])
def test_bad_input_one_line_no_output(tmp_path, args, message):
    (tmp_path / "old.json").write_text(json.dumps({"format": "hotshard.profile/0"}))
    res = run_cli("generate", *args, cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotshard: error: "), res.stderr
    assert message in lines[0]
    assert not (tmp_path / "x.parquet").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["old.json"]  # no temp files left either
