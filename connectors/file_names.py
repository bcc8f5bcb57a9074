"""What a tick file's name (or its folder's) says when its columns do not: the instrument it holds
(`ETHUSDT-trades-2024-01-02.csv`, `binance-ethusdt-spot/`, `AAPL_...`: `symbol_in_name`), hence the stream a map
that names none reads into (`stream_of`), and a NinjaTrader export of one side of the book, which is not read
(`one_side_export`). Every guess is said in a note. The day a name holds is connectors/name_dates.py's.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import unquote

from connectors.bar_file_names import bar_export_symbol
from connectors.bloomberg_names import YELLOW_KEY
from connectors.column_map import ColumnMap
from connectors.cautions import Caution
from connectors.day_folders import (COPY_MARK, DATA_KIND_FOLDERS, date_name, is_day_folder, is_kind_folder,
                                    named_folder, numeric_code, paths_beside)
from connectors.field_names import FIELD_NAMES, normal_name
from connectors.file_suffixes import file_stem
from connectors.stream_names import dashed_name
from connectors.venue_instruments import venue_instrument, without_venue
from engine.quoting import quoted


# Symbols in file and folder names: FX pairs of two currencies, crypto pairs against a quote asset, tickers
CURRENCIES = ("USD|EUR|JPY|GBP|CHF|AUD|CAD|NZD|SEK|NOK|DKK|PLN|HUF|CZK|TRY|ZAR|MXN|SGD|HKD|CNH|CNY|INR|RUB|XAU|XAG|"
              "ILS|KRW|BRL|THB")
PAIR = re.compile(rf"^(({CURRENCIES})({CURRENCIES})|[A-Z0-9]{{3,8}}(USDT|USDC|BUSD|FDUSD|TUSD|USD|BTC|ETH|BNB))$",
                  re.IGNORECASE)
# coins and currencies a name may write in lower case beside words of what its data is (`delta_btc/`, `ticks-sol/`)
ASSETS = (f"{CURRENCIES}|BTC|XBT|ETH|SOL|XRP|ADA|DOGE|DOT|AVAX|LTC|LINK|TRX|MATIC|POL|BNB|BCH|ATOM|XLM|UNI|SHIB|TON|"
          "NEAR|APT|ARB|OP|SUI|PEPE|FIL|ETC|XMR|AAVE|USDT|USDC")
TICKER = re.compile(r"^[A-Z][A-Z0-9]{0,5}$")  # in capitals in the name: AAPL, ESM4
NOT_TICKERS = {"DAT", "ASCII", "CSV", "TXT", "T", "M1", "H1", "D1", "TICK", "TICKS", "BID", "ASK", "GMT", "UTC",
               "EST", "ET", "BBO", "TAQ", "NBBO", "L1", "L2", "MBO", "MBP", "OHLC", "OHLCV", "UM", "CM", "SPOT",
               # what a file holds, in capitals (Interactive Brokers' AAPL_TRADES_20240102.csv, AAPL_BID_ASK_...)
               "TRADE", "TRADES", "QUOTE", "QUOTES", "LAST", "MIDPOINT", "BIDASK", "DATA", "TICKDATA", "HIST", "RAW",
               "ALL", "RTH", "EOD", "FULL", "EQUITY", "BBG"}
# Words that say what a file or folder holds, or how it was made, never an instrument: beside a symbol
# (`delta_btc/`, `bars_eth/`, `ticks-sol/`, `btc_delta/`) they were read as its base (`DELTA-BTC`, `BARS-ETH`),
# so they are left out of a name before its symbol is looked for (fix302 #5)
DATA_WORDS = DATA_KIND_FOLDERS | {
    "delta", "deltas", "bar", "bars", "candle", "candles", "kline", "klines", "ohlc", "ohlcv", "data", "dataset",
    "raw", "clean", "cleaned", "processed", "parquet", "csv", "lake", "table", "tables", "hist", "history",
    "historical", "archive", "export", "exports", "dump", "dumps", "sample", "samples", "daily", "intraday",
    "minute", "minutes", "feed", "feeds", "capture", "captures", "files", "level1", "level2", "tape"}
# Exchange codes written beside a numeric stock code (Tokyo's 7203, Hong Kong's 0700, Korea's 005930): Yahoo's
# suffixes (7203.T, 0700.HK, 005930.KS, 2330.TW, 600519.SS), Bloomberg's (7203 JT Equity, 0700 HK, 2330 TT) and,
# before the code, Google's (TYO_7203, HKG_0700); China's vendors' (Wind's, Tushare's 600519.SH, 830799.BJ; JoinQuant's
# and RiceQuant's 600519.XSHG, 000001.XSHE; Futu's SH.600519). A code with one of these is the instrument: the
# exchange code alone, all letters, would read as a ticker, and every stock of an exchange would be one stream
# (review433 #13: Wind's 600519.SH.csv, 601318.SH.csv, ... were one stream SH). A list, not any letters, as a year
# beside a root (2024_ES) is no stock code.
NUMERIC_CODE_EXCHANGES = {"T", "JT", "JP", "HK", "KS", "KQ", "TW", "TWO", "TT", "SS", "SZ", "SH", "BJ", "XSHG", "XSHE",
                          "CH", "C1", "C2", "SI", "SP", "KL", "MK", "BK", "TB", "JK", "IJ", "SR", "AB", "TYO", "HKG",
                          "KRX", "TPE", "SHA", "SHE", "SGX"}
# Exchanges' folders, in any case (`hk/`; a one-letter `t` is too often no exchange): besides the codes above, ISO
# 10383 MICs and the exchanges' own names. In one, a file of 3 to 6 digits is a stock code even in a date's shape
# (HK/2020.csv is ANTA Sports)
EXCHANGE_FOLDERS = NUMERIC_CODE_EXCHANGES | {
    "XHKG", "XTKS", "XJPX", "XOSE", "XSHG", "XSHE", "XKRX", "XKOS", "XTAI", "XSES", "XBOM", "XNSE", "XKLS", "XBKK",
    "XIDX", "XSAU", "HKEX", "SEHK", "TSE", "JPX", "OSE", "SSE", "SZSE", "KOSPI", "KOSDAQ", "TWSE", "TPEX", "NSE",
    "BSE", "BURSA", "TADAWUL", "TOKYO"}
# A data lake's part files (Spark and Databricks' `part-00000-<uuid>-c000.snappy.parquet`, pyarrow's and polars'
# `part-0.parquet`, Iceberg's `00000-0-<uuid>-00001.parquet`): the writer's numbering, never an instrument. Read as
# names, each part of one table was a stream of its own, and parts of one number in two day partitions one stream
# (review284, finding 1)
LAKE_PART = re.compile(r"^(part-\d+([-_.].*)?|\d{5}-\d+-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}-\d{5}.*)$",
                       re.IGNORECASE)
# A Bloomberg security as a file's name (`VOD LN Equity`, `ESZ4 Index`, `EURUSD Curncy`, `TY1 Comdty`): the
# security without its yellow key, whichever key it is (before review291 #9 only some lost it: `7203 JT`, `ESZ4`,
# `EURUSD`, but `VOD LN Equity`, whose two capitals' tokens read as two tickers)
# (connectors/bloomberg_names.py: a ticker column's cells and a BDH title block lose it alike)
NUMERIC_CODE = re.compile(r"(?<![A-Za-z0-9])(?:\d{3,6}[-_.\s]+(?P<after>[A-Z]{1,4}\d?)|(?P<before>[A-Z]{2,3})"
                          r"[-_.\s]+\d{3,6})(?![A-Za-z0-9])")


def symbol_in_name(path: Path) -> tuple[str, str] | None:
    """(symbol, where) when the file's name, else its folder's, names one instrument: a pair (`ETHUSDT-trades-
    2024-01-02.csv`, `binance-ethusdt-spot/`, `DAT_ASCII_EURUSD_T_202401.csv`) or one ticker in capitals
    (`AAPL_2012-06-21_..._message_1.csv`). None when neither does, or does not clearly."""
    if ninja := re.match(r"^([A-Z0-9]{1,6} \d\d-\d\d)\.(Last|Bid|Ask)$", file_stem(path)):
        return ninja[1], f"file name {quoted(file_stem(path))}"  # NinjaTrader's `ES 03-24.Last.txt`: the contract
    if bar_export := bar_export_symbol(file_stem(path)):  # TradingView's, stooq's, MT4's: the vendor's words left out
        return bar_export
    # the folder as resolved: `trades.csv` given inside binance-btcusdt-spot/ is in that folder too; a day's
    # folder (BTCUSDT/2024-08-08/) names no instrument: the one above it may
    folder = named_folder(path)
    if partition := hive_instrument(path):
        return partition
    if code := _stock_code(path, folder):
        return code
    if security := YELLOW_KEY.match(file_stem(path)):  # `VOD LN Equity.csv`, `ESZ4 Index.csv`: each key alike
        return security[1], f"file name {quoted(file_stem(path))}"
    folder = stream_folder(path) or folder  # (past `data/`, `raw/`: BTCUSDT/data/trades.csv is BTCUSDT's)
    for name, where in ((file_stem(path), "file name"), (folder.name if folder else "", "folder name")):
        if where == "file name" and is_lake_part(path):
            continue
        if where == "folder name" and re.fullmatch(r"[0-9]{4,6}", name):  # named, so no day: 0700/2024-05-01/
            return name, f"folder name {quoted(name)}, a stock code"
        beside = (file_stem(p) if where == "file name" else p.name
                  for p in paths_beside(path.resolve() if where == "file name" else folder))
        if venue := venue_instrument(name, beside):  # BTC-PERPETUAL, BTC-USDT-SWAP: the contract, not its coins alone
            left = [part for part in name.split(venue.name) if part.strip("-_. ")]
            rest = f", {' and '.join(map(quoted, left))} left out" if left else ""
            return venue.name, f"{where} {quoted(name)}: the {venue.kind}'s name{rest}"
        # Bitfinex's tBTCUSD names the pair BTCUSD; a Hive partition's `symbol=BTCUSDT` its value
        tokens = [t[1:] if re.match(r"^t[A-Z0-9]{6,}$", t) and PAIR.match(t[1:]) else t
                  for t in without_venue(re.split(r"[-_.=\s]+", name)) if t]
        words = [t for t in tokens if t.lower() in DATA_WORDS]
        tokens = [t for t in tokens if t.lower() not in DATA_WORDS]
        if words and (symbol := _lone_symbol(tokens)):  # `ticks-sol`: the one token beside the words is the symbol
            return symbol, f"{where} {quoted(name)} ({' and '.join(map(quoted, words))} left out: what the data is)"
        if contract := _crypto_contract(tokens):
            return contract, f"{where} {quoted(name)}"
        pairs = {t.upper() for t in tokens if PAIR.match(t)}
        # a pair written as two names (CoinAPI's COINBASE_SPOT_BTC_USD_..., EUR_USD): BTC-USD, as Coinbase names it
        split = [(a, b) for a, b in zip(tokens, tokens[1:])
                 if a.isalpha() and b.isalpha() and len(a) <= 5 and len(b) <= 5 and PAIR.match(a + b)
                 and a.upper() not in NOT_TICKERS]
        pairs |= {f"{a.upper()}-{b.upper()}" for a, b in split}
        halves = {t for pair in split for t in pair}
        coded = {m[0]: exchange for m in NUMERIC_CODE.finditer(name)
                 if (exchange := m["after"] or m["before"]) in NUMERIC_CODE_EXCHANGES}
        tickers = {t for t in tokens if (TICKER.match(t) or _caseless_name(t)) and t not in NOT_TICKERS
                   and t not in halves}
        found = pairs or (tickers - set(coded.values())) | set(coded)
        if len(found) == 1:
            return found.pop(), f"{where} {quoted(name)}"
        if found:
            return None
    return None


def is_lake_part(path: Path) -> bool:
    """Whether a file is a data lake's part file (`part-00000-<uuid>-c000.snappy.parquet`), whose name is the
    writer's numbering: its stream is its table's (a partition's value, a symbol column, the table folder's name)."""
    return LAKE_PART.match(file_stem(path)) is not None


def hive_instrument(path: Path) -> tuple[str, str] | None:
    """(value, where) when a folder up the file's path is a Hive partition of the instrument (`symbol=0700/`,
    `ticker=AAPL/`, `instrument=ES.c.0`, keyed by a name FIELD_NAMES gives the stream column): its value is the
    stream whatever its shape. A data lake's files are `part-0.parquet`, and its partitions are what name them:
    read by their tokens, `symbol=0700` named no stream and every code's files were one stream `part-0`."""
    for folder in path.resolve().parents:
        key, is_partition, value = folder.name.partition("=")
        if is_partition and value and normal_name(key) in FIELD_NAMES["stream"]:
            # Hive and Spark escape `/ : = % #` in a value (`symbol=BTC%2FUSD`): the instrument is the value unescaped,
            # as a symbol column writes it (review284 #3: the lake's `BTC%2FUSD` and the CSV's `BTC-USD` were two)
            # and '/' -> '-' as in a symbol column's names (no stream name has a '/': answer topics use it)
            name = dashed_name(unquote(value))
            said = f", its value unescaped ({value} is {unquote(value)})" if name != value else ""
            return name, f"folder name {quoted(folder.name)}, a partition by {key}{said}"
    return None


