"""`hotshard demo`: the incident's whole story on embedded defaults, narrated step by step.

1. make a production-like trace (heavy-tailed channel popularity, one channel hosting an event)
2. profile it (counts only) and fit the tail
3. predict the hot shard, before any test runs
4. simulate the incident at full scale: uniform load test against production
5. start the reference service (``hotshard serve``) and load it with the channels' history
6. drive it open-loop with uniform keys (looks fine), then with the profile's (the hot shard),
   taking turns, each several times on the same requests
7. diagnose the two runs
8. switch the mitigations on at run time (and off between runs), drive the same traffic: the fix
9. write report.html, and the headline: what the runs support, solid first

The headline leads with what does not depend on the machine's load: each shard's CPU and
requests, and the queueing model calibrated from them (``drive.bound.queue_p99``). A live p99
comparison is stated only when ``drive.bound.compare_p99`` supports it: every repeat behind it
shard-bound (``drive.bound.classify_run``: not a busy machine's or the driver's latency) and
the two ranges apart. The evidence files record each repeat's verdict, so the report states
no comparison the terminal would not.

Everything is computed on the spot from the seed; every process the demo starts, it stops
(the service by SIGINT, then SIGKILL if it does not exit), also on Ctrl-C or an error.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import statistics
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hotshard._format import ms, pct, rps, times
from hotshard.drive.bound import (
    P99Comparison,
    RunBound,
    classify_run,
    compare_p99,
    queue_p99,
    recorded_bound,
)
from hotshard.errors import HotshardError
from hotshard.observations import Observations

__all__ = ["FULL", "QUICK", "DemoResult", "DemoSettings", "Headline", "LiveRuns", "headline",
           "run_demo"]


@dataclass(frozen=True)
class DemoSettings:
    """How big each step is. FULL tells the story in about 1-1.5 min here (2 cores, most
    of it the 11 live runs); QUICK is for CI, in about half of that."""

    channels: int  # synthetic production's channels
    alpha: float  # per-channel message counts ~ discrete power law with this exponent
    event_share: float  # share of all traffic that the event channel carries alone
    sim_seconds: float  # simulated seconds per full-scale scenario
    history_events: int  # messages loaded into the service before the runs
    shards: int  # the live service's shards
    cost_ms: float  # CPU each read burns on a shard (hotshard serve --cost-ms)
    rate: float  # requests/s each live run offers
    drive_seconds: float  # length of each live run
    warmup_seconds: float  # a first, unmeasured run (pages, caches, connections)
    repeats: int = 3  # runs of each live configuration (the same requests): their spread


FULL = DemoSettings(channels=200_000, alpha=2.1, event_share=0.3, sim_seconds=600.0,
                    history_events=200_000, shards=4, cost_ms=5.0, rate=150.0,
                    drive_seconds=4.0, warmup_seconds=2.0)
# QUICK's live runs send as many requests as FULL's, at twice the rate and half the CPU a
# read burns: every shard's CPU share (rate x its share x cost) and the request counts behind
# it are the same, in half the time and half the CPU.
QUICK = DemoSettings(channels=50_000, alpha=2.1, event_share=0.3, sim_seconds=120.0,
                     history_events=40_000, shards=4, cost_ms=2.5, rate=300.0,
                     drive_seconds=2.0, warmup_seconds=0.5)
# The placement of the live service and of the full-scale model: Kafka's murmur2.
PARTITIONER = "kafka"
# The event channel is the one of everyday popularity rank 20: popular, not the top channel.
EVENT_RANK = 20
# The mitigations switched on for the hot channels (the sketch names them): a gateway page
# cache (1 s TTL) and coalescing of identical in-flight reads, the fixes for a read-hot
# channel; time-bucket splitting is for write-hot or huge channels (see the README's table).
MITIGATIONS = {"cache_ttl_s": 1.0, "coalesce": True, "channels": "hot"}
MITIGATIONS_OFF = {"cache_ttl_s": 0.0, "coalesce": False}


def live_latency_note(s: DemoSettings) -> str:
    """What the live runs' latencies can and cannot say, for these settings."""
    return (f"The live runs offer {s.rate:g} req/s to {s.shards} shards on one machine shared "
            "with the driver and the gateway, each configuration "
            f"{s.repeats} times on the very same requests (interleaved). Their CPU per shard "
            "is the evidence; a run's latency counts only when its shards' queues explain it "
            "(not when every shard is cool and the machine or the driver made the wait), and "
            "a p99 comparison is stated only when every run behind it does and the two ranges "
            "over the repeats are apart. Step 4's simulation shows what the same spread does "
            "to p99 at production's scale.")


