"""A k6 run's end-of-test summary as observations: the load test's side.

Two layouts, both k6's own (Grafana k6 documentation, "Custom summary", section "Summary data
reference", and the legacy ``--summary-export`` file it replaced):

- ``handleSummary``'s data (``JSON.stringify(data)``): ``{"metrics": {NAME: {"type",
  "contains", "values": {...}}}, "state": {"testRunDurationMs"}, "options", "root_group"}``;
- ``k6 run --summary-export FILE``: ``{"metrics": {NAME: {...values...}}, "root_group"}``,
  each metric's values directly in its object.

Values by metric type: a trend has the ``summaryTrendStats`` (``avg``, ``min``, ``med``,
``max``, ``p(90)``, ``p(95)``... in milliseconds for time metrics), a counter ``count`` and
``rate`` (per second), a rate ``rate`` (``value`` in the legacy file), ``passes`` (samples
that were true: on ``http_req_failed``, the failed requests) and ``fails``, a gauge
``value``, ``min``, ``max``. Sub-metrics are named ``NAME{tag:value}``.

What the summary does not record is left out with a note: k6 writes no executor into it, so
the load model (open: ``constant-arrival-rate``, ``ramping-arrival-rate``; closed:
``constant-vus``, ``ramping-vus``, ``per-vu-iterations``, ``shared-iterations``) is taken
only from the ``executor`` argument; per-shard numbers only from sub-metrics of a tag that
names the shard (``shard_tag``), which a script adds as ``tags: {shard: ...}`` and k6 keeps in
the summary when a threshold names the sub-metric.
"""

from __future__ import annotations

import os
import re
from typing import Any

from hotshard.errors import InputError
from hotshard.observations import LATENCY_NAMES, Observations, ShardObservation
from hotshard.observe._common import Notes, build, finite

__all__ = ["EXECUTORS", "read_k6_summary"]

EXECUTORS = {"constant-arrival-rate": "open", "ramping-arrival-rate": "open",
             "constant-vus": "closed", "ramping-vus": "closed", "per-vu-iterations": "closed",
             "shared-iterations": "closed", "externally-controlled": "closed"}
_TREND = {"min": "min", "med": "p50", "p(50)": "p50", "p(75)": "p75", "p(90)": "p90",
          "p(95)": "p95", "p(99)": "p99", "p(99.9)": "p999", "p(99.99)": "p9999", "max": "max",
          "avg": "mean"}
_SUB = re.compile(r"^([A-Za-z0-9_]+)\{([^{}]*)\}$")


def _load(path: str | os.PathLike[str]) -> Any:
    from hotshard._files import require_file

    p = require_file(path, what="k6 summary (JSON)")
    from hotshard._http import loads_bounded

    try:
        return loads_bounded(p.read_text(encoding="utf-8-sig"))
    except (ValueError, UnicodeDecodeError):
        raise InputError(f"{path}: not JSON; expected k6's --summary-export file or "
                         "handleSummary's data (JSON.stringify(data))") from None


def _layout(doc: Any, path: str) -> str:
    """``handleSummary`` or ``export`` (the legacy --summary-export), else an error naming
    what is missing."""
    if not isinstance(doc, dict):
        raise InputError(f"{path}: not a k6 summary: expected a JSON object with \"metrics\"")
    if str(doc.get("format", "")).startswith("hotshard."):
        raise InputError(f"{path}: this is a hotshard document ({doc['format']}), not a k6 "
                         "summary: give it to diagnose or report as it is")
    metrics = doc.get("metrics")
    if not isinstance(metrics, dict) or not metrics:
        raise InputError(f"{path}: not a k6 summary: no \"metrics\" object (expected k6's "
                         "--summary-export file or handleSummary's data)")
    entries = [m for m in metrics.values() if isinstance(m, dict)]
    if entries and all(isinstance(m.get("values"), dict) for m in entries):
        return "handleSummary"
    if entries and not any("values" in m for m in entries):
        return "export"
    raise InputError(f"{path}: a k6 summary of a layout this version does not read (metrics "
                     "neither all with \"values\" as handleSummary's data, nor all without as "
                     "--summary-export's); k6 >= 1.5's --new-machine-readable-summary is not "
                     "read yet")


def _values(metric: Any, layout: str) -> dict[str, Any]:
    if not isinstance(metric, dict):
        return {}
    values = metric.get("values") if layout == "handleSummary" else metric
    return values if isinstance(values, dict) else {}


