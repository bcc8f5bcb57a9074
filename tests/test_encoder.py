"""Per-stream encoders: ordering per stream, refused ticks leave no trace, raw and pre-tokenized
ticks share one guard, stream-name and token-range rules in both wire forms."""

from __future__ import annotations

import time

import msgpack
import pytest

from conftest import tiny_tick_checkpoint
from connectors.codec import BinnedCodec
from connectors.encoder import SHIFT_PRICES, EncodedTick, StreamEncoder, StreamEncoders
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.tick_times import check_not_ahead
from connectors.ticks import InvalidTick, Tick, encode, trade
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline

CODEC = BinnedCodec()


@pytest.fixture(scope="module")
def ticks() -> list[Tick]:
    return SyntheticMarket(SyntheticConfig(seed=3)).generate(400).by_stream()["SYN.A"][0][:60]


class Sink:
    """Where submitted items go; refuses the ts values it is told to, as a full engine would."""

    def __init__(self, refuse: set[int] = frozenset()) -> None:
        self.items: list[EncodedTick] = []
        self.refuse = refuse

    def __call__(self, item: EncodedTick) -> None:
        if item.ts in self.refuse:
            raise InvalidTick("stream_refused", f"ts {item.ts} refused")
        self.items.append(item)


def tokenized(*items: dict) -> bytes:
    return msgpack.packb(list(items))


def test_ordering_is_per_stream() -> None:
    encoders, sink = StreamEncoders(CODEC), Sink()
    wire = [trade("A", 100, 10.0, 1.0).to_wire(), trade("B", 50, 20.0, 1.0).to_wire(),
            trade("A", 90, 10.0, 1.0).to_wire(), trade("B", 60, 20.0, 1.0).to_wire(),
            trade("A", 100, 10.5, 1.0).to_wire()]  # equal ts is fine
    result = encoders.ingest_message(msgpack.packb(wire), sink)
    assert [(r.index, r.reason, r.stream) for r in result.rejections] == [(2, "ts_backwards", "A")]
    assert [(i.stream, i.ts) for i in sink.items] == [("A", 100), ("B", 50), ("B", 60), ("A", 100)]
    assert (encoders["A"].last_ts, encoders["B"].last_ts) == (100, 60)
    assert (encoders["A"].ticks, encoders["B"].ticks, result.ticks) == (2, 2, 4)


def test_rejected_tick_leaves_stream_state_untouched(ticks: list[Tick]) -> None:
    """The good ticks' tokens equal a clean encode of the good ticks alone, whatever was refused between them."""
    backwards = Tick(ticks[10].stream, ticks[10].ts - 1, "trade", price=ticks[10].price or 1.0, size=5.0)
    refused = ticks[20]  # refused downstream (engine admission) after it was encoded
    feed = ticks[:11] + [backwards] + ticks[11:]
    encoders, sink = StreamEncoders(CODEC), Sink(refuse={refused.ts})
    reasons = []
    for tick in feed:
        try:
            encoders.ingest(tick, sink)
        except InvalidTick as err:
            reasons.append((err.reason, err.stream))
    good = [t for t in ticks if t.ts != refused.ts]
    assert reasons[0] == ("ts_backwards", "SYN.A") and ("stream_refused", "SYN.A") in reasons
    assert [tok for item in sink.items for tok in item.tokens] == CODEC.encode_stream(good)
    assert encoders["SYN.A"].ticks == len(good)


def test_first_phase_mutates_nothing(ticks: list[Tick]) -> None:
    encoder = StreamEncoder("SYN.A", CODEC, CODEC.vocab_size)
    encoder.commit(encoder.encode(ticks[0]))
    before = (encoder.last_ts, encoder.ticks, vars(encoder.state).copy())
    first = encoder.encode(ticks[1])
    assert encoder.encode(ticks[1]) == first  # encoding twice gives the same tokens: nothing advanced
    assert (encoder.last_ts, encoder.ticks, vars(encoder.state)) == before
    encoder.commit(first)
    assert encoder.last_ts == ticks[1].ts and encoder.state is first.state