@dataclass(frozen=True)
class LiveRuns:
    """Repeated live runs of one configuration (the same requests each time), as they ran."""

    label: str
    runs: tuple[Observations, ...]

    @property
    def bounds(self) -> tuple[RunBound, ...]:
        """What made each run's latency (``drive.bound.classify_run``)."""
        return tuple(recorded_bound(o) or classify_run(o) for o in self.runs)

    @property
    def p99s(self) -> tuple[float, ...]:
        return tuple(o.latency_ms.p99 if o.latency_ms and o.latency_ms.p99 is not None
                     else float("nan") for o in self.runs)

    @property
    def bound(self) -> RunBound:
        """The first run whose latency was not its shards', else the median run's verdict."""
        bounds = self.bounds
        return next((b for b in bounds if not b.shard_bound), bounds[self._median()])

    def _median(self) -> int:
        order = sorted(range(len(self.runs)), key=lambda i: self.p99s[i])
        return order[(len(order) - 1) // 2]

    @property
    def median_run(self) -> Observations:
        """The run of median p99: the one the report and the diagnosis read."""
        return self.runs[self._median()]

    def evidence(self, run: Observations | None = None) -> Observations:
        """``run`` (default the median one) recording every repeat's verdict and p99
        (``extra.repeats``) and the verdict of the set (``extra.latency_bound``), so a report
        drawn from it states no comparison the repeats do not carry."""
        from dataclasses import replace

        run = run if run is not None else self.median_run
        return replace(run, extra={**run.extra, "latency_bound": self.bound.to_dict(),
                                   "repeats": [b.to_dict() for b in self.bounds]})

    def with_runs(self, more: Iterable[Observations]) -> LiveRuns:
        return LiveRuns(self.label, (*self.runs, *more))

    def pairs(self) -> list[tuple[RunBound, float]]:
        return list(zip(self.bounds, self.p99s, strict=True))


@dataclass(frozen=True)
class Headline:
    """What the demo's runs support, solid first: CPU and requests, the queueing model
    calibrated from them, then the live p99 comparisons (each stated only when supported)."""

    lines: tuple[str, ...]
    test_vs_production: P99Comparison   # uniform keys against the profile's
    fix: P99Comparison                  # the profile's keys without and with mitigations
    model_p99_ms: dict[str, float]      # run label -> the queues' p99 (drive.bound.queue_p99)


@dataclass(frozen=True)
class DemoResult:
    report: Path
    evidence_dir: Path
    uniform: Observations
    skewed: Observations
    mitigated: Observations
    diagnosis: object  # hotshard.diagnose.Diagnosis
    seconds: float
    headline: Headline | None = None
    live: tuple[LiveRuns, ...] = ()


Say = Callable[[str], None]


# -- 1-2: a production-like trace, profiled -------------------------------------------------------
def _trace_counts(s: DemoSettings, rng: np.random.Generator) -> np.ndarray:
    """Messages per channel: a power law for everyday popularity, then one event channel given
    ``event_share`` of all traffic (the others thinned at random to the rest)."""
    from hotshard.profile.powerlaw import DiscretePowerLaw

    counts = DiscretePowerLaw(s.alpha, 1).rvs(s.channels, rng=rng)
    order = np.argsort(counts)[::-1]
    event = order[EVENT_RANK - 1]
    rest = counts.copy()
    rest[event] = 0
    kept = rng.binomial(rest, 1 - s.event_share)
    total = int(kept.sum() / (1 - s.event_share))
    kept[event] = total - int(kept.sum())
    return kept


def _write_trace(counts: np.ndarray, path: Path, rng: np.random.Generator) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    channels = rng.permutation(counts.size)  # channel ids 0..N-1, as uniform:N draws them
    events = rng.permutation(np.repeat(channels, counts))
    ops = np.where(rng.random(events.size) < 0.1, "write", "read")
    pq.write_table(pa.table({"channel_id": events, "op": ops}), path)
    return int(events.size)


# -- 5: the service, started and always stopped --------------------------------------------------
@dataclass(frozen=True)
class _Service:
    url: str
    admin_token: str  # the demo chooses it and passes it in HOTSHARD_ADMIN_TOKEN

    @property
    def admin_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.admin_token}"}


