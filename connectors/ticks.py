"""Tick schema, validation and msgpack wire format. The checks it is built from have modules of their own beside
it: stream names (stream_names.py), timestamps and the ordering rule (tick_times.py's `check_order`; the per-stream
state that applies it, the ordering guard, is connectors/stream_encoder.py's `StreamEncoder`), reading msgpack
(msgpack_reading.py), refused values in words (wire_values.py), the refusal codes (tick_errors.py) and DataFrame
values made plain (plain_values.py).

Wire map (one msgpack map per tick; a message carries one map or a list of maps)
-------------------------------------------------------------------------------

| field      | type              | trade    | quote    | meaning                                  |
|------------|-------------------|----------|----------|------------------------------------------|
| `stream`   | str (see below)   | required | required | instrument / feed id, one session each   |
| `ts`       | int (int64 ns)    | required | required | event time, nanoseconds since the epoch  |
| `kind`     | str               | optional | optional | `"trade"` or `"quote"` (see below)       |
| `price`    | float or int > 0  | required | -        | trade price                              |
| `size`     | float or int >= 0 | required | -        | trade quantity                           |
| `side`     | str or nil        | optional | -        | aggressor: `"buy"`, `"sell"`; nil = unknown |
| `bid`      | float or int > 0  | -        | required | best bid price (>= 0 with zero_bid_is_price) |
| `ask`      | float or int > 0  | -        | required | best ask price, `ask >= bid`             |
| `bid_size` | float or int >= 0 | -        | optional | quantity at the best bid                 |
| `ask_size` | float or int >= 0 | -        | optional | quantity at the best ask                 |

When `kind` is absent it is inferred: a map with `price` is a trade, a map with
`bid` or `ask` (and no `price`) is a quote; with none of the three, by its other fields (`size`/`side` a trade,
`bid_size`/`ask_size` a quote), else `missing_field`. A field marked `-` for the tick's
kind, or any other key, is rejected as `unknown_field`; a field sent as nil is left out (a quote's `price: nil`,
what a DataFrame row gives, is no trade field), and so is one sent as NaN, pandas' missing value, where it may be
(`left_out`); a needed field's NaN is refused as non-finite. `ts` must be a msgpack
integer (a bool or a float is rejected), in [0, 2**63). Prices must be finite, within [1e-12, 1e15]
(PRICE_RANGE: `price_out_of_range`) and > 0 (a quote's bid may be 0 beside an ask above it with
``zero_bid_is_price``: an option nobody bids, its mark ask / 2; otherwise that is TAQ's "no bid", a one-sided
quote); sizes finite, >= 0 and below 1e18 (MAX_SIZE: `size_out_of_range`); a locked quote
(bid == ask) is accepted, a crossed one (bid > ask) is not; `seq` an int (not a bool: `wrong_type`) in [0, 2**64)
(`seq_out_of_range`), used by the live service alone (connectors/tick_sequences.py: repeats dropped, gaps counted).
Encoding omits optional fields that are None.

A stream name is printable text of at most 128 UTF-8 bytes (configurable), with
no '/' (answer topics use it), no leading '_' (the service's own topics) and no
space at either end; see `check_stream`. On the wire it is in Unicode NFC too (`check_normalized`).

Every rejection raises `InvalidTick` with a short machine-readable `reason`
(one of `REASONS`, used as a counter label) and a human message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping, NamedTuple, Sequence

import msgpack

from connectors.field_names import SIDE_WORDS, renamed
from connectors.msgpack_reading import NotMsgpack, RepeatedKeys, check_keys, read_msgpack, tick_items, unpack
from connectors.plain_values import plain
from connectors.stream_names import MAX_STREAM_BYTES, check_normalized, check_stream, shown_name, slash_hint
from connectors.tick_errors import InvalidTick
from connectors.tick_times import TS_MAX, check_ts, q_null_said, utc_text
from connectors.written_decimals import decimals
from connectors.wire_values import check_text, field_list, wire_type, wire_value
from engine.quoting import quoted

# This module's names, and those the service (and event_time.py, TS_MAX) import from here, kept importable after they
# moved beside it; connectors/ modules and tests import the moved checks from their own modules
__all__ = ["TRADE", "QUOTE", "KINDS", "SIDES", "Tick", "plain", "trade", "quote", "one_sided_quote", "validate",
           "counted", "Decoded", "encode", "decode", "InvalidTick", "TS_MAX", "check_stream", "shown_name",
           "slash_hint", "utc_text", "wire_type", "wire_value", "NotMsgpack", "RepeatedKeys", "read_msgpack"]

TRADE = "trade"
QUOTE = "quote"
KINDS = (TRADE, QUOTE)
SIDES = ("buy", "sell")

_COMMON = ("stream", "ts", "kind", "seq")
_FIELDS = {
    TRADE: frozenset(_COMMON + ("price", "size", "side")),
    QUOTE: frozenset(_COMMON + ("bid", "ask", "bid_size", "ask_size")),
}
_TICK_FIELDS = _FIELDS[TRADE] | _FIELDS[QUOTE]


@dataclass(frozen=True, slots=True)
class Tick:
    """One market event. Trades fill price/size/side, quotes fill bid/ask/sizes."""

    stream: str
    ts: int
    kind: str
    price: float | None = None
    size: float | None = None
    side: str | None = None
    bid: float | None = None
    ask: float | None = None
    bid_size: float | None = None
    ask_size: float | None = None
    seq: int | None = None  # the feed's sequence number of this stream's tick (None: not sent)

    @property
    def is_trade(self) -> bool:
        return self.kind == TRADE

    @property
    def mid(self) -> float | None:
        """(bid + ask) / 2 to one decimal more than the quote is written with: 1.08497/1.08499 is 1.08498, not
        binary floating point's 1.0849799999999998, in a text model's prompt and `streams` alike (review410 #5).
        The binned codec and the labels take 0.5 * (bid + ask) as it is, within an ulp of this."""
        if self.bid is None or self.ask is None:
            return None
        return round(0.5 * (self.bid + self.ask), max(decimals(self.bid), decimals(self.ask), 0) + 1)

    @property
    def level(self) -> float | None:
        """The price level the tick says: a trade's price, else a quote's mid, else its one side."""
        if self.price is not None:
            return self.price
        mid = self.mid
        return mid if mid is not None else self.bid if self.bid is not None else self.ask

    def to_wire(self) -> dict[str, Any]:
        keys = _FIELDS[self.kind]
        return {k: getattr(self, k) for k in _WIRE_ORDER if k in keys and getattr(self, k) is not None}


_WIRE_ORDER = ("stream", "ts", "kind", "price", "size", "side", "bid", "ask", "bid_size", "ask_size", "seq")


def left_out(value: Any) -> bool:
    """Whether a field's value leaves the field out: nil, or NaN, a float's "no value" (what pandas holds for a
    missing value and `df.to_dict("records")` sends: a quote row's price, a trade row's bid; a file's NaN cell reads
    as empty alike). A field the tick needs refuses it, its NaN said (`_number`)."""
    return value is None or isinstance(value, float) and value != value


def trade(stream: str, ts: int, price: float, size: float, side: str | None = None, *,
          venue_name: bool = False) -> Tick:
    """Build a validated trade tick (numpy scalars and aware datetimes welcome: plain_values.plain). ``venue_name``:
    ``stream`` is a venue's name the service renames (`BTC/USD` under `ingest.slashes: dash` or `ingest.rename`):
    the name rules a rename mends are left to the service (check_stream)."""
    fields = {"stream": stream, "ts": ts, "kind": TRADE, "price": price, "size": size, "side": side}
    return _built(fields, venue_name)


def quote(
    stream: str, ts: int, bid: float, ask: float, bid_size: float | None = None, ask_size: float | None = None, *,
    venue_name: bool = False
) -> Tick:
    """Build a validated quote tick (numpy scalars and aware datetimes welcome: plain_values.plain); ``venue_name``
    as for ``trade``."""
    fields = {"stream": stream, "ts": ts, "kind": QUOTE, "bid": bid, "ask": ask, "bid_size": bid_size,
              "ask_size": ask_size}
    return _built(fields, venue_name)


def _built(fields: dict[str, Any], venue_name: bool) -> Tick:
    """``trade``'s and ``quote``'s tick, validated; a name a service could rename, refused here, says how to send it
    as it is (review392 #10: a feed for a service with ingest.rename could not use them)."""
    try:
        return validate({k: plain(v) for k, v in fields.items()}, venue_name=venue_name)
    except InvalidTick as err:
        if err.reason != "bad_stream" or venue_name:
            raise
        check_stream(fields["stream"], venue_name=True)  # (a name no rename mends: its own refusal, as it was)
        raise InvalidTick(err.reason, f"{err.message}; for a service that renames it (ingest.rename, ingest.slashes: "
                                      f"dash) send it as it is with venue_name=True", err.stream) from None


def one_sided_quote(row: Mapping[str, Any], zero_bid_is_price: bool = False,
                    setting: str = "limits.zero_bid: price") -> InvalidTick | None:
    """A quote whose bid or ask is 0 beside a side that is not below zero: TAQ's and most US feeds' way of writing
    "no bid" (or no offer, or neither), a one-sided quote, rejected as missing_field as an empty side is; never
    a price of 0 to shift with price_offset (nor a nonpositive_price). ``zero_bid_is_price``: a 0 bid beside an
    ask above it is a price (an option nobody bids: a service's reading with limits.zero_bid: price, file
    replay's with zero_bid: price); a 0 ask is no offer either way (nobody offers at 0). ``setting``: what reads
    such a bid as a price where the quote came from (a service's key by default; file replay's option)."""
    bid, ask = row.get("bid"), row.get("ask")
    if not (bid == 0 or ask == 0) or not all(type(v) in (int, float) and v >= 0 for v in (bid, ask)):
        return None
    if bid == ask:
        # the market's state, not a bad row: counted apart, so a halt-heavy day reads as one, not as a misread column
        return InvalidTick("no_market", "bid and ask are 0: no bid and no offer, a market with neither side (a "
                                        "halt, a LULD pause, before the open), which no quote tick holds")
    if zero_bid_is_price and bid == 0:
        return None
    side, other = ("bid", "ask") if bid == 0 else ("ask", "bid")
    option = f" (an option nobody bids, whose 0 bid is a price: {setting})" if side == "bid" else ""
    return InvalidTick("missing_field", f"{side} is 0 beside {other} {row[other]}: a one-sided quote (no {side}), "
                                        f"which the engine does not take (a quote has both sides){option}")


def _sizeless(obj: dict, key: str) -> str:
    """What a trade without a size is sent with: a level with none (an index, an iNAV) is a trade of size 1, as
    file replay reads a price series without a size column; "" for any other missing field."""
    if key != "size" or obj.get("price") is None:
        return ""
    return ("; a price series without sizes (an index level, an iNAV) is sent with size 1, as file replay reads "
            "one (docs/wire-protocol.md#tick-wire-map-msgpack-never-pickle)")


def _number(obj: dict, key: str, *, required: bool, is_price: bool, zero_ok: bool = False) -> float | None:
    value = obj.get(key)
    if left_out(value):
        if required and value is not None:  # still a non-finite number, counted so, its NaN said
            raise InvalidTick("nonfinite_price" if is_price else "nonfinite_size",
                              f"field {quoted(key)} is NaN, no value (pandas' missing value), and is required")
        if required:
            raise InvalidTick("missing_field",
                              f"field {quoted(key)} is required{renamed(obj, key) or _sizeless(obj, key)}")
        return None
    # bool is an int subclass; a True price is a bug upstream, not a price of 1.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidTick("wrong_type", f"{key} must be a number (int or float), got {wire_value(value)}"
                                        f"{_number_text_hint(value)}")
    sent, value = value, float(value)  # (errors quote the value as sent: an int 0 as 0, not 0.0)
    if is_price:
        if not math.isfinite(value):
            raise InvalidTick("nonfinite_price", f"{key} must be finite, got {sent}")
        if value < 0 or value == 0 and not zero_ok:
            raise InvalidTick("nonpositive_price", f"{key} must be {'>=' if zero_ok else '>'} 0, got {sent}"
                                                   f"{q_null_said(sent)}")
        if value != 0 and not PRICE_RANGE[0] <= value <= PRICE_RANGE[1]:
            raise InvalidTick("price_out_of_range", f"{key} must be within [{PRICE_RANGE[0]:g}, {PRICE_RANGE[1]:g}], "
                                                    f"got {sent}{_MAGNITUDE_WHY}")
    else:
        if not math.isfinite(value):
            raise InvalidTick("nonfinite_size", f"{key} must be finite, got {sent}")
        if value < 0:
            raise InvalidTick("negative_size", f"{key} must be >= 0, got {sent}{q_null_said(sent)}")
        if value >= MAX_SIZE:
            raise InvalidTick("size_out_of_range", f"{key} must be below {MAX_SIZE:g}, got {sent}{_MAGNITUDE_WHY}")
    return value


# The magnitudes no real instrument's price or quantity reaches: the cheapest tokens trade near 1e-9, the dearest
# prices (a coin in a currency of many digits) below 1e13; the largest quantities (a meme token's 1e15 units, an
# EFP block) far below 1e18. Past them a value is a unit error, a sentinel (2**64 - 1, an unset uint64) or a corrupt
# feed, which inside a session would read as a move of 1e300 %; refused here, on the wire and in files alike
PRICE_RANGE = (1e-12, 1e15)
MAX_SIZE = 1e18
_MAGNITUDE_WHY = (", a magnitude no real instrument reaches (a unit error, an unset field's sentinel, a corrupt "
                  "feed?; docs/wire-protocol.md#tick-wire-map-msgpack-never-pickle; a DEX export's token base units "
                  "or sqrtPriceX96: a file's map reads them, docs/replay.md#on-chain-swaps)")


def _number_text_hint(value: Any) -> str:
    """For a number sent as its text (`"61000.1"`, as exchanges' JSON writes prices): send the number."""
    if not isinstance(value, str) or len(value) > 64:
        return ""
    try:
        float(value)
    except ValueError:
        return ""
    return ": send the number itself, not its text"


def _kind(obj: dict) -> str:
    kind = obj.get("kind")
    if left_out(kind):
        return _inferred_kind(obj)
    check_text("kind", kind)
    if kind not in KINDS:
        raise InvalidTick("unknown_kind", f"kind must be one of {quoted(KINDS)}, got {quoted(kind)}")
    return kind


def _inferred_kind(obj: dict) -> str:
    """A tick's kind without a `kind`: a trade by its price, a quote by its bid or ask; with none of them set, by its
    other fields set (size or side a trade, bid_size or ask_size a quote: refused then for its price, or its bid and
    ask), else missing_field. A field left out, nil or NaN is one rule (review391 #2: `{stream, ts, size: 1}` was
    unknown_kind where `price: nil` beside it made it a trade refused for its price), on the wire and in files."""
    trade_fields, quote_fields = "price", "bid/ask"
    has_trade, has_quote = _any_set(obj, ("price",)), _any_set(obj, ("bid", "ask"))
    if not (has_trade or has_quote):  # (a DataFrame row of neither kind's prices: its kind's other fields tell)
        trade_fields, quote_fields = "size/side", "bid_size/ask_size"
        has_trade, has_quote = _any_set(obj, ("size", "side")), _any_set(obj, ("bid_size", "ask_size"))
    if not (has_trade or has_quote):
        raise InvalidTick("missing_field", f"no \"kind\", and price, bid and ask are all left out, nil or NaN (pandas' "
                                           f"missing value): a trade needs its price, a quote its bid and ask"
                                           f"{renamed(obj)}")
    if has_trade and has_quote:
        raise InvalidTick("ambiguous_kind", f"no \"kind\" and both trade ({trade_fields}) and quote ({quote_fields}) "
                                            f"fields")
    return TRADE if has_trade else QUOTE


def _any_set(obj: dict, keys: tuple[str, ...]) -> bool:
    return any(not left_out(obj.get(key)) for key in keys)


def _side_hint(side: Any) -> str:
    """What a vendor's side value (SIDE_WORDS: `BUY`, `B`, `Sell`, `-1`) is on the wire, for the refusal."""
    said = side.strip().lower() if isinstance(side, str) else None
    word = SIDE_WORDS.get(said) if said is not None else None
    if word is None:
        return ""
    if said == word:
        return f" (lower case: {quoted(word)})"
    return f" (if {quoted(side)} marks a {'buyer' if word == 'buy' else 'seller'}-initiated trade, send {quoted(word)})"


def counted(n: int, noun: str) -> str:
    """`1 tick`, `3 ticks`: a count for messages people read."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def validate(obj: Any, max_stream_bytes: int = MAX_STREAM_BYTES, zero_bid_is_price: bool = False,
             venue_name: bool = False) -> Tick:
    """Check one decoded wire map and build a Tick; raises InvalidTick with a reason. ``zero_bid_is_price``: a 0
    bid beside an ask above it is a price (an option nobody bids; a service's limits.zero_bid: price, file
    replay's zero_bid: price), not TAQ's "no bid" (the default: protocol 1 refused it, so a feed that sends a 0 bid
    for "no bid" never gets a mark of ask / 2 unasked). ``venue_name``: the stream is a venue's name a service
    renames (check_stream)."""
    if not isinstance(obj, dict):
        raise InvalidTick("not_a_map", f"a tick is a map, got {wire_value(obj)}")
    if "stream" not in obj:  # perhaps sent with its key as bin: say that rather than "missing"
        check_keys(obj)
        if hint := renamed(obj, "stream"):  # `symbol`, `ticker`, ...: say what the field is called
            raise InvalidTick("missing_stream", f"field \"stream\" is required and must be non-empty{hint}")
    stream = check_normalized(check_stream(obj.get("stream"), max_stream_bytes, venue_name))
    try:  # from here a refusal names its stream
        check_keys(obj)
        return _validate_fields(obj, stream, zero_bid_is_price)
    except InvalidTick as err:
        err.stream = stream
        raise


def _validate_fields(obj: dict, stream: str, zero_bid_is_price: bool) -> Tick:
    tick = _tick_fields(obj, stream, zero_bid_is_price)
    seq = obj.get("seq")
    return tick if left_out(seq) else replace(tick, seq=check_seq(seq))


SEQ_MAX = 2**64  # a uint64: the widest sequence number a venue sends (ITCH's, a 64-bit trade id)


def check_seq(value: Any) -> int:
    """The `seq` field's rule, a raw tick's and a pre-tokenized item's alike: an int (not a bool, not a float: a
    double loses a 64-bit number's last digits) in [0, 2**64)."""
    if isinstance(value, bool) or not isinstance(value, int):
        whole = isinstance(value, float) and value.is_integer()  # (a pandas int column with a NaN became floats)
        hint = ": a pandas int column with missing rows is float; make it df[\"seq\"].astype(\"Int64\") (its " \
            "missing rows then send no seq)" if whole else ""
        raise InvalidTick("wrong_type", f"seq must be an int (the feed's sequence number of the stream's tick), got "
                                        f"{wire_value(value, 24)}{hint}")
    if not 0 <= value < SEQ_MAX:
        raise InvalidTick("seq_out_of_range", f"seq must be in [0, 2**64), got {value}")
    return value


def _tick_fields(obj: dict, stream: str, zero_bid_is_price: bool) -> Tick:
    ts = check_ts(obj)
    kind = _kind(obj)
    # another kind's field sent as nil or NaN is no field at all (the wire's rule: nil = left out): a DataFrame's
    # rows (`df.to_dicts()`, pandas' `to_dict("records")`) give a quote None or NaN for price/size/side, a trade for bid
    extra = [k for k in obj if k not in _FIELDS[kind] and not (k in _TICK_FIELDS and left_out(obj[k]))]
    if extra:
        # a trade row whose price is NaN beside a bid and ask (a trade frame with the quote at each print) reads
        # as a quote: its size and side are then refused, said why
        why = " (read as a quote by its bid and ask: its price is NaN, pandas' missing value)" \
            if kind == QUOTE and left_out(obj.get("kind")) and obj.get("price") != obj.get("price") else ""
        raise InvalidTick("unknown_field", f"fields {field_list(extra)} not allowed in a {kind}{renamed(extra)}{why}")
    if kind == TRADE:
        side = None if left_out(obj.get("side")) else obj["side"]
        if side is not None:
            check_text("side", side)
        if side is not None and side not in SIDES:
            raise InvalidTick("unknown_side",
                              f"side must be \"buy\", \"sell\" or nil, got {quoted(side)}{_side_hint(side)}")
        price = _number(obj, "price", required=True, is_price=True)
        size = _number(obj, "size", required=True, is_price=False)
        return Tick(stream, ts, TRADE, price=price, size=size, side=side)
    if one_sided := one_sided_quote(obj, zero_bid_is_price):
        raise one_sided
    bid = _number(obj, "bid", required=True, is_price=True, zero_ok=zero_bid_is_price)
    ask = _number(obj, "ask", required=True, is_price=True)
    if bid > ask:
        raise InvalidTick("crossed_quote", f"bid {bid} > ask {ask}")
    bid_size = _number(obj, "bid_size", required=False, is_price=False)
    ask_size = _number(obj, "ask_size", required=False, is_price=False)
    return Tick(stream, ts, QUOTE, bid=bid, ask=ask, bid_size=bid_size, ask_size=ask_size)


class Decoded(NamedTuple):
    """Result of decoding one message: the good ticks and (index, reason) per bad one.

    A payload that is not msgpack at all, or neither a map nor a list, yields one
    error with index -1.
    """

    ticks: list[Tick]
    errors: list[tuple[int, str]]


def encode(ticks: Tick | Sequence[Tick]) -> bytes:
    """msgpack of one tick (a map) or a batch (a list of maps); ints stay exact."""
    if isinstance(ticks, Tick):
        return msgpack.packb(ticks.to_wire(), use_bin_type=True)
    return msgpack.packb([t.to_wire() for t in ticks], use_bin_type=True)


def decode(data: bytes, *, max_bytes: int = 64 << 20) -> Decoded:
    """Decode one message; never raises, so one bad tick cannot drop a batch."""
    try:
        items = tick_items(unpack(data, max_bytes=max_bytes))
    except InvalidTick as err:
        return Decoded([], [(-1, err.reason)])
    good: list[Tick] = []
    bad: list[tuple[int, str]] = []
    for i, item in enumerate(items):
        try:
            good.append(validate(item))
        except InvalidTick as err:
            bad.append((i, err.reason))
    return Decoded(good, bad)
