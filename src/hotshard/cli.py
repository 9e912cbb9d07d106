"""The ``hotshard`` command: one subcommand per capability, each a thin shell over the library.

Only this module prints for the user or exits. A user mistake (``HotshardError`` or a bad
option) becomes one line ``hotshard: error: ...`` and exit status 2, never a traceback.
"""

from __future__ import annotations

import json
import sys

import click

from hotshard import __version__
from hotshard.errors import HotshardError

ALTERNATIVE_NAMES = ("lognormal", "exponential", "truncated_power_law")
PARTITIONER_CHOICE = click.Choice(["redis-cluster", "cassandra", "kafka", "elasticsearch",
                                   "mongodb", "jump", "ketama", "rendezvous", "modulo", "map"])


class AlternativeList(click.ParamType):
    """Comma-separated alternatives for --compare, checked when parsed."""

    name = "LIST"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        names = tuple(v.strip() for v in str(value).split(",") if v.strip())
        for n in names:
            if n not in ALTERNATIVE_NAMES:
                self.fail(f"unknown alternative {n!r}; choose from {', '.join(ALTERNATIVE_NAMES)}",
                          param, ctx)
        if not names:
            self.fail("give at least one alternative", param, ctx)
        return names


def note(message: str) -> None:
    """A one-line remark on stderr that does not stop the command."""
    click.echo(f"hotshard: note: {message}", err=True)


def _write_json(path: str, payload: dict) -> None:
    from hotshard._atomic import atomic_write

    with atomic_write(path) as handle:
        json.dump(payload, handle, indent=2)
        handle.write("\n")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hotshard")
def cli() -> None:
    """hotshard: make load tests of partitioned stores tell the truth about hot keys.

    Uniform synthetic keys spread load perfectly over every shard, so a load test built on them
    measures a system that cannot occur in production, where a few keys carry much of the
    traffic and one shard runs hot. hotshard profiles the real key distribution (counts only),
    fits its tail, and drives tests and predictions from it.
    """


@cli.command()
@click.argument("input_path", metavar="INPUT")
@click.option("--column", metavar="NAME", help="Read this column of a CSV/TSV/Parquet table.")
@click.option("--histogram", is_flag=True,
              help="INPUT is a frequency histogram: 'value<TAB>count' lines, header allowed.")
@click.option("--xmin", type=click.IntRange(min=1), metavar="N",
              help="Fix the start of the tail instead of choosing it by minimum KS distance.")
@click.option("--bootstrap", type=click.IntRange(min=0), default=0, show_default=True,
              metavar="N",
              help="Synthetic sets for the goodness-of-fit p-value (CSN use 2500 for +/-0.01).")
@click.option("--seed", type=click.IntRange(min=0), metavar="S",
              help="Seed of the bootstrap: same seed, same p-value, whatever --workers.")
@click.option("--workers", type=click.IntRange(min=1), metavar="W",
              help="Processes for the bootstrap [default: all cores].")
@click.option("--compare", type=AlternativeList(), default=None, metavar="LIST",
              help="Vuong likelihood-ratio tests against: lognormal,exponential,"
                   "truncated_power_law.")
@click.option("--min-tail", type=click.IntRange(min=2), default=10, show_default=True,
              metavar="N", help="Fewest observations a tail may hold.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a summary.")
@click.option("-o", "--output", metavar="FILE", help="Also write the JSON result to FILE.")
def fit(input_path, column, histogram, xmin, bootstrap, seed, workers, compare, min_tail,
        as_json, output):
    """Fit a discrete power law to the tail of positive integers (Clauset-Shalizi-Newman 2009).

    INPUT holds one positive integer per line (a request count per key, a degree, ...), or a
    table column (--column), or a frequency histogram (--histogram); '-' reads standard input.
    alpha is the exact discrete maximum-likelihood estimate (Hurwitz zeta normalisation) with
    its standard error; xmin minimises the Kolmogorov-Smirnov distance unless --xmin fixes it.
    Zeros are dropped with a note: the law lives on x >= 1.

    \b
    Examples:
      hotshard fit words.txt --bootstrap 2500 --seed 1 --compare lognormal,exponential
      hotshard fit weblinks.hist --histogram --xmin 3684 --json
    """
    from hotshard.profile.fit import fit_power_law
    from hotshard.profile.read import read_observations
    from hotshard.render import fit_summary

    obs = read_observations(input_path, column=column, histogram=histogram)
    result = fit_power_law(obs.values, obs.counts, xmin=xmin, bootstrap=bootstrap, seed=seed,
                           workers=workers, compare=compare or (), min_tail=min_tail)
    if result.zeros_dropped:
        note(f"dropped {result.zeros_dropped:,} zero values (a power law lives on x >= 1)")
    payload = {"source": input_path, **result.to_dict()}
    if output:
        _write_json(output, payload)
    if as_json:
        click.echo(json.dumps(payload))
    else:
        click.echo(fit_summary(result, input_path))