def test_refused_first_tick_creates_no_encoder() -> None:
    encoders = StreamEncoders(CODEC)
    with pytest.raises(InvalidTick, match="stream_refused"):
        encoders.ingest(trade("NEW", 5, 1.0, 1.0), Sink(refuse={5}))
    assert "NEW" not in encoders and len(encoders) == 0


def test_raw_and_tokenized_ticks_share_one_ordering_guard() -> None:
    encoders, sink = StreamEncoders(CODEC), Sink()
    assert encoders.ingest_message(encode(trade("A", 100, 10.0, 1.0)), sink).rejections == []
    late = encoders.ingest_tokenized(tokenized({"stream": "A", "ts": 50, "tokens": [1, 2]}), sink)
    assert [(r.reason, r.stream) for r in late.rejections] == [("ts_backwards", "A")]
    ok = encoders.ingest_tokenized(tokenized({"stream": "A", "ts": 200, "tokens": [1, 2, 3], "ticks": 3}), sink)
    assert ok.rejections == [] and ok.ticks == 3
    raw_late = encoders.ingest_message(encode(trade("A", 150, 10.0, 1.0)), sink)
    assert [(r.reason, r.stream) for r in raw_late.rejections] == [("ts_backwards", "A")]
    assert encoders["A"].last_ts == 200 and encoders["A"].ticks == 4


def test_tokenized_item_keeps_the_codec_state() -> None:
    encoders, sink = StreamEncoders(CODEC), Sink()
    a, b = trade("A", 100, 10.0, 1.0), trade("A", 300, 10.1, 2.0)
    encoders.ingest(a, sink)
    encoders.ingest_tokenized(tokenized({"stream": "A", "ts": 200, "tokens": [1, 2, 3, 4]}), sink)
    encoders.ingest(b, sink)
    assert sink.items[-1].tokens == CODEC.encode_stream([a, b])[4:]  # b is encoded relative to a


@pytest.mark.parametrize("stream,reason", [("BTC/USDT", "bad_stream"), ("", "missing_stream"), (7, "wrong_type")])
def test_bad_stream_names_rejected_in_both_forms(stream, reason) -> None:
    encoders, sink = StreamEncoders(CODEC), Sink()
    raw = encoders.ingest_message(msgpack.packb({"stream": stream, "ts": 1, "price": 1.0, "size": 1.0}), sink)
    tok = encoders.ingest_tokenized(tokenized({"stream": stream, "ts": 1, "tokens": [1]}), sink)
    assert [(r.index, r.reason, r.stream) for r in raw.rejections + tok.rejections] == [(0, reason, None)] * 2
    assert sink.items == [] and len(encoders) == 0
    if isinstance(stream, str) and stream:  # a Tick built without validation meets the same rule
        with pytest.raises(InvalidTick, match=reason):
            encoders.ingest(Tick(stream, 1, "trade", price=1.0, size=1.0), sink)


@pytest.mark.parametrize("tokens", [[CODEC.vocab_size], [-1], [1, True], [], "1 2", [1.0]])
def test_token_ids_out_of_range_rejected(tokens) -> None:
    encoders, sink = StreamEncoders(CODEC), Sink()
    result = encoders.ingest_tokenized(tokenized({"stream": "A", "ts": 1, "tokens": tokens},
                                                 {"stream": "A", "ts": 2, "tokens": [CODEC.vocab_size - 1]}), sink)
    assert [(r.index, r.reason, r.stream) for r in result.rejections] == [(0, "bad_tokens", "A")]
    assert [i.ts for i in result.accepted] == [2]


def test_token_range_is_the_given_vocabulary() -> None:
    encoders = StreamEncoders(CODEC, vocab_size=CODEC.vocab_size + 32)  # a model with spare embeddings
    result = encoders.ingest_tokenized(tokenized({"stream": "A", "ts": 1, "tokens": [CODEC.vocab_size + 31]}), Sink())
    assert result.rejections == [] and result.ticks == 1


