"""`hotshard drive`: open-loop load with honest latency, per-shard breakdown, observations."""

from __future__ import annotations

import contextlib

import click

from hotshard.cli._options import (
    PARTITIONER_CHOICE,
    HotEventSpec,
    Seconds,
    dist_option,
    quiet_option,
    read_share_option,
    rps_option,
)


@click.command()
@click.argument("url")
@click.argument("profile_path", required=False, metavar="[PROFILE]")
@dist_option("instead of a PROFILE (hotshard profile output)")
@rps_option("Target requests per second (open loop) [required unless --closed].")
@click.option("--duration", type=Seconds(), default=10.0, show_default=True,
              help="Length of the run (90s, 15m, 1h); includes --ramp.")
@click.option("--arrivals", type=click.Choice(["poisson", "constant", "profile"]),
              default="poisson", show_default=True,
              help="Arrival process: independent users, evenly spaced, or profile: "
                   "production's per-minute rate shape and burstiness from the "
                   "profile's arrivals section in real time (the run's minute m is the "
                   "profile's minute m) at mean --rps.")
@click.option("--order", type=click.Choice(["auto", "locality", "irm"]), default="auto",
              show_default=True,
              help="A profile's keys in production's order (locality: each key's reuse as "
                   "its popularity class was reused, head keys hot when they were hot; what "
                   "a cache sees), or independent draws (irm); auto: locality when the "
                   "profile has a locality section.")
@click.option("--ramp", type=Seconds(), default=None,
              help="Grow the rate linearly from 0 over this long first.")
@click.option("--event", "hot_events", multiple=True, type=HotEventSpec(),
              help="A big event mid-run: SHARE of all requests go to KEY between START and "
                   "END (e.g. 4711:0.5:20s:60s), times from the start of the run (the run "
                   "must reach START; open loop only). Against `hotshard serve`, its "
                   "mitigation actions are copied into the observations (actions). "
                   "Repeatable.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of arrival times, keys and operations (same seed, same requests, "
                   "whatever --workers).")
@read_share_option("Share of reads [default: per key from a profile's operations, else 0.9].")
@click.option("--read", "read_template", metavar="TEMPLATE",
              help="A read, {key} replaced by the key [default: GET "
                   "/channels/{key}/messages?limit=50; on Redis: XREVRANGE chat:{{key}} + - "
                   "COUNT 50].")
@click.option("--write", "write_template", metavar="TEMPLATE",
              help="A write [default: POST /channels/{key}/messages with a JSON {user, body} "
                   "of the profile's payload size; on Redis: XADD chat:{{key}} MAXLEN ~ 1000 * "
                   "user u body {body}].")
@click.option("--max-inflight", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="Arrivals beyond this many outstanding requests are dropped and counted.")
@click.option("--workers", "processes", type=click.IntRange(1, 64), default=1,
              show_default=True, metavar="K",
              help="Driver processes; each takes every K-th arrival.")
@click.option("--closed", "closed_users", type=click.IntRange(min=1), metavar="USERS",
              help="Closed loop instead: USERS virtual users, each waiting for its answer "
                   "(the classic model; under-reports stalls, for comparison).")
@click.option("--partitioner", "-p", type=PARTITIONER_CHOICE,
              help="Per-shard breakdown by this partitioner when the target sends no X-Shard.")
@click.option("--shards", "-n", type=click.IntRange(min=1), help="Shards, with --partitioner.")
@click.option("--timeout", type=Seconds(), default=30.0, show_default=True,
              help="A request slower than this counts as a timeout error.")
@click.option("--max-error-rate", type=click.FloatRange(0, 100), default=1.0,
              show_default=True, metavar="PCT",
              help="Percent of requests that may fail (errors, drops at --max-inflight, "
                   "unfinished) before the run is invalid: a warning first, valid: false in "
                   "the observations, exit status 3.")
@click.option("--label", default="load test", show_default=True,
              help="The observations' label (what was observed).")
@click.option("-o", "--output", metavar="OBS.json",
              help="Write hotshard.observations/1 JSON here.")
@click.option("--hlog", metavar="FILE",
              help="Write the HdrHistogram interval log (latency from intended time).")
