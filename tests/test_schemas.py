"""The published JSON Schemas (src/hotshard/schemas) say what hotshard's validators do.

Three checks keep them honest: every document hotshard ships or writes is valid under its
schema; every field the schema constrains, broken (removed when required, given the wrong
type, pushed out of range), is refused by the schema *and* by hotshard, whose one-line message
names the field; and where the schema allows null (the field counts as absent), hotshard
reads the document too.

jsonschema is not a dependency: the schemas use a small set of draft 2020-12 keywords, checked
here by ``_errors`` (and by jsonschema as well when it is installed).
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import re
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from hotshard.errors import ObservationsError, ProfileError
from hotshard.observations import Observations
from hotshard.profile.document import Profile

ROOT = Path(__file__).resolve().parents[1]
DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _schema(name: str) -> dict:
    return json.loads((resources.files("hotshard") / "schemas" / f"{name}.schema.json")
                      .read_text(encoding="utf-8"))


SCHEMAS = {"observations": _schema("observations"), "profile": _schema("profile")}
READERS = {"observations": (Observations.from_dict, ObservationsError),
           "profile": (Profile.from_dict, ProfileError)}


# -- a draft 2020-12 validator for the keywords the schemas use -----------------------------------
_ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description"}
_KEYWORDS = {"type", "const", "enum", "required", "properties", "additionalProperties", "items",
             "prefixItems", "minItems", "maxItems", "minimum", "maximum", "exclusiveMinimum",
             "exclusiveMaximum", "minLength", "pattern", "uniqueItems", "$ref", "anyOf"}


def _is_type(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if name == "number":
        return number
    if name == "integer":  # 2020-12: any number with a zero fractional part
        return number and math.isfinite(value) and float(value).is_integer()
    raise AssertionError(f"unknown type {name}")


def _resolve(root: dict, ref: str) -> dict:
    assert ref.startswith("#/$defs/"), ref
    return root["$defs"][ref.removeprefix("#/$defs/")]


def _errors(value: Any, schema: dict, root: dict, path: str = "") -> Iterator[str]:
    """Every violation of ``schema`` by ``value``, each as 'path: keyword'."""
    unknown = set(schema) - _KEYWORDS - _ANNOTATIONS
    assert not unknown, f"the test's validator does not know {unknown}"
    if "$ref" in schema:
        yield from _errors(value, _resolve(root, schema["$ref"]), root, path)
    if "anyOf" in schema and not any(_valid(value, s, root) for s in schema["anyOf"]):
        yield f"{path}: anyOf"
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, t) for t in types):
            yield f"{path}: type"
            return
    if "const" in schema and value != schema["const"]:
        yield f"{path}: const"
    if "enum" in schema and value not in schema["enum"]:
        yield f"{path}: enum"
    if _is_type(value, "number"):
        for key, bad in (("minimum", lambda b: value < b), ("maximum", lambda b: value > b),
                         ("exclusiveMinimum", lambda b: value <= b),
                         ("exclusiveMaximum", lambda b: value >= b)):
            if key in schema and bad(schema[key]):
                yield f"{path}: {key}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            yield f"{path}: minLength"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            yield f"{path}: pattern"
    if isinstance(value, dict):
        for name in schema.get("required", ()):
            if name not in value:
                yield f"{path}: required {name}"
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            where = f"{path}.{name}" if path else name
            if name in props:
                yield from _errors(item, props[name], root, where)
            elif extra is False:
                yield f"{where}: additionalProperties"
            elif isinstance(extra, dict):
                yield from _errors(item, extra, root, where)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            yield f"{path}: minItems"
        if len(value) > schema.get("maxItems", math.inf):
            yield f"{path}: maxItems"
        if schema.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in value}) \
                < len(value):
            yield f"{path}: uniqueItems"
        prefix = schema.get("prefixItems", [])
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else schema.get("items")
            if sub is not None:
                yield from _errors(item, sub, root, f"{path}[{i}]")


def _valid(value: Any, schema: dict, root: dict) -> bool:
    """No violation at all: stops at the first one (the rest are not needed to say no)."""
    return next(_errors(value, schema, root), None) is None


def _schema_errors(doc: Any, kind: str, *, first_only: bool = False) -> list[str]:
    """The violations of the kind's schema by ``doc`` (only the first with ``first_only``,
    enough to know that it is refused: a walk of the whole document per mutation is most of
    test_a_field_the_schema_refuses_hotshard_refuses_naming_it's time)."""
    schema = SCHEMAS[kind]
    errors = _errors(doc, schema, schema)
    found = list(itertools.islice(errors, 1)) if first_only else list(errors)
    try:
        import jsonschema
    except ImportError:
        return found
    real = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    assert bool(real) == bool(found), (real, found)
    return found


