"""The words a column map's keys take, and the groups of tick fields its checks name: `ts_unit`'s units (epoch
counts, times after midnight of a day, spreadsheet days, the unit detected), `date`'s reading of a file's name,
`decimal`'s and `zero_bid`'s words, `price_format`'s (with CME's 32nds as a pattern), which tick fields are
values, numbers, prices, a trade's or a quote's, and `joined_columns`, which reads a `Date+Time`. Their own module
because the presets, layout detection, the time readings and planning name them without needing a map
(connectors/column_map.py checks a map against them).
"""

from __future__ import annotations

import re

from engine.quoting import quoted

UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
EPOCH_IS_UTC = "counts from the epoch, which is UTC already"  # why tz is refused for an epoch unit
TIME_OF_DAY = "seconds_after_midnight"  # decimal seconds of a wall-clock day; needs `date`
# Units that count from midnight of `date` (ns per unit): QuantConnect/LEAN's tick files count milliseconds,
# Nasdaq ITCH's messages nanoseconds
# Wall-clock times of `date` written as digits, HHMMSS then 0, 3, 6 or 9 digits of the second (ns per last digit):
# KRX's `090001418` is 09:00:01.418, hhmmss_ms; a leading zero may be left out, as a number column writes it
CLOCK_FRACTION_DIGITS = {"hhmmss": 0, "hhmmss_ms": 3, "hhmmss_us": 6, "hhmmss_ns": 9}  # digits after HHMMSS
CLOCK_DIGIT_UNITS = {unit: 10 ** (9 - digits) for unit, digits in CLOCK_FRACTION_DIGITS.items()}
DAY_CLOCK_UNITS = {TIME_OF_DAY: 10**9, "ms_after_midnight": 10**6, "us_after_midnight": 10**3,
                   "ns_after_midnight": 1, **CLOCK_DIGIT_UNITS}
COUNT_UNITS = tuple(u for u in DAY_CLOCK_UNITS if u not in CLOCK_DIGIT_UNITS)  # counts after midnight, coarsest first
COUNT_UNIT_WORDS = {"s": TIME_OF_DAY, "sec": TIME_OF_DAY, "ms": "ms_after_midnight", "us": "us_after_midnight",
                    "ns": "ns_after_midnight"}  # a time column's name word for the unit it counts (`ts_ns_et`)
EPOCH = "epoch"  # an epoch number in the unit (s, ms, us, ns) its first value's magnitude shows
DETECT = "auto"  # what the column's first value shows: datetime text (with its format), or an epoch number's unit
# a spreadsheet's serial date: days (and their fraction) since 1899-12-30 (Bloomberg's `Dates`)
EXCEL_DAYS = "excel_days"
# q's timestamp as its long (pykx's and arrowkdb's raw `p`): ns since 2000-01-01, wall-clock time like q's own (UTC
# unless `tz`); read from 1970 it is ~30 years early (review324 #5)
NS_SINCE_2000 = "ns_since_2000"
TS_UNITS = (*UNITS, EPOCH, "datetime", *DAY_CLOCK_UNITS, EXCEL_DAYS, NS_SINCE_2000, DETECT)
DECIMALS = ("comma", "point")  # `decimal`: a CSV's decimal separator, as words
DATE_FROM_NAME = "file_name"  # `date`: the one ISO date the file's name holds (LOBSTER's AAPL_2012-06-21_...)
# `Date+Time`: a map's columns joined by '+', except a '+' inside a header's parentheses or brackets (the zone of
# `Time (UTC+9)`, `Time[UTC+9]`)
_JOIN = re.compile(r"\+(?![^()]*\))(?![^\[\]]*\])")


def joined_columns(text: str) -> tuple[str, ...]:
    """The columns a map's `ts` or `stream_col` names, `Date+Time` two, `Time (UTC+9)` and `Time[UTC+9]` one."""
    return tuple(c.strip() for c in _JOIN.split(text))


