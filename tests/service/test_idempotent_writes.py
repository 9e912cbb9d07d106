"""Writes with a fate the client can know: an Idempotency-Key stores a retried write once, and
a 503/504 to a write already handed to its shard says its outcome is unknown (no Retry-After,
which would invite a blind retry)."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
import uuid

import httpx
import pytest

from hotshard.errors import IdempotencyConflict, InputError
from hotshard.service.store import SQLiteStore
from tests.service._traffic import serve


def test_the_store_keeps_a_keyed_write_once(tmp_path):
    with SQLiteStore(tmp_path / "s.sqlite3") as store:
        first = store.append("c1", "ann", "hello", idempotency_key="k-1")
        again = store.append("c1", "ann", "hello", idempotency_key="k-1")
        other = store.append("c1", "ann", "hello", idempotency_key="k-2")
        plain = store.append("c1", "ann", "hello")
        assert again == first and len({first, other, plain}) == 3
        with pytest.raises(IdempotencyConflict, match="used for another message"):
            store.append("c1", "ann", "changed", idempotency_key="k-1")
        with pytest.raises(IdempotencyConflict, match="used for another message"):
            store.append("c2", "ann", "hello", idempotency_key="k-1")
        with pytest.raises(InputError, match="1 to 200 visible ASCII"):
            store.append("c1", "ann", "x", idempotency_key="has space")
        assert len(store.history("c1")) == 3
    db = sqlite3.connect(tmp_path / "s.sqlite3")
    assert db.execute("SELECT count(*) FROM writes").fetchone()[0] == 2


@pytest.mark.slow
def test_retried_writes_to_a_stopped_worker_are_stored_exactly_once(tmp_path):
    """A worker stopped 12 s under writes that are retried as a client would on 503/504 (with
    the same Idempotency-Key, until one is acknowledged): every message is stored once. The
    writes answered 504 while it was stopped were queued to it and stored when it resumed;
    their retries are answered with the first id. Each 504 to a write says the outcome is
    unknown and carries no Retry-After."""
    with serve(tmp_path / "data", "--shards", "2", "--shard-timeout", "1s") as svc:
        channels = [f"ch{i}" for i in range(8)]
        shard_of = {c: int(svc.post(f"/channels/{c}/messages", json={
            "user": "u", "body": "warm"}).headers["x-shard"]) for c in channels}
        frozen = shard_of[channels[0]]
        pid = svc.stats()["shards"][frozen]["pid"]
        os.kill(pid, signal.SIGSTOP)
        resumed_at = time.monotonic() + 12.0
        unknown = 0
        sent: dict[str, tuple[str, str]] = {}
        acked: dict[str, int] = {}
        try:
            with httpx.Client(base_url=svc.url, timeout=30) as client:
                for i in range(20):
                    channel = channels[i % len(channels)]
                    key, body = str(uuid.uuid4()), f"m{i}"
                    sent[key] = (channel, body)
                    while True:
                        if time.monotonic() >= resumed_at:
                            os.kill(pid, signal.SIGCONT)
                        r = client.post(f"/channels/{channel}/messages",
                                        json={"user": "u", "body": body},
                                        headers={"Idempotency-Key": key})
                        if r.status_code == 201:
                            acked[key] = r.json()["id"]
                            break
                        assert r.status_code in (503, 504), r.text
                        assert "Retry-After" not in r.headers
                        assert "outcome is unknown" in r.json()["error"]
                        unknown += 1
                        time.sleep(0.2)
        finally:
            os.kill(pid, signal.SIGCONT)
        assert unknown >= 5   # the stopped shard's writes were answered 504, then retried
        for channel in channels:
            page = svc.get(f"/channels/{channel}/messages", params={"limit": 1000}).json()
            bodies = [m["body"] for m in page["messages"] if m["body"] != "warm"]
            mine = sorted(b for k, (c, b) in sent.items() if c == channel)
            assert sorted(bodies) == mine, (channel, bodies, mine)
        assert len(acked) == 20
        # a key used again for another message is not a retry: 409, nothing stored
        key, (channel, _) = next(iter(sent.items()))
        r = httpx.post(f"{svc.url}/channels/{channel}/messages", headers={
            "Idempotency-Key": key}, json={"user": "u", "body": "another"}, timeout=10)
        assert r.status_code == 409 and "used for another message" in r.json()["error"]
