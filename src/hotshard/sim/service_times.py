"""Service-time distributions, in seconds, behind one small protocol.

Every model has ``sample(n, rng)``, ``mean``, ``scv`` (squared coefficient of variation, what
the Pollaczek-Khinchine and Kingman formulas need) and ``quantile(q)``; ``parse_service`` turns
command-line specs such as ``lognormal:5ms:40ms`` into one.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from hotshard._files import is_number, require_file
from hotshard.errors import InputError

__all__ = [
    "Deterministic",
    "Empirical",
    "Exponential",
    "LogNormal",
    "ServiceTime",
    "parse_service",
    "parse_time",
]

# Phi^-1(0.99): the standard normal's 99th percentile
Z99 = NormalDist().inv_cdf(0.99)
# units per second of a time written in a spec; a bare number is milliseconds
_UNITS = {"": 1e3, "ms": 1e3, "s": 1.0, "us": 1e6, "µs": 1e6}
_TIME = re.compile(r"\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|us|µs)?\s*")
_SPEC_HELP = ("use exp:MEAN, lognormal:MEAN:P99, const:VALUE or file:PATH; times are "
              "milliseconds unless suffixed s, ms or us, e.g. exp:5ms")
_UNIT_NAMES = {"ms": 1e3, "s": 1.0, "us": 1e6}


@runtime_checkable
class ServiceTime(Protocol):
    """A service-time distribution in seconds."""

    @property
    def mean(self) -> float: ...

    @property
    def scv(self) -> float: ...

    def sample(self, n: int, rng: np.random.Generator | int | None = None
               ) -> NDArray[np.float64]: ...

    def quantile(self, q: ArrayLike) -> float | NDArray[np.float64]: ...

    def to_dict(self) -> dict: ...


def _check_n(n: int) -> int:
    """``n`` as an int >= 0."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 0:
        raise InputError(f"n must be a whole number >= 0, got {n!r}")
    return int(n)


def _check_q(q: ArrayLike) -> NDArray[np.float64]:
    """``q`` as a float array with every entry in [0, 1]."""
    a = np.asarray(q, dtype=np.float64)
    if not np.all((a >= 0) & (a <= 1)):
        raise InputError(f"quantile levels q must be in [0, 1], got {q!r}")
    return a


def _out(values: NDArray[np.float64], q: ArrayLike) -> float | NDArray[np.float64]:
    """A float for a scalar ``q``, an array otherwise."""
    return float(values) if np.ndim(q) == 0 else values


def _positive(value: float, name: str) -> float:
    """``value`` as a float, if finite and > 0."""
    v = float(value)
    if not (math.isfinite(v) and v > 0):
        raise InputError(f"{name} must be > 0 seconds, got {value}")
    return v


@dataclass(frozen=True)
class Exponential:
    """Exponential service times of mean ``mean`` seconds (M/M/c's service; scv = 1)."""

    mean: float

    def __post_init__(self):
        object.__setattr__(self, "mean", _positive(self.mean, "mean"))

    @property
    def scv(self) -> float:
        return 1.0

    def sample(self, n, rng=None):
        return np.random.default_rng(rng).exponential(self.mean, _check_n(n))

    def quantile(self, q):
        """-mean * ln(1 - q); inf at q = 1."""
        a = _check_q(q)
        with np.errstate(divide="ignore"):
            return _out(-self.mean * np.log1p(-a), q)

    def to_dict(self) -> dict:
        return {"kind": "exponential", "mean_s": self.mean, "scv": 1.0}


@dataclass(frozen=True)
class Deterministic:
    """Every request takes exactly ``value`` seconds (M/D/1's service; scv = 0).

    ``value`` may be 0: an instant service, e.g. a cache hit whose cost is neglected.
    """

    value: float

    def __post_init__(self):
        v = float(self.value)
        if not (math.isfinite(v) and v >= 0):
            raise InputError(f"value must be >= 0 seconds, got {self.value}")
        object.__setattr__(self, "value", v)

    @property
    def mean(self) -> float:
        return self.value

    @property
    def scv(self) -> float:
        return 0.0

    def sample(self, n, rng=None):
        return np.full(_check_n(n), self.value)

    def quantile(self, q):
        a = _check_q(q)
        return _out(np.full(a.shape, self.value), q)

    def to_dict(self) -> dict:
        return {"kind": "deterministic", "value_s": self.value, "scv": 0.0}


