"""`hotshard demo`: the end-to-end story so far, on embedded defaults (no input files).

It synthesises per-channel message counts for a live-streaming chat service from a heavy-tailed
law (a few channels carry much of the traffic, as in the incident), profiles the head, fits the
tail exactly as `hotshard fit` does, and contrasts it with what uniform keys would look like.
"""

from __future__ import annotations

import numpy as np

from hotshard.profile.fit import fit_power_law
from hotshard.profile.powerlaw import DiscretePowerLaw
from hotshard.render import fit_summary

__all__ = ["run_demo"]

# Embedded defaults: 200,000 channels; per-channel message counts ~ discrete power law.
DEMO_CHANNELS = 200_000
DEMO_ALPHA = 2.1  # the top 1% of channels then carry about half the traffic
DEMO_XMIN = 1


def _shares(counts: np.ndarray) -> tuple[float, float, float]:
    ordered = np.sort(counts)[::-1]
    total = ordered.sum()
    top1 = ordered[0] / total
    top1pct = ordered[: max(1, ordered.size // 100)].sum() / total
    return float(top1), float(top1pct), float(total)


def run_demo(seed: int = 2026) -> str:
    """Build the demo's report text (computed, never canned) for the given seed."""
    rng = np.random.default_rng(seed)
    law = DiscretePowerLaw(DEMO_ALPHA, DEMO_XMIN)
    counts = law.rvs(DEMO_CHANNELS, rng=rng)
    top1, top1pct, total = _shares(counts)
    uniform = rng.multinomial(int(total), np.full(DEMO_CHANNELS, 1.0 / DEMO_CHANNELS))
    u_top1, u_top1pct, _ = _shares(uniform)
    fit = fit_power_law(counts)
    agree = abs(fit.alpha - DEMO_ALPHA) <= 3 * fit.alpha_se
    lines = [
        "hotshard demo: why uniform keys hide hot shards",
        "",
        f"Synthetic production: {DEMO_CHANNELS:,} chat channels, {int(total):,} messages "
        f"(per-channel counts ~ discrete power law, alpha {DEMO_ALPHA}, seed {seed}).",
        "",
        f"{'':28}{'production keys':>18}{'uniform keys':>16}",
        f"{'busiest channel share':28}{top1:>18.3%}{u_top1:>16.4%}",
        f"{'top 1% of channels share':28}{top1pct:>18.1%}{u_top1pct:>16.1%}",
        "",
        "A load test with uniform keys spreads these messages evenly; production sends "
        f"{top1:.1%} of all traffic to one channel, and so to one shard.",
        "",
        fit_summary(fit, "the synthetic per-channel counts"),
        "",
        f"The fit {'recovers' if agree else 'does NOT recover'} the true alpha {DEMO_ALPHA} "
        f"within 3 standard errors ({fit.alpha:.3f} +/- {fit.alpha_se:.3f}).",
        "Next: `hotshard fit YOUR_COUNTS.txt --bootstrap 2500` on your own per-key counts.",
    ]
    return "\n".join(lines)
