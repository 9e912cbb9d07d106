"""The k6 and csv-feeder formats: the keys of the generated stream, laid out for other tools.

The references are independent encoders: Python's ``json`` for the k6 array and Python's
``csv`` writer (minimal quoting, which also quotes a row that is one empty field) for the
feeder; the keys must be the very keys, in the very order, of the Parquet output of the same
plan.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hotshard.errors import InputError
from hotshard.workload.generate import plan_workload, verify_file
from hotshard.workload.messages import (
    GenerationPlan,
    estimate_output_bytes,
    format_for_path,
    format_note,
    write_events,
)
from hotshard.workload.timing import Arrivals
from tests.conftest import trace_profile

# keys a CSV or JSON encoder must take care of, and some that need nothing
AWKWARD = ["plain", "a,b", 'say "hi"', "line\nbreak", "cr\rx", "back\\slash", "tab\tx",
           "bell\x07", "", " padded ", "ünï ☃", "\u2028sep", '"', ",", "12345678901234567890123"]


class _ListSampler:
    """Draws uniformly from a fixed list of text keys (the plan's sampler interface)."""

    def __init__(self, keys: list[str], fail_on_call: int | None = None) -> None:
        self.keys = keys
        self.fail_on_call = fail_on_call
        self.calls = 0

    def sample(self, n: int, rng) -> np.ndarray:
        self.calls += 1
        if self.fail_on_call is not None and self.calls >= self.fail_on_call:
            raise InputError("the sampler broke half-way")
        return rng.integers(0, len(self.keys), n)

    def ids(self, positions) -> pa.Array:
        return pa.array([self.keys[i] for i in positions], type=pa.string())


def _text_plan(events: int, chunk_rows: int, sampler=None) -> GenerationPlan:
    return GenerationPlan(samplers={"*": sampler or _ListSampler(AWKWARD)},
                          op_shares={"read": 0.9, "write": 0.1}, events=events, seed=11,
                          arrivals=Arrivals(1000.0), start_ms=0,
                          chunk_rows=chunk_rows)


@pytest.fixture(scope="module")
def int_plan():
    """A profile's integer keys over several chunks, the last one partial."""
    plan = plan_workload(profile=trace_profile("orm-busy"), dist=None, events=23_456, seed=5)
    return dataclasses.replace(plan, chunk_rows=5000)


def _parquet_keys(plan: GenerationPlan, tmp_path: Path) -> list[str]:
    out = tmp_path / "reference.parquet"
    write_events(plan, str(out), fmt="parquet")
    return [str(k) for k in pq.read_table(out, columns=["channel_id"]).column(0).to_pylist()]


def _write(plan: GenerationPlan, path: Path, fmt: str, workers: int = 1) -> bytes:
    assert write_events(plan, str(path), fmt=fmt, workers=workers) == plan.events
    return path.read_bytes()


def _k6_reference(keys: list[str]) -> bytes:
    return ("[\n" + ",\n".join(json.dumps(k, ensure_ascii=False) for k in keys)
            + "\n]\n").encode()


def _csv_field(key: str) -> str:
    """Python's minimal quoting with CRLF line ends, so that CR and LF are quoted alike."""
    text = io.StringIO()
    csv.writer(text, lineterminator="\r\n").writerow([key])
    return text.getvalue()[:-2]


def _feeder_reference(keys: list[str]) -> bytes:
    return "".join(f"{_csv_field(k)}\n" for k in ["channel_id", *keys]).encode()


def test_k6_is_one_json_array_of_the_parquet_keys_as_strings(int_plan, tmp_path):
    keys = _parquet_keys(int_plan, tmp_path)
    data = _write(int_plan, tmp_path / "keys.json", "k6")
    parsed = json.loads(data)
    assert isinstance(parsed, list) and all(isinstance(k, str) for k in parsed)
    assert parsed == keys  # same keys, same order, integers as text
    assert data == _k6_reference(keys)  # one key per line


def test_csv_feeder_is_a_header_and_the_parquet_keys_unquoted(int_plan, tmp_path):
    keys = _parquet_keys(int_plan, tmp_path)
    data = _write(int_plan, tmp_path / "keys.csv", "csv-feeder")
    lines = data.decode().splitlines()
    assert lines[0] == "channel_id"
    assert lines[1:] == keys
    assert b'"' not in data  # integer keys never need quoting
    assert data == _feeder_reference(keys)


def test_awkward_text_keys_are_escaped_as_json_and_quoted_only_when_needed(tmp_path):
    plan = _text_plan(events=3000, chunk_rows=700)
    keys = _parquet_keys(plan, tmp_path)
    assert set(keys) == set(AWKWARD)  # every awkward key is in the stream
    k6 = _write(plan, tmp_path / "keys.json", "k6")
    assert k6 == _k6_reference(keys)
    assert json.loads(k6) == keys
    feeder = _write(plan, tmp_path / "keys.csv", "csv-feeder")
    assert feeder == _feeder_reference(keys)
    with (tmp_path / "keys.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["channel_id"] and [r for [r] in rows[1:]] == keys
    lines = set(feeder.decode().split("\n"))
    assert {"plain", " padded ", "ünï ☃", "tab\tx", '""', '"a,b"', '"say ""hi"""',
            '""""', '","'} <= lines  # quoted only when RFC 4180 needs it; empty keys too


def test_jsonl_escapes_text_keys_as_json(tmp_path):
    plan = _text_plan(events=3000, chunk_rows=700)
    keys = _parquet_keys(plan, tmp_path)
    data = _write(plan, tmp_path / "rows.jsonl", "jsonl")
    rows = [json.loads(line) for line in data.decode().split("\n")[:-1]]
    assert [r["channel_id"] for r in rows] == keys


@pytest.mark.parametrize("fmt", ["k6", "csv-feeder"])
def test_feeders_stream_chunk_by_chunk_the_same_bytes_for_any_workers(int_plan, tmp_path, fmt):
    assert int_plan.n_chunks == 5
    one = _write(int_plan, tmp_path / "one", fmt, workers=1)
    assert _write(int_plan, tmp_path / "two", fmt, workers=2) == one
    keys = _parquet_keys(int_plan, tmp_path)  # chunk borders leave no trace in the layout
    assert one == (_k6_reference if fmt == "k6" else _feeder_reference)(keys)


@pytest.mark.parametrize("fmt", ["k6", "csv-feeder"])
def test_feeders_stream_to_stdout(int_plan, tmp_path, monkeypatch, fmt):
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out))
    assert write_events(int_plan, "-", fmt=fmt, workers=2) == int_plan.events
    assert out.getvalue() == _write(int_plan, tmp_path / "file", fmt)


