"""DTN IQFeed's tick history (its HTT/HTX requests' lines, saved as CSV), which has no header:
`2026-11-30 08:30:01.550485,6849.75,1,1,6849.50,6849.75,100000,C,43,01`, its fields Time Stamp, Last, Last Size,
Total Volume, Bid, Ask, TickID, Basis For Last, Trade Market Center, Trade Conditions. Its layout is fixed, so a
file of lines in that shape is read by it: each line a trade (Last, Last Size) with the quote it met (Bid, Ask),
stamped in US Eastern time, IQFeed's clock for every timestamp (DTN's docs)."""

from __future__ import annotations

import re

from connectors.column_map import ColumnMap

IQFEED_NAMES = ("time", "last", "last_size", "total_volume", "bid", "ask", "tick_id", "basis_for_last",
                "trade_market_center", "trade_conditions")
IQFEED_ZONE = "America/New_York"
IQFEED_LAYOUT = ("DTN IQFeed's tick history: a time (US Eastern), last, last size, total volume, bid, ask, tick id, "
                 "basis for last, market center and conditions; each line a trade with the quote it met")
_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?$")
_WHOLE = re.compile(r"^\d+$")
_DECIMAL = re.compile(r"^-?\d+(\.\d+)?$")
_BASIS = re.compile(r"^[A-Z0-9]$")  # Basis For Last: one letter or digit (C a normal trade, E extended hours, O ...)
_CONDITIONS = re.compile(r"^[0-9A-Fa-f]{2}([0-9A-Fa-f]{2})*$")  # hex pairs, one per condition (01: regular)


def _iqfeed_line(row: tuple[str, ...]) -> bool:
    """Whether one line has IQFeed's tick shape: its time, a last price within 1% of a bid at or under the ask,
    whole sizes (the day's total volume at least the last size), a whole tick id, a basis code and hex conditions."""
    if len(row) != len(IQFEED_NAMES) or not _TIME.match(row[0]):
        return False
    time, last, size, total, bid, ask, tick_id, basis, center, conditions = row
    if not all(_DECIMAL.match(cell) for cell in (last, bid, ask)) or \
            not all(_WHOLE.match(cell) for cell in (size, total, tick_id, center)):
        return False
    last_, bid_, ask_ = float(last), float(bid), float(ask)
    return bool(_BASIS.match(basis) and _CONDITIONS.match(conditions) and int(total) >= int(size)
                and 0 < bid_ <= ask_ <= 1.01 * bid_ and 0.99 * bid_ <= last_ <= 1.01 * ask_)


def iqfeed_ticks(rows: tuple[tuple[str, ...], ...]) -> tuple[ColumnMap, str] | None:
    """The map of a header-less file whose first lines all have IQFeed's tick shape, with the note's layout; None
    otherwise. Its stream is the file's name (IQFeed's lines name no symbol)."""
    if not rows or not all(_iqfeed_line(row) for row in rows):
        return None
    fraction = "%.f" if "." in rows[0][0] else ""
    return ColumnMap(ts="time", ts_unit="datetime", ts_format=f"%Y-%m-%d %H:%M:%S{fraction}", tz=IQFEED_ZONE,
                     names=IQFEED_NAMES, price="last", size="last_size", bid="bid", ask="ask"), IQFEED_LAYOUT
