"""Partitioners against the stores' own published test vectors (sources cited per test)."""

import hashlib
import struct

import numpy as np
import pytest

from hotshard.errors import InputError
from hotshard.shards import _hashes as H
from hotshard.shards.partitioners import encode_keys, make_partitioner, partitioner_for


def test_redis_crc16_and_slots():
    # Redis cluster spec (cluster-spec.md): CRC16-XMODEM of "123456789" is 0x31C3
    assert H.crc16_xmodem(*encode_keys(["123456789"], "text"))[0] == 0x31C3
    redis = make_partitioner("redis-cluster", 3)
    # `CLUSTER KEYSLOT somekey` = 11058, `foo{hash_tag}` = 2515 (Redis docs / tests)
    assert redis.slots(["somekey", "foo{hash_tag}"]).tolist() == [11058, 2515]
    # hash tags: both keys hash only "user1000", so they share a slot
    a, b = redis.slots(["{user1000}.following", "{user1000}.followers"])
    assert a == b == redis.slots(["user1000"])[0]
    # an empty tag "{}" does not count: the whole key is hashed
    assert redis.slots(["foo{}{bar}"])[0] == H.crc16_xmodem(
        *encode_keys(["foo{}{bar}"], "text"))[0] & 0x3FFF


def test_redis_slot_ranges_match_redis_cli():
    # redis-cli --cluster create with 3 masters: 0-5460, 5461-10922, 10923-16383
    own = make_partitioner("redis-cluster", 3)
    assert own.slot_node[[0, 5460, 5461, 10922, 10923, 16383]].tolist() == [0, 0, 1, 1, 2, 2]


def test_kafka_murmur2_vectors():
    # Kafka clients UtilsTest.testMurmur2
    kafka = make_partitioner("kafka", 64)
    assert kafka.hashes(["21", "foobar", "abc"]).tolist() == [-973932308, -790332482,
                                                               479470107]
    # partition = (h & 0x7fffffff) % n: positive even for negative hashes (not abs)
    assert kafka.shard_of(["21"])[0] == (-973932308 & 0x7FFFFFFF) % 64
    # the same vectors through the compiled kernel (a call of 64 keys or more takes it)
    many = kafka.hashes(["21", "foobar", "abc"] * 22)
    assert many[:3].tolist() == [-973932308, -790332482, 479470107]


@pytest.mark.parametrize("kind", ["text", "bigint"])
def test_kafka_murmur2_python_twin_is_the_kernel(kind):
    """A few keys are hashed by Python (a gateway need not load numba), many by the
    compiled kernel: both give the same hash for every length and tail (0-3 bytes left
    after the 4-byte blocks), for non-ASCII text and for negative and extreme integers."""
    from hotshard.shards.partitioners import _murmur2_small

    rng = np.random.default_rng(5)
    if kind == "text":
        keys = ["".join(chr(c) for c in rng.integers(32, 0x2FF, n)) for n in
                rng.integers(0, 40, 3000)] + ["", "a", "ab", "abc", "abcd"]
    else:
        keys = [str(k) for k in rng.integers(-2**63, 2**63 - 1, 3000, endpoint=True)] + [
            str(-2**63), str(2**63 - 1), "0", "-1"]
    data, offsets = encode_keys(keys, kind)
    assert _murmur2_small(data, offsets).tolist() == H.kafka_murmur2(data, offsets).tolist()


@pytest.mark.parametrize(("data", "token"), [
    # DataStax drivers' TokenTests ("inputs and result values from Cassandra")
    (bytes(range(1, 17)), -5563837382979743776),
    (bytes(range(2, 18)), -1513403162740402161),
    (b"123", -7468325962851647638),
    (b"\xfe" * 8, -8927430733708461935),  # tail bytes >= 0x80: Java's signed bytes
    (b"\xe2\xe7", -8582699461035929883),
    # gocql issue #1033: a composite partition key
    (bytes.fromhex("00104327529fb645dd00b883ec39ae448bb800000400066a6b00"),
     -9223371632693506265),
])
def test_cassandra_murmur3_tokens(data, token):
    offsets = np.array([0, len(data)], dtype=np.int64)
    assert H.cassandra_tokens(np.frombuffer(data, dtype=np.uint8), offsets)[0] == token


def test_cassandra_signed_tail_differs_from_plain_murmur3():
    data = np.frombuffer(b"\xfe" * 8, dtype=np.uint8)
    offsets = np.array([0, 8], dtype=np.int64)
    assert H.cassandra_tokens(data, offsets)[0] != H.murmur3_64(data, offsets)[0]


