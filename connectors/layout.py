"""Layout detection: which columns of a tick file are which tick fields when no column map is given.

In order (docs/replay.md): a preset whose columns (and its `detected_by`, connectors/presets.py) the file has; the
columns named as vendors name them (FIELD_NAMES, with a date and a time column read as one: `detect_columns`); for
a CSV whose first line is data, a vendor's header-less layout or a time and two numbers
(connectors/headerless_csv.py). What detection reads by has a module each: a CSV's dialect (csv_dialect.py,
number_separators.py), the names of columns beyond the tick fields (column_names.py), a time column's unit
(time_units.py) and the strftime codes of datetime text that is not ISO 8601 (datetime_text.py), the symbol and the
day a file's name holds (file_names.py). Every guess is printed as a note, so a wrong one shows at once; so is a
layout that reads but may be a vendor's whose sides mean otherwise (layout_notes.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping

import polars as pl

from connectors.bidding_zones import BIDDING_ZONE
from connectors.bloomberg_names import tick_dump_example, tick_dump_value
from connectors.column_map import PRESETS, ColumnMap
from connectors.column_names import (
    ASK_BID_NAMES,
    BAR_CLOSES,
    BASE_VOLUME,
    BUYER_MAKER_NAMES,
    CONTRACT_MONTH_NAMES,
    DATE_NAMES,
    DELIVERY_END_NAMES,
    DELIVERY_START_NAMES,
    OPTION_ROOT_NAMES,
    RIGHT_NAMES,
    SETTLEMENT_NAMES,
    SHARE_CLASS_NAMES,
    STRIKE_NAMES,
    TIME_HEADERS,
    MARKET_NAMES,
    MID_NAMES,
    PAIR_VALUE,
    PRODUCT_NAMES,
    QUOTE_ASSETS,
    TIME_OF_DAY_NAMES,
    TRANSACTION_TIME,
    TRANSACTION_UNITS,
    names_a_yield,
)
from connectors.csv_dialect import DATE_LIKE
from connectors.date_columns import clock_beside
from connectors.field_names import DATABENTO_HEADER, FIELD_NAMES, normal_name
from connectors.header_zones import HeaderZone, name_before_tail, zoned_time_column
from connectors.map_vocabulary import LOCAL_TIME_UNITS, QUOTE_FIELDS, TRADE_FIELDS, VALUE_FIELDS, joined_columns
from connectors.preset_detection import detected_preset
from connectors.presets import LOBSTER_EXECUTIONS, LOBSTER_NAMES, detected_by
from connectors.side_maps import ASK_BID, BUYER_MAKER
from connectors.time_units import day_clock_unit, detected_unit
from connectors.utc_offsets import UTC_OFFSET
from engine.quoting import quoted, quoted_list


# the names a header may write a zone or unit after (`Price (USD)`): a tick field's, a time's, a mid price's, a
# contract month's or delivery period's (Nord Pool's `Delivery Start (CET)`: review441 #7)
KNOWN_HEADERS = frozenset(TIME_HEADERS | {name for names in FIELD_NAMES.values() for name in names} | set(MID_NAMES)
                          | set(CONTRACT_MONTH_NAMES) | set(DELIVERY_END_NAMES))


class NoTickLayout(ValueError):
    """A file's columns hold no tick layout: none detected, or not the columns its map names. In an archive, a
    `.txt` member that says so is a vendor's readme or licence, skipped when the archive's other members read."""


# Bitfinex's trades (`ID,MTS,AMOUNT,PRICE`): AMOUNT is signed, negative for a sell (`signed_size`)
BITFINEX_TRADES = frozenset({"mts", "amount", "price"})


def detect_columns(path: Path, schema: Mapping[str, pl.DataType],
                   first: Callable[[str | tuple[str, ...]], Any] | None = None,
                   hints: Mapping[str, Any] | None = None) -> ColumnMap:
    """A preset whose columns the file has, else the columns named as in FIELD_NAMES (the wire layout first).

    `hints` are a refinement's columns (`Refine.keys`), taken as found.
    The time column is a date column and a time-of-day column read as one, else the first of FIELD_NAMES["ts"]
    the file has, else its only datetime column. Its unit: datetime for datetime and date columns and for text
    that is not a number (with the TIME_FORMATS code that reads it when it is not ISO 8601); for numbers (or
    numeric text), the epoch unit of their magnitude (`epoch_unit`) as `first(column)`, the first value, shows,
    except that a column named `ts` of no present-day time is ns (the wire layout). Without `first`, numbers are
    ns. The side is a side column, else a buyer-maker flag; integer prices in a Databento CSV are fixed-point 1e-9.
    """
    names = list(schema)
    if (preset := detected_preset(names)) is not None:
        return preset
    # a column of lists of lists or of records (a Parquet file's book levels) is read as no tick field, whatever
    # its name: detection reading one as a side or a contract month failed on it with polars' own words
    by_normal = _by_normal_name([name for name, dtype in schema.items() if not dtype.is_nested()])
    for name, cmap in PRESETS.items():  # a header-less preset's file with its header (Binance's newer files)
        if cmap.names is not None and detected_by(name) is not None and set(cmap.names) <= set(by_normal):
            # read as the header-less file is, on its clock: bookTicker's transaction_time, not event_time
            return match_case(replace(cmap, names=None), schema)
    if set(LOBSTER_NAMES) <= set(by_normal):
        return _lobster_named(by_normal, schema, first)
    found: dict[str, str] = {}
    for field_name, candidates in FIELD_NAMES.items():
        if column := next((by_normal[c] for c in candidates if c in by_normal), None):
            found[field_name] = column
    if not set(hints or {}) & set(QUOTE_FIELDS):  # a quote side named reads the others beside it as detected
        found = _best_quote(found, by_normal)
    datetimes = [n for n, t in schema.items() if isinstance(t, (pl.Datetime, pl.Date))]
    ts = _date_and_time(by_normal, first) or found.pop("ts", None) or _transaction_time(by_normal, schema, first) \
        or (datetimes[0] if len(datetimes) == 1 else None) \
        or (None if datetimes else _only_datetime_text(schema, first))
    found.pop("ts", None)
    ts = _date_and_clock(names, ts, first) or ts
    stream_col = found.pop("stream", None) or _market_column(by_normal, first)
    found = _settlement_of_days(found, by_normal, schema, ts, first)
    # columns a refinement names (`--columns bid=priceBid,...`, or a time column alone) count as found: the rest
    # is detected
    found |= {field: column for field, column in (hints or {}).items() if field in VALUE_FIELDS}
    stream_col = _contract_stream((hints or {}).get("stream_col", stream_col), by_normal, hints or {})
    ts = (hints or {}).get("ts", ts)
    quotes = {"bid", "ask"} <= set(found)
    if not ("price" in found or quotes):
        found |= _yes_contract_trades(by_normal) or tick_dump_value(by_normal, first)  # Kalshi's; Bloomberg's
    if not ("price" in found or quotes) and (mid := next((by_normal[c] for c in MID_NAMES if c in by_normal), None)):
        found["price"] = mid  # a mid-only feed: the price of a series of trades (layout_notes.vendor_notes says so)
    if ts is None or not ("price" in found or quotes):
        raise NoTickLayout(_no_layout(path, names, ts, found, quotes, first))
    if "price" in found and "size" not in found and ts == by_normal.get(TRANSACTION_TIME) \
            and TRANSACTION_UNITS in by_normal:
        found["size"] = by_normal[TRANSACTION_UNITS]  # Bithumb's transaction history: each trade's units
    if "price" in found and "size" not in found and (volume := _base_volume(by_normal, stream_col, first)):
        found["size"] = volume
    if "price" in found and "size" not in found and BAR_VOL in by_normal and \
            {"open", "high", "low"} <= by_normal.keys():
        found["size"] = by_normal[BAR_VOL]  # stooq's and MetaTrader's `<VOL>` beside a bar's close (review307 #9)
    if "price" not in found or "size" not in found and quotes:  # alone, a price without size is a price series
        found = {k: v for k, v in found.items() if k not in TRADE_FIELDS}
    if "bid" not in found or "ask" not in found:
        found = {k: v for k, v in found.items() if k not in QUOTE_FIELDS}
    extra = _sides_and_scale(found, by_normal, first)
    if len(joined_columns(ts)) == 1 and (clock := _day_clock(ts, by_normal, schema, first)):
        ts = clock
    unit, ts_format = detected_unit(ts, schema.get(ts), first)
    zoned = zone_in_header(ts, unit, schema.get(ts), first)
    tz = zoned[1].zone if zoned is not None else None
    zone = None if stream_col is not None else next((m[1] for n in names if (m := BIDDING_ZONE.match(n.strip()))), None)
    return ColumnMap(ts=ts, ts_unit=unit, ts_format=ts_format, tz=tz, stream_col=stream_col, stream=zone, **found,
                     **extra)


def _yes_contract_trades(by_normal: dict[str, str]) -> dict[str, str]:
    """A prediction market's trades (Kalshi's created_time,ticker,yes_price,no_price,count,taker_side): the yes
    contract's price and the contracts traded, as the docs' Kalshi map reads them; {} for any other file. `count`
    is read only here: elsewhere it is a bar's number of trades, no size."""
    if not {"yes_price", "no_price"} <= set(by_normal):
        return {}
    return {"price": by_normal["yes_price"]} | ({"size": by_normal["count"]} if "count" in by_normal else {})


