"""Late, skewed and stalled live feeds (review323): `ingest.reorder_window_ms` places a tick late by less than the
window as file replay sorts it, so `serve` decides like `backtest` on the same capture; a stalled venue's burst on
an idle engine is computed under when_behind: shed, while a flood the engine cannot keep up with is still shed;
`ingest.rename` maps venue symbols on the ingest socket and on endpoints.feeds; each stream's clock offset and
refused ticks are kept (`streams`, `stats`, /metrics), published answers carry their age, and two clocks
interleaving on one stream are said in the log and in `health`. Real sockets on 127.0.0.1, real files."""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter

import msgpack
import polars as pl
import pytest
import zmq

from connectors.tick_sequences import RESENT
from engine.service.backtest import run_backtest
from engine.service.cli import main
from engine.service.client import AnswerSubscriber, ControlClient
from engine.service.config import ConfigError, ServiceConfig
from engine.service.metrics_text import render
from engine.service.reorder_window import ReorderWindow
from engine.service.server import REJECTS_TOPIC
from engine.service.stream_refusals import STREAMS_KEPT, STREAMS_SAID, StreamRefusals
from test_server import checkpoint  # noqa: F401  (the model fixture)
from conftest import serving
from test_service_limits import EPHEMERAL, live_server, pipeline_config, wait_for

QUERY = "queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice, trigger: batch}\n"
BASE_TS = 1_723_161_000_000_000_000  # 2024-08-08T23:50:00Z: a capture's time, not this machine's clock
STEP_NS = 100_000_000


def _tick(stream: str, ts: int, price: float, size: float = 1.0, side: str = "buy") -> dict:
    return {"stream": stream, "ts": ts, "price": price, "size": size, "side": side}


def _capture(n: int, late: int, by: int, seed: int = 3) -> list[dict]:
    """``n`` trades 100 ms apart on a seeded walk, in the order a feed delivered them: trade ``late`` arrives after
    trade ``late + by`` (late by ``by`` x 100 ms)."""
    rng = random.Random(seed)
    price, trades = 61_000.0, []
    for k in range(n):
        price += rng.choice((-1.5, -0.5, 0.5, 1.5))
        trades.append(_tick("BTCUSDT", BASE_TS + k * STEP_NS, round(price, 1), round(rng.uniform(0.01, 2), 3),
                            rng.choice(("buy", "sell"))))
    moved = trades.pop(late)
    trades.insert(late + by, moved)
    return trades


def _send_paced(push: zmq.Socket, ticks: list[dict], pause_s: float) -> None:
    """One tick a message, ``pause_s`` apart (a feed handler forwarding a venue's trades as they come)."""
    for tick in ticks:
        push.send(msgpack.packb(tick))
        time.sleep(pause_s)


def _held(server) -> int:
    return len(server.reorder) if server.reorder is not None else 0


def test_a_late_tick_is_refused_without_a_window_and_placed_within_one(checkpoint) -> None:
    """A trade delivered 3 trades (300 ms of event time, ~60 ms of wall time) after its place: refused as
    ts_backwards by default, as before; with a 500 ms window it is placed and every trade is taken, and a tick
    later than the window still meets the ordering guard. Two trades resent unchanged (a reconnect's snapshot) are
    refused as ts_backwards with the window too, not placed beside their originals and taken twice (review431 #3)."""
    trades = _capture(12, late=5, by=3)
    for window in (0, 500):
        with live_server(checkpoint, ingest={"reorder_window_ms": window}, limits={"heartbeat_s": 0.2}) as (
                server, push):
            _send_paced(push, trades, 0.02)
            push.send(msgpack.packb(trades[9:11]))  # (ts 9 and 10, behind 11: refused whether held or released)
            wait_for(lambda: server.pipeline.ticks_in + sum(server.pipeline.rejected.values()) == 14
                     and _held(server) == 0)
            if window == 0:
                assert dict(server.pipeline.rejected) == {"ts_backwards": 3}
                continue
            assert dict(server.pipeline.rejected) == {"ts_backwards": 2} and server.pipeline.ticks_in == 12
            assert server.reorder.placed == 1
            with ControlClient(server.endpoints["control"]) as control:
                entry = control.call("streams", streams=["BTCUSDT"])["streams"]["BTCUSDT"]
                assert entry["ticks"] == 12 and entry["last_ts"] == BASE_TS + 11 * STEP_NS
                push.send(msgpack.packb(_tick("BTCUSDT", BASE_TS + 10 * STEP_NS, 61_000.0)))  # later than any window
                wait_for(lambda: server.pipeline.rejected["ts_backwards"] == 3)
                wait_for(lambda: "reorder" in control.call("stats")["stats"])
                assert control.call("stats")["stats"]["reorder"]["placed"] == 1
            # review411 #11: a clock 2 s ahead: its offset is taken when the tick was read off the socket, not when
            # the window released it (the hold read as skew), and an answer's data_age_ms counts the hold
            sent = time.time_ns()
            push.send(msgpack.packb(_tick("SKEW", sent + 2 * 10**9, 100.0)))
            wait_for(lambda: server.pipeline.receive_clock.offset_ns("SKEW") is not None)
            seen = time.time_ns()  # (after the release, itself a window or more after the read)
            offset = server.pipeline.receive_clock.offset_ns("SKEW")
            assert sent - (sent + 2 * 10**9) <= offset <= seen - window * 10**6 - (sent + 2 * 10**9), (sent, seen)
            assert server._age_ms("SKEW", sent + 2 * 10**9) >= window


