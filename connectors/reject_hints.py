"""What a user does about a rejected replay row: `reject_example` says the first row of a reason as they find it
(file, line or row, column) with the hint that fits it (the option that reads the cell, the unit that changed
inside a file, the offset that lifts prices at or below zero). Rows are counted by connectors/rejected_rows.py;
this holds the words, so the counting reads apart from the many cases a hint tells apart.
"""

from __future__ import annotations

import re
from typing import Any

import polars as pl

from connectors.epoch_counts import fraction_of_unit
from connectors.event_time import offset_hours
from connectors.utc_offsets import UTC_OFFSET
from connectors.file_plan import FilePlan
from connectors.row_wires import NO_TRADE, UNREAD_SAID
from connectors.file_scans import BYTE_ORDER_MARK, code_counts, first_text, time_sample
from connectors.histdata_layout import zone_has_dst
from connectors.json_lines import DUPLICATE_KEY, NOT_JSON
from connectors.map_vocabulary import UNITS, VALUE_FIELDS
from connectors.number_separators import DECIMAL_COMMA
from connectors.price_notation import unread_price_hint, yield_columns
from connectors.shifted_prices import NEAR_ZERO_STEPS, ZERO_SIDE, lifting_offset, offset_option
from connectors.stream_names import error_cell_hint
from connectors.ticks import InvalidTick
from connectors.time_hints import epoch_format_hint
from connectors.time_units import epoch_unit
from engine.quoting import quoted

REJECT_HINTS = {  # what a user does about a file's rows rejected for these reasons
    "unknown_side": "; map other side values with side_map in a --columns YAML file (docs/replay.md)",
    "filtered_out": "; not an error: rows left out on purpose and counted (a keep filter's, or rows holding no tick)",
    NOT_JSON: "; the line is skipped and the rest of the file read (a capture cut mid-line, a log line among the "
              "messages)",
    DUPLICATE_KEY: "; the line (a REST dump's record) is skipped and the rest of the file read (its writer's bug: "
                   "write each key once)",
}


def _unit_changed(plan: Any, message: str) -> str:
    """For a time out of range in a file whose epoch unit was read from its first time: the hint that the unit
    changes inside it (Binance's public files went from ms to us on 2025-01-01; a concatenation holds both)."""
    columns = getattr(plan, "columns", None)
    got = re.search(r"got (-?\d+)", message)
    if columns is None or columns.ts_unit not in UNITS or got is None:
        return ""
    raw = int(got[1]) // UNITS[columns.ts_unit]
    if epoch_unit(raw) == columns.ts_unit:
        return ""
    if getattr(plan, "unit_given", False):
        return (f"; the unit given is {columns.ts_unit}, which does not fit this time ({raw}): as "
                f"{epoch_unit(raw)} it is a present-day time; give the unit the column counts, --ts-unit "
                f"{epoch_unit(raw)}")
    return (f"; the file's times were read as {columns.ts_unit} (its first time's magnitude), but this one is "
            f"{epoch_unit(raw)}: if the unit changes inside the file (Binance's public files went from ms to us on "
            f"2025-01-01), read the parts as separate files, each with its own unit")


# Zero or below on this many of a file's trade prices, and this share of them, is a market that trades there (a
# power market's hours at 0: 176 of 372 prints), not a bad print or two
FREQUENT_NONPOSITIVE = (10, 0.01)


SHIFTS_THEM = "an offset (--price-offset) shifts them above zero"


def price_offset_hint(err: InvalidTick, plan: Any) -> str:
    """Why an offset is the way out for an instrument that trades at zero or below: said once a price below zero is
    seen, or when a file's prices are zero or below on FREQUENT_NONPOSITIVE rows that trade (a count and a share);
    never for a lone 0 (bad data, or a bar without trades, which is filtered_out) unless its stream's other prices
    lie a few price steps above zero (a spread: `near_zero_hint`). '' when none of these holds."""
    if settled(err, plan):  # said by reject_example: no offset for a contract's settlement at 0
        return ""
    if re.search(r"got -\d", err.message):
        return f"; the files hold prices below zero (a spread, a power market): {SHIFTS_THEM}"
    if getattr(plan, "nonpositive_prices", False):
        return f"; every trade price of {plan.given_name} is zero or below: for an instrument that trades there, " \
               f"{SHIFTS_THEM}"
    nonpositive, trading = getattr(plan, "nonpositive_rows", (0, 0))
    if nonpositive >= FREQUENT_NONPOSITIVE[0] and nonpositive >= FREQUENT_NONPOSITIVE[1] * trading:
        return f"; {nonpositive} of the {trading} trade prices of {plan.given_name} are zero or below, too many to " \
               f"be bad prints: for an instrument that trades there (a power market's hours at 0), {SHIFTS_THEM}"
    return near_zero_hint(err, plan, "trade prices", "bad data")