def _get(url: str, timeout: float = 5.0, headers: dict[str, str] | None = None) -> dict:
    request = urllib.request.Request(url, headers=headers or {})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def _post(url: str, body: dict, headers: dict[str, str] | None = None) -> dict:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json",
                                              **(headers or {})})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


@contextlib.contextmanager
def _service(work: Path, s: DemoSettings, history: Path) -> Iterator[_Service]:
    """The reference service in a child process (``service.launch``), loaded with the
    history; stopped (with its shard workers) on the way out, whatever happened."""
    from hotshard.service.launch import launched

    with launched(work / "data", shards=s.shards, partitioner=PARTITIONER, cost_ms=s.cost_ms,
                  load=history, log=work / "serve.log") as up:
        yield _Service(up.url, up.admin_token)


# -- 6, 8: open-loop runs ------------------------------------------------------------------------
def _drive(url: str, keys: str, s: DemoSettings, seconds: float, label: str,
           seed: int, say: Say) -> Observations:
    from hotshard.drive.breakdown import driver_warnings, to_observations
    from hotshard.drive.run import DriveConfig, drive

    config = DriveConfig(url=url, keys=keys, rate=s.rate, duration=seconds, seed=seed)
    result = drive(config)
    if result.interrupted:
        raise KeyboardInterrupt
    for warning in driver_warnings(result):
        say(f"  ({label}) driver: {warning}")
    observations = to_observations(result, label)
    if not observations.is_valid:  # a story told on failed requests would be a false one
        kinds = ", ".join(f"{k} {v:,}" for k, v in
                          (observations.errors or {}).get("by_kind", {}).items())
        raise HotshardError(f"the demo's {label!r} run failed: {observations.invalid_reason}"
                            + (f" ({kinds})" if kinds else "") + "; the demo stops rather "
                            "than tell its story on failed requests")
    return observations


def _interleaved(url: str, s: DemoSettings, plan: list[tuple[str, str, int, int, dict | None]],
                 service: _Service, say: Say) -> list[list[Observations]]:
    """Live runs of several configurations taking turns, so a change in the machine's load
    falls on all of them alike. ``plan``: (label, keys, seed, runs, mitigations to POST
    before each of its runs, or None)."""
    done: list[list[Observations]] = [[] for _ in plan]
    for turn in range(max(p[3] for p in plan)):
        for i, (label, keys, seed, runs, mitigations) in enumerate(plan):
            if turn >= runs:
                continue
            if mitigations is not None:
                _post(url + "/admin/mitigations", mitigations, service.admin_headers)
            done[i].append(_drive(url, keys, s, s.drive_seconds, label, seed, say))
    return done


def _range_ms(values: Iterable[float]) -> str:
    values = list(values)
    lo, hi = min(values), max(values)
    return f"{lo:.0f}ms" if f"{lo:.0f}" == f"{hi:.0f}" else f"{lo:.0f}-{hi:.0f}ms"


def _run_table(groups: list[LiveRuns], shown: list[Observations] | None = None,
               said: set[str] | None = None) -> str:
    """Per-shard CPU of each configuration's shown run (its median one by default), its
    p99 over the repeats and what made its latency (the reason once: ``said`` holds the
    reasons given already)."""
    shown = shown or [g.median_run for g in groups]
    n = max(len(o.shards) for o in shown)
    head = f"{'':34}" + "".join(f"{'shard ' + str(i):>9}" for i in range(n)) + \
        f"{'hot/median':>12}{'p99 (runs)':>16}  latency"
    rows = [head]
    for group, obs in zip(groups, shown, strict=True):
        cpu = [s.cpu or 0.0 for s in obs.shards]
        median = float(np.median(cpu)) if cpu else 0.0
        ratio = max(cpu) / median if median > 0 else float("nan")
        p99 = f"{_range_ms(group.p99s)} ({len(group.runs)})"
        bounds = group.bounds
        bad = sum(not b.shard_bound for b in bounds)
        verdict = (f"{group.bound.verdict} ({bad} of {len(bounds)})" if bad
                   else "shard-bound")
        rows.append(f"{group.label:34}" + "".join(f"{pct(c):>9}" for c in cpu)
                    + f"{ratio:>11.1f}x{p99:>16}  {verdict}")
    req = ["requests " + ", ".join(f"{s.requests or 0:,}" for s in o.shards) for o in shown]
    lines = rows + ["", "CPU of each shard process over the run of median p99 (from /stats); "
                        "requests per shard from X-Shard:"]
    lines += [f"  {g.label}: {r}" for g, r in zip(groups, req, strict=True)]
    said = said if said is not None else set()
    for group in groups:
        if not group.bound.shard_bound and group.bound.reason not in said:
            said.add(group.bound.reason)
            lines.append(f"  {group.label}: {group.bound.verdict}: {group.bound.reason}")
    return "\n".join(lines)


