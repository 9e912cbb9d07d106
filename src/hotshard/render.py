"""Text renderings of results for the terminal: calculation lives elsewhere, only words here."""

from __future__ import annotations

import textwrap

import numpy as np

from hotshard._format import latencies, latency, pct, pct_apart, shown, sparkline, times
from hotshard.profile.fit import PowerLawFit

__all__ = ["check_summary", "cluster_status_text", "fit_summary"]

_CHECK_MARK = {"pass": "PASS", "warn": "WARN", "fail": "FAIL"}


def _verdict(c) -> str:
    if c.favours == "neither":
        return "inconclusive (neither is favoured at p <= 0.1)"
    if c.favours == "power_law":
        return "power law favoured"
    return f"{c.alternative.replace('_', ' ')} favoured"


def fit_summary(fit: PowerLawFit, source: str) -> str:
    """A readable multi-line summary of a power-law fit."""
    share = fit.n_tail / fit.n
    how = "fixed by --xmin" if fit.xmin_fixed else (
        f"minimum KS distance over {fit.candidates:,} candidates"
    )
    lines = [
        f"Discrete power-law fit (Clauset, Shalizi & Newman 2009) of {source}",
        f"  observations     {fit.n:,} ({fit.n_distinct:,} distinct values)",
        f"  tail             x >= {fit.xmin:,}: {fit.n_tail:,} observations ({pct(share)}); "
        f"xmin {how}",
        f"  alpha            {fit.alpha:.4f} +/- {fit.alpha_se:.4f}",
        f"  KS distance      {fit.ks:.5f}",
    ]
    if fit.gof is not None:
        g = fit.gof
        verdict = "power law plausible" if g.plausible else "power law ruled out (p <= 0.1)"
        lines.append(
            f"  goodness of fit  p = {g.p_value:.3f} over {g.n_sets:,} bootstrap sets "
            f"(seed {g.seed}): {verdict}"
        )
    for c in fit.comparisons:
        lines.append(
            f"  vs {c.alternative:<17} R = {c.R:+.3f} (normalised {c.normalized_R:+.3f}), "
            f"p = {c.p_value:.3f}: {_verdict(c)}"
        )
        if c.degenerate:  # the best "lognormal" is a power law: no (mu, sigma) to show
            lines.append(f"    note: {c.note}")
        else:
            lines.append("    fitted " + ", ".join(f"{k} {v:.4g}" for k, v in c.parameters.items()))
    if fit.n_tail < 50:
        lines.append(f"  warning: only {fit.n_tail} tail observations; alpha is uncertain")
    return "\n".join(lines)


def profile_summary(summary, source: str) -> str:
    """`hotshard inspect`: the numbers first, then the warnings."""
    def share(x: float | None) -> str:
        return "n/a" if x is None else pct(x)

    s = summary
    lines = [
        f"Profile {source}",
        f"  events           {s.events:,.0f}",
        f"  distinct keys    {s.keys:,.0f}",
        f"  head             {s.head_keys:,} keys carry {share(s.head_share)} of events",
        f"  top-1 key        {share(s.top1_share)}",
        f"  top-10 keys      {share(s.top10_share)}",
        f"  top-1% of keys   {share(s.top1pct_share)}"
        + (f" ({s.top1pct_vs_uniform:.1f}x a uniform workload)"
           if s.top1pct_vs_uniform == s.top1pct_vs_uniform else ""),
    ]
    if s.tail_alpha is not None:  # a hand-made law may lack the standard error and KS
        se = "" if s.tail_alpha_se is None else f" +/- {s.tail_alpha_se:.3f}"
        ks = "" if s.tail_ks is None else f", KS {s.tail_ks:.3f}"
        lines.append(f"  tail power law   alpha {s.tail_alpha:.3f}{se}, xmin {s.tail_xmin:,.0f}"
                     f"{ks} (fit {s.fit_quality})")
    else:
        lines.append(f"  tail power law   {s.fit_quality}")
    for op, d in s.operations.items():
        lines.append(f"  op {op:<13} {pct(d['share'])} of events, {d['keys']:,.0f} keys, "
                     f"top-1 key {share(d['top1_share'])}")
    if s.rate:
        lines.append(f"  rate             mean {s.rate['mean_rps']:,.1f}/s, "
                     f"p99 {s.rate['p99_rps']:,.0f}/s, peak {s.rate['peak_rps']:,.0f}/s "
                     f"over {s.rate['seconds']:,} s")
    if s.lru_hits:
        lines.append("  LRU hit rate     " + " / ".join(f"{hit:.3f}" for hit in s.lru_hits.values())
                     + " at " + " / ".join(s.lru_hits) + f" of keys ({s.locality_order} order)")
    if s.timelines:
        lines.append("  timelines        requests per window of the span, busiest window = █")
        width = max(len(k) for k, _ in s.timelines)
        for key, row in s.timelines:
            lines.append(f"    {key:<{width}}  {sparkline(row)}  {sum(row):,}")
    if s.sizes:
        lines.append("  payload sizes    " + ", ".join(
            f"p{float(q) * 100:g} {v:,.0f}" for q, v in s.sizes.items()))
    lines.extend(f"  warning: {w}" for w in s.warnings)
    return "\n".join(lines)