def _by_normal_name(names: list[str]) -> dict[str, str]:
    """Each column by its normal name (the first of a name's spellings), and a column whose header writes its zone
    or unit after a known name (`Time (EET)`, `Price (USD)`) by that name as well."""
    by_normal: dict[str, str] = {}
    for n in names:
        by_normal.setdefault(normal_name(n), n)
    # `Time (EET)`, `Price (USD/t)`, `Last Price [EUR]`: a column whose header writes a zone or a unit after a known
    # name, found by that name (the zone is read by zone_in_header)
    for n in names:
        if (name := name_before_tail(n)) is not None and normal_name(name) in KNOWN_HEADERS:
            by_normal.setdefault(normal_name(name), n)
    return by_normal


def _contract_stream(stream_col: str | None, by_normal: Mapping[str, str], hints: Mapping[str, Any]) -> str | None:
    """The stream column, joined with what tells one contract from another (a contract month, an option's root,
    strike and right, a share class) unless a refinement names the stream column itself."""
    if TARDIS_COLUMNS <= set(by_normal) and stream_col == by_normal["symbol"]:
        return stream_col  # Tardis's symbol is the venue's instrument name (`BTC-27DEC24-40000-C`): the contract whole
    month = next((by_normal[c] for c in CONTRACT_MONTH_NAMES if c in by_normal), None)
    if stream_col is None and DATABENTO_HEADER <= set(by_normal) and "stream_col" not in hints:
        stream_col = by_normal["instrument_id"]  # an export without symbols: one stream per instrument, as DBN's
    option = [next((by_normal[c] for c in names if c in by_normal), None) for names in (STRIKE_NAMES, RIGHT_NAMES)]
    root = next((by_normal[c] for c in OPTION_ROOT_NAMES if c in by_normal), None) or stream_col
    if all(option) and root is not None and "stream_col" not in hints:
        stream_col = "+".join(c for c in (root, month, *option) if c)  # every contract of a chain its own stream
    elif stream_col is not None and month is not None and "+" not in stream_col and "stream_col" not in hints:
        stream_col = f"{stream_col}+{month}"  # CL of May and CL of June are two instruments
        end = next((by_normal[c] for c in DELIVERY_END_NAMES if c in by_normal), None)
        if end is not None and month in {by_normal.get(c) for c in DELIVERY_START_NAMES} and \
                normal_name(stream_col.split("+")[0]) not in PRODUCT_NAMES:
            # a delivery area names no period's length, as EPEX's product does: an hour and its first quarter-hour
            # start together, and only their end tells them apart (review441 #7)
            stream_col = f"{stream_col}+{end}"
    share_class = next((by_normal[c] for c in SHARE_CLASS_NAMES if c in by_normal), None)
    if stream_col is not None and share_class is not None and "+" not in stream_col \
            and "stream_col" not in hints:
        stream_col = f"{stream_col}+{share_class}"  # BRK.A and BRK.B are two instruments, 1,500 times apart
    return stream_col


