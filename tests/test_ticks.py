"""Tick schema: every validation case rejected with its reason, exact msgpack round-trip, ordering."""

from __future__ import annotations

import math
import re
import time

import msgpack
import pytest

from connectors.msgpack_reading import unpack
from connectors.tick_errors import REASONS
from connectors.tick_times import ts_unit_hint
from connectors.ticks import (
    InvalidTick,
    check_stream,
    decode,
    encode,
    quote,
    trade,
    validate,
)

TS = 1_723_161_254_087_896_568  # a real Binance collector timestamp: needs all 64 bits


def good_trade(**kw) -> dict:
    return {"stream": "BTCUSDT", "ts": TS, "kind": "trade", "price": 61837.63, "size": 0.02, "side": "sell"} | kw


def good_quote(**kw) -> dict:
    return {"stream": "EURUSD", "ts": TS, "kind": "quote", "bid": 1.14543, "ask": 1.14545, "bid_size": 2.06,
            "ask_size": 1.0} | kw


BAD = [
    ("not_a_map", [1, 2]),
    ("missing_stream", {k: v for k, v in good_trade().items() if k != "stream"}),
    ("missing_stream", good_trade(stream="")),
    ("wrong_type", good_trade(stream=7)),
    ("bad_stream", good_trade(stream="BTC/USDT")),
    ("missing_field", {k: v for k, v in good_trade().items() if k != "ts"}),
    ("ts_not_int", good_trade(ts=1.7e18)),
    ("ts_not_int", good_trade(ts=True)),
    ("ts_not_int", good_trade(ts="1723161254087896568")),
    ("ts_out_of_range", good_trade(ts=-1)),
    ("unknown_kind", good_trade(kind="cancel")),
    ("missing_field", {"stream": "x", "ts": 1, "size": 1.0}),  # a trade by its size, refused for its price
    ("ambiguous_kind", {k: v for k, v in good_trade(bid=1.0).items() if k != "kind"}),
    ("unknown_field", good_trade(venue="binance")),
    ("unknown_field", good_trade(bid=1.0)),
    ("missing_field", {k: v for k, v in good_trade().items() if k != "price"}),
    ("missing_field", {k: v for k, v in good_quote().items() if k != "ask"}),
    ("wrong_type", good_trade(price="61837.63")),
    ("wrong_type", good_trade(size=False)),
    ("nonfinite_price", good_trade(price=math.nan)),
    ("nonfinite_price", good_quote(bid=math.inf)),
    ("nonpositive_price", good_trade(price=0.0)),
    ("nonpositive_price", good_quote(ask=-1.0)),
    ("missing_field", good_quote(ask=0.0)),  # a one-sided market (no offer): nobody offers at 0
    ("missing_field", good_quote(bid=0.0)),  # TAQ's "no bid" unless the reader says 0 is a price (zero_bid: price)
    ("no_market", good_quote(bid=0, ask=0)),  # a halt, a LULD pause: the market's state, counted apart
    ("nonpositive_price", good_quote(bid=-0.01)),
    ("negative_size", good_trade(size=-0.5)),
    ("negative_size", good_quote(bid_size=-1.0)),
    ("nonfinite_size", good_trade(size=math.inf)),
    ("unknown_side", good_trade(side="short")),
    ("crossed_quote", good_quote(bid=1.2, ask=1.1)),
]


@pytest.mark.parametrize("reason,obj", BAD, ids=[f"{r}-{i}" for i, (r, _) in enumerate(BAD)])
def test_each_bad_case_rejected_with_its_reason(reason: str, obj: object) -> None:
    with pytest.raises(InvalidTick) as err:
        validate(obj)
    assert err.value.reason == reason
    assert err.value.reason in REASONS and err.value.message
    if reason == "missing_field" and 0 in (obj.get("bid"), obj.get("ask")):
        assert re.search(r"one-sided quote \(no (ask|bid)\)|neither side", err.value.message), err.value.message


