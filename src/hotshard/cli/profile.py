"""`hotshard profile` and `hotshard inspect`: count production keys; summarise a profile."""

from __future__ import annotations

import json

import click

from hotshard._format import pct
from hotshard.cli._console import ProgressBar
from hotshard.cli._options import KEY_TYPE_CHOICE, KEY_TYPE_RULE, PARTITIONER_CHOICE


def _warn_if_shared(path: str) -> None:
    """A secret file that its group or others may read is no secret: whoever reads it can
    recompute every pseudonym from a list of candidate keys."""
    import os
    import stat

    from hotshard.cli._console import warn

    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & 0o077:
        warn(f"secret file {path} is readable or writable by others (mode {mode:04o}): "
             f"chmod 600 {path}")


@click.command(epilog=KEY_TYPE_RULE)
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--key", required=True, metavar="COL", help="Column holding the partition key.")
@click.option("--counts", metavar="COL",
              help="Inputs are pre-aggregated key,count rows (a GROUP BY); COL holds the counts.")
@click.option("--op", metavar="COL", help="Also profile each operation (read/write...) apart.")
@click.option("--size", metavar="COL", help="Payload size column: record its quantiles.")
@click.option("--time", "time_col", metavar="COL",
              help="Event time column: a timestamp, ISO 8601 text, or epoch numbers (seconds, "
                   "milliseconds, microseconds or nanoseconds, told apart by their magnitude): "
                   "record the rate, arrivals, timelines, and the stream's order.")
@click.option("--time-unit", type=click.Choice(["auto", "s", "ms", "us", "ns"]),
              default="auto", show_default=True,
              help="Unit of a numeric --time column; auto reads it from the values (relative "
                   "milliseconds from a trace's start are the one case it cannot tell).")
@click.option("--top-k", type=click.IntRange(min=1), default=500, show_default=True,
              help="Keys kept exactly in the head.")
@click.option("--min-count", type=click.IntRange(min=1), default=1, show_default=True,
              help="Privacy floor: no key seen fewer times is ever written.")
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb",
              show_default=True, help="Counting engine.")
@click.option("--spark-master", default="local[*]", show_default=True,
              help="Spark master URL for --engine spark.")
@click.option("--spark-scratch", metavar="DIR",
              help="For --engine spark on a cluster: a directory the executors and this "
                   "machine both reach (a shared mount), where the locality pass's sorted "
                   "sample is written [default: a local temporary directory].")
@click.option("--memory-limit", default="2GB", show_default=True, metavar="SIZE",
              help="The duckdb engine's working memory; past it DuckDB spills to a temporary "
                   "directory, so a trace of any length profiles in about this plus the "
                   "locality pass's per-key state.")
@click.option("--partitioner", "placement_names", type=PARTITIONER_CHOICE, multiple=True,
              help="Also record each shard's total tail load under this store's placement "
                   "(counts only; repeatable, paired with --shards) so predict is exact.")
@click.option("--shards", "placement_shards", type=click.IntRange(min=1), multiple=True,
              help="Shard count for each --partitioner.")
@click.option("--key-type", type=KEY_TYPE_CHOICE,
              help="How the store types the key for --partitioner [default: the rule below].")
@click.option("--pseudonymize", is_flag=True,
              help="Replace head keys by keyed hashes (needs --secret-file and --partitioner); "
                   "generated tests then use stand-in keys that land on the same shards.")
@click.option("--secret-file", metavar="FILE", help="HMAC secret for --pseudonymize.")
@click.option("--locality/--no-locality", default=True, show_default=True,
              help="Measure temporal locality (how soon each popularity class's keys come "
                   "back: stack distances, reuse times, the LRU hit-rate curve) in --time "
                   "order, else input order. Event rows only. Exact up to 4 M distinct keys, "
                   "SHARDS sampling beyond (its expected error is recorded).")
