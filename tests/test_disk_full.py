"""A full disk mid-write ends a command in one line (exit 2), its partial output removed: the
writers are made to fail as a full disk does (ENOSPC), and a staged load into a SQLite
database that fills reports the disk, not the savepoint SQLite dropped with it."""

from __future__ import annotations

import errno
import sqlite3

import pytest

from hotshard.errors import InputError
from hotshard.service.store import SQLiteStore
from tests.conftest import ROOT, run_cli

PROFILE = str(ROOT / "examples" / "incident.profile.json")


def _full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device", "out.tmp")


@pytest.mark.parametrize(("target", "argv"), [
    ("pyarrow.parquet.ParquetWriter.write_table",
     ["generate", PROFILE, "--messages", "5000", "-o", "{tmp}/o.parquet"]),
    ("matplotlib.figure.Figure.savefig", ["inspect", PROFILE, "--plot", "{tmp}/p.png"]),
])
def test_a_full_disk_is_one_line_and_nothing_partial(tmp_path, monkeypatch, target, argv):
    monkeypatch.setattr(target, _full)
    res = run_cli(*[a.replace("{tmp}", str(tmp_path)) for a in argv])
    assert res.returncode == 2, res.stderr
    assert "no space left on the device while writing out.tmp" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not [p for p in tmp_path.iterdir() if p.is_file()]


def test_a_full_standard_output_is_one_line():
    from hotshard.cli import _exit_status

    assert _exit_status(OSError(errno.ENOSPC, "No space left on device")) == 2


def test_a_staged_load_that_fills_the_disk_says_so(tmp_path):
    store = SQLiteStore(tmp_path / "s.sqlite3")
    store.begin_load()
    db = store._conn()
    db.execute("PRAGMA max_page_count = 20")   # the database's disk, full at 20 pages
    rows = [(f"c{i % 50}", "u", "x" * 500, 1_700_000_000_000 + i) for i in range(2000)]
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
        store.load_rows(rows)
    store.abort_load()
    store.close()
    from hotshard.cli import _disk_full

    assert _disk_full(sqlite3.OperationalError("database or disk is full")) == ""
    assert _disk_full(InputError("x")) is None
