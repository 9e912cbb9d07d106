"""The transient of a hot-key event: onset, detection, relief, and the time the hot shard spent
above a latency target, read from a run's observations alone (a live ``drive`` run against
``serve``, or ``simulate --detect``), so the measured and the modelled transient are one
measurement.

- **Onset** and end: the event the run injected (``extra.drive.events``, or
  ``extra.simulation.events``).
- **Detection**: the first ``hot`` action on the event's key at or after its onset
  (``Observations.actions``); its shard is the action's.
- **Relief**: the end of the first window, from the one holding the detection on, in which the
  shard's load (CPU where measured, else its requests' share) is down to halfway between its
  level before detection (the highest window of the event before it) and after it (the median
  of the event's windows in the second half after detection). Halfway makes the time one
  that two runs of the same service agree on whatever their noise around the two levels; it
  is read to the windows' width, and said so. No relief when the load did not come down by
  at least a quarter: the mitigation did not relieve this shard.
- **Above the target**: the seconds of windows from the onset to the run's end in which the
  shard's p99 exceeded ``slo_ms``.

The verdict compares the time to detect with the rule's own floor: a key taking share S of
the traffic at once reaches the hot share h of a window W after about ``h / S x W`` (plus up to
one reading of the hot set), so a shorter window or a lower share finds it sooner, and a
channel split before a known event needs no detection at all.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from hotshard._format import latency
from hotshard.detect.policy import HOT_REFRESH_S, Detection
from hotshard.observations import Observations, TimeWindow

__all__ = ["Transient", "action_lines", "event_transients", "transient_lines"]

# the load must come down by at least this fraction of its unrelieved level to be relief
MIN_RELIEF = 0.25


@dataclass(frozen=True)
class Transient:
    """One event's transient (module notes define each time; all seconds into the run)."""

    key: str
    share: float
    onset_s: float
    end_s: float
    shard: str | None = None
    detected_s: float | None = None
    detected_share: float | None = None
    relief_s: float | None = None
    load_before: float | None = None      # the shard's load before detection (peak window)
    load_after: float | None = None       # after it (median window)
    load_kind: str = "cpu"                # cpu, or share of the requests
    p99_during_ms: float | None = None    # the shard's worst window p99 from onset to relief
    p99_after_ms: float | None = None     # its median window p99 after relief
    slo_ms: float | None = None
    above_slo_s: float | None = None
    resolution_s: float | None = None     # the windows' width
    detection: Detection | None = None

    @property
    def time_to_detect(self) -> float | None:
        return None if self.detected_s is None else self.detected_s - self.onset_s

    @property
    def time_to_relief(self) -> float | None:
        return None if self.relief_s is None else self.relief_s - self.onset_s

    def expected_detect_s(self, detection: Detection | None = None) -> float | None:
        """The rule's floor for this event: the window's share of the key reaches the hot
        share after ``hot_share / share`` of the window (module notes)."""
        rule = detection or self.detection
        if rule is None or self.share <= rule.hot_share:
            return None
        return rule.hot_share / self.share * rule.window_s + rule.apply_s

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "share": self.share, "onset_s": self.onset_s,
                "end_s": self.end_s, "shard": self.shard, "detected_s": self.detected_s,
                "time_to_detect_s": _r(self.time_to_detect), "relief_s": self.relief_s,
                "time_to_relief_s": _r(self.time_to_relief),
                "load_before": _r(self.load_before), "load_after": _r(self.load_after),
                "load": self.load_kind, "p99_during_ms": _r(self.p99_during_ms),
                "p99_after_ms": _r(self.p99_after_ms), "slo_ms": self.slo_ms,
                "above_slo_s": _r(self.above_slo_s), "resolution_s": _r(self.resolution_s),
                "detection": None if self.detection is None else self.detection.to_dict()}


def _r(x: float | None) -> float | None:
    return None if x is None else round(float(x), 3)


def _record(obs: Observations) -> dict[str, Any]:
    for name in ("drive", "simulation"):
        record = obs.extra.get(name)
        if isinstance(record, dict):
            return record
    return {}


def _events(obs: Observations) -> list[dict[str, Any]]:
    raw = _record(obs).get("events")
    out = []
    for e in raw if isinstance(raw, list) else []:
        if not isinstance(e, dict):
            continue
        try:
            share, start, end = float(e["share"]), float(e["start_s"]), float(e["end_s"])
        except (KeyError, TypeError, ValueError):
            continue
        if math.isfinite(share) and math.isfinite(start) and math.isfinite(end) and end > start:
            out.append({"key": str(e.get("key")), "share": share, "start": start, "end": end})
    return out


def _detection(obs: Observations) -> Detection | None:
    raw = _record(obs).get("detection")
    if not isinstance(raw, dict):
        return None
    try:
        return Detection.from_dict(raw)
    except Exception:   # noqa: BLE001 - a document's odd value costs the verdict only
        return None