def _settlement_of_days(found: dict[str, str], by_normal: Mapping[str, str], schema: Mapping[str, pl.DataType],
                        ts: str | None, first: Callable[..., Any] | None) -> dict[str, str]:
    """``found`` with a settlement column as the price where a file of days (its time a date alone: Quandl's CHRIS
    futures files, `Date,Open,High,Low,Last,Change,Settle,...`) has one beside its last or close: the settlement is
    a future's price of record, there on the days a vendor leaves Last blank (review441 #2: those days were rejected
    as missing_field). Intraday rows keep their last: a settlement beside them is the day's reference, no trade."""
    settle = next((by_normal[c] for c in SETTLEMENT_NAMES if c in by_normal), None)
    if settle is None or ts is None or "+" in ts or normal_name(found.get("price", "")) not in BAR_CLOSES:
        return found
    day = first(ts) if first is not None else None
    if schema.get(ts) == pl.Date or isinstance(day, str) and DATE_LIKE.fullmatch(day.strip()):
        return found | {"price": settle}
    return found


TARDIS_COLUMNS = frozenset({"exchange", "symbol", "timestamp", "local_timestamp"})  # Tardis.dev's CSVs' first four
BAR_VOL = "vol"  # a bar's volume under its short name: a size only beside the bar's open, high and low