def test_a_zero_bid_beside_an_ask_is_a_price_only_where_the_reader_says_so() -> None:
    """An option nobody bids (bid 0.00, ask 0.02) is a two-sided market where the reader says a 0 bid is a price
    (a service's limits.zero_bid: price, a file's zero_bid: price): its mid ask / 2, a mark above zero, so moves and
    log returns are defined. By default it is TAQ's "no bid", refused naming the setting."""
    zero_bid = validate(good_quote(stream="SPY   241220C00520000", bid=0, ask=0.02), zero_bid_is_price=True)
    assert (zero_bid.bid, zero_bid.ask, zero_bid.mid) == (0.0, 0.02, 0.01)
    assert validate(good_quote(bid=0.0, ask=0.05), zero_bid_is_price=True).bid == 0.0
    with pytest.raises(InvalidTick, match=r"^missing_field: bid is 0 beside ask 0.02: a one-sided quote \(no bid\), "
                                          r".*an option nobody bids, whose 0 bid is a price: limits.zero_bid: price"):
        validate(good_quote(bid=0, ask=0.02))
    with pytest.raises(InvalidTick, match=r"^nonpositive_price: bid must be >= 0, got -0.01$"):
        validate(good_quote(bid=-0.01), zero_bid_is_price=True)
    with pytest.raises(InvalidTick, match=r"^nonpositive_price: bid must be > 0, got -0.01$"):
        validate(good_quote(bid=-0.01))


GOOD_NAMES = ["BTCUSDT", "ES.H25", "6E-M5", "AAPL US Equity", "SYN.A", "BTC-USD", "BRK.B:XNYS", "Société Générale",
              "日経225", "ÜBER_X", "a" * 128, "é" * 64, "x_"]
# (name, the words the message must contain): one per class of refused name
BAD_NAMES = [
    ("BTC/USDT", '"/"'),
    ("_heartbeat", 'starts with "_"'),
    ("_rejects", 'starts with "_"'),
    (" BTCUSDT", "space"),
    ("BTCUSDT ", "space"),
    ("BTC\x00USDT", "U+0000"),
    ("BTC\nUSDT", "control character"),
    ("BTC\tUSDT", "control character"),
    ("BTC\x7fUSDT", "control character"),
    ("BTC\x85USDT", "control character"),  # C1 NEXT LINE
    ("USD\u202eTSB", "RIGHT-TO-LEFT OVERRIDE"),
    ("BTC\u2066USDT", "format character"),  # LEFT-TO-RIGHT ISOLATE
    ("BTC\u200bUSDT", "ZERO WIDTH SPACE"),
    ("BTC\u200dUSDT", "format character"),  # ZERO WIDTH JOINER
    ("\ufeffBTCUSDT", "format character"),  # BOM
    ("BTC\u2028USDT", "line separator"),
    ("BTC\u2029USDT", "paragraph separator"),
    ("AAPL\u00a0US", "space other than"),  # looks like "AAPL US": a spoof
    ("BTC\ud800USDT", "surrogate"),
    ("BTC\ue000USDT", "private-use"),
    ("a" * 129, "longer than 128 bytes"),
    ("é" * 65, "130 UTF-8 bytes"),
]


@pytest.mark.parametrize("obj,reason,hint", [
    ({"symbol": "A", "ts": 1, "price": 1.0, "size": 1.0}, "missing_stream", '(key "symbol" is "stream" on the wire)'),
    ({"stream": "A", "timestamp": 1, "price": 1.0, "size": 1.0}, "missing_field",
     '(key "timestamp" is "ts" on the wire)'),
    ({"stream": "A", "ts": 1, "px": 1.0, "qty": 2.0}, "missing_field",
     '(key "px" is "price" on the wire; key "qty" is "size" on the wire)'),
    ({"stream": "A", "ts": 1, "price": 1.0, "Quantity": 2.0}, "unknown_field",
     '(key "Quantity" is "size" on the wire)'),
    ({"stream": "A", "ts": 1, "bid": 1.0, "Offer Price": 1.1}, "unknown_field",
     '(key "Offer Price" is "ask" on the wire)'),
    ({"stream": "A", "ts": 1, "price": 1.0, "size": 1.0, "side": "BUY"}, "unknown_side", '(lower case: "buy")'),
    ({"stream": "A", "ts": 1, "price": 1.0, "size": 1.0, "side": "S"}, "unknown_side",
     '(if "S" marks a seller-initiated trade, send "sell")'),
])
def test_a_field_under_a_vendors_name_is_refused_with_its_wire_name(obj: dict, reason: str, hint: str) -> None:
    """A new client's first map often carries a vendor's names (`symbol`, `qty`, `BUY`): the refusal names the field."""
    with pytest.raises(InvalidTick) as err:
        validate(obj)
    assert err.value.reason == reason and str(err.value).endswith(hint), str(err.value)