def test_a_tick_the_service_shifted_and_left_below_zero_is_said_as_sent_with_a_way_out_that_shifts_once() -> None:
    """A served model's training offset (CLK0=38) is added at ingest: a tick sent at -38.5 is refused saying the
    price as sent, the offset and the shifted price, and asks for a model trained with a larger offset, not for a
    sender's shift that the service would add to (review410 #4: it said `got -0.5`, and to shift before sending)."""
    encoders = StreamEncoders(CODEC, price_offset={"CLK0": 38.0})
    wire = [{"stream": "CLK0", "ts": 1, "price": -38.5, "size": 1.0}, {"stream": "X", "ts": 1, "price": -3.0,
                                                                         "size": 1.0}]
    shifted, unshifted = encoders.ingest_message(msgpack.packb(wire), Sink()).rejections
    assert shifted.to_wire()["error"] == (
        "nonpositive_price: price -38.5 shifted by this service's ingest price offset 38 is -0.5, still not above "
        "zero: the service adds its model's training --price-offset to every tick itself (health's "
        "ingest_price_offset), so ticks are sent as the venue prints them; a price this low needs a model trained "
        "with a larger offset (flashtick train FILES --price-offset 'CLK0=39')")
    assert unshifted.to_wire()["error"] == "nonpositive_price: price must be > 0, got -3.0" + SHIFT_PRICES


def test_tokenized_schema_rejections() -> None:
    encoders, sink = StreamEncoders(CODEC), Sink()
    result = encoders.ingest_tokenized(tokenized(
        [1], {"stream": "A", "ts": 1, "tokens": [1], "venue": "x"}, {"stream": "A", "ts": 1.5, "tokens": [1]},
        {"stream": "A", "tokens": [1]}, {"stream": "A", "ts": -1, "tokens": [1]},
        {"stream": "A", "ts": 1, "tokens": [1], "ticks": 0}), sink)
    assert [(r.reason, r.stream) for r in result.rejections] == [
        ("not_a_map", None), ("unknown_field", "A"), ("ts_not_int", "A"), ("missing_field", "A"),
        ("ts_out_of_range", "A"), ("wrong_type", "A")]
    assert sink.items == []
    for garbage in (b"\xc1 not msgpack", msgpack.packb({"stream": "A", "ts": 1, "tokens": [1]})):
        assert [r.reason for r in encoders.ingest_tokenized(garbage, sink).rejections] == ["bad_msgpack"]


def test_decode_rejects_carry_the_stream_once_known() -> None:
    encoders = StreamEncoders(CODEC, max_message_bytes=256)
    wire = [{"stream": "X", "ts": 1, "price": -3.0, "size": 1.0}, {"ts": 1, "price": 1.0, "size": 1.0}, 42,
            {"stream": "Y", "ts": 1, "bid": 2.0, "ask": 1.0}]
    result = encoders.ingest_message(msgpack.packb(wire), Sink())
    assert [(r.index, r.reason, r.stream) for r in result.rejections] == [
        (0, "nonpositive_price", "X"), (1, "missing_stream", None), (2, "not_a_map", None), (3, "crossed_quote", "Y")]
    assert result.rejections[0].to_wire() == {"index": 0, "reason": "nonpositive_price", "stream": "X",
                                              "error": "nonpositive_price: price must be > 0, got -3.0" + SHIFT_PRICES}
    assert "stream" not in result.rejections[1].to_wire()
    oversize = encoders.ingest_message(b"\x90" * 300, Sink())
    assert [(r.index, r.reason, r.count) for r in oversize.rejections] == [(-1, "oversize", 1)]
    # refused unread, but counted as the ticks its list header says it holds: a feed's sent = in + rejected
    for ticks in (12, 40, 70_000):
        burst = msgpack.packb([{"stream": "X", "ts": 1, "price": 1.0, "size": 1.0}] * ticks)
        (refused,) = encoders.ingest_message(burst, Sink()).rejections
        assert (refused.reason, refused.count) == ("oversize", ticks)
        assert f"({ticks} ticks) > 256 (limits.max_message_bytes): none of its ticks was read" in refused.error
    # a list header claiming more items than the message has bytes is no list of ticks: one message, not 4.29e9
    (garbage,) = encoders.ingest_message(b"\xdd\xff\xff\xff\xff" + b"\xc0" * 5000, Sink()).rejections
    assert (garbage.reason, garbage.count) == ("oversize", 1) and "(1 tick) > 256" in garbage.error


