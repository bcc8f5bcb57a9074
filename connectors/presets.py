"""The presets: the column maps of vendors' files that flashtick knows by name (`--preset NAME`, the config's
`replay.preset`). PRESET_MAPS below is the one table of them (docs/replay.md#presets describes each): each entry
is the keys of a ColumnMap, plus `detected_by`, which says whether layout detection picks the preset for a file
given no map (DETECTED_BY). connectors/column_map.py builds and checks them as PRESETS (a map's `preset` key names
its base there, so the maps are built beside ColumnMap, not here). A new preset is one entry in PRESET_MAPS
(docs/extending.md).
"""

from __future__ import annotations

from typing import Any

from connectors.map_vocabulary import DATE_FROM_NAME, EPOCH, TIME_OF_DAY
from connectors.side_maps import BITSTAMP_TYPE, BUYER_MAKER, LOBSTER_DIRECTION, MAKER_SIDE
from connectors.ticks import QUOTE, TRADE

# A preset entry's key (not a ColumnMap's) saying when layout detection picks the preset for a file given no map:
# () when the file has the preset's columns (a header-less preset's: its names, as a header or as the shape of its
# rows); a tuple of columns a file must have beside them (names that only this vendor writes); absent or None: never
# detected, only given by name. So a new preset changes no other file's detection unless it says so here
DETECTED_BY = "detected_by"
ITS_COLUMNS = ()  # detected_by: the preset's own columns suffice

LOBSTER_NAMES = ("time", "type", "order_id", "size", "price", "direction")
LOBSTER_EXECUTIONS = [4, 5]  # executions of a visible (4) and a hidden (5) limit order
ALGOSEEK_KINDS = ("TRADE", "TRADE NB", "QUOTE BID NB", "QUOTE ASK NB")  # the EventTypes algoseek-taq reads