def test_cassandra_bigint_and_text_keys():
    ring = make_partitioner("cassandra", 4, key_type="bigint")
    # bigint keys are serialised as 8 bytes big-endian, then hashed
    raw = struct.pack(">q", 4711)
    expected = H.cassandra_tokens(np.frombuffer(raw, dtype=np.uint8),
                                  np.array([0, 8], dtype=np.int64))[0]
    assert ring.tokens(["4711"])[0] == expected
    text = make_partitioner("cassandra", 4)
    assert text.tokens(["123"])[0] == -7468325962851647638
    # the owner is the first ring token >= the key token, wrapping around
    tok = ring.tokens(["4711"])[0]
    i = np.searchsorted(ring.ring_tokens, tok) % ring.ring_tokens.size
    assert ring.shard_of(["4711"])[0] == ring.ring_nodes[i]
    assert ring.ownership().sum() == pytest.approx(1.0)


def test_elasticsearch_murmur3_utf16():
    # Elasticsearch Murmur3HashFunctionTests: "hello" -> 0xd7c31989 over UTF-16LE chars
    es = make_partitioner("elasticsearch", 5)
    assert es.hashes(["hello"])[0] & 0xFFFFFFFF == 0xD7C31989
    h = es.hashes(["hello"])[0]
    assert es.shard_of(["hello"])[0] == h % 5  # floorMod (>= 9.4)
    old = make_partitioner("elasticsearch", 5, routing_shards=640)
    assert old.shard_of(["hello"])[0] == (h % 640) // 128


def test_mongodb_hashed_vectors():
    # mongo src/mongo/db/hasher_test.cpp: hash(42) and hash("abc") with seed 0
    assert make_partitioner("mongodb", 2, key_type="bigint").hashes(["42"])[0] \
        == -944302157085130861
    assert make_partitioner("mongodb", 2).hashes(["abc"])[0] == 8478485326885698097


def test_md5_kernel_matches_hashlib():
    msgs = [b"", b"abc", b"a" * 55, b"a" * 56, b"a" * 64, bytes(range(256)) * 3]
    offsets = np.concatenate([[0], np.cumsum([len(m) for m in msgs])]).astype(np.int64)
    got = H.md5_prefix64(np.frombuffer(b"".join(msgs), dtype=np.uint8), offsets)
    want = [struct.unpack("<q", hashlib.md5(m).digest()[:8])[0] for m in msgs]
    assert got.tolist() == want


def test_jump_hash_is_consistent_and_balanced():
    keys = H.murmur3_64(*encode_keys([f"k{i}" for i in range(20000)], "text"))
    a = H.jump(keys, 10)
    b = H.jump(keys, 11)
    moved = a != b
    assert np.all(b[moved] == 10)  # growing the cluster only moves keys to the new shard
    assert abs(moved.mean() - 1 / 11) < 0.01
    counts = np.bincount(a, minlength=10)
    assert counts.min() > 1800 and counts.max() < 2200
    # against a plain transcription of Lamping & Veach's listing (arbitrary-precision ints)
    def reference(key: int, buckets: int) -> int:
        b, j = -1, 0
        while j < buckets:
            b = j
            key = (key * 2862933555777941757 + 1) % 2**64
            j = int((b + 1) * ((1 << 31) / ((key >> 33) + 1)))
        return b

    sample = keys[:300]
    for buckets in (1, 7, 1000, 2**20):
        want = [reference(int(k) % 2**64, buckets) for k in sample]
        assert H.jump(sample, buckets).tolist() == want


@pytest.mark.parametrize("name", ["ketama", "rendezvous", "modulo", "jump", "kafka",
                                  "mongodb", "cassandra", "redis-cluster", "elasticsearch"])
def test_every_partitioner_places_keys_on_valid_shards(name):
    p = make_partitioner(name, 7)
    keys = [f"channel-{i}" for i in range(5000)]
    shards = p.shard_of(keys)
    assert shards.min() >= 0 and shards.max() < 7
    own = p.ownership()
    assert own.sum() == pytest.approx(1.0)
    # the empirical split follows the ownership (binomial, 5 sd)
    emp = np.bincount(shards, minlength=7) / len(keys)
    assert np.all(np.abs(emp - own) < 5 * np.sqrt(own * (1 - own) / len(keys)))