def test_wire_names_and_unrelated_keys_get_no_hint() -> None:
    with pytest.raises(InvalidTick) as err:
        validate({"stream": "A", "ts": 1, "price": 1.0, "size": 1.0, "venue": "X"})
    assert str(err.value).endswith("not allowed in a trade")
    with pytest.raises(InvalidTick) as err:
        validate({"ts": 1, "price": 1.0, "size": 1.0})
    assert str(err.value).endswith("must be non-empty")


def test_a_ts_in_seconds_ms_or_us_is_recognised_and_nanoseconds_are_not() -> None:
    now_s = 1_733_097_600  # 2024-12-02 00:00:00 UTC
    for unit, ts in (("seconds", now_s), ("milliseconds", now_s * 10**3), ("microseconds", now_s * 10**6)):
        hint = ts_unit_hint(ts)
        assert hint is not None and hint.startswith(f"ts {ts} is {unit} since the epoch (2024-12-02T00:00:00Z)")
    for ts in (0, 1, 5_000, now_s * 10**9, 2**63 - 1, 946_684_800 * 10**3 - 1):  # ns, tiny counts, the gaps between
        assert ts_unit_hint(ts) is None, ts


@pytest.mark.parametrize("field", ["stream", "side", "kind"])
def test_a_text_field_sent_as_bin_is_wrong_type_and_says_to_pack_str(field: str) -> None:
    """A client packing every string as bin hears the same rule whichever text field it sent."""
    obj = good_trade(side="buy", kind="trade")
    obj[field] = obj[field].encode()
    with pytest.raises(InvalidTick) as err:
        validate(obj)
    assert err.value.reason == "wrong_type"
    assert f"{field} must be msgpack str, got bin" in str(err.value)
    assert err.value.stream == (None if field == "stream" else obj["stream"])


def test_a_key_sent_as_bin_names_the_stream_when_that_key_is_str() -> None:
    obj = {"stream": "S", "ts": 1, b"price": 1.0, "size": 1.0}
    with pytest.raises(InvalidTick) as err:
        validate(obj)
    assert err.value.reason == "wrong_type" and err.value.stream == "S"
    assert "map keys must be msgpack str" in str(err.value)
    with pytest.raises(InvalidTick) as err:  # the stream's own key as bin: said as such, not "missing"
        validate({b"stream": "S", "ts": 1, "price": 1.0, "size": 1.0})
    assert err.value.reason == "wrong_type" and err.value.stream is None


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_ordinary_stream_names_accepted(name: str) -> None:
    assert check_stream(name) == name
    assert validate(good_trade(stream=name)).stream == name
    assert decode(encode(trade(name, TS, 1.0, 1.0))).ticks[0].stream == name


@pytest.mark.parametrize("name,words", BAD_NAMES, ids=[f"bad-name-{i}" for i in range(len(BAD_NAMES))])
def test_each_class_of_bad_stream_name_refused_with_its_rule(name: str, words: str) -> None:
    with pytest.raises(InvalidTick) as err:
        validate(good_trade(stream=name))
    assert err.value.reason == "bad_stream" and words in err.value.message
    assert err.value.stream is None  # a refused name is never echoed as a stream
    assert len(err.value.message) < 200 and err.value.message.isascii()  # short, and shows no raw control/bidi


def test_stream_name_limit_is_configurable_and_huge_names_are_refused_cheaply() -> None:
    assert check_stream("a" * 200, max_bytes=256) == "a" * 200
    with pytest.raises(InvalidTick, match="longer than 16 bytes"):
        validate(good_trade(stream="a" * 17), max_stream_bytes=16)
    huge = "\u202e" * 1_000_000  # 3 MB of bidi overrides: refused on its length, unread
    start = time.perf_counter()
    for _ in range(1000):
        with pytest.raises(InvalidTick, match="1000000 characters"):
            check_stream(huge)
    assert time.perf_counter() - start < 5  # loose for a loaded CI machine


def test_good_ticks_accepted_and_kind_inferred() -> None:
    t = validate({k: v for k, v in good_trade().items() if k != "kind"})
    assert t.kind == "trade" and t.price == 61837.63 and t.side == "sell"
    q = validate({k: v for k, v in good_quote().items() if k != "kind"})
    assert q.kind == "quote" and q.mid == pytest.approx(1.14544)
    assert validate(good_quote(bid=1.1, ask=1.1)).bid == 1.1  # locked quote is legal
    assert validate(good_trade(side=None, price=5, size=0)).price == 5.0  # ints are numbers; nil side ok


