"""Terminal text lives in hotshard.render: the renderers work on the library's result objects,
without a CLI (check's verdict and cluster status's table here)."""

from __future__ import annotations

from types import SimpleNamespace as Obj

from hotshard.render import check_summary, cluster_status_text


def _check(name, verdict, message):
    return Obj(name=name, verdict=verdict, message=message)


def test_check_summary_names_what_a_failing_test_would_hide():
    report = Obj(checks=(_check("head", "fail", "the test's top key carries 0.1% "
                                "against production's 12%"), _check("tail", "pass", "ok")),
                 hidden_keys=[("k1", 0.12, 0.001)], hot_shard={"shard": 7}, verdict="fail",
                 no_hot_spot=None)
    text = check_summary(report)
    assert text.splitlines()[0] == "FAIL  head"
    assert "PASS  tail" in text
    assert text.splitlines()[-1] == ("FAIL (head); it would hide hot keys k1 and hot shard 7: "
                                     "refuse this test (exit status 1).")


def test_cluster_status_text_names_the_nodes_not_ok_first():
    node = dict(role="master", slot_count=8192, ops_per_sec=10, cpu_seconds=1.5,
                used_memory=100, keys=3, master=None)
    result = Obj(url="redis-cluster://127.0.0.1:7000", cluster_state="fail", nodes=[
        Obj(address="127.0.0.1:7000", status="ok", slots=[(0, 8191)], **node),
        Obj(address="127.0.0.1:7001", status="unreachable", slots=[(8192, 16383)],
            **{**node, "ops_per_sec": None, "cpu_seconds": None})])
    lines = cluster_status_text(result).splitlines()
    assert lines[0] == ("redis-cluster://127.0.0.1:7000  cluster_state:fail  (1 of 2 nodes not "
                        "ok: 127.0.0.1:7001 unreachable)")
    assert lines[2].split() == ["127.0.0.1:7000", "master", "ok", "8192", "0-8191", "10",
                                "1.50", "100", "3"]
    assert lines[3].split()[5:7] == ["-", "-"]  # unknown, not zero
