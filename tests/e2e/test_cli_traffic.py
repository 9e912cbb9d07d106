"""The failures this tool exists to prevent: traffic that is silently wrong.

Scaling the key space must keep the hot keys hot; a big event must happen inside the run; the
shard a key is said to live on must not depend on which command is asked.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli, shared


def test_more_keys_keep_the_head_hot_and_pass_verify(tmp_path, web07_path, web07_profile):
    out = tmp_path / "big.parquet"
    res = run_cli("generate", str(web07_path), "--keys", "1e9", "--rps", "3000",
                  "--duration", "5m", "-o", str(out), "-q")
    assert res.returncode == 0, res.stderr
    keys = pq.read_table(out, columns=["channel_id"]).column("channel_id").to_numpy()
    assert keys.size == 900_000
    top_key, top_share = web07_profile.head_keys[0], web07_profile.head_counts[0] / \
        web07_profile.events
    seen = float((keys == int(top_key)).mean())
    # binomial: sd = sqrt(p(1-p)/n) ~ 0.00014 at p = 0.0187, n = 9e5; 6 sd either way
    sd = (top_share * (1 - top_share) / keys.size) ** 0.5
    assert abs(seen - top_share) < 6 * sd, (seen, top_share)
    verified = run_cli("generate", "verify", str(web07_path), str(out), "--keys", "1e9")
    assert verified.returncode == 0, verified.stdout
    assert "result: pass" in verified.stdout
    # the Parquet file records how it was made, so verifying needs no repeated options
    recorded = run_cli("generate", "verify", str(web07_path), str(out))
    assert recorded.returncode == 0 and "result: pass" in recorded.stdout, recorded.stdout


def test_verify_of_a_scaled_csv_says_which_option_is_missing(tmp_path, web07_path):
    # 1e6 keys, ~50x web07's 20,484: 2e5 events then touch ~110,000 distinct tail keys against
    # the profile's ~20,000, as 1e8 did (same verdicts and lines); the locality order's
    # per-key work grows with --keys (1e8 took ~14 s of CPU here, 1e6 ~0.4 s)
    out = tmp_path / "big.csv"
    assert run_cli("generate", str(web07_path), "--keys", "1e6", "--messages", "2e5",
                   "-o", str(out), "-q").returncode == 0
    plain = run_cli("generate", "verify", str(web07_path), str(out))
    assert plain.returncode == 1
    assert "more distinct tail keys than the profile" in plain.stdout
    scaled = run_cli("generate", "verify", str(web07_path), str(out), "--keys", "1e6")
    assert scaled.returncode == 0, scaled.stdout


def test_extend_scaling_is_explicit_and_dilutes_the_head(tmp_path, web07_path, web07_profile):
    out = tmp_path / "extended.parquet"
    res = run_cli("generate", str(web07_path), "--keys", "1e7", "--key-scaling", "extend",
                  "--messages", "200000", "-o", str(out), "-q")
    assert res.returncode == 0, res.stderr
    keys = pq.read_table(out, columns=["channel_id"]).column("channel_id").to_numpy()
    top_share = web07_profile.head_counts[0] / web07_profile.events
    # ~490x the tail at the same per-key counts: the top key falls ~200-fold (1.87% -> <0.02%)
    assert (keys == int(web07_profile.head_keys[0])).mean() < top_share / 50


def test_event_after_the_end_of_the_run_is_an_error(tmp_path):
    res = run_cli("generate", "--dist", "zipf:1.1:1e4", "--messages", "1e6",
                  "--event", "4711:0.4:10m:40m", "-o", str(tmp_path / "e.parquet"))
    assert res.returncode == 2
    line = res.stderr.strip()
    assert line.startswith("hotshard: error:") and len(line.splitlines()) == 1
    # 1e6 events at the default 3000/s end after 5m33s; the event starts at 10m
    assert "starts at 10m" in line and "ends at 5m33s" in line, line
    assert not list(tmp_path.iterdir())


def test_event_cut_short_by_the_end_of_the_run_is_a_warning(tmp_path):
    res = run_cli("generate", "--dist", "zipf:1.1:1e4", "--messages", "1e6",
                  "--event", "4711:0.4:1m:40m", "-o", str(tmp_path / "e.parquet"), "-q")
    assert res.returncode == 0, res.stderr
    assert "warning: the event on key 4711 is cut short" in res.stderr
    keys = pq.read_table(tmp_path / "e.parquet", columns=["channel_id"]).column("channel_id")
    # from minute 1 to the end (5m33s), 40% of traffic goes to 4711 (plus its zipf share)
    assert (keys.to_numpy() == 4711).mean() > 0.4 * (333 - 60) / 333 - 0.01


@pytest.mark.parametrize("store", ["cassandra", "kafka", "mongodb", "jump", "redis-cluster"])
def test_shard_agrees_with_predict_on_every_hot_key(web07_path, store):
    pred = run_cli("predict", str(web07_path), "-p", store, "-n", "12", "--json",
                   "--cached-keys", "5")
    assert pred.returncode == 0, pred.stderr
    hottest = json.loads(pred.stdout)["hottest"]
    listed = [row["key"] for row in hottest["top_keys"]]
    assert listed
    placed = run_cli("shard", *listed, "-p", store, "-n", "12", "--json")
    assert placed.returncode == 0, placed.stderr
    rows = [json.loads(line) for line in placed.stdout.splitlines()]
    assert [r["shard"] for r in rows] == [hottest["shard"]] * len(listed)
    # web07's keys are integers: stores that type keys place them as 8-byte integers
    assert rows[0]["key_type"] == ("text" if store == "redis-cluster" else "bigint")


def test_predict_labels_what_the_after_shares_are(web07_path):
    res = run_cli("predict", str(web07_path), "-p", "kafka", "-n", "16", "--replicas", "3",
                  "--cache-hit", "0.5")
    assert res.returncode == 0, res.stderr
    assert "split 0:1" not in res.stdout and "split" not in res.stdout.split("what if:")[1] \
        .splitlines()[0]
    assert "reads spread over 3 replicas" in res.stdout
    assert "not 100%" in res.stdout and "reach one node of each shard" in res.stdout
    doc = json.loads(run_cli("predict", str(web07_path), "-p", "kafka", "-n", "16",
                             "--replicas", "3", "--json").stdout)
    assert doc["whatif"]["split_hot"] is None
    assert doc["total_share"] == pytest.approx(1.0)
    # reads (90% by default) over 3 replicas: 0.1 + 0.9 / 3 = 40% of requests per node
    assert doc["after"]["total_share"] == pytest.approx(0.4)
    assert "one node" in doc["after"]["basis"]


def test_predict_coalesce_is_a_switch_whose_merges_come_from_the_rates(web07_path):
    base = ["predict", str(web07_path), "-p", "kafka", "-n", "16"]
    res = run_cli(*base, "--coalesce")
    assert res.returncode == 2 and "--coalesce needs --rps and --capacity" in res.stderr
    res = run_cli(*base, "--coalesce", "0.5")  # the old fraction is no longer a value
    assert res.returncode == 2
    doc = json.loads(run_cli(*base, "--coalesce", "--rps", "3000", "--capacity", "400",
                             "--json").stdout)
    assert doc["whatif"]["coalesce"] is True and 0 < doc["whatif"]["coalesced_share"] < 0.9
    assert doc["after"]["total_share"] == pytest.approx(1 - doc["whatif"]["coalesced_share"])


def test_split_alone_adds_up_and_needs_no_label(web07_path):
    res = run_cli("predict", str(web07_path), "-p", "kafka", "-n", "16", "--split-hot", "10:4")
    assert res.returncode == 0, res.stderr
    assert "top 10 keys split into 4 time-bucket sub-partitions" in res.stdout
    assert "not 100%" not in res.stdout


def test_a_profile_with_operations_generates_traffic_that_verifies(tmp_path):
    trace = str(shared("traces", "cloudphysics.parquet"))
    prof, out = tmp_path / "cp.json", tmp_path / "g.parquet"
    assert run_cli("profile", trace, "--key", "lbn", "--op", "op", "--size", "size",
                   "-o", str(prof), "-q").returncode == 0
    assert run_cli("generate", str(prof), "--messages", "3e5", "--seed", "1", "-o", str(out),
                   "-q").returncode == 0
    verified = run_cli("generate", "verify", str(prof), str(out))
    assert verified.returncode == 0 and "result: pass" in verified.stdout, verified.stdout


def _one_error_line(res) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotshard: error:"), res.stderr
    return lines[0]


@pytest.mark.parametrize(("args", "words"), [
    (["PROFILE", "--messages", "1e5", "--keys", "1e19"], "keys must be at most 1e+15"),
    (["PROFILE", "--messages", "1e5", "--keys", "1e30"], "keys must be at most 1e+15"),
    (["--dist", "uniform:1e19", "--messages", "1e3"], "n_keys must be at most 1e+15"),
    (["--dist", "uniform:inf", "--messages", "10"], "key count must be an integer"),
    (["--messages", "10"], "give a PROFILE or --dist SPEC"),
    (["PROFILE", "--dist", "uniform:9", "--messages", "10"], "not both"),
    (["PROFILE", "--messages", "10", "--partitioner", "kafka"], "needs --shards N"),
    (["PROFILE", "--messages", "1e3", "--rps", "10", "--duration", "1h"],
     "1,000 events at 10/s last 1m40s, not 1h"),
    (["PROFILE", "--messages", "1e6", "--event", "71:0.6:1m:2m", "--event", "73:0.6:1m30s:3m"],
     "at 1m30s into the run the events on 71 (0.6), 73 (0.6) ask for 120% of all traffic"),
])
def test_impossible_workloads_are_refused(tmp_path, web07_path, args, words):
    args = [str(web07_path) if a == "PROFILE" else a for a in args]
    res = run_cli("generate", *args, "-o", str(tmp_path / "g.parquet"))
    assert words in _one_error_line(res)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("out", "fmt", "words"), [
    ("g.csv.gz", None, "g.csv.gz from its name"),
    ("g.txt", None, "cannot tell the format"),
    ("g.parquet", "csv", "names a parquet file but the format is csv"),
])
def test_the_output_name_and_format_must_agree(tmp_path, out, fmt, words):
    extra = ["--format", fmt] if fmt else []
    res = run_cli("generate", "--dist", "uniform:10", "--messages", "10", "-o",
                  str(tmp_path / out), *extra)
    assert words in _one_error_line(res)
    assert not list(tmp_path.iterdir())


def test_a_duration_alone_runs_at_the_default_rate(tmp_path):
    out = tmp_path / "d.csv"
    res = run_cli("generate", "--dist", "uniform:10", "--duration", "2s", "-o", str(out), "-q")
    assert res.returncode == 0, res.stderr
    assert len(out.read_text().splitlines()) == 1 + 6000  # header + 2 s at 3000/s


def test_overlapping_events_each_get_their_share(tmp_path, web07_path):
    out = tmp_path / "e.parquet"
    res = run_cli("generate", str(web07_path), "--messages", "3e5", "--event", "71:0.5:0s:2m",
                  "--event", "73:0.3:0s:2m", "-o", str(out), "-q")
    assert res.returncode == 0, res.stderr
    keys = pq.read_table(out, columns=["channel_id"]).column("channel_id").to_numpy()
    n = keys.size  # the whole run (100 s at 3000/s) lies inside both windows
    for key, share in ((71, 0.5), (73, 0.3)):
        seen = (keys == key).mean()
        # its redirected share, plus its own draws from the other 20% (each key < 2% of those);
        # binomial slack of 6 sd either way
        slack = 6 * (share * (1 - share) / n) ** 0.5
        assert share - slack <= seen < share + 0.2 * 0.02 + slack, (key, seen)


def test_a_file_with_an_event_verifies_outside_the_event(tmp_path, web07_path):
    out = tmp_path / "ev.parquet"
    assert run_cli("generate", str(web07_path), "--messages", "4e5", "--event", "71:0.4:30s:1m",
                   "-o", str(out), "-q").returncode == 0
    res = run_cli("generate", "verify", str(web07_path), str(out))
    assert res.returncode == 0 and "result: pass" in res.stdout, res.stdout
    # Poisson timestamps: about 30 s x 3000/s fall in the window; verify counts the rest exactly
    table = pq.read_table(out)
    start_ms, end_ms = json.loads(table.schema.metadata[b"hotshard.event_windows_ms"])[0]
    ms = table.column("timestamp").cast(pa.int64()).to_numpy()
    inside = int(((ms >= start_ms) & (ms < end_ms)).sum())
    assert abs(inside - 90_000) < 6 * (4e5 * 0.225 * 0.775) ** 0.5  # binomial, 6 sd
    assert "Verify" in res.stdout and f"{400_000 - inside:,} messages" in res.stdout
    assert "left out the rows inside the file's 1 event window" in res.stderr


def test_verify_uses_the_recorded_key_scaling_and_refuses_a_contrary_one(tmp_path, web07_path):
    out = tmp_path / "x.parquet"
    assert run_cli("generate", str(web07_path), "--messages", "1e5", "--keys", "1e6",
                   "--key-scaling", "extend", "-o", str(out), "-q").returncode == 0
    for extra in ([], ["--keys", "1e6"]):
        res = run_cli("generate", "verify", str(web07_path), str(out), *extra)
        assert res.returncode == 0 and "result: pass" in res.stdout, (extra, res.stdout)
    contrary = run_cli("generate", "verify", str(web07_path), str(out),
                       "--key-scaling", "dilute")
    assert "was generated with --key-scaling extend, not dilute" in _one_error_line(contrary)


def test_verify_takes_only_what_verifying_uses(tmp_path, web07_path):
    """``generate verify`` is a mode of its own: an option of generating is not one of its
    options (no table of options it would ignore)."""
    out = tmp_path / "x.parquet"
    assert run_cli("generate", str(web07_path), "--messages", "1e4", "-o", str(out),
                   "-q").returncode == 0
    res = run_cli("generate", "verify", str(web07_path), str(out), "--rps", "5")
    assert "No such option '--rps'" in _one_error_line(res)


def test_event_keys_with_colons_and_out_of_range_integers(tmp_path, web07_path):
    from hotshard.workload.timing import parse_event

    assert parse_event("channel:4711:0.4:10m:40m").key == "channel:4711"
    res = run_cli("generate", "--dist", "zipf:1.1:1e6", "--messages", "1000", "--event",
                  "99999999999999999999:0.1:0:10s", "-o", str(tmp_path / "e.parquet"))
    assert "must be a 64-bit integer" in _one_error_line(res)
