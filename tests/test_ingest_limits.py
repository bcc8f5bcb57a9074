"""Hostile and careless ingest over real sockets on 127.0.0.1 (ephemeral ports): every refused stream name,
oversized or implausible tokenized item is counted with its reason while the good ticks around it go in; the
feed sees its own rejections, and two live synthetic feeds in a row both go in."""

from __future__ import annotations

import time

import msgpack
import pytest

from conftest import serving, tiny_tick_checkpoint
from test_server import feed  # noqa: F401  (a PUSH socket into this module's `server`)
from connectors.feed import FeedClient
from connectors.feed_pump import run_feed
from connectors.reject_watch import RejectWatch
from connectors.service_topics import MAX_REJECTS_PER_MESSAGE, MAX_SUMS_PER_MESSAGE, STREAM_SAMPLE
from connectors.source import SyntheticSource
from connectors.synthetic import LIVE_START_BEHIND_NS, SyntheticConfig, SyntheticMarket
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.config import ServiceConfig
from engine.service.server import REJECTS_TOPIC, TOKENIZED_MARKER

TS = 1_723_161_254_087_896_568
BAD_NAMES = ["BTC/USDT", "_heartbeat", "_rejects", " BTC", "BTC ", "BTC\x00", "BTC\n1", "BTC\x1b[2J",
             "USD\u202eTSB", "BTC\u200b", "BTC\u2028", "BTC\u2029", "AAPL\u00a0US", "a" * 129, "\u00e9" * 65]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    checkpoint = tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"))
    config = ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)},
        "kv": {"cells": 8192, "block_size": 16},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "limits": {"heartbeat_s": 0.1, "max_message_bytes": 4 << 20},  # room for a 1 MB stream name
    })
    with serving(config) as srv:
        yield srv


def stats(server) -> dict:
    with ControlClient(server.endpoints["control"]) as control:
        return control.call("stats")["stats"]


def rejects_until(sub: AnswerSubscriber, n: int, timeout_s: float = 10.0) -> list[dict]:
    got: list[dict] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        message = sub.recv(timeout_s=0.2)
        if message:
            got.append(message[1])
    return got