def test_pipeline_reports_refused_streams_and_keeps_their_state(tmp_path) -> None:
    """The engine's admission refusal becomes a `stream_refused` rejection; the stream can come back later."""
    checkpoint = tiny_tick_checkpoint(tmp_path, max_position_embeddings=512)
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 1280, "block_size": 16},
                                      "scheduler": {"when_full": "refuse", "window": 256}})
    pipeline = TickPipeline(config)
    admitted = pipeline.engine.scheduler.max_streams_admitted
    full = [trade(f"S{i}", 10, 1.0, 1.0) for i in range(admitted)] + [trade("late", 10, 1.0, 1.0)]
    rejections = pipeline.ingest_message(encode(full))
    assert [(r["index"], r["reason"], r["stream"]) for r in rejections] == [(admitted, "stream_refused", "late")]
    assert pipeline.ticks_in == admitted and pipeline.rejected["stream_refused"] == 1
    assert "late" not in pipeline.encoders
    with pytest.raises(InvalidTick, match="stream_refused"):
        pipeline.ingest(trade("late", 5, 1.0, 1.0))
    tok = pipeline.ingest_tokenized(msgpack.packb([{"stream": "S0", "ts": 9, "tokens": [1]},
                                                   {"stream": "S0", "ts": 11, "tokens": [1, 2, 3, 4]}]))
    assert [(r["reason"], r["stream"]) for r in tok] == [("ts_backwards", "S0")]
    assert pipeline.ticks_in == admitted + 1 and pipeline.encoders["S0"].last_ts == 11


def test_tokenized_items_bounded_by_the_window_tick_counts_and_int64_ts() -> None:
    """Each bad item is refused with its reason; the good items around it go in, in order."""
    encoders, sink = StreamEncoders(CODEC, max_item_tokens=8), Sink()
    good = [{"stream": "A", "ts": 10 + i, "tokens": [1] * (1 + i), "ticks": 1} for i in range(8)]
    bad = [({"stream": "A", "ts": 100, "tokens": [1] * 9}, "bad_tokens"),  # one past the window's room
           ({"stream": "A", "ts": 100, "tokens": [1] * 200_000}, "bad_tokens"),
           ({"stream": "A", "ts": 100, "tokens": [1, 2], "ticks": 10**15}, "bad_tokens"),
           ({"stream": "A", "ts": 100, "tokens": [1, 2], "ticks": 3}, "bad_tokens"),
           ({"stream": "A", "ts": 100, "tokens": [1, 2], "ticks": True}, "wrong_type"),
           ({"stream": "A", "ts": -5, "tokens": [1]}, "ts_out_of_range"),
           ({"stream": "A", "ts": 2**64 - 1, "tokens": [1]}, "ts_out_of_range"),
           ({"stream": "A", "ts": 2**63, "tokens": [1]}, "ts_out_of_range")]
    items = [x for pair in zip(good, bad) for x in (pair[0], pair[1][0])]
    result = encoders.ingest_tokenized(msgpack.packb(items), sink)
    assert [(r.index, r.reason, r.stream) for r in result.rejections] == [
        (2 * i + 1, reason, "A") for i, (_, reason) in enumerate(bad)]
    assert [i.ts for i in sink.items] == [g["ts"] for g in good] and result.ticks == len(good)
    assert "at most 8" in result.rejections[0].error
    assert "ticks 1000000000000000 > 2 tokens" in result.rejections[2].error
    edge = encoders.ingest_tokenized(tokenized({"stream": "A", "ts": 2**63 - 1, "tokens": [1] * 8, "ticks": 8}), sink)
    assert edge.rejections == [] and edge.ticks == 8 and encoders["A"].ticks == len(good) + 8


