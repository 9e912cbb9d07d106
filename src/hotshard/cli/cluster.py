"""`hotshard cluster up|down|status`: a local Redis Cluster to drive and measure."""

from __future__ import annotations

import click


@click.group()
def cluster():
    """Start, inspect and stop a local Redis Cluster (Debian's redis-server).

    One single-threaded redis-server process per node and 16384 CRC16 hash slots assigned
    evenly, exactly as `redis-cli --cluster create` does and as `hotshard predict -p
    redis-cluster -n N` assumes; so a hot key saturates one node's core.

    \b
    Examples:
      hotshard cluster up --nodes 3 --port 7000 --dir /tmp/rc
      hotshard cluster status --dir /tmp/rc
      hotshard predict profile.json -p redis-cluster --slots-from redis://127.0.0.1:7000
      hotshard cluster down --dir /tmp/rc
    """


@cluster.command()
@click.option("--nodes", "-n", type=click.IntRange(1, 1000), default=3, show_default=True,
              help="Master nodes (one redis-server process each).")
@click.option("--port", type=click.IntRange(1, 55535), default=7000, show_default=True,
              help="Port of the first node; node i listens on PORT+i (bus: +10000).")
@click.option("--dir", "directory", default="hotshard-cluster", show_default=True,
              help="Where the nodes keep their files and cluster.json records their pids.")
@click.option("--replicas", type=click.IntRange(0, 5), default=0, show_default=True,
              help="Replica nodes per master (ports after the masters'); reads may use them.")
@click.option("--no-persist", is_flag=True,
              help="No append-only file (default: appendonly yes, fsync everysec).")
def up(nodes, port, directory, replicas, no_persist):
    """Start N nodes on 127.0.0.1, assign the slots, wait for cluster_state:ok."""
    from hotshard.cli._console import note
    from hotshard.cluster.local import up as start

    state = start(directory, nodes=nodes, port=port, persist=not no_persist,
                  replicas=replicas)
    note(f"{nodes} masters" + (f" + {nodes * replicas} replicas" if replicas else "")
         + f" on 127.0.0.1:{state.ports[0]}-{state.ports[-1]} (pids "
         f"{', '.join(map(str, state.pids))}); stop with `hotshard cluster down --dir "
         f"{directory}`")
    click.echo(state.url)


@cluster.command()
@click.option("--dir", "directory", default="hotshard-cluster", show_default=True,
              help="The directory given to `cluster up`.")
def down(directory):
    """Stop exactly the processes `cluster up` started in DIR."""
    from hotshard.cli._console import note
    from hotshard.cluster.local import down as stop

    pids = stop(directory)
    note(f"stopped {len(pids)} node(s)" + (f" (pids {', '.join(map(str, pids))})"
                                            if pids else ": none was still running"))


@cluster.command()
@click.option("--dir", "directory", default=None,
              help="The directory given to `cluster up` [default: hotshard-cluster].")
@click.option("--url", default=None, metavar="redis://HOST:PORT",
              help="Any node of a running cluster (instead of --dir).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def status(directory, url, as_json):
    """Per node: slot ranges, ops/s, CPU seconds (from INFO), memory."""
    import json

    from hotshard.cluster.local import _load_state
    from hotshard.cluster.local import status as read

    if url is None:
        url = _load_state(directory or "hotshard-cluster").url
    nodes = read(url)
    if as_json:
        click.echo(json.dumps([n.to_dict() for n in nodes], indent=2))
        return
    click.echo(f"{'node':<22}{'slots':>7}  {'ranges':<24}{'ops/s':>8}{'CPU s':>9}"
               f"{'memory':>9}{'keys':>10}")
    for n in nodes:
        ranges = ",".join(f"{a}-{b}" for a, b in n.slots)
        click.echo(f"{n.address:<22}{n.slot_count:>7}  {ranges:<24}{n.ops_per_sec:>8}"
                   f"{n.cpu_seconds:>9.2f}{n.used_memory:>9}{n.keys:>10}")