def _hottest_share(obs: Observations) -> tuple[str, float]:
    req = obs.shard_requests or ()
    if not req or sum(req) == 0:
        return "?", float("nan")
    i = int(np.argmax(req))
    return obs.shards[i].id, req[i] / sum(req)


# -- the story -----------------------------------------------------------------------------------
def run_demo(*, seed: int = 2026, quick: bool = False,
             report: str | os.PathLike[str] = "report.html", say: Say = print) -> DemoResult:
    """Tell the story; print each step through ``say`` as it finishes; return what it made.

    The report goes to ``report``; the evidence (profile, observations) beside it in
    ``<report stem>-files/``, so ``hotshard diagnose`` and ``hotshard report`` can be re-run
    on them.
    """
    from hotshard.report.html import check_report_path

    started = time.monotonic()
    s = QUICK if quick else FULL
    report_path = check_report_path(report)
    evidence = report_path.with_name(report_path.stem + "-files")
    rng = np.random.default_rng(seed)
    steps = 9

    def step(i: int, title: str) -> None:
        say("")
        say(f"[{i}/{steps}] {title}  ({time.monotonic() - started:.0f} s)")

    with tempfile.TemporaryDirectory(prefix="hotshard-demo-") as tmp:
        work = Path(tmp)
        profile, profile_path, prediction = _offline_acts(work, s, seed, rng, step, say)
        live = _live_acts(work, s, seed, profile, profile_path, prediction, step, say)
        return _report_act(work, live, profile, profile_path, prediction, report_path,
                           evidence, s, started, step, say)


@dataclass(frozen=True)
class _Live:
    """What the live acts measured: each arm's runs, the median run of each, the diagnosis."""

    uniform_runs: LiveRuns
    skewed_runs: LiveRuns
    mitigated_runs: LiveRuns
    uniform: Observations
    skewed: Observations
    mitigated: Observations
    diagnosis: object


def _offline_acts(work: Path, s: DemoSettings, seed: int, rng, step, say):
    """Acts 1-4, before any test: a production-like trace, its profile, the hot shard
    predicted, the incident simulated. Returns (profile, its file, the prediction)."""
    step(1, "A production-like trace")
    counts = _trace_counts(s, rng)
    trace = work / "chat_events.parquet"
    n_events = _write_trace(counts, trace, rng)
    ordered = np.sort(counts[counts > 0])[::-1]
    say(f"{ordered.size:,} chat channels with messages, {n_events:,} messages (per-channel "
        f"counts ~ power law alpha {s.alpha}; one channel hosts an event and carries "
        f"{pct(ordered[0] / n_events)} alone; the top 1% of channels carry "
        f"{pct(ordered[: max(1, ordered.size // 100)].sum() / n_events)}).")
    say(f"Uniform keys would give each channel {pct(1 / s.channels)}.")

    # 2
    step(2, "Profile it (counts per key only: no content, no user ids)")
    from hotshard.profile.count import count_profile
    from hotshard.profile.summary import summarize
    from hotshard.render import profile_summary

    profile = count_profile([str(trace)], key="channel_id", op="op", top_k=200)
    profile_path = work / "production.profile.json"
    profile.save(profile_path)
    say(profile_summary(summarize(profile), "chat_events.parquet (demo)"))

    # 3
    step(3, f"Predict the hot shard: {s.shards} shards placed by {PARTITIONER}, "
            "before any test")
    from hotshard.render import prediction_summary
    from hotshard.shards.partitioners import partitioner_for
    from hotshard.shards.predict import predict

    part = partitioner_for(PARTITIONER, s.shards, integer_keys=profile.integer_keys)
    prediction = predict(profile, part)
    say(prediction_summary(prediction))

    # 4
    step(4, "Simulate the incident at full scale (64 shards): uniform test vs production")
    say(_simulate_text(seed, s.sim_seconds))
    return profile, profile_path, prediction


