"""Option types and shared options of the command line, in one place (Locust's
``argument_parser.py`` habit): values are checked as they are parsed, so commands get clean ones.

Nothing here imports numpy or the library's numeric modules: ``--help`` stays instant.
"""

from __future__ import annotations

import click

from hotshard.profile import ALTERNATIVE_NAMES
from hotshard.shards import KEY_TYPE_RULE, PARTITIONERS

PARTITIONER_CHOICE = click.Choice(PARTITIONERS)
KEY_TYPE_CHOICE = click.Choice(["text", "bigint"])
# the classic distributions a key source may name instead of a profile (workload.sampler)
DIST_SPECS = ("uniform:N, zipf:S:N, hotspot:FRAC_KEYS:FRAC_OPS:N, latest:N[:S], "
              "scrambled_zipfian:N")


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
    """A duration: 90, 90s, 500ms, 15m, 2h, 1d."""

    name = "DURATION"

    def __init__(self, *, zero: bool = False) -> None:
        self.zero = zero   # 0 is a duration this option takes (none at all)

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        from hotshard.errors import HotshardError
        from hotshard.workload.timing import parse_duration

        try:
            seconds = parse_duration(value)
        except HotshardError as exc:
            self.fail(str(exc), param, ctx)
        if seconds < 0 or (seconds == 0 and not self.zero):
            self.fail("must be >= 0" if self.zero else "must be > 0", param, ctx)
        return seconds


class HotEventSpec(click.ParamType):
    """KEY:SHARE:START:END, parsed by the library's ``parse_event`` as it is read."""

    name = "KEY:SHARE:START:END"

    def convert(self, value, param, ctx):
        from hotshard.errors import HotshardError
        from hotshard.workload.timing import HotEvent, parse_event

        if isinstance(value, HotEvent):
            return value
        try:
            return parse_event(value)
        except HotshardError as exc:
            self.fail(str(exc), param, ctx)


class SplitSpec(click.ParamType):
    """K:S, e.g. 10:8 (the top K keys each split into S sub-partitions)."""

    name = "K:S"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        try:
            k, s = (int(x) for x in str(value).split(":"))
        except ValueError:
            self.fail(f"expected K:S such as 10:8, got {value!r}", param, ctx)
        if k < 1 or s < 2:
            self.fail(f"K must be >= 1 and S >= 2, got {value!r}", param, ctx)
        return k, s


# -- a library parameter in the words of the command that ran ---------------------------------

# library parameters whose option has another name on the command line (``${rate}`` in a
# library message is ``--rps`` there); any other parameter is named as its option's dest
LIBRARY_PARAMETERS = {"rate": ("rps",), "read_ratio": ("read_share",), "events": ("messages",),
                      "profile": ("profile_option", "profile_path"), "load": ("load_file",),
                      "baseline": ("baseline_path",)}


def flag_names(ctx: click.Context) -> dict[str, str]:
    """Each parameter of the running command (and of the commands around it) by its flag:
    ``{"rps": "--rps", "read_share": "--read-share", "profile_path": "PROFILE", ...}``, with
    ``LIBRARY_PARAMETERS`` mapped through. The one place a library error's ``${name}``
    becomes a flag (``HotshardError.worded``)."""
    names: dict[str, str] = {}
    chain = []
    while ctx is not None:
        chain.append(ctx)
        ctx = ctx.parent
    for each in reversed(chain):   # the innermost command's own names win
        for param in each.command.params:
            if param.name is None:
                continue
            if isinstance(param, click.Option):
                names[param.name] = max(param.opts, key=len)
            else:
                names[param.name] = param.make_metavar(each)
    for library, dests in LIBRARY_PARAMETERS.items():
        for dest in dests:
            if dest in names:
                names.setdefault(library, names[dest])
    return names


# -- options declared once, each command giving its own help where its use differs -----------

def dist_option(instead: str = "instead of a PROFILE"):
    """``--dist SPEC``: a key source of classic keys, the other being a PROFILE argument."""
    return click.option("--dist", metavar="SPEC", help=f"Classic keys {instead}: {DIST_SPECS}.")


def rps_option(help: str):
    """``--rps R``: the request rate, requests (messages) per second, in every command."""
    return click.option("--rps", type=click.FloatRange(min=0, min_open=True), metavar="R",
                        help=help)


def read_share_option(help: str):
    """``--read-share F``: the fraction of requests that are reads."""
    return click.option("--read-share", type=click.FloatRange(0, 1), metavar="F", help=help)


def quiet_option(help: str = "No progress bar."):
    return click.option("-q", "--quiet", is_flag=True, help=help)


