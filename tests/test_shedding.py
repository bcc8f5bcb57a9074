"""`limits.when_behind: shed`, decided tick by tick at read time against the backlog accepting it would leave, and
fairly: the streams holding most of the backlog are refused first (engine/service/shedding.py). Decisions with
given rates, one engine's pipeline with a backlog built tick by tick, and a live server over real sockets."""

from __future__ import annotations

import threading
import time

import zmq

from connectors.synthetic import DEFAULT_STREAMS, SyntheticConfig, SyntheticMarket
from connectors.ticks import encode, trade
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.pipeline import TickPipeline
from engine.service.server import REJECTS_TOPIC
from engine.service.shedding import SHED_STREAMS_KEPT, Backlog, ShedCounts, ShedLimits, shed_reason
from test_server import checkpoint  # noqa: F401  (the model fixture)
from test_service_limits import QUERIES, live_server, pipeline_config, ticks, wait_for

LIMITS = ShedLimits(max_lag_s=0.5, max_backlog_tokens=1_000_000)
MS_A_TOKEN = 0.001  # the recent pace in these decisions: 1,000 tokens a second


def backlog(pending: int, own: int = 0, waiting: int = 1, oldest_s: float = 0.0, read_wait_s: float = 0.0) -> Backlog:
    return Backlog(pending, own, waiting, oldest_s, read_wait_s)


def test_a_tick_is_refused_once_the_backlog_would_wait_past_max_lag_s_at_the_recent_pace() -> None:
    """A reviewer's `shed` with max_lag_s 0.5 published answers 2.5-12 s late: one read between two forwards took
    several forwards' worth of ticks, the engine not yet counted behind. The backlog's wait is projected instead."""
    shed: set[str] = set()
    # 400 tokens at 1,000 a second, the oldest accepted 0.05 s ago: 0.45 s, within the bound
    assert shed_reason("A", backlog(400, own=400, oldest_s=0.05), MS_A_TOKEN, LIMITS, shed) is None
    why = shed_reason("A", backlog(460, own=460, oldest_s=0.05), MS_A_TOKEN, LIMITS, shed)
    assert why is not None and why.startswith("data would wait 0.5 s (the oldest accepted 0.1 s so far, 460 tokens "
                                              "to compute at the recent pace; limits.max_lag_s 0.5)")
    # the flag it replaces saw neither: no token bound passed, nothing waited 0.5 s yet
    assert 460 < LIMITS.max_backlog_tokens and 0.05 < LIMITS.max_lag_s
    # the same backlog at a pace ten times faster is within the bound
    assert shed_reason("A", backlog(460, own=460, oldest_s=0.05), MS_A_TOKEN / 10, LIMITS, set()) is None
    # until a forward was timed, the oldest tick's wait alone (and the token bound) decide, as before
    assert shed_reason("A", backlog(100_000, own=100_000, oldest_s=0.1), None, LIMITS, set()) is None
    assert shed_reason("A", backlog(10, own=10, oldest_s=0.6), None, LIMITS, set()) is not None
    # a tick read after waiting (unread at the ingest socket, or upstream by its ts) is as old as that once accepted
    # (review392 #1: ticks unread 19-34 s were accepted under max_lag_s 2, every stream under its share of an
    # accepted backlog of ~0): 0.35 s waited leaves 0.15 s, 150 tokens at the pace, the busiest stream refused first
    waited = backlog(200, own=190, waiting=2, read_wait_s=0.35)
    assert "data would wait 0.6 s (read after waiting 0.3 s, 200 tokens" in shed_reason("A", waited, MS_A_TOKEN,
                                                                                        LIMITS, set())
    assert shed_reason("B", waited._replace(stream_tokens=0, streams_waiting=3), MS_A_TOKEN, LIMITS, set()) is None
    # refused for its share, a stream is not kept refused by its ticks' wait before the read once the forward took
    # its tokens (the wait is the queue's it came in, not the engine's backlog)
    shed = {"A"}
    assert shed_reason("A", waited._replace(stream_tokens=0, streams_waiting=3), MS_A_TOKEN, LIMITS, shed) is None
    assert not shed
    # a tick that waited the whole bound before its read is refused, whatever its stream: the engine reads past the
    # stale queue (whole messages, cheaply) and catches up
    stale = waited._replace(read_wait_s=0.6, stream_tokens=0, streams_waiting=3)
    assert "read after waiting 0.6 s" in shed_reason("B", stale, MS_A_TOKEN, LIMITS, set())
    assert "read after waiting 30.0 s" in shed_reason(None, stale._replace(read_wait_s=30.0), MS_A_TOKEN, LIMITS,
                                                      set())
    assert shed_reason("B", stale._replace(read_wait_s=0.6, pending_tokens=0), None, LIMITS, set()) is not None


