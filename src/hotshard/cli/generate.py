"""`hotshard generate`: synthetic chat messages from a profile or a classic distribution."""

from __future__ import annotations

import click

from hotshard.cli._console import RowsBar, note, warn
from hotshard.cli._modes import ModeArgument, ModeGroup
from hotshard.cli._options import (
    PARTITIONER_CHOICE,
    Count,
    HotEventSpec,
    Seconds,
    dist_option,
    quiet_option,
    rps_option,
)
from hotshard.profile import KEY_SCALINGS
from hotshard.workload import DEFAULT_RATE, DEFAULT_USERS, FORMATS, TAIL_MODES

_KEYS_HELP = ("Scale the profile to this many distinct keys. Head keys keep their IDs and "
              "shares (the hot channels stay hot) and the tail keeps its share of messages, "
              "spread over more, rarer keys (see --key-scaling).")
_KEY_SCALING_HELP = ("How --keys grows the tail: dilute [default] keeps every share (above); "
                     "extend adds keys as popular as the old tail keys, so the tail's share "
                     "grows and the head's shrinks.")


@click.group(cls=ModeGroup)
@click.argument("profile_path", required=False, metavar="[PROFILE]", cls=ModeArgument)
@dist_option("instead of a PROFILE")
@click.option("--messages", type=Count(), help="Messages to generate (e.g. 2e9).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed: same seed, same bytes, whatever --workers.")
@click.option("-o", "--output", metavar="OUT", help="Output file, or - for stdout.")
@click.option("--format", "fmt", type=click.Choice(FORMATS),
              help="Output format [default: from OUT's extension (.parquet, .csv, .jsonl; "
                   ".json is JSON lines too); csv for -, standard output]. k6 and csv-feeder "
                   "hold only the keys, the same keys in the same order as the other formats, "
                   "for other load tools: k6 is one JSON array of key strings, what k6's "
                   "SharedArray loads (strings even for integer keys: JavaScript numbers lose "
                   "IDs above 2^53); csv-feeder is a channel_id header and one key per line, "
                   "quoted only when RFC 4180 needs it (JMeter's CSV Data Set Config, "
                   "Gatling's csv feeder). Write them as .json and .csv.")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Threads generating chunks ahead of the writer (GIL-free kernels).")
@click.option("--keys", type=Count(), help=_KEYS_HELP)
@click.option("--key-scaling", type=click.Choice(KEY_SCALINGS), help=_KEY_SCALING_HELP)
@rps_option(f"Mean messages per second [default: the profile's, else {DEFAULT_RATE:g}].")
@click.option("--duration", type=Seconds(), help="Run length (90s, 15m, 2h); with --rps it "
              "sets --messages.")
@click.option("--tail", type=click.Choice(TAIL_MODES),
              help="Tail model: the fitted law or the exact histogram [default: power_law].")
@click.option("--order", type=click.Choice(["auto", "locality", "irm"]), default="auto",
              show_default=True,
              help="Key order: locality follows the profile's measured reuse per popularity "
                   "class (production's cache hit rates); irm draws every key independently; "
                   "auto: locality when the profile has it.")
@click.option("--arrivals", "arrival_process", type=click.Choice(["auto", "profile", "poisson"]),
              default="auto", show_default=True,
              help="Timestamps: profile follows the profile's measured rate per minute and "
                   "its burstiness below it (its arrivals section, from profile --time); "
                   "poisson is a constant (or --diurnal) rate; auto: profile when it has "
                   "them and no --diurnal is given.")
@click.option("--event", "hot_events", multiple=True, type=HotEventSpec(),
              help="A big event: SHARE of all traffic goes to KEY between START and END "
                   "(e.g. 4711:0.4:10m:40m), times from the start of the run, which must "
                   "reach START. Repeatable.")
@click.option("--diurnal", type=click.FloatRange(0, 1, max_open=True), default=0.0,
              show_default=True, help="Amplitude of a daily rate curve (0 = constant rate).")
@click.option("--start", type=click.DateTime(), help="Time of the first message (UTC) "
              "[default: 2026-01-01].")
@click.option("--users", type=Count(), default=DEFAULT_USERS, show_default=True,
              help="Distinct synthetic user IDs.")
@click.option("--partitioner", "follow_name", type=PARTITIONER_CHOICE,
              help="Name synthetic tail keys so each shard gets the tail share the profile "
                   "recorded for this store (profile made with --partitioner).")
@click.option("--shards", "follow_shards", type=click.IntRange(min=1),
              help="Shard count for --partitioner.")