def _stock_code(path: Path, folder: Path | None) -> tuple[str, str] | None:
    """(code, where) when the file's name is a numeric stock code (`0700.csv`, `7203.csv`, `600519.csv`), whatever
    folder holds it: in an exchange's folder (`HK/`, `hk/`, `XHKG/`, `TSE/`) any 3 to 6 digits, elsewhere digits in
    no date's shape (day_folders.numeric_code). Said here, not left to the file name's fallback, which a preset's
    layout (a capture's trades.csv) takes from the folder: `hk/0700.csv` and `hk/0005.csv` replayed as one stream
    `hk`, or with --preset as BTCUSDT (review 174, finding 1). A crypto or FX pair's folder (`BTCUSDT/001.csv`) holds
    no stock codes: its numbered files are parts or days of that pair."""
    stem = file_stem(path)
    if not re.fullmatch(r"[0-9]{3,6}", stem):
        return None
    tokens = set(re.split(r"[-_.=\s]+", folder.name)) if folder else set()
    if exchanges := (tokens | {t.upper() for t in tokens if len(t) > 1}) & EXCHANGE_FOLDERS:
        return stem, f"file name {quoted(stem)} in exchange {min(exchanges)}'s folder"
    if folder and (venue_instrument(folder.name) or any(PAIR.match(t) for t in tokens)):
        return None
    if numeric_code(stem, (file_stem(p) for p in paths_beside(path.resolve()))):
        return stem, f"file name {quoted(stem)}, a numeric stock code"
    return None


