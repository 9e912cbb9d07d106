"""Start the reference service in a child process from a library: ``launched`` (what the demo
and tests use instead of ``python -m hotshard serve`` plus parsing its output).

The child runs this module (``python -m hotshard.service.launch``), which calls
``server.serve`` and writes the URL as its first stdout line once requests are accepted; the
admin token goes through the environment (``HOTSHARD_ADMIN_TOKEN``), never the command line
(``ps`` shows that). Leaving the ``with`` block stops the service with SIGINT (a graceful
stop: every shard worker exits), then SIGKILL if it lingers.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import select
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from hotshard.errors import HotshardError, InputError

__all__ = ["Launched", "launched"]

# How long a start may take (a --load of a million messages is a few seconds here).
START_TIMEOUT_S = 120.0
HEALTHY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Launched:
    """A running service: its URL, the admin token, and the child process."""

    url: str
    admin_token: str
    process: subprocess.Popen


@contextlib.contextmanager
def launched(data_dir: Path | str, *, shards: int, partitioner: str, cost_ms: float = 0.0,
             load: Path | str | None = None, log: Path | str | None = None,
             host: str = "127.0.0.1") -> Iterator[Launched]:
    """``hotshard serve`` in a child process on a free port of ``host``; yields once /health
    says every shard is up; stops it (and so its shard workers) on the way out, whatever
    happened. The child's stderr goes to ``log`` (default: ``serve.log`` beside ``data_dir``).

    Raises
    ------
    InputError
        The service did not start, or never became healthy (the log's last line says why).
    """
    token = secrets.token_urlsafe(32)
    log_path = Path(log) if log is not None else Path(data_dir).parent / "serve.log"
    cmd = [sys.executable, "-m", "hotshard.service.launch", "--data", str(data_dir),
           "--shards", str(shards), "--partitioner", partitioner, "--cost-ms", str(cost_ms),
           "--host", host]
    if load is not None:
        cmd += ["--load", str(load)]
    with open(log_path, "wb") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1",
                                     "HOTSHARD_ADMIN_TOKEN": token})
    try:
        # the URL, once the load is done and it listens; a start that hangs is stopped
        ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT_S)
        if not ready:
            raise InputError(f"the service printed no URL within {START_TIMEOUT_S:.0f} s; "
                             f"see {log_path}")
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            proc.wait(timeout=15)
            tail = log_path.read_text(errors="replace").strip().splitlines()[-1:] or [
                "(no output)"]
            raise InputError(f"the service did not start: {tail[0]}")
        deadline = time.monotonic() + HEALTHY_TIMEOUT_S
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2):
                    break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise InputError(f"the service at {url} never became healthy; see "
                                     f"{log_path}") from None
                time.sleep(0.1)
        yield Launched(url, token, proc)
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _main(argv: list[str] | None = None) -> int:
    from hotshard.service.server import ServeConfig, serve

    parser = argparse.ArgumentParser(prog="python -m hotshard.service.launch")
    parser.add_argument("--data", required=True)
    parser.add_argument("--shards", type=int, required=True)
    parser.add_argument("--partitioner", required=True)
    parser.add_argument("--cost-ms", type=float, default=0.0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--load")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # a stop like Ctrl-C
    config = ServeConfig(Path(args.data), shards=args.shards, partitioner=args.partitioner,
                         host=args.host, port=0, cost_ms=args.cost_ms, load=args.load,
                         admin_token=os.environ.get("HOTSHARD_ADMIN_TOKEN"))
    try:
        serve(config, on_listening=lambda up: print(up.url, flush=True))
    except KeyboardInterrupt:
        return 0
    except HotshardError as e:  # the one line the parent shows; a bug keeps its traceback
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(_main())