@dataclass(frozen=True)
class LogNormal:
    """Log-normal service times: ln S ~ Normal(mu, sigma^2), S in seconds.

    A right-skewed service time with a tail set by one number; usually built from what a
    dashboard shows with ``from_mean_p99``.
    """

    mu: float
    sigma: float

    def __post_init__(self):
        if not math.isfinite(self.mu):
            raise InputError(f"mu must be finite, got {self.mu}")
        if not (math.isfinite(self.sigma) and self.sigma > 0):
            raise InputError(f"sigma must be > 0, got {self.sigma}")

    @classmethod
    def from_mean_p99(cls, mean: float, p99: float) -> LogNormal:
        """The log-normal with this mean and 99th percentile (both in seconds).

        Parameters
        ----------
        mean, p99 : float
            Mean and 99th percentile, seconds; need mean < p99 <= mean * e^(z^2/2) ~ 14.97 mean.

        Returns
        -------
        LogNormal

        Raises
        ------
        InputError
            If p99 <= mean (a log-normal's p99 always exceeds its mean) or p99 / mean exceeds
            e^(z^2/2), the largest ratio any log-normal reaches.

        Notes
        -----
        mean = e^(mu + sigma^2/2) and p99 = e^(mu + z sigma) with z = Phi^-1(0.99), so
        ln(p99/mean) = z sigma - sigma^2/2. That quadratic in sigma has the roots
        z -/+ sqrt(z^2 - 2 ln(p99/mean)): real only while ln(p99/mean) <= z^2/2. Both roots
        give the same mean and p99; we take the smaller. The share of the mean carried by
        requests above the p99 is Phi(sigma - z), so the larger root (sigma > z) describes a
        service where over half of all work is done by 1% of requests: not a service time
        anyone would summarise by its mean and p99.
        """
        mean = _positive(mean, "mean")
        p99 = _positive(p99, "p99")
        if p99 <= mean:
            raise InputError(f"p99 must be greater than the mean for a log-normal service "
                             f"time, got mean {mean:g} s and p99 {p99:g} s")
        r = math.log(p99 / mean)
        limit = Z99 * Z99 / 2
        if r > limit:
            raise InputError(f"p99 / mean must be at most e^(z^2/2) = {math.exp(limit):.2f} for "
                             f"a log-normal (z = 2.326, its 99th percentile), got "
                             f"{p99 / mean:.3g}; use an empirical distribution for a tail "
                             f"that heavy")
        sigma = Z99 - math.sqrt(max(Z99 * Z99 - 2 * r, 0.0))
        return cls(mu=math.log(mean) - sigma * sigma / 2, sigma=sigma)

    @property
    def mean(self) -> float:
        return math.exp(self.mu + self.sigma ** 2 / 2)

    @property
    def scv(self) -> float:
        return math.expm1(self.sigma ** 2)

    def sample(self, n, rng=None):
        return np.random.default_rng(rng).lognormal(self.mu, self.sigma, _check_n(n))

    def quantile(self, q):
        """e^(mu + sigma Phi^-1(q))."""
        from scipy.special import ndtri

        a = _check_q(q)
        return _out(np.exp(self.mu + self.sigma * ndtri(a)), q)

    def to_dict(self) -> dict:
        return {"kind": "lognormal", "mu": self.mu, "sigma": self.sigma, "mean_s": self.mean,
                "p99_s": self.quantile(0.99), "scv": self.scv}


@dataclass(frozen=True, eq=False)
class Empirical:
    """Service times resampled with replacement from measured ``samples`` (seconds).

    The bootstrap of a measured service: its moments and quantiles are the samples' own
    (quantiles by the inverted empirical CDF, which is exactly what resampling draws from).
    """

    samples: NDArray[np.float64]
    source: str | None = None

    def __post_init__(self):
        a = np.array(self.samples, dtype=np.float64, ndmin=1)
        if a.ndim != 1 or a.size == 0:
            raise InputError("samples must be a non-empty list of service times")
        if not np.all(np.isfinite(a) & (a >= 0)):
            raise InputError("samples must be finite service times >= 0")
        if not a.max() > 0:
            raise InputError("samples are all 0: a service needs some positive time")
        a.setflags(write=False)
        object.__setattr__(self, "samples", a)

    @classmethod
    def from_file(cls, path: str | Path, *, column: str | int | None = None,
                  unit: str = "ms") -> Empirical:
        """Service times read from a text file, **milliseconds** unless ``unit`` says otherwise.

        Parameters
        ----------
        path : str or Path
            One number per line, or comma/whitespace-separated columns; blank lines and lines
            starting with ``#`` are skipped; a first line that is not numeric is a header.
        column : str or int, optional
            With several columns: the header name, or the 0-based index, of the one to read.
        unit : {"ms", "s", "us"}
            Unit of the numbers in the file; milliseconds by default, as latencies are logged.

        Returns
        -------
        Empirical

        Raises
        ------
        InputError
            If the file is missing or empty, a value is not a number or is negative, or the
            column is ambiguous or absent.
        """
        if unit not in _UNIT_NAMES:
            raise InputError(f"unit must be one of {', '.join(_UNIT_NAMES)}, got {unit!r}")
        p = require_file(path, what="service-time file")
        values = _read_column(p, column)
        try:
            return cls(values / _UNIT_NAMES[unit], source=str(path))
        except InputError as exc:
            raise InputError(f"{path}: {exc}") from None

    @property
    def mean(self) -> float:
        return float(self.samples.mean())

    @property
    def scv(self) -> float:
        return float(self.samples.var() / self.mean ** 2)

    def sample(self, n, rng=None):
        idx = np.random.default_rng(rng).integers(0, self.samples.size, _check_n(n))
        return self.samples[idx]

    def quantile(self, q):
        a = _check_q(q)
        return _out(np.quantile(self.samples, a, method="inverted_cdf"), q)

    def to_dict(self) -> dict:
        return {"kind": "empirical", "source": self.source, "n_samples": int(self.samples.size),
                "mean_s": self.mean, "p99_s": self.quantile(0.99), "scv": self.scv}


