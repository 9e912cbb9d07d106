"""Open-loop load from Locust workers: one arrival schedule shared out over machines, latency
from each request's intended time, HdrHistograms merged on the master.

Why a plug-in rather than a plain locustfile: Locust's own model is closed. A user sends, waits
for the answer, waits ``wait_time`` and sends again, so a slow target slows the load down and
the stall vanishes from the latencies (coordinated omission); ``constant_throughput`` is per
user and keeps no backlog; and the master hands out *user counts*, not a rate. This module keeps
what Locust is good at (master and workers over ZeroMQ, its stats, web UI, CSV and HTML
reports) and replaces the load model with ``hotshard drive``'s:

1. At test start the master numbers the workers it has, ``0..W-1`` in Locust's worker-index
   order, and sends each one a *plan*: its share ``w`` of ``W``, the run's settings (one
   :class:`~hotshard.drive.run.DriveConfig`, so workers need no hotshard options of their own)
   and a start delay. Locust tells a worker its ``worker_index`` but never the worker count,
   and indices have gaps after a reconnection; the plan gives both, consistently.
2. Each worker's :class:`Pacer` takes every W-th arrival of the one global schedule
   (``Schedule.for_process(w, W)``), with keys and operations from ``KeySource.batch`` (a pure
   function of the seed and the arrival index), so W workers send exactly the requests one
   ``hotshard drive`` process would, at the same offsets. It sleeps until each arrival is due
   and sends it in a greenlet of its own, whether or not earlier requests have returned.
3. Each request is reported through Locust's ``events.request`` with ``response_time``
   measured from its *intended* time, so Locust's own charts and percentiles are free of
   coordinated omission too, and recorded in a :class:`~hotshard.drive.record.Recorder`
   (latency from intended time, service time from the actual send, dispatch lag).
4. When its share has been sent and answered, or the test is stopped, a worker sends
   ``Recorder.encode()`` to the master (a Locust custom message); the master merges the
   histograms exactly (Locust's percentiles are rounded to two significant digits) and writes
   the ``hotshard.observations/1`` document ``hotshard drive -o`` writes, then ends the run.

Locust users play no part in the load: arrivals belong to the worker, not to a user (a closed
user cannot send a request before its previous one returns). :class:`HotshardUser` exists
because Locust needs a user class; it sends nothing, and its class attributes (headers, TLS
checks, proxy) configure the pacer's HTTP client. ``-u`` may be any number >= 1; the load is
``--hotshard-rate``. ``-t`` is only a safety cap: the run ends by itself once every worker has
reported. Workers start their shares together within one ZeroMQ message delay of each other
(the plan carries a delay, not a wall-clock instant, so machine clocks need not agree).

Run it (``examples/locustfile.py`` is the two-line locustfile)::

    locust -f examples/locustfile.py --master --headless --expect-workers 4 -u 4 \\
        --host http://10.0.0.5:8080 --hotshard-keys examples/incident.profile.json \\
        --hotshard-rate 5000 --hotshard-duration 60 --hotshard-out observations.json
    locust -f examples/locustfile.py --worker --master-host 10.0.0.1   # on each load machine

Every ``--hotshard-*`` option may be given as an environment variable instead
(``HOTSHARD_KEYS``, ``HOTSHARD_RATE``...). Importing this module imports Locust, which
monkey-patches the standard library for gevent: nothing else in hotshard imports it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import socket
import time
from collections.abc import Callable
from typing import Any

import gevent
import numpy as np
from gevent.pool import Group
from locust import FastHttpUser, constant, task
from locust.event import EventHook
from locust.exception import CatchResponseError

from hotshard.drive.keys import ORDERS, KeySource
from hotshard.drive.record import Recorder
from hotshard.drive.run import (
    EXIT_INVALID_RUN,
    MAX_ERROR_RATE,
    STATS_TIMEOUT_S,
    DriveConfig,
    DriveResult,
    stop_grace,
    target_stats,
)
from hotshard.drive.schedule import ARRIVALS
from hotshard.drive.transport import parse_template
from hotshard.errors import HotshardError, InputError

__all__ = ["HotshardUser", "Pacer", "add_arguments", "config_from_options", "install"]

logger = logging.getLogger(__name__)

PLAN = "hotshard_plan"      # master -> worker: your share of the schedule
REPORT = "hotshard_report"  # worker -> master: your Recorder.encode() and counts
LEAD_S = 1.0                # plan sent this long before arrival time 0 (keys load meanwhile)
SPIN_S = 0.001              # the last millisecond before an arrival is waited by yielding
GRACE_S = 10.0              # the master gives up on a silent worker this long after the drain
_WITH_BODY = ("POST", "PUT", "PATCH")

Sender = Callable[[str, str, bytes | None], tuple[int, str | None, str | None, int]]


# -- options ------------------------------------------------------------------------------------
def _converter(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type that turns the library's InputError into a usage error."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except (InputError, ValueError) as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    convert.__name__ = parse.__name__
    return convert


def _positive(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value > 0):
        raise InputError(f"must be a number > 0, got {text!r}")
    return value


def _non_negative(text: str) -> float:
    value = float(text)
    if not (math.isfinite(value) and value >= 0):
        raise InputError(f"must be a number >= 0, got {text!r}")
    return value


def _count(text: str) -> int:
    value = int(text)
    if value < 1:
        raise InputError(f"must be an integer >= 1, got {text!r}")
    return value


def _seed(text: str) -> int:
    value = int(text)
    if value < 0:
        raise InputError(f"must be an integer >= 0, got {text!r}")
    return value


def _percent(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 100:
        raise InputError(f"must be a percent in [0, 100], got {text!r}")
    return value


def _ratio(text: str) -> float:
    value = float(text)
    if not 0 <= value <= 1:
        raise InputError(f"must be in [0, 1], got {text!r}")
    return value


def _template(text: str) -> str:
    parse_template(text, "request")
    return text


def add_arguments(parser: Any) -> None:
    """Add the ``--hotshard-*`` options to Locust's parser (``init_command_line_parser``).

    Each has an environment variable (``--hotshard-rate`` <-> ``HOTSHARD_RATE``). Only the
    master's (or a single process's) values count: workers get theirs in the plan.
    """
    group = parser.add_argument_group("hotshard open-loop load",
                                      "arrivals on a schedule, split over the workers")

    def option(name: str, help: str, **kw: Any) -> None:
        env = "HOTSHARD_" + name.upper().replace("-", "_")
        group.add_argument(f"--hotshard-{name}", env_var=env, help=f"{help} (${env})", **kw)

    option("keys", "keys: a profile file, uniform:N, zipf:S:N...", default=None)
    option("rate", "target requests/s over all workers (default 100)",
           type=_converter(_positive), default=100.0)
    option("duration", "seconds of schedule (default 60); -t only caps the run",
           type=_converter(_positive), default=60.0)
    option("arrivals", "poisson (default) or constant", choices=ARRIVALS, default="poisson")
    option("order", "a profile's keys in production's order (locality), in independent "
           "draws (irm), or auto: locality when the profile has a locality section",
           choices=ORDERS, default="auto")
    option("ramp", "seconds over which the rate grows from 0 (default 0)",
           type=_converter(_non_negative), default=0.0)
    option("seed", "seed of arrival times, keys and operations (default 0)",
           type=_converter(_seed), default=0)
    option("read-ratio", "share of reads (default: the profile's mix by key, else 0.9)",
           type=_converter(_ratio), default=None)
    option("read", "read request template", type=_converter(_template),
           default="GET /channels/{key}/messages?limit=50")
    option("write", "write request template", type=_converter(_template),
           default="POST /channels/{key}/messages")
    option("max-inflight", "per worker; arrivals beyond it are dropped and counted "
           "(default 1000)", type=_converter(_count), default=1000)
    option("timeout", "seconds before a request counts as a timeout (default 30)",
           type=_converter(_positive), default=30.0)
    option("max-error-rate", "percent of requests that may fail before the run is invalid "
           f"(valid: false, exit status {EXIT_INVALID_RUN}; default 1)",
           type=_converter(_percent), default=100 * MAX_ERROR_RATE)
    option("out", "write the merged hotshard.observations/1 JSON here", default=None)
    option("hlog", "write the merged HdrHistogram interval log here", default=None)
    option("label", "the observations' label (default 'locust')", default="locust")


def config_from_options(options: Any, host: str | None) -> tuple[DriveConfig, KeySource]:
    """The run Locust's parsed options describe, checked, and its key source.

    Raises
    ------
    InputError
        No keys or host, a host that is not an http(s) URL, a bad template, keys spec or
        combination (ramp longer than duration...).
    """
    keys = getattr(options, "hotshard_keys", None)
    if not keys:
        raise InputError("keys must be given: --hotshard-keys (or $HOTSHARD_KEYS) as a profile "
                         "file, uniform:N or zipf:S:N")
    if not host or not str(host).startswith(("http://", "https://")):
        raise InputError(f"host must be the target's http:// or https:// URL (--host), got "
                         f"{host!r}")
    config = DriveConfig(
        url=str(host).rstrip("/"), keys=keys, rate=float(options.hotshard_rate),
        duration=float(options.hotshard_duration), arrivals=options.hotshard_arrivals,
        ramp=float(options.hotshard_ramp), seed=int(options.hotshard_seed),
        read_ratio=options.hotshard_read_ratio, read=options.hotshard_read,
        write=options.hotshard_write, max_inflight=int(options.hotshard_max_inflight),
        timeout=float(options.hotshard_timeout),
        max_error_rate=float(getattr(options, "hotshard_max_error_rate",
                                     100 * MAX_ERROR_RATE)) / 100.0,
        order=getattr(options, "hotshard_order", "auto"))
    parse_template(config.read, "read")
    parse_template(config.write, "write")
    return config, config.key_source()


# -- a worker's share -----------------------------------------------------------------------------
def _body(index: int, size: int) -> bytes:
    """A write's JSON body, the same as ``HttpTarget.build`` sends."""
    return json.dumps({"user": f"u{index % 100000}", "body": "m" * max(1, size)},
                      separators=(",", ":")).encode()