def _shard_in(window: TimeWindow, shard: str) -> tuple[float | None, float | None, float | None]:
    """(CPU, share of the window's requests, p99) of ``shard`` in ``window``."""
    total = sum(s.requests or 0 for s in window.shards)
    for s in window.shards:
        if s.id == shard:
            share = (s.requests or 0) / total if total else None
            return s.cpu, share, s.p99_ms
    return None, None, None


def event_transients(obs: Observations, *, slo_ms: float | None = None
                     ) -> tuple[Transient, ...]:
    """Every injected event's transient in ``obs`` (module notes), in onset order."""
    detection = _detection(obs)
    out = []
    for event in sorted(_events(obs), key=lambda e: e["start"]):
        out.append(_transient(obs, event, detection, slo_ms))
    return tuple(out)


def _transient(obs, event, detection, slo_ms) -> Transient:
    key, onset, end = event["key"], event["start"], event["end"]
    hot = [a for a in obs.actions if a.get("key") == key and a.get("action") == "hot"
           and float(a["t"]) >= onset - 1e-9]
    first = hot[0] if hot else None
    shard = None if first is None or first.get("shard") is None else str(first["shard"])
    base = Transient(key=key, share=event["share"], onset_s=onset, end_s=end, shard=shard,
                     detected_s=None if first is None else float(first["t"]),
                     detected_share=None if first is None else first.get("share"),
                     slo_ms=slo_ms, detection=detection)
    windows = [w for w in obs.windows]
    if shard is None or not windows:
        return base
    width = statistics.median(w.end_s - w.start_s for w in windows)
    rows = [(w, *_shard_in(w, shard)) for w in windows]
    use_cpu = all(cpu is not None for w, cpu, _, _ in rows if onset <= w.start_s < end)
    kind = "cpu" if use_cpu else "requests"

    def load(row) -> float | None:
        return row[1] if use_cpu else row[2]

    # the event's windows: every window overlapping it (the first may start before it)
    inside = [r for r in rows if r[0].end_s > onset + 1e-9 and r[0].start_s < end - 1e-9
              and load(r) is not None]
    detected = base.detected_s
    before = [load(r) for r in inside if r[0].start_s < detected]
    after_all = [r for r in inside if r[0].start_s >= detected]
    later = [load(r) for r in after_all if r[0].start_s >= (detected + end) / 2] or \
        [load(r) for r in after_all]
    relief = load_before = load_after = None
    if before and later:
        load_before, load_after = max(before), statistics.median(later)
        if load_after <= load_before * (1 - MIN_RELIEF):
            mid = load_after + (load_before - load_after) / 2
            for r in inside:
                if r[0].end_s > detected and load(r) <= mid:
                    relief = r[0].end_s
                    break
    end_relief = relief if relief is not None else end
    during = [r[3] for r in rows if r[3] is not None and r[0].end_s > onset
              and r[0].start_s < end_relief]
    after_p99 = [r[3] for r in rows if r[3] is not None and relief is not None
                 and r[0].start_s >= relief and r[0].end_s <= end + 1e-9]
    above = None
    if slo_ms is not None:
        above = sum(r[0].end_s - r[0].start_s for r in rows
                    if r[3] is not None and r[0].end_s > onset and r[3] > slo_ms)
    return Transient(**{**base.__dict__, "relief_s": relief, "load_before": load_before,
                        "load_after": load_after, "load_kind": kind,
                        "p99_during_ms": max(during) if during else None,
                        "p99_after_ms": statistics.median(after_p99) if after_p99 else None,
                        "above_slo_s": above, "resolution_s": width})


