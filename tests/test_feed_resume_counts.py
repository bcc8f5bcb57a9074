"""A feed's count of what the engine has taken (engine/service/feed_resume.py) against a real service on 127.0.0.1:
its closing line must add up whenever the engine's own counters do, however late the `_rejects/` it hears."""

from __future__ import annotations

import pytest

from conftest import serving, tiny_tick_checkpoint
from test_server import wait_for
from connectors.feed import FeedClient
from connectors.reject_watch import RejectWatch
from connectors.ticks import trade
from engine.service.client import ControlClient
from engine.service.config import ServiceConfig
from engine.service.feed_resume import ControlFeedResume

TS = 1_723_161_254_087_896_567


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"), max_position_embeddings=256)


@pytest.fixture
def server(checkpoint):
    endpoints = {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"}
    with serving(ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 2048},
                                          "endpoints": endpoints, "log": {"enabled": False}})) as served:
        yield served


def test_rejections_heard_after_the_engine_placed_the_feed_are_neither_lost_nor_counted_twice(server) -> None:
    """A flood against `when_behind: shed`: the engine accepts some ticks, refuses others among them and then every
    one past its last accepted tick, while the feed hears the refusals late (PUB/SUB lags the control reply). Here
    the refusals are bad prices, so the engine's choice is the test's: of 20 ticks it accepts 1, 3, 5, 7 and 9.
    Asked before any refusal is heard, the feed places itself by the engine's last tick (9 seen); asked again once
    all 15 are heard, it must count all 20 as taken. (It read the first answer as a count that no longer fit,
    moved its base there, and then counted the 4 refusals before tick 9 twice, which no longer fit either: it moved
    its base again with the 11 refusals past tick 9 in it, and never counted those: "11 not accounted for" for
    good, as a flood once ended "15397 not accounted for" while the engine's counters covered every tick.)"""
    ticks = [trade("S", TS + i, 100.0, 1.0, "buy") for i in range(20)]
    refused = [i for i in range(20) if i >= 9 or i % 2]  # (0-based: the 1st, 3rd, ... 9th are accepted)
    wire = [{**t.to_wire(), "price": 0.0} if i in refused else t.to_wire() for i, t in enumerate(ticks)]
    control = server.endpoints["control"]
    resume = ControlFeedResume(lambda: ControlClient(control, timeout_s=5), confirm_every_s=3600)
    try:
        with FeedClient(server.endpoints["ingest"]) as client, RejectWatch(server.endpoints["answers"]) as watch, \
                ControlClient(control, timeout_s=5) as asking:
            watch.streams.add("S")
            watch.wait_ready(30)
            client.send(wire)  # (dicts: a Tick at price 0 is refused when built)
            resume.sent(ticks, watch.rejected_by_stream)
            wait_for(lambda: server.pipeline.rejected["nonpositive_price"] == 15, timeout_s=30)
            # the engine's own counts: 5 accepted + 15 refused = 20; its last accepted tick the 9th
            assert asking.call("streams", streams=["S"])["streams"]["S"]["ticks"] == 5
            # the refusals wait unread at the feed's SUB (published, not yet heard): placed by the 9th tick
            assert resume.unconfirmed(watch.rejected_by_stream) == 11
            wait_for(lambda: watch.poll(100) is not None and watch.rejected_by_stream["S"] == 15, timeout_s=30)
            assert resume.unconfirmed(watch.rejected_by_stream) == 0  # every refusal heard: all 20 taken
            assert resume.unconfirmed(watch.rejected_by_stream) == 0
    finally:
        resume.close()
