"""`hotshard generate`: plan a synthetic workload from a profile or a named distribution, and
verify a generated file against its profile."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from hotshard.errors import InputError, Phrase
from hotshard.profile import keys_look_integer
from hotshard.profile.document import Profile
from hotshard.workload import DEFAULT_RATE, DEFAULT_USERS
from hotshard.workload import sampler as samplers
from hotshard.workload.messages import DEFAULT_SIZE_QUANTILES, GenerationPlan, op_shares_of
from hotshard.workload.profile_sampler import ProfileSampler, from_profile, op_mix_by_key
from hotshard.workload.timing import Arrivals, HotEvent, check_overlaps, format_duration

__all__ = ["ARRIVAL_PROCESSES", "ORDERS", "VerifyReport", "parse_dist", "plan_workload",
           "verify_file", "verify_generated"]

# The order of a profile's keys: production's locality (the profile's locality section), or
# independent draws; "auto": locality when the profile has it.
ORDERS = ("auto", "locality", "irm")
# When requests come: the profile's measured rate shape and burstiness (its arrivals
# section), or a Poisson process at a constant (or --diurnal) rate; "auto": the profile's when
# it has them and no --diurnal is asked for.
ARRIVAL_PROCESSES = ("auto", "profile", "poisson")


# message_id = milliseconds << 22 | row bits: milliseconds must stay below 2^41 (2039-09-07)
MESSAGE_ID_EPOCH_END_MS = 1 << 41

DIST_HELP = ("uniform:N | zipf:S:N | hotspot:FRAC_KEYS:FRAC_OPS:N | latest:N[:S] | "
             "scrambled_zipfian:N  (N keys, e.g. zipf:0.99:1e6)")


def _num(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{what} must be a number, got {text!r} ({DIST_HELP})") from None


def _count(text: str) -> int:
    value = _num(text, "the key count")
    if not math.isfinite(value) or value != math.floor(value) or value < 1:
        raise InputError(f"the key count must be an integer >= 1, got {text!r}")
    return int(value)


def parse_dist(spec: str):
    """A sampler from a distribution spec such as ``zipf:0.99:1e6``."""
    name, *args = spec.strip().split(":")
    arity = {"uniform": (1,), "zipf": (2,), "hotspot": (3,), "latest": (1, 2),
             "scrambled_zipfian": (1,)}
    if name not in arity:
        raise InputError(f"unknown distribution {name!r}; use {DIST_HELP}")
    if len(args) not in arity[name]:
        raise InputError(f"{name} takes {' or '.join(map(str, arity[name]))} parameters, "
                         f"got {spec!r}; use {DIST_HELP}")
    if name == "uniform":
        return samplers.uniform(_count(args[0]))
    if name == "zipf":
        return samplers.zipf(_num(args[0], "zipf s"), _count(args[1]))
    if name == "hotspot":
        return samplers.hotspot(_num(args[0], "frac_keys"), _num(args[1], "frac_ops"),
                                _count(args[2]))
    if name == "latest":
        s = _num(args[1], "latest s") if len(args) == 2 else 0.99
        return samplers.latest(_count(args[0]), s)
    return samplers.scrambled_zipfian(_count(args[0]))


def plan_workload(
    *,
    profile: Profile | None,
    dist: str | None,
    events: int | None,
    seed: int,
    rate: float | None = None,
    duration: float | None = None,
    keys: int | None = None,
    key_scaling: str = "dilute",
    tail: str = "power_law",
    hot_events: tuple[HotEvent, ...] = (),
    diurnal: float = 0.0,
    start: datetime | None = None,
    n_users: int = DEFAULT_USERS,
    follow=None,
    order: str = "auto",
    arrival_process: str = "auto",
) -> GenerationPlan:
    """Turn the user's choices into a ``GenerationPlan`` (validated, nothing generated yet).

    Events come from ``events``, else rate x duration. Rate comes from ``rate``, else
    events / duration, else the profile's mean rate, else 3000/s. ``keys`` rescales the
    profile's key space as ``Profile.scaled`` does with ``key_scaling`` (default "dilute": the
    head keeps its keys and shares, the tail its share over more, rarer keys).

    Raises
    ------
    InputError
        Neither or both of profile and dist; no way to tell the number of events; a hot event
        whose window lies outside the run.
    """
    if (profile is None) == (dist is None):
        raise InputError("give either a profile or a distribution spec (not both)")
    if order not in ORDERS:
        raise InputError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")
    shaped = _shaped(profile, arrival_process, diurnal)
    events, rate = _events_and_rate(profile, events, rate, duration, shaped)
    start = start or datetime(2026, 1, 1, tzinfo=UTC)
    if shaped:
        from hotshard.workload.profile_arrivals import CascadeArrivals

        arrivals = CascadeArrivals(profile.arrivals, events, rate, int(seed))
    else:
        arrivals = Arrivals(rate, diurnal, events=events, seed=int(seed))
    if profile is not None and keys is not None:
        profile = profile.scaled(keys=keys, key_scaling=key_scaling)
    model = _key_model(profile, dist, keys=keys, tail=tail, follow=follow)
    run_seconds = arrivals.seconds_for(events)
    notes = _event_notes(hot_events, model.sampler.integer_keys, run_seconds, events, rate)
    order, positions, more = _key_order(profile, order, model.sampler, events, int(seed),
                                        rescaled=keys is not None, shaped=shaped)
    made = {"seed": str(int(seed))}
    if profile is not None:
        made["arrivals"] = "profile" if shaped else "poisson"
        made["order"] = order
        made["tail"] = tail
        if keys is not None:
            made.update(keys=str(int(keys)), key_scaling=key_scaling)
    start_ms, windows = _time_range(start, run_seconds, hot_events)
    if windows:  # verify leaves these windows out: inside them the traffic is the event's
        made["event_windows_ms"] = json.dumps(windows)
    return GenerationPlan(samplers={"*": model.sampler}, op_shares=model.op_shares,
                          events=events, seed=int(seed), arrivals=arrivals, start_ms=start_ms,
                          size_quantiles=model.sizes, hot_events=tuple(hot_events),
                          n_users=n_users, notes=notes + more, op_mix=model.op_mix,
                          metadata=tuple(made.items()), positions=positions)


def _shaped(profile: Profile | None, arrival_process: str, diurnal: float) -> bool:
    """Whether the arrivals follow the profile's measured shape (its arrivals section)."""
    if arrival_process not in ARRIVAL_PROCESSES:
        raise InputError(f"arrivals must be one of {', '.join(ARRIVAL_PROCESSES)}, got "
                         f"{arrival_process!r}")
    shaped = profile is not None and profile.arrivals is not None and (
        arrival_process == "profile" or (arrival_process == "auto" and not diurnal))
    if arrival_process == "profile" and (profile is None or profile.arrivals is None):
        raise InputError("${arrival_process} profile needs a profile with an arrivals section "
                         "(hotshard profile ... --time COL writes one)")
    if shaped and diurnal:
        raise InputError("${diurnal} draws a daily curve; the profile's arrivals already hold "
                         "production's rate shape: give one or the other "
                         "(${arrival_process} poisson "
                         "for the curve)")
    return shaped