def test_msgpack_round_trip_keeps_ns_exact() -> None:
    ticks = [trade("BTCUSDT", TS, 61837.63, 0.048, "buy"), quote("BTCUSDT", TS + 1, 61837.63, 61837.64, 3.8, 1.5),
             trade("X", 2**63 - 1, 1.0, 0.0), quote("EURUSD", 0, 1.1, 1.2)]
    assert decode(encode(ticks)) == (ticks, [])
    one = decode(encode(ticks[0]))
    assert one.ticks == ticks[:1] and one.ticks[0].ts == TS
    assert isinstance(msgpack.unpackb(encode(ticks[0]))["ts"], int)


def test_batch_with_bad_ticks_keeps_the_good_ones() -> None:
    payload = msgpack.packb([good_trade(), good_trade(price=-1.0), "junk", good_quote(), good_quote(bid=2.0, ask=1.0)])
    out = decode(payload)
    assert [t.stream for t in out.ticks] == ["BTCUSDT", "EURUSD"]
    assert out.errors == [(1, "nonpositive_price"), (2, "not_a_map"), (4, "crossed_quote")]


def test_garbage_payload_never_raises() -> None:
    assert decode(b"\xc1\xc1garbage") == ([], [(-1, "bad_msgpack")])
    assert decode(msgpack.packb(42)) == ([], [(-1, "not_a_map")])
    assert decode(msgpack.packb({1: 2})) == ([], [(0, "wrong_type")])  # non-str map keys refused with their tick
    with pytest.raises(InvalidTick, match="map keys must be msgpack str, got int 1"):  # and the sender is told why
        validate(unpack(msgpack.packb({"stream": "A", 1: 2})))


def test_a_bad_key_in_one_tick_keeps_the_others_and_a_repeated_key_is_refused() -> None:
    """A reviewer's hand-built maps: an int key in one tick of a batch lost the whole batch (bad_msgpack), and a
    key given twice (`stream` A then B; `price` 1 then 99) was taken with its last value, without a word."""
    import msgpack as mp

    int_key = b"\x92" + mp.packb(good_trade()) + b"\x81\x07\xa1x"  # [good, {7: "x"}]
    assert [t.stream for t in decode(int_key).ticks] == ["BTCUSDT"] and decode(int_key).errors == [(1, "wrong_type")]
    trade_map = mp.packb(good_trade())  # a fixmap of n keys: n + 1 with the stream again at the end
    twice = bytes([trade_map[0] + 1]) + trade_map[1:] + mp.packb("stream") + mp.packb("OTHER")
    out = decode(b"\x92" + twice + mp.packb(good_quote()))
    assert [t.stream for t in out.ticks] == ["EURUSD"] and out.errors == [(0, "duplicate_key")]
    with pytest.raises(InvalidTick, match='key "stream" given more than once in one tick map') as err:
        validate(unpack(twice))
    assert err.value.reason in REASONS
    assert decode(b"\x91\x81\x91\x01\x02") == ([], [(-1, "bad_msgpack")])  # [{[1]: 2}]: a list as a key


def test_errors_quote_numbers_as_sent() -> None:
    """A client comparing what it sent with the error saw its int 0 come back as 0.0."""
    for obj, said in ((good_trade(price=0), "price must be > 0, got 0"), (good_trade(size=-1), "got -1")):
        with pytest.raises(InvalidTick) as err:
            validate(obj)
        assert err.value.message.endswith(said), err.value.message


def test_numpy_datetime64_times_of_any_unit_are_taken_exactly() -> None:
    """`datetime64[us]` (what polars' to_numpy() of a Datetime column gives) was refused as "got datetime" while
    `[ns]` went in: every unit is one exact instant."""
    import numpy as np

    from connectors.ticks import quote, trade

    for unit in ("ns", "us", "ms", "s"):
        assert trade("X", np.datetime64("2024-01-01T00:00:01", unit), 1.0, 1.0).ts == 1_704_067_201_000_000_000
    assert quote("X", np.datetime64("2024-01-01", "D"), 1.0, 2.0).ts == 1_704_067_200_000_000_000
    assert trade("X", np.datetime64("2024-01-01T00:00:00.123456789", "ns"), 1.0, 1.0).ts % 10**9 == 123_456_789
    with pytest.raises(InvalidTick, match="ts_not_int"):
        trade("X", np.datetime64("NaT"), 1.0, 1.0)


