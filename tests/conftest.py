"""Shared fixtures: the real data sets in ../shared/data, seeded generators, CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from itertools import zip_longest
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("HOTSHARD_SHARED_DATA", ROOT.parent / "shared" / "data"))


def shared(*parts: str) -> Path:
    """Path of a shared data file; the suite needs ../shared/data (CI has it)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"shared data missing: {path} (tests read ../shared/data beside the repo)")
    return path


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261202)


def run_cli(*args: str, stdin: str | None = None, cwd: Path | None = None):
    """Run `hotshard ARGS` in this process (click's CliRunner isolation), as a user would.

    Returns a CompletedProcess (returncode, stdout, stderr) like ``run_cli_subprocess``; the
    entry point is the same ``hotshard.cli.main`` the installed command calls, so error
    handling and exit codes are the real ones, without paying a new interpreter per call.
    """
    from click.testing import CliRunner

    from hotshard.cli import main

    previous = Path.cwd()
    runner = CliRunner()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with runner.isolation(input=stdin) as streams:
            code = main(list(args))
            sys.stdout.flush()
            sys.stderr.flush()
            out, err = streams[0].getvalue(), streams[1].getvalue()
    finally:
        os.chdir(previous)
    return subprocess.CompletedProcess(["hotshard", *args], code, out.decode(errors="replace"),
                                       err.decode(errors="replace"))


def run_cli_subprocess(*args: str, stdin: str | None = None, cwd: Path | None = None):
    """Run `python -m hotshard ARGS` in a new process: for signals, exit codes, installs."""
    return subprocess.run(
        [sys.executable, "-m", "hotshard", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


_PROFILES: dict[tuple, object] = {}


def process_state(pid: int) -> str | None:
    """The state letter of process ``pid`` in /proc/PID/stat ("R", "S", "T" when stopped, "Z"
    for a zombie waiting for its reaper); None when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[-1].split()[0].decode()
    except (OSError, IndexError):
        return None


def trace_profile(name: str, **kwargs):
    """The profile of shared trace ``name`` (its key column), built once per test session."""
    from hotshard.profile.count import count_profile

    key = (name, tuple(sorted(kwargs.items(), key=lambda kv: kv[0])))
    if key not in _PROFILES:
        column = "lbn" if name == "cloudphysics" else "key"
        _PROFILES[key] = count_profile([str(shared("traces", f"{name}.parquet"))], key=column,
                                       **kwargs)
    return _PROFILES[key]


@pytest.fixture(scope="session")
def web07_profile():
    """web07 profiled once per session (a Profile; never mutated: profiles are frozen)."""
    return trace_profile("web07")


@pytest.fixture(scope="session")
def web07_path(tmp_path_factory, web07_profile) -> Path:
    """web07's profile saved as JSON once per session, for CLI tests."""
    path = tmp_path_factory.mktemp("profiles") / "web07.json"
    web07_profile.save(path)
    return path


# `make test` runs the timing tests in a pass of their own over only the files that hold them
# (found by grepping for the marker, so that pass does not import every test module): a timing
# test whose file does not spell the marker so would run in neither pass
TIMING_MARKER_TEXT = "pytest.mark.timing"


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    timing_files = {item.path for item in items if item.get_closest_marker("timing")}
    unfound = sorted(str(path) for path in timing_files
                     if TIMING_MARKER_TEXT not in path.read_text())
    if unfound:
        raise pytest.UsageError(f"{', '.join(unfound)}: mark timing tests with "
                                f"`{TIMING_MARKER_TEXT}` spelled out (make test finds their "
                                "files by that text)")
    yield  # -m and -k deselect here: what is ordered below is what runs
    _heaviest_files_first(items)


def _heaviest_files_first(items) -> None:
    """Put the files with slow tests first, keeping every file's own order.

    ``make test`` hands whole files to its 4 processes in this order (pytest-xdist's
    ``--dist loadfile --no-loadscope-reorder``): a process is given the next file when two or
    fewer of its tests are left. With the long files first, the run ends on short ones, so no
    core idles while one process finishes a long file alone (in alphabetical order the
    locality oracle's 12 s test ran last, on half the machine). The slow files take turns by
    directory (the one with the most slow tests of each directory, then the next of each...):
    files of one directory tend to wait on the same thing (tests/cluster/'s on Redis clusters
    forming), and four of them at once would leave the cores idle. Whole files per process
    also build each module-scoped fixture once."""
    slow = Counter(item.path for item in items if item.get_closest_marker("slow"))
    by_directory: dict[Path, list[Path]] = {}
    for path in sorted(slow, key=lambda p: (-slow[p], str(p))):
        by_directory.setdefault(path.parent, []).append(path)
    turns = sorted(by_directory.values(), key=lambda files: (-slow[files[0]], str(files[0])))
    order = [path for turn in zip_longest(*turns) for path in turn if path is not None]
    rank = {path: k for k, path in enumerate(order)}
    items.sort(key=lambda item: rank.get(item.path, len(order)))


_PEAK_OF_CHILD = ("import resource, subprocess, sys; "
                  "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
                  "stderr=subprocess.PIPE, text=True); "
                  "sys.stderr.write(p.stderr); "
                  "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def peak_rss_mb(*args: str) -> tuple[int, float, str]:
    """(exit status, peak RSS in MB, stderr) of `python -m hotshard ARGS`, run from a small
    process of its own: a child forked from this (large) test process would count this
    process's pages in its peak (ru_maxrss survives fork and exec)."""
    res = subprocess.run([sys.executable, "-c", _PEAK_OF_CHILD, sys.executable, "-m",
                          "hotshard", *args], capture_output=True, text=True, cwd=ROOT,
                         timeout=600)
    code, kb = res.stdout.split()[-2:]
    return int(code), int(kb) / 1024, res.stderr