def verify_summary(report, path: str) -> str:
    """`hotshard generate verify`: one line per check."""
    lines = [f"Verify {path}: {report.events:,} messages"]
    for check in report.checks:
        lines.append(f"  {'PASS' if check.passed else 'FAIL'}  {check.name}: {check.detail}")
    lines.append("  result: " + ("pass" if report.passed else "FAIL"))
    return "\n".join(lines)


def _shard_rows(pred, label: str) -> list[str]:
    import textwrap

    n = pred.n_shards
    lines = [f"  {label}: max/mean {pred.max_over_mean:.2f}; hottest shard {pred.hottest} "
             f"carries {pct(pred.shares[pred.hottest])}"]
    order = sorted(range(n), key=lambda s: -pred.shares[s])
    show = order[:8]
    width = len(str(n - 1))  # the widest shard number, so the columns line up
    show_sd = max(pred.sd[s] for s in show) >= 5e-5  # +/- 0.00% would say nothing
    cpu_width = 0 if pred.cpu is None else max(len(pct(pred.cpu[s])) for s in show)
    for s in show:
        sd = f" +/- {pct(pred.sd[s])}" if show_sd else ""
        cpu = f"  cpu {pct(pred.cpu[s]):>{cpu_width}}" if pred.cpu is not None else ""
        lines.append(f"    shard {s:>{width}}  {pct(pred.shares[s]):>7}{sd}{cpu}")
    if n > 9:
        rest = pred.shares[order[8:]]
        lines.append(f"    ... {n - 8} more shards between {pct(rest.min())} and "
                     f"{pct(rest.max())}")
    elif n == 9:
        lines.append(f"    ... 1 more shard at {pct(pred.shares[order[8]])}")
    if pred.hottest_keys:
        keys = ", ".join(f"{shown(k)} ({pct(v)})" for k, v in pred.hottest_keys)
        lines.append(f"    hot keys on shard {pred.hottest}: {keys}")
    if pred.cpu is not None:
        hottest = (f"The hottest, shard {pred.hottest}, reaches 100% CPU at {pred.max_rps:,.0f} "
                   "rps in total.")
        sat = pred.saturated
        if sat:
            named = ", ".join(str(s) for s in sat[:8]) + (
                f" and {len(sat) - 8} more" if len(sat) > 8 else "")
            verb = "saturates" if len(sat) == 1 else "saturate"
            text = (f"warning: {len(sat)} of {n} shards {verb} at {pred.rps:,.0f} rps (CPU over "
                    f"100%): {named}. Requests arrive faster than they are served, so their "
                    f"queues grow without bound. {hottest}")
        else:
            text = f"no shard saturates at {pred.rps:,.0f} rps. {hottest}"
        if pred.timeline is not None:  # the whole span's average: the peak is said above
            text = "Over the whole span's average, " + text[0].lower() + text[1:]
        lines += textwrap.wrap(text, width=96, initial_indent="    ",
                               subsequent_indent="      ")
    return lines


