"""The shard layout recorded in every shard database, so a directory says for itself which
store placed its channels, over how many shards, and which shard each file is.

``hotshard-serve.json`` records the layout once for the directory; a directory that lost it
(deleted, copied without it) used to start under any flags, and a channel's messages would
then be looked for on a shard its channel no longer routes to: stored, but invisible. Each
database now carries a ``layout`` table (partitioner, shard count, its own index), written
before any worker opens it and checked at every start against the flags: a disagreement is
refused in one line, whatever the record file says.

Opening the databases here also tightens their files to 0600: a database (and its -wal and
-shm) made 0644 by an older version is not left readable by everyone.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from hotshard.errors import InputError
from hotshard.service.store import DB_FILE_MODE

__all__ = ["check_and_record_layout"]

_TABLE = "CREATE TABLE IF NOT EXISTS layout (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


def _tighten(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        part = path.with_name(path.name + suffix)
        try:
            if part.is_file() and (part.stat().st_mode & 0o777) != DB_FILE_MODE:
                os.chmod(part, DB_FILE_MODE)
        except OSError:
            pass


def _read(db: sqlite3.Connection) -> dict[str, str]:
    try:
        return dict(db.execute("SELECT key, value FROM layout").fetchall())
    except sqlite3.OperationalError:
        return {}


def _messages(db: sqlite3.Connection) -> int:
    try:
        return int(db.execute("SELECT count(*) FROM messages").fetchone()[0])
    except sqlite3.OperationalError:
        return 0


def check_and_record_layout(data_dir: Path, partitioner: str, shards: int) -> None:
    """Refuse a directory whose shard databases were laid out otherwise (module notes), then
    record the layout in each of the ``shards`` databases (created 0600 when missing).

    Raises
    ------
    InputError
        A database records another partitioner, shard count or index; a database beyond
        ``shards`` holds messages (the directory had more shards); an unrecorded directory
        holds messages in a number of databases other than ``shards``; or a database cannot
        be opened.
    """
    from hotshard.service.supervisor import db_path

    data_dir = Path(data_dir)
    present = sorted(p for p in data_dir.glob("shard-[0-9][0-9][0-9].sqlite3"))
    wanted = {"partitioner": partitioner, "shards": str(shards)}
    unrecorded_with_messages = []
    for path in present:
        index = int(path.name[6:9])
        _tighten(path)
        try:
            db = sqlite3.connect(path)
            try:
                had, held = _read(db), _messages(db)
            finally:
                db.close()
        except sqlite3.DatabaseError as e:
            raise InputError(f"cannot read {path}: {e}") from None
        if had:
            mine = {k: had.get(k) for k in ("partitioner", "shards")}
            if mine != wanted or had.get("index") != str(index):
                raise InputError(
                    f"{data_dir} holds shard databases laid out for {mine['shards']} shards "
                    f"placed by {mine['partitioner']} ({path.name} says so): serve it with "
                    f"${{shards}} {mine['shards']} ${{partitioner}} {mine['partitioner']}, "
                    "or give a new ${data_dir} directory")
        elif held:
            unrecorded_with_messages.append(index)
        if index >= shards and held:
            raise InputError(f"{data_dir} holds messages in {path.name}, shard {index}, beyond "
                             f"the {shards} shards asked for: its channels would be looked for "
                             "elsewhere; give the directory's own ${shards}, or a new ${data_dir}")
    if unrecorded_with_messages and len(present) != shards:
        raise InputError(f"{data_dir} holds {len(present)} shard databases with messages and "
                         f"no recorded layout, not {shards}: give ${{shards}} {len(present)} "
                         "with the partitioner that made it, or a new ${data_dir} directory")
    for index in range(shards):
        path = db_path(data_dir, index)
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DB_FILE_MODE)
            os.close(fd)
        try:
            db = sqlite3.connect(path, isolation_level=None)
            try:
                db.execute("PRAGMA busy_timeout=5000")
                db.execute(_TABLE)
                db.executemany("INSERT OR IGNORE INTO layout (key, value) VALUES (?, ?)",
                               [*wanted.items(), ("index", str(index))])
            finally:
                db.close()
        except sqlite3.DatabaseError as e:
            raise InputError(f"cannot write the layout into {path}: {e}") from None
