"""`hotshard simulate`: a queueing model of the sharded service, at any scale, in seconds."""

from __future__ import annotations

import json

import click

from hotshard.cli._console import note, warn
from hotshard.cli._modes import ModeArgument, ModeGroup
from hotshard.cli._options import (
    PARTITIONER_CHOICE,
    HotEventSpec,
    Seconds,
    SplitSpec,
    cached_keys_option,
    detection_from,
    detection_options,
    dist_option,
    read_share_option,
    rps_option,
    stacked,
)

# options more than one mode declares, each declared once here

def _placement_options(default_note: str):
    return stacked([
        click.option("--partitioner", "-p", type=PARTITIONER_CHOICE,
                     help=f"The store's placement of keys on shards [default: {default_note}]."),
        click.option("--shard-workers", "workers", type=click.IntRange(min=1), metavar="W",
                     help="Workers (cores) serving each shard [default: 1"
                          + ("" if default_note == "kafka" else ", or what the run measured")
                          + "]."),
    ])


def _scale_options(rps_default: str, duration_default: str):
    return stacked([
        rps_option(f"Mean requests per second [default: {rps_default}]."),
        click.option("--duration", type=Seconds(),
                     help=f"Simulated time (90s, 15m, 1h) [default: {duration_default}]."),
        click.option("--shards", "-n", type=click.IntRange(min=1),
                     help="Shards [default: 64" + (", or the run's" if "run" in rps_default
                                                   else "") + "]."),
    ])


_MITIGATIONS = stacked([
    click.option("--split-hot", type=SplitSpec(), metavar="K:S",
                 help="Mitigation: split the top K keys into S time-bucket sub-partitions."),
    click.option("--replicas", type=click.IntRange(min=1),
                 help="Mitigation: spread each shard's reads over R replicas, the primary "
                      "included (1: no replica; writes go to all R) [default: 1]."),
    click.option("--cache-hit", type=click.FloatRange(0, 1), default=0.0, show_default=True,
                 help="Mitigation: this fraction of the top keys' reads served by a local "
                      "cache."),
    cached_keys_option(),
    click.option("--coalesce/--no-coalesce", default=None,
                 help="Mitigation: a read arriving while an identical read is in flight "
                      "waits for it instead of queueing (modelled exactly)."),
])

_DETECT = click.option(
    "--detect", is_flag=True,
    help="Model serve's hot-key detection: the mitigations apply to a key only once the "
         "service would call it hot (its share of the last --hot-window of requests at least "
         "--hot-share, read every 0.5 s; a split stays), not to the top keys from the start. "
         "Prints each event's time to detect and to relief, and its shard's p99 during and "
         "after.")

_SLO = click.option("--slo-ms", type=click.FloatRange(min=0, min_open=True), metavar="MS",
                    help="A p99 target: with events, how long each event's shard spent above "
                         "it.")


def _outputs(what: str):
    return stacked([
        click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
                     help="Seed: same seed, same numbers."),
        click.option("--json", "as_json", is_flag=True,
                     help=f"Print {what} (hotshard.observations/1) instead of a summary."),
        click.option("-o", "--output", metavar="FILE", help=f"Also write {what} to FILE."),
        click.option("--plot", metavar="IMAGE",
                     help="Draw per-shard CPU and latency percentiles to a .png, .svg or .pdf "
                          "file."),
    ])


_RUN_PROFILE = click.option(
    "--profile", "profile_option", metavar="PROFILE",
    help="The profile the run drew its keys from [default: the one the run's driver "
         "recorded].")

@click.group(cls=ModeGroup)
@click.argument("profile_path", required=False, metavar="[PROFILE]", cls=ModeArgument)
@click.option("--scenario", metavar="NAME",
              help="A named scenario's values (hotshard simulate scenarios lists them); "
                   "options given explicitly override them.")
@dist_option("instead of a PROFILE")
@_scale_options("a profile's measured mean rate (its rate or arrivals section), else 3000; "
                "from a profile, its measured rate shape is scaled to it",
                "a profile's measured span, else 10m")
@_placement_options("kafka")
@click.option("--service", metavar="SPEC",
              help="Service time per request: exp:MEAN, lognormal:MEAN:P99, const:VALUE, "
                   "file:PATH (milliseconds unless suffixed s/ms/us) [default: exp:5.25ms].")
