"""`hotshard diff`: how production's hot spots moved between two profiles of one key space."""

from __future__ import annotations

import json

import click

from hotshard.cli._options import KEY_TYPE_RULE, PARTITIONER_CHOICE, partitioner_options


@click.command(epilog=KEY_TYPE_RULE)
@click.argument("profile_a", metavar="A.json")
@click.argument("profile_b", metavar="B.json")
@click.option("--top-k", "top", type=click.IntRange(min=1),
              help="Compare the top K keys of each head [default: the smaller head].")
@click.option("--movers", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many risers and fallers to list.")
@click.option("--partitioner", "-p", type=PARTITIONER_CHOICE,
              help="Also compare the hottest shard's share under this store's placement.")
@click.option("--shards", "-n", type=click.IntRange(min=1), help="Shards / nodes / partitions.")
@partitioner_options
@click.option("--allow-disjoint", is_flag=True,
              help="Accept heads that share no key at all (every hot key replaced).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--plot", metavar="IMAGE",
              help="Draw the rank shift (slope chart of shares) to a .png, .svg or .pdf file.")
def diff(profile_a, profile_b, top, movers, partitioner, shards, key_type, allow_disjoint,
         as_json, plot, **layout):
    """Show how the hot keys moved from profile A to profile B (two days, a normal day
    against an event) of the same key space.

    Lists the keys that entered and left the head (the top K of each), the largest risers and
    fallers by share of events, the top-1 / top-10 / top-1% shares, the tail exponent's drift
    (beyond 3 combined standard errors or not), and with --partitioner the hottest shard's
    share in A and B and the keys that moved it. A key outside a head has at most that
    profile's largest tail count: its share shows as <= that floor, and changes computed with
    it are bounds (ranked as such).

    Two profiles whose heads share no key are refused (different key spaces: integers against
    text, pseudonyms against real keys) unless --allow-disjoint.

    \b
    Examples:
      hotshard diff web07.json web12.json
      hotshard diff normal.json event.json -p cassandra -n 12 --plot moved.png
      hotshard diff normal.json event.json --top-k 100 --json
    """
    from hotshard.cli._options import need_shard_count
    from hotshard.compare.diff import diff as run_diff
    from hotshard.compare.diff_text import diff_table
    from hotshard.profile.document import Profile

    if partitioner is None and shards is not None:
        raise click.UsageError("--shards goes with --partitioner: name the store")
    if partitioner is not None:
        need_shard_count(partitioner, shards, layout)
    if plot:
        from hotshard._atomic import check_writable
        from hotshard.report.image_files import image_format

        image_format(plot)
        check_writable(plot)
    a, b = Profile.load(profile_a), Profile.load(profile_b)
    part = None
    if partitioner is not None:
        from hotshard.shards.partitioners import partitioner_for

        # one typing for both, so a key lands on the same shard in A and in B
        part = partitioner_for(partitioner, shards, key_type=key_type,
                               integer_keys=a.integer_keys and b.integer_keys, **layout)
    result = run_diff(a, b, top=top, partitioner=part, movers=movers,
                      labels=(profile_a, profile_b), allow_disjoint=allow_disjoint)
    if plot:
        from hotshard.report.diff_plot import plot_diff

        plot_diff(result, plot)
    if as_json:
        click.echo(json.dumps(result.to_dict()))
    else:
        click.echo(diff_table(result, limit=movers))
        if plot:
            click.echo(f"wrote {plot}")