def _latency(values: dict[str, Any], notes: Notes, what: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for stat, value in values.items():
        name = _TREND.get(stat)
        number = finite(value)
        if name is not None and number is not None and number >= 0:
            out[name] = number
    unread = sorted(s for s in values if s not in _TREND and s not in ("count", "thresholds"))
    if unread:
        notes.add(f"{what}: statistics without a latency name here ({', '.join(unread)}) "
                  "not read")
    # a summary's percentiles come from one sorted set of samples: they never decrease
    last = None
    for name in LATENCY_NAMES:
        if name in out:
            if last is not None and out[name] < last:
                raise InputError(f"{what}: {name} ({out[name]}) below a lower percentile "
                                 f"({last}): not a k6 trend summary")
            last = out[name]
    return out


def read_k6_summary(path: str | os.PathLike[str], *, label: str = "load test",
                    executor: str | None = None, shard_tag: str | None = None
                    ) -> Observations:
    """Rate, latency percentiles, failures and (given the executor) the load model of a k6
    run, from its end-of-test summary JSON.

    Parameters
    ----------
    path : path
        ``k6 run --summary-export FILE``'s file, or handleSummary's ``JSON.stringify(data)``.
    executor : str or None
        The scenario's executor (``EXECUTORS``), which k6 does not write into the summary:
        it decides ``model`` (open or closed).
    shard_tag : str or None
        A request tag naming the shard: ``http_reqs{TAG:ID}`` and
        ``http_req_duration{TAG:ID}`` sub-metrics become shards.

    Raises
    ------
    InputError
        Not JSON, not a k6 summary (no metrics, another layout), no ``http_reqs`` or
        ``http_req_duration``, an unknown executor.
    """
    if executor is not None and executor not in EXECUTORS:
        raise InputError(f"unknown k6 executor {executor!r}; choose from "
                         f"{', '.join(EXECUTORS)}")
    doc = _load(path)
    layout = _layout(doc, str(path))
    metrics: dict[str, Any] = doc["metrics"]
    notes = Notes()
    reqs = _values(metrics.get("http_reqs"), layout)
    duration_values = _values(metrics.get("http_req_duration{expected_response:true}"), layout)
    latency_source = "http_req_duration{expected_response:true}"
    if not duration_values:
        duration_values = _values(metrics.get("http_req_duration"), layout)
        latency_source = "http_req_duration"
    if not reqs and not duration_values:
        raise InputError(f"{path}: a k6 summary without http_reqs or http_req_duration: the "
                         "run made no HTTP requests (other protocols are not read yet)")
    fields: dict[str, Any] = {}
    count, rate = finite(reqs.get("count")), finite(reqs.get("rate"))
    state = doc.get("state") if isinstance(doc.get("state"), dict) else {}
    run_ms = finite(state.get("testRunDurationMs"))
    if run_ms is not None and run_ms > 0:
        fields["duration_s"] = round(run_ms / 1000.0, 3)
    elif count and rate:
        fields["duration_s"] = round(count / rate, 3)
        notes.add("duration_s is http_reqs' count / rate (the export records no run time)")
    if rate is not None and rate > 0:
        fields["rate_rps"] = fields["achieved_rps"] = round(rate, 3)
        notes.add("rate_rps is the rate k6 achieved (http_reqs' rate): the summary records "
                  "no target rate")
    else:
        notes.missing("rate_rps", "no http_reqs rate in the summary")
    latency = _latency(duration_values, notes, latency_source) if duration_values else {}
    if latency_source == "http_req_duration" and latency:
        notes.add("latency is of every request, failures included (the summary has no "
                  "http_req_duration{expected_response:true})")
    if not latency:
        notes.missing("latency_ms", "no http_req_duration trend in the summary")
    failed = _values(metrics.get("http_req_failed"), layout)
    passes, fails = finite(failed.get("passes")), finite(failed.get("fails"))
    if passes is not None and fails is not None and passes + fails > 0:
        fields["errors"] = {"share": passes / (passes + fails),
                            "attempted": int(passes + fails), "failed": int(passes)}
    else:
        notes.missing("errors", "no http_req_failed rate in the summary")
    if executor is not None:
        fields["model"] = EXECUTORS[executor]
    else:
        notes.missing("model", "k6 writes no executor into its summary: give the scenario's "
                      "executor (constant-arrival-rate: open; constant-vus: closed; ...)")
    vus = _values(metrics.get("vus_max"), layout) or _values(metrics.get("vus"), layout)
    dropped = finite(_values(metrics.get("dropped_iterations"), layout).get("count"))
    k6: dict[str, Any] = {"layout": layout}
    if finite(vus.get("max")) is not None or finite(vus.get("value")) is not None:
        k6["vus_max"] = finite(vus.get("max")) or finite(vus.get("value"))
    if dropped is not None:
        k6["dropped_iterations"] = int(dropped)
    if executor is not None:
        k6["executor"] = executor
    shards = _shards(metrics, layout, shard_tag, notes) if shard_tag else []
    if not shard_tag:
        notes.missing("shards", "k6's summary has no per-shard numbers (tag requests with the "
                      "shard and give that tag, with thresholds on its sub-metrics)")
    source = {"source": "k6", "file": str(path), "k6": k6}
    return build(label, source=source, notes=notes, shards=shards, latency=latency,
                 fields=fields)


def _shards(metrics: dict[str, Any], layout: str, tag: str, notes: Notes
            ) -> list[ShardObservation]:
    per: dict[str, dict[str, Any]] = {}
    for name, metric in metrics.items():
        m = _SUB.match(name)
        if not m:
            continue
        tags = dict(t.split(":", 1) for t in m.group(2).split(",") if ":" in t)
        if set(tags) != {tag}:
            continue
        shard, values = tags[tag], _values(metric, layout)
        if m.group(1) == "http_reqs" and finite(values.get("count")) is not None:
            per.setdefault(shard, {})["requests"] = int(values["count"])
            if finite(values.get("rate")) is not None:
                per[shard]["rate_rps"] = round(float(values["rate"]), 3)
        elif m.group(1) == "http_req_duration":
            lat = _latency(values, notes, name)
            for src, dst in (("p50", "p50_ms"), ("p99", "p99_ms")):
                if src in lat:
                    per.setdefault(shard, {})[dst] = lat[src]
    if not per:
        raise InputError(f"no sub-metric of the tag {tag!r} in the summary (expected "
                         f"http_reqs{{{tag}:ID}} or http_req_duration{{{tag}:ID}})")
    if any("requests" not in v for v in per.values()):
        notes.add(f"requests per shard need http_reqs{{{tag}:ID}} sub-metrics for every shard")
    return [ShardObservation(id=s, **v) for s, v in per.items()]
