"""`hotshard serve`'s data directory: a load is all-or-nothing, a second load must say --append,
a refused start leaves nothing behind, and what it creates is its owner's alone."""

from __future__ import annotations

import os
import re
import signal
import socket
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import run_cli
from tests.service._traffic import ROOT, serve

T0_MS = 1_764_633_600_000  # 2025-12-02T00:00:00Z


def write_messages(path: Path, rows: int, *, row_group_size: int = 10_000,
                   seed: int = 0) -> Path:
    """A real Parquet file with `hotshard generate`'s columns, in several row groups."""
    rng = np.random.default_rng(seed)
    table = pa.table({
        "timestamp": pa.array(T0_MS + np.arange(rows) * 7, pa.timestamp("ms", tz="UTC")),
        "channel_id": rng.integers(0, 300, rows),
        "message_id": np.arange(rows, dtype=np.int64),
        "user_id": rng.integers(0, 10_000, rows),
        "size": rng.integers(10, 400, rows),
    })
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def corrupt_last_row_group(path: Path) -> Path:
    """Overwrite bytes inside the data pages of the file's last row group (every column
    chunk), as a damaged disk block or a truncated copy would; the footer stays intact, so the
    file opens and its row count reads fine."""
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups >= 3
    group = meta.row_group(meta.num_row_groups - 1)
    data = bytearray(path.read_bytes())
    for c in range(group.num_columns):
        chunk = group.column(c)
        start = chunk.dictionary_page_offset or chunk.data_page_offset
        end = start + chunk.total_compressed_size
        middle = (chunk.data_page_offset + end) // 2
        data[middle:middle + 48] = b"\xa5" * min(48, end - middle)
    path.write_bytes(bytes(data))
    assert pq.ParquetFile(path).metadata.num_rows == meta.num_rows
    return path


def snapshot(data: Path) -> dict[str, int | None]:
    """Every file of a data directory, with each shard database's message count."""
    out: dict[str, int | None] = {}
    for f in sorted(data.iterdir()):
        count = None
        if f.name.endswith(".sqlite3"):
            db = sqlite3.connect(f)
            count = db.execute("SELECT count(*) FROM messages").fetchone()[0]
            db.close()
        out[f.name] = count
    return out


def loaded_dir(tmp_path: Path, rows: int = 20_000) -> tuple[Path, dict]:
    """A data directory filled by a first load, stopped cleanly, and its snapshot."""
    data = tmp_path / "data"
    with serve(data, "--shards", "2", "--load", str(write_messages(tmp_path / "a.parquet",
                                                                    rows))):
        pass
    before = snapshot(data)
    assert sum(v or 0 for v in before.values()) == rows
    return data, before


