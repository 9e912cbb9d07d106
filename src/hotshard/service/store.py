"""A shard's message store: the ``Store`` protocol and ``SQLiteStore``, one database per shard.

Message ids are snowflake-like, ``ms << 22 | sequence << 10 | node`` over Unix epoch
milliseconds (the layout ``hotshard generate`` writes, with the low 10 bits naming the shard that
issued the id), so they sort by time and are unique across shards: a channel whose history is
split over several shards can be merged and paged by id. Each store keeps its ids strictly
increasing even when its clock stalls or goes backwards.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Protocol

from hotshard.errors import IdempotencyConflict, InputError

__all__ = ["DB_FILE_MODE", "DEFAULT_MAX_BODY_BYTES", "IDEMPOTENCY_TTL_MS", "MAX_CHANNEL_CHARS",
           "MAX_LIMIT", "MAX_NODE", "MAX_USER_CHARS", "Message", "NODE_BITS", "SEQUENCE_BITS",
           "SQLiteStore", "Store", "check_idempotency_key", "check_message", "message_digest",
           "system_clock_ms"]

SEQUENCE_BITS = 22
NODE_BITS = 10  # low bits of the sequence: the issuing shard, so ids are unique across shards
MAX_NODE = (1 << NODE_BITS) - 1
MAX_TIME_MS = (1 << (63 - SEQUENCE_BITS)) - 1  # ids are signed 64-bit: good until 2039-09
MAX_ID = (1 << 63) - 1
MAX_CHANNEL_CHARS = 256
MAX_USER_CHARS = 256
DEFAULT_MAX_BODY_BYTES = 4096
MAX_LIMIT = 1000
BULK_BATCH_ROWS = 10_000
# Chat history is user content: a new database is readable by its owner only (SQLite gives
# its -wal and -shm files the database file's permissions).
DB_FILE_MODE = 0o600

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    channel TEXT NOT NULL,
    id INTEGER NOT NULL,
    user TEXT NOT NULL,
    body TEXT NOT NULL,
    ts_ms INTEGER NOT NULL,
    PRIMARY KEY (channel, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta (key, value) VALUES ('last_id', 0);
CREATE TABLE IF NOT EXISTS writes (
    idem TEXT PRIMARY KEY,
    channel TEXT NOT NULL,
    digest TEXT NOT NULL,
    id INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS writes_by_id ON writes (id);
"""
# How long a write's idempotency key is remembered (a retry after this stores it again), and
# how often old keys are pruned (every this many keyed writes)
IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000
_PRUNE_EVERY = 1000
MAX_IDEMPOTENCY_KEY = 200
_IDEM_KEY = re.compile(r"^[\x21-\x7e]{1,200}$")


def check_idempotency_key(key: object) -> str:
    """``key`` when it can name a write (1 to 200 visible ASCII characters); else InputError."""
    if not isinstance(key, str) or not _IDEM_KEY.match(key):
        raise InputError("Idempotency-Key must be 1 to 200 visible ASCII characters "
                         "(a UUID will do)")
    return key


def message_digest(channel: str, user: str, body: str) -> str:
    """What a retry must repeat to be the same write."""
    import hashlib

    return hashlib.sha256("\x00".join((channel, user, body)).encode("utf-8", "surrogatepass")
                          ).hexdigest()[:32]


@dataclass(frozen=True)
class Message:
    """One stored chat message; ``id`` is time-ordered and unique within its store."""

    id: int
    channel: str
    user: str
    body: str
    ts_ms: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Store(Protocol):
    """What a shard worker needs from its storage."""

    def append(self, channel: str, user: str, body: str, *, now_ms: int | None = None) -> int:
        """Store one message, durably, and return its id."""
        ...

    def history(self, channel: str, *, limit: int = 50,
                before: int | None = None) -> list[Message]:
        """A channel's messages newest first, only ids strictly below ``before`` if given."""
        ...

    def close(self) -> None:
        """Release the store; later calls fail."""
        ...


def system_clock_ms() -> int:
    """Wall-clock Unix time in milliseconds (the production default; tests inject a clock)."""
    return time.time_ns() // 1_000_000


def _create_private(path: Path) -> None:
    """Create ``path`` empty with mode ``DB_FILE_MODE`` unless it exists (SQLite would make it
    0644 less the umask: readable by everyone on the machine)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, DB_FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)


def _check_text(name: str, value: object, max_chars: int) -> str:
    """``value`` as a non-empty str of at most ``max_chars`` characters, no control chars."""
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string, got {type(value).__name__}")
    if not value:
        raise InputError(f"{name} must not be empty")
    if len(value) > max_chars:
        raise InputError(f"{name} must be at most {max_chars} characters, got {len(value)}")
    bad = _CONTROL.search(value)
    if bad:
        raise InputError(f"{name} must not contain control characters, got "
                         f"{bad.group()!r} at position {bad.start()}")
    _check_unicode(name, value)
    return value


def _check_unicode(name: str, value: str) -> None:
    """Refuse lone surrogates (JSON can carry "\\ud800"): SQLite and UTF-8 cannot store them."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError(f"{name} must be valid Unicode text, got a lone surrogate at "
                         f"position {e.start}") from None


