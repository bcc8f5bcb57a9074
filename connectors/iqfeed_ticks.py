"""DTN IQFeed's tick history (its HTT/HTX requests' lines, saved as CSV), which has no header:
`2026-11-30 08:30:01.550485,6849.75,1,1,6849.50,6849.75,100000,C,43,01`, its fields Time Stamp, Last, Last Size,
Total Volume, Bid, Ask, TickID, Basis For Last, Trade Market Center, Trade Conditions. Protocol 6 adds two,
TradeAggressor (0 invalid, 1 buy, 2 sell, 3 neither) and DayCode (the day of the month the trade applies to):
12 fields, the field list of DTN's "Historical via TCP/IP" page (as IQFeed4j's tick schema spells it out), and a
client that keeps the request's id writes it first. Its layout is fixed, so a file of lines in one of these
shapes is read by it: each line a trade (Last, Last Size) with the quote it met (Bid, Ask), the aggressor as the
trade's side (the taker's), stamped in US Eastern time, IQFeed's clock for every timestamp (DTN's docs)."""

from __future__ import annotations

import re

from connectors.column_map import ColumnMap
from connectors.side_maps import IQFEED_AGGRESSOR

IQFEED_NAMES = ("time", "last", "last_size", "total_volume", "bid", "ask", "tick_id", "basis_for_last",
                "trade_market_center", "trade_conditions")
PROTOCOL_6 = ("trade_aggressor", "day_code")  # after IQFEED_NAMES in protocol 6's lines
REQUEST_ID = "request_id"  # before them where the client wrote the request's id (not read: the stream is the file's)
# protocol 6 writes `LH` before a history line's fields (after the request's id): a mark of the message, not read
MESSAGE_ID, HISTORY_MARK = "message_id", "LH"
TRAILING = "trailing_empty"  # the empty field after the comma IQFeed ends each line with (not read)
END_MESSAGE = "!ENDMSG!"  # the line that ends a request's answer (after the request's id, if any): no data
IQFEED_ZONE = "America/New_York"
IQFEED_LAYOUT = ("DTN IQFeed's tick history: a time (US Eastern), last, last size, total volume, bid, ask, tick id, "
                 "basis for last, market center and conditions; each line a trade with the quote it met")
_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?$")
_WHOLE = re.compile(r"^\d+$")
_DECIMAL = re.compile(r"^-?\d+(\.\d+)?$")
_BASIS = re.compile(r"^[A-Z0-9]$")  # Basis For Last: one letter or digit (C a normal trade, E extended hours, O ...)
# hex pairs, one per condition (01: regular); empty where a trade carries none, as a line may write it
_CONDITIONS = re.compile(r"^([0-9A-Fa-f]{2})*$")
_DAY_CODE = re.compile(r"^(0?[1-9]|[12]\d|3[01])$")


def _leading(row: tuple[str, ...]) -> tuple[str, ...]:
    """The names of the fields before a line's time: the request's id, protocol 6's `LH` marker, both or none."""
    for names in ((MESSAGE_ID,), (REQUEST_ID, MESSAGE_ID), (REQUEST_ID,)):
        if len(row) > len(names) and _TIME.match(row[len(names)]) and \
                (names[-1] != MESSAGE_ID or row[len(names) - 1] == HISTORY_MARK):
            return names
    return ()


def _names(row: tuple[str, ...]) -> tuple[str, ...] | None:
    """The names of one line's fields when it has IQFeed's tick shape (the older 10 fields or protocol 6's 12,
    with the request's id and `LH` before them or not, and the comma IQFeed ends a line with or not), else None."""
    ending = (TRAILING,) if len(row) > 1 and row[-1] == "" else ()
    leading = _leading(row)
    fields = row[len(leading):len(row) - len(ending)]
    if len(fields) == len(IQFEED_NAMES) + len(PROTOCOL_6):
        if fields[-2] not in IQFEED_AGGRESSOR or not _DAY_CODE.match(fields[-1]):
            return None
        names = IQFEED_NAMES + PROTOCOL_6
    elif len(fields) == len(IQFEED_NAMES):
        names = IQFEED_NAMES
    else:
        return None
    if not _iqfeed_line(fields[:len(IQFEED_NAMES)]):
        return None
    return (*leading, *names, *ending)


def _iqfeed_line(row: tuple[str, ...]) -> bool:
    """Whether the ten fields of a line have IQFeed's tick shape: its time, a last price within 1% of a bid at or
    under the ask, whole sizes (the day's total volume at least the last size), a whole tick id, a basis code and
    hex conditions (or none)."""
    if not _TIME.match(row[0]):
        return False
    time, last, size, total, bid, ask, tick_id, basis, center, conditions = row
    if not all(_DECIMAL.match(cell) for cell in (last, bid, ask)) or \
            not all(_WHOLE.match(cell) for cell in (size, total, tick_id, center)):
        return False
    last_, bid_, ask_ = float(last), float(bid), float(ask)
    return bool(_BASIS.match(basis) and _CONDITIONS.match(conditions) and int(total) >= int(size)
                and 0 < bid_ <= ask_ <= 1.01 * bid_ and 0.99 * bid_ <= last_ <= 1.01 * ask_)


def iqfeed_ticks(rows: tuple[tuple[str, ...], ...]) -> tuple[ColumnMap, str] | None:
    """The map of a header-less file whose first lines all have one of IQFeed's tick shapes, with the note's
    layout; None otherwise. Its stream is the file's name (IQFeed's lines name no symbol)."""
    shapes = {_names(row) for row in rows}
    if len(shapes) != 1 or (names := shapes.pop()) is None:
        return None
    time = rows[0][names.index("time")]
    fraction = "%.f" if "." in time else ""
    aggressor = "trade_aggressor" in names
    layout = IQFEED_LAYOUT if not aggressor else IQFEED_LAYOUT.replace("market center and conditions;", (
        "market center, conditions, trade aggressor (the trade's side, the taker's: 1 buy, 2 sell, 0 and 3 none) "
        "and day code (not read), protocol 6's;"))
    before = {REQUEST_ID: "a request id", MESSAGE_ID: f"protocol 6's {HISTORY_MARK}"}
    if leading := [before[name] for name in names if name in before]:
        layout = layout.replace("tick history: a time", f"tick history: {' and '.join(leading)} (not read), a time")
    if names[-1] == TRAILING:
        layout += "; each line ends with a comma, its empty last field not read"
    return ColumnMap(ts="time", ts_unit="datetime", ts_format=f"%Y-%m-%d %H:%M:%S{fraction}", tz=IQFEED_ZONE,
                     names=names, price="last", size="last_size", bid="bid", ask="ask",
                     side="trade_aggressor" if aggressor else None,
                     side_map=IQFEED_AGGRESSOR if aggressor else None), layout
