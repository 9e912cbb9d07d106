"""Real stores' partitioners: key -> shard exactly as the store does it, over arrays of keys.

Each is checked against the store's own published test vectors (tests/shards). Keys are given
as text (what a profile holds) and serialised as the store would: UTF-8 for Redis, Kafka's
StringSerializer and Cassandra ``text``; 8-byte big-endian for Cassandra ``bigint`` and Kafka's
LongSerializer; UTF-16LE for Elasticsearch routing; BSON-typed bytes for MongoDB.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from hotshard._files import require_file
from hotshard.errors import InputError
from hotshard.profile.placement import Placer
from hotshard.shards import PARTITIONERS, TEXT_KEYED, resolve_key_type


class _CompiledHashes:
    """``hotshard.shards._hashes``, imported on first use: importing numba and loading its
    cached kernels costs ~0.9 s of CPU, which a gateway routing one channel at a time by
    Kafka's murmur2 (``_murmur2_small``), or `hotshard shard KEY`, never needs."""

    def __getattr__(self, name: str):
        from hotshard.shards import _hashes

        return getattr(_hashes, name)


H = _CompiledHashes()

__all__ = ["PARTITIONERS", "TEXT_KEYED", "Partitioner", "encode_keys", "even_slots",
           "make_partitioner", "partitioner_for"]

REDIS_SLOTS = 16384
INT64_MIN = -(2**63)


@runtime_checkable
class Partitioner(Placer, Protocol):
    """Places keys on shards: ``shard_of(keys)`` -> shard index per key; ``ownership()`` the
    share of a uniform key space each shard owns. Extends the profile layer's ``Placer``."""

    def shard_of(self, keys: Sequence[str]) -> NDArray[np.int64]: ...

    def ownership(self) -> NDArray[np.float64]: ...


class _Named:
    """``spec`` and ``fingerprint`` for every partitioner (the ``Placer`` protocol)."""

    _spec_suffix = ""  # what else a spec must say to rebuild this layout (Cassandra: vnodes)

    @property
    def spec(self) -> str:
        """The name a profile's placement is recorded under, e.g. ``kafka/64``."""
        return f"{self.name}/{self.n_shards}{self._spec_suffix}"

    @property
    def fingerprint(self) -> str:
        """Identifies the exact layout (ring tokens, slot map) so a recorded one is not misused."""
        h = hashlib.sha256(self.name.encode() + str(self.n_shards).encode())
        own = {f.name for f in fields(self)}
        for attr in ("ring_tokens", "ring_nodes", "slot_node", "chunk_bounds", "chunk_shard"):
            if attr in own:
                h.update(np.ascontiguousarray(getattr(self, attr)).tobytes())
        for attr in ("key_type", "routing_shards"):
            if attr in own:
                h.update(str(getattr(self, attr)).encode())
        return h.hexdigest()[:16]


def _pack(blobs: list[bytes]) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
    if blobs:
        offsets[1:] = np.cumsum([len(b) for b in blobs])
    data = np.frombuffer(b"".join(blobs) or b"\0", dtype=np.uint8)
    return data, offsets


# Fewer keys than this are encoded by Python: Arrow's conversion imports pandas (~0.3 s),
# which a gateway routing one channel at a time, or `hotshard shard KEY`, should not pay.
_ARROW_MIN_KEYS = 256


# Where a partitioner has a Python twin of its compiled kernel (Kafka's murmur2), fewer keys
# than this are hashed by Python: ~2-3 us a key, against ~0.9 s of CPU to import numba and
# load the kernel in a process that has not (a gateway routing one channel at a time, a bulk
# load's distinct channels). Once the kernels are loaded, only the first bound holds.
_COMPILED_MIN_KEYS = 64
_PYTHON_MAX_KEYS = 100_000


def _compiled_pays(n_keys: int) -> bool:
    """Whether ``n_keys`` keys are hashed by the compiled kernel rather than its twin."""
    if n_keys < _COMPILED_MIN_KEYS:
        return False
    return n_keys >= _PYTHON_MAX_KEYS or "hotshard.shards._hashes" in sys.modules


_M32 = 0xFFFFFFFF


