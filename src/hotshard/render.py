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


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2%}"


def profile_summary(summary, source: str) -> str:
    """`hotshard inspect`: the numbers first, then the warnings."""
    s = summary
    lines = [
        f"Profile {source}",
        f"  events           {s.events:,.0f}",
        f"  distinct keys    {s.keys:,.0f}",
        f"  head             {s.head_keys:,} keys carry {_pct(s.head_share)} of events",
        f"  top-1 key        {_pct(s.top1_share)}",
        f"  top-10 keys      {_pct(s.top10_share)}",
        f"  top-1% of keys   {_pct(s.top1pct_share)}"
        + (f" ({s.top1pct_vs_uniform:.1f}x a uniform workload)"
           if s.top1pct_vs_uniform == s.top1pct_vs_uniform else ""),
    ]
    if s.tail_alpha is not None:
        lines.append(f"  tail power law   alpha {s.tail_alpha:.3f} +/- {s.tail_alpha_se:.3f}, "
                     f"xmin {s.tail_xmin:,.0f}, KS {s.tail_ks:.3f} (fit {s.fit_quality})")
    else:
        lines.append(f"  tail power law   {s.fit_quality}")
    for op, d in s.operations.items():
        lines.append(f"  op {op:<13} {d['share']:.1%} of events, {d['keys']:,.0f} keys, "
                     f"top-1 key {d['top1_share']:.2%}")
    if s.rate:
        lines.append(f"  rate             mean {s.rate['mean_rps']:,.1f}/s, "
                     f"p99 {s.rate['p99_rps']:,.0f}/s, peak {s.rate['peak_rps']:,.0f}/s "
                     f"over {s.rate['seconds']:,} s")
    if s.sizes:
        lines.append("  payload sizes    " + ", ".join(
            f"p{float(q) * 100:g} {v:,.0f}" for q, v in s.sizes.items()))
    lines.extend(f"  warning: {w}" for w in s.warnings)
    return "\n".join(lines)


def verify_summary(report, path: str) -> str:
    """`hotshard generate --verify`: one line per check."""
    lines = [f"Verify {path}: {report.events:,} messages"]
    for check in report.checks:
        lines.append(f"  {'PASS' if check.passed else 'FAIL'}  {check.name}: {check.detail}")
    lines.append("  result: " + ("pass" if report.passed else "FAIL"))
    return "\n".join(lines)
