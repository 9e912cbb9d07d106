"""Bulk load: fill the shards from ``hotshard generate`` output, in batches, through the workers.

Every row becomes one message of its channel (``channel_id``), written at its ``timestamp``,
by user ``u<user_id>``, with a body of ``size`` bytes (clipped to the body limit). Rows are read
in record batches by DuckDB (Parquet, CSV or JSON lines alike), placed with the service's
router (vectorised), and sent to each shard in calls of ``LOAD_BATCH_ROWS`` rows, all shards
loading at once.

A load is all-or-nothing, by two means, because each covers what the other cannot:

1. ``check_loadable`` decodes every value of every row group before any worker starts (one
   scan, about a second per million rows; the load itself takes ~30 s). A corrupt page, a bad
   channel id or a timestamp that does not convert is refused there, with nothing created: no
   empty shard databases. Validation alone is not enough: a worker can crash, the disk can
   fill, the user can press Ctrl-C half-way.
2. On SQLite shards the load is staged: each shard opens one transaction (``load_begin``),
   receives its rows (``load_rows``) and commits only when every shard has every row
   (``load_commit``). Any failure before that aborts every shard's transaction, and a killed
   process's uncommitted transaction is rolled back by SQLite itself, so the databases hold
   exactly what they held before. (Staging into separate databases and renaming them into
   place would need a merge for ``append`` into a directory that already holds messages; one
   transaction per shard serves both cases.) The commits of the shards are the only
   non-atomic step: N short fsyncs; if one fails, the error names the shards that committed.

A Redis Cluster store (``--store``) has no transaction spanning a load: there the file is
still validated first, and a failure part-way says how many rows were written.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hotshard.errors import HotshardError, InputError, LoadError
from hotshard.profile.count import resolve_inputs
from hotshard.service.chat import ChatService

__all__ = ["LOAD_BATCH_ROWS", "LoadError", "LoadResult", "check_loadable", "load_messages",
           "null_channels"]

LOAD_BATCH_ROWS = 10_000
READ_BATCH_ROWS = 100_000
_CONTROL_CHARS = "[\\x00-\\x1f\\x7f-\\x9f]"
# Aborting is a rollback per shard; a shard that does not answer in this time is being
# stopped, and its uncommitted transaction dies with its process.
ABORT_TIMEOUT_S = 10.0
_READERS = {"parquet": "read_parquet", "csv": "read_csv_auto", "json": "read_json_auto"}


class _PartialCommit(LoadError):
    """Some shards committed their part of the load, another failed to."""


@dataclass(frozen=True)
class LoadResult:
    messages: int
    per_shard: tuple[int, ...]
    seconds: float
    skipped_rows: int = 0   # rows without a channel, left out (``skip_bad_rows``)

    def to_dict(self) -> dict:
        return {"messages": self.messages, "per_shard": list(self.per_shard),
                "seconds": round(self.seconds, 3), "skipped_rows": self.skipped_rows}


def check_loadable(path: str, *, skip_bad_rows: bool = False) -> int:
    """The number of rows ``load_messages`` will load from ``path``; InputError unless it can
    load every one of them. A row without a channel (NULL ``channel_id``) is refused, with
    their count, unless ``skip_bad_rows`` (then they are left out: ``null_channels`` counts
    them); a NULL ``user_id`` is the user ``u0``, as a file without the column.

    Checked before any worker starts, so a wrong file costs nothing and leaves nothing. One
    scan decodes every value the load reads (channel, user, size, timestamp) in every row
    group, so a corrupt page anywhere (a damaged compressed block, a truncated last row group)
    is found here, not after half the rows were written; it also finds the first invalid
    channel id. ``count(*)`` alone would not do: it is answered from the file's metadata.
    """
    import duckdb

    from hotshard.service.router import CHANNEL_PATTERN, check_channel
    from hotshard.service.store import MAX_TIME_MS, MAX_USER_CHARS

    con = duckdb.connect()
    try:
        query, file = _query(con, path, keep_null_channels=True)
        total, bad, long_user, control_user, no_time, first, last, _, no_channel = con.execute(
            f"SELECT count(*), min(channel) FILTER (WHERE NOT regexp_matches(channel, ?)), "
            f"max(length(user_id)), count(*) FILTER (WHERE regexp_matches(user_id, ?)), "
            f"count(*) FILTER (WHERE ts_ms IS NULL AND channel IS NOT NULL), "
            f"min(ts_ms), max(ts_ms), sum(size), count(*) FILTER (WHERE channel IS NULL) "
            f"FROM ({query})", [CHANNEL_PATTERN, _CONTROL_CHARS, file]).fetchall()[0]
    except duckdb.Error as e:
        raise InputError(f"{path} cannot be loaded: {_first_line(e)}") from e
    finally:
        con.close()
    if bad is not None:
        try:
            check_channel(bad)
        except InputError as e:
            raise InputError(f"{path}: {e}") from None
    if no_channel and not skip_bad_rows:
        raise InputError(f"{path}: {no_channel:,} rows have no channel_id (NULL): fix them, or "
                         "give ${skip_bad_rows} to load the others (their count is reported)")
    total -= no_channel
    if not total:
        raise InputError(f"{path} has no rows to load"
                         + (f" ({no_channel:,} without a channel_id)" if no_channel else ""))
    user_chars = MAX_USER_CHARS - 1  # stored as u<user_id>
    if (long_user or 0) > user_chars or control_user:
        raise InputError(f"{path}: user_id must be at most {user_chars} characters without "
                         f"control characters (longest: {long_user})")
    if no_time:
        raise InputError(f"{path}: {no_time:,} rows have no timestamp")
    if first < 0 or last > MAX_TIME_MS:
        raise InputError(f"{path}: timestamps must be between 1970 and 2039 (message ids "
                         "hold the time in 41 bits)")
    return int(total)


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def null_channels(path: str) -> int:
    """Rows of ``path`` without a channel (left out by a load with ``skip_bad_rows``)."""
    import duckdb

    con = duckdb.connect()
    try:
        query, file = _query(con, path, keep_null_channels=True)
        return int(con.execute(f"SELECT count(*) FROM ({query}) WHERE channel IS NULL",
                               [file]).fetchall()[0][0])
    except duckdb.Error as e:
        raise InputError(f"{path} cannot be loaded: {_first_line(e)}") from e
    finally:
        con.close()


def _query(con, path: str, *, keep_null_channels: bool = False) -> tuple[str, str]:
    """(SQL selecting channel, user_id, size, ts_ms from the file; the file). Rows without a
    channel are left out unless ``keep_null_channels`` (``check_loadable`` counts them); a
    NULL user is user 0."""
    import duckdb

    files, fmt = resolve_inputs([path])
    con.execute("SET TimeZone = 'UTC'")
    source = f"{_READERS[fmt]}(?)"
    try:
        columns = [c[0] for c in con.execute(f"DESCRIBE SELECT * FROM {source}",
                                             [files[0]]).fetchall()]
    except duckdb.Error as e:
        raise InputError(f"{path} cannot be read as {fmt}: {_first_line(e)}") from e
    missing = [c for c in ("channel_id", "timestamp") if c not in columns]
    if missing:
        raise InputError(f"{path} has no {' or '.join(missing)} column: load the output of "
                         f"`hotshard generate` (it has {', '.join(columns[:8])})")
    user = "COALESCE(CAST(user_id AS VARCHAR), '0')" if "user_id" in columns else "'0'"
    size = "CAST(size AS BIGINT)" if "size" in columns else "120"
    where = "" if keep_null_channels else " WHERE channel_id IS NOT NULL"
    query = (f"SELECT CAST(channel_id AS VARCHAR) AS channel, {user} AS user_id, "
             f"{size} AS size, epoch_ms(CAST(timestamp AS TIMESTAMPTZ)) AS ts_ms "
             f"FROM {source}{where}")
    return query, files[0]


def _open(path: str, total: int | None):  # -> (connection, arrow batch reader, total rows)
    import duckdb

    con = duckdb.connect()
    try:
        query, file = _query(con, path)
        if total is None:
            total = con.execute(f"SELECT count(*) FROM ({query})", [file]).fetchall()[0][0]
        reader = con.sql(query, params=[file]).to_arrow_reader(READ_BATCH_ROWS)
    except duckdb.Error as e:
        con.close()
        raise InputError(f"{path} cannot be loaded: {_first_line(e)}") from e
    except BaseException:
        con.close()
        raise
    return con, reader, int(total)


async def load_messages(service: ChatService, path: str, *,
                        progress: Callable[[int, int], None] | None = None,
                        total: int | None = None) -> LoadResult:
    """Load every row of ``path`` as a message, all or nothing; returns counts per shard.

    ``total`` is the row count when already known (``check_loadable`` returns it, having
    checked every row), saving a scan of the file.

    Raises
    ------
    InputError
        The file is missing, empty, unreadable or lacks ``channel_id`` / ``timestamp``, or a
        channel id is not a valid channel. On SQLite shards nothing was loaded.
    LoadError
        The load failed part-way for another reason; the message says what was kept.
    """
    import time

    started = time.perf_counter()
    con, reader, total = _open(path, total)
    if total == 0:
        con.close()
        raise InputError(f"{path} has no rows to load")
    shards = range(service.router.shards)
    staged = _stages(service)
    per_shard = np.zeros(service.router.shards, dtype=np.int64)
    done = 0
    committed = False

    def sent(rows: int) -> None:  # after each call: progress as fine as the calls
        nonlocal done
        done += rows
        if progress is not None:
            progress(done, total)

    try:
        if staged:
            await asyncio.gather(*(_call(service, s, "load_begin", {}) for s in shards))
        bodies: dict[int, str] = {}
        for batch in _batches(reader, path):
            parts = list(_rows_by_shard(service, batch, bodies))
            for shard, rows in parts:
                per_shard[shard] += len(rows)
            await asyncio.gather(*(_send(service, shard, rows, staged, sent)
                                   for shard, rows in parts))
        if staged:
            await _commit(service, path)
        committed = True
    except HotshardError as e:
        if not staged:
            raise LoadError(f"loading {path} stopped after {done:,} of {total:,} rows (the "
                            f"store keeps them: it has no transaction): {e}") from e
        if isinstance(e, InputError | _PartialCommit):
            raise
        raise LoadError(f"loading {path} failed; nothing of it was kept: {e}") from e
    finally:
        con.close()
        if staged and not committed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(_abort(service), ABORT_TIMEOUT_S)
    return LoadResult(done, tuple(int(x) for x in per_shard), time.perf_counter() - started)


def _stages(service: ChatService) -> bool:
    """Whether the backend's shards take a staged load (SQLite worker processes do)."""
    from hotshard.service.supervisor import Supervisor

    return isinstance(service.supervisor, Supervisor)