def _murmur2_small(data: NDArray[np.uint8], offsets: NDArray[np.int64]) -> NDArray[np.int64]:
    """Kafka's Utils.murmur2 (seed 0x9747b28c) of each packed key as a signed 32-bit int:
    ``_hashes.kafka_murmur2`` step for step, in Python, for a few keys."""
    m = 0x5BD1E995
    raw = data.tobytes()
    out = np.empty(offsets.size - 1, dtype=np.int64)
    for i in range(out.size):
        start, end = int(offsets[i]), int(offsets[i + 1])
        length = end - start
        h = (0x9747B28C ^ length) & _M32
        tail = start + length - length % 4
        for p in range(start, tail, 4):
            k = (int.from_bytes(raw[p:p + 4], "little") * m) & _M32
            k ^= k >> 24
            h = ((h * m) & _M32) ^ ((k * m) & _M32)
        rem = length % 4
        if rem == 3:
            h ^= raw[tail + 2] << 16
        if rem >= 2:
            h ^= raw[tail + 1] << 8
        if rem >= 1:
            h = ((h ^ raw[tail]) * m) & _M32
        h ^= h >> 13
        h = (h * m) & _M32
        h ^= h >> 15
        out[i] = h - (1 << 32) if h >= 1 << 31 else h
    return out


def _pack_text(keys: Sequence[str]) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """UTF-8 bytes of every key in one buffer, by Arrow for many keys (C speed, no per-key
    Python bytes), by Python for a few."""
    if len(keys) < _ARROW_MIN_KEYS:
        if any(k is None for k in keys):
            raise InputError("keys must not be null")
        try:
            return _pack([str(k).encode() for k in keys])
        except UnicodeEncodeError as exc:
            raise InputError(f"a key is not valid text: {exc.object!r} ({exc.reason})") from None
    import pyarrow as pa

    try:
        arr = pa.array(keys, type=pa.large_string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        arr = pa.array([str(k) for k in keys], type=pa.large_string())
    if arr.null_count:
        raise InputError("keys must not be null")
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None and data_buf.size \
        else np.zeros(1, dtype=np.uint8)
    return data, offsets


def _as_int(key: str) -> int:
    try:
        value = int(key)
    except ValueError:
        raise InputError(f"key {key!r} is not an integer: place it with key type text") from None
    if not INT64_MIN <= value < 2**63:
        raise InputError(f"key {key} does not fit a 64-bit integer")
    return value


def key_ints(keys: Sequence[str]) -> NDArray[np.int64]:
    """Every key as a 64-bit integer, as ``int(key)`` reads it.

    Many keys are parsed by Arrow (decimal text at C speed: a trace of millions of integer keys
    placed for Cassandra or MongoDB spent most of its time in a per-key ``int()``); a few keys,
    or anything Arrow refuses (spaces, underscores, nulls, a value beyond 64 bits), go through
    ``int()`` itself, which reads what it accepts and names the key it cannot.
    """
    ints = _arrow_ints(keys) if len(keys) >= _ARROW_MIN_KEYS else None
    if ints is not None:
        return ints
    return np.array([_as_int(str(k)) for k in keys], dtype=np.int64)


def _arrow_ints(keys: Sequence[str]) -> NDArray[np.int64] | None:
    """The keys (text, or integers already) as int64 by Arrow; None where Arrow cannot."""
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        try:
            arr = pc.cast(pa.array(keys, type=pa.string()), pa.int64())
        except pa.ArrowTypeError:  # not text: Python or numpy integers
            arr = pa.array(keys, type=pa.int64())
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None
    if arr.null_count:
        return None
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)


_BSON_INT = np.dtype([("size", "<i4"), ("type", "<i4"), ("value", "<i8")])


def encode_keys(keys: Sequence[str], kind: str) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """Serialise keys as a store does: kind is text, utf16le, bigint, bson.

    The bytes are always a read-only array (Arrow's buffers are; the others are marked so):
    numba compiles a kernel once per array type, and writable and read-only arrays are two
    types, so mixed inputs would compile every hash kernel twice (~1-3 s of CPU each, the
    first time a fresh install places keys of each kind).
    """
    data, offsets = _encode_keys(keys, kind)
    if data.flags.writeable:
        data.setflags(write=False)
    return data, offsets


