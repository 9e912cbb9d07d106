"""Arrival schedules: absolute request times in virtual seconds, sorted.

The simulator feeds these times to its queues; the load driver replays the same schedule
against a real clock, so a run and its model see the same bursts. Three processes:

- ``poisson``: a homogeneous Poisson process, what open-loop load tests send.
- ``on_off``: a Markov-modulated Poisson process that alternates between a burst rate and a
  quiet rate with the same long-run mean, like live chat reacting to what happens on stream.
- ``rate_trace`` / ``from_rate_trace``: a non-homogeneous Poisson process following measured
  per-second rates.

All three are built the same way, block by block: a Poisson count for each block of time in
which the rate is constant, then that many sorted uniform times inside it. Memory is the
output plus a bounded working set, whatever the duration.

The simulator does not take a whole run's times at once: ``arrival_blocks`` gives them block
by block (about ``BLOCK_EVENTS`` expected requests of time each, or one bin of a profile's
arrivals), each block drawn from its own seed, so a day's arrivals need one block's memory
and the times are the same however the run is grouped into windows.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hotshard._files import is_number, require_file
from hotshard.errors import InputError

__all__ = [
    "BLOCK_EVENTS",
    "ArrivalBlocks",
    "ArrivalProcess",
    "OnOffArrivals",
    "PoissonArrivals",
    "ProfileArrivals",
    "TraceArrivals",
    "arrival_blocks",
    "from_rate_trace",
    "on_off",
    "on_off_dispersion",
    "parse_arrivals",
    "poisson",
    "rate_trace",
    "read_rate_trace",
]

Times = NDArray[np.float64]
RNG = np.random.Generator | int | None

# A constant-rate block is cut into pieces of at most this many expected events, and the
# sorted uniforms are made for at most about _CHUNK_EVENTS events at a time: the working set.
_BLOCK_EVENTS = 1 << 16
_CHUNK_EVENTS = 1 << 20
# A run's arrivals are drawn in blocks of about this many expected requests (a profile's: one
# bin of its arrivals), each from its own seed: small enough that a block's arrays stay in a
# few megabytes, large enough that the per-block overhead (a generator, a few numpy calls) is
# under a percent of the drawing
BLOCK_EVENTS = 1 << 16
# A rate trace may span at most this many seconds (about 116 days, 80 MB of rates).
MAX_TRACE_SECONDS = 10_000_000
_SPEC_HELP = "use poisson, onoff[:BURST[:ON_FRACTION[:MEAN_PERIOD]]] or trace:PATH"


def _positive(value: float, name: str, unit: str) -> float:
    """``value`` as a float if finite and > 0, else an InputError naming ``name``."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number > 0 {unit}, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise InputError(f"{name} must be > 0 {unit}, got {value!r}")
    return v


def poisson(rate: float, duration: float, rng: RNG = None) -> Times:
    """Arrival times of a Poisson process of ``rate`` per second over [0, ``duration``).

    Parameters
    ----------
    rate : float
        Mean arrivals per second, > 0.
    duration : float
        Length of the schedule in seconds, > 0.
    rng : numpy.random.Generator, int or None
        Source of randomness (a seed or a generator).

    Returns
    -------
    ndarray of float64
        Sorted arrival times in seconds; about ``rate * duration`` of them.

    Raises
    ------
    InputError
        If ``rate`` or ``duration`` is not a finite number > 0.

    Notes
    -----
    Exact in distribution: the count in each block is Poisson(rate * width) and, given the
    count, the times are the order statistics of uniforms (the defining property of the
    Poisson process), made in linear time from normalised exponential spacings (Devroye 1986,
    Non-Uniform Random Variate Generation, V.2) rather than by sorting. Squared coefficient of
    variation of the gaps and index of dispersion of the counts are both 1.
    """
    rate = _positive(rate, "rate", "per second")
    duration = _positive(duration, "duration", "seconds")
    return _emit(np.zeros(1), np.array([duration]), np.array([rate]),
                 np.random.default_rng(rng))