def _batches(reader, path: str):
    """The reader's record batches; a read error mid-file as one InputError line."""
    import duckdb

    it = iter(reader)
    while True:
        try:
            batch = next(it)
        except StopIteration:
            return
        except (duckdb.Error, OSError) as e:
            raise InputError(f"{path} cannot be loaded: {_first_line(e)}") from e
        except Exception as e:  # pyarrow's errors for a damaged stream
            if type(e).__module__.startswith(("pyarrow", "duckdb")):
                raise InputError(f"{path} cannot be loaded: {_first_line(e)}") from e
            raise
        yield batch


def _placed(service: ChatService, batch) -> tuple[np.ndarray, list, list, np.ndarray,
                                                   np.ndarray]:
    """(shard of each row, partition keys, users, sizes, timestamps) of one record batch."""
    from hotshard.service.router import check_channel

    channels = batch.column("channel").to_pylist()
    users = batch.column("user_id").to_pylist()
    sizes = np.clip(np.nan_to_num(batch.column("size").to_numpy(zero_copy_only=False)),
                    1, service.max_body_bytes).astype(np.int64)
    ts = batch.column("ts_ms").to_numpy(zero_copy_only=False).astype(np.int64)
    for channel in set(channels):
        check_channel(channel)
    shards = service.router.shards_of(channels)
    keys = list(channels)
    for channel in {c for c in channels if service.splits.get(c) is not None}:
        plan = service.splits.get(channel)
        for i in (i for i, c in enumerate(channels) if c == channel):
            if ts[i] >= plan.since_ms:
                b = plan.bucket_of(int(ts[i]))
                keys[i], shards[i] = plan.keys[b], plan.shards[b]
    return np.asarray(shards), keys, users, sizes, ts