def test_past_the_bound_the_streams_over_their_share_are_refused_and_the_others_accepted() -> None:
    shed: set[str] = set()
    over = backlog(600, own=590, waiting=2)  # 0.6 s of work: past the bound, one stream holding nearly all of it
    assert shed_reason("FLOOD", over, MS_A_TOKEN, LIMITS, shed) is not None
    assert "stream \"FLOOD\" holds 590 of the tokens waiting, its share being 250 (2 streams waiting)" in \
        shed_reason("FLOOD", over, MS_A_TOKEN, LIMITS, shed)
    assert shed == {"FLOOD"}
    assert shed_reason("QUIET", over._replace(stream_tokens=10), MS_A_TOKEN, LIMITS, shed) is None  # under 250
    # a stream that held nothing is counted among the streams waiting: its share is the budget's third
    assert shed_reason("NEW", backlog(600, own=0, waiting=3), MS_A_TOKEN, LIMITS, shed) is None
    # a refused stream stays refused while the engine is past the bound, though the forward took its tokens ...
    assert shed_reason("FLOOD", backlog(600, own=0, waiting=3), MS_A_TOKEN, LIMITS, shed) is not None
    # ... and is accepted again once it is within it
    assert shed_reason("FLOOD", backlog(100, own=0, waiting=2), MS_A_TOKEN, LIMITS, shed) is None and not shed
    # past twice the bound every stream is refused, its share or not
    assert "past 2 times the bound: every stream refused" in shed_reason(
        "QUIET", backlog(1100, own=0, waiting=2), MS_A_TOKEN, LIMITS, set())
    # a tick without a valid stream name gets the reason the engine is past its bound, or is accepted
    assert shed_reason(None, over, MS_A_TOKEN, LIMITS, set()) is not None
    assert shed_reason(None, backlog(10), MS_A_TOKEN, LIMITS, set()) is None


def test_the_shed_counts_keep_the_most_refused_streams_in_bounded_memory() -> None:
    counts = ShedCounts()
    counts.add("FLOOD", 5000)
    counts.add("QUIET", 3)
    for i in range(SHED_STREAMS_KEPT * 10):  # a flood of stream names, one tick each
        counts.add(f"N{i}", 1)
    assert len(counts._counts) == SHED_STREAMS_KEPT
    most = counts.most(3)
    assert list(most)[:2] == ["FLOOD", "QUIET"] and most["FLOOD"] == 5000 and len(most) == 3


def stream_ticks(name_index: int, n: int, seed: int = 1) -> list:
    """``n`` ticks of one synthetic stream (DEFAULT_STREAMS[name_index])."""
    params = DEFAULT_STREAMS[name_index : name_index + 1]
    return SyntheticMarket(SyntheticConfig(seed=seed, streams=params)).next_batch(n)


def test_a_message_past_the_bound_refuses_the_flooding_stream_and_takes_the_quiet_ones(checkpoint) -> None:
    """A reviewer's flood on one stream had every other feed's ticks refused as `overloaded`."""
    pipeline = TickPipeline(pipeline_config(checkpoint, limits={"max_backlog_tokens": 40, "when_behind": "shed"}))
    flood, quiet = stream_ticks(0, 30), stream_ticks(1, 3)
    got = pipeline.ingest_message(encode(flood[:15] + quiet[:1] + flood[15:] + quiet[1:]))  # 4 tokens a tick
    refused = [(r["stream"], r["reason"]) for r in got]
    assert refused == [("SYN.A", "overloaded")] * 19  # SYN.A took 11 ticks, to past the bound, SYN.B all of its 3
    assert pipeline.engine.scheduler.pending_tokens_of("SYN.B") == 12 and pipeline.ticks_in == 14
    assert "stream \"SYN.A\" holds 44 of the tokens waiting" in got[-1]["error"]
    assert pipeline.stats()["shed_streams"] == {"SYN.A": 19}
    pipeline.run_until_idle()  # caught up: the flooding stream is accepted again
    assert pipeline.ingest_message(encode(stream_ticks(0, 31)[30:])) == []