@click.option("--json", "as_json", is_flag=True, help="Print the observations JSON.")
@quiet_option("No live progress.")
def drive(url, profile_path, dist, rps, duration, arrivals, order, ramp, hot_events, seed,
          read_share,
          read_template, write_template, max_inflight, processes, closed_users, partitioner,
          shards, timeout, max_error_rate, label, output, hlog, as_json, quiet):
    """Drive load at URL (http://, https://, or redis-cluster://HOST:PORT) on an absolute
    schedule, measuring latency honestly.

    Open loop (default): each request is sent at its scheduled time whether or not earlier
    ones returned; latency is measured from that scheduled time (so a stall counts for every
    request scheduled during it: no coordinated omission), service time from the actual send,
    and dispatch lag (how late the driver sent) is reported, with a warning when the driver
    itself was the bottleneck. Per shard: from the X-Shard header, or --partitioner; CPU per
    shard from /stats when the target is `hotshard serve`.

    Failures are counted apart, by kind (connection refused, timeout, http 503, redis
    CLUSTERDOWN...), with their own timing and in their shard's row; latency percentiles are
    of successes. A run where more than --max-error-rate percent of the requests failed is
    invalid: the summary's first line says so, the observations carry valid: false (diagnose
    and report leave its latency out) and the exit status is 3.

    \b
    Exit status: 0 a valid run; 2 bad input or an unreachable target (nothing was run);
    3 the run finished but too many requests failed; 130 the run was stopped early
    (Ctrl-C or SIGTERM: what it measured is written, marked interrupted).

    \b
    Examples:
      hotshard drive http://127.0.0.1:8080 examples/incident.profile.json \\
          --rps 200 --duration 30s -o prod-like.json
      hotshard drive http://127.0.0.1:8080 --dist uniform:300000 --rps 200 -o uniform.json
      hotshard drive http://127.0.0.1:8080 --dist uniform:1000 --closed 10 --duration 30s
      hotshard drive redis-cluster://127.0.0.1:7000 profile.json --rps 2000
      hotshard drive http://host:9000 --dist zipf:0.99:1e6 --rps 5000 --workers 2 \\
          --read 'GET /kv/{key}' --write 'PUT /kv/{key}' -p cassandra -n 12
    """
    import importlib.util
    import json

    from hotshard.cli._console import note, warn, write_json
    from hotshard.errors import HotshardError

    if importlib.util.find_spec("hdrh") is None:
        raise HotshardError("hotshard drive needs hdrhistogram: pip install 'hotshard[drive]' "
                            "(make demo installs it)")
    if bool(profile_path) == bool(dist):
        raise click.UsageError("give the keys: a PROFILE or --dist SPEC"
                               + (", not both" if dist else ""))
    _one_kind_of_key_source(profile_path, dist)
    if closed_users is None and rps is None:
        raise click.UsageError("give --rps R (open loop) or --closed USERS")
    if closed_users is not None and (rps is not None or ramp):
        raise click.UsageError("--closed runs USERS clients as fast as they get answers: "
                               "give no --rps or --ramp with it")
    if partitioner is not None and shards is None:
        raise click.UsageError("--partitioner needs --shards N")
    if shards is not None and partitioner is None:
        raise click.UsageError("--shards needs --partitioner P")
    from hotshard._atomic import check_writable

    for path in (output, hlog):
        if path:
            check_writable(path)
    from hotshard.drive.breakdown import (
        driver_warnings,
        invalid_warning,
        summary,
        to_observations,
    )
    from hotshard.drive.run import EXIT_INTERRUPTED, EXIT_INVALID_RUN, DriveConfig
    from hotshard.drive.run import drive as run_drive

    config = DriveConfig(url=url, keys=profile_path or dist, rate=rps or 1.0,
                         duration=duration, arrivals=arrivals, ramp=ramp or 0.0, seed=seed,
                         read_ratio=read_share, read=read_template, write=write_template,
                         max_inflight=max_inflight, processes=processes,
                         closed_users=closed_users, timeout=timeout,
                         partitioner=(partitioner, shards) if partitioner else None,
                         max_error_rate=max_error_rate / 100.0, order=order,
                         events=tuple(hot_events))
    live = _Live(enabled=not quiet and not as_json)
    with live:
        result = run_drive(config, progress=live.update if live.enabled or live.plain
                           else None)
    if result.interrupted and result.sent == 0 and result.recorder.completed == 0:
        # stopped before the first request: there is no run to write or judge
        note("interrupted before the first request: nothing was measured, nothing written")
        raise click.exceptions.Exit(EXIT_INTERRUPTED)
    observations = to_observations(result, label)
    # the files first: a reader that goes away (| head) must not cost the evidence
    if output:
        write_json(output, observations.to_dict())
    if hlog:
        result.recorder.write_hlog(hlog, result.start_epoch)
    status = (EXIT_INVALID_RUN if not observations.is_valid else
              EXIT_INTERRUPTED if result.interrupted else 0)
    try:
        if as_json:
            click.echo(json.dumps(observations.to_dict(), indent=2))
        else:
            for line in summary(result, observations):
                click.echo(line)
    except BrokenPipeError:  # the reader left: the run's verdict still decides the status
        _quiet_stdout()
        raise click.exceptions.Exit(status) from None
    if result.interrupted:
        note("interrupted: the results cover the run until it was stopped "
             f"(exit status {EXIT_INTERRUPTED})")
    for message in driver_warnings(result):
        warn(message)
    if output:
        note(f"wrote {output}" + ("" if observations.is_valid else " (marked valid: false)"))
    if hlog:
        note(f"wrote {hlog} (HdrHistogram interval log)")
    if not observations.is_valid and as_json:
        # the summary's first line was not printed: say it where a person looks
        warn(invalid_warning(observations.errors or {}).removeprefix("WARNING: "))
    if status:
        raise click.exceptions.Exit(status)


