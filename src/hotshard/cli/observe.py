"""`hotshard observe`: production's (or a load tool's) evidence as observations, from where
it lives: Prometheus, a Redis Cluster's own counters, k6, Locust, a dashboard's CSV."""

from __future__ import annotations

import re

import click

from hotshard.cli._options import Seconds

_REDIS_URL = re.compile(r"^redis(-cluster)?://")


class _ObserveGroup(click.Group):
    """``observe redis-cluster://HOST:PORT ...`` runs the redis-cluster source with that URL."""

    def resolve_command(self, ctx, args):
        if args and _REDIS_URL.match(args[0]):
            return "redis-cluster", self.commands["redis-cluster"], args
        return super().resolve_command(ctx, args)


def _output(func):
    func = click.option("-o", "--output", metavar="OBS.json",
                        help="Write the observations here (atomically) [default: print the "
                             "JSON].")(func)
    return click.option("--label", default=None,
                        help='What was observed [default: "production" for Prometheus, '
                             'Redis and CSV; "load test" for k6 and Locust].')(func)


def _emit(obs, output: str | None) -> None:
    """The notes on stderr, the observations to ``output`` or stdout, a one-line summary."""
    from hotshard._format import pct
    from hotshard.cli._console import note

    for message in obs.extra.get("observe", {}).get("notes", []):
        note(message)
    if output is None:
        click.echo(obs.to_json(), nl=False)
        return
    obs.save(output)
    parts = [f"{len(obs.shards)} shard(s)" if obs.shards else "no shards"]
    if obs.rate_rps is not None:
        parts.append(f"{obs.rate_rps:,.1f} req/s")
    if obs.duration_s is not None:
        parts.append(f"over {obs.duration_s:,.1f} s")
    hot = obs.hottest_shard
    total = obs.total_requests
    if hot is not None and hot.requests is not None and total:
        parts.append(f"hottest shard {hot.id}: {pct(hot.requests / total)} of the requests")
    elif hot is not None and hot.cpu is not None:
        parts.append(f"hottest shard {hot.id}: {pct(hot.cpu)} CPU")
    if obs.latency_ms is not None and obs.latency_ms.p99 is not None:
        parts.append(f"p99 {obs.latency_ms.p99:,.1f} ms")
    click.echo(f"{output}: {obs.label}: " + ", ".join(parts))


@click.group(cls=_ObserveGroup)
def observe():
    """Write observations (hotshard.observations/1) from where the evidence lives.

    Each source fills the fields it can and leaves the others out with a note saying why;
    nothing is invented. `diagnose` and `report` then read the file.

    \b
    Sources:
      observe prometheus URL --start T --end T --preset hotshard|redis|node|process
      observe redis-cluster://HOST:PORT --duration 60s
      observe k6 SUMMARY.json [--executor constant-arrival-rate]
      observe locust PREFIX
      observe csv cpu=cpu.csv requests=rates.csv --shard-pattern REGEX

    \b
    From a Prometheus URL to the diagnosis and the report:
      hotshard observe prometheus http://prom:9090 --start -1h --end now \\
          --preset hotshard -o prod.json
      hotshard diagnose prod.json --baseline test.json --profile profile.json
      hotshard report prod.json test.json --profile profile.json -o report.html
    """


@observe.command()
@click.argument("url", metavar="URL")
@click.option("--start", required=True, metavar="TIME",
              help="Window start: RFC 3339 (2026-12-04T10:00:00Z), relative (-30m, now-2h), "
                   "now, or Unix seconds.")
@click.option("--end", default="now", show_default=True, metavar="TIME",
              help="Window end, in the same forms.")
@click.option("--preset", type=click.Choice(["hotshard", "redis", "node", "process"]),
              help="Queries for what you run: hotshard (hotshard serve's /metrics), redis "
                   "(redis_exporter: commands and CPU per node), node (node_exporter: CPU "
                   "per machine), process (process_cpu_seconds_total per instance).")
@click.option("--shard-label", metavar="LABEL",
              help="The label naming the shard [default: the preset's, else shard].")
@click.option("--node-label", metavar="LABEL",
              help="The label naming the machine or process hosting a shard (node).")
@click.option("--requests", "requests_q", metavar="PROMQL",
              help="Requests per shard: a counter selector (exact increase over the window) "
                   "or PromQL ($__range is the window), e.g. "
                   "'sum by (shard) (increase(http_requests_total[$__range]))'.")
@click.option("--cpu", "cpu_q", metavar="PROMQL",
              help="CPU per shard: a CPU-seconds counter selector, or PromQL giving a busy "
                   "fraction of one core, e.g. 'rate(process_cpu_seconds_total[$__range])'.")