def prediction_summary(pred) -> str:
    """`hotshard predict`: per-shard shares, against what uniform keys would show."""
    import textwrap

    exact = ("exact (placement recorded in the profile)" if pred.tail_exact else
             "head exact, tail by its mean and variance")
    if pred.keys_from != "profile":
        exact = f"every key of {pred.keys_from} placed exactly"
    n = pred.n_shards
    lines = [f"Predicted load on {pred.partitioner} ({n} shard{'' if n == 1 else 's'}; {exact})"]
    if pred.timeline is not None:
        lines += _timeline_lead(pred)
        lines.append("  over the whole span:")
    elif pred.keys_from == "profile":
        lines.append("  (no timelines in the profile: shares over its whole span only; "
                     "`hotshard profile --time` records when each head key was hot)")
    lines += _shard_rows(pred, "before" if pred.after is not None else "prediction")
    lines.append(f"  uniform keys would give every shard {pct(pred.uniform_low)} to "
                 f"{pct(pred.uniform_high)} (max/mean <= {pred.uniform_max_over_mean:.2f})")
    if pred.max_over_mean > pred.uniform_max_over_mean:
        hot, high = pct_apart(pred.shares[pred.hottest], pred.uniform_high)
        lines.append(f"  => shard {pred.hottest} is hot by key distribution, not by noise: "
                     f"{hot} against at most {high}")
    if pred.after is not None:
        w = pred.whatif
        lines += textwrap.wrap(f"what if: {w['text']}", width=96, initial_indent="  ",
                               subsequent_indent="    ")
        for note in w.get("notes", ()):
            lines += textwrap.wrap(f"note: {note}", width=96, initial_indent="  ",
                                   subsequent_indent="    ")
        after = _shard_rows(pred.after, "after")
        total = float(pred.after.shares.sum())
        lines.append(after[0])
        if abs(total - 1.0) > 5e-4:
            why = []
            if w.get("cache_hit") or w.get("coalesce"):
                why.append("cache hits and coalesced reads reach no shard")
            if w.get("replicas", 1) > 1:
                why.append(f"a shard's reads are split over its {w['replicas']} replicas")
            lines += textwrap.wrap(
                f"(shares of all requests before mitigation that reach one node of each shard: "
                f"they add to {pct(total)}, not 100%, since {' and '.join(why)})",
                width=96, initial_indent="    ", subsequent_indent="     ")
        lines += after[1:]
        a = pred.after
        node = "node" if w.get("replicas", 1) > 1 else "shard"
        lines.append(f"  uniform keys carrying the same load would give every {node} "
                     f"{pct(a.uniform_low)} to {pct(a.uniform_high)} "
                     f"(max/mean <= {a.uniform_max_over_mean:.2f})")
    if pred.timeline is not None:
        lines += _timeline_rows(pred)
    return "\n".join(lines)


def _timeline_lead(pred) -> list[str]:
    """The peak window first when it is not the whole span's hottest shard, and the events."""
    from hotshard._format import clock

    tl = pred.timeline
    span = float(tl.edges_s[-1])
    peak = tl.peak
    hot = peak.hottest
    when = f"{clock(tl.peak_start_s, span)}-{clock(tl.peak_end_s, span)}"
    keys = ", ".join(f"key {shown(k)}, {pct(v)}" for k, v in peak.notable_keys(3)) \
        or "no head key"
    lead = (f"  in {when} shard {hot} carries {pct(peak.shares[hot])}: {keys} of that "
            "window's requests")
    if hot == pred.hottest and peak.shares[hot] <= pred.shares[pred.hottest] * 1.25:
        lead = f"  the peak window ({when}) has the same hottest shard, {hot}: " \
               f"{pct(peak.shares[hot])} of its requests"
    elif hot != pred.hottest:
        lead += (f"; over the whole span shard {pred.hottest} is hottest "
                 f"({pct(pred.shares[pred.hottest])}) and shard {hot} has "
                 f"{pct(pred.shares[hot])}")
    lines = textwrap.wrap(lead, width=96, initial_indent="", subsequent_indent="    ")
    if peak.cpu is not None:
        sat = (f"; saturated: {', '.join(map(str, peak.saturated))}" if peak.saturated else "")
        # the whole span's mean rate at which the peak shard reaches 100% in its window
        at = peak.max_rps * pred.rps / peak.rps if peak.rps else float("nan")
        lines += textwrap.wrap(
            f"at that window's {peak.rps:,.4g} req/s: shard {hot} at {pct(peak.cpu[hot])} "
            f"CPU{sat}; it reaches 100% in that window at {at:,.0f} rps in total (the whole "
            "span's mean)", width=96, initial_indent="    ", subsequent_indent="      ")
    for e in tl.events[:5]:
        lines += textwrap.wrap(
            f"  event: key {shown(e.key)} (shard {e.shard}) carries {pct(e.share)} of the requests "
            f"in {clock(e.start_s, span)}-{clock(e.end_s, span)} against {pct(e.overall_share)} "
            "over the whole span", width=96, subsequent_indent="    ")
    if len(tl.events) > 5:
        lines.append(f"  ... and {len(tl.events) - 5} more events (--json lists them)")
    if tl.tail_steady:
        lines.append("  note: the profile has no arrivals section, so each window's tail "
                     "requests are taken as steady")
    return lines


