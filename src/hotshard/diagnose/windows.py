"""When was the shard hot: the diagnosis's time axis.

A shard is hot in a window. Production's evidence with a time axis (the observations'
``windows``) names its peak window: the window whose busiest shard was busiest (by CPU when
every window reports it, else by share of the window's requests). A profile with timelines
names its own predicted peak (``hotshard predict``). This module sets the two side by side, and
makes the sentences that compare a shard's share with its latency compare them in the same
window, never a whole-run share with a latency made in one window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hotshard._format import clock, ms, pct
from hotshard.errors import InputError
from hotshard.observations import Observations, TimeWindow
from hotshard.profile.document import Profile

__all__ = ["WindowEvidence", "shard_share_in", "slow_shard_words", "window_evidence"]


@dataclass(frozen=True)
class WindowEvidence:
    """Production's peak window (when its evidence has windows) and the profile's predicted
    one (when it has timelines), with the sentences that say them."""

    observed: dict[str, Any] | None
    predicted: dict[str, Any] | None
    agrees: bool | None          # the same shard in both, when both are known
    sentences: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"observed": self.observed, "predicted": self.predicted, "agrees": self.agrees,
                "evidence": list(self.sentences)}


def shard_share_in(window: TimeWindow, shard_id: str) -> float | None:
    """``shard_id``'s share of the window's requests; None without per-shard requests."""
    counts = window.shard_requests
    if not counts or sum(counts) <= 0:
        return None
    for s in window.shards:
        if s.id == shard_id:
            return float(s.requests) / float(sum(counts))
    return None


def _span(obs: Observations) -> float:
    return max((w.end_s for w in obs.windows), default=obs.duration_s or 0.0)


def _when(start: float, end: float, span: float) -> str:
    return f"{clock(start, span)}-{clock(end, span)}"


def _observed(obs: Observations) -> dict[str, Any] | None:
    """Production's peak window: its busiest shard, that shard's share, CPU and p99 there."""
    w = obs.peak_window
    if w is None or not w.shards:
        return None
    cpu = w.shard_cpu
    if cpu is not None:
        hot = w.shards[int(np.argmax(cpu))]
    else:
        counts = w.shard_requests
        hot = w.shards[int(np.argmax(counts))]
    whole = None
    total = obs.total_requests
    if total:
        whole = next((float(s.requests) / total for s in obs.shards if s.id == hot.id), None)
    return {"start_s": w.start_s, "end_s": w.end_s, "shard": hot.id,
            "share": shard_share_in(w, hot.id), "cpu": hot.cpu, "p99_ms": hot.p99_ms,
            "latency_p99_ms": w.latency_ms.p99 if w.latency_ms is not None else None,
            "whole_run_share": whole}


def _predicted(profile: Profile, partitioner: str, n_shards: int) -> dict[str, Any] | None:
    from hotshard.shards.partitioners import partitioner_for
    from hotshard.shards.predict import predict

    if profile.timelines is None or n_shards < 1:
        return None
    try:
        part = partitioner_for(partitioner, n_shards, integer_keys=profile.integer_keys)
        pred = predict(profile, part)
    except InputError:
        return None
    tl = pred.timeline
    peak = tl.peak
    key, key_share = (peak.hottest_keys[0] if peak.hottest_keys else (None, None))
    return {"start_s": tl.peak_start_s, "end_s": tl.peak_end_s, "span_s": float(tl.edges_s[-1]),
            "shard": str(peak.hottest), "share": float(peak.shares[peak.hottest]),
            "key": key, "key_share": key_share,
            "whole_span_hottest": str(pred.hottest),
            "whole_span_share": float(pred.shares[peak.hottest]),
            "window_hottest": [str(int(np.argmax(row))) for row in tl.shares],
            "events": [e.to_dict() for e in tl.events[:5]], "partitioner": part.spec}


def window_evidence(production: Observations, profile: Profile | None,
                    partitioner: str | None, n_shards: int | None,
                    baseline: Observations | None = None) -> WindowEvidence | None:
    """Production's peak window and the profile's predicted one; None when neither the
    evidence has windows nor the profile timelines."""
    observed = _observed(production) if production.windows else None
    predicted = None
    if profile is not None and partitioner and n_shards:
        predicted = _predicted(profile, partitioner, n_shards)
    if observed is None and predicted is None:
        return None
    sentences = []
    if observed is not None:
        span = _span(production)
        what = []
        if observed["share"] is not None:
            what.append(f"{pct(observed['share'])} of that window's requests")
        if observed["cpu"] is not None:
            what.append(f"{pct(observed['cpu'])} CPU")
        if observed["p99_ms"] is not None:
            what.append(f"p99 {ms(observed['p99_ms'])}")
        text = (f"{production.label}'s peak window is "
                f"{_when(observed['start_s'], observed['end_s'], span)}: shard "
                f"{observed['shard']} at {', '.join(what) or 'its busiest'}")
        if observed["whole_run_share"] is not None:
            text += f" (over the whole run it served {pct(observed['whole_run_share'])})"
        sentences.append(text)
    if predicted is not None:
        span = predicted["span_s"]
        text = (f"the profile predicts its peak in "
                f"{_when(predicted['start_s'], predicted['end_s'], span)} on shard "
                f"{predicted['shard']} ({predicted['partitioner']}): {pct(predicted['share'])} "
                "of that window's requests")
        if predicted["key"] is not None:
            text += f", key {predicted['key']} alone {pct(predicted['key_share'])}"
        if predicted["whole_span_hottest"] != predicted["shard"]:
            text += (f"; over the whole span it has {pct(predicted['whole_span_share'])} and "
                     f"shard {predicted['whole_span_hottest']} is hottest: a whole-span "
                     "average hides this window")
        sentences.append(text)
    agrees = None
    if observed is not None and predicted is not None:
        matched = _window_by_window(production, predicted)
        if matched is not None:
            same, total = matched
            sentences.append(f"window by window (the evidence's windows set on the profile's "
                             f"by their place in the span), {production.label}'s busiest shard "
                             f"is the one the profile predicts in {same} of {total} windows")
        agrees = observed["shard"] == predicted["shard"]
        sentences.append(
            (f"the profile's peak shard is {production.label}'s peak shard: the event in the "
             f"profile is what made {production.label}'s window hot") if agrees else
            (f"the profile's peak shard ({predicted['shard']}) is not {production.label}'s "
             f"({observed['shard']}): the profile was taken in another period, or its event "
             f"is not the one {production.label} saw"))
    if baseline is not None and (observed is not None or predicted is not None):
        sentences.append(_baseline_words(baseline, observed, predicted))
    if observed is not None and predicted is not None:
        predicted = {k: v for k, v in predicted.items() if k != "window_hottest"}
        if matched is not None:
            predicted["windows_matched"] = {"same": matched[0], "compared": matched[1]}
    return WindowEvidence(observed, predicted, agrees, tuple(sentences))


def _baseline_words(baseline: Observations, observed: dict[str, Any] | None,
                    predicted: dict[str, Any] | None) -> str:
    """Whether the load test ever had production's peak: its largest share of a window's
    requests on the peak shard, against the peak's."""
    peak = observed if observed is not None and observed.get("share") is not None else predicted
    shard, share = peak["shard"], peak.get("share")
    if not baseline.windows:
        return (f"{baseline.label!r} has no windows in its evidence: whether it ever had the "
                f"peak (shard {shard} at {pct(share) if share is not None else 'its busiest'}) "
                "cannot be told from it; `hotshard check TEST --against PROFILE -p P -n N` "
                "tells from the test's keys")
    best, best_w = None, None
    for w in baseline.windows:
        got = shard_share_in(w, shard)
        if got is not None and (best is None or got > best):
            best, best_w = got, w
    if best is None or share is None:
        return (f"{baseline.label!r} counts no requests of shard {shard} per window: whether "
                "it had the peak cannot be told")
    span = _span(baseline)
    when = _when(best_w.start_s, best_w.end_s, span)
    ratio = best / share if share > 0 else float("inf")
    if ratio >= 0.8:
        return (f"{baseline.label!r} has it: in its {when} shard {shard} carries {pct(best)} of "
                f"the window's requests ({ratio:.2f}x the peak's)")
    return (f"{baseline.label!r} never has it: its busiest window for shard {shard} ({when}) "
            f"puts {pct(best)} of the requests there, {ratio:.2f}x the peak's {pct(share)}: "
            "a test right on average without the event cannot show the shard that melts")