# NinjaTrader's exports of one side of the book: `ES 03-26.Bid.txt`, `ES 03-26.Ask.txt` (time;price;volume)
NINJATRADER_SIDE = re.compile(r"\.(Bid|Ask)\.txt$")


def one_side_export(path: Path) -> str | None:
    """Why a NinjaTrader export of one side of the book (`ES 03-26.Bid.txt`, HistData's `DAT_NT_EURUSD_T_BID_...`)
    is not read, else None: its rows are best bids (or asks) alone, which detection would read as trades, and a
    quote has both sides."""
    if side := NINJATRADER_SIDE.search(path.name):
        which, zone = side[1].lower(), ""
        last = path.name[: side.start()] + ".Last.txt"
        instead = f"{quoted(last)} instead, whose rows carry the bid and ask each trade met"
    elif (histdata := HISTDATA_NAME.match(path.name)) and histdata["frame"].upper() in ("T_BID", "T_ASK"):
        which, pair, month = histdata["frame"][2:].lower(), histdata["pair"], f"{histdata['date']}MM"[:6]
        instead = (f"HistData's DAT_ASCII_{pair}_T_{month}.csv instead, whose rows carry both sides, or its "
                   f"DAT_NT_{pair}_T_LAST_... file of last prices")
        zone = f", with --tz {HISTDATA_ZONE}: HistData writes its times in EST all year"
    else:
        return None
    return (f"{path}: a NinjaTrader export of the best {which} alone (time;price;volume rows, as its "
            f"name says): no trades, and one side of the book is no quote the engine takes (a quote has both "
            f"sides). Replay {instead} (a full column map, --columns ts=...,price=..., reads the file as what it "
            f"names{zone})")


