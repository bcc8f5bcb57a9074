"""Epoch counts read exactly: a count of ns, ms or us written as text (a `.000` tail allowed, any other fraction
of a ns said), decimal seconds, ms or us as text or a DECIMAL column, read to the ns without a float's rounding,
each also in scientific notation, and a count scaled to ns in Python (`scaled_ts`). Split from
connectors/event_time.py, which picks the reading by the column's type and unit."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any

import polars as pl

from connectors.map_vocabulary import UNITS
from connectors.ticks import TS_MAX


DECIMAL_COMMA_SECONDS = r"^([+-]?\d+),(\d+)$"  # `1733312345,123`: one comma, no grouping: a decimal comma


# counts a CSV reads as text when written with a point (`.000`) or an exponent (`is_text_count`: row_exprs.py)
WHOLE_TEXT_UNITS = ("ms", "us", "ns")


# a count as R's write.csv, Excel and numpy write a large number: `1.709967603e9`, `1.709967600123E+12`
EXPONENT_FORM = r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$"
# a count at int64's end or past it (2**63, uint64's 18446744073709551615 that some writers put for "no time")
INT64_END = r"^[+-]?(\d{20,}|9223\d{15})$"
# a count no Int64 reads: written with a point (`.000`, Gate.io's `...123.456`), an exponent, or past int64; a CSV
# column with one in any row is read as text (connectors/planning.py's `_time_type`), exactly, and a time past 2262
# there is then named as such (event_time.beyond_int64_s), not a cell that did not read
TEXT_COUNT = rf"^[+-]?\d+\.\d*$|{EXPONENT_FORM}|{INT64_END}"


def is_text_count(text: str) -> bool:
    """Whether a CSV's count is written so that no Int64 reads it: with a point, an exponent, or past int64
    (`TEXT_COUNT`)."""
    return "." in text or re.search(f"{EXPONENT_FORM}|{INT64_END}", text.strip()) is not None


# units whose decimal text is read exactly to the ns (`decimal_text_ns`): a fraction of a s, ms or us is a finer
# clock's digits (Gate.io's create_time_ms "1548000000123.456"); a fraction of a ns is no clock's (`whole_count`)
DECIMAL_TEXT_UNITS = ("s", "ms", "us")


def whole_count(text: pl.Expr) -> pl.Expr:
    """A whole count of ns written as text, a trailing `.000` or an exponent included (`1.709967600123456789e18`)
    -> that integer, read as any epoch column is. A fraction of a ns, or text that is no number, becomes null
    (missing_field): no clock writes one."""
    count = text.str.strip_chars().cast(pl.Decimal(38, 9), strict=False)
    return pl.when(count == count.round(0)).then(_exact_ns(count, 1))


def fraction_of_unit(text: str, unit: str) -> str | None:
    """Why a count of ns written as decimal text does not read (`whole_count`): its fraction of a ns is not zero
    ("1723161255342000000.5"), which no clock writes; None for other text and units (`decimal_text_ns`)."""
    if unit in DECIMAL_TEXT_UNITS or unit not in WHOLE_TEXT_UNITS or \
            re.fullmatch(r"\s*[+-]?\d+\.\d*[1-9]\d*\s*", text) is None:
        return None
    return f"a fraction of a {unit} after the point, which a count of {unit} never holds (only a .000 tail is read)"


def decimal_count_ns(col: pl.Expr, dtype: pl.Decimal, ns_per_unit: int) -> pl.Expr:
    """A DECIMAL count of a unit (Snowflake's NUMBER(20,6), Spark's decimal(20,6) epoch seconds) -> int ns, exactly,
    as the same digits written as text are (`decimal_text_ns`): refused as "not a number of s" before (review284
    #4). Digits past the ns are rounded; a time past int64 ns is null (`_exact_ns`)."""
    return _exact_ns(col.cast(pl.Decimal(38, min(dtype.scale or 0, 9))), ns_per_unit)


def decimal_text_ns(text: pl.Expr, unit: str) -> pl.Expr:
    """Decimal s, ms or us written as text ("1717236000.25" s, Gate.io's "1548000000123.456" ms, with a decimal
    comma as European exports write it, "1717236000,25": epoch counts are never grouped, or in scientific notation
    as R, Excel and numpy write large numbers, "1.709967603e9") -> int ns, exactly, as a DECIMAL column's are: as a
    float the same value is off by up to ~100 ns (its exponent was once dropped, a time in 1970: review411 #6).
    Digits past the ns are rounded. Text that is no number (words, grouping marks) becomes null (missing_field)."""
    per_unit = UNITS[unit]
    # the fraction's digits that are ns: 9 of a s, 6 of a ms, 3 of a us
    return _exact_ns(count_text(text).cast(pl.Decimal(38, len(str(per_unit)) - 1), strict=False), per_unit)


def count_text(text: pl.Expr) -> pl.Expr:
    """A count's text as a number's cast reads it: without spaces at its ends, a decimal comma as a point."""
    return text.str.strip_chars().str.replace(DECIMAL_COMMA_SECONDS, "${1}.${2}")


def _exact_ns(count: pl.Expr, ns_per_unit: int) -> pl.Expr:
    """A Decimal count of a unit -> int ns, its digits past the ns rounded; null past int64 ns (a column of ms read
    as s, a time past 2262: ts_out_of_range by event_time.beyond_int64_s), not wrapped to some other time. The
    count is bounded before it is scaled: polars raises on a Decimal product's overflow, which would stop the whole
    file for one cell."""
    count = pl.when(count.abs() <= TS_MAX // ns_per_unit).then(count)
    return (count * ns_per_unit).round(0).cast(pl.Int64, strict=False)


def scaled_ts(raw: Any, factor: int) -> Any:
    if isinstance(raw, float):  # a non-finite float stays a float and is rejected as ts_not_int
        # a float's shortest decimal (repr) is the digits its writer had: float64 epoch seconds 1723161254.087896 are
        # ...896000 ns, as the same text reads, not the binary value's ...896064 (review284 #7)
        return round(Decimal(repr(raw)) * factor) if math.isfinite(raw) else raw
    return raw * factor  # exact for ints of any size: an overflow is rejected as ts_out_of_range