def assert_one_line_error(r: subprocess.CompletedProcess, *words: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotshard: error: "), r.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_a_corrupt_last_row_group_loads_nothing_and_leaves_the_directory_as_it_was(tmp_path):
    data, before = loaded_dir(tmp_path)
    bad = corrupt_last_row_group(write_messages(tmp_path / "bad.parquet", 40_000, seed=1))
    r = run_cli("serve", "--shards", "2", "--port", "0", "--data", str(data), "--load",
                str(bad), "--append")
    assert_one_line_error(r, "bad.parquet", "cannot be loaded")
    assert snapshot(data) == before  # same files, same row counts


def test_damaged_data_leaves_no_empty_databases_and_no_new_directory(tmp_path):
    bad = corrupt_last_row_group(write_messages(tmp_path / "bad.parquet", 40_000))
    r = run_cli("serve", "--shards", "2", "--port", "0", "--data", str(tmp_path / "new"),
                "--load", str(bad))
    assert_one_line_error(r, "bad.parquet")
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    r = run_cli("serve", "--shards", "2", "--port", "0", "--data", str(tmp_path / "empty"),
                "--load", str(bad))
    assert_one_line_error(r, "bad.parquet")
    assert list((tmp_path / "empty").iterdir()) == []


@pytest.mark.slow
def test_loading_into_a_directory_with_messages_needs_append(tmp_path):
    data, before = loaded_dir(tmp_path, rows=5_000)
    more = write_messages(tmp_path / "more.parquet", 3_000, seed=2)
    r = run_cli("serve", "--shards", "2", "--port", "0", "--data", str(data), "--load",
                str(more))
    assert_one_line_error(r, "already holds 5,000 messages", "--append")
    assert snapshot(data) == before
    with serve(data, "--shards", "2", "--load", str(more), "--append"):
        pass
    assert sum(v or 0 for v in snapshot(data).values()) == 8_000
    r = run_cli("serve", "--append", "--data", str(data))
    assert r.returncode == 2 and "--load" in r.stderr


def _bytes(path: Path) -> int:
    """The file's size, 0 while it does not exist: SQLite deletes a WAL file when it
    checkpoints and reopens it, so an exists() then stat() can race it."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


@pytest.mark.slow
def test_a_worker_killed_mid_load_keeps_none_of_the_load(tmp_path):
    """The staged load: rows already sent to the shards are rolled back when one shard dies
    part-way, so the directory holds exactly what it held before."""
    data, before = loaded_dir(tmp_path, rows=5_000)
    big = write_messages(tmp_path / "big.parquet", 600_000, row_group_size=100_000, seed=3)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hotshard", "serve", "--shards", "2", "--port", "0", "--data",
         str(data), "--load", str(big), "--append"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        wal = data / "shard-000.sqlite3-wal"
        deadline = time.monotonic() + 60
        while _bytes(wal) <= 2_000_000:  # rows are going in
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the load never started writing"
            time.sleep(0.02)
        os.kill(_worker_of(data / "shard-000.sqlite3"), signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("hotshard: error: loading")
    assert "nothing of it was kept" in err
    assert out == ""  # never listened
    assert snapshot(data) == before


@pytest.mark.slow
def test_ctrl_c_during_a_load_says_nothing_was_kept_and_exits_130(tmp_path):
    """Ctrl-C part-way through `--load --append`: the load is rolled back (as any failed
    load), and the command says so, with what the directory holds, and exits 130."""
    data, before = loaded_dir(tmp_path, rows=5_000)
    big = write_messages(tmp_path / "big.parquet", 600_000, row_group_size=100_000, seed=4)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hotshard", "serve", "--shards", "2", "--port", "0", "--data",
         str(data), "--load", str(big), "--append"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        wal = data / "shard-000.sqlite3-wal"
        deadline = time.monotonic() + 60
        while _bytes(wal) <= 8_000_000:  # rows are going in
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "the load never started writing"
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and out == ""  # never listened
    warning = next(line for line in err.splitlines() if "was interrupted" in line)
    assert warning.startswith("hotshard: warning: loading ") and "big.parquet" in warning
    assert re.search(r"interrupted after [1-9][\d,]* of 600,000 rows: ", warning), warning
    assert f"nothing of it was kept; {data} holds 5,000 messages, as before" in warning
    assert "data kept" not in err  # not the message of a service that was stopped
    assert snapshot(data) == before


def test_a_data_directory_under_a_file_names_the_file(tmp_path):
    (tmp_path / "afile").write_text("in the way")
    r = run_cli("serve", "--port", "0", "--data", str(tmp_path / "afile" / "sub"))
    assert_one_line_error(r, f"{tmp_path / 'afile'} is a file, not a directory")
    assert "does not exist" not in r.stderr
    r = run_cli("serve", "--port", "0", "--data", str(tmp_path / "afile" / "sub" / "deeper"))
    assert_one_line_error(r, f"{tmp_path / 'afile'} is a file, not a directory")
    assert (tmp_path / "afile").read_text() == "in the way"


def _worker_of(database: Path) -> int:
    """The pid of the shard worker serving ``database`` (from /proc)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"hotshard.service.worker" in argv and str(database).encode() in argv \
                and b"--read-only" not in argv:
            return int(entry.name)
    raise AssertionError(f"no worker for {database}")


def test_a_start_refused_for_a_port_in_use_leaves_nothing_behind(tmp_path):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = str(busy.getsockname()[1])
    existing = tmp_path / "existing"
    existing.mkdir()
    (existing / "notes.txt").write_text("mine")
    try:
        r = run_cli("serve", "--port", port, "--data", str(tmp_path / "fresh"))
        assert_one_line_error(r, "in use")
        assert not (tmp_path / "fresh").exists()
        r = run_cli("serve", "--port", port, "--data", str(existing))
        assert_one_line_error(r, "in use")
        assert sorted(p.name for p in existing.iterdir()) == ["notes.txt"]  # no lock, no record
    finally:
        busy.close()


def test_data_directory_and_databases_are_private(tmp_path):
    data = tmp_path / "data"
    with serve(data, "--shards", "2") as svc:
        r = svc.post("/channels/c1/messages", json={"user": "ann", "body": "private"})
        assert r.status_code == 201
        modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in data.iterdir()}
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert {name for name in modes if name.startswith("shard-000")} >= {
        "shard-000.sqlite3", "shard-000.sqlite3-wal", "shard-000.sqlite3-shm", "shard-000.log"}
    assert all(mode & 0o077 == 0 for mode in modes.values()), modes


@pytest.mark.parametrize(("columns", "words"), [
    ({"user_id": ["u" * 300, "a"]}, "user_id must be at most"),
    ({"timestamp": pa.array([None, 5], pa.timestamp("ms"))}, "1 rows have no timestamp"),
    ({"timestamp": pa.array([-5_000, 5], pa.timestamp("ms"))}, "between 1970 and 2039"),
])
def test_rows_a_shard_would_refuse_are_refused_before_anything_starts(tmp_path, columns,
                                                                      words):
    table = {"timestamp": pa.array([1, 5], pa.timestamp("ms")), "channel_id": [1, 2],
             **columns}
    pq.write_table(pa.table(table), tmp_path / "x.parquet")
    r = run_cli("serve", "--data", str(tmp_path / "d"), "--load", str(tmp_path / "x.parquet"))
    assert_one_line_error(r, words)
    assert not (tmp_path / "d").exists()
