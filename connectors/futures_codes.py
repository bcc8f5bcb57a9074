"""Derivatives by their stream names: the one rule for what a name says it is (review373 #8, review375 #10).

A spot-trained model's caveat (engine/service/market_caveat.py), `health`'s list of derivative streams held
(connectors/stream_table.py) and a price step's roll-or-halt reading (connectors/price_steps.py) all ask it here,
so that `serve`'s start line, which names the shapes, and every reply agree. The shapes:
* an option (connectors/option_names.py: `BTC-27DEC24-60000-C`, OSI's `AAPL  261218C00150000`), a perpetual or a
  swap (`BTCUSDT_PERP`, `BTC-PERPETUAL`, `BTC-USD-SWAP`), a crypto venue's dated future (`BTC-29MAR24`,
  `BTCUSDT_240329`, `XBTZ25`): option_names.MARKED;
* an exchange's futures contract code: a root of up to four letters and digits, the month's letter and the year's
  last one or two digits (CME's `ESM4`, `CLZ24`, ICE's `BZF5`, Eurex's `FDXM5`, `FGBLM5`), or a product code
  followed by the contract's year and month (JPX/OSE's `NK225M2406`, Nikkei 225 mini June 2024; `JGBL2406`), or a
  contract month alone (`202406`, a contract column's value); and a calendar spread of two (`CLZ4-CLF5`);
* for a price step's reading only, a continuous series as vendors write one (`CL1`, `ES1!`, `CL=F`, `CLc1`,
  `ES.c.0`, `@ES`), a shape too loose to caveat a stream with (`LUNA2`, a token, has it).
An ISIN (`DE0007236101`) or an exchange's numeric code (`7203`) is none of them.
"""

from __future__ import annotations

import re

from connectors.option_names import MARKED, is_option_name

MONTH_CODES = "FGHJKMNQUVXZ"  # January to December, as every futures exchange writes them
# CME/ICE/Eurex: root, month letter, year (ESM4, CLZ24, FDXM5, FGBLM5); a contract month alone (202406)
DATED_CODE = rf"[A-Z][A-Z0-9]{{0,3}} ?[{MONTH_CODES}]\d{{1,2}}|(?:19|20)\d\d(?:0[1-9]|1[0-2])"
# JPX/OSE: a product code, then the contract's year and month (NK225M2406, JGBL2406, TOPIX2412)
YEAR_MONTH_CODE = r"[A-Z]{2,6}\d{0,3}[A-Z]?\d\d(?:0[1-9]|1[0-2])"
FUTURES_CONTRACT = re.compile(rf"^(?:{DATED_CODE}|{YEAR_MONTH_CODE})$")
CONTINUOUS_FUTURE = re.compile(r"^(?:@[A-Z0-9]{1,4}|[A-Z][A-Z0-9]{0,3}(?:\d!?|=F|c\d|\.[cvn]\.\d+))$")
DATED_FUTURE = "a dated future"


def futures_kind(stream: str) -> str | None:
    """What futures market an exchange's code says a stream is ("a dated future", "a futures calendar spread"),
    None for any other name."""
    name = stream.strip()
    if FUTURES_CONTRACT.match(name):
        return DATED_FUTURE
    legs = name.split("-")
    if len(legs) == 2 and all(FUTURES_CONTRACT.match(leg) for leg in legs):
        return "a futures calendar spread"
    return None


def derivative_kind(stream: str) -> str | None:
    """What derivative a stream's name says it is ("an option", "a perpetual", "a swap", "a dated future", "a
    futures calendar spread"), None for any other name: the one rule (module docstring)."""
    if is_option_name(stream):
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
    return futures_kind(stream) is not None or CONTINUOUS_FUTURE.match(stream) is not None