def _market_column(by_normal: Mapping[str, str], first: Callable[..., Any] | None) -> str | None:
    """A `market` column whose first value is a pair (Upbit's `KRW-BTC`): the stream; a venue or an order type
    (NASDAQ, limit) named so is not."""
    market = next((by_normal[c] for c in MARKET_NAMES if c in by_normal), None)
    if market is None or first is None:
        return None
    return market if PAIR_VALUE.match(str(first(market) or "").strip()) else None


def _base_volume(by_normal: Mapping[str, str], stream_col: str | None, first: Callable[..., Any] | None) -> str | None:
    """A bar's volume in its base asset (`Volume BTC` beside `Volume USDT`): the asset its symbol's first value
    starts with (BTC/USDT), else the one column whose asset is no quote currency; None when neither tells."""
    volumes = {m[1]: column for name, column in by_normal.items() if (m := BASE_VOLUME.match(name))}
    symbol = str(first(stream_col) or "").lower() if stream_col and "+" not in stream_col and first else ""
    if base := [asset for asset in volumes if symbol.startswith(asset)]:
        return volumes[max(base, key=len)]
    base = [asset for asset in volumes if asset not in QUOTE_ASSETS]
    return volumes[base[0]] if len(base) == 1 else None


def _no_layout(path: Path, names: list[str], ts: str | None, found: Mapping[str, str], quotes: bool,
               first: Callable[..., Any] | None = None) -> str:
    """Why detection found no tick layout (no time column, or neither a price nor a bid and an ask), what it
    read so far and the column map or preset that would read the file."""
    if len(names) > 2 and all(not n or re.fullmatch(r"_duplicated_\d+", n) for n in names[1:]):
        return (f"{path}: its header names only its first column ({quoted(names[0])}), the others' names are missing: "
                "a pandas MultiIndex file with its upper header rows cut off (a yfinance download after tail -n +3?). "
                f"Replay the file as saved (yfinance's layout is read by its columns' names), or write a header line "
                f"that names each column; read by position, its columns would be a guess (yfinance writes Close, "
                f"High, Low, Open)")
    lacking = "time column" if ts is None else "price (trades) nor bid and ask (quotes)"
    seen = ", ".join(f"{k}={v}" for k, v in ({"ts": ts} | found).items() if v)
    missing = "" if ts is None else ", or only what is missing: --columns price=...,size=..."
    priced = found.get("price") or found.get("bid")  # a price beside the yield (TRACE's RPTD_PR): no conversion
    if not priced and (yields := [n for n in names if names_a_yield(n)]):  # cash Treasuries, quoted in yield
        named = "is named as a yield" if len(yields) == 1 else "are named as yields"
        missing += (f". {', '.join(map(quoted, yields))} {named}, which replay does not read as prices (a yield "
                    f"up is a price down): convert them to prices first (docs/replay.md#yield-quoted-instruments)")
    if not priced and (example := tick_dump_example(names, ts, found, first)) is not None:  # a row-type column's
        return (f"cannot detect the column layout of {path}: columns found {quoted_list(names)}; no {lacking} among "
                f"them (read so far: {seen}). Name its price column, e.g. {example}")
    return (f"cannot detect the column layout of {path}: columns found {quoted_list(names)}; no {lacking} among them"
            f"{' (read so far: ' + seen + ')' if seen else ''}. Name its columns with a column map, e.g. --columns "
            f"ts=time,price=px,size=qty,stream=symbol for trades, ts=time,bid=bp,ask=ap for quotes (the time's unit "
            f"is read from its first value; --ts-unit says otherwise){missing} "
            f"(or a preset: --preset {' / '.join(PRESETS)}; docs/replay.md)")


