"""`hotshard check` as a pipeline runs it: exit 1 refuses a test that hides a hot spot."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli, shared


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("check")
    web07 = d / "web07.json"
    r = run_cli("profile", str(shared("traces", "web07.parquet")), "--key", "key", "-o",
                str(web07), "-q")
    assert r.returncode == 0, r.stderr
    space = np.unique(pq.read_table(shared("traces", "web07.parquet")).column("key")
                      .to_numpy())
    uniform = d / "uniform.parquet"
    pq.write_table(pa.table({"key": np.random.default_rng(1).choice(space, 200_000)}), uniform)
    generated = d / "generated.parquet"
    r = run_cli("generate", str(web07), "--messages", "200000", "--seed", "2", "-o",
                str(generated))
    assert r.returncode == 0, r.stderr
    return d, web07, uniform, generated


def test_uniform_keys_fail_and_name_what_they_hide(files):
    _, web07, uniform, _ = files
    r = run_cli("check", str(uniform), "--against", str(web07), "-p", "kafka", "-n", "16")
    assert r.returncode == 1, r.stderr
    assert "FAIL  head-coverage" in r.stdout and "FAIL  hot-shard" in r.stdout
    # the verdict: the last paragraph, wrapped to the terminal as the messages are
    last = " ".join(line.strip() for line in r.stdout.strip().split("\n\n")[-1].splitlines())
    assert last.startswith("FAIL (head-coverage, top-shares, hot-shard); it would hide hot "
                           "keys 107, 71, 73")
    assert "hot shard 10" in last and "exit status 1" in last
    # a power law fitted to uniform keys means nothing: the check says it does not apply
    assert "N/A   tail-exponent\n      does not apply: the test's keys are near uniform" \
        in r.stdout


def test_generated_keys_pass_and_json_contract(files):
    _, web07, _, generated = files
    r = run_cli("check", str(generated), "--key", "channel_id", "--against", str(web07),
                "-p", "kafka", "-n", "16", "--cache-size", "2000", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "pass" and doc["exit_status"] == 0
    names = [c["name"] for c in doc["checks"]]
    assert names == ["head-coverage", "top-shares", "tail-exponent", "working-set", "hot-shard"]
    for c in doc["checks"]:
        assert c["verdict"] in ("pass", "warn", "fail") and c["message"] and c["numbers"]
    assert doc["thresholds"]["head_fail"] == 0.5


def test_a_profile_of_the_test_works_as_input(files, tmp_path):
    _, web07, uniform, _ = files
    prof = tmp_path / "test.profile.json"
    assert run_cli("profile", str(uniform), "--key", "key", "-o", str(prof), "-q"
                   ).returncode == 0
    r = run_cli("check", str(prof), "--against", str(web07))
    assert r.returncode == 1 and "FAIL  head-coverage" in r.stdout


def test_threshold_override_changes_the_verdict(files):
    _, web07, uniform, _ = files
    loose = ["--threshold", "head_fail=0", "--threshold", "head_warn=0", "--threshold",
             "share_fail=0", "--threshold", "share_warn=0", "--threshold", "hidden_key_fail=1",
             "--threshold", "hidden_share_fail=1"]
    r = run_cli("check", str(uniform), "--against", str(web07), *loose)
    assert r.returncode == 0, r.stdout


def test_uniform_keys_pass_against_a_store_without_hot_spots(tmp_path):
    corda = tmp_path / "corda.json"
    assert run_cli("profile", str(shared("traces", "corda-vault.parquet")), "--key", "key",
                   "-o", str(corda), "-q").returncode == 0
    space = np.unique(pq.read_table(shared("traces", "corda-vault.parquet")).column("key")
                      .to_numpy())
    test = tmp_path / "uniform.parquet"
    pq.write_table(pa.table({"key": np.random.default_rng(3).choice(space, 20_000)}), test)
    r = run_cli("check", str(test), "--against", str(corda))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no semantic hot spot" in r.stdout and "uniform test keys are right" in r.stdout


def test_wrong_inputs_exit_2_in_one_line(files, tmp_path):
    d, web07, uniform, _ = files
    short = tmp_path / "short.parquet"
    pq.write_table(pa.table({"key": np.arange(100)}), short)
    cases = [
        ((str(tmp_path / "nope.parquet"), "--against", str(web07)), "nope.parquet"),
        ((str(uniform), "--against", str(uniform)), "uniform.parquet"),
        ((str(short), "--against", str(web07)), "the checks need at least"),
        ((str(uniform), "--against", str(web07), "--key", "channel"), "no column 'channel'"),
        ((str(uniform), "--against", str(web07), "--threshold", "head_fial=1"),
         "unknown threshold"),
        ((str(uniform), "--against", str(web07), "--threshold", "oops"), "NAME=VALUE"),
        ((str(uniform), "--against", str(web07), "-n", "4"), "--shards goes with"),
        ((str(uniform), "--against", str(web07), "-p", "kafka"), "--shards"),
    ]
    for args, words in cases:
        r = run_cli("check", *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert words in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr


@pytest.mark.parametrize("fmt, name, extra", [("k6", "keys.json", ()),
                                               ("csv-feeder", "keys.csv", ("--key", "channel_id"))])
def test_feeder_files_are_test_inputs_too(files, tmp_path, fmt, name, extra):
    """What a team hands to k6 or JMeter is what check reads: a k6 key array (its column is
    `key`) or a csv-feeder file."""
    _, web07, _, _ = files
    out = tmp_path / name
    r = run_cli("generate", str(web07), "--messages", "100000", "--seed", "5", "--format", fmt,
                "-o", str(out))
    assert r.returncode == 0, r.stderr
    r = run_cli("check", str(out), *extra, "--against", str(web07), "-p", "kafka", "-n", "16")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1].startswith("PASS")


@pytest.mark.parametrize("fmt, name", [("jsonl", "keys.json"), ("csv-feeder", "feed.csv")])
def test_generate_outputs_are_read_as_events_with_their_key_column(files, tmp_path, fmt,
                                                                   name):
    """generate's JSON lines named .json are events, not a profile; a one-column feeder's
    column is the key without --key."""
    _, web07, _, _ = files
    out = tmp_path / name
    assert run_cli("generate", str(web07), "--messages", "100000", "--seed", "6", "--format",
                   fmt, "-o", str(out)).returncode == 0
    extra = ("--key", "channel_id") if fmt == "jsonl" else ()
    r = run_cli("check", str(out), *extra, "--against", str(web07))
    assert r.returncode == 0, r.stdout + r.stderr


def test_json_pipelines_get_an_answer_on_errors_too(files, tmp_path):
    _, web07, _, _ = files
    r = run_cli("check", str(tmp_path / "nope.parquet"), "--against", str(web07), "--json")
    assert r.returncode == 2 and "nope.parquet" in r.stderr
    assert json.loads(r.stdout) == {"verdict": "error", "exit_status": 2,
                                    "error": f"no such file: {tmp_path / 'nope.parquet'}"}