def _window_by_window(obs: Observations, predicted: dict[str, Any]) -> tuple[int, int] | None:
    """(windows whose busiest shard is the profile's predicted busiest, windows compared):
    each evidence window is set on the profile window holding its middle, by its place in
    its own span (the two spans need not be the same hours or lengths)."""
    hottest = predicted.get("window_hottest") or []
    span = _span(obs)
    if not hottest or span <= 0:
        return None
    same = total = 0
    for w in obs.windows:
        counts = w.shard_requests
        values = counts if counts and sum(counts) > 0 else w.shard_cpu
        if not values:
            continue
        busiest = w.shards[int(np.argmax(values))].id
        k = min(int((w.start_s + w.end_s) / 2 / span * len(hottest)), len(hottest) - 1)
        total += 1
        same += busiest == hottest[k]
    return (same, total) if total else None


def slow_shard_words(obs: Observations, slow_id: str, slow_p99: float, median_p99: float,
                     hottest_id: str) -> str:
    """The sentence on the slowest shard's p99, comparing it with load in the same window.

    When the slow shard is the run's busiest, its latency lives where the load is. When it is
    not, a whole-run share cannot say why: the evidence's windows can (the window where it
    carried most); without windows the sentence says what is missing rather than asserting a
    contradiction."""
    head = f"shard {slow_id}'s p99 is {ms(slow_p99)} against the median shard's {ms(median_p99)}"
    if slow_id == hottest_id:
        return head + ": the latency lives where the load is"
    best, best_share = None, -1.0
    for w in obs.windows:
        share = shard_share_in(w, slow_id)
        if share is not None and share > best_share:
            best, best_share = w, share
    if best is not None:
        span = _span(obs)
        return (head + f"; shard {hottest_id} served the most requests over the whole run, "
                f"but in {_when(best.start_s, best.end_s, span)} shard {slow_id} served "
                f"{pct(best_share)} of that window's requests: its latency was made when its "
                "load was")
    return (head + f", though shard {hottest_id} served the most requests over the whole run: "
            "a whole-run share cannot show a shard that was hot in one window (evidence with "
            "windows would say when)")
