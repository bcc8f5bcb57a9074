"""Planning one replay file. A DBN file gets connectors/dbn.py's plan; a Parquet, CSV or JSON-lines file a
`FilePlan` (connectors/file_plan.py): one lazy polars query that applies the column map its layout settled
(connectors/file_layout.py): its event times (connectors/event_time.py), stream names, numbers as a CSV writes
them, quotes filled, a book export's columns; with what one pass over the file finds (rows out of time order,
names with '/', prices at zero or below, a footer line) said in notes, and a file refused with the option that
reads it."""

from __future__ import annotations

import math
import re
import stat
import unicodedata
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

import polars as pl

from connectors import json_lines
from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.column_names import RIGHT_NAMES, SHARE_CLASS_NAMES
from connectors.csv_dialect import Dialect
from connectors.datetime_text import built_formats
from connectors.event_time import (
    EPOCH_CODE,
    NAIVE_TZ_ONLY,
    apply_utc_offset,
    scaled_ts,
    time_column,
    time_hint,
    ts_expr,
    ts_in_ns,
    unread_zone_names,
    wall_clock_ns,
    zone_words,
)
from connectors.field_names import normal_name
from connectors.file_layout import layout
from connectors.file_plan import (
    SAMPLE_ROWS,
    FilePlan,
    distinct_text,
    first_text,
    is_csv,
    is_dbn,
    scan_file,
    time_sample,
)
from connectors.formula_guard import is_export_header, unguarded
from connectors.hours_window import Hours
from connectors.json_lines import is_json_lines
from connectors.junk_lines import junk_lines, junk_reason
from connectors.layout import databento_book
from connectors.layout_notes import trade_bars
from connectors.map_options import Refine
from connectors.map_vocabulary import (
    DAY_CLOCK_UNITS,
    EPOCH_IS_UTC,
    EXCEL_DAYS,
    NUMERIC_FIELDS,
    PRICE_FIELDS,
    QUOTE_FIELDS,
    UNITS,
    VALUE_FIELDS,
    ZERO_BID_READINGS,
)
from connectors.misread_times import time_cautions, time_facts
from connectors.number_separators import COMMA_GROUPED, DOT_GROUPED, GROUP_MARKS, SPACE_GROUPED
from connectors.price_notation import (FRACTIONAL_FORMS, fractional_caution, fractional_facts, fractional_price,
                                       yield_caution)
from connectors.lone_prints import lone_caution, lone_prints
from connectors.price_offsets import PriceOffset, checked_price_offset
from connectors.repeated_hour import RepeatedHour, repeated_hour
from connectors.repeated_trades import repeated_caution, repeated_ids, shared_id_note, trade_columns, trade_id_column
from connectors.row_order import SEQ, in_time_order, is_newest_first, rows_out_of_sequence
from connectors.shifted_prices import near_zero_streams
from connectors.ticks import venue_caution
from connectors.time_units import epoch_note
from connectors.utc_offsets import (
    SUMMER_CHECKED,
    in_us_summer,
    names_read_in,
    shared_name_notes,
    us_names_in_summer,
    zone_name_of,
)

ROW = "_row"  # the file row number, carried through a sort so a rejected row can be named


def _csv_overrides(cmap: ColumnMap) -> dict[str, pl.DataType]:
    # Decimal epoch seconds stay text until scaled_ts: as a float, 1717236000.25 s is off by ~100 ns.
    ts_type = {"datetime": pl.String, "s": pl.String, **dict.fromkeys((*DAY_CLOCK_UNITS, EXCEL_DAYS), pl.Float64)}.get(
        cmap.ts_unit, pl.Int64)
    out: dict[str, pl.DataType] = {c: pl.String for c in cmap.keep or ()}  # compared as text
    # numbers are read as text and parsed by _csv_number (grouping commas, German Excel's `42.002,00`)
    out |= {getattr(cmap, f): pl.String for f in NUMERIC_FIELDS if getattr(cmap, f)}
    out |= {column: pl.String for column in cmap.stream_columns}
    out |= {cmap.sequence: pl.String} if cmap.sequence else {}  # whole numbers, read by _sequence_number
    if len(cmap.ts_columns) > 1:  # a date column's text, beside its time's (a time of day: a number after midnight)
        return out | {column: pl.String for column in cmap.ts_columns[:-1]} | {cmap.ts_columns[-1]: (
            ts_type if cmap.ts_unit in DAY_CLOCK_UNITS else pl.String)}
    return out | {column: ts_type for column in cmap.ts_columns}


# Zone names that read as a region's clock but are fixed offsets all year (IANA keeps them for old systems)
FIXED_ZONES = {"EST": ("New York", "America/New_York"), "MST": ("Denver", "America/Denver"),
               "HST": ("Honolulu", "Pacific/Honolulu")}

# said when a file's stream names (a column's values, or its file name: macOS writes those decomposed) were not in
# Unicode NFC: they replay in NFC, as the engine's wire takes them (connectors.ticks.check_normalized)
NFD_WRITTEN = "written decomposed (NFD: an accent as a code point of its own, as macOS writes file names)"