def settled(err: InvalidTick, plan: Any) -> bool:
    """Whether a 0 price is the settlement of its stream, a contract priced within [0, 1] (FilePlan.settling_streams:
    its 0s come after its last price above 0)."""
    settling = getattr(plan, "settling_streams", frozenset())
    return err.stream in settling or "" in settling


def near_zero_hint(err: InvalidTick, plan: Any, prices: str, not_what: str) -> str:
    """Why an offset is the way out for a 0 price (a trade's, or a quote's bid or ask: its ``prices``) of a stream
    whose other prices lie a few price steps above zero (FilePlan.near_zero_streams, one rule for trades and
    quotes): a spread's 0 is a price, not ``not_what``. '' for any other stream."""
    near_zero = getattr(plan, "near_zero_streams", frozenset())
    if err.stream in near_zero or "" in near_zero:
        return f"; {err.stream}'s other {prices} lie within {NEAR_ZERO_STEPS} price steps of zero (a spread), " \
               f"where 0 is a price, not {not_what}: {SHIFTS_THEM}"
    return ""


def _stream_hint(plan: Any) -> str:
    """What a user does about a stream name that cannot be a topic. A fixed name (the file's) is renamed with
    stream_name; a column's values are the file's streams: one fixed name would merge them all into one."""
    columns = getattr(plan, "columns", None)
    if columns is None:  # a DBN file's names are its symbology's
        return " (docs/wire-protocol.md#stream-names)"
    if columns.stream_col is None:
        return "; name the stream with --columns ...,stream_name=NAME (docs/wire-protocol.md#stream-names)"
    return ("; the file's own value: fix it at the source, or name the streams by other columns with --columns "
            "...,stream=COLUMN (or COL1+COL2), not stream_name=NAME, which would merge every stream into one "
            "(docs/wire-protocol.md#stream-names)")


def _decimal_comma_hint(plan: Any, text: str, column: str) -> str:
    """The option that reads `61837,63` when its column was not read with a decimal comma."""
    dialect, columns = getattr(plan, "dialect", None), getattr(plan, "columns", None)
    if not DECIMAL_COMMA.match(text.strip()) or dialect is not None and dialect.decimal_comma_of(column) or \
            getattr(columns, "decimal", None) == "comma":
        return ""
    return "; --columns ...,decimal=comma if the comma is its decimal mark"


# a number with a word after it, as a spreadsheet's unit format writes it: `61.836,63 EUR`, `1.500 Stk`, `0,5 %`
NUMBER_AND_UNIT = re.compile(r"^[+-]?\d[\d.,'\s\u00a0\u202f]*?\s*(?P<unit>[^\W\d_]{1,5}|%)\.?$")


def _number_unit_hint(text: str, plan: Any, column: str) -> str:
    """What a cell that did not read says when a unit follows its number (a currency sign alone is read); where its
    column writes two codes (`GBX` beside `GBP`), their counts, and no advice to remove them, which would read pence
    and pounds as one series (review440 #4)."""
    found = NUMBER_AND_UNIT.match(text.strip())
    if not found:
        return ""
    codes = code_counts(plan.path, plan.columns, plan.dialect, column) if isinstance(plan, FilePlan) else {}
    if len(codes) > 1:
        counted = ", ".join(f"{quoted(code)} in {n:,} cell{'s' if n != 1 else ''}" for code, n in codes.items())
        return (f"; the column writes {len(codes)} units after its numbers ({counted}, of its first rows): its "
                f"prices are in {len(codes)} units, so removing them would read those as one series, each step "
                f"between them a move: write every cell in one unit before the replay")
    return (f"; {quoted(found['unit'])} after the number is a unit: remove it from the file (in Excel, format the "
            "cells as Number before saving as CSV)")


