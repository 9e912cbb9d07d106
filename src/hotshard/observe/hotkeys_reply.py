"""A Redis 8.6 ``HOTKEYS GET`` reply saved to a file, as evidence: the node's top keys by CPU
time and by network bytes over a tracking session.

Redis 8.6's ``HOTKEYS START METRICS n CPU NET [SAMPLE ratio]`` tracks keys in a probabilistic
structure; ``HOTKEYS GET`` answers the session's metadata (``sample-ratio``,
``collection-duration-ms``, ``all-commands-all-slots-us``, ``net-bytes-all-commands-all-slots``,
``total-cpu-time-user-ms``/``-sys-ms``) and two lists of (key, value) pairs,
``by-cpu-time-us`` and ``by-net-bytes``. Under ``SAMPLE ratio`` only one command in ``ratio``
is measured, so a key's totals are 1/ratio of the all-commands totals beside them: each is
scaled by the ratio here before it is taken as a share (an estimate, as the sample is).

The file is what ``redis-cli HOTKEYS GET`` prints (numbered lines, nested arrays indented, as
in Redis's documentation) or JSON (``redis-cli --json``: an object, the lists as flat
``[key, value, ...]`` arrays, as pairs, or as objects). This machine has no Redis 8.6: the
reader is tested on the documentation's examples only, which the note says.
"""

from __future__ import annotations

import json
import math
import os
import re
from typing import Any

from hotshard.errors import InputError
from hotshard.observations import Observations, ShardObservation
from hotshard.observe._common import Notes, build

__all__ = ["MAX_REPLY_BYTES", "read_hotkeys_reply"]

MAX_REPLY_BYTES = 10 * 1024 * 1024   # a top-K reply is kilobytes; refuse anything near this
MAX_KEYS = 10_000
LISTS = ("by-cpu-time-us", "by-net-bytes")
_ITEM = re.compile(r'^(\s*)(\d+)\)\s(.*)$')


def _scalar(text: str, where: str) -> Any:
    """One redis-cli value: "quoted" (with its escapes), (integer) N, (double) X, (nil),
    (empty array)."""
    text = text.strip()
    if text.startswith('"') and text.endswith('"') and len(text) >= 2:
        try:
            return json.loads(text)
        except ValueError:
            return text[1:-1]
    if text.startswith("(integer) "):
        try:
            return int(text[10:])
        except ValueError:
            raise InputError(f"{where}: not an integer: {text[:40]!r}") from None
    if text.startswith("(double) "):
        try:
            return float(text[9:])
        except ValueError:
            raise InputError(f"{where}: not a number: {text[:40]!r}") from None
    if text in ("(nil)", "(empty array)", "(empty list or set)"):
        return [] if text.startswith("(empty") else None
    return text


def _parse_cli(text: str, where: str) -> list[Any]:
    """redis-cli's rendering of a (nested) array: ``N) value`` lines, a nested array's first
    item on its parent's line (``20) 1) "x"``), the rest indented under it."""
    root: list[Any] = []
    # stack of (indent column of this array's numbers, the array)
    stack: list[tuple[int, list[Any]]] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip():
            continue
        match = _ITEM.match(line)
        if match is None:
            raise InputError(f"{where}: line {n} is not a reply line (`N) value`): "
                             f"{line.strip()[:60]!r}")
        column = len(match.group(1))
        while stack and stack[-1][0] > column:
            stack.pop()
        if not stack:
            stack.append((column, root))
        elif stack[-1][0] < column:
            raise InputError(f"{where}: line {n} is indented under nothing")
        target = stack[-1][1]
        rest, column = match.group(3), column + len(match.group(2)) + 2
        # a nested array opens on this line: `20) 1) "x"`
        while (inner := _ITEM.match(" " * column + rest)) is not None \
                and len(inner.group(1)) == column:
            child: list[Any] = []
            target.append(child)
            if len(stack) > 32:
                raise InputError(f"{where}: nested deeper than a HOTKEYS reply is")
            target = child
            stack.append((column, child))
            rest, column = inner.group(3), column + len(inner.group(2)) + 2
        target.append(_scalar(rest, f"{where}: line {n}"))
    return root


def _as_mapping(reply: Any, where: str) -> dict[str, Any]:
    if isinstance(reply, dict):
        return reply
    if isinstance(reply, list) and len(reply) % 2 == 0 and all(
            isinstance(k, str) for k in reply[::2]):
        return dict(zip(reply[::2], reply[1::2], strict=True))
    raise InputError(f"{where}: not a HOTKEYS GET reply (field names and values)")


def _pairs(value: Any, name: str, where: str) -> list[tuple[str, float]]:
    """A list of (key, value): flat, as pairs, or as an object."""
    if value is None:
        return []
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, list) and all(isinstance(v, list) and len(v) == 2 for v in value):
        items = [tuple(v) for v in value]
    elif isinstance(value, list) and len(value) % 2 == 0:
        items = list(zip(value[::2], value[1::2], strict=True))
    else:
        raise InputError(f"{where}: {name} is not a list of keys and values")
    if len(items) > MAX_KEYS:
        raise InputError(f"{where}: {name} lists {len(items):,} keys, more than a top-K reply")
    out = []
    for key, number in items:
        n = _count(number, f"{name}[{key!r}]", where)
        out.append((str(key), n))
    return out


