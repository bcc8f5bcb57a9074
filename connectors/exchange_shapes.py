"""Exchange message layouts in JSON files, known by their keys (connectors/json_lines.py reads the files): each a
`Shape`, the map that reads it and the note that says so.

`shape_of`: a message a line (Binance trade/aggTrade events, also inside a combined stream's `{"stream": ...,
"data": {...}}` with the bookTickers beside them where the lines begin with their receive time, Binance bookTicker,
Coinbase Exchange `match`/`last_match`, Bitstamp `live_trades`);
`array_shape_of`: ticks made one row each from arrays under `data` (OKX trades, bbo-tbt and tickers, Bybit
publicTrade, Kraken v2 trade, v1's trade arrays and its REST trades, made messages by connectors/json_objects.py;
Deribit's trades under `params.data`; Alpaca's trades and quotes, moved there by connectors/json_messages.py), by
their channel; `rest_shape_of`: one JSON array of records as a REST endpoint returns it (Binance trades and
aggTrades, Coinbase Exchange trades). Other messages of a known layout are left out by the map's `keep`, counted as
filtered_out, and the note names them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Mapping

import polars as pl

from connectors.bar_documents import AGGREGATE_KEYS, TICKER
from connectors.column_map import PRESETS, ColumnMap
from connectors.field_names import EXCHANGE_MESSAGES, FIELD_NAMES, normal_name
from connectors.json_objects import RECEIVED
from connectors.map_vocabulary import DETECT, EPOCH, UNITS
from connectors.presets import PRESET_MAPS
from connectors.side_maps import BITSTAMP_TYPE, BUYER_MAKER, CRYPTOCOMPARE_FLAG
from connectors.ticks import QUOTE, TRADE
from connectors.time_units import epoch_unit

# (the keys are the wire's hints' too: connectors/field_names.py's EXCHANGE_MESSAGES)
BINANCE_TRADE_KEYS = EXCHANGE_MESSAGES["binance-trade"].keys  # + "t" (trade) or "a" (aggTrade)
BINANCE_TRADE_EVENTS = ("trade", "aggTrade")
BINANCE_BOOK_KEYS = EXCHANGE_MESSAGES["binance-bookticker"].keys
BOOK_TICKERS_WITHOUT_E = "messages without e (bookTicker's)"  # a spot bookTicker names no event
FUTURES_BOOK_TICKER = "bookTicker"  # a futures bookTicker's e (it carries T, the exchange's time, too)
COINBASE_MATCH_KEYS = EXCHANGE_MESSAGES["coinbase-matches"].keys
COINBASE_MATCHES = ("match", "last_match")
# each (re)subscription sends the last trade again as last_match: a reconnect in a capture repeats a trade
COINBASE_RECONNECT = "a reconnect's last_match: each subscription sends the last trade again"
# Bitstamp's live_trades `data` (lifted by connectors/json_lines.py), its pair taken from `channel`
BITSTAMP_TRADE_KEYS = frozenset({"microtimestamp", "type", "price", "amount", "buy_order_id", "sell_order_id",
                                 "symbol"})
# Bybit v5 `orderbook.1` (`{"topic": "orderbook.1.BTCUSDT", "type": "snapshot|delta", "ts", "data": {"s", "b", "a",
# "u", "seq"}}`): its top level only, where a delta's first level is the best one (deeper books' deltas are not)
BYBIT_BOOK_KEYS = frozenset({"topic", "ts", "s", "b[0].price", "a[0].price"})
BYBIT_TOP_OF_BOOK = "orderbook.1."
BYBIT_BOOK_SAID = "Bybit orderbook.1 messages"  # how its shape's note names such a file
# what a Bybit orderbook.1 delta does that makes its rows' sides filled (Bybit's v5 orderbook docs: a delta holds
# the levels that changed; the best level of the side that did not change is not sent again)
BYBIT_ONE_SIDED = "a Bybit orderbook.1 delta lists only the side whose best level changed, the other side's empty"
BYBIT_TICKERS_SAID = "Bybit tickers"  # how its shape's note names such a file
# shape's note's name -> why its quote rows leave a side empty (the note on their filling says it)
ONE_SIDED_WHY = {BYBIT_BOOK_SAID: BYBIT_ONE_SIDED,
                 BYBIT_TICKERS_SAID: "a Bybit tickers delta holds only the fields that changed"}
# CryptoCompare's legacy streamer trades (TYPE 0, CCData's `wss://streamer.cryptocompare.com/v2`): TS epoch seconds,
# TSNS the ns within that second, F the taker's side flag, M the market, FSYM/TSYM the pair
CRYPTOCOMPARE_TRADE_KEYS = frozenset({"TYPE", "M", "FSYM", "TSYM", "F", "TS", "Q", "P"})


@dataclass
class Shape:
    """An exchange's message layout, known by its keys: the map that reads it and the note that says so."""

    name: str
    columns: ColumnMap | None  # None: Binance bookTicker without a time field (`columns_for` asks for one)
    note: str
    repeats: str | None = None  # why a capture of this layout repeats trades (a reconnect's), for their caution
    # a capture with receive times whose map stamps its ticks with the exchange's time: how far that runs ahead
    # (ms, `_exchange_lead_ms`), for the caution on files read on the two clocks (connectors/capture_clocks.py)
    exchange_lead_ms: float | None = None
    # columns beside its map's `ts` whose times some of its ticks are stamped with (its note says which): no clock
    # left unread (review431 #2: a Bybit book message's `ts`, its quotes' stamp, was said "another clock, not read")
    clocks_read: frozenset[str] = frozenset()


