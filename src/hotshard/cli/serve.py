"""`hotshard serve`: the reference chat-history service."""

from __future__ import annotations

import click

from hotshard.cli._options import PARTITIONER_CHOICE, Seconds, partitioner_options
from hotshard.mitigations import MAX_SERVICE_REPLICAS, MAX_SPLIT_BUCKETS
from hotshard.shards import KEY_TYPE_RULE


def _channel_list(ctx, param, value):
    if value is None or value == "hot":
        return None
    from hotshard.errors import HotshardError
    from hotshard.service.router import check_channel

    channels = tuple(c.strip() for c in value.split(",") if c.strip())
    if not channels:
        raise click.BadParameter("give 'hot' or comma-separated channel ids")
    try:
        for channel in channels:
            check_channel(channel)
    except HotshardError as e:
        raise click.BadParameter(str(e)) from None
    return channels


EPILOG = f"""\b
Mitigations apply to --mitigate: a list, or 'hot' (default) for the channels the
Space-Saving sketch behind GET /hotkeys reports above --hot-share of recent requests.
Switch them at run time with the admin token printed at start:
  curl -X POST localhost:8080/admin/mitigations -H "Authorization: Bearer $TOKEN" \\
       -H 'Content-Type: application/json' -d '{{"coalesce": true}}'
The admin routes need that token, a Host naming the service and no foreign Origin, so a web
page the operator visits cannot switch mitigations.

\b
API (OpenAPI at /docs): POST/GET /channels/{{channel}}/messages, GET /stats, /metrics,
/hotkeys, /health, GET/POST /admin/mitigations. Every answer to a channel request, a
failure too (503 shard down, 504 past --shard-timeout), has X-Shard; /stats also gives the
placement (partitioner, shard_count, key_type, layout).

{KEY_TYPE_RULE}"""


@click.command(epilog=EPILOG)
@click.option("--shards", "-n", type=click.IntRange(1, 1024), default=4, show_default=True,
              help="Shard worker processes (one SQLite database each).")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="HTTP port (0: any free port; the URL is printed).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Loopback by default: any other address opens the "
              "chat API (read and write any channel) and the metrics to the network.")
@click.option("--data", "data_dir", type=click.Path(file_okay=False), default="hotshard-data",
              show_default=True, help="Directory of the shards' databases (created if "
              "missing; reopened with the same layout).")
@click.option("--partitioner", "-p", type=PARTITIONER_CHOICE, default="kafka",
              show_default=True, help="The store whose placement the service uses: X-Shard "
              "is what `hotshard shard KEY -p P -n N` prints.")
@partitioner_options
@click.option("--store", metavar="redis-cluster://HOST:PORT",
              help="Keep channels in a Redis Cluster (a stream per channel, nodes as shards) "
                   "instead of SQLite shard processes.")
@click.option("--load", "load_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="Fill the shards from `hotshard generate` output before serving "
              "(every row one message; all or nothing: a failed load leaves --data as it was).")
@click.option("--skip-bad-rows", is_flag=True,
              help="With --load: leave out rows without a channel_id (NULL) and say how many "
              "(refused by default: a row that cannot be placed is lost data).")
@click.option("--append", is_flag=True,
              help="With --load: add the file's rows to a data directory that already holds "
              "messages (refused without it: a second load would duplicate them).")
@click.option("--admin-token", envvar="HOTSHARD_ADMIN_TOKEN", metavar="TOKEN",
              show_envvar=True,
              help="Token the admin routes require (Authorization: Bearer TOKEN); default: "
              "a new random one, printed at start. Prefer the environment variable: a "
              "command line is visible to every user in `ps`.")
@click.option("--cost-ms", type=click.FloatRange(0, 1000), default=0.0, show_default=True,
              help="CPU ms each read burns in its shard (a heavier production query), so a "
              "hot shard saturates at laptop rates.")
@click.option("--shard-timeout", type=Seconds(), default=10.0, show_default=True,
              help="Longest wait for a shard's answer: past it the request gets 504 (with "
              "X-Shard), so a frozen or hopelessly backed-up shard fails visibly and "
              "attributably instead of holding its requests.")
