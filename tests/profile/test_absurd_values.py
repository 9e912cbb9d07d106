"""Profiles with absurd values are refused in one line naming the field, before any command
uses them (they used to pass and give wrong output: every row on one key, sizes of -9.2e18,
a tail that got no rows, a traceback in generate)."""

from __future__ import annotations

import copy
import json

import pytest

from hotshard.errors import ProfileError
from hotshard.profile.document import Profile
from tests.conftest import ROOT, run_cli

BASE = json.loads((ROOT / "examples" / "incident.profile.json").read_text())


def _with(change):
    doc = copy.deepcopy(BASE)
    change(doc)
    return doc


def _set_count(doc):
    doc["head"]["counts"][0] = 1e308
    doc["totals"]["events"] = 1e308


def _set_tail(doc):
    doc["tail"]["keys"] = 1e300
    doc["totals"]["keys"] = 1e300


CASES = [
    (_set_count, "must be below 2^63 (a count)"),
    (_set_tail, "1e+300"),
    (lambda d: d.update(sizes={"quantiles": {"0.5": -100, "0.9": 300}}),
     "sizes.quantiles.0.5 must be a number >= 1"),
    (lambda d: d.update(sizes={"quantiles": {"0.5": 120, "0.99": 1e308}}),
     "must be at most 16,777,216 bytes"),
    (lambda d: d.update(sizes={"quantiles": {"0.5": 900, "0.99": 100}}),
     "must not decrease"),
    (lambda d: d.update(sizes={"quantiles": {"half": 10}}), "named by a probability"),
    (lambda d: d.update(rate={"mean_rps": "fast"}), "rate.mean_rps must be a number"),
    (lambda d: d.update(rate={"p99_rps": 5}), "rate.mean_rps is missing"),
    (lambda d: d.update(rate={"mean_rps": 0, "peak_rps": 10}), "rate.mean_rps must be > 0"),
    (lambda d: d["head"]["keys"].__setitem__(0, "9" * 40), "integer beyond 64 bits"),
]


@pytest.mark.parametrize(("change", "said"), CASES)
def test_an_absurd_value_is_refused_naming_its_field(tmp_path, change, said):
    doc = _with(change)
    with pytest.raises(ProfileError) as exc:
        Profile.from_dict(doc)
    assert said in str(exc.value)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    res = run_cli("generate", str(path), "--messages", "1000", "-o", str(tmp_path / "o.parquet"))
    assert res.returncode == 2 and said in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "o.parquet").exists()


def test_a_long_digit_key_is_fine_among_text_keys():
    doc = _with(lambda d: (d["head"]["keys"].__setitem__(0, "9" * 40),
                           d["head"]["keys"].__setitem__(1, "channel-b"),
                           d["source"].pop("key_type", None),
                           d.pop("placement", None)))
    assert Profile.from_dict(doc).head_keys[0] == "9" * 40