def _check_body(body: object, max_bytes: int) -> str:
    if not isinstance(body, str):
        raise InputError(f"body must be a string, got {type(body).__name__}")
    if not body:
        raise InputError("body must not be empty")
    size = len(body.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InputError(f"body must be at most {max_bytes} bytes (UTF-8), got {size}")
    _check_unicode("body", body)
    return body


def check_message(user: object, body: object, *,
                  max_body_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
    """Raise InputError unless ``user`` and ``body`` are what a store accepts (so a gateway
    can refuse a bad message before it costs a shard anything)."""
    _check_text("user", user, MAX_USER_CHARS)
    _check_body(body, max_body_bytes)


def _check_int(name: str, value: object, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InputError(f"{name} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise InputError(f"{name} must be in {lo}..{hi}, got {value}")
    return value


class SQLiteStore:
    """A ``Store`` in one SQLite file: the database of one shard.

    Durability: the database runs in WAL mode with ``synchronous=FULL``, and ``append`` /
    ``append_many`` return only after their transaction has committed (the WAL fsynced), so an
    acknowledged write survives a crash of the process or the machine.

    Staged loads: ``begin_load`` opens one write transaction, ``load_rows`` adds rows to it
    (any number of calls) and ``commit_load`` commits them all at once; ``abort_load``, a
    closed store or a killed process leaves the database as it was before ``begin_load``.
    A bulk load of many calls is thereby all-or-nothing on each shard.

    Layout: table ``messages`` keyed ``(channel, id)`` (a clustered ``WITHOUT ROWID`` primary
    key), so a channel's history newest first is one backward range scan of that key. The
    highest id issued is kept in table ``meta`` in the same transaction as the rows, so a
    reopened store (or another process writing the same file) continues above it.

    Parameters
    ----------
    path : str or Path
        The database file; its directory must exist. Created if missing.
    clock : callable, optional
        Returns Unix time in ms; used when a call gives no ``now_ms``. Defaults to the wall
        clock; tests pass a fake.
    max_body_bytes : int
        Largest accepted body, in UTF-8 bytes (default 4096).
    node : int
        This shard's number, 0..1023: the low bits of every id it issues, so that ids from
        different shards never collide.
    read_only : bool
        Open for reads only (a read replica over the same WAL file); writes raise.

    Raises
    ------
    InputError
        ``path`` is not a writable file in an existing directory (or, read-only, an existing
        database), ``max_body_bytes`` < 1, or ``node`` is outside 0..1023.
    """

    def __init__(self, path: str | Path, *, clock: Callable[[], int] | None = None,
                 max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, node: int = 0,
                 read_only: bool = False) -> None:
        self.max_body_bytes = _check_int("max_body_bytes", max_body_bytes, 1, 1 << 30)
        self.node = _check_int("node", node, 0, MAX_NODE)
        self.read_only = bool(read_only)
        if str(path) in ("", ":memory:") or str(path).startswith("file:"):
            raise InputError(f"path must be a database file, got {str(path)!r}")
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise InputError(f"path's directory does not exist: {self.path.parent}")
        self._clock = clock or system_clock_ms
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._loading = False
        self._keyed = 0   # writes with an idempotency key (old keys pruned every _PRUNE_EVERY)
        if read_only and not self.path.is_file():
            raise InputError(f"path {str(self.path)!r} does not exist: a read-only store "
                             "reads a database its primary created")
        try:
            # autocommit mode: transactions are the explicit BEGIN IMMEDIATE ... COMMIT below
            if read_only:
                self._db = sqlite3.connect(f"file:{self.path.resolve()}?mode=ro", uri=True,
                                           isolation_level=None, check_same_thread=False)
                mode = self._db.execute("PRAGMA journal_mode").fetchone()[0]
            else:
                _create_private(self.path)
                self._db = sqlite3.connect(self.path, isolation_level=None,
                                           check_same_thread=False)
                mode = self._db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
                self._db.execute("PRAGMA synchronous=FULL")
            self._db.execute("PRAGMA busy_timeout=5000")
            if not read_only:
                self._db.executescript(_SCHEMA)
        except sqlite3.DatabaseError as e:
            self.close()
            raise InputError(f"path {str(self.path)!r} cannot be opened as a SQLite "
                             f"database: {e}") from e
        except OSError as e:
            self.close()
            raise InputError(f"path {str(self.path)!r} cannot be created: {e.strerror}") from e
        if mode.lower() != "wal":
            self.close()
            raise InputError(f"path {str(self.path)!r} does not support WAL journaling "
                             f"(got journal_mode={mode})")

    # -- ids --------------------------------------------------------------------------------

    def _next_id(self, last_id: int, now_ms: int) -> int:
        """The id after ``last_id`` at time ``now_ms``: the first id of this node at
        ``now_ms << 22`` or, when that would not be larger (same millisecond, or the clock went
        backwards), the next one of this node after ``last_id``."""
        nxt = max(now_ms << SEQUENCE_BITS, last_id + 1)
        nxt += (self.node - nxt) % (1 << NODE_BITS)
        if nxt > MAX_ID:
            raise InputError(f"message ids are exhausted (now_ms={now_ms})")
        return nxt

    def _now(self, now_ms: int | None) -> int:
        value = self._clock() if now_ms is None else now_ms
        return _check_int("now_ms", value, 0, MAX_TIME_MS)

    def _last_id(self, db: sqlite3.Connection) -> int:
        return int(db.execute("SELECT value FROM meta WHERE key = 'last_id'").fetchone()[0])

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise InputError(f"store {str(self.path)!r} is closed")
        return self._db

    # -- writes -----------------------------------------------------------------------------

    def append(self, channel: str, user: str, body: str, *, now_ms: int | None = None,
               idempotency_key: str | None = None) -> int:
        """Store one message and return its id, after the transaction has committed.

        With ``idempotency_key`` the write is stored once: the key is kept with the message in
        the same transaction, and a later append with the same key (a client's retry after
        an answer it never got) returns the first id and stores nothing, for
        ``IDEMPOTENCY_TTL_MS``.

        Raises
        ------
        InputError
            ``channel``, ``user`` or ``body`` is empty, too long or malformed, or ``now_ms`` is
            not a non-negative integer; the message names the parameter. The key was used for
            another message.
        """
        row = self._validated(channel, user, body, now_ms)
        if idempotency_key is None:
            return self._write([row])[0]
        key = check_idempotency_key(idempotency_key)
        digest = message_digest(channel, user, body)
        self._check_writable()
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                seen = db.execute("SELECT channel, digest, id FROM writes WHERE idem = ?",
                                  (key,)).fetchone()
                if seen is not None:
                    db.execute("ROLLBACK")
                    if seen[0] != channel or seen[1] != digest:
                        raise IdempotencyConflict(
                            "this Idempotency-Key was used for another message: a retry must "
                            "repeat its channel, user and body; a new message needs a new key")
                    return int(seen[2])
                message_id = self._insert(db, [row])[0]
                db.execute("INSERT INTO writes (idem, channel, digest, id) VALUES (?, ?, ?, ?)",
                           (key, channel, digest, message_id))
                self._keyed += 1
                if self._keyed % _PRUNE_EVERY == 0:
                    oldest = max(0, (row[3] - IDEMPOTENCY_TTL_MS)) << SEQUENCE_BITS
                    db.execute("DELETE FROM writes WHERE id < ?", (oldest,))
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            return message_id

    def append_many(self, rows: Iterable[Sequence[Any]]) -> list[int]:
        """Bulk load ``(channel, user, body, ts_ms)`` rows in one transaction; their ids.

        ``ts_ms`` may be None (the store's clock). Every row is validated before anything is
        written, so a bad row writes nothing; inserts go in batches of ``BULK_BATCH_ROWS``.

        Raises
        ------
        InputError
            A row is not 4 fields or one of its fields is invalid; the message gives the row's
            index and the parameter.
        """
        checked = self._checked_rows(rows)
        return self._write(checked) if checked else []

    def _checked_rows(self, rows: Iterable[Sequence[Any]]) -> list[tuple[str, str, str, int]]:
        checked = []
        for i, row in enumerate(rows):
            if len(row) != 4:
                raise InputError(f"rows[{i}] must be (channel, user, body, ts_ms), "
                                 f"got {len(row)} fields")
            try:
                checked.append(self._validated(*row))
            except InputError as e:
                raise InputError(f"rows[{i}]: {e}") from e
        return checked

    def _validated(self, channel: Any, user: Any, body: Any,
                   now_ms: Any) -> tuple[str, str, str, int]:
        return (_check_text("channel", channel, MAX_CHANNEL_CHARS),
                _check_text("user", user, MAX_USER_CHARS),
                _check_body(body, self.max_body_bytes),
                self._now(now_ms))

    def _write(self, rows: list[tuple[str, str, str, int]]) -> list[int]:
        """Insert validated rows in one committed transaction, assigning their ids."""
        self._check_writable()
        with self._lock:
            db = self._conn()
            db.execute("BEGIN IMMEDIATE")
            try:
                ids = self._insert(db, rows)
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise
            return ids

    def _check_writable(self) -> None:
        if self.read_only:
            raise InputError(f"store {str(self.path)!r} is read-only (a replica): write to "
                             "its primary")
        if self._loading:
            raise InputError(f"store {str(self.path)!r} is in a staged load: writes wait "
                             "until it is committed or aborted")

    def _insert(self, db: sqlite3.Connection, rows: list[tuple[str, str, str, int]]
                ) -> list[int]:
        """Insert validated rows inside the open transaction, assigning their ids."""
        last = self._last_id(db)
        ids = []
        for _, _, _, ts in rows:
            last = self._next_id(last, ts)
            ids.append(last)
        it = iter(zip(ids, rows, strict=True))
        while batch := list(islice(it, BULK_BATCH_ROWS)):
            db.executemany(
                "INSERT INTO messages (channel, id, user, body, ts_ms) "
                "VALUES (?, ?, ?, ?, ?)",
                [(c, i, u, b, t) for i, (c, u, b, t) in batch])
        db.execute("UPDATE meta SET value = ? WHERE key = 'last_id'", (last,))
        return ids

    # -- staged loads -----------------------------------------------------------------------

    def begin_load(self) -> None:
        """Open the transaction of a staged load (rows added by ``load_rows`` become visible
        only at ``commit_load``)."""
        self._check_writable()
        with self._lock:
            self._conn().execute("BEGIN IMMEDIATE")
            self._loading = True

    def load_rows(self, rows: Iterable[Sequence[Any]]) -> int:
        """Add ``(channel, user, body, ts_ms)`` rows to the staged load; how many.

        Raises
        ------
        InputError
            No staged load is open, or a row is invalid (nothing of this call is added).
        """
        checked = self._checked_rows(rows)
        with self._lock:
            if not self._loading:
                raise InputError(f"store {str(self.path)!r} has no staged load: call "
                                 "begin_load first")
            db = self._conn()
            db.execute("SAVEPOINT load_rows")
            try:
                self._insert(db, checked)
            except BaseException:
                # SQLite rolls a full disk's transaction back itself, savepoint and all: the
                # error to report is the disk's, not "no such savepoint"
                if db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK TO load_rows")
                        db.execute("RELEASE load_rows")
                else:
                    self._loading = False
                raise
            db.execute("RELEASE load_rows")
        return len(checked)

    def commit_load(self) -> None:
        """Commit every row of the staged load at once (durably, like ``append``)."""
        with self._lock:
            if not self._loading:
                raise InputError(f"store {str(self.path)!r} has no staged load to commit")
            self._conn().execute("COMMIT")
            self._loading = False

    def abort_load(self) -> None:
        """Drop every row of the staged load (idempotent: no load, nothing to do)."""
        with self._lock:
            if self._loading and self._db is not None and self._db.in_transaction:
                self._db.execute("ROLLBACK")
            self._loading = False

    # -- reads ------------------------------------------------------------------------------

    def history(self, channel: str, *, limit: int = 50,
                before: int | None = None) -> list[Message]:
        """A channel's messages newest first: at most ``limit``, ids strictly below ``before``.

        Page through a channel by passing the last id of one page as the next ``before``.

        Raises
        ------
        InputError
            ``channel`` is malformed, ``limit`` is not in 1..1000, or ``before`` is not a
            positive integer.
        """
        _check_text("channel", channel, MAX_CHANNEL_CHARS)
        _check_int("limit", limit, 1, MAX_LIMIT)
        if before is not None:
            _check_int("before", before, 1, MAX_ID)
        sql = "SELECT id, channel, user, body, ts_ms FROM messages WHERE channel = ?"
        args: tuple[Any, ...] = (channel, limit)
        if before is not None:
            sql += " AND id < ?"
            args = (channel, before, limit)
        with self._lock:
            rows = self._conn().execute(sql + " ORDER BY id DESC LIMIT ?", args).fetchall()
        return [Message(*row) for row in rows]

    def pragma(self, name: str) -> Any:
        """The value of ``PRAGMA name`` on this store's connection (journal_mode, ...)."""
        if not re.fullmatch(r"[a-z_]+", name):
            raise InputError(f"name must be a pragma name, got {name!r}")
        with self._lock:
            return self._conn().execute(f"PRAGMA {name}").fetchone()[0]

    def close(self) -> None:
        """Close the database (an open staged load is rolled back); idempotent."""
        with self._lock:
            self._loading = False
            if self._db is not None:
                self._db.close()
                self._db = None

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