# q's typed nulls and infinities as `save` and `0:` write them (`0n` float, `0N` long, `0Nj`, `0Np` timestamp, ...):
# no value, not a number with a unit after it (review324 #9)
Q_NULL = re.compile(r"^-?0[nNwW][hijefpmdznuvt]?$")


def _q_null_hint(text: str) -> str:
    """What a cell that did not read says when it is a q null or infinity (`0n`, `0N`, `0Nj`, `0w`), else ''."""
    if not Q_NULL.match(text.strip()):
        return ""
    what = "an infinity" if "w" in text.lower() else "null: no value"
    return (f" ({quoted(text.strip())} is q's {what}, as a kdb+ export writes it: the row has no such value; drop such "
            f"rows in q before the export, e.g. select from t where not null price, or leave them rejected)")


def _unit_hint(text: str, plan: Any, column: str) -> str:
    """What a cell that did not read says: q's null (`_q_null_hint`), or a unit after its number."""
    if q_null := _q_null_hint(text):
        return q_null
    return _number_unit_hint(text, plan, column)


def _unread_cell(plan: Any, row: int, column: str) -> str:
    """Why a row's cell was read as missing: empty, or its text (a CSV's) that is no number or no time the map
    reads; a time the clocks skipped only in a zone that changes its clocks."""
    if column == plan.column_of("side"):
        return ""
    text = plan.cell_text(row, column) if hasattr(plan, "cell_text") else None
    if text is not None and not text.strip():
        return ": empty"
    if column in (plan.column_of("price"), plan.column_of("bid"), plan.column_of("ask")) and text is not None:
        return f": {quoted(text)} is not a number{unread_price_hint(text, getattr(plan, 'columns', None))}" \
            f"{_decimal_comma_hint(plan, text, column)}{_unit_hint(text, plan, column)}"
    if column != plan.column_of("ts"):
        return f": {quoted(text)} is not a number{_decimal_comma_hint(plan, text, column)}" \
               f"{_unit_hint(text, plan, column)}" if text is not None else ": empty, or not a number"
    ts_format = getattr(getattr(plan, "columns", None), "ts_format", None)
    if text is not None and ts_format and (epoch := epoch_format_hint(text, ts_format)) is not None:
        return f": {quoted(text)}: {epoch}"
    if text is not None and (fraction := fraction_of_unit(text, getattr(plan.columns, "ts_unit", ""))) is not None:
        return f": {quoted(text)} holds {fraction}"
    if text is not None and (first := _offset_it_lacks(plan, text)) is not None:
        return (f": {quoted(text)} lacks the UTC offset the file's other times carry (the first of them: "
                f"{quoted(first)}), so it is no instant: write the row with its offset")
    zone = getattr(getattr(plan, "columns", None), "tz", None)
    clock = f", or a local time the clocks skipped in {zone} (a DST change)" if zone and zone_has_dst(zone) else ""
    if text is not None and text.startswith(BYTE_ORDER_MARK):  # a number column cannot drop it (file_scans.py)
        clock += (": it starts with a byte-order mark (U+FEFF), as where two exports were joined (cat a.csv b.csv); "
                  "remove the mark from the file")
    return f": {quoted(text)} is not a time the map reads{clock}" if text is not None else \
        f": empty, or not a time the map reads{clock}"


def _unread_offset(plan: Any, row: int) -> tuple[str, str] | None:
    """(the column, why) of a row whose time is read at its `utc_offset` cell (LSEG's `GMT Offset`) and whose cell
    there is empty or no offset: its time alone is a wall clock, no instant; None where the cell reads."""
    offset = getattr(getattr(plan, "columns", None), "utc_offset", None)
    if offset is None or not hasattr(plan, "cell_text") or offset not in getattr(plan, "schema", ()):
        return None
    cell = plan.cell_text(row, offset) or ""  # (a CSV's empty cell reads as null)
    if pl.select(offset_hours(pl.lit(cell))).item() is not None:
        return None
    time = plan.cell_text(row, plan.column_of("ts"))
    unread = "empty" if not cell.strip() else f"{quoted(cell)} is no UTC offset (hours: 1, +5.5, 1,0; or +05:30)"
    return offset, (f": {unread}; the row's time{'' if time is None else ' ' + quoted(time)} is a wall-clock time "
                    f"read at its offset, so without one it is no instant: write the row's offset")