def on_off(rate: float, duration: float, rng: RNG = None, *, burst: float = 4.0,
           on_fraction: float = 0.2, mean_period: float = 1.0) -> Times:
    """Bursty arrivals: a two-state Markov-modulated Poisson process of mean ``rate``.

    Parameters
    ----------
    rate : float
        Long-run mean arrivals per second, > 0.
    duration : float
        Length of the schedule in seconds, > 0.
    rng : numpy.random.Generator, int or None
        Source of randomness.
    burst : float
        Rate during a burst as a multiple of ``rate``, >= 1 (1 is a Poisson process).
    on_fraction : float
        Long-run share of time in bursts, in (0, 1); ``burst * on_fraction`` must be <= 1
        (at equality the quiet rate is 0: an interrupted Poisson process).
    mean_period : float
        Mean length of one burst plus one quiet spell, seconds, > 0.

    Returns
    -------
    ndarray of float64
        Sorted arrival times in seconds.

    Raises
    ------
    InputError
        If any parameter breaks its rule.

    Notes
    -----
    Bursts last Exp(mean ``on_fraction * mean_period``), quiet spells
    Exp(mean ``(1 - on_fraction) * mean_period``); the rates are ``burst * rate`` and
    ``rate * (1 - burst * on_fraction) / (1 - on_fraction)``, so the time-average rate is
    ``rate``. The first state is drawn from the stationary distribution (in a burst with
    probability ``on_fraction``), so the process is stationary from t = 0.

    The defaults (4x the mean for a fifth of the time, one burst a second) make bursts short
    enough that per-second averages hide them, yet long enough to queue hundreds of requests
    at a shard near capacity. How bursty that is: see ``on_off_dispersion``, whose limit for
    long windows, 1 + 2 on_fraction^2 (burst - 1)^2 rate mean_period, is the variability of
    the arrivals that Kingman's heavy-traffic formula uses for c_a^2 (Whitt 1983, QNA).
    """
    proc = OnOffArrivals(burst=burst, on_fraction=on_fraction, mean_period=mean_period)
    return proc.times(rate, duration, rng)


def on_off_dispersion(rate: float, *, burst: float = 4.0, on_fraction: float = 0.2,
                      mean_period: float = 1.0, window: float = math.inf) -> float:
    """Index of dispersion Var N / E N of ``on_off`` arrival counts in a window of ``window`` s.

    Notes
    -----
    With the rate process lambda(t) stationary, Var lambda = V = f (1 - f) (l_on - l_off)^2 and
    autocovariance V e^(-k |s|), k = 1/T_on + 1/T_off = 1 / (f (1 - f) P), the count N in a
    window w is mixed Poisson:
    Var N = rate w + 2 V (w/k - (1 - e^(-k w)) / k^2). Divided by E N = rate w, this tends to
    1 + 2 f^2 (burst - 1)^2 rate P as w grows (f = on_fraction, P = mean_period). A Poisson
    process has 1 for every window.
    """
    proc = OnOffArrivals(burst=burst, on_fraction=on_fraction, mean_period=mean_period)
    return proc.index_of_dispersion(rate, window)