@click.option("-o", "--output", required=True, metavar="FILE", help="Profile to write (JSON).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def profile(inputs, key, counts, op, size, time_col, time_unit, top_k, min_count, engine,
            spark_master, spark_scratch, memory_limit, placement_names, placement_shards,
            key_type, pseudonymize, secret_file, locality, output, quiet):
    """Count requests per key in production data and write a privacy-safe profile.

    INPUT... are Parquet, CSV (.gz) or JSON-lines files, or quoted globs of them. Only the key
    column and counts leave: the profile holds the top --top-k keys with exact counts (never a
    key seen fewer than --min-count times), the rest as a fitted discrete power law plus the
    exact count-of-counts histogram. Rows with an empty or null key are dropped and counted.
    Format: hotshard.profile/1.

    \b
    Examples:
      hotshard profile 'events/*.parquet' --key channel_id -o profile.json
      hotshard profile daily_counts.csv --key channel_id --counts n -o profile.json
      hotshard profile trace.parquet --key lbn --op op --size size --time time -o p.json
    """
    from hotshard._atomic import check_writable
    from hotshard.cli._console import note
    from hotshard.profile.count import count_profile

    if len(placement_names) != len(placement_shards):
        raise click.UsageError("give one --shards N for each --partitioner")
    check_writable(output)
    secret = None
    if secret_file and not pseudonymize:
        raise click.UsageError("--secret-file is the key of --pseudonymize: add --pseudonymize, "
                               "or the profile keeps the real keys")
    if pseudonymize:
        from hotshard.profile.pseudonym import read_secret

        if not secret_file:
            raise click.UsageError("--pseudonymize needs --secret-file FILE")
        secret = read_secret(secret_file)
        _warn_if_shared(secret_file)
    placements = []
    if placement_names:
        from hotshard.profile.count import key_column_is_integer
        from hotshard.shards.partitioners import partitioner_for

        integer = key_type is None and key_column_is_integer(list(inputs), key)
        placements = [partitioner_for(name, n, key_type=key_type, integer_keys=integer)
                      for name, n in zip(placement_names, placement_shards, strict=True)]
    with ProgressBar(not quiet) as bar:
        result = count_profile(list(inputs), key=key, counts=counts, op=op, size=size,
                               time_col=time_col, top_k=top_k, min_count=min_count,
                               engine=engine, spark_master=spark_master, progress=bar.callback,
                               placements=placements, pseudonymize_secret=secret,
                               locality=locality, time_unit=time_unit,
                               spark_scratch=spark_scratch, memory_limit=memory_limit)
    result.save(output)
    dropped = int(result.source.get("null_keys") or 0)
    if dropped:
        note(f"dropped {dropped:,} rows with an empty or null key")
    if result.arrivals is not None and result.arrivals.events < result.events:
        untimed = result.events - result.arrivals.events
        note(f"{untimed:,.0f} requests have no usable time (empty, NaN or infinite): counted "
             "per key, left out of the arrivals and timelines")
    window = result.source.get("window") or {}
    if time_col and time_unit == "auto" and str(window.get("start", "9999")) < "1973":
        # below 1e8 no epoch unit fits: the values count from an origin of their own, and
        # only the user knows in what
        note(f"the times were read as seconds counted from their own origin (they start at "
             f"{window['start']}, too early for epoch times): if they count milliseconds or "
             "smaller units, give --time-unit ms (us, ns)")
    pl = result.tail.power_law
    tail = (f"tail alpha {pl['alpha']:.3f} (xmin {pl['xmin']})" if pl
            else "tail: histogram only (no power-law fit)")
    head_share = float(result.head_counts.sum()) / result.events
    click.echo(f"wrote {output}: {result.events:,.0f} events, {result.keys:,.0f} keys")
    click.echo(f"  head {len(result.head_keys)} keys ({pct(head_share)} of events); {tail}")
    loc = result.locality
    if loc is not None and loc.method == "shards":
        note(f"locality by SHARDS sampling at rate {loc.sample_rate:.3g} ({loc.keys:,} keys is "
             f"past the exact pass's budget): LRU hit rates within about "
             f"{loc.expected_error:.3f} (one standard error)")


@click.command()
@click.argument("profile_path", metavar="PROFILE")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("--plot", metavar="IMAGE",
              help="Draw the rank-frequency curve (log-log) to a .png, .svg or .pdf file.")
def inspect(profile_path, as_json, plot):
    """Summarise a profile: shares of the hottest keys, the tail fit, warnings.

    Shows events, distinct keys, top-1 / top-10 / top-1% shares against a uniform workload,
    the tail's power law and how well it fits, per-operation splits, rates and payload sizes,
    and warnings (for instance when the keys have no semantic hot spot, so uniform synthetic
    keys would be fine). --plot draws the rank-frequency curve with the head and fitted tail.
    """
    from hotshard.profile.document import Profile
    from hotshard.profile.summary import summarize
    from hotshard.render import profile_summary

    if plot:
        from hotshard._atomic import check_writable
        from hotshard.report.image_files import image_format

        check_writable(plot)
        image_format(plot)
    loaded = Profile.load(profile_path)
    summary = summarize(loaded)
    if plot:
        from hotshard.report.rank_frequency import plot_rank_frequency

        plot_rank_frequency(loaded, plot)
    if as_json:
        click.echo(json.dumps(summary.to_dict()))
    else:
        click.echo(profile_summary(summary, profile_path))
        if plot:
            click.echo(f"wrote {plot}")