def _error_kind(error: BaseException | None) -> str:
    """transport.py's names for failures below HTTP. geventhttpclient wraps the failure in
    ``RetriesExceeded`` (even with no retries): the cause it was raised from names it."""
    seen = error
    for _ in range(4):
        if isinstance(seen, ConnectionRefusedError):
            return "connection refused"
        if isinstance(seen, ConnectionResetError):
            return "connection reset"
        if isinstance(seen, (TimeoutError, socket.timeout, gevent.Timeout)):
            return "timeout"
        if seen is None:
            break
        seen = seen.__cause__ or seen.__context__
    original = getattr(error, "kw_text", "")  # "original=timed out": no chained cause kept
    for words, kind in (("timed out", "timeout"), ("refused", "connection refused"),
                        ("reset", "connection reset")):
        if words in original.lower():
            return kind
    return f"connection error ({type(error).__name__})"


def http_sender(config: DriveConfig, user_class: type[FastHttpUser]) -> Sender:
    """``send(method, path, body) -> (status, X-Shard, error, response length)`` on one
    keep-alive connection pool to ``config.url`` (geventhttpclient, through Locust's
    ``FastHttpSession`` so ``user_class``'s headers, TLS and proxy settings apply).

    The session reports to a private event hook: the pacer reports each request itself, timed
    from its intended instant. The pool allows ``max_inflight`` connections, so no request
    waits for a connection inside the client, unseen.
    """
    from locust.contrib.fasthttp import FastHttpSession

    session = FastHttpSession(
        base_url=config.url, request_event=EventHook(), user=None,
        insecure=user_class.insecure, ssl_context_factory=user_class.ssl_context_factory,
        network_timeout=config.timeout, connection_timeout=config.timeout, max_retries=0,
        max_redirects=user_class.max_redirects, concurrency=config.max_inflight,
        headers=user_class.default_headers, proxy_host=user_class.proxy_host,
        proxy_port=user_class.proxy_port)
    json_header = {"Content-Type": "application/json"}

    def send(method: str, path: str, body: bytes | None) -> tuple[int, str | None, str | None,
                                                                   int]:
        response = session.request(method, path, data=body,
                                   headers=json_header if body is not None else None)
        status = response.status_code or 0
        headers = response.headers
        shard = headers.get("X-Shard") if headers is not None else None
        try:
            length = len(response.content or b"")
        except Exception:  # the body failed mid-read: the error below says why
            length = 0
        if status == 0:
            return 0, None, _error_kind(getattr(response, "error", None)), 0
        return status, shard, None if 200 <= status < 400 else f"http {status}", length

    return send