def _live_acts(work: Path, s: DemoSettings, seed: int, profile, profile_path: Path,
               prediction, step, say) -> _Live:
    """Acts 5-8 against the reference service: load tests with uniform and profile keys,
    the diagnosis, the mitigations switched on at run time."""
    step(5, f"Start the reference service: hotshard serve --shards {s.shards} "
            f"--cost-ms {s.cost_ms:g}, loaded with {s.history_events:,} messages")
    history = work / "history.parquet"
    _write_history(profile, s.history_events, seed, history)
    with _service(work, s, history) as service:
        url = service.url
        say(f"serving on {url} (stopped at the end of the demo)")
        _drive(url, f"uniform:{s.channels}", s, s.warmup_seconds, "warm-up", seed + 1, say)

        # 6
        step(6, f"Load-test it open-loop at {s.rate:g} req/s for {s.drive_seconds:g} s: "
                f"uniform keys, then the profile's, taking turns {s.repeats} times")
        uniform_label, skewed_label = "load test (uniform keys)", \
            "production-like (profile keys)"
        runs = _interleaved(url, s, [
            (uniform_label, f"uniform:{s.channels}", seed + 2, s.repeats, None),
            (skewed_label, str(profile_path), seed + 3, s.repeats, None)], service, say)
        uniform_runs = LiveRuns(uniform_label, tuple(runs[0]))
        skewed_runs = LiveRuns(skewed_label, tuple(runs[1]))
        uniform, skewed = uniform_runs.median_run, skewed_runs.median_run
        said: set[str] = set()
        say(_run_table([uniform_runs, skewed_runs], said=said))
        hot_id, hot_share = _hottest_share(skewed)
        say(f"Shard {hot_id} served {pct(hot_share)} of the profile run's requests; "
            f"predict said shard {prediction.hottest} would carry "
            f"{pct(prediction.shares.max())}. Uniform keys put "
            f"{pct(_hottest_share(uniform)[1])} on the busiest shard: the test looks fine.")
        say(live_latency_note(s))

        # 7
        step(7, "Diagnose: which explanation fits?")
        from hotshard.diagnose.engine import diagnose
        from hotshard.diagnose.text import diagnosis_text

        diagnosis = diagnose(skewed_runs.evidence(), uniform_runs.evidence(),
                             profile=profile, partitioner=PARTITIONER)
        say(diagnosis_text(diagnosis))

        # 8
        step(8, "Switch on the mitigations at run time and replay the profile's traffic "
                "(switched off between runs, to compare turn by turn)")
        say("POST /admin/mitigations " + json.dumps(MITIGATIONS)
            + "  (hot channels: the service's own hot-key sketch names them); off: "
            + json.dumps(MITIGATIONS_OFF))
        mitigated_label = "profile keys, mitigated"
        runs = _interleaved(url, s, [
            (mitigated_label, str(profile_path), seed + 3, s.repeats, MITIGATIONS),
            (skewed_label, str(profile_path), seed + 3, s.repeats - 1, MITIGATIONS_OFF)],
            service, say)
        _post(url + "/admin/mitigations", MITIGATIONS, service.admin_headers)
        mitigated_runs = LiveRuns(mitigated_label, tuple(
            _with_mitigations(o, service) for o in runs[0]))
        skewed_runs = skewed_runs.with_runs(runs[1])
        mitigated = mitigated_runs.median_run
        say(_run_table([skewed_runs, mitigated_runs], [skewed, mitigated], said))
        hot = max(range(len(skewed.shards)), key=lambda i: skewed.shards[i].cpu or 0)
        now = max(range(len(mitigated.shards)), key=lambda i: mitigated.shards[i].cpu or 0)
        say(f"The hot shard {skewed.shards[hot].id} went from {pct(skewed.shards[hot].cpu)} "
            f"to {pct(mitigated.shards[hot].cpu)} CPU on the same requests; the busiest "
            f"shard is now {mitigated.shards[now].id} at {pct(mitigated.shards[now].cpu)}.")
    return _Live(uniform_runs, skewed_runs, mitigated_runs, uniform, skewed, mitigated,
                 diagnosis)