def _stream_column(cmap: ColumnMap) -> pl.Expr:
    """The stream column as text without spaces at its ends (a stray one is no part of a name; OCC's padding
    inside is kept), or the values of several joined by a space (`stream_col: a+b+c`), each in one canonical form
    so that a contract is one stream however a cell writes it (`_contract_part`). An empty or null part is left
    out (TAQ's SYM_SUFFIX of a common stock: `AAPL`, not `AAPL ` nor no stream), and a share class's suffix
    (SHARE_CLASS_NAMES) joins with a `.` (`BRK.B`)."""
    if len(cmap.stream_columns) == 1:
        return pl.col(cmap.stream_col).cast(pl.String).str.strip_chars(" ")
    parts = []
    for position, column in enumerate(cmap.stream_columns):
        part = _contract_part(column)
        separator = "" if position == 0 else "." if normal_name(column) in SHARE_CLASS_NAMES else " "
        parts.append(pl.when(part != "").then(pl.lit(separator) + part))  # empty or null: null, skipped below
    joined = pl.concat_str(parts, ignore_nulls=True)
    joined = pl.when(parts[0].is_null()).then(joined.str.slice(1)).otherwise(joined)  # no first part: no separator
    return pl.when(joined != "").then(joined)  # every part empty: no stream (missing_stream)


def _contract_part(column: str) -> pl.Expr:
    """One part of a contract's name: a number with a decimal point in its shortest exact form (a strike
    `150.00`, `0150.0`, a Parquet float 150.0 -> `150`; `150.50`, `.5` -> `150.5`, `0.5`), a put/call column's
    value as C or P (`c`, `Call`, `CALL` -> `C`); other text (an integer too: an expiry's `0119`) as written, less
    spaces at its ends."""
    text = pl.col(column).cast(pl.String).str.strip_chars()
    shortest = (text.str.replace(r"0+$", "").str.replace(r"\.$", "")  # the fraction's trailing zeros, a bare point
                .str.replace(r"^([+-]?)0+(\d)", "${1}${2}").str.replace(r"^([+-]?)\.", "${1}0."))  # leading zeros
    text = pl.when(text.str.contains(r"^[+-]?(\d+\.\d*|\.\d+)$")).then(shortest).otherwise(text)
    if normal_name(column) not in RIGHT_NAMES:
        return text
    upper = text.str.to_uppercase()
    return pl.when(upper.is_in(["C", "CALL"])).then(pl.lit("C")) \
        .when(upper.is_in(["P", "PUT"])).then(pl.lit("P")).otherwise(text)


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


# polars' refusals of a CSV row with more fields than the file's columns (with and without a header)
LONG_ROW_ERRORS = re.compile(r"more fields than defined|new_columns does not match|truncate_ragged_lines|"
                            r"extra_columns")


