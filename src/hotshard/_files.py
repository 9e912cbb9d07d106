"""Input files: one check, one message, wherever a path enters."""

from __future__ import annotations

import os
from pathlib import Path

from hotshard.errors import HotshardError, InputError

__all__ = ["require_file"]


def require_file(path: str | os.PathLike[str], *, what: str = "file",
                 error: type[HotshardError] = InputError) -> Path:
    """The path as a ``Path`` if it names a readable file; else ``error`` saying what is wrong."""
    p = Path(path)
    if not p.exists():
        raise error(f"no such {what}: {path}")
    if p.is_dir():
        raise error(f"{path} is a directory, not a {what}")
    return p