def shape_of(path: Path, frame: pl.DataFrame, wrapped: bool = False) -> Shape | None:
    """The exchange message layout the objects' keys show, else None (read as any table: detected)."""
    columns = set(frame.columns)
    frame = frame.filter(~pl.all_horizontal(pl.all().is_null()))  # blank lines and lines that are no object
    within = " (inside a combined stream's data)" if wrapped else ""
    if BINANCE_TRADE_KEYS <= columns and (binance := _binance_events(path, frame, within)) is not None:
        return binance
    if AGGREGATE_KEYS <= columns and "v" in columns:  # Polygon's bars a line each (`jq -c '.results[]'`'s output)
        return Shape("polygon-aggregates", ColumnMap(ts="t", ts_unit=EPOCH, kind=TRADE, price="c", size="v"),
                     f"{path.name}: Polygon aggregates, a bar a line: Polygon's short keys (t the bar's start in ms, "
                     f"o, h, l, c, v); stream from the file name; vw and n are not read")
    if BINANCE_BOOK_KEYS <= columns:
        stamp = "T" if "T" in columns else next((c for c in frame.columns if c not in BINANCE_BOOK_KEYS
                                                 and (normal_name(c) in FIELD_NAMES["ts"] or c == RECEIVED)), None)
        note = (f"{path.name}: Binance bookTicker messages{within}: quotes, bid=b, ask=a, bid_size=B, ask_size=A, "
                f"stream=s, stamped with {stamp or 'the time field given'}")
        columns_map = None if stamp is None else ColumnMap(ts=stamp, ts_unit=DETECT, kind=QUOTE, stream_col="s",
                                                           bid="b", ask="a", bid_size="B", ask_size="A")
        return Shape("binance-bookticker", columns_map, note)
    if BYBIT_BOOK_KEYS <= columns and (topics := _counts(frame, "topic", "messages without topic")) and \
            all(topic.startswith(BYBIT_TOP_OF_BOOK) for topic in topics):
        note = (f"{path.name}: {BYBIT_BOOK_SAID}: quotes of the best level, bid=b[0], ask=a[0] (price and "
                f"size; a level of size 0 is deleted), ts=ts (ms), stream=s; a delta's side that did not change "
                f"keeps the stream's last quote's")
        return Shape("bybit-orderbook1", ColumnMap(ts="ts", ts_unit=EPOCH, kind=QUOTE, stream_col="s",
                                                   bid="b[0].price", ask="a[0].price", bid_size="b[0].size",
                                                   ask_size="a[0].size", fill_quotes=True), note)
    if COINBASE_MATCH_KEYS <= columns and (types := _counts(frame, "type", "messages without type")) and \
            any(t in types for t in COINBASE_MATCHES):
        quotes = "ticker" in types and {"best_bid", "best_ask"} <= columns
        kept = (*COINBASE_MATCHES, "ticker") if quotes else COINBASE_MATCHES
        others = _said({k: n for k, n in types.items() if k not in kept})
        ticker = ("; ticker read as quotes, bid=best_bid, ask=best_ask with their sizes (its trade is the match "
                  "read already)" if quotes else "")
        book = "; l2update is a change to the book, not its top: read ticker for the best bid and ask" \
            if "l2update" in types and not quotes else ""
        note = (f"{path.name}: Coinbase Exchange websocket messages: match and last_match read as trades, their "
                f"side flipped (Coinbase's is the maker's), stream=product_id{ticker}"
                f"{'; other types left out, counted as filtered_out: ' + others if others else ''}{book}")
        columns_map = PRESETS["coinbase-matches"]
        if quotes:
            columns_map = replace(columns_map, kind=None, bid="best_bid", ask="best_ask",
                                  bid_size="best_bid_size" if "best_bid_size" in columns else None,
                                  ask_size="best_ask_size" if "best_ask_size" in columns else None,
                                  keep={"type": list(kept)}, preset=None)
        return Shape("coinbase-matches", columns_map, note, COINBASE_RECONNECT)
    if CRYPTOCOMPARE_TRADE_KEYS <= columns and (types := _counts(frame, "TYPE", "messages without TYPE")) and \
            "0" in types:
        others = _said({k: n for k, n in types.items() if k != "0"})
        ts = "TS+TSNS" if "TSNS" in columns else "TS"
        note = (f"{path.name}: CryptoCompare streamer trades (TYPE 0): ts={ts} (epoch seconds"
                f"{' and the ns within each' if 'TSNS' in columns else ''}), stream=M+FSYM+TSYM (market and pair), "
                f"price=P, size=Q, side from F (1: the taker sold, 2: bought, 4: unknown)"
                f"{'; other types left out, counted as filtered_out: ' + others if others else ''}")
        return Shape("cryptocompare-trades", ColumnMap(ts=ts, ts_unit="ns" if "TSNS" in columns else "s", kind=TRADE,
                                                       stream_col="M+FSYM+TSYM", price="P", size="Q", side="F",
                                                       side_map=CRYPTOCOMPARE_FLAG, keep={"TYPE": ["0"]}), note)
    if BITSTAMP_TRADE_KEYS <= columns and (events := _counts(frame, "event", "messages without event")) and \
            "trade" in events:
        others = _said({k: n for k, n in events.items() if k != "trade"})
        note = (f"{path.name}: Bitstamp websocket live_trades: ts=microtimestamp (us), stream=the pair its channel "
                f"names (live_trades_btcusd: btcusd), price, size=amount, side from type (0: the taker bought, 1: "
                f"sold){'; other events left out, counted as filtered_out: ' + others if others else ''}")
        return Shape("bitstamp-trades", ColumnMap(ts="microtimestamp", ts_unit=EPOCH, kind=TRADE, stream_col="symbol",
                                                  price="price", size="amount", side="type",
                                                  side_map=BITSTAMP_TYPE, keep={"event": ["trade"]}), note)
    return None