def test_raw_ticks_share_the_item_bound_and_the_name_limit() -> None:
    encoders, sink = StreamEncoders(CODEC, max_item_tokens=3, max_stream_bytes=4), Sink()  # a tick is 4 tokens here
    result = encoders.ingest_message(encode([trade("A", 1, 1.0, 1.0), trade("ABCDE", 1, 1.0, 1.0)]), sink)
    assert [(r.reason, r.stream) for r in result.rejections] == [("bad_tokens", "A"), ("bad_stream", None)]
    long_names = StreamEncoders(CODEC, max_stream_bytes=200)
    name = "N" * 150  # past the default 128, within this service's limit: every path takes it
    raw = msgpack.packb({"stream": name, "ts": 1, "price": 1.0, "size": 1.0})
    assert long_names.ingest_message(raw, Sink()).rejections == []
    assert long_names.ingest_tokenized(tokenized({"stream": name, "ts": 2, "tokens": [1]}), Sink()).rejections == []
    long_names.ingest(Tick(name + "M", 1, "trade", price=1.0, size=1.0), Sink())
    assert len(long_names) == 2
    with pytest.raises(ValueError, match="max_item_tokens must be an int > 0"):
        StreamEncoders(CODEC, max_item_tokens=0)


def test_pipeline_bounds_items_by_the_schedulers_room_and_such_an_item_is_placed(tmp_path) -> None:
    """The longest item the service takes is the longest the scheduler can place: it advances, one more is refused."""
    checkpoint = tiny_tick_checkpoint(tmp_path, max_position_embeddings=512)
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 1280, "block_size": 16},
                                      "scheduler": {"window": 256, "sink_tokens": 4},
                                      "limits": {"max_stream_bytes": 64}})
    pipeline = TickPipeline(config)
    scheduler = pipeline.engine.scheduler
    room = scheduler.roll_at - scheduler.sink
    assert pipeline.encoders.max_item_tokens == room and pipeline.encoders.max_stream_bytes == 64
    items = [{"stream": "S", "ts": 1, "tokens": [1] * 40}, {"stream": "S", "ts": 2, "tokens": [1] * (room + 1)},
             {"stream": "S", "ts": 3, "tokens": [2] * room}, {"stream": "S", "ts": 4, "tokens": [3] * room}]
    rejections = pipeline.ingest_tokenized(msgpack.packb(items))
    assert [(r["index"], r["reason"]) for r in rejections] == [(1, "bad_tokens")]
    pipeline.run_until_idle()  # two full-room items in a row: each rolls the session and is placed
    assert scheduler.pending_tokens() == 0
    assert scheduler.streams["S"].session.tokens[scheduler.sink:] == [3] * room


def test_the_clock_bound_applies_to_live_messages_only_and_null_switches_it_off() -> None:
    """max_ts_ahead_ns bounds a message given its receiver's clock (a live service, both wire forms); a tick log's
    replay gives none and takes back what was accepted; None accepts any ts."""
    now, far = 1_796_000_000_000_000_000, 7_000_000_000_000_000_000
    message = msgpack.packb([trade("A", now + 10**9, 1.0, 1.0).to_wire(), trade("A", far, 1.0, 1.0).to_wire()])
    live = StreamEncoders(CODEC, max_ts_ahead_ns=86_400 * 10**9)
    result = live.ingest_message(message, Sink(), now_ns=now)
    assert [r.reason for r in result.rejections] == ["ts_in_future"] and len(result.accepted) == 1
    item = {"stream": "T", "ts": far, "tokens": [1, 2]}
    assert [r.reason for r in live.ingest_tokenized(tokenized(item), Sink(), now_ns=now).rejections] == [
        "ts_in_future"]
    for encoders, now_ns in ((StreamEncoders(CODEC, max_ts_ahead_ns=86_400 * 10**9), None),
                             (StreamEncoders(CODEC, max_ts_ahead_ns=None), now)):
        assert len(encoders.ingest_message(message, Sink(), now_ns=now_ns).accepted) == 2
        assert len(encoders.ingest_tokenized(tokenized(item), Sink(), now_ns=now_ns).accepted) == 1


