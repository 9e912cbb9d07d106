"""Synthetic chat events at any scale: chunked, seeded by chunk index, streamed to disk.

Each chunk of rows is a pure function of (plan, chunk index): its generator is
``SeedSequence(seed, spawn_key=(chunk,))``, so the output is byte-identical whatever the number
of worker processes, and memory stays constant at any number of events.

Columns: ``timestamp`` (UTC, ms), ``channel_id`` (the key), ``message_id`` (time-ordered,
snowflake-like: milliseconds << 22 | row index low bits), ``user_id`` (synthetic, uniform over
``n_users``), ``size`` (bytes, from the profile's quantiles), ``op`` (read/write mix).

Formats: whole rows as Parquet, CSV or JSON lines; or, for the load tools teams already use,
only the keys of the same rows in the same order: ``k6`` (one JSON array of key strings, what
k6's ``SharedArray`` loads) and ``csv-feeder`` (a ``channel_id`` header, then one key per line,
quoted only when RFC 4180 needs it: what JMeter's CSV Data Set Config and Gatling's ``csv``
feeder read).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from hotshard.errors import InputError
from hotshard.profile.document import DEFAULT_OPS
from hotshard.workload import DEFAULT_USERS, FORMATS
from hotshard.workload.timing import Arrivals, HotEvent

__all__ = ["DEFAULT_SIZE_QUANTILES", "FORMATS", "GenerationPlan", "check_disk_space",
           "format_for_path", "format_note", "message_sizes", "write_events"]

# Typical chat message bytes; used when the profile has no size quantiles.
DEFAULT_SIZE_QUANTILES = {"0.5": 120.0, "0.9": 300.0, "0.99": 900.0}
CHUNK_ROWS = 1 << 20
KEY_COLUMN = "channel_id"  # the feeders' one column


@dataclass(frozen=True)
class GenerationPlan:
    """Everything a chunk needs; picklable, so workers rebuild nothing but samplers' tables."""

    samplers: dict[str, object]  # op -> sampler with sample(n, rng) and optional ids(positions)
    op_shares: dict[str, float]
    events: int
    seed: int
    arrivals: Arrivals
    start_ms: int
    size_quantiles: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_SIZE_QUANTILES))
    hot_events: tuple[HotEvent, ...] = ()
    n_users: int = DEFAULT_USERS
    chunk_rows: int = CHUNK_ROWS
    notes: tuple[str, ...] = ()  # things the user should know about this plan (not errors)
    # how the file was made (key scaling, tail model, seed), stored in Parquet metadata so
    # that verifying it needs no repetition of the options
    metadata: tuple[tuple[str, str], ...] = ()
    # (op names, cumulative op probabilities per head key, of a tail key): the operation is
    # chosen after the key (profile_sampler.op_mix_by_key); None: independent of the key
    op_mix: tuple | None = None
    # the run's key positions in stream order (workload.locality_stream.StreamedPositions:
    # sliced by rows, made window by window as chunks ask), made once;
    # None: independent draws, chunk by chunk
    positions: np.ndarray | None = None

    @property
    def n_chunks(self) -> int:
        return max(1, -(-self.events // self.chunk_rows))


def message_sizes(quantiles: dict[str, float], u: np.ndarray) -> np.ndarray:
    """Sizes by log-linear interpolation of the quantiles (p0 = p50/4, p100 = 2 p99), at the
    uniform draws ``u``: the one size model of generated messages and driven requests."""
    qs = sorted((float(q), float(v)) for q, v in quantiles.items())
    probs = [0.0] + [q for q, _ in qs] + [1.0]
    vals = [qs[0][1] / 4.0] + [v for _, v in qs] + [qs[-1][1] * 2.0]
    logs = np.log(np.maximum(vals, 1.0))
    return np.maximum(1, np.round(np.exp(np.interp(u, probs, logs)))).astype(np.int64)


def _key_ids(sampler, positions):
    ids = getattr(sampler, "ids", None)
    return positions if ids is None else ids(positions)


def _ops_then_keys(plan: GenerationPlan, n: int, rng):
    """Each event's operation from the mix, then its key from that operation's sampler."""
    import pyarrow as pa
    import pyarrow.compute as pc

    op_names = list(plan.op_shares)
    op_idx = np.searchsorted(np.cumsum(list(plan.op_shares.values())), rng.random(n),
                             side="right").clip(0, len(op_names) - 1)
    keys = None
    for i, op in enumerate(op_names):
        mask = op_idx == i
        count = int(mask.sum())
        if count == 0:
            continue
        sampler = plan.samplers.get(op, plan.samplers.get("*"))
        part = _key_ids(sampler, sampler.sample(count, rng))
        part = pa.array(part) if not isinstance(part, pa.Array) else part
        if keys is None:
            keys = pa.nulls(n, type=part.type)
        keys = pc.replace_with_mask(keys, pa.array(mask), part)
    return keys, op_names, op_idx


def _keys_then_ops(plan: GenerationPlan, n: int, rng, positions=None):
    """Each event's key from the whole profile (or ``positions``, the run's order), then its
    operation given the key."""
    import pyarrow as pa

    sampler = plan.samplers["*"]
    if positions is None:
        positions = sampler.sample(n, rng)
    keys = _key_ids(sampler, positions)
    keys = pa.array(keys) if not isinstance(keys, pa.Array) else keys
    if plan.op_mix is None:  # the operation independent of the key
        op_names = list(plan.op_shares)
        op_idx = np.searchsorted(np.cumsum(list(plan.op_shares.values())), rng.random(n),
                                 side="right").clip(0, len(op_names) - 1)
        return keys, op_names, op_idx
    names, head_cum, tail_cum = plan.op_mix
    in_head = positions < head_cum.shape[0]
    cum = np.broadcast_to(tail_cum, (n, tail_cum.size)).copy()
    cum[in_head] = head_cum[positions[in_head]]
    op_idx = (rng.random(n)[:, None] >= cum[:, :-1]).sum(axis=1)
    return keys, list(names), op_idx


def make_chunk(plan: GenerationPlan, chunk: int):
    """Rows [chunk * chunk_rows, ...) of the run as a pyarrow Table."""
    import pyarrow as pa
    import pyarrow.compute as pc

    first = chunk * plan.chunk_rows
    n = min(plan.chunk_rows, plan.events - first)
    rng = np.random.default_rng(np.random.SeedSequence(plan.seed, spawn_key=(chunk,)))
    rows = np.arange(first, first + n, dtype=np.int64)
    offsets = plan.arrivals.times(rows, rng.random(n))
    ts_ms = plan.start_ms + np.floor(offsets * 1000.0).astype(np.int64)
    if plan.positions is not None:
        keys, op_names, op_idx = _keys_then_ops(plan, n, rng, plan.positions[first:first + n])
    elif plan.op_mix is None:
        keys, op_names, op_idx = _ops_then_keys(plan, n, rng)
    else:
        keys, op_names, op_idx = _keys_then_ops(plan, n, rng)
    u = rng.random(n) if plan.hot_events else None
    taken = np.zeros(n) if plan.hot_events else None
    for event in plan.hot_events:
        # events active at the same time take disjoint slices of one uniform, so each gets
        # exactly its share however they overlap (the plan keeps their sum <= 1)
        hit, taken = event.apply(offsets, u, taken)
        if hit.any():
            hot = pa.scalar(int(event.key) if pa.types.is_integer(keys.type) else event.key,
                            type=keys.type)
            keys = pc.if_else(pa.array(hit), hot, keys)
    message_id = (ts_ms << 22) | (rows & ((1 << 22) - 1))
    return pa.table({
        "timestamp": pa.array(ts_ms, type=pa.timestamp("ms", tz="UTC")),
        "channel_id": keys,
        "message_id": message_id,
        "user_id": rng.integers(0, plan.n_users, n, dtype=np.int64),
        "size": message_sizes(plan.size_quantiles, rng.random(n)),
        "op": pa.DictionaryArray.from_arrays(pa.array(op_idx.astype(np.int32)),
                                             pa.array(op_names)).cast(pa.string()),
    })


def _chunks(plan: GenerationPlan, workers: int):
    """Chunks in order, ``workers`` threads computing a bounded window of them ahead.

    Threads, not processes: chunk generation runs in numpy, numba (nogil) and Arrow kernels
    that release the GIL, while shipping a 1M-row table between processes costs more than
    making it (measured: 3.4 M messages/s with threads vs 2.0 M with processes, 2 cores).
    """
    if plan.n_chunks == 1:
        yield make_chunk(plan, 0)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending = {}
        ahead = 2 * workers
        next_submit = 0
        try:
            for c in range(plan.n_chunks):
                while next_submit < plan.n_chunks and next_submit < c + ahead:
                    pending[next_submit] = pool.submit(make_chunk, plan, next_submit)
                    next_submit += 1
                yield pending.pop(c).result()
        finally:  # interrupted: do not make the chunks nobody will write
            for future in pending.values():
                future.cancel()
            if hasattr(plan.positions, "cancel") and pending:
                plan.positions.cancel()  # and stop the order a running chunk is making


def _joined(lines) -> bytes:
    """The values of a string array one after another, straight from its data buffer."""
    import pyarrow as pa

    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    if len(lines) == 0:
        return b""
    width = np.int64 if pa.types.is_large_string(lines.type) else np.int32
    _, offsets, data = lines.buffers()
    ends = np.frombuffer(offsets, dtype=width, count=len(lines) + 1, offset=lines.offset
                         * np.dtype(width).itemsize)
    start, stop = int(ends[0]), int(ends[-1])
    return b"" if data is None else data.slice(start, stop - start).to_pybytes()


def _json_strings(text):
    """JSON string literals of a string array (RFC 8259: quote, backslash and U+0000-U+001F
    escaped; other characters as they are, UTF-8)."""
    import json

    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    s = pc.replace_substring(text, "\\", "\\\\")
    s = pc.replace_substring(s, '"', '\\"')
    s = pc.binary_join_element_wise('"', s, '"', "")
    control = pc.match_substring_regex(text, r"[\x00-\x1f]")
    if pc.any(control).as_py():  # rare: those rows by Python's encoder
        escaped = [json.dumps(v, ensure_ascii=False) for v in pc.filter(text, control).to_pylist()]
        s = pc.replace_with_mask(s, control, pa.array(escaped, type=pa.string()))
    return s


def _k6_elements(table):
    """Each row's key as a JSON string (integers too: a JavaScript number loses IDs above
    2^53, and a script puts the key into a URL as text anyway)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = table.column(KEY_COLUMN)
    text = pc.cast(keys, pa.string())
    if pa.types.is_integer(keys.type):  # digits and '-' need no escaping
        return pc.binary_join_element_wise('"', text, '"', "")
    return _json_strings(text)


def _feeder_fields(table):
    """Each row's key as an RFC 4180 field: quoted (quotes doubled) only when it holds a
    comma, a quote, CR or LF, or is empty (an empty line would read as no row at all)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = table.column(KEY_COLUMN)
    text = pc.cast(keys, pa.string())
    if pa.types.is_integer(keys.type):
        return text
    needs = pc.or_(pc.match_substring_regex(text, r'[",\r\n]'), pc.equal(pc.utf8_length(text), 0))
    quoted = pc.binary_join_element_wise('"', pc.replace_substring(text, '"', '""'), '"', "")
    return pc.if_else(needs, quoted, text)


def _jsonl_lines(table) -> bytes:
    import pyarrow as pa
    import pyarrow.compute as pc

    def quoted(col):
        return _json_strings(pc.cast(col, pa.string()))

    # %S of a millisecond timestamp prints seconds with their fraction (12.345)
    ts = pc.strftime(table.column("timestamp"), format="%Y-%m-%dT%H:%M:%SZ")
    key = table.column("channel_id")
    key_text = pc.cast(key, pa.string()) if pa.types.is_integer(key.type) else quoted(key)
    parts = ['{"timestamp":"', ts, '","channel_id":', key_text,
             ',"message_id":', pc.cast(table.column("message_id"), pa.string()),
             ',"user_id":', pc.cast(table.column("user_id"), pa.string()),
             ',"size":', pc.cast(table.column("size"), pa.string()),
             ',"op":', quoted(table.column("op")), "}\n"]
    return _joined(pc.binary_join_element_wise(*parts, ""))


def _open_writer(fmt: str, sink, first_table, metadata=()):
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    if fmt == "parquet":
        schema = first_table.schema.with_metadata(
            {f"hotshard.{k}": v for k, v in metadata} or None)
        # sequential columns delta-encode to almost nothing; dictionaries only where keys
        # repeat; zstd level 1: 2x faster than the default level for 1% more bytes
        writer = pq.ParquetWriter(
            sink, schema, compression="zstd", compression_level=1,
            use_dictionary=["channel_id", "op"],
            column_encoding={"timestamp": "DELTA_BINARY_PACKED",
                             "message_id": "DELTA_BINARY_PACKED"})
        return writer.write_table, writer.close
    if fmt == "csv":
        writer = pacsv.CSVWriter(sink, first_table.schema)
        return writer.write_table, writer.close
    if fmt == "k6":
        return _k6_writer(sink)
    if fmt == "csv-feeder":
        sink.write(f"{KEY_COLUMN}\n".encode())
        return (lambda t: sink.write(_lines(_feeder_fields(t), "\n"))), (lambda: None)
    return (lambda t: sink.write(_jsonl_lines(t))), (lambda: None)


def _lines(text, end: str) -> bytes:
    """Each value of a string array followed by ``end``, as bytes."""
    import pyarrow.compute as pc

    return _joined(pc.binary_join_element_wise(text, end, ""))


def _k6_writer(sink):
    """One JSON array over all chunks: '[' before the first key, ',' between keys (across
    chunks too), ']' at the close; one key per line."""
    started = False

    def write(table) -> None:
        nonlocal started
        if table.num_rows:
            body = _lines(_k6_elements(table), ",\n")[:-2]
            sink.write((b",\n" if started else b"[\n") + body)
            started = True

    def close() -> None:
        sink.write(b"\n]\n" if started else b"[]\n")

    return write, close


# the format an extension implies when none is chosen (.json: JSON lines, as it always was;
# a k6 array is chosen by its format)
_EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".jsonl": "jsonl",
               ".ndjson": "jsonl", ".json": "jsonl"}
# the extensions a chosen format may be written under
_FORMAT_EXTENSIONS = {"parquet": (".parquet", ".pq"), "csv": (".csv",),
                      "jsonl": (".jsonl", ".ndjson", ".json"), "k6": (".json",),
                      "csv-feeder": (".csv",)}


def _extension(output: str) -> str | None:
    name = output.lower()
    return next((ext for ext in _EXTENSIONS if name.endswith(ext)), None)


def format_for_path(output: str, fmt: str | None = None) -> str:
    """The output format: from the file's extension (``-``, standard output: csv), or ``fmt``.

    A chosen ``fmt`` may be written under any of its extensions: ``k6`` as .json,
    ``csv-feeder`` as .csv; an unknown extension takes any format.

    Raises
    ------
    InputError
        The format is unknown, the extension names none of them and no format is given, or
        the extension belongs to another format than ``fmt`` (a .parquet file holding CSV).
    """
    if fmt is not None and fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if output == "-":
        return fmt or "csv"
    ext = _extension(output)
    if fmt is None and ext is None:
        raise InputError(f"cannot tell the format of {output} from its name: name a .parquet, "
                         ".csv or .jsonl file, or choose the format (compressed output is not "
                         "written; Parquet is compressed already)")
    if fmt is not None and ext is not None and ext not in _FORMAT_EXTENSIONS[fmt]:
        raise InputError(f"{output} names a {_EXTENSIONS[ext]} file but the format is {fmt}: "
                         f"make the name and the format agree ({fmt} is written as "
                         f"{' or '.join(_FORMAT_EXTENSIONS[fmt])})")
    return fmt or _EXTENSIONS[ext]


def format_note(output: str, fmt: str | None = None) -> str | None:
    """What the user may not expect of the format ``format_for_path`` picks, else None: a
    .json name with no format chosen is written as JSON lines, not as a k6 array."""
    if fmt is None and output != "-" and _extension(output) == ".json":
        return (f"{output} is written as JSON lines (one object per line); for k6's "
                "SharedArray (one JSON array of keys) choose the k6 format")
    return None


SIZE_SAMPLE_ROWS = 1 << 16
SIZE_MARGIN = 1.2  # the sample's bytes/row, plus 20% for less compressible later chunks


def estimate_output_bytes(plan: GenerationPlan, fmt: str) -> float:
    """Bytes ``plan`` will take on disk in ``fmt``, from encoding a 65,536-row sample.

    The sample is the first rows of the real run (same plan, smaller chunk), so its key mix,
    sizes and timestamps are the run's; times ``SIZE_MARGIN`` for safety.
    """
    import dataclasses
    import io

    rows = min(plan.events, SIZE_SAMPLE_ROWS)
    # keys drawn, not read from the run's order (made once, forward, as the run is written)
    sample = make_chunk(dataclasses.replace(plan, events=rows, chunk_rows=rows,
                                            positions=None), 0)
    buffer = io.BytesIO()
    write, close = _open_writer(fmt, buffer, sample)
    write(sample)
    close()
    return buffer.tell() / rows * plan.events * SIZE_MARGIN


def check_disk_space(plan: GenerationPlan, output: str, fmt: str) -> float:
    """Refuse a run whose output cannot fit on the disk of ``output``; returns the estimate.

    Raises
    ------
    InputError
        The estimated size exceeds the free space, naming both.
    """
    import os
    import shutil

    from hotshard._atomic import is_special

    if is_special(output):  # /dev/null, a pipe: nothing is stored
        return 0.0
    need = estimate_output_bytes(plan, fmt)
    directory = os.path.dirname(os.path.abspath(output))
    free = shutil.disk_usage(directory).free
    if need > free:
        raise InputError(f"{plan.events:,} events need about {_human_bytes(need)} as {fmt}, but "
                         f"{directory} has {_human_bytes(free)} free: generate fewer events, or "
                         "write to a larger disk")
    return need


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:,.1f} {unit}"
        n /= 1000
    raise AssertionError("unreachable")


