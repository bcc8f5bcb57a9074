"""Websocket messages whose ticks sit where no table reading reaches them, rewritten line by line into the one
shape the JSON-lines reader unwraps, `{"channel": ..., "data": [tick, ...]}` (connectors/json_lines.py, then
connectors/exchange_shapes.py's ARRAY_SHAPES read them by their channel and keys):

* Coinbase Advanced Trade (`wss://advanced-trade-ws.coinbase.com`): every message is `{"channel", "timestamp",
  "sequence_num", "events": [...]}`; `market_trades` events hold `trades` (each with its own `time`), `ticker`
  events hold `tickers` (the best bid and ask with their quantities, and no time of their own: the message's
  `timestamp` stamps them). A ticker's last `price` is left out: it is the trade the market_trades channel sends.
* Kraken v1 `spread` (the top of book): `[channelID, [bid, ask, timestamp, bidVolume, askVolume], "spread",
  "XBT/USD"]`, a message a line as its `trade` arrays are (those: connectors/json_objects.py).
* Bybit v5 `publicTrade` beside `orderbook.1` in one capture (one connection subscribed to both, as one records
  `wss://stream.bybit.com/v5/public/linear`): a book message's `data` is one object where a trade message's is a
  list, which no one table holds. Each book message's object becomes a one-tick list, stamped `T` (a trade's time
  key) with the message's `ts`, and every message gets `channel`, its topic less the symbol (`publicTrade`,
  `orderbook.1`), so that trades and quotes read from one map (connectors/exchange_shapes.py's
  `bybit-trades-book`).
* Bybit v5 `tickers` of a derivatives market, captured alone (its top of book beside mark, index and funding):
  rewritten the same way, each message's object a one-tick list stamped `T` with the message's `ts`
  (`bybit-tickers`); a delta that changes none of the best bid and ask and their sizes (a mark, index or funding
  update alone) has no tick, an empty list (review431 #4: the capture was not recognised, its ack a rejection).

Any other line is kept as it was. A file is looked at only when its first lines show one of these layouts.

`ticker_beside_matches`: a Coinbase Exchange capture of matches and ticker in one connection (as one subscribes in
practice) keeps each ticker's best bid and ask as a quote, its trade fields (the match it echoes) emptied, so that
the trade is read once, from its match, and its id is not taken for another trade's; its snapshot's levels are
dropped (the book at subscribing, a message left out).

`book_fields_of_book_tickers`: a Binance capture of trades and bookTickers in one file (a combined stream) keeps
`b`, `a`, `B`, `A` on its bookTicker rows only: a trade event's own `b` and `a` (a spot trade's buyer and seller order
ids, in captures of the years Binance sent them) and an aggTrade's `a` (its id) are no quote.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import polars as pl

SNIFF_LINES = 50  # of a file's first lines: one of them shows the layout (after acks and heartbeats)
# Kraken v1 spread's array, named as its docs name each value (the time named as the trade arrays' is, `time`)
KRAKEN_V1_SPREAD = ("bid", "ask", "time", "bidVolume", "askVolume")
# a Bybit tickers message's top of book (its other fields, mark, index, funding, open interest, are no tick)
BYBIT_TICKER_QUOTE = ("bid1Price", "bid1Size", "ask1Price", "ask1Size")
# a Coinbase Advanced Trade ticker's fields read (its 24 h statistics and last price are not ticks)
ADVANCED_TICKER = ("product_id", "best_bid", "best_bid_quantity", "best_ask", "best_ask_quantity")


def unwrapped_messages(lines: list[bytes]) -> list[bytes]:
    """The lines with Coinbase Advanced Trade envelopes, Kraken v1 spread arrays and the messages of a Bybit capture
    of trades and books as `{"channel", "data"}` messages; the same list when the file holds none of them."""
    head = [line for line in lines[:SNIFF_LINES] if line.strip()]
    advanced = any(b'"events"' in line and b'"channel"' in line for line in head)
    spread = any(line.lstrip().startswith(b"[") and b'"spread"' in line for line in head)
    if any(b'"topic"' in line for line in head) and (_bybit_trades_and_books(lines) or _bybit_tickers_alone(lines)):
        return [_unwrapped(line, _bybit_message) for line in lines]
    if not advanced and not spread:
        return lines
    return [_unwrapped(line) for line in lines]


def _bybit_trades_and_books(lines: list[bytes]) -> bool:
    """Whether a Bybit capture holds trade messages and book messages both (a byte search, no parse)."""
    return any(b'"publicTrade.' in line for line in lines) and any(b'"orderbook.' in line for line in lines)


def _bybit_tickers_alone(lines: list[bytes]) -> bool:
    """Whether a Bybit capture holds tickers messages and no trade or book message (a byte search, no parse): a
    capture of tickers beside trades is refused, naming a line of each (connectors/json_lines.py)."""
    return any(b'"tickers.' in line for line in lines) and \
        not any(b'"publicTrade.' in line or b'"orderbook.' in line for line in lines)


def _bybit_message(value: Any) -> dict[str, Any] | None:
    """A Bybit v5 message with `channel` (its topic less the symbol) and `data` a list: a book's or a ticker's
    message's object as a one-tick list stamped `T` with the message's `ts` (none for a ticker that changes no best
    bid or ask: the module docstring); None for any other value (an ack, a pong: kept as it is)."""
    if not isinstance(value, dict) or not isinstance(topic := value.get("topic"), str) or "." not in topic:
        return None
    channel, data = topic.rsplit(".", 1)[0], value.get("data")
    if channel == "tickers" and isinstance(data, dict) and not any(key in data for key in BYBIT_TICKER_QUOTE):
        data = []
    if isinstance(data, dict):
        data = [data | ({"T": value["ts"]} if "ts" in value and "T" not in data else {})]
    return value | {"channel": channel, "data": data}


def _unwrapped(line: bytes, rewrite: Callable[[Any], dict[str, Any] | None] | None = None) -> bytes:
    text = line.strip()
    if not text or text[:1] not in (b"{", b"["):
        return line
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return line  # rejected as not_json where the lines are read
    if rewrite is not None:
        message = rewrite(value)
    else:
        message = _advanced_trade(value) if isinstance(value, dict) else _kraken_spread(value)
    return line if message is None else json.dumps(message).encode()


def _advanced_trade(value: dict[str, Any]) -> dict[str, Any] | None:
    """A Coinbase Advanced Trade message as `{"channel", "data": [...]}` (trades, or tickers stamped with the
    message's timestamp); an ack or a heartbeat with `data` empty; None for any other object."""
    events = value.get("events")
    if not isinstance(value.get("channel"), str) or not isinstance(events, list):
        return None
    data: list[dict[str, Any]] = []
    for event in events:
        if not isinstance(event, dict):
            continue
        data += [dict(trade) for trade in event.get("trades") or () if isinstance(trade, dict)]
        data += [{key: ticker.get(key) for key in ADVANCED_TICKER} | {"time": value.get("timestamp")}
                 for ticker in event.get("tickers") or () if isinstance(ticker, dict)]
    message = {key: v for key, v in value.items() if key not in ("events", "timestamp")}
    return message | {"data": data}


def _kraken_spread(value: Any) -> dict[str, Any] | None:
    """A Kraken v1 spread message as `{"channelID", "channel": "spread", "pair", "data": [quote]}`; None for any
    other array."""
    if not (isinstance(value, list) and len(value) == 4 and isinstance(value[0], int) and value[2] == "spread"
            and isinstance(value[3], str) and isinstance(value[1], list)
            and len(value[1]) >= len(KRAKEN_V1_SPREAD)):
        return None
    quote = dict(zip(KRAKEN_V1_SPREAD, (str(v) for v in value[1])))
    return {"channelID": value[0], "channel": "spread", "pair": value[3], "data": [quote]}


# a Coinbase Exchange ticker's fields of the trade it follows (its match, read from the matches channel)
TICKER_TRADE_FIELDS = ("price", "side", "last_size", "trade_id", "size")


BINANCE_BOOK_FIELDS = ("b", "a", "B", "A")  # a bookTicker's best bid, ask and their sizes


def book_fields_of_book_tickers(frame: pl.DataFrame) -> pl.DataFrame:
    """A Binance capture's frame of trade events and bookTickers with the book fields emptied on the trade rows (a
    spot bookTicker names no event, a futures one `e: bookTicker`); any other frame as it is. Left alone, an
    aggTrade's id read as an ask made a one-sided quote of every trade, and an older spot trade's order ids a
    quote at prices of ids (review400 #6's follow-up)."""
    if "e" not in frame.columns or frame.schema["e"] != pl.String or not set(BINANCE_BOOK_FIELDS) <= set(frame.columns):
        return frame
    book = pl.col("e").is_null() | (pl.col("e") == "bookTicker")
    return frame.with_columns(pl.when(book).then(pl.col(c)).alias(c) for c in BINANCE_BOOK_FIELDS)


def ticker_beside_matches(frame: pl.DataFrame) -> pl.DataFrame:
    """A Coinbase Exchange capture's frame with each `ticker` row's trade fields emptied where the capture holds
    matches too (their trade is read from the match); any other frame as it is."""
    if not {"type", "best_bid", "best_ask"} <= set(frame.columns) or frame.schema["type"] != pl.String:
        return frame
    types = set(frame["type"].drop_nulls().unique())
    if "ticker" not in types or not types & {"match", "last_match"}:
        return frame
    echo = pl.col("type") == "ticker"
    # the snapshot's levels (bids[0].price, ...) are the book at subscribing, a message left out: not columns that
    # compete with the ticker's best bid and ask
    frame = frame.drop([c for c in frame.columns if c.startswith(("bids[", "asks["))])
    return frame.with_columns(pl.when(~echo.fill_null(False)).then(pl.col(c)).alias(c)
                              for c in TICKER_TRADE_FIELDS if c in frame.columns)