def test_a_tick_read_after_waiting_unread_past_the_bound_is_refused_unless_its_ts_says_it_is_fresh(checkpoint) -> None:
    """Review392 #1: under `max_lag_s: 2` ticks that had waited 19-34 s unread at the ingest socket were accepted and
    computed. A tick its ts does not date waited as long as the ingest queue held messages unread (as the server
    tells the pipeline); a stream stamped with the wall clock says its own wait, so a quiet feed's fresh ticks are
    not refused for a flood's queue."""
    pipeline = TickPipeline(pipeline_config(checkpoint, limits={"when_behind": "shed", "max_lag_s": 2}))
    now = time.time_ns()
    fresh = [trade("LIVE.X", now + i, 100.0, 1.0) for i in range(3)]  # stamped with the wall clock
    replayed = stream_ticks(0, 3)  # the synthetic market's: stamped a year back, its ts says nothing of its wait
    assert pipeline.ingest_message(encode(replayed[:1] + fresh[:1])) == []  # (both streams held)
    pipeline.ingest_unread_s = 5.0  # the ingest queue has held messages unread for 5 s
    got = pipeline.ingest_message(encode(replayed[1:2]))  # refused whole, unread past its stream
    assert [(r["stream"], r["reason"]) for r in got] == [("SYN.A", "overloaded")]
    assert "read after waiting 5.0 s" in got[0]["error"]
    got = pipeline.ingest_message(encode(replayed[2:] + fresh[1:2]))  # tick by tick: each by its own wait
    assert [(r["stream"], r["reason"]) for r in got] == [("SYN.A", "overloaded")]
    assert pipeline.ingest_message(encode(fresh[2:])) == []
    assert pipeline.encoders.accepted(["LIVE.X"])["LIVE.X"]["ticks"] == 3 and pipeline.ticks_in == 4
    pipeline.ingest_unread_s = 0.0  # the queue read past: the replayed stream is accepted again
    assert pipeline.ingest_message(encode(stream_ticks(0, 4)[3:])) == []


def test_a_live_server_refuses_once_the_backlog_would_wait_past_max_lag_s(checkpoint) -> None:
    """One message of 1,000 ticks, read at once after forwards of two ticks each: the flag the engine had counted
    itself behind by (refreshed between forwards) took them all; the projection at the measured pace refuses the
    ticks past the bound."""
    market = stream_ticks(0, 1010)
    with live_server(checkpoint, limits={"when_behind": "shed", "max_lag_s": 0.2},
                     scheduler={"max_batch_tokens": 8}) as (server, push):
        with AnswerSubscriber(server.endpoints["answers"], [REJECTS_TOPIC]) as sub:
            sub.wait_ready(timeout_s=60)
            push.send(encode(market[:10]))  # forwards the pace is measured on
            wait_for(lambda: server.pipeline.ticks_in == 10 and not server.pipeline.engine.busy)
            push.send(encode(market[10:]))
            first = sub.recv(timeout_s=120)
        assert first is not None and first[0] == REJECTS_TOPIC
        reject = first[1]
        accepted = reject["index"]
        assert reject["reason"] == "overloaded" and 0 < accepted < 1000, reject
        assert "data would wait" in reject["error"] and "tokens to compute at the recent pace" in reject["error"]
        waited = float(reject["error"].split("data would wait ")[1].split(" s")[0])
        assert waited >= 0.2, reject  # (said to one decimal)
        # every tick after the first refused one is refused too: the engine stays past its bound within the read
        wait_for(lambda: server.pipeline.rejected["overloaded"] == 1000 - accepted)
        assert server.pipeline.ticks_in == 10 + accepted


