"""Shared fixtures: the real data sets in ../shared/data, seeded generators, CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
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
    """Run `python -m hotshard ARGS` as a user would; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "hotshard", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )
