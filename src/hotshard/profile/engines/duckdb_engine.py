"""DuckDB engine: embedded, multi-threaded, streams files larger than memory (spills to disk)."""

from __future__ import annotations

import tempfile

import numpy as np

from hotshard.errors import InputError
from hotshard.profile.count import (
    SIZE_QUANTILES,
    CountSpec,
    Progress,
    RawCounts,
    RawDist,
    accumulate_placement,
    run_with_progress,
)

_READERS = {
    "parquet": "read_parquet({files})",
    "csv": "read_csv({files}, header = true)",
    "json": "read_json({files}, format = 'newline_delimited')",
}
_PERFECT_HT_BITS = 22
_INT_TYPES = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER",
              "UBIGINT", "HUGEINT"}
_NUM_TYPES = _INT_TYPES | {"FLOAT", "DOUBLE", "REAL"}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


class _Session:
    def __init__(self, spec: CountSpec, progress: Progress | None):
        import duckdb

        self.duckdb = duckdb
        self.spec = spec
        self.progress = progress
        self.tmp = tempfile.TemporaryDirectory(prefix="hotshard-duckdb-")
        self.con = duckdb.connect(config={"temp_directory": self.tmp.name,
                                          "preserve_insertion_order": False})
        # Key columns are often dense integer IDs. When the input's statistics bound the key
        # range below 2^22, DuckDB then aggregates into a perfect hash table (no hashing, no
        # probing): ~1.7x faster on 100 M events here; other inputs are unaffected.
        self.con.execute(f"SET perfect_ht_threshold = {_PERFECT_HT_BITS}")
        files = "[" + ", ".join(_lit(f) for f in spec.files) + "]"
        self.source = _READERS[spec.fmt].format(files=files)

    def close(self) -> None:
        self.con.close()
        self.tmp.cleanup()

    def sql(self, query: str, stage: str | None = None):
        def work():
            return self.con.execute(query)

        try:
            if stage is None:
                return work()
            return run_with_progress(work, self._poll, self.progress, stage)
        except self.duckdb.Error as exc:
            raise InputError(f"cannot count {', '.join(self.spec.files[:3])}"
                             f"{' ...' if len(self.spec.files) > 3 else ''}: "
                             f"{_first_line(exc)}") from None

    def _poll(self) -> float | None:
        try:
            pct = self.con.query_progress()
        except Exception:  # noqa: BLE001 - progress is best effort
            return None
        return None if pct is None or pct < 0 else pct / 100.0


def _check_columns(s: _Session) -> dict[str, str]:
    rows = s.sql(f"DESCRIBE SELECT * FROM {s.source}").fetchall()
    types = {r[0]: str(r[1]).upper() for r in rows}
    for col in s.spec.columns():
        if col not in types:
            raise InputError(
                f"no column {col!r} in the input; its columns are: {', '.join(types)}"
            )
    for col, what in ((s.spec.counts, "--counts"), (s.spec.size, "--size")):
        if col and types[col] not in _NUM_TYPES and not types[col].startswith("DECIMAL"):
            bad = s.sql(f"SELECT {_q(col)} FROM {s.source} WHERE TRY_CAST({_q(col)} AS DOUBLE) "
                        f"IS NULL AND {_q(col)} IS NOT NULL LIMIT 1").fetchone()
            example = f" such as {bad[0]!r}" if bad else ""
            raise InputError(f"{what} column {col!r} holds non-numeric values{example}")
    return types


def _dist(s: _Session, table: str, where: str = "") -> RawDist:
    cond = f"WHERE {where}" if where else ""
    head = s.sql(
        f"SELECT CAST(k AS VARCHAR), n FROM {table} {cond} {'AND' if where else 'WHERE'} "
        f"n >= {int(s.spec.min_count)} ORDER BY n DESC, k ASC LIMIT {int(s.spec.top_k)}"
    ).fetchall()
    coc = s.sql(f"SELECT n, count(*) AS c FROM {table} {cond} GROUP BY n ORDER BY n").fetchnumpy()
    return RawDist(
        head_keys=[r[0] for r in head],
        head_counts=[int(r[1]) for r in head],
        coc_values=np.asarray(coc["n"], dtype=np.int64),
        coc_keys=np.asarray(coc["c"], dtype=np.int64),
    )


def _count_expr(s: _Session) -> str:
    if s.spec.counts:
        return f"sum({_q(s.spec.counts)})"
    return "count(*)"


def _check_counts(s: _Session) -> None:
    c = _q(s.spec.counts)
    row = s.sql(f"SELECT min({c}), count(*) FILTER ({c} IS NULL), "
                f"count(*) FILTER ({c} <> floor({c})) FROM {s.source}").fetchone()
    if row[0] is not None and row[0] < 0:
        raise InputError(f"--counts column {s.spec.counts!r} holds a negative count ({row[0]})")
    if row[1]:
        raise InputError(f"--counts column {s.spec.counts!r} has {row[1]} empty cells")
    if row[2]:
        raise InputError(f"--counts column {s.spec.counts!r} holds non-integer counts")