@click.option("--arrivals", metavar="SPEC",
              help="Arrival process: profile (the profile's measured rate shape and "
                   "burstiness), poisson, onoff:BURST:ON_FRACTION:PERIOD (bursty), trace:PATH "
                   "(requests per second, one a line) [default: auto: the profile's when it "
                   "has an arrivals section, else poisson].")
@click.option("--order", type=click.Choice(["auto", "locality", "irm"]),
              help="Keys in production's order (locality: the profile's reuse, head keys hot "
                   "when they were hot; caches then simulated request by request) or "
                   "independent draws (irm; caches by Che's approximation) [default: auto: "
                   "locality when the profile has a locality section].")
@click.option("--event", "hot_events", multiple=True, type=HotEventSpec(),
              help="A big event: SHARE of all requests go to KEY between START and END "
                   "(e.g. 4711:0.3:10m:40m). Repeatable.")
@click.option("--cache-size", type=click.IntRange(min=0), default=0, show_default=True,
              help="LRU entries in a cache in front of each shard: simulated on each shard's "
                   "stream when keys come in production's order, else by Che's approximation "
                   "from the keys' popularity; reads hit, every request refreshes.")
@click.option("--hit-ms", type=click.FloatRange(min=0), default=0.5, show_default=True,
              help="Latency of a cache hit, ms.")
@_MITIGATIONS
@_DETECT
@detection_options()
@_SLO
@read_share_option("Share of reads [default: by key from the profile's 'read' operation, "
                   "else 0.9]. Reads can be cached, coalesced and spread over replicas.")
@_outputs("the observations")
def simulate(profile_path, scenario, dist, rps, duration, shards, partitioner, workers, service,
             arrivals, order, hot_events, cache_size, hit_ms, split_hot, replicas, cache_hit,
             hot_keys, coalesce, detect, hot_window, hot_share, apply_time, slo_ms, read_share,
             seed, as_json, output, plot):
    """Simulate the sharded service: per-shard CPU, queues and latency percentiles.

    Every request of the window is drawn (arrival time, key, read or write), placed on its
    shard as the store places it (head keys exactly, synthetic tail keys by ownership), passed
    through the caches and mitigations, and served first-in first-out in virtual time. One
    simulated hour at 5000 req/s over 64 shards takes a few seconds. The scenarios reproduce
    the incident: the load test's p99 of ~40 ms with every shard alike, production's shard at
    ~95% CPU with the rest near 20% and p99 near 800 ms, and what the mitigations buy.

    A profile measured with a time column is simulated at its measured rate over its
    measured span unless --rps or --duration say otherwise (a note says which), its head
    keys hot in the windows they were hot. The result has a time axis: per window (the
    profile's timeline windows, else 1/20 of the run) each shard's requests, CPU and p99
    (--json: "windows"); the summary shows the hottest shard window by window and its peak
    window beside its whole-run figures. A warning names every shard offered more work
    than it can do (its share x the rate x the mean service time over its workers, above
    1), over the whole run or in its worst window, and the whole service when the rate x
    the mean service time exceeds all the shards' workers.

    The modes replay and like calibrate the model from a measured run instead;
    scenarios lists the named scenarios.

    \b
    Examples:
      hotshard simulate scenarios
      hotshard simulate --scenario incident-production --plot prod.png
      hotshard simulate --scenario incident-production --replicas 2
      hotshard simulate profile.json -n 16 -p redis-cluster   # its measured rate and span
      hotshard simulate profile.json --rps 3000 --duration 1h -n 64 -p cassandra
      hotshard simulate --dist uniform:1e6 --rps 5000 --duration 10m --json -o test.json
      hotshard simulate replay run.json
      hotshard simulate like run.json --rps 3000 --shards 64 --split-hot 1:8
      hotshard simulate --dist uniform:2000 -n 4 --rps 250 --duration 14s \\
          --event 4711:0.5:5s:14s --cache-hit 0.99 --detect --hot-window 2s --slo-ms 20
    """
    _check_outputs(output, plot)
    ctx = click.get_current_context()
    given = {name for name in ctx.params
             if ctx.get_parameter_source(name) is not click.core.ParameterSource.DEFAULT}
    detection = detection_from(detect, {name: ctx.params[name] for name in (
        "hot_window", "hot_share", "apply_time")})
    options = _resolve(scenario, given, locals())
    result = _run(options, given, hot_events=tuple(hot_events), cache_size=cache_size,
                  hit_ms=hit_ms, cache_hit=cache_hit, hot_keys=hot_keys, read_share=read_share,
                  seed=seed, scenario=scenario, detection=detection,
                  label=f"simulation: {scenario}" if scenario else "simulation")
    if result.windows is not None:
        from hotshard.render import saturation_text
        from hotshard.sim.series import saturation

        for line in saturation_text(saturation(result.windows), result.duration):
            warn(line)
    obs = result.to_observations()
    if output:
        obs.save(output)
    if plot:
        from hotshard.report.observations_plot import plot_observations

        plot_observations(obs, plot)
    if as_json:
        click.echo(json.dumps(obs.to_dict()))
    else:
        from hotshard.render import simulation_summary

        click.echo(simulation_summary(result))
        _transients(obs, slo_ms)
        for path in (output, plot):
            if path:
                click.echo(f"wrote {path}")


