"""The symbol in a bar export's file name, without what the vendor writes around it (connectors/file_names.py asks
here first). The naming rule (docs/replay.md, "Bar files"): a stream is the instrument's symbol as its vendor
writes it, less the bar period the vendor appends and less an exchange the vendor writes before it; a country or
exchange suffix that is part of the vendor's own symbol stays (stooq's `aapl.us`, `AAPL.US` in its `<TICKER>`
column, is the stream `AAPL.US`), and so does the exchange of a numeric stock code (`HKEX_700`), as elsewhere.

- TradingView's "Export chart data": `BATS_AAPL, 1.csv`, `NASDAQ_AAPL, 1D.csv`, `FX_IDC_EURUSD, 60.csv`: the
  symbol after the exchange prefix, before the comma and the period (review307 #3: `BATS` merged two tickers);
- stooq's downloads: `aapl_us_d.csv`, `msft_us_5.csv`, `eurusd_h.csv`: the symbol with its market, `AAPL.US`;
- MetaTrader 4's History Center: `EURUSD1.csv`, `EURUSD60.csv`, `XAUUSD1440.csv` (symbol + the period in minutes);
- a period token after a symbol in capitals: `EURUSD_M1`, `AAPL_1m`, `BTCUSDT-1h`, `SPY_D1`, `ES_5min` (review307
  #10); a word in small letters before it (`trades_1m`) is no symbol: the folder may name one.
"""

from __future__ import annotations

import re

from connectors.bar_lengths import UNIT_NS
from engine.quoting import quoted

TRADINGVIEW = re.compile(r"^(?P<exchange>[A-Z0-9]+(?:_[A-Z0-9]+)*)_(?P<symbol>[A-Za-z0-9.!&-]+), ?"
                         r"(?P<period>\d*[SDWMH]?|\d+)(?:[ _-].*)?$")
STOOQ_MARKETS = "us|uk|jp|de|hk|hu|pl"
STOOQ = re.compile(rf"^(?P<symbol>[a-z0-9^-]+?)(?:_(?P<market>{STOOQ_MARKETS}))?_(?P<period>[dwmqyh]|5|15|60)$")
MT4_PERIODS = "1|5|15|30|60|240|1440|10080|43200"  # minutes: M1 .. MN1
MT4 = re.compile(rf"^(?P<symbol>[A-Z]{{6}}|X[AP][UGTD]USD)(?P<period>{MT4_PERIODS})$")
PERIOD_TOKEN = re.compile(r"^(?P<symbol>[A-Z0-9.^]+?)[-_ ](?P<period>[1-9]\d*(?:s|m|min|mins|h|d|w|sec|minute|hour|"
                          r"day)|[MHDW][1-9]\d*|MN1?|daily|hourly|minute)$", re.IGNORECASE)
CAPITALS = re.compile(r"^[A-Z0-9.^]*[A-Z][A-Z0-9.^]*$")  # (the pattern above ignores case for its period only)


def bar_export_symbol(stem: str) -> tuple[str, str] | None:
    """(symbol, where) when a file's name (`stem`, without its suffix) is a bar export's of one of the layouts
    above, `where` saying what was left out; None otherwise."""
    if found := TRADINGVIEW.match(stem):
        symbol, exchange = found["symbol"], found["exchange"]
        if symbol.isdigit():  # a stock code names an instrument only with its exchange (0700_HK, as elsewhere)
            return f"{exchange}_{symbol}", f"file name {quoted(stem)}: TradingView's export, its period left out"
        return symbol, (f"file name {quoted(stem)}: TradingView's export, EXCHANGE_SYMBOL, PERIOD: the exchange "
                        f"{exchange} and the period left out")
    if found := STOOQ.match(stem):
        symbol = found["symbol"].upper() + (f".{found['market'].upper()}" if found["market"] else "")
        return symbol, f"file name {quoted(stem)}: stooq's download, symbol_market_period: its period left out"
    if (found := MT4.match(stem)) is not None:
        return found["symbol"], (f"file name {quoted(stem)}: MetaTrader 4's History Center export, symbol and period "
                                 f"in minutes ({found['period']}): the period left out")
    if (found := PERIOD_TOKEN.match(stem)) is not None and CAPITALS.match(found["symbol"]):
        return found["symbol"], f"file name {quoted(stem)}: the bar period {quoted(found['period'])} left out"
    return None

TOKEN_PERIOD = re.compile(r"^(?:(?P<n>[1-9]\d*)(?P<unit>s|sec|m|min|mins|minute|h|hour|d|day|w)|(?P<mt>[MHDW])(?P<mt_n>"
                          r"[1-9]\d*)|(?P<word>daily|hourly|minute))$", re.IGNORECASE)


def period_in_name(stem: str) -> tuple[int, str] | None:
    """(ns, the period as written) of the bars a bar export's file name names (above); None when it names none, or
    one of no fixed length (a month, stooq's `m`)."""
    if found := TRADINGVIEW.match(stem):  # minutes, or a count of S/D/W/H
        period = found["period"]
        if period.isdigit():
            return int(period) * UNIT_NS["m"], period
        return (int(period[:-1] or 1) * UNIT_NS[period[-1].lower()], period) if period[-1:] in "SDWH" else None
    if found := STOOQ.match(stem):
        period = found["period"]
        return (int(period) * UNIT_NS["m"] if period.isdigit() else UNIT_NS[period], period) \
            if period.isdigit() or period in "dwh" else None
    if found := MT4.match(stem):
        return int(found["period"]) * UNIT_NS["m"], found["period"]
    if (found := PERIOD_TOKEN.match(stem)) is not None and CAPITALS.match(found["symbol"]) and \
            (token := TOKEN_PERIOD.match(found["period"])) is not None:
        if token["word"]:
            return UNIT_NS[token["word"][0].lower() if token["word"].lower() != "minute" else "m"], found["period"]
        if token["mt"]:
            unit = token["mt"].lower()
            return int(token["mt_n"]) * UNIT_NS[unit], found["period"]
        return int(token["n"]) * UNIT_NS[token["unit"][0].lower()], found["period"]
    return None
