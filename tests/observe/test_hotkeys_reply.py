"""A Redis 8.6 HOTKEYS GET reply read from a file (``observe hotkeys``). Redis 8.6 is not on
this machine: the reply below is the documentation's own example (redis/docs,
content/commands/hotkeys-get.md), as redis-cli prints it; the other cases are that example
in the other forms the reader takes, or broken on purpose."""

from __future__ import annotations

import json

import pytest

from hotshard.errors import InputError
from hotshard.observe.hotkeys_reply import read_hotkeys_reply
from tests.conftest import run_cli

DOCUMENTED = """\
 1) "tracking-active"
 2) (integer) 1
 3) "sample-ratio"
 4) (integer) 1
 5) "selected-slots"
 6) (empty array)
 7) "all-commands-all-slots-us"
 8) (integer) 220
 9) "net-bytes-all-commands-all-slots"
10) (integer) 200
11) "collection-start-time-unix-ms"
12) (integer) 1769420604522
13) "collection-duration-ms"
14) (integer) 6408
15) "total-cpu-time-user-ms"
16) (integer) 3
17) "total-cpu-time-sys-ms"
18) (integer) 11
19) "by-cpu-time-us"
20) 1) "x"
    2) (integer) 104
    3) "y"
    4) (integer) 98
    5) "z"
    6) (integer) 18
"""
AS_JSON = {"tracking-active": 1, "sample-ratio": 1, "selected-slots": [],
           "all-commands-all-slots-us": 220, "net-bytes-all-commands-all-slots": 200,
           "collection-start-time-unix-ms": 1769420604522, "collection-duration-ms": 6408,
           "total-cpu-time-user-ms": 3, "total-cpu-time-sys-ms": 11,
           "by-cpu-time-us": ["x", 104, "y", 98, "z", 18]}


def _write(tmp_path, text, name="reply.txt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_documented_reply_gives_each_keys_share_of_the_nodes_cpu(tmp_path):
    """x took 104 of the 220 us all commands took: 47.3%; the node was busy 3 + 11 ms of
    the 6,408 ms session: 0.22%."""
    obs = read_hotkeys_reply(_write(tmp_path, DOCUMENTED), shard="2", node="10.0.0.1:7002")
    hot = obs.extra["hot_keys"]
    assert [(k["key"], k["cpu_us"], k["cpu_share"]) for k in hot["keys"]] == [
        ("x", 104.0, round(104 / 220, 6)), ("y", 98.0, round(98 / 220, 6)),
        ("z", 18.0, round(18 / 220, 6))]
    assert {k["shard"] for k in hot["keys"]} == {"2"}
    assert obs.shards[0].id == "2" and obs.shards[0].node == "10.0.0.1:7002"
    assert obs.shards[0].cpu == round(14 / 6408, 6) and obs.duration_s == 6.408
    assert any("documented examples only" in n for n in obs.extra["observe"]["notes"])


@pytest.mark.parametrize("shape", [
    ["x", 104, "y", 98, "z", 18], [["x", 104], ["y", 98], ["z", 18]],
    {"x": 104, "y": 98, "z": 18}])
def test_redis_cli_json_in_every_list_shape_reads_the_same(tmp_path, shape):
    text = read_hotkeys_reply(_write(tmp_path, DOCUMENTED)).extra["hot_keys"]
    doc = {**AS_JSON, "by-cpu-time-us": shape}
    got = read_hotkeys_reply(_write(tmp_path, json.dumps(doc), "r.json")).extra["hot_keys"]
    assert got == text


def test_a_sampled_session_is_scaled_by_its_ratio(tmp_path):
    """SAMPLE 10 measures one command in ten: the key totals are a tenth of the totals
    beside them, so x's 10.4 us sampled is 104 us, 47% of the node's 220."""
    doc = {**AS_JSON, "sample-ratio": 10, "by-cpu-time-us": ["x", 10.4, "y", 9.8],
           "by-net-bytes": ["x", 12, "y", 2]}
    obs = read_hotkeys_reply(_write(tmp_path, json.dumps(doc), "r.json"))
    x = obs.extra["hot_keys"]["keys"][0]
    assert x["cpu_us"] == pytest.approx(104.0) and x["cpu_share"] == pytest.approx(104 / 220)
    assert x["net_bytes"] == 120.0 and x["net_share"] == 0.6
    assert any("sample ratio 10" in n for n in obs.extra["observe"]["notes"])


@pytest.mark.parametrize(("text", "said"), [
    ("", "is empty"),
    ("(nil)\n", "the reply is empty (nil)"),
    ("null", "the reply is empty (nil)"),
    ('1) "tracking-active"\n2) (integer) 0\n', "no by-cpu-time-us or by-net-bytes"),
    (DOCUMENTED.replace("(integer) 104", "(integer) -104"), "must be a count >= 0"),
    (DOCUMENTED.replace("(integer) 104", "(integer) lots"), "not an integer"),
    (json.dumps({**AS_JSON, "sample-ratio": 0}), "sample-ratio must be >= 1"),
    (json.dumps({**AS_JSON, "by-cpu-time-us": ["x", 1e400]}), "must be a count"),
    ("[" * 100_000 + "]" * 100_000, "not JSON"),
    ("hello world\n", "not a reply line")])
def test_a_reply_that_is_not_one_is_one_clear_error(tmp_path, text, said):
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as exc:
        read_hotkeys_reply(path)
    assert said in str(exc.value)
    res = run_cli("observe", "hotkeys", str(path), "-o", str(tmp_path / "o.json"))
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "o.json").exists()


def test_the_cli_writes_the_evidence(tmp_path):
    out = tmp_path / "hot.json"
    res = run_cli("observe", "hotkeys", str(_write(tmp_path, DOCUMENTED)), "--shard", "1",
                  "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert json.loads(out.read_text())["hot_keys"]["keys"][0]["key"] == "x"
    huge = tmp_path / "huge.txt"
    huge.write_bytes(b" " * (11 * 1024 * 1024))
    res = run_cli("observe", "hotkeys", str(huge))
    assert res.returncode == 2 and "far more than a HOTKEYS GET reply" in res.stderr