def write_events(plan: GenerationPlan, output: str, *, fmt: str, workers: int = 1,
                 progress: Callable[[int], None] | None = None) -> int:
    """Generate ``plan`` into ``output`` ('-' for stdout); returns rows written.

    Files are written to a temporary name and renamed at the end: a failure or an interrupt
    never leaves a partial file that looks complete.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    if output == "-":
        if fmt == "parquet":
            raise InputError("Parquet cannot stream to stdout: choose the csv or jsonl format")
        return _write_all(plan, sys.stdout.buffer, fmt, workers, progress)
    from hotshard._atomic import atomic_write

    with atomic_write(output, "wb") as handle:
        return _write_all(plan, handle, fmt, workers, progress)


def _write_all(plan, sink, fmt, workers, progress) -> int:
    written = 0
    write = close = None
    for table in _chunks(plan, workers):
        if write is None:
            write, close = _open_writer(fmt, sink, table, plan.metadata)
        write(table)
        written += table.num_rows
        if progress:
            progress(table.num_rows)
    if close:
        close()
    return written


def op_shares_of(profile) -> dict[str, float]:
    """Read/write mix: the profile's per-operation event shares, else DEFAULT_OPS."""
    if profile is not None and profile.operations:
        total = sum(d.events for d in profile.operations.values())
        return {op: d.events / total for op, d in profile.operations.items()}
    return dict(DEFAULT_OPS)