class Pacer:
    """One worker's share of the schedule, sent open loop, measured from intended times.

    Parameters
    ----------
    config : DriveConfig
        The run: schedule, templates, ``max_inflight``, ``timeout``.
    share, shares : int
        This worker sends arrivals ``i`` with ``i % shares == share``.
    keys : KeySource
        Keys, read/write flags and body sizes by arrival index.
    send : callable
        ``send(method, path, body) -> (status, x_shard, error, response_length)``; blocks
        only its own greenlet (:func:`http_sender`).
    fire : callable
        Locust's ``events.request.fire``.
    report : callable
        Called once with the share's report (a JSON-able dict) when the share is done or
        stopped.
    clock : callable
        Monotonic seconds. Arrival time 0 is ``start_in`` seconds after construction.
    sleep : callable
        ``sleep(seconds)``: yields to other greenlets (``gevent.sleep``).
    start_in : float
        Seconds from now to arrival time 0.
    start_epoch : float
        Wall-clock time of arrival time 0, for Locust's ``start_time`` only.
    run : int
        The master's run number, echoed in the report.

    Notes
    -----
    An arrival whose time has come is sent even if the pacer is late (dispatch lag is
    recorded), unless ``max_inflight`` requests are outstanding: then it is dropped and counted,
    never queued, so the driver never hides a backlog from the latencies. The pacer yields at
    every arrival, so a late pacer still lets responses in.
    """

    def __init__(self, config: DriveConfig, share: int, shares: int, *, keys: KeySource,
                 send: Sender, fire: Callable[..., None], report: Callable[[dict], None],
                 clock: Callable[[], float], sleep: Callable[[float], Any],
                 start_in: float = LEAD_S, start_epoch: float = 0.0, run: int = 0) -> None:
        if not (isinstance(shares, int) and shares >= 1 and isinstance(share, int)
                and 0 <= share < shares):
            raise InputError(f"share must be in 0..shares-1 with shares >= 1, got share "
                             f"{share!r} of {shares!r}")
        self.config, self.share, self.shares, self.keys = config, share, shares, keys
        self._send, self._fire, self._report, self._clock, self._sleep = (
            send, fire, report, clock, sleep)
        self.t0 = clock() + start_in
        self.start_epoch = start_epoch
        self.run_id = run
        self.recorder = Recorder()
        self.inflight = Group()
        self.sent = 0
        self.unfinished = 0
        self.stopped_at: float | None = None
        self.complete = False
        self.reported = False
        self.error: str | None = None
        self.templates = {True: parse_template(config.read, "read"),
                          False: parse_template(config.write, "write")}
        self.names = {r: f"{t.method} {t.path}" for r, t in self.templates.items()}
        self.greenlet: gevent.Greenlet | None = None

    def now(self) -> float:
        """Seconds since arrival time 0 (negative before the start)."""
        return self._clock() - self.t0

    def start(self) -> Pacer:
        self.greenlet = gevent.spawn(self._main)
        return self

    def _main(self) -> None:
        try:
            self.send_share()
        except gevent.GreenletExit:
            raise
        except Exception as e:  # a bug or a bad key source: report what was measured
            logger.exception("hotshard: worker share %d failed", self.share)
            self.error = f"{type(e).__name__}: {e}"
        self._finish()

    def send_share(self) -> None:
        """Send every arrival of this share when due, then wait for the answers."""
        schedule = self.config.schedule()
        for indices, times in schedule.for_process(self.share, self.shares):
            keys, reads, sizes = self.keys.batch(indices, times)
            for j in range(indices.size):
                due = float(times[j])
                self._wait_until(due)
                if self.sent - self.recorder.completed >= self.config.max_inflight:
                    self.recorder.drop(due)
                    continue
                self.inflight.spawn(self._one, int(indices[j]), keys[j], bool(reads[j]),
                                    int(sizes[j]), due)
                self.sent += 1
        self.inflight.join(timeout=self.config.timeout + 1.0)
        self.inflight.kill(block=True, timeout=1.0)
        self.unfinished = self.sent - self.recorder.completed
        self.complete = self.unfinished == 0

    def _wait_until(self, due: float) -> None:
        """Sleep to within ``SPIN_S`` of ``due`` (a gevent timer wakes ~0.5 ms late), then
        yield until it; always yields at least once."""
        delay = due - self.now()
        if delay > SPIN_S:
            self._sleep(delay - SPIN_S)
        self._sleep(0.0)
        while self.now() < due:
            self._sleep(0.0)

    def _one(self, index: int, key: str, is_read: bool, size: int, due: float) -> None:
        template = self.templates[is_read]
        path = template.render(key)
        body = _body(index, size) if template.method in _WITH_BODY else None
        sent = self.now()
        status, shard, error, length = self._send(template.method, path, body)
        done = self.now()
        self.recorder.record(intended=due, sent=sent, done=done, shard=shard, error=error,
                             is_read=is_read, key=key, payload=len(body) if body else 0)
        self._fire(request_type=template.method, name=self.names[is_read],
                   response_time=(done - due) * 1000.0, response_length=length,
                   exception=None if error is None else CatchResponseError(error),
                   context={"key": key, "arrival": index, "status": status,
                            "service_ms": (done - sent) * 1000.0,
                            "lag_ms": max(0.0, sent - due) * 1000.0},
                   start_time=self.start_epoch + due, url=self.config.url + path)

    def stop(self) -> None:
        """Stop sending now; requests still out after a grace period (``run.stop_grace``)
        are abandoned and counted as unfinished."""
        if self.reported:
            return
        self.stopped_at = min(max(self.now(), 0.0), self.config.duration)
        if self.greenlet is not None and not self.greenlet.dead:
            self.greenlet.kill(block=True)
        if self.reported:  # finished while we waited
            return
        # the requests still out get the same grace as `hotshard drive` gives them; what is
        # still out after it is unfinished, a failure
        self.inflight.join(timeout=stop_grace(self.recorder, self.config.timeout))
        self.inflight.kill(block=True, timeout=1.0)
        self.unfinished = self.sent - self.recorder.completed
        self._finish()

    def overdue(self, elapsed: float) -> int:
        """Arrivals of this share due before ``elapsed`` that were neither sent nor dropped:
        a stalled worker's backlog at a stop, which no histogram holds."""
        due = 0
        for _, times in self.config.schedule().for_process(self.share, self.shares):
            due += int(np.count_nonzero(times < elapsed))
            if times.size and times[-1] >= elapsed:
                break
        return max(0, due - self.sent - self.recorder.dropped)

    def _finish(self) -> None:
        if self.reported:
            return
        self.reported = True
        self.recorder.finish()
        elapsed = self.stopped_at if self.stopped_at is not None else min(
            max(self.now(), 0.0), self.config.duration)
        self._report({"run": self.run_id, "share": self.share, "shares": self.shares,
                      "recorder": self.recorder.encode(), "sent": self.sent,
                      "unfinished": self.unfinished, "complete": self.complete,
                      "overdue": 0 if self.complete else self.overdue(elapsed),
                      "elapsed": elapsed, "error": self.error})


