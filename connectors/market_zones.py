"""The zone of the market a file's names point at: a ticker's exchange suffix (`RELIANCE.NS`, `BHP.AX`, `0005.HK`),
an exchange's futures code (JPX's `NK225M2406`), the language of a European header (`Datum;Uhrzeit;Kurs`). The note
on naive times read as UTC suggests it (review375 #7, review373 #9: New York's zone was suggested for India,
Australia, Osaka and a German export, 9.5 to 14 hours off); a file read in a zone whose UTC offset is not that of
its streams' exchanges gets a warning naming them (review375 #3: `.HK` and `.NS` read under `--tz Asia/Tokyo`)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Iterable, NamedTuple
from zoneinfo import ZoneInfo

from connectors.field_names import normal_name
from connectors.futures_codes import CONTRACT_MONTH


class MarketZone(NamedTuple):
    zone: str
    market: str  # as a note names it: "NSE/BSE India"


# a ticker's exchange suffix, Yahoo Finance's and Refinitiv's shared ones (a share class, `BRK.B`, is none of them)
SUFFIX_ZONES = {
    "T": MarketZone("Asia/Tokyo", "the Tokyo exchange"), "HK": MarketZone("Asia/Hong_Kong", "HKEX"),
    "NS": MarketZone("Asia/Kolkata", "NSE India"), "BO": MarketZone("Asia/Kolkata", "BSE India"),
    "AX": MarketZone("Australia/Sydney", "ASX"), "SI": MarketZone("Asia/Singapore", "SGX"),
    "TW": MarketZone("Asia/Taipei", "TWSE"), "TWO": MarketZone("Asia/Taipei", "TPEx"),
    "KS": MarketZone("Asia/Seoul", "KRX"), "KQ": MarketZone("Asia/Seoul", "KOSDAQ"),
    "SS": MarketZone("Asia/Shanghai", "the Shanghai exchange"),
    "SZ": MarketZone("Asia/Shanghai", "the Shenzhen exchange"),
    # China's vendors' (Wind's, Tushare's 600519.SH, 830799.BJ; JoinQuant's and RiceQuant's ISO MICs, 600519.XSHG)
    **dict.fromkeys(("SH", "XSHG"), MarketZone("Asia/Shanghai", "the Shanghai exchange")),
    "XSHE": MarketZone("Asia/Shanghai", "the Shenzhen exchange"),
    "BJ": MarketZone("Asia/Shanghai", "the Beijing exchange"),
    "NZ": MarketZone("Pacific/Auckland", "NZX"), "JK": MarketZone("Asia/Jakarta", "IDX"),
    "BK": MarketZone("Asia/Bangkok", "SET"), "KL": MarketZone("Asia/Kuala_Lumpur", "Bursa Malaysia"),
    "L": MarketZone("Europe/London", "the London exchange"), "DE": MarketZone("Europe/Berlin", "Xetra"),
    "PA": MarketZone("Europe/Paris", "Euronext Paris"), "AS": MarketZone("Europe/Amsterdam", "Euronext Amsterdam"),
    "MI": MarketZone("Europe/Rome", "Borsa Italiana"), "MC": MarketZone("Europe/Madrid", "BME Madrid"),
    "SW": MarketZone("Europe/Zurich", "SIX Swiss"), "ST": MarketZone("Europe/Stockholm", "Nasdaq Stockholm"),
    "TO": MarketZone("America/Toronto", "the Toronto exchange"), "SA": MarketZone("America/Sao_Paulo", "B3")}
# The zones of the exchanges a stock code's suffix or prefix in a file's name names (connectors/file_names.py's
# NUMERIC_CODE_EXCHANGES, Asia's, whose local times a file most often writes without an offset): Yahoo's and
# Refinitiv's suffixes as above, and Bloomberg's (JT, TT, C1, ...) and Google's (TYO, HKG, ...) codes for them
EXCHANGE_ZONES = {
    **{code: market.zone for code, market in SUFFIX_ZONES.items()},
    **dict.fromkeys(("JT", "JP", "TYO"), "Asia/Tokyo"), "HKG": "Asia/Hong_Kong", "KRX": "Asia/Seoul",
    **dict.fromkeys(("TT", "TPE"), "Asia/Taipei"), **dict.fromkeys(("CH", "C1", "C2", "SHA", "SHE"), "Asia/Shanghai"),
    **dict.fromkeys(("SP", "SGX"), "Asia/Singapore"), "MK": "Asia/Kuala_Lumpur", "TB": "Asia/Bangkok",
    "IJ": "Asia/Jakarta", **dict.fromkeys(("SR", "AB"), "Asia/Riyadh")}
# an exchange's own futures codes: JPX's Nikkei 225 (mini), TOPIX and JGB futures (`NK225M2406`); HKEX's Hang Seng
# index futures (`HSIM4`, `MHIM4`, `HHIM4`); Eurex's index and Bund futures by product code or LSEG root, a contract
# (`FESXM4`, `FDXZ4`), a continuation RIC (`FDXc1`, `STXEc2`) or a product and its month (`FESX 12.2024`) (review440
# #8: a Eurex future in a file read on London's clock was not named). Read in capitals (`market_of`)
EUREX_ROOTS = "FESX|FDAX|FDXM|FDXS|FSMI|FSMM|FGBL|FGBM|FGBS|FGBX|FBTP|FOAT|FVS|FDX|STXE"
FUTURES_CODES = (r"^(NK225M?|TOPIXM?|JGBL?)\d{2,4}$", r"^(HSI|MHI|HHI)[FGHJKMNQUVXZ]\d{1,2}$",
                 rf"^({EUREX_ROOTS})(?:[FGHJKMNQUVXZ]\d{{1,2}}|C\d{{1,2}}| (?:{CONTRACT_MONTH}))$")
FUTURES_ZONES = tuple(zip(map(re.compile, FUTURES_CODES), (MarketZone("Asia/Tokyo", "JPX (Osaka)"),
                                                            MarketZone("Asia/Hong_Kong", "HKEX"),
                                                            MarketZone("Europe/Berlin", "Eurex"))))
SUFFIX = re.compile(r"\.([A-Za-z]{1,4})$")
# the exchange before a numeric code, as Futu (SH.600519, HK.00700) and BaoStock (sh.600000) write it
PREFIX = re.compile(r"^([A-Za-z]{2})\.\d{5,6}$")
# a stream name that names its market, as a polars regex (the file facts pick such names out of a file's streams)
MARKET_NAME = (r"(?i)\.(" + "|".join(SUFFIX_ZONES) + r")$|^(" + "|".join(c for c in SUFFIX_ZONES if len(c) == 2)
               + r")\.\d{5,6}$|" + "|".join(FUTURES_CODES))
# a European export's header words (field_names.py reads them): the language says the clock, one for the CET
# zones (Berlin's, Vienna's and Zurich's clocks agree; so do Paris', Brussels' and Rome's)
HEADER_LANGUAGES = (
    ({"datum", "uhrzeit", "zeit", "zeitstempel", "handelszeit", "handelsdatum", "kurs", "stück", "wertpapier",
      "geld", "brief", "menge", "geldkurs", "briefkurs"}, "Europe/Berlin", "German"),
    ({"heure", "horodatage", "cours", "prix", "quantité", "symbole"}, "Europe/Paris", "French"),
    ({"orario", "prezzo", "titolo", "quantità", "denaro", "lettera"}, "Europe/Rome", "Italian"))


def market_of(stream: str) -> MarketZone | None:
    """The market a stream's name points at (its suffix, its exchange before a code, a futures code), or None."""
    for code in (SUFFIX.search(stream), PREFIX.match(stream)):
        if code is not None and code[1].upper() in SUFFIX_ZONES:
            return SUFFIX_ZONES[code[1].upper()]
    return next((market for code, market in FUTURES_ZONES if code.match(stream.upper())), None)


