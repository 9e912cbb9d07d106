"""Per-shard load over a window, from the Prometheus HTTP API (``/api/v1/query``).

Three kinds of query, each an *instant* query evaluated at the window's end:

- **A counter selector** (a bare selector such as ``hotshard_shard_requests_total`` or
  ``{__name__=~"redis_cpu_(sys|user)_seconds_total"}``) is fetched as a range vector over the
  window, ``SELECTOR[RANGE]``: its raw samples. Each series' increase is the sum of its
  sample-to-sample rises, a fall being a counter reset (then the new value is the rise), the
  rule of PromQL's ``increase`` without its extrapolation to the window's edges. So requests
  are counted exactly between the first and the last scrape inside the window, and CPU is CPU
  seconds over the same span, a busy fraction of one core.
- **A PromQL expression** (anything else) is evaluated as given, with ``$__range`` (Grafana's
  name) replaced by the window's length, e.g. ``rate(x[$__range])``; each series' value is
  taken as it comes.
- **Latency** is a histogram's bucket selector (``..._bucket``) or an expression of bucket
  rates by ``le``; ``histogram_quantile`` over the window's rates gives the run's percentiles
  and each shard's p50 and p99.

Series are grouped by the shard label (summed when several series share a shard, e.g. a
shard's replica processes) and ordered naturally by it. A query that returns nothing, or
series without the shard label, is one error line naming the query and the labels it saw.

Presets name the queries for what teams already run; explicit ``cpu``/``requests``/``latency``
override a preset's. See ``PRESETS``.
"""

from __future__ import annotations

import math
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hotshard.errors import InputError
from hotshard.observations import MAX_WINDOWS, Observations, ShardObservation, TimeWindow
from hotshard.observe._common import (
    CPU_SLACK_S,
    Notes,
    build,
    finite,
    iso,
    natural_key,
    settle_fraction,
)

__all__ = ["LATENCY_QUANTILES", "PRESETS", "Preset", "PrometheusClient", "observe_prometheus"]

LATENCY_QUANTILES = {"p50": 0.5, "p75": 0.75, "p90": 0.9, "p95": 0.95, "p99": 0.99,
                     "p999": 0.999}
DEFAULT_TIMEOUT = 10.0
# a bare selector: a metric name with optional {matchers}, or {matchers} alone
_SELECTOR = re.compile(r"""^\s*(?:[A-Za-z_:][A-Za-z0-9_:]*\s*)?"""
                       r"""(?:\{(?:[^{}"]|"(?:[^"\\]|\\.)*")*\})?\s*$""")


@dataclass(frozen=True)
class Preset:
    """The queries of one kind of exporter; None: that field is not among its metrics."""

    shard_label: str
    node_label: str | None
    requests: str | None
    cpu: str | None
    latency: str | None = None
    errors: str | None = None
    why_no_latency: str = ""
    why_no_requests: str = ""
    cpu_note: str = ""


PRESETS: dict[str, Preset] = {
    # hotshard serve's /metrics: per-shard backend calls, errors, workers' CPU seconds, and the
    # latency histogram of backend calls
    "hotshard": Preset("shard", None, "hotshard_shard_requests_total",
                       "hotshard_worker_cpu_seconds_total",
                       "hotshard_shard_request_duration_seconds_bucket",
                       "hotshard_shard_errors_total"),
    # the standard redis_exporter, one target per node: commands processed and the process's
    # CPU seconds (system + user); its latency metrics are summaries since the node started
    "redis": Preset("instance", "instance", "redis_commands_processed_total",
                    '{__name__=~"redis_cpu_(sys|user)_seconds_total"}',
                    why_no_latency="redis_exporter's latency percentiles "
                                   "(redis_latency_percentiles_usec) are since each node "
                                   "started, not over the window"),
    # node_exporter: each machine's busy fraction, all its cores together: the share of its
    # CPU time in modes other than idle and iowait (user, nice, system, irq, softirq, steal),
    # /proc/stat's (total - idle - iowait) / total as psutil's cpu_percent and top count it.
    # iowait is idle time while some task waits on I/O (the CPU runs whatever it is given):
    # counting it busy would show a disk-bound machine as CPU-saturated. Divided by the rate of
    # all modes, not by 1 s/s per CPU: the modes' sum can fall short of the wall clock (1.7%
    # short on a test VM), which would count the missing time as busy. A machine's fraction is
    # not one core's: the note says so.
    "node": Preset("instance", "instance", None,
                   '1 - sum by (instance) (rate(node_cpu_seconds_total{mode=~"idle|iowait"}'
                   '[$__range])) / sum by (instance) (rate(node_cpu_seconds_total'
                   '[$__range]))',
                   why_no_latency="node_exporter measures machines, not requests",
                   why_no_requests="node_exporter counts no requests: give --requests",
                   cpu_note="cpu is each machine's busy fraction, all its cores averaged (idle "
                            "and iowait not busy): one saturated single-threaded shard on an "
                            "N-core machine shows 1/N"),
    # any Prometheus client library's process collector: CPU seconds per process
    "process": Preset("instance", "instance", None, "process_cpu_seconds_total",
                      why_no_latency="the process collector measures no requests",
                      why_no_requests="process metrics count no requests: give --requests"),
}


