"""The shared field readers (hotshard._validate): one line naming the field, the rule and the
value as JSON, raised as the format's own error."""

from __future__ import annotations

import pytest

from hotshard._validate import Fields, got, show
from hotshard.errors import ObservationsError, ProfileError

F = Fields(ProfileError)
OBS = Fields(ObservationsError, prefix="observations ")


@pytest.mark.parametrize(("value", "text"), [
    (None, "got null"), (True, "got true (a boolean)"), ("7", 'got "7" (a string)'),
    ({"a": 1}, 'got {"a": 1} (an object)'), ([1, 2], "got [1, 2] (a list)"),
    (7, "got 7 (a number)"),
])
def test_got_shows_the_value_as_json_with_its_type(value, text):
    assert got(value) == text


def test_a_long_value_is_cut_short():
    assert show(list(range(100))).endswith("...") and len(show(list(range(100)))) == 40


@pytest.mark.parametrize(("read", "value", "message"), [
    (lambda v: F.number(v, "tail.keys", low=0), "7",
     'tail.keys must be a number >= 0, got "7" (a string)'),
    (lambda v: F.number(v, "tail.power_law.alpha", low=1, strict=True), 1,
     "tail.power_law.alpha must be a number > 1, got 1"),
    (lambda v: F.number(v, "x", low=0), float("nan"),
     "x must be a number >= 0, got NaN (not a finite number)"),
    (lambda v: F.numbers(v, "head.counts", strict=True), [3, 0],
     "head.counts[1] must be a number > 0, got 0"),
    (lambda v: F.count(v, "n"), 2.5, "n must be an integer >= 0, got 2.5"),
    (lambda v: F.count(v, "n"), 2**63, "n must be below 2^63, got 9223372036854775808"),
    (lambda v: F.choice(v, "key_type", ("text", "bigint")), "int",
     'key_type must be "text" or "bigint", got "int" (a string)'),
    (lambda v: F.text(v, "id"), 0, 'id must be a non-empty string such as "0", got 0 (a number)'),
    (lambda v: F.flag(v, "privacy.pseudonymized"), "yes",
     'privacy.pseudonymized must be true or false, got "yes" (a string)'),
])
def test_each_reader_names_the_field_the_rule_and_the_value(read, value, message):
    with pytest.raises(ProfileError) as info:
        read(value)
    assert str(info.value) == message


def test_a_percentage_for_a_fraction_gets_the_hint_and_the_prefix():
    with pytest.raises(ObservationsError) as info:
        OBS.fraction(95, "shards[3].cpu")
    assert str(info.value) == ("observations shards[3].cpu must be a fraction in [0, 1], got 95 "
                               "(write 0.95 for 95%)")


def test_required_says_what_to_add():
    with pytest.raises(ProfileError, match=r"^totals.events is missing: add it \(a number >= 0\)$"):
        F.required({}, "events", "totals", lambda v, p: F.number(v, p, low=0), "a number >= 0")


def test_readers_return_plain_values():
    import numpy as np

    assert type(F.number(np.float64(2.5), "x")) is float
    assert type(F.count(np.int64(3), "x")) is int and F.count(3.0, "x") == 3
    copy = OBS.json_object({"a": [1]}, "extra")
    assert copy == {"a": [1]}


ARRIVALS = {"resolution_s": 60, "counts": [5, 7, 9]}
TIMELINES = {"start": 0, "seconds": 3600, "windows": 2, "counts": [[3, 4], [1, 0]]}


@pytest.mark.parametrize(("section", "doc", "message"), [
    ("arrivals", {**ARRIVALS, "counts": [5, "7", 9]},
     'arrivals.counts[1] must be an integer >= 0, got "7" (a string)'),
    ("arrivals", {**ARRIVALS, "counts": [5, 2**63, 9]}, "arrivals.counts[1] must be below 2^63"),
    ("arrivals", {"counts": [1]}, "arrivals.resolution_s is missing: add it (a number > 0)"),
    ("arrivals", {**ARRIVALS, "idc": {"1": float("inf")}},
     "arrivals.idc.1 must be a number >= 0, got Infinity (not a finite number)"),
    ("arrivals", {**ARRIVALS, "tick_s": -1}, "arrivals.tick_s must be a number > 0, got -1"),
    ("timelines", {**TIMELINES, "counts": [[3, 4], [1]]},
     "timelines.counts[1] must hold 2 counts (windows), got 1"),
    ("timelines", {**TIMELINES, "windows": 0}, "timelines.windows must be an integer >= 1"),
    ("timelines", {**TIMELINES, "seconds": True},
     "timelines.seconds must be a number > 0, got true (a boolean)"),
    ("locality", {"bins_per_octave": 8, "order": "file", "events": -1},
     "locality.events must be an integer >= 0, got -1"),
    ("locality", {"bins_per_octave": 8, "order": "rows", "events": 1},
     'locality.order must be "file" or "time:<column>", got "rows" (a string)'),
])
def test_the_time_sections_read_through_the_same_readers(section, doc, message):
    """The profile's time sections word a bad field as every other section does: its path,
    the rule, the value as JSON (they used to check by hand, each its own way)."""
    from hotshard.profile.arrivals import ArrivalModel
    from hotshard.profile.locality import Locality
    from hotshard.profile.timelines import Timelines

    read = {"arrivals": ArrivalModel, "timelines": Timelines, "locality": Locality}[section]
    with pytest.raises(ProfileError) as caught:
        read.from_dict(doc)
    assert str(caught.value).startswith(message), str(caught.value)