def _encode_keys(keys: Sequence[str], kind: str) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    if kind == "text":
        return _pack_text(keys)
    if kind == "bigint":  # 8 bytes big-endian each
        ints = key_ints(keys)
        return (np.ascontiguousarray(ints.astype(">i8")).view(np.uint8).copy() if ints.size
                else np.zeros(1, dtype=np.uint8), np.arange(ints.size + 1, dtype=np.int64) * 8)
    if kind == "bson-int":  # the BSON header (0, 10) then the value, 16 bytes each
        ints = key_ints(keys)
        if not ints.size:
            return np.zeros(1, dtype=np.uint8), np.zeros(1, dtype=np.int64)
        docs = np.zeros(ints.size, dtype=_BSON_INT)
        docs["type"] = 10
        docs["value"] = ints
        return docs.view(np.uint8).copy(), np.arange(ints.size + 1, dtype=np.int64) * 16
    keys = [str(k) for k in keys]
    if kind == "utf16le":
        return _pack([k.encode("utf-16-le") for k in keys])
    if kind == "bson-string":
        blobs = []
        for k in keys:
            raw = k.encode()
            blobs.append(struct.pack("<iii", 0, 15, len(raw) + 1) + raw + b"\0")
        return _pack(blobs)
    raise InputError(f"unknown key encoding {kind!r}")


def _check_shards(n: int) -> int:
    if int(n) != n or n < 1:
        raise InputError(f"shards must be an integer >= 1, got {n}")
    return int(n)


def _uniform(n: int) -> NDArray[np.float64]:
    return np.full(n, 1.0 / n)


# -- ring helpers ---------------------------------------------------------------------------
def _ring_owner(ring_tokens: NDArray, ring_nodes: NDArray, hashes: NDArray) -> NDArray:
    """Owner = node of the first ring token >= hash, wrapping to the first token."""
    idx = np.searchsorted(ring_tokens, hashes, side="left")
    idx[idx == ring_tokens.size] = 0
    return ring_nodes[idx]


def _ring_ownership(ring_tokens: NDArray, ring_nodes: NDArray, n: int, lo: float,
                    hi: float) -> NDArray[np.float64]:
    """Fraction of [lo, hi) each node owns: token i owns (token i-1, token i]."""
    t = ring_tokens.astype(np.float64)
    span = hi - lo
    sizes = np.diff(np.concatenate([[t[-1] - span], t]))
    own = np.bincount(ring_nodes, weights=sizes, minlength=n)
    return own / own.sum()


@dataclass(frozen=True)
class RedisCluster(_Named):
    """CRC16-XMODEM(key or its {hash tag}) mod 16384 -> slot; slot -> node by slot ranges."""

    n_shards: int
    slot_node: NDArray[np.int64]
    name: str = "redis-cluster"
    key_template: str | None = None  # the store's key name around {key}, e.g. chat:{{key}}
    key_type: ClassVar[str] = "text"

    @property
    def _spec_suffix(self) -> str:  # type: ignore[override]
        return f"/{self.key_template}" if self.key_template else ""

    def store_keys(self, keys):
        """The key names the store hashes: the template applied (braces and all)."""
        if not self.key_template:
            return keys
        return [self.key_template.replace("{key}", str(k)) for k in keys]

    def slots(self, keys):
        return H.redis_slots(*encode_keys(self.store_keys(keys), "text"))

    def shard_of(self, keys):
        return self.slot_node[self.slots(keys)]

    def ownership(self):
        return np.bincount(self.slot_node, minlength=self.n_shards) / REDIS_SLOTS

    def details(self, keys):
        return {"slot": self.slots(keys)}


def even_slots(n: int) -> NDArray[np.int64]:
    """Slot ranges as `redis-cli --cluster create` assigns them to n masters."""
    per_node = REDIS_SLOTS / n
    slot_node = np.empty(REDIS_SLOTS, dtype=np.int64)
    first, cursor = 0, 0.0
    for node in range(n):
        last = int(math.floor(cursor + per_node - 1 + 0.5))  # C lround
        if last > REDIS_SLOTS - 1 or node == n - 1:
            last = REDIS_SLOTS - 1
        slot_node[first:last + 1] = node
        first = last + 1
        cursor += per_node
    return slot_node