def _batches(n: int, per_batch: int, seed: int = 5) -> list[list[dict]]:
    """``n`` trades of stream ETHUSDT in event-time batches of ``per_batch`` (1 ms batches, 20 ms apart: a backtest's
    --batch-ms 1 cuts them so), one message each as `feed replay` sends a batch."""
    rng = random.Random(seed)
    price, batches = 3_000.0, []
    for start in range(0, n, per_batch):
        batch = []
        for k in range(start, min(n, start + per_batch)):
            price += rng.choice((-0.25, 0.25))
            batch.append(_tick("ETHUSDT", BASE_TS + (start // per_batch) * 20_000_000 + (k - start) * 100_000,
                               round(price, 2)))
        batches.append(batch)
    return batches


def test_live_with_the_window_decides_like_backtest_of_the_same_capture(checkpoint, tmp_path) -> None:
    """review323 #3: the same capture (a late trade in it) sent live in arrival order and replayed by `backtest`:
    with `ingest.reorder_window_ms` past the lateness, every live answer equals the backtest's at the same tick
    (same tick count, same probabilities); without it the late trade is refused live and the answers after it
    differ. review383 #1: with the window, a burst of 100 messages (300 ticks, one event-time batch each) read in
    one turn of the loop is answered per message, as the backtest answers per batch: each query answers as often
    live as in the backtest (it answered once per turn of the loop)."""
    trades, burst = _capture(60, late=20, by=4), _batches(300, 3)
    capture = tmp_path / "capture.csv"
    pl.DataFrame(trades + [t for batch in burst for t in batch]).write_csv(capture)  # (arrival order, as recorded)
    (tmp_path / "q.yaml").write_text(QUERY + "  - {name: vol, streams: ['*'], question: volatility_50, kind: choice, "
                                             "trigger: {ticks: 50}}\n")
    config = pipeline_config(checkpoint, answers={"adapt": "off"})
    run_backtest(config, [capture], tmp_path / "q.yaml", tmp_path / "bt.parquet", batch_ms=1, progress=False)
    rows = pl.read_parquet(tmp_path / "bt.parquet").to_dicts()
    backtest = {(r["query"], r["stream"], r["data_ts"]): r for r in rows}
    assert Counter((r["query"], r["stream"]) for r in rows) == {  # (a batch of 1 ms: an answer at every trade)
        ("dir", "BTCUSDT"): 60, ("vol", "BTCUSDT"): 2, ("dir", "ETHUSDT"): 100, ("vol", "ETHUSDT"): 7}
    for window, agree in ((1000, True), (0, False)):
        sent = 60 + 300 * agree
        with live_server(checkpoint, queries=str(tmp_path / "q.yaml"), answers={"adapt": "off"},
                         ingest={"reorder_window_ms": window}) as (server, push):
            with AnswerSubscriber(server.endpoints["answers"], ["dir/", "vol/"]) as sub:
                sub.wait_ready(timeout_s=60)
                _send_paced(push, trades, 0.02)
                for batch in burst if agree else []:
                    push.send(msgpack.packb(batch))
                wait_for(lambda: server.pipeline.ticks_in + sum(server.pipeline.rejected.values()) == sent
                         and _held(server) == 0 and not server.pipeline.busy)
                with ControlClient(server.endpoints["control"]) as control:
                    computed = control.call("stats")["stats"]["answers_out"]  # (idle: every answer it will send)
                answers = []  # each one published, read as it comes (not until 2 s pass without one)
                while len(answers) < computed and (got := sub.recv(timeout_s=60)) is not None:
                    answers.append(got[1])
        assert answers
        same = [a for a in answers if (key := (a["query"], a["stream"], a["data_ts"])) in backtest
                and a["version"] == backtest[key]["ticks"]
                and a["value"]["probs"] == pytest.approx(json.loads(backtest[key]["probs"]), abs=1e-5)]
        if agree:
            assert Counter((a["query"], a["stream"]) for a in answers) == \
                Counter((r["query"], r["stream"]) for r in rows)
            assert len(same) == len(answers), (len(same), len(answers))
        else:
            assert server.pipeline.rejected["ts_backwards"] == 1 and len(same) < len(answers)


def test_a_stalled_venues_burst_on_an_idle_engine_is_computed_under_shed(checkpoint) -> None:
    """review323 #5: a feed stamped with the wall clock, a stall (nothing arrives), then the ticks the venue made
    during it in a burst. The engine was idle throughout: under when_behind: shed every tick is taken (it was
    shed as "the engine is behind" before), and answers say how old they are."""
    # (a bound the burst's own computing stays within on a loaded machine: 1.5 s was passed at a load of 20 and
    # more, 40 ticks shed; the stall passes twice it, so that the ticks' own age would have them all shed)
    with live_server(checkpoint, limits={"when_behind": "shed", "max_lag_s": 3.0, "heartbeat_s": 0.2}) as (
            server, push):
        for k in range(5):
            push.send(msgpack.packb(_tick("STALL", time.time_ns(), 100.0 + k)))
        wait_for(lambda: server.pipeline.ticks_in == 5 and not server.pipeline.busy)
        stalled_from = time.time_ns()
        wait_for(lambda: time.time_ns() - stalled_from > 6_500_000_000)  # the venue's link stalls (a condition)
        burst = [_tick("STALL", stalled_from + k * 40_000_000, 100.0 + k % 7) for k in range(60)]
        for start in range(0, 60, 10):
            push.send(msgpack.packb(burst[start:start + 10]))
        wait_for(lambda: server.pipeline.ticks_in + sum(server.pipeline.rejected.values()) == 65)
        assert dict(server.pipeline.rejected) == {} and server.pipeline.ticks_in == 65


def test_a_flood_stamped_with_the_wall_clock_is_still_shed(checkpoint) -> None:
    """The other side of #5: an engine that truly cannot keep up (forwards of 8 tokens, 1,000 ticks read at once)
    still sheds under when_behind: shed, the ticks being stamped with the wall clock."""
    with live_server(checkpoint, limits={"when_behind": "shed", "max_lag_s": 0.2},
                     scheduler={"max_batch_tokens": 8}) as (server, push):
        with AnswerSubscriber(server.endpoints["answers"], [REJECTS_TOPIC]) as sub:
            sub.wait_ready(timeout_s=60)
            push.send(msgpack.packb([_tick("FLOOD", time.time_ns(), 100.0 + k % 5) for k in range(10)]))
            wait_for(lambda: server.pipeline.ticks_in == 10 and not server.pipeline.busy)
            now = time.time_ns()
            push.send(msgpack.packb([_tick("FLOOD", now + k, 100.0 + k % 5) for k in range(1000)]))
            first = sub.recv(timeout_s=120)
        assert first is not None and first[1]["reason"] == "overloaded", first
        wait_for(lambda: server.pipeline.ticks_in + server.pipeline.rejected["overloaded"] == 1010)
        assert 0 < server.pipeline.rejected["overloaded"] < 1000


def test_venue_names_are_renamed_on_ingest_and_on_a_feed(checkpoint) -> None:
    """review323 #9: `ingest.rename` maps a venue's symbol to the desk's stream name on the ingest socket and on an
    external PUB feed (endpoints.feeds) alike; the venue's name is never a stream."""
    context = zmq.Context.instance()
    publisher = context.socket(zmq.PUB)
    port = publisher.bind_to_random_port("tcp://127.0.0.1")
    try:
        config = pipeline_config(checkpoint, endpoints={**EPHEMERAL, "feeds": [f"tcp://127.0.0.1:{port}"]},
                                 ingest={"rename": {"BTC-USD": "BTC.coinbase", "BTC/USD": "BTC.kraken"}})
        with serving(config) as server, context.socket(zmq.PUSH) as push:
            push.connect(server.endpoints["ingest"])
            push.send(msgpack.packb(_tick("BTC-USD", BASE_TS, 61_000.0)))
            push.send(msgpack.packb(_tick("BTC/USD", BASE_TS, 61_001.0)))  # (a name the wire refuses, renamed first)
            # both in before the feed's later ticks of the same stream: two connections keep no order between them,
            # and a feed tick first made the pushed one late (ts_backwards) on a loaded host
            wait_for(lambda: server.pipeline.ticks_in >= 2)
            k = 0

            def fed() -> bool:  # (a SUB joins late: the publisher sends until one arrives, each later than the last)
                nonlocal k
                k += 1
                publisher.send_multipart([b"coinbase", msgpack.packb(_tick("BTC-USD", BASE_TS + k, 61_000.0 + k))])
                return server.pipeline.ticks_in >= 3

            wait_for(fed)
            # a last one after those still in flight (one connection keeps its order): once it is in, all are
            publisher.send_multipart([b"coinbase", msgpack.packb(_tick("BTC-USD", BASE_TS + 10**8, 61_000.0))])
            wait_for(lambda: server.pipeline.encoders.accepted(["BTC.coinbase"])["BTC.coinbase"]["last_ts"]
                     == BASE_TS + 10**8)
            ticks = server.pipeline.encoders.ticks_of("BTC.coinbase")
            push.send_multipart([b"tokens", msgpack.packb([{"stream": "BTC-USD", "ts": BASE_TS + 10**9,
                                                            "tokens": [5, 6, 7, 8]}])])  # (tokenized: renamed too)
            # a key given twice is refused as the pipeline refuses it (packed again, one value would be kept)
            push.send(b"\x92" + msgpack.packb(_tick("BTC-USD", BASE_TS + 2 * 10**9, 1.0))
                      + b"\x82\xa6stream\xa7BTC-USD\xa6stream\xa7BTC-USD")
            wait_for(lambda: server.pipeline.rejected["duplicate_key"] == 1
                     and server.pipeline.encoders.ticks_of("BTC.coinbase") == ticks + 2)
            with ControlClient(server.endpoints["control"]) as control:
                streams = control.call("streams")["streams"]
        assert "BTC.coinbase" in streams and "BTC.kraken" in streams and "BTC-USD" not in streams, streams
        assert streams["BTC.coinbase"]["ticks"] >= 4 and dict(server.pipeline.rejected) == {"duplicate_key": 1}
    finally:
        publisher.close(linger=0)


def _two_clocks(server, push, stream: str) -> None:
    """Two venues' feeds of ``stream`` interleaved, 30 ticks each, the second's clock 2 s ahead; back once every
    tick is taken or refused."""
    other = zmq.Context.instance().socket(zmq.PUSH)
    other.connect(server.endpoints["ingest"])
    try:
        for k in range(30):
            now = time.time_ns()
            push.send(msgpack.packb(_tick(stream, now, 61_000.0 + k % 3)))
            other.send(msgpack.packb(_tick(stream, now + 2_000_000_000, 61_005.0 + k % 3)))
            time.sleep(0.01)
        wait_for(lambda: server.pipeline.ticks_in + server.pipeline.rejected["ts_backwards"] == 60)
    finally:
        other.close(linger=0)



def test_two_clocks_on_one_stream_are_said_counted_and_flagged_in_utc_then_a_clock_far_ahead_or_stepped_back(
        checkpoint, capfd) -> None:
    """review323 #6, #10, #11, #12: two venues' feeds under one name, one clock 2 s ahead. The ticks refused as late
    are counted by stream (`streams`' rejected, `stats`' rejected_streams, /metrics), the log and `health` say the
    stream has two clocks interleaving and name ingest.reorder_window_ms, `streams` and `health` show the clock 2 s
    ahead, and published answers carry data_age_ms and the stream's clock_offset_ms.

    `health` serves a late-ticks warning for 10 minutes: "since the last heartbeat" was false read a heartbeat
    after it was seen. Its message names the window's UTC start and end, which the entry's `since` and `at` hold.

    review351 #5, #13: a feed 2 min ahead got no `clock_ahead` (3 s ahead did: offsets past 60 s were dropped),
    and a feed whose clock stepped back an hour lost every tick silently, diagnosed as two clocks with advice for a
    reorder window capped at 60 s. Now the clock ahead is flagged in `streams` and `health`, and the step back is
    a warning naming the stream, the step, the ticks refused and what fits (fix the clock, or forget the stream).
    (One service for the three, in that order.)"""
    # heartbeats 0.5 s apart: 10 late ticks in a heartbeat. (A clock 2 min ahead passes limits.max_ts_ahead_s only
    # when set past its default, 10 s)
    with live_server(checkpoint, limits={"heartbeat_s": 0.5, "max_ts_ahead_s": 600}) as (server, push):
        _two_clocks(server, push, "BTC")
        refused = server.pipeline.rejected["ts_backwards"]
        assert refused >= 20
        with ControlClient(server.endpoints["control"]) as control:
            wait_for(lambda: any(w["kind"] == "late_ticks" for w in control.call("health").get("warnings", [])))
            health = control.call("health")
            entry = control.call("streams", streams=["BTC"])["streams"]["BTC"]
            stats = control.call("stats")["stats"]
            beats = server.counters["heartbeats"]
            wait_for(lambda: server.counters["heartbeats"] >= beats + 3)  # read well after the heartbeat that saw it
            late = next(w for w in control.call("health")["warnings"] if w["kind"] == "late_ticks")
        assert main(["streams", "BTC", "--control", server.endpoints["control"]]) in (0, None)
        assert entry["rejected"] == {"ts_backwards": refused}
        assert entry["clock_offset_ms"] < -1500 and "ahead of this machine's clock" in entry["clock_ahead"]
        kinds = {(w["stream"], w["kind"]) for w in health["warnings"]}
        assert kinds == {("BTC", "late_ticks"), ("BTC", "clock_ahead")}, health["warnings"]
        two_clocks = next(w for w in health["warnings"] if w["kind"] == "late_ticks")
        assert "two clocks interleave" in two_clocks["message"] and "ingest.reorder_window_ms" in two_clocks["message"]
        assert stats["rejected_streams"] == {"BTC": {"ts_backwards": refused}}
        assert f'flashtick_rejected_by_stream_total{{stream="BTC",reason="ts_backwards"}} {refused}' in render(stats)
        said = capfd.readouterr()
        assert "two clocks interleave" in said.err
        line = rf"^BTC\tlast_ts .*\trejected ts_backwards {refused}\tclock ahead [0-9.]+s$"  # (`flashtick streams`)
        assert re.search(line, said.out, re.M), said.out

        # the late-ticks warning says its window in UTC however late `health` is read
        assert "since the last heartbeat" not in late["message"], late
        said = re.search(r"ticks refused as late \(ts_backwards\) from (\S+) to (\S+) \(([0-9.]+) s\): BTC (\d+) "
                         r"of (\d+):", late["message"])
        assert said is not None, late["message"]
        utc = lambda t: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))  # noqa: E731
        assert said[1].startswith(utc(late["since"])) and said[2].startswith(utc(late["at"])), late
        assert late["since"] <= late["at"] and float(said[3]) == round(late["at"] - late["since"], 1)
        assert (int(said[4]), int(said[5])) == (late["ts_backwards"], late["ts_backwards"] + late["accepted"])

        # a clock minutes ahead is flagged, a clock stepped back is said with what to do
        now = time.time_ns()
        for k in range(10):
            push.send(msgpack.packb(_tick("FAR", now + 120 * 10**9 + k, 100.0)))
        push.send(msgpack.packb(_tick("STEP", now, 100.0)))
        for k in range(3):  # its feed's clock stepped back an hour
            push.send(msgpack.packb(_tick("STEP", now - 3600 * 10**9 + k, 100.0)))
        wait_for(lambda: server.pipeline.ticks_in + server.pipeline.rejected["ts_backwards"] == 60 + 14)
        with ControlClient(server.endpoints["control"]) as control:
            wait_for(lambda: any(w["kind"] == "clock_stepped_back" for w in control.call("health").get("warnings",
                                                                                                       [])))
            health = control.call("health")
            far = control.call("streams", streams=["FAR"])["streams"]["FAR"]
    assert far["clock_offset_ms"] < -100_000 and "ahead of this machine's clock" in far["clock_ahead"], far
    kinds = {(w["stream"], w["kind"]) for w in health["warnings"]}
    assert ("FAR", "clock_ahead") in kinds and ("STEP", "clock_stepped_back") in kinds, health["warnings"]
    assert ("STEP", "late_ticks") not in kinds, health["warnings"]
    step = next(w for w in health["warnings"] if w["kind"] == "clock_stepped_back")
    assert step["ts_backwards"] == 3 and 3599 < step["step_s"] < 3601, step
    assert "60.0 min behind" in step["message"] and "flashtick forget STEP" in step["message"], step
    assert "No reorder window helps" in step["message"], step
    said = capfd.readouterr().err
    assert 'flashtick: WARNING: stream "STEP": 3 ticks refused as ts_backwards' in said, said


