"""Shards: real stores' key -> shard placement, and per-shard load prediction.

This module holds only names and the key-type rule (no numpy), so the command line can offer
the choices without importing the hash kernels.
"""

from __future__ import annotations

from hotshard.profile import keys_look_integer

__all__ = ["KEY_TYPE_RULE", "LAYOUT_OPTION", "PARTITIONERS", "TEXT_KEYED", "keys_look_integer",
           "resolve_key_type"]

PARTITIONERS = ("redis-cluster", "cassandra", "kafka", "elasticsearch", "mongodb", "jump",
                "ketama", "rendezvous", "modulo", "map")

# Stores whose layout (and so shard count) can come from a file: store -> make_partitioner's
# parameter naming that file.
LAYOUT_OPTION = {"map": "map_file", "redis-cluster": "slots_map", "cassandra": "ring_file",
                 "mongodb": "chunks_file"}

# Stores that hash the key's bytes as a string whatever its type in the data.
TEXT_KEYED = ("redis-cluster", "elasticsearch", "ketama")

KEY_TYPE_RULE = (
    "Key type: keys that are integers (an integer key column, or keys that are all decimal "
    "integers in the 64-bit range) are 8-byte integers to stores that type keys (Cassandra "
    "bigint, Kafka LongSerializer, MongoDB NumberLong, jump, rendezvous, modulo); anything else "
    "is text. Redis Cluster, Elasticsearch and ketama always hash the key's text.")

def resolve_key_type(store: str, requested: str | None = None, *, integer_keys: bool) -> str:
    """The one rule every command uses to type keys for a store (see ``KEY_TYPE_RULE``).

    Parameters
    ----------
    store : partitioner name.
    requested : ``"text"`` or ``"bigint"`` when the user said so, else None.
    integer_keys : whether the keys are integers (an integer column, or all integer-looking).
    """
    if store in TEXT_KEYED:
        return "text"
    if requested is not None:
        return requested
    return "bigint" if integer_keys else "text"