def _binance_events(path: Path, frame: pl.DataFrame, within: str) -> Shape | None:
    """Binance trade/aggTrade events, with the bookTickers of the same capture where its lines carry their receive
    time (hftbacktest's `RECV_NS {"stream": ..., "data": ...}`): both stamped with it, the one clock they share (a
    spot bookTicker has no time of its own); without it the bookTickers are left out. None: no trade events."""
    events = _counts(frame, "e", BOOK_TICKERS_WITHOUT_E)
    kept = [e for e in BINANCE_TRADE_EVENTS if e in events]
    if not kept:
        return None
    quotes = BINANCE_BOOK_KEYS <= set(frame.columns) and BOOK_TICKERS_WITHOUT_E in events
    received = quotes and RECEIVED in frame.columns and frame[RECEIVED].is_not_null().all()
    # a futures bookTicker names its event and carries the exchange's T, the clock its trades are stamped with
    timed_books = BINANCE_BOOK_KEYS <= set(frame.columns) and FUTURES_BOOK_TICKER in events
    left = {k: n for k, n in events.items() if k not in kept and not (received and k == BOOK_TICKERS_WITHOUT_E)
            and not (timed_books and k == FUTURES_BOOK_TICKER)}
    others = _said(left)
    both = ("; it holds trade AND aggTrade events, each trade twice over: replay one of them (a replay "
            "list's keep: {e: [trade]})" if len(kept) == 2 else "")
    left_out = f"; other messages left out, counted as filtered_out: {others}" if others else ""
    trades = "price=p, size=q, side from m (true: the buyer was the maker, so the aggressor sold)"
    books = "quotes bid=b, ask=a, bid_size=B, ask_size=A"
    gap = _exchange_lead_ms(frame, "T")
    if timed_books:
        note = (f"{path.name}: Binance {' and '.join(kept)} and bookTicker events{within}, trades with their top "
                f"of book, both at ts=T (the exchange's time, ms, which a futures bookTicker carries); stream=s; "
                f"trades {trades}; {books}{left_out}{both}")
        return Shape("binance-trade-bookticker", ColumnMap(
            ts="T", ts_unit=EPOCH, stream_col="s", price="p", size="q", side="m", side_map=BUYER_MAKER, bid="b",
            ask="a", bid_size="B", ask_size="A", keep={"e": [*kept, FUTURES_BOOK_TICKER]}), note)
    if received:
        lead = "" if gap is None else f", which runs {lead_said(gap)} it in this capture,"
        note = (f"{path.name}: Binance {' and '.join(kept)} events and bookTicker messages{within}, trades with "
                f"their top of book: both stamped with ts={RECEIVED}, the receive time before each line, the one "
                f"clock they share (a spot bookTicker has no time of its own, and the trades' time T{lead} would "
                f"place each quote apart from the trades it came with: --columns ts=T leaves the quotes without a "
                f"time, missing_field); stream=s; trades {trades}; {books}{left_out}{both}")
        return Shape("binance-trade-bookticker", ColumnMap(
            ts=RECEIVED, ts_unit=DETECT, stream_col="s", price="p", size="q", side="m", side_map=BUYER_MAKER,
            bid="b", ask="a", bid_size="B", ask_size="A", keep={"e": {"not": list(left)}} if left else None),
            note)
    unplaced = ("; a spot bookTicker has no time of its own, and these lines carry no receive time before them "
                "(hftbacktest's captures do), so its quotes cannot be placed among the trades" if quotes else "")
    note = (f"{path.name}: Binance {' and '.join(kept)} events{within}: ts=T (trade time, ms), stream=s, "
            f"{trades}{left_out}{unplaced}{both}")
    return Shape("binance-trade", ColumnMap(ts="T", ts_unit=EPOCH, kind=TRADE, stream_col="s", price="p", size="q",
                                            side="m", side_map=BUYER_MAKER, keep={"e": kept}), note,
                 exchange_lead_ms=gap)


