"""The ``cluster`` fixture: start a local Redis Cluster on free ports, stop it afterwards."""

from __future__ import annotations

import pytest

from hotshard.cluster import local
from tests.cluster._clusters import free_base


@pytest.fixture
def cluster(tmp_path):
    """``cluster(n)`` starts an n-master cluster (no persistence) and returns its state;
    every cluster started is stopped at teardown, by the pids its state file records."""
    started = []

    def start(nodes: int) -> local.ClusterState:
        state = local.up(tmp_path / f"c{nodes}", nodes=nodes, port=free_base(nodes),
                         persist=False)
        started.append(tmp_path / f"c{nodes}")
        return state

    yield start
    for directory in started:
        if (directory / local.STATE_FILE).exists():
            local.down(directory)