@pytest.mark.parametrize(("ahead_s", "named"), [
    (5.5 * 3600, "(UTC+05:30)"), (5.75 * 3600, "(UTC+05:45)"), (9.5 * 3600 + 30, "(UTC+09:30)"), (3600, "(UTC+01:00)"),
    (9 * 3600 - 300, "(UTC+09:00, its times 5 min behind real time)"),  # a Tokyo file of 5 minutes ago, no --tz
    (999, None), (3.7 * 3600, None), (15 * 3600, None)])  # ms read as s (16.7 min at most), no zone's offset
def test_ts_in_future_names_a_local_time_at_any_zones_offset_and_minutes_behind_real_time(ahead_s, named) -> None:
    """review411 #8: a venue's local time sent as UTC was named for whole hours alone (within a minute): India's
    +05:30, Nepal's +05:45, Adelaide's +09:30 and a local-time feed a few minutes old were 'a clock or unit
    mistake?'."""
    now = 1_796_000_000_000_000_000
    with pytest.raises(InvalidTick) as refused:
        check_not_ahead("MUMBAI", now + round(ahead_s * 10**9), now, 10 * 10**9)
    said = "a venue's local time sent as UTC" in refused.value.message
    assert said == (named is not None) and (named is None or named in refused.value.message), refused.value.message


def test_ts_backwards_behind_a_tick_ahead_of_the_clock_says_so_and_how_long_it_holds() -> None:
    """review376 #1: a stream whose last tick is stamped ahead of the live clock refuses the real feed as
    ts_backwards: the refusal says the guard is ahead, by how much, and the ways out; without the clock (a tick log's
    replay) or once the clock has passed it, the plain words."""
    now = 1_796_000_000_000_000_000
    live = StreamEncoders(CODEC, max_ts_ahead_ns=10 * 10**9)
    first = live.ingest_message(msgpack.packb(trade("A", now + 8 * 10**9, 1.0, 1.0).to_wire()), Sink(), now_ns=now)
    assert len(first.accepted) == 1
    refused = live.ingest_message(msgpack.packb(trade("A", now + 10**6, 1.0, 1.0).to_wire()), Sink(),
                                  now_ns=now + 10**6).rejections
    assert [r.reason for r in refused] == ["ts_backwards"]
    assert refused[0].error.endswith(", which is stamped 8 s ahead of this service's clock: the stream's ticks stamped "
                                     "before it are refused until the clock passes it (limits.max_ts_ahead_s bounds "
                                     "how far ahead a tick is taken), or `flashtick forget A` drops the stream and "
                                     "its guard"), refused[0].error
    later = live.ingest_message(msgpack.packb(trade("A", now, 1.0, 1.0).to_wire()), Sink(), now_ns=now + 9 * 10**9)
    assert [r.reason for r in later.rejections] == ["ts_backwards"]
    assert later.rejections[0].error.endswith("(2026-11-30T00:53:28Z)"), later.rejections[0].error
    # a name a shell splits is quoted, so the command pastes (EPEX's `DE H13`)
    live.ingest_message(msgpack.packb(trade("DE H13", now + 8 * 10**9, 1.0, 1.0).to_wire()), Sink(), now_ns=now)
    spaced = live.ingest_message(msgpack.packb(trade("DE H13", now, 1.0, 1.0).to_wire()), Sink(), now_ns=now)
    assert "`flashtick forget 'DE H13'` drops the stream" in spaced.rejections[0].error, spaced.rejections[0].error


