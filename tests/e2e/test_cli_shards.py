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
    (["shard", "foo", "-p", "map", "-n", "3"], "--partitioner map needs --map FILE"),
    (["predict", "p.json", "-p", "map"], "--partitioner map needs --map FILE"),
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


def test_predict_after_lists_keys_on_the_shards_basis(web07_json):
    res = run_cli("predict", str(web07_json), "-p", "kafka", "-n", "64", "--split-hot", "10:8",
                  "--replicas", "3", "--cache-hit", "0.5", "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    for part in (doc, doc["after"]):
        hottest = part["hottest"]
        assert 0 < sum(k["share"] for k in hottest["top_keys"]) <= hottest["share"]
    # the after band is uniform keys carrying the load left: scaled, its max/mean kept
    after = doc["after"]
    assert after["uniform_band"]["high"] == pytest.approx(
        doc["uniform_band"]["high"] * after["total_share"])
    assert after["uniform_band"]["max_over_mean"] == doc["uniform_band"]["max_over_mean"]
    text = run_cli("predict", str(web07_json), "-p", "kafka", "-n", "64", "--split-hot", "10:8",
                   "--replicas", "3", "--cache-hit", "0.5").stdout
    assert "uniform keys carrying the same load would give every node" in text


def test_predict_says_which_shards_saturate(web07_json):
    args = ("predict", str(web07_json), "-p", "kafka", "-n", "64", "--rps", "3000")
    res = run_cli(*args, "--capacity", "10")
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "warning: 64 of 64 shards saturate at 3,000 rps (CPU over 100%): 10, 27," in text
    assert "queues grow without bound" in text
    assert "The hottest, shard 10, reaches 100% CPU at 272 rps in total." in text
    doc = json.loads(run_cli(*args, "--capacity", "100", "--json").stdout)
    assert doc["saturated"] == [10]
    assert doc["max_rps"] == pytest.approx(100 / doc["hottest"]["share"])
    calm = run_cli(*args, "--capacity", "1000")
    assert "warning" not in calm.stdout and "no shard saturates at 3,000 rps" in calm.stdout
    assert json.loads(run_cli(*args, "--capacity", "1000", "--json").stdout)["saturated"] == []


def test_predict_says_when_it_splits_fewer_keys_than_asked(web07_json):
    res = run_cli("predict", str(web07_json), "-p", "kafka", "-n", "64", "--split-hot",
                  "10000:8")
    assert res.returncode == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "what if: top 500 keys split into 8" in text
    assert "note: the profile names only its 500 head keys, so only the top 500 are split, " \
        "not the 10,000 asked for" in text
    doc = json.loads(run_cli("predict", str(web07_json), "-p", "kafka", "-n", "64",
                             "--split-hot", "10000:8", "--json").stdout)
    assert doc["whatif"]["split_hot"] == "10000:8"
    assert doc["whatif"]["split_keys_effective"] == 500
    plain = run_cli("predict", str(web07_json), "-p", "kafka", "-n", "64", "--split-hot", "10:8")
    assert "note:" not in plain.stdout


def test_predict_grammar_and_columns(web07_json):
    one = run_cli("predict", str(web07_json), "-p", "kafka", "-n", "1").stdout
    assert "(1 shard;" in one and "1 shards" not in one
    nine = run_cli("predict", str(web07_json), "-p", "kafka", "-n", "9").stdout
    assert "... 1 more shard at " in nine
    for n in ("12", "100000"):
        out = run_cli("predict", str(web07_json), "-p", "kafka", "-n", n, "--rps", "3000",
                      "--capacity", "400").stdout
        rows = [line for line in out.splitlines() if line.startswith("    shard ")]
        assert len(rows) == 8
        # every column starts at the same place whatever the shard number's width
        for column in ("%", "cpu"):
            assert len({row.index(column) for row in rows}) == 1, rows


def test_shard_shows_the_key_type_and_notes_mixed_keys():
    alone = run_cli("shard", "71", "-p", "kafka", "-n", "64")
    assert alone.returncode == 0 and alone.stderr == ""
    assert alone.stdout.startswith("71\tshard 10  bigint  murmur2 ")
    mixed = run_cli("shard", "71", "foobar", "-p", "kafka", "-n", "64")
    assert mixed.returncode == 0, mixed.stderr
    assert mixed.stdout.splitlines()[0].startswith("71\tshard 11  text  murmur2 ")
    note = mixed.stderr.strip()
    assert len(note.splitlines()) == 1 and note.startswith("hotshard: note: mixed keys")
    assert "all are hashed as text" in note and "--key-type bigint" in note
    # said explicitly, or a store that hashes text anyway: nothing to note
    for args in (("--key-type", "text", "-p", "kafka", "-n", "64"),
                 ("-p", "redis-cluster", "-n", "3")):
        res = run_cli("shard", "71", "foobar", *args)
        assert res.returncode == 0 and res.stderr == "", res.stderr
        assert "  text  " in res.stdout.splitlines()[0]


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
    res = run_cli("generate", str(placed_profile), "--messages", "1e4", "--partitioner", "kafka",
                  "--shards", "16", "-o", str(out))
    assert res.returncode == 0, res.stderr
    res = run_cli("generate", str(placed_profile), "--messages", "1e4", "--partitioner", "kafka",
                  "--shards", "8", "-o", str(out))
    assert res.returncode == 2 and "recorded no tail placement for kafka/8" in res.stderr