class _ProgressBar:
    """A rich progress bar on stderr, shown only on a terminal and without --quiet."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()
        self._bar = None
        self._tasks: dict[str, int] = {}

    def __enter__(self):
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                                 console=Console(stderr=True), transient=True)
            self._bar.__enter__()
        return self

    def __exit__(self, *exc):
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def __call__(self, stage: str, fraction: float | None) -> None:
        if self._bar is None:
            return
        if stage not in self._tasks:
            self._tasks[stage] = self._bar.add_task(stage, total=1.0)
        if fraction is not None:
            self._bar.update(self._tasks[stage], completed=fraction)

    @property
    def callback(self):
        return self if self.enabled else None


@cli.command()
@click.argument("inputs", nargs=-1, required=True, metavar="INPUT...")
@click.option("--key", required=True, metavar="COL", help="Column holding the partition key.")
@click.option("--counts", metavar="COL",
              help="Inputs are pre-aggregated key,count rows (a GROUP BY); COL holds the counts.")
@click.option("--op", metavar="COL", help="Also profile each operation (read/write...) apart.")
@click.option("--size", metavar="COL", help="Payload size column: record its quantiles.")
@click.option("--time", "time_col", metavar="COL",
              help="Event time column (timestamp or epoch seconds): record mean/p99/peak rate.")
@click.option("--top-k", type=click.IntRange(min=1), default=500, show_default=True,
              help="Keys kept exactly in the head.")
@click.option("--min-count", type=click.IntRange(min=1), default=1, show_default=True,
              help="Privacy floor: no key seen fewer times is ever written.")
@click.option("--engine", type=click.Choice(["duckdb", "spark"]), default="duckdb",
              show_default=True, help="Counting engine.")
@click.option("--spark-master", default="local[*]", show_default=True,
              help="Spark master URL for --engine spark.")
@click.option("--partitioner", "placement_names", type=PARTITIONER_CHOICE, multiple=True,
              help="Also record each shard's total tail load under this store's placement "
                   "(counts only; repeatable, paired with --shards) so predict is exact.")
@click.option("--shards", "placement_shards", type=click.IntRange(min=1), multiple=True,
              help="Shard count for each --partitioner.")
@click.option("--key-type", type=click.Choice(["text", "bigint"]),
              help="How the store types the key for --partitioner [default: bigint for "
                   "integer key columns, else text].")
@click.option("--pseudonymize", is_flag=True,
              help="Replace head keys by keyed hashes (needs --secret-file and --partitioner); "
                   "generated tests then use stand-in keys that land on the same shards.")
@click.option("--secret-file", metavar="FILE", help="HMAC secret for --pseudonymize.")
@click.option("-o", "--output", required=True, metavar="FILE", help="Profile to write (JSON).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def profile(inputs, key, counts, op, size, time_col, top_k, min_count, engine, spark_master,
            placement_names, placement_shards, key_type, pseudonymize, secret_file, output,
            quiet):
    """Count requests per key in production data and write a privacy-safe profile.

    INPUT... are Parquet, CSV (.gz) or JSON-lines files, or quoted globs of them. Only the key
    column and counts leave: the profile holds the top --top-k keys with exact counts (never a
    key seen fewer than --min-count times), the rest as a fitted discrete power law plus the
    exact count-of-counts histogram. Format: hotshard.profile/1.

    \b
    Examples:
      hotshard profile 'events/*.parquet' --key channel_id -o profile.json
      hotshard profile daily_counts.csv --key channel_id --counts n -o profile.json
      hotshard profile trace.parquet --key lbn --op op --size size --time time -o p.json
    """
    from hotshard.profile.count import count_profile

    if len(placement_names) != len(placement_shards):
        raise click.UsageError("give one --shards N for each --partitioner")
    secret = None
    if pseudonymize:
        from hotshard.profile.pseudonym import read_secret

        if not secret_file:
            raise click.UsageError("--pseudonymize needs --secret-file FILE")
        secret = read_secret(secret_file)
    placements = [_build_partitioner(name, n, key_type or "text", 16, 0, None, None, None, None)
                  for name, n in zip(placement_names, placement_shards, strict=True)]
    if placements and key_type is None:
        placements = _retype_for_key_column(inputs, key, placements, placement_names,
                                            placement_shards)
    with _ProgressBar(not quiet) as bar:
        result = count_profile(list(inputs), key=key, counts=counts, op=op, size=size,
                               time_col=time_col, top_k=top_k, min_count=min_count,
                               engine=engine, spark_master=spark_master, progress=bar.callback,
                               placements=placements, pseudonymize_secret=secret)
    result.save(output)
    pl = result.tail.power_law
    tail = (f"tail alpha {pl['alpha']:.3f} (xmin {pl['xmin']})" if pl
            else "tail: histogram only (no power-law fit)")
    head_share = float(result.head_counts.sum()) / result.events
    click.echo(f"wrote {output}: {result.events:,.0f} events, {result.keys:,.0f} keys; "
               f"head {len(result.head_keys)} keys ({head_share:.1%} of events); {tail}")


@cli.command()
@click.argument("profile_path", metavar="PROFILE")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
@click.option("--plot", metavar="PNG", help="Draw the rank-frequency curve (log-log) to PNG.")
def inspect(profile_path, as_json, plot):
    """Summarise a profile: shares of the hottest keys, the tail fit, warnings.

    Shows events, distinct keys, top-1 / top-10 / top-1% shares against a uniform workload,
    the tail's power law and how well it fits, per-operation splits, rates and payload sizes,
    and warnings (for instance when the keys have no semantic hot spot, so uniform synthetic
    keys would be fine). --plot draws the rank-frequency curve with the head and fitted tail.
    """
    from hotshard.profile.inspect import summarize
    from hotshard.profile.model import Profile
    from hotshard.render import profile_summary

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


class Count(click.ParamType):
    """A positive count written as 2000000, 2e9 or 2_000_000."""

    name = "N"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            number = float(str(value).replace("_", ""))
        except ValueError:
            self.fail(f"{value!r} is not a number", param, ctx)
        if not number.is_integer() or number <= 0:
            self.fail(f"must be a whole number > 0, got {value!r}", param, ctx)
        return int(number)


class Seconds(click.ParamType):
    """A duration: 90, 90s, 15m, 2h, 1d."""

    name = "DURATION"

    def convert(self, value, param, ctx):
        from hotshard.workload.scenario import parse_duration

        try:
            seconds = parse_duration(value)
        except HotshardError as exc:
            self.fail(str(exc), param, ctx)
        if seconds <= 0:
            self.fail("must be > 0", param, ctx)
        return seconds


def _format_of(output: str, fmt: str | None) -> str:
    if fmt:
        return fmt
    name = output.lower()
    if output == "-" or name.endswith(".csv"):
        return "csv"
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    return "parquet"


@cli.command()
@click.argument("args", nargs=-1, metavar="[PROFILE] | --verify PROFILE OUT")
@click.option("--dist", metavar="SPEC",
              help="Classic distribution instead of a profile: uniform:N, zipf:S:N, "
                   "hotspot:FRAC_KEYS:FRAC_OPS:N, latest:N[:S], scrambled_zipfian:N.")
@click.option("--events", type=Count(), help="Messages to generate (e.g. 2e9).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed: same seed, same bytes, whatever --workers.")
@click.option("-o", "--output", metavar="OUT", help="Output file, or - for stdout.")
@click.option("--format", "fmt", type=click.Choice(["parquet", "csv", "jsonl"]),
              help="Output format [default: from OUT's extension, else parquet].")
@click.option("--workers", type=click.IntRange(min=1), default=2, show_default=True,
              help="Threads generating chunks ahead of the writer (GIL-free kernels).")
@click.option("--keys", type=Count(), help="Scale the profile to this many distinct keys "
              "(the tail is extended along its own distribution).")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), metavar="R",
              help="Mean messages per second [default: the profile's, else 3000].")
@click.option("--duration", type=Seconds(), help="Run length (90s, 15m, 2h); with --rate it "
              "sets --events.")
@click.option("--tail", type=click.Choice(["power_law", "histogram"]), default="power_law",
              show_default=True, help="Tail model: the fitted law or the exact histogram.")
@click.option("--event", "hot_events", multiple=True, metavar="KEY:SHARE:START:END",
              help="A big event: SHARE of all traffic goes to KEY between START and END "
                   "(e.g. 4711:0.4:10m:40m). Repeatable.")
@click.option("--diurnal", type=click.FloatRange(0, 1, max_open=True), default=0.0,
              show_default=True, help="Amplitude of a daily rate curve (0 = constant rate).")
@click.option("--start", type=click.DateTime(), help="Time of the first message (UTC) "
              "[default: 2026-01-01].")
@click.option("--users", type=Count(), default=10_000_000, show_default=True,
              help="Distinct synthetic user IDs.")
@click.option("--partitioner", "follow_name", type=PARTITIONER_CHOICE,
              help="Name synthetic tail keys so each shard gets the tail share the profile "
                   "recorded for this store (profile made with --partitioner).")
@click.option("--shards", "follow_shards", type=click.IntRange(min=1),
              help="Shard count for --partitioner.")
@click.option("--verify", is_flag=True,
              help="Check OUT against PROFILE instead of generating (head shares, tail).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
def generate(args, dist, events, seed, output, fmt, workers, keys, rate, duration, tail,
             hot_events, diurnal, start, users, follow_name, follow_shards, verify, quiet):
    """Generate synthetic chat messages from a profile (or a classic distribution).

    Head keys keep their real IDs and exact weights; tail keys get synthetic IDs drawn from
    the profile's tail. Columns: timestamp, channel_id, message_id (time-ordered), user_id,
    size, op. Output is streamed in chunks (constant memory at any --events) and seeded by
    chunk index, so it is byte-identical for any --workers.

    \b
    Examples:
      hotshard generate profile.json --events 1e7 --seed 1 -o events.parquet
      hotshard generate --dist zipf:0.99:1e6 --events 1e6 -o zipf.parquet
      hotshard generate --dist uniform:1e6 --events 1e6 -o uniform.csv
      hotshard generate profile.json --events 1e7 --event 4711:0.4:10m:40m -o event.parquet
      hotshard generate --verify profile.json events.parquet
    """
    from datetime import UTC

    from hotshard.profile.model import Profile
    from hotshard.workload.scenario import parse_event

    if verify:
        if len(args) != 2:
            raise click.UsageError("--verify takes PROFILE OUT")
        from hotshard.render import verify_summary
        from hotshard.workload.generate import verify_file

        report = verify_file(Profile.load(args[0]), args[1], tail=tail)
        click.echo(verify_summary(report, args[1]))
        if not report.passed:
            raise click.exceptions.Exit(1)
        return
    if len(args) > 1:
        raise click.UsageError("give at most one PROFILE")
    if not output:
        raise click.UsageError("say where to write: -o OUT (or -o - for stdout)")
    from hotshard.workload.generate import plan_workload
    from hotshard.workload.messages import write_events

    prof = Profile.load(args[0]) if args else None
    follow = None
    if follow_name:
        from hotshard.errors import InputError
        from hotshard.shards.partitioners import from_spec

        if prof is None or not follow_shards:
            raise click.UsageError("--partitioner P --shards N follows a PROFILE's placement")
        wanted = f"{follow_name}/{follow_shards}"
        specs = [sp for sp in prof.placement if sp.split(":")[0] == wanted]
        if not specs:
            raise InputError(f"the profile recorded no tail placement for {wanted}: profile "
                             f"again with --partitioner {follow_name} --shards {follow_shards}")
        follow = from_spec(specs[0], prof.placement[specs[0]].get("key_type", "text"))
    plan = plan_workload(
        profile=prof, dist=dist, events=events, seed=seed,
        rate=rate, duration=duration, keys=keys, tail=tail,
        hot_events=tuple(parse_event(e) for e in hot_events), diurnal=diurnal,
        start=start.replace(tzinfo=UTC) if start else None, n_users=users, follow=follow)
    out_fmt = _format_of(output, fmt)
    with _RowsBar(not quiet and output != "-", plan.events) as bar:
        written = write_events(plan, output, fmt=out_fmt, workers=workers, progress=bar)
    if output != "-":
        click.echo(f"wrote {output}: {written:,} messages ({out_fmt}, seed {seed})", err=True)


def _retype_for_key_column(inputs, key, placements, names, shards):
    """Integer key columns are bigint keys to the stores that type them (not Redis/ES)."""
    from hotshard.profile.count import key_column_is_integer

    if not key_column_is_integer(list(inputs), key):
        return placements
    from hotshard.shards.partitioners import TEXT_KEYED

    return [_build_partitioner(name, n, "text" if name in TEXT_KEYED else "bigint",
                               16, 0, None, None, None, None)
            for name, n in zip(names, shards, strict=True)]


class _RowsBar:
    """Rows-written progress bar on stderr (terminal only)."""

    def __init__(self, enabled: bool, total: int):
        self.inner = _ProgressBar(enabled)
        self.total = total
        self.done = 0

    def __enter__(self):
        self.inner.__enter__()
        return self

    def __exit__(self, *exc):
        self.inner.__exit__(*exc)

    def __call__(self, rows: int) -> None:
        self.done += rows
        self.inner("generating messages", self.done / self.total)


def _partitioner_options(func):
    """Options shared by `shard`, `predict` and `profile --partitioner`."""
    opts = [
        click.option("--key-type", type=click.Choice(["text", "bigint"]),
                     help="How the store types the key: text, or bigint (8-byte integer) "
                          "[default: bigint for integer keys in a profile, else text]."),
        click.option("--num-tokens", type=click.IntRange(min=1), default=16, show_default=True,
                     help="Cassandra vnodes per node."),
        click.option("--ring-seed", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Seed of Cassandra's random token allocation."),
        click.option("--ring-file", metavar="FILE",
                     help="Cassandra ring: 'token node' lines (e.g. from nodetool ring)."),
        click.option("--slots-map", metavar="FILE",
                     help="Redis CLUSTER SLOTS dump: JSON or 'start end node' lines."),
        click.option("--routing-shards", type=click.IntRange(min=1),
                     help="Elasticsearch number_of_routing_shards (clusters before 9.4)."),
        click.option("--map", "map_file", metavar="FILE",
                     help="Explicit key,shard table for --partitioner map."),
        click.option("--chunks", "chunks_file", metavar="FILE",
                     help="MongoDB chunk ranges: 'min max shard' lines (MinKey/MaxKey ends)."),
    ]
    for opt in reversed(opts):
        func = opt(func)
    return func


def _build_partitioner(name, shards, key_type, num_tokens, ring_seed, ring_file, slots_map,
                       routing_shards, map_file, chunks_file=None):
    from hotshard.shards.partitioners import make_partitioner

    return make_partitioner(name, shards, key_type=key_type or "text", num_tokens=num_tokens,
                            ring_seed=ring_seed, ring_file=ring_file, slots_map=slots_map,
                            routing_shards=routing_shards, map_file=map_file,
                            chunks_file=chunks_file)


@cli.command()
@click.argument("keys", nargs=-1, required=True, metavar="KEY...")
@click.option("--partitioner", "-p", type=PARTITIONER_CHOICE, required=True,
              help="The store whose placement to reproduce.")
@click.option("--shards", "-n", type=click.IntRange(min=1), help="Shards / nodes / partitions.")
@_partitioner_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
def shard(keys, partitioner, shards, key_type, num_tokens, ring_seed, ring_file, slots_map,
          routing_shards, map_file, chunks_file, as_json):
    """Print each key's shard (and slot, token or hash) exactly as the store places it.

    \b
    Examples:
      hotshard shard somekey '{user1000}.following' -p redis-cluster -n 3
      hotshard shard 4711 982 -p cassandra -n 12 --key-type bigint
      hotshard shard 21 foobar -p kafka -n 64
    """
    part = _build_partitioner(partitioner, shards, key_type, num_tokens, ring_seed, ring_file,
                              slots_map, routing_shards, map_file, chunks_file)
    placed = part.shard_of(list(keys))
    details = part.details(list(keys)) if hasattr(part, "details") else {}
    for i, key in enumerate(keys):
        extra = {name: int(values[i]) for name, values in details.items()}
        if as_json:
            click.echo(json.dumps({"key": key, "shard": int(placed[i]), **extra}))
        else:
            more = "".join(f"  {name} {value}" for name, value in extra.items())
            click.echo(f"{key}\tshard {int(placed[i])}{more}")


def _whatif(split_hot, replicas, cache_hit, coalesce, hot_keys):
    from hotshard.shards.predict import WhatIf

    k, s = 0, 1
    if split_hot:
        try:
            k, s = (int(x) for x in split_hot.split(":"))
        except ValueError:
            raise click.BadParameter(f"expected K:S such as 10:8, got {split_hot!r}",
                                     param_hint="--split-hot") from None
    return WhatIf(k, s, replicas, cache_hit, coalesce, hot_keys)


@cli.command()
@click.argument("profile_path", metavar="PROFILE")
@click.option("--partitioner", "-p", type=PARTITIONER_CHOICE, required=True,
              help="The store whose placement to reproduce.")
@click.option("--shards", "-n", type=click.IntRange(min=1), help="Shards / nodes / partitions.")
@_partitioner_options
@click.option("--rps", type=click.FloatRange(min=0, min_open=True),
              help="Total requests/s, to predict each shard's CPU (with --capacity).")
@click.option("--capacity", type=click.FloatRange(min=0, min_open=True),
              help="Requests/s one shard can serve at 100% CPU.")
@click.option("--split-hot", metavar="K:S",
              help="What if the top K keys were each split into S sub-partitions (time buckets)?")
@click.option("--replicas", type=click.IntRange(min=1), default=1, show_default=True,
              help="What if reads were spread over R replicas per shard?")
@click.option("--cache-hit", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="What if this fraction of hot-key reads hit a local cache?")
@click.option("--coalesce", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="What if this fraction of hot-key reads merged with an in-flight one?")
@click.option("--hot-keys", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many top keys --cache-hit and --coalesce apply to.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def predict(profile_path, partitioner, shards, key_type, num_tokens, ring_seed, ring_file,
            slots_map, routing_shards, map_file, chunks_file, rps, capacity, split_hot, replicas,
            cache_hit, coalesce, hot_keys, as_json):
    """Predict each shard's share of load (and CPU) from a profile, before any test runs.

    Head keys are placed exactly by the store's partitioner; the tail is spread by its mean
    and variance (exact when the profile recorded this partitioner). Shows max/mean, the
    hottest shard and the keys that make it hot, and the band a uniform workload would show,
    so 95% against 20% is visibly not noise. Mitigation flags show before/after.

    \b
    Examples:
      hotshard predict profile.json -p cassandra -n 12 --rps 3000 --capacity 400
      hotshard predict profile.json -p kafka -n 64 --split-hot 10:8 --replicas 3
    """
    from hotshard.profile.model import Profile
    from hotshard.render import prediction_summary
    from hotshard.shards.predict import predict as run_predict

    prof = Profile.load(profile_path)
    if key_type is None:
        key_type = "bigint" if prof.source.get("key_type") == "int64" else "text"
    from hotshard.shards.partitioners import TEXT_KEYED

    if partitioner in TEXT_KEYED:
        key_type = "text"  # these stores hash the key's bytes as a string
    part = _build_partitioner(partitioner, shards, key_type, num_tokens, ring_seed, ring_file,
                              slots_map, routing_shards, map_file, chunks_file)
    result = run_predict(prof, part, rps=rps, capacity=capacity,
                         whatif=_whatif(split_hot, replicas, cache_hit, coalesce, hot_keys))
    if as_json:
        click.echo(json.dumps(result.to_dict()))
    else:
        click.echo(prediction_summary(result))


@cli.command()
@click.option("--seed", type=click.IntRange(min=0), default=2026, show_default=True,
              help="Seed of the synthetic production data.")
def demo(seed):
    """Run the end-to-end story on embedded defaults (no files needed).

    Synthesises a day of chat traffic whose channel popularity is heavy-tailed, as live
    streaming is, then shows what a uniform-key load test hides: the head's share of traffic
    and the fitted tail that hotshard profiles are built from.
    """
    from hotshard.demo import run_demo

    click.echo(run_demo(seed=seed))


# click >= 8.2 raises this for a bare `hotshard` when not in standalone mode
_NO_ARGS_IS_HELP = getattr(click.exceptions, "NoArgsIsHelpError", ())


def main(argv: list[str] | None = None) -> int:
    """Entry point: run the CLI, turning user mistakes into one line and exit status 2."""
    try:
        rv = cli.main(args=argv, prog_name="hotshard", standalone_mode=False)
    except HotshardError as exc:
        click.echo(f"hotshard: error: {exc}", err=True)
        return 2
    except _NO_ARGS_IS_HELP as exc:
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return 2
    except click.UsageError as exc:
        hint = f" (see 'hotshard {exc.ctx.command_path.split(' ', 1)[1]} --help')" if (
            exc.ctx and " " in exc.ctx.command_path) else " (see 'hotshard --help')"
        click.echo(f"hotshard: error: {exc.format_message()}{hint}", err=True)
        return 2
    except click.ClickException as exc:
        click.echo(f"hotshard: error: {exc.format_message()}", err=True)
        return 2
    except click.exceptions.Abort:
        click.echo("hotshard: interrupted", err=True)
        return 130
    except KeyboardInterrupt:
        click.echo("hotshard: interrupted", err=True)
        return 130
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (| head): not an error
        return 0
    return rv if isinstance(rv, int) else 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
