"""Test-side helpers: start `hotshard serve` as a user would, and push paced traffic at it.

The traffic helper is deliberately small (the real open-loop driver is `hotshard drive`): it
sends request i at its Poisson arrival time whether or not earlier ones returned, and records status
codes and X-Shard headers, so tests measure what the service did under a known load.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import select
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

from hotshard.drive.transport import HttpTarget, TransportError

ROOT = Path(__file__).resolve().parents[2]

# httpx builds a TLS context for every client it makes (httpx.get and httpx.post make one per
# call): certifi's CA bundle parsed again, ~37 ms of CPU a request, more than the service
# spends answering it. These services speak plain HTTP on loopback, so every request here
# shares one context that is never used.
PLAIN_HTTP = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


def http_get(url: str, **kw) -> httpx.Response:
    """``httpx.get`` (a new connection per call) without a TLS context per call."""
    return httpx.get(url, verify=PLAIN_HTTP, **kw)


def http_post(url: str, **kw) -> httpx.Response:
    """``httpx.post`` (a new connection per call) without a TLS context per call."""
    return httpx.post(url, verify=PLAIN_HTTP, **kw)


@dataclass
class Service:
    url: str
    process: subprocess.Popen
    data: Path
    admin_token: str = ""

    @property
    def admin_headers(self) -> dict[str, str]:
        """What every admin request sends: the service's token."""
        return {"Authorization": f"Bearer {self.admin_token}"}

    def get(self, path: str, **kw) -> httpx.Response:
        return http_get(self.url + path, timeout=30, **kw)

    def post(self, path: str, **kw) -> httpx.Response:
        return http_post(self.url + path, timeout=30, **kw)

    def stats(self) -> dict:
        return self.get("/stats").json()


def _read_line(proc: subprocess.Popen, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.2)
        if ready:
            return proc.stdout.readline().strip()
        if proc.poll() is not None:
            break
    err = proc.stderr.read() if proc.poll() is not None else ""
    raise AssertionError(f"hotshard serve printed no URL (exit {proc.poll()}): {err}")


def wait_healthy(url: str, timeout: float = 30.0) -> None:
    """Poll /health until every shard answers (a health check, not a sleep)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = http_get(url + "/health", timeout=2)
            if last.status_code == 200:
                return
        except httpx.HTTPError as e:
            last = e
        time.sleep(0.05)
    raise AssertionError(f"service at {url} not healthy: {last}")


@contextlib.contextmanager
def serve(data: Path, *args: str, timeout: float = 120.0) -> Iterator[Service]:
    """`hotshard serve --port 0 --data DATA ARGS...` in a subprocess; stopped (SIGINT, then
    SIGKILL) on exit, by the pid this function started. Its admin token is chosen here and
    passed as HOTSHARD_ADMIN_TOKEN (``Service.admin_headers`` sends it)."""
    token = secrets.token_urlsafe(24)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HOTSHARD_ADMIN_TOKEN": token}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hotshard", "serve", "--port", "0", "--data", str(data), *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        url = _read_line(proc, timeout)
        if not url.startswith("http://127.0.0.1:"):
            proc.wait(10)
            raise AssertionError(f"hotshard serve failed: {url} {proc.stderr.read()}")
        wait_healthy(url)
        yield Service(url, proc, Path(data), token)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for stream in (proc.stdout, proc.stderr):
            stream.close()


@contextlib.contextmanager
def asgi_server(app, sock: socket.socket | None = None) -> Iterator[int]:
    """uvicorn with the gateway's own HTTP protocol (``GuardedH11Protocol``) serving ``app``
    in a thread, on ``sock`` (default: a free 127.0.0.1 port); yields the port, stops the
    server on exit. For tests of the HTTP layer that need a module constant set small."""
    import threading

    import uvicorn

    from hotshard.service.httpguard import GuardedH11Protocol

    if sock is None:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = uvicorn.Server(uvicorn.Config(app, http=GuardedH11Protocol, lifespan="off",
                                           log_level="critical", timeout_keep_alive=30))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive()
            time.sleep(0.01)
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def all_pages(svc: Service, channel: str, limit: int) -> list[int]:
    """Every message id of a channel, newest first, paging by ``next_before``."""
    seen: list[int] = []
    before = None
    while True:
        params = {"limit": limit} | ({"before": before} if before else {})
        page = svc.get(f"/channels/{channel}/messages", params=params).json()
        seen += [m["id"] for m in page["messages"]]
        before = page["next_before"]
        if before is None:
            return seen


@dataclass
class TrafficResult:
    sent: int = 0
    statuses: Counter = field(default_factory=Counter)
    shards: Counter = field(default_factory=Counter)
    late_s: float = 0.0  # how far behind schedule the last send was


async def _traffic(url: str, keys: Sequence[str], rate: float, read_share: float,
                   seed: int, limit: int) -> TrafficResult:
    rng = np.random.default_rng(seed)
    is_read = rng.random(len(keys)) < read_share
    # Poisson arrivals: independent requests, so identical reads can overlap as in life
    due_times = np.cumsum(rng.exponential(1.0 / rate, len(keys)))
    result = TrafficResult()
    # the driver's own keep-alive client: ~0.3 ms of CPU a request where httpx spent ~3 ms,
    # CPU the measured service would otherwise compete with
    target = HttpTarget(url, read=f"GET /channels/{{key}}/messages?limit={limit}",
                        write="POST /channels/{key}/messages", timeout=60, max_connections=256)

    async def one(i: int) -> None:
        try:
            status, shard, _ = await target.send(target.build(bool(is_read[i]), keys[i], 100, i))
            result.statuses[status] += 1
            result.shards[shard] += 1
        except TransportError as e:
            result.statuses[f"TransportError: {e}"] += 1

    loop = asyncio.get_running_loop()
    start = loop.time()
    tasks = []
    try:
        for i in range(len(keys)):
            due = start + due_times[i]
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
            result.sent += 1
        result.late_s = max(0.0, loop.time() - (start + due_times[-1]))
        await asyncio.gather(*tasks)
    finally:
        target.close()
    return result


def send_traffic(url: str, keys: Sequence[str], *, rate: float, read_share: float = 0.9,
                 seed: int = 0, limit: int = 50) -> TrafficResult:
    """Send one request per key, open loop, Poisson at ``rate``/s; reads with probability
    ``read_share``."""
    return asyncio.run(_traffic(url, keys, rate, read_share, seed, limit))


def profile_keys(profile: str | Path, n: int, seed: int) -> list[str]:
    """``n`` channel ids drawn from a profile with hotshard's own sampler."""
    from hotshard.profile.document import Profile
    from hotshard.workload.profile_sampler import from_profile

    sampler = from_profile(Profile.load(profile))
    ids = sampler.ids(sampler.sample(n, np.random.default_rng(seed)))
    return [str(k) for k in (ids.tolist() if hasattr(ids, "tolist") else ids.to_pylist())]
