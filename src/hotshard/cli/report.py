"""`hotshard report`: one self-contained HTML file telling the incident's story from the runs."""

from __future__ import annotations

import click

from hotshard.cli._options import KEY_TYPE_CHOICE, PARTITIONER_CHOICE


@click.command()
@click.argument("observation_paths", nargs=-1, required=True, metavar="OBS...")
@click.option("--profile", "profile_path", metavar="PROFILE",
              help="Production's key profile: rank-frequency plot and predicted per-shard load.")
@click.option("--partitioner", "-p", type=PARTITIONER_CHOICE,
              help="The store's placement for the prediction [default: the one a simulated "
                   "run records].")
@click.option("--shards", "-n", type=click.IntRange(min=1),
              help="Shards for the prediction [default: production's number of shards].")
@click.option("--key-type", type=KEY_TYPE_CHOICE,
              help="How the store types the key [default: by the profile's keys].")
@click.option("-o", "--output", required=True, metavar="FILE.html",
              help="The report to write (one HTML file, no network needed to open it).")
@click.option("--title", help="Page title [default: names production].")
@click.option("--slo-ms", type=click.FloatRange(min=0, min_open=True), metavar="MS",
              help="A p99 target: for each event production's run injected (drive --event), "
                   "how long its shard's p99 stayed above it.")
def report(observation_paths, profile_path, partitioner, shards, key_type, output, title,
           slo_ms):
    """Write one HTML report from observations: what went wrong, in pictures and numbers.

    OBS are hotshard.observations/1 files (from simulate, drive, or written by hand from
    production dashboards), in any order: production is the run whose key generator is
    "production" or whose label says so, the load test the first other run, and runs that
    record mitigations or come after production are compared with it. A malformed field is
    dropped with a note, as `hotshard diagnose` does. The report shows the
    profile's rank-frequency with its fitted tail, per-shard load for uniform keys, the
    profile's prediction and every run (hottest shard marked), per-shard load and p99 over
    time (production's windows and the profile's timelines, the events shaded: a hot shard is
    hot in a window), latency percentiles, the mitigations side by side, and the diagnosis
    with its evidence and next steps. A run that injected an event gets its transient on
    the time axis: onset, detection, relief, time above --slo-ms. A live p99 comparison is
    stated only when the runs behind it were shard-bound. Plots are inline SVG: the file
    opens offline.

    \b
    Examples:
      hotshard simulate --scenario incident-test --duration 5m -o test.json
      hotshard simulate --scenario incident-production --duration 5m -o prod.json
      hotshard simulate --scenario incident-mitigated --duration 5m -o fixed.json
      hotshard report test.json prod.json fixed.json --profile examples/incident.profile.json \\
          -o report.html
      hotshard report production.json loadtest.json -o report.html
    """
    from hotshard.diagnose.engine import diagnose
    from hotshard.observations import Observations
    from hotshard.report.html import check_report_path, write_report
    from hotshard.report.runs import assign_roles

    check_report_path(output)  # before reading anything
    runs, problems = [], []
    for path in observation_paths:
        run, dropped = Observations.load_salvaged(path)
        runs.append(run)
        problems += [f"{path}: {p}" for p in dropped]
    profile = None
    if profile_path:
        from hotshard.profile.document import Profile

        profile = Profile.load(profile_path)
    roles = assign_roles(runs)  # one rule for the roles: the report's and the diagnosis'
    production, baseline = roles.production, roles.baseline
    diagnosis = diagnose(production, baseline, profile=profile, partitioner=partitioner,
                         problems=problems, slo_ms=slo_ms)
    write_report(output, runs, profile=profile, partitioner=partitioner, shards=shards,
                 key_type=key_type, diagnosis=diagnosis, production=production,
                 baseline=baseline, sources=list(observation_paths),
                 profile_source=profile_path, title=title, notes=problems)
    click.echo(f"wrote {output}")