# HistData's exports (histdata.com/?p=21): DAT_<platform>_<PAIR>_<frame>_<YYYY or YYYYMM>, the platform ASCII, MT
# (MetaTrader), NT (NinjaTrader) or MS (MetaStock); the frame M1 (minute bars), T (ASCII's ticks: bid, ask) or
# NinjaTrader's T_LAST, T_BID, T_ASK (one price a row). HistData writes every one in EST all year, no summer time
HISTDATA_NAME = re.compile(r"^DAT_(?P<platform>ASCII|MT|NT|MS)_(?P<pair>[A-Z0-9]+)_"
                           r"(?P<frame>M1|T_LAST|T_BID|T_ASK|T)_(?P<date>\d{4,})", re.IGNORECASE)
HISTDATA_ZONE = "Etc/GMT+5"


def histdata_frame(path: Path) -> str | None:
    """The frame of a HistData export by its name (`DAT_MS_EURUSD_M1_2024.csv`: "M1"; "T", "T_LAST", ...), else
    None: the one rule that tells HistData's files, whose times are all in HISTDATA_ZONE."""
    return found["frame"].upper() if (found := HISTDATA_NAME.match(path.name)) else None


def _caseless_name(token: str) -> bool:
    """Whether a name's token is an instrument's name in a script without capitals (Japanese `トヨタ自動車`, Chinese
    `贵州茅台`, Korean `삼성전자`): read as a ticker in capitals is, so that the date beside it (`トヨタ自動車_20240405`)
    is no part of the stream, as `TOYOTA_20240405`'s is not (review375 #4: each day was a stream of its own)."""
    return 0 < len(token) <= CASELESS_LETTERS and not token.isascii() and any(c.isalpha() for c in token) and \
        all(c.isdigit() or c.isalpha() and c.upper() == c.lower() for c in token)


