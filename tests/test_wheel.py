"""A wheel is the product: built from this checkout, installed into a fresh virtualenv with no
trace of the checkout, it runs the incident scenarios from its package data."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_a_wheel_runs_the_scenarios_from_its_package_data(tmp_path):
    wheels = tmp_path / "wheels"
    source = tmp_path / "source"  # a copy: setuptools leaves build/ beside what it builds
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (ROOT / name).exists():
            shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(wheels), str(source)], check=True, timeout=300)
    wheel = next(wheels.glob("hotshard-*.whl"))
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    # the dependencies (numpy, numba, ...) from the test environment, without its .pth files
    # (the editable install of this checkout is one): only the wheel provides hotshard
    (purelib / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(purelib), str(wheel)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = subprocess.run([str(python), "-c", "import hotshard; print(hotshard.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env, check=True)
    assert where.stdout.startswith(str(purelib)), where.stdout
    res = subprocess.run([str(python), "-m", "hotshard", "simulate", "--scenario",
                          "incident-production", "--duration", "1m", "-n", "64"],
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "3,000 req/s" in res.stdout and "shard 57" in res.stdout
    assert "the profile's rate shape" in res.stdout  # the arrivals came with the data