def _report_act(work: Path, live: _Live, profile, profile_path: Path, prediction,
                report_path: Path, evidence: Path, s: DemoSettings, started: float, step,
                say) -> DemoResult:
    """Act 9: the report and its evidence files, and the headline."""
    from hotshard.report.html import write_report

    uniform_runs, skewed_runs, mitigated_runs = (live.uniform_runs, live.skewed_runs,
                                                 live.mitigated_runs)
    diagnosis = live.diagnosis
    step(9, "Write the report")
    uniform = uniform_runs.evidence(live.uniform)
    skewed = skewed_runs.evidence(live.skewed)
    mitigated = mitigated_runs.evidence(live.mitigated)
    result = headline(uniform_runs, skewed_runs, mitigated_runs,
                      shown=(uniform, skewed, mitigated),
                      prediction_share=float(prediction.shares.max()))
    files = work / "evidence"
    files.mkdir()
    profile.save(files / profile_path.name)
    for name, obs in (("uniform", uniform), ("profile-keys", skewed),
                      ("mitigated", mitigated)):
        obs.save(files / f"{name}.json")
    write_report(report_path, [skewed, uniform, mitigated], profile=profile,
                 partitioner=PARTITIONER, diagnosis=diagnosis, notes=(live_latency_note(s),))
    if evidence.exists():  # the previous run's: replaced whole, never mixed
        shutil.rmtree(evidence)
    shutil.move(str(files), evidence)
    profile_path = evidence / profile_path.name
    took = time.monotonic() - started
    say(f"report: {report_path.resolve()}  (open it in a browser; no network needed)")
    say(f"evidence: {evidence}/ (hotshard diagnose {evidence}/profile-keys.json "
        f"--baseline {evidence}/uniform.json --profile {profile_path})")
    say("")
    say("Headline (what these runs support, most solid first):")
    for line in result.lines:
        say(f"  - {line}")
    say(f"done in {took:.0f} s")
    return DemoResult(report_path, evidence, uniform, skewed, mitigated, diagnosis, took,
                      result, (uniform_runs, skewed_runs, mitigated_runs))




def _busiest(obs: Observations) -> tuple[str, float, float]:
    """(id, CPU, CPU / median shard's) of the run's busiest shard by CPU."""
    cpu = [(s.cpu or 0.0, s.id) for s in obs.shards]
    top, sid = max(cpu)
    median = float(np.median([c for c, _ in cpu]))
    return sid, top, top / median if median > 0 else float("nan")


