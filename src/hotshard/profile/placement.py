"""What a profile needs to know about a store's placement, owned by the lower layer.

Profiles record, per partitioner, each shard's total tail events (and, when pseudonymized, each
head key's shard). Counting and pseudonymizing need only a small view of a partitioner, the
``Placer`` protocol: the real partitioners in ``hotshard.shards`` satisfy it, so this package
never imports that one (packages depend downward only; docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from hotshard._validate import Fields, item
from hotshard.errors import ProfileError

__all__ = ["PlacementRecord", "Placer", "parse_placement"]


@runtime_checkable
class Placer(Protocol):
    """A store's key -> shard placement, as much of it as a profile needs.

    ``spec`` names the placement a profile records it under (``kafka/64``, ``cassandra/12:16t``);
    ``fingerprint`` identifies its exact layout (ring tokens, slot map), so that a recorded
    placement is never applied to a different ring; ``key_type`` is ``text`` or ``bigint``.
    """

    name: str
    n_shards: int

    @property
    def key_type(self) -> str: ...

    @property
    def spec(self) -> str: ...

    @property
    def fingerprint(self) -> str: ...

    def shard_of(self, keys: Sequence[str]) -> Any: ...


@dataclass(frozen=True)
class PlacementRecord:
    """One partitioner's placement as a profile records it (counts and shard numbers only)."""

    spec: str
    fingerprint: str
    key_type: str = "text"
    tail_events_by_shard: tuple[float, ...] | None = None
    head_shards: tuple[int, ...] | None = None
    op_head_shards: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def matches(self, placer: Placer) -> bool:
        """Whether this record was made by exactly ``placer`` (same spec and layout)."""
        return self.spec == placer.spec and self.fingerprint == placer.fingerprint

    def with_head_shards(self, head: Sequence[int],
                         by_op: Mapping[str, Sequence[int]]) -> PlacementRecord:
        return PlacementRecord(self.spec, self.fingerprint, self.key_type,
                               self.tail_events_by_shard, tuple(int(s) for s in head),
                               {op: tuple(int(s) for s in v) for op, v in by_op.items()})

    @classmethod
    def of(cls, placer: Placer, tail_events_by_shard: Sequence[float] | None = None
           ) -> PlacementRecord:
        tail = None if tail_events_by_shard is None else tuple(
            int(round(v)) for v in tail_events_by_shard)
        return cls(placer.spec, placer.fingerprint, placer.key_type, tail)

    def to_dict(self) -> dict:
        out: dict[str, Any] = {"fingerprint": self.fingerprint, "key_type": self.key_type}
        if self.tail_events_by_shard is not None:
            out["tail_events_by_shard"] = list(self.tail_events_by_shard)
        if self.head_shards is not None:
            out["head_shards"] = list(self.head_shards)
            out["op_head_shards"] = {op: list(v) for op, v in self.op_head_shards.items()}
        return out


_F = Fields(ProfileError)  # the field readers profiles and observations share


def _shard_list(value: Any, where: str, length: int) -> tuple[int, ...]:
    _F.array(value, where, f"a list of one shard number per head key ({length})")
    if len(value) != length:
        raise _F.fail(where, f"must list one shard number per head key ({length}), got "
                             f"{len(value)}")
    return tuple(_F.count(v, item(where, i)) for i, v in enumerate(value))


def parse_placement(doc: Any, head_sizes: Mapping[str | None, int],
                    pseudonymized: bool) -> dict[str, PlacementRecord]:
    """Validate a profile's ``placement`` object into records.

    ``head_sizes`` maps None to the number of head keys and each operation to its own.
    """
    doc = _F.mapping({} if doc is None else doc, "placement", "an object of spec -> record")
    records = {}
    for spec, rec in doc.items():
        where = f"placement.{spec}"
        _F.mapping(rec, where)
        if rec.get("fingerprint") is None:
            raise _F.missing(f"{where}.fingerprint", "the layout this placement was recorded "
                                                     "for; re-run hotshard profile")
        fingerprint = _F.text(rec["fingerprint"], f"{where}.fingerprint")
        key_type = _F.choice(rec.get("key_type", "text"), f"{where}.key_type",
                             ("text", "bigint"))
        tail = rec.get("tail_events_by_shard")
        tail = None if tail is None else tuple(_F.numbers(tail, f"{where}.tail_events_by_shard"))
        head = rec.get("head_shards")
        if pseudonymized and head is None:
            raise _F.missing(f"{where}.head_shards", "a pseudonymized profile records every "
                                                     "head key's shard")
        head = None if head is None else _shard_list(head, f"{where}.head_shards",
                                                      head_sizes[None])
        ops_doc = _F.mapping(rec.get("op_head_shards") or {}, f"{where}.op_head_shards")
        by_op = {}
        for op, shards in ops_doc.items():
            if op not in head_sizes:
                raise _F.fail(f"{where}.op_head_shards.{op}:", "the profile has no such "
                                                               "operation")
            by_op[op] = _shard_list(shards, f"{where}.op_head_shards.{op}", head_sizes[op])
        records[spec] = PlacementRecord(spec, fingerprint, key_type, tail, head, by_op)
    if pseudonymized and not records:
        raise ProfileError("a pseudonymized profile needs placement with head_shards")
    return records
