"""Text renderings of results for the terminal: calculation lives elsewhere, only words here."""

from __future__ import annotations

from hotshard.profile.fit import PowerLawFit

__all__ = ["fit_summary"]


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
        f"  tail             x >= {fit.xmin:,}: {fit.n_tail:,} observations ({share:.2%}); "
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
    if fit.n_tail < 50:
        lines.append(f"  warning: only {fit.n_tail} tail observations; alpha is uncertain")
    return "\n".join(lines)