def needing_offsets(lowest: dict[str, float], plan: Any) -> dict[str, float]:
    """The streams whose prices at or below zero an offset should lift: those below zero, and those at 0 where 0
    is a price (a spread a few steps above zero, a file whose zeros trade: `price_offset_hint`, a stream trading
    down to 0: FilePlan.crossing_streams), not an outright's lone 0 print beside them (lifted, that bad print would
    become a price of 1 in a market at 110)."""
    near = getattr(plan, "near_zero_streams", frozenset()) | getattr(plan, "crossing_streams", frozenset())
    nonpositive, trading = getattr(plan, "nonpositive_rows", (0, 0))
    zeros_trade = getattr(plan, "nonpositive_prices", False) or "" in near or (
        nonpositive >= FREQUENT_NONPOSITIVE[0] and nonpositive >= FREQUENT_NONPOSITIVE[1] * trading)
    return {stream: low for stream, low in lowest.items() if low < 0 or zeros_trade or stream in near}


def _offset_it_lacks(plan: Any, text: str) -> str | None:
    """The file's first time, when it carries a UTC offset (so the file's times are read at their offsets) and
    the unread time `text` has none: a naive row among aware ones, which no offset can be guessed for."""
    cmap = getattr(plan, "columns", None)
    if not isinstance(plan, FilePlan) or cmap.ts_unit != "datetime" or UTC_OFFSET.search(text.strip()):
        return None
    first = (first_text if cmap.ts_format else time_sample)(plan.path, cmap.names, plan.dialect, cmap.ts_columns)
    return first if first is not None and UTC_OFFSET.search(first) else None


def empty_names_hint(plan: Any, column: str) -> str:
    """For a file's stream column with empty values (kdb+'s null symbol written as "", a blank cell): how many, and
    the ways to read the file anyway; '' when the plan cannot count them (no frame with a stream column)."""
    frame = getattr(plan, "frame", None)
    if frame is None or "stream" not in frame.collect_schema().names():
        return ""
    empty = frame.select((pl.col("stream").is_null() | (pl.col("stream") == "")).sum()).collect().item()
    if not empty:
        return ""
    return (f"; column {quoted(column)} has {empty:,} empty value{'s' if empty != 1 else ''} (an empty name, as "
            f"kdb+ writes its null symbol, or a blank cell): no stream to read {'it' if empty == 1 else 'them'} "
            f"into; give every row one stream with --columns stream_name=NAME, or leave such rows out with a filter "
            f"(--streams, or a keep filter on {quoted(column)}: docs/replay.md)")


