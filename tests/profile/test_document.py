"""Profile documents: round trip, validation that names the field, scaling."""

import copy
import json

import numpy as np
import pytest

from hotshard.profile.document import FORMAT, Profile, ProfileError


@pytest.fixture(scope="module")
def web07(web07_profile):
    return web07_profile


def test_round_trip_through_a_file(tmp_path, web07):
    path = tmp_path / "p.json"
    web07.save(path)
    again = Profile.load(path)
    assert again.to_dict() == web07.to_dict()
    assert json.loads(path.read_text())["format"] == FORMAT


def broken(web07, edit):
    doc = copy.deepcopy(web07.to_dict())
    edit(doc)
    return doc


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format="hotshard.profile/0"), 'format is "hotshard.profile/0"'),
        (lambda d: d.pop("totals"), "^totals is missing: add it"),
        (lambda d: d["head"]["counts"].__setitem__(3, -5),
         r"head.counts\[3\] must be a number > 0"),
        (lambda d: d["head"]["counts"].reverse(), "most frequent first"),
        (lambda d: d["head"]["keys"].pop(), "500 counts"),
        (lambda d: d["totals"].update(events=1), "totals.events"),
        (lambda d: d["totals"].update(keys=3), "totals.keys"),
        (lambda d: d["tail"]["histogram"]["keys"].__setitem__(0, 0), "tail.histogram holds"),
        (lambda d: d["tail"]["power_law"].update(alpha=0.5), "power_law.alpha must be"),
        (lambda d: d["head"]["keys"].__setitem__(1, d["head"]["keys"][0]), "holds a key twice"),
        (lambda d: d["privacy"].update(min_count=2000), "below privacy.min_count"),
        (lambda d: d.update(operations={"read": {"totals": {}}}), "operations.read"),
    ],
)
def test_validation_names_the_field(web07, edit, message):
    with pytest.raises(ProfileError, match=message):
        Profile.from_dict(broken(web07, edit))


@pytest.mark.parametrize(("content", "message"), [
    ("", "is empty"), ("{not json", "not valid JSON"), ("[1, 2]", "a JSON object")])
def test_load_rejects_non_profiles(tmp_path, content, message):
    path = tmp_path / "p.json"
    path.write_text(content)
    with pytest.raises(ProfileError, match=message):
        Profile.load(path)


def test_a_json_object_that_is_no_profile_says_so_and_how_to_make_one():
    with pytest.raises(ProfileError, match=r"not a hotshard profile \(it has no format field\)"
                                           r".*with hotshard profile"):
        Profile.from_dict({"a": 1})


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (lambda d: d["tail"]["power_law"].pop("alpha"), "tail.power_law.alpha"),
        (lambda d: d["tail"]["power_law"].pop("xmin"), "tail.power_law.xmin"),
        (lambda d: d["totals"].pop("events"), "totals.events"),
        (lambda d: d["tail"].pop("keys"), "tail.keys"),
        (lambda d: d["tail"].pop("histogram"), "tail.histogram"),
        (lambda d: d["head"].pop("counts"), "head.counts"),
        (lambda d: d.pop("source"), "source"),
        (lambda d: d.update(operations={"read": {**d, "totals": {"keys": 1}}}),
         "operations.read.totals.events"),
    ],
)
def test_a_missing_field_is_named_missing_by_its_path(web07, edit, path):
    with pytest.raises(ProfileError) as info:
        Profile.from_dict(broken(web07, edit))
    message = str(info.value)
    assert message.startswith(f"{path} is missing: add it ("), message
    assert "None" not in message


def test_a_missing_power_law_number_offers_the_histogram_alone(web07):
    with pytest.raises(ProfileError, match="or set tail.power_law to null"):
        Profile.from_dict(broken(web07, lambda d: d["tail"]["power_law"].pop("alpha")))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(format=None), "format is null"),
        (lambda d: d["totals"].update(events=None),
         "totals.events must be a number >= 0, got null"),
        (lambda d: d["tail"].update(keys="7"),
         r'tail.keys must be a number >= 0, got "7" \(a string\)'),
        (lambda d: d["tail"]["power_law"].update(alpha=None),
         "tail.power_law.alpha must be a number > 1, got null"),
        (lambda d: d["tail"]["power_law"].update(ks="low"),
         'tail.power_law.ks must be a number >= 0, got "low"'),
        (lambda d: d["tail"]["power_law"].update(n_tail=-1),
         "tail.power_law.n_tail must be a number >= 0, got -1"),
        (lambda d: d["privacy"].update(min_count=None),
         "privacy.min_count must be a number >= 1, got null"),
        (lambda d: d["head"]["counts"].__setitem__(0, None), r"head.counts\[0\] .* got null"),
        (lambda d: d["head"]["keys"].__setitem__(0, 7), r"head.keys\[0\] must be a string, got 7"),
        (lambda d: d.update(source=None), "source must be an object, got null"),
        (lambda d: d.update(operations={"read": None}),
         "operations.read must be an object, got null"),
        (lambda d: d["tail"]["histogram"].update(values=True),
         "tail.histogram.values must be a list of numbers, got true"),
    ],
)
def test_a_null_or_wrong_value_is_shown_as_json_never_none(web07, edit, message):
    with pytest.raises(ProfileError, match=message) as info:
        Profile.from_dict(broken(web07, edit))
    assert "None" not in str(info.value)