# -- the master's merge ---------------------------------------------------------------------------
class Gatherer:
    """The master's side of one run: which shares went where, and their merged recorders.

    Parameters
    ----------
    config : DriveConfig
        The run, as planned; ``processes`` is set to ``shares``.
    shares : int
        How many workers were given a share.
    key_generator : str
        The observations' ``key_generator`` (``KeySource.generator``).
    start_epoch : float
        Wall-clock time of arrival time 0 (for the interval log).
    run : int
        This run's number; reports of other runs are ignored.
    key_order : str
        The keys' order (``KeySource.order``): locality or irm.
    """

    def __init__(self, config: DriveConfig, shares: int, *, key_generator: str,
                 start_epoch: float, run: int, key_order: str = "irm") -> None:
        self.config = dataclasses.replace(config, processes=shares)
        self.shares = shares
        self.key_generator = key_generator
        self.key_order = key_order
        self.start_epoch = start_epoch
        self.run = run
        self.recorder = Recorder()
        self.reports: dict[int, dict] = {}
        self.workers: dict[int, Any] = {}
        self.before: dict | None = None
        self.finished = False

    def add(self, report: dict, worker: Any = None) -> bool:
        """Merge one share's report; True once every share has reported."""
        share = int(report["share"])
        if report.get("run") != self.run or share in self.reports or not \
                0 <= share < self.shares:
            return len(self.reports) == self.shares
        self.recorder.merge(report["recorder"])
        self.reports[share] = report
        self.workers[share] = worker
        return len(self.reports) == self.shares

    def result(self, after: dict | None = None) -> tuple[DriveResult, dict[str, Any]]:
        """The merged run (``interrupted`` unless every share finished), and the per-worker
        facts for the observations' ``extra["locust"]``."""
        complete = len(self.reports) == self.shares and all(
            r["complete"] for r in self.reports.values())
        wall = self.config.duration if complete else max(
            [1e-9, *(float(r["elapsed"]) for r in self.reports.values())])
        notes = [f"worker share {s} failed: {r['error']}" for s, r in self.reports.items()
                 if r.get("error")]
        missing = sorted(set(range(self.shares)) - set(self.reports))
        if missing:
            notes.append(f"no report from worker share(s) {missing}: their requests are "
                         "missing from the histograms")
        result = DriveResult(self.config, self.recorder, wall,
                             sum(int(r["sent"]) for r in self.reports.values()),
                             self.start_epoch, self.key_generator, not complete,
                             (self.before, after), notes, key_order=self.key_order)
        per_worker = []
        for share in sorted(self.reports):
            r = self.reports[share]
            enc = r["recorder"]
            per_worker.append({
                "share": share, "worker": self.workers.get(share), "sent": r["sent"],
                "completed": enc["ok"] + sum(enc["errors"].values()),
                "dropped": enc["dropped"], "unfinished": r["unfinished"],
                "overdue": r.get("overdue", 0), "complete": r["complete"]})
        overdue = sum(int(r.get("overdue", 0)) for r in self.reports.values())
        if overdue:
            notes.append(f"{overdue} arrivals were due before the stop but never sent (a "
                         "worker fell behind): the histograms miss their latency")
        extra = {"workers": self.shares, "workers_reported": len(self.reports),
                 "unfinished": sum(int(r["unfinished"]) for r in self.reports.values()),
                 "overdue": overdue,
                 "per_worker": per_worker, "notes": notes}
        return result, extra