def test_published_answers_carry_their_age_and_the_streams_clock_offset(checkpoint, tmp_path) -> None:
    """review323 #12, #10: a stream stamped 2 s ahead: its answers carry data_ts, data_age_ms (counted from the
    earliest the tick can have come: not negative by the skew) and clock_offset_ms, and a `clock_ahead` caveat; a
    stream of a capture's time (not the wall clock) carries no offset."""
    (tmp_path / "q.yaml").write_text(QUERY)
    with live_server(checkpoint, queries=str(tmp_path / "q.yaml")) as (server, push):
        with AnswerSubscriber(server.endpoints["answers"], ["dir/"]) as sub:
            sub.wait_ready(timeout_s=60)
            push.send(msgpack.packb(_tick("AHEAD", time.time_ns() + 2_000_000_000, 10.0)))
            push.send(msgpack.packb(_tick("OLD", BASE_TS, 10.0)))
            got = {}
            while len(got) < 2 and (message := sub.recv(timeout_s=60)) is not None:
                got[message[1]["stream"]] = message[1]
    ahead, old = got["AHEAD"], got["OLD"]
    # review376 #1: never a negative age (it passed every freshness gate); the clock ahead is a caveat instead
    assert ahead["data_age_ms"] >= 0 and ahead["clock_offset_ms"] < -1500  # (counted from the tick's arrival)
    assert [c["kind"] for c in ahead["caveats"]] == ["clock_ahead"], ahead
    assert old["data_age_ms"] > 1e9 and "clock_offset_ms" not in old and "caveats" not in old