CASELESS_LETTERS = 16  # a company's name in such a script: 2 to 10 characters (`トヨタ自動車`, `三菱UFJ` is mixed)


def _lone_symbol(tokens: list[str]) -> str | None:
    """The symbol of a name that held, besides words of what its data is, one coin or currency in any case (`btc`,
    `Sol`), in capitals; None otherwise: a date, several tokens, or a word of lower case that names no asset
    (`fills_lake/`), which a ticker in capitals (`quotes_AAPL`) is found as anyway."""
    if len(tokens) != 1 or not re.fullmatch(ASSETS, tokens[0], re.IGNORECASE):
        return None
    return tokens[0].upper()


def _crypto_contract(tokens: list[str]) -> str | None:
    """A crypto future as its exchange names it, from a pair and the token after it: Binance's BTCUSD_PERP and
    BTCUSDT_240329 (a delivery date, YYMMDD), so a perpetual and a quarterly are not one stream."""
    for pair, after in zip(tokens, tokens[1:]):
        if not PAIR.match(pair) or re.match(rf"^({CURRENCIES})({CURRENCIES})$", pair, re.IGNORECASE):
            continue  # FX pairs (EURUSD_202401...) take no contract suffix
        dated = re.match(r"^\d\d(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])$", after)
        if after.upper() == "PERP" or dated:
            return f"{pair.upper()}_{after.upper()}"
    return None