def _events_and_rate(profile: Profile | None, events: int | None, rate: float | None,
                     duration: float | None, shaped: bool) -> tuple[int, float]:
    """(events, rate): events given, else rate x duration; the rate given, else events /
    duration, else the profile's (its arrivals', else its rate section's), else 3000/s."""
    if events is not None and events <= 0:
        raise InputError(f"${{events}} must be > 0, got {events}")
    if rate is not None and rate <= 0:
        raise InputError(f"${{rate}} must be > 0, got {rate}")
    if duration is not None and duration <= 0:
        raise InputError(f"${{duration}} must be > 0, got {duration}")
    if events is None and duration is None:
        raise InputError("say how many events: give ${events}, or a ${duration} (at the "
                         "${rate} given, else the profile's, else 3000/s)")
    if events is not None and rate is not None and duration is not None \
            and int(round(rate * duration)) != events:
        raise InputError(f"{events:,} events at {rate:,g}/s last "
                         f"{format_duration(events / rate)}, not {format_duration(duration)}: "
                         "give two of ${events}, ${rate} and ${duration}")
    if rate is None:
        if events is not None and duration is not None:
            rate = events / duration
        elif shaped:
            rate = profile.arrivals.events / profile.arrivals.seconds
        elif profile is not None and profile.rate:
            rate = float(profile.rate["mean_rps"])
        else:
            rate = DEFAULT_RATE
    if events is None:
        events = int(round(rate * duration))
        if events < 1:
            raise InputError(f"{format_duration(duration)} at {rate:,g}/s is less than one "
                             "event")
    return int(events), float(rate)