def test_held_ticks_are_released_by_a_stop_and_a_placing_streams_call(checkpoint, tmp_path) -> None:
    """Held ticks are not in the tick log yet: a feed placing itself (`streams` with drain) reads them as accepted,
    and a stop takes them in (logged: a restart on the data directory holds them) rather than dropping them."""
    sections = {"log": {"dir": str(tmp_path / "d")}, "ingest": {"reorder_window_ms": 30_000}}
    with live_server(checkpoint, **sections) as (server, push):
        push.send(msgpack.packb([_tick("HELD", BASE_TS + k * STEP_NS, 10.0 + k) for k in (0, 2, 1)]))
        wait_for(lambda: _held(server) == 3)
        with ControlClient(server.endpoints["control"]) as control:
            placed = control.call("streams", streams=["HELD"], drain=True)["streams"]["HELD"]
        assert placed["ticks"] == 3 and placed["last_ts"] == BASE_TS + 2 * STEP_NS and _held(server) == 0
        push.send(msgpack.packb(_tick("HELD", BASE_TS + 3 * STEP_NS, 13.0)))
        wait_for(lambda: _held(server) == 1)
    assert server.pipeline.rejected == {} and server.pipeline.ticks_in == 4  # (the stop released the last one)
    with live_server(checkpoint, **sections) as (server, push):
        with ControlClient(server.endpoints["control"]) as control:
            again = control.call("streams", streams=["HELD"])["streams"]["HELD"]
    assert again["ticks"] == 4 and again["last_ts"] == BASE_TS + 3 * STEP_NS