@pytest.mark.parametrize("fmt", ["k6", "csv-feeder"])
def test_a_failure_half_way_leaves_the_old_file_and_no_temporary(tmp_path, fmt):
    target = tmp_path / "keys.out"
    target.write_text("the previous run's keys\n")
    plan = _text_plan(events=5000, chunk_rows=1000, sampler=_ListSampler(AWKWARD,
                                                                         fail_on_call=3))
    with pytest.raises(InputError, match="broke half-way"):
        write_events(plan, str(target), fmt=fmt, workers=1)
    assert target.read_text() == "the previous run's keys\n"
    assert [p.name for p in tmp_path.iterdir()] == ["keys.out"]


@pytest.mark.parametrize("fmt", ["k6", "csv-feeder"])
def test_the_size_estimate_is_close_to_the_file(int_plan, tmp_path, fmt):
    size = len(_write(int_plan, tmp_path / "file", fmt))
    estimate = estimate_output_bytes(int_plan, fmt)
    assert size <= estimate <= 1.5 * size  # the estimate carries a 20% margin


@pytest.mark.parametrize(("output", "fmt", "expected"), [
    ("keys.json", "k6", "k6"),
    ("KEYS.JSON", "k6", "k6"),
    ("keys.csv", "csv-feeder", "csv-feeder"),
    ("keys.txt", "csv-feeder", "csv-feeder"),  # a name that implies nothing takes any format
    ("-", "k6", "k6"),
    ("keys.json", None, "jsonl"),  # as before: .json alone means JSON lines
    ("keys.json", "jsonl", "jsonl"),
    ("keys.csv", None, "csv"),
])
def test_formats_by_name_and_choice(output, fmt, expected):
    assert format_for_path(output, fmt) == expected


@pytest.mark.parametrize(("output", "fmt", "words"), [
    ("keys.jsonl", "k6", "keys.jsonl names a jsonl file but the format is k6"),
    ("keys.parquet", "csv-feeder", "format is csv-feeder: make the name and the format agree "
                                   "(csv-feeder is written as .csv)"),
    ("keys.csv", "k6", "(k6 is written as .json)"),
    ("keys.json", "csv-feeder", "names a jsonl file"),
])
def test_a_name_of_another_format_is_refused(output, fmt, words):
    with pytest.raises(InputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        format_for_path(output, fmt)


def test_a_json_name_without_a_format_gets_a_note():
    assert "choose the k6 format" in format_note("keys.json")
    for output, fmt in [("keys.json", "k6"), ("keys.json", "jsonl"), ("keys.jsonl", None),
                        ("-", None), ("keys.csv", None)]:
        assert format_note(output, fmt) is None


@pytest.fixture(scope="module")
def orm_run(tmp_path_factory):
    """orm-busy's whole event count planned once, its Parquet output and what verify says of
    it: the reference each feeder format is compared with."""
    orm = trace_profile("orm-busy")
    plan = plan_workload(profile=orm, dist=None, events=int(orm.events), seed=3)
    parquet = tmp_path_factory.mktemp("orm") / "run.parquet"
    write_events(plan, str(parquet), fmt="parquet")
    return orm, plan, verify_file(orm, str(parquet))


@pytest.mark.slow
@pytest.mark.parametrize("fmt, name", [("csv-feeder", "keys.csv"), ("k6", "keys.json")])
def test_a_feeder_file_verifies_like_the_parquet_file(tmp_path, orm_run, fmt, name):
    orm, plan, by_parquet = orm_run
    feeder = tmp_path / name
    write_events(plan, str(feeder), fmt=fmt)
    by_feeder = verify_file(orm, str(feeder))
    assert by_feeder.passed
    assert by_feeder.to_dict() == by_parquet.to_dict()
