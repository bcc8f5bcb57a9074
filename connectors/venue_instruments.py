"""Crypto venues' own instrument names in a file's name: Deribit's `BTC-PERPETUAL`, `BTC-29MAR24`,
`SOL_USDC-27DEC24-150-C`; OKX's `BTC-USDT-SWAP`, `BTC-USD-240329`, `BTC-USD-240329-40000-C`; Kraken Futures'
`PF_XBTUSD`, `FI_XBTUSD_240329`; Binance's options `BTC-240329-40000-C`. Each is one contract, kept whole: cut to
its coins (`BTC`, `BTC-USDT`, `XBTUSD`) a perpetual, a dated future, an option and the spot pair were one stream,
and a second file fed live was dropped as older than the first (review 163, finding 1). Venue names written before
the instrument (`okx-ETH-USDT-2024-01-02.csv`) are told apart, so they are not read as part of it.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Iterable, NamedTuple

MONTH = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC"
COIN = r"(?=\d*[A-Z])[A-Z0-9]{2,10}"  # a coin has a letter: 2024-01 is no pair
YYMMDD = r"\d\d(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
STRIKE = r"\d+(?:[d.]\d+)?"  # Deribit writes a decimal strike as 0d625
EDGE, END = r"(?<![A-Za-z0-9])", r"(?![A-Za-z0-9])"
# (kind, pattern) in the order tried: the longer forms first, so an option is not read as its future
FORMS = (
    ("option", rf"{COIN}(?:_{COIN})?-\d{{1,2}}(?:{MONTH})\d\d-{STRIKE}-[CP]"),    # Deribit, Bybit
    ("option", rf"{COIN}-{COIN}-{YYMMDD}-{STRIKE}-[CP]"),                          # OKX
    ("option", rf"{COIN}-{YYMMDD}-{STRIKE}-[CP]"),                                 # Binance
    ("perpetual", rf"{COIN}(?:_{COIN})?-PERPETUAL"),                              # Deribit
    ("dated future", rf"{COIN}(?:_{COIN})?-\d{{1,2}}(?:{MONTH})\d\d"),             # Deribit, Bybit
    ("swap", rf"{COIN}-{COIN}-SWAP"),                                              # OKX
    ("dated future", rf"{COIN}-{COIN}-{YYMMDD}"),                                  # OKX
    ("Kraken Futures contract", rf"(?:PF|PI|FI|FF|PV)_{COIN}(?:_{YYMMDD})?"),
)
PATTERNS = tuple((kind, re.compile(EDGE + form + END)) for kind, form in FORMS)
# venues whose name leads a file's name (okx-ETH-USDT-2024-01-02.csv): not a coin of the pair
VENUES = frozenset({"okx", "okex", "deribit", "binance", "bybit", "kraken", "krakenfutures", "bitfinex", "coinbase",
                    "bitmex", "bitstamp", "kucoin", "huobi", "htx", "gateio", "bitget", "mexc", "tardis"})


class Instrument(NamedTuple):
    name: str  # as the venue writes it: BTC-PERPETUAL
    kind: str  # perpetual, dated future, swap, option, Kraken Futures contract


def venue_instrument(name: str, beside: Iterable[str] = ()) -> Instrument | None:
    """The one venue instrument a file (or folder) name holds, whole; None when it holds none or several. `beside`
    (the names of the files or folders next to it, read only for a dated future) tells a day from a contract."""
    for kind, pattern in PATTERNS:
        found = {m[0] for m in pattern.finditer(name) if kind != "dated future" or _friday(m[0])}
        if kind == "dated future" and found:
            found -= _days_beside(found, beside)
        if len(found) == 1:
            return Instrument(found.pop(), kind)
        if found:
            return None
    return None


def _friday(contract: str) -> bool:
    """Whether a dated future's delivery date (`29MAR24`, `240329`) is a Friday, as Deribit's, OKX's and Bybit's
    are: a name such as `AAPL-02JAN24` holds a file's day, not a contract (each day was a stream of its own)."""
    text = contract.rsplit("-", 1)[-1]
    for form in ("%d%b%y", "%y%m%d"):
        try:
            return datetime.strptime(text.title() if form == "%d%b%y" else text, form).weekday() == 4
        except ValueError:
            continue
    return False


def _days_beside(contracts: set[str], beside: Iterable[str]) -> set[str]:
    """Those of `contracts` that name a day, not a delivery: the same root is written beside them with a date that
    is no Friday (`AAPL-04JAN24.csv` beside `AAPL-05JAN24.csv`), so the folder holds a stock's days, and reading
    Friday's as a contract made each Friday a stream of its own."""
    root = lambda contract: contract.rsplit("-", 1)[0]  # noqa: E731  (BTC-29MAR24: BTC)
    roots = {root(contract) for contract in contracts}
    dated = [pattern for kind, pattern in PATTERNS if kind == "dated future"]
    day_roots = next(({root(m[0]) for m in matched} for other in beside
                      if (matched := [m for pattern in dated for m in pattern.finditer(other)
                                      if root(m[0]) in roots and not _friday(m[0])])), set())
    return {contract for contract in contracts if root(contract) in day_roots}


def without_venue(tokens: list[str]) -> list[str]:
    """A name's tokens less the venue's name (`okx`, `Deribit`): it is no coin, and `okx` beside `ETH` read as a
    pair (okxETH) hid the pair `ETH-USDT` the name holds."""
    return [t for t in tokens if t.lower() not in VENUES]