def test_the_window_releases_in_event_time_order_and_bounds_what_it_holds() -> None:
    """ReorderWindow alone: what has been held the whole window goes with every held tick not newer than it, sorted
    (ties as read); a tick past reorder_max_ticks releases its stream at once."""
    window = ReorderWindow(window_ns=100, max_ticks=4)
    assert window.hold("A", 30, {"n": 0}, None, 0, now_ns=0, message=1) == []
    assert window.hold("A", 10, {"n": 1}, None, 0, now_ns=50, message=2) == []  # late by 20: placed when released
    assert window.hold("A", 40, {"n": 2}, "t", 1, now_ns=60, message=3) == []
    assert window.due(99) == [] and window.next_due_ns() == 100
    released = window.due(100)  # A's first tick (30) has waited: it goes with 10, not with 40
    assert [(r.tag, [t.obj["n"] for t in r.ticks]) for r in released] == [(None, [1]), (None, [0])]
    assert len(window) == 1 and window.placed == 1 and window.next_due_ns() == 160
    assert window.hold("B", 5, {}, None, 0, 61, 4) == [] and window.hold("B", 5, {"n": 9}, None, 1, 62, 4) == []
    assert window.hold("A", 40, {"n": 3}, "t", 0, 63, 5) == []
    early = window.hold("B", 1, {"n": 4}, None, 2, 64, 6)  # the fifth tick held: B goes at once, in order
    assert [[(t.ts, t.index) for t in r.ticks] for r in early] == [[(1, 2)], [(5, 0), (5, 1)]]
    assert window.released_early == 3 and len(window) == 2
    # two messages at one time (40): one group, as they are one batch of the backtest's (review of review383 #1)
    assert [[t.obj["n"] for t in r.ticks] for r in window.flush()] == [[2, 3]] and len(window) == 0