def stock_name(stream: str) -> bool:
    """Whether a stream's name is an exchange's stock, never a futures series: a numeric code (`000001`, `7203`),
    alone or with its exchange's code (`000001.SZ`, `7203.T`, `SH.600519`), or a ticker with an exchange's suffix
    (`RELIANCE.NS`)."""
    codes = (SUFFIX.search(stream), PREFIX.match(stream))
    return any(code is not None and code[1].upper() in SUFFIX_ZONES for code in codes) or \
        re.fullmatch(r"\d{4,6}", stream) is not None


def named_market(names: Iterable[str]) -> tuple[str, MarketZone] | None:
    """The first of `names` (a file's name, its first stream) that points at a market, and that market."""
    for name in names:
        if name and (market := market_of(str(name))) is not None:
            return str(name), market
    return None


def each_exchange_clock(ts: str) -> bool:
    """Whether a time column's header says each stream's exchange's own clock (LSEG's `Time[L]`, `Date[L]+Time[L]`):
    one stream's zone is then the file's only where every stream trades on that exchange's clock."""
    return "[l]" in ts.lower()


def header_language(columns: Iterable[str]) -> tuple[str, str, str] | None:
    """(zone, language, the column that shows it) of a header in a European language that names its clock."""
    names = [str(c) for c in columns]
    for words, zone, language in HEADER_LANGUAGES:
        if column := next((c for c in names if normal_name(c).replace("_", " ").strip() in words), None):
            return zone, language, column
    return None


def misread_markets(tz: str, streams: Iterable[str], first_ns: int, last_ns: int) -> dict[MarketZone, list[str]]:
    """The streams (by market) whose names point at an exchange whose UTC offset differs from `tz`'s at the file's
    first or last time: read in `tz`, their times are that difference off (Hong Kong's an hour under Tokyo's)."""
    zone = ZoneInfo(tz)
    moments = [datetime.fromtimestamp(ns / 1e9, ZoneInfo("UTC")) for ns in (first_ns, last_ns)]
    offsets = {moment.astimezone(zone).utcoffset() for moment in moments}
    found: dict[MarketZone, list[str]] = {}
    for stream in streams:
        market = market_of(stream)
        if market is not None and {m.astimezone(ZoneInfo(market.zone)).utcoffset() for m in moments} != offsets:
            found.setdefault(market, []).append(stream)
    return found