def read_rate_trace(path: str | Path) -> NDArray[np.float64]:
    """Per-second rates from a file: one rate per line, or ``second,rate`` rows.

    Parameters
    ----------
    path : str or Path
        Text file. With one column, line i holds the rate of second i. With two (comma- or
        whitespace-separated), each row holds a whole second and its rate: the trace starts
        at the first row's second (shifted to 0, so epoch seconds work), seconds must
        increase, and seconds missing between rows have rate 0 (as a log aggregated by second
        leaves out the seconds without requests). Blank lines and ``#`` comments are skipped;
        a non-numeric first line is a header.

    Returns
    -------
    ndarray of float64
        Rate (arrivals per second) of each second from the start.

    Raises
    ------
    InputError
        If the file is unreadable or empty, a value is not a number, a rate is negative, the
        seconds are not whole or not increasing, or no second has any traffic.
    """
    p = require_file(path, what="rate trace")
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read rate trace {path}: {exc}") from None
    rows = [(i, re.split(r"[,\s]+", s.strip())) for i, s in enumerate(text.splitlines(), 1)
            if s.strip() and not s.lstrip().startswith("#")]
    if rows and not all(is_number(f) for f in rows[0][1]):
        rows = rows[1:]  # header
    if not rows:
        raise InputError(f"rate trace {path} has no rates")
    width = len(rows[0][1])
    if width not in (1, 2):
        raise InputError(f"rate trace {path}, line {rows[0][0]}: expected a rate or "
                         f"second,rate, got {width} fields")
    for line, parts in rows:
        if len(parts) != width or not all(is_number(f) for f in parts):
            raise InputError(f"rate trace {path}, line {line}: expected "
                             f"{'a rate' if width == 1 else 'second,rate'}, got "
                             f"{','.join(parts)!r}")
    table = np.array([parts for _, parts in rows], dtype=np.float64)
    lines = np.array([line for line, _ in rows])
    rates = table[:, -1]
    bad = ~(np.isfinite(rates) & (rates >= 0))
    if bad.any():
        i = int(np.argmax(bad))
        raise InputError(f"rate trace {path}, line {lines[i]}: rates must be finite and >= 0, "
                         f"got {rates[i]:g}")
    if width == 2:
        seconds = table[:, 0]
        bad = ~(np.isfinite(seconds) & (seconds == np.round(seconds)))
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"rate trace {path}, line {lines[i]}: seconds must be whole "
                             f"numbers, got {seconds[i]:g}")
        back = np.flatnonzero(np.diff(seconds) <= 0)
        if back.size:
            i = int(back[0]) + 1
            raise InputError(f"rate trace {path}, line {lines[i]}: seconds must increase, got "
                             f"{seconds[i]:g} after {seconds[i - 1]:g}")
        span = int(seconds[-1] - seconds[0]) + 1
        if span > MAX_TRACE_SECONDS:
            raise InputError(f"rate trace {path} spans {span:,} seconds; at most "
                             f"{MAX_TRACE_SECONDS:,} are supported")
        full = np.zeros(span)
        full[(seconds - seconds[0]).astype(np.int64)] = rates
        rates = full
    if not rates.max() > 0:
        raise InputError(f"rate trace {path} has no traffic: every rate is 0")
    return rates


def rate_trace(rates: ArrayLike, rng: RNG = None) -> Times:
    """Arrival times of a non-homogeneous Poisson process with per-second ``rates``.

    Second i (the interval [i, i + 1)) gets a Poisson(rates[i]) count of uniform times, so
    per-second counts have mean and variance ``rates[i]``.

    Raises
    ------
    InputError
        If ``rates`` is empty, holds a negative or non-finite value, or is all zero.
    """
    return TraceArrivals(rates).times(None, None, rng)


def from_rate_trace(path: str | Path, rng: RNG = None) -> Times:
    """``rate_trace`` of the per-second rates in ``path`` (see ``read_rate_trace``)."""
    return TraceArrivals.from_file(path).times(None, None, rng)


@runtime_checkable
class ArrivalProcess(Protocol):
    """An arrival process: ``times(rate, duration, rng)`` -> sorted arrival times in seconds."""

    def times(self, rate: float | None, duration: float | None, rng: RNG = None) -> Times: ...

    def to_dict(self) -> dict: ...


@dataclass(frozen=True)
class PoissonArrivals:
    """Poisson arrivals (see ``poisson``)."""

    def times(self, rate, duration, rng=None) -> Times:
        return poisson(rate, duration, rng)

    def blocks(self, rate, duration, seed: int) -> ArrivalBlocks:
        """The same process block by block (see ``arrival_blocks``)."""
        rate = _positive(rate, "rate", "per second")
        duration = _positive(duration, "duration", "seconds")
        width, count = _block_grid(rate, duration)

        def draw() -> Iterator[Times]:
            for b in range(count):
                lo = b * width
                hi = duration if b == count - 1 else (b + 1) * width
                yield _emit(np.array([lo]), np.array([hi - lo]), np.array([rate]),
                            _block_rng(seed, b))

        return ArrivalBlocks(width, count, draw())

    def index_of_dispersion(self, rate: float, window: float = math.inf) -> float:
        """1: Poisson counts have variance equal to their mean in every window."""
        return 1.0

    def to_dict(self) -> dict:
        return {"kind": "poisson"}