def test_a_field_sent_as_nil_is_left_out_and_says_nothing_of_the_kind() -> None:
    """review354 #5: a DataFrame's rows (`df.to_dicts()`) carry the other kind's fields as None; the wire says nil is
    the same as left out. Without `kind`, the fields not nil tell it; a trade whose price is nil is still refused for
    its price, and a key that is no tick field is refused whatever its value."""
    quote_row = {"stream": "A", "ts": 1, "price": None, "size": None, "side": None, "bid": 1.0, "ask": 2.0}
    assert validate(quote_row).kind == "quote"
    assert validate({**quote_row, "kind": None, "seq": None}).kind == "quote"
    trade_row = {"stream": "A", "ts": 1, "price": 1.5, "size": 2.0, "bid": None, "ask": None, "bid_size": None}
    assert validate(trade_row) == validate({"stream": "A", "ts": 1, "price": 1.5, "size": 2.0})
    with pytest.raises(InvalidTick, match='field "price" is required') as nil_price:
        validate({"stream": "A", "ts": 1, "price": None, "size": 2.0})
    assert nil_price.value.reason == "missing_field"
    with pytest.raises(InvalidTick, match=r'fields \["venue"\] not allowed in a quote'):
        validate({**quote_row, "venue": None})


def test_a_price_bid_or_ask_left_out_is_read_as_one_sent_as_nil() -> None:
    """review391 #2: without `kind`, `{stream, ts, size: 1}` was unknown_kind ("neither price nor bid/ask present")
    where `price: nil` beside the same size made it a trade refused for its price: an encoder that omits null members
    (Go's omitempty, serde's skip_serializing_if) and one that writes nil had one tick counted under two reasons."""
    for fields, said in (({"size": 1.0}, 'field "price" is required'), ({"side": "buy"}, 'field "price" is required'),
                         ({"bid_size": 3}, 'field "bid" is required'),
                         ({}, 'no "kind", and price, bid and ask are all left out, nil or NaN')):
        errors = []
        for sent_nil in ((), ("price",), ("price", "bid", "ask")):
            with pytest.raises(InvalidTick) as err:
                validate({"stream": "A", "ts": 1, **fields, **dict.fromkeys(sent_nil)})
            errors.append((err.value.reason, str(err.value)))
        assert errors == [errors[0]] * 3 and errors[0][0] == "missing_field", (fields, errors)
        assert errors[0][1].startswith(f"missing_field: {said}"), errors


def test_a_field_sent_as_nan_is_left_out_where_it_may_be_and_refused_by_its_nan_where_needed() -> None:
    """review384 #3: pandas' `df.to_dict("records")` gives a quote row NaN for price/size/side and a trade row NaN
    for bid/ask, so every row of a mixed frame was refused as ambiguous_kind, naming neither NaN nor the fix. NaN is
    pandas' missing value: left out where the field may be; a trade's NaN price is still refused, its NaN said, and
    never read as the other kind."""
    from connectors.wire_payload import pack

    nan = math.nan
    rows = [{"stream": "A", "ts": 1, "price": 1.5, "size": 2.0, "side": "buy", "bid": nan, "ask": nan},
            {"stream": "A", "ts": 2, "price": nan, "size": nan, "side": nan, "bid": 1.0, "ask": 2.0},
            {"stream": "A", "ts": 3, "price": 1.5, "size": 2.0, "side": nan, "seq": nan, "kind": nan}]
    decoded = decode(pack(rows)[0])
    assert decoded.errors == [] and [t.kind for t in decoded.ticks] == ["trade", "quote", "trade"]
    assert decoded.ticks[0] == validate({"stream": "A", "ts": 1, "price": 1.5, "size": 2.0, "side": "buy"})
    assert decoded.ticks[2].side is None and decoded.ticks[2].seq is None
    refused = [({**rows[0], "price": nan}, "nonfinite_price", 'field "price" is NaN, no value (pandas\' missing'),
               ({**rows[0], "kind": "trade", "size": nan}, "nonfinite_size", 'field "size" is NaN'),
               ({**rows[1], "ask": nan}, "nonfinite_price", 'field "ask" is NaN'),
               ({**rows[1], "bid": nan, "ask": nan}, "missing_field",
                "price, bid and ask are all left out, nil or NaN"),
               ({**rows[1], "size": 2.0, "side": "buy"}, "unknown_field", "its price is NaN, pandas' missing value"),
               # a pandas int column with a missing row is float64: its numbers are refused saying how to keep ints
               ({**rows[0], "seq": 7.0}, "wrong_type", 'got float 7.0: a pandas int column with missing rows is float; '
                                                      'make it df["seq"].astype("Int64")')]
    for row, reason, said in refused:
        with pytest.raises(InvalidTick, match=re.escape(said)) as err:
            validate(row)
        assert err.value.reason == reason
