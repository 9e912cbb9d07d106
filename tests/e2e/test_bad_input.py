"""User mistakes end in one line `hotshard: error: ...`, exit status 2, and nothing on disk.

Each case runs the real entry point (in-process, or a real process for SIGTERM) and checks the
three promises of the README: one line naming what is wrong, status 2 (no traceback), and no
output file nor hidden temporary file (``.NAME.*.tmp``) left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import run_cli, shared


def assert_refused(res, directory: Path, output: str | None, *words: str) -> str:
    """Exit 2, one `hotshard: error:` line holding ``words``, no output or temp file."""
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("hotshard: error: "), res.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    if output is not None:
        name = Path(output).name
        assert not (directory / output).is_file()
        assert not list(directory.rglob(f".{name}.*.tmp")), list(directory.rglob(".*"))
    return lines[0]


@pytest.fixture(scope="module")
def small_profile(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("prof")
    (folder / "c.csv").write_text("k,n\n" + "".join(f"key{i},{1000 // i}\n"
                                                    for i in range(1, 400)))
    res = run_cli("profile", "c.csv", "--key", "k", "--counts", "n", "-o", "p.json", "-q",
                  cwd=folder)
    assert res.returncode == 0, res.stderr
    return folder / "p.json"


# 1. counts that are not whole numbers of events

@pytest.mark.parametrize(("cell", "words"), [
    ("NaN", ["NaN"]),
    ("1e30", ["1e30", "2^53"]),
    ("-3", ["negative count (-3)"]),
    ("2.5", ["fractional count (2.5)"]),
])
def test_profile_refuses_bad_counts_cells(tmp_path, cell, words):
    (tmp_path / "counts.csv").write_text(f"k,n\na,4\nb,{cell}\nc,2\n")
    res = run_cli("profile", "counts.csv", "--key", "k", "--counts", "n", "-o", "p.json",
                  cwd=tmp_path)
    line = assert_refused(res, tmp_path, "p.json", "counts column 'n'", "line 3 of counts.csv",
                          *words)
    assert "--counts" not in line  # the library names the column, not the flag


# 2. rows without a key are dropped, and the user is told how many

def test_profile_drops_empty_and_null_keys_and_says_so(tmp_path):
    (tmp_path / "events.csv").write_text('k,v\na,1\n,2\n"",3\nb,4\na,5\n')
    res = run_cli("profile", "events.csv", "--key", "k", "-o", "p.json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "hotshard: note: dropped 2 rows with an empty or null key" in res.stderr
    assert "3 events, 2 keys" in res.stdout
    doc = json.loads((tmp_path / "p.json").read_text())
    assert doc["source"]["null_keys"] == 2
    assert "" not in doc["head"]["keys"]


# 3. ring / slots / map / chunks files that are not text

LAYOUT_FILES = [
    (["-p", "cassandra", "-n", "3", "--ring-file"], "Cassandra ring file", "'token node'"),
    (["-p", "redis-cluster", "--slots-map"], "Redis Cluster slots map", "'start end node'"),
    (["-p", "map", "--map"], "key-to-shard map", "'key,shard'"),
    (["-p", "mongodb", "--chunks"], "MongoDB chunks file", "'min max shard'"),
]
NOT_TEXT = {
    "random": bytes(range(256))[::-1] * 4,
    "png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00",
    "nul": b"\x00" * 32,
    "latin1": "0 n\u0153ud-\u00e9t\u00e9\n".encode("cp1252"),
}


@pytest.mark.parametrize(("args", "what", "expected"), LAYOUT_FILES)
@pytest.mark.parametrize("kind", list(NOT_TEXT))
def test_shard_refuses_layout_files_that_are_not_text(tmp_path, args, what, expected, kind):
    (tmp_path / "layout").write_bytes(NOT_TEXT[kind])
    res = run_cli("shard", "k", *args, "layout", cwd=tmp_path)
    assert_refused(res, tmp_path, None, f"layout is not a text {what}", f"expected {expected}")


@pytest.mark.parametrize(("args", "what", "expected"), LAYOUT_FILES)
def test_shard_refuses_empty_layout_files(tmp_path, args, what, expected):
    (tmp_path / "layout").write_bytes(b"")
    res = run_cli("shard", "k", *args, "layout", cwd=tmp_path)
    assert_refused(res, tmp_path, None, "layout is empty", what, expected)


# 4. outputs that cannot be written

def _commands(profile: Path, out: str) -> dict[str, list[str]]:
    return {
        "profile": ["profile", "in.csv", "--key", "k", "-o", out, "-q"],
        "generate": ["generate", "--dist", "uniform:100", "--messages", "100", "-o", out, "-q"],
        "fit": ["fit", "nums.txt", "-o", out],
        "inspect": ["inspect", str(profile), "--plot", out],
    }


@pytest.fixture
def workdir(tmp_path) -> Path:
    (tmp_path / "in.csv").write_text("k\na\nb\na\n")
    (tmp_path / "nums.txt").write_text("".join(f"{1000 // i}\n" for i in range(1, 300)))
    (tmp_path / "somefile.txt").write_text("keep me\n")
    return tmp_path


@pytest.mark.parametrize("command", ["profile", "generate", "fit", "inspect"])
def test_output_onto_an_existing_directory(workdir, small_profile, command):
    (workdir / "out.png").mkdir()  # .png so that inspect --plot gets past the image type
    res = run_cli(*_commands(small_profile, "out.png")[command], cwd=workdir)
    assert_refused(res, workdir, None, "cannot write out.png", "is a directory")
    assert (workdir / "out.png").is_dir() and not list((workdir / "out.png").iterdir())
    assert not list(workdir.glob(".out.png.*"))


@pytest.mark.parametrize("command", ["profile", "generate", "fit", "inspect"])
@pytest.mark.parametrize("parent", ["no-such-dir", "somefile.txt"])
def test_output_where_no_file_can_be(workdir, small_profile, command, parent):
    # root ignores permission bits, so "cannot be written" is a missing or non-directory parent
    out = f"{parent}/out.png"
    res = run_cli(*_commands(small_profile, out)[command], cwd=workdir)
    assert_refused(res, workdir, None, f"cannot write {out}", parent)
    assert (workdir / "somefile.txt").read_text() == "keep me\n"
    assert not (workdir / "no-such-dir").exists()


# 5. plot image types

def test_inspect_plot_unknown_image_type(tmp_path, small_profile):
    res = run_cli("inspect", str(small_profile), "--plot", "x.txt", cwd=tmp_path)
    assert_refused(res, tmp_path, "x.txt", "unknown image type .txt", ".png")


def test_inspect_plot_svg(tmp_path, small_profile):
    res = run_cli("inspect", str(small_profile), "--plot", "x.svg", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "<svg" in (tmp_path / "x.svg").read_text()
    assert not list(tmp_path.glob(".x.svg.*"))


# 6. a run far beyond the free disk is refused before it starts

def test_generate_refuses_quickly_beyond_free_disk(tmp_path):
    # 1e15 events (at 1e9/s, so the run stays within message-ID time) are refused from an
    # estimate, before anything is written
    res = run_cli("generate", "--dist", "uniform:1e6", "--messages", "1e15", "--rps", "1e9",
                  "-o", "big.parquet", cwd=tmp_path)
    assert_refused(res, tmp_path, "big.parquet", "need about", "free")
    assert list(tmp_path.iterdir()) == []


# 7. SIGTERM half-way: nothing left behind

def test_sigterm_during_generate_leaves_nothing(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "hotshard", "generate", "--dist", "zipf:1.1:1e6",
         "--messages", "3e8", "-o", "out.parquet", "-q"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not list(tmp_path.glob(".out.parquet.*.tmp")):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "generate never started writing"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, (proc.returncode, err)
    assert err.strip().splitlines() == ["hotshard: terminated (files being written were removed)"]
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# 8. outputs get the user's usual permissions, not mkstemp's 0600

def test_profile_output_gets_umask_permissions(tmp_path):
    (tmp_path / "in.csv").write_text("k\na\nb\na\n")
    previous = os.umask(0o022)
    try:
        res = run_cli("profile", "in.csv", "--key", "k", "-o", "p.json", "-q", cwd=tmp_path)
    finally:
        os.umask(previous)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "p.json").stat().st_mode & 0o777 == 0o644


def test_output_onto_a_device_pipe_or_link_writes_through(tmp_path):
    import stat as st

    device = tmp_path / "null"
    os.mknod(device, 0o666 | st.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own
    res = run_cli("generate", "--dist", "uniform:10", "--messages", "1000", "--format", "csv",
                  "-o", str(device), "-q")
    assert res.returncode == 0, res.stderr
    assert st.S_ISCHR(os.stat(device).st_mode)  # still the device, not a regular file
    real = tmp_path / "real.json"
    real.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert run_cli("fit", str(shared("csn", "words.txt")), "-o", str(link)).returncode == 0
    assert link.is_symlink() and json.loads(real.read_text())["xmin"] == 7


def test_a_secret_without_pseudonymize_is_refused(tmp_path):
    secret = tmp_path / "s"
    secret.write_bytes(os.urandom(32))
    res = run_cli("profile", str(shared("traces", "web07.parquet")), "--key", "key",
                  "--secret-file", str(secret), "-o", str(tmp_path / "p.json"))
    assert_refused(res, tmp_path, "p.json", "--secret-file is the key of --pseudonymize")


def test_a_layout_file_and_a_contrary_shard_count_are_refused(tmp_path):
    ring = tmp_path / "ring.txt"
    ring.write_text("-100 a\n5000 b\n9000 c\n")
    res = run_cli("shard", "k", "-p", "cassandra", "-n", "12", "--ring-file", str(ring))
    assert res.returncode == 2 and "lays out 3 shards, not 12" in res.stderr


def test_values_beyond_64_bits_and_runs_beyond_2039_are_refused(tmp_path):
    f = tmp_path / "huge.txt"
    f.write_text("1\n99999999999999999999\n")
    res = run_cli("fit", str(f))
    assert res.returncode == 2 and "must fit 64-bit integers" in res.stderr
    res = run_cli("generate", "--dist", "uniform:10", "--messages", "10", "--start",
                  "2045-01-01", "-o", str(tmp_path / "g.csv"))
    assert_refused(res, tmp_path, "g.csv", "between 1970 and 2039-09-07")


def test_a_missing_choice_option_is_one_line():
    res = run_cli("shard", "foo", "-n", "3")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1 and "Choose from: redis-cluster" in lines[0]


# a malformed CSV row: the line a person must fix and why, from fit and profile alike
@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("key,n\na,1\nb,2,3\nc,3\n", ("line 3 has 3 fields where the header has 2 (key, n)",)),
        ("key,n\na,1\nb,x\nc,3\n", ("'x'", "line 3")),
        ("key\tn\na\t1\nb\t2\t3\n", ("line 3 has 3 fields",)),
    ],
)
@pytest.mark.parametrize("command", ["fit", "profile"])
def test_a_malformed_csv_row_is_named_by_its_line(tmp_path, text, words, command):
    name = "in.tsv" if "\t" in text else "in.csv"
    (tmp_path / name).write_text(text)
    args = (["fit", name, "--column", "n"] if command == "fit" else
            ["profile", name, "--key", "key", "--counts", "n", "-o", "p.json"])
    res = run_cli(*args, cwd=tmp_path)
    assert_refused(res, tmp_path, "p.json" if command == "profile" else None, *words)


# an output whose parent is a file: say the file is in the way, not "does not exist"
@pytest.mark.parametrize("output", ["notes.txt/out.json", "notes.txt/deeper/out.json"])
def test_an_output_under_a_file_names_the_file_in_the_way(tmp_path, output):
    (tmp_path / "notes.txt").write_text("mine\n")
    res = run_cli("generate", "--dist", "uniform:10", "--messages", "10", "-o", output,
                  cwd=tmp_path)
    assert_refused(res, tmp_path, None, "notes.txt is a file, not a directory")
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


# absurd but finite values (valid JSON, valid observations): answered promptly, printed in
# powers of ten, drawn without numeric warnings leaking onto the terminal
def _absurd(label: str, scale: float, **extra) -> dict:
    return {"format": "hotshard.observations/1", "label": label, "rate_rps": scale,
            "achieved_rps": scale, "duration_s": scale,
            "latency_ms": {"p50": scale / 10, "p99": scale, "max": 1e300},
            "shards": [{"id": str(i), "requests": 2**62 if i == 0 else 10, "p99_ms": scale,
                        "cpu": 0.5} for i in range(4)],
            "payload_bytes_mean": scale, "distinct_keys": 2**62, **extra}


@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_absurd_but_finite_values_are_judged_and_drawn_plainly(tmp_path, scale):
    import warnings

    (tmp_path / "prod.json").write_text(json.dumps(_absurd("production", scale)))
    (tmp_path / "test.json").write_text(json.dumps(
        _absurd("load test", scale, model="closed", key_generator="uniform")))
    # in this process, every warning recorded: numpy's and matplotlib's numeric warnings are
    # Python warnings, which a terminal would show on stderr
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.monotonic()
        res = run_cli("diagnose", "prod.json", "--baseline", "test.json", cwd=tmp_path)
        assert res.returncode == 0 and res.stderr == "", res.stderr
        assert time.monotonic() - started < 60  # scipy's exact binomial tail once took hours
        res2 = run_cli("report", "prod.json", "test.json", "-o", "r.html", cwd=tmp_path)
        assert res2.returncode == 0 and res2.stderr == "", res2.stderr
    assert not [str(w.message) for w in caught]
    import re

    for text in (res.stdout, (tmp_path / "r.html").read_text()):
        assert not re.search(r"\d{16}|(\d{1,3},){5}\d{3}", text)  # no 16+ digit numbers


@pytest.mark.parametrize(("rps", "capacity"), [("1e300", "400"), ("1e15", "1e-300"),
                                               ("3000", "1e-10")])
def test_predict_refuses_a_load_no_unit_slip_explains(rps, capacity):
    from tests.conftest import ROOT

    res = run_cli("predict", str(ROOT / "examples" / "incident.profile.json"), "-p", "kafka",
                  "-n", "4", "--rps", rps, "--capacity", capacity)
    assert_refused(res, ROOT, None, "times one shard's capacity: check the units")