def test_rendezvous_moves_only_keys_of_the_removed_shard():
    keys = [f"k{i}" for i in range(3000)]
    five = make_partitioner("rendezvous", 5).shard_of(keys)
    four = make_partitioner("rendezvous", 4).shard_of(keys)
    stay = five < 4
    assert np.array_equal(five[stay], four[stay])


def test_modulo_on_integer_keys():
    p = make_partitioner("modulo", 16, key_type="bigint")
    assert p.shard_of(["4711", "-3"]).tolist() == [4711 % 16, (-3) % 16]


def test_map_partitioner(tmp_path):
    f = tmp_path / "map.csv"
    f.write_text("key,shard\na,0\nb,2\n")
    p = make_partitioner("map", map_file=str(f))
    assert p.n_shards == 3 and p.shard_of(["b", "a"]).tolist() == [2, 0]
    with pytest.raises(InputError, match="not in the map table"):
        p.shard_of(["zzz"])


def test_partitioner_for_types_keys_by_the_one_rule(tmp_path):
    assert partitioner_for("kafka", 8, integer_keys=True).key_type == "bigint"
    assert partitioner_for("kafka", 8, integer_keys=False).key_type == "text"
    assert partitioner_for("kafka", 8, integer_keys=True, key_type="text").key_type == "text"
    # Redis Cluster hashes the key's text whatever it is told
    assert partitioner_for("redis-cluster", 3, integer_keys=True,
                           key_type="bigint").key_type == "text"
    keys = ["4711", "982"]
    assert partitioner_for("cassandra", 12, integer_keys=True).shard_of(keys).tolist() == \
        make_partitioner("cassandra", 12, key_type="bigint").shard_of(keys).tolist()
    f = tmp_path / "map.csv"
    f.write_text("key,shard\na,0\nb,2\n")
    assert partitioner_for("map", integer_keys=False, map_file=str(f)).n_shards == 3
    with pytest.raises(InputError, match="lays out 3 shards, not 4"):
        partitioner_for("map", 4, integer_keys=False, map_file=str(f))
    with pytest.raises(InputError, match="how many shards"):
        partitioner_for("jump", integer_keys=True)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"name": "dynamo", "shards": 3}, "unknown partitioner"),
    ({"name": "kafka", "shards": 0}, "shards must be an integer >= 1"),
    ({"name": "kafka", "shards": None}, "how many shards"),
    ({"name": "elasticsearch", "shards": 3, "routing_shards": 10}, "multiple of shards"),
])
def test_bad_partitioner_arguments(kwargs, message):
    name = kwargs.pop("name")
    shards = kwargs.pop("shards")
    with pytest.raises(InputError, match=message):
        make_partitioner(name, shards, **kwargs)


def test_ring_and_slot_files_must_cover_the_space(tmp_path):
    slots = tmp_path / "slots.txt"
    slots.write_text("0 8000 a\n8001 16000 b\n")
    with pytest.raises(InputError, match="leaves 383 slots unassigned"):
        make_partitioner("redis-cluster", slots_map=str(slots))
    slots.write_text("0 8000 a\n8001 16383 b\n")
    assert make_partitioner("redis-cluster", slots_map=str(slots)).n_shards == 2
    ring = tmp_path / "ring.txt"
    ring.write_text("100 a\n100 b\n")
    with pytest.raises(InputError, match="token twice"):
        make_partitioner("cassandra", ring_file=str(ring))
    lo, hi = -(2**62), 2**62
    ring.write_text(f"{lo} a\n{hi} b\n")
    p = make_partitioner("cassandra", ring_file=str(ring))
    keys = [str(i) for i in range(200)]
    tokens = p.tokens(keys)
    # owner = first ring token >= the key's token, wrapping past the last back to node a
    want = np.where((tokens > lo) & (tokens <= hi), 1, 0)
    assert p.shard_of(keys).tolist() == want.tolist()
    assert 0 < want.sum() < len(keys)  # both nodes own some of these keys


def test_mongodb_chunk_file(tmp_path):
    f = tmp_path / "chunks.txt"
    f.write_text("MinKey 0 shardA\n0 MaxKey shardB\n")
    p = make_partitioner("mongodb", key_type="bigint", chunks_file=str(f))
    assert p.n_shards == 2
    h = p.hashes(["42"])[0]  # -944302157085130861 < 0: the first chunk
    assert p.shard_of(["42"])[0] == (0 if h < 0 else 1)
    assert p.ownership() == pytest.approx([0.5, 0.5])
    f.write_text("MinKey 0 a\n5 MaxKey b\n")
    with pytest.raises(InputError, match="tile the hashed key space"):
        make_partitioner("mongodb", chunks_file=str(f))


