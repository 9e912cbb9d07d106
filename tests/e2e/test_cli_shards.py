"""`hotshard shard` and `hotshard predict` as a user runs them."""

import json

import pytest

from tests.conftest import run_cli, shared


def test_shard_prints_slots_and_shards():
    res = run_cli("shard", "somekey", "{user1000}.following", "{user1000}.followers",
                  "-p", "redis-cluster", "-n", "3", "--json")
    assert res.returncode == 0, res.stderr
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert rows[0]["slot"] == 11058 and rows[0]["shard"] == 2
    assert rows[1]["slot"] == rows[2]["slot"]
    # Kafka's own vector is for the string "21" (StringSerializer): say so explicitly, since
    # integer-looking keys default to 8-byte integers (LongSerializer) by the key-type rule
    text = run_cli("shard", "21", "-p", "kafka", "-n", "64", "--key-type", "text").stdout
    assert "shard 44" in text and "murmur2 -973932308" in text
    as_long = json.loads(run_cli("shard", "21", "-p", "kafka", "-n", "64", "--json").stdout)
    assert as_long["key_type"] == "bigint" and as_long["murmur2"] != -973932308


@pytest.fixture(scope="module")
def web07_json(web07_path):
    return web07_path


@pytest.fixture(scope="module")
def placed_profile(tmp_path_factory):
    path = tmp_path_factory.mktemp("p") / "scarab.json"
    res = run_cli("profile", str(shared("traces", "scarab-recs.parquet")), "--key", "key",
                  "--partitioner", "kafka", "--shards", "16", "-o", str(path))
    assert res.returncode == 0, res.stderr
    return path


def test_profile_records_placement(placed_profile):
    doc = json.loads(placed_profile.read_text())
    rec = doc["placement"]["kafka/16"]
    assert len(rec["tail_events_by_shard"]) == 16
    assert sum(rec["tail_events_by_shard"]) == doc["tail"]["events"]
    assert rec["key_type"] == "bigint"  # an integer key column


def test_predict_json_contract_and_exactness(placed_profile):
    res = run_cli("predict", str(placed_profile), "-p", "kafka", "-n", "16", "--rps", "3000",
                  "--capacity", "400", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["tail_exact"] is True
    assert len(out["shards"]) == 16 and "cpu" in out["shards"][0]
    assert sum(s["share"] for s in out["shards"]) == pytest.approx(1.0)
    assert out["hottest"]["shard"] == max(out["shards"], key=lambda s: s["share"])["shard"]
    assert set(out["uniform_band"]) == {"low", "high", "max_over_mean"}
    # another shard count was not recorded: the tail falls back to its mean and variance
    other = json.loads(run_cli("predict", str(placed_profile), "-p", "kafka", "-n", "32",
                               "--json").stdout)
    assert other["tail_exact"] is False


def test_predict_whatif_text(placed_profile):
    res = run_cli("predict", str(placed_profile), "-p", "cassandra", "-n", "12",
                  "--split-hot", "10:8", "--replicas", "3", "--cache-hit", "0.5")
    assert res.returncode == 0, res.stderr
    assert "before: max/mean" in res.stdout and "after: max/mean" in res.stdout
    assert "uniform keys would give every shard" in res.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["shard", "k", "-p", "dynamo", "-n", "3"], "dynamo"),
    (["shard", "k", "-p", "kafka", "-n", "0"], "--shards"),
    (["shard", "k", "-p", "kafka"], "--shards N"),
    (["shard", "abc", "-p", "cassandra", "-n", "3", "--key-type", "bigint"], "not an integer"),
    (["shard", "k", "-p", "redis-cluster", "--slots-map", "slots.txt"], "unassigned"),
    (["predict", "p.json", "-p", "kafka", "-n", "4", "--rps", "10"], "--capacity"),
    (["predict", "p.json", "-p", "kafka", "-n", "4", "--split-hot", "x"], "K:S"),
    (["predict", "missing.json", "-p", "kafka", "-n", "4"], "no such profile"),
])
def test_bad_input(tmp_path, web07_json, args, message):
    (tmp_path / "slots.txt").write_text("0 100 a\n")
    (tmp_path / "p.json").write_text(web07_json.read_text())
    res = run_cli(*args, cwd=tmp_path)
    assert res.returncode == 2, res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotshard: error: "), res.stderr
    assert message in lines[0]


def test_pseudonymized_profile_end_to_end(tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"s" * 32)
    out = tmp_path / "p.json"
    res = run_cli("profile", str(shared("traces", "web07.parquet")), "--key", "key",
                  "--partitioner", "kafka", "--shards", "16", "--pseudonymize",
                  "--secret-file", str(secret), "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert json.loads(out.read_text())["privacy"]["pseudonymized"] is True
    assert run_cli("predict", str(out), "-p", "kafka", "-n", "16").returncode == 0
    res = run_cli("predict", str(out), "-p", "kafka", "-n", "8")
    assert res.returncode == 2 and "pseudonymized" in res.stderr
    res = run_cli("profile", str(shared("traces", "web07.parquet")), "--key", "key",
                  "--pseudonymize", "-o", str(tmp_path / "x.json"))
    assert res.returncode == 2 and "--secret-file" in res.stderr


def test_generate_follows_recorded_placement(tmp_path, placed_profile):
    out = tmp_path / "g.parquet"
    res = run_cli("generate", str(placed_profile), "--events", "1e4", "--partitioner", "kafka",
                  "--shards", "16", "-o", str(out))
    assert res.returncode == 0, res.stderr
    res = run_cli("generate", str(placed_profile), "--events", "1e4", "--partitioner", "kafka",
                  "--shards", "8", "-o", str(out))
    assert res.returncode == 2 and "recorded no tail placement for kafka/8" in res.stderr
