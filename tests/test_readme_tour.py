"""The README's 5-minute tour names only files a new user has: each file a command reads is in
the checkout (or ../shared/data), or made by an earlier command of the tour (its ``-o``), or
sits in a block the tour marks as placeholders for the user's own data."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# what a file argument looks like in the tour: a path with one of these endings
FILE = re.compile(r"\.(json|parquet|csv|tsv|txt|hist|hlog|png|html)$")


def _tour() -> list[tuple[str, bool]]:
    """(command, under a placeholder marker) for each command of the tour's first block."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## A 5-minute tour", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands, placeholder, pending = [], False, ""
    for raw in block.splitlines():
        line = raw.strip()
        if line.startswith("#"):   # a comment opens a paragraph, marked or not
            placeholder = "placeholder" in line
            continue
        if not line:
            placeholder = False
            continue
        pending += line.split("  #", 1)[0].rstrip("\\").strip() + " "
        if not line.endswith("\\"):
            commands.append((pending.strip(), placeholder))
            pending = ""
    return commands


def test_every_file_the_tour_reads_exists_or_is_made_by_it_or_is_marked_yours():
    made: set[str] = set()
    missing = []
    commands = _tour()
    assert len(commands) > 10   # the block was found and read
    for command, placeholder in commands:
        words = shlex.split(command)
        outputs = {words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-o", "--plot")}
        for word in words[1:]:
            if word in outputs or not FILE.search(word) or placeholder:
                continue
            if word not in made and not (ROOT / word).exists():
                missing.append(f"{command!r} reads {word}")
        made |= outputs
    assert not missing, missing
