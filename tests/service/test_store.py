"""SQLiteStore: durability settings, id order, paging, bulk load and input checks."""

from __future__ import annotations

import sqlite3

import pytest

from hotshard.errors import InputError
from hotshard.service.store import SEQUENCE_BITS, Message, SQLiteStore, Store

T0 = 1_764_633_600_000  # 2025-12-02T00:00:00Z in ms


class FakeClock:
    """A settable millisecond clock."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(tmp_path, clock):
    s = SQLiteStore(tmp_path / "shard-0.db", clock=clock)
    yield s
    s.close()


def _walk(store: SQLiteStore, channel: str, page: int) -> list[Message]:
    """Every message of ``channel`` by paging newest first with ``before``."""
    out: list[Message] = []
    before = None
    while batch := store.history(channel, limit=page, before=before):
        out += batch
        before = batch[-1].id
    return out


def test_sqlite_store_satisfies_the_protocol(store):
    assert isinstance(store, SQLiteStore)
    s: Store = store  # type-checked structurally; a runtime call through the protocol:
    assert s.history("general") == []


def test_round_trip(store):
    mid = store.append("general", "alice", "hello, wörld", now_ms=T0 + 5)
    assert store.history("general") == [Message(mid, "general", "alice", "hello, wörld", T0 + 5)]
    assert store.history("general")[0].to_dict() == {
        "id": mid, "channel": "general", "user": "alice", "body": "hello, wörld", "ts_ms": T0 + 5}
    assert store.history("other") == []


def test_id_carries_the_time(store):
    mid = store.append("c", "u", "b", now_ms=T0)
    assert mid >> SEQUENCE_BITS == T0


def test_history_is_newest_first_and_per_channel(store, clock):
    ids = []
    for i in range(10):
        clock.now = T0 + i
        ids.append(store.append("a", "u", f"m{i}"))
        store.append("b", "u", f"other{i}")
    got = store.history("a")
    assert [m.id for m in got] == ids[::-1]
    assert [m.body for m in got] == [f"m{i}" for i in range(9, -1, -1)]
    assert [m.id for m in store.history("a", limit=3)] == ids[:-4:-1]


def test_before_is_strict(store):
    ids = [store.append("c", "u", str(i), now_ms=T0 + i) for i in range(5)]
    assert [m.id for m in store.history("c", before=ids[3])] == [ids[2], ids[1], ids[0]]
    assert store.history("c", before=ids[0]) == []


def test_paging_walks_the_whole_history_without_gaps_or_repeats(store, clock):
    ids = []
    for i in range(1000):
        clock.now = T0 + i // 3  # several messages per millisecond
        ids.append(store.append("room", f"u{i % 7}", f"msg {i}"))
        if i % 10 == 0:
            store.append("noise", "u", "x")
    walked = _walk(store, "room", page=37)
    assert [m.id for m in walked] == ids[::-1]
    assert [m.body for m in walked] == [f"msg {i}" for i in range(999, -1, -1)]


def test_ids_strictly_increase_under_a_frozen_clock(store):
    """More messages in one millisecond than a shard has ids for in it (2^12): the ids run on
    into the next millisecond's, still increasing. Most go in one bulk transaction (the same id
    allocator as ``append``, without 4,100 transactions of a ~4 ms disk sync each); the single
    appends after them cross the millisecond."""
    ids = store.append_many([(f"c{i % 3}", "u", "b", None) for i in range(4090)])
    ids += [store.append(f"c{i % 3}", "u", "b") for i in range(10)]  # these cross it
    assert all(b > a for a, b in zip(ids, ids[1:], strict=False))
    assert ids[0] >> SEQUENCE_BITS == T0
    assert ids[-1] >> SEQUENCE_BITS > T0


def test_ids_strictly_increase_when_the_clock_goes_backwards(store, clock):
    times = [T0 + 100, T0 + 100, T0 + 50, T0 + 10, T0 + 200, T0 + 199, T0 - 1000, T0 + 201]
    ids = []
    for t in times:
        clock.now = t
        ids.append(store.append("c", "u", "b"))
    assert all(b > a for a, b in zip(ids, ids[1:], strict=False))
    assert [m.ts_ms for m in store.history("c")] == times[::-1]  # ts is the caller's time
    assert ids[4] >> SEQUENCE_BITS == T0 + 200  # back on the clock once it passes the last id


def test_now_ms_argument_wins_over_the_clock(store, clock):
    clock.now = T0 + 10**6
    mid = store.append("c", "u", "b", now_ms=T0)
    assert mid >> SEQUENCE_BITS == T0


def test_reopened_store_keeps_acknowledged_writes_and_ids_increase(tmp_path, clock):
    path = tmp_path / "s.db"
    s = SQLiteStore(path, clock=clock)
    ids = [s.append("c", "u", f"b{i}") for i in range(20)]
    s.close()
    clock.now = T0 - 60_000  # the machine came back with its clock a minute behind
    with SQLiteStore(path, clock=clock) as s2:
        assert [m.id for m in s2.history("c")] == ids[::-1]
        later = s2.append("c", "u", "after restart")
        assert later > ids[-1]
        assert s2.history("c", limit=1)[0].body == "after restart"


def test_a_write_is_visible_to_an_independent_connection_once_acknowledged(tmp_path):
    path = tmp_path / "s.db"
    with SQLiteStore(path) as s:
        mid = s.append("c", "u", "durable", now_ms=T0)
        other = sqlite3.connect(path)
        try:
            assert other.execute("SELECT body FROM messages WHERE id = ?", (mid,)).fetchall() \
                == [("durable",)]
        finally:
            other.close()


def test_bulk_append_of_100k_rows_in_one_call(store):
    n = 100_000
    rows = [(f"ch{i % 10}", f"u{i % 97}", f"body {i}", T0 + i // 50) for i in range(n)]
    ids = store.append_many(rows)
    assert len(ids) == n
    assert all(b > a for a, b in zip(ids, ids[1:], strict=False))
    walked = _walk(store, "ch3", page=1000)
    expected = [i for i in range(n) if i % 10 == 3][::-1]
    assert [m.body for m in walked] == [f"body {i}" for i in expected]
    assert [m.id for m in walked] == [ids[i] for i in expected]
    assert walked[0].ts_ms == T0 + expected[0] // 50
    assert store.append("ch3", "u", "next") > ids[-1]


def test_bulk_append_with_a_bad_row_writes_nothing(store):
    rows = [("c", "u", "ok", T0), ("c", "u", "", T0)]
    with pytest.raises(InputError, match=r"rows\[1\].*body"):
        store.append_many(rows)
    assert store.history("c") == []
    with pytest.raises(InputError, match=r"rows\[0\]"):
        store.append_many([("c", "u", "b")])


def test_bulk_append_takes_the_clock_for_missing_times(store):
    (mid,) = store.append_many([("c", "u", "b", None)])
    assert mid >> SEQUENCE_BITS == T0
    assert store.append_many([]) == []


def test_wal_and_synchronous_full_are_set(store, tmp_path):
    assert store.pragma("journal_mode") == "wal"
    assert store.pragma("synchronous") == 2  # FULL
    other = sqlite3.connect(tmp_path / "shard-0.db")  # WAL is a property of the file
    try:
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        other.close()


def test_history_reads_use_the_key_without_sorting(store):
    plan = store._conn().execute(
        "EXPLAIN QUERY PLAN SELECT id, channel, user, body, ts_ms FROM messages "
        "WHERE channel = ? AND id < ? ORDER BY id DESC LIMIT ?", ("c", 10, 5)).fetchall()
    text = " ".join(str(row[-1]) for row in plan)
    assert "PRIMARY KEY" in text and "TEMP B-TREE" not in text


@pytest.mark.parametrize(("call", "name"), [
    (lambda s: s.append("", "u", "b"), "channel"),
    (lambda s: s.append("x" * 257, "u", "b"), "channel"),
    (lambda s: s.append("a\nb", "u", "b"), "channel"),
    (lambda s: s.append("a\x7fb", "u", "b"), "channel"),
    (lambda s: s.append(None, "u", "b"), "channel"),
    (lambda s: s.append("c", "", "b"), "user"),
    (lambda s: s.append("c", "u\x00", "b"), "user"),
    (lambda s: s.append("c", "u", ""), "body"),
    (lambda s: s.append("c", "u", "x" * 4097), "body"),
    (lambda s: s.append("c", "u", "é" * 2049), "body"),  # 4098 bytes in UTF-8
    (lambda s: s.append("c", "u", b"bytes"), "body"),
    (lambda s: s.append("c", "u", "b", now_ms=-1), "now_ms"),
    (lambda s: s.append("c", "u", "b", now_ms=1.5), "now_ms"),
    (lambda s: s.history(""), "channel"),
    (lambda s: s.history("c", limit=0), "limit"),
    (lambda s: s.history("c", limit=1001), "limit"),
    (lambda s: s.history("c", limit=True), "limit"),
    (lambda s: s.history("c", limit="50"), "limit"),
    (lambda s: s.history("c", before=0), "before"),
    (lambda s: s.history("c", before=-5), "before"),
    (lambda s: s.history("c", before="12"), "before"),
])
def test_bad_input_raises_input_error_naming_the_parameter(store, call, name):
    with pytest.raises(InputError, match=rf"^{name}\b"):
        call(store)


def test_limits_at_their_edges_are_accepted(store):
    store.append("x" * 256, "u", "é" * 2048)  # 256 chars, 4096 bytes
    assert len(store.history("x" * 256, limit=1000)) == 1
    assert store.history("x" * 256, limit=1, before=1) == []


def test_max_body_bytes_is_configurable(tmp_path, clock):
    with SQLiteStore(tmp_path / "s.db", clock=clock, max_body_bytes=10) as s:
        s.append("c", "u", "0123456789")
        with pytest.raises(InputError, match="^body must be at most 10 bytes"):
            s.append("c", "u", "0123456789a")
    with pytest.raises(InputError, match="^max_body_bytes"):
        SQLiteStore(tmp_path / "t.db", max_body_bytes=0)


def test_bad_paths_are_refused(tmp_path):
    with pytest.raises(InputError, match="^path"):
        SQLiteStore(":memory:")
    with pytest.raises(InputError, match="^path's directory"):
        SQLiteStore(tmp_path / "missing" / "s.db")
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 100)
    with pytest.raises(InputError, match="^path"):
        SQLiteStore(junk)


def test_a_closed_store_refuses_calls(tmp_path):
    s = SQLiteStore(tmp_path / "s.db")
    s.close()
    s.close()  # idempotent
    with pytest.raises(InputError, match="closed"):
        s.append("c", "u", "b", now_ms=T0)


def test_ids_never_repeat_across_many_channels(store):
    ids = [store.append(f"c{i % 13}", "u", "b", now_ms=T0 + i // 4) for i in range(2000)]
    assert len(set(ids)) == len(ids)