def _exchange_lead_ms(frame: pl.DataFrame, exchange_ts: str) -> float | None:
    """How far (ms, the median over rows) an exchange's epoch time runs ahead of the receive time a capture wrote
    before each line (negative: behind); None without both as numbers. A collector's clock is off the exchange's by
    more than the network's delay (1.27 s in the shared BTCUSDT capture): ticks stamped by the two do not mix."""
    if RECEIVED not in frame.columns or exchange_ts not in frame.columns or \
            not frame.schema[RECEIVED].is_integer() or not frame.schema[exchange_ts].is_integer():
        return None
    both = frame.select(pl.col(exchange_ts), pl.col(RECEIVED)).drop_nulls()
    if both.is_empty():
        return None
    per_unit = UNITS[epoch_unit(both[exchange_ts][0])]
    return (both[exchange_ts].cast(pl.Int64) * per_unit - both[RECEIVED].cast(pl.Int64)).median() / 1e6


def lead_said(ms: float) -> str:
    """An exchange clock's lead over a receive time as a note says it: `1,262 ms ahead of` (`5 ms behind`)."""
    return f"{abs(ms):,.0f} ms {'ahead of' if ms >= 0 else 'behind'}"


@dataclass(frozen=True)
class ArrayShape:
    """An exchange's ticks in arrays under `data`: the channels whose ticks it reads, the keys those ticks have,
    and the map that reads them (less its keep, which the channels found make)."""

    name: str
    channels: tuple[str, ...]
    keys: frozenset[str]
    columns: ColumnMap
    says: str
    repeats: str | None = None  # why a capture of it repeats trades (Shape.repeats)
    every_channel: bool = False  # read only where all its channels are found (a file of one is another shape's)
    clocks_read: frozenset[str] = frozenset()  # (Shape.clocks_read)


