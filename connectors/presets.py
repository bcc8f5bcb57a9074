"""The presets: the column maps of vendors' files that flashtick knows by name (`--preset NAME`, the config's
`replay.preset`): our Binance spot capture (trades, best bid/offer), Binance's public spot and USD-M futures files
(header-less), Dukascopy quotes (and its own exports' layouts), Bitstamp's and Coinbase Exchange's trades (maker
sides, read flipped), LOBSTER message files (executions only). Each is written as the keys of a ColumnMap;
connectors/column_map.py builds and checks them as PRESETS (a map's `preset` key names its base there, so the
maps are built beside ColumnMap, not here). A new preset is one entry in PRESET_MAPS (docs/extending.md).
"""

from __future__ import annotations

from typing import Any

from connectors.map_vocabulary import DATE_FROM_NAME, EPOCH, TIME_OF_DAY
from connectors.side_maps import BITSTAMP_TYPE, BUYER_MAKER, LOBSTER_DIRECTION, MAKER_SIDE
from connectors.ticks import QUOTE, TRADE

LOBSTER_NAMES = ("time", "type", "order_id", "size", "price", "direction")
LOBSTER_EXECUTIONS = [4, 5]  # executions of a visible (4) and a hidden (5) limit order

PRESET_MAPS: dict[str, dict[str, Any]] = {
    # Binance spot capture: local_ts_ns is the collector clock, the only one both files share.
    "binance-trades": dict(ts="local_ts_ns", default_stream="BTCUSDT", kind=TRADE, price="price", size="qty",
                           side="aggressor_side"),
    "binance-bbo": dict(ts="local_ts_ns", default_stream="BTCUSDT", kind=QUOTE, bid="bid_px", ask="ask_px",
                        bid_size="bid_qty", ask_size="ask_qty"),
    # Dukascopy serves every instrument alike: the stream is the symbol the file's name holds, else its name
    "dukascopy": dict(ts="timestamp_utc", ts_unit="datetime", kind=QUOTE, bid="bid", ask="ask",
                      bid_size="bid_volume", ask_size="ask_volume"),
    # Binance's public files (data.binance.vision), spot: no header; the time is ms, us from 2025
    "binance-public-trades": dict(
        ts="time", ts_unit=EPOCH, kind=TRADE, price="price", size="qty", side="is_buyer_maker",
        side_map=BUYER_MAKER, names=("id", "price", "qty", "quote_qty", "time", "is_buyer_maker", "is_best_match")),
    "binance-public-aggtrades": dict(
        ts="transact_time", ts_unit=EPOCH, kind=TRADE, price="price", size="quantity", side="is_buyer_maker",
        side_map=BUYER_MAKER, names=("agg_trade_id", "price", "quantity", "first_trade_id", "last_trade_id",
                                     "transact_time", "is_buyer_maker", "is_best_match")),
    # Binance's USD-M futures public files (data.binance.vision/data/futures/um): no header in the older ones,
    # trades and aggTrades without spot's is_best_match; bookTicker the best bid and offer, stamped with the transaction
    # time
    "binance-futures-aggtrades": dict(
        ts="transact_time", ts_unit=EPOCH, kind=TRADE, price="price", size="quantity", side="is_buyer_maker",
        side_map=BUYER_MAKER, names=("agg_trade_id", "price", "quantity", "first_trade_id", "last_trade_id",
                                     "transact_time", "is_buyer_maker")),
    "binance-futures-trades": dict(
        ts="time", ts_unit=EPOCH, kind=TRADE, price="price", size="qty", side="is_buyer_maker",
        side_map=BUYER_MAKER, names=("id", "price", "qty", "quote_qty", "time", "is_buyer_maker")),
    "binance-futures-bookticker": dict(
        ts="transaction_time", ts_unit=EPOCH, kind=QUOTE, bid="best_bid_price", ask="best_ask_price",
        bid_size="best_bid_qty", ask_size="best_ask_qty",
        names=("update_id", "best_bid_price", "best_bid_qty", "best_ask_price", "best_ask_qty", "transaction_time",
               "event_time")),
    # Binance's public klines (bars): no header; one trade per bar at its close, stamped with its close time
    "binance-public-klines": dict(
        ts="close_time", ts_unit=EPOCH, kind=TRADE, price="close", size="volume",
        names=("open_time", "open", "high", "low", "close", "volume", "close_time", "quote_volume", "count",
               "taker_buy_volume", "taker_buy_quote_volume", "ignore")),
    # Bitstamp's public transactions (`GET /api/v2/transactions/{pair}/`): epoch seconds, `type` 0 a buy and 1 a sell
    # (the taker's side); the pair is in the request, so the stream comes from the file's name
    "bitstamp-transactions": dict(ts="date", ts_unit="s", kind=TRADE, price="price", size="amount", side="type",
                                  side_map=BITSTAMP_TYPE),
    # Coinbase Exchange REST `GET /products/{id}/trades`: `side` is the maker's. Never detected (its columns are any
    # trade file's); the stream is `product_id` when the file has one.
    "coinbase-trades": dict(ts="time", ts_unit="datetime", kind=TRADE, price="price", size="size", side="side",
                            side_map=MAKER_SIDE),
    # Coinbase Exchange websocket `match`/`last_match` messages as a table (maker_order_id, taker_order_id, ...)
    "coinbase-matches": dict(ts="time", ts_unit="datetime", kind=TRADE, stream_col="product_id",
                             price="price", size="size", side="side", side_map=MAKER_SIDE,
                             keep={"type": ["match", "last_match"]}),
    # LOBSTER message files (NASDAQ): no header, seconds after midnight New York time, prices x 10000; executions
    # only, at the resting order's opposite side. The day is the file name's (AAPL_2012-06-21_...), or `date`.
    "lobster-messages": dict(ts="time", ts_unit=TIME_OF_DAY, date=DATE_FROM_NAME, tz="America/New_York",
                             kind=TRADE, price="price", size="size", side="direction",
                             side_map=LOBSTER_DIRECTION, price_scale=10_000, names=LOBSTER_NAMES,
                             keep={"type": LOBSTER_EXECUTIONS}),
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