def write_outputs(result: DriveResult, extra: dict[str, Any], *, label: str,
                  out: str | None, hlog: str | None) -> tuple[Any, list[str]]:
    """The observations (with ``extra["locust"]``), written to ``out`` and the interval log to
    ``hlog`` when given, and summary lines for the log."""
    from hotshard.drive.breakdown import summary, to_observations

    observations = to_observations(result, label)
    observations = dataclasses.replace(observations,
                                       extra={**observations.extra, "locust": extra})
    if out:
        observations.save(out)
    if hlog:
        result.recorder.write_hlog(hlog, result.start_epoch)
    lines = summary(result, observations)
    lines.append(f"  workers {extra['workers_reported']} of {extra['workers']} reported; "
                 f"{extra['unfinished']} requests unfinished at stop")
    lines += [f"  warning: {w}" for w in observations.extra["drive"]["warnings"]]
    lines += [f"  note: {n}" for n in extra["notes"]]
    return observations, lines


# -- Locust wiring --------------------------------------------------------------------------------
class HotshardUser(FastHttpUser):
    """Locust's user class for a hotshard run: it sends nothing.

    The arrivals belong to each worker's :class:`Pacer`, not to users (a user is closed
    loop). Locust needs a user class to run, and this one's class attributes configure the
    pacer's HTTP client: ``default_headers``, ``insecure``, ``ssl_context_factory``,
    ``proxy_host``/``proxy_port``, ``max_redirects``. To change them, subclass it and import
    only the subclass into the locustfile (both would otherwise run, harmlessly).
    """

    wait_time = constant(3600)

    @task
    def idle(self) -> None:
        """Nothing: the worker's pacer sends every request."""