def test_ts_backwards_says_both_times_in_utc() -> None:
    encoders = StreamEncoders(CODEC)
    result = encoders.ingest_message(msgpack.packb([trade("A", 7 * 10**18, 1.0, 1.0).to_wire(),
                                                    trade("A", 1_780_000_000_000_000_001, 1.0, 1.0).to_wire()]), Sink())
    assert result.rejections[0].error == ("ts_backwards: stream \"A\": ts 1780000000000000001 "
                                          "(2026-05-28T20:26:40.000000001Z) < previous 7000000000000000000 "
                                          "(2191-10-27T12:26:40Z)")


def test_a_message_is_shed_whole_by_the_wait_of_each_streams_newest_tick() -> None:
    """review391 #7: the whole-message check weighed every stream as if its ticks had not waited, so a feed stamped
    with the wall clock whose burst waited in the socket was accepted there and then refused tick by tick for its
    wait (104 rejections a message of 200 ticks). Each stream is weighed by its newest tick's wait, the least of its
    ticks' (arrival_of: here, a tick arrived at its ts)."""
    encoders = StreamEncoders(CODEC)
    encoders.arrival_of = lambda _stream, ts, _read_ns: ts
    weighed: dict[str | None, float] = {}

    def refusal(stream: str | None, waited_s: float = 0.0) -> InvalidTick | None:
        weighed[stream] = waited_s
        return InvalidTick("overloaded", "behind", stream) if waited_s > 5 else None

    sent = time.time_ns() - 10 * 10**9  # ten seconds before the read
    burst = [trade(f"SH.{i % 2}", sent + i, 100.0, 1.0).to_wire() for i in range(6)]
    shed = encoders.shed_message(msgpack.packb(burst), refusal)
    assert shed is not None and [(r.stream, r.index, r.count) for r in shed.rejections] == [("SH.0", 0, 3),
                                                                                            ("SH.1", 1, 3)]
    assert min(weighed.values()) >= 10, weighed
    # SH.1's newest tick waited nothing (stamped ahead of the read): read tick by tick, its older ones refused there
    fresh = burst + [trade("SH.1", time.time_ns() + 3600 * 10**9, 100.0, 1.0).to_wire()]
    assert encoders.shed_message(msgpack.packb(fresh), refusal) is None and weighed["SH.1"] == 0.0


def test_a_message_of_items_without_a_stream_is_counted_past_the_first_hundred() -> None:
    """review406 #6: 1 MB of msgpack nils (1,000,000 items) held the engine thread ~8 s, an error built for each
    though ~100 are published. Past the first SAID_STREAMLESS items refused before they name a stream, such items
    are counted, one rejection per reason standing for them all; ticks among them are read as ever."""
    from connectors.encoder import SAID_STREAMLESS

    encoders, sink = StreamEncoders(CODEC), Sink()
    nils = b"\xdd" + (1_000_000).to_bytes(4, "big") + b"\xc0" * 1_000_000
    result = encoders.ingest_message(nils, sink)  # (~0.3 s of CPU here, was ~8 s)
    assert sum(r.count for r in result.rejections) == 1_000_000 and len(result.rejections) == SAID_STREAMLESS + 1
    tail = result.rejections[-1]
    assert (tail.index, tail.reason, tail.count) == (SAID_STREAMLESS, "not_a_map", 1_000_000 - SAID_STREAMLESS)
    assert "999,900 items more with no stream named (not_a_map: a tick is a map), the first at index 100" in tail.error
    mixed = [None] * 150 + [{}] * 20 + [trade("A", 100, 10.0, 1.0).to_wire()] + [{"Stream": "B"}]
    result = encoders.ingest_message(msgpack.packb(mixed), sink)
    assert [i.stream for i in sink.items] == ["A"]  # a tick among them is read
    assert [(r.reason, r.count) for r in result.rejections[SAID_STREAMLESS:]] == [
        ("not_a_map", 50), ("missing_stream", 21)]