def _rows_by_shard(service: ChatService, batch, bodies: dict[int, str]):
    """(shard, rows) for every shard that gets rows of this batch (``bodies``: one body string
    per size, shared by every row of that size)."""
    shards, keys, users, sizes, ts = _placed(service, batch)
    order = np.argsort(shards, kind="stable")
    bounds = np.searchsorted(shards[order], np.arange(service.router.shards + 1))
    for shard in range(service.router.shards):
        index = order[bounds[shard]:bounds[shard + 1]]
        if not index.size:
            continue
        rows = []
        for i in index.tolist():
            size = int(sizes[i])
            body = bodies.get(size) or bodies.setdefault(size, "m" * size)
            rows.append([keys[i], f"u{users[i]}", body, int(ts[i])])
        yield shard, rows


async def _call(service: ChatService, shard: int, op: str, args: dict) -> None:
    """One call to a shard's primary; any failure (also a row it refused) is a LoadError: the
    file was checked, so the fault is the shard's."""
    try:
        await service.supervisor.primary(shard).call(op, args, timeout=600)
    except HotshardError as e:
        raise LoadError(f"shard {shard}: {e}") from e


async def _send(service: ChatService, shard: int, rows: list[list], staged: bool,
                sent: Callable[[int], None]) -> None:
    op = "load_rows" if staged else "append_many"
    for start in range(0, len(rows), LOAD_BATCH_ROWS):
        chunk = rows[start:start + LOAD_BATCH_ROWS]
        await _call(service, shard, op, {"rows": chunk})
        sent(len(chunk))


async def _commit(service: ChatService, path: str) -> None:
    """Commit every shard's staged rows; if one fails, say which shards committed."""
    shards = range(service.router.shards)
    results = await asyncio.gather(*(_call(service, s, "load_commit", {}) for s in shards),
                                   return_exceptions=True)
    failed = [(s, r) for s, r in zip(shards, results, strict=True)
              if isinstance(r, BaseException)]
    if failed and len(failed) < len(results):
        kept = [s for s in shards if s not in {f for f, _ in failed}]
        raise _PartialCommit(f"loading {path}: shards {', '.join(map(str, kept))} committed their "
                        f"rows, shard {failed[0][0]} failed to ({failed[0][1]}): load the "
                        "file again into a new data directory")
    if failed:
        raise failed[0][1]


async def _abort(service: ChatService) -> None:
    """Drop every shard's staged rows (a shard that is down has lost them already)."""
    await asyncio.gather(*(_call(service, s, "load_abort", {})
                           for s in range(service.router.shards)), return_exceptions=True)