class _Node:
    """This process's part in the run: a master gathers, a worker paces, a single process does
    both."""

    def __init__(self, environment: Any) -> None:
        from locust.runners import MasterRunner, WorkerRunner

        self.env = environment
        self.runner = environment.runner
        self.is_master = isinstance(self.runner, MasterRunner)
        self.is_worker = isinstance(self.runner, WorkerRunner)
        self.pacer: Pacer | None = None
        self.gatherer: Gatherer | None = None
        self.runs = 0
        events = environment.events
        if self.is_worker:
            self.runner.register_message(PLAN, self._on_plan)
        else:
            if self.is_master:
                self.runner.register_message(REPORT, self._on_report_message)
            events.test_start.add_listener(self._on_test_start)
            events.quitting.add_listener(self._on_quitting)
        if not self.is_master:
            events.test_stopping.add_listener(self._on_test_stopping)

    # worker (and single process)
    def _user_class(self) -> type[FastHttpUser]:
        classes = [c for c in self.env.user_classes if issubclass(c, HotshardUser)]
        derived = [c for c in classes if c is not HotshardUser]
        return (derived or classes or [HotshardUser])[0]

    def _on_plan(self, environment: Any, msg: Any, **_: Any) -> None:
        self._start_pacer(msg.data)

    def _start_pacer(self, plan: dict) -> None:
        if self.pacer is not None:
            self.pacer.stop()
        report = self._send_report if self.is_worker else self._on_report
        config = DriveConfig(**plan["config"])
        try:  # a profile path must exist on every worker's machine too
            keys = config.key_source()
        except HotshardError as e:
            logger.error("hotshard: error: %s; this worker sends nothing", e)
            report({"run": plan["run"], "share": plan["share"], "shares": plan["shares"],
                    "recorder": Recorder().encode(), "sent": 0, "unfinished": 0,
                    "complete": False, "overdue": 0, "elapsed": 0.0, "error": str(e)})
            return
        self.pacer = Pacer(config, int(plan["share"]), int(plan["shares"]), keys=keys,
                           send=http_sender(config, self._user_class()),
                           fire=self.env.events.request.fire, report=report,
                           clock=time.monotonic, sleep=gevent.sleep,
                           start_in=float(plan["start_in"]),
                           start_epoch=time.time() + float(plan["start_in"]),
                           run=int(plan["run"])).start()

    def _send_report(self, report: dict) -> None:
        report["worker"] = getattr(self.runner, "worker_index", None)
        self.runner.send_message(REPORT, report)

    def _on_test_stopping(self, **_: Any) -> None:
        if self.pacer is not None:
            self.pacer.stop()

    # master (and single process)
    def _workers(self) -> list[str]:
        from locust.runners import STATE_MISSING

        clients = [c for c in self.runner.clients.all if c.state != STATE_MISSING]
        return [c.id for c in sorted(clients, key=lambda c: self.runner.get_worker_index(c.id))]

    def _on_test_start(self, environment: Any, **_: Any) -> None:
        try:
            config, keys = config_from_options(environment.parsed_options, environment.host)
        except HotshardError as e:
            logger.error("hotshard: error: %s; sending no load", e)
            return
        workers = self._workers() if self.is_master else ["local"]
        if not workers:
            logger.error("hotshard: error: no workers connected; sending no load")
            return
        try:
            dataclasses.replace(config, processes=len(workers)).check_schedulable()
        except HotshardError as e:
            logger.error("hotshard: error: %s (here: one process per worker); sending no load",
                         e)
            return
        self.runs += 1
        self.gatherer = Gatherer(config, len(workers), key_generator=keys.generator,
                                 key_order=keys.order,
                                 start_epoch=time.time() + LEAD_S, run=self.runs)
        for share, client in enumerate(workers):
            plan = {"run": self.runs, "share": share, "shares": len(workers),
                    "start_in": LEAD_S, "config": dataclasses.asdict(config)}
            if self.is_master:
                self.runner.send_message(PLAN, plan, client_id=client)
            else:
                self._start_pacer(plan)
        logger.info("hotshard: %g requests/s for %g s of %s keys over %d worker(s)",
                    config.rate, config.duration, config.keys, len(workers))
        self.gatherer.before = target_stats(config.url, min(STATS_TIMEOUT_S, config.timeout))
        gevent.spawn_later(LEAD_S + config.duration + config.timeout + GRACE_S,
                           self._finish, self.gatherer)

    def _on_report_message(self, environment: Any, msg: Any, **_: Any) -> None:
        self._on_report(msg.data)

    def _on_report(self, report: dict) -> None:
        gatherer = self.gatherer
        if gatherer is not None and gatherer.add(report, report.get("worker")):
            self._finish(gatherer)

    def _on_quitting(self, **_: Any) -> None:
        if self.gatherer is not None:
            self._finish(self.gatherer)

    def _finish(self, gatherer: Gatherer) -> None:
        """Write the merged results once, and end the run if it is still going."""
        if gatherer.finished:
            return
        gatherer.finished = True
        result, extra = gatherer.result(after=target_stats(gatherer.config.url,
                                                     min(STATS_TIMEOUT_S, gatherer.config.timeout)))
        options = self.env.parsed_options
        try:
            observations, lines = write_outputs(result, extra, label=options.hotshard_label,
                                     out=options.hotshard_out, hlog=options.hotshard_hlog)
        except HotshardError as e:
            logger.error("hotshard: error: %s", e)
            return
        logger.info("hotshard: merged HdrHistograms\n%s", "\n".join(lines))
        if not observations.is_valid:
            from hotshard.drive.breakdown import invalid_warning

            logger.error("hotshard: %s", invalid_warning(observations.errors or {}))
            self.env.process_exit_code = EXIT_INVALID_RUN  # Locust exits with it
        if gatherer is self.gatherer:
            self._end_run()

    def _end_run(self) -> None:
        from locust.runners import STATE_RUNNING, STATE_SPAWNING

        if self.runner.state not in (STATE_RUNNING, STATE_SPAWNING):
            return
        options = self.env.parsed_options
        gevent.spawn(self.runner.quit if getattr(options, "headless", False)
                     else self.runner.stop)