def _sides_and_scale(found: Mapping[str, str], by_normal: Mapping[str, str],
                     first: Callable[..., Any] | None) -> dict[str, Any]:
    """The keys a detected map takes beyond its columns: a buyer-maker flag as the side, Bitfinex's signed
    amount, a Databento CSV's fixed-point prices."""
    extra: dict[str, Any] = {}
    maker = next((by_normal[c] for c in BUYER_MAKER_NAMES if c in by_normal), None)
    if "price" in found and "side" not in found and maker is not None:
        extra = {"side": maker, "side_map": BUYER_MAKER}
    ask_bid = next((by_normal[c] for c in ASK_BID_NAMES if c in by_normal), None)
    if "price" in found and "side" not in found and not extra and ask_bid is not None and first is not None and \
            str(first(ask_bid) or "").strip().lower() in ASK_BID:
        extra = {"side": ask_bid, "side_map": ASK_BID}  # Upbit's ask_bid: the taker's order side
    if BITFINEX_TRADES <= set(by_normal) and "side" not in found and not extra:
        extra = {"signed_size": True}  # Bitfinex's AMOUNT: negative for a sell
    price = found.get("price") or found.get("bid")
    if DATABENTO_HEADER <= set(by_normal) and first is not None and re.match(r"^-?\d+$", str(first(price) or "")):
        extra["price_scale"] = 1e9
    return extra


def zone_in_header(ts: str, unit: str, dtype: pl.DataType | None,
                   first: Callable[..., Any] | None) -> tuple[str, HeaderZone] | None:
    """The column of a time whose header names a zone (`Time (EET)`), with that zone, when its times are naive
    wall-clock times; None for times that carry their own offset or count from the epoch (UTC): no zone moves them."""
    columns = joined_columns(ts)
    zoned = zoned_time_column(columns)
    if zoned is None or unit not in LOCAL_TIME_UNITS:
        return None
    if isinstance(dtype, pl.Datetime) and dtype.time_zone is not None:
        return None
    value = first(columns if len(columns) > 1 else ts) if first is not None else None
    return None if isinstance(value, str) and UTC_OFFSET.search(value.strip()) else zoned


