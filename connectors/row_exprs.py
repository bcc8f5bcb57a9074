"""What a tabular file's rows are read as: the polars expressions of its wire fields (a CSV's numbers as it writes
them, prices in 32nds, the stream's name from one column or several, a sequence number, a book export's columns,
quotes filled from the row before) and the file's rows numbered (`ROW`). connectors/planning.py builds a file's
plan from them; the one pass of facts (connectors/file_facts.py) and the notes read the same rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import polars as pl

from connectors.bidding_zones import zone_of_area
from connectors.bloomberg_names import yellow_key_dropped
from connectors.column_map import ColumnMap
from connectors.column_names import (
    ASK_ROWS,
    BID_ROWS,
    CONTRACT_MONTH_NAMES,
    MONTH_NAMES,
    PROMPT_NAMES,
    RIGHT_NAMES,
    SHARE_CLASS_NAMES,
    STRIKE_NAMES,
    TRADE_MARKS,
)
from connectors.csv_dialect import Dialect
from connectors.epoch_counts import WHOLE_TEXT_UNITS, is_text_count
from connectors.field_names import normal_name
from connectors.file_scans import SAMPLE_ROWS, currency_codes, distinct_text, is_csv, scan_file
from connectors.formula_guard import EXPORT_SEQ, is_export_header, unguarded
from connectors.json_lines import is_json_lines
from connectors.junk_lines import junk_lines
from connectors.keep_filter import planned_keep
from connectors.layout import databento_book
from connectors.level_book import L2_SIGNS, TARDIS_L2
from connectors.map_options import Refine
from connectors.map_vocabulary import (
    DAY_CLOCK_UNITS,
    EXCEL_DAYS,
    NUMERIC_FIELDS,
    PRICE_FIELDS,
    QUOTE_FIELDS,
    VALUE_FIELDS,
)
from connectors.number_separators import COMMA_GROUPED, CURRENCY_SIGN, DOT_GROUPED, GROUP_MARKS, SPACE_GROUPED
from connectors.price_notation import FRACTIONAL_FORMS, fractional_price
from connectors.onchain_swaps import swap_value
from connectors.row_order import SEQ
from connectors.sequence_watch import INNER_BITS
from connectors.size_readings import capped_size
from connectors.stream_names import ERROR_CELL, SLASH, SLASH_AS


ROW = "_row"  # the file row number, carried through a sort so a rejected row can be named


def csv_overrides(cmap: ColumnMap, first: str | None = None) -> dict[str, pl.DataType]:
    """How a CSV's columns are read; `first`: the time column's first value written with a point, else its first
    value. Decimal epoch seconds stay text until scaled_ts: as a float, 1717236000.25 s is off by ~100 ns. So do
    counts of ms, us and ns with a point or an exponent in any row (Gate.io's create_time_ms, "1548000000123.456";
    R's "1.709967601e12"; epoch_counts.TEXT_COUNT), read exactly to the ns as JSON's are; others
    are Int64, so that a junk line's text there reads as no cell (connectors/junk_lines.py)."""
    text_counts = dict.fromkeys(WHOLE_TEXT_UNITS, pl.String) if first is not None and is_text_count(first) else {}
    ts_type = {"datetime": pl.String, "s": pl.String, **text_counts,
               **dict.fromkeys((*DAY_CLOCK_UNITS, EXCEL_DAYS), pl.Float64)}.get(cmap.ts_unit, pl.Int64)
    out: dict[str, pl.DataType] = {c: pl.String for c in cmap.keep or ()}  # compared as text
    # numbers are read as text and parsed by _csv_number (grouping commas, German Excel's `42.002,00`)
    out |= {getattr(cmap, f): pl.String for f in NUMERIC_FIELDS if getattr(cmap, f)}
    out |= {column: pl.String for column in cmap.stream_columns}
    out |= dict.fromkeys(cmap.sequence_columns, pl.String)  # whole numbers, read by _sequence_number
    if len(cmap.ts_columns) > 1:  # a date column's text, beside its time's (a time of day: a number after midnight)
        return out | {column: pl.String for column in cmap.ts_columns[:-1]} | {cmap.ts_columns[-1]: (
            ts_type if cmap.ts_unit in DAY_CLOCK_UNITS else pl.String)}
    return out | {column: ts_type for column in cmap.ts_columns}


def stream_names(cmap: ColumnMap) -> pl.Expr:
    """The name of the stream each row goes to, as replay reads it (of a map with a stream column)."""
    return replayed_names(_stream_column(cmap), cmap)


def replayed_names(raw_stream: pl.Expr, cmap: ColumnMap) -> pl.Expr:
    """The stream column as written, as stream names: '/' separates answer topics, so EUR/USD replays as EUR-USD;
    NFC: see check_normalized. `ESZ4 Index` as `ESZ4`, as a file so named is read (a joined contract's parts are no
    securities); `BZN|DE-LU` as `DE-LU`, as the header of ENTSO-E's older layout names it."""
    named = zone_of_area(yellow_key_dropped(raw_stream)) if len(cmap.stream_columns) == 1 else raw_stream
    return named.str.replace_all(SLASH, SLASH_AS, literal=True).str.normalize("NFC")


def _stream_column(cmap: ColumnMap) -> pl.Expr:
    """The stream column as text without spaces at its ends (a stray one is no part of a name; OCC's padding
    inside is kept; an error value, ERROR_CELL, is none), or the values of several joined by a space
    (`stream_col: a+b+c`), each in one canonical form so that a contract is one stream however a cell writes it
    (`_contract_part`). An empty or null part is left out (TAQ's SYM_SUFFIX of a common stock: `AAPL`, not
    `AAPL ` nor no stream), and a share class's suffix (SHARE_CLASS_NAMES) and an LME prompt (PROMPT_NAMES)
    join with a `.` (`BRK.B`, `CAD.3M`)."""
    if len(cmap.stream_columns) == 1:
        name = pl.col(cmap.stream_col).cast(pl.String).str.strip_chars(" ")
        return pl.when(~name.str.contains(ERROR_CELL)).then(name)  # `#N/A N/A`: no stream (missing_stream)
    parts = []
    for position, column in enumerate(cmap.stream_columns):
        part = _contract_part(column)
        separator = "" if position == 0 else "." if normal_name(column) in (*SHARE_CLASS_NAMES, *PROMPT_NAMES) else " "
        parts.append(pl.when(part != "").then(pl.lit(separator) + part))  # empty or null: null, skipped below
    joined = pl.concat_str(parts, ignore_nulls=True)
    joined = pl.when(parts[0].is_null()).then(joined.str.slice(1)).otherwise(joined)  # no first part: no separator
    return pl.when(joined != "").then(joined)  # every part empty: no stream (missing_stream)


# A contract month written as a month and a year (`03.2025`, `12.2030`; German and French exports' `MM.YYYY`)
MONTH_AND_YEAR = r"^(0?[1-9]|1[0-2])\.(19|20)\d\d$"


def _contract_part(column: str) -> pl.Expr:
    """One part of a contract's name: a number with a decimal point in its shortest exact form (a strike
    `150.00`, `0150.0`, a Parquet float 150.0 -> `150`; `150.50`, `.5` -> `150.5`, `0.5`), a put/call column's
    value as C or P (`c`, `Call`, `CALL` -> `C`); other text (an integer too: an expiry's `0119`) as written, less
    spaces at its ends. A contract month is a date, no number: a contract-month column's value (Eurex's `Verfall`)
    and, outside a strike column, a month and year (`03.2025`, `10.2030`) are kept as written (`FDAX 03.2025`;
    read as numbers they were `3.2025` and `10.203`: review373 #2)."""
    text = pl.col(column).cast(pl.String).str.strip_chars()
    normal = normal_name(column)
    if normal in CONTRACT_MONTH_NAMES or normal in MONTH_NAMES:
        return text
    shortest = (text.str.replace(r"0+$", "").str.replace(r"\.$", "")  # the fraction's trailing zeros, a bare point
                .str.replace(r"^([+-]?)0+(\d)", "${1}${2}").str.replace(r"^([+-]?)\.", "${1}0."))  # leading zeros
    number = text.str.contains(r"^[+-]?(\d+\.\d*|\.\d+)$")
    if normal not in STRIKE_NAMES:
        number = number & ~text.str.contains(MONTH_AND_YEAR)
    text = pl.when(number).then(shortest).otherwise(text)
    if normal_name(column) not in RIGHT_NAMES:
        return text
    upper = text.str.to_uppercase()
    return pl.when(upper.is_in(["C", "CALL"])).then(pl.lit("C")) \
        .when(upper.is_in(["P", "PUT"])).then(pl.lit("P")).otherwise(text)


def sequence_key(columns: tuple[str, ...], schema: Mapping[str, Any], as_text: bool) -> pl.Expr:
    """A row's sequence number: one column's whole number, or two joined (`block_number+log_index`: the outer
    number shifted past the inner's INNER_BITS, so that one Int64 orders by the first, then the second; null, the
    row rejected as missing_field, where either is no whole number or out of its range)."""
    numbers = [_sequence_number(c, pl.String if as_text else schema[c]) for c in columns]
    if len(numbers) == 1:
        return numbers[0]
    outer, inner = numbers
    fits = (outer >= 0) & (outer < 1 << (63 - INNER_BITS)) & (inner >= 0) & (inner < 1 << INNER_BITS)
    return pl.when(fits).then(outer * (1 << INNER_BITS) + inner)


def _sequence_number(column: str, dtype: pl.DataType) -> pl.Expr:
    """A row's sequence number as an Int64: an integer column as it is, a float or text one where it holds a whole
    number; null where the cell is empty or holds anything else (the row is rejected as missing_field)."""
    if dtype.is_integer():
        return pl.col(column).cast(pl.Int64, strict=False)
    if dtype.is_float() or dtype.is_decimal():
        return _whole_float(pl.col(column).cast(pl.Float64))
    text = pl.col(column).cast(pl.String).str.strip_chars()
    # a CSV's `1001.0` (pandas writes an int column with a gap as floats), `1.001e3`: as Parquet's float column.
    # The integer reading comes first: a number past 2**53 keeps every digit
    return pl.coalesce(text.cast(pl.Int64, strict=False), _whole_float(text.cast(pl.Float64, strict=False)))


def _whole_float(number: pl.Expr) -> pl.Expr:
    """A float as an Int64 where it is a whole number; null otherwise (`6.5`, NaN, infinity)."""
    return pl.when(number.is_finite() & (number == number.floor())).then(number.cast(pl.Int64, strict=False))


def _export_seq(dtype: Any) -> pl.Expr:
    """An export's `seq` column as the wire's field: a whole number (a CSV's read as text first, so a uint64 past
    2**63 keeps its digits), empty where the tick was sent without one."""
    seq = pl.col(EXPORT_SEQ)
    return (seq.cast(pl.UInt64, strict=False) if dtype.is_integer() else
            seq.cast(pl.String).str.strip_chars().cast(pl.UInt64, strict=False)).alias(EXPORT_SEQ)


class RowExprs(NamedTuple):
    """What a file's rows are read as: the `_ts` expression first, then the wire fields' (`keys`), the keep
    columns', a book export's, the sequence number's."""

    exprs: list[pl.Expr]
    keys: list[str]
    raw_stream: pl.Expr  # the stream column as written (before '/' -> '-' and NFC), for the notes on its names
    price_texts: dict[str, pl.Expr]  # price, bid, ask read from text: what may be written in 32nds
    book: str | None  # the Databento order-book export the file is (`_book_kind`)
    notes: list[str]  # the book's
    # what the UNREAD_CELL expression reads besides the fields' own columns: computed first (`frame_of`)
    unread_inputs: list[pl.Expr]


def row_exprs(path: Path, given: ColumnMap | Refine | None, cmap: ColumnMap, schema: Mapping[str, Any],
               dialect: Dialect | None, overrides: dict[str, pl.DataType] | None, ts: pl.Expr) -> RowExprs:
    """The expressions each row of the file is read with, `ts` (its time) first."""
    exprs = [ts]
    keys: list[str] = []
    raw_stream = _stream_column(cmap) if cmap.stream_col else pl.lit("")
    if is_csv(path) and cmap.stream_col == "stream" and is_export_header(list(schema)):
        raw_stream = unguarded(raw_stream)  # flashtick's own export: its formula guard off (`@ES`, not `'@ES`)
    if cmap.stream_col:
        exprs.append(replayed_names(raw_stream, cmap).alias("stream"))
        keys.append("stream")
    value_exprs, value_keys, price_texts, unread_inputs = _value_columns(cmap, schema, dialect,
                                                                         currency_codes(path, cmap, dialect))
    exprs += value_exprs
    keys += value_keys
    if EXPORT_SEQ in schema and is_export_header(list(schema)):  # flashtick's own export: each tick's wire seq
        exprs.append(_export_seq(schema[EXPORT_SEQ]))  # (sent by `feed replay`: a live serve drops its repeats)
        keys.append(EXPORT_SEQ)
    exprs += [pl.col(column).alias(planned_keep(i, column)) for i, column in enumerate(cmap.keep or ())]  # after keys
    book, notes = _book_kind(path, given, cmap, schema, dialect)
    if book == TARDIS_L2:
        exprs += _level_columns(schema)
    elif book is not None:
        exprs += _book_columns(schema)
    if cmap.sequence is not None:  # last before the row number: file_plan.py reads it at row[-2]
        exprs.append(sequence_key(cmap.sequence_columns, schema, bool(overrides)).alias(SEQ))
    return RowExprs(exprs, keys, raw_stream, price_texts, book, notes, unread_inputs)


def frame_of(rows: pl.LazyFrame, exprs: list[pl.Expr], unread_inputs: list[pl.Expr]) -> pl.LazyFrame:
    """The file's rows read with `exprs`, then the row number (ROW). The UNREAD_CELL expression among them reads
    the fields' numbers as computed (and `unread_inputs`), so it comes after them: polars computes a subexpression
    shared by two expressions of one select twice (no common-subexpression elimination through when/then), and
    each number cell's parse, its few regexes, ran again for it: ~70% of a CSV's read (60,000 rows: 789 ms of
    CPU, 553 of them for it alone)."""
    names = [expr.meta.output_name() for expr in exprs] + [ROW]
    if UNREAD_CELL not in names:
        return rows.select(*exprs, ROW)
    at = names.index(UNREAD_CELL)
    return rows.select(*exprs[:at], *exprs[at + 1:], *unread_inputs, ROW).with_columns(exprs[at]).select(names)


def _value_columns(cmap: ColumnMap, schema: Mapping[str, Any], dialect: Dialect | None, codes: Mapping[str, str]
                   ) -> tuple[list[pl.Expr], list[str], dict[str, pl.Expr], list[pl.Expr]]:
    """The wire fields' expressions (price, size, bid, ...: numbers as a CSV writes them, prices in 32nds), their
    keys, the text of each price field read from text (what the notes on 32nds and yields look at), and what the
    UNREAD_CELL expression reads besides the fields (`_unread_cell`). `codes`: the currency code each CSV column
    writes after its numbers (`currency_codes`), read without it."""
    exprs: list[pl.Expr] = []
    keys: list[str] = []
    price_texts: dict[str, pl.Expr] = {}  # price, bid, ask read from text: what may be written in 32nds
    # by column: (field, text, number, whether the field's own column holds the number as read), numbers from text
    unread: dict[str, tuple[str, pl.Expr, pl.Expr, bool]] = {}
    for key in VALUE_FIELDS:
        if (name := getattr(cmap, key)) is not None:
            text = key in NUMERIC_FIELDS and schema[name] == pl.String  # Parquet of JSON: Coinbase's "42290.12"
            if key in PRICE_FIELDS and (text or dialect is not None):
                price_texts[key] = pl.col(name).cast(pl.String).str.strip_chars()
            if key in NUMERIC_FIELDS and dialect is not None:  # a CSV's numbers, read as text
                raw = pl.col(name).cast(pl.String).str.strip_chars()
                raw = raw.str.replace(rf"\s*{codes[name]}$", "") if name in codes else raw  # `61.836,63 EUR`
                col = _csv_number(raw, dialect.decimal_comma_of(name))
                col = capped_size(raw, col) if key == "size" else col  # TRACE's `5MM+`: its cap
                if key in price_texts and cmap.price_format in FRACTIONAL_FORMS:
                    col = fractional_price(raw, col, cmap.price_format)
                # empty: null (filled by filled_quotes, else a one-sided quote); unreadable: NaN, so that it is
                # refused as unreadable, never filled nor called a one-sided quote
                if cmap.fill_quotes and key in QUOTE_FIELDS or key in ("bid", "ask"):
                    col = pl.when(raw.is_null() | (raw == "")).then(None).otherwise(col.fill_null(float("nan")))
            elif key in price_texts and cmap.price_format in FRACTIONAL_FORMS:
                col = fractional_price(price_texts[key], price_texts[key].cast(pl.Float64, strict=False),
                                       cmap.price_format)
            elif text:  # Parquet's text numbers read as a CSV's cells: `61,837.63`, or `61.837,63` by its `decimal`
                raw = price_texts.get(key, pl.col(name).str.strip_chars())
                col = _csv_number(raw, cmap.decimal == "comma")
                col = capped_size(raw, col) if key == "size" else col
            elif schema[name].is_decimal():
                col = pl.col(name).cast(pl.Float64, strict=False)
            elif schema[name] == pl.Float32:  # its shortest decimal: a float32 0.02 widened is 0.019999999552965164,
                # digits no writer meant, which then show in sizes, VWAPs and the tick log (review284 #7)
                col = pl.col(name).cast(pl.String).cast(pl.Float64, strict=False)
            else:
                col = pl.col(name)
            number = col
            if cmap.quote_sides is not None:  # Bloomberg's `type`: the one field this row's value is
                col = _quote_side_field(cmap, key, col)
            col = swap_value(key, col, cmap)  # a DEX export's base units and sqrtPriceX96
            if key in NUMERIC_FIELDS and (dialect is not None or text) and name not in unread:
                unread[name] = (key, pl.col(name).cast(pl.String).str.strip_chars(), number, col is number)
            exprs.append(col.alias(key))
            keys.append(key)
    if cmap.price is not None and cmap.size is None:  # a price series: each price a trade of size 1
        exprs.append(pl.lit(1.0).alias("size"))
        keys.append("size")
    unread_inputs: list[pl.Expr] = []
    if unread:  # last: file_plan.py pops it before the row is sent
        cell, unread_inputs = _unread_cell(unread)
        exprs.append(cell.alias(UNREAD_CELL))
        keys.append(UNREAD_CELL)
    return exprs, keys, price_texts, unread_inputs


TS_BEYOND = "ts_beyond"  # the key of a row's time int64 ns do not hold, in s since the epoch (null: none)
UNREAD_CELL = "unread_cell"  # the key of a row's first number cell that did not read: "!field\ttext" or "?field\t..."


def _unread_cell(unread: dict[str, tuple[str, pl.Expr, pl.Expr, bool]]) -> tuple[pl.Expr, list[pl.Expr]]:
    """A row's first number cell (price, size, bid, ...; each column once) that is not empty and did not read, as
    "!field\ttext" where it holds a spreadsheet's or terminal's error value (ERROR_CELL: Bloomberg's `#N/A N/A`,
    Excel's `#VALUE!`), else "?field\ttext"; null where every one read. `unread`: by column, (field, text, number,
    whether the field's column holds that number). file_plan.py rejects such a row as error_value, or as
    missing_field where it then holds no price, bid or ask, its cell quoted (both were unknown_kind, as if the cell
    were empty: review374 #2, #8). The expression reads the fields' columns and the columns of the second list
    (each cell's text; a number the field's column does not hold as read), computed before it (`frame_of`)."""
    cells, inputs = [], []
    for i, (field, text, number, in_field) in enumerate(unread.values()):
        inputs.append(text.alias(f"_unread_text{i}"))
        if not in_field:  # (a Bloomberg `type` row's other fields, a DEX export's scaled sizes: computed again)
            inputs.append(number.alias(f"_unread_number{i}"))
        cell, read = pl.col(f"_unread_text{i}"), pl.col(field if in_field else f"_unread_number{i}")
        cells.append(pl.when(cell.is_not_null() & (cell != "") & (read.is_null() | read.is_nan()))
                     .then(pl.when(cell.str.contains(ERROR_CELL)).then(pl.lit(f"!{field}\t"))
                           .otherwise(pl.lit(f"?{field}\t")) + cell))
    return pl.coalesce(cells), inputs


def _book_kind(path: Path, given: ColumnMap | Refine | None, cmap: ColumnMap, schema: Mapping[str, Any],
               dialect: Dialect | None) -> tuple[str | None, list[str]]:
    """The kind of Databento order-book export the file is ("mbo", "mbp-1"; None: rows read as they are, TBBO's
    too), with the note that says how it replays."""
    notes = []
    if tardis_levels(cmap, schema):  # a map given in full too: level updates are never trades
        return TARDIS_L2, [f"{path.name}: Tardis.dev incremental_book_L2 (price levels' updates, no trades): replayed "
                           f"as quotes of the top of book it keeps per stream (is_snapshot rows rebuild a side, "
                           f"amount 0 deletes a level), a quote when the best bid, best ask or their sizes change, "
                           f"at the update's timestamp; the deeper levels are not read"]
    book = None if isinstance(given, ColumnMap) else databento_book(cmap, schema)  # a whole map given is followed
    action = next((n for n in schema if normal_name(n) == "action"), None)
    if book == "mbp-1" and distinct_text(path, cmap.names, dialect, action, 3, SAMPLE_ROWS) == ["T"]:
        # TBBO (MBP-1's fields, a record per trade with the best bid and offer just before it): every row is a
        # trade and the quote it met, read as any such row is, the quote first
        book = None
        notes.append(f"{path.name}: Databento TBBO records (every action T): each row replays as the best bid and "
                     f"offer before the trade, then the trade")
    if book is not None:
        notes.append(f"{path.name}: Databento {book} records: trades (action T) and the top of book when it changes "
                     f"at the end of an event, as a DBN file of the schema is read")
    return book, notes


def file_rows(path: Path, cmap: ColumnMap, dialect: Dialect | None,
               overrides: dict[str, pl.DataType] | None) -> tuple[pl.LazyFrame, dict[int, tuple[str, ...]]]:
    """The file's rows numbered (ROW), blank lines left out, and a CSV's junk lines (`junk_lines`), kept as rows."""
    rows = scan_file(path, cmap.names, dialect, overrides).with_row_index(ROW)
    junk = junk_lines(path, cmap.names, dialect, overrides, ROW) if is_csv(path) else {}
    if is_csv(path) or is_json_lines(path):  # a blank line (often at the end) is no row at all; a junk line is one
        read = pl.any_horizontal(pl.all().exclude(ROW).is_not_null())
        rows = rows.filter(read | pl.col(ROW).is_in(list(junk)) if junk else read)
    return rows, junk


ACCOUNTING_NEGATIVE = r"^\(\s*[^()\s+-][^()+-]*\)$"  # `(37.63)`, `(1,234.50)`, `($5.00)`: a number in parentheses


def _csv_number(text: pl.Expr, decimal_comma: bool) -> pl.Expr:
    """A CSV cell's number: plain (`1234.5`, `1e-3`), with grouping commas (`1,234.5`), or in a decimal-comma file
    with dots grouping (`42.002,00`, `0,5183`). A cell of another shape (`0,5` in a file not written with decimal
    commas) is null: rejected as missing_field, never read as some other number. Thousands grouped by spaces or
    apostrophes (`1 234,50`, `1'234.50`) read in any file: their decimal mark is the one after the groups. A
    currency sign before or after the number (`61.836,63 €`, Excel's currency format) is a unit, read without it;
    a number in parentheses (`(37.63)`, Excel's accounting format) is negative."""
    # Excel's accounting format writes a negative in parentheses, `(37.63)`, and that is what "Save as CSV" writes:
    # read as -37.63 (then refused as a price below zero is, naming --price-offset), not as no number (review374 #2)
    text = pl.when(text.str.contains(ACCOUNTING_NEGATIVE)).then(pl.lit("-") + text.str.strip_chars("() ")) \
        .otherwise(text)
    text = text.str.replace_all(CURRENCY_SIGN, "${1}")
    spaced = text.str.contains(SPACE_GROUPED)
    plain = text.str.replace_all(f"[{GROUP_MARKS}]", "").str.replace(",", ".", literal=True)
    if decimal_comma:
        grouped = text.str.contains(DOT_GROUPED.pattern)
        text = pl.when(grouped).then(text.str.replace_all(".", "", literal=True)).otherwise(text)
        text = text.str.replace(",", ".", literal=True)
    else:
        text = pl.when(text.str.contains(COMMA_GROUPED)).then(text.str.replace_all(",", "", literal=True)) \
            .otherwise(text)
    return pl.when(spaced).then(plain).otherwise(text).cast(pl.Float64, strict=False)


def _quote_side_field(cmap: ColumnMap, key: str, col: pl.Expr) -> pl.Expr:
    """Field `key` of a quote_sides file's row: its value on the rows whose mark names that field, null on the
    others. A row the map's keep leaves out (Algoseek's venue quotes beside the national best) is null in every
    field, so that it never becomes the other side a later quote row takes from the stream's previous one."""
    marks = {"bid": BID_ROWS, "bid_size": BID_ROWS, "ask": ASK_ROWS, "ask_size": ASK_ROWS}
    mark = pl.col(cmap.quote_sides).cast(pl.String).str.strip_chars().str.to_lowercase()
    read = mark.is_in(list(marks.get(key, TRADE_MARKS)))
    if cmap.keep and isinstance(cmap.keep.get(cmap.quote_sides), list):
        read &= mark.is_in([str(v).strip().lower() for v in cmap.keep[cmap.quote_sides]])
    return pl.when(read).then(col)


def filled_quotes(keys: Sequence[str]) -> list[pl.Expr]:
    """On quote rows (a bid or an ask, no trade price), the quote fields they leave empty, from the stream's last
    row that had them; trade rows stay as they are (a trade printed with a one-sided quote keeps it one-sided)."""
    quote_row = pl.col("bid").is_not_null() | pl.col("ask").is_not_null()
    if "price" in keys:
        quote_row &= pl.col("price").is_null()
    filled = []
    for key in (k for k in QUOTE_FIELDS if k in keys):
        last = pl.when(pl.col(key).is_nan()).then(None).otherwise(pl.col(key)).forward_fill()  # readable values
        value = pl.when(quote_row & pl.col(key).is_null()).then(last.over("stream") if "stream" in keys else last)
        # an unreadable cell: null again, so it is rejected as missing_field ("not a plain number"), as unfilled
        filled.append(value.otherwise(pl.col(key)).fill_nan(None).alias(key))
    return filled


def tardis_levels(cmap: ColumnMap, schema: Mapping[str, Any]) -> bool:
    """Whether the file is Tardis.dev's incremental_book_L2 (its exchange, symbol, timestamp and level columns),
    read by its layout as trades of `price` and `amount`."""
    names = {normal_name(n) for n in schema}
    return L2_SIGNS | {"exchange", "symbol", "timestamp"} <= names and cmap.price is not None and cmap.bid is None


def _level_columns(schema: Mapping[str, Any]) -> list[pl.Expr]:
    """A Tardis L2 file's raw side (bid/ask) and snapshot flag, for `FilePlan._book`."""
    normal = {normal_name(n): n for n in schema}
    snapshot = pl.col(normal["is_snapshot"]).cast(pl.String).str.strip_chars().str.to_lowercase()
    return [pl.col(normal["side"]).cast(pl.String).alias("_side"), snapshot.is_in(["true", "1", "t"]).alias("_snap")]


def _book_columns(schema: Mapping[str, Any]) -> list[pl.Expr]:
    """A Databento export's action, flags and order id (null where the file has none), for `FilePlan._book`."""
    normal = {n.strip().lower(): n for n in schema}
    return [pl.col(normal["action"]).cast(pl.String).alias("_action"),
            (pl.col(normal["flags"]).cast(pl.Int64, strict=False) if "flags" in normal else pl.lit(None))
            .alias("_flags"),
            (pl.col(normal["order_id"]) if "order_id" in normal else pl.lit(None)).alias("_order")]