def _one_kind_of_key_source(profile_path: str | None, dist: str | None) -> None:
    """A PROFILE is a file and --dist a distribution: the library's one ``keys`` string
    would take either, so the CLI keeps each to its kind."""
    import os

    if profile_path and not os.path.exists(profile_path) and ":" in profile_path:
        raise click.UsageError(f"{profile_path} is not a file: a distribution goes in --dist "
                               f"(--dist {profile_path})")
    if dist and os.path.exists(dist):
        raise click.UsageError(f"--dist takes a distribution such as uniform:1e6; {dist} is a "
                               "file: give a profile as the PROFILE argument")


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so closing the broken pipe at exit raises nothing more."""
    import os
    import sys

    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


class _Live:
    """Rate, in-flight, p99 so far and errors on stderr: twice a second on a terminal; as a
    plain line every ``PLAIN_EVERY_S`` elsewhere (a CI log, ``| tee``), so a minute's run is
    not a minute of silence."""

    def __init__(self, enabled: bool, *, tty: bool | None = None, clock=None) -> None:
        import sys
        import time

        from hotshard.cli._console import PLAIN_EVERY_S

        tty = sys.stderr.isatty() if tty is None else tty
        self.enabled = enabled and tty
        self.plain = enabled and not tty
        self._clock = clock or time.monotonic
        self._every = PLAIN_EVERY_S
        self._last = self._clock()
        self._live = None

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.live import Live

            self._live = Live("", console=Console(stderr=True), transient=True,
                              refresh_per_second=4)
            self._live.__enter__()
        return self

    def __exit__(self, *exc):
        if self._live is not None:
            self._live.__exit__(*exc)

    def update(self, state: dict) -> None:
        if self.plain:
            now = self._clock()
            if now - self._last >= self._every:
                self._last = now
                click.echo(f"hotshard: progress: {self.line(state)}", err=True)
            return
        if self._live is None:
            return
        self._live.update(self.line(state))

    @staticmethod
    def line(state: dict) -> str:
        """The run so far in one line."""
        rec = state.get("recorder")
        t = max(state["t"], 1e-9)
        if rec is None:
            return f"running {t:.0f} s (several processes: totals at the end)"
        from hotshard.drive.record import value_at_percentile

        p99 = value_at_percentile(rec.latency, 99) / 1000 if rec.latency.get_total_count() \
            else 0.0
        errors = sum(rec.errors.values())
        return (f"{t:6.1f} s  sent {state['sent']:,} ({state['sent'] / t:,.0f}/s)"
                f"  in flight {state['inflight']:,}  p99 so far {p99:,.1f} ms"
                f"  errors {errors:,}  dropped {rec.dropped:,}")