def test_optional_power_law_numbers_may_be_absent_or_null(web07):
    def edit(d):
        d["tail"]["power_law"] = {"alpha": 2.5, "xmin": 3, "ks": None}
    assert Profile.from_dict(broken(web07, edit)).tail.power_law["alpha"] == 2.5


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"PAR1\x15\x04\x15", r"is a Parquet file, not a profile \(JSON expected\): .*input for "
                              "hotshard profile"),
        (b"\x1f\x8b\x08\x00", "is gzip-compressed, not a profile"),
        (b"\x00\x01\x02binary", "is a binary file, not a profile"),
        (b"k,n\na,4\n", r"is not a profile \(JSON expected; line 1: Expecting value\): .*CSV"),
        (b'{"k": "a"}\n{"k": "b"}\n', "holds JSON lines .*, not a profile: .*hotshard profile"),
        (b'{"format": "hotshard.pro', "is not valid JSON .*a damaged profile"),
    ],
)
def test_load_says_what_a_file_that_is_no_profile_is(tmp_path, content, message):
    path = tmp_path / "x.data"
    path.write_bytes(content)
    with pytest.raises(ProfileError, match=message):
        Profile.load(path)


def test_load_names_a_real_parquet_table_without_reading_it_whole(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "events.parquet"
    pq.write_table(pa.table({"key": ["a", "b", "a"]}), path)
    with pytest.raises(ProfileError, match="events.parquet is a Parquet file, not a profile"):
        Profile.load(path)


def test_scaled_events_keeps_every_share(web07):
    big = web07.scaled(events=2e9)
    assert big.events == pytest.approx(2e9)
    assert big.keys == web07.keys
    assert big.head_counts / big.events == pytest.approx(web07.head_counts / web07.events)
    assert Profile.from_dict(json.loads(big.to_json())).events == pytest.approx(2e9)


def test_scaled_keys_dilute_the_tail_and_keep_every_head_share(web07):
    more = web07.scaled(keys=10 * web07.keys)
    assert more.keys == pytest.approx(10 * web07.keys)
    assert more.head_keys == web07.head_keys
    # the head keeps its counts and shares; the tail keeps its events over 10x+ the keys
    assert np.array_equal(more.head_counts, web07.head_counts)
    assert more.events == pytest.approx(web07.events)
    assert more.tail.events == pytest.approx(web07.tail.events)
    g = (more.keys - len(more.head_keys)) / web07.tail.keys
    assert more.tail.value_keys == pytest.approx(web07.tail.value_keys * g)
    assert more.tail.values == pytest.approx(web07.tail.values / g)
    both = web07.scaled(events=1e6, keys=1e6)
    assert (both.events, both.keys) == pytest.approx((1e6, 1e6))
    assert both.head_counts / both.events == pytest.approx(web07.head_counts / web07.events)


def test_extend_scaling_grows_the_tail_at_the_same_counts(web07):
    more = web07.scaled(keys=10 * web07.keys, key_scaling="extend")
    assert np.array_equal(more.head_counts, web07.head_counts)
    assert np.array_equal(more.tail.values, web07.tail.values)
    tail_keys = more.tail.value_keys / web07.tail.value_keys
    assert tail_keys == pytest.approx(np.full(tail_keys.size, tail_keys[0]))
    assert more.tail.events == pytest.approx(web07.tail.events * tail_keys[0])
    with pytest.raises(ProfileError, match="key_scaling must be one of dilute, extend"):
        web07.scaled(keys=1e6, key_scaling="stretch")


def test_scaling_rejects_impossible_sizes(web07):
    with pytest.raises(ProfileError, match="at least the 500 head keys"):
        web07.scaled(keys=10)
    with pytest.raises(ProfileError, match="events must be > 0"):
        web07.scaled(events=0)


def test_diluting_into_no_tail_keys_is_refused(web07):
    with pytest.raises(ProfileError, match="more than the 500 head keys"):
        web07.scaled(keys=500)
    assert web07.scaled(keys=500, key_scaling="extend").tail.events == 0