def _timeline_rows(pred) -> list[str]:
    """The hottest shards' share in every window, as sparklines over the profile's span."""
    from hotshard._format import clock

    tl = pred.timeline
    span = float(tl.edges_s[-1])
    lines = [f"  share per window ({tl.shares.shape[0]} windows of "
             f"{clock(tl.edges_s[1] - tl.edges_s[0], span)}, 0:00 to {clock(span, span)}):"]
    worst = np.argsort(-tl.shares.max(axis=0), kind="stable")[:4]
    top = float(tl.shares.max())
    for s in worst:
        column = tl.shares[:, s]
        lines.append(f"    shard {s:<4} {sparkline(column.tolist(), top)}  {pct(column.min())} to "
                     f"{pct(column.max())}")
    if pred.timeline.peak.after is not None:
        a = pred.timeline.peak.after
        lines.append(f"  in the peak window with the what-if: hottest shard {a.hottest} at "
                     f"{pct(a.shares[a.hottest])} (the window's own top keys mitigated)")
    return lines


_ORDER_TEXT = {"locality": " in production's order",
               "irm+timelines": ", head keys on their timelines"}


def simulation_summary(result) -> str:
    """`hotshard simulate`: latency percentiles, the hottest shards against the median one."""
    from hotshard.workload.timing import format_duration

    m, w = result.model, result.mitigations

    def plural(n, word):
        return f"{n:,} {word}{'' if n == 1 else 's'}"

    lines = [f"Simulated {format_duration(result.duration)} at {result.rps:,.4g} req/s on "
             f"{plural(m.shards, m.partitioner + ' shard')}, {plural(m.workers, 'worker')} each"
             + (f" ({w.replicas} read nodes each for hot keys' reads)" if w.replicas > 1
                else ""),
             f"  requests  {result.requests:,}, {result.key_generator} keys"
             f"{_ORDER_TEXT.get(result.key_order, '')}"]
    lines.append(f"  service {_spec_text(m.service.to_dict())}; reads {result.reads}")
    lines.append(f"  arrivals {_spec_text(m.arrivals.to_dict())}")
    for e in result.events:
        end = format_duration(min(e.end, result.duration))
        lines.append(f"  event: {pct(e.share)} of all requests to key {shown(e.key)} from "
                     f"{format_duration(e.start)} to {end}")
    mitigations = None
    if result.detection is not None:
        applied = "mitigated from then on" if w.active else "nothing to apply"
        lines += _wrapped(f"  detection: {result.detection.text()}: {applied}")
        if w.cache_hit > 0:
            mitigations = (f"{pct(w.cache_hit)} of a hot key's reads hit a local cache"
                           + (f"; {w.text()}" if w.replicas > 1 or w.coalesce or w.splits
                              else ""))
        elif w.active:
            mitigations = w.text()
    elif w.active:
        mitigations = w.text()
    if mitigations:
        lines += _wrapped(f"  mitigations: {mitigations}")
    quantiles = result.percentiles()
    if quantiles:
        lines.append("  latency   p50/p90/p99/p99.9/max " + latencies(
            [quantiles[k] for k in ("p50", "p90", "p99", "p999", "max")]))
    cpu = [s.cpu for s in result.shards]
    order = sorted(range(len(cpu)), key=lambda i: (-cpu[i], -result.shards[i].requests))
    median = float(np.median(cpu))
    p99s = [s.p99_ms for s in result.shards if s.p99_ms is not None]
    typical_p99 = float(np.median(p99s)) if p99s else 0.0
    width = len(str(len(cpu) - 1))
    hottest = order[:5]
    req_width = max((len(f"{result.shards[i].requests:,}") for i in hottest), default=1)
    lines.append(f"  shards    median CPU {pct(median)}; hottest (latency p50/p90/p99/p99.9, "
                 "queue mean and max):")
    for i in hottest:
        s = result.shards[i]
        if s.p99_ms is None:
            lines.append(f"    shard {i:>{width}}  no requests")
            continue
        lines.append(f"    shard {i:>{width}}  CPU {pct(s.cpu):>4}  {s.requests:>{req_width},} "
                     f"req  {latencies([s.p50_ms, s.p90_ms, s.p99_ms, s.p999_ms])}  queue "
                     f"{_queue_text(s.mean_queue)}, {_queue_text(s.max_queue)}")
        if s.cpu >= 0.99:
            lines.append(f"    {'':>{6 + width}}SATURATED: arrivals outran service the whole "
                         "window")
        elif typical_p99 and s.p99_ms > 10 * typical_p99:
            lines.append(f"    {'':>{6 + width}}BACKLOG: p99 {times(s.p99_ms / typical_p99)} a "
                         "typical shard's")
    if result.cache_hit_rate is not None:
        lines.append(f"  cache     {m.cache_size:,} entries per shard: read hit rate "
                     f"{pct(result.cache_hit_rate)}")
    if result.coalesced:
        lines.append(f"  coalesced {result.coalesced:,} reads joined an identical read in flight")
    if result.windows is not None and len(result.windows) > 1:
        lines += _simulation_windows(result)
    return "\n".join(lines)