def transient_lines(t: Transient) -> list[str]:
    """The transient as a reader wants it: a timeline, then a verdict and what would make
    the reaction faster."""
    lines = [f"event on {t.key}: {t.share:.0%} of the requests from {t.onset_s:g} s to "
             f"{t.end_s:g} s" + (f" (shard {t.shard})" if t.shard else "")]
    if t.detected_s is None:
        lines.append("  never reported hot: no mitigation acted on it"
                     + (f" ({t.detection.text()})" if t.detection else ""))
        return lines
    lines.append(f"  detected {t.time_to_detect:.2f} s after the onset (at {t.detected_s:g} s"
                 + (f", {t.detected_share:.0%} of the window" if t.detected_share else "")
                 + ")")
    unit = "CPU" if t.load_kind == "cpu" else "of the requests"
    if t.relief_s is not None:
        lines.append(f"  relieved {t.time_to_relief:.1f} s after the onset (read in "
                     f"{t.resolution_s:.2g} s windows): the shard went from "
                     f"{t.load_before:.0%} {unit} to {t.load_after:.0%}")
    elif t.load_before is not None:
        lines.append(f"  not relieved: the shard stayed at {t.load_after:.0%} {unit} "
                     f"(from {t.load_before:.0%}): the mitigation does not take load off it")
    if t.p99_during_ms is not None:
        after = f", {latency(t.p99_after_ms)} after" if t.p99_after_ms is not None else ""
        lines.append(f"  shard p99 {latency(t.p99_during_ms)} during the transient{after}")
    if t.slo_ms is not None and t.above_slo_s is not None:
        above = latency(t.above_slo_s * 1000)
        if t.above_slo_s > 0 and t.p99_after_ms is not None and t.p99_after_ms > t.slo_ms:
            lines.append(f"  verdict: out of reach for detection: the shard's p99 was above "
                         f"{t.slo_ms:g} ms for {above}, and still {latency(t.p99_after_ms)} "
                         "after relief: no faster rule meets the target (more capacity, or "
                         "a target the shard meets when calm)")
        elif t.above_slo_s > 0:
            lines.append(f"  verdict: too slow for this ramp: the shard's p99 was above "
                         f"{t.slo_ms:g} ms for {above}")
        else:
            lines.append(f"  verdict: fast enough: the shard's p99 stayed within "
                         f"{t.slo_ms:g} ms")
    else:
        pace = _pace(t)
        if pace:
            lines.append(f"  verdict: {pace} (--slo-ms judges it against a p99 target)")
    lines.extend(f"  {s}" for s in faster(t))
    return lines


def _pace(t: Transient) -> str | None:
    """Whether the detection kept to its rule's floor (module notes), in words."""
    floor = t.expected_detect_s()
    if floor is None or t.time_to_detect is None:
        return None
    allowed = floor + HOT_REFRESH_S
    if t.time_to_detect <= allowed + 1e-6:
        return (f"found as fast as its rule allows ({t.time_to_detect:.2g} s, floor "
                f"{floor:.2g} s + a reading): only a faster rule or a split before the event "
                "is faster")
    return (f"found {t.time_to_detect - allowed:.2g} s later than its rule allows "
            f"({allowed:.2g} s): the service read its hot set late (few requests, or busy)")


def faster(t: Transient) -> list[str]:
    """What would find this event sooner, from the rule's own floor (module notes)."""
    rule = t.detection
    if rule is None or t.time_to_detect is None:
        return []
    out = []
    floor = t.expected_detect_s()
    if floor is not None:
        out.append(f"the rule's floor: {floor:.2g} s to fill {rule.hot_share:.0%} of the "
                   f"{rule.window_s:g} s window, then up to {HOT_REFRESH_S:g} s to a reading")
        if rule.window_s / 2 >= 2 * HOT_REFRESH_S:
            half = Detection(window_s=rule.window_s / 2, hot_share=rule.hot_share,
                             apply_s=rule.apply_s)
            out.append(f"faster: a {half.window_s:g} s window (--hot-window) would find it "
                       f"in ~{t.expected_detect_s(half):.2g} s")
        lower = Detection(window_s=rule.window_s, hot_share=rule.hot_share / 2,
                          apply_s=rule.apply_s)
        out.append(f"faster: a {lower.hot_share:.1%} share (--hot-share) in "
                   f"~{t.expected_detect_s(lower):.2g} s, mitigating more channels")
    out.append("fastest: split a channel known to go live before its event: no detection")
    return out


def action_lines(actions, *, keys: int = 5) -> list[str]:
    """What the rule did, key by key (no injected event to time it against): when each key
    was first found hot, and how often it was lifted and found again; a key that flaps sits at
    the hot share, and its mitigation comes and goes with it."""
    by_key: dict[str, list[dict]] = {}
    for a in actions:
        if a.get("action") in ("hot", "lifted"):
            by_key.setdefault(str(a.get("key")), []).append(a)
    ranked = sorted(by_key.items(), key=lambda kv: float(kv[1][0]["t"]))
    lines = [f"the hot-key rule acted on {len(by_key)} key{'s' * (len(by_key) != 1)}:"]
    flapping = False
    for key, rows in ranked[:keys]:
        first = next((r for r in rows if r["action"] == "hot"), None)
        if first is None:
            continue
        lifted = sum(r["action"] == "lifted" for r in rows)
        again = sum(r["action"] == "hot" for r in rows) - 1
        where = f" (shard {first['shard']})" if first.get("shard") is not None else ""
        text = f"  key {key}{where}: hot at {float(first['t']):g} s"
        if first.get("share") is not None:
            text += f" ({float(first['share']):.1%} of the window)"
        if again > 0:
            flapping = True
            text += f", lifted {lifted}x and found again {again}x"
        elif lifted:
            text += f", lifted at {float(rows[-1]['t']):g} s"
        lines.append(text)
    if len(ranked) > keys:
        lines.append(f"  ... and {len(ranked) - keys} more (the observations' actions)")
    if flapping:
        lines.append("  a key found again and again sits at the hot share: its mitigation comes "
                     "and goes (a lower --hot-share or a longer --hot-window steadies it)")
    return lines