def wait_ticks_in(server, want: int, timeout_s: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout_s
    while (now := stats(server))["ticks_in"] < want and time.monotonic() < deadline:
        time.sleep(0.02)
    return now


def tick(stream: str, ts: int) -> dict:
    return {"stream": stream, "ts": ts, "price": 10.0, "size": 1.0}


def test_each_bad_stream_name_class_is_refused_and_counted_between_good_ticks(server, feed) -> None:
    with AnswerSubscriber(server.endpoints["answers"], [REJECTS_TOPIC]) as sub:
        time.sleep(0.3)  # PUB drops what it publishes before the subscription reaches it
        before = stats(server)
        raw = [tick("NAMES.RAW", TS)] + [x for i, name in enumerate(BAD_NAMES)
                                          for x in (tick(name, TS + i), tick("NAMES.RAW", TS + 1 + i))]
        feed.send(msgpack.packb(raw))
        tokenized = [x for i, name in enumerate(BAD_NAMES) for x in (
            {"stream": name, "ts": TS + i, "tokens": [1, 2, 3, 4]},
            {"stream": "NAMES.TOK", "ts": TS + i, "tokens": [1, 2, 3, 4]})]
        feed.send_multipart([TOKENIZED_MARKER, msgpack.packb(tokenized)])
        rejects = rejects_until(sub, 2 * len(BAD_NAMES))
        good = 1 + 2 * len(BAD_NAMES)
        after = wait_ticks_in(server, before["ticks_in"] + good)
    assert after["ticks_in"] - before["ticks_in"] == good  # every good tick around the bad names went in
    n = len(BAD_NAMES)
    assert [(r["reason"], r["index"]) for r in rejects] == (
        [("bad_stream", 1 + 2 * i) for i in range(n)] + [("bad_stream", 2 * i) for i in range(n)])
    assert all("stream" not in r and len(r["error"]) < 200 for r in rejects)  # a bad name is never echoed back
    assert after["rejected"]["bad_stream"] - before["rejected"].get("bad_stream", 0) == 2 * len(BAD_NAMES)
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in rejects[8]["error"] and '"/"' in rejects[0]["error"]


def test_a_1mb_stream_name_is_refused_cheaply_and_never_published(server, feed) -> None:
    huge = "A" * 1_000_000
    with AnswerSubscriber(server.endpoints["answers"], [""]) as sub:
        time.sleep(0.3)
        before = stats(server)
        start = time.monotonic()
        feed.send(msgpack.packb([tick(huge, TS), tick("HUGE.OK", TS)]))
        feed.send_multipart([TOKENIZED_MARKER, msgpack.packb([{"stream": huge, "ts": TS, "tokens": [1]},
                                                               {"stream": "HUGE.OK", "ts": TS, "tokens": [1]}])])
        after = wait_ticks_in(server, before["ticks_in"] + 2)
        elapsed = time.monotonic() - start
        published = []
        deadline = time.monotonic() + 0.5  # everything published meanwhile (heartbeats come every 0.1 s)
        while time.monotonic() < deadline:
            if (message := sub.recv(timeout_s=0.1)) is not None:
                published.append(message)
    assert after["ticks_in"] - before["ticks_in"] == 2 and elapsed < 10
    assert after["rejected"]["bad_stream"] - before["rejected"].get("bad_stream", 0) == 2
    assert max(len(topic) + len(msgpack.packb(payload)) for topic, payload in published) < 1000
    assert all(huge[:200] not in topic for topic, _ in published)


def test_tokenized_items_over_the_window_huge_tick_counts_and_bad_ts_are_refused(server, feed) -> None:
    room = server.pipeline.encoders.max_item_tokens
    scheduler = server.pipeline.engine.scheduler
    assert room == scheduler.roll_at - scheduler.sink
    bad = [({"stream": "TOK.LIM", "ts": TS, "tokens": [1] * (room + 1)}, "bad_tokens"),
           ({"stream": "TOK.LIM", "ts": TS, "tokens": [1] * 200_000}, "bad_tokens"),
           ({"stream": "TOK.LIM", "ts": TS, "tokens": [1, 2, 3, 4], "ticks": 10**15}, "bad_tokens"),
           ({"stream": "TOK.LIM", "ts": -5, "tokens": [1]}, "ts_out_of_range"),
           ({"stream": "TOK.LIM", "ts": 2**64 - 1, "tokens": [1]}, "ts_out_of_range")]
    good = [{"stream": "TOK.LIM", "ts": TS + i, "tokens": [1, 2, 3, 4], "ticks": 1} for i in range(len(bad) + 1)]
    good[-1] = {"stream": "TOK.LIM", "ts": TS + len(bad) + 1, "tokens": [3] * room, "ticks": 2}  # the largest item
    items = [good[0]] + [x for (item, _), g in zip(bad, good[1:]) for x in (item, g)]
    with AnswerSubscriber(server.endpoints["answers"], [REJECTS_TOPIC]) as sub:
        time.sleep(0.3)
        before = stats(server)
        feed.send_multipart([TOKENIZED_MARKER, msgpack.packb(items)])
        rejects = rejects_until(sub, len(bad))
        want = before["ticks_in"] + len(good) + 1  # the last item carries two ticks; 10**15 never counts
        after = wait_ticks_in(server, want)
        deadline = time.monotonic() + 10
        while after["pending_tokens"] and time.monotonic() < deadline:  # nothing sticks: the stream drains
            time.sleep(0.05)
            after = stats(server)
    assert [(r["index"], r["reason"], r["stream"]) for r in rejects] == [
        (1 + 2 * i, reason, "TOK.LIM") for i, (_, reason) in enumerate(bad)]
    assert after["ticks_in"] == want and after["pending_tokens"] == 0
    for reason in ("bad_tokens", "ts_out_of_range"):
        assert after["rejected"][reason] - before["rejected"].get(reason, 0) == sum(r == reason for _, r in bad)


def test_a_tick_far_ahead_of_the_clock_is_refused_and_its_stream_goes_on(server, feed) -> None:
    """One tick from year 2191 was accepted and answered, and as its stream's last ts it refused every real tick
    after it as ts_backwards (across restarts too, from the tick log). limits.max_ts_ahead_s (10 s) refuses it, raw or
    tokenized, with its time in UTC, and so a tick an hour ahead (review376 #1: a day let it in, and it refused the
    real feed for that hour): each told to its sender, the real ticks after them taken."""
    now = time.time_ns()
    far = 7_000_000_000_000_000_000
    raw = [tick("FUT.A", now - 10**9 + i) for i in range(5)] + [tick("FUT.A", far), tick("FUT.A", now + 3600 * 10**9)]
    later = [tick("FUT.A", now + i) for i in range(1, 6)]
    with AnswerSubscriber(server.endpoints["answers"], [REJECTS_TOPIC]) as sub:
        time.sleep(0.3)
        before = stats(server)
        feed.send(msgpack.packb(raw))
        feed.send_multipart([TOKENIZED_MARKER, msgpack.packb([{"stream": "FUT.A", "ts": far, "tokens": [1, 2]}])])
        feed.send(msgpack.packb(later))
        rejects = rejects_until(sub, 3)
        after = wait_ticks_in(server, before["ticks_in"] + 10)
    assert [(r["index"], r["reason"], r["stream"]) for r in rejects] == [(5, "ts_in_future", "FUT.A"),
                                                                         (6, "ts_in_future", "FUT.A"),
                                                                         (0, "ts_in_future", "FUT.A")]
    error = rejects[0]["error"]
    assert error.startswith('ts_in_future: stream "FUT.A": ts 7000000000000000000 (2191-10-27T12:26:40Z) is ')
    assert " d ahead of this service's clock (" in error and "limits.max_ts_ahead_s allows 10 s (" in error
    hour = rejects[1]["error"]
    assert "ahead of this service's clock (" in hour and "a venue's local time sent as UTC" in hour, hour
    assert after["ticks_in"] - before["ticks_in"] == 10  # every real tick, those after the refused ones too
    assert after["rejected"]["ts_in_future"] - before["rejected"].get("ts_in_future", 0) == 3
    assert after["rejected"].get("ts_backwards", 0) == before["rejected"].get("ts_backwards", 0)


def test_live_synthetic_feeds_in_a_row_both_go_in_and_a_replayed_one_is_reported(server) -> None:
    """start_ts=None (what `flashtick feed synthetic` runs): a second feed continues forward; a feed that
    repeats event time is refused as ts_backwards, and the feed itself now says so."""
    answers, ingest = server.endpoints["answers"], server.endpoints["ingest"]
    before = stats(server)
    first = SyntheticSource(SyntheticConfig(seed=1, start_ts=None), limit=40)
    with FeedClient(ingest) as client:
        one = run_feed(first, client, answers=answers)
    assert one.ticks == 40 and one.rejected == {} and one.summary().endswith("; 0 rejected")
    # event time runs faster than the clock when a feed goes faster than the market's own pace: a feed started
    # before the clock caught up would be behind, so the second starts once it has (about a second here)
    last_ts = SyntheticMarket(first.config).next_batch(40)[-1].ts
    time.sleep(max(0.0, (last_ts + LIVE_START_BEHIND_NS - time.time_ns()) / 1e9))
    with FeedClient(ingest) as client:
        two = run_feed(SyntheticSource(SyntheticConfig(seed=1, start_ts=None), limit=40), client, answers=answers)
    assert two.ticks == 40 and two.rejected == {}
    after = stats(server)
    assert after["ticks_in"] - before["ticks_in"] == 80
    assert after["rejected"].get("ts_backwards", 0) == before["rejected"].get("ts_backwards", 0)
    replay = first.config  # the first run's very start again: all of it is in the past
    with FeedClient(ingest) as client:
        three = run_feed(SyntheticSource(replay, limit=40), client, answers=answers)
    assert three.rejected == {"ts_backwards": 40}
    first_line, why = three.summary().split("\n")
    assert first_line == f"sent 40 ticks in 1 message over {three.seconds:.1f} s; 40 rejected (ts_backwards: 40)"
    assert why.startswith("  first ts_backwards: stream SYN.") and 'ts_backwards: stream "SYN.' in why  # why, too


def test_bad_ticks_each_on_its_own_stream_publish_a_bounded_number_of_entries_that_add_up(server, feed) -> None:
    """review207 #1: a message whose bad ticks each named a different stream published one `_rejects/` entry per
    tick (21,000 for 1 MiB): summing per (reason, stream) summed nothing. Now at most 100 one by one, 200 sums per
    (reason, stream), then one entry per reason; their counts add up to every tick, and the sender's RejectWatch
    (by its tag) counts every one."""
    n, tag = 5000, "feed/spread"
    ticks = [{"stream": f"SPREAD{i:05d}", "ts": TS if i < n // 2 else -5, "price": -1.0 if i < n // 2 else 10.0,
              "size": 1.0} for i in range(n)]
    with AnswerSubscriber(server.endpoints["answers"], [REJECTS_TOPIC]) as sub, \
            RejectWatch(server.endpoints["answers"], tag=tag) as watch:
        watch.wait_ready(10)
        watch.streams.update(t["stream"] for t in ticks)
        time.sleep(0.3)
        before = stats(server)
        feed.send_multipart([tag.encode(), msgpack.packb(ticks)])
        rejects: list[dict] = []
        deadline = time.monotonic() + 30
        while sum(r.get("count", 1) for r in rejects) < n and time.monotonic() < deadline:
            if (message := sub.recv(timeout_s=0.2)) is not None:
                rejects.append(message[1])
        while sum(watch.rejected.values()) < n and time.monotonic() < deadline:
            watch.poll(200)
        after = stats(server)
    assert len(rejects) <= MAX_REJECTS_PER_MESSAGE + MAX_SUMS_PER_MESSAGE + 2, len(rejects)
    by_reason = {reason: sum(r.get("count", 1) for r in rejects if r["reason"] == reason)
                 for reason in ("nonpositive_price", "ts_out_of_range")}
    assert by_reason == {"nonpositive_price": n // 2, "ts_out_of_range": n // 2}
    for reason, count in by_reason.items():
        assert after["rejected"][reason] - before["rejected"].get(reason, 0) == count  # stats count every tick
    spread = [r for r in rejects if "streams" in r]
    assert [(r["reason"], r["topic"], len(r["stream_sample"])) for r in spread] == [
        ("nonpositive_price", tag, STREAM_SAMPLE), ("ts_out_of_range", tag, STREAM_SAMPLE)]
    named = sum(r.get("count", 1) for r in rejects if "stream" in r)
    assert named + sum(r["streams"] for r in spread) == n  # every stream told, by name or in a spread entry's count
    assert dict(watch.rejected) == by_reason and watch.unattributed == 0 and watch.others == 0
    assert sum(watch.rejected_by_stream.values()) == named  # by stream only where named
