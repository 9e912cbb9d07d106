"""`hotshard check`: would this load test hide a hot key or a hot shard? (a CI gate)."""

from __future__ import annotations

import json

import click

from hotshard.cli._options import KEY_TYPE_RULE, PARTITIONER_CHOICE, partitioner_options
from hotshard.errors import HotshardError


class ThresholdSpec(click.ParamType):
    """NAME=VALUE for --threshold, checked against the known names when the check runs."""

    name = "NAME=VALUE"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        name, sep, number = str(value).partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            return name.strip(), float(number)
        except ValueError:
            self.fail(f"{value!r} is not NAME=VALUE with a number, e.g. head_fail=0.4",
                      param, ctx)


@click.command(epilog=KEY_TYPE_RULE)
@click.argument("test_inputs", nargs=-1, required=True, metavar="TEST...")
@click.option("--against", "production_path", required=True, metavar="PROD_PROFILE",
              help="Production's profile (hotshard profile).")
@click.option("--key", metavar="COL",
              help="Column of the test's keys [default: the one production was profiled by, "
                   "else channel_id (hotshard generate's), else a one-column file's].")
@click.option("--time", "time_col", metavar="COL",
              help="Column of the test's event times, to compare its burstiness with "
                   "production's arrivals [default: timestamp (hotshard generate's) when "
                   "production's profile has arrivals and the test has that column].")
@click.option("--partitioner", "-p", type=PARTITIONER_CHOICE,
              help="Add the hot-shard check: both placed by this store's partitioner.")
@click.option("--shards", "-n", type=click.IntRange(min=1), help="Shards for --partitioner.")
@partitioner_options
@click.option("--cache-size", type=click.IntRange(min=1), metavar="C",
              help="Add LRU hit rates at C entries for both: each one's measured LRU "
                   "curve in its own order when both profiles have one, else Che's "
                   "approximation.")
@click.option("--threshold", "thresholds", type=ThresholdSpec(), multiple=True,
              help="Override a threshold, e.g. head_fail=0.4 (repeatable); names and reasons "
                   "in the README.")
@click.option("--allow-disjoint", is_flag=True,
              help="Compare even when the test carries none of production's head keys.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def check(test_inputs, production_path, key, time_col, partitioner, shards, key_type,
          thresholds, allow_disjoint, as_json, cache_size, **layout):
    """Check a load test's keys against production's profile, before the test runs.

    TEST is the test's key stream (any input hotshard profile reads: Parquet, CSV, JSON
    lines, globs; profiled the same way) or a profile of it. Each check gets a verdict with
    its numbers: head coverage (production's hot keys at their share), top-1% and top-10
    shares, tail exponent, working set (and LRU hit rates with --cache-size), with
    --partitioner the hottest shard against production's, and when production's profile has
    arrivals (profile --time) the test's burstiness (index of dispersion from 1 s to 60 s;
    a test smoother than production understates its p99). With --partitioner and a
    production profile that has timelines (profile --time), the peak-window check: a hot shard
    is hot in a window, so production's peak window (the window and shard with the largest
    share of that window's requests: an event) is set against the test's same window (by its
    place in the test's own span; the test's time column, --time, default `timestamp`): a test
    right on average that never has the event fails, naming the window it misses. Exit status
    1 when the test would hide a hot key, a hot shard, production's peak window or its bursts
    (a check fails), 0 otherwise (warnings included), 2 on bad input. When production has no
    semantic hot spot, uniform test keys pass, with the reason.

    \b
    Examples:
      hotshard check test-keys.parquet --against prod.profile.json -p kafka -n 64
      hotshard check 'load/*.csv' --key channel_id --against prod.profile.json --json
      hotshard check test.profile.json --against prod.profile.json --cache-size 100000
      hotshard check replay.parquet --key lbn --time time --against prod.profile.json
    """
    try:
        _run(test_inputs, production_path, key, time_col, partitioner, shards, key_type, thresholds,
             allow_disjoint, as_json, cache_size, layout)
    except (HotshardError, click.UsageError) as exc:
        if as_json:  # a pipeline reading stdout gets an answer too (exit status 2 as ever)
            message = exc.format_message() if isinstance(exc, click.UsageError) else str(exc)
            click.echo(json.dumps({"verdict": "error", "exit_status": 2, "error": message}))
        raise


def _run(test_inputs, production_path, key, time_col, partitioner, shards, key_type, thresholds,
         allow_disjoint, as_json, cache_size, layout):
    from hotshard.compare.check import check as run_check
    from hotshard.compare.check import profile_test
    from hotshard.compare.verdicts import Thresholds
    from hotshard.profile.document import Profile

    production = Profile.load(production_path)
    limits = Thresholds().updated(dict(thresholds))
    part = None
    if partitioner is not None:
        from hotshard.cli._options import need_shard_count
        from hotshard.shards.partitioners import partitioner_for

        need_shard_count(partitioner, shards, layout)
        part = partitioner_for(partitioner, shards, key_type=key_type,
                               integer_keys=production.integer_keys, **layout)
    elif shards is not None:
        raise click.UsageError("--shards goes with --partitioner")
    from hotshard.cli._console import ProgressBar

    with ProgressBar(True) as bar:   # 1e7 events take seconds: say how far it is
        test, counts = profile_test(test_inputs, production=production, key=key,
                                    partitioner=part, time_col=time_col, progress=bar.callback)
    report = run_check(test, production, partitioner=part, cache_size=cache_size,
                       thresholds=limits, test_counts=counts, allow_disjoint=allow_disjoint)
    if as_json:
        click.echo(json.dumps({**report.to_dict(), "thresholds": limits.to_dict()}))
    else:
        from hotshard.render import check_summary

        click.echo(check_summary(report))
    raise click.exceptions.Exit(report.exit_status)