@dataclass(frozen=True)
class _KeyModel:
    """The keys of a workload: the sampler (``integer_keys`` says what its keys are), the
    operations' shares (overall and by key) and the message sizes."""

    sampler: Any
    op_shares: dict[str, float]
    op_mix: Any
    sizes: dict[str, float]


def _key_model(profile: Profile | None, dist: str | None, *, keys: int | None, tail: str,
               follow) -> _KeyModel:
    if profile is not None:
        sampler = from_profile(profile, tail=tail, follow=follow)
        return _KeyModel(sampler, op_shares_of(profile),
                         op_mix_by_key(profile) if profile.operations else None,
                         (profile.sizes or {}).get("quantiles")
                         or dict(DEFAULT_SIZE_QUANTILES))
    if keys is not None:
        raise InputError("keys scales a profile; give the key count in the distribution "
                         "spec instead (e.g. zipf:0.99:1e9)")
    if follow is not None:
        raise InputError("following a placement makes tail keys follow a profile's "
                         "recorded placement: it needs a profile")
    return _KeyModel(parse_dist(dist), op_shares_of(None), None,
                     dict(DEFAULT_SIZE_QUANTILES))


def _event_notes(hot_events: tuple[HotEvent, ...], integer_keys: bool, run_seconds: float,
                 events: int, rate: float) -> tuple[str, ...]:
    """The injected events checked against the run (their keys' type, their overlaps, a start
    inside it); what the user should know of them (one cut short by the run's end)."""
    for event in hot_events:
        if integer_keys and not keys_look_integer([event.key]):
            raise InputError(f"event key {event.key!r} must be a 64-bit integer: this "
                             "workload's keys are integers")
    check_overlaps(tuple(hot_events))
    for event in hot_events:
        if event.start >= run_seconds:
            raise InputError(
                f"the event on key {event.key} starts at {format_duration(event.start)}, but "
                f"the run ends at {format_duration(run_seconds)} ({events:,} events at "
                f"{rate:,.0f}/s): start it earlier, or generate more events or a longer "
                "duration")
    return tuple(
        f"the event on key {e.key} is cut short: it ends at {format_duration(e.end)} but the "
        f"run ends at {format_duration(run_seconds)}"
        for e in hot_events if e.end > run_seconds)


def _key_order(profile: Profile | None, order: str, sampler, events: int, seed: int, *,
               rescaled: bool, shaped: bool) -> tuple[str, Any, tuple[str, ...]]:
    """(the order the keys come in, the streamed positions for the locality order or None,
    notes): "auto" is the locality order when the profile measured one and it can follow
    the keys, else independent draws (irm), said in a note."""
    notes: tuple[str, ...] = ()
    if profile is not None and order == "auto":
        from hotshard.workload.locality_order import MAX_LOCALITY_KEYS

        order = "locality" if profile.locality is not None else "irm"
        if order == "locality" and sampler.classes.n_keys > MAX_LOCALITY_KEYS:
            order = "irm"
            notes += (Phrase(f"{sampler.classes.n_keys:,} keys are more than the locality "
                             f"order follows ({MAX_LOCALITY_KEYS:,}): the keys are drawn "
                             "independently (${order} irm)"),)
        elif profile.locality is None:
            notes += (Phrase("the profile has no locality section (made before it existed, or "
                             "from counts): the keys are drawn independently (${order} irm), "
                             "so their reuse, and a cache's hit rate, is not production's"),)
    if order != "locality":
        return ("irm" if order == "auto" else order), None, notes
    if profile is None or profile.locality is None:
        raise InputError("${order} locality needs a profile with a locality section "
                         "(hotshard profile of event rows writes one)")
    from hotshard.workload.locality_order import profile_order
    from hotshard.workload.locality_stream import StreamedPositions

    # the correction pulls distances toward production's, which a rescaled key space no
    # longer has: there the reuse times alone. The order is made window by window as the
    # chunks are written (bounded memory, any length)
    positions = StreamedPositions(
        lambda stop: profile_order(profile, sampler, events, seed, rescaled=rescaled,
                                   shaped=shaped, stop=stop), events)
    return order, positions, notes


