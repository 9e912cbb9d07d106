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
    return _stacked(opts)(func)


def _stacked(opts):
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
    with --like")."""
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
    return _stacked(opts)


def detection_from(detect: bool, given: dict):
    """The Detection ``--detect`` asks for (None without it): the flags ``given`` (their
    values, None when left out) over serve's defaults. A detection flag without --detect is
    a usage error: it would silently do nothing. (``--like`` takes the run's rule instead:
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