_TABLE_WINDOWS = 24   # at most this many windows get a line each; more, a sparkline
_SPARK_MARKS = 60     # a sparkline's widest: more windows share a mark (their highest)


def _clock(seconds: float, total: float) -> str:
    """An instant of the run as every window-aware output writes it (``_format.clock``)."""
    from hotshard._format import clock

    return clock(seconds, total)


# a summary's lines fit a terminal this wide; a long sentence goes on under its label
SUMMARY_WIDTH = 100


def _wrapped(line: str) -> list[str]:
    """``line`` (``  label: text``) in lines of ``SUMMARY_WIDTH``, continued under the text."""
    label = len(line) - len(line.lstrip()) + line.lstrip().find(": ") + 2
    return textwrap.wrap(line, SUMMARY_WIDTH, subsequent_indent=" " * label,
                         break_on_hyphens=False) or [line]


def _queue_text(n: float) -> str:
    """A queue length in a few characters: 0.8, 32, 4,434, 12k, 1.4M."""
    if n < 10:
        return f"{n:.1f}"
    for limit, suffix, scale in ((1e4, "", 1), (1e6, "k", 1e3), (1e9, "M", 1e6)):
        if n < limit:
            value = n / scale
            return f"{value:,.0f}{suffix}" if value >= 10 or not suffix else \
                f"{value:.1f}{suffix}"
    return f"{n / 1e9:.1f}G"


def _ms_text(value) -> str:
    return "-" if value is None or value != value else latency(value)


