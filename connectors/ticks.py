"""Tick schema, validation, msgpack wire format and the ordering rule (`check_order`: the per-stream state that
applies it, the ordering guard, is connectors/encoder.py's `StreamEncoder`).

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
`bid` or `ask` (and no `price`) is a quote. A field marked `-` for the tick's
kind, or any other key, is rejected as `unknown_field`. `ts` must be a msgpack
integer (a bool or a float is rejected), in [0, 2**63). Prices must be finite
and > 0 (a quote's bid may be 0 beside an ask above it with ``zero_bid_is_price``: an option nobody bids, its
mark ask / 2; otherwise that is TAQ's "no bid", a one-sided quote); sizes finite and >= 0; a locked quote
(bid == ask) is accepted, a crossed one (bid > ask) is not. Encoding omits optional fields that are None.

A stream name is printable text of at most 128 UTF-8 bytes (configurable), with
no '/' (answer topics use it), no leading '_' (the service's own topics) and no
space at either end; see `check_stream`. On the wire it is in Unicode NFC too (`check_normalized`).

Every rejection raises `InvalidTick` with a short machine-readable `reason`
(one of `REASONS`, used as a counter label) and a human message.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping, NamedTuple, Sequence

import msgpack

from connectors.field_names import SIDE_WORDS, renamed

TRADE = "trade"
QUOTE = "quote"
KINDS = (TRADE, QUOTE)
SIDES = ("buy", "sell")
TS_MAX = 2**63
MAX_STREAM_BYTES = 128  # the service's default for limits.max_stream_bytes

REASONS = (
    "not_a_map",
    "missing_stream",
    "bad_stream",
    "missing_field",
    "ts_not_int",
    "ts_out_of_range",
    "unknown_kind",
    "ambiguous_kind",
    "unknown_field",
    "wrong_type",
    "duplicate_key",  # a map with one key twice (msgpack allows it; which value was meant cannot be told)
    "nonfinite_price",
    "nonpositive_price",
    "nonfinite_size",
    "negative_size",
    "unknown_side",
    "crossed_quote",
    "ts_backwards",
    "ts_in_future",  # live service only: ts further ahead of its wall clock than limits.max_ts_ahead_s
    "unencodable",  # valid, but the codec failed on it (a codec bug: the tick is refused, the service goes on)
    "bad_msgpack",
    "oversize",
    "bad_tokens",
    "stream_refused",
    "overloaded",
    "log_unavailable",
    "filtered_out",  # file replay only: a row a column map's `keep` leaves out (not a trade)
    "extra_fields",  # file replay only: a CSV row with more fields than the file's columns
    "not_json",  # file replay only: a JSON-lines file's line that is not a JSON object
)

_COMMON = ("stream", "ts", "kind")
_FIELDS = {
    TRADE: frozenset(_COMMON + ("price", "size", "side")),
    QUOTE: frozenset(_COMMON + ("bid", "ask", "bid_size", "ask_size")),
}


class InvalidTick(ValueError):
    """A tick that was rejected; `reason` is one of REASONS (stable, for counters).

    `stream` is the tick's stream once it got far enough to have a valid one, else None.
    """

    def __init__(self, reason: str, message: str, stream: str | None = None) -> None:
        if reason not in REASONS:  # a typo here would silently split a counter
            raise KeyError(f"unknown reason code {reason!r}")
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.stream = stream


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

    @property
    def is_trade(self) -> bool:
        return self.kind == TRADE

    @property
    def mid(self) -> float | None:
        if self.bid is None or self.ask is None:
            return None
        return 0.5 * (self.bid + self.ask)

    @property
    def level(self) -> float | None:
        """The price level the tick says: a trade's price, else a quote's mid, else its one side."""
        if self.price is not None:
            return self.price
        return self.mid if self.mid is not None else self.bid if self.bid is not None else self.ask

    def to_wire(self) -> dict[str, Any]:
        keys = _FIELDS[self.kind]
        return {k: getattr(self, k) for k in _WIRE_ORDER if k in keys and getattr(self, k) is not None}


_WIRE_ORDER = ("stream", "ts", "kind", "price", "size", "side", "bid", "ask", "bid_size", "ask_size")


def plain(value: Any) -> Any:
    """A numpy scalar (numpy.int64 from a DataFrame, numpy.float32) as the Python int/float/str it holds; anything
    else as it is. Ticks built in Python take what pandas and numpy hand out; the wire never carries numpy."""
    if type(value).__name__ == "datetime64" and type(value).__module__ == "numpy":  # any unit, exactly, as int ns
        # (.item() gives an int for ns but a datetime for us, what polars' to_numpy() hands out); NaT stays NaT
        nanoseconds = value.astype("datetime64[ns]")
        return value if nanoseconds != nanoseconds else nanoseconds.astype("int64").item()
    return value.item() if type(value).__module__ == "numpy" and hasattr(value, "item") else value


def trade(stream: str, ts: int, price: float, size: float, side: str | None = None) -> Tick:
    """Build a validated trade tick (numpy scalars welcome)."""
    fields = {"stream": stream, "ts": ts, "kind": TRADE, "price": price, "size": size, "side": side}
    return validate({k: plain(v) for k, v in fields.items()})


def quote(
    stream: str, ts: int, bid: float, ask: float, bid_size: float | None = None, ask_size: float | None = None
) -> Tick:
    """Build a validated quote tick (numpy scalars welcome)."""
    fields = {"stream": stream, "ts": ts, "kind": QUOTE, "bid": bid, "ask": ask, "bid_size": bid_size,
              "ask_size": ask_size}
    return validate({k: plain(v) for k, v in fields.items()})


def one_sided_quote(row: Mapping[str, Any], zero_bid_is_price: bool = False) -> InvalidTick | None:
    """A quote whose bid or ask is 0 beside a side that is not below zero: TAQ's and most US feeds' way of writing
    "no bid" (or no offer, or neither), a one-sided quote, rejected as missing_field as an empty side is; never
    a price of 0 to shift with price_offset (nor a nonpositive_price). ``zero_bid_is_price``: a 0 bid beside an
    ask above it is a price (an option nobody bids: a service's reading with limits.zero_bid: price, file
    replay's with zero_bid: price); a 0 ask is no offer either way (nobody offers at 0)."""
    bid, ask = row.get("bid"), row.get("ask")
    if not (bid == 0 or ask == 0) or not all(type(v) in (int, float) and v >= 0 for v in (bid, ask)):
        return None
    if bid == ask:
        return InvalidTick("missing_field", "bid and ask are 0: a quote with neither side (no bid, no offer)")
    if zero_bid_is_price and bid == 0:
        return None
    side, other = ("bid", "ask") if bid == 0 else ("ask", "bid")
    option = " (an option nobody bids, whose 0 bid is a price: zero_bid: price)" if side == "bid" else ""
    return InvalidTick("missing_field", f"{side} is 0 beside {other} {row[other]}: a one-sided quote (no {side}), "
                                        f"which the engine does not take (a quote has both sides){option}")


# in this order: bool is an int subclass, msgpack's ExtType a tuple
_WIRE_TYPES = ((type(None), "nil"), (bool, "bool"), (int, "int"), (float, "float"), (str, "str"),
               (bytes, "bin"), (msgpack.ExtType, "ext"), (msgpack.Timestamp, "ext"), (list, "array"),
               (tuple, "array"), (dict, "map"))


def wire_type(value: Any) -> str:
    """A decoded value's msgpack type, as a client in any language knows it (nil, bool, int, float, str, bin,
    array, map, ext), for errors sent back on the wire; a Python value no msgpack decodes to keeps its own name."""
    for python_type, name in _WIRE_TYPES:
        if isinstance(value, python_type):
            return name
    return type(value).__name__


def wire_value(value: Any, limit: int = 32) -> str:
    """A decoded value for an error: its msgpack type and, for a scalar, the value (``bool true``, ``nil``,
    ``int -1``, ``str 'x'``, cut to ``limit`` characters); a container or ext by its type and size alone."""
    name = wire_type(value)
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return f"bool {'true' if value else 'false'}"
    if isinstance(value, (int, float, str, bytes)):
        text = ascii(value) if isinstance(value, str) else repr(value)
        return f"{name} {text[:limit]}{'...' if len(text) > limit else ''}"
    if isinstance(value, msgpack.ExtType):
        return f"ext (type {value.code})"
    if isinstance(value, msgpack.Timestamp):
        return "ext (msgpack's timestamp, type -1)"
    if isinstance(value, (list, tuple, dict)):
        return f"{name} of {len(value)}"
    return name


def _number(obj: dict, key: str, *, required: bool, is_price: bool, zero_ok: bool = False) -> float | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise InvalidTick("missing_field", f"field {key!r} is required{renamed(obj, key)}")
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
            raise InvalidTick("nonpositive_price", f"{key} must be {'>=' if zero_ok else '>'} 0, got {sent}")
    else:
        if not math.isfinite(value):
            raise InvalidTick("nonfinite_size", f"{key} must be finite, got {sent}")
        if value < 0:
            raise InvalidTick("negative_size", f"{key} must be >= 0, got {sent}")
    return value


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
    if kind is None:
        has_trade, has_quote = "price" in obj, ("bid" in obj or "ask" in obj)
        if has_trade and has_quote:
            raise InvalidTick("ambiguous_kind", "no 'kind' and both trade (price) and quote (bid/ask) fields")
        if not (has_trade or has_quote):
            raise InvalidTick("unknown_kind", f"no 'kind' and neither 'price' nor 'bid'/'ask' present{renamed(obj)}")
        return TRADE if has_trade else QUOTE
    check_text("kind", kind)
    if kind not in KINDS:
        raise InvalidTick("unknown_kind", f"kind must be one of {KINDS}, got {kind!r}")
    return kind


def slash_hint(name: str) -> str:
    """For a name asked for that has a '/' (`EUR/USD`), which no stream has: the name file replay gives that
    instrument (`EUR-USD`), else ""."""
    if not isinstance(name, str) or "/" not in name or len(name) > 64:
        return ""
    return f" (no stream name has a '/', which answer topics use as their separator: file replay names " \
           f"{name!r} {name.replace('/', '-')!r}{venue_caution(name.replace('/', '-'))})"


def venue_caution(dashed: str) -> str:
    """What to know before sending `BTC/USD` as `BTC-USD`, said wherever '/' -> '-' is suggested or done: that may be
    another venue's own name for the instrument (Coinbase's), and one engine fed by both would merge their ticks."""
    example = f", e.g. {dashed + '.kraken'!r}" if len(dashed) <= 32 else ""
    return f"; it may be another venue's name too: name it by venue{example}"  # (a rejection is kept short)


def check_stream(stream: Any, max_bytes: int = MAX_STREAM_BYTES) -> str:
    """The one stream-name rule, for raw and pre-tokenized ticks alike.

    A name is a non-empty str of at most `max_bytes` UTF-8 bytes whose characters
    are all printable (`str.isprintable`: no control character or NUL, no format
    character such as a bidi override or a zero-width one, no line or paragraph
    separator, no surrogate, no private-use or unassigned code point, and no
    space but the ASCII one), with no '/', no leading '_' and no space at either
    end. Anything else is `bad_stream`, with the rule it broke.
    """
    if stream is None or stream == "":
        raise InvalidTick("missing_stream", "field 'stream' is required and must be non-empty")
    check_text("stream", stream)
    if len(stream) > max_bytes:  # a character is at least one byte: a 1 MB name stops here, unread
        raise InvalidTick("bad_stream", f"stream name of {len(stream)} characters (so at least as many UTF-8 bytes) "
                                        f"is longer than {max_bytes} bytes")
    if not stream.isprintable():
        bad = next(c for c in stream if not c.isprintable())
        raise InvalidTick("bad_stream", f"stream {_excerpt(stream)} contains {_describe(bad)}; names must be printable")
    size = len(stream.encode())  # cannot fail: surrogates are not printable
    if size > max_bytes:
        raise InvalidTick("bad_stream", f"stream name of {size} UTF-8 bytes is longer than {max_bytes} bytes")
    if "/" in stream:  # answer topics are "<query>/<stream>/": a '/' would make prefix subscriptions ambiguous
        dashed = stream.replace("/", "-")
        raise InvalidTick("bad_stream", f"stream {stream!r} contains '/', which answer topics use as a delimiter "
                                        f"(file replay names it {dashed!r}{venue_caution(dashed)})")
    if stream[0] == "_":
        raise InvalidTick("bad_stream", f"stream {stream!r} starts with '_': topics starting with '_' are the "
                                        "service's own (_heartbeat/, _rejects/)")
    if stream[0] == " " or stream[-1] == " ":
        raise InvalidTick("bad_stream", f"stream {stream!r} starts or ends with a space")
    return stream


def check_normalized(stream: str) -> str:
    """A wire stream name is in Unicode NFC: `Société` sent with a precomposed é and with e + U+0301 would be two
    streams that print alike. Refused as `bad_stream`, naming the form to send; file replay normalises its names
    instead (macOS writes file names in NFD). Not part of `check_stream`, which a tick log's names pass through
    again at a restart: a name an earlier version accepted is not refused there."""
    if not stream.isascii() and not unicodedata.is_normalized("NFC", stream):
        nfc = unicodedata.normalize("NFC", stream)
        raise InvalidTick("bad_stream", f"stream {_excerpt(stream)} is not in Unicode NFC: send it as "
                                        f"{_excerpt(nfc, readable=True)} (its NFC form), so that one name is one "
                                        f"stream")
    return stream


_CATEGORY_NAMES = {"Cc": "a control character", "Cf": "a format character", "Cs": "a surrogate",
                   "Co": "a private-use character", "Cn": "an unassigned code point", "Zl": "a line separator",
                   "Zp": "a paragraph separator", "Zs": "a space other than ' '"}


def _describe(char: str) -> str:
    name = unicodedata.name(char, "")
    what = _CATEGORY_NAMES.get(unicodedata.category(char), "a non-printable character")
    return f"U+{ord(char):04X}{' ' + name if name else ''} ({what})"


def _excerpt(stream: str, limit: int = 32, readable: bool = False) -> str:
    """The start of a refused name, escaped (ascii) so that it cannot reorder or hide text where it is shown;
    ``readable``: a name to use instead (an NFC form), as ``shown_name`` quotes it."""
    return (repr if readable else ascii)(stream[:limit]) + ("..." if len(stream) > limit else "")


def shown_name(name: str) -> str:
    r"""A stream name (a topic, a pattern) for a line of output, by one rule: as it is when it reads as itself; in
    quotes as Python writes a string (repr) when it holds a backslash, a quote or a character that does not print:
    backslashes doubled, a control character or bidi mark escaped, printable letters kept (`Société`). So
    `C:\feed\ES` shows as 'C:\\feed\\ES', and a name with a backslash and an n in it cannot be read as one
    with a newline (nor a name in quotes as a quoted name)."""
    if name.isprintable() and not any(c in name for c in "\\'\""):
        return name
    return repr(name)


def _side_hint(side: Any) -> str:
    """What a vendor's side value (SIDE_WORDS: `BUY`, `B`, `Sell`, `-1`) is on the wire, for the refusal."""
    said = side.strip().lower() if isinstance(side, str) else None
    word = SIDE_WORDS.get(said) if said is not None else None
    if word is None:
        return ""
    if said == word:
        return f" (lower case: {word!r})"
    return f" (if {side!r} marks a {'buyer' if word == 'buy' else 'seller'}-initiated trade, send {word!r})"


def check_text(key: str, value: Any) -> None:
    """A text field is msgpack str: sent as bin (a client packing every string as bytes) or as anything else it is
    `wrong_type`, said as such, whichever field it is."""
    if isinstance(value, bytes):
        raise InvalidTick("wrong_type", f"{key} must be msgpack str, got bin {value[:32]!r}: pack text as str "
                                        "(msgpack's str family), not bin")
    if not isinstance(value, str):
        raise InvalidTick("wrong_type", f"{key} must be a str, got {wire_value(value)}")


def check_keys(obj: dict) -> None:
    """Map keys are msgpack str: a key sent as bin (a client packing every string as bytes) is `wrong_type`,
    said as such, rather than every field looking missing."""
    if isinstance(obj, RepeatedKeys):
        raise InvalidTick("duplicate_key", f"key {', '.join(repr(k)[:34] for k in obj.repeated[:8])} given more "
                                           f"than once in one tick map: which value was meant cannot be told")
    for key in obj:
        if isinstance(key, bytes):
            raise InvalidTick("wrong_type", f"map keys must be msgpack str, got bin {key[:32]!r}: pack text as "
                                            "str (msgpack's str family), not bin")
        if not isinstance(key, str):
            raise InvalidTick("wrong_type", f"map keys must be msgpack str, got {wire_value(key)}")


def field_list(keys: Any, shown: int = 8) -> str:
    """Unknown keys for an error, bounded: a few of them (each cut to 32 characters) and how many more."""
    names = sorted(str(k)[:32] for k in keys)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"{names[:shown]}{more}"


def counted(n: int, noun: str) -> str:
    """`1 tick`, `3 ticks`: a count for messages people read."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _float_ts_hint(ts: Any) -> str:
    """A float ns timestamp is most often a client whose numbers are doubles (JavaScript's): a double holds ns
    since the epoch only to ~256 ns, so the engine does not round it; say how to send an int64."""
    if not isinstance(ts, float) or not math.isfinite(ts) or abs(ts) < 2**53:
        return ""
    return ("; a double cannot hold ns since the epoch exactly: pack ts as a msgpack int64/uint64 (in JavaScript a "
            "BigInt, with @msgpack/msgpack's useBigInt64)")


def check_ts(obj: dict) -> int:
    """The one timestamp-field rule: `ts` present, an int (not a bool), in [0, 2**63) (int64, from 1970).

    There is no wall-clock bound here: files from any year replay, a simulation
    may run ahead of the clock, and a backtest does not depend on when it runs.
    Event time only has to be monotonic per stream (`check_order`); a live
    service bounds it by its own clock too (`check_not_ahead`).
    """
    if "ts" not in obj:
        raise InvalidTick("missing_field", f"field 'ts' is required{renamed(obj, 'ts')}")
    ts = obj["ts"]
    if isinstance(ts, bool) or not isinstance(ts, int):
        raise InvalidTick("ts_not_int", f"ts must be an int of nanoseconds, got {wire_value(ts, 24)}"
                                        f"{_float_ts_hint(ts)}")
    if not 0 <= ts < TS_MAX:
        raise InvalidTick("ts_out_of_range", f"ts must be in [0, 2**63), got {ts}")
    return ts


# 2000-01-01 and 2100-01-01 in ns since the epoch. A ts between them counted in s, ms or us instead of ns reads as a
# time in January 1970: accepted (a simulation may start at 0), but most likely a client's unit mistake.
_Y2000_NS, _Y2100_NS = 946_684_800 * 10**9, 4_102_444_800 * 10**9
_UNITS = (("seconds", 10**9), ("milliseconds", 10**6), ("microseconds", 10**3))


def ts_unit_guess(ts: int) -> tuple[str, int] | None:
    """The unit ("seconds", ...) and its ns a ts looks counted in, when read in s, ms or us it falls in 2000..2100
    (as ns it is then a time in January 1970); None when it does not."""
    return next(((unit, per) for unit, per in _UNITS if _Y2000_NS // per <= ts < _Y2100_NS // per), None)


def ts_unit_hint(ts: int) -> str | None:
    """Why a ts looks like another unit than ns, in words (`ts_unit_guess`); None when it does not."""
    if (guess := ts_unit_guess(ts)) is None:
        return None
    unit, per = guess
    return (f"ts {ts} is {unit} since the epoch ({utc_text(ts * per)}) if read so, but ts counts nanoseconds "
            f"(x {per:,}); as nanoseconds it is in January 1970")


def first_ts_hint(ts: int) -> str | None:
    """Why a stream's first ts looks wrong, in words (0: an unset time; else `ts_unit_hint`); None when it does not.
    Such a tick is accepted (a simulation may start at 0), but its stream then runs on a clock of its own."""
    if ts == 0:
        return "ts 0: an unset time? (ts counts nanoseconds since the epoch; its next ticks may be years later)"
    return ts_unit_hint(ts)


def utc_text(ns: int) -> str:
    """A ts in ns since the epoch as ISO 8601 UTC, to the ns (``2191-10-26T06:13:20Z``,
    ``2026-05-28T20:26:40.000000001Z``): what an error shows beside the raw number."""
    seconds, fraction = divmod(ns, 10**9)
    when = datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{when}.{fraction:09d}Z" if fraction else f"{when}Z"


def check_order(stream: str, ts: int, last_ts: int | None) -> None:
    """The one ordering rule: ts may not go below the stream's last accepted ts (equal is fine:
    exchanges stamp many trades with one millisecond)."""
    if last_ts is not None and ts < last_ts:
        raise InvalidTick("ts_backwards", f"stream {stream!r}: ts {ts} ({utc_text(ts)}) < previous {last_ts} "
                                          f"({utc_text(last_ts)})", stream)


def check_not_ahead(stream: str, ts: int, now_ns: int, max_ahead_ns: int) -> None:
    """The live service's clock rule: ts at most ``max_ahead_ns`` past its wall clock ``now_ns``. A tick years
    ahead (a corrupt or mis-scaled time) would otherwise be accepted and then, as the stream's last ts, refuse
    every real tick after it as ts_backwards, across restarts too. Files replayed offline are never checked."""
    if ts - now_ns > max_ahead_ns:
        raise InvalidTick("ts_in_future", f"stream {stream!r}: ts {ts} ({utc_text(ts)}) is "
                                          f"{_duration(ts - now_ns)} ahead of this service's clock "
                                          f"({utc_text(now_ns)}); limits.max_ts_ahead_s allows "
                                          f"{_duration(max_ahead_ns)} (a sender's clock or unit mistake?)", stream)


def _duration(ns: int) -> str:
    """A span in the largest unit that keeps it readable: 12.5 s, 3.2 h, 1 d, 60,227.9 d."""
    seconds = ns / 1e9
    unit, per = next(((u, p) for u, p in (("d", 86_400), ("h", 3_600), ("min", 60)) if seconds >= p), ("s", 1))
    return f"{seconds / per:,.1f}".removesuffix(".0") + f" {unit}"


def validate(obj: Any, max_stream_bytes: int = MAX_STREAM_BYTES, zero_bid_is_price: bool = False) -> Tick:
    """Check one decoded wire map and build a Tick; raises InvalidTick with a reason. ``zero_bid_is_price``: a 0
    bid beside an ask above it is a price (an option nobody bids; a service's limits.zero_bid: price, file
    replay's zero_bid: price), not TAQ's "no bid" (the default: protocol 1 refused it, so a feed that sends a 0 bid
    for "no bid" never gets a mark of ask / 2 unasked)."""
    if not isinstance(obj, dict):
        raise InvalidTick("not_a_map", f"a tick is a map, got {wire_value(obj)}")
    if "stream" not in obj:  # perhaps sent with its key as bin: say that rather than "missing"
        check_keys(obj)
        if hint := renamed(obj, "stream"):  # `symbol`, `ticker`, ...: say what the field is called
            raise InvalidTick("missing_stream", f"field 'stream' is required and must be non-empty{hint}")
    stream = check_normalized(check_stream(obj.get("stream"), max_stream_bytes))
    try:  # from here a refusal names its stream
        check_keys(obj)
        return _validate_fields(obj, stream, zero_bid_is_price)
    except InvalidTick as err:
        err.stream = stream
        raise


def _validate_fields(obj: dict, stream: str, zero_bid_is_price: bool) -> Tick:
    ts = check_ts(obj)
    kind = _kind(obj)
    extra = [k for k in obj if k not in _FIELDS[kind]]
    if extra:
        raise InvalidTick("unknown_field", f"fields {field_list(extra)} not allowed in a {kind}{renamed(extra)}")
    if kind == TRADE:
        side = obj.get("side")
        if side is not None:
            check_text("side", side)
        if side is not None and side not in SIDES:
            raise InvalidTick("unknown_side", f"side must be 'buy', 'sell' or nil, got {side!r}{_side_hint(side)}")
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


def unpack(data: bytes, *, max_bytes: int = 64 << 20) -> Any:
    """msgpack -> Python object; raises InvalidTick("bad_msgpack") on garbage or over `max_bytes`."""
    if len(data) > max_bytes:
        raise InvalidTick("bad_msgpack", f"message of {len(data)} bytes > {max_bytes}")
    if not data:
        raise InvalidTick("bad_msgpack", "an empty frame: a message holds msgpack ticks (a map, or a list of them)")
    try:
        return read_msgpack(data)
    except NotMsgpack as err:
        raise InvalidTick("bad_msgpack", str(err)) from None


class NotMsgpack(ValueError):
    """Bytes that hold no single msgpack value the engine can read; the message says why, in msgpack's terms."""


def read_msgpack(data: bytes) -> Any:
    """One msgpack value as every wire message is read (ticks and control requests alike): keys of any type, text
    that is not UTF-8 decoded with surrogates (which no stream name, field or value allows) and a map with a key
    given twice (a `RepeatedKeys`) come through, so that the one item at fault is refused saying why (check_keys)
    and the rest of its message is kept (~0.4 us a tick for the hook). Raises NotMsgpack."""
    try:  # (unpackb bounds container sizes by len(data))
        return msgpack.unpackb(data, raw=False, strict_map_key=False, unicode_errors="surrogateescape",
                               object_pairs_hook=_decoded_map)
    except TypeError:  # a map or an array as a map key (unhashable): no tick or request holds one
        why = ": a map key that is a map or an array"
    except msgpack.ExtraData:
        why = ": bytes left over after its first value (one frame holds one value)"
    except msgpack.StackError:
        why = ": nested deeper than the decoder allows"
    except msgpack.FormatError:
        why = ": a byte that starts no msgpack value"
    except Exception as err:  # msgpack raises several unrelated types on garbage; say what it said
        why = ": it ends inside a value (cut short?)" if "incomplete input" in str(err) else f" ({err})"
    raise NotMsgpack(f"not valid msgpack{why}{json_hint(data)}")


class RepeatedKeys(dict):
    """A decoded map in which a key came more than once (msgpack allows it; a plain decode keeps the last value,
    so a hand-rolled encoder's bug would move a tick to another stream or price without a word)."""

    repeated: list[Any]


def _decoded_map(pairs: list[tuple[Any, Any]]) -> dict:
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        keys = [key for key, _ in pairs]
        mapping = RepeatedKeys(mapping)
        mapping.repeated = sorted({key for key in keys if keys.count(key) > 1}, key=repr)
        if len({repr(value) for key, value in pairs if key == "stream"}) > 1:
            del mapping["stream"]  # two stream names: the rejection is no more one stream's than the other's
    return mapping


def json_hint(data: bytes) -> str:
    """What to add to a msgpack error when the bytes look like JSON text (a common first try)."""
    if data.lstrip()[:1] in (b"{", b"["):
        return ("; it looks like JSON text: the engine reads msgpack (pack the same value as msgpack), see "
                "docs/wire-protocol.md")
    return ""


def tick_items(obj: Any) -> list[Any]:
    """The items of an unpacked raw-tick message: one map or a list; raises InvalidTick("not_a_map")."""
    if isinstance(obj, dict):
        return [obj]
    if isinstance(obj, list):
        return obj
    raise InvalidTick("not_a_map", f"a message is a tick map or an array of them, got {wire_value(obj)}")


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