def stream_of(path: Path, cmap: ColumnMap, schema: Mapping[str, Any],
              detected: bool = False) -> tuple[ColumnMap, list[str]]:
    """A map that names no stream takes, for a preset, the file's symbol column; else the symbol the file's (or
    its folder's) name holds; else, for a preset given, its default stream; for a preset's layout `detected`, the
    folder's name (a detected file of ETHUSDT trades was named after the preset's BTCUSDT); for a file named by a
    date alone, its folder's name as written (`aapl/20240301.parquet` is `aapl`); else the file name. Notes say
    which."""
    if cmap.stream is not None or cmap.stream_col is not None:
        return cmap, []
    if cmap.preset is not None or cmap.default_stream is not None:
        normal = {normal_name(n): n for n in schema}
        if column := next((normal[c] for c in FIELD_NAMES["stream"] if c in normal), None):
            return replace(cmap, stream_col=column), [f"{path.name}: streams from column {quoted(column)}"]
    if (found := symbol_in_name(path)) is not None:
        symbol, where = found
        note = [] if symbol == file_stem(path) else [stream_from_name_note(path, symbol, where)]
        return replace(cmap, stream=symbol), note
    if (cmap.default_stream is not None or cmap.preset is not None) and detected:
        if folder_stream(path) == file_stem(path) and dated_stem(path):  # no folder names it: refused
            return _dated_file_stream(path, cmap)
        return replace(cmap, stream=folder_stream(path)), [_folder_note(path)]
    # `aapl/20240301.parquet`, `BRK.B/2024-03-01.csv.gz`: a day's file of its folder's instrument (a preset's
    # default stream only where no folder names one: `data/2024-03-01.csv`)
    if dated_stem(path) and (cmap.default_stream is None or stream_folder(path) is not None):
        return _dated_file_stream(path, cmap)
    if cmap.default_stream is not None:
        given = f"--preset {cmap.preset}'s default" if cmap.preset else "the map's default_stream"
        return cmap, [f"{path.name}: stream {cmap.default_stream}, {given}: neither a symbol column nor the file's "
                      f"name names one (--columns stream_name=NAME to name it)"]
    if cmap.preset is not None:  # a vendor's export saved under a name of one's own (ticks_export.csv): said
        return replace(cmap, stream=file_stem(path)), [
            f"{path.name}: stream {file_stem(path)}, the file's name: neither a symbol column nor the file's name "
            f"names an instrument (--columns stream_name=NAME to name it, e.g. stream_name=USDJPY)"]
    if is_lake_part(path):  # the parts of one table are one dataset, so one stream: the table folder's name
        top = named_folder(path)  # (an Iceberg table's parts are in its data/, beside its metadata/)
        iceberg = top is not None and top.name == "data" and (top.parent / "metadata").is_dir()
        folder = top.parent.name if iceberg else folder_stream(path)
        return replace(cmap, stream=folder), [
            f"{path.name}: stream {folder}, the name of its table's folder: a data lake's part file, whose name is "
            f"the writer's numbering, not an instrument; the parts of one table are one stream (--columns "
            f"stream_name=NAME names it, NAME the instrument's symbol)"]
    return replace(cmap, stream=file_stem(path)), []


def stream_from_name_note(path: Path, symbol: str, where: str) -> str:
    """The note of a stream named by a file's or folder's name (`symbol_in_name`'s symbol and where)."""
    return f"{path.name}: stream {symbol}, from the {where} (--columns stream_name=NAME to name it otherwise)"


def dated_stem(path: Path) -> bool:
    """Whether a file's name, past words of what its data is (`trades_20240301`), is a date alone (day_folders'
    `date_name`): it names a day, so never the stream."""
    tokens = [t for t in re.split(r"[-_\s]+", COPY_MARK.sub("", file_stem(path))) if t and t.lower() not in DATA_WORDS]
    return bool(tokens) and date_name("-".join(tokens))


def _dated_file_stream(path: Path, cmap: ColumnMap) -> tuple[ColumnMap, list[str]]:
    """A file named by its day and nothing else (`aapl/20240301.parquet`, `BRK.B/2024-03-01.csv.gz`), whose
    folder's name is no symbol `symbol_in_name` knows: its stream is that folder's name as written (`aapl`, `BRK.B`,
    `brk-b`), shared by every day of it. Named by the date, every instrument of a day was one stream and each day a
    new one (review382 #1). With no such folder (`~/ticks/20240301.csv`: past words of what data is, only the home
    folder), its own folder's name, said to be for want of one; a ValueError when that is a date too."""
    folder = stream_folder(path)
    wanting = folder is None
    if wanting:  # (never the home folder's name: a person's, not an instrument's)
        folder = path.resolve().parent
    name = folder.name.strip().lstrip("_").strip()
    if not name or not name.isprintable() or date_name(name) or is_day_folder(name):
        raise ValueError(f"{path}: its name is a date, which names a day, not an instrument, and no folder above it "
                         f"names one either: read by its name, every instrument of a day would be one stream, and "
                         f"each day a new one. Give the stream (--columns stream_name=NAME, or a replay list entry "
                         f"per instrument), or keep each instrument's days in a folder named after it "
                         f"(AAPL/{path.name})")
    if wanting:
        return replace(cmap, stream=name[:64]), [Caution(
            f"{path.name}: stream {name[:64]}, for want of a name: the file's name is a date, which names a day, "
            f"not an instrument, and no folder up its path names one (its folder {quoted(folder.name)} says what the "
            f"data is); give the stream, --columns stream_name=NAME (AAPL), or keep each instrument's days in a "
            f"folder named after it (AAPL/{path.name})")]
    return replace(cmap, stream=name[:64]), [
        f"{path.name}: stream {name[:64]}, from the folder name {quoted(folder.name)}: the file's name is a date, "
        f"which names a day, not an instrument; the folder's name is kept as written (--columns stream_name=NAME "
        f"to name it otherwise)"]


