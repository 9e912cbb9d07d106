"""`hotshard profile` and `hotshard inspect` as a user runs them."""

import json

import pytest

from tests.conftest import run_cli, shared, trace_profile


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
        (["inspect", "in.csv"], "in.csv is not a profile (JSON expected"),
        (["profile", "in.csv", "--key", "k", "--counts", "k", "-o", "p.json"],
         "the key and counts columns are both 'k'"),
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


def test_inspect_a_json_object_that_is_no_profile(tmp_path):
    (tmp_path / "notprofile.json").write_text('{"a": 1}')
    res = run_cli("inspect", "notprofile.json", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "hotshard: error: notprofile.json: not a hotshard profile (it has no format field): "
        "write one from event data with hotshard profile")


@pytest.mark.parametrize("command", [["inspect"], ["predict", "-p", "kafka", "-n", "4"],
                                     ["generate", "--messages", "10", "-o", "out.csv"]])
def test_a_parquet_table_given_as_a_profile_is_named(tmp_path, command):
    import shutil

    shutil.copy(shared("traces", "web12.parquet"), tmp_path / "x.parquet")
    res = run_cli(command[0], "x.parquet", *command[1:], cwd=tmp_path)
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert "x.parquet is a Parquet file, not a profile (JSON expected)" in lines[0]
    assert "input for hotshard profile" in lines[0]


def test_inspect_shows_small_shares_and_whole_counts(tmp_path):
    # corda-vault: every key 1-2 times, so the top key is ~0.0015% of events, not "0.00%"
    path = tmp_path / "corda.json"
    trace_profile("corda-vault").save(path)
    res = run_cli("inspect", str(path))
    assert res.returncode == 0, res.stderr
    assert "top-1 key        0.0015%" in res.stdout
    assert "top-10 keys      0.015%" in res.stdout
    assert "head             500 keys carry 0.74% of events" in res.stdout
    out = run_cli("inspect", str(path), "--json").stdout
    assert '"events": 135702,' in out and '"keys": 90468,' in out
    assert json.loads(out)["events"] == 135702


def test_inspect_a_power_law_without_its_fit_statistics(tmp_path, web07_profile):
    doc = web07_profile.to_dict()
    doc["tail"]["power_law"] = {"alpha": 2.5, "xmin": 4}  # written by hand: no se, KS, n_tail
    (tmp_path / "p.json").write_text(json.dumps(doc))
    res = run_cli("inspect", "p.json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert ("tail power law   alpha 2.500, xmin 4 (fit quality unknown (the profile records "
            "no KS distance))") in res.stdout


def test_inspect_rejects_another_format_version(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"format": "hotshard.profile/9"}))
    res = run_cli("inspect", "p.json", cwd=tmp_path)
    assert res.returncode == 2
    assert "this hotshard reads 'hotshard.profile/1'" in res.stderr