def _best_quote(found: dict[str, str], by_normal: Mapping[str, str]) -> dict[str, str]:
    """`found` with the quote read from `best_*` columns when the file has them beside plain ones: WRDS's NBBO
    files hold the quoting venue's BID/ASK and the resulting NBBO's BEST_BID/BEST_ASK on each row, and the venue's
    alternate between exchanges (said by `vendor_notes`). Sizes are the best ones too, or none: the venue's size
    beside the NBBO's price would be another quote's."""
    best = {field: next((by_normal[c] for c in best_names(field) if c in by_normal), None) for field in QUOTE_FIELDS}
    if best["bid"] is None or best["ask"] is None or (found.get("bid"), found.get("ask")) == (best["bid"], best["ask"]):
        return found
    plain = {field: column for field, column in found.items() if field not in QUOTE_FIELDS}
    return plain | {field: column for field, column in best.items() if column is not None}


def best_names(field: str) -> list[str]:
    """The names a quote field's NBBO column goes by beside the quoting venue's: FIELD_NAMES' `best_*` ones, then
    `best_` before each of its other names, so every spelling of a side reads alike (WRDS's BEST_BID, NYSE Daily
    TAQ's Best_Bid_Price and Best_Offer_Price, their sizes Best_Bid_Size and Best_Offer_Size)."""
    names = FIELD_NAMES[field]
    listed = [name for name in names if name.startswith("best_")]
    return listed + [f"best_{name}" for name in names if not name.startswith("best_") and f"best_{name}" not in listed]


def _lobster_named(by_normal: Mapping[str, str], schema: Mapping[str, pl.DataType],
                   first: Callable[..., Any] | None) -> ColumnMap:
    """A LOBSTER message file with its columns named (a converted copy: Parquet, a CSV with a header), read as the
    lobster-messages preset reads the original: executions only, at the resting order's opposite side. A converted
    copy may already hold datetimes or prices in dollars: seconds after midnight only when the time is a number
    of seconds in a day, and prices / 10000 only when the first one is a whole number."""
    base = PRESETS["lobster-messages"]
    columns = {field: by_normal[getattr(base, field)] for field in ("ts", "price", "size", "side")}
    keep = {by_normal["type"]: LOBSTER_EXECUTIONS}
    time, price = (first(columns[f]) if first is not None else None for f in ("ts", "price"))
    try:
        seconds = float(time)
    except (TypeError, ValueError):
        seconds = math.nan
    time_of_day = not isinstance(schema.get(columns["ts"]), (pl.Datetime, pl.Date)) and 0 <= seconds < 86_400
    try:
        whole = float(price).is_integer()
    except (TypeError, ValueError):
        whole = False
    when = {} if time_of_day else dict(zip(("ts_unit", "ts_format"), detected_unit(columns["ts"],
                                                                                   schema.get(columns["ts"]), first)))
    # preset=None: a refinement (--columns on top) rebuilds from the preset's keys, which name no header
    return replace(base, names=None, keep=keep, preset=None, **columns, **when,
                   date=base.date if time_of_day else None, tz=base.tz if time_of_day else None,
                   price_scale=base.price_scale if whole else None)


def databento_book(cmap: ColumnMap, schema: Mapping[str, Any]) -> str | None:
    """"mbo" or "mbp-1" for a Databento export (CSV, Parquet) of order-book records: its record header, an
    `action` column, and order ids (MBO) or a top level mapped as the quote (MBP-1). None for anything else,
    its trades schema included (every row a trade, read as it is)."""
    names = {normal_name(n) for n in schema}
    if not DATABENTO_HEADER <= names or "action" not in names:
        return None
    return "mbo" if "order_id" in names else "mbp-1" if cmap.bid is not None else None


CLOCK_NAME = re.compile(r"^(time|ts|timestamp|time_of_day)_(ns|us|ms)$")  # a time column naming its unit


def _day_clock(ts: str, by_normal: Mapping[str, str], schema: Mapping[str, pl.DataType],
               first: Callable[..., Any] | None) -> str | None:
    """`DATE+TIME_NS` when the file has a date column and a time column (the time found, or beside a date found as
    the time, a time-of-day or `time_us`-like one) whose first value is a number of one day (`day_clock_unit`):
    each row's day is its own."""
    day = next((by_normal[c] for c in DATE_NAMES if c in by_normal), None)
    if day is None or first is None:
        return None
    clock = ts if ts != day else next((column for normal, column in by_normal.items()
                                       if normal in TIME_OF_DAY_NAMES or CLOCK_NAME.match(normal)), None)
    if clock is None or clock == day or not (schema.get(clock) is None or schema[clock].is_numeric()):
        return None
    return f"{day}+{clock}" if day_clock_unit(clock, first(clock)) else None


