"""Derivatives by their stream names: the one rule for what a name says it is (review373 #8, review375 #10).

A spot-trained model's caveat (engine/service/market_caveat.py), `health`'s list of derivative streams held
(connectors/stream_table.py) and a price step's roll-or-halt reading (connectors/price_steps.py) all ask it here,
so that `serve`'s start line, which names the shapes, and every reply agree. The shapes:
* an option (connectors/option_names.py: `BTC-27DEC24-60000-C`, OSI's `AAPL  261218C00150000`), a perpetual or a
  swap (`BTCUSDT_PERP`, `BTC-PERPETUAL`, `BTC-USD-SWAP`), a crypto venue's dated future (`BTC-29MAR24`,
  `BTCUSDT_240329`, `XBTZ25`): option_names.MARKED;
* India's contract symbols (NSE's, BSE's, MCX's): a future `NIFTY24DECFUT`, an option `NIFTY24DEC24000CE`, a
  weekly one `NIFTY24D0524300PE`;
* an exchange's futures contract code: a root of up to four letters and digits (a digit first only before a
  letter: CME's FX `6EH5`), the month's letter and the year's last digit, its last two (`00`..`39`, `90`..`99`),
  or all four (CME's `ESM4`, `CLZ24`, `SR3Z4`, `ESZ2024`, ICE's `BZF5`, Eurex's `FDXM5`, `FGBLM5`; a vendor's
  `ES.H25`, a dot after the root), or a product
  code with its digits and a letter followed by the contract's year and month (JPX/OSE's `NK225M2406`, Nikkei 225
  mini June 2024), or a contract month alone (`202406`, a contract column's value); and a calendar spread of two
  (`CLZ4-CLF5`). A name of letters then one run of digits is a future only in the first shape: a scanner's IDs
  (`EQ00103`) and index CFDs (`HK50`, `EU50`) have that shape too, and were called dated futures (review380 #11;
  so JPX's `JGBL2406` is no longer one by its name, and `CH20`, a CFD of the SMI, still reads as one);
* a venue's suffix after a dot (`SR3Z4.cme`, as a `bad_stream` refusal advises naming a stream by venue) is read
  past first (review379 #8): `7203.T` and `BRK.B` are then `7203` and `BRK`, none of the shapes;
* a product and its contract month, as replay joins a `Produkt;Verfall` pair (`FESX 12.2024`) or an export writes
  one (`FESX DEC24`, `FDAX 2025-03`): a dated future too (review440 #5);
* a continuous series in a shape no other name has: LSEG's continuation RIC (`FDXc1`, `LCOc1`, `STXEc2`), Yahoo's
  `CL=F`, TradingView's `ES1!`, Databento's `ES.c.0` (review440 #5: none was caveated);
* for a price step's reading only, a continuous series of letters and one digit (`CL1`) or IQFeed's `@ES`, shapes
  too loose to caveat a stream with (`LUNA2`, a token, has the first). Where the letters end in a month code
  (`FDX1`, `NQ1`) the name also reads as a contract code (FD, November, year 1): no rule tells the two apart, and
  either is a future.
An ISIN (`DE0007236101`) or an exchange's numeric code (`7203`) is none of them.
"""

from __future__ import annotations

import re

from connectors.option_names import MARKED, is_option_name