@dataclass(frozen=True)
class OnOffArrivals:
    """On/off (Markov-modulated Poisson) arrivals (see ``on_off`` for the parameters)."""

    burst: float = 4.0
    on_fraction: float = 0.2
    mean_period: float = 1.0

    def __post_init__(self):
        b, f = float(self.burst), float(self.on_fraction)
        if not (math.isfinite(b) and b >= 1):
            raise InputError(f"burst must be >= 1 (the burst rate as a multiple of the mean "
                             f"rate), got {self.burst}")
        if not 0 < f < 1:
            raise InputError(f"on_fraction must be in (0, 1), got {self.on_fraction}")
        if b * f > 1 + 1e-12:
            raise InputError(f"burst * on_fraction must be <= 1, or the quiet rate would be "
                             f"negative; got {b:g} * {f:g} = {b * f:g}")
        period = _positive(self.mean_period, "mean_period", "seconds")
        object.__setattr__(self, "burst", b)
        object.__setattr__(self, "on_fraction", f)
        object.__setattr__(self, "mean_period", period)

    def rates(self, rate: float) -> tuple[float, float]:
        """(burst rate, quiet rate) for long-run mean ``rate``."""
        f = self.on_fraction
        return self.burst * rate, max(rate * (1 - self.burst * f) / (1 - f), 0.0)

    def times(self, rate, duration, rng=None) -> Times:
        rate = _positive(rate, "rate", "per second")
        duration = _positive(duration, "duration", "seconds")
        rng = np.random.default_rng(rng)
        f, period = self.on_fraction, self.mean_period
        mean_len = np.array([f * period, (1 - f) * period])  # state 0 = burst, 1 = quiet
        state0 = 0 if rng.random() < f else 1
        # alternate states, drawing spells in batches until they cover the duration
        batch = 2 * (int(duration / period * 1.1) + 8)
        lengths: list[NDArray[np.float64]] = []
        covered = 0.0
        while covered < duration:
            states = (state0 + np.arange(batch)) % 2  # batch is even: parity carries over
            spell = rng.standard_exponential(batch) * mean_len[states]
            lengths.append(spell)
            covered += float(spell.sum())
        widths = np.concatenate(lengths)
        ends = np.cumsum(widths)
        n = int(np.searchsorted(ends, duration, side="left")) + 1
        ends = ends[:n]
        ends[-1] = duration
        starts = np.concatenate(([0.0], ends[:-1]))
        state = (state0 + np.arange(n)) % 2
        on, off = self.rates(rate)
        return _emit(starts, ends - starts, np.where(state == 0, on, off), rng)

    def blocks(self, rate, duration, seed: int) -> ArrivalBlocks:
        """The same process block by block (see ``arrival_blocks``): the bursts and quiet
        spells are one chain over the whole run, drawn as the blocks reach them, so a burst
        crosses block edges as it would cross any instant."""
        rate = _positive(rate, "rate", "per second")
        duration = _positive(duration, "duration", "seconds")
        width, count = _block_grid(rate, duration)
        spells = _Spells(self, rate, np.random.default_rng(_block_seed(seed, "spells")))

        def draw() -> Iterator[Times]:
            for b in range(count):
                lo = b * width
                hi = duration if b == count - 1 else (b + 1) * width
                starts, ends, rates = spells.between(lo, hi)
                yield _emit(starts, ends - starts, rates, _block_rng(seed, b))

        return ArrivalBlocks(width, count, draw())

    def index_of_dispersion(self, rate: float, window: float = math.inf) -> float:
        """Var N / E N of the counts in a window of ``window`` seconds (see
        ``on_off_dispersion``)."""
        rate = _positive(rate, "rate", "per second")
        w = float(window)
        if not w > 0:  # inf allowed: the long-window limit
            raise InputError(f"window must be > 0 seconds, got {window!r}")
        f, b, period = self.on_fraction, self.burst, self.mean_period
        if math.isinf(w):
            return 1 + 2 * f * f * (b - 1) ** 2 * rate * period
        on, off = self.rates(rate)
        v = f * (1 - f) * (on - off) ** 2
        k = 1 / (f * (1 - f) * period)
        return 1 + 2 * v * (w / k + math.expm1(-k * w) / k ** 2) / (rate * w)

    def to_dict(self) -> dict:
        return {"kind": "onoff", "burst": self.burst, "on_fraction": self.on_fraction,
                "mean_period_s": self.mean_period}