def _time_range(start: datetime, run_seconds: float, hot_events: tuple[HotEvent, ...]
                ) -> tuple[int, list[list[int]]]:
    """(the run's first instant in epoch ms, each event's window in epoch ms), refused when
    the run does not fit the message IDs' 41 bits of milliseconds."""
    start_ms = int(start.timestamp() * 1000)
    end_ms = start_ms + int(math.ceil(run_seconds * 1000))
    if start_ms < 0 or end_ms >= MESSAGE_ID_EPOCH_END_MS:
        raise InputError(f"the run must lie between 1970 and 2039-09-07 (message IDs hold the "
                         f"milliseconds since 1970 in 41 bits), got a run of "
                         f"{format_duration(run_seconds)} from {start:%Y-%m-%d %H:%M}")
    return start_ms, [[start_ms + int(e.start * 1000), start_ms + int(math.ceil(e.end * 1000))]
                      for e in hot_events]


# -- verification ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Check:
    name: str
    passed: bool
    detail: str


@dataclass(frozen=True)
class VerifyReport:
    """The checks of a generated file against its profile; ``windows_left_out`` counts the
    big events' windows whose rows were not judged (their traffic is the event's by design)."""

    events: int
    checks: tuple[Check, ...]
    windows_left_out: int = 0

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.checks)

    def to_dict(self) -> dict:
        return {"events": self.events, "passed": self.passed,
                "checks": [asdict(c) for c in self.checks],
                "windows_left_out": self.windows_left_out}


def _read_key_counts(path: str, skip_ms: Sequence[Sequence[int]] = ()
                     ) -> tuple[dict[str, int], np.ndarray, int]:
    """(count per key as text, all per-key counts, events) of a generated file (DuckDB),
    leaving out rows whose timestamp lies in a [start, end) window of ``skip_ms``."""
    import duckdb

    from hotshard.profile.count import resolve_inputs
    from hotshard.profile.engines.duckdb_engine import source_sql

    files, fmt = resolve_inputs([path])
    src = source_sql(fmt, files)
    con = duckdb.connect()
    try:
        cols = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {src}").fetchall()]
        key = "channel_id" if "channel_id" in cols else "key" if fmt == "key_array" else None
        if key is None:
            raise InputError(f"{path} has no channel_id column: not a hotshard generate output")
        where = ""
        if skip_ms:
            if "timestamp" not in cols:
                raise InputError(f"{path} has no timestamp column: its event windows cannot be "
                                 "left out")
            where = "WHERE NOT (" + " OR ".join(
                f"(epoch_ms(timestamp) >= {int(a)} AND epoch_ms(timestamp) < {int(b)})"
                for a, b in skip_ms) + ")"
        res = con.execute(f"SELECT CAST({key} AS VARCHAR) AS k, count(*) AS n FROM {src} "
                          f"{where} GROUP BY ALL").fetchnumpy()
    except duckdb.Error as exc:
        raise InputError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
    finally:
        con.close()
    keys, counts = res["k"], np.asarray(res["n"], dtype=np.int64)
    return dict(zip(keys.tolist(), counts.tolist(), strict=True)), counts, int(counts.sum())


def generation_options(path: str) -> dict[str, str]:
    """How a Parquet file from ``generate`` was made (keys, key_scaling, tail, seed,
    event_windows_ms as JSON), from its metadata; empty for other files (CSV and JSON lines
    carry none)."""
    if not str(path).lower().endswith((".parquet", ".pq")):
        return {}
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, ValueError):
        return {}  # verify_file reports an unreadable file itself
    return {k.decode()[len("hotshard."):]: v.decode() for k, v in meta.items()
            if k.startswith(b"hotshard.")}