def regular_file(path: Path) -> Path:
    """``path`` when it is a regular file (or a link to one). Nothing there: FileNotFoundError. Something else there
    (a FIFO, a device, a socket, a folder): a ValueError naming it, before anything opens it: a replay reads each file
    more than once (its layout, then its rows), a FIFO gives its bytes once and its open waits for a writer, and
    /dev/zero never ends; "not found" sent the user looking for a path that was there."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"replay file not found: {path}") from None
    except OSError as e:
        raise ValueError(f"{path}: cannot read it: {e.strerror or e}") from None
    if stat.S_ISREG(mode):
        return path
    kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else
            "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    raise ValueError(f"{path} is {kind}, not a file: a replay reads each file more than once (its layout, then its "
                     f"rows); write what it holds to a file and give that")


def plan_file(path: Path, cmap: ColumnMap | Refine | None, explicit: bool) -> Any:
    regular_file(path)
    if is_dbn(path):  # an order-by-order feed, reduced to trades and top of book
        from connectors.dbn import DbnPlan

        return DbnPlan(path, *_dbn_keys(path, cmap, explicit))
    try:
        return _table_plan(path, cmap, own_map=explicit)
    except (pl.exceptions.PolarsError, ValueError) as e:
        if not explicit and (naive_only := _without_tz(path, cmap, e)) is not None:
            return naive_only  # --tz for every file: a file whose times carry their own offset keeps it
        if not is_csv(path) or not LONG_ROW_ERRORS.search(str(e)):
            raise
        refused = e
    # a row with a stray field: read again, truncating such rows, which are then rejected by their line (the
    # normal read never looks for them)
    try:
        return _table_plan(path, cmap, long_rows_of=True, own_map=explicit)
    except (pl.exceptions.PolarsError, ValueError):  # not a few stray rows: its rows do not fit its columns
        raise refused from None


def _without_tz(path: Path, cmap: ColumnMap | Refine | None, refused: Exception) -> Any:
    """The plan of a file read without the `tz` that every file was given (--tz, `columns=` for all) when it was
    refused only because its times carry their own UTC offset (a UTC-aware Parquet beside naive-time CSVs, the
    README's `trades.csv bbo.parquet`) or count from the epoch (UTC): `tz` is for naive times, so that file keeps
    its own, said in a note (and a bare --hours window stays on --tz's clock). None when it was refused for
    anything else, or when the map was the file's own or a whole map (a preset, a map of its columns: a
    contradiction there is refused)."""
    tz = cmap.keys.get("tz") if isinstance(cmap, Refine) else None
    epoch = EPOCH_IS_UTC in str(refused) and "ts_unit" not in cmap.keys if tz is not None else False
    if tz is None or NAIVE_TZ_ONLY not in str(refused) and not epoch:
        return None
    rest = {k: v for k, v in cmap.keys.items() if k != "tz"}
    bare_hours = rest.get("hours") is not None and Hours.parse(rest["hours"]).zone is None
    if bare_hours:
        rest["hours"] = zoned_hours(rest["hours"], tz)
    plan = _table_plan(path, Refine(rest) if rest else None)
    carry = "count from the epoch (1970-01-01 UTC)" if epoch else "carry their own UTC offset"
    said = (f"{path.name}: its times {carry}, so --tz {tz} (for naive times) is not applied to it"
            + (f" (the hours kept, {rest['hours']!r}, are on its wall clock)" if bare_hours else ""))
    return replace(plan, notes=(said, *plan.notes))


DBN_KEYS = ("price_offset", "hours", "zero_bid")  # what a DBN file takes of a column map: its layout is fixed


def _dbn_keys(path: Path, cmap: ColumnMap | Refine | None,
              explicit: bool) -> tuple[PriceOffset | None, str | None, str | None]:
    """A DBN file's layout is fixed: of a column map it takes price_offset (a calendar spread's prices below zero),
    zero_bid (OPRA's 0 bids read as prices) and hours (a session's window; one without a zone takes the tz given
    for every file, else is refused). The map for every file keeps its other keys for the tabular files; the file's
    own is refused for them."""
    keys = cmap.keys if isinstance(cmap, Refine) else cmap.to_dict() if cmap is not None else {}
    if explicit and (others := sorted(set(keys) - set(DBN_KEYS))):
        raise ValueError(f"{path}: a DBN file has a fixed layout: of a column map it takes "
                         f"{', '.join(DBN_KEYS[:-1])} and {DBN_KEYS[-1]} alone, got {', '.join(others)}")
    hours = keys.get("hours")
    if hours is not None and Hours.parse(hours).zone is None:  # (a bad window is refused before a record is read)
        if not keys.get("tz"):  # DBN times are UTC, but a CME user's bare 08:30-15:15 means Chicago's: ask
            raise ValueError(bare_hours_refused(path, hours))
        hours = zoned_hours(hours, keys["tz"])  # --tz names the wall clock a bare window is on (not DBN's times)
    zero_bid = keys.get("zero_bid")
    if zero_bid not in (None, *ZERO_BID_READINGS):  # (a map for every file was checked; a file's own is here)
        raise ValueError(f"{path}: zero_bid must be one of {ZERO_BID_READINGS}, got {zero_bid!r}")
    return checked_price_offset(keys.get("price_offset")), hours, zero_bid


def bare_hours_refused(path: Path, hours: str) -> str:
    """A window without a zone, and no tz to put it on: whose wall clock it means cannot be guessed (even for
    times that carry their own zone, UTC's is seldom the one a trader writes hours in)."""
    return (f"{path}: hours {hours!r} are a wall clock's, and no zone is given for it (none after the window, no "
            f"--tz): write the zone after the window, e.g. '{hours} America/New_York' or '{hours} UTC'")


def zoned_hours(hours: str, tz: str) -> str:
    """A window without a zone, on the wall clock of the `tz` given for every file, for a file whose times carry
    their own zone (a DBN file's, `...Z` text, a UTC Parquet), to which `tz` itself does not apply."""
    return f"{hours.strip()} {tz}"


def _renamed_onto(path: Path, streams: pl.LazyFrame) -> list[str]:
    """A caution for names that '/' -> '-' makes one with a name the file already writes with '-' (`BF/B` and
    `BF-B`): their rows would replay as one stream, prices of two sources interleaved, unless the file means one
    instrument twice, which it cannot tell."""
    held = set(streams.select(pl.col("_stream").drop_nulls().unique()).collect().to_series().to_list())
    both = sorted(name for name in held if "/" in name and name.replace("/", "-") in held)
    if not both:
        return []
    pairs = "; ".join(f"{name!r} and {name.replace('/', '-')!r} both replay as {name.replace('/', '-')!r}"
                      for name in both[:3])
    return [Caution(f"{path.name}: {pairs}{'; ...' if len(both) > 3 else ''}: one stream each, two names' rows "
                    f"interleaved. If they are two instruments, name the streams by another column (--columns "
                    f"stream=COLUMN) or rename one in the file")]


def _table_plan(path: Path, cmap: ColumnMap | Refine | None, long_rows_of: bool = False,
                own_map: bool = False) -> FilePlan:
    """The plan of a Parquet or CSV file; `long_rows_of`: find the CSV's rows with more fields than its columns;
    `own_map`: the map is the file's own (a replay list entry's), not the one for every file."""
    given = cmap
    cmap, dialect, schema, notes = layout(path, cmap, long_rows_of, own_map)
    cmap, nfc_notes = _nfc_stream(path, cmap)
    notes += nfc_notes
    if dialect is not None and dialect.long_rows:
        notes.append(f"{path.name}: {len(dialect.long_rows)} row(s) with more fields than its {len(schema)} columns: "
                     f"each rejected as extra_fields (the first is named among the rejects), the others read")
    overrides = _csv_overrides(cmap) if is_csv(path) else None
    # what the scan below will read: date+time columns are joined as text
    ts_type = pl.String if len(cmap.ts_columns) > 1 else overrides[cmap.ts] if overrides else schema[cmap.ts]
    text_times = ts_type == pl.String and cmap.ts_unit == "datetime" and not cmap.ts_format
    first = (time_sample if text_times else first_text)(path, cmap.names, dialect, cmap.ts_columns)
    if cmap.hours is not None and Hours.parse(cmap.hours).zone is None and cmap.tz is None:
        raise ValueError(bare_hours_refused(path, cmap.hours))
    ts = apply_utc_offset(path, cmap, ts_expr(path, cmap, ts_type, first), first).alias("_ts")
    exprs, keys, raw_stream, price_texts, book, book_notes = _row_exprs(path, given, cmap, schema, dialect,
                                                                        overrides, ts)
    notes += book_notes
    rows, junk = _file_rows(path, cmap, dialect, overrides)
    hour = repeated_hour(rows, wall_clock_ns(path, cmap, ts_type, first), cmap.tz, cmap.stream_columns, ROW,
                         is_newest_first)
    if hour is not None and hour.second_rows.len():  # read at the later offset: told by the file's order
        second_pass = pl.col(ROW).is_in(hour.second_rows.implode())
        exprs[0] = apply_utc_offset(path, cmap, ts_expr(path, cmap, ts_type, first, second_pass), first).alias("_ts")
    frame = rows.select(*exprs, ROW)
    factor = 1 if ts_in_ns(cmap, ts_type) else UNITS[cmap.ts_unit]
    named = _zone_named(cmap, ts_type)
    facts = _file_facts(path, cmap, rows, exprs, keys, raw_stream, price_texts, dialect, factor, named, first)
    notes += _price_and_zone_notes(path, cmap, facts, first, named)
    _refuse_unread_times(path, cmap, rows, facts, first, named)
    frame, order_notes, out_of_sequence = in_time_order(path, cmap, frame, keys, facts, hour, factor)
    notes += order_notes
    if cmap.fill_quotes:  # after the sort: "previous" is in time order, per stream
        frame = frame.with_columns(_filled_quotes(keys))
    notes += _stream_and_clock_notes(path, cmap, rows, raw_stream, facts, hour, factor)
    empty_sides = cmap.bid is not None and TARDIS_SIGNS <= {normal_name(n) for n in schema}
    unit_given = isinstance(given, ColumnMap) and given.ts_unit in UNITS or \
        isinstance(given, Refine) and given.keys.get("ts_unit") in UNITS
    footer = _footer(rows, exprs[0], dialect.separator, junk) if is_csv(path) else None
    junk_why = {row: junk_reason(cells, dialect.separator, len(schema)) for row, cells in junk.items()
                if footer is None or row != footer[0]}
    lines = json_lines.table(path) if is_json_lines(path) else None  # (parsed once, kept by the module)
    bad_lines = lines.bad_lines if lines is not None else {}
    tickless = lines.skipped if lines is not None else {}
    notes += lines.notes if lines is not None else []
    plan = FilePlan(path, cmap, frame, tuple(keys), bool(facts["unsorted"] or out_of_sequence), factor,
                    tuple(notes), book=book, dialect=dialect, schema=schema, unit_given=unit_given,
                    empty_sides=empty_sides, bars=trade_bars(cmap, schema),
                    nonpositive_prices=bool(facts["nonpositive_prices"]),
                    nonpositive_rows=(int(facts["nonpositive_rows"] or 0), int(facts["trading_rows"] or 0)),
                    near_zero_streams=near_zero_streams(frame, keys) if facts["nonpositive_rows"] or
                    facts["zero_sides"] else frozenset(),
                    long_rows=dict(dialect.long_rows) if dialect is not None else {}, bad_lines=bad_lines,
                    span=_span(facts["min_ts"], facts["max_ts"], factor),
                    tickless=tickless, footer=footer, header_rows=frozenset(facts["header_rows"]), junk=junk_why)
    return _row_notes(plan, rows, raw_stream, schema)


class RowExprs(NamedTuple):
    """What a file's rows are read as: the `_ts` expression first, then the wire fields' (`keys`), the keep
    columns', a book export's, the sequence number's."""

    exprs: list[pl.Expr]
    keys: list[str]
    raw_stream: pl.Expr  # the stream column as written (before '/' -> '-' and NFC), for the notes on its names
    price_texts: dict[str, pl.Expr]  # price, bid, ask read from text: what may be written in 32nds
    book: str | None  # the Databento order-book export the file is (`_book_kind`)
    notes: list[str]  # the book's


def _row_exprs(path: Path, given: ColumnMap | Refine | None, cmap: ColumnMap, schema: Mapping[str, Any],
               dialect: Dialect | None, overrides: dict[str, pl.DataType] | None, ts: pl.Expr) -> RowExprs:
    """The expressions each row of the file is read with, `ts` (its time) first."""
    exprs = [ts]
    keys: list[str] = []
    raw_stream = _stream_column(cmap) if cmap.stream_col else pl.lit("")
    if is_csv(path) and cmap.stream_col == "stream" and is_export_header(list(schema)):
        raw_stream = unguarded(raw_stream)  # flashtick's own export: its formula guard off (`@ES`, not `'@ES`)
    if cmap.stream_col:  # '/' separates answer topics: EUR/USD replays as EUR-USD; NFC: see check_normalized
        exprs.append(raw_stream.str.replace_all("/", "-", literal=True).str.normalize("NFC").alias("stream"))
        keys.append("stream")
    value_exprs, value_keys, price_texts = _value_columns(cmap, schema, dialect)
    exprs += value_exprs
    keys += value_keys
    exprs += [pl.col(column).alias(f"_keep{i}") for i, column in enumerate(cmap.keep or ())]  # after the keys
    book, notes = _book_kind(path, given, cmap, schema, dialect)
    if book is not None:
        exprs += _book_columns(schema)
    if cmap.sequence is not None:  # last before the row number: file_plan.py reads it at row[-2]
        exprs.append(_sequence_number(cmap.sequence, pl.String if overrides else schema[cmap.sequence]).alias(SEQ))
    return RowExprs(exprs, keys, raw_stream, price_texts, book, notes)


def _nfc_stream(path: Path, cmap: ColumnMap) -> tuple[ColumnMap, list[str]]:
    """The map with its fixed stream name in Unicode NFC, with a note when it was not (a file name macOS wrote in
    NFD): the engine takes NFC names only."""
    if cmap.stream is None or (nfc := unicodedata.normalize("NFC", cmap.stream)) == cmap.stream:
        return cmap, []
    return replace(cmap, stream=nfc), [f"{path.name}: stream {nfc}: its name was {NFD_WRITTEN}; it replays in "
                                       f"Unicode NFC, the one form the engine takes"]


def _value_columns(cmap: ColumnMap, schema: Mapping[str, Any],
                   dialect: Dialect | None) -> tuple[list[pl.Expr], list[str], dict[str, pl.Expr]]:
    """The wire fields' expressions (price, size, bid, ...: numbers as a CSV writes them, prices in 32nds), their
    keys, and the text of each price field read from text (what the notes on 32nds and yields look at)."""
    exprs: list[pl.Expr] = []
    keys: list[str] = []
    price_texts: dict[str, pl.Expr] = {}  # price, bid, ask read from text: what may be written in 32nds
    for key in VALUE_FIELDS:
        if (name := getattr(cmap, key)) is not None:
            text = key in NUMERIC_FIELDS and schema[name] == pl.String  # Parquet of JSON: Coinbase's "42290.12"
            if key in PRICE_FIELDS and (text or dialect is not None):
                price_texts[key] = pl.col(name).cast(pl.String).str.strip_chars()
            if key in NUMERIC_FIELDS and dialect is not None:  # a CSV's numbers, read as text
                raw = pl.col(name).cast(pl.String).str.strip_chars()
                col = _csv_number(raw, dialect.decimal_comma)
                if key in price_texts and cmap.price_format in FRACTIONAL_FORMS:
                    col = fractional_price(raw, col, cmap.price_format)
                # empty: null (filled by _filled_quotes, else a one-sided quote); unreadable: NaN, so that it is
                # refused as unreadable, never filled nor called a one-sided quote
                if cmap.fill_quotes and key in QUOTE_FIELDS or key in ("bid", "ask"):
                    col = pl.when(raw.is_null() | (raw == "")).then(None).otherwise(col.fill_null(float("nan")))
            elif key in price_texts and cmap.price_format in FRACTIONAL_FORMS:
                col = fractional_price(price_texts[key], price_texts[key].cast(pl.Float64, strict=False),
                                       cmap.price_format)
            elif text:  # Parquet's text numbers read as a CSV's cells: `61,837.63`, or `61.837,63` by its `decimal`
                col = _csv_number(price_texts.get(key, pl.col(name).str.strip_chars()), cmap.decimal == "comma")
            elif schema[name].is_decimal():
                col = pl.col(name).cast(pl.Float64, strict=False)
            else:
                col = pl.col(name)
            exprs.append(col.alias(key))
            keys.append(key)
    if cmap.price is not None and cmap.size is None:  # a price series: each price a trade of size 1
        exprs.append(pl.lit(1.0).alias("size"))
        keys.append("size")
    return exprs, keys, price_texts


def _book_kind(path: Path, given: ColumnMap | Refine | None, cmap: ColumnMap, schema: Mapping[str, Any],
               dialect: Dialect | None) -> tuple[str | None, list[str]]:
    """The kind of Databento order-book export the file is ("mbo", "mbp-1"; None: rows read as they are, TBBO's
    too), with the note that says how it replays."""
    notes = []
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


def _file_rows(path: Path, cmap: ColumnMap, dialect: Dialect | None,
               overrides: dict[str, pl.DataType] | None) -> tuple[pl.LazyFrame, dict[int, tuple[str, ...]]]:
    """The file's rows numbered (ROW), blank lines left out, and a CSV's junk lines (`junk_lines`), kept as rows."""
    rows = scan_file(path, cmap.names, dialect, overrides).with_row_index(ROW)
    junk = junk_lines(path, cmap.names, dialect, overrides, ROW) if is_csv(path) else {}
    if is_csv(path) or is_json_lines(path):  # a blank line (often at the end) is no row at all; a junk line is one
        read = pl.any_horizontal(pl.all().exclude(ROW).is_not_null())
        rows = rows.filter(read | pl.col(ROW).is_in(list(junk)) if junk else read)
    return rows, junk


def _zone_named(cmap: ColumnMap, ts_type: pl.DataType) -> bool:
    """Whether the times are text that may name their zone (CST: several zones'), said once per file; a format
    that writes the name as text (`... EST`) reads no zone from it."""
    return ts_type == pl.String and cmap.ts_unit == "datetime" and EPOCH_CODE not in (cmap.ts_format or "") \
        and (cmap.ts_format is None or "%Z" in cmap.ts_format)


def _file_facts(path: Path, cmap: ColumnMap, rows: pl.LazyFrame, exprs: list[pl.Expr], keys: list[str],
                raw_stream: pl.Expr, price_texts: Mapping[str, pl.Expr], dialect: Dialect | None, factor: int,
                named: bool, first: str | None) -> dict[str, Any]:
    """What one pass over the file finds, for its notes and refusals: rows out of time order (or of sequence),
    its first and last times, names with '/' or not in NFC, prices at zero or below, crossed quotes, repeated
    header rows, the zone names its times are written with."""
    # a price column that is zero or below wherever a row trades: an instrument that trades there (a spread)
    prices = [e for e, key in zip(exprs[1:], keys) if key in ("price", "size")] if cmap.price is not None else []
    traded = (pl.col("price").filter(pl.col("size") > 0) if cmap.size is not None else pl.col("price")).drop_nulls()
    # a quote's bid above its ask: a yield quote's, if the columns are yields mapped as they are named
    sides = [e for e, key in zip(exprs[1:], keys) if key in ("bid", "ask")] if cmap.bid and cmap.ask else []
    dates = [pl.col(cmap.ts_columns[0])] if len(cmap.ts_columns) == 2 else []  # for a trade date's steps back
    sequence = [exprs[-1]] if cmap.sequence is not None else []
    zones = [zone_name_of(time_column(cmap).str.strip_chars()).alias("_zone")] if named else []
    facts = rows.select(exprs[0], raw_stream.alias("_stream"), *prices, *sides, *dates, *sequence, *zones, pl.col(ROW),
                        _header_repeats(rows, dialect).alias("_header"),
                        *(cells.alias(f"_text_{key}") for key, cells in price_texts.items())).select(
        unsorted=(pl.col("_ts").drop_nulls().diff() < 0).any(), timed=pl.col("_ts").is_not_null().any(),
        back_rows=(pl.col("_ts").drop_nulls().diff() < 0).sum(), largest_back=-pl.col("_ts").drop_nulls().diff().min(),
        forward_rows=(pl.col("_ts").drop_nulls().diff() > 0).sum(),
        min_ts=pl.col("_ts").min(), max_ts=pl.col("_ts").max(),
        first_ts=pl.col("_ts").drop_nulls().first(), slashes=pl.col("_stream").str.contains("/", literal=True).any(),
        denormalized=(pl.col("_stream") != pl.col("_stream").str.normalize("NFC")).any(),
        nonpositive_prices=(traded.max() <= 0) if prices else pl.lit(False),
        nonpositive_rows=(traded <= 0).sum() if prices else pl.lit(0),
        trading_rows=traded.len() if prices else pl.lit(0),
        crossed_rows=(pl.col("bid") > pl.col("ask")).sum() if sides else pl.lit(0),
        zero_sides=((pl.col("bid") <= 0) | (pl.col("ask") <= 0)).sum() if sides else pl.lit(0),
        out_of_sequence=rows_out_of_sequence() if sequence else pl.lit(0),
        header_rows=pl.col(ROW).filter(pl.col("_header")).implode(),
        zone_names=pl.col("_zone").drop_nulls().unique().implode() if named else pl.lit(None),
        *fractional_facts({key: pl.col(f"_text_{key}") for key in price_texts}), *time_facts(cmap, factor),
        **(_us_summer_facts() if named else {}),
    )
    try:
        return facts.collect().row(0, named=True)
    except pl.exceptions.ComputeError as e:  # polars' own words are several lines, about its API, not the file
        raise ValueError(unparsed_times(path, cmap, first, e)) from e


def _price_and_zone_notes(path: Path, cmap: ColumnMap, facts: Mapping[str, Any], first: str | None,
                          named: bool) -> list[str]:
    """The notes on prices in 32nds or as yields, and on zone names several zones share (CST) or written in a
    season whose name they do not fit (CST in July)."""
    notes = fractional_caution(path, cmap, facts) + yield_caution(path, cmap, facts["crossed_rows"])
    notes += shared_name_notes(path.name, facts["zone_names"] or (), names_read_in(cmap.tz, first), cmap.tz)
    if named:
        found = {name: (facts[f"summer_{name}"], facts[f"summer_first_{name}"]) for name in SUMMER_CHECKED}
        formats = built_formats(first) if first and any(rows for rows, _ in found.values()) else []
        notes += us_names_in_summer(path.name, found, names_read_in(cmap.tz, first), formats)
    return notes


def _refuse_unread_times(path: Path, cmap: ColumnMap, rows: pl.LazyFrame, facts: Mapping[str, Any],
                         first: str | None, named: bool) -> None:
    """A ValueError when no row's time reads, or when some of the zone names the times are written with read and
    others do not (GMT read, BST not)."""
    words = zone_words(rows, cmap, SAMPLE_ROWS) if named and first is not None else []
    if not facts["timed"] and first is not None:
        raise ValueError(time_hint(path, cmap, first, words))
    if len(words) > 1 and (unread := unread_zone_names(path, cmap, first, words)):  # GMT read, BST not: refused
        raise ValueError(unread)


def _stream_and_clock_notes(path: Path, cmap: ColumnMap, rows: pl.LazyFrame, raw_stream: pl.Expr,
                            facts: Mapping[str, Any], hour: RepeatedHour | None, factor: int) -> list[str]:
    """The notes on days its session hours do not exist, stream names renamed ('/', NFC), an hour the clock
    repeats, a fixed-offset zone named for a region, the epoch unit read and times that look misread."""
    notes: list[str] = []
    if cmap.hours is not None and facts["min_ts"] is not None:
        notes += _skipped_hours(path, cmap, scaled_ts(facts["min_ts"], factor), scaled_ts(facts["max_ts"], factor))
    if facts["slashes"]:
        notes.append(f"{path.name}: stream names with '/' replay with '-' instead (EUR/USD as EUR-USD): "
                     f"answer topics use '/' as their separator{venue_caution('EUR-USD')}")
        notes += _renamed_onto(path, rows.select(raw_stream.alias("_stream")))
    if facts["denormalized"]:
        notes.append(f"{path.name}: stream names {NFD_WRITTEN} replay in Unicode NFC, the one form the engine "
                     f"takes, so that a name is one stream however it was written")
    notes += hour.notes(path.name) if hour is not None else []
    if (region := FIXED_ZONES.get(cmap.tz or "")) is not None:  # a trader's "EST" means New York's clock
        notes.append(f"{path.name}: tz {cmap.tz} is a fixed offset all year, with no summer time: if the times are "
                     f"{region[0]}'s clock (summer time included), give --tz {region[1]}")
    unit_said = []
    if facts["first_ts"] is not None and cmap.ts_unit in UNITS:
        unit_said = epoch_note(path, cmap, scaled_ts(facts["first_ts"], factor))
        notes += unit_said
    notes += time_cautions(path, cmap, facts, scaled_ts(facts["min_ts"], factor), scaled_ts(facts["max_ts"], factor),
                           bool(unit_said))
    return notes


def _row_notes(plan: FilePlan, rows: pl.LazyFrame, raw_stream: pl.Expr, schema: Mapping[str, Any]) -> FilePlan:
    """The plan with the notes that name rows as the user finds them (its `where`, so made after it): header rows
    repeated, trades repeated or sharing an id, lone prints."""
    path, cmap = plan.path, plan.columns
    id_column = trade_id_column(cmap, schema)
    if header_rows := sorted(plan.header_rows):  # (its `where`, as below)
        more = f" and {len(header_rows) - 1} more repeat" if len(header_rows) > 1 else " repeats"
        plan = replace(plan, notes=(*plan.notes, f"{plan.where(header_rows[0])}{more} the header row: "
                                                 f"files joined one after another (a concatenated export); left out "
                                                 f"as filtered_out, no tick"))
    if id_column is not None:  # (after the plan is made: its `where` names a row as the user finds it)
        plan = replace(plan, trade_ids=rows.select(ROW, pl.col(id_column).cast(pl.String).alias("_id")))
        # the header's repeats are no trades: their "id" is the column's name (trdMatchID), and each was a "repeat"
        trades = rows.filter(~pl.col(ROW).is_in(header_rows)) if header_rows else rows
        same, other = repeated_ids(trades, raw_stream, id_column, ROW, trade_columns(cmap))
        line = lambda row: plan.where(row).removeprefix(f"{plan.given_name} ")  # noqa: E731 (the name is said)
        said = ([repeated_caution(path.name, same, line)] if same else []) + \
            ([shared_id_note(path.name, other, line)] if other else [])
        plan = replace(plan, notes=(*plan.notes, *said)) if said else plan
    if plan.book is None and (lone := lone_prints(plan.frame, plan.keys, cmap)) is not None:  # (an order's price)
        line = lambda row: plan.where(row).removeprefix(f"{plan.given_name} ")  # noqa: E731
        plan = replace(plan, notes=(*plan.notes, lone_caution(path.name, lone, line, plan.ts_factor)))
    return plan


def _us_summer_facts() -> dict[str, pl.Expr]:
    """Per SUMMER_CHECKED name, its rows on dates its US zone keeps summer time (CST in July): count, first time."""
    facts = {}
    for name in SUMMER_CHECKED:
        summer = in_us_summer(pl.col("_ts"), pl.col("_zone"), name).fill_null(False)
        facts |= {f"summer_{name}": summer.sum(), f"summer_first_{name}": pl.col("_ts").filter(summer).min()}
    return facts


def unparsed_times(path: Path, cmap: ColumnMap, first: str | None, error: Exception) -> str:
    """One line for a read that polars stopped: the file, the time column, a value, the option that says how."""
    said = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return (f"{path}: its times could not be read (column {cmap.ts!r}, e.g. {(first or '')[:40]!r}: {said}): give "
            f"their format with strftime codes, e.g. --ts-format '%Y-%m-%d %H:%M:%S%.f%z'")


def _span(first: Any, last: Any, factor: int) -> tuple[int, int] | None:
    """A file's first and last time in ns, when its times are numbers (a time range is checked against it)."""
    if not all(type(t) in (int, float) and math.isfinite(t) for t in (first, last)):
        return None
    return round(first * factor), round(last * factor)


def _skipped_hours(path: Path, cmap: ColumnMap, first_ns: Any, last_ns: Any) -> list[str]:
    """A note for the days of the file on which its `hours` window is a time the clocks skip (summer time starts):
    that day's rows are all left out, and not because they are outside the session."""
    if type(first_ns) is not int or type(last_ns) is not int:
        return []
    hours = Hours.parse(cmap.hours)
    zone = hours.zone or cmap.tz or "UTC"
    days = hours.skipped_on(zone, first_ns, last_ns)
    if not days:
        return []
    named = ", ".join(str(day) for day in days[:3]) + (", ..." if len(days) > 3 else "")
    return [f"{path.name}: hours {cmap.hours!r} do not exist on {named} in {zone}: the clocks skip them when summer "
            f"time starts, so every row of that day is left out"]


FOOTER_TEXT = re.compile(r"[A-Za-z]{3}")  # words: "Downloaded from Barchart.com as of ...", "Total", ...


def _footer(rows: pl.LazyFrame, ts: pl.Expr, separator: str,
            junk: Mapping[int, tuple[str, ...]]) -> tuple[int, str] | None:
    """(row, its text) when a CSV's last row is a line of words in its first cell, whose time does not read
    (Barchart's `Downloaded from Barchart.com as of 03-06-2026 04:34pm CST`), and nothing else but the digits of a
    number its delimiter split (`Total rows: 3,000` in a comma file): a footer, left out as filtered_out rather
    than rejected as a tick missing its time, nor its pieces taken for a stream's name. A junk line's cells
    (`junk_lines`) are its text as written: its cells as typed are empty."""
    last = rows.tail(1).select(pl.all(), ts.alias("_ts")).collect()
    if not last.height:
        return None
    cells = list(junk.get(last[ROW][0], ())) or [str(v).strip() for k, v in last.row(0, named=True).items()
                                                if k not in (ROW, "_ts") and v not in (None, "")]
    text = cells[0] if cells and all(cell.isdigit() for cell in cells[1:]) else ""
    if last["_ts"][0] is not None or not FOOTER_TEXT.search(text):
        return None
    return int(last[ROW][0]), separator.join(cells)[:60]


def _header_repeats(rows: pl.LazyFrame, dialect: Dialect | None) -> pl.Expr:
    """Whether a row of a CSV with a header repeats it (each text cell its column's name): files joined one after
    another (a concatenated export), a line that is no tick, nor its `symbol` a stream."""
    if dialect is None or not dialect.header:
        return pl.lit(False)
    names = [name for name, dtype in rows.collect_schema().items() if dtype == pl.String and name != ROW]
    if len(names) < 2:
        return pl.lit(False)
    return pl.all_horizontal([pl.col(name).str.strip_chars() == name for name in names]).fill_null(False)


def _csv_number(text: pl.Expr, decimal_comma: bool) -> pl.Expr:
    """A CSV cell's number: plain (`1234.5`, `1e-3`), with grouping commas (`1,234.5`), or in a decimal-comma file
    with dots grouping (`42.002,00`, `0,5183`). A cell of another shape (`0,5` in a file not written with decimal
    commas) is null: rejected as missing_field, never read as some other number. Thousands grouped by spaces or
    apostrophes (`1 234,50`, `1'234.50`) read in any file: their decimal mark is the one after the groups."""
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


def _filled_quotes(keys: Sequence[str]) -> list[pl.Expr]:
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


def _book_columns(schema: Mapping[str, Any]) -> list[pl.Expr]:
    """A Databento export's action, flags and order id (null where the file has none), for `FilePlan._book`."""
    normal = {n.strip().lower(): n for n in schema}
    return [pl.col(normal["action"]).cast(pl.String).alias("_action"),
            (pl.col(normal["flags"]).cast(pl.Int64, strict=False) if "flags" in normal else pl.lit(None))
            .alias("_flags"),
            (pl.col(normal["order_id"]) if "order_id" in normal else pl.lit(None)).alias("_order")]


# Tardis.dev's CSVs (trades, quotes, book snapshots): an empty bid or ask is a book side with no order (an option
# out of the money), not one that did not change; such a quote is rejected (missing_field), never filled
TARDIS_SIGNS = frozenset({"exchange", "symbol", "timestamp", "local_timestamp"})
