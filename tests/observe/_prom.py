"""A real Prometheus (Debian's ``prometheus``) for the tests: generated config, 1 s scrapes
(or ``scrape_s``), a free 127.0.0.1 port, its own data directory; stopped by the pid the test
started.

``scrapes(url, job, after)`` polls (never sleeps a fixed time) until every target of ``job``
has a sample later than ``after``, which is how a test knows a window's edges are covered.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRAPE_S = 1.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def need(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        pytest.fail(f"{binary} not found: `make install-test` installs it (Debian package)")
    return path


def stop(proc: subprocess.Popen) -> None:
    """Stop a server a test started: SIGTERM, then SIGKILL after 10 s; always reaped."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def config(jobs: dict[str, dict], scrape_s: float = SCRAPE_S) -> str:
    """Prometheus YAML (JSON is YAML) scraping each job every ``scrape_s`` seconds."""
    every = f"{round(scrape_s * 1000)}ms"  # Prometheus durations are whole numbers of a unit
    scrape = []
    for name, job in jobs.items():
        scrape.append({"job_name": name, "scrape_interval": every, "scrape_timeout": every,
                       **job})
    return json.dumps({"global": {"scrape_interval": every, "evaluation_interval": every},
                       "scrape_configs": scrape}, indent=2)


def query(url: str, promql: str, at: float | None = None) -> list[dict]:
    params = {"query": promql, **({"time": f"{at:.3f}"} if at is not None else {})}
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode(params)}",
                                timeout=5) as r:
        return json.loads(r.read())["data"]["result"]


def scrapes(url: str, job: str, after: float, *, targets: int, timeout: float = 20.0) -> None:
    """Wait until each of ``targets`` targets of ``job`` was scraped (up == 1) after
    ``after`` (Unix seconds)."""
    deadline = time.monotonic() + timeout
    latest: list = []
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, KeyError, ValueError):
            # timestamp() of a bare selector is the sample's time (of an expression such as
            # `up == 1` it would be the evaluation's): `and` keeps the successful scrapes
            latest = query(url, f'timestamp(up{{job="{job}"}}) and up{{job="{job}"}} == 1')
            if len(latest) >= targets and all(float(r["value"][1]) > after for r in latest):
                return
        time.sleep(0.1)
    raise AssertionError(f"Prometheus did not scrape {job} after {after}: {latest}")


@contextlib.contextmanager
def prometheus(directory: Path, jobs: dict[str, dict],
               scrape_s: float = SCRAPE_S) -> Iterator[str]:
    """Start Prometheus on a free port with ``jobs`` scraped every ``scrape_s`` seconds; yield
    its URL once /-/ready answers."""
    binary = need("prometheus")
    directory.mkdir(parents=True, exist_ok=True)
    cfg = directory / "prometheus.yml"
    cfg.write_text(config(jobs, scrape_s))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = open(directory / "prometheus.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [binary, f"--config.file={cfg}", f"--storage.tsdb.path={directory / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise AssertionError("prometheus exited: "
                                     + (directory / "prometheus.log").read_text()[-2000:])
            with contextlib.suppress(OSError), \
                    urllib.request.urlopen(f"{url}/-/ready", timeout=1) as r:
                if r.status == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError("prometheus not ready within 30 s")
            time.sleep(0.1)
        yield url
    finally:
        stop(proc)
        log.close()
