"""Reading a JSON document field by field, one way for every format hotshard reads.

Profiles (``hotshard.profile/1``) and observations (``hotshard.observations/1``) are written by
hotshard and by hand, so a bad value must come back as one line a user can act on: the field's
path, the rule, and the value as it is written in JSON, e.g. ``tail.keys must be a number >= 0,
got "7" (a string)``. Observations and the profile's distributions, sizes and rate read their
fields with these typed readers, so a rule is worded, and a value shown, the same way; so do
the profile's time sections (``locality``, ``arrivals``, ``timelines``), whose modules keep only
the rules that span their fields (a cascade's levels meeting end to start).

Why readers and not a JSON Schema validator at run time: no dependency, fast on a profile's
long count lists, hints a schema cannot give ("write 0.95 for 95%"), and the checks that span
fields (head counts + tail events = totals) sit beside the field checks they follow. The
published schemas (``hotshard/schemas/*.schema.json``) state the same per-field rules for other
tools; ``tests/test_schemas.py`` keeps the schemas and these readers in step.

At the bottom layer: the standard library and hotshard's errors only.
"""

from __future__ import annotations

import copy
import json
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["Fields", "at", "got", "item", "kind", "number_rule", "show"]

MAX_INT = 2**63  # counts are 64-bit integers wherever they are used


def show(value: Any) -> str:
    """The value as it is written in JSON (``null``, ``true``, ``"7"``), cut short."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def kind(value: Any) -> str:
    """The value's JSON type in words: ``a string``, ``an object``, ``null``..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, numbers.Real):
        return "a number"
    return f"a {type(value).__name__}"


def got(value: Any, *, numeric: bool = False) -> str:
    """``got <value> (<its JSON type>)``: the type is left out for null, and for a number when
    a number was expected (then the range was the problem, not the type)."""
    k = kind(value)
    plain = value is None or (numeric and k == "a number")
    return f"got {show(value)}" + ("" if plain else f" ({k})")


def at(where: str, name: str) -> str:
    """The path of field ``name`` inside ``where`` (``tail`` + ``keys`` -> ``tail.keys``)."""
    return f"{where}.{name}" if where else name