# the largest API answer read (a range query over thousands of series is megabytes)
MAX_ANSWER_BYTES = 64 * 1024 * 1024


class PrometheusClient:
    """Instant queries against one Prometheus server (``/api/v1/query``), by urllib."""

    def __init__(self, url: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InputError(f"expected the Prometheus server's URL, http://HOST:PORT, got "
                             f"{url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _get(self, path: str, params: Mapping[str, str]) -> Any:
        """One API answer, read within ``timeout`` in all and ``MAX_ANSWER_BYTES`` at most
        (``_http.fetch``: a trickling or huge answer is cut, a redirect not followed)."""
        from hotshard._http import FetchError, fetch

        query = urllib.parse.urlencode(params)
        try:
            answer = fetch(f"{self.url}{path}?{query}", timeout=self.timeout,
                           max_bytes=MAX_ANSWER_BYTES, headers={"Accept": "application/json"})
        except FetchError as exc:
            if exc.kind == "size":
                raise InputError(f"Prometheus at {self.url}: {exc}: narrow the query (a "
                                 "label matcher, or fewer series)") from None
            if exc.kind == "deadline":
                raise InputError(f"Prometheus at {self.url}: {exc} (${{timeout}})") from None
            if exc.kind == "unreachable":
                raise InputError(f"cannot reach Prometheus at {self.url}: {exc.reason}"
                                 ) from None
            raise InputError(f"cannot read Prometheus at {self.url}: {exc}") from None
        if answer.location is not None:
            raise InputError(f"{self.url} redirected {path} to {answer.location or '?'}: give "
                             "that server's URL (redirects are not followed, so the "
                             "observations name the server that answered)")
        doc = _json_or_none(answer.body)
        if answer.status >= 400:
            if isinstance(doc, dict) and doc.get("status") == "error":
                raise InputError(f"Prometheus at {self.url} refused the query "
                                 f"({_text(doc.get('errorType', 'error'))}): "
                                 f"{_text(doc.get('error'))}")
            raise InputError(f"{self.url} did not answer as Prometheus' HTTP API does "
                             f"(HTTP {answer.status} for {path}): is it a Prometheus server?")
        if not isinstance(doc, dict) or "status" not in doc:
            raise InputError(f"{self.url} did not answer as Prometheus' HTTP API does (no "
                             f"JSON status from {path}): is it a Prometheus server?")
        if doc["status"] != "success":
            raise InputError(f"Prometheus at {self.url} refused the query "
                             f"({_text(doc.get('errorType', 'error'))}): "
                             f"{_text(doc.get('error'))}")
        return doc.get("data")

    def query(self, promql: str, at: float) -> tuple[str, list[dict[str, Any]]]:
        """(result type, results) of an instant query at Unix time ``at``."""
        data = self._get("/api/v1/query", {"query": promql, "time": f"{at:.3f}"})
        if not isinstance(data, dict):
            raise InputError(f"Prometheus at {self.url} answered {promql!r} without data")
        result = data.get("result")
        kind = data.get("resultType")
        if kind in ("scalar", "string"):
            raise InputError(f"the query {promql!r} gives one {kind}, not series per shard")
        return str(kind), self._shaped(result, promql, "values" if kind == "matrix"
                                       else "value")

    def query_range(self, promql: str, start: float, end: float, step: float
                    ) -> list[dict[str, Any]]:
        """The results of a range query: one value per ``step`` from ``start`` to ``end``."""
        data = self._get("/api/v1/query_range", {"query": promql, "start": f"{start:.3f}",
                                                 "end": f"{end:.3f}", "step": f"{step:.3f}"})
        result = data.get("result") if isinstance(data, dict) else None
        return self._shaped(result, promql, "values")

    def _shaped(self, result: Any, promql: str, field: str) -> list[dict[str, Any]]:
        """The result's series, each checked to have Prometheus' shape (a ``metric`` object
        of labels, and ``value`` [time, "number"] or ``values`` of them); an answer of
        another shape is refused in one line, never half read."""
        if result is None:
            return []
        if not isinstance(result, list):
            raise self._odd(promql, "its result is not a list of series")
        for i, r in enumerate(result):
            if not isinstance(r, dict) or not isinstance(r.get("metric", {}), dict):
                raise self._odd(promql, f"series {i} is not an object with a metric")
            if any(not isinstance(v, str | int | float) for v in r.get("metric", {}).values()):
                raise self._odd(promql, f"series {i} has a label that is not text")
            points = [r.get("value")] if field == "value" else r.get("values")
            if points == [None] or not isinstance(points, list):
                raise self._odd(promql, f"series {i} has no {field}")
            for point in points:
                if not (isinstance(point, list | tuple) and len(point) == 2
                        and isinstance(point[0], int | float) and not isinstance(point[0], bool)
                        and math.isfinite(point[0]) and isinstance(point[1], str | int | float)):
                    raise self._odd(promql, f"series {i} has a sample that is not [time, "
                                            "value]")
        return result

    def _odd(self, promql: str, why: str) -> InputError:
        return InputError(f"Prometheus at {self.url} answered {_text(promql, 80)!r} in a shape "
                          f"that is not Prometheus' ({why}): is it a Prometheus server?")

    def series_exist(self, selector: str) -> bool:
        """Whether any series matches ``selector`` at any time Prometheus holds."""
        data = self._get("/api/v1/series", {"match[]": selector})
        return bool(data)


def _json_or_none(body: bytes) -> Any:
    from hotshard._http import loads_bounded

    try:
        return loads_bounded(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _text(value: Any, limit: int = 300) -> str:
    """A server's words for a terminal: printable, one line, at most ``limit`` characters."""
    from hotshard._format import safe_text

    return safe_text(str(value), limit)


def is_selector(expr: str) -> bool:
    """Whether ``expr`` is a bare series selector (a counter to take deltas of)."""
    return bool(_SELECTOR.match(expr)) and bool(expr.strip())


def counter_increase(values: list[list[Any]]) -> tuple[float, float, float] | None:
    """(increase, first time, last time) of one counter's raw samples ``[[t, "v"], ...]``:
    the sum of rises, a fall counted as a reset (the new value is the rise); None with fewer
    than two samples."""
    points = [(float(t), finite(v)) for t, v in values]
    points = [(t, v) for t, v in points if v is not None]
    if len(points) < 2:
        return None
    rise = 0.0
    for (_, a), (_, b) in zip(points, points[1:], strict=False):
        rise += b - a if b >= a else b
    return rise, points[0][0], points[-1][0]


@dataclass
class _Grouped:
    """Per shard: summed value; the span (seconds) the values cover; the node label."""

    values: dict[str, float]
    span: float | None
    nodes: dict[str, str]
    # a counter's raw samples per shard, one list of (time, value) per series: the time axis
    samples: dict[str, list[list[tuple[float, float]]]] | None = None


class _Query:
    """The window, the client, the shard and node labels, and the notes: one observation."""

    def __init__(self, client: PrometheusClient, start: float, end: float, shard_label: str,
                 node_label: str | None, notes: Notes) -> None:
        self.client, self.start, self.end = client, start, end
        self.shard_label, self.node_label, self.notes = shard_label, node_label, notes
        # in milliseconds, rounded up: a range of whole seconds rounded down would start
        # after ``start`` and lose the window's first scrape
        self.range = f"{max(1, math.ceil((end - start) * 1000))}ms"

    def expand(self, expr: str) -> str:
        return expr.replace("$__range", self.range)

    def _group(self, what: str, shown: str, results: list[dict[str, Any]],
               value_of) -> _Grouped:
        label = self.shard_label
        missing = [r for r in results if label not in r.get("metric", {})]
        if missing:
            seen = sorted({k for r in results for k in r.get("metric", {}) if k != "__name__"})
            raise InputError(
                f"{what}: {len(missing)} of the {len(results)} series of {shown!r} have no "
                f"label {label!r}; name the label that says the shard with ${{shard_label}} "
                f"(labels seen: {', '.join(seen) or 'none'})")
        values: dict[str, float] = {}
        nodes: dict[str, str] = {}
        spans: list[float] = []
        counts: dict[str, int] = {}
        unusable: set[str] = set()
        for r in results:
            shard = str(r["metric"][label])
            got = value_of(r)
            if got is None:   # no finite sample (NaN, +-Inf): said below, not a silent gap
                unusable.add(shard)
                continue
            value, span = got
            values[shard] = values.get(shard, 0.0) + value
            counts[shard] = counts.get(shard, 0) + 1
            if span is not None:
                spans.append(span)
            if self.node_label and self.node_label in r["metric"]:
                nodes[shard] = str(r["metric"][self.node_label])
        overflowed = sorted(k for k, v in values.items() if not math.isfinite(v))
        for shard in overflowed:
            del values[shard]
        lost = sorted((unusable - set(values)) | set(overflowed), key=natural_key)
        if lost:
            self.notes.add(f"{what}: shard{'s' * (len(lost) > 1)} "
                           f"{', '.join(_text(x, 40) for x in lost[:10])}"
                           + (f" and {len(lost) - 10} more" if len(lost) > 10 else "")
                           + f" left out: {shown!r} gave no finite value (NaN or infinite "
                           "samples, or a sum past the largest number)")
        if any(n > 1 for n in counts.values()):
            keep = {"__name__", label}
            varying = sorted({k for r in results for k in r.get("metric", {})
                              if k not in keep and len({str(x.get("metric", {}).get(k))
                                                        for x in results}) > 1})
            self.notes.add(f"{what}: up to {max(counts.values())} series per shard, summed"
                           + (f" over {', '.join(varying)}" if varying else ""))
        return _Grouped(values, max(spans) if spans else None, nodes)

    def _empty(self, what: str, expr: str, selector: bool) -> InputError:
        window = f"between {iso(self.start)} and {iso(self.end)}"
        if selector and self.client.series_exist(expr):
            return InputError(f"{what}: no samples of {expr!r} {window}: the window holds no "
                              "data (before the first scrape, or after the last?)")
        if selector:
            return InputError(f"{what}: no series match {expr!r} in Prometheus at "
                              f"{self.client.url}: check the metric name and labels")
        return InputError(f"{what}: the query {expr!r} returned nothing at {iso(self.end)}: "
                          "check the metric names, the labels and the window")

    def counters(self, what: str, expr: str) -> _Grouped:
        """Per shard: the counters' exact increase over the window (summed series) and the
        span between first and last samples."""
        kind, results = self.client.query(f"{expr}[{self.range}]", self.end)
        if not results:
            raise self._empty(what, expr, True)
        if kind != "matrix":
            raise InputError(f"{what}: {expr!r} over the window gave a {kind}, not samples")

        def value_of(r: dict[str, Any]) -> tuple[float, float] | None:
            got = counter_increase(r.get("values", []))
            return None if got is None else (got[0], got[2] - got[1])

        grouped = self._group(what, expr, results, value_of)
        grouped.samples = {}
        for r in results:
            points = [(float(t), finite(v)) for t, v in r.get("values", [])]
            grouped.samples.setdefault(str(r["metric"][self.shard_label]), []).append(
                [(t, v) for t, v in points if v is not None])
        if not grouped.values or not grouped.span:
            raise InputError(f"{what}: {expr!r} has fewer than two samples per series between "
                             f"{iso(self.start)} and {iso(self.end)}: a longer window, or a "
                             "shorter scrape interval")
        return grouped

    def instant(self, what: str, expr: str) -> _Grouped:
        """Per shard: the expression's value at the window's end (``$__range`` expanded)."""
        promql = self.expand(expr)
        kind, results = self.client.query(promql, self.end)
        if not results:
            raise self._empty(what, promql, False)

        def value_of(r: dict[str, Any]) -> tuple[float, None] | None:
            value = finite((r.get("value") or [None, None])[1])
            return None if value is None else (value, None)

        return self._group(what, promql, results, value_of)

    def scalar_series(self, promql: str, by_shard: bool) -> dict[str | None, float]:
        """Values of an expression that may return nothing (NaN or no series: left out)."""
        _, results = self.client.query(promql, self.end)
        out: dict[str | None, float] = {}
        for r in results:
            value = finite((r.get("value") or [None, None])[1])
            if value is None:
                continue
            key = str(r.get("metric", {}).get(self.shard_label)) if by_shard else None
            out[key] = value
        return out


def _latency_unit(expr: str) -> float:
    """Milliseconds per unit of a histogram's buckets: seconds (Prometheus' base unit) unless
    the name says milliseconds or microseconds."""
    name = expr.lower()
    if "millisecond" in name or "_ms_" in name or name.endswith("_ms"):
        return 1.0
    if "microsecond" in name or "_us_" in name or "_usec" in name:
        return 1e-3
    return 1e3


def _latency(q: _Query, expr: str, notes: Notes
             ) -> tuple[dict[str, float], dict[str | None, dict[str, float]]]:
    """(run percentiles in ms, per shard {"p50_ms", "p99_ms"}) from a histogram."""
    rates = f"rate({expr}[{q.range}])" if is_selector(expr) else q.expand(expr)
    scale = _latency_unit(expr)
    run: dict[str, float] = {}
    for name, quantile in LATENCY_QUANTILES.items():
        got = q.scalar_series(f"histogram_quantile({quantile}, sum by (le) ({rates}))", False)
        if None in got:
            run[name] = round(got[None] * scale, 6)
    if not run:
        notes.missing("latency", f"histogram_quantile over {expr!r} gave nothing for the "
                                 "window (no observations in it, or not a histogram with le)")
    per_shard: dict[str | None, dict[str, float]] = {}
    for field, quantile in (("p50_ms", 0.5), ("p99_ms", 0.99)):
        got = q.scalar_series(f"histogram_quantile({quantile}, sum by ({q.shard_label}, le) "
                              f"({rates}))", True)
        for shard, value in got.items():
            per_shard.setdefault(shard, {})[field] = round(value * scale, 6)
    # interpolated percentiles never decrease with q; rounding may make them touch: keep order
    last = 0.0
    for name in LATENCY_QUANTILES:
        if name in run:
            run[name] = last = max(run[name], last)
    for values in per_shard.values():
        if "p50_ms" in values and "p99_ms" in values:
            values["p99_ms"] = max(values["p99_ms"], values["p50_ms"])
    if run:
        notes.add("latency percentiles are histogram_quantile's interpolation inside the "
                  "histogram's buckets (within one bucket of the truth)")
    return run, per_shard


# a window holds at least this many scrapes (a counter's rise inside fewer is mostly the
# scrape grid's phase) and a run at most WINDOWS_PER_RUN windows
SCRAPES_PER_WINDOW = 4
WINDOWS_PER_RUN = 60


def window_edges(groups: list[_Grouped], start: float, end: float):
    """Equal windows over [start, end]: as many as ``WINDOWS_PER_RUN``, each at least
    ``SCRAPES_PER_WINDOW`` scrape intervals long (the median interval of the counters'
    samples); None when the run holds fewer than two such windows."""
    import numpy as np

    gaps = [b[0] - a[0] for g in groups for series in (g.samples or {}).values()
            for points in series for a, b in zip(points, points[1:], strict=False)]
    if not gaps:
        return None
    width = max((end - start) / WINDOWS_PER_RUN, SCRAPES_PER_WINDOW * float(np.median(gaps)))
    n = min(int((end - start) // width), MAX_WINDOWS)
    if n < 2:
        return None
    return np.linspace(start, end, n + 1)   # they tile the run: every scrape in one window


def window_rises(group: _Grouped, edges) -> dict[str, Any]:
    """Per shard, each window's counter increase: every rise between two samples (a fall is a
    reset: the new value is the rise, as ``counter_increase``) counted in the window holding
    the later sample. The windows' rises add up to the run's increase (less those outside)."""
    import numpy as np

    out = {}
    for shard, series in (group.samples or {}).items():
        total = np.zeros(edges.size - 1)
        for points in series:
            if len(points) < 2:
                continue
            t = np.array([p[0] for p in points])
            v = np.array([p[1] for p in points])
            rise = np.where(v[1:] >= v[:-1], v[1:] - v[:-1], v[1:])
            w = np.searchsorted(edges, t[1:], side="right") - 1
            w[(w == total.size) & (t[1:] <= edges[-1])] = total.size - 1  # at the run's end
            inside = (w >= 0) & (w < total.size)
            np.add.at(total, w[inside], rise[inside])
        out[shard] = total
    return out


def _latency_windows(q: _Query, expr: str, edges) -> tuple[list, dict[str, list]]:
    """Each window's p99 (ms) for the run and per shard, from range queries of the
    histogram's rates over each window, evaluated at the window's end."""
    step = float(edges[1] - edges[0])
    rng = f"{max(1, math.ceil(step * 1000))}ms"
    rates = f"rate({expr}[{rng}])" if is_selector(expr) else expr.replace("$__range", rng)
    scale = _latency_unit(expr)
    n = edges.size - 1

    def series(promql: str, by_shard: bool) -> dict[str | None, list]:
        out: dict[str | None, list] = {}
        for r in q.client.query_range(promql, float(edges[1]), float(edges[-1]), step):
            key = str(r.get("metric", {}).get(q.shard_label)) if by_shard else None
            row = out.setdefault(key, [None] * n)
            for t, v in r.get("values", []):
                w = int(round((float(t) - float(edges[0])) / step)) - 1
                value = finite(v)
                if 0 <= w < n and value is not None:
                    row[w] = round(value * scale, 6)
        return out

    run = series(f"histogram_quantile(0.99, sum by (le) ({rates}))", False).get(None,
                                                                                 [None] * n)
    per = series(f"histogram_quantile(0.99, sum by ({q.shard_label}, le) ({rates}))", True)
    return run, {k: v for k, v in per.items() if k is not None}


def _windows(q: _Query, start: float, groups: dict[str, _Grouped], latency: str | None,
             notes: Notes) -> tuple[TimeWindow, ...]:
    """The run's time axis from the counters' raw samples (requests and CPU per shard per
    window) and, with a histogram, range queries of each window's p99."""
    counted = [g for g in groups.values() if g.samples]
    if not counted:
        return ()
    edges = window_edges(counted, q.start, q.end)
    if edges is None:
        notes.add("no windows: the run is shorter than two windows of "
                  f"{SCRAPES_PER_WINDOW} scrapes")
        return ()
    width = float(edges[1] - edges[0])
    requests = window_rises(groups["requests"], edges) if "requests" in groups else {}
    cpu = window_rises(groups["cpu"], edges) if "cpu" in groups else {}
    run_p99: list = [None] * (edges.size - 1)
    shard_p99: dict[str, list] = {}
    if latency:
        try:
            run_p99, shard_p99 = _latency_windows(q, latency, edges)
        except InputError as exc:
            notes.add(f"no p99 per window: {exc}")
    ids = sorted(set(requests) | set(cpu), key=natural_key)
    out = []
    for w in range(edges.size - 1):
        shards = []
        for shard in ids:
            values: dict[str, Any] = {}
            if shard in requests:
                values["requests"] = max(0, round(float(requests[shard][w])))
            if shard in cpu:
                busy = float(cpu[shard][w]) / width
                if 0 <= busy <= 1 + CPU_SLACK_S / width:
                    values["cpu"] = round(min(busy, 1.0), 6)
            p99 = shard_p99.get(shard, [None] * (w + 1))[w]
            if p99 is not None:
                values["p99_ms"] = p99
            shards.append(ShardObservation(id=shard, **values))
        total = sum(s.requests for s in shards if s.requests is not None)
        fields: dict[str, Any] = {}
        if requests:
            fields["requests"] = total
            fields["rate_rps"] = round(total / width, 3)
        if run_p99[w] is not None:
            fields["latency_ms"] = {"p99": run_p99[w]}
        out.append(TimeWindow(start_s=round(float(edges[w]) - start, 3),
                              end_s=round(float(edges[w + 1]) - start, 3), shards=tuple(shards),
                              **fields))
    notes.add(f"windows: {len(out)} of {width:.1f} s, each counter rise counted in the window "
              "of its later scrape")
    return tuple(out)


def _cpu(q: _Query, expr: str, notes: Notes, preset_note: str | None) -> _Grouped:
    """Each shard's CPU, a busy fraction of one core: a counter selector's CPU seconds over
    its scrapes' span, or an expression's value over the window; a value just outside [0, 1]
    within the counters' resolution settled, and one beyond a core kept as cores (the caller
    puts it in ``extra.cpu_cores``), each said in a note."""
    if is_selector(expr):
        g = q.counters("cpu", expr)
        span = g.span or 1.0
        raw = {s: v / span for s, v in g.values.items()}
    else:
        g = q.instant("cpu", expr)
        raw = dict(g.values)
        span = q.end - q.start  # what $__range covers
    settled = {s: settle_fraction(v, CPU_SLACK_S / span) for s, v in raw.items()}
    edged = {s: v for s, v in raw.items() if settled[s] != v}
    if edged:
        shard, value = max(edged.items(), key=lambda kv: abs(kv[1] - settled[kv[0]]))
        notes.add(f"cpu of {len(edged)} shard(s) measured just outside [0, 1] (e.g. "
                  f"{shard!r}: {value:.4f}), within the CPU counters' resolution over "
                  f"{span:.1f} s: taken as {settled[shard]:g}")
    if preset_note:
        notes.add(preset_note)
    over = {s: v for s, v in settled.items() if not 0 <= v <= 1}
    if over:
        shard, value = next(iter(sorted(over.items())))
        notes.add(f"cpu left out for {len(over)} shard(s) (e.g. {shard!r}: "
                  f"{value:.3g} cores): a shard's CPU is a busy fraction of one core in "
                  "[0, 1]; their CPU in cores is in the shard's extra.cpu_cores")
    g.values = settled
    return g


class _Gathered:
    """What the queries gave, shard by shard, as ``observe_prometheus`` asks for each metric
    (requests, CPU, errors, latency: a method each), then the shards and the run's totals."""

    def __init__(self, q: _Query, notes: Notes) -> None:
        self.q, self.notes = q, notes
        self.per: dict[str, dict[str, Any]] = {}
        self.nodes: dict[str, str] = {}
        self.spans: list[float] = []
        # what the requests were counted over, for duration_s and rate_rps: a counter
        # selector's first-to-last scrape, or the window ($__range) for an expression; never
        # another query's span (a CPU counter's scrapes inside the window would divide a
        # count over the whole window by a shorter time, and without one the rate would be
        # missing)
        self.requests_span: float | None = None
        self.counted: dict[str, _Grouped] = {}   # counters, whose samples make the windows

    def _take(self, name: str, grouped: _Grouped, convert) -> None:
        self.nodes.update(grouped.nodes)
        for shard, value in grouped.values.items():
            out = convert(shard, value)
            if out is not None:
                self.per.setdefault(shard, {})[name] = out

    def requests(self, expr: str) -> None:
        if is_selector(expr):
            g = self.q.counters("requests", expr)
            self.counted["requests"] = g
            self.spans.append(g.span or 0.0)
            self.requests_span = g.span
        else:
            g = self.q.instant("requests", expr)
            self.requests_span = self.q.end - self.q.start
            self.notes.add(f"requests are {expr!r} at the window's end, rounded to whole "
                           "requests")
        self._take("requests", g, lambda s, v: max(0, round(v)))

    def cpu(self, expr: str, preset_note: str | None) -> None:
        g = _cpu(self.q, expr, self.notes, preset_note)
        if g.samples is not None:   # a counter: its scrapes' span, its samples for windows
            self.counted["cpu"] = g
            self.spans.append(g.span or 0.0)
        self.nodes.update(g.nodes)
        for s, v in g.values.items():
            target = self.per.setdefault(s, {})
            if not 0 <= v <= 1:
                target.setdefault("extra", {})["cpu_cores"] = round(v, 6)
            else:
                target["cpu"] = round(v, 6)

    def errors(self, expr: str) -> None:
        try:
            g = (self.q.counters("errors", expr) if is_selector(expr)
                 else self.q.instant("errors", expr))
        except InputError as exc:   # errors are optional: the rest stands without them
            self.notes.missing("errors", str(exc))
        else:
            self._take("errors", g, lambda s, v: max(0, round(v)))

    def latency(self, expr: str) -> dict[str, float]:
        latency_ms, per_shard = _latency(self.q, expr, self.notes)
        for shard, values in per_shard.items():
            if shard in self.per:
                self.per[shard].update(values)
        return latency_ms

    def shards(self) -> list[ShardObservation]:
        shards = []
        for shard, values in self.per.items():
            extra = values.pop("extra", {})
            if "errors" in values and "requests" in values and \
                    values["errors"] > values["requests"]:
                values.pop("errors")
                self.notes.add(f"shard {shard}: more errors than requests; errors left out")
            if self.nodes.get(shard):
                values["node"] = self.nodes[shard]
            shards.append(ShardObservation(id=shard, extra=extra, **values))
        return shards

    def totals(self, shards: list[ShardObservation], requests: str | None) -> dict[str, Any]:
        """duration_s, rate_rps and the error share from the shards' counts."""
        fields: dict[str, Any] = {}
        start, end, span = self.q.start, self.q.end, self.requests_span
        counts = [s.requests for s in shards if s.requests is not None]
        if counts and span:
            total = sum(counts)
            fields["duration_s"] = round(span, 3)
            if total:
                fields["rate_rps"] = round(total / span, 3)
                fields["achieved_rps"] = fields["rate_rps"]
                failed = [s.errors for s in shards if s.errors is not None]
                if failed and len(failed) == len(counts):
                    fields["errors"] = {"share": sum(failed) / total, "attempted": total,
                                        "failed": sum(failed)}
            if is_selector(requests or ""):
                self.notes.add(f"requests counted between the first and last scrape inside "
                               f"the window ({span:.1f} s of {end - start:.1f} s)")
        elif not requests:
            widest = max(self.spans) if self.spans else None
            fields["duration_s"] = round(widest, 3) if widest else round(end - start, 3)
        return fields


def observe_prometheus(url: str, *, start: float, end: float, preset: str | None = None,
                       shard_label: str | None = None, node_label: str | None = None,
                       cpu: str | None = None, requests: str | None = None,
                       latency: str | None = None, errors: str | None = None,
                       label: str = "production", timeout: float = DEFAULT_TIMEOUT
                       ) -> Observations:
    """Per-shard requests, CPU, errors and latency over ``[start, end]`` from Prometheus.

    Parameters
    ----------
    url : str
        The Prometheus server, ``http://HOST:9090``.
    start, end : float
        The window, Unix seconds.
    preset : {"hotshard", "redis", "node", "process"} or None
        Queries for a known exporter (``PRESETS``); the explicit queries override its.
    shard_label, node_label : str or None
        The label naming the shard (default: the preset's, else ``shard``) and the one naming
        its machine or process (``node``).
    cpu, requests, latency, errors : str or None
        A counter selector (exact deltas over the window; CPU seconds for ``cpu``), a PromQL
        expression (``$__range`` is the window's length), or for ``latency`` a histogram's
        bucket selector.
    label : str
        What was observed (the observations' ``label``).

    Returns
    -------
    Observations
        ``shards`` with what the queries gave, ``rate_rps`` and ``duration_s`` when requests
        were counted, ``latency_ms`` from the histogram, ``errors`` when errors were counted;
        ``extra.observe`` holds the URL, the window, the queries and the notes.

    Raises
    ------
    InputError
        Prometheus unreachable or not Prometheus, an unknown preset, no query at all, a query
        returning nothing or series without the shard label, a window without samples.
    """
    if preset is not None and preset not in PRESETS:
        raise InputError(f"unknown preset {preset!r}; choose from {', '.join(PRESETS)}")
    p = PRESETS.get(preset or "")
    queries = {"requests": requests or (p.requests if p else None),
               "cpu": cpu or (p.cpu if p else None),
               "latency": latency or (p.latency if p else None),
               "errors": errors or (p.errors if p else None)}
    if not any(queries[k] for k in ("requests", "cpu", "latency")):
        raise InputError("nothing to ask Prometheus: give a ${preset} (hotshard, redis, node, "
                         "process) or at least one of ${requests_q}, ${cpu_q}, ${latency_q}")
    shard_label = shard_label or (p.shard_label if p else "shard")
    node_label = node_label or (p.node_label if p else None)
    notes = Notes()
    q = _Query(PrometheusClient(url, timeout=timeout), start, end, shard_label, node_label,
               notes)
    got = _Gathered(q, notes)
    if queries["requests"]:
        got.requests(queries["requests"])
    else:
        notes.missing("requests per shard", p.why_no_requests if p and p.why_no_requests
                      else "no requests query (give --requests)")
    if queries["cpu"]:
        got.cpu(queries["cpu"], p.cpu_note if p and not cpu else None)
    else:
        notes.missing("cpu per shard", "no cpu query (give --cpu)")
    if queries["errors"] and queries["requests"]:
        got.errors(queries["errors"])
    latency_ms: dict[str, float] = {}
    if queries["latency"]:
        latency_ms = got.latency(queries["latency"])
    else:
        notes.missing("latency", p.why_no_latency if p and p.why_no_latency
                      else "no latency histogram (give --latency NAME_bucket)")
    shards = got.shards()
    fields = got.totals(shards, queries["requests"])
    windows = _windows(q, start, got.counted, queries["latency"], notes)
    if windows:
        fields["windows"] = windows
    source = {"source": "prometheus", "url": q.client.url, "start": iso(start),
              "end": iso(end), "preset": preset, "shard_label": shard_label,
              "queries": {k: v for k, v in queries.items() if v}}
    return build(label, source=source, notes=notes, shards=shards, latency=latency_ms,
                 fields=fields)