def _read_column(path: Path, column: str | int | None) -> NDArray[np.float64]:
    """The numbers of one column of a text file (see ``Empirical.from_file``)."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read service-time file {path}: {exc}") from None
    rows = [(i, re.split(r"[,\s]+", s.strip())) for i, s in enumerate(text.splitlines(), 1)
            if s.strip() and not s.lstrip().startswith("#")]
    if not rows:
        raise InputError(f"service-time file {path} has no values")
    header: list[str] | None = None
    if not all(is_number(f) for f in rows[0][1]):
        header = rows[0][1]
        rows = rows[1:]
        if not rows:
            raise InputError(f"service-time file {path} has a header but no values")
    width = len(rows[0][1])
    if column is None:
        if width != 1:
            raise InputError(f"service-time file {path} has {width} columns; pass column= "
                             f"(a header name or 0-based index) to choose one")
        index = 0
    elif isinstance(column, str):
        if header is None or column not in header:
            raise InputError(f"service-time file {path} has no column {column!r}"
                             + (f" (columns: {', '.join(header)})" if header else
                                " (it has no header line)"))
        index = header.index(column)
    else:
        index = int(column)
        if not 0 <= index < width:
            raise InputError(f"column must be in 0..{width - 1} for {path}, got {column}")
    fields = []
    for line, parts in rows:
        if len(parts) <= index or not is_number(parts[index]):
            got = parts[index] if len(parts) > index else "nothing"
            raise InputError(f"{path}, line {line}: expected a number in column {index}, "
                             f"got {got!r}")
        fields.append(parts[index])
    values = np.array(fields, dtype=np.float64)
    bad = ~(np.isfinite(values) & (values >= 0))
    if bad.any():
        line = rows[int(np.argmax(bad))][0]
        raise InputError(f"{path}, line {line}: service times must be finite and >= 0, got "
                         f"{values[bad][0]:g}")
    return values




def parse_time(text: str | float) -> float:
    """A time as written on a command line -> seconds: '5' and '5ms' are 5 ms; '0.2s', '300us'.

    A bare number is milliseconds, the unit service times are quoted in.
    """
    if isinstance(text, int | float):
        seconds = float(text) / 1e3
    else:
        m = _TIME.fullmatch(str(text))
        if not m:
            raise InputError(f"not a time: {text!r} (a number of milliseconds, or with a unit: "
                             f"5ms, 0.2s, 300us)")
        seconds = float(m.group(1)) / _UNITS[m.group(2) or ""]
    if not (math.isfinite(seconds) and seconds >= 0):
        raise InputError(f"times must be >= 0, got {text!r}")
    return seconds


def parse_service(spec: str) -> ServiceTime:
    """A service-time model from a spec: ``exp:5ms``, ``lognormal:5ms:40ms``, ``const:5ms``,
    ``file:PATH``.

    Parameters
    ----------
    spec : str
        ``exp:MEAN`` (also ``exponential``), ``lognormal:MEAN:P99``, ``const:VALUE`` (also
        ``deterministic``) or ``file:PATH`` (one service time per line, in milliseconds; see
        ``Empirical.from_file``). Times are milliseconds unless suffixed ``s``, ``ms`` or ``us``.

    Returns
    -------
    ServiceTime

    Raises
    ------
    InputError
        If the kind is unknown, a part is missing or extra, or a value breaks its rule.
    """
    kind, _, rest = str(spec).strip().partition(":")
    kind = kind.lower()
    if kind == "file":
        if not rest:
            raise InputError(f"not a service time spec: {spec!r} (file:PATH needs a path)")
        return Empirical.from_file(rest)
    parts = rest.split(":") if rest else []
    forms = {"exp": ["MEAN"], "exponential": ["MEAN"], "const": ["VALUE"],
             "deterministic": ["VALUE"], "lognormal": ["MEAN", "P99"]}
    if kind not in forms:
        raise InputError(f"not a service time spec: {spec!r} ({_SPEC_HELP})")
    if len(parts) != len(forms[kind]):
        raise InputError(f"a {kind} service time is written {':'.join([kind, *forms[kind]])}, "
                         f"got {spec!r} (times in milliseconds unless suffixed s, ms or us)")
    times = [parse_time(p) for p in parts]
    if kind in ("exp", "exponential"):
        return Exponential(times[0])
    if kind in ("const", "deterministic"):
        return Deterministic(times[0])
    return LogNormal.from_mean_p99(times[0], times[1])