def test_a_late_exact_copy_of_a_held_tick_from_another_message_is_a_resend() -> None:
    """review431 #3: a tick without seq read after a newer one, copying one held from an earlier message, is told as
    a resend (refused, not placed and taken twice); a late tick of other values, a copy not behind the newest held
    tick, and a copy within one message (two trades alike) are not."""
    window = ReorderWindow(window_ns=100, max_ticks=100)
    first, newer = {"stream": "A", "ts": 10, "price": 5.0}, {"stream": "A", "ts": 20, "price": 6.0}
    window.hold("A", 10, first, None, 0, now_ns=0, message=1)
    window.hold("A", 20, newer, None, 1, now_ns=0, message=1)
    assert window.resent_behind("A", 10, dict(first), message=2) == 20
    assert window.resent_behind("A", 10, {**first, "price": 5.5}, message=2) is None
    assert window.resent_behind("A", 20, dict(newer), message=2) is None
    assert window.resent_behind("A", 10, dict(first), message=1) is None
    assert window.resent_behind("B", 10, dict(first), message=2) is None


def test_released_ticks_keep_the_groups_their_messages_made() -> None:
    """review383 #1: ticks due in one turn go out in the groups the feed sent (one per message, not one per turn);
    a late tick placed inside another message's span joins that message's group (the backtest's sort puts them in
    one batch), and messages that interleave in time make one group."""
    window = ReorderWindow(window_ns=100, max_ticks=100)
    for message, stamps in enumerate(([1, 2, 3], [4, 5], [6, 9], [7], [8, 11], [10], [12]), start=1):
        for index, ts in enumerate(stamps):
            window.hold("A", ts, {"ts": ts}, None, index, now_ns=message, message=message)
    groups = [[t.ts for t in r.ticks] for r in window.due(200)]
    assert groups == [[1, 2, 3], [4, 5], [6, 7, 8, 9, 10, 11], [12]]


