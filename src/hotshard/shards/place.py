"""Where a store puts given keys: ``hotshard shard`` as one library call.

``place_keys(["4711", "982"], "cassandra", 12)`` types the keys by the one rule
(``hotshard.shards.resolve_key_type``: all integers are 8-byte integers to a store that types
keys, one key that is not makes them all text), places them with the store's own partitioner
and keeps what the partitioner can say of each (its slot, token or hash). When the keys are
mixed and the rule fell back to text for a store that would type the integers, the result
says so (``mixed_note``): the user asked about integers and got them placed as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hotshard.shards import keys_look_integer, resolve_key_type

__all__ = ["KeyPlacement", "Placements", "place_keys"]


@dataclass(frozen=True)
class KeyPlacement:
    """One key's shard under the store's typing of it, and the partitioner's own figures
    for it (``slot``, ``token``, ``murmur2``...)."""

    key: str
    shard: int
    key_type: str
    details: tuple[tuple[str, int], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "shard": self.shard, "key_type": self.key_type,
                **dict(self.details)}


@dataclass(frozen=True)
class Placements:
    """Each key's placement, in the order given; ``mixed_note``: the keys were mixed and the
    integers were placed as text (what to do about it), else None."""

    keys: tuple[KeyPlacement, ...]
    mixed_note: str | None = None


def place_keys(keys: Sequence[str], partitioner: str, shards: int | None = None, *,
               key_type: str | None = None, **layout: Any) -> Placements:
    """Place ``keys`` as ``partitioner`` over ``shards`` does (``layout``: the layout
    options of ``partitioner_for``); ``key_type`` "text" or "bigint" overrides the rule."""
    from hotshard.shards.partitioners import partitioner_for

    keys = [str(k) for k in keys]
    part = partitioner_for(partitioner, shards, key_type=key_type,
                           integer_keys=keys_look_integer(keys), **layout)
    chosen = getattr(part, "key_type", "text")
    integers = [k for k in keys if keys_look_integer([k])]
    note = None
    if key_type is None and chosen == "text" and integers and \
            resolve_key_type(partitioner, integer_keys=True) == "bigint":
        looks = "looks like an integer" if len(integers) == 1 else "look like integers"
        note = (f"mixed keys ({len(integers)} of {len(keys)} {looks}): all are hashed as text; "
                "--key-type bigint types the integers as 8-byte integers (give them alone "
                "with it)")
    placed = part.shard_of(keys)
    details = part.details(keys) if hasattr(part, "details") else {}
    rows = tuple(KeyPlacement(key, int(placed[i]), chosen,
                              tuple((name, int(values[i])) for name, values in details.items()))
                 for i, key in enumerate(keys))
    return Placements(rows, note)