# the units a `tz` applies to: epoch numbers are UTC already (DETECT: checked again once resolved)
LOCAL_TIME_UNITS = ("datetime", *DAY_CLOCK_UNITS, EXCEL_DAYS, NS_SINCE_2000, DETECT)
VALUE_FIELDS = ("price", "size", "side", "bid", "ask", "bid_size", "ask_size")
NUMERIC_FIELDS = ("price", "size", "bid", "ask", "bid_size", "ask_size")
TRADE_FIELDS = ("price", "size", "side")
PRICE_FIELDS = ("price", "bid", "ask")  # the columns `price_scale` divides
QUOTE_FIELDS = ("bid", "ask", "bid_size", "ask_size")


# `zero_bid`: a quote's 0 bid is no bid (TAQ's, the default) or a price (an option nobody bids)
ZERO_BID_READINGS = ("no_bid", "price")


# `price_format`: how price, bid and ask are written. 32nds: CME's notation of Treasury futures, HANDLE'32NDS or
# HANDLE-32NDS with a third digit for a quarter (2), half (5) or three quarters (7) of a 32nd, or `+` for a half;
# screens and vendors also write the part as a fraction, ` 1/4`, ` 1/2`, ` 3/4` or `¼`, `½`, `¾` (a space before
# the glyph optional), and the 2- and 3-year notes' eighths as ` 1/8`, ` 3/8`, ` 5/8`, ` 7/8`. No other fraction is read
# eighths: CBOT grains' cents and eighths (450'4; price_notation.py); sqrt_price_x96: a Uniswap v3 pool's price
# (connectors/onchain_swaps.py)
PRICE_FORMATS = ("decimal", "32nds", "eighths", "sqrt_price_x96")
# the third digit: a 32nd's part in thousandths, cut to one digit (CME's notation): quarters 2, 5, 7 (.25, .5,
# .75), and for the 2- and 3-year notes (ZT, Z3N), which tick in eighths of a 32nd, 1, 3, 6, 8 too (.125, .375,
# .625, .875); never 4 nor 9. Source: CME's contract specs (cmegroup.com, 2- and 3-year T-note futures): minimum
# fluctuation one-eighth of 1/32, and the quarters' examples 109-162 = 109 16.25/32, 109-165, 109-167
THIRTY_SECONDS = (r"^([+-]?)(\d+)['\u2019-]([0-2]\d|3[01])([0-35-8+]| ?[\u00bc\u00bd\u00be]| [13]/4| 1/2| [1357]/8)?"
                  r"$")
THIRTY_SECONDS_FORM = ("HANDLE-32NDS or HANDLE'32NDS, the 32nds 00 to 31, maybe followed by + (a half), a third "
                       "digit 2, 5 or 7 (a quarter, half, three quarters), 1, 3, 6 or 8 (eighths: 1/8, 3/8, 5/8, 7/8, "
                       "the 2- and 3-year notes) or a fraction 1/4, 1/2, 3/4 (¼, ½, ¾), 1/8, 3/8, 5/8, 7/8: "
                       "110-16, 110-16+, 110'165, 104-161, 110-16 1/4; or HANDLE N/32 (N/64, N/128): 110 16/32, "
                       "110 31/64; or a decimal")
# A Treasury price written as a whole number and a fraction of it in 32nds, 64ths or 128ths (`110 16/32`, `110 31/64`:
# the plainest way to write one, review441 #4): read by price_format 32nds as the other forms are
WHOLE_AND_FRACTION = r"^([+-]?)(\d+) (\d{1,3})/(32|64|128)$"


def as_written(value: object) -> str:
    """A map value for an error, as the user wrote it: a map file's and `--columns`' values are read as text
    (`price_scale: -1` is '-1'), so a quoted repr would show quotes the user never typed; other values (a YAML list,
    an empty text) as JSON writes them (engine/quoting.py)."""
    return value if isinstance(value, str) and value.strip() else quoted(value)
# the name of an epoch time's part of a second counted in ns (Rithmic's `nsecs`, CoinDesk's `TIMESTAMP_NS`, the
# legacy CryptoCompare stream's `TSNS` beside `TS`): a map
# joining epoch seconds to it (`ts=TIMESTAMP+TIMESTAMP_NS`) with ts_unit ns reads the two as one time, where a
# joined ts's default unit is otherwise a date and a time of day as text (connectors/map_checks.py)
NS_PART_NAME = re.compile(r"(^|[^a-z0-9]|^ts)(nsecs?|nanos?|nanoseconds?|ns)$", re.IGNORECASE)
