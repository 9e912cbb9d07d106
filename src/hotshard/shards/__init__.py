"""Shards: real stores' key -> shard placement, and per-shard load prediction."""