# -- the documents ---------------------------------------------------------------------------------
def _format_of(doc: Any) -> str | None:
    fmt = doc.get("format", "") if isinstance(doc, dict) else ""
    return {"hotshard.profile/1": "profile", "hotshard.observations/1": "observations"}.get(fmt)


def _shipped() -> list[tuple[str, str]]:
    """(format, path) of every profile or observations file in the repository."""
    found = []
    for path in sorted([*ROOT.glob("examples/*.json"), *ROOT.glob("src/hotshard/data/*.json")]):
        kind = _format_of(json.loads(path.read_text(encoding="utf-8")))
        if kind is not None:
            found.append((kind, str(path.relative_to(ROOT))))
    return found


def _full_observations() -> dict:
    """An observations document with every field the format knows, as drive writes them."""
    latency = {"min": 0.4, "p50": 5, "p75": 7, "p90": 9, "p95": 11, "p99": 40, "p999": 90,
               "p9999": 120, "max": 300, "mean": 6.5}
    return Observations.from_dict({
        "format": "hotshard.observations/1", "label": "load test", "rate_rps": 5000,
        "achieved_rps": 4990.5, "duration_s": 60, "model": "open", "key_generator": "profile",
        "latency_ms": latency, "service_time_ms": {"p50": 4, "p99": 30},
        "shards": [{"id": "0", "node": "127.0.0.1:7000", "cpu": 0.95, "requests": 120000,
                    "rate_rps": 2000, "p50_ms": 5, "p99_ms": 80, "cache_hit_rate": 0.2,
                    "queue_depth": 3.5, "errors": 12, "error_kinds": {"timeout": 12}},
                   {"id": "1", "cpu": 0.3, "requests": 40000}],
        "cache_hit_rate": 0.25, "payload_bytes_mean": 180, "distinct_keys": 9000,
        "network": {"cross_zone_rtt_ms": 0.8, "zones": 3},
        "errors": {"share": 0.004, "max_error_rate": 0.01, "attempted": 300000, "failed": 1200,
                   "dropped": 3, "unfinished": 1, "unattributed": 0,
                   "by_kind": {"timeout": 1000, "http 503": 200}, "latency_ms": {"p99": 5000}},
        "valid": True, "drive": {"partitioner": "kafka"},
    }).to_dict()


@pytest.fixture(scope="module")
def simulated() -> dict:
    """Observations as simulate writes them, from the packaged incident profile."""
    from hotshard.sim.arrivals import PoissonArrivals
    from hotshard.sim.service_times import Exponential
    from hotshard.sim.system import ServiceModel, simulate
    from hotshard.workload.profile_sampler import from_profile

    profile = Profile.load(ROOT / "src" / "hotshard" / "data" / "incident.profile.json")
    model = ServiceModel(shards=8, partitioner="kafka", service=Exponential(0.004),
                         arrivals=PoissonArrivals())
    return simulate(from_profile(profile), rps=500, duration=20, model=model,
                    rng=1).to_observations().to_dict()


