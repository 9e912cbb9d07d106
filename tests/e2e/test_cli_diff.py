"""`hotshard diff A.json B.json`: the table, --json, --plot, and bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli, trace_profile
from tests.e2e.test_bad_input import assert_refused


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Path:
    """web07 and web12 (one site, July and December) profiled into one folder."""
    folder = tmp_path_factory.mktemp("diff")
    trace_profile("web07").save(folder / "web07.json")
    trace_profile("web12").save(folder / "web12.json")
    return folder


def test_table_names_the_real_risers_fallers_and_hot_shard(pair):
    res = run_cli("diff", "web07.json", "web12.json", "-p", "kafka", "-n", "64", cwd=pair)
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "top 500 keys of each: 75 in both, 425 entered, 425 left" in out
    risers = out.split("largest risers")[1].split("largest fallers")[0]
    fallers = out.split("largest fallers")[1].split("entered the head")[0]
    assert risers.splitlines()[2].split()[:4] == ["55", "<=0.018%", "0.95%", ">=+0.93"]
    assert fallers.splitlines()[2].split()[:4] == ["107", "1.9%", "<=0.036%", "<=-1.8"]
    assert "tail alpha" in out and "not comparable as a drift" in out
    assert "hottest shard (kafka/64, bigint keys)" in out and "moved by" in out


def test_json_is_one_object_with_the_diff(pair):
    res = run_cli("diff", "web07.json", "web12.json", "--top-k", "100", "--movers", "3", "--json",
                  cwd=pair)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["top"] == 100 and doc["a"]["label"] == "web07.json"
    assert [m["key"] for m in doc["risers"]][0] == "55" and len(doc["risers"]) == 3
    assert doc["fallers"][0]["key"] == "107"
    assert len(doc["stayed"]) + len(doc["entered"]) == 100
    assert doc["tail"]["significant"] is None and doc["shards"] is None


@pytest.mark.parametrize("name", ["moved.png", "moved.svg", "moved.pdf"])
def test_plot_writes_a_non_empty_image(pair, name):
    res = run_cli("diff", "web07.json", "web12.json", "--plot", name, cwd=pair)
    assert res.returncode == 0, res.stderr
    assert f"wrote {name}" in res.stdout
    assert (pair / name).stat().st_size > 1000
    assert not list(pair.glob(f".{name}.*.tmp"))


def test_help_shows_the_options():
    res = run_cli("diff", "--help")
    assert res.returncode == 0
    for word in ("--top-k", "--movers", "--partitioner", "--plot", "--json", "--allow-disjoint"):
        assert word in res.stdout


@pytest.fixture(scope="module")
def odd_files(tmp_path_factory, pair) -> Path:
    folder = tmp_path_factory.mktemp("odd")
    (folder / "empty.json").write_text("")
    (folder / "other.json").write_text('{"rows": [1, 2]}')  # JSON, but no profile
    (folder / "text.csv").write_text("k,n\n" + "".join(f"user{i},{100 - i}\n"
                                                       for i in range(1, 30)))
    res = run_cli("profile", "text.csv", "--key", "k", "--counts", "n", "-o", "text.json", "-q",
                  cwd=folder)
    assert res.returncode == 0, res.stderr
    (folder / "web07.json").write_bytes((pair / "web07.json").read_bytes())
    return folder


@pytest.mark.parametrize(("args", "words"), [
    (["missing.json", "web07.json"], ["missing.json"]),
    (["empty.json", "web07.json"], ["empty.json is empty"]),
    (["other.json", "web07.json"], ["other.json", "profile"]),
    (["web07.json", "text.json"], ["no common keys at all", "same key space",
                                   "A's keys are integers, B's are text"]),
    (["web07.json", "web07.json", "--top-k", "501"], ["top must be at most the smaller head"]),
    (["web07.json", "web07.json", "-n", "4"], ["--shards goes with --partitioner"]),
    (["web07.json", "web07.json", "-p", "kafka"], ["--shards N"]),
])
def test_bad_input_is_refused_in_one_line(odd_files, args, words):
    res = run_cli("diff", *args, cwd=odd_files)
    assert_refused(res, odd_files, None, *words)


def test_bad_image_name_is_refused_before_any_work_and_nothing_written(odd_files):
    res = run_cli("diff", "web07.json", "web07.json", "--plot", "moved.gif", cwd=odd_files)
    assert_refused(res, odd_files, "moved.gif", "unknown image type .gif")
    res = run_cli("diff", "web07.json", "text.json", "--plot", "moved.png", cwd=odd_files)
    assert_refused(res, odd_files, "moved.png", "no common keys at all")