def headline(uniform: LiveRuns, skewed: LiveRuns, mitigated: LiveRuns, *,
             shown: tuple[Observations, Observations, Observations] | None = None,
             prediction_share: float | None = None) -> Headline:
    """The demo's headline from its live runs: per-shard CPU and requests (solid: the same
    requests each repeat, CPU the shards' own), the queueing model calibrated from each run's
    CPU per request (``drive.bound.queue_p99``: no latency goes into it), then each live p99
    comparison, stated only when ``drive.bound.compare_p99`` supports it. ``shown``: the runs
    whose CPU is quoted (default each set's run of median p99)."""
    lines = []
    u, k, m = shown or (uniform.median_run, skewed.median_run, mitigated.median_run)
    sid, hot_share = _hottest_share(k)  # the shard the profile's keys load most
    kcpu = next((s.cpu or 0.0 for s in k.shards if s.id == sid), 0.0)
    kmedian = float(np.median([s.cpu or 0.0 for s in k.shards]))
    _, ucpu, uratio = _busiest(u)
    predicted = f" (predict said {pct(prediction_share)})" if prediction_share else ""
    # a busiest shard within CPU noise of the median (diagnose's bar: 1.5x) shows no hot shard
    hidden = ": the uniform test cannot show it" if uratio < 1.5 else ""
    lines.append(f"Hot shard: the profile's keys put {pct(hot_share)} of the requests on shard "
                 f"{sid}{predicted}, and its CPU is {pct(kcpu)}"
                 + (f", {times(kcpu / kmedian)} the median shard's" if kmedian > 0 else "")
                 + f"; uniform keys' busiest shard is at {pct(ucpu)} ({times(uratio)} the "
                 f"median){hidden}.")
    after = next((s.cpu for s in m.shards if s.id == sid), None)
    mid, mcpu, mratio = _busiest(m)
    if after is not None:
        lines.append(f"Fix: with the cache and coalescing on, shard {sid} went from {pct(kcpu)} "
                     f"to {pct(after)} CPU on the same requests; the busiest shard is now "
                     f"{mid} at {pct(mcpu)} ({times(mratio)} the median).")
    model = {}  # the model's p99 of each set: the median over its runs
    for group in (skewed, mitigated):
        values = [v for v in (queue_p99(o) for o in group.runs) if v is not None]
        if values:
            model[group.label] = statistics.median(values)
    rate = k.achieved_rps or k.rate_rps
    if skewed.label in model and mitigated.label in model and rate:
        before, now = model[skewed.label], model[mitigated.label]
        change = f"{times(before / now)} lower" if before >= now else \
            f"{times(now / before)} higher"
        words = (f"Model (the shards' queues alone: each shard an M/M/1 queue with its run's "
                 f"CPU per request): p99 {ms(before)} with the profile's keys and {ms(now)} "
                 f"mitigated ({change}) at {rps(rate)}")
        if kcpu > 0:  # CPU in proportion to the rate: where the hot shard runs out
            saturate = rate / kcpu
            ucpu_rate = ucpu / (u.achieved_rps or u.rate_rps or rate)
            words += (f"; shard {sid} would saturate at about {rps(saturate)}, where uniform "
                      f"keys' busiest shard would be at {pct(ucpu_rate * saturate)}")
        lines.append(words + ".")
    test = compare_p99(uniform.pairs(), skewed.pairs())
    fix = compare_p99(skewed.pairs(), mitigated.pairs())
    for name, claim in (("uniform against profile keys", test),
                        ("profile keys without and with the mitigations", fix)):
        text = claim.reason
        if claim.supported and name.startswith("profile") and \
                skewed.label in model and mitigated.label in model:
            agrees = (claim.direction == "lower") == (model[skewed.label] >= model[
                mitigated.label])
            text += ", as the model says" if agrees else ", against the model's direction"
        lines.append(f"Live p99, {name}: {text.removeprefix('live p99 ')}.")
    return Headline(tuple(lines), test, fix, model)


def _write_history(profile, events: int, seed: int, path: Path) -> None:
    from hotshard.workload.generate import plan_workload
    from hotshard.workload.messages import write_events

    plan = plan_workload(profile=profile, dist=None, events=events, seed=seed)
    write_events(plan, str(path), fmt="parquet")


def _with_mitigations(obs: Observations, service: _Service) -> Observations:
    """The run's observations with the service's mitigations recorded (the report compares
    runs by them)."""
    from dataclasses import replace

    current = _get(service.url + "/admin/mitigations", headers=service.admin_headers)
    return replace(obs, extra={**obs.extra, "mitigations": current})


def _simulate_text(seed: int, seconds: float) -> str:
    """The incident's load test against its production, simulated (hotshard simulate)."""
    from hotshard.sim.scenarios import SCENARIOS, run_scenario

    rows = [f"{'':24}{'rate':>7}{'hottest CPU':>13}{'median CPU':>12}{'p50':>9}{'p99':>10}"]
    for name in ("incident-test", "incident-production", "incident-mitigated"):
        obs = run_scenario(name, duration=seconds, seed=seed).to_observations()
        cpu = sorted(s.cpu for s in obs.shards)
        lat = obs.latency_ms
        rows.append(f"{name:24}{obs.rate_rps:>7,.0f}{pct(cpu[-1]):>13}{pct(cpu[len(cpu) // 2]):>12}"
                    f"{lat.p50:>7.1f}ms{lat.p99:>8.0f}ms")
    rows += ["", f"({seconds / 60:g} simulated minutes each; `hotshard simulate --scenario NAME` "
                 "for the full hour)"]
    for name in ("incident-test", "incident-production", "incident-mitigated"):
        rows.append(f"  {name}: {SCENARIOS[name].summary}")
    return "\n".join(rows)