OKX_BOOK = dict(ts="ts", ts_unit=EPOCH, kind=QUOTE, stream_col="instId")
ARRAY_SHAPES = (  # trades first: a capture of several channels replays its trades
    ArrayShape("okx-trades", ("trades", "trades-all"), frozenset({"instId", "px", "sz", "side", "ts"}),
               ColumnMap(ts="ts", ts_unit=EPOCH, kind=TRADE, stream_col="instId", price="px", size="sz",
                         side="side"),
               "OKX trades: ts=ts (ms), stream=instId, price=px, size=sz, side (the taker's)"),
    # a capture of trades and the top of book (connectors/exchange_envelopes.py made its books' objects lists, each
    # stamped T with its message's ts): before trades alone, whose keys it holds
    ArrayShape("bybit-trades-book", ("publicTrade", "orderbook.1"),
               frozenset({"T", "s", "S", "v", "p", "b[0].price", "a[0].price"}),
               ColumnMap(ts="T", ts_unit=EPOCH, stream_col="s", price="p", size="v", side="S", bid="b[0].price",
                         ask="a[0].price", bid_size="b[0].size", ask_size="a[0].size", fill_quotes=True),
               f"Bybit publicTrade and {BYBIT_BOOK_SAID} in one capture: trades ts=T (ms), price=p, size=v, side=S "
               f"(the taker's); quotes of the best level, bid=b[0], ask=a[0] (price and size; a level of size 0 is "
               f"deleted), stamped with their message's ts (ms), a delta's side that did not change keeping the "
               f"stream's last quote's; stream=s", every_channel=True, clocks_read=frozenset({"ts"})),
    # (connectors/exchange_envelopes.py made each message's object a list stamped T with its ts)
    ArrayShape("bybit-tickers", ("tickers",), frozenset({"T", "symbol", "bid1Price", "ask1Price"}),
               ColumnMap(ts="T", ts_unit=EPOCH, kind=QUOTE, stream_col="symbol", bid="bid1Price", ask="ask1Price",
                         bid_size="bid1Size", ask_size="ask1Size", fill_quotes=True),
               f"{BYBIT_TICKERS_SAID}: quotes of the best level, bid=bid1Price, ask=ask1Price, bid_size=bid1Size, "
               "ask_size=ask1Size, stamped with their message's ts (ms), a delta's fields that did not change keeping "
               "the stream's last quote's; stream=symbol; its mark and index prices, funding rate and open interest "
               "are no ticks, not read (a delta of those alone is a message without ticks)",
               clocks_read=frozenset({"ts"})),
    ArrayShape("bybit-trades", ("publicTrade",), frozenset({"T", "s", "S", "v", "p"}),
               ColumnMap(ts="T", ts_unit=EPOCH, kind=TRADE, stream_col="s", price="p", size="v", side="S"),
               "Bybit publicTrade: ts=T (ms), stream=s, price=p, size=v, side=S (the taker's)"),
    ArrayShape("kraken-trades", ("trade",), frozenset({"symbol", "side", "price", "qty", "timestamp"}),
               ColumnMap(ts="timestamp", ts_unit=DETECT, kind=TRADE, stream_col="symbol", price="price", size="qty",
                         side="side"),
               "Kraken v2 trade: ts=timestamp (ISO), stream=symbol, price, size=qty, side (the taker's), the "
               "snapshot's trades (the last ones before subscribing) included",
               "a reconnect's snapshot: each subscription sends the last trades before it again"),
    # (before v1's, whose keys it holds: `last`, the REST response's cursor, is its own; json_objects.py)
    ArrayShape("kraken-rest-trades", ("trade",), frozenset({"pair", "side", "price", "volume", "time", "orderType",
                                                            "last"}),
               ColumnMap(ts="time", ts_unit=DETECT, kind=TRADE, stream_col="pair", price="price", size="volume",
                         side="side"),
               "Kraken REST trades (result.PAIR: arrays of price, volume, time, side, orderType, misc, trade_id): "
               "ts=time (s), stream=pair (the result's key), price, size=volume, side (b/s: the taker's)"),
    # a capture of v1's trade and spread channels (connectors/exchange_envelopes.py makes spread arrays messages)
    ArrayShape("kraken-v1-trades-spread", ("trade", "spread"), frozenset({"pair", "side", "price", "volume", "time",
                                                                         "bid", "ask", "bidVolume", "askVolume"}),
               ColumnMap(ts="time", ts_unit=DETECT, stream_col="pair", price="price", size="volume", side="side",
                         bid="bid", ask="ask", bid_size="bidVolume", ask_size="askVolume"),
               "Kraken v1 trade and spread arrays: ts=time (s), stream=pair; trades price, size=volume, side (b/s: "
               "the taker's); spread the top of book, bid, ask, bid_size=bidVolume, ask_size=askVolume"),
    ArrayShape("kraken-v1-spread", ("spread",), frozenset({"pair", "bid", "ask", "time", "bidVolume", "askVolume"}),
               ColumnMap(ts="time", ts_unit=DETECT, kind=QUOTE, stream_col="pair", bid="bid", ask="ask",
                         bid_size="bidVolume", ask_size="askVolume"),
               "Kraken v1 spread (arrays: bid, ask, timestamp, bidVolume, askVolume): quotes of the top of book, "
               "ts=timestamp (s), stream=pair"),
    ArrayShape("kraken-v1-trades", ("trade",), frozenset({"pair", "side", "price", "volume", "time", "orderType"}),
               ColumnMap(ts="time", ts_unit=DETECT, kind=TRADE, stream_col="pair", price="price", size="volume",
                         side="side"),
               "Kraken v1 trade (arrays: price, volume, time, side, orderType, misc): ts=time (s), stream=pair, "
               "price, size=volume, side (b/s: the taker's)"),
    # Coinbase Advanced Trade (connectors/exchange_envelopes.py lifts its events' trades and tickers): its trades'
    # side is the taker's (its API's Trade schema: "Taker side of the trade"), unlike Coinbase Exchange's matches
    ArrayShape("coinbase-advanced-trades-ticker", ("market_trades", "ticker"),
               frozenset({"trade_id", "product_id", "price", "size", "side", "time", "best_bid", "best_ask"}),
               ColumnMap(ts="time", ts_unit=DETECT, stream_col="product_id", price="price", size="size", side="side",
                         bid="best_bid", ask="best_ask", bid_size="best_bid_quantity",
                         ask_size="best_ask_quantity"),
               "Coinbase Advanced Trade market_trades and ticker: ts=time (the ticker's: its message's timestamp), "
               "stream=product_id; trades price, size, side (BUY/SELL: the taker's, as Advanced Trade's API "
               "documents it, not flipped as Coinbase Exchange's maker side is); ticker quotes bid=best_bid, "
               "ask=best_ask, sizes best_bid_quantity, best_ask_quantity (its last price is the trade already read)"),
    ArrayShape("coinbase-advanced-trades", ("market_trades",),
               frozenset({"trade_id", "product_id", "price", "size", "side", "time"}),
               ColumnMap(ts="time", ts_unit=DETECT, kind=TRADE, stream_col="product_id", price="price", size="size",
                         side="side"),
               "Coinbase Advanced Trade market_trades: ts=time, stream=product_id, price, size, side (BUY/SELL: the "
               "taker's, as Advanced Trade's API documents it, not flipped as Coinbase Exchange's maker side is)"),
    ArrayShape("coinbase-advanced-ticker", ("ticker", "ticker_batch"),
               frozenset({"product_id", "best_bid", "best_ask", "time"}),
               ColumnMap(ts="time", ts_unit=DETECT, kind=QUOTE, stream_col="product_id", bid="best_bid",
                         ask="best_ask", bid_size="best_bid_quantity", ask_size="best_ask_quantity"),
               "Coinbase Advanced Trade ticker: quotes bid=best_bid, ask=best_ask, sizes best_bid_quantity, "
               "best_ask_quantity, ts=its message's timestamp, stream=product_id"),
    ArrayShape("kraken-v2-ticker", ("ticker",), frozenset({"symbol", "bid", "ask", "bid_qty", "ask_qty", "timestamp"}),
               ColumnMap(ts="timestamp", ts_unit=DETECT, kind=QUOTE, stream_col="symbol", bid="bid", ask="ask",
                         bid_size="bid_qty", ask_size="ask_qty"),
               "Kraken v2 ticker: quotes bid, ask, bid_size=bid_qty, ask_size=ask_qty, ts=timestamp, stream=symbol"),
    ArrayShape("deribit-trades", ("trades",), frozenset({"instrument_name", "direction", "amount", "price",
                                                        "timestamp"}),
               ColumnMap(ts="timestamp", ts_unit=EPOCH, kind=TRADE, stream_col="instrument_name", price="price",
                         size="amount", side="direction"),
               "Deribit trades (JSON-RPC subscription, ticks in params.data): ts=timestamp (ms), "
               "stream=instrument_name, price, size=amount, side=direction (the taker's)"),
    ArrayShape("alpaca-crypto-trades", ("trades",), frozenset({"t", "p", "s", "tks", "symbol"}),
               ColumnMap(ts="t", ts_unit=DETECT, kind=TRADE, stream_col="symbol", price="p", size="s", side="tks"),
               "Alpaca crypto trades (records under trades, keyed by symbol or beside it): ts=t (ISO, ns), "
               "stream=symbol, price=p, size=s, side=tks (B/S: the taker's)"),
    ArrayShape("alpaca-trades", ("trades",), frozenset({"t", "p", "s", "symbol"}),
               ColumnMap(ts="t", ts_unit=DETECT, kind=TRADE, stream_col="symbol", price="p", size="s"),
               "Alpaca trades (records under trades, keyed by symbol or beside it): ts=t (ISO, ns), stream=symbol, "
               "price=p, size=s (no side: Alpaca's stock trades have none)"),
    ArrayShape("alpaca-quotes", ("quotes",), frozenset({"t", "bp", "ap", "bs", "as", "symbol"}),
               ColumnMap(ts="t", ts_unit=DETECT, kind=QUOTE, stream_col="symbol", bid="bp", ask="ap", bid_size="bs",
                         ask_size="as"),
               "Alpaca quotes (records under quotes, keyed by symbol or beside it): ts=t (ISO, ns), stream=symbol, "
               "bid=bp, ask=ap, bid_size=bs, ask_size=as"),
    ArrayShape("okx-bbo", ("bbo-tbt", "books5"), frozenset({"bids[0].price", "asks[0].price", "ts", "instId"}),
               ColumnMap(**OKX_BOOK, bid="bids[0].price", ask="asks[0].price", bid_size="bids[0].size",
                         ask_size="asks[0].size"),
               "OKX bbo-tbt: quotes of the best level, bids[0]/asks[0] price and size, ts=ts (ms), stream=instId"),
    ArrayShape("okx-tickers", ("tickers",), frozenset({"bidPx", "askPx", "bidSz", "askSz", "ts", "instId"}),
               ColumnMap(**OKX_BOOK, bid="bidPx", ask="askPx", bid_size="bidSz", ask_size="askSz"),
               "OKX tickers: quotes bid=bidPx, ask=askPx, bid_size=bidSz, ask_size=askSz, ts=ts (ms), "
               "stream=instId (their last trade is not read)"),
)