def count(spec: CountSpec, progress: Progress | None = None) -> RawCounts:
    """Count events per key (and per op) with DuckDB; only aggregates leave the engine."""
    s = _Session(spec, progress)
    try:
        types = _check_columns(s)
        if spec.counts:
            _check_counts(s)
        key = _q(spec.key)
        n_expr = _count_expr(s)
        if spec.op:
            s.sql(f"CREATE TEMP TABLE kco AS SELECT CAST({_q(spec.op)} AS VARCHAR) AS o, "
                  f"{key} AS k, {n_expr} AS n, count(*) AS r FROM {s.source} GROUP BY ALL",
                  stage="counting events per key and op")
            s.sql("CREATE TEMP TABLE kc_all AS SELECT k, sum(n) AS n, sum(r) AS r "
                  "FROM kco GROUP BY k")
        else:
            # with event rows, rows per key == events per key: no second aggregate needed
            rows_expr = "r" if spec.counts else "n"
            s.sql(f"CREATE TEMP TABLE kc_all AS SELECT k, n, {rows_expr} AS r FROM (SELECT "
                  f"{key} AS k, {n_expr} AS n{', count(*) AS r' if spec.counts else ''} "
                  f"FROM {s.source} GROUP BY ALL)", stage="counting events per key")
        rows, null_keys = s.sql(
            "SELECT coalesce(sum(r), 0), coalesce(sum(n) FILTER (k IS NULL), 0) FROM kc_all"
        ).fetchone()
        overall = _dist(s, "kc_all", "k IS NOT NULL AND n > 0")
        operations = {}
        if spec.op:
            ops = [r[0] for r in s.sql("SELECT DISTINCT o FROM kco WHERE k IS NOT NULL AND "
                                       "o IS NOT NULL ORDER BY o").fetchall()]
            for o in ops:
                operations[o] = _dist(s, "kco", f"o = {_lit(o)} AND k IS NOT NULL AND n > 0")
        sizes = None
        if spec.size:
            qs = ", ".join(str(q) for q in SIZE_QUANTILES)
            vals = s.sql(f"SELECT quantile_cont({_q(spec.size)}, [{qs}]) FROM {s.source}",
                         stage="payload-size quantiles").fetchone()[0]
            if vals is not None:
                sizes = {str(q): float(v) for q, v in zip(SIZE_QUANTILES, vals, strict=True)}
        second_counts = window = None
        if spec.time:
            second_counts, window = _per_second(s, types[spec.time])
        key_type = "int64" if types[spec.key] in _INT_TYPES else "string"
        placement = {}
        if spec.placements:
            placement = accumulate_placement(_key_batches(s), overall.head_keys,
                                             spec.placements)
        return RawCounts(rows=int(rows), null_keys=int(null_keys), key_type=key_type,
                         overall=overall, operations=operations, size_quantiles=sizes,
                         second_counts=second_counts, window=window, placement=placement)
    finally:
        s.close()


def _per_second(s: _Session, col_type: str):
    t = _q(s.spec.time)
    if col_type.startswith("TIMESTAMP") or col_type == "DATE":
        sec = f"floor(epoch({t}))"
    elif col_type in _NUM_TYPES or col_type.startswith("DECIMAL"):
        sec = f"floor({t})"
    else:
        raise InputError(f"--time column {s.spec.time!r} has type {col_type}: it must be a "
                         "timestamp or numeric epoch seconds")
    s.sql(f"CREATE TEMP TABLE per_sec AS SELECT CAST({sec} AS BIGINT) AS sec, count(*) AS c "
          f"FROM {s.source} WHERE {t} IS NOT NULL GROUP BY ALL", stage="events per second")
    lo, hi = s.sql("SELECT min(sec), max(sec) FROM per_sec").fetchone()
    if lo is None:
        return None, None
    coc = s.sql("SELECT c, count(*) AS seconds FROM per_sec GROUP BY c ORDER BY c").fetchnumpy()
    return ((np.asarray(coc["c"], dtype=np.int64), np.asarray(coc["seconds"], dtype=np.int64)),
            (float(lo), float(hi)))


def _key_batches(s: _Session, size: int = 1 << 18):
    """(keys as text, counts) of every key, streamed in batches."""
    res = s.sql("SELECT CAST(k AS VARCHAR) AS k, n FROM kc_all WHERE k IS NOT NULL AND n > 0")
    while True:
        chunk = res.fetchmany(size)
        if not chunk:
            return
        yield [r[0] for r in chunk], [r[1] for r in chunk]
