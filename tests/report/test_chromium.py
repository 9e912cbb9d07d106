"""The report renders in a real browser: Debian's headless Chromium, offline.

Chromium opens the file with name resolution switched off, takes a screenshot, and logs to
stderr (``--enable-logging=stderr --v=1``) every console message (``INFO:CONSOLE``) and every
file it loads (``FileURLLoader::Start``). The report has no scripts and needs no other file, so
a console line or a second file is a failure. The screenshot must show the plots: each figure
has a colour only it uses (the per-shard bars' blue, the latency panel's third line's purple,
the mitigation chart's grey median bars, the hottest shard's red), and the page must be far
from blank. A control page with a script error and a missing image checks the checker.

Chromium comes from apt (``make install-test`` installs it): missing, the test fails.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120
WIDTH, HEIGHT = 1200, 9000  # CSS pixels: tall enough for the whole report in one screenshot
SCALE = 0.5  # drawn at half size: a quarter of the pixels to paint, plots still distinct

# colours each figure uses and no text does (matplotlib draws bar interiors exactly)
PLOT_COLOURS = {"per-shard bars": (0x5B, 0x7F, 0xA6), "hottest shard": (0xC0, 0x39, 0x2B),
                "latency line": (0x8E, 0x44, 0xAD), "median shard CPU": (0x95, 0xA5, 0xA6)}


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.fail("Debian's chromium is not installed: `make install-test` installs it "
                "(apt-get install chromium)")


def render(page: Path, folder: Path) -> tuple[np.ndarray, str]:
    """(RGB screenshot as uint8, Chromium's log) of ``page`` in headless Chromium."""
    shot = folder / "shot.png"
    args = [_chromium(), "--headless", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
            "--no-default-browser-check", "--disable-extensions", "--mute-audio",
            f"--user-data-dir={folder / 'browser-profile'}", "--enable-logging=stderr",
            "--v=1", "--host-resolver-rules=MAP * ~NOTFOUND",  # no name resolves: offline
            f"--window-size={WIDTH},{HEIGHT}", f"--force-device-scale-factor={SCALE}",
            f"--screenshot={shot}", page.as_uri()]
    if os.geteuid() == 0:  # Chromium's sandbox refuses to run as root
        args.insert(1, "--no-sandbox")
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", start_new_session=True)
    try:
        _out, log = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"chromium did not finish within {TIMEOUT_S} s")
    finally:  # the browser's helper processes too: its group is the one this test started
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0 and shot.is_file(), log[-3000:]
    from matplotlib.image import imread

    pixels = imread(shot)
    return np.round(pixels[..., :3] * 255).astype(np.uint8), log


def console_messages(log: str) -> list[str]:
    return [line for line in log.splitlines() if re.search(r":CONSOLE[(:]", line)]


def loaded_files(log: str) -> set[str]:
    return set(re.findall(r"FileURLLoader::Start: (\S+)", log))


def distinct_colours(pixels: np.ndarray) -> int:
    """How many RGB values the image holds: each pixel packed into one integer, so that the
    count is one sort of integers (``np.unique(axis=0)`` sorts rows: ~8x the CPU)."""
    rgb = pixels.astype(np.uint32)
    return int(np.unique((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2]).size)


def _near(pixels: np.ndarray, colour: tuple[int, int, int], tolerance: int = 6) -> int:
    diff = np.abs(pixels.astype(np.int16) - np.array(colour, dtype=np.int16))
    return int(np.count_nonzero(diff.max(axis=-1) <= tolerance))


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """The incident's report: load test, production, mitigated (20 simulated s each), the
    incident profile, and the diagnosis engine's verdict."""
    from hotshard.diagnose.engine import diagnose
    from hotshard.profile.document import Profile
    from hotshard.report.html import write_report
    from hotshard.report.runs import assign_roles
    from hotshard.sim.scenarios import run_scenario

    runs = [run_scenario(name, duration=20, seed=1).to_observations()
            for name in ("incident-test", "incident-production", "incident-mitigated")]
    profile = Profile.load(ROOT / "examples" / "incident.profile.json")
    roles = assign_roles(runs)
    production, baseline = roles.production, roles.baseline
    verdict = diagnose(production, baseline, profile=profile)
    path = tmp_path_factory.mktemp("report") / "report.html"
    write_report(path, runs, profile=profile, diagnosis=verdict, production=production,
                 baseline=baseline)
    return path


def test_the_report_references_nothing_over_the_network(report):
    page = report.read_text(encoding="utf-8")
    assert not re.search(r"""\b(src|href)\s*=\s*["']?\s*(https?:)?//""", page, flags=re.I)
    assert not re.search(r"url\(\s*[\"']?\s*(https?:)?//", page, flags=re.I)


def test_the_report_renders_with_its_plots_and_no_console_errors(report, tmp_path):
    pixels, log = render(report, tmp_path)
    assert console_messages(log) == []
    assert loaded_files(log) <= {report.as_uri()}  # the page alone: nothing else fetched
    white = (pixels >= 250).all(axis=-1)
    assert 1 - white.mean() > 0.05, "the screenshot is nearly blank"
    assert white[-pixels.shape[0] // 20:].all(), "the page runs past the screenshot: raise HEIGHT"
    colours = distinct_colours(pixels)
    assert colours > 500, f"only {colours} distinct colours: no plots drawn"
    drawn = {name: _near(pixels, colour) for name, colour in PLOT_COLOURS.items()}
    assert all(count > 200 for count in drawn.values()), drawn  # a line: ~400 at half size


def test_the_checks_catch_a_broken_page(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><p>broken</p><img src="missing.png">'
                    "<script>console.error('boom'); notDefined();</script></body></html>")
    pixels, log = render(page, tmp_path)
    messages = console_messages(log)
    assert any("boom" in m for m in messages) and any("notDefined" in m for m in messages)
    assert (tmp_path / "missing.png").as_uri() in loaded_files(log)
    assert all(_near(pixels, c) == 0 for c in PLOT_COLOURS.values())
