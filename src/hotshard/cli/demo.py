"""`hotshard demo`: the story so far on embedded defaults."""

from __future__ import annotations

import click


@click.command()
@click.option("--seed", type=click.IntRange(min=0), default=2026, show_default=True,
              help="Seed of the synthetic production data.")
def demo(seed):
    """Run the end-to-end story on embedded defaults (no files needed).

    Synthesises a day of chat traffic whose channel popularity is heavy-tailed, as live
    streaming is, then shows what a uniform-key load test hides: the head's share of traffic,
    the fitted tail that hotshard profiles are built from, and the hot shard it predicts.
    """
    from hotshard.demo import run_demo

    click.echo(run_demo(seed=seed))