def test_a_flood_on_one_stream_leaves_a_slow_feed_on_another_accepted(checkpoint) -> None:
    """Two real feeds: one floods stream SYN.A in 50-tick messages without pause, the other sends SYN.B one tick a
    message, each once the last is accounted for. Every SYN.B tick is accepted; the flood is refused, and `stats`
    names it."""
    flooding = SyntheticMarket(SyntheticConfig(seed=4, streams=DEFAULT_STREAMS[:1]))
    slow = stream_ticks(1, 20, seed=5)
    stop = threading.Event()
    with live_server(checkpoint, limits={"when_behind": "shed", "max_backlog_tokens": 40, "max_lag_s": 60}) as (
            server, push):

        def flood() -> None:
            while not stop.is_set():
                with_room = push.poll(100, zmq.POLLOUT)
                if with_room:
                    push.send(encode(flooding.next_batch(50)))

        slow_feed = zmq.Context.instance().socket(zmq.PUSH)
        slow_feed.linger = 1000
        slow_feed.connect(server.endpoints["ingest"])
        with AnswerSubscriber(server.endpoints["answers"], [REJECTS_TOPIC]) as sub:
            sub.wait_ready(timeout_s=60)
            thread = threading.Thread(target=flood, daemon=True)
            thread.start()
            refused_slow = 0
            try:
                wait_for(lambda: server.pipeline.rejected["overloaded"] > 0)  # the flood is shed from here on
                for i, tick in enumerate(slow):
                    slow_feed.send(encode([tick]))

                    def accounted() -> bool:
                        nonlocal refused_slow
                        while (got := sub.recv(timeout_s=0.01)) is not None:
                            refused_slow += got[1].get("count", 1) if got[1].get("stream") == "SYN.B" else 0
                        seen = server.pipeline.encoders.accepted(["SYN.B"])["SYN.B"]
                        return (seen["ticks"] if seen else 0) + refused_slow == i + 1

                    wait_for(accounted)
            finally:
                stop.set()
                thread.join(30)
                slow_feed.close()
        assert refused_slow == 0
        assert server.pipeline.encoders.accepted(["SYN.B"])["SYN.B"]["ticks"] == len(slow)
        shed = server.pipeline.stats()["shed_streams"]
        assert list(shed) == ["SYN.A"] and shed["SYN.A"] == server.pipeline.rejected["overloaded"] > 0


def test_a_get_after_shedding_says_how_many_newer_ticks_of_its_stream_were_refused(checkpoint, tmp_path) -> None:
    """Review376 #13: shedding keeps a burst's oldest ticks and refuses its newest, so a stream's standing answer
    describes it as of the burst's start, and `get` said nothing. Now `ask` and `get` carry a `shed_newer` caveat
    naming how many ticks newer than the last accepted one were refused, until one is accepted again."""
    (tmp_path / "q.yaml").write_text(QUERIES)
    sent = ticks(2100, seed=6, streams=2)
    burst, later = sent[:2000], sent[2000:]
    with live_server(checkpoint, queries=str(tmp_path / "q.yaml"), scheduler={"max_batch_tokens": 8},
                     limits={"when_behind": "shed", "max_backlog_tokens": 40, "max_lag_s": 60}) as (server, push):
        for tick in burst:  # one a message: 2 ticks a forward, a backlog bound of 10 ticks
            push.send(encode([tick]))
        wait_for(lambda: server.pipeline.ticks_in + server.pipeline.rejected["overloaded"] == len(burst)
                 and not server.pipeline.busy)
        with ControlClient(server.endpoints["control"]) as control:
            streams = control.call("streams")["streams"]
            caveats = {stream: [c for c in control.call("get", stream=stream, query="dir")["caveats"]
                                if c["kind"] == "shed_newer"] for stream in streams}
            # the ticks refused after each stream's last accepted one: the feed's own count, sent after it
            newer = {stream: sum(1 for t in burst if t.stream == stream and t.ts > info["last_ts"])
                     for stream, info in streams.items()}
            assert any(newer.values()), newer  # (shedding refused the burst's newest ticks)
            for stream, refused in newer.items():
                if refused:
                    assert len(caveats[stream]) == 1 and caveats[stream][0]["text"].startswith(
                        f"{refused} tick{'s' if refused != 1 else ''} of \"{stream}\" newer than the last one "
                        f"accepted"), (stream, refused, caveats[stream])
                else:
                    assert caveats[stream] == [], caveats[stream]
            shed = next(stream for stream, refused in newer.items() if refused)
            push.send(encode([next(t for t in later if t.stream == shed)]))  # caught up: accepted
            wait_for(lambda: server.pipeline.encoders.accepted([shed])[shed]["ticks"] == streams[shed]["ticks"] + 1)
            reply = control.call("get", stream=shed, query="dir")
            assert not [c for c in reply["caveats"] if c["kind"] == "shed_newer"], reply["caveats"]