def item(where: str, i: int) -> str:
    """The path of list item ``i`` (``head.counts[3]``)."""
    return f"{where}[{i}]"


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class Fields:
    """The typed readers of one format. Each reader takes ``(value, path)`` and returns the
    plain Python value, or raises ``error`` with one line: ``prefix``, the path, the rule and
    the value shown as JSON.

    Parameters
    ----------
    error : type of Exception
        The format's error (``ProfileError``, ``ObservationsError``): a ``HotshardError``, so
        the CLI prints the line and exits 2.
    prefix : str
        Put before every path, naming the format when a message could be about either
        (``"observations "``); empty for profiles, whose loader prefixes the file's path.
    """

    def __init__(self, error: Callable[[str], Exception], prefix: str = "") -> None:
        self.error = error
        self.prefix = prefix

    # -- messages ----------------------------------------------------------------------------
    def fail(self, path: str, text: str) -> Exception:
        """The error for ``path`` breaking a rule, ``text`` saying how."""
        return self.error(f"{self.prefix}{path} {text}".rstrip())

    def wrong(self, path: str, rule: str, value: Any, *, numeric: bool = False,
              hint: str = "") -> Exception:
        """``<path> must be <rule>, got <value> (<type>)<hint>``."""
        return self.fail(path, f"must be {rule}, {got(value, numeric=numeric)}{hint}")

    def missing(self, path: str, hint: str) -> Exception:
        """``<path> is missing: <hint>`` (the hint says what to add, or what it is for)."""
        return self.fail(path, f"is missing: {hint}")

    def required(self, doc: Mapping[str, Any], key: str, where: str,
                 read: Callable[[Any, str], Any], rule: str) -> Any:
        """``doc[key]`` read by ``read``; missing says ``add it (<rule>)``."""
        path = at(where, key)
        if key not in doc:
            raise self.missing(path, f"add it ({rule})")
        return read(doc[key], path)

    # -- numbers -----------------------------------------------------------------------------
    def real(self, value: Any, path: str, rule: str = "a number") -> int | float:
        """A finite real number as a builtin int or float; a boolean is not a number here."""
        if not _is_real(value):
            raise self.wrong(path, rule, value, numeric=True)
        if isinstance(value, numbers.Integral):
            return int(value)
        x = float(value)
        if not math.isfinite(x):
            raise self.fail(path, f"must be {rule}, got {show(x)} (not a finite number)")
        return x

    def number(self, value: Any, path: str, *, low: float | None = None,
               strict: bool = False) -> int | float:
        """A finite number, ``>= low`` (``> low`` when ``strict``) when ``low`` is given."""
        rule = number_rule(low, strict)
        x = self.real(value, path, rule)
        if low is not None and (x < low or (strict and x == low)):
            raise self.wrong(path, rule, x, numeric=True)
        return x

    def nonneg(self, value: Any, path: str) -> int | float:
        return self.number(value, path, low=0)

    def positive(self, value: Any, path: str) -> int | float:
        return self.number(value, path, low=0, strict=True)

    def fraction(self, value: Any, path: str) -> int | float:
        """A number in [0, 1]; a value in (1, 100] is taken for a percentage and says so."""
        rule = "a fraction in [0, 1]"
        x = self.real(value, path, rule)
        if not 0 <= x <= 1:
            hint = f" (write {x / 100:g} for {x:g}%)" if 1 < x <= 100 else ""
            raise self.wrong(path, rule, x, numeric=True, hint=hint)
        return x

    def count(self, value: Any, path: str) -> int:
        """A whole number >= 0 below 2^63 (``3.0`` is read as 3)."""
        rule = "an integer >= 0"
        x = self.real(value, path, rule)
        if isinstance(x, float):
            if not x.is_integer():
                raise self.wrong(path, rule, x, numeric=True)
            x = int(x)
        if x < 0:
            raise self.wrong(path, rule, x, numeric=True)
        if x >= MAX_INT:
            raise self.fail(path, f"must be below 2^63, got {show(x)}")
        return x

    def numbers(self, value: Any, path: str, *, low: float = 0,
                strict: bool = False) -> list[float]:
        """A list of finite numbers ``>= low`` (``> low`` when ``strict``); a bad item is named
        by its index (``head.counts[3] must be a number > 0, got -5``)."""
        if not isinstance(value, list):
            raise self.wrong(path, "a list of numbers", value)
        for i, v in enumerate(value):
            if not _is_real(v) or not math.isfinite(v) or v < low or (strict and v == low):
                self.number(v, item(path, i), low=low, strict=strict)
        return value

    def integers(self, value: Any, path: str, *, nonempty: bool = False) -> list[int]:
        """A list of whole numbers >= 0 below 2^63 (a count list: an arrival histogram, a
        timeline), checked in one pass; a bad item is named by its index."""
        if not isinstance(value, list) or (nonempty and not value):
            raise self.wrong(path, "a non-empty list of integers >= 0" if nonempty
                             else "a list of integers >= 0", value)
        if all(type(v) is int and 0 <= v < MAX_INT for v in value):
            return value
        return [self.count(v, item(path, i)) for i, v in enumerate(value)]

    # -- other values ------------------------------------------------------------------------
    def text(self, value: Any, path: str) -> str:
        """A non-empty string; a number gets the hint to quote it."""
        if not isinstance(value, str) or not value.strip():
            hint = f' such as "{value}"' if _is_real(value) else ""
            raise self.wrong(path, f"a non-empty string{hint}", value)
        return value

    def string(self, value: Any, path: str) -> str:
        """Any string (empty too)."""
        if not isinstance(value, str):
            raise self.wrong(path, "a string", value)
        return value

    def choice(self, value: Any, path: str, options: Sequence[str], *,
               nullable: bool = False) -> str:
        """One of ``options``, named as JSON strings in the message."""
        if not isinstance(value, str) or value not in options:
            names = [json.dumps(o) for o in options] + (["null"] if nullable else [])
            rule = " or ".join(names) if len(names) < 3 else \
                ", ".join(names[:-1]) + " or " + names[-1]
            raise self.wrong(path, rule, value)
        return value

    def flag(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.wrong(path, "true or false", value)
        return value

    def mapping(self, value: Any, path: str, rule: str = "an object") -> Mapping[str, Any]:
        """An object, as it is (no copy)."""
        if not isinstance(value, Mapping):
            raise self.wrong(path, rule, value)
        return value

    def array(self, value: Any, path: str, rule: str = "a list") -> list[Any]:
        """A list, as it is (no copy)."""
        if not isinstance(value, list):
            raise self.wrong(path, rule, value)
        return value

    def json_object(self, value: Any, path: str) -> dict[str, Any]:
        """A private deep copy of an object of plain JSON values (a frozen owner stays
        frozen; a later ``json.dumps`` cannot fail)."""
        self.mapping(value, path)
        for key, v in value.items():
            if not isinstance(key, str):
                raise self.fail(path, f"keys must be strings, got {show(key)} ({kind(key)})")
            try:
                json.dumps(v, allow_nan=False)
            except (TypeError, ValueError):
                raise self.fail(at(path, key), "must be plain JSON (strings, finite numbers, "
                                               f"lists, objects), got {show(v)}") from None
        return copy.deepcopy(dict(value))


def number_rule(low: float | None = None, strict: bool = False) -> str:
    """How ``Fields.number`` words its rule: ``a number``, ``a number >= 0``, ``a number > 1``."""
    if low is None:
        return "a number"
    bound = int(low) if float(low).is_integer() else low
    return f"a number {'>' if strict else '>='} {bound}"