@dataclass(frozen=True, eq=False)
class ProfileArrivals:
    """Production's measured arrivals (a profile's ``arrivals`` section) in real time: the
    simulated minute m is the profile's minute m (round again past its window), its count
    scaled to the mean rate, and the burstiness inside each minute from the fitted cascade
    (``workload.profile_arrivals``), the process ``drive --arrivals profile`` sends, so a
    simulation and a run see the same bursts. ``rate x duration`` requests exactly (rounded),
    as the cascade deals a count."""

    model: object  # hotshard.profile.arrivals.ArrivalModel
    source: str = "profile"

    def _cascade(self, rate, duration, rng):
        """(the run's cascade, its number of requests, its duration): ``times`` and
        ``blocks`` draw the same one from the same seed."""
        from hotshard.workload.profile_arrivals import CascadeArrivals

        rate = _positive(rate, "rate", "per second")
        duration = _positive(duration, "duration", "seconds")
        rng = np.random.default_rng(rng)
        events = max(1, int(round(rate * duration)))
        cascade = CascadeArrivals(self.model, events, events / duration,
                                  int(rng.integers(0, 2**63 - 1)), real_time=True)
        return cascade, events, duration

    def times(self, rate, duration, rng=None) -> Times:
        cascade, events, _ = self._cascade(rate, duration, rng)
        return cascade.times(np.arange(events, dtype=np.int64))

    def blocks(self, rate, duration, seed: int) -> ArrivalBlocks:
        """The same times as ``times(rate, duration, seed)``, one bin of the profile's
        resolution at a time (each bin of the cascade is drawn from its own seed, so a bin
        is the natural block; a profile's bin at production's rate is a few hundred
        thousand requests)."""
        cascade, events, duration = self._cascade(rate, duration, seed)
        cum = self._bin_rows(events, duration)

        def draw() -> Iterator[Times]:
            for b in range(cum.size - 1):
                yield cascade.times(np.arange(cum[b], cum[b + 1], dtype=np.int64))

        return ArrivalBlocks(float(self.model.resolution_s), int(cum.size - 1), draw())

    def _bin_rows(self, events: int, duration: float) -> NDArray[np.int64]:
        """Where each bin's requests start in the run (the cascade's own deal of ``events``
        over real-time bins, ``CascadeArrivals``): blocks cut there draw each bin once. Were
        the two to differ, a bin would be drawn for each block it straddles: slower, the
        same times."""
        from hotshard.workload.profile_sampler import largest_remainder

        res = float(self.model.resolution_s)
        n_bins = max(1, int(math.ceil(duration / res - 1e-9)))
        widths = np.full(n_bins, res)
        widths[-1] = duration - (n_bins - 1) * res
        counts = np.asarray(self.model.counts)
        weights = counts[np.arange(n_bins) % counts.size] * (widths / res)
        if not weights.sum() > 0:
            weights = widths.copy()
        dealt = largest_remainder(np.asarray(weights, dtype=np.float64), int(events))
        return np.concatenate([[0], np.cumsum(dealt)]).astype(np.int64)

    def index_of_dispersion(self, rate: float, window: float = math.inf) -> float:
        """The measured index of dispersion at the scale nearest ``window`` (in log terms);
        the largest measured for an infinite window."""
        measured = {float(k): v for k, v in self.model.idc.items()}
        if not measured:
            return 1.0
        w = float(window)
        scale = max(measured) if math.isinf(w) else min(
            measured, key=lambda k: abs(math.log(k / w)))
        return float(measured[scale])

    def to_dict(self) -> dict:
        return {"kind": "profile", "source": self.source,
                "resolution_s": self.model.resolution_s,
                "idc": dict(self.model.idc)}


