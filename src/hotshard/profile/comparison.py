"""The result of testing the power law against one alternative (``fit.compare``'s unit).

Its own module: ``fit`` holds these in a ``PowerLawFit`` and ``alternatives`` makes them, and
neither should import the other to name the type (``alternatives`` pulls in scipy).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Comparison"]


@dataclass(frozen=True)
class Comparison:
    """Vuong likelihood-ratio test of the power law against one alternative on the same tail.

    ``R`` > 0 favours the power law. ``normalized_R`` is R / (sigma sqrt(n)); ``p_value`` is the
    probability of a |normalized R| this large if both fit equally well (for the nested
    truncated power law, the chi-square test of CSN Appendix C instead).

    ``degenerate`` is set when the alternative's best fit is not a member of its family but its
    power-law limit (a lognormal with mu -> -inf, sigma -> inf): ``parameters`` then holds the
    limit's exponent (``limit_alpha``), not a (mu, sigma), ``note`` says so, and the test can at
    most favour the power law, never the "alternative", which is itself a power law.
    """

    alternative: str
    R: float
    normalized_R: float
    p_value: float
    parameters: dict[str, float]
    nested: bool
    degenerate: bool = False
    note: str | None = None

    @property
    def favours(self) -> str:
        if self.p_value > 0.1:
            return "neither"
        if self.R > 0:
            return "power_law"
        return "neither" if self.degenerate else self.alternative