@quiet_option("No progress bar.")
def generate(profile_path, dist, messages, seed, output, fmt, workers, keys, key_scaling,
             rps, duration, tail, order, arrival_process, hot_events, diurnal, start, users,
             follow_name, follow_shards, quiet):
    """Generate synthetic chat messages from a profile (or a classic distribution).

    Head keys keep their real IDs and exact weights; tail keys get synthetic IDs drawn from
    the profile's tail. Columns: timestamp, channel_id, message_id (time-ordered), user_id,
    size, op. Output is streamed in chunks (constant memory at any --messages) and seeded by
    chunk index, so it is byte-identical for any --workers. The size of the output is
    estimated first, and a run the disk cannot hold is refused. --format k6 and csv-feeder
    write only the keys of the same rows, in the same order, for a load tool that keeps its
    own pace (examples/k6/script.js, examples/feeder_locustfile.py).

    \b
    Examples:
      hotshard generate profile.json --messages 1e7 --seed 1 -o events.parquet
      hotshard generate profile.json --keys 1e9 --rps 3000 --duration 1h -o big.parquet
      hotshard generate --dist zipf:0.99:1e6 --messages 1e6 -o zipf.parquet
      hotshard generate profile.json --messages 1e7 --event 4711:0.4:10m:40m -o event.parquet
      hotshard generate profile.json --messages 1e6 --seed 1 --format k6 -o keys.json
      hotshard generate profile.json --messages 1e6 --seed 1 --format csv-feeder -o keys.csv
      hotshard generate verify profile.json events.parquet
    """
    from hotshard.profile.document import Profile

    args = (profile_path,) if profile_path else ()
    if bool(args) == bool(dist):
        raise click.UsageError("give a PROFILE or --dist SPEC" + (", not both" if dist else ""))
    if not output:
        raise click.UsageError("say where to write: -o OUT (or -o - for stdout)")
    if follow_name and not args:
        raise click.UsageError("--partitioner follows a PROFILE's recorded placement: give one")
    if follow_name and not follow_shards:
        raise click.UsageError(f"--partitioner {follow_name} needs --shards N (the placement "
                               "the profile recorded)")
    from datetime import UTC

    from hotshard._atomic import check_writable
    from hotshard.workload.generate import plan_workload
    from hotshard.workload.messages import (
        check_disk_space,
        format_for_path,
        format_note,
        write_events,
    )

    if output != "-":
        check_writable(output)
    out_fmt = format_for_path(output, fmt)
    if (remark := format_note(output, fmt)) is not None:
        note(remark)
    prof = Profile.load(args[0]) if args else None
    follow = None
    if follow_name:
        from hotshard.shards.partitioners import partitioner_from_placement

        follow = partitioner_from_placement(prof.placement, follow_name, follow_shards)
    plan = plan_workload(
        profile=prof, dist=dist, events=messages, seed=seed,
        rate=rps, duration=duration, keys=keys, key_scaling=key_scaling or "dilute",
        tail=tail or "power_law",
        hot_events=tuple(hot_events), diurnal=diurnal,
        start=start.replace(tzinfo=UTC) if start else None, n_users=users, follow=follow,
        order=order if prof is not None or order != "auto" else "auto",
        arrival_process=arrival_process)
    for message in plan.notes:
        warn(message)
    if output != "-":
        check_disk_space(plan, output, out_fmt)
    with RowsBar(not quiet and output != "-", plan.events) as bar:
        written = write_events(plan, output, fmt=out_fmt, workers=workers, progress=bar)
    if output != "-":
        click.echo(f"wrote {output}: {written:,} messages ({out_fmt}, seed {seed})", err=True)


@generate.command("verify")
@click.argument("profile_path", metavar="PROFILE")
@click.argument("file", metavar="FILE")
@click.option("--keys", type=Count(), help="The --keys FILE was generated with [default: what a "
              "Parquet FILE records, else the profile's own].")
@click.option("--key-scaling", type=click.Choice(KEY_SCALINGS),
              help="The --key-scaling FILE was generated with [default: what a Parquet FILE "
                   "records, else dilute].")
@click.option("--tail", type=click.Choice(TAIL_MODES),
              help="The tail model FILE was generated with [default: what a Parquet FILE "
                   "records, else power_law].")
@quiet_option("No progress bar.")
def verify(profile_path, file, keys, key_scaling, tail, quiet):
    """Check a generated FILE against the PROFILE it came from: head keys' shares within
    their sampling bands, the tail by a KS test; exit 1 when it fails.

    A Parquet FILE records the --keys, --key-scaling and --tail it was made with and its
    event windows (rows inside them are left out: the traffic there is the event's); for
    CSV, csv-feeder, a k6 array or JSON lines give --keys/--key-scaling/--tail (a file made
    with --event verifies only as Parquet, which records the windows).

    \b
    Examples:
      hotshard generate verify profile.json events.parquet
      hotshard generate verify profile.json big.csv --keys 1e9
    """
    from hotshard.cli._console import ProgressBar
    from hotshard.profile.document import Profile
    from hotshard.render import verify_summary
    from hotshard.workload.generate import verify_generated

    with ProgressBar(not quiet) as bar:
        report = verify_generated(Profile.load(profile_path), file, keys=keys,
                                  key_scaling=key_scaling, tail=tail, progress=bar.callback)
    if report.windows_left_out:
        note(f"left out the rows inside the file's {report.windows_left_out} event "
             "window(s): the traffic there is the event's by design")
    click.echo(verify_summary(report, file))
    if not report.passed:
        raise click.exceptions.Exit(1)
