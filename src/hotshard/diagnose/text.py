"""The diagnosis as text for a terminal: the ranking first, then the evidence, then next steps."""

from __future__ import annotations

import textwrap

from hotshard.diagnose.findings import Diagnosis

__all__ = ["diagnosis_text"]

_MARK = {"fits": "FITS", "cannot judge": "CANNOT JUDGE", "contradicted": "contradicted"}


def _wrap(text: str, indent: str, width: int) -> list[str]:
    return textwrap.wrap(text, width=width, initial_indent=indent,
                         subsequent_indent=indent + "  ") or [indent]


def diagnosis_text(diagnosis: Diagnosis, *, width: int = 100) -> str:
    """Ranked causes with verdict and score, each with its evidence sentences, then the next
    steps and the notes on what the inputs lacked."""
    against = f" against {diagnosis.baseline!r}" if diagnosis.baseline else ""
    lines = [f"Diagnosis of {diagnosis.production!r}{against}"]
    for warning in diagnosis.warnings:
        lines.extend(_wrap("WARNING: " + warning, "", width))
    if diagnosis.when is not None:
        lines.append("")
        lines.append("When:")
        for sentence in diagnosis.when.sentences:
            lines.extend(_wrap("- " + sentence, "  ", width))
    if diagnosis.transients:
        from hotshard.diagnose.transient import transient_lines

        lines += ["", "Transient (onset, detection, relief):"]
        for t in diagnosis.transients:
            for line in transient_lines(t):
                body = line.lstrip(" ")
                lines.extend(_wrap(body, "  " + " " * (len(line) - len(body)), width))
    lines.append("")
    for rank, f in enumerate(diagnosis.ranking, 1):
        lines.append(f"{rank}. {f.cause:<21} {_MARK[f.verdict]:<13} score {f.score:.2f}  "
                     f"{f.title}")
        for sentence in f.evidence:
            lines.extend(_wrap("- " + sentence, "     ", width))
        if f.missing:
            lines.extend(_wrap("- missing: " + "; ".join(f.missing), "     ", width))
    if diagnosis.recommendations:
        lines += ["", "Next steps:"]
        for r in diagnosis.recommendations:
            lines.extend(_wrap(f"- {r.action}: {r.detail}", "  ", width))
    if diagnosis.notes:
        lines += ["", "Notes:"]
        for note in diagnosis.notes:
            lines.extend(_wrap("- " + note, "  ", width))
    return "\n".join(lines)