def load_slots_map(path: str) -> tuple[NDArray[np.int64], int]:
    """A CLUSTER SLOTS dump: JSON [[start, end, node...], ...] or 'start end node' lines."""
    text = _read_text(path, "Redis Cluster slots map",
                      "'start end node' lines or a CLUSTER SLOTS JSON dump")
    rows = []
    from hotshard._http import loads_bounded

    try:
        doc = loads_bounded(text)
        rows = [(int(r[0]), int(r[1]), str(r[2][0] if isinstance(r[2], list) else r[2]))
                for r in doc]
    except (json.JSONDecodeError, TypeError, IndexError, ValueError, KeyError):
        for i, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split()
            try:
                rows.append((int(parts[0]), int(parts[1]), parts[2]))
            except (ValueError, IndexError):
                raise InputError(f"{path} line {i}: expected 'start end node' with integer "
                                 f"slots, got {line.strip()[:60]!r}") from None
    nodes = sorted({r[2] for r in rows})
    slot_node = np.full(REDIS_SLOTS, -1, dtype=np.int64)
    for start, end, node in rows:
        if not 0 <= start <= end < REDIS_SLOTS:
            raise InputError(f"{path}: slot range {start}-{end} is not a range within 0-16383")
        slot_node[start:end + 1] = nodes.index(node)
    missing = np.flatnonzero(slot_node < 0)
    if missing.size:
        raise InputError(f"{path} leaves {missing.size} slots unassigned (first: {missing[0]}): "
                         "a slots map must cover 0-16383")
    return slot_node, len(nodes)


@dataclass(frozen=True)
class Cassandra(_Named):
    """Murmur3Partitioner token ring with vnodes (num_tokens per node)."""

    n_shards: int
    ring_tokens: NDArray[np.int64]
    ring_nodes: NDArray[np.int64]
    key_type: str = "text"
    name: str = "cassandra"

    @property
    def _spec_suffix(self) -> str:
        return f":{self.ring_tokens.size // max(self.n_shards, 1)}t"

    def tokens(self, keys):
        kind = "bigint" if self.key_type == "bigint" else "text"
        return H.cassandra_tokens(*encode_keys(keys, kind))

    def shard_of(self, keys):
        return _ring_owner(self.ring_tokens, self.ring_nodes, self.tokens(keys))

    def ownership(self):
        return _ring_ownership(self.ring_tokens, self.ring_nodes, self.n_shards,
                               float(INT64_MIN), float(2**63))

    def details(self, keys):
        return {"token": self.tokens(keys)}


def random_ring(n: int, num_tokens: int, seed: int) -> tuple[NDArray, NDArray]:
    """Cassandra's random token allocation: num_tokens uniform tokens per node, seeded."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(INT64_MIN + 1, 2**63 - 1, size=n * num_tokens, dtype=np.int64,
                          endpoint=True)
    nodes = np.repeat(np.arange(n, dtype=np.int64), num_tokens)
    order = np.argsort(tokens, kind="stable")
    return tokens[order], nodes[order]


def load_ring(path: str) -> tuple[NDArray, NDArray, int]:
    """'token node' lines (nodetool ring order does not matter)."""
    tokens, names = [], []
    text = _read_text(path, "Cassandra ring file",
                      "'token node' lines, one per token (Murmur3 tokens, -2^63 to 2^63-1)")
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        try:
            tokens.append(int(parts[0]))
            names.append(parts[1])
        except (ValueError, IndexError):
            raise InputError(f"{path} line {i}: expected 'token node', got "
                             f"{line.strip()[:60]!r}") from None
        if not INT64_MIN <= tokens[-1] < 2**63:
            raise InputError(f"{path} line {i}: token {tokens[-1]} is outside the Murmur3 "
                             "range -2^63 to 2^63-1")
    if not tokens:
        raise InputError(f"{path} holds no tokens")
    if len(set(tokens)) != len(tokens):
        raise InputError(f"{path} lists a token twice: a ring needs distinct tokens")
    nodes = sorted(set(names))
    order = np.argsort(tokens)
    return (np.array(tokens, dtype=np.int64)[order],
            np.array([nodes.index(n) for n in names], dtype=np.int64)[order], len(nodes))


@dataclass(frozen=True)
class Kafka(_Named):
    """Kafka's default partitioner for keyed records: (murmur2(key) & 0x7fffffff) % partitions."""

    n_shards: int
    key_type: str = "text"
    name: str = "kafka"

    def hashes(self, keys):
        kind = "bigint" if self.key_type == "bigint" else "text"
        data, offsets = encode_keys(keys, kind)
        if not _compiled_pays(offsets.size - 1):
            return _murmur2_small(data, offsets)
        return H.kafka_murmur2(data, offsets)

    def shard_of(self, keys):
        return (self.hashes(keys) & 0x7FFFFFFF) % self.n_shards

    def ownership(self):
        return _uniform(self.n_shards)

    def details(self, keys):
        return {"murmur2": self.hashes(keys)}


