"""One self-contained HTML report: the profile, per-shard load, latency, mitigations, diagnosis.

The page opens with no network: minimal inline CSS, no scripts, every plot inline SVG drawn by
matplotlib. Each section pairs a picture with a paragraph of plain words carrying the computed
numbers; what an input lacks (no shards, no latency, no profile) becomes a note in its section,
never an error. All text that came from the user is escaped.
"""

from __future__ import annotations

import html
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from hotshard._atomic import atomic_write, check_writable
from hotshard._format import ms, pct, pct_apart, rps, times, whole
from hotshard.diagnose.evidence import rate_of
from hotshard.errors import InputError
from hotshard.observations import Observations
from hotshard.report.runs import (
    Layout,
    Roles,
    RunSummary,
    ShardLoad,
    assign_roles,
    names_production,
    observed_load,
    predicted_loads,
    resolve_layout,
    run_summary,
)

if TYPE_CHECKING:
    from hotshard.diagnose.findings import Diagnosis
    from hotshard.profile.document import Profile
    from hotshard.shards.predict import Prediction

__all__ = ["SECTIONS", "build_report", "check_report_path", "write_report"]

# section id -> heading, in page order
SECTIONS = {
    "profile": "1. Key popularity: rank-frequency of the profile",
    "shards": "2. Per-shard load: uniform keys, the profile, the runs",
    "time": "3. When: per-shard load and p99 over time",
    "latency": "4. Latency percentiles: load test vs production",
    "mitigations": "5. Mitigations compared",
    "diagnosis": "6. Diagnosis",
}

_CSS = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;
 max-width:1100px;margin:0 auto;padding:1em 1.5em 3em;background:#fff}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.25em;margin-top:2em;
 border-bottom:1px solid #ddd;padding-bottom:.2em}
