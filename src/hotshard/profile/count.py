"""Counting engines: events per key from production data, into a ``Profile``.

Both engines compute the same small set of aggregates (per-key counts stay inside the engine;
only the head, the count-of-counts and a few totals come out), so DuckDB (default, embedded,
out-of-core) and Apache Spark (beyond one machine) give the same profile on the same data.
Only the key column and counts leave the engine: no other column's values are ever read out,
except the quantiles of the size column and per-second event counts of the time column.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from hotshard.errors import FitError, InputError
from hotshard.profile.document import KeyDistribution, Profile, bin_tail
from hotshard.profile.engine_io import (
    CountSpec,
    Progress,
    RawCounts,
    RawDist,
)

__all__ = ["ENGINES", "build_profile", "count_keys", "count_profile", "input_columns",
           "key_column_is_integer", "resolve_inputs", "starts_with"]

ENGINES = ("duckdb", "spark")


def starts_with(path: str, first: bytes) -> bool:
    """The file's first non-blank byte is ``first`` (False when it cannot be read)."""
    try:
        with open(path, "rb") as handle:
            return handle.read(4096).lstrip()[:1] == first
    except OSError:
        return False


def _fmt_of(path: str) -> str:
    name = path.lower()
    if name.endswith((".parquet", ".pq")):
        return "parquet"
    if name.endswith((".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt", ".txt.gz")):
        return "csv"
    if name.endswith(".json") and starts_with(path, b"["):
        return "key_array"  # one JSON array of keys (generate --format k6): its column is key
    if name.endswith((".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz")):
        return "json"
    raise InputError(
        f"cannot tell the format of {path}: use .parquet, .csv[.gz], .tsv or .jsonl files"
    )


def resolve_inputs(inputs: Sequence[str]) -> tuple[list[str], str]:
    """Expand globs, check every file exists and all share one format; returns (files, fmt)."""
    if not inputs:
        raise InputError("no input files given")
    files: list[str] = []
    for pattern in inputs:
        if any(ch in pattern for ch in "*?["):
            matched = sorted(glob.glob(pattern))
            if not matched:
                raise InputError(f"no files match {pattern}")
            files.extend(m for m in matched if not Path(m).is_dir())
            continue
        p = Path(pattern)
        if not p.exists():
            raise InputError(f"no such file: {pattern}")
        if p.is_dir():
            raise InputError(f"{pattern} is a directory: give files or a glob such as "
                             f"'{pattern.rstrip('/')}/*.parquet'")
        files.append(pattern)
    for f in files:
        if os.path.getsize(f) == 0:
            raise InputError(f"{f} is empty")
    formats = {_fmt_of(f) for f in files}
    if len(formats) > 1:
        raise InputError(
            f"inputs mix formats ({', '.join(sorted(formats))}): profile one at a time"
        )
    return files, formats.pop()


def _tail_distribution(raw: RawDist, min_tail: int = 10) -> KeyDistribution:
    """Subtract the head from the count-of-counts, fit the tail, log-bin its histogram."""
    from hotshard.profile.fit import fit_power_law

    values = raw.coc_values.astype(np.int64)
    keys = raw.coc_keys.astype(np.int64).copy()
    head_counts = np.asarray(raw.head_counts, dtype=np.int64)
    if head_counts.size:
        hv, hk = np.unique(head_counts, return_counts=True)
        pos = np.searchsorted(values, hv)
        if np.any(pos >= values.size) or np.any(values[np.minimum(pos, values.size - 1)] != hv):
            raise InputError("engine returned a head count missing from its count-of-counts")
        keys[pos] -= hk
    keep = keys > 0
    values, keys = values[keep], keys[keep]
    power_law = None
    if values.size:
        try:
            # tail keys are never above the smallest head count: fit the law truncated there
            xmax = int(head_counts.min()) if head_counts.size else None
            fit = fit_power_law(values, keys, min_tail=min_tail, xmax=xmax)
        except FitError:
            pass  # e.g. every tail key seen equally often: the histogram alone describes it
        else:
            power_law = {"alpha": fit.alpha, "alpha_se": fit.alpha_se, "xmin": fit.xmin,
                         "n_tail": fit.n_tail, "ks": fit.ks}
            if xmax is not None:
                power_law["xmax"] = xmax
    tail = bin_tail(values, keys, power_law)
    events = float(head_counts.sum()) + tail.events
    return KeyDistribution(events=events, keys=float(head_counts.size) + tail.keys,
                           head_keys=tuple(raw.head_keys),
                           head_counts=head_counts.astype(np.float64), tail=tail)