@click.option("--latency", "latency_q", metavar="PROMQL",
              help="A latency histogram: its _bucket selector (seconds), or bucket rates by "
                   "le; histogram_quantile gives the run's and each shard's percentiles.")
@click.option("--errors", "errors_q", metavar="PROMQL",
              help="Failed requests per shard (as --requests).")
@click.option("--timeout", type=Seconds(), default=10.0, show_default=True,
              help="How long one query may take.")
@_output
def prometheus(url, start, end, preset, shard_label, node_label, requests_q, cpu_q,
               latency_q, errors_q, timeout, label, output):
    """Per-shard requests, CPU, errors and latency over a window, from Prometheus.

    URL is the Prometheus server (http://HOST:9090). Requests and CPU given as counter
    selectors are counted exactly between the first and the last scrape inside the window;
    PromQL expressions are evaluated at the window's end.

    \b
    Examples:
      hotshard observe prometheus http://127.0.0.1:9090 --start -30m --preset hotshard \\
          -o prod.json
      hotshard observe prometheus http://prom:9090 --start 2026-12-04T10:00:00Z \\
          --end 2026-12-04T11:00:00Z --preset redis -o redis-prod.json
      hotshard observe prometheus http://prom:9090 --start -1h --shard-label pod \\
          --requests 'http_server_requests_seconds_count{app="chat"}' \\
          --cpu 'container_cpu_usage_seconds_total{container="chat"}' -o prod.json
    """
    from hotshard.observe._common import parse_window
    from hotshard.observe.prometheus import observe_prometheus

    if output is not None:
        from hotshard._atomic import check_writable

        check_writable(output)
    a, b = parse_window(start, end)
    obs = observe_prometheus(url, start=a, end=b, preset=preset, shard_label=shard_label,
                             node_label=node_label, cpu=cpu_q, requests=requests_q,
                             latency=latency_q, errors=errors_q,
                             label=label or "production", timeout=timeout)
    _emit(obs, output)


@observe.command("redis-cluster")
@click.argument("url", metavar="redis-cluster://[:PASSWORD@]HOST:PORT")
@click.option("--duration", type=Seconds(), default=60.0, show_default=True,
              help="The window: every node's INFO now and after this long (60, 60s, 5m).")
@click.option("--timeout", type=Seconds(), default=5.0, show_default=True,
              help="How long each node may take to answer.")
@click.option("--hot-keys", type=click.IntRange(min=0), default=0, show_default=True,
              metavar="N", help="Also read the N keys with the highest LFU counters "
              "(OBJECT FREQ, as redis-cli --hotkeys; needs an LFU maxmemory-policy) before and "
              "after the window, each with the rate range its counters can mean (16: "
              "--hotkeys' own count).")
@click.option("--max-keys", type=click.IntRange(min=1), default=100_000, show_default=True,
              help="With --hot-keys: keys scanned on each node at most.")
@_output
def redis_cluster(url, duration, timeout, hot_keys, max_keys, label, output):
    """Every master's commands, CPU and keyspace hits over a window, from the nodes' INFO.

    Shards are the masters, numbered as `predict --slots-from` numbers them, with their
    address as node. Without a password in the URL, REDISCLI_AUTH is used.

    --hot-keys N adds the cluster's hot keys as evidence (extra.hot_keys): Redis's LFU
    counters are logarithms of hits (8 bits, saturating near 300 K hits), read before and
    after the window, so each key gets the range of rates its counters can mean. Under a
    policy that is not LFU there are no counters, and the note says so.

    \b
    Example:
      hotshard observe redis-cluster://127.0.0.1:7000 --duration 60s -o redis-prod.json
      hotshard observe redis-cluster://127.0.0.1:7000 --duration 30s --hot-keys 16
    """
    from hotshard.observe.redis_cluster import observe_redis_cluster

    if output is not None:
        from hotshard._atomic import check_writable

        check_writable(output)
    obs = observe_redis_cluster(url, duration=duration, timeout=timeout,
                                label=label or "production", hot_keys=hot_keys,
                                max_keys=max_keys)
    _emit(obs, output)


@observe.command()
@click.argument("reply", metavar="REPLY")
@click.option("--shard", default="0", show_default=True,
              help="The shard (node) the reply came from, as the other evidence numbers it.")