table{border-collapse:collapse;margin:.8em 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f4f6f8}td.n{text-align:right;font-variant-numeric:tabular-nums}
svg.plot{width:100%;height:auto;display:block;margin:.5em 0}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:.4em .8em;margin:.6em 0}
.summary{background:#f4f6f8;padding:.6em 1em;border-radius:4px}
.warning{background:#fdecea;border-left:4px solid #c62828;padding:.6em 1em;margin:.5em 0}
.fits{color:#1e7d32;font-weight:bold}.contradicted{color:#888}
.cannot{color:#b26a00;font-weight:bold}ul{margin:.2em 0;padding-left:1.2em}
.muted{color:#666;font-size:.9em}
"""


def _e(value: object) -> str:
    """Escaped text for HTML content and attributes."""
    return html.escape(str(value), quote=True)


def _ms(x: float | None) -> str:
    """Milliseconds as the diagnosis writes them (the same numbers read the same)."""
    return "n/a" if x is None else ms(x)


def _note(text: str) -> str:
    return f'<p class="note">{_e(text)}</p>'


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int]) -> str:
    """A table from already escaped cells; columns in ``numeric`` align right."""
    out = ["<table><thead><tr>", *(f"<th>{h}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        cells = (f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>"
                 for i, c in enumerate(row))
        out += ["<tr>", *cells, "</tr>"]
    out.append("</tbody></table>")
    return "".join(out)


def check_report_path(path: str | os.PathLike[str]) -> Path:
    """Fail early, before any work, when ``path`` cannot become the report.

    Raises
    ------
    InputError
        The name does not end in .html, its directory does not exist, or it is not writable.
    """
    suffix = os.path.splitext(str(path))[1]
    if suffix.lower() != ".html":
        shown = suffix or "(no extension)"
        raise InputError(f"cannot write report {path}: a report is one HTML file, so its name "
                         f"must end in .html, got {shown}")
    return check_writable(path)


@dataclass
class _Page:
    """The page being assembled: numbered figures, and the summary's sentences."""

    summary: list[str] = field(default_factory=list)
    figures: int = 0

    def figure(self, fig, alt: str) -> str:
        from hotshard.report.figures import figure_svg

        self.figures += 1
        return figure_svg(fig, prefix=f"f{self.figures}", alt=alt)


# -- header ----------------------------------------------------------------------------------
def _run_row(obs: Observations, role: str, source: str | None) -> list[str]:
    def num(value: float | None, unit: str = "") -> str:
        return "" if value is None else _e(f"{whole(value)}{unit}")

    measured = [name for name, present in (
        ("shards", bool(obs.shards)), ("latency", obs.latency_ms is not None),
        ("CPU", obs.shard_cpu is not None), ("requests", obs.shard_requests is not None))
        if present]
    row = [_e(obs.label), _e(role), num(obs.rate_rps), num(obs.achieved_rps),
           num(obs.duration_s, " s"), _e(obs.model or "not given"),
           _e(obs.key_generator or ""), _e(str(len(obs.shards)) if obs.shards else "none"),
           _e(", ".join(measured) or "nothing per shard")]
    return [_e(source), *row] if source is not None else row


def _header(items: Sequence[Observations], roles: Roles,
            sources: Sequence[str] | None, profile: Profile | None,
            profile_source: str | None, layout: Layout | None, notes: Sequence[str]) -> str:
    from hotshard import __version__

    head = ["run", "role", "rate (req/s)", "achieved (req/s)", "duration", "load model",
            "keys", "shards", "measured"]
    if sources is not None:
        head = ["file", *head]
    rows = [_run_row(o, roles.of(o), None if sources is None else sources[i])
            for i, o in enumerate(items)]
    numeric = {2, 3, 4} if sources is None else {3, 4, 5}
    parts = [f"<p>Inputs: {len(items)} run{'s' * (len(items) != 1)} "
             f"(<code>hotshard.observations/1</code>)"
             + (", a profile" if profile is not None else ", no profile")
             + f". Written by hotshard {_e(__version__)}.</p>",
             _table(head, rows, numeric)]
    if profile is not None:
        src = profile.source
        where = f" from <code>{_e(profile_source)}</code>" if profile_source else ""
        parts.append(f"<p>Profile{where}: key <code>{_e(src.get('key', 'key'))}</code>, "
                     f"{profile.events:,.0f} events over {profile.keys:,.0f} keys, "
                     f"{len(profile.head_keys):,} head keys.</p>")
    if layout is not None:
        parts.append(f"<p>Store layout for the prediction: {_e(layout.text())}.</p>")
    if notes:
        parts.append("<p>Notes on the inputs:</p>" + _items(notes))
    if not names_production(roles.production):
        parts.append(_note(f"No run says it is production (key generator \"production\", "
                           f"\"production\" in its label, or no load model): "
                           f"{roles.production.label} is taken as production. Label the "
                           "production run to be sure."))
    return "".join(parts)


# -- 1. rank-frequency -----------------------------------------------------------------------
def _profile_section(page: _Page, profile: Profile | None) -> str:
    if profile is None:
        return _note("No profile given, so there is no rank-frequency plot and no predicted "
                     "per-shard load; give the profile of production's keys to see both.")
    from hotshard.profile.summary import summarize
    from hotshard.report.rank_frequency import rank_frequency_figure

    s = summarize(profile)
    text = [f"Each point is one key, ranked by how many of the profile's {s.events:,.0f} "
            f"events it carries, on log-log axes. The top key carries {pct(s.top1_share)} "
            f"of events and the top 10 keys {pct(s.top10_share)}"]
    ratio = s.top1pct_vs_uniform
    if ratio is not None and math.isfinite(ratio):  # NaN below 100 keys
        text.append(f"; the top 1% of keys carry {pct(s.top1pct_share)}, "
                    f"{times(ratio)} what uniform keys would give them")
    text.append(f". The dotted line is every key's count under uniform keys "
                f"({s.events / s.keys:,.1f} events each).")
    if s.tail_alpha is not None:
        se = f" &plusmn; {s.tail_alpha_se:.3f}" if s.tail_alpha_se is not None else ""
        ks = f", KS distance {s.tail_ks:.3f}" if s.tail_ks is not None else ""
        text.append(f" Beyond the {s.head_keys:,} head keys the tail follows a discrete power "
                    f"law with alpha {s.tail_alpha:.3f}{se} from xmin {s.tail_xmin}{ks} "
                    f"(fit {_e(s.fit_quality)}).")
    else:
        text.append(" The profile records no fitted power law for its tail.")
    fig = rank_frequency_figure(profile)
    parts = [f"<p>{''.join(text)}</p>",
             page.figure(fig, "rank-frequency of the profile's keys, log-log")]
    parts += [_note(w) for w in s.warnings]
    return "".join(parts)


# -- 2. per-shard load -----------------------------------------------------------------------
def _uniform_words(load: ShardLoad, pred: Prediction, layout: Layout) -> str:
    lo, hi = float(load.values.min()), float(load.values.max())
    spread = (f"each of the {layout.n_shards} shards {pct(lo)} of requests"
              if hi - lo < 1e-9 * max(hi, 1e-12) else
              f"each shard its part of the key space, {pct(lo)} to {pct(hi)} "
              f"of requests")
    return (f"Uniform keys on {_e(layout.text())} give {spread}; with the profile's "
            f"{load.total:,.0f} events spread over as many keys as it has, every shard stays "
            f"within {pct(pred.uniform_low)} to {pct(pred.uniform_high)} "
            f"(max/mean {pred.uniform_max_over_mean:.2f}x).")


def _predicted_words(load: ShardLoad, pred: Prediction) -> str:
    peak, high = pct_apart(load.peak, pred.uniform_high)  # never "8.6%, above the 8.6%"
    text = (f"From the profile alone, shard {_e(load.hottest_id)} is predicted to take "
            f"{peak} of requests, {times(load.max_over_mean)} the mean shard")
    if load.peak > pred.uniform_high:
        text += f", above the {high} uniform keys could reach"
    else:
        text += ", inside the band uniform keys give: no hot shard"
    if pred.hottest_keys:
        keys = ", ".join(f"{_e(k)} ({pct(v)})" for k, v in pred.hottest_keys[:3])
        text += f"; its biggest keys: {keys}"
    return text + "."


def _observed_words(load: ShardLoad, obs: Observations) -> str:
    keys = f" over {whole(obs.distinct_keys)} keys" if obs.distinct_keys else ""
    if load.unit == "cpu":
        median = load.median
        text = (f"In {_e(load.title)}, shard {_e(load.hottest_id)} runs at {pct(load.peak)} "
                f"CPU" + (f", {times(load.peak / median)} the median shard's {pct(median)}"
                          if median > 0 else ""))
        if load.band is not None:
            text += (f"; uniform keys would keep the busiest shard near {pct(load.band[1])} "
                     f"at this CPU")
        return text + " (no request counts per shard, so CPU is shown)."
    high = load.band[1] if load.band is not None else load.peak
    peak, high_text = pct_apart(load.peak, high)
    text = (f"Shard {_e(load.hottest_id)} carries {peak} of the "
            f"{whole(load.total)} requests in {_e(load.title)}, {times(load.max_over_mean)} "
            "the mean shard")
    if load.band is not None:
        verdict = ("far above" if load.peak > 2 * high else "above" if load.peak > high
                   else "within")
        text += (f"; {verdict} the {high_text} uniform keys could give the busiest shard "
                 f"for as many requests{keys}")
    return text + "."


def _agreement(predicted: ShardLoad, production: ShardLoad | None) -> str | None:
    """Whether the prediction names production's hottest shard (ids 0..n-1 only)."""
    if production is None or production.ids != predicted.ids:
        return None
    if production.hottest_id == predicted.hottest_id:
        return (f"The prediction names the shard production found hottest: shard "
                f"{_e(predicted.hottest_id)}.")
    return (f"Production's hottest shard is {_e(production.hottest_id)}, the prediction's "
            f"{_e(predicted.hottest_id)}.")


def _shards_section(page: _Page, items: Sequence[Observations], roles: Roles,
                    predicted: tuple[ShardLoad, ShardLoad, Prediction] | None,
                    layout: Layout | None, layout_note: str | None) -> str:
    from hotshard.report.figures import shard_load_figure

    loads: list[ShardLoad] = []
    words: list[str] = []
    notes: list[str] = []
    if predicted is not None and layout is not None:
        uniform, profiled, pred = predicted
        loads += [uniform, profiled]
        words += [_uniform_words(uniform, pred, layout), _predicted_words(profiled, pred)]
    elif layout_note:
        notes.append(layout_note)
    production_load = None
    for obs in items:
        load, missing = observed_load(obs)
        if load is None:
            notes.append(missing or "")
            continue
        loads.append(load)
        words.append(_observed_words(load, obs))
        if obs is roles.production:
            production_load = load
            page.summary.append(words[-1])
    if predicted is not None:
        agree = _agreement(predicted[1], production_load)
        if agree:
            words.append(agree)
    intro = ("<p>Each row is one run (or a prediction), one bar per shard: its share of all "
             "requests (or its CPU when a run does not count requests per shard, or runs "
             "with mitigations, whose cached requests never reach a shard), the hottest "
             "shard in red, the dashed line at the mean shard, and in green the band "
             "uniform keys could produce for the same number of requests (and keys, where "
             "the run counted them). Uniform keys' row is what a load test with uniform "
             "synthetic keys sees; the profile's row is predicted from the profile without "
             "running anything.</p>")
    parts = [intro]
    if loads:
        parts.append(page.figure(shard_load_figure(loads), "per-shard load, one row per run"))
    parts.append("<ul>" + "".join(f"<li>{w}</li>" for w in words) + "</ul>" if words else "")
    parts += [_note(n) for n in notes]
    if not loads:
        parts.append(_note("No per-shard load to draw: no run lists its shards and no "
                           "profile prediction was made."))
    return "".join(parts)


# -- 3. time ---------------------------------------------------------------------------------
def _time_section(page: _Page, roles: Roles,
                  predicted: tuple[ShardLoad, ShardLoad, Prediction] | None,
                  diagnosis: Diagnosis | None = None) -> str:
    """Per-shard load over time, from production's windows and the profile's timelines."""
    from hotshard._format import clock
    from hotshard.report.timeline import observed_series, predicted_series, timeline_figure

    series = []
    words = []
    notes = []
    observed = observed_series(roles.production)
    if observed is not None:
        series.append(observed)
        w, k = observed.peak
        span = float(observed.edges_s[-1])
        sentence = (f"{_e(roles.production.label)}'s peak window is "
                    f"{clock(observed.edges_s[w], span)}-{clock(observed.edges_s[w + 1], span)}"
                    f": shard {_e(observed.shard_ids[k])} at {pct(observed.values[w, k])} "
                    f"({_e(observed.unit)})")
        if observed.p99_ms is not None and not np.isnan(observed.p99_ms[w]):
            sentence += f", the window's p99 (all shards) {_e(_ms(observed.p99_ms[w]))}"
        words.append(sentence)
        # a hot shard is hot in a window: the summary leads with when
        page.summary.insert(0, sentence + ".")
    else:
        notes.append(f"{roles.production.label}: no time axis in its evidence (no windows), "
                     "so its shares are whole-run averages.")
    from hotshard.diagnose.transient import event_transients, transient_lines

    # an event the run injected: its transient (the diagnosis' own, judged against its p99
    # target when it was given one)
    transients = (diagnosis.transients if diagnosis is not None
                  and diagnosis.production == roles.production.label
                  else event_transients(roles.production))
    for t in transients:
        lines = transient_lines(t)
        words.append(_e(lines[0]) + ": " + "; ".join(_e(x.strip()) for x in lines[1:]))
    profile_series = predicted_series(predicted[2]) if predicted is not None else None
    if profile_series is not None:
        series.append(profile_series)
        tl = predicted[2].timeline
        peak = tl.peak
        span = float(tl.edges_s[-1])
        keys = ", ".join(f"key {_e(k)} {pct(v)}" for k, v in peak.notable_keys(2))
        words.append(f"the profile predicts its peak in {clock(tl.peak_start_s, span)}-"
                     f"{clock(tl.peak_end_s, span)} on shard {peak.hottest}: "
                     f"{pct(peak.shares[peak.hottest])} of that window's requests ({keys})")
        for e in tl.events[:5]:
            words.append(f"event: key {_e(e.key)} on shard {e.shard} carries {pct(e.share)} "
                         f"of the requests in {clock(e.start_s, span)}-{clock(e.end_s, span)}"
                         f" ({pct(e.overall_share)} over the whole span)")
    elif predicted is not None:
        notes.append("the profile has no timelines (profile it with --time), so when its "
                     "keys were hot is not predicted.")
    if not series:
        return "".join(_note(n) for n in notes) + _note(
            "Nothing to draw over time: production's evidence has no windows and the profile "
            "no timelines.")
    fig = timeline_figure(series)
    return "".join(["<p>A hot shard is hot in a window: each panel is one source's per-shard "
                    "load per window (the shards ever hottest drawn one by one, the others' "
                    "range in grey, the profile's events shaded), with p99 per window where "
                    "the evidence has it.</p>",
                    page.figure(fig, "per-shard load over time"),
                    "<ul>" + "".join(f"<li>{w}</li>" for w in words) + "</ul>" if words else "",
                    *(_note(n) for n in notes)])


# -- 4. latency ------------------------------------------------------------------------------
def _latency_section(page: _Page, items: Sequence[Observations], roles: Roles) -> str:
    from hotshard.observations import LATENCY_NAMES
    from hotshard.report.figures import latency_figure

    measured = [o for o in items if o.latency_ms is not None and o.latency_ms.to_dict()]
    notes = [f"{o.label}: no latency measured (no latency_ms)" for o in items
             if o not in measured]
    if not measured:
        return "".join(_note(n) for n in notes) + _note("No run measured latency, so there "
                                                        "is nothing to compare.")
    names = [n for n in (*LATENCY_NAMES, "mean")
             if any(getattr(o.latency_ms, n) is not None for o in measured)]
    rows = [[_e(o.label), *(_e(_ms(getattr(o.latency_ms, n))) for n in names)]
            for o in measured]
    text = ("Each line is one run's latency at the percentiles it measured, on a log scale: "
            "the curves part where queueing behind a hot shard begins.")
    prod, base = roles.production, roles.baseline
    p99 = prod.latency_ms.p99 if prod.latency_ms else None
    b99 = base.latency_ms.p99 if base is not None and base.latency_ms else None
    withheld = _p99_withheld(base, prod) if base is not None else None
    if withheld and p99 is not None and b99 is not None:
        notes.append(withheld)
    elif p99 is not None and b99 is not None and b99 > 0:
        sentence = (f"{_e(prod.label)}'s p99 is {_e(_ms(p99))}, {times(p99 / b99)} "
                    f"{_e(base.label)}'s {_e(_ms(b99))}")
        p_rate, b_rate = rate_of(prod), rate_of(base)
        if p_rate and b_rate:
            sentence += f", at {rps(p_rate)} against the test's {rps(b_rate)}"
        text += " " + sentence + "."
        page.summary.append(sentence + ".")
    elif base is None:
        notes.append("No load test among the runs to compare production with.")
    else:
        notes.append("The p99 of production or of the load test is missing, so the two are "
                     "not compared by number.")
    fig = latency_figure(measured)
    return "".join([f"<p>{text}</p>", page.figure(fig, "latency percentiles of each run"),
                    _table(["run", *names], rows, set(range(1, len(names) + 1))),
                    *(_note(n) for n in notes)])


def _p99_withheld(before: Observations, after: Observations) -> str | None:
    """Why two live runs' p99s are not compared (what made each one's latency, and the
    spread of its repeats, as the runs record them: ``drive.bound.recorded_comparison``), or
    None when nothing stands against comparing them."""
    from hotshard.drive.bound import recorded_comparison

    claim = recorded_comparison(before, after)
    if claim is None or claim.supported:
        return None
    return claim.reason[:1].upper() + claim.reason[1:] + "."


# -- 4. mitigations --------------------------------------------------------------------------
def _cpu_cell(run: RunSummary) -> str:
    if run.hottest_cpu is None:
        return "n/a"
    return _e(f"{pct(run.hottest_cpu)} (shard {run.hottest_id})")


def _mitigation_words(before: RunSummary, after: RunSummary,
                      withheld: str | None = None) -> str:
    what = after.mitigations or "the changes this run made"
    parts = []
    if before.hottest_cpu is not None and after.hottest_cpu is not None:
        parts.append(f"the hottest shard's CPU goes from {pct(before.hottest_cpu)} to "
                     f"{pct(after.hottest_cpu)}")
    if withheld:
        parts.append("p99 is not compared (below)")
    elif before.p99_ms is not None and after.p99_ms is not None and after.p99_ms > 0:
        change = before.p99_ms / after.p99_ms
        how = f"{times(change)} lower" if change >= 1 else f"{times(1 / change)} higher"
        parts.append(f"p99 from {_ms(before.p99_ms)} to {_ms(after.p99_ms)} ({how})")
    if not parts:
        return f"{_e(after.label)} ({_e(what)}): not comparable, CPU and p99 are missing."
    return f"With {_e(what)} ({_e(after.label)}), " + _e(" and ".join(parts)) + "."


def _mitigations_section(page: _Page, roles: Roles) -> str:
    from hotshard.report.figures import mitigation_figure

    if not roles.mitigated:
        return _note("No run with mitigations given: add one (a run that records its "
                     "mitigations, is labelled as mitigated, or comes after production) "
                     "to compare it with production here.")
    runs = [run_summary(o) for o in (roles.production, *roles.mitigated)]
    before = runs[0]
    withheld = [None, *(_p99_withheld(roles.production, o) for o in roles.mitigated)]
    rows = []
    for run, held in zip(runs, withheld, strict=True):
        p99 = _ms(run.p99_ms)
        if run is not before and run.p99_ms and before.p99_ms and not held:
            p99 += f" ({times(before.p99_ms / run.p99_ms)} lower)" \
                if run.p99_ms <= before.p99_ms else \
                f" ({times(run.p99_ms / before.p99_ms)} higher)"
        rows.append([_e(run.label), _e(run.mitigations or ("none (production)"
                                                           if run is before else "not recorded")),
                     _cpu_cell(run),
                     _e(pct(run.median_cpu)) if run.median_cpu is not None else "n/a",
                     _e(p99)])
    notes = [f"{r.label}: only {r.cpu_shards} of {r.n_shards} shards report CPU"
             for r in runs if 0 < r.cpu_shards < r.n_shards]
    notes += [f"{r.label}: no shard reports CPU" for r in runs if r.cpu_shards == 0]
    notes += [f"{r.label}: no p99 measured" for r in runs if r.p99_ms is None]
    notes += [held for held in dict.fromkeys(withheld) if held]
    words = [_mitigation_words(before, after, held)
             for after, held in zip(runs[1:], withheld[1:], strict=True)]
    page.summary.append(words[-1])
    fig = mitigation_figure(runs)
    return "".join([
        f"<p>Production against {len(runs) - 1} run{'s' * (len(runs) > 2)} with mitigations: "
        "for each, the hottest and the median shard's CPU (left) and p99 latency (right). A "
        "mitigation that works brings the hottest shard down toward the median and the p99 "
        "with it.</p>",
        page.figure(fig, "hottest and median shard CPU and p99 per run"),
        _table(["run", "mitigations", "hottest shard CPU", "median shard CPU", "p99"], rows,
               {2, 3, 4}),
        "<ul>" + "".join(f"<li>{w}</li>" for w in words) + "</ul>",
        *(_note(n) for n in notes)])


# -- 5. diagnosis ----------------------------------------------------------------------------
def _verdict(verdict: str) -> str:
    css = {"fits": "fits", "contradicted": "contradicted"}.get(verdict, "cannot")
    return f'<span class="{css}">{_e(verdict)}</span>'


def _items(values: Sequence[str]) -> str:
    return "<ul>" + "".join(f"<li>{_e(v)}</li>" for v in values) + "</ul>" if values else ""


def _diagnosis_section(page: _Page, diagnosis: Diagnosis | None) -> str:
    if diagnosis is None:
        return _note("No diagnosis in this report: none was computed for these runs.")
    against = (f" against {_e(diagnosis.baseline)}" if diagnosis.baseline
               else " (no load test to compare with)")
    rows = [[_e(i), f"{_e(f.title)}<br><code>{_e(f.cause)}</code>", _verdict(f.verdict),
             _e(f"{f.score:.2f}"), _items(f.evidence), _items(f.missing)]
            for i, f in enumerate(diagnosis.ranking, 1)]
    parts = [f"<p>Every explanation of {_e(diagnosis.production)}{against}, judged against "
             "the evidence and ranked: what fits first (strongest first), then what the "
             "evidence cannot decide, then what it rules out.</p>"]
    if diagnosis.ranking:
        top = diagnosis.top
        if top.verdict == "fits":
            parts.append(f'<p class="summary">Most likely: <b>{_e(top.title)}</b> '
                         f"({_verdict(top.verdict)}, score {top.score:.2f}).</p>")
            page.summary.append(f"Diagnosis: {_e(top.title)} ({_e(top.verdict)}, "
                                f"score {top.score:.2f}).")
        else:
            parts.append('<p class="summary">No explanation fits the evidence given; the '
                         "table says what each cause would need.</p>")
            page.summary.append("Diagnosis: no explanation fits the evidence given.")
        parts.append(_table(["#", "cause", "verdict", "score", "evidence", "missing evidence"],
                            rows, {0, 3}))
    else:
        parts.append(_note("The diagnosis ranked no cause."))
    if diagnosis.recommendations:
        recs = []
        for r in diagnosis.recommendations:
            gain = ""
            if r.hottest_before is not None and r.hottest_after is not None:
                unit = f" ({_e(r.unit)})" if r.unit else ""
                gain = (f" <span class=\"muted\">hottest shard {_e(pct(r.hottest_before))}"
                        f" &rarr; {_e(pct(r.hottest_after))}{unit}</span>")
            recs.append(f"<li><b>{_e(r.action)}</b>: {_e(r.detail)}{gain}</li>")
        parts.append("<h3>Recommendations</h3><ol>" + "".join(recs) + "</ol>")
    if diagnosis.notes:
        parts.append("<h3>Notes</h3>" + _items(diagnosis.notes))
    return "".join(parts)


# -- the page --------------------------------------------------------------------------------
def _unique_labels(items: Sequence[Observations]) -> list[Observations]:
    """The runs with repeated labels numbered ("production (2)"), so legends tell them apart."""
    seen: dict[str, int] = {}
    out = []
    for obs in items:
        seen[obs.label] = seen.get(obs.label, 0) + 1
        out.append(obs if seen[obs.label] == 1 else
                   replace(obs, label=f"{obs.label} ({seen[obs.label]})"))
    return out


def _role_objects(items: Sequence[Observations], originals: Sequence[Observations],
                  diagnosis: Diagnosis | None, production: Observations | None,
                  baseline: Observations | None) -> tuple[Observations | None,
                                                          Observations | None]:
    """Given roles (or the diagnosis' labels) mapped onto the relabelled runs."""
    def mapped(obs: Observations | None) -> Observations | None:
        if obs is None:
            return None
        for original, item in zip(originals, items, strict=True):
            if original is obs:
                return item
        raise InputError(f"{obs.label!r} is not one of the observations given")

    if production is not None:
        return mapped(production), mapped(baseline)
    if diagnosis is not None:
        by_label = {o.label: o for o in reversed(originals)}  # the first of a repeated label
        prod = by_label.get(diagnosis.production)
        if prod is not None:
            base = by_label.get(diagnosis.baseline) if diagnosis.baseline else None
            return mapped(prod), mapped(base)
    return None, None


def build_report(observations: Observations | Sequence[Observations], *,
                 profile: Profile | None = None, partitioner: str | None = None,
                 shards: int | None = None, key_type: str | None = None,
                 diagnosis: Diagnosis | None = None, production: Observations | None = None,
                 baseline: Observations | None = None, sources: Sequence[str] | None = None,
                 profile_source: str | None = None, title: str | None = None,
                 notes: Sequence[str] = ()) -> str:
    """The report as one self-contained HTML document.

    Parameters
    ----------
    observations : Observations or sequence of Observations
        The runs (production, load tests, mitigated runs), in the order the user gave them.
    profile : Profile, optional
        Production's key profile: the rank-frequency plot and the predicted per-shard load.
    partitioner : str, optional
        The store's partitioner for the prediction; default: the one a simulated run records.
    shards : int, optional
        Shard count for the prediction; default: production's number of shards.
    key_type : {"text", "bigint"}, optional
        How the store types keys; default: the key-type rule on the profile's keys.
    diagnosis : Diagnosis, optional
        ``hotshard.diagnose``'s result, shown as the ranking table and recommendations; its
        production and baseline labels also decide the runs' roles.
    production, baseline : Observations, optional
        Roles decided by the caller (each one of ``observations``); they win over the
        diagnosis' labels and over ``runs.assign_roles``' own rule.
    sources : sequence of str, optional
        Where each run came from (file names), shown in the header; one per run.
    profile_source : str, optional
        Where the profile came from.
    title : str, optional
        The page title; default names production.
    notes : sequence of str, optional
        What was left out of the inputs (e.g. ``Observations.load_salvaged``'s dropped
        fields), listed under the inputs.

    Returns
    -------
    str
        The HTML document.

    Raises
    ------
    InputError
        No observations, ``sources`` of the wrong length, a role that is not one of the runs,
        an unknown partitioner name, or matplotlib missing. A partitioner that cannot place
        this profile (one that needs a layout file; a pseudonymized profile's placement not
        recorded for it) leaves a note in the per-shard section instead.
    """
    originals = [observations] if isinstance(observations, Observations) else list(observations)
    if not originals:
        raise InputError("no observations given: a report needs at least one run")
    if sources is not None and len(sources) != len(originals):
        raise InputError(f"sources must name each of the {len(originals)} runs, "
                         f"got {len(sources)}")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError("the report draws its plots with matplotlib, which is not installed: "
                         "pip install 'hotshard[plot]'") from None
    items = _unique_labels(originals)
    # a run marked invalid (too many failures) keeps what it was but not what it measured,
    # which describes a failing system; the page says so before anything else
    warnings = [o.invalid_reason for o in originals if not o.is_valid]
    items = [o if o.is_valid else o.without_measurements() for o in items]
    prod, base = _role_objects(items, originals, diagnosis, production, baseline)
    roles = assign_roles(items, production=prod, baseline=base)
    layout, layout_note, predicted = None, None, None
    if profile is not None:
        layout, layout_note = resolve_layout(items, profile, partitioner=partitioner,
                                             shards=shards, key_type=key_type)
        if layout is not None:
            try:
                predicted = predicted_loads(profile, layout)
            except InputError as exc:  # e.g. a pseudonymized profile placed on another store
                layout, layout_note = None, f"the profile's per-shard load is not predicted: {exc}"
    page = _Page()
    header = _header(items, roles, sources, profile, profile_source, layout, notes)
    from hotshard.report.image_files import quiet_numerics

    with quiet_numerics():  # the figures are drawn as these sections are built
        bodies = {
            "profile": _profile_section(page, profile),
            "shards": _shards_section(page, items, roles, predicted, layout, layout_note),
            "time": _time_section(page, roles, predicted, diagnosis),
            "latency": _latency_section(page, items, roles),
            "mitigations": _mitigations_section(page, roles),
            "diagnosis": _diagnosis_section(page, diagnosis),
        }
    heading = title or f"hotshard report: {roles.production.label}"
    summary = ("<div class=\"summary\"><b>In short.</b> " + " ".join(page.summary) + "</div>"
               if page.summary else "")
    summary = "".join(f'<div class="warning"><b>Warning.</b> {_e(w)}: its latency and '
                      "per-shard figures are left out of this report (they describe the "
                      "requests that got through, not the target).</div>"
                      for w in warnings) + summary
    sections = "".join(f'<section id="{key}"><h2>{_e(SECTIONS[key])}</h2>{body}</section>'
                       for key, body in bodies.items())
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{_e(heading)}</title><style>{_CSS}</style></head><body>"
            f"<header><h1>{_e(heading)}</h1>{header}</header>"
            f"{summary}<main>{sections}</main></body></html>\n")


def write_report(path: str | os.PathLike[str],
                 observations: Observations | Sequence[Observations], **options) -> None:
    """Build the report (``build_report``'s options) and write it to ``path`` atomically.

    The path is checked before any work, and a failure leaves no file behind.

    Raises
    ------
    InputError
        ``path`` does not end in .html or cannot be written; or as ``build_report``.
    """
    check_report_path(path)
    text = build_report(observations, **options)
    try:
        with atomic_write(path, "wb") as handle:
            handle.write(text.encode("utf-8"))
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from exc