def _simulation_windows(result) -> list[str]:
    """The run over time: the hot shard's CPU and p99 window by window (a line each, or
    sparklines for many windows), then its peak window beside its whole-run figures."""
    from hotshard.workload.timing import format_duration

    series = result.windows
    k_peak, hot = series.peak()
    total = float(series.ends[-1])
    count = len(series)
    width = float(series.ends[0] - series.starts[0])
    rates = series.requests.sum(axis=1) / series.seconds
    cpu = series.cpu[:, hot]
    p99 = series.p99_ms[:, hot]
    lines = [f"  over time {count:,} windows of {format_duration(width)}; shard {hot}, the "
             "busiest shard in the busiest window:"]
    if count <= _TABLE_WINDOWS:
        spans = [f"{_clock(a, total)}-{_clock(b, total)}"
                 for a, b in zip(series.starts, series.ends, strict=True)]
        span_width = max(len(x) for x in spans)
        lines.append(f"    {'window':<{span_width}}  {'req/s':>8}  {'p99 all':>12}  "
                     f"{'shard ' + str(hot) + ' CPU':>12}  {'p99':>12}")
        for k in range(count):
            mark = "  <- peak" if k == k_peak else ""
            lines.append(f"    {spans[k]:<{span_width}}  {rates[k]:>8,.1f}  "
                         f"{_ms_text(series.latency_ms[k, 2]):>12}  {pct(cpu[k]):>12}  "
                         f"{_ms_text(p99[k]):>12}{mark}")
    else:
        per = -(-count // _SPARK_MARKS)

        def marks(values):
            v = np.nan_to_num(np.asarray(values, dtype=np.float64), nan=0.0)
            pad = (-v.size) % per
            return sparkline(list(np.concatenate([v, np.zeros(pad)]).reshape(-1, per)
                                   .max(axis=1)))

        def span(values, text):
            v = np.asarray(values, dtype=np.float64)
            v = v[~np.isnan(v)]
            return f"{text(v.min())} to {text(v.max())}" if v.size else "no requests"

        label = f"shard {hot}"
        lines.append(f"    {_clock(0, total)} to {_clock(total, total)}, one mark "
                     + (f"per {per} windows (their highest)" if per > 1 else "per window"))
        rows = [(f"{label} CPU", cpu, pct), (f"{label} p99", p99, _ms_text),
                ("p99 all", series.latency_ms[:, 2], _ms_text),
                ("req/s", rates, lambda x: f"{x:,.4g}")]
        name_width = max(len(r[0]) for r in rows)
        for name, values, text in rows:
            lines.append(f"    {name:<{name_width}}  {marks(values)}  {span(values, text)}")
    whole = result.shards[hot]
    p99_peak = p99[k_peak]
    lines.append(f"  peak window {_clock(series.starts[k_peak], total)}-"
                 f"{_clock(series.ends[k_peak], total)}: shard {hot} at {pct(cpu[k_peak])} "
                 "CPU, " + ("no requests arrived" if p99_peak != p99_peak
                            else f"p99 {latency(p99_peak)}")
                 + f" (whole run: {pct(whole.cpu)}, "
                 + ("no requests" if whole.p99_ms is None else latency(whole.p99_ms)) + ")")
    return lines


def saturation_text(sat, total_s: float) -> list[str]:
    """`hotshard simulate`'s warnings when the load offered exceeds capacity
    (``sim.series.Saturation``), one line each: the whole service, the shards saturated over
    the whole run, the shards saturated in a window (their worst); each with its sum."""
    def workers(n):
        return f"{n:,} worker{'' if n == 1 else 's'}"

    def sums(x, where):
        return (f"{pct(x.share)} of {where}{x.rate_rps:,.4g} req/s x {x.mean_service_s * 1000:,.3g}"
                f" ms mean service = {x.load:.2f}x its {workers(x.capacity)}")

    lines = []
    svc = sat.service
    if svc.load > 1:
        reaching = (f", {pct(svc.share)} of them reaching a shard's queue,"
                    if abs(svc.share - 1) > 5e-4 else "")
        lines.append(f"the service is offered more work than its workers can do: "
                     f"{svc.rate_rps:,.4g} req/s{reaching} x {svc.mean_service_s * 1000:,.3g} "
                     f"ms mean service = {svc.load * svc.capacity:,.3g} workers' worth for "
                     f"{sat.shards:,} shards' {workers(svc.capacity)} ({svc.load:.2f}x): queues "
                     "grow without bound however the keys spread; lower the rate or add "
                     "shards")
    shown = 8
    for x in sat.whole_run[:shown]:
        lines.append(f"shard {x.shard} saturates over the whole run: it gets "
                     + sums(x, "the ") + ", so its queue grows without bound")
    if len(sat.whole_run) > shown:
        lines.append(f"... and {len(sat.whole_run) - shown} more shards saturate over the "
                     "whole run")
    for x in sat.windows[:shown]:
        span = f"{_clock(x.start_s, total_s)}-{_clock(x.end_s, total_s)}"
        lines.append(f"shard {x.shard} saturates in {span} though not over the whole run: it "
                     "gets " + sums(x, "that window's ") + ", so its queue grew through the "
                     "window")
    if len(sat.windows) > shown:
        lines.append(f"... and {len(sat.windows) - shown} more shards saturate in a window")
    return lines


def _seconds_text(seconds: float) -> str:
    return f"{seconds * 1000:g} ms" if seconds < 1 else f"{seconds:g} s"


def _spec_text(spec: dict) -> str:
    """A service or arrival model's dict in words; seconds (``*_s``) shown as ms or s."""
    kind = spec.get("kind", "")
    if kind == "profile":  # production's measured arrivals: its burstiness in one phrase
        idc = {float(k): v for k, v in spec.get("idc", {}).items()}
        kept = [(k, v) for k, v in sorted(idc.items()) if k in (1.0, 10.0, 60.0)]
        shown = (", ".join(f"{v:.3g}" for _, v in kept) + " at "
                 + ", ".join(f"{k:g}" for k, _ in kept) + " s") if kept else ""
        return ("the profile's rate shape and bursts"
                + (f" (index of dispersion {shown})" if shown else ""))
    parts = []
    for key, value in spec.items():
        if key == "kind" or isinstance(value, list | dict):
            continue
        if key.endswith("_s") and isinstance(value, int | float):
            name = key[:-2].replace("_", " ")
            parts.append(f"{name} {value * 1000:g} ms" if value < 1 else f"{name} {value:g} s")
        elif isinstance(value, float):
            parts.append(f"{key.replace('_', ' ')} {value:g}")
        else:
            parts.append(f"{key.replace('_', ' ')} {value}")
    return f"{kind} ({', '.join(parts)})" if parts else str(kind)


def check_summary(report) -> str:
    """``hotshard check``'s verdict: each check with its message, then what to do."""
    lines = []
    for c in report.checks:
        # a check that cannot judge this pair passes, and says it did not apply
        mark = ("N/A" if (getattr(c, "numbers", None) or {}).get("applies") is False
                else _CHECK_MARK[c.verdict])
        lines.append(f"{mark:5} {c.name}")
        lines.extend(textwrap.wrap(c.message, width=96, initial_indent="      ",
                                   subsequent_indent="      "))
    lines.append("")
    failed = [c.name for c in report.checks if c.verdict == "fail"]
    if failed:
        what = []
        if report.hidden_keys:
            keys = ", ".join(shown(k) for k, _, _ in report.hidden_keys[:5])
            more = len(report.hidden_keys) - 5
            what.append(f"hot keys {keys}" + (f" and {more} more" if more > 0 else ""))
        if report.hot_shard is not None:
            what.append(f"hot shard {report.hot_shard['shard']}")
        hides = (f"; it would hide {' and '.join(what)}" if what else "")
        lines.append(f"FAIL ({', '.join(failed)}){hides}: refuse this test (exit status 1).")
    elif report.verdict == "warn":
        warned = ", ".join(c.name for c in report.checks if c.verdict == "warn")
        lines.append(f"PASS with warnings ({warned}): no check failed, but the test differs "
                     "from production as noted.")
    else:
        lines.append("PASS" + (f": {report.no_hot_spot}." if report.no_hot_spot else
                               ": the test's keys concentrate load as production's do."))
    # the verdict line wraps as the checks' messages do (it names keys and shards)
    verdict = textwrap.wrap(lines.pop(), width=100, subsequent_indent="  ")
    return "\n".join(lines + verdict)


def cluster_status_text(result) -> str:
    """``hotshard cluster status``'s table: one row per node, the failing ones named first."""
    lines = []
    bad = [n for n in result.nodes if n.status != "ok"]
    lines.append(f"{result.url}  cluster_state:{result.cluster_state}" +
                 (f"  ({len(bad)} of {len(result.nodes)} nodes not ok: "
                  + ", ".join(f"{n.address} {n.status}" for n in bad) + ")" if bad else ""))
    lines.append(f"{'node':<22}{'role':<9}{'status':<19}{'slots':>6}  {'ranges':<24}"
                 f"{'ops/s':>8}{'CPU s':>9}{'memory':>9}{'keys':>10}")

    def shown(value, fmt: str = "") -> str:
        return "-" if value is None else format(value, fmt)

    for n in result.nodes:
        ranges = ",".join(f"{a}-{b}" for a, b in n.slots) or \
            (f"replica of {n.master}" if n.master else "-")
        lines.append(f"{n.address:<22}{n.role:<9}{n.status:<19}{n.slot_count:>6}  "
                     f"{ranges:<24}{shown(n.ops_per_sec):>8}{shown(n.cpu_seconds, '.2f'):>9}"
                     f"{shown(n.used_memory):>9}{shown(n.keys):>10}")
    return "\n".join(lines)


def calibration_text(cal) -> str:
    """The calibrated service model, each value with where it came from."""
    rows = cal.describe()
    width = max(len(name) for name, _, _ in rows)
    lines = [f"Service model calibrated from {cal.run_label!r}:"]
    lines += [f"  {name:<{width}}  {value}" + (f"  ({source})" if source else "")
              for name, value, source in rows]
    lines += [f"  note: {text}" for text in cal.notes]
    return "\n".join(lines)


def _ms(value) -> str:
    return "-" if value is None else f"{value:,.1f}"


def comparison_text(comparison) -> str:
    """Predicted against measured, shard by shard, and the overall error."""
    lines = ["shard            CPU measured/predicted   p50 ms measured/predicted   "
             "p99 ms measured/predicted"]
    for r in comparison.rows:
        cpu = (f"{pct(r.measured_cpu)} / {pct(r.predicted_cpu)}"
               if r.measured_cpu is not None and r.predicted_cpu is not None else "-")
        lines.append(f"{r.shard:<16} {cpu:<24} {_ms(r.measured_p50_ms):>9} / "
                     f"{_ms(r.predicted_p50_ms):<15} {_ms(r.measured_p99_ms):>9} / "
                     f"{_ms(r.predicted_p99_ms)}")
    hot = comparison.hottest
    error = f"error: CPU within {comparison.worst_cpu_points:.1f} points"
    if hot.p99_ratio and hot.cpu_points is not None:
        error += (f" on every shard, p99 within a factor of {comparison.worst_p99_factor:.2f}; "
                  f"hottest shard {hot.shard}: CPU {hot.cpu_points:+.1f} points, p99 x"
                  f"{hot.p99_ratio:.2f}")
    lines.append(error)
    return "\n".join(lines)


def observed_shards_text(obs, title: str) -> str:
    """A run's (or a prediction's) shards, hottest first: CPU, requests, p50, p99."""
    lines = [title]
    if obs.latency_ms is not None and obs.latency_ms.p99 is not None:
        lines.append(f"  latency   p50 {_ms(obs.latency_ms.p50)} ms  p99 "
                     f"{_ms(obs.latency_ms.p99)} ms")
    lines.append("  shard            CPU      requests    p50 ms    p99 ms")
    ranked = sorted(obs.shards, key=lambda s: -(s.extra.get("cpu_unbounded") or s.cpu or 0.0))
    for s in ranked[:_SHARDS_LISTED]:
        demand = s.extra.get("cpu_unbounded", s.cpu)
        flag = (f"  SATURATED: demand {demand:.2f}x its capacity"
                if demand is not None and demand >= 0.99 else "")
        lines.append(f"  {s.id:<16} {pct(s.cpu) if s.cpu is not None else '-':<8} "
                     f"{s.requests or 0:>9,} {_ms(s.p50_ms):>9} {_ms(s.p99_ms):>9}{flag}")
    if len(ranked) > _SHARDS_LISTED:
        cpus = [s.cpu for s in ranked[_SHARDS_LISTED:] if s.cpu is not None]
        lines.append(f"  ... {len(ranked) - _SHARDS_LISTED} more shards"
                     + (f", CPU {pct(min(cpus))} to {pct(max(cpus))}" if cpus else ""))
    return "\n".join(lines)


_SHARDS_LISTED = 10   # a prediction's hottest shards; the rest in one line (--json has all)