def verify_file(profile: Profile, path: str, *, tail: str = "power_law",
                alpha: float = 0.001, skip_ms: Sequence[Sequence[int]] = (),
                order: str | None = None, progress=None) -> VerifyReport:
    """Test a generated file against the profile it was generated from.

    Head: each head key's count must lie in its binomial band, two-sided, Bonferroni-corrected
    over the head so that the whole check fails with probability ``alpha`` under the model.
    Tail: KS distance between the observed per-key counts of tail keys and their model (a
    mixture over count classes of binomial(N, class weight), conditioned on being seen),
    against the asymptotic critical value at ``alpha`` (conservative for discrete counts).
    Rows inside the ``skip_ms`` windows (epoch ms; a big event's, where the traffic is the
    event's by design) are left out.

    A file in ``order="locality"`` was given its counts, not drawn: every head key its exact
    scaled count and every tail class its keys' even split, so both checks are exact (the
    counts of the head keys, and the multiset of the tail keys' counts). ``order`` None: what
    a Parquet file records; a file that records nothing (CSV, a feeder) passes either way.
    ``progress(stage, None)`` hears each step begin.
    """
    from scipy import stats

    if progress is not None:
        progress("counting the file's keys", None)
    by_key, _, n = _read_key_counts(path, skip_ms)
    if progress is not None:
        progress("checking them against the profile", None)
    if n == 0:
        raise InputError(f"{path} holds no events")
    sampler: ProfileSampler = from_profile(profile, tail=tail)
    if order is None:
        order = generation_options(path).get("order")
    if order in ("locality", None):
        exact = (_verify_exact(sampler, by_key, n) if not skip_ms else
                 _verify_outside_windows(sampler, by_key, n, _read_key_counts(path)[2]))
        if order == "locality" or exact.passed:
            return exact
    probs = sampler.classes.class_probabilities()
    head_p = probs[: sampler.head_size]
    # exact binomial tails (a normal band misjudges keys expected a fraction of a time)
    level = alpha / (2 * max(1, sampler.head_size))
    head_obs = np.array([by_key.get(k, 0) for k in sampler.head_ids], dtype=np.float64)
    expected = n * head_p
    tail_prob = np.minimum(stats.binom.cdf(head_obs, n, head_p),
                           stats.binom.sf(head_obs - 1, n, head_p))
    outside = tail_prob < level
    worst = int(np.argmin(tail_prob)) if head_p.size else 0
    checks = [Check(
        "head shares", not outside.any(),
        f"{int(outside.sum())} of {head_p.size} head keys outside their binomial band "
        f"(two-sided {2 * level:.1e} each)" + (
            f"; worst {sampler.head_ids[worst]}: {int(head_obs[worst])} vs "
            f"{expected[worst]:.1f} expected" if head_p.size else ""))]
    head_set = set(sampler.head_ids)
    tail_counts = np.array([c for k, c in by_key.items() if k not in head_set], dtype=np.int64)
    tail_check = _tail_check(sampler, probs, n, tail_counts, alpha)
    model_tail_keys = sampler.n_keys - sampler.head_size
    if not tail_check.passed and tail_counts.size > model_tail_keys:
        tail_check = replace(tail_check, detail=(
            f"{tail_check.detail}; the file holds more distinct tail keys than the profile "
            f"({model_tail_keys:,}): if it was generated with more keys, verify with that key "
            "count"))
    checks.append(tail_check)
    return VerifyReport(events=n, checks=tuple(checks))


def verify_generated(profile: Profile, path: str, *, keys: int | None = None,
                     key_scaling: str | None = None, tail: str | None = None,
                     progress=None) -> VerifyReport:
    """``generate verify``: test a generated file against the profile it came from, scaled
    and read as the file records it was made (its Parquet metadata: keys, key scaling, tail,
    order, the big events' windows). An option given here fills what the file does not record
    (a CSV records nothing); one that contradicts the record is refused rather than judged.
    ``progress(stage, None)`` hears each step begin (a billion keys take seconds).

    Raises
    ------
    InputError
        ``key_scaling`` differs from the one the file was generated with; the file is not a
        generate output or holds no events.
    """
    made = generation_options(path)
    recorded = made.get("key_scaling")
    if key_scaling and recorded and key_scaling != recorded:
        raise InputError(f"{path} was generated with ${{key_scaling}} {recorded}, not "
                         f"{key_scaling}")
    key_scaling = key_scaling or recorded or "dilute"
    if keys is None and "keys" in made:
        keys = int(made["keys"])
    if keys is not None:
        if progress is not None:
            progress(f"scaling the profile to {keys:,} keys", None)
        profile = profile.scaled(keys=keys, key_scaling=key_scaling)
    windows = json.loads(made.get("event_windows_ms", "[]"))
    report = verify_file(profile, path, tail=tail or made.get("tail", "power_law"),
                         skip_ms=windows, order=made.get("order"), progress=progress)
    return replace(report, windows_left_out=len(windows))


