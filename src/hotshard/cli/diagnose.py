"""`hotshard diagnose`: which explanation fits the evidence, ranked, with next steps."""

from __future__ import annotations

import json

import click

from hotshard.cli._options import PARTITIONER_CHOICE


@click.command()
@click.argument("observations_path", metavar="OBS.json")
@click.option("--baseline", "baseline_path", metavar="TEST_OBS.json",
              help="The load test's observations, to compare production with.")
@click.option("--profile", "profile_path", metavar="PROFILE",
              help="Production's key profile (hotshard profile): decides whether keys are "
                   "skewed at all, and drives the what-ifs.")
@click.option("--partitioner", "-p", type=PARTITIONER_CHOICE,
              help="The store's partitioner for the what-ifs [default: the one the "
                   "observations name, else kafka].")
@click.option("--calibrate", "calibrate_path", metavar="RUN.json",
              help="A measured run of the service (hotshard drive against it): the what-ifs "
                   "then state the hottest shard's CPU and p99 before and after each "
                   "mitigation at production's rate (simulate like RUN).")
@click.option("--slo-ms", type=click.FloatRange(min=0, min_open=True), metavar="MS",
              help="A p99 target: for each event the run injected (drive --event), how long "
                   "its shard's p99 stayed above it, and whether the mitigation reacted "
                   "fast enough.")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"ranking": [{"cause", "verdict", "score", "evidence"}], ...}.')
def diagnose(observations_path, baseline_path, profile_path, partitioner, calibrate_path,
             slo_ms, as_json):
    """Rank the explanations of a load test that missed production's behaviour.

    OBS.json holds production's observations (hotshard.observations/1: written by hotshard or
    by hand from dashboards; every field but format and label is optional). Each cause gets a
    verdict (fits / contradicted / cannot judge) with its evidence in numbers: key-skew (the
    per-shard spread against what uniform keys can produce), coordinated-omission,
    cache-warmth, network, payload-size, hot-node, no-hot-spot (uniform keys are right).
    A malformed field is dropped with a note and the causes that needed it say so.

    A hot shard is hot in a window. The diagnosis opens with *When*: the evidence's peak window
    (its `windows`, as drive, observe prometheus and simulate write them: the window whose
    busiest shard was busiest) beside the profile's predicted peak (with --profile and its
    timelines), window by window, and whether they agree; a shard's p99 is compared with its
    load in the same window, and the what-ifs are judged in the peak window. A run whose
    latency the machine or the driver made (its recorded latency_bound) gives no latency
    evidence.

    A run that injected an event (drive --event, simulate --event with --detect) gets its
    transient: the onset, when the service's detector reported the key hot (its recorded
    actions), when the key's shard was relieved, its p99 during and after, the time above
    --slo-ms, and what would make the reaction faster.

    \b
    Example:
      hotshard diagnose examples/incident-production.json \\
          --baseline examples/incident-loadtest.json --profile examples/incident.profile.json
    """
    from hotshard.diagnose.engine import diagnose as run_diagnose
    from hotshard.diagnose.text import diagnosis_text
    from hotshard.observations import Observations
    from hotshard.profile.document import Profile

    production, dropped = Observations.load_salvaged(observations_path)
    problems = [f"{observations_path}: {p}" for p in dropped]
    baseline = None
    if baseline_path is not None:
        baseline, dropped = Observations.load_salvaged(baseline_path)
        problems += [f"{baseline_path}: {p}" for p in dropped]
    profile = Profile.load(profile_path) if profile_path is not None else None
    run = None
    if calibrate_path is not None:
        from hotshard.observations import load

        if profile is None:
            raise click.UsageError("--calibrate predicts production's CPU and p99 from "
                                   "production's keys: give --profile too")
        from hotshard.sim.calibrate import calibrate

        # calibrated here, so a run it cannot use is an error naming the file
        run = calibrate(load(calibrate_path), profile=profile, where=calibrate_path)
    result = run_diagnose(production, baseline, profile=profile, partitioner=partitioner,
                          problems=problems, calibrate_from=run, slo_ms=slo_ms)
    if as_json:
        click.echo(json.dumps(result.to_dict()))
    else:
        click.echo(diagnosis_text(result))
