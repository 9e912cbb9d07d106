"""A few true subprocess runs: the installed entry point, exit codes, and a light start-up.

Everything else runs the CLI in-process (tests.conftest.run_cli); these need a real process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli_subprocess


def test_installed_command_reports_its_version():
    exe = Path(sys.executable).with_name("hotshard")
    res = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "hotshard, version" in res.stdout


def test_user_mistake_is_one_line_and_exit_2_from_a_real_process(tmp_path):
    res = run_cli_subprocess("fit", str(tmp_path / "missing.txt"))
    assert res.returncode == 2
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hotshard: error:") and "missing.txt" in lines[0]


def test_help_loads_no_numeric_library():
    # start-up is part of speed: the command list must not pay for numpy, numba or scipy
    code = ("import sys\nfrom hotshard.cli import main\nmain(['--help'])\n"
            "heavy = sorted(m for m in ('numpy', 'numba', 'scipy', 'pyarrow', 'duckdb') "
            "if m in sys.modules)\nprint('HEAVY', heavy)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert "HEAVY []" in res.stdout, res.stdout.splitlines()[-1]


def test_every_command_help_loads_no_numeric_library():
    from hotshard.cli import COMMANDS

    for name in COMMANDS:
        code = (f"import sys\nfrom hotshard.cli import main\nmain(['{name}', '--help'])\n"
                "print('HEAVY', sorted(m for m in ('numpy', 'numba', 'scipy') "
                "if m in sys.modules))")
        res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 0, res.stderr
        assert "HEAVY []" in res.stdout, (name, res.stdout.splitlines()[-1])


def test_a_reader_that_goes_away_is_not_an_error():
    # `hotshard ... | head -1`: the broken pipe ends the command quietly, exit 0
    code = ("import subprocess, sys\n"
            "p = subprocess.Popen([sys.executable, '-m', 'hotshard', 'generate', '--dist', "
            "'uniform:10', '--messages', '2e6', '-o', '-'], stdout=subprocess.PIPE, "
            "stderr=subprocess.PIPE)\n"
            "p.stdout.readline(); p.stdout.close(); err = p.stderr.read(); p.wait()\n"
            "print('RC', p.returncode, 'ERR', err.decode().strip()[-200:])")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert "RC 0 ERR " in res.stdout and "Traceback" not in res.stdout, res.stdout
