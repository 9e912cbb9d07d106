"""One Mitigations type: one meaning and one validation per field, for every command."""

from __future__ import annotations

import pytest

from hotshard.errors import InputError
from hotshard.mitigations import MODEL_FIELDS, Mitigations


def test_off_by_default():
    m = Mitigations()
    assert not m.active and not m.splits and m.text() == "no mitigation"
    assert m.replicas == 1  # the primary alone: no replica


@pytest.mark.parametrize(("changes", "message"), [
    ({"replicas": 0}, r"primary included, so it must be >= 1 \(1: no replica\), got 0"),
    ({"split_into": 0}, r"split_into must be >= 1 \(1: no split\)"),
    ({"split_keys": -1}, "split_keys must be >= 0"),
    ({"cache_hit": 1.5}, r"cache_hit must be a fraction in \[0, 1\], got 1.5"),
    ({"cache_ttl_s": 4000.0}, "cache_ttl_s must be 0 .off. to 3600 seconds"),
    ({"coalesce": 0.7}, "coalesce is on or off .* an outcome, not a setting"),
    ({"hot_keys": 0}, "hot_keys must be >= 1"),
    ({"hot_share": 0.0}, r"hot_share must be in \(0, 1\]"),
    ({"replicas": 2.5}, "replicas must be a whole number"),
    ({"channels": (1, 2)}, "channels must be channel ids"),
])
def test_one_validation_names_the_field_and_the_rule(changes, message):
    with pytest.raises(InputError, match=message):
        Mitigations(**changes)


def test_each_field_in_words():
    m = Mitigations(split_keys=10, split_into=8, replicas=3, cache_hit=0.5, coalesce=True)
    assert m.phrases() == [
        "top 10 keys split into 8 time-bucket sub-partitions",
        "reads spread over 3 replicas per shard (the primary and 2 more)",
        "50% of the top 10 keys' reads hit a local cache",
        "identical in-flight reads coalesced"]
    service = Mitigations(split_into=4, cache_ttl_s=1.0)
    assert service.text() == ("hot keys split into 4 time-bucket sub-partitions; hot keys' reads "
                              "cached for 1 s")


def test_a_consumer_refuses_the_fields_it_does_not_run():
    m = Mitigations(replicas=2, cache_ttl_s=1.0)
    assert m.only(("replicas", "cache_ttl_s"), "x") is m
    with pytest.raises(InputError, match="cache_ttl_s does not apply to predict; it takes "
                                         "split_keys, split_into"):
        m.only(MODEL_FIELDS, "predict")


def test_json_changes_are_checked_field_by_field():
    m = Mitigations().updated({"replicas": 3.0, "coalesce": True, "channels": ["a", "b"]})
    assert (m.replicas, m.coalesce, m.channels) == (3, True, ("a", "b"))
    assert m.updated({"channels": "hot"}).channels is None
    with pytest.raises(InputError, match="unknown mitigation field.s. split; known: "
                                         "split_into"):
        m.updated({"split": 4}, names=("split_into",))
    with pytest.raises(InputError, match="replicas must be a number, got True"):
        m.updated({"replicas": True})
    with pytest.raises(InputError, match='channels must be "hot"'):
        m.updated({"channels": "all"})
    with pytest.raises(InputError, match="must be a JSON object"):
        m.updated([1])  # type: ignore[arg-type]


def test_one_vocabulary_in_every_record():
    m = Mitigations(split_keys=10, split_into=8, replicas=2, coalesce=True)
    model = m.to_dict(MODEL_FIELDS)
    assert model == {"split_hot": "10:8", "split_keys": 10, "split_into": 8, "replicas": 2,
                     "cache_hit": 0.0, "coalesce": True, "hot_keys": 10}
    full = m.to_dict()
    assert full["channels"] == "hot" and set(full) - {"split_hot"} == {
        "split_keys", "split_into", "split_bucket_ms", "replicas", "cache_hit", "cache_ttl_s",
        "coalesce", "hot_keys", "channels", "hot_share"}
    assert Mitigations().updated({k: v for k, v in full.items()
                                  if k != "split_hot"}) == m  # a record reads back


@pytest.mark.parametrize(("flag", "value"), [("--split-into", "0"), ("--split-into", "65"),
                                             ("--replicas", "10"), ("--replicas", "0")])
def test_serve_refuses_a_mitigation_past_the_service_limits(tmp_path, flag, value):
    """One definition of the service's limits (``hotshard.mitigations``): serve's flags refuse
    what the admin route and ``for_service`` refuse (--split 0 was taken as 1, silently)."""
    from tests.conftest import run_cli

    res = run_cli("serve", "--data", str(tmp_path / "d"), flag, value)
    assert res.returncode == 2 and f"'{flag}'" in res.stderr, res.stderr
    assert not (tmp_path / "d").exists()