def _transaction_time(by_normal: Mapping[str, str], schema: Mapping[str, pl.DataType],
                      first: Callable[..., Any] | None) -> str | None:
    """Bithumb's transaction history's `transaction_date` when it holds date-times (`2024-06-03 01:00:00`); a
    column of bare dates named so is an account statement's, whose rows are no ticks of a market."""
    column = by_normal.get(TRANSACTION_TIME)
    if column is None or first is None:
        return None
    if isinstance(schema.get(column), pl.Datetime):
        return column
    return column if re.search(r"\d[T ]\d\d?:\d\d", str(first(column) or "")) else None


# a date, then a time of day: `2024-10-25 09:00:00.000`, `27.10.2024 02:00:05`, `10/25/2024 9:00`
DATE_THEN_CLOCK = re.compile(r"^(\d{4}[-./]\d\d[-./]\d\d|\d\d?[-./]\d\d?[-./]\d{2,4})[ T]\d\d?:\d\d")


def _only_datetime_text(schema: Mapping[str, pl.DataType], first: Callable[..., Any] | None) -> str | None:
    """A CSV's only text column whose first value is a date with its time of day, under a name no list holds
    (Euronext's `Trade Date Time`, a German `Zeitpunkt`), as a Parquet file's only datetime column is read
    (review440 #9: such a file was refused, no time column found)."""
    if first is None:
        return None
    try:
        found = [n for n, t in schema.items()
                 if t == pl.String and DATE_THEN_CLOCK.match(str(first(n) or "").strip())]
    except pl.exceptions.PolarsError:  # rows polars cannot read (a ragged README.csv beside the ticks): no time
        return None  # column is found by its values, and the refusal names the columns, as without this look
    return found[0] if len(found) == 1 else None


def _date_and_time(by_normal: Mapping[str, str], first: Callable[..., Any] | None) -> str | None:
    """`Date+Time` when the file has a date column and a column of times of day (`SYMBOL,DATE,TIME_M,...`)."""
    date = next((by_normal[c] for c in DATE_NAMES if c in by_normal), None)
    clock = next((by_normal[c] for c in TIME_OF_DAY_NAMES if c in by_normal), None)
    if date is None or clock is None or first is None:
        return None
    # (q's timespan of a time of day, `0D09:30:00.265336495`, is one too)
    return f"{date}+{clock}" if re.match(r"^(0D)?\d{1,2}:\d\d", str(first(clock) or "")) else None


def _date_and_clock(names: list[str], ts: str | None, first: Callable[..., Any] | None) -> str | None:
    """`DATE+CLOCK` by their values, where no time column was found or the one found holds dates alone: a date
    column and the time of day right after it, under names no list here holds (`Datum;Zeit`, `Date;Heure`);
    read as the date alone, every tick of a day fell at its midnight (review259 #5)."""
    if first is None or ts is not None and len(joined_columns(ts)) > 1:
        return None
    for date in [ts] if ts is not None else names:
        if (clock := clock_beside(names, date, first)) is not None:
            return f"{date}+{clock}"
    return None


def match_case(cmap: ColumnMap, schema: Mapping[str, pl.DataType]) -> ColumnMap:
    """The map with each column the file lacks but spells in another case (`Price` for `price`) as the file does."""
    spellings: dict[str, list[str]] = {}
    for name in schema:
        spellings.setdefault(name.strip().lower(), []).append(name)
    fixed = {}
    for field in ("ts", "stream_col", "sequence", *VALUE_FIELDS):
        name = getattr(cmap, field)
        if name is not None and name not in schema and len(found := spellings.get(name.strip().lower(), [])) == 1:
            fixed[field] = found[0]
    return replace(cmap, **fixed) if fixed else cmap
