"""The result of a diagnosis: ranked findings (cause, verdict, score, evidence) and next steps.

Frozen values with a stable JSON form (``{"ranking": [{"cause", "verdict", "score",
"evidence"}], ...}``) so a pipeline can read the verdict of a cause by its id, and so the text
and HTML renderings are drawn from one object.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["CAUSES", "VERDICTS", "Diagnosis", "Finding", "Recommendation", "Verdict"]

Verdict = Literal["fits", "contradicted", "cannot judge"]

# Ranking order of verdicts: what fits first, then what the evidence cannot decide, then what it
# rules out.
VERDICTS: tuple[Verdict, ...] = ("fits", "cannot judge", "contradicted")

# Stable cause ids (the --json contract) and their titles in plain words.
CAUSES = {
    "key-skew": "Key skew: a few hot keys concentrate load on one shard",
    "coordinated-omission": "Coordinated omission: the test's clients waited instead of "
                            "sending, hiding queueing",
    "cache-warmth": "A warmer cache in the test than in production",
    "network": "Network: an extra (cross-zone) hop in production",
    "payload-size": "Payload size: production's requests are bigger",
    "hot-node": "A hot node: one machine is slow whatever keys it holds",
    "no-hot-spot": "No semantic hot spot: uniform synthetic keys are right",
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One explanation judged against the evidence.

    Parameters
    ----------
    cause : str
        One of ``CAUSES``' ids.
    verdict : {"fits", "contradicted", "cannot judge"}
        ``cannot judge`` always comes with ``missing``: the evidence that would decide it.
    score : float
        Strength of the verdict in [0, 1]: how well the cause fits, or how firmly the evidence
        rules it out. Ranking sorts by verdict, then by score within "fits" (strongest first)
        and within "contradicted" (weakest rejection first, the closest call).
    evidence : tuple of str
        Plain sentences with the numbers behind the verdict.
    missing : tuple of str
        What the observations lack to judge this cause (empty when judged).
    numbers : dict
        The measurements behind the verdict by name (shares as fractions, times in ms), for
        a pipeline to read without parsing sentences.
    """

    cause: str
    verdict: Verdict
    score: float
    evidence: tuple[str, ...]
    missing: tuple[str, ...] = ()
    numbers: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.cause not in CAUSES:
            raise ValueError(f"unknown cause {self.cause!r}; known: {', '.join(CAUSES)}")
        if self.verdict not in VERDICTS:
            raise ValueError(f"unknown verdict {self.verdict!r}")
        object.__setattr__(self, "score", float(min(1.0, max(0.0, self.score))))
        object.__setattr__(self, "evidence", tuple(self.evidence))
        object.__setattr__(self, "missing", tuple(self.missing))

    @property
    def title(self) -> str:
        return CAUSES[self.cause]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cause": self.cause, "verdict": self.verdict,
                               "score": round(self.score, 3), "evidence": list(self.evidence)}
        if self.missing:
            out["missing"] = list(self.missing)
        out["numbers"] = dict(self.numbers)
        return out


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A next step, with what it buys where hotshard could compute it.

    ``hottest_before`` and ``hottest_after`` are the hottest shard's share of load (or CPU,
    as ``unit`` says) before and after the step, from ``hotshard predict``'s model.
    """

    action: str
    detail: str
    hottest_before: float | None = None
    hottest_after: float | None = None
    unit: str = ""
    # the hottest shard's CPU and p99 before and after, from a calibrated service model
    cpu_before: float | None = None
    cpu_after: float | None = None
    p99_before_ms: float | None = None
    p99_after_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "detail": self.detail}
        if self.hottest_before is not None:
            out.update(hottest_before=self.hottest_before, hottest_after=self.hottest_after,
                       unit=self.unit)
        if self.cpu_before is not None:
            out.update(cpu_before=self.cpu_before, cpu_after=self.cpu_after,
                       p99_before_ms=self.p99_before_ms, p99_after_ms=self.p99_after_ms)
        return out


def _sort_key(finding: Finding) -> tuple[int, float]:
    rank = VERDICTS.index(finding.verdict)
    # fits: strongest first; cannot judge: most plausible first; contradicted: closest call first
    return rank, (finding.score if finding.verdict == "contradicted" else -finding.score)


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """Every cause judged, ranked, and the next steps.

    Parameters
    ----------
    production : str
        Label of the observations explained (usually production).
    baseline : str or None
        Label of the load test it is compared with, if one was given.
    ranking : tuple of Finding
        One finding per cause in ``CAUSES``, ranked (see ``Finding.score``).
    recommendations : tuple of Recommendation
        Next steps, most useful first.
    notes : tuple of str
        What the inputs lacked overall, or assumptions made (a typical value used for a
        missing one), so a reader can weigh the verdicts.
    warnings : tuple of str
        What undermines the evidence itself (a run marked ``valid: false``: its latency was
        left out); shown before the ranking.
    when : diagnose.windows.WindowEvidence or None
        The time axis: production's peak window and the profile's predicted one, when the
        evidence has windows or the profile timelines.
    transients : tuple of diagnose.transient.Transient
        Each event the run injected: onset, detection, relief, time above the p99 target.
    """

    production: str
    baseline: str | None
    ranking: tuple[Finding, ...]
    recommendations: tuple[Recommendation, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = field(default_factory=tuple)
    when: Any = None
    transients: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "ranking", tuple(sorted(self.ranking, key=_sort_key)))
        object.__setattr__(self, "recommendations", tuple(self.recommendations))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "warnings", tuple(self.warnings))

    @property
    def top(self) -> Finding:
        return self.ranking[0]

    def finding(self, cause: str) -> Finding:
        """The finding for ``cause`` (a ``CAUSES`` id)."""
        for item in self.ranking:
            if item.cause == cause:
                return item
        raise KeyError(cause)

    def to_dict(self) -> dict[str, Any]:
        return {"production": self.production, "baseline": self.baseline,
                "ranking": [f.to_dict() for f in self.ranking],
                "recommendations": [r.to_dict() for r in self.recommendations],
                "notes": list(self.notes), "warnings": list(self.warnings),
                "when": self.when.to_dict() if self.when is not None else None,
                "transients": [t.to_dict() for t in self.transients]}