@click.option("--max-body", "max_body_bytes", type=click.IntRange(1, 1 << 20), default=4096,
              show_default=True, help="Largest message body in bytes (413 above).")
@click.option("--split-into", "split", type=click.IntRange(1, MAX_SPLIT_BUCKETS), default=1,
              show_default=True,
              help="Mitigation: split each hot channel over S time-bucket sub-partitions on "
              "different shards (1: off).")
@click.option("--split-bucket", type=Seconds(), default=1.0, show_default=True,
              help="Length of one time bucket of a split channel.")
@click.option("--replicas", type=click.IntRange(1, MAX_SERVICE_REPLICAS), default=1,
              show_default=True,
              help="Mitigation: hot channels' reads spread over R read nodes per shard, the "
              "primary included (1: no replica; R - 1 read-only replica workers), as in "
              "predict and simulate.")
@click.option("--cache-ttl", type=Seconds(), default=None,
              help="Mitigation: gateway cache of hot channels' pages, this TTL (e.g. 1s).")
@click.option("--coalesce", is_flag=True,
              help="Mitigation: merge identical in-flight reads of hot channels.")
@click.option("--mitigate", "hot_channels", callback=_channel_list, metavar="hot|C1,C2,...",
              default="hot", show_default=True, help="Which channels the mitigations apply to.")
@click.option("--hot-share", type=click.FloatRange(0, 1, min_open=True), default=0.05,
              show_default=True, help="With --mitigate hot: the guaranteed share of recent "
              "requests that makes a channel hot.")
@click.option("--hot-window", type=Seconds(), default=10.0, show_default="10s",
              help="With --mitigate hot: how much recent traffic the hot-key sketch holds "
              "(1s to 1h); a shorter window finds an event sooner and forgets it sooner. "
              "No channel is hot while the window holds fewer than 100 requests.")