@click.option("--node", metavar="HOST:PORT", help="The node's address, kept beside the shard.")
@_output
def hotkeys(reply, shard, node, label, output):
    """A Redis 8.6 HOTKEYS GET reply saved to a file: the node's top keys by CPU time and
    network bytes, each as a share of the node's totals (extra.hot_keys).

    REPLY is what `redis-cli HOTKEYS GET` prints (or its --json). A session started with
    SAMPLE ratio measured one command in ratio: each key's totals are scaled by it (an
    estimate). Read on Redis's documented examples only (no Redis 8.6 here); one file per
    node, --shard naming it.

    \b
    Example:
      redis-cli -p 7000 HOTKEYS START METRICS 2 CPU NET DURATION 30
      sleep 30; redis-cli -p 7000 HOTKEYS GET > node0.txt
      hotshard observe hotkeys node0.txt --shard 0 -o hot.json
    """
    from hotshard.observe.hotkeys_reply import read_hotkeys_reply

    if output is not None:
        from hotshard._atomic import check_writable

        check_writable(output)
    _emit(read_hotkeys_reply(reply, label=label or "production", shard=shard, node=node),
          output)


@observe.command()
@click.argument("summary", metavar="SUMMARY.json")
@click.option("--executor", type=click.Choice(["constant-arrival-rate", "ramping-arrival-rate",
                                               "constant-vus", "ramping-vus",
                                               "per-vu-iterations", "shared-iterations",
                                               "externally-controlled"]),
              help="The scenario's executor (k6 does not write it into the summary): decides "
                   "the load model, open (arrival-rate) or closed (VUs, iterations).")
@click.option("--shard-tag", metavar="TAG",
              help="A request tag naming the shard: its http_reqs{TAG:ID} and "
                   "http_req_duration{TAG:ID} sub-metrics become shards.")
@_output
def k6(summary, executor, shard_tag, label, output):
    """A k6 run's end-of-test summary: rate, latency percentiles, failures, load model.

    SUMMARY.json is `k6 run --summary-export FILE`'s file or handleSummary's data
    (JSON.stringify(data)).

    \b
    Example:
      hotshard observe k6 summary.json --executor constant-arrival-rate -o test.json
    """
    from hotshard.observe.k6 import read_k6_summary

    if output is not None:
        from hotshard._atomic import check_writable

        check_writable(output)
    _emit(read_k6_summary(summary, label=label or "load test", executor=executor,
                          shard_tag=shard_tag), output)


@observe.command()
@click.argument("prefix", metavar="PREFIX")
@_output
def locust(prefix, label, output):
    """A Locust run's `--csv PREFIX` files: rate, latency percentiles, failures, users.

    \b
    Example:
      locust -f locustfile.py --headless -u 50 -t 60s --csv run --host http://...
      hotshard observe locust run -o test.json
    """
    from hotshard.observe.locust import read_locust_csv

    if output is not None:
        from hotshard._atomic import check_writable

        check_writable(output)
    _emit(read_locust_csv(prefix, label=label or "load test"), output)


@observe.command("csv")
@click.argument("files", nargs=-1, required=True, metavar="[METRIC=]FILE...")
@click.option("--metric", type=click.Choice(["cpu", "requests", "p99"]),
              help="What a FILE without METRIC= holds: cpu (busy fraction or percent per "
                   "shard), requests (per-second rates), p99 (per interval).")
@click.option("--shard-pattern", metavar="REGEX",
              default=r'shard="?(?P<shard>[^",}\s]+)', show_default=True,
              help="Takes the shard out of each column's name: group 'shard', else the first "
                   "group.")
@click.option("--unit", type=click.Choice(["fraction", "percent", "s", "ms", "us"]),
              help="The values' unit when they carry none [default: cpu by its range, p99 ms].")
@click.option("--start", metavar="TIME", help="Keep rows from this time (as prometheus').")
@click.option("--end", metavar="TIME", help="Keep rows up to this time.")
@_output
def csv_(files, metric, shard_pattern, unit, start, end, label, output):
    """A dashboard panel's CSV (Grafana: Inspect, Data, Download CSV) per shard.

    One column per series; the shard comes out of each column's name by --shard-pattern.
    Several files combine: cpu=cpu.csv requests=rates.csv p99=p99.csv.

    \b
    Example:
      hotshard observe csv cpu=cpu.csv requests=rps.csv \\
          --shard-pattern 'pod="chat-(?P<shard>\\d+)"' -o prod.json
    """
    from hotshard.observe._common import parse_time
    from hotshard.observe.dashboard_csv import read_dashboard_csv

    pairs = []
    for item in files:
        name, sep, path = item.partition("=")
        if sep and name in ("cpu", "requests", "p99"):
            pairs.append((name, path))
        elif metric is None:
            raise click.UsageError(f"say what {item} holds: cpu={item}, requests={item}, "
                                   f"p99={item}, or --metric")
        else:
            pairs.append((metric, item))
    if output is not None:
        from hotshard._atomic import check_writable

        check_writable(output)
    obs = read_dashboard_csv(pairs, shard_pattern=shard_pattern, unit=unit,
                             start=None if start is None else parse_time(start, what="start"),
                             end=None if end is None else parse_time(end, what="end"),
                             label=label or "production")
    _emit(obs, output)
