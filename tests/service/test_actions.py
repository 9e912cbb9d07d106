"""The service's mitigation actions, as ``serve`` logs them in ``GET /stats`` and counts them
in ``/metrics``: when a channel became hot (the read mitigations apply to it from then), when
its history was split, when it was lifted, on which shard, with the share behind it."""

from __future__ import annotations

import asyncio

import pytest

from hotshard.detect.sketch import SlidingHotKeys
from hotshard.mitigations import Mitigations
from hotshard.service import chat as chat_module
from hotshard.service.admin import AdminGuard, service_names
from hotshard.service.chat import ChatService
from hotshard.service.gateway import create_app
from hotshard.service.router import Router
from hotshard.service.split import SplitRegistry
from tests.service.test_gateway import TOKEN, FakeSupervisor, request

EPOCH_S = 1_800_000_000.0


@pytest.fixture
def service(tmp_path, monkeypatch):
    """A ChatService over a fake backend, its sketch and wall clock on a clock the test
    moves (``now[0]``, seconds); the hot set refreshed at every request."""
    monkeypatch.setattr(chat_module, "HOT_REFRESH_S", -1.0)
    now = [0.0]
    router = Router("kafka", 4)
    svc = ChatService(FakeSupervisor(4, "ok"), router, SplitRegistry(tmp_path, router),
                      mitigations=Mitigations(split_into=4, cache_ttl_s=1.0, coalesce=True,
                                              hot_share=0.3),
                      clock_ms=lambda: int((EPOCH_S + now[0]) * 1000),
                      hotkeys=SlidingHotKeys(window_s=2.0, slices=4, capacity=64,
                                             clock=lambda: now[0]))
    return svc, now


def _traffic(svc, now, start: float, end: float, hot_every: int | None) -> None:
    """Reads at 100 a second over ten channels; every ``hot_every``-th goes to "event"."""
    async def run() -> None:
        for i in range(int((end - start) * 100)):
            now[0] = start + i / 100
            channel = "event" if hot_every and i % hot_every == 0 else f"c{i % 10}"
            await svc.read(channel)
    asyncio.run(run())


def test_a_channel_made_hot_then_split_then_lifted_is_logged_with_its_shard_and_share(service):
    svc, now = service
    _traffic(svc, now, 0.0, 3.0, None)        # ten channels at 10% each: none above 30%
    assert list(svc.actions) == []
    _traffic(svc, now, 3.0, 6.0, 2)           # "event" takes half the reads from t = 3 s
    hot = [a for a in svc.actions if a["action"] == "hot"]
    assert [a["key"] for a in hot] == ["event"]
    # found within the sketch's window of the onset: its guaranteed share passes 30% once
    # about 0.6 of its 2 s window holds the event (half its reads), and that share is logged
    assert 0.0 < hot[0]["at"] - (EPOCH_S + 3.0) <= 2.0
    assert 0.3 <= hot[0]["share"] <= 0.5
    assert hot[0]["shard"] == svc.router.shard_of("event")
    assert hot[0]["applies"] == ["cache", "coalesce"]
    asyncio.run(svc.post("event", "ann", "hello"))   # its next write splits its history
    split = svc.actions[-1]
    assert (split["action"], split["key"], split["into"]) == ("split", "event", 4)
    _traffic(svc, now, 6.0, 10.0, None)       # the event is over
    lifted = svc.actions[-1]
    assert (lifted["action"], lifted["key"]) == ("lifted", "event")
    assert lifted["share"] < 0.3 and lifted["at"] - (EPOCH_S + 6.0) <= 2.0
    assert [a["action"] for a in svc.actions] == ["hot", "split", "lifted"]
    assert svc.hot_channels() == ()


def test_stats_and_metrics_carry_the_actions(service):
    svc, now = service
    _traffic(svc, now, 0.0, 3.0, 2)
    app = create_app(svc, max_body_bytes=4096,
                     admin=AdminGuard(TOKEN, service_names("127.0.0.1", 8080)))
    stats = request(app, "GET", "/stats").json()
    assert [a["action"] for a in stats["actions"]] == ["hot"]
    assert set(stats["actions"][0]) >= {"at", "key", "shard", "action", "share"}
    metrics = request(app, "GET", "/metrics").text
    assert 'hotshard_mitigation_actions_total{action="hot"} 1.0' in metrics
    shard = svc.router.shard_of("event")
    assert f'hotshard_hot_channels{{shard="{shard}"}} 1.0' in metrics


def test_switching_the_mitigations_off_lifts_every_hot_channel(service):
    svc, now = service
    _traffic(svc, now, 0.0, 3.0, 2)
    asyncio.run(svc.set_mitigations(Mitigations()))
    assert [a["action"] for a in svc.actions] == ["hot", "lifted"]
    assert svc.hot_channels() == ()


def test_a_channel_whose_traffic_stopped_is_lifted_when_stats_are_read(service):
    """No request after the event: the hot set is read again by /stats itself (and
    /metrics), so the lift is logged when the window has emptied, not at the next request
    (which may be the next run's)."""
    svc, now = service
    _traffic(svc, now, 0.0, 3.0, 2)
    assert svc.hot_channels() == ("event",)
    now[0] = 30.0   # every slice of the 2 s window has expired
    app = create_app(svc, max_body_bytes=4096,
                     admin=AdminGuard(TOKEN, service_names("127.0.0.1", 8080)))
    actions = request(app, "GET", "/stats").json()["actions"]
    assert [a["action"] for a in actions] == ["hot", "lifted"]
    assert actions[1]["at"] == pytest.approx(EPOCH_S + 30.0)
    assert 'hotshard_hot_channels{shard="' in request(app, "GET", "/metrics").text
    assert svc.hot_channels() == ()
