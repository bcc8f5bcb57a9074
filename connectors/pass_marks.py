"""Which pass of the hour repeated when summer time ends a row's time says it is, where the time is written with a
mark: ENTSO-E's exports of the day clocks go back (25 hourly intervals, 100 quarter-hours, in local time) write
the hour's two passes with the zone's summer and winter names after the interval (`02:00 - 03:00 (CEST)`, then
`02:00 - 03:00 (CET)`) or an `A` and a `B` after each clock (`02:00B - 03:00B`, as power exchanges number hour 3A
and 3B). connectors/repeated_hour.py takes a marked row's pass from its mark, an unmarked one's from the file's
order.
"""

from __future__ import annotations

import polars as pl

# the EU's zones' names, winter (second pass: the later UTC offset is the winter one) and summer (first pass)
WINTER_NAMES = ("CET", "EET", "WET", "GMT", "MEZ")
SUMMER_NAMES = ("CEST", "EEST", "WEST", "BST", "MESZ")
SECOND, FIRST = 2, 1


def pass_mark(text: pl.Expr) -> pl.Expr:
    """Per row of a time column's text: SECOND for a mark of the second pass (`(CET)`, `02:00B`), FIRST for one of
    the first (`(CEST)`, `02:00A`), null for none."""
    text = text.cast(pl.String).str.strip_chars()
    zone = text.str.extract(r"\(([A-Z]{3,5})\)$", 1)
    letter = text.str.extract(r"^\S+[ T]\d\d?:\d\d(?::\d\d(?:[.,]\d+)?)?([AB])\s*-", 1)
    return pl.when(zone.is_in(WINTER_NAMES) | (letter == "B")).then(pl.lit(SECOND)) \
        .when(zone.is_in(SUMMER_NAMES) | (letter == "A")).then(pl.lit(FIRST))
