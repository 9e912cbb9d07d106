"""Bulk load: fill the shards from ``hotshard generate`` output, in batches, through the workers.

Every row becomes one message of its channel (``channel_id``), written at its ``timestamp``,
by user ``u<user_id>``, with a body of ``size`` bytes (clipped to the body limit). Rows are read
in record batches by DuckDB (Parquet, CSV or JSON lines alike), placed with the service's
router (vectorised), and sent to each shard as ``append_many`` calls of ``LOAD_BATCH_ROWS``
rows: one committed transaction per call, all shards loading at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from hotshard.errors import InputError
from hotshard.profile.count import resolve_inputs
from hotshard.service.chat import ChatService

__all__ = ["LOAD_BATCH_ROWS", "LoadResult", "check_loadable", "load_messages"]

LOAD_BATCH_ROWS = 10_000
READ_BATCH_ROWS = 100_000
_READERS = {"parquet": "read_parquet", "csv": "read_csv_auto", "json": "read_json_auto"}


@dataclass(frozen=True)
class LoadResult:
    messages: int
    per_shard: tuple[int, ...]
    seconds: float

    def to_dict(self) -> dict:
        return {"messages": self.messages, "per_shard": list(self.per_shard),
                "seconds": round(self.seconds, 3)}


def check_loadable(path: str) -> int:
    """The number of rows ``load_messages`` will load from ``path``; InputError unless it can
    load them (checked before any worker starts, so a wrong file costs nothing and leaves
    nothing). One scan gives both the count and the first invalid channel id."""
    import duckdb

    from hotshard.service.router import CHANNEL_PATTERN, check_channel

    con = duckdb.connect()
    try:
        query, file = _query(con, path)
        total, bad = con.execute(
            f"SELECT count(*), min(channel) FILTER (WHERE NOT regexp_matches(channel, ?)) "
            f"FROM ({query})", [CHANNEL_PATTERN, file]).fetchall()[0]
    except duckdb.Error as e:
        raise InputError(f"{path}: {str(e).splitlines()[0]}") from e
    finally:
        con.close()
    if bad is not None:
        try:
            check_channel(bad)
        except InputError as e:
            raise InputError(f"{path}: {e}") from None
    if not total:
        raise InputError(f"{path} has no rows to load")
    return int(total)


def _query(con, path: str) -> tuple[str, str]:
    """(SQL selecting channel, user_id, size, ts_ms from the file; the file)."""
    import duckdb

    files, fmt = resolve_inputs([path])
    con.execute("SET TimeZone = 'UTC'")
    source = f"{_READERS[fmt]}(?)"
    try:
        columns = [c[0] for c in con.execute(f"DESCRIBE SELECT * FROM {source}",
                                             [files[0]]).fetchall()]
    except duckdb.Error as e:
        raise InputError(f"{path} cannot be read as {fmt}: {str(e).splitlines()[0]}") from e
    missing = [c for c in ("channel_id", "timestamp") if c not in columns]
    if missing:
        raise InputError(f"{path} has no {' or '.join(missing)} column: load the output of "
                         f"`hotshard generate` (it has {', '.join(columns[:8])})")
    user = "CAST(user_id AS VARCHAR)" if "user_id" in columns else "'0'"
    size = "CAST(size AS BIGINT)" if "size" in columns else "120"
    query = (f"SELECT CAST(channel_id AS VARCHAR) AS channel, {user} AS user_id, "
             f"{size} AS size, epoch_ms(CAST(timestamp AS TIMESTAMPTZ)) AS ts_ms "
             f"FROM {source} WHERE channel_id IS NOT NULL")
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
        raise InputError(f"{path}: {str(e).splitlines()[0]}") from e
    except BaseException:
        con.close()
        raise
    return con, reader, int(total)


async def load_messages(service: ChatService, path: str, *,
                        progress: Callable[[int, int], None] | None = None,
                        total: int | None = None) -> LoadResult:
    """Load every row of ``path`` as a message; returns counts per shard.

    ``total`` is the row count when already known (``check_loadable`` returns it), saving a
    scan of the file.

    Raises
    ------
    InputError
        The file is missing, empty, unreadable or lacks ``channel_id`` / ``timestamp``, or a
        channel id is not a valid channel.
    """
    import time

    from hotshard.service.router import check_channel

    started = time.perf_counter()
    con, reader, total = _open(path, total)
    if total == 0:
        raise InputError(f"{path} has no rows to load")
    per_shard = np.zeros(service.router.shards, dtype=np.int64)
    done = 0
    limit = service.max_body_bytes
    bodies: dict[int, str] = {}
    try:
        for batch in reader:
            channels = batch.column("channel").to_pylist()
            users = batch.column("user_id").to_pylist()
            sizes = np.clip(np.nan_to_num(batch.column("size").to_numpy(zero_copy_only=False)),
                            1, limit).astype(np.int64)
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
            order = np.argsort(shards, kind="stable")
            bounds = np.searchsorted(shards[order], np.arange(service.router.shards + 1))
            calls = []
            for shard in range(service.router.shards):
                index = order[bounds[shard]:bounds[shard + 1]]
                if not index.size:
                    continue
                rows = []
                for i in index.tolist():
                    size = int(sizes[i])
                    body = bodies.get(size) or bodies.setdefault(size, "m" * size)
                    rows.append([keys[i], f"u{users[i]}", body, int(ts[i])])
                per_shard[shard] += len(rows)
                calls.append(_send(service, shard, rows))
            await asyncio.gather(*calls)
            done += batch.num_rows
            if progress is not None:
                progress(done, total)
    finally:
        con.close()
    return LoadResult(done, tuple(int(x) for x in per_shard), time.perf_counter() - started)


async def _send(service: ChatService, shard: int, rows: list[list]) -> None:
    client = service.supervisor.primary(shard)
    for start in range(0, len(rows), LOAD_BATCH_ROWS):
        await client.call("append_many", {"rows": rows[start:start + LOAD_BATCH_ROWS]},
                          timeout=600)