def _verify_exact(sampler: ProfileSampler, by_key: dict, n: int) -> VerifyReport:
    """A locality-ordered file against the counts generate gives (``key_counts``)."""
    from hotshard.workload.locality_order import even_counts

    classes = sampler.classes
    expected = even_counts(classes.key_weight, classes.sizes, n)  # per class: (base, extra)
    head_n = sampler.head_size
    head_expected = np.array([b + e for b, e in expected[:head_n]], dtype=np.int64)
    head_obs = np.array([by_key.get(k, 0) for k in sampler.head_ids], dtype=np.int64)
    off = np.flatnonzero(head_obs != head_expected)
    checks = [Check("head counts", off.size == 0,
                    f"{off.size} of {head_n} head keys off their exact count" + (
                        f"; first {sampler.head_ids[off[0]]}: {head_obs[off[0]]} vs "
                        f"{head_expected[off[0]]}" if off.size else ""))]
    want: dict[int, int] = {}
    for (base, extra), size in zip(expected[head_n:], classes.sizes[head_n:].tolist(),
                                   strict=True):
        if base:
            want[base] = want.get(base, 0) + size - extra
        if extra:
            want[base + 1] = want.get(base + 1, 0) + extra
    head_set = set(sampler.head_ids)
    got: dict[int, int] = {}
    for key, count in by_key.items():
        if key not in head_set:
            got[count] = got.get(count, 0) + 1
    wrong = sorted(c for c in set(want) | set(got) if want.get(c, 0) != got.get(c, 0))
    checks.append(Check("tail counts", not wrong,
                        f"{sum(got.values()):,} tail keys seen, their counts "
                        + ("exactly the profile's classes" if not wrong else
                           f"differ from the profile's classes at count {wrong[0]}: "
                           f"{got.get(wrong[0], 0):,} keys vs {want.get(wrong[0], 0):,}")))
    return VerifyReport(events=n, checks=tuple(checks))


def _verify_outside_windows(sampler: ProfileSampler, by_key: dict, n: int,
                            total: int) -> VerifyReport:
    """A locality-ordered file whose event windows are left out: the rows there are gone,
    so every key can only have lost references against its exact count. Checked exactly:
    no head key above its count, and the tail's counts under the profile's (both sorted,
    one by one)."""
    from hotshard.workload.locality_order import even_counts

    classes = sampler.classes
    expected = even_counts(classes.key_weight, classes.sizes, total)
    head_n = sampler.head_size
    head_expected = np.array([b + e for b, e in expected[:head_n]], dtype=np.int64)
    head_obs = np.array([by_key.get(k, 0) for k in sampler.head_ids], dtype=np.int64)
    over = np.flatnonzero(head_obs > head_expected)
    checks = [Check("head counts", over.size == 0,
                    f"{over.size} of {head_n} head keys above their exact count outside the "
                    "event windows" + (f"; first {sampler.head_ids[over[0]]}: "
                                       f"{head_obs[over[0]]} vs {head_expected[over[0]]}"
                                       if over.size else ""))]
    want = np.concatenate([np.repeat([b + 1, b], [e, size - e]) for (b, e), size in
                           zip(expected[head_n:], classes.sizes[head_n:].tolist(),
                               strict=True)]) if len(expected) > head_n else np.zeros(0)
    head_set = set(sampler.head_ids)
    got = np.array(sorted((c for k, c in by_key.items() if k not in head_set), reverse=True),
                   dtype=np.int64)
    want = np.sort(want)[::-1][: max(got.size, 1)]
    above = got.size > want.size or bool(np.any(got > want[: got.size]))
    checks.append(Check("tail counts", not above,
                        f"{got.size:,} tail keys seen, none above the profile's counts (the "
                        f"{total - n:,} rows of the event windows left out)" if not above else
                        "tail keys above the profile's counts outside the event windows"))
    return VerifyReport(events=n, checks=tuple(checks))


def _tail_check(sampler: ProfileSampler, probs, n: int, observed: np.ndarray,
                alpha: float) -> Check:
    from scipy import stats

    if observed.size == 0:
        return Check("tail counts", sampler.n_keys == sampler.head_size, "no tail keys seen")
    sizes = sampler.classes.sizes[sampler.head_size:]
    p_key = probs[sampler.head_size:] / sizes
    grid = np.arange(1, int(observed.max()) + 1)
    # P(count = c) mixed over classes, conditioned on count >= 1
    pmf = np.zeros(grid.size)
    seen = 0.0
    for size, p in zip(sizes, p_key, strict=True):
        pmf += size * stats.binom.pmf(grid, n, p)
        seen += size * -np.expm1(n * np.log1p(-p))
    model_cdf = np.cumsum(pmf) / seen
    emp_cdf = np.searchsorted(np.sort(observed), grid, side="right") / observed.size
    ks = float(np.max(np.abs(emp_cdf - model_cdf)))
    critical = float(stats.kstwobign.isf(alpha)) / math.sqrt(observed.size)
    return Check("tail counts", ks <= critical,
                 f"KS {ks:.4f} vs critical {critical:.4f} over {observed.size:,} tail keys seen")
