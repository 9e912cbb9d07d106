"""What the counting engines share: the request (``CountSpec``), the answer (``RawCounts``),
the counts column's rule and its errors, and the helpers both engines call.

Its own module so that ``count`` (which picks an engine) and the engines (which return what
``count`` builds a profile from) both import it, and neither imports the other at load time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from hotshard.errors import InputError
from hotshard.profile.arrivals import ArrivalModel
from hotshard.profile.locality import Locality
from hotshard.profile.placement import PlacementRecord, Placer
from hotshard.profile.timelines import Timelines

__all__ = ["COUNT_RULE", "MAX_COUNT", "SIZE_QUANTILES", "CountSpec", "Progress", "RawCounts",
           "RawDist", "accumulate_placement", "bad_count_error", "check_key_total",
           "run_with_progress"]

SIZE_QUANTILES = (0.5, 0.9, 0.99)
Progress = Callable[[str, float | None], None]
# A counts cell and a key's total must be whole numbers below 2^53: counts are summed and
# stored as float64 (profile JSON), exact only below there (2^53 + 1 reads as 2^53).
MAX_COUNT = 2**53
COUNT_RULE = "each count must be a whole number of events, 0 <= count < 2^53"


@dataclass(frozen=True)
class RawDist:
    """What an engine returns for one key distribution."""

    head_keys: list[str]
    head_counts: list[int]
    coc_values: np.ndarray  # per-key count
    coc_keys: np.ndarray  # keys having that count (all keys, head included)


@dataclass(frozen=True)
class RawCounts:
    rows: int
    null_keys: int
    key_type: str
    overall: RawDist
    operations: dict[str, RawDist] = field(default_factory=dict)
    size_quantiles: dict[str, float] | None = None
    second_counts: tuple[np.ndarray, np.ndarray] | None = None  # (events in a second, seconds)
    window: tuple[float, float] | None = None  # first and last second (epoch)
    placement: dict[str, PlacementRecord] = field(default_factory=dict)
    locality: Locality | None = None
    arrivals: ArrivalModel | None = None
    timelines: Timelines | None = None


@dataclass(frozen=True)
class CountSpec:
    """What to count: shared by every engine."""

    files: list[str]
    fmt: str
    key: str
    counts: str | None
    op: str | None
    size: str | None
    time: str | None
    top_k: int
    min_count: int
    placements: tuple = ()
    locality: bool = False
    time_unit: str = "auto"   # a numeric time column's unit (profile.time_units)
    memory_limit: str | None = None   # the DuckDB engine's working memory ("2GB")

    def columns(self) -> list[str]:
        return [c for c in (self.key, self.counts, self.op, self.size, self.time) if c]


def _describe_count(value: object) -> str:
    """What is wrong with one counts cell, showing the value as the input wrote it."""
    if value is None:
        return "an empty cell"
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError:
        return f"non-numeric values such as {text!r}"
    if number != number:
        return f"a NaN value ({text})"
    if number in (float("inf"), float("-inf")):
        return f"an infinite count ({text})"
    if number < 0:
        return f"a negative count ({text})"
    if number >= MAX_COUNT:
        return f"a count of 2^53 or more ({text})"
    if not number.is_integer():
        return f"a fractional count ({text})"
    return f"a bad count ({text})"  # the engine's rule is stricter than ours: show the value


def bad_count_error(column: str, value: object, *, bad_cells: int, file: str | None = None,
                    row: int | None = None, header_lines: int | None = None) -> InputError:
    """The error for a counts column whose first offending cell is ``value``.

    Engines find the cell (and, where cheap, its file and 1-based data row); the wording is
    shared so every engine says the same thing. A text table (``header_lines`` before its
    data) is named by line, as an editor shows it; JSON lines' rows are their lines.
    """
    where = ""
    if file is not None:
        if row is not None and header_lines is not None:
            where = f" at line {row + header_lines:,} of {file}"
        elif row is not None:
            where = f" at {'line' if file.endswith(('.json', '.jsonl', '.ndjson')) else 'row'}" \
                    f" {row:,} of {file}"
        else:
            where = f" in {file}"
    more = f" ({bad_cells:,} bad cells in all)" if bad_cells > 1 else ""
    return InputError(f"counts column {column!r} holds {_describe_count(value)}{where}{more}: "
                      f"{COUNT_RULE}; fix or drop those rows")


def check_key_total(column: str, key: object, total: float | int | None) -> None:
    """Refuse a key whose counts add up beyond what a profile stores exactly."""
    if total is not None and total >= MAX_COUNT:
        raise InputError(f"the counts in column {column!r} for key {key!r} add up to "
                         f"{int(total):,}, 2^53 or more: a key's total must stay below 2^53 "
                         f"({MAX_COUNT:,}) events to be stored exactly")


def run_with_progress(work: Callable[[], object], poll: Callable[[], float | None],
                      progress: Progress | None, stage: str) -> object:
    """Run ``work`` in a thread, reporting ``poll()`` to ``progress`` until it finishes."""
    if progress is None:
        return work()
    from hotshard._threads import run_in_thread

    value = run_in_thread(work, lambda _elapsed: progress(stage, poll()))
    progress(stage, 1.0)
    return value


def accumulate_placement(batches, head_keys: Sequence[str],
                         placers: Sequence[Placer]) -> dict[str, PlacementRecord]:
    """Tail events per shard for each placer, from (keys as text, counts) batches.

    Keys are hashed in this process and dropped: only per-shard totals are kept.
    """
    head = set(head_keys)
    totals = {p.spec: np.zeros(p.n_shards) for p in placers}
    for keys, counts in batches:
        keep = np.fromiter((k not in head for k in keys), dtype=bool, count=len(keys))
        if not keep.any():
            continue
        tail_keys = [k for k, flag in zip(keys, keep, strict=True) if flag]
        tail_counts = np.asarray(counts, dtype=np.float64)[keep]
        for p in placers:
            totals[p.spec] += np.bincount(p.shard_of(tail_keys), weights=tail_counts,
                                          minlength=p.n_shards)
    return {p.spec: PlacementRecord.of(p, totals[p.spec]) for p in placers}