def serve(shards, port, host, data_dir, partitioner, key_type, num_tokens, ring_seed,
          ring_file, slots_map, routing_shards, map_file, chunks_file, store, load_file,
          skip_bad_rows, append,
          admin_token, cost_ms, shard_timeout, max_body_bytes, split, split_bucket, replicas,
          cache_ttl, coalesce, hot_channels, hot_share, hot_window):
    """Run the reference chat-history service: an HTTP gateway over N shard processes.

    Channels are placed on shards by a real store's partitioner; each shard is its own
    process with its own SQLite database (WAL, synchronous=FULL: a write is acknowledged only
    once committed), restarted by a supervisor if it dies. GET /stats shows each shard's CPU,
    queue depth and latency, so a hot channel's shard is plain to see.

    \b
    Examples:
      hotshard serve --shards 4 --port 8080 --data /tmp/chat
      hotshard generate examples/incident.profile.json --messages 1e6 -o m.parquet
      hotshard serve --data /tmp/chat2 --load m.parquet --cost-ms 2
      hotshard serve --data /tmp/chat2 --load more.parquet --append
      hotshard serve --data /tmp/chat --replicas 3 --coalesce --cache-ttl 1s
    """
    import importlib.util
    from pathlib import Path

    from hotshard.cli._console import ProgressBar, note, warn
    from hotshard.errors import HotshardError

    missing = [m for m in ("fastapi", "uvicorn", "prometheus_client")
               if importlib.util.find_spec(m) is None]
    if missing:
        raise HotshardError(f"hotshard serve needs {', '.join(missing)}: "
                            "pip install 'hotshard[serve]' (make demo installs it)")
    from hotshard.mitigations import Mitigations
    from hotshard.service.server import ServeConfig, placement
    from hotshard.service.server import serve as run

    # the flags' one rule the library cannot see: whether -p was given at all
    if store is not None and click.get_current_context().get_parameter_source(
            "partitioner") == click.core.ParameterSource.COMMANDLINE \
            and partitioner != "redis-cluster":
        raise click.UsageError("--store places channels by the cluster's slot map: give "
                               "no other --partitioner")
    shards_given = click.get_current_context().get_parameter_source("shards") == \
        click.core.ParameterSource.COMMANDLINE
    partitioner, shards, layout = placement(
        partitioner, shards, shards_given=shards_given, store=store, key_type=key_type,
        num_tokens=num_tokens, ring_seed=ring_seed, ring_file=ring_file, slots_map=slots_map,
        map_file=map_file, chunks_file=chunks_file, routing_shards=routing_shards)
    mitigations = Mitigations(split_into=split,
                              split_bucket_ms=max(1, round(split_bucket * 1000)),
                              replicas=replicas, cache_ttl_s=cache_ttl or 0.0,
                              coalesce=coalesce, channels=hot_channels, hot_share=hot_share)
    config = ServeConfig(Path(data_dir), shards=shards, partitioner=partitioner,
                         layout=layout,
                         host=host, port=port, cost_ms=cost_ms, max_body_bytes=max_body_bytes,
                         mitigations=mitigations, load=load_file, store=store, append=append,
                         skip_bad_rows=skip_bad_rows,
                         admin_token=admin_token, shard_timeout_s=shard_timeout,
                         hot_window_s=hot_window)

    bar = ProgressBar(enabled=True)

    def progress(done: int, total: int) -> None:
        bar("loading messages", done / total)

    def loaded(result) -> None:
        bar.__exit__(None, None, None)
        spread = ", ".join(str(n) for n in result.per_shard)
        note(f"loaded {result.messages:,} messages in {result.seconds:.1f} s "
             f"({result.messages / max(result.seconds, 1e-9):,.0f}/s); per shard: {spread}")
        if result.skipped_rows:
            note(f"skipped {result.skipped_rows:,} rows without a channel_id (--skip-bad-rows)")

    from hotshard.cluster.local import redact_url

    served = []

    def listening(up) -> None:  # a hotshard.service.server.Listening
        served.append(up)
        url = up.url
        on = [name for name, value in (("split", split > 1), ("replicas", replicas > 1),
                                       ("cache", cache_ttl), ("coalesce", coalesce)) if value]
        which = "hot channels" if hot_channels is None else ", ".join(hot_channels)
        where = f"the Redis Cluster at {redact_url(store)}" if store else \
            f"{config.shards or 'the layout file`s'} shards ({partitioner}) in {data_dir}"
        click.echo(f"serving {where} on {url}  (docs {url}/docs, stats {url}/stats; Ctrl-C "
                   "stops)", err=True)
        if up.generated:   # two lines: the token alone, then how to use it
            click.echo(f"admin token: {up.admin_token}  (--admin-token or "
                       "HOTSHARD_ADMIN_TOKEN sets your own)", err=True)
            click.echo(f"  POST {url}/admin/mitigations with -H 'Authorization: Bearer "
                       "<the token>'", err=True)
        else:
            note("admin token: the one given (--admin-token / HOTSHARD_ADMIN_TOKEN)")
        if not up.loopback:
            warn(f"listening on {host}, beyond this machine: anyone who can reach it can "
                 "read and write every channel's messages and read /stats, /hotkeys and "
                 "/metrics (/admin needs the token); use --host 127.0.0.1 unless the "
                 "network is yours")
        if on:
            note(f"mitigations on for {which}: {', '.join(on)}")
        click.echo(url, err=False)

    from hotshard.cli import Terminated
    from hotshard.service.server import LoadInterrupted

    try:
        with bar:
            run(config, on_listening=listening, on_progress=progress if load_file else None,
                on_loaded=loaded)
    except LoadInterrupted as e:
        # the load did not happen: an interrupted command, exit 130 (143 for SIGTERM)
        warn(str(e))
        raise e.interruption from None
    except (KeyboardInterrupt, Terminated):
        if not served:  # stopped while starting: nothing was served, the start was undone
            warn("stopped before the service started: nothing was served")
            raise
        # once serving, Ctrl-C / SIGTERM is how a service is stopped: a clean exit
    note(f"stopped; every shard shut down, data kept in {data_dir}")