@dataclass(frozen=True)
class Elasticsearch(_Named):
    """murmur3_x86_32 of the routing value's UTF-16LE bytes; floorMod with routing shards."""

    n_shards: int
    routing_shards: int
    name: str = "elasticsearch"
    key_type: ClassVar[str] = "text"

    def hashes(self, keys):
        return H.murmur3_x86_32(*encode_keys(keys, "utf16le"), 0)

    def shard_of(self, keys):
        h = self.hashes(keys)
        return np.mod(h, self.routing_shards) // (self.routing_shards // self.n_shards)

    def ownership(self):
        return _uniform(self.n_shards)

    def details(self, keys):
        return {"murmur3": self.hashes(keys)}


@dataclass(frozen=True)
class MongoDB(_Named):
    """Hashed shard key: first 8 bytes of MD5 over the BSON-typed value; chunk ranges."""

    n_shards: int
    chunk_bounds: NDArray[np.int64]  # sorted lower bounds of chunks (first is INT64_MIN)
    chunk_shard: NDArray[np.int64]
    key_type: str = "text"
    name: str = "mongodb"

    def hashes(self, keys):
        kind = "bson-int" if self.key_type == "bigint" else "bson-string"
        return H.md5_prefix64(*encode_keys(keys, kind))

    def shard_of(self, keys):
        idx = np.searchsorted(self.chunk_bounds, self.hashes(keys), side="right") - 1
        return self.chunk_shard[idx]

    def ownership(self):
        upper = np.append(self.chunk_bounds[1:].astype(np.float64), float(2**63))
        sizes = upper - self.chunk_bounds.astype(np.float64)
        own = np.bincount(self.chunk_shard, weights=sizes, minlength=self.n_shards)
        return own / own.sum()

    def details(self, keys):
        return {"hashed": self.hashes(keys)}