def _rate(second_counts: tuple[np.ndarray, np.ndarray], window: tuple[float, float]) -> dict:
    per_second, seconds = second_counts
    span = int(window[1] - window[0]) + 1
    empty = span - int(seconds.sum())
    values = np.concatenate([[0], per_second]) if empty > 0 else per_second
    weights = np.concatenate([[empty], seconds]) if empty > 0 else seconds
    order = np.argsort(values)
    values, weights = values[order], weights[order]
    cum = np.cumsum(weights)
    p99 = float(values[int(np.searchsorted(cum, 0.99 * span))])
    return {
        "mean_rps": float(np.dot(per_second, seconds)) / span,
        "p99_rps": p99,
        "peak_rps": float(per_second.max()),
        "seconds": span,
    }


def build_profile(raw: RawCounts, *, source: dict, min_count: int) -> Profile:
    """Assemble a validated ``Profile`` from an engine's aggregates."""
    overall = _tail_distribution(raw.overall)
    if overall.events == 0:
        raise InputError("the input holds no events with a key: nothing to profile")
    ops = {op: _tail_distribution(d) for op, d in raw.operations.items()}
    src = {**source, "rows": raw.rows, "key_type": raw.key_type, "null_keys": raw.null_keys,
           "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    rate = None
    if raw.second_counts is not None and raw.window is not None:
        rate = _rate(raw.second_counts, raw.window)
        src["window"] = {
            "start": datetime.fromtimestamp(raw.window[0], UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "end": datetime.fromtimestamp(raw.window[1], UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
    sizes = {"quantiles": raw.size_quantiles} if raw.size_quantiles is not None else None
    profile = Profile(source=src, dist=overall,
                      privacy={"min_count": int(min_count), "pseudonymized": False},
                      placement=dict(raw.placement), operations=ops, sizes=sizes, rate=rate,
                      locality=raw.locality, arrivals=raw.arrivals,
                      timelines=raw.timelines)
    return Profile.from_dict(profile.to_dict())  # the same validation a loaded file gets


def count_profile(
    inputs: Sequence[str],
    *,
    key: str,
    counts: str | None = None,
    op: str | None = None,
    size: str | None = None,
    time_col: str | None = None,
    top_k: int = 500,
    min_count: int = 1,
    engine: str = "duckdb",
    spark_master: str = "local[*]",
    progress: Progress | None = None,
    placements: Sequence[object] = (),
    pseudonymize_secret: bytes | None = None,
    locality: bool = True,
    time_unit: str = "auto",
    spark_session: object | None = None,
    spark_scratch: str | None = None,
    memory_limit: str | None = "2GB",
) -> Profile:
    """Count events per key in ``inputs`` and build a privacy-safe profile.

    Parameters
    ----------
    inputs : sequence of str
        Parquet, CSV (.gz) or JSON-lines files, or globs of them (one format per run).
    key : str
        Column holding the partition key (channel ID, ...).
    counts : str, optional
        The inputs are pre-aggregated (key, count) rows; this column holds the counts.
    op, size, time_col : str, optional
        Columns for per-operation distributions, payload-size quantiles, per-second rates.
    top_k : int
        Head size: keys kept exactly (default 500).
    min_count : int
        Privacy floor: no key seen fewer times is ever written.
    engine : {"duckdb", "spark"}
    progress : callable, optional
        ``progress(stage, fraction_or_None)``, called from the counting thread's poller.
    placements : sequence of Partitioner
        Record, for each, every shard's total tail events (counts only, no keys), so that
        ``predict`` is exact for that store.
    locality : bool
        Also measure the stream's temporal locality (``hotshard.profile.locality``), in
        ``time_col`` order when given, else input order. Event rows only (a counts column
        has no order). Spark keeps no file order: there, without ``time_col``, the order is
        Spark's reading order (input order for one file read in splits).
    time_unit : {"auto", "s", "ms", "us", "ns"}
        The unit of a numeric ``time_col`` (``hotshard.profile.time_units``): read from the
        values' magnitude by default (epoch seconds, milliseconds, microseconds or
        nanoseconds); a timestamp or ISO-text column carries its own.
    spark_session : pyspark.sql.SparkSession, optional
        Run on this session (your cluster's; it is left running) instead of starting one at
        ``spark_master``.
    spark_scratch : str, optional
        A directory the Spark executors and this process both reach, for the locality
        pass's sorted sample (default: a local temporary directory, right for ``local[*]``).
    memory_limit : str, optional
        DuckDB's working memory (``"2GB"``; None: DuckDB's default, 80% of RAM). Past it
        DuckDB spills its aggregates and sorts to a temporary directory.
    """
    from hotshard.profile.time_units import TIME_UNITS

    if time_unit != "auto" and time_unit not in TIME_UNITS:
        raise InputError(f"${{time_unit}} must be auto, {', '.join(TIME_UNITS)}; got {time_unit!r}")
    if time_unit != "auto" and time_col is None:
        raise InputError("a time unit needs a time column (${time_col} COL)")
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    if top_k < 1:
        raise InputError(f"top_k must be >= 1, got {top_k}")
    if min_count < 1:
        raise InputError(f"min_count must be >= 1, got {min_count}")
    if pseudonymize_secret is not None and not placements:
        raise InputError("pseudonymizing needs at least one partitioner with its shard count: "
                         "without real keys, placement must be recorded now")
    if counts is not None and (size or time_col):
        raise InputError("size and time columns need event rows; they cannot be used with "
                         f"a counts column ({counts!r})")
    named = [(param, column) for param, column in (("key", key), ("counts", counts), ("op", op),
                                                    ("size", size), ("time", time_col))
             if column is not None]
    for i, (param, column) in enumerate(named):
        first = next((p for p, c in named[:i] if c == column), None)
        if first is not None:
            raise InputError(f"the {first} and {param} columns are both {column!r}: the key, "
                             "counts, op, size and time columns must each be a different one")
    files, fmt = resolve_inputs(inputs)
    spec = CountSpec(files=files, fmt=fmt, key=key, counts=counts, op=op, size=size,
                     time=time_col, top_k=top_k, min_count=min_count,
                     placements=tuple(placements),
                     locality=locality and counts is None,
                     time_unit=time_unit, memory_limit=memory_limit)
    if engine == "duckdb":
        from hotshard.profile.engines import duckdb_engine

        raw = duckdb_engine.count(spec, progress)
    else:
        from hotshard.profile.engines import spark_engine

        raw = spark_engine.count(spec, spark_master, progress, session=spark_session,
                                 scratch=spark_scratch)
    source = {"key": key, "inputs": list(inputs), "engine": engine}
    if counts:
        source["counts"] = counts
    profile = build_profile(raw, source=source, min_count=min_count)
    if pseudonymize_secret is None:
        return profile
    from hotshard.profile.pseudonym import pseudonymize

    return Profile.from_dict(pseudonymize(profile, pseudonymize_secret, placements).to_dict())


def input_columns(files: list[str], fmt: str) -> list[str]:
    """The column names of resolved inputs (``resolve_inputs``), as the DuckDB engine reads
    them."""
    from hotshard.profile.engines.duckdb_engine import columns_of

    return columns_of(files, fmt)


def count_keys(inputs: Sequence[str], *, key: str, keys: Sequence[str]) -> dict[str, int]:
    """Exact events per key for the given ``keys`` (as text) in ``inputs`` (DuckDB); keys that
    never occur are absent from the result."""
    from hotshard.profile.engines.duckdb_engine import count_keys as engine_count_keys

    files, fmt = resolve_inputs(inputs)
    return engine_count_keys(files, fmt, key, list(keys))


def key_column_is_integer(inputs: Sequence[str], key: str) -> bool:
    """Whether the key column has an integer type (read from the schema only)."""
    from hotshard.profile.engines.duckdb_engine import key_column_is_integer as schema_says

    files, fmt = resolve_inputs(inputs)
    return schema_says(files, fmt, key)
