"""Files handed over by someone else, built to break the readers: nested thousands deep, or
holding text meant for the terminal. Every reader answers in one line (exit 2), bounded."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT, peak_rss_mb, run_cli

DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJECT = '{"format": "hotshard.observations/1", "label": "x", "extra": ' \
    + '{"a": ' * 50_000 + "1" + "}" * 50_000 + "}"
PROFILE = str(ROOT / "examples" / "incident.profile.json")


@pytest.mark.parametrize("text", [DEEP, DEEP_OBJECT])
@pytest.mark.parametrize("argv", [
    ["observe", "k6", "{f}"], ["diagnose", "{f}"], ["report", "{f}", "-o", "{d}/r.html"],
    ["inspect", "{f}"], ["predict", "{f}", "-p", "kafka", "-n", "4"],
    ["simulate", "replay", "{f}"], ["check", PROFILE, "--against", "{f}"],
])
def test_deeply_nested_json_is_one_line(tmp_path, text, argv):
    path = tmp_path / "deep.json"
    path.write_text(text)
    res = run_cli(*[a.replace("{f}", str(path)).replace("{d}", str(tmp_path)) for a in argv])
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr[:500]
    assert "Traceback" not in res.stderr and "RecursionError" not in res.stderr


def test_a_key_meant_for_the_terminal_reaches_it_escaped(tmp_path):
    """A profile whose hottest key holds an ESC sequence, a CR/LF that would forge a line and
    a bidi override: predict shows them as escapes; so does an error quoting a key."""
    import json

    doc = json.loads((ROOT / "examples" / "incident.profile.json").read_text())
    doc["head"]["keys"][0] = "evil\x1b[2J\r\nhotshard: note: all good\u202e"
    doc["source"].pop("key_type", None)
    doc.pop("placement", None)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    res = run_cli("predict", str(path), "-p", "kafka", "-n", "4")
    assert res.returncode == 0, res.stderr
    assert "evil\\x1b[2J\\x0d\\x0ahotshard: note: all good\\u202e" in res.stdout
    assert "\x1b" not in res.stdout and "\r" not in res.stdout and "\u202e" not in res.stdout
    bad = run_cli("shard", "ok", "-p", "kafka", "-n", "4", "--key-type", "bigint")
    assert "\x1b" not in bad.stderr


@pytest.mark.parametrize(("cell", "said"), [
    ("time=nan", "is not a time"), ("time=inf", "is not a time"),
    ("time=1e20", "is not a time"), ("value=1e308", "beyond any panel's value"),
    ("value=nan", "cannot read"), ("value=-inf", "cannot read")])
def test_a_dashboard_csv_with_absurd_numbers_is_one_line(tmp_path, cell, said):
    where, _, text = cell.partition("=")
    rows = ["Time,cpu{shard=\"0\"},cpu{shard=\"1\"}",
            "1700000000000,0.5,0.2", "1700000001000,0.6,0.1"]
    t, v = (text, "0.4") if where == "time" else ("1700000002000", text)
    rows.append(f"{t},{v},0.3")
    path = tmp_path / "cpu.csv"
    path.write_text("\n".join(rows) + "\n")
    res = run_cli("observe", "csv", f"cpu={path}")
    assert res.returncode == 2, res.stderr
    assert said in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_large_exports_are_read_as_they_come(tmp_path):
    """A 50 MB Locust history and a 50 MB dashboard CSV: read row by row, far below their
    size held as Python rows (1.25 GB and 1.8 GB before)."""
    stats = tmp_path / "run_stats.csv"
    stats.write_text("Type,Name,Request Count,Failure Count,Median Response Time,"
                     "Average Response Time,Min Response Time,Max Response Time,"
                     "Average Content Size,Requests/s,Failures/s,50%,99%,100%\n"
                     ",Aggregated,1000,0,5,6,1,90,10,100,0,5,40,90\n")
    line = ("1700000000,50,100.0,0.0,5,6,1,90,10,100,0,5,40,90,Aggregated,"
            + ",".join(["5"] * 6) + "\n")
    header = ("Timestamp,User Count,Requests/s,Failures/s,50%,99%,100%,Total Request Count,"
              "Total Failure Count,a,b,c,d,e,Name," + ",".join("fghijk") + "\n")
    with open(tmp_path / "run_stats_history.csv", "w") as f:
        f.write(header)
        for i in range(50 * 1024 * 1024 // len(line)):
            f.write(line.replace("1700000000", str(1700000000 + i), 1))
    code, rss, err = peak_rss_mb("observe", "locust", str(tmp_path / "run"))
    assert code == 0, err
    assert rss < 250, rss
    with open(tmp_path / "cpu.csv", "w") as f:
        f.write("Time," + ",".join(f'cpu{{shard="{s}"}}' for s in range(20)) + "\n")
        row = ",".join(["0.5"] * 20) + "\n"
        for i in range(50 * 1024 * 1024 // (len(row) + 14)):
            f.write(f"{1700000000000 + i * 1000},{row}")
    code, rss, err = peak_rss_mb("observe", "csv", f"cpu={tmp_path / 'cpu.csv'}")
    assert code == 0, err
    assert rss < 400, rss


def test_observations_of_too_many_shards_are_refused_at_once(tmp_path):
    import json
    import time

    doc = {"format": "hotshard.observations/1", "label": "x",
           "shards": [{"id": str(i), "requests": 1} for i in range(200_000)]}
    path = tmp_path / "big.json"
    path.write_text(json.dumps(doc))
    started = time.monotonic()
    # the readers that salvage what they can drop the shards, saying so, in seconds
    res = run_cli("report", str(path), "-o", str(tmp_path / "r.html"))
    assert res.returncode == 0, res.stderr
    assert "more than the 16,384 read" in (tmp_path / "r.html").read_text()
    assert time.monotonic() - started < 30   # 175 s and 2.5 GB before
    # the ones that need every field refuse the file in one line
    res = run_cli("simulate", "replay", str(path))
    assert res.returncode == 2 and "more than the 16,384 read" in res.stderr
