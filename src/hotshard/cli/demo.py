"""`hotshard demo`: the incident's whole story on embedded defaults."""

from __future__ import annotations

import click


@click.command()
@click.option("--seed", type=click.IntRange(min=0), default=2026, show_default=True,
              help="Seed of the synthetic production data, the runs' arrivals and keys.")
@click.option("--quick", is_flag=True,
              help="Smaller trace, shorter runs (for CI): the same story in about half the "
                   "time, with noisier numbers.")
@click.option("-o", "--output", "report", default="report.html", show_default=True,
              metavar="REPORT.html",
              help="Where to write the HTML report; the evidence (profile, observations) goes "
                   "to REPORT-files/ beside it.")
def demo(seed, quick, report):
    """Tell the incident's story on embedded defaults (no files needed), step by step.

    Makes a production-like chat trace (heavy-tailed channels, one hosting an event),
    profiles it, predicts the hot shard, simulates the incident at full scale, then starts
    the reference service (hotshard serve) and drives it open-loop: uniform keys look fine,
    the profile's keys show the hot shard. Diagnoses the two runs, switches the mitigations
    on at run time and shows the fix, and writes report.html (its evidence in
    REPORT-files/, written only when the story completes). Each live run is repeated on
    the same requests; the headline leads with CPU and the queueing model, and states a live
    p99 comparison only when every run behind it measured its shards (not a busy machine or
    driver) and the runs' ranges are apart. About 1-1.5 min here (2 cores); --quick about
    half that. Every process it starts, it stops, also on Ctrl-C.
    """
    from hotshard.demo import run_demo

    run_demo(seed=seed, quick=quick, report=report, say=click.echo)