def test_a_tick_an_hour_late_among_taken_ones_is_said_stale_and_a_clock_stepped_back_when_none_is_taken(
        capsys) -> None:
    """review411 #2: one tick an hour late, the stream's later ticks all taken, was said in the log and `health` as
    its clock stepped back, "every tick of it is refused", advising `flashtick forget`. Now that is said when none of
    its ticks is taken after it (a tick late at the end of a heartbeat is judged at the next)."""
    refusals, hour = StreamRefusals(late_share_warn=0.05, window_ms=200), 3600 * 10**9
    accepted = {"JIT": 50, "EDGE": 50, "STEP": 50}

    def late(stream: str) -> None:
        error = f'ts_backwards: stream "{stream}": ts {BASE_TS - hour} (...) < previous {BASE_TS} (...)'
        refusals.add([{"stream": stream, "reason": "ts_backwards", "error": error}], accepted.get)

    late("JIT"), late("EDGE"), late("STEP")
    accepted["JIT"] += 8
    assert refusals.check_late(accepted.get) == [] and refusals.health_warnings() == []
    late("STEP"), late("STEP")
    accepted["EDGE"] += 3
    assert refusals.check_late(accepted.get) == ["STEP"]
    assert [(w["stream"], w["kind"], w["ts_backwards"]) for w in refusals.health_warnings()] == [
        ("STEP", "clock_stepped_back", 3)]
    said = capsys.readouterr().err
    assert 'INFO: stream "JIT": 1 tick refused as ts_backwards, stamped up to 60.0 min behind' in said, said
    assert "while its later ticks were taken (8 since)" in said and "nothing to do" in said
    assert 'INFO: stream "EDGE": 1 tick refused' in said and "(3 since)" in said
    assert 'WARNING: stream "STEP": 3 ticks refused' in said and "flashtick forget STEP" in said
    assert said.count("forget") == 1 and said.count("stepped back") == 1
    from engine.service.log_levels import leveled  # (each routed on its own event: diff review of review411 #2)

    events = {leveled(line)[2] for line in said.splitlines() if "refused as ts_backwards" in line}
    assert events == {"stale_ticks", "feed_clock"}, said


def test_refusals_are_counted_by_stream_in_bounded_memory_and_two_clocks_are_told_from_a_late_tick() -> None:
    """StreamRefusals alone: the most refused streams kept one by one (the rest summed under _other); a stream
    with a share of its ticks refused as late past late_share_warn is warned of, a single late tick is not."""
    refusals = StreamRefusals(late_share_warn=0.05, window_ms=0)
    accepted = {"MIX": 100, "ONE": 100}
    refusals.add([{"stream": "MIX", "reason": "ts_backwards", "count": 12}], accepted.get)
    refusals.add([{"stream": "ONE", "reason": "ts_backwards"}], accepted.get)
    accepted.update(MIX=200, ONE=1000)
    assert refusals.check_late(accepted.get, now=1000.0) == ["MIX"]
    assert [w["stream"] for w in refusals.health_warnings()] == ["MIX"]
    assert refusals.check_late(accepted.get, now=1000.0 + 601) == [] and refusals.health_warnings() == []
    for k in range(STREAMS_KEPT + 5):
        refusals.add([{"stream": f"S{k:03d}", "reason": "bad_price", "count": 2}])
    most = refusals.most()
    assert list(most)[0] == "MIX" and len(most) == STREAMS_SAID + 1 and "_other" in most
    assert sum(sum(r.values()) for r in most.values()) == 12 + 1 + 2 * (STREAMS_KEPT + 5)
    assert refusals.of("MIX") == {"ts_backwards": 12}