PRESET_MAPS: dict[str, dict[str, Any]] = {
    # Binance spot capture: local_ts_ns is the collector clock, the only one both files share.
    "binance-trades": dict(ts="local_ts_ns", default_stream="BTCUSDT", kind=TRADE, price="price", size="qty",
                           side="aggressor_side", detected_by=ITS_COLUMNS),
    "binance-bbo": dict(ts="local_ts_ns", default_stream="BTCUSDT", kind=QUOTE, bid="bid_px", ask="ask_px",
                        bid_size="bid_qty", ask_size="ask_qty", detected_by=ITS_COLUMNS),
    # Dukascopy serves every instrument alike: the stream is the symbol the file's name holds, else its name
    "dukascopy": dict(ts="timestamp_utc", ts_unit="datetime", kind=QUOTE, bid="bid", ask="ask",
                      bid_size="bid_volume", ask_size="ask_volume", detected_by=ITS_COLUMNS),
    # Binance's public files (data.binance.vision), spot: no header; the time is ms, us from 2025
    "binance-public-trades": dict(
        ts="time", ts_unit=EPOCH, kind=TRADE, price="price", size="qty", side="is_buyer_maker",
        side_map=BUYER_MAKER, names=("id", "price", "qty", "quote_qty", "time", "is_buyer_maker", "is_best_match"),
        detected_by=ITS_COLUMNS),
    "binance-public-aggtrades": dict(
        ts="transact_time", ts_unit=EPOCH, kind=TRADE, price="price", size="quantity", side="is_buyer_maker",
        side_map=BUYER_MAKER, names=("agg_trade_id", "price", "quantity", "first_trade_id", "last_trade_id",
                                     "transact_time", "is_buyer_maker", "is_best_match"), detected_by=ITS_COLUMNS),
    # Binance's USD-M futures public files (data.binance.vision/data/futures/um): no header in the older ones,
    # trades and aggTrades without spot's is_best_match; bookTicker the best bid and offer, stamped with the transaction
    # time
    "binance-futures-aggtrades": dict(
        ts="transact_time", ts_unit=EPOCH, kind=TRADE, price="price", size="quantity", side="is_buyer_maker",
        side_map=BUYER_MAKER, names=("agg_trade_id", "price", "quantity", "first_trade_id", "last_trade_id",
                                     "transact_time", "is_buyer_maker"), detected_by=ITS_COLUMNS),
    "binance-futures-trades": dict(
        ts="time", ts_unit=EPOCH, kind=TRADE, price="price", size="qty", side="is_buyer_maker",
        side_map=BUYER_MAKER, names=("id", "price", "qty", "quote_qty", "time", "is_buyer_maker"),
        detected_by=ITS_COLUMNS),
    "binance-futures-bookticker": dict(
        ts="transaction_time", ts_unit=EPOCH, kind=QUOTE, bid="best_bid_price", ask="best_ask_price",
        bid_size="best_bid_qty", ask_size="best_ask_qty",
        names=("update_id", "best_bid_price", "best_bid_qty", "best_ask_price", "best_ask_qty", "transaction_time",
               "event_time"), detected_by=ITS_COLUMNS),
    # Binance's public klines (bars): no header; one trade per bar at its close, stamped with its close time
    "binance-public-klines": dict(
        ts="close_time", ts_unit=EPOCH, kind=TRADE, price="close", size="volume",
        names=("open_time", "open", "high", "low", "close", "volume", "close_time", "quote_volume", "count",
               "taker_buy_volume", "taker_buy_quote_volume", "ignore"), detected_by=ITS_COLUMNS),
    # Bitstamp's public transactions (`GET /api/v2/transactions/{pair}/`): epoch seconds, `type` 0 a buy and 1 a sell
    # (the taker's side); the pair is in the request, so the stream comes from the file's name
    "bitstamp-transactions": dict(ts="date", ts_unit="s", kind=TRADE, price="price", size="amount", side="type",
                                  side_map=BITSTAMP_TYPE, detected_by=("tid",)),  # Bitstamp's own name
    # Coinbase Exchange REST `GET /products/{id}/trades`: `side` is the maker's. Never detected (its columns are any
    # trade file's: no detected_by, flipping their sides must not be a guess); the stream is `product_id` when the
    # file has one.
    "coinbase-trades": dict(ts="time", ts_unit="datetime", kind=TRADE, price="price", size="size", side="side",
                            side_map=MAKER_SIDE),
    # Coinbase Exchange websocket `match`/`last_match` messages as a table (maker_order_id, taker_order_id, ...)
    "coinbase-matches": dict(ts="time", ts_unit="datetime", kind=TRADE, stream_col="product_id",
                             price="price", size="size", side="side", side_map=MAKER_SIDE,
                             keep={"type": ["match", "last_match"]},
                             detected_by=("maker_order_id", "taker_order_id")),  # only Coinbase's match messages
    # LOBSTER message files (NASDAQ): no header, seconds after midnight New York time, prices x 10000; executions
    # only, at the resting order's opposite side. The day is the file name's (AAPL_2012-06-21_...), or `date`. Never
    # detected: the refusal of a header-less file names it when the rows look like LOBSTER's
    "lobster-messages": dict(ts="time", ts_unit=TIME_OF_DAY, date=DATE_FROM_NAME, tz="America/New_York",
                             kind=TRADE, price="price", size="size", side="direction",
                             side_map=LOBSTER_DIRECTION, price_scale=10_000, names=LOBSTER_NAMES,
                             keep={"type": LOBSTER_EXECUTIONS}),
    # Algoseek's US equity TAQ (one file per ticker and day): Date 20240102, Timestamp the New York time of day,
    # EventType the row's kind, each row one field in Price and Quantity. The top of book is the national best:
    # QUOTE BID NB / QUOTE ASK NB rows; a venue's own QUOTE BID / QUOTE ASK that did not change it are left out
    # (filtered_out), as are kinds of rows that are neither (TRADE CANCELLED, ...). Detected by its whole header
    "algoseek-taq": dict(ts="Date+Timestamp", ts_format="%Y%m%d %H:%M:%S%.f", tz="America/New_York",
                         stream_col="Ticker", price="Price", size="Quantity", quote_sides="EventType",
                         keep={"EventType": list(ALGOSEEK_KINDS)}, detected_by=("EventType", "Exchange", "Conditions")),
}
# A preset's other layouts of the same vendor's files, read when a file lacks the preset's own columns
PRESET_VARIANT_MAPS: dict[str, tuple[dict[str, Any], ...]] = {
    # Dukascopy's own tick export (its historical data feed's CSV): `Gmt time` as 30.10.2026 21:50:00.142, ask first
    "dukascopy": (dict(ts="Gmt time", ts_unit="datetime", ts_format="%d.%m.%Y %H:%M:%S%.f",
                       kind=QUOTE, bid="Bid", ask="Ask", bid_size="BidVolume",
                       ask_size="AskVolume"),
                  # its export in local time: `Local time` as 04.02.2019 09:00:00.071 GMT+0100, read at that offset
                  dict(ts="Local time", ts_unit="datetime", ts_format="%d.%m.%Y %H:%M:%S%.f GMT%z",
                       kind=QUOTE, bid="Bid", ask="Ask", bid_size="BidVolume",
                       ask_size="AskVolume")),
}


def preset_keys(spec: dict[str, Any]) -> dict[str, Any]:
    """A PRESET_MAPS entry's ColumnMap keys (without `detected_by`)."""
    return {key: value for key, value in spec.items() if key != DETECTED_BY}


def detected_by(name: str) -> frozenset[str] | None:
    """The columns a file must have, beside the preset's own, for layout detection to pick preset `name`; None:
    never detected."""
    sign = PRESET_MAPS[name].get(DETECTED_BY)
    return None if sign is None else frozenset(sign)
