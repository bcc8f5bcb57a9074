"""A feed's count of what the engine has taken (engine/service/feed_resume.py) against a real service on 127.0.0.1:
its closing line must add up whenever the engine's own counters do, however late the `_rejects/` it hears."""

from __future__ import annotations

import pytest

from conftest import serving_unlogged, tiny_tick_checkpoint
from test_server import wait_for
from connectors.feed import FeedClient
from connectors.feed_stats import FeedStats
from connectors.reject_watch import RejectWatch
from connectors.ticks import trade
from engine.service.client import ControlClient
from engine.service.feed_resume import ControlFeedResume

TS = 1_723_161_254_087_896_567


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"), max_position_embeddings=256)


@pytest.fixture
def server(checkpoint):
    with serving_unlogged(checkpoint) as served:
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


def test_two_feeds_of_one_stream_each_count_only_their_own_rejections_and_the_later_one_is_told(server,
                                                                                              capsys) -> None:
    """Review 163 (finding 9): two `flashtick feed`s of one stream at once. The rejections on `_rejects/` carried
    only the stream, so each feed counted the other's as its own ("488 rejected" in both summaries, all of them
    one feed's), and nothing said that another publisher fed the stream. Each feed now tags its messages, the
    engine echoes the tag in their rejections (`topic`), and a feed counts only its own; the one whose ticks fall
    behind hears, once, that the engine's last tick of the stream came from another publisher."""
    ingest, answers, control = (server.endpoints[name] for name in ("ingest", "answers", "control"))
    resume = ControlFeedResume(lambda: ControlClient(control, timeout_s=5), confirm_every_s=0)  # the early feed's
    try:
        with FeedClient(ingest, tag="feed/late") as late_feed, FeedClient(ingest, tag="feed/early") as early_feed, \
                RejectWatch(answers, tag="feed/late") as late_watch, \
                RejectWatch(answers, tag="feed/early") as early_watch:
            for watch in (late_watch, early_watch):
                watch.streams.add("S")
                watch.wait_ready(30)
            late_feed.send([trade("S", TS + 100 + i, 100.0, 1.0, "buy") for i in range(3)])
            wait_for(lambda: server.pipeline.ticks_in == 3, timeout_s=30)
            early = [trade("S", TS + i, 100.0, 1.0, "buy") for i in range(5)]
            early_feed.send(early)  # all older than the other feed's last tick: refused
            resume.sent(early, early_watch.rejected_by_stream)  # (asks the engine at once: confirm_every_s=0)
            wait_for(lambda: early_watch.poll(100) is not None and early_watch.rejected == {"ts_backwards": 5},
                     timeout_s=30)
            # the same rejections, in the same order, reach the other feed: counted as another publisher's
            wait_for(lambda: late_watch.poll(100) is not None and late_watch.others == 5, timeout_s=30)
            assert late_watch.rejected == {} and late_watch.rejected_by_stream == {}, late_watch.rejected
            assert early_watch.others == 0 and early_watch.rejected_by_stream == {"S": 5}
            resume.sent([], early_watch.rejected_by_stream)  # asked again: said once only
    finally:
        resume.close()
    err = capsys.readouterr().err
    assert err.count("another publisher is feeding the same stream") == 1, err
    assert "warning: stream S: the engine's last tick of it is stamped after every tick this feed sent of it" in err
    summary = FeedStats(5, 1, 0.0, rejected={}, others=5).summary()
    assert summary == "sent 5 ticks in 1 message over 0.0 s; 0 rejected; 5 rejections of ticks another publisher " \
                      "sent of these streams (not counted here)", summary