def array_shape_of(path: Path, frame: pl.DataFrame, tickless: Mapping[str, int]) -> Shape | None:
    """The exchange whose messages held the ticks in arrays under `data`, by their channel and keys, else None
    (read as any table: detected). Other channels' ticks are left out by the map's keep, counted as filtered_out;
    messages without ticks (`tickless`: what they are -> how many) too; the note names both."""
    frame = frame.filter(~pl.all_horizontal(pl.all().is_null()))  # messages without ticks, lines that are no object
    channels = _counts(frame, "channel", "ticks without a channel")
    for shape in ARRAY_SHAPES:
        kept = [c for c in shape.channels if c in channels]
        if kept and shape.keys <= set(frame.columns) and (len(kept) == len(shape.channels) or not shape.every_channel):
            others = _said({k: n for k, n in channels.items() if k not in kept})
            left = "".join(f"; {what} left out, counted as filtered_out: {said}" for what, said in (
                ("other channels' ticks", others), ("messages without ticks", _said(tickless))) if said)
            note = f"{path.name}: {shape.says}; one row per tick of each message's data{left}"
            return Shape(shape.name, replace(shape.columns, keep={"channel": kept}), note, shape.repeats,
                         clocks_read=shape.clocks_read)
    return None


REST_SHAPES = (  # (name, keys, map, says): REST responses saved as they came, one JSON array of records
    ("binance-rest-trades", frozenset({"id", "price", "qty", "time", "isBuyerMaker"}),
     ColumnMap(ts="time", ts_unit=EPOCH, kind=TRADE, price="price", size="qty", side="isBuyerMaker",
               side_map=BUYER_MAKER),
     "Binance REST trades (/api/v3/trades): ts=time (ms), price, size=qty, side from isBuyerMaker (true: the buyer "
     "was the maker, so the aggressor sold)"),
    ("binance-rest-aggtrades", frozenset({"a", "p", "q", "f", "l", "T", "m"}),
     ColumnMap(ts="T", ts_unit=EPOCH, kind=TRADE, price="p", size="q", side="m", side_map=BUYER_MAKER),
     "Binance REST aggTrades (/api/v3/aggTrades): ts=T (ms), price=p, size=q, side from m (true: the aggressor "
     "sold)"),
    ("coinbase-rest-trades", frozenset({"trade_id", "side", "size", "price", "time"}), PRESETS["coinbase-trades"],
     "Coinbase Exchange REST trades (/products/{id}/trades): the coinbase-trades preset, side flipped (Coinbase's "
     "is the maker's: sell, an uptick, is a taker's buy)"),
    # bars (connectors/bar_documents.py made their rows): one trade per bar at its close, as a bar file replays
    ("binance-rest-klines", frozenset(PRESET_MAPS["binance-public-klines"]["names"]),
     ColumnMap(ts="close_time", ts_unit=EPOCH, kind=TRADE, price="close", size="volume"),
     "Binance REST klines (/api/v3/klines): each bar's 12 values named as the public klines files' columns "
     "(open_time, open, high, low, close, volume, close_time, ...)"),
    ("polygon-aggregates", frozenset({"t", "o", "h", "l", "c", TICKER}),
     ColumnMap(ts="t", ts_unit=EPOCH, kind=TRADE, stream_col=TICKER, price="c", size="v"),
     "Polygon aggregates (/v2/aggs): Polygon's short keys (t the bar's start in ms, o, h, l, c, v), stream=the "
     "response's ticker, else each bar's T (grouped daily); vw and n are not read"),
)


def rest_shape_of(path: Path, frame: pl.DataFrame) -> Shape | None:
    """The REST response a file of one JSON array holds, by its records' keys, else None (detected)."""
    for name, keys, columns, says in REST_SHAPES:
        if keys <= set(frame.columns):
            rows = "one row per bar of its results" if name == "polygon-aggregates" else \
                "one row per record of its JSON array"
            return Shape(name, columns, f"{path.name}: {says}; {rows}")
    return None


def _counts(frame: pl.DataFrame, column: str, missing: str) -> dict[str, int]:
    """A text column's values -> their counts (null: `missing`), most frequent first."""
    if column not in frame.columns or frame.schema[column] != pl.String:
        return {}
    counted = frame[column].fill_null(missing).value_counts().sort(["count", column], descending=[True, False])
    return dict(zip(counted[column].to_list(), counted["count"].to_list()))


def _said(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{value} ({n})" for value, n in counts.items())