def _check_outputs(output, plot) -> None:
    """Before any work: the outputs can be written, the image's format is known."""
    from hotshard._atomic import check_writable

    for path in (output, plot):
        if path:
            check_writable(path)
    if plot:
        from hotshard.report.image_files import image_format

        image_format(plot)


@simulate.command("scenarios")
def scenarios():
    """List the named scenarios (simulate --scenario NAME runs one)."""
    from hotshard.sim.scenarios import SCENARIOS

    for sc in SCENARIOS.values():
        click.echo(f"{sc.name:<22} {sc.summary}")


@simulate.command("replay")
@click.argument("run_path", metavar="RUN.json")
@_RUN_PROFILE
@_placement_options("the one the run records, else kafka")
@_outputs("the replayed observations")
def replay(run_path, profile_option, partitioner, workers, seed, as_json, output, plot):
    """Calibrate the model from a measured run, simulate the same run, and print predicted
    against measured per shard.

    RUN.json: observations from drive, Locust or observe (per-shard CPU and requests,
    service-time percentiles). The keys, service and arrivals are the run's; to change the
    scale or the mitigations, use `hotshard simulate like`.

    \b
    Examples:
      hotshard simulate replay run.json
      hotshard simulate replay run.json --profile profile.json --json -o replayed.json
    """
    from hotshard.observations import load
    from hotshard.render import calibration_text, comparison_text
    from hotshard.sim.calibrate import calibrate, compare
    from hotshard.sim.calibrate import replay as replay_run

    _check_outputs(output, plot)
    run = load(run_path)
    cal = calibrate(run, profile=profile_option, partitioner=partitioner, workers=workers,
                    where=run_path)
    predicted = replay_run(cal, seed=seed)
    if _written(predicted, output, plot, as_json):
        return
    click.echo(calibration_text(cal))
    click.echo("")
    copies = predicted.extra.get("simulation", {}).get("replicates", 1)
    click.echo(f"Replay of {run_path} ({run.duration_s:g} s at {cal.rps:,.4g} req/s; the "
               f"model's percentiles pooled over {copies} simulated runs of that length):")
    click.echo(comparison_text(compare(run, predicted)))
    _said_written(output, plot)


