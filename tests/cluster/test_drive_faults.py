"""`hotshard drive` against a live Redis Cluster whose nodes fail mid-run, as a user runs it.

One node killed and one frozen (SIGSTOP) a second into a 5-second run: the run must exit 3
with the warning first, count the failures by kind in the failed nodes' own rows (the frozen
node's timeouts in the frozen node's row), and keep its latency percentiles those of the
successes, which the live node answered.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.conftest import ROOT

PROFILE = str(ROOT / "examples" / "incident-event.profile.json")


# timing: the live node must answer every request within the 1 s timeout, and the faults must
# fall inside the run (3 s in, after the driver's start): both fail on a starved machine, not
# on a regression, so this runs in the timing pass, alone at normal priority
@pytest.mark.slow
@pytest.mark.timing
def test_drive_with_a_node_killed_and_one_frozen_is_an_invalid_run(cluster, tmp_path):
    state = cluster(3)
    live, frozen, dead = state.addresses
    out = tmp_path / "obs.json"
    command = [sys.executable, "-m", "hotshard", "drive", state.url, "--dist", "uniform:3000",
               "--rps", "300", "--duration", "5s", "--timeout", "1s", "-o", str(out)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)

    def fault() -> None:  # once the run is sending: the driver's start costs ~1-2 s
        time.sleep(3.0)
        os.kill(state.pids[2], signal.SIGKILL)
        os.kill(state.pids[1], signal.SIGSTOP)

    thread = threading.Thread(target=fault)
    thread.start()
    try:
        stdout, stderr = proc.communicate(timeout=90)
    finally:
        thread.join()
        os.kill(state.pids[1], signal.SIGCONT)
    assert proc.returncode == 3, (stdout, stderr)
    assert stdout.startswith("WARNING: invalid run:"), stdout
    assert "Traceback" not in stderr and state.password not in stdout + stderr
    doc = json.loads(out.read_text())
    assert doc["valid"] is False and doc["errors"]["share"] > 0.1
    assert state.password not in out.read_text()  # the target is recorded redacted
    kinds = doc["errors"]["by_kind"]
    assert "timeout" in kinds and {"connection refused", "connection error"} & set(kinds)
    assert not any(k.startswith("http") for k in kinds)
    rows = {s["node"]: s for s in doc["shards"]}
    assert set(rows) == {live, frozen, dead}
    # the frozen node's timeouts are in its own row; the dead node's refusals in its own
    assert rows[frozen]["errors"] > 0 and "timeout" in rows[frozen]["error_kinds"]
    assert set(rows[dead]["error_kinds"]) <= {"connection refused", "connection error",
                                              "connect timeout", "timeout"}
    assert rows[dead]["errors"] > 0
    assert rows[live].get("errors", 0) == 0
    # latency is of successes: every node answered fast before the fault, the live one after
    assert doc["latency_ms"]["p99"] < 1000
    assert doc["errors"]["latency_ms"]["max"] >= 1000  # the timeouts, at the 1 s timeout
    # the per-node table shows the failures on the failed nodes' rows
    table = stdout[stdout.index("shard   requests"):]
    assert "timeout" in table