def folder_stream(path: Path) -> str:
    """The stream of a file whose layout (a capture's trades.csv beside its bbo.parquet) names no instrument: the
    name of its `stream_folder`, which the files of one folder share (and, above day folders, `capture/2024-08-08/`,
    the files of every day), as a stream name may be (no leading '_', no space at its ends); with none, its own
    folder's (`/data/`: `data`, for want of a name); the file name when no such name is left."""
    folder = stream_folder(path) or named_folder(path)
    name = folder.name.strip().lstrip("_").strip() if folder else ""
    return name[:64] if name and name.isprintable() else file_stem(path)


def stream_folder(path: Path) -> Path | None:
    """The folder whose name names the stream of a file nothing else names: the first up its path that is neither a
    day's, nor a kind of data's, nor one named by words of what data is alone (`data/`, `raw_data/`, `history/`:
    docs/replay.md leaves them out of a name, review321 #1: `data/` named the stream `data`). Passing such a folder
    stops at the user's home folder and at a folder under the root (`/tmp/`, `/mnt/`): a person's or the machine's
    name, never an instrument's; None then."""
    folder = named_folder(path)
    skipped = False
    while folder is not None and _data_words_only(folder.name):
        folder, skipped = named_folder(folder), True
    if folder is None or (skipped and (folder == Path.home().resolve() or folder.parent == Path(folder.anchor))):
        return None
    return folder


def _data_words_only(name: str) -> bool:
    """Whether a folder's name is words of what data is alone (DATA_WORDS: `data`, `raw_data`, `tick-history`)."""
    tokens = [t for t in re.split(r"[-_.=\s]+", name.lower()) if t]
    return bool(tokens) and all(t in DATA_WORDS for t in tokens)


def _folder_note(path: Path) -> str:
    """The note on a stream named by its folder (`folder_stream`): which folder, the ones passed over, and, when no
    folder names one, that nothing does (review321 #1)."""
    folder, stream = stream_folder(path), folder_stream(path)
    how = "--columns stream_name=NAME names it, NAME the instrument's symbol"
    if folder is None:
        return (f"{path.name}: stream {stream}, for want of a name: no symbol column, and nothing in its path names an "
                f"instrument (its folder's name says what the data is, and the folders above are the machine's or "
                f"yours); the files of one folder are one stream ({how}, e.g. stream_name=BTCUSDT)")
    days = path.resolve().parent.relative_to(folder).as_posix()
    passed = [part for part in Path(days).parts if days != "."]
    kinds = ("day or data-kind" if any(is_kind_folder(p) or _data_words_only(p) for p in passed) else "day")
    above = "" if not passed else f" above the {kinds} folder(s) {quoted(days)}"
    own = named_folder(path)  # (passed over since 0.2.0: an upgrade's renamed topics are told, review321 #1)
    before = (f"; a flashtick before 0.2.0 named it {own.name} or the preset's default: CHANGELOG.md"
              if own is not None and own != folder and _data_words_only(own.name) else "")
    return (f"{path.name}: stream {stream}, the name of its folder{above}: no symbol column, and neither the "
            f"file's name nor its folder's names an instrument (the files of one folder are one stream, its days' "
            f"folders' files too; {how}{before})")