def _count(value: Any, name: str, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or value < 0:
        raise InputError(f"{where}: {name} must be a count >= 0, got {str(value)[:40]!r}")
    return float(value)


def _load(path: str | os.PathLike[str]) -> dict[str, Any]:
    from hotshard._files import require_file

    p = require_file(path, what="HOTKEYS GET reply")
    size = p.stat().st_size
    if size > MAX_REPLY_BYTES:
        raise InputError(f"{path}: {size:,} bytes, far more than a HOTKEYS GET reply "
                         f"(kilobytes); refused above {MAX_REPLY_BYTES:,}")
    try:
        text = p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(f"{path}: not text; expected redis-cli's HOTKEYS GET output or its "
                         "--json") from None
    if not text.strip():
        raise InputError(f"{path} is empty; expected redis-cli's HOTKEYS GET output")
    if text.strip() in ("(nil)", "null"):
        reply = None
    elif text.lstrip().startswith(("{", "[")):
        try:
            reply = json.loads(text)
        except (ValueError, RecursionError):
            raise InputError(f"{path}: not JSON (nor redis-cli's numbered lines)") from None
    else:
        reply = _parse_cli(text, str(path))
    if reply is None or reply == []:
        raise InputError(f"{path}: the reply is empty (nil): no tracking session was started "
                         "or it was reset; run HOTKEYS START first")
    return _as_mapping(reply, str(path))


def read_hotkeys_reply(path: str | os.PathLike[str], *, label: str = "production",
                       shard: str = "0", node: str | None = None) -> Observations:
    """The reply in ``path`` (module notes) as observations of one shard: its CPU over the
    session, and ``extra.hot_keys`` with each key's share of the node's CPU time and network
    bytes, scaled by the sample ratio.

    Raises
    ------
    InputError
        No such file, empty, too large, not a reply, a reply without either list, or a
        value that is not a count.
    """
    doc = _load(path)
    where = str(path)
    if not any(name in doc for name in LISTS):
        raise InputError(f"{where}: no by-cpu-time-us or by-net-bytes list: not a HOTKEYS GET "
                         "reply (or one whose session tracked no metric)")
    ratio = _count(doc.get("sample-ratio", 1), "sample-ratio", where)
    if ratio < 1:
        raise InputError(f"{where}: sample-ratio must be >= 1, got {ratio:g}")
    duration_ms = doc.get("collection-duration-ms")
    duration = None if duration_ms is None else _count(duration_ms, "collection-duration-ms",
                                                       where) / 1000.0
    totals = {"by-cpu-time-us": doc.get("all-commands-all-slots-us"),
              "by-net-bytes": doc.get("net-bytes-all-commands-all-slots")}
    notes = Notes()
    keys: dict[str, dict[str, Any]] = {}
    for name, field, share in (("by-cpu-time-us", "cpu_us", "cpu_share"),
                               ("by-net-bytes", "net_bytes", "net_share")):
        total = totals[name]
        total = None if total is None else _count(total, name.replace("by-", "total "), where)
        for key, value in _pairs(doc.get(name), name, where):
            row = keys.setdefault(key, {"key": key})
            row[field] = value * ratio
            if total:
                row[share] = round(min(value * ratio / total, 1.0), 6)
    ranked = sorted(keys.values(), key=lambda r: (-r.get("cpu_us", 0.0),
                                                  -r.get("net_bytes", 0.0), r["key"]))
    cpu = None
    user, system = doc.get("total-cpu-time-user-ms"), doc.get("total-cpu-time-sys-ms")
    if duration and user is not None and system is not None:
        busy = (_count(user, "total-cpu-time-user-ms", where)
                + _count(system, "total-cpu-time-sys-ms", where)) / 1000.0
        cpu = round(min(busy / duration, 1.0), 6)
    notes.add("hot keys from a Redis 8.6 HOTKEYS GET reply (extra.hot_keys): each key's share "
              "of the node's CPU time and network bytes over the session"
              + (f", its sampled totals scaled by the sample ratio {ratio:g} (estimates)"
                 if ratio > 1 else ""))
    notes.add("the HOTKEYS reader is tested on Redis's documented examples only (no Redis 8.6 "
              "on the machine that built it)")
    shard_obs = ShardObservation(id=str(shard), node=node, cpu=cpu)
    source = {"source": "redis-hotkeys", "file": os.path.basename(where)}
    obs = build(label, source=source, notes=notes, shards=[shard_obs],
                fields={"duration_s": round(duration, 3) if duration else None})
    from dataclasses import replace

    return replace(obs, extra={**obs.extra, "hot_keys": {
        "source": "hotkeys", "sample_ratio": ratio, "duration_s": duration,
        "keys": [{**r, "shard": str(shard)} for r in ranked]}})