@dataclass(frozen=True, eq=False)
class TraceArrivals:
    """Arrivals following per-second ``rates`` (a non-homogeneous Poisson process)."""

    rates: NDArray[np.float64]
    source: str | None = None

    def __post_init__(self):
        a = np.array(self.rates, dtype=np.float64, ndmin=1)
        if a.ndim != 1 or a.size == 0:
            raise InputError("rates must be a non-empty list of per-second rates")
        if not np.all(np.isfinite(a) & (a >= 0)):
            bad = a[~(np.isfinite(a) & (a >= 0))][0]
            raise InputError(f"rates must be finite and >= 0, got {bad}")
        if not a.max() > 0:
            raise InputError("rates has no traffic: every rate is 0")
        a.setflags(write=False)
        object.__setattr__(self, "rates", a)

    @classmethod
    def from_file(cls, path: str | Path) -> TraceArrivals:
        return cls(read_rate_trace(path), source=str(path))

    @property
    def duration(self) -> float:
        """Seconds the trace covers."""
        return float(self.rates.size)

    @property
    def mean_rate(self) -> float:
        return float(self.rates.mean())

    def times(self, rate=None, duration=None, rng=None) -> Times:
        """Arrival times over the trace, or its first ``duration`` seconds, with its rates
        scaled (shape kept) so that the mean over that window is ``rate`` if given.

        Raises
        ------
        InputError
            If ``duration`` exceeds the trace, or the window has no traffic to scale.
        """
        widths, rates = self._scaled(rate, duration)
        starts = np.arange(rates.size, dtype=np.float64)
        return _emit(starts, widths, rates, np.random.default_rng(rng))

    def blocks(self, rate, duration, seed: int) -> ArrivalBlocks:
        """The same process block by block (see ``arrival_blocks``): whole seconds of the
        trace, about ``BLOCK_EVENTS`` expected requests a block."""
        widths, rates = self._scaled(rate, duration)
        per_second = float(np.sum(rates * widths)) / float(widths.sum())
        span = max(1, int(BLOCK_EVENTS / per_second)) if per_second > 0 else rates.size
        count = -(-rates.size // span)
        starts = np.arange(rates.size, dtype=np.float64)

        def draw() -> Iterator[Times]:
            for b in range(count):
                cut = slice(b * span, (b + 1) * span)
                yield _emit(starts[cut], widths[cut], rates[cut], _block_rng(seed, b))

        return ArrivalBlocks(float(span), count, draw())

    def _scaled(self, rate, duration) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """(widths, rates) of the seconds ``times`` draws from (see there)."""
        widths = np.ones(self.rates.size)
        rates = self.rates
        if duration is not None:
            duration = _positive(duration, "duration", "seconds")
            if duration > self.duration:
                raise InputError(f"duration {duration:g} s is longer than the rate trace "
                                 f"({self.duration:g} s)")
            n = math.ceil(duration)
            widths, rates = widths[:n].copy(), rates[:n]
            widths[-1] = duration - (n - 1)
        if rate is not None:
            rate = _positive(rate, "rate", "per second")
            expected = float(np.sum(rates * widths))
            if not expected > 0:
                raise InputError("the rate trace has no traffic in the first "
                                 f"{float(widths.sum()):g} s, so it cannot be scaled to rate "
                                 f"{rate:g}")
            rates = rates * (rate * float(widths.sum()) / expected)
        return widths, rates

    def to_dict(self) -> dict:
        return {"kind": "trace", "source": self.source, "duration_s": self.duration,
                "mean_rate": self.mean_rate}


def parse_arrivals(spec: str) -> ArrivalProcess:
    """An arrival process from a spec: ``poisson``, ``onoff:4:0.2:1s``, ``trace:PATH``.

    Parameters
    ----------
    spec : str
        ``poisson``; ``onoff[:BURST[:ON_FRACTION[:MEAN_PERIOD]]]`` (burst factor, share of
        time in bursts, mean burst-plus-quiet cycle; defaults 4, 0.2, 1s; the cycle is
        seconds unless suffixed ms, s, m or h); or ``trace:PATH`` (per-second rates, see
        ``read_rate_trace``; read now, so a bad file fails here).

    Raises
    ------
    InputError
        If the kind is unknown, a part is extra, or a value breaks its rule.
    """
    kind, _, rest = str(spec).strip().partition(":")
    kind = kind.lower()
    if kind == "trace":
        if not rest:
            raise InputError(f"not an arrivals spec: {spec!r} (trace:PATH needs a path)")
        return TraceArrivals.from_file(rest)
    parts = rest.split(":") if rest else []
    if kind == "poisson":
        if parts:
            raise InputError(f"poisson takes no parameters, got {spec!r}")
        return PoissonArrivals()
    if kind in ("onoff", "on_off", "on-off"):
        if len(parts) > 3:
            raise InputError(f"onoff takes at most BURST:ON_FRACTION:MEAN_PERIOD, got {spec!r}")
        names = ("burst", "on_fraction")
        kwargs: dict[str, float] = {}
        for name, text in zip(names, parts[:2], strict=False):
            try:
                kwargs[name] = float(text)
            except ValueError:
                raise InputError(f"{name} must be a number, got {text!r} in {spec!r}") from None
        if len(parts) == 3:
            kwargs["mean_period"] = _period(parts[2])
        return OnOffArrivals(**kwargs)
    raise InputError(f"not an arrivals spec: {spec!r} ({_SPEC_HELP})")


def _period(text: str) -> float:
    """'10s', '10', '500ms', '2m' -> seconds."""
    t = text.strip()
    if t.endswith("ms"):
        try:
            return float(t[:-2]) * 1e-3
        except ValueError:
            raise InputError(f"mean_period must be a duration, got {text!r}") from None
    from hotshard.workload.timing import parse_duration

    return parse_duration(t)


def _emit(starts: NDArray[np.float64], widths: NDArray[np.float64],
          rates: NDArray[np.float64], rng: np.random.Generator) -> Times:
    """Poisson arrivals in blocks [starts, starts + widths) of constant ``rates``, sorted."""
    starts, widths, rates = _split(starts, widths, rates)
    counts = rng.poisson(rates * widths)
    ends = np.cumsum(counts)
    total = int(ends[-1]) if ends.size else 0
    out = np.empty(total)
    b, pos = 0, 0
    while b < counts.size:
        e = max(int(np.searchsorted(ends, pos + _CHUNK_EVENTS, side="right")), b + 1)
        n = int(ends[e - 1]) - pos
        if n:
            _sorted_uniforms(starts[b:e], widths[b:e], counts[b:e], rng, out, pos)
        pos, b = pos + n, e
    return out


def _split(starts, widths, rates):
    """Blocks cut into equal pieces of at most _BLOCK_EVENTS expected events each."""
    pieces = np.maximum(np.ceil(rates * widths / _BLOCK_EVENTS), 1).astype(np.int64)
    if np.all(pieces == 1):
        return starts, widths, rates
    block = np.repeat(np.arange(pieces.size), pieces)
    first = np.cumsum(pieces) - pieces
    k = np.arange(block.size) - first[block]
    w = widths[block] / pieces[block]
    return starts[block] + k * w, w, rates[block]


def _sorted_uniforms(starts, widths, counts, rng, out, pos) -> None:
    """counts[i] sorted uniform times in each [starts[i], starts[i] + widths[i]), in order,
    written to ``out`` from ``pos`` on.

    (E_1 + ... + E_j) / (E_1 + ... + E_{k+1}), j = 1..k, for k + 1 standard exponentials, are
    distributed as the order statistics of k uniforms: linear time, no sort. The draws and
    their running sum are numpy's; spreading them over the blocks is one compiled pass.
    """
    spacings = rng.standard_exponential(int(counts.sum()) + counts.size)
    np.cumsum(spacings, out=spacings)
    _compiled_spread()(spacings, counts.astype(np.int64), starts, widths, out, pos)


@functools.cache
def _compiled_spread():
    """``_spread`` compiled by numba (imported here, paid only by the paths that draw)."""
    from numba import njit

    return njit(cache=True, nogil=True)(_spread)


def _spread(cumulative, counts, starts, widths, out, pos):  # pragma: no cover - compiled
    """Block b's ``counts[b]`` partial sums over its closing one, scaled into the block; a
    running maximum keeps the whole of ``out`` sorted (rounding at block edges could put
    neighbours an ulp out of order; sorted is the contract)."""
    top = out[pos - 1] if pos > 0 else -np.inf
    j = 0
    for b in range(counts.size):
        k = counts[b]
        base = cumulative[j - 1] if j > 0 else 0.0
        span = cumulative[j + k] - base
        for i in range(k):
            t = starts[b] + widths[b] * ((cumulative[j + i] - base) / span)
            if t < top:
                t = top
            top = t
            out[pos] = t
            pos += 1
        j += k + 1


@dataclass(frozen=True, eq=False)
class ArrivalBlocks:
    """A run's arrival times, block after block of time: ``count`` blocks of about
    ``seconds`` each (the last may be shorter), iterated once, in order (a bursty process's
    state runs from one block into the next). Every block's times are sorted and none
    precedes the previous block's."""

    seconds: float
    count: int
    blocks: Iterator[Times]

    def __iter__(self) -> Iterator[Times]:
        return self.blocks


def arrival_blocks(process: ArrivalProcess, rate: float, duration: float,
                   seed: int) -> ArrivalBlocks:
    """``process``'s arrivals at ``rate`` over ``duration`` as blocks of time, each drawn
    from (``seed``, its index), so memory is one block's whatever the duration, and the
    same seed gives the same times however a caller groups the blocks. A process of
    another kind (anything with ``times``) is drawn whole, as one block."""
    blocks = getattr(process, "blocks", None)
    if blocks is not None:
        return blocks(rate, duration, seed)
    whole = np.asarray(process.times(rate, duration, np.random.default_rng(seed)),
                       dtype=np.float64)
    return ArrivalBlocks(float(duration), 1, iter([whole]))


def _block_grid(rate: float, duration: float) -> tuple[float, int]:
    """(block width, block count) for about ``BLOCK_EVENTS`` expected arrivals a block."""
    width = BLOCK_EVENTS / rate
    if width >= duration:
        return duration, 1
    return width, max(1, int(math.ceil(duration / width - 1e-9)))


def _block_seed(seed: int, tag: int | str) -> np.random.SeedSequence:
    key = tag if isinstance(tag, int) else int.from_bytes(tag.encode(), "little")
    return np.random.SeedSequence(int(seed), spawn_key=(key,))


def _block_rng(seed: int, b: int) -> np.random.Generator:
    """Block ``b``'s own generator: the blocks of a run are independent streams."""
    return np.random.default_rng(_block_seed(seed, b))


class _Spells:
    """An on/off process's bursts and quiet spells over a run, drawn in batches as far as
    they are asked for (``between`` calls in increasing time): memory is one batch."""

    _BATCH = 4096  # even, so a batch's states alternate on from the previous batch

    def __init__(self, process: OnOffArrivals, rate: float, rng: np.random.Generator):
        f, period = process.on_fraction, process.mean_period
        self._mean = np.array([f * period, (1 - f) * period])  # state 0 = burst, 1 = quiet
        self._rates = np.array(process.rates(rate))
        self._rng = rng
        self._state = 0 if rng.random() < f else 1
        self._start = np.empty(0)
        self._end = np.empty(0)
        self._rate = np.empty(0)
        self._covered = 0.0

    def between(self, lo: float, hi: float) -> tuple[Times, Times, Times]:
        """(starts, ends, rates) of the spells' parts inside [lo, hi)."""
        while self._covered < hi:
            states = (self._state + np.arange(self._BATCH)) % 2
            ends = self._covered + np.cumsum(
                self._rng.standard_exponential(self._BATCH) * self._mean[states])
            starts = np.concatenate(([self._covered], ends[:-1]))
            self._start = np.concatenate([self._start, starts])
            self._end = np.concatenate([self._end, ends])
            self._rate = np.concatenate([self._rate, self._rates[states]])
            self._covered = float(ends[-1])
        keep = self._end > lo
        self._start, self._end, self._rate = self._start[keep], self._end[keep], self._rate[keep]
        take = self._start < hi
        starts = np.maximum(self._start[take], lo)
        ends = np.minimum(self._end[take], hi)
        some = ends > starts
        return starts[some], ends[some], self._rate[take][some]