@simulate.command("like")
@click.argument("run_path", metavar="RUN.json")
@_RUN_PROFILE
@_scale_options("the run's", "the run's")
@_placement_options("the one the run records, else kafka")
@_MITIGATIONS
@_DETECT
@detection_options("or the run's")
@_SLO
@_outputs("the predicted observations")
def like(run_path, profile_option, rps, duration, shards, partitioner, workers, split_hot,
         replicas, cache_hit, hot_keys, coalesce, detect, hot_window, hot_share, apply_time,
         slo_ms, seed, as_json, output, plot):
    """Calibrate from a measured run, then simulate this service at another scale (--rps,
    --shards, --duration) with the mitigations given.

    With --detect the mitigations follow the run's own hot-key rule (its detection, its
    events, and its mitigations when none are given), each flag given over the run's value.

    \b
    Examples:
      hotshard simulate like run.json --rps 3000 --shards 64 --split-hot 1:8
      hotshard simulate like run.json --detect --hot-window 2s --slo-ms 20
    """
    from hotshard.mitigations import Mitigations
    from hotshard.observations import load
    from hotshard.render import calibration_text, observed_shards_text
    from hotshard.sim.calibrate import calibrate, predict_like

    _check_outputs(output, plot)
    ctx = click.get_current_context()
    detection_from(detect, {name: ctx.params[name] for name in (
        "hot_window", "hot_share", "apply_time")})   # a detection flag needs --detect
    run = load(run_path)
    cal = calibrate(run, profile=profile_option, partitioner=partitioner, workers=workers,
                    where=run_path)
    mitigations = Mitigations(split_keys=split_hot[0] if split_hot else 0,
                              split_into=split_hot[1] if split_hot else 1,
                              replicas=replicas or 1, cache_hit=cache_hit, hot_keys=hot_keys,
                              coalesce=bool(coalesce))
    detection, events = None, ()
    if detect:
        from hotshard.sim.calibrate import like_detection

        taken = like_detection(run, mitigations, where=run_path, window_s=hot_window,
                               hot_share=hot_share, apply_s=apply_time)
        detection, events, mitigations = taken.detection, taken.events, taken.mitigations
        for text in taken.notes:
            note(text)
    predicted = predict_like(cal, rps=rps, shards=shards, duration=duration,
                             mitigations=mitigations, seed=seed, detection=detection,
                             hot_events=events)
    if _written(predicted, output, plot, as_json):
        return
    click.echo(calibration_text(cal))
    click.echo("")
    applied = mitigations.text() if mitigations.active else ""
    if detection is not None and mitigations.cache_hit > 0:
        applied = applied.replace(f"of the top {mitigations.hot_keys} keys'", "of a hot key's")
    click.echo(observed_shards_text(
        predicted, f"Predicted at {predicted.rate_rps:,.4g} req/s on "
                   f"{len(predicted.shards)} shards, runs of {predicted.duration_s:g} s"
                   + (f", {applied}" if applied else "") + ":"))
    if detection is not None:
        click.echo(f"detection: {detection.text()}")
        _transients(predicted, slo_ms)
    _said_written(output, plot)


def _written(predicted, output, plot, as_json) -> bool:
    """The model's observations written where asked; True when --json printed them (and
    nothing else is to be printed)."""
    if output:
        predicted.save(output)
    if plot:
        from hotshard.report.observations_plot import plot_observations

        plot_observations(predicted, plot)
    if as_json:
        click.echo(json.dumps(predicted.to_dict()))
    return as_json


def _said_written(output, plot) -> None:
    for target in (output, plot):
        if target:
            click.echo(f"wrote {target}")


def _transients(obs, slo_ms) -> None:
    """Each injected event's transient (onset, detection, relief, time above --slo-ms)."""
    from hotshard.diagnose.transient import event_transients, transient_lines

    transients = event_transients(obs, slo_ms=slo_ms)
    if transients:
        click.echo("")
    for t in transients:
        for line in transient_lines(t):
            click.echo(line)
    if not transients and obs.actions:
        from hotshard.diagnose.transient import action_lines

        click.echo("")
        for line in action_lines(obs.actions):
            click.echo(line)


def _resolve(scenario, given, values) -> dict:
    """The scenario's options with every explicitly given option on top (the library's
    ``scenario_options``), from click's values."""
    from hotshard.sim.scenarios import SCENARIO_OPTIONS, scenario_options

    explicit = {key: values[key] for key in SCENARIO_OPTIONS if key in given}
    if values.get("profile_path"):
        explicit["profile"] = values["profile_path"]
    return scenario_options(scenario, **explicit)


def _run(options, given, *, hot_events, cache_size, hit_ms, cache_hit, hot_keys, read_share,
         seed, scenario, label, detection=None):
    """The simulation the flags ask for (``sim.scenarios.run_simulation``), its notes said."""
    from hotshard.cli._console import ProgressBar
    from hotshard.sim.scenarios import run_simulation

    # a profile's head keys on their timelines in real time, as its arrivals come: a run
    # shorter than the profile sees its first hours as they happened
    options = {**options, "cache_size": cache_size, "hit_ms": hit_ms, "cache_hit": cache_hit,
               "hot_keys": hot_keys, "timelines": "real-time"}
    with ProgressBar(True) as bar:   # a long simulation says how far it is
        sim = run_simulation(options, scenario=scenario, rate_given="rps" in given,
                             duration_given="duration" in given, hot_events=hot_events,
                             read_share=read_share, seed=seed, label=label,
                             detection=detection, progress=bar.callback)
    for text in sim.notes:
        note(text)
    return sim.result