def install(events: Any) -> None:
    """Make this Locust process a hotshard open-loop driver (call once, in the locustfile).

    Adds the ``--hotshard-*`` options and, at ``init``, this process's role: the master (or a
    single process) checks the options at once, plans each run and merges the reports; a
    worker paces its share. With bad options the master logs ``hotshard: error: ...`` and
    exits with status 2 before any worker starts.
    """
    if getattr(events, "_hotshard_installed", False):
        return
    events._hotshard_installed = True
    events.init_command_line_parser.add_listener(add_arguments)

    def on_init(environment: Any, runner: Any = None, **_: Any) -> None:
        if runner is None:
            return
        node = _Node(environment)
        if not node.is_worker and environment.parsed_options is not None:
            options = environment.parsed_options
            try:
                config, _ = config_from_options(options, environment.host)
            except HotshardError as e:
                logger.error("hotshard: error: %s", e)
                raise SystemExit(2) from None
            # the checks above block the event loop, whose cached clock then runs late and
            # fires Locust's -t timer early: bring it up to date
            gevent.get_hub().loop.update_now()
            run_time = getattr(options, "run_time", None)
            if run_time and run_time < LEAD_S + config.duration:
                logger.warning("hotshard: -t %ss ends the run before the schedule's %g s (+%g s "
                               "start): the last arrivals will not be sent", run_time,
                               config.duration, LEAD_S)
        environment.hotshard = node

    events.init.add_listener(on_init)