MONTH_CODES = "FGHJKMNQUVXZ"  # January to December, as every futures exchange writes them
# CME/ICE/Eurex: root, month letter, year (ESM4, CLZ24, ESZ2024, FDXM5, 6EH5), the root and the month apart by a
# space or a dot as vendors write them too (`ES H5`, `ES.H25`: review444 #3); a contract month alone (202406).
# A two-digit year is 00..39 or the 1990s' 90..99: `HK50`, `EU50`, `CN50` are index CFDs, not contracts of 2050
ROOT = r"(?:[A-Z][A-Z0-9]{0,3}|\d[A-Z][A-Z0-9]{0,2})"
YEAR = r"(?:(?:19|20)\d\d|[0-39]\d|\d)"
DATED_CODE = rf"{ROOT}[ .]?[{MONTH_CODES}]{YEAR}|(?:19|20)\d\d(?:0[1-9]|1[0-2])"
# JPX/OSE: a product code with digits and a letter, then the contract's year and month (NK225M2406). Letters then
# digits alone (JGBL2406) are not read so: a scanner's `EQ00103` reads the same way (module docstring)
YEAR_MONTH_CODE = r"[A-Z]{2,6}\d{1,3}[A-Z]\d\d(?:0[1-9]|1[0-2])"
# India's (NSE's, BSE's, MCX's) contract symbols: root, year, month, then FUT (`NIFTY24DECFUT`), or a strike and CE/PE
# for an option (`NIFTY24DEC24000CE`; a weekly expiry's year, month and day, the month 1..9, O, N, D:
# `NIFTY24D0524300PE`). Roots hold `&` and `-` (`M&M`, `BAJAJ-AUTO`) (review433 #3: neither was a derivative)
INDIAN_MONTHS = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC"
INDIAN_FUTURE = re.compile(rf"^[A-Z][A-Z0-9&-]*\d\d(?:{INDIAN_MONTHS})FUT$")
INDIAN_OPTION = re.compile(rf"^[A-Z][A-Z0-9&-]*?\d\d(?:{INDIAN_MONTHS}|[1-9OND]\d\d)\d+(?:\.\d+)?(?:CE|PE)$")
# a product code, a space and its contract month: `FESX 12.2024`, `FDAX 03/2025`, `FESX 2024-12`, `FESX DEC24`
CONTRACT_MONTH = (rf"(?:0[1-9]|1[0-2])[./](?:19|20)\d\d|(?:19|20)\d\d-?(?:0[1-9]|1[0-2])"
                  rf"|(?i:{INDIAN_MONTHS})[ -]?(?:19|20)?\d\d")
PRODUCT_MONTH = re.compile(rf"^[A-Z][A-Z0-9]{{1,5}} (?:{CONTRACT_MONTH})$")
# a continuous series only a future's name has: `FDXc1` (LSEG), `CL=F` (Yahoo), `ES1!` (TradingView), `ES.c.0`
CONTINUATION_SERIES = re.compile(r"^[A-Z][A-Z0-9]{0,3}(?:c\d{1,2}|\d{1,2}!|=F|\.[cvn]\.\d+)$")
CONTINUOUS_SERIES = "a continuous futures series"
# A venue after a dot, as a refusal advises naming a stream (`SR3Z4.cme`, `BTC-29MAR24.deribit`); a continuous
# series' `.c.0` ends in a digit and stays, and so does a contract's month and year after its root's dot (`ES.H25`)
VENUE_SUFFIX = re.compile(rf"\.(?![{MONTH_CODES}]{YEAR}$)[A-Za-z][A-Za-z0-9_-]*$")
FUTURES_CONTRACT = re.compile(rf"^(?:{DATED_CODE}|{YEAR_MONTH_CODE})$")
CONTINUOUS_FUTURE = re.compile(r"^(?:@[A-Z0-9]{1,4}|[A-Z][A-Z0-9]{0,3}(?:\d!?|=F|c\d|\.[cvn]\.\d+))$")
DATED_FUTURE = "a dated future"


def futures_kind(stream: str) -> str | None:
    """What futures market an exchange's code says a stream is ("a dated future", "a futures calendar spread", "a
    continuous futures series"), None for any other name."""
    name = bare_name(stream)
    if FUTURES_CONTRACT.match(name) or INDIAN_FUTURE.match(name) or PRODUCT_MONTH.match(name):
        return DATED_FUTURE
    if CONTINUATION_SERIES.match(name):
        return CONTINUOUS_SERIES
    legs = name.split("-")
    if len(legs) == 2 and all(FUTURES_CONTRACT.match(leg) for leg in legs):
        return "a futures calendar spread"
    return None


def derivative_kind(stream: str) -> str | None:
    """What derivative a stream's name says it is ("an option", "a perpetual", "a swap", "a dated future", "a
    futures calendar spread", "a continuous futures series"), None for any other name: the one rule (module
    docstring)."""
    stream = bare_name(stream)
    if is_option_name(stream) or INDIAN_OPTION.match(stream):
        return "an option"
    if (futures := futures_kind(stream)) is not None:
        return futures
    if not re.search(MARKED, stream):
        return None
    if re.search(r"(?i)perp", stream):
        return "a perpetual"
    return "a swap" if re.search(r"(?i)swap", stream) else DATED_FUTURE


def futures_name(stream: str) -> bool:
    """Whether a stream is a future by its name, a continuous series' included (a price step's reading: a
    lasting step after a pause is a roll, not a halt)."""
    return futures_kind(stream) is not None or CONTINUOUS_FUTURE.match(bare_name(stream)) is not None


def bare_name(stream: str) -> str:
    """A stream's name without a venue's suffix (`SR3Z4.cme` -> `SR3Z4`), what the shapes are read from."""
    return VENUE_SUFFIX.sub("", stream.strip())