def test_more_streams_interleaving_at_one_check_than_are_said_are_said_not_a_crash(capsys) -> None:
    """review435 #0: two feeds on 50 streams, each refused as late at one heartbeat: `warnings` kept the last
    STREAMS_SAID, and the line then said the first STREAMS_SAID seen from it, a KeyError that stopped `serve` (exit
    2, no traceback). The line says the first ones seen; health keeps the last ones."""
    refusals = StreamRefusals(late_share_warn=0.05, window_ms=0)
    names = [f"MY.{k:03d}" for k in range(STREAMS_SAID + 15)]
    for name in names:
        refusals.add([{"stream": name, "reason": "ts_backwards", "count": 12}], {name: 10}.get)
    assert refusals.check_late(lambda _: 20, now=1000.0) == names
    said = capsys.readouterr().err
    assert "two clocks interleave" in said and "MY.000 12 of 22" in said and f"MY.{STREAMS_SAID:03d}" not in said
    assert [w["stream"] for w in refusals.health_warnings()] == names[-STREAMS_SAID:]


def test_resent_copies_refused_as_late_are_said_as_a_resend_not_two_clocks(capsys) -> None:
    """review431 #3: 19 of 19 ticks refused as ts_backwards, each a copy of a tick taken (a reconnect's resend), were
    warned of as two clocks interleaving, with a reorder window to set; now they are said as the feed's resend, with
    the resume recipe, and no late_ticks warning is kept for health."""
    refusals = StreamRefusals(late_share_warn=0.05, window_ms=0)
    error = f'ts_backwards: stream "KRK": ts 1 (...) < previous 2 (...); {RESENT} (its ts, kind and values): ...'
    refusals.add([{"stream": "KRK", "reason": "ts_backwards", "error": error, "count": 19}], {"KRK": 40}.get)
    assert refusals.check_late({"KRK": 41}.get) == [] and refusals.health_warnings() == []
    said = capsys.readouterr().err
    assert 'stream "KRK": 19 ticks refused as ts_backwards, each an exact copy' in said, said
    assert "not two clocks" in said and "docs/feed-resume.md" in said and "interleave" not in said
    assert refusals.of("KRK") == {"ts_backwards": 19}


def test_a_resend_across_many_streams_is_one_log_line_naming_the_first_few(capsys) -> None:
    """A reconnect's resend spans every stream the feed sends: one line per resend, naming the most resent streams
    and how many in all, as other multi-stream lines do (it logged a line per stream)."""
    refusals = StreamRefusals(late_share_warn=0.05, window_ms=0)
    error = f'ts_backwards: ts 1 (...) < previous 2 (...); {RESENT} (its ts, kind and values): ...'
    names = [f"S{k:02d}" for k in range(20)]
    refusals.add([{"stream": name, "reason": "ts_backwards", "error": error, "count": 30 - k}
                  for k, name in enumerate(names)])
    assert refusals.check_late(lambda _: 50) == []
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith('flashtick: INFO: streams "S00", "S01", "S02", "S03", "S04", ... (20 in all): 410 ticks '
                           "refused as ts_backwards, each an exact copy"), line


@pytest.mark.parametrize("section, message", [
    ({"rename": {"A": "B", "B": "C"}}, 'a name is renamed once; map "A" to "C"'),
    ({"rename": {"A": "x/y"}}, "not a valid stream name"),
    ({"rename": {"A": "A"}}, 'renames "A" to itself'),
    ({"rename": ["A"]}, "ingest.rename must be a mapping"),
    ({"reorder_window_ms": -1}, "ingest.reorder_window_ms must be a finite number of milliseconds >= 0"),
    ({"reorder_window_ms": 60_000}, "below 60000"),
    ({"late_share_warn": 0}, "ingest.late_share_warn must be a share in"),
    ({"reorder_max_ticks": 0}, "ingest.reorder_max_ticks must be an integer > 0"),
    ({"window": 5}, 'unknown key "window" in section "ingest"'),
])
def test_the_ingest_section_is_checked_by_key(section, message) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        ServiceConfig.from_dict({"ingest": section}, "engine.yaml")
