"""The one error hierarchy of hotshard.

Every user mistake (missing file, bad value, malformed input) raises a ``HotshardError``; the CLI
turns it into one line ``hotshard: error: ...`` and exit status 2. Subclasses also inherit the
nearest builtin so library callers can catch them the usual way.
"""

from __future__ import annotations

__all__ = ["FitError", "HotshardError", "InputError", "ObservationsError", "ProfileError"]


class HotshardError(Exception):
    """Base of every error hotshard raises on purpose; the message says what to do."""


class InputError(HotshardError, ValueError):
    """Input data or an argument is missing, malformed or out of range."""


class FitError(HotshardError, ValueError):
    """The data cannot support the requested fit (too few tail points, all values equal...)."""


class ProfileError(HotshardError, ValueError):
    """A profile file is malformed or inconsistent; the message names the field."""


class ObservationsError(HotshardError, ValueError):
    """An observations document is malformed; the message names the field path and the rule."""