def reject_example(err: InvalidTick, plan: Any, row: int, cause: str | None = None) -> str:
    """A reject's row as a user finds it (file, line or row, column) and what to do about it."""
    column = next((plan.column_of(f) for f in ("ts", "stream", *VALUE_FIELDS)
                   if (err.message.startswith(f"{f} ") or f"'{f}'" in err.message or f'"{f}"' in err.message)
                   and plan.column_of(f)),
                  None)
    why = REJECT_HINTS.get(err.reason, "") if cause != "selection" else \
        "; not an error: ticks of the streams not selected"
    if err.reason == "filtered_out" and err.message.startswith(NO_TRADE):
        why = "; not an error"
    if err.reason == "ts_out_of_range":
        why = _unit_changed(plan, err.message)
    if err.reason == "bad_stream":
        why = _stream_hint(plan)
    if err.reason == "missing_stream" and column is not None and hasattr(plan, "cell_text"):
        why = error_cell_hint(plan.cell_text(row, column)) or empty_names_hint(plan, column)  # `#N/A N/A`, ``
    if err.reason == "crossed_quote" and (columns := getattr(plan, "columns", None)) is not None \
            and yield_columns(columns):  # a yield's bid is above its ask: the quote is no crossed book
        why = (f"; {quoted(columns.bid)} and {quoted(columns.ask)} are named as yields, and a yield quote's bid is "
               "above its ask: convert yields to prices to replay them (docs/replay.md#yield-quoted-instruments)")
    if err.reason == "nonpositive_price" and settled(err, plan):
        top = getattr(plan, "settle_top", 1)
        cents = " (a prediction market's cents)" if top == 100 else ""
        why = (f"; {err.stream}'s other trade prices all lie within 0 to {top}{cents} and this 0 comes after them: a "
               f"contract priced as a probability (a prediction market's share) settling at 0 as it resolves, not a "
               f"trade, and rightly left out: no --price-offset, which would move every price of the contract and "
               f"every bps answer with it")
    if err.reason == "negative_size" and err.message.startswith("size "):
        why = "; if its sign is the side (negative: a sell), give --columns ...,signed_size=true"
    if err.reason == "missing_field" and column is not None:  # a typed read makes an unreadable cell null
        said = err.message.endswith(UNREAD_SAID)  # row_wires.unread_number_reject: the cell and its hint, no more
        why = _unread_cell(plan, row, column)
        if column == plan.column_of("ts") and (unread := _unread_offset(plan, row)) is not None:
            column, why = unread  # (review440 #11: the time was blamed, its offset cell left empty)
        columns = getattr(plan, "columns", None)
        side = column in (plan.column_of("bid"), plan.column_of("ask"))
        if "one-sided quote" in err.message or "neither side" in err.message:
            why = ""  # the message says what the empty or 0 side means
        elif side and columns is not None and columns.quote_sides is not None and not said:  # a BID before any ASK
            why = (f": one side of a quote, and no row of the other side (column {quoted(columns.quote_sides)}) came "
                   f"before it in its stream to take that from")
        if side and getattr(plan, "empty_sides", False) and not said:
            why += ("; Tardis.dev leaves a side empty when the book has no orders there (an option far out "
                    "of the money): such a quote has no bid and ask to replay")
        elif side and _traded(plan, row) and "one-sided quote" in err.message:
            # fill_quotes fills quote rows without a trade: this row's trade is read, its book had one side
            # (review433 #5: a stock sealed at its limit-up, bids and no offers, was told to fill_quotes)
            why += ("; the row's trade is read, beside a book with one side: a stock sealed at its price limit "
                    "(limit-up: bids, no offers; limit-down: offers, no bids) trades so, and no quote tick holds it")
        elif side and columns is not None and not columns.fill_quotes and "is 0 beside" not in err.message \
                and "is not a number" not in why and not said:  # a value there (`110-15+`) is no side left empty
            why += ("; if the file leaves a side empty where it did not change, not where there is none, "
                    "--columns ...,fill_quotes=true carries the stream's previous one")
    if ZERO_SIDE.search(str(err)) and (near := near_zero_hint(err, plan, "quotes", "a missing side")):
        # a spread quoted 0.00/0.01: an offset that lifts its 0s (its prices below zero, if any, are nonpositive_price
        # rejects, whose own line names the offset that lifts the lowest: this row's 0 is not the files' lowest)
        why += f"{near}, e.g. {offset_option(err.stream, lifting_offset(0.0))} (docs/replay.md)"
    said = str(err)
    if err.reason == "missing_field" and WIRE_SIZELESS in said:  # a file's row, not a wire client's tick
        said = said.split(WIRE_SIZELESS)[0] + FILE_SIZELESS
    return f"{plan.where(row)}: {said}" + (f" (column {quoted(column)}{why})" if column else why)


def _traded(plan: Any, row: int) -> bool:
    """Whether a file's row holds a trade's price beside its quote (a CSV's cell, or a Parquet text column's)."""
    column = plan.column_of("price") if hasattr(plan, "cell_text") else None
    return column is not None and bool((plan.cell_text(row, column) or "").strip())


WIRE_SIZELESS = "; a price series without sizes"  # connectors/ticks.py's advice to a wire client
# what a file's empty size is (review373 #4: the wire's advice, "send it with size 1", fits no file)
FILE_SIZELESS = ("; its stream has sizes on other trade rows, so this empty one is a cell lost, not a price series "
                 "(a stream none of whose trade rows has a size, an index level, reads as trades of size 1: "
                 "docs/replay.md#price-series)")
