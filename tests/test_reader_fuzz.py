"""Every reader of foreign evidence against a corpus of hostile shapes: valid documents with one
value replaced (seeded, so the corpus is the same every run) by something a stranger's file or
server could hold. Each run must end in exit 0 (the value was usable, or dropped with a note)
or exit 2 with one line; never a traceback, and each within seconds."""

from __future__ import annotations

import copy
import json
import random
import time
import zlib

import pytest

from tests.conftest import ROOT, run_cli
from tests.observe.test_files import HANDLE_SUMMARY, SUMMARY_EXPORT

HOSTILE = [None, True, -1, 0, 1e308, -1e308, 2**64, "NaN", "Infinity", float("nan"), "",
           "x" * 10_000, "\x1b[2J\r\nforged", "\u202eevil", [], {}, [[[[[[[[1]]]]]]]],
           {"a": {"b": {"c": {}}}}, [None] * 50, 3.5, "7", "1e400"]
MUTATIONS = 40   # per document


def _leaves(doc, path=()):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(doc, list) and doc:
        for i, v in enumerate(doc[:5]):
            yield from _leaves(v, (*path, i))
    yield path


def _mutated(doc, seed):
    rng = random.Random(seed)
    paths = [p for p in _leaves(doc) if p]
    for _ in range(MUTATIONS):
        out = copy.deepcopy(doc)
        where = rng.choice(paths)
        holder = out
        for step in where[:-1]:
            holder = holder[step]
        holder[where[-1]] = rng.choice(HOSTILE)
        yield where, out


def _docs():
    production = json.loads((ROOT / "examples" / "incident-production.json").read_text())
    profile = json.loads((ROOT / "examples" / "incident.profile.json").read_text())
    # the profile's big lists are left whole; its sections and numbers are mutated
    small_profile = {k: v for k, v in profile.items() if k not in ("placement",)}
    return [
        ("observations", production, lambda f: ["diagnose", f]),
        ("observations-strict", production, lambda f: ["simulate", "replay", f]),
        ("profile", small_profile, lambda f: ["inspect", f]),
        ("profile-predict", small_profile, lambda f: ["predict", f, "-p", "kafka", "-n", "4"]),
        ("k6", HANDLE_SUMMARY, lambda f: ["observe", "k6", f, "--shard-tag", "shard"]),
        ("k6-export", SUMMARY_EXPORT, lambda f: ["observe", "k6", f]),
    ]


@pytest.mark.parametrize(("name", "doc", "argv"), _docs(), ids=lambda x: x if isinstance(
    x, str) else "")
def test_a_hostile_value_anywhere_is_read_or_refused_in_one_line(tmp_path, name, doc, argv):
    path = tmp_path / "doc.json"
    for i, (where, mutated) in enumerate(_mutated(doc, seed=zlib.crc32(name.encode()))):
        try:
            text = json.dumps(mutated)
        except ValueError:
            continue
        path.write_text(text)
        started = time.monotonic()
        res = run_cli(*argv(str(path)))
        took = time.monotonic() - started
        seen = f"{name} #{i}: {'.'.join(map(str, where))} -> exit {res.returncode}: " \
               f"{res.stderr[-400:]}"
        assert res.returncode in (0, 2), seen
        assert "Traceback" not in res.stderr, seen
        if res.returncode == 2:
            assert len(res.stderr.strip().splitlines()) == 1, seen
        assert "\x1b" not in res.stderr and "\u202e" not in res.stderr, seen
        assert took < 20, seen


CSV_HOSTILE = ["", "nan", "inf", "-1", "1e308", "1e20", "x" * 5000, "\x1b[2J", '"', ",",
               "0x10", "1,5", "\u202e9", "99%", "12 ms", "-0", "1e-400"]
DASHBOARD = ('"Time","cpu{shard=""0""}","cpu{shard=""1""}"\n'
             + "".join(f"{1733300000000 + 15000 * i},{0.2 + i / 100},{0.4}\n" for i in range(6)))
LOCUST_STATS = ("Type,Name,Request Count,Failure Count,Median Response Time,"
                "Average Response Time,Min Response Time,Max Response Time,"
                "Average Content Size,Requests/s,Failures/s,50%,99%,100%\n"
                "GET,/a,900,9,5,6,1,90,10,90,0.9,5,40,90\n"
                ",Aggregated,900,9,5,6,1,90,10,90,0.9,5,40,90\n")


@pytest.mark.parametrize("kind", ["dashboard", "locust"])
def test_a_hostile_cell_anywhere_in_a_csv_is_read_or_refused_in_one_line(tmp_path, kind):
    rng = random.Random(zlib.crc32(kind.encode()))
    text = DASHBOARD if kind == "dashboard" else LOCUST_STATS
    lines = text.splitlines()
    for i in range(40):
        rows = [line.split(",") for line in lines]
        r = rng.randrange(len(rows))
        c = rng.randrange(len(rows[r]))
        rows[r][c] = rng.choice(CSV_HOSTILE)
        body = "\n".join(",".join(row) for row in rows) + "\n"
        if kind == "dashboard":
            path = tmp_path / "cpu.csv"
            path.write_text(body)
            res = run_cli("observe", "csv", f"cpu={path}")
        else:
            path = tmp_path / "run_stats.csv"
            path.write_text(body)
            res = run_cli("observe", "locust", str(tmp_path / "run"))
        seen = f"{kind} #{i}: row {r} cell {c} -> exit {res.returncode}: {res.stderr[-300:]}"
        assert res.returncode in (0, 2), seen
        assert "Traceback" not in res.stderr, seen
        if res.returncode == 2:
            assert len(res.stderr.strip().splitlines()) == 1, seen
        assert "\x1b" not in res.stderr and "\u202e" not in res.stderr, seen