@pytest.fixture(scope="module")
def counted(tmp_path_factory) -> dict:
    """A profile as `hotshard profile` writes it with every section: operations, sizes,
    rates, locality, arrivals, timelines and a placement."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hotshard.profile.count import count_profile
    from hotshard.shards.partitioners import make_partitioner

    rng = np.random.default_rng(7)
    n = 20_000
    keys = rng.zipf(1.6, n) % 3000
    path = tmp_path_factory.mktemp("events") / "events.parquet"
    pq.write_table(pa.table({"key": keys.astype(str), "op": np.where(rng.random(n) < 0.9,
                                                                       "read", "write"),
                             "size": rng.integers(10, 500, n),
                             "ts": np.sort(rng.uniform(0, 3600, n))}), path)
    profile = count_profile([str(path)], key="key", op="op", size="size", time_col="ts",
                            top_k=50, placements=[make_partitioner("kafka", 8)])
    return profile.to_dict()


def _produced(request) -> dict[str, dict]:
    return {"observations (full)": ("observations", _full_observations()),
            "observations (simulate)": ("observations", request.getfixturevalue("simulated")),
            "profile (count)": ("profile", request.getfixturevalue("counted"))}


# -- every document hotshard ships or writes is valid ---------------------------------------------
@pytest.mark.parametrize("name", SCHEMAS)
def test_each_schema_is_draft_2020_12_and_uses_known_keywords(name):
    schema = SCHEMAS[name]
    assert schema["$schema"] == DIALECT
    assert schema["properties"]["format"]["const"] == f"hotshard.{name}/1"
    list(_errors({}, schema, schema))  # walks the root; each $def is walked below
    for sub in schema.get("$defs", {}).values():
        list(_errors(None, sub, schema))
    try:
        import jsonschema
    except ImportError:
        return
    jsonschema.Draft202012Validator.check_schema(schema)


def test_the_repository_ships_both_formats():
    assert {kind for kind, _ in _shipped()} == {"profile", "observations"}


@pytest.mark.parametrize(("kind", "path"), _shipped())
def test_shipped_documents_are_valid(kind, path):
    doc = json.loads((ROOT / path).read_text(encoding="utf-8"))
    assert _schema_errors(doc, kind) == []
    READERS[kind][0](doc)


@pytest.mark.parametrize("name", ["observations (full)", "observations (simulate)",
                                  "profile (count)"])
def test_documents_the_code_writes_are_valid(request, name):
    kind, doc = _produced(request)[name]
    assert _schema_errors(doc, kind) == []
    if kind == "profile":
        assert {"operations", "placement", "locality", "arrivals", "timelines"} <= set(doc)


# -- the schema and hotshard refuse the same broken fields -----------------------------------------
# Sections whose parsers (profile/locality.py, arrivals.py, timelines.py) still word their own
# messages: a broken field there must be refused, and the message must name the section.
_SECTION_ONLY = ("locality", "arrivals", "timelines")
# the nearest value each bound refuses
_OUT_OF_RANGE = {"minimum": lambda b: b - 1, "exclusiveMinimum": lambda b: b,
                 "maximum": lambda b: b + 1, "exclusiveMaximum": lambda b: b}


Path = tuple[str | int, ...]  # keys and list indexes from the document's root


def _show_path(path: Path) -> str:
    """How hotshard names a field: ``a.b[0].c``."""
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else f".{key}" if out else key
    return out


# a value of each JSON type but null (null is absent: tested on its own)
_WRONG_TYPES = ({"an": "object"}, "7", 7, True, [1])


_DELETE = object()


def _mutations(schema: dict, root: dict, doc: Any, path: Path = ()
               ) -> Iterator[tuple[str, Path, Any]]:
    """(what, field path, value to put there) for every constrained field in ``doc``."""
    if "$ref" in schema:
        yield from _mutations(_resolve(root, schema["$ref"]), root, doc, path)
        return
    for sub in schema.get("anyOf", ()):
        if not list(_errors(doc, sub, root)):
            yield from _mutations(sub, root, doc, path)
            return
    if isinstance(doc, dict):
        for name in schema.get("required", ()):
            if name in doc:
                yield f"remove required {name}", (*path, name), _DELETE
        for name, sub in schema.get("properties", {}).items():
            if name in doc:
                yield from _field_mutations(sub, root, doc[name], (*path, name))
        extra = schema.get("additionalProperties")
        if extra is False:
            yield "add an unknown field", (*path, "p42"), 1.0
        elif isinstance(extra, dict):
            for name, value in list(doc.items())[:1]:
                yield from _field_mutations(extra, root, value, (*path, name))
    if isinstance(doc, list) and doc:
        sub = (schema.get("prefixItems") or [None])[0] or schema.get("items")
        if sub is not None:
            yield from _field_mutations(sub, root, doc[0], (*path, 0))


def _field_mutations(schema: dict, root: dict, value: Any, path: Path
                     ) -> Iterator[tuple[str, Path, Any]]:
    flat = _resolve(root, schema["$ref"]) if "$ref" in schema else schema
    for wrong in _WRONG_TYPES:
        if list(_errors(wrong, schema, root)):
            yield f"wrong type {json.dumps(wrong)}", path, wrong
    types = flat.get("type", [])
    if "integer" in types and "number" not in types:
        yield "not whole", path, 1.5
    for key, refused in _OUT_OF_RANGE.items():
        if key in flat:
            yield f"{key} broken", path, refused(flat[key])
    if "enum" in flat or "const" in flat:
        yield "not one of the choices", path, "none of these"
    if flat.get("minLength"):
        yield "empty", path, ""
    yield from _mutations(schema, root, value, path)


def _put(doc: dict, path: Path, value: Any) -> dict:
    """A copy of ``doc`` with the field at ``path`` set, or removed for _DELETE."""
    out = copy.deepcopy(doc)
    node = out
    for key in path[:-1]:
        node = node[key]
    if value is _DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return out


def _base(request, kind: str) -> dict:
    return {"observations": _full_observations(),
            "profile": request.getfixturevalue("counted")}[kind]


def _cases(request, kind: str) -> list[tuple[str, Path, dict]]:
    base = _base(request, kind)
    schema = SCHEMAS[kind]
    return [(what, path, _put(base, path, value))
            for what, path, value in _mutations(schema, schema, base)]


@pytest.mark.parametrize("kind", ["observations", "profile"])
def test_a_field_the_schema_refuses_hotshard_refuses_naming_it(request, kind):
    read, error = READERS[kind]
    cases = _cases(request, kind)
    assert len(cases) > 40  # the walk reached the nested fields
    problems = []
    for what, path, doc in cases:
        shown = _show_path(path)
        if not _schema_errors(doc, kind, first_only=True):
            problems.append(f"{shown} ({what}): the schema accepts it; fix the test's mutation")
            continue
        try:
            read(doc)
        except error as exc:
            message = str(exc)
            # the field, or the list holding a bad item; a section's name for the sections
            # that word their own messages
            named = path[0] if path[0] in _SECTION_ONLY else \
                _show_path(path[:-1] if isinstance(path[-1], int) else path)
            if "\n" in message or named not in message:
                problems.append(f"{shown} ({what}): message does not name it: {message}")
        except Exception as exc:  # a traceback for the user instead of one line
            problems.append(f"{shown} ({what}): {type(exc).__name__}: {exc}")
        else:
            problems.append(f"{shown} ({what}): the schema refuses it, hotshard reads it")
    assert not problems, "\n".join(problems)


def _nullable_fields(schema: dict, root: dict, doc: Any, path: Path = ()) -> Iterator[Path]:
    """Paths of the optional fields present in ``doc`` whose schema allows null."""
    if "$ref" in schema:
        yield from _nullable_fields(_resolve(root, schema["$ref"]), root, doc, path)
        return
    if not isinstance(doc, dict):
        return
    for name, sub in schema.get("properties", {}).items():
        if name in doc and name not in schema.get("required", ()):
            if not list(_errors(None, sub, root)):
                yield (*path, name)
            for option in sub.get("anyOf", [sub]):
                yield from _nullable_fields(option, root, doc[name], (*path, name))


@pytest.mark.parametrize("kind", ["observations", "profile"])
def test_null_where_the_schema_allows_it_reads_as_absent(request, kind):
    read, error = READERS[kind]
    base = _base(request, kind)
    schema = SCHEMAS[kind]
    paths = list(_nullable_fields(schema, schema, base))
    assert len(paths) >= 8
    refused = []
    for path in paths:
        if path[-1] == "bins":
            continue  # the histogram's totals then disagree with tail.keys: a consistency rule
        doc = _put(base, path, None)
        assert _schema_errors(doc, kind) == [], path
        try:
            read(doc)
        except error as exc:
            refused.append(f"{_show_path(path)}: {exc}")
    assert not refused, "\n".join(refused)