def even_chunks(n: int, per_shard: int = 2) -> tuple[NDArray, NDArray]:
    """MongoDB's initial split of the hashed space: equal chunks, ``per_shard`` per shard."""
    k = n * per_shard
    bounds = np.array([INT64_MIN + (2**64 * i) // k for i in range(k)], dtype=np.int64)
    return bounds, np.arange(k, dtype=np.int64) % n


def load_chunks(path: str) -> tuple[NDArray, NDArray, int]:
    """MongoDB chunk ranges: 'min max shard' lines over the hashed (int64) key space, as
    config.chunks lists them; 'MinKey'/'MaxKey' stand for the ends. Must tile the space."""
    rows = []
    text = _read_text(path, "MongoDB chunks file",
                      "'min max shard' lines over the hashed key space (MinKey/MaxKey at the ends)")
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 3:
            raise InputError(f"{path} line {i}: expected 'min max shard', got "
                             f"{line.strip()[:60]!r}")
        try:
            lo = INT64_MIN if parts[0] == "MinKey" else int(parts[0])
            hi = 2**63 if parts[1] == "MaxKey" else int(parts[1])
        except ValueError:
            raise InputError(f"{path} line {i}: chunk bounds must be integers") from None
        if not INT64_MIN <= lo < hi <= 2**63:
            raise InputError(f"{path} line {i}: chunk {parts[0]}..{parts[1]} is not a range of "
                             "the hashed key space (MinKey <= min < max <= MaxKey)")
        rows.append((lo, hi, parts[2]))
    rows.sort()
    if not rows or rows[0][0] != INT64_MIN or rows[-1][1] != 2**63 or any(
            a[1] != b[0] for a, b in zip(rows, rows[1:], strict=False)):
        raise InputError(f"{path}: chunks must tile the hashed key space from MinKey to MaxKey "
                         "without gaps or overlaps")
    shards = sorted({r[2] for r in rows})
    return (np.array([r[0] for r in rows], dtype=np.int64),
            np.array([shards.index(r[2]) for r in rows], dtype=np.int64), len(shards))


def _key_hash64(keys, key_type: str):
    """A 64-bit input for the generic schemes: the integer itself, else murmur3 of the text."""
    if key_type == "bigint":
        return key_ints(keys)
    return H.murmur3_64(*encode_keys(keys, "text"))


@dataclass(frozen=True)
class Jump(_Named):
    """Jump consistent hash (Lamping & Veach 2014) of the key's 64-bit hash."""

    n_shards: int
    key_type: str = "text"
    name: str = "jump"

    def shard_of(self, keys):
        return H.jump(_key_hash64(keys, self.key_type), self.n_shards)

    def ownership(self):
        return _uniform(self.n_shards)


@dataclass(frozen=True)
class Modulo(_Named):
    """hash(key) mod N: the integer key itself when keys are integers (id % N sharding)."""

    n_shards: int
    key_type: str = "text"
    name: str = "modulo"

    def shard_of(self, keys):
        h = _key_hash64(keys, self.key_type)
        if self.key_type == "bigint":
            return np.mod(h, self.n_shards)
        return (h.view(np.uint64) % np.uint64(self.n_shards)).astype(np.int64)

    def ownership(self):
        return _uniform(self.n_shards)


@dataclass(frozen=True)
class Ketama(_Named):
    """libketama consistent hashing: 40 MD5 digests x 4 points per server (160 vnodes)."""

    n_shards: int
    ring_tokens: NDArray[np.int64]
    ring_nodes: NDArray[np.int64]
    name: str = "ketama"
    key_type: ClassVar[str] = "text"

    def hashes(self, keys):
        return H.md5_prefix64(*encode_keys(keys, "text")) & 0xFFFFFFFF

    def shard_of(self, keys):
        return _ring_owner(self.ring_tokens, self.ring_nodes, self.hashes(keys))

    def ownership(self):
        return _ring_ownership(self.ring_tokens, self.ring_nodes, self.n_shards, 0.0, 2.0**32)


def ketama_ring(n: int, vnodes: int = 160) -> tuple[NDArray, NDArray]:
    points, nodes = [], []
    for s in range(n):
        for k in range(max(1, vnodes // 4)):
            digest = hashlib.md5(f"shard-{s}-{k}".encode()).digest()
            for j in range(4):
                points.append(int.from_bytes(digest[4 * j:4 * j + 4], "little"))
                nodes.append(s)
    order = np.argsort(points, kind="stable")
    return np.array(points, dtype=np.int64)[order], np.array(nodes, dtype=np.int64)[order]


@dataclass(frozen=True)
class Rendezvous(_Named):
    """Highest-random-weight hashing: each key goes to the shard with the top score."""

    n_shards: int
    key_type: str = "text"
    name: str = "rendezvous"

    def shard_of(self, keys):
        h = _key_hash64(keys, self.key_type).view(np.uint64)
        seeds = H.splitmix64(np.arange(self.n_shards, dtype=np.uint64))
        best = np.zeros(h.size, dtype=np.int64)
        top = np.zeros(h.size, dtype=np.uint64)
        for s in range(self.n_shards):
            score = H.splitmix64(h ^ seeds[s])
            better = score > top
            best[better] = s
            top[better] = score[better]
        return best

    def ownership(self):
        return _uniform(self.n_shards)


@dataclass(frozen=True)
class ExplicitMap(_Named):
    """An explicit key -> shard table (CSV or TSV 'key,shard'); other keys are an error."""

    n_shards: int
    table: dict[str, int] = field(default_factory=dict)
    name: str = "map"
    key_type: ClassVar[str] = "text"

    def shard_of(self, keys):
        try:
            return np.array([self.table[str(k)] for k in keys], dtype=np.int64)
        except KeyError as exc:
            raise InputError(f"key {exc.args[0]!r} is not in the map table") from None

    def ownership(self):
        counts = np.bincount(np.fromiter(self.table.values(), dtype=np.int64),
                             minlength=self.n_shards)
        return counts / counts.sum()


def load_map(path: str) -> tuple[dict[str, int], int]:
    table = {}
    text = _read_text(path, "key-to-shard map", "'key,shard' lines (CSV or TSV, header allowed)")
    for i, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.replace("\t", ",").split(",")]
        if len(parts) != 2:
            raise InputError(f"{path} line {i}: expected 'key,shard'")
        try:
            table[parts[0]] = int(parts[1])
        except ValueError:
            if i == 1:
                continue  # header
            raise InputError(f"{path} line {i}: shard {parts[1]!r} is not an integer") from None
    if not table:
        raise InputError(f"{path} holds no key,shard rows")
    if min(table.values()) < 0:
        raise InputError(f"{path}: shard numbers must be >= 0")
    return table, max(table.values()) + 1


def _read_text(path: str, what: str, expected: str) -> str:
    """The UTF-8 text of a ring / slots / map / chunks file, or one error saying what it is not.

    ``what`` names the kind of file (``Cassandra ring file``), ``expected`` its format.
    """
    p = require_file(path, what=what)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    if b"\0" in data:
        raise InputError(f"{path} is not a text {what}: it holds binary data; expected {expected}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not a text {what}: byte {data[exc.start]:#04x} at offset "
                         f"{exc.start} is not UTF-8; expected {expected}, saved as UTF-8") from None
    if not text.strip():
        raise InputError(f"{path} is empty: expected a {what} of {expected}")
    return text



def make_partitioner(name: str, shards: int | None = None, *, key_type: str = "text",
                     num_tokens: int = 16, ring_seed: int = 0, ring_file: str | None = None,
                     slots_map: str | None = None, routing_shards: int | None = None,
                     map_file: str | None = None, vnodes: int = 160,
                     chunks_file: str | None = None, slot_node: NDArray | None = None,
                     key_template: str | None = None) -> Partitioner:
    """Build a partitioner by name. ``key_type`` is text or bigint (how the store types keys).

    Raises
    ------
    InputError
        Unknown name, shards < 1, or a ring / slot / map file that is malformed or incomplete.
    """
    if name not in PARTITIONERS:
        raise InputError(f"unknown partitioner {name!r}; choose from {', '.join(PARTITIONERS)}")
    if key_type not in ("text", "bigint"):
        raise InputError(f"key type must be text or bigint, got {key_type!r}")
    def agreeing(n: int, path: str) -> int:
        if shards is not None and shards != n:
            raise InputError(f"{path} lays out {n} shards, not {shards}: give no shard count "
                             "with a layout file, or the one it has")
        return n

    if name == "map":
        if not map_file:
            raise InputError("the map partitioner needs a map file (key,shard lines)")
        table, n = load_map(map_file)
        return ExplicitMap(agreeing(n, map_file), table)
    if key_template is not None:
        if name != "redis-cluster":
            raise InputError("a key template applies to Redis Cluster (where hash tags in the "
                             f"key name decide the slot), not to {name}")
        if "{key}" not in key_template:
            raise InputError(f"key template {key_template!r} has no {{key}}")
    if name == "redis-cluster" and slot_node is not None:
        slot_node = np.asarray(slot_node, dtype=np.int64)
        if slot_node.shape != (REDIS_SLOTS,) or slot_node.min() < 0:
            raise InputError("a live slot map must give a node for each of 16384 slots")
        return RedisCluster(agreeing(int(slot_node.max()) + 1, "the live slot map"), slot_node,
                            key_template=key_template)
    if name == "redis-cluster" and slots_map:
        slot_node, n = load_slots_map(slots_map)
        return RedisCluster(agreeing(n, slots_map), slot_node, key_template=key_template)
    if name == "mongodb" and chunks_file:
        bounds, owner, n = load_chunks(chunks_file)
        return MongoDB(agreeing(n, chunks_file), bounds, owner, key_type)
    if name == "cassandra" and ring_file:
        tokens, nodes, n = load_ring(ring_file)
        return Cassandra(agreeing(n, ring_file), tokens, nodes, key_type)
    if shards is None:
        raise InputError(f"say how many shards the {name} partitioner has")
    n = _check_shards(shards)
    if name == "redis-cluster":
        if n > REDIS_SLOTS:
            raise InputError(f"redis cluster has {REDIS_SLOTS} slots: at most that many nodes")
        return RedisCluster(n, even_slots(n), key_template=key_template)
    if name == "cassandra":
        if num_tokens < 1:
            raise InputError(f"num_tokens must be >= 1, got {num_tokens}")
        tokens, nodes = random_ring(n, num_tokens, ring_seed)
        return Cassandra(n, tokens, nodes, key_type)
    if name == "kafka":
        return Kafka(n, key_type)
    if name == "elasticsearch":
        rs = routing_shards or n
        if rs % n or rs < n:
            raise InputError(f"routing shards ({rs}) must be a multiple of shards ({n})")
        return Elasticsearch(n, rs)
    if name == "mongodb":
        bounds, owner = even_chunks(n)
        return MongoDB(n, bounds, owner, key_type)
    if name == "jump":
        return Jump(n, key_type)
    if name == "ketama":
        tokens, nodes = ketama_ring(n, vnodes)
        return Ketama(n, tokens, nodes)
    if name == "rendezvous":
        return Rendezvous(n, key_type)
    return Modulo(n, key_type)


def partitioner_for(name: str, shards: int | None = None, *, integer_keys: bool,
                    key_type: str | None = None, **layout) -> Partitioner:
    """The store's partitioner for these keys, as every command builds it: the key type by
    the one rule (``hotshard.shards.resolve_key_type``), then the layout and shard count
    (``make_partitioner``, which checks that they agree).

    Parameters
    ----------
    name : a name from ``hotshard.shards.PARTITIONERS``.
    shards : the shard count; None when a layout file gives it.
    integer_keys : whether the keys are integers (an integer column, or all integer-looking).
    key_type : ``"text"`` or ``"bigint"`` when the user said so, else None (the rule).
    layout : ``make_partitioner``'s layout options (``ring_file``, ``slots_map``, ...).

    Raises
    ------
    InputError
        As ``make_partitioner``: unknown name, no shard count where one is needed, a layout
        file that disagrees with ``shards`` or is malformed.
    """
    chosen = resolve_key_type(name, key_type, integer_keys=integer_keys)
    return make_partitioner(name, shards, key_type=chosen, **layout)


def from_spec(spec: str, key_type: str = "text") -> Partitioner:
    """Rebuild a default-configured partitioner from its recorded name, e.g. cassandra/12:16t."""
    try:
        name, rest = spec.split("/", 1)
        n_text, _, tokens = rest.partition(":")
        n = int(n_text)
        num_tokens = int(tokens.rstrip("t")) if tokens else 16
    except ValueError:
        raise InputError(f"cannot read the partitioner spec {spec!r}") from None
    return make_partitioner(name, n, key_type=key_type, num_tokens=num_tokens)


def stand_in_keys(names: Sequence[str], shards: Sequence[int], partitioner: Partitioner,
                  integer: bool) -> list[str]:
    """For each pseudonym, a deterministic stand-in key that lands on the given shard.

    Candidates ``name-0``, ``name-1``, ... (or integers derived from them) are tried until
    the partitioner agrees: about n_shards tries per key, hashed in vectorized rounds.
    """
    out: list[str | None] = [None] * len(names)
    todo = list(range(len(names)))
    attempt = 0
    while todo:
        if attempt > 64 * max(partitioner.n_shards, 1):
            raise InputError("could not find stand-in keys for every recorded shard: does the "
                             "partitioner own every shard?")
        cands = []
        for i in todo:
            text = f"{names[i]}-{attempt}"
            if integer:
                text = str(int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
                           >> 2)
            cands.append(text)
        placed = partitioner.shard_of(cands)
        left = []
        for i, cand, s in zip(todo, cands, placed, strict=True):
            if s == shards[i]:
                out[i] = cand
            else:
                left.append(i)
        todo = left
        attempt += 1
    return [str(o) for o in out]


def partitioner_from_placement(placement: dict, name: str, shards: int) -> Partitioner:
    """The partitioner a profile's ``placement`` recorded as ``name`` with ``shards`` shards.

    Raises
    ------
    InputError
        The profile recorded no placement for that store and shard count.
    """
    wanted = f"{name}/{shards}"
    specs = [spec for spec in placement if spec.split(":")[0] == wanted]
    if not specs:
        raise InputError(f"the profile recorded no tail placement for {wanted}: profile the "
                         f"data again with partitioner {name} and {shards} shards")
    for spec in specs:  # the recorded layout must be rebuilt exactly (same ring, same slots)
        part = from_spec(spec, placement[spec].key_type)
        if placement[spec].matches(part):
            return part
    raise InputError(f"the profile recorded {', '.join(specs)} with a custom layout (a ring, "
                     "slot or chunk file) that its name cannot rebuild: generate cannot follow "
                     "it")
