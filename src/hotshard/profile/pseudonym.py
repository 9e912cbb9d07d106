"""Pseudonymized profiles: no real key leaves, yet the test reproduces production placement.

Each head key is replaced by a keyed hash (HMAC-SHA256 with a secret that stays with the data
owner) and its shard under each named partitioner is recorded. A sampler later synthesises, for
each pseudonym, a stand-in key that lands on that same shard under that same partitioner.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Sequence
from dataclasses import replace

from hotshard._files import require_file
from hotshard.errors import InputError
from hotshard.profile.document import KeyDistribution, Profile
from hotshard.profile.placement import PlacementRecord, Placer

__all__ = ["pseudonym", "pseudonymize", "read_secret"]

PREFIX = "~h"


def read_secret(path: str | os.PathLike[str]) -> bytes:
    """The HMAC secret from a file (its bytes, trailing newline stripped)."""
    secret = require_file(path, what="secret file").read_bytes().rstrip(b"\r\n")
    if len(secret) < 16:
        raise InputError(f"the secret in {path} is {len(secret)} bytes: use at least 16 random "
                         "bytes (e.g. `head -c 32 /dev/urandom > secret`)")
    return secret


def pseudonym(secret: bytes, key: str) -> str:
    """A stable, unlinkable stand-in name: ~h + 24 hex digits of HMAC-SHA256(secret, key)."""
    return PREFIX + hmac.new(secret, key.encode(), hashlib.sha256).hexdigest()[:24]


def _hide(dist: KeyDistribution, secret: bytes) -> KeyDistribution:
    return replace(dist, head_keys=tuple(pseudonym(secret, k) for k in dist.head_keys))


def pseudonymize(profile: Profile, secret: bytes, placers: Sequence[Placer]) -> Profile:
    """Replace head keys by pseudonyms, recording their shards under each placer."""
    if not placers:
        raise InputError("pseudonymizing needs at least one partitioner with its shard count: "
                         "without real keys, placement must be recorded now")
    placement = dict(profile.placement)
    for part in placers:
        rec = placement.get(part.spec)
        if rec is None or not rec.matches(part):
            rec = PlacementRecord.of(part)
        head = part.shard_of(list(profile.head_keys)).tolist() if profile.head_keys else []
        by_op = {op: part.shard_of(list(d.head_keys)).tolist() if d.head_keys else []
                 for op, d in profile.operations.items()}
        placement[part.spec] = rec.with_head_shards(head, by_op)
    return replace(
        profile,
        dist=_hide(profile.dist, secret),
        operations={op: _hide(d, secret) for op, d in profile.operations.items()},
        placement=placement,
        privacy={**profile.privacy, "pseudonymized": True, "key_hash": "hmac-sha256"},
    )