FILE_KINDS = [  # (make_partitioner arguments, the file's name in messages, a valid file)
    ({"name": "cassandra", "kw": "ring_file"}, "Cassandra ring file", "-5 a\n5 b\n"),
    ({"name": "redis-cluster", "kw": "slots_map"}, "Redis Cluster slots map",
     "0 8191 a\n8192 16383 b\n"),
    ({"name": "map", "kw": "map_file"}, "key-to-shard map", "key,shard\na,0\nb,1\n"),
    ({"name": "mongodb", "kw": "chunks_file"}, "MongoDB chunks file",
     "MinKey 0 a\n0 MaxKey b\n"),
]
NOT_TEXT = [
    (bytes(range(256)), "it holds binary data"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "it holds binary data"),
    (b"\x00" * 64, "it holds binary data"),
    ("caf\u00e9 0\n".encode("latin-1"), "byte 0xe9 at offset 3 is not UTF-8"),
]


@pytest.mark.parametrize(("kind", "what", "valid"), FILE_KINDS)
@pytest.mark.parametrize(("data", "why"), NOT_TEXT)
def test_layout_files_that_are_not_text_are_refused(tmp_path, kind, what, valid, data, why):
    f = tmp_path / "layout"
    f.write_bytes(data)
    with pytest.raises(InputError, match=f"is not a text {what}: {why}; expected '"):
        make_partitioner(kind["name"], 2, **{kind["kw"]: str(f)})


@pytest.mark.parametrize(("kind", "what", "valid"), FILE_KINDS)
def test_layout_files_empty_or_with_a_bom(tmp_path, kind, what, valid):
    f = tmp_path / "layout"
    for empty in (b"", b" \n\n"):
        f.write_bytes(empty)
        with pytest.raises(InputError, match=f"is empty: expected a {what} of '"):
            make_partitioner(kind["name"], 2, **{kind["kw"]: str(f)})
    f.write_bytes(b"\xef\xbb\xbf" + valid.encode())  # a UTF-8 BOM (Windows editors) is fine
    assert make_partitioner(kind["name"], 2, **{kind["kw"]: str(f)}).n_shards == 2
    with pytest.raises(InputError, match=f"no such {what}"):
        make_partitioner(kind["name"], 2, **{kind["kw"]: str(tmp_path / "missing")})


@pytest.mark.parametrize(("name", "kw", "text", "message"), [
    ("redis-cluster", "slots_map", "0 x a\n", r"line 1: expected 'start end node' with integer"),
    ("redis-cluster", "slots_map", "9 3 a\n", "slot range 9-3 is not a range within 0-16383"),
    ("cassandra", "ring_file", f"{2**63} a\n", "outside the Murmur3 range"),
    ("cassandra", "ring_file", "12 a\nx b\n", r"line 2: expected 'token node', got 'x b'"),
    ("mongodb", "chunks_file", f"MinKey 0 a\n0 {2**64} b\n", "is not a range of the hashed"),
    ("mongodb", "chunks_file", "MinKey 0 a\n0 0 b\n0 MaxKey c\n", "is not a range of the"),
])
def test_malformed_layout_lines(tmp_path, name, kw, text, message):
    f = tmp_path / "layout.txt"
    f.write_text(text)
    with pytest.raises(InputError, match=message):
        make_partitioner(name, 2, **{kw: str(f)})


def test_place_keys_is_the_shard_command_as_a_call():
    """`hotshard shard` in the library: the rule types the keys, the store places them, its
    own figures come along, and mixed keys say the integers went as text."""
    import hotshard

    integers = hotshard.place_keys(["4711", "982"], "kafka", 64)
    assert [p.key_type for p in integers.keys] == ["bigint", "bigint"]
    assert integers.mixed_note is None
    ring = partitioner_for("kafka", 64, integer_keys=True)
    assert [p.shard for p in integers.keys] == [int(s) for s in ring.shard_of(["4711", "982"])]
    mixed = hotshard.place_keys(["21", "foobar"], "kafka", 64)
    assert {p.key_type for p in mixed.keys} == {"text"} and "1 of 2 looks like" in mixed.mixed_note
    import binascii

    slots = hotshard.place_keys(["{user1000}.following"], "redis-cluster", 3)
    tag_slot = binascii.crc_hqx(b"user1000", 0) % 16384   # CRC16 (XMODEM) of the hash tag
    assert dict(slots.keys[0].details)["slot"] == tag_slot
    assert slots.keys[0].to_dict()["slot"] == tag_slot
