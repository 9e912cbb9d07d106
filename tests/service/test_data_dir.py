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


def _open(data, shards, **kwargs):
    from hotshard.service.server import ServeConfig, open_data_dir

    return open_data_dir(ServeConfig(data_dir=str(data), shards=shards, **kwargs))


def test_every_shard_database_records_the_layout_and_a_start_that_disagrees_is_refused(
        tmp_path):
    """The directory's record gone, a start with other flags used to serve messages from
    shards their channels no longer route to: each database now says its layout itself."""
    from hotshard.errors import InputError
    from hotshard.service.server import LAYOUT_RECORD
    from hotshard.service.store import SQLiteStore

    data = tmp_path / "data"
    _open(data, 2).close()
    with SQLiteStore(data / "shard-000.sqlite3") as store:
        store.append("c1", "ann", "kept")
    for i in range(2):
        db = sqlite3.connect(data / f"shard-{i:03d}.sqlite3")
        assert dict(db.execute("SELECT key, value FROM layout")) == {
            "partitioner": "kafka", "shards": "2", "index": str(i)}
        db.close()
    (data / LAYOUT_RECORD).unlink()
    with pytest.raises(InputError, match="laid out for 2 shards placed by kafka"):
        _open(data, 4)
    with pytest.raises(InputError, match="laid out for 2 shards placed by kafka"):
        _open(data, 2, partitioner="cassandra")
    res = run_cli("serve", "--data", str(data), "--shards", "4", "--port", "0")
    assert res.returncode == 2 and "--shards 2 --partitioner kafka" in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    _open(data, 2).close()   # its own layout still opens


def test_an_older_directory_without_layouts_is_checked_by_its_databases(tmp_path):
    from hotshard.errors import InputError
    from hotshard.service.store import SQLiteStore

    data = tmp_path / "old"
    data.mkdir(mode=0o700)
    for i in range(2):   # made 0644 by an older version, no layout table, no record
        with SQLiteStore(data / f"shard-{i:03d}.sqlite3") as store:
            store.append(f"c{i}", "ann", "old")
        os.chmod(data / f"shard-{i:03d}.sqlite3", 0o644)
    with pytest.raises(InputError, match="2 shard databases with messages and no recorded"):
        _open(data, 4)
    _open(data, 2).close()
    assert stat.S_IMODE((data / "shard-000.sqlite3").stat().st_mode) == 0o600


def test_split_registry_is_private_whatever_the_umask(tmp_path):
    from hotshard.service.router import Router
    from hotshard.service.split import SplitRegistry

    data = tmp_path / "d"
    data.mkdir()
    old = os.umask(0)
    try:
        SplitRegistry(data, Router("kafka", 4)).add("c1", 4, 1000, since_ms=T0_MS)
    finally:
        os.umask(old)
    assert stat.S_IMODE((data / "splits.json").stat().st_mode) == 0o600
    os.chmod(data / "splits.json", 0o644)
    SplitRegistry(data, Router("kafka", 4))
    assert stat.S_IMODE((data / "splits.json").stat().st_mode) == 0o600


def test_a_load_refuses_rows_without_a_channel_unless_told_to_skip_them(tmp_path):
    """A NULL channel_id was skipped silently ("loaded 19,999 messages" of 20,000, exit 0)
    and a NULL user_id stored as the user "uNone": now the first is refused with its count
    (or left out and counted with --skip-bad-rows), the second is user u0."""
    table = pa.table({
        "timestamp": pa.array(T0_MS + np.arange(5) * 7, pa.timestamp("ms", tz="UTC")),
        "channel_id": pa.array([1, None, 3, 4, 5], pa.int64()),
        "user_id": pa.array([10, 11, None, 13, 14], pa.int64()),
        "size": pa.array([20] * 5, pa.int64())})
    path = tmp_path / "m.parquet"
    pq.write_table(table, path)
    res = run_cli("serve", "--data", str(tmp_path / "d"), "--load", str(path), "--port", "0")
    assert res.returncode == 2, res.stderr
    assert "1 rows have no channel_id (NULL)" in res.stderr and "--skip-bad-rows" in res.stderr
    assert not (tmp_path / "d").exists()
    with serve(tmp_path / "d2", "--shards", "2", "--load", str(path), "--skip-bad-rows") as svc:
        users = {c: [m["user"] for m in svc.get(f"/channels/{c}/messages").json()["messages"]]
                 for c in ("1", "3", "4")}
        assert users == {"1": ["u10"], "3": ["u0"], "4": ["u13"]}
    from hotshard.service.server import stored_messages

    assert stored_messages(tmp_path / "d2", 2) == 4