def cached_keys_option():
    """``--cached-keys K``: how many top keys a local cache (``--cache-hit``) holds."""
    return click.option("--cached-keys", "hot_keys", type=click.IntRange(min=1), default=10,
                        show_default=True, metavar="K",
                        help="How many top keys --cache-hit applies to.")


def need_shard_count(partitioner: str, shards: int | None, layout: dict) -> None:
    """Before any file is read, in the flags' words: stores whose layout comes from a file
    know their shard count, the others need -n; the map partitioner is nothing without its
    file. (``partitioner_for`` checks the same in the library's words.)"""
    if partitioner == "map" and not layout.get("map_file"):
        raise click.UsageError("--partitioner map needs --map FILE (key,shard lines)")
    from hotshard.shards import LAYOUT_OPTION

    if shards is None and not layout.get(LAYOUT_OPTION.get(partitioner, "")):
        raise click.UsageError(f"say how many shards: --shards N (the {partitioner} "
                               "partitioner needs it)")


def partitioner_options(func):
    """Options shared by `shard` and `predict`: how the store lays out its shards."""
    opts = [
        click.option("--key-type", type=KEY_TYPE_CHOICE,
                     help="How the store types the key [default: by the key-type rule below]."),
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
    return stacked(opts)(func)


def stacked(opts):
    """A decorator applying ``opts`` so that ``--help`` lists them in the order given."""
    def decorate(func):
        for opt in reversed(opts):
            func = opt(func)
        return func
    return decorate


def detection_options(defaults: str = ""):
    """``--hot-window``, ``--hot-share`` and ``--apply-time``: the detection ``--detect``
    models, in the words serve uses for it (declared once for `simulate` and `predict`).
    ``defaults``: what a flag left out means beyond serve's own default (e.g. "or the run's
    with simulate like")."""
    more = f", {defaults}" if defaults else ""
    opts = [
        click.option("--hot-window", type=Seconds(), metavar="DURATION",
                     help="With --detect: the sliding window hot keys are counted over, 1s "
                          f"to 1h (serve --hot-window) [default: 10s{more}]."),
        click.option("--hot-share", type=float, metavar="F",
                     help="With --detect: the share of the window that makes a key hot, in "
                          f"(0, 1] (serve --hot-share) [default: 0.05{more}]."),
        click.option("--apply-time", type=Seconds(zero=True), metavar="DURATION",
                     help="With --detect: how long an action takes to apply once a key is "
                          "found hot (serve's read mitigations: 0; a store that moves data "
                          "to split: longer) [default: 0]."),
    ]
    return stacked(opts)


def detection_from(detect: bool, given: dict):
    """The Detection ``--detect`` asks for (None without it): the flags ``given`` (their
    values, None when left out) over serve's defaults. A detection flag without --detect is
    a usage error: it would silently do nothing. (``simulate like`` takes the run's rule instead:
    ``sim.calibrate.like_detection``.)"""
    loose = [name for name in ("hot_window", "hot_share", "apply_time")
             if given.get(name) is not None]
    if loose and not detect:
        raise click.UsageError(f"--{loose[0].replace('_', '-')} sets the detection that "
                               "--detect models: add --detect")
    if not detect:
        return None
    from hotshard.detect.policy import Detection

    return Detection().overridden(
        window_s=given.get("hot_window"), hot_share=given.get("hot_share"),
        apply_s=given.get("apply_time"))


__all__ = ["KEY_TYPE_RULE", "PARTITIONER_CHOICE", "AlternativeList", "Count", "HotEventSpec",
           "Seconds",
           "SplitSpec", "detection_from", "detection_options", "need_shard_count",
           "partitioner_options"]


# -- the glossary: every flag of every command, one meaning each --------------------------------
#
# A flag means one thing in every command that has it, and one thing has one flag. Where two
# ideas are close but differ, they have different names, and the entry says which is which.
# tests/cli/test_vocabulary.py fails when a command's flag is not here, takes another kind of
# value than its entry says, or is one of the retired spellings below.

GLOSSARY: dict[str, tuple[str, frozenset[str]]] = {}


def _term(flag: str, meaning: str, *kinds: str) -> None:
    GLOSSARY[flag] = (meaning, frozenset(kinds))


# where keys come from, how many, at what rate
_term("--dist", "a key source of classic keys (uniform:N, zipf:S:N, ...); the other key source "
      "is a PROFILE argument", "text")
_term("--keys", "the size of the key space (distinct keys); never a key source", "count")
_term("--messages", "how many messages (rows) to generate", "count")
_term("--rps", "the request rate, requests (or messages) per second", "number")
_term("--read-share", "the fraction of requests that are reads", "number")
_term("--duration", "how long a run (or a window) lasts", "duration")
_term("--ramp", "how long the rate grows from 0 at the start of a run", "duration")
_term("--arrivals", "the arrival process: when requests come", "choice", "text")
_term("--order", "the order keys come in: production's (locality) or independent draws (irm)",
      "choice")
_term("--event", "a big event: SHARE of all requests to KEY between START and END",
      "HotEventSpec")
_term("--diurnal", "the amplitude of a daily rate curve", "number")
_term("--start", "the start of a time range (or of the generated messages)", "time", "text")
_term("--end", "the end of a time range", "text")
_term("--users", "how many distinct synthetic user IDs", "count")
_term("--closed", "a closed loop of USERS virtual users instead of an open-loop rate", "integer")
_term("--key-scaling", "how --keys grows the tail: dilute or extend", "choice")
_term("--tail", "the tail model: the fitted law or the exact histogram", "choice")
_term("--seed", "the seed of every random draw: same seed, same output", "integer")
_term("--workers", "how many threads or processes the command computes (or drives) with",
      "integer")
# the store and its layout
_term("--partitioner", "the store whose placement of keys on shards is reproduced", "choice")
_term("--shards", "how many shards (partitions, master nodes)", "integer")
_term("--shard-workers", "the modelled workers (cores) serving each shard", "integer")
_term("--key-type", "how the store types the key: text or bigint", "choice")
_term("--num-tokens", "Cassandra vnodes per node", "integer")
_term("--ring-seed", "the seed of Cassandra's random token allocation", "integer")
_term("--ring-file", "a Cassandra ring file", "text")
_term("--slots-map", "a Redis CLUSTER SLOTS dump", "text")
_term("--slots-from", "a live Redis Cluster to read the slot map from", "text")
_term("--routing-shards", "Elasticsearch's number_of_routing_shards", "integer")
_term("--map", "an explicit key,shard table", "text")
_term("--chunks", "MongoDB chunk ranges", "text")
_term("--key-template", "the key name the store uses, {key} standing for the key", "text")
_term("--replicas", "copies serving each shard's reads, the primary included (1: none)",
      "integer")
# mitigations: predict and simulate name the top K keys; serve names keys by --mitigate
_term("--split-hot", "the top K keys each split into S time-bucket sub-partitions (K:S; "
      "predict, simulate)", "SplitSpec")
_term("--split-into", "the sub-partitions each mitigated key is split into (serve: the keys "
      "--mitigate names or finds)", "integer")
_term("--split-bucket", "the length of one time bucket of a split key", "duration")
_term("--mitigate", "which keys serve mitigates: hot (those it finds) or a list", "text")
_term("--cache-hit", "the fraction of the top keys' reads a local cache serves", "number")
_term("--cached-keys", "how many top keys --cache-hit applies to", "integer")
_term("--cache-ttl", "how long serve's gateway cache keeps a hot key's page", "duration")
_term("--cache-size", "LRU cache entries (in front of each shard, or to measure hit rates at)",
      "integer")
_term("--coalesce", "identical reads in flight merged into one", "switch")
_term("--detect", "mitigations applied only once serve's rule finds a key hot", "switch")
_term("--hot-window", "the sliding window hot keys are counted over", "duration")
_term("--hot-share", "the share of the window that makes a key hot", "number")
_term("--apply-time", "how long an action takes to apply once a key is found hot", "duration")
_term("--hot-keys", "how many hot keys to read from a store's own counters (observe)",
      "integer")
# a model's or a service's costs
_term("--service", "the service time per request of the model", "text")
_term("--hit-ms", "the latency of a cache hit, in ms", "number")
_term("--cost-ms", "CPU ms each read burns in its shard", "number")
_term("--capacity", "requests/s one shard serves at 100% CPU", "number")
_term("--slo-ms", "a p99 target, in ms", "number")
_term("--scenario", "a named scenario's values (simulate scenarios lists them)", "text")
_term("--profile", "a profile file where the positional argument is another file", "text")
_term("--calibrate", "a measured run to calibrate the what-ifs on", "text")
_term("--baseline", "the load test's observations, compared with production's", "text")
_term("--against", "production's profile, compared with the test's keys", "text")
# profiling and fitting
_term("--key", "the column holding the partition key", "text")
_term("--counts", "the column holding pre-aggregated counts", "text")
_term("--op", "the column holding the operation (read/write)", "text")
_term("--size", "the column holding the payload size", "text")
_term("--time", "the column holding each event's time", "text")
_term("--time-unit", "the unit of a numeric time column", "choice")
_term("--top-k", "how many top keys (the head)", "integer")
_term("--min-count", "the privacy floor: no key seen fewer times is written", "integer")
_term("--engine", "the counting engine: duckdb or spark", "choice")
_term("--spark-master", "the Spark master URL", "text")
_term("--spark-scratch", "a directory Spark's executors and this machine both reach", "text")
_term("--memory-limit", "DuckDB's working memory before it spills", "text")
_term("--locality", "whether to measure when keys come back", "switch")
_term("--pseudonymize", "head keys replaced by keyed hashes", "switch")
_term("--secret-file", "the HMAC secret of --pseudonymize", "text")
_term("--column", "the column of a table to read", "text")
_term("--histogram", "the input is a value/count histogram", "switch")
_term("--xmin", "the start of the power-law tail, fixed", "integer")
_term("--min-tail", "the fewest observations a tail may hold", "integer")
_term("--bootstrap", "how many synthetic sets for the goodness-of-fit p-value", "integer")
_term("--compare", "alternative distributions to test the power law against", "AlternativeList")
_term("--threshold", "a check's threshold overridden, NAME=VALUE", "ThresholdSpec")
_term("--allow-disjoint", "compare heads that share no key", "switch")
_term("--movers", "how many risers and fallers to list", "integer")
# the service and the cluster
_term("--port", "the TCP port to listen on (the first node's, for a cluster)", "integer")
_term("--host", "the address to listen on", "text")
_term("--data", "the directory a service or cluster keeps its data in", "text")
_term("--load", "a generate output to fill the service with", "text")
_term("--append", "add a --load file to data already there", "switch")
_term("--skip-bad-rows", "leave out --load rows without a key", "switch")
_term("--admin-token", "the token the admin routes require", "text")
_term("--shard-timeout", "the longest wait for a shard's answer", "duration")
_term("--max-body", "the largest message body, in bytes", "integer")
_term("--store", "a Redis Cluster to keep channels in", "text")
_term("--no-persist", "no append-only file on the cluster's nodes", "switch")
_term("--maxmemory-policy", "the cluster nodes' eviction policy", "choice")
_term("--url", "any node of a running cluster", "text")
_term("--timeout", "how long an answer (a request, a query, a node) may take", "duration")
# driving load
_term("--read", "the request template of a read", "text")
_term("--write", "the request template of a write", "text")
_term("--max-inflight", "outstanding requests beyond which arrivals are dropped", "integer")
_term("--max-error-rate", "the percent of failed requests above which a run is invalid",
      "number")
_term("--hlog", "an HdrHistogram interval log to write", "text")
# evidence
_term("--label", "what the observations observed", "text")
_term("--preset", "the Prometheus queries for what you run", "choice")
_term("--shard-label", "the Prometheus label naming the shard", "text")
_term("--node-label", "the Prometheus label naming the node", "text")
_term("--requests", "the PromQL of requests per shard", "text")
_term("--cpu", "the PromQL of CPU per shard", "text")
_term("--errors", "the PromQL of failed requests per shard", "text")
_term("--latency", "the PromQL latency histogram", "text")
_term("--max-keys", "keys scanned on each node at most", "integer")
_term("--executor", "the k6 scenario's executor", "choice")
_term("--shard-tag", "the k6 request tag naming the shard", "text")
_term("--metric", "what a dashboard CSV file holds", "choice")
_term("--shard-pattern", "the regex taking the shard out of a column's name", "text")
_term("--unit", "the unit of a dashboard CSV's values", "choice")
_term("--shard", "the shard a HOTKEYS reply came from", "text")
_term("--node", "the node a HOTKEYS reply came from", "text")
# output
_term("--output", "the file to write the result to", "text")
_term("--json", "print the result as JSON", "switch")
_term("--plot", "draw an image to this .png, .svg or .pdf file", "text")
_term("--format", "the output format", "choice")
_term("--title", "the report's title", "text")
_term("--quiet", "no progress", "switch")
_term("--quick", "the shorter demo", "switch")

# spellings that were retired for one name per concept: none may come back
RETIRED = {"--rate": "--rps", "--events": "--messages", "--read-ratio": "--read-share",
           "--processes": "--workers", "--verify": "generate verify",
           "--replay": "simulate replay", "--like": "simulate like",
           "--hot-channels": "--mitigate", "--split": "--split-into", "--nodes": "--shards",
           "--dir": "--data", "--top": "--top-k"}
