"""File replay: Parquet/CSV/JSON-lines/DBN tick files -> one time-ordered, paced, resumable Source.

Each Parquet or CSV file is a polars lazy scan mapped to tick fields by a
`ColumnMap` (connectors/column_map.py: a preset by name, a dict from YAML, or
detected from the columns); a JSON-lines file is read as the table of its objects' fields through a Parquet
copy (connectors/json_lines.py); a Databento DBN file is decoded and reduced to
trades and top of book by connectors/dbn.py. Both kinds of plan hand out
(row number, wire map) chunks. Files are read in chunks of `chunk_rows` rows and merged by
event time with a heap; ties keep file order, then row order, so a replay is
deterministic. A file whose rows are
not in time order is sorted once (stably) by polars before it is read. Rows
that fail `connectors.ticks.validate` are counted by reason in `rejected` and
skipped, never raised: one bad row must not stop a backtest; the first row of
each reason is kept, located (file, line or row, column), in `rejected.examples`.

Speed: `speed=None` replays as fast as the caller polls; `speed=N` releases
each tick when N x the event time elapsed since the first tick has passed on
the monotonic clock. Either way `next_batch` never waits; a caller that polls
late gets the overdue ticks at once (nothing is dropped).
"""

from __future__ import annotations

import heapq
import math
import re
import time
import unicodedata
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence
from zoneinfo import ZoneInfo

import polars as pl
import yaml

from connectors.archives import ZIP_SUFFIX, Unpacked, is_zip, not_utf8, utf16_encoding
from connectors.column_map import (  # re-exported: replay users import the mapping from here
    DETECT,
    EPOCH,
    FIX_AGGRESSOR,
    NUMERIC_FIELDS,
    PRESETS,
    PRICE_FIELDS,
    QUOTE_FIELDS,
    DAY_CLOCK_UNITS,
    EXCEL_DAYS,
    TIME_OF_DAY,
    TRADE_FIELDS,
    UNITS,
    VALUE_FIELDS,
    ColumnMap,
    Refine,
    as_column_map,
    checked_price_offset,
    keep_check,
    PriceOffset,
    offset_of,
    shown_offset,
    Hours,
    keep_key,
    preset,
    preset_variant,
    side_lookup,
)
from connectors import json_lines
from connectors.field_names import normal_name
from connectors.json_lines import JSON_LINES_SUFFIXES, NOT_JSON, is_json_lines
from connectors.price_notation import (
    thirty_seconds,
    thirty_seconds_caution,
    thirty_seconds_facts,
    unread_price_hint,
    yield_caution,
    yield_columns,
)
from connectors.layout import (
    CSV_SUFFIXES,
    DBN_SUFFIXES,
    PARQUET_SUFFIXES,
    RIGHT_NAMES,
    SHARE_CLASS_NAMES,
    COMMA_GROUPED,
    DOT_GROUPED,
    EVENT_NAMES,
    GROUP_MARKS,
    HEADERLESS_BAR_STAMP,
    QUOTE_MARKS,
    TRADE_MARKS,
    SPACED_FRACTION,
    SPACE_GROUPED,
    Caution,
    Dialect,
    bar_notes,
    databento_book,
    date_of,
    describe_map,
    detect_columns,
    detected_unit,
    epoch_note,
    epoch_unit,
    headerless_map,
    long_rows,
    match_case,
    one_side_export,
    sniff_csv,
    stream_of,
    symbol_in_name,
    time_formats,
    trade_bars,
    two_way_date,
    vendor_notes,
)
from connectors.source import BEHIND_SAID_S, Source, check_max_ticks, check_snapshot, fingerprint
from connectors.stream_selection import NoStreamMatched, StreamSelection, shown
from connectors.ticks import QUOTE, TRADE, TS_MAX, InvalidTick, Tick, one_sided_quote, validate
from engine.yaml_files import safe_load_unique, yaml_error_line

__all__ = ["PRESETS", "ColumnMap", "FileReplay", "as_column_map", "detect_columns", "preset", "replay_ticks"]

ROW = "_row"  # the file row number, carried through a sort so a rejected row can be named
# An ISO time with a UTC offset ("...09:30:00.123-04:00", "...13:30:00Z"), read at that offset
UTC_OFFSET = re.compile(r"\d\d:\d\d(:\d\d([.,]\d+)?)?\s*(Z|[+-]\d\d(:?\d\d)?)$", re.IGNORECASE)


def _is_dbn(path: Path) -> bool:
    return path.name.lower().endswith(DBN_SUFFIXES)


def is_csv(path: Path) -> bool:
    return path.name.lower().endswith(CSV_SUFFIXES)


def _scan(path: Path, names: Sequence[str] | None, dialect: Dialect | None,
          overrides: dict[str, pl.DataType] | None = None) -> pl.LazyFrame:
    if names is not None and not is_csv(path):
        raise ValueError(f"{path}: names (the columns of a header-less CSV) apply to CSV files, not {path.name!r}")
    suffix = path.suffix.lower()
    if suffix in PARQUET_SUFFIXES:
        return pl.scan_parquet(path)
    if is_json_lines(path):  # parsed once into a Parquet copy, a row per line
        return pl.scan_parquet(json_lines.table(path).copy)
    if is_csv(path):
        names = list(names) if names is not None else None
        # Typed on purpose: polars infers CSV types from the first rows, and a later "61837.5" in an inferred
        # int column would abort the whole replay. Unparsable cells become nulls, rejected as missing_field.
        # Header names lose the spaces around them (`time; price`); the BOM, CRLF and quotes polars handles.
        if names is not None and dialect.long_rows:  # polars counts a header-less file's columns from its rows
            typed = {name: (overrides or {}).get(name, pl.String) for name in names}
            return pl.scan_csv(path, has_header=False, schema=typed, ignore_errors=overrides is not None,
                               separator=dialect.separator, decimal_comma=dialect.decimal_comma,
                               truncate_ragged_lines=True)
        return pl.scan_csv(path, has_header=names is None, new_columns=names, schema_overrides=overrides,
                           ignore_errors=overrides is not None, separator=dialect.separator,
                           decimal_comma=dialect.decimal_comma, truncate_ragged_lines=bool(dialect.long_rows),
                           with_column_names=None if names else lambda found: [n.strip() for n in found])
    known = PARQUET_SUFFIXES + CSV_SUFFIXES + JSON_LINES_SUFFIXES + DBN_SUFFIXES + (f"{ZIP_SUFFIX} (of these)",)
    raise ValueError(f"{path}: unsupported file type {suffix!r}; replay reads {', '.join(known)}")


def _csv_overrides(cmap: ColumnMap) -> dict[str, pl.DataType]:
    # Decimal epoch seconds stay text until _scale: as a float, 1717236000.25 s is off by ~100 ns.
    ts_type = {"datetime": pl.String, "s": pl.String, **dict.fromkeys((*DAY_CLOCK_UNITS, EXCEL_DAYS), pl.Float64)}.get(
        cmap.ts_unit, pl.Int64)
    out: dict[str, pl.DataType] = {c: pl.String for c in cmap.keep or ()}  # compared as text
    # numbers are read as text and parsed by _csv_number (grouping commas, German Excel's `42.002,00`)
    out |= {getattr(cmap, f): pl.String for f in NUMERIC_FIELDS if getattr(cmap, f)}
    out |= {column: pl.String for column in cmap.stream_columns}
    if len(cmap.ts_columns) > 1:  # a date column's text, beside its time's (a time of day: a number after midnight)
        return out | {column: pl.String for column in cmap.ts_columns[:-1]} | {cmap.ts_columns[-1]: (
            ts_type if cmap.ts_unit in DAY_CLOCK_UNITS else pl.String)}
    return out | {column: ts_type for column in cmap.ts_columns}


def _local(expr: pl.Expr, tz: str | None) -> pl.Expr:
    """Naive wall-clock datetimes -> instants in `tz` (None: UTC). In the repeated hour of a switch back from
    summer time the earlier instant is taken; a time skipped by the switch forward becomes null (missing_field)."""
    if tz is None:
        return expr
    return expr.dt.replace_time_zone(tz, ambiguous="earliest", non_existent="null")


# Zone names that read as a region's clock but are fixed offsets all year (IANA keeps them for old systems)
FIXED_ZONES = {"EST": ("New York", "America/New_York"), "MST": ("Denver", "America/Denver"),
               "HST": ("Honolulu", "Pacific/Honolulu")}

# said when a file's stream names (a column's values, or its file name: macOS writes those decomposed) were not in
# Unicode NFC: they replay in NFC, as the engine's wire takes them (connectors.ticks.check_normalized)
NFD_WRITTEN = "written decomposed (NFD: an accent as a code point of its own, as macOS writes file names)"
NAIVE_TZ_ONLY = ("for naive times: drop it (files of both kinds in one run: a replay list gives each file its "
                 "own map, `columns: {tz: ...}` on the naive ones; docs/replay.md)")


def _ts_expr(path: Path, cmap: ColumnMap, dtype: pl.DataType, first: str | None) -> pl.Expr:
    """The event-time column as int ns (datetimes, times of day) or raw numbers in ts_unit (scaled exactly
    in Python). `first` is the column's first value as text: whether datetime text carries a UTC offset."""
    col = _time_column(cmap)
    if cmap.ts_unit == "datetime":
        if cmap.date is not None and dtype != pl.String:
            raise ValueError(f"{path}: ts column {cmap.ts!r} is {dtype}, which holds its own date: drop date "
                             f"{cmap.date!r} (it gives the day of times of day)")
        if isinstance(dtype, pl.Datetime):
            if dtype.time_zone is not None and cmap.tz is not None:
                raise ValueError(f"{path}: ts column {cmap.ts!r} already carries time zone {dtype.time_zone!r}; "
                                 f"tz={cmap.tz!r} is {NAIVE_TZ_ONLY}")
            return _local(col, cmap.tz).dt.epoch("ns")
        if dtype == pl.Date:
            return _local(col.cast(pl.Datetime("ns")), cmap.tz).dt.epoch("ns")
        if dtype == pl.String:
            return _datetime_text(path, cmap, first)
        raise ValueError(f"{path}: ts column {cmap.ts!r} is {dtype}, not a datetime; set ts_unit to ns/us/ms/s")
    if len(cmap.ts_columns) > 1 and cmap.ts_unit in DAY_CLOCK_UNITS:  # DATE+TIME: each row's day, its own
        day, clock = (pl.col(c) for c in cmap.ts_columns)
        return _after_midnight(cmap, _row_day(day), clock.cast(pl.Float64, strict=False))
    if dtype == pl.String and cmap.ts_unit == "s":
        return _decimal_seconds_ns(col)
    if not (dtype.is_integer() or dtype.is_float()):
        hint = "; set ts_unit='datetime'" if isinstance(dtype, pl.Datetime) or dtype in (pl.Date, pl.String) else ""
        raise ValueError(f"{path}: ts column {cmap.ts!r} is {dtype}, not a number of {cmap.ts_unit}{hint}")
    if cmap.ts_unit == EXCEL_DAYS:  # to the millisecond, the finest a spreadsheet's time holds (1e-8 day: 0.9 ms)
        offset = ((col.cast(pl.Float64) - EXCEL_EPOCH_DAYS) * 86_400e3).round().cast(pl.Int64, strict=False) * 10**6
        return _local(pl.lit(0).cast(pl.Datetime("ns")) + pl.duration(nanoseconds=offset, time_unit="ns"),
                      cmap.tz).dt.epoch("ns")
    if cmap.ts_unit in DAY_CLOCK_UNITS:
        return _after_midnight(cmap, pl.lit(cmap.date).str.to_date(), col.cast(pl.Float64))
    return col


def _after_midnight(cmap: ColumnMap, day: pl.Expr, clock: pl.Expr) -> pl.Expr:
    """A time counted from midnight of `day` (a date) in the map's DAY_CLOCK_UNITS unit -> int ns, in `tz`."""
    midnight = day.cast(pl.Datetime("ns"))
    # float seconds of a day (< 86400) hold ns to well under 1 ns, so the rounding is exact enough
    offset = (clock * DAY_CLOCK_UNITS[cmap.ts_unit]).round().cast(pl.Int64, strict=False)
    # a time past the day (and a half: a session may run past midnight) is no time of this day: null, so
    # a file of another unit reads as no time at all (_time_hint), not as weeks after the date
    offset = pl.when((offset >= 0) & (offset < DAY_CLOCK_LIMIT_NS)).then(offset)
    return _local(midnight + pl.duration(nanoseconds=offset, time_unit="ns"), cmap.tz).dt.epoch("ns")


def _row_day(column: pl.Expr) -> pl.Expr:
    """A date column as dates: a date or datetime type, ISO text (`2026-03-06`), or YYYYMMDD as text or a number
    (TAQ's `20260306`); anything else is null (missing_field)."""
    text = column.cast(pl.String).str.strip_chars()
    return pl.coalesce(text.str.slice(0, 10).str.to_date("%Y-%m-%d", strict=False),
                       text.str.slice(0, 8).str.to_date("%Y%m%d", strict=False))


def _offset(path: Path, cmap: ColumnMap, ts_ns: pl.Expr, first: str | None) -> pl.Expr:
    """Wall-clock times at each row's UTC offset (`utc_offset`, hours) -> UTC: time - offset."""
    if cmap.utc_offset is None:
        return ts_ns
    if first is not None and UTC_OFFSET.search(first):
        raise ValueError(f"{path}: its times ({first[:40]!r}) carry their own UTC offset; utc_offset "
                         f"({cmap.utc_offset!r}) is for wall-clock times without one: drop it")
    hours = pl.col(cmap.utc_offset).cast(pl.String).str.strip_chars().cast(pl.Float64, strict=False)
    return ts_ns - (hours * 3_600_000_000_000).round().cast(pl.Int64)  # a row without an offset has no time


CLOCK_ONLY = re.compile(r"^\d{1,2}:\d\d(:\d\d([.,]\d+)?)?$")  # a time of day, no date: `09:00:00.123`


def _datetime_text(path: Path, cmap: ColumnMap, first: str | None) -> pl.Expr:
    """Datetime text -> int ns: ISO 8601 (or `ts_format`) with a UTC offset at that offset, naive in `tz`."""
    # 09:00:01,123 (a decimal comma, as European exports write it) reads as 09:00:01.123
    text = _time_column(cmap).str.strip_chars().str.replace(r"(:\d\d),(\d)", "${1}.${2}")
    text = text.str.replace(SPACED_FRACTION, "${1}.${2}")  # NinjaTrader's `20240102 143000 2537700`
    # the text's decimal comma before a fraction reads as a point (above): so does the format's (`%S,%3f`)
    fmt = re.sub(r"%S,%(\d?)f", r"%S.%\1f", cmap.ts_format) if cmap.ts_format else None
    if first is not None and CLOCK_ONLY.match(first):  # one file a day, its date in its name or given
        if cmap.date is None:
            raise ValueError(f"{path}: column {cmap.ts!r} holds {first[:40]!r}, a time of day without a date: give "
                             f"the day with --date YYYY-MM-DD (or --date file_name: the one date its name holds), "
                             f"and --tz ZONE for local times")
        text = pl.concat_str([pl.lit(cmap.date), text], separator=" ")
        fmt = f"%Y-%m-%d {fmt}" if fmt else "%Y-%m-%d %H:%M:%S%.f" if first.count(":") == 2 else "%Y-%m-%d %H:%M"
    elif cmap.date is not None:
        raise ValueError(f"{path}: date {cmap.date!r} gives the day of times of day, but column {cmap.ts!r} holds "
                         f"{(first or '')[:40]!r}, which is no time of day alone: drop date")
    if fmt is None and first is not None and two_way_date(first):  # polars would guess day-first
        fits = time_formats(first) or ["%m/%d/%Y %H:%M:%S%.f", "%d/%m/%Y %H:%M:%S%.f"]
        raise ValueError(f"{path}: column {cmap.ts!r} holds {first[:40]!r}, a date that reads more than one way "
                         f"({' or '.join(repr(f) for f in fits)}): give the one it is, e.g. --ts-format '{fits[0]}'")
    aware = any(code in fmt for code in ("%z", "%:z", "%#z")) if fmt else bool(first and UTC_OFFSET.search(first))
    if not aware:
        return _local(text.str.to_datetime(fmt, time_unit="ns", strict=False), cmap.tz).dt.epoch("ns")
    if cmap.tz is not None:
        raise ValueError(f"{path}: ts column {cmap.ts!r} carries its UTC offset ({first!r}); tz={cmap.tz!r} is "
                         f"{NAIVE_TZ_ONLY}")
    return text.str.to_datetime(fmt, time_unit="ns", time_zone="UTC", strict=False).dt.epoch("ns")


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


def _time_column(cmap: ColumnMap) -> pl.Expr:
    """The time column, or the text of date and time columns joined by a space (`ts: Date+Time`)."""
    if len(cmap.ts_columns) == 1:
        return pl.col(cmap.ts)
    return pl.concat_str([pl.col(c).cast(pl.String).str.strip_chars() for c in cmap.ts_columns], separator=" ")


DAY_CLOCK_LIMIT_NS = 36 * 3600 * 10**9
EXCEL_EPOCH_DAYS = 25569.0  # 1970-01-01 as a spreadsheet's serial date (day 0: 1899-12-30)


def _time_hint(path: Path, cmap: ColumnMap, first: str) -> str:
    """Why no row's time could be read, and the option that reads it."""
    where = f"{path}: no row's time could be read: column {cmap.ts!r} holds {first[:40]!r}"
    try:
        number = float(first)
    except ValueError:
        number = None
    if number is not None and cmap.ts_unit in DAY_CLOCK_UNITS:
        others = [u for u, ns in DAY_CLOCK_UNITS.items() if 0 <= number * ns < DAY_CLOCK_LIMIT_NS]
        return (f"{where}, which is not a time of one day in {cmap.ts_unit}"
                + (f": give --ts-unit {others[0]}" if others else ""))
    if number is not None and cmap.ts_unit == "datetime":
        return f"{where}, a number: give its epoch unit, e.g. --ts-unit {epoch_unit(number)}"
    if number is not None and cmap.ts_unit in UNITS and abs(number) * UNITS[cmap.ts_unit] >= TS_MAX:
        return (f"{where}, which as {cmap.ts_unit} since the epoch is past the year 2262 (the last instant int64 "
                f"nanoseconds hold): if it counts {epoch_unit(number)}, give --ts-unit {epoch_unit(number)}")
    if number is None and cmap.ts_unit in UNITS:
        return (f"{where}, not a number of {cmap.ts_unit} since the epoch: for date/time text give --ts-unit "
                f"datetime (and --ts-format if it is not ISO 8601)")
    if cmap.ts_unit == "datetime":
        fits = [f for f in time_formats(first) if f != cmap.ts_format]
        example = " or ".join(repr(f) for f in fits) if fits else "'%Y%m%d %H:%M:%S%.f'"
        return (f"{where}, which is not ISO 8601{' nor ' + repr(cmap.ts_format) if cmap.ts_format else ''}: "
                f"give its format with strftime codes, e.g. --ts-format {example}"
                + (" (both read it: which is the day?)" if len(fits) > 1 else ""))
    return f"{where}, not a number of {cmap.ts_unit}"


def _decimal_seconds_ns(text: pl.Expr) -> pl.Expr:
    """Decimal seconds written as text ("1717236000.25") -> int ns, exactly: as a float the same value is off by
    up to ~100 ns. Text that is not plain decimal (exponents, words) becomes null (missing_field)."""
    text = text.str.strip_chars()
    negative = text.str.starts_with("-")
    parts = text.str.strip_chars_start("+-").str.split_exact(".", 1)
    whole = parts.struct.field("field_0").cast(pl.Int64, strict=False)
    fraction = parts.struct.field("field_1").fill_null("0").str.pad_end(9, "0").str.slice(0, 9)
    fraction = pl.when(fraction.str.contains(r"^\d{9}$")).then(fraction.cast(pl.Int64, strict=False))
    # whole seconds past int64 nanoseconds (a column of ms read as s) are null, not wrapped to some other time
    whole = pl.when(whole < TS_MAX // 1_000_000_000).then(whole)
    magnitude = whole * 1_000_000_000 + fraction
    return pl.when(negative).then(-magnitude).otherwise(magnitude)


def _ts_in_ns(cmap: ColumnMap, dtype: pl.DataType) -> bool:
    """Whether _ts_expr already gives int ns (else raw numbers in ts_unit, scaled in Python)."""
    return cmap.ts_unit in ("datetime", *DAY_CLOCK_UNITS, EXCEL_DAYS) or (cmap.ts_unit == "s" and dtype == pl.String)


def _scale(raw: Any, factor: int) -> Any:
    if isinstance(raw, float):  # a non-finite float stays a float and is rejected as ts_not_int
        return round(raw * factor) if math.isfinite(raw) else raw
    return raw * factor  # exact for ints of any size: an overflow is rejected as ts_out_of_range


@dataclass(frozen=True)
class _FilePlan:
    """One file's normalised lazy query (`_ts`, wire fields, `_row`) and how its rows become wire maps."""

    path: Path
    columns: ColumnMap
    frame: pl.LazyFrame
    keys: tuple[str, ...]
    sorted_on_read: bool
    ts_factor: int  # ns per unit of the `_ts` column: 1 when the query computed ns already
    notes: tuple[str, ...] = ()  # what a user should know about how the file was read (a guessed layout, ...)
    origin: Path | None = None  # the zip archive `path` was unpacked from (connectors/archives.py), if any
    book: str | None = None  # "mbo" / "mbp-1": Databento order-book records, reduced as DBN files are (`_book`)
    empty_sides: bool = False  # an empty bid or ask is a book side with no orders (Tardis.dev's): never filled
    bars: bool = False  # rows are bars (OHLC), each a trade at its close (layout.trade_bars)
    nonpositive_prices: bool = False  # every price of a row that trades is <= 0 (`_price_offset_hint`)
    nonpositive_rows: tuple[int, int] = (0, 0)  # (rows that trade at a price <= 0, rows that trade) (ditto)
    long_rows: Mapping[int, int] = field(default_factory=dict)  # row -> its fields, for rows with too many
    dialect: Dialect | None = None  # a CSV's, as read
    schema: Mapping[str, Any] = field(default_factory=dict)  # the file's columns and their types
    unit_given: bool = False  # the epoch unit was given (a map's or --ts-unit), not read from the first time
    bad_lines: Mapping[int, str] = field(default_factory=dict)  # a JSON-lines file's row -> why it is no object
    tickless: Mapping[int, str] = field(default_factory=dict)  # its row -> why: a message without ticks (an ack)
    footer: tuple[int, str] | None = None  # a CSV's last row that is a line of text, no data (`_footer`)
    reducers: list = field(default_factory=list)  # a book export's reducer of the last read, for `found_on_read`

    def describe(self) -> dict[str, Any]:
        """What the replay's fingerprint holds for this file."""
        return self.columns.to_dict()

    def row_count(self) -> int | None:
        return self.frame.select(pl.len()).collect().item()

    @property
    def given_name(self) -> str:
        """The file as the user gave it: its path, or an archive's path and the member's name."""
        return str(self.path if self.origin is None else self.origin if self.origin.name == self.path.name else
                   f"{self.origin} ({self.path.name} inside)")  # an archive's member; a UTF-16 file's copy is the file

    def where(self, row: int) -> str:
        """A row as a user finds it: the line of a CSV file (after the header), the row of a Parquet file."""
        name = self.given_name
        if is_csv(self.path):
            return f"{name} line {row + (1 if self.columns.names is not None else 2)}"
        if is_json_lines(self.path):  # a line, a message's line (several ticks), a REST dump's record
            return f"{name} {json_lines.table(self.path).where(row)}"
        return f"{name} row {row + 1}"

    def column_of(self, tick_field: str) -> str | None:
        return self.columns.column_of(tick_field)

    def cell_text(self, row: int, column: str) -> str | None:
        """A cell's text as written: a CSV's, or a Parquet text column's (`110-15+` in a bid column; None for
        other Parquet columns, or no such column), for the first reject of a reason only: the row read again, so
        that the read itself carries no text beside its numbers."""
        if column not in self.schema or (self.dialect is None and self.schema[column] != pl.String):
            return None
        cell = _scan(self.path, self.columns.names, self.dialect, {column: pl.String} if self.dialect else None) \
            .select(pl.col(column).cast(pl.String)).slice(row, 1).collect()
        return cell.item() if cell.height else None

    def found_on_read(self) -> list[str]:
        """What reading the file found that a run says at its end: a book export's cancels and fills of orders
        the book never saw."""
        return [note for reducer in self.reducers for note in reducer.unseen_note(self.given_name)]

    def streams_held(self) -> set[str]:
        return self.stream_names()

    @property
    def price_offset(self) -> float | dict[str, float] | None:
        return self.columns.price_offset

    def stream_names(self) -> set[str]:
        """Every stream the file's rows name (a scan of its stream column alone): what a selection is checked
        against."""
        cmap = self.columns
        if cmap.stream_col is None:
            return {cmap.stream or cmap.default_stream or ""}
        return set(self.frame.select(pl.col("stream").drop_nulls().unique()).collect().to_series().to_list())

    def batches(self, chunk_rows: int) -> Iterator[list[tuple[int, dict[str, Any]]]]:
        """(row number, wire map) per row, `chunk_rows` rows at a time."""
        self.reducers.clear()  # a read again (a restore) finds afresh
        convert = self._converter()
        if self.bad_lines:  # JSON-lines lines that are no object: rejects, the rest of the file read
            yield [(row, InvalidTick(NOT_JSON, why)) for row, why in self.bad_lines.items()]
        if self.tickless:  # subscription acks, heartbeats: left out, as rows a keep filter leaves out are
            yield [(row, InvalidTick("filtered_out", why)) for row, why in self.tickless.items()]
        for chunk in self.frame.collect_batches(chunk_size=chunk_rows, lazy=True):
            out = []
            for row in chunk.rows():
                wire = convert(row)
                if type(wire) is tuple:  # a trade with the quote it met: the quote, then the trade
                    out += [(row[-1], part) for part in wire]
                elif wire is not None:  # None: an order-book record that makes no tick
                    out.append((row[-1], wire))
            yield out

    def _converter(self) -> Callable[[tuple], dict[str, Any] | tuple[dict[str, Any], ...] | InvalidTick]:
        cmap, factor = self.columns, self.ts_factor
        # A map with only one kind's columns fixes the kind, so a row missing its price reads as missing_field.
        kind = cmap.kind or (QUOTE if cmap.price is None else TRADE if cmap.bid is None else None)
        stream = cmap.stream or (cmap.default_stream if cmap.stream_col is None else None)
        fixed = {k: v for k, v in (("stream", stream), ("kind", kind)) if v is not None}
        side_of, scale, signed = side_lookup(cmap.side_map), cmap.price_scale, bool(cmap.signed_size)
        offset = cmap.price_offset
        # per stream: each row's own, looked up by its stream (a column's, at `stream_at`, or the fixed name)
        per_stream = offset if isinstance(offset, dict) else None
        stream_at = self.keys.index("stream") + 1 if "stream" in self.keys else None
        pairs = tuple(enumerate(self.keys, start=1))
        kept = len(self.keys) + 1  # the keep columns follow the keys, then the book's (`_book_columns`)
        split = kind is None and self.book is None  # a row with a trade and a quote: both (an order book's: `_book`)
        left_out, kept_end = (keep_check(cmap.keep), kept + len(cmap.keep)) if cmap.keep else (None, kept)
        long_rows = self.long_rows
        quotes = cmap.bid is not None  # a 0 side is no side (one_sided_quote), unless an offset says 0 is a price
        # a quote row with one side empty: no bid (or no offer), unless the map fills it from the previous quote
        empty_side = cmap.bid is not None and not cmap.fill_quotes and (kind == QUOTE or split)
        unreadable = ("bid", "ask") if self.dialect is not None else ()  # a CSV's unreadable bid or ask: NaN
        marks = tuple(cmap.keep) if split and cmap.keep and cmap.price and cmap.bid else None  # LSEG's Type
        # a bar of price 0 and volume 0 (Cboe DataShop's interval without trades): no trade, not a price of 0
        bar_price = self.keys.index("price") + 1 if self.bars and cmap.size is not None else None

        footer = self.footer
        # (_table_plan refuses a window without a zone for naive times)
        left_out_hours = Hours.parse(cmap.hours).left_out(cmap.tz or "UTC", cmap.hours) if cmap.hours else None

        def convert(row: tuple) -> dict[str, Any] | tuple[dict[str, Any], ...] | InvalidTick:
            if footer is not None and row[-1] == footer[0]:
                return InvalidTick("filtered_out", f"a footer line ({footer[1]!r}), no tick: not an error")
            if long_rows and (fields := long_rows.get(row[-1])):
                return InvalidTick("extra_fields", f"the row has {fields} fields, more than the file's columns (a "
                                                   f"stray separator?): its cells cannot be told apart")
            if left_out is not None and (why := left_out(row[kept:kept_end])):
                return InvalidTick("filtered_out", why)
            out = dict(fixed)
            if row[0] is not None:
                out["ts"] = _scale(row[0], factor)
                if left_out_hours is not None and type(out["ts"]) is int and (outside := left_out_hours(out["ts"])):
                    return outside
            unread = False
            row_offset = offset if per_stream is None else \
                per_stream.get(row[stream_at] if stream_at is not None else stream)
            for i, key in pairs:
                value = row[i]
                if value is not None and key in unreadable and value != value:  # NaN: neither empty nor a number
                    unread, value = True, None
                elif value is not None and key == "side":
                    value = side_of(value)
                elif key in PRICE_FIELDS and type(value) in (int, float) and \
                        (scale is not None or row_offset is not None):
                    if scale is not None:
                        value = value / scale  # fixed point (LOBSTER, Databento); polars' x * (1/scale) is 1 ulp off
                    if row_offset is not None:
                        value = value + row_offset
                if value is not None:
                    out[key] = value
            if marks is not None and "price" not in out and "bid" not in out and "ask" not in out:
                for column, mark in zip(marks, row[kept:kept_end]):  # the row says its kind: what it lacks is said
                    if (kind_of := _marked_kind(mark)) is not None:
                        lacks = f"no price (column {cmap.price!r})" if kind_of == TRADE else \
                            f"neither bid nor ask (columns {cmap.bid!r}, {cmap.ask!r})"
                        return InvalidTick("missing_field", f"column {column!r} marks the row {mark} but it has "
                                                            f"{lacks}", _stream(out))
            no_side = one_sided_quote(out) if quotes and row_offset is None else None
            if no_side is None and empty_side and not unread and ("bid" in out) != ("ask" in out):
                no_side = _empty_side(out)
            if no_side is not None:  # the stream named, so that a stream the selection leaves out is filtered_out
                no_side = InvalidTick(no_side.reason, no_side.message, _stream(out))
                return no_side if not split or "price" not in out else \
                    (no_side, {k: v for k, v in out.items() if k not in QUOTE_FIELDS})
            if bar_price is not None and row[bar_price] == 0 and out.get("size") == 0:
                no_trade = InvalidTick("filtered_out", f"{NO_TRADE} ({cmap.price} 0, {cmap.size} 0): a bar "
                                                       f"without trades, which has no price to replay")
                return (_trade_and_quote(out)[0], no_trade) if split and ("bid" in out or "ask" in out) \
                    else no_trade
            if signed and isinstance(size := out.get("size"), (int, float)) and "price" in out:
                out["size"], out["side"] = abs(size), "sell" if size < 0 else "buy" if size > 0 else None
            if split and "price" in out and ("bid" in out or "ask" in out):
                return _trade_and_quote(out)
            if split and "bid" in out and (traded := next((k for k in ("size", "side") if k in out), None)):
                return _quote_without_its_trade(out, traded)
            return out

        return convert if self.book is None else self._book(convert, kept_end)

    def _book(self, convert: Callable[[tuple], Any], first: int) -> Callable[[tuple], Any]:
        """Rows of a Databento order-book export (the columns `_book_columns` adds from ``first`` on) through
        the DBN reader's reduction (connectors/dbn.py BookReducer): a trade for action T, a quote when the top of
        book changed at the end of an event, nothing for the other records."""
        from connectors.dbn import F_LAST, UNDEF_PRICE, BookReducer

        # a fixed-point export's empty side or trade without a price, as read (shifted as its stream's prices are)
        unshifted = UNDEF_PRICE / (self.columns.price_scale or 1)
        reducer = BookReducer(rebuild=self.book == "mbo", scale=1.0, undefined=unshifted)
        self.reducers.append(reducer)

        def reduce(row: tuple) -> dict[str, Any] | InvalidTick | None:
            wire = convert(row)
            if isinstance(wire, InvalidTick) or "ts" not in wire or "stream" not in wire:
                return wire  # rejected as it is
            action, flags, order = row[first : first + 3]
            quote = wire.get("bid"), wire.get("bid_size"), wire.get("ask"), wire.get("ask_size")
            undefined = unshifted + offset_of(self.columns.price_offset, wire["stream"])
            empty = None in quote or undefined in (quote[0], quote[2])
            return reducer.record(wire["stream"], wire["stream"], wire["ts"], str(action), wire.get("side"),
                                  wire.get("price"), wire.get("size", 0.0), flags is None or bool(flags & F_LAST),
                                  order, None if empty else quote, undefined=undefined)

        return reduce


def _stream(wire: dict[str, Any]) -> str | None:
    """A row's stream, for a reject made before validation (None: it has none, or not as text)."""
    stream = wire.get("stream")
    return stream if isinstance(stream, str) else None


def _empty_side(wire: dict[str, Any]) -> InvalidTick:
    """A quote row whose bid or ask cell is empty: no bid (or no offer), a one-sided quote, as a 0 side is
    (connectors/ticks.py one_sided_quote); never the previous quote's side, which may no longer exist."""
    side, other = ("bid", "ask") if "bid" not in wire else ("ask", "bid")
    return InvalidTick("missing_field", f"{side} is empty beside {other} {wire[other]}: a one-sided quote (no {side}), "
                                        f"which the engine does not take (a quote has both sides)")


def _marked_kind(mark: Any) -> str | None:
    """The kind a kind column's value names (LSEG's Type: Trade, Quote), else None."""
    text = str(mark).strip().lower() if mark is not None else ""
    return TRADE if text in TRADE_MARKS else QUOTE if text in QUOTE_MARKS else None


def _quote_without_its_trade(row: dict[str, Any], traded: str) -> tuple[dict[str, Any], InvalidTick]:
    """A row holding a quote and a trade whose price is empty or not a number: its quote replays, its trade is
    rejected as missing_field on the price, as a row with a 0 bid keeps its trade (never a quote refused for a
    trade field it holds)."""
    quote, _ = _trade_and_quote(row)
    return quote, InvalidTick("missing_field", f"price is missing beside {traded} {row[traded]}: the row's trade "
                                               f"is not read (its quote is)", _stream(row))


def _trade_and_quote(row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A row holding a trade and a quote (a trade printed with the book's best bid and offer, Coinbase Advanced
    Trade's, TAQ joined with the NBBO): two ticks at its time, the quote first (the book the trade met)."""
    common = {k: row[k] for k in ("ts", "stream") if k in row}
    quote = {**common, "kind": QUOTE, **{k: row[k] for k in QUOTE_FIELDS if k in row}}
    trade = {**common, "kind": TRADE, **{k: row[k] for k in TRADE_FIELDS if k in row}}
    return quote, trade


# polars' refusals of a CSV row with more fields than the file's columns (with and without a header)
LONG_ROW_ERRORS = re.compile(r"more fields than defined|new_columns does not match|truncate_ragged_lines|"
                            r"extra_columns")


def _plan(path: Path, cmap: ColumnMap | Refine | None, explicit: bool) -> Any:
    if not path.is_file():
        raise FileNotFoundError(f"replay file not found: {path}")
    if _is_dbn(path):  # an order-by-order feed, reduced to trades and top of book
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
    README's `trades.csv bbo.parquet`): `tz` is for naive times, so that file keeps its own, said in a note. None
    when it was refused for anything else, or when the map was the file's own or a whole map (a preset, a map of
    its columns: a contradiction there is refused)."""
    tz = cmap.keys.get("tz") if isinstance(cmap, Refine) else None
    if tz is None or NAIVE_TZ_ONLY not in str(refused):
        return None
    rest = {k: v for k, v in cmap.keys.items() if k != "tz"}
    bare_hours = rest.get("hours") is not None and Hours.parse(rest["hours"]).zone is None
    if bare_hours:
        rest["hours"] = zoned_hours(rest["hours"], tz)
    plan = _table_plan(path, Refine(rest) if rest else None)
    said = (f"{path.name}: its times carry their own UTC offset, so --tz {tz} (for naive times) is not applied to "
            f"it" + (f" (the hours kept, {rest['hours']!r}, are on its wall clock)" if bare_hours else ""))
    return replace(plan, notes=(said, *plan.notes))


DBN_KEYS = ("price_offset", "hours")  # what a DBN file takes of a column map: its layout is fixed


def _dbn_keys(path: Path, cmap: ColumnMap | Refine | None, explicit: bool) -> tuple[PriceOffset | None, str | None]:
    """A DBN file's layout is fixed: of a column map it takes price_offset (a calendar spread's prices below zero)
    and hours (a session's window; one without a zone takes the tz given for every file, else is refused). The map
    for every file keeps its other keys for the tabular files; the file's own is refused for them."""
    keys = cmap.keys if isinstance(cmap, Refine) else cmap.to_dict() if cmap is not None else {}
    if explicit and (others := sorted(set(keys) - set(DBN_KEYS))):
        raise ValueError(f"{path}: a DBN file has a fixed layout: of a column map it takes "
                         f"{' and '.join(DBN_KEYS)} alone, got {', '.join(others)}")
    hours = keys.get("hours")
    if hours is not None and Hours.parse(hours).zone is None:  # (a bad window is refused before a record is read)
        if not keys.get("tz"):  # DBN times are UTC, but a CME user's bare 08:30-15:15 means Chicago's: ask
            raise ValueError(bare_hours_refused(path, hours))
        hours = zoned_hours(hours, keys["tz"])  # --tz names the wall clock a bare window is on (not DBN's times)
    return checked_price_offset(keys.get("price_offset")), hours


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
                own_map: bool = False) -> _FilePlan:
    """The plan of a Parquet or CSV file; `long_rows_of`: find the CSV's rows with more fields than its columns;
    `own_map`: the map is the file's own (a replay list entry's), not the one for every file."""
    given = cmap
    cmap, dialect, schema, notes = _layout(path, cmap, long_rows_of, own_map)
    if cmap.stream is not None and (nfc := unicodedata.normalize("NFC", cmap.stream)) != cmap.stream:
        cmap = replace(cmap, stream=nfc)  # (a file name macOS wrote in NFD): the engine takes NFC names only
        notes.append(f"{path.name}: stream {nfc}: its name was {NFD_WRITTEN}; it replays in Unicode NFC, the one "
                     f"form the engine takes")
    if dialect is not None and dialect.long_rows:
        notes.append(f"{path.name}: {len(dialect.long_rows)} row(s) with more fields than its {len(schema)} columns: "
                     f"each rejected as extra_fields (the first is named among the rejects), the others read")
    overrides = _csv_overrides(cmap) if is_csv(path) else None
    # what the scan below will read: date+time columns are joined as text
    ts_type = pl.String if len(cmap.ts_columns) > 1 else overrides[cmap.ts] if overrides else schema[cmap.ts]
    first = _first_text(path, cmap.names, dialect, cmap.ts_columns)
    if cmap.hours is not None and Hours.parse(cmap.hours).zone is None and cmap.tz is None:
        raise ValueError(bare_hours_refused(path, cmap.hours))
    exprs = [_offset(path, cmap, _ts_expr(path, cmap, ts_type, first), first).alias("_ts")]
    keys: list[str] = []
    if cmap.stream_col:  # '/' separates answer topics: EUR/USD replays as EUR-USD; NFC: see check_normalized
        exprs.append(_stream_column(cmap).str.replace_all("/", "-", literal=True).str.normalize("NFC")
                     .alias("stream"))
        keys.append("stream")
    price_texts: dict[str, pl.Expr] = {}  # price, bid, ask read from text: what may be written in 32nds
    for key in VALUE_FIELDS:
        if (name := getattr(cmap, key)) is not None:
            text = key in NUMERIC_FIELDS and schema[name] == pl.String  # Parquet of JSON: Coinbase's "42290.12"
            if key in PRICE_FIELDS and (text or dialect is not None):
                price_texts[key] = pl.col(name).cast(pl.String).str.strip_chars()
            if key in NUMERIC_FIELDS and dialect is not None:  # a CSV's numbers, read as text
                raw = pl.col(name).cast(pl.String).str.strip_chars()
                col = _csv_number(raw, dialect.decimal_comma)
                if key in price_texts and cmap.price_format == "32nds":
                    col = thirty_seconds(raw, col)
                # empty: null (filled by _filled_quotes, else a one-sided quote); unreadable: NaN, so that it is
                # refused as unreadable, never filled nor called a one-sided quote
                if cmap.fill_quotes and key in QUOTE_FIELDS or key in ("bid", "ask"):
                    col = pl.when(raw.is_null() | (raw == "")).then(None).otherwise(col.fill_null(float("nan")))
            elif key in price_texts and cmap.price_format == "32nds":
                col = thirty_seconds(price_texts[key], price_texts[key].cast(pl.Float64, strict=False))
            elif schema[name].is_decimal() or text:
                col = pl.col(name).cast(pl.Float64, strict=False)
            else:
                col = pl.col(name)
            exprs.append(col.alias(key))
            keys.append(key)
    if cmap.price is not None and cmap.size is None:  # a price series: each price a trade of size 1
        exprs.append(pl.lit(1.0).alias("size"))
        keys.append("size")
    exprs += [pl.col(column).alias(f"_keep{i}") for i, column in enumerate(cmap.keep or ())]  # after the keys
    book = None if isinstance(given, ColumnMap) else databento_book(cmap, schema)  # a whole map given is followed
    action = next((n for n in schema if normal_name(n) == "action"), None)
    if book == "mbp-1" and _distinct_text(path, cmap.names, dialect, action, 3, SAMPLE_ROWS) == ["T"]:
        # TBBO (MBP-1's fields, a record per trade with the best bid and offer just before it): every row is a
        # trade and the quote it met, read as any such row is, the quote first
        book = None
        notes.append(f"{path.name}: Databento TBBO records (every action T): each row replays as the best bid and "
                     f"offer before the trade, then the trade")
    if book is not None:
        exprs += _book_columns(schema)
        notes.append(f"{path.name}: Databento {book} records: trades (action T) and the top of book when it changes "
                     f"at the end of an event, as a DBN file of the schema is read")
    rows = _scan(path, cmap.names, dialect, overrides).with_row_index(ROW)
    if is_csv(path) or is_json_lines(path):  # a blank line (often at the end) is no row at all
        rows = rows.filter(pl.any_horizontal(pl.all().exclude(ROW).is_not_null()))
    frame = rows.select(*exprs, ROW)
    raw_stream = _stream_column(cmap) if cmap.stream_col else pl.lit("")
    # a price column that is zero or below wherever a row trades: an instrument that trades there (a spread)
    prices = [e for e, key in zip(exprs[1:], keys) if key in ("price", "size")] if cmap.price is not None else []
    traded = (pl.col("price").filter(pl.col("size") > 0) if cmap.size is not None else pl.col("price")).drop_nulls()
    facts = rows.select(exprs[0], raw_stream.alias("_stream"), *prices,
                        *(cells.alias(f"_text_{key}") for key, cells in price_texts.items())).select(
        unsorted=(pl.col("_ts").drop_nulls().diff() < 0).any(), timed=pl.col("_ts").is_not_null().any(),
        first_ts=pl.col("_ts").drop_nulls().first(), slashes=pl.col("_stream").str.contains("/", literal=True).any(),
        denormalized=(pl.col("_stream") != pl.col("_stream").str.normalize("NFC")).any(),
        nonpositive_prices=(traded.max() <= 0) if prices else pl.lit(False),
        nonpositive_rows=(traded <= 0).sum() if prices else pl.lit(0),
        trading_rows=traded.len() if prices else pl.lit(0),
        *thirty_seconds_facts({key: pl.col(f"_text_{key}") for key in price_texts}),
    ).collect().row(0, named=True)
    notes += thirty_seconds_caution(path, cmap, facts) + yield_caution(path, cmap)
    if not facts["timed"] and first is not None:
        raise ValueError(_time_hint(path, cmap, first))
    if facts["unsorted"]:  # stable: rows with equal timestamps keep their file order
        frame = frame.sort("_ts", maintain_order=True, nulls_last=True)
        repeated = (f"; in {cmap.tz}, also a wall clock that goes back an hour when summer time ends: that "
                    f"hour's second pass is read at the first one's instants" if cmap.tz else "")
        notes.append(f"{path.name}: its rows are not in time order (newest first, or merged from several sources"
                     f"{repeated}): replayed sorted by time, rows of equal times in file order")
    if cmap.fill_quotes:  # after the sort: "previous" is in time order, per stream
        frame = frame.with_columns(_filled_quotes(keys))
    factor = 1 if _ts_in_ns(cmap, ts_type) else UNITS[cmap.ts_unit]
    if facts["slashes"]:
        notes.append(f"{path.name}: stream names with '/' replay with '-' instead (EUR/USD as EUR-USD): "
                     f"answer topics use '/' as their separator")
        notes += _renamed_onto(path, rows.select(raw_stream.alias("_stream")))
    if facts["denormalized"]:
        notes.append(f"{path.name}: stream names {NFD_WRITTEN} replay in Unicode NFC, the one form the engine "
                     f"takes, so that a name is one stream however it was written")
    if (region := FIXED_ZONES.get(cmap.tz or "")) is not None:  # a trader's "EST" means New York's clock
        notes.append(f"{path.name}: tz {cmap.tz} is a fixed offset all year, with no summer time: if the times are "
                     f"{region[0]}'s clock (summer time included), give --tz {region[1]}")
    if facts["first_ts"] is not None and cmap.ts_unit in UNITS:
        notes += epoch_note(path, cmap, _scale(facts["first_ts"], factor))
    empty_sides = cmap.bid is not None and TARDIS_SIGNS <= {normal_name(n) for n in schema}
    unit_given = isinstance(given, ColumnMap) and given.ts_unit in UNITS or \
        isinstance(given, Refine) and given.keys.get("ts_unit") in UNITS
    footer = _footer(rows, exprs[0]) if is_csv(path) else None
    lines = json_lines.table(path) if is_json_lines(path) else None  # (parsed once, kept by the module)
    bad_lines = lines.bad_lines if lines is not None else {}
    tickless = lines.skipped if lines is not None else {}
    notes += lines.notes if lines is not None else []
    return _FilePlan(path, cmap, frame, tuple(keys), bool(facts["unsorted"]), factor, tuple(notes), book=book,
                     dialect=dialect, schema=schema, unit_given=unit_given,
                     empty_sides=empty_sides, bars=trade_bars(cmap, schema),
                     nonpositive_prices=bool(facts["nonpositive_prices"]),
                     nonpositive_rows=(int(facts["nonpositive_rows"] or 0), int(facts["trading_rows"] or 0)),
                     long_rows=dict(dialect.long_rows) if dialect is not None else {}, bad_lines=bad_lines,
                     tickless=tickless, footer=footer)


FOOTER_TEXT = re.compile(r"[A-Za-z]{3}")  # words: "Downloaded from Barchart.com as of ...", "Total", ...


def _footer(rows: pl.LazyFrame, ts: pl.Expr) -> tuple[int, str] | None:
    """(row, its text) when a CSV's last row is a line of words in its first cell and nothing else, whose time does
    not read (Barchart's `Downloaded from Barchart.com as of 03-06-2026 04:34pm CST`): a footer, left out as
    filtered_out rather than rejected as a tick missing its time."""
    last = rows.tail(1).select(pl.all(), ts.alias("_ts")).collect()
    if not last.height:
        return None
    cells = [v for k, v in last.row(0, named=True).items() if k not in (ROW, "_ts") and v not in (None, "")]
    text = str(cells[0]).strip() if len(cells) == 1 else ""
    if last["_ts"][0] is not None or not FOOTER_TEXT.search(text):
        return None
    return int(last[ROW][0]), text[:60]


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
    """A Databento export's action, flags and order id (null where the file has none), for `_FilePlan._book`."""
    normal = {n.strip().lower(): n for n in schema}
    return [pl.col(normal["action"]).cast(pl.String).alias("_action"),
            (pl.col(normal["flags"]).cast(pl.Int64, strict=False) if "flags" in normal else pl.lit(None)).alias("_flags"),
            (pl.col(normal["order_id"]) if "order_id" in normal else pl.lit(None)).alias("_order")]


def _layout(path: Path, spec: ColumnMap | Refine | None, long_rows_of: bool = False, own_map: bool = False,
            ) -> tuple[ColumnMap, Dialect | None, dict, list[str]]:
    """The map a file is read with (given; detected; or detected, then refined), its CSV dialect, its columns,
    and the notes that say how it was read when that was a guess. `long_rows_of`: the dialect names the CSV's rows
    with more fields than its columns, which are read truncated (`long_rows`)."""
    if not isinstance(spec, ColumnMap) and (why := one_side_export(path)):
        raise ValueError(why)
    names = spec.names if isinstance(spec, ColumnMap) else spec.keys.get("names") if spec is not None else None
    decimal = spec.decimal if isinstance(spec, ColumnMap) else spec.keys.get("decimal") if spec is not None else None
    dialect = sniff_csv(path, decimal) if is_csv(path) else None
    guessed, how = None, ""
    if names is None and not isinstance(spec, ColumnMap) and dialect is not None and not dialect.header \
            and dialect.rows:
        guessed, how = headerless_map(path, dialect.rows, dialect.separator)
        names = guessed.names
    if long_rows_of and dialect is not None:
        if names is not None and dialect.width > len(names):  # most rows are longer: the names are too few
            raise ValueError(f"{path}: its rows have {dialect.width} fields, more than the {len(names)} names")
        dialect = replace(dialect, long_rows=long_rows(path, dialect, len(names) if names is not None else None))
    try:
        schema = dict(_scan(path, names, dialect).collect_schema())
    except pl.exceptions.PolarsError as e:
        if names is not None:
            raise ValueError(f"{path}: names gives {len(names)} columns {list(names)}, which does not fit "
                             f"the file's rows ({str(e).splitlines()[0]})") from None
        raise ValueError(f"{path}: cannot read it as {path.suffix.lower()}: {str(e).splitlines()[0]}") from None
    first = lambda column: _first_text(path, names, dialect, column)  # noqa: E731
    kind_notes: list[str] = []
    shaped_note = None
    if isinstance(spec, ColumnMap):
        cmap = match_case(preset_variant(spec, list(schema)), schema)
        if cmap.ts != spec.ts and spec.preset is not None and cmap.preset == spec.preset:
            kind_notes.append(f"{path.name}: --preset {spec.preset} read in its vendor's other layout: "
                              f"{describe_map(cmap)}")
    else:
        try:
            hints = spec.keys if isinstance(spec, Refine) else None
            shaped = json_lines.table(path).columns_for(hints) if is_json_lines(path) else None  # an exchange's
            shaped_note = json_lines.table(path).shape.note if shaped is not None and guessed is None else None
            cmap = guessed or shaped or detect_columns(path, schema, first, hints)
        except ValueError as e:  # names misread from another encoding than UTF-8 are why: said
            if is_csv(path) and (why := not_utf8(path)):
                raise ValueError(f"{e}; {why}") from None
            raise
        if names is not None and cmap.names is None:
            cmap = replace(cmap, names=tuple(names))
        if _writes_only_changes(cmap, list(schema)):
            cmap = replace(cmap, fill_quotes=True)
        try:
            cmap = spec.apply(cmap) if isinstance(spec, Refine) else cmap
        except ValueError as e:  # the keys given, applied to each file: name the one they do not fit
            every = "" if own_map else " (the keys given apply to every file; a replay list gives each file its " \
                                       "own map: docs/replay.md)"
            raise ValueError(f"{path}: {e}{every}") from None
        cmap, kind_notes = _kind_column(path, cmap, schema, names, dialect)
        cmap = _fix_sides(path, cmap, schema, names, dialect)
        cmap, correction_notes = _taq_corrections(path, cmap, schema, names, dialect)
        kind_notes += _venue_note(path, cmap, schema, names, dialect) + correction_notes + [
            note for said in (_condition_note, _amendment_note, _sale_condition_note)
            for note in said(path, cmap, schema, names, dialect)]
    if cmap.stream is not None and cmap.stream_col is None and \
            (column := next((n for n in schema if n.strip().lower() == cmap.stream.strip().lower()), None)):
        raise ValueError(f"{path}: the column map names one fixed stream, {cmap.stream!r}, which is also a column of "
                         f"the file: every row would go to that one stream. For a stream per value of the column give "
                         f"stream_col: {column} (inline: --columns ...,stream={column}); a fixed name that is no "
                         f"column is stream: NAME (inline: stream_name=NAME)")
    named = _stream_named(spec)
    if not named and cmap.stream is None and cmap.stream_col is None and cmap.default_stream is None:
        cmap, stream_notes = _name_column(path, cmap, schema, names, dialect)
    else:
        stream_notes = []
    cmap, found_notes = stream_of(path, cmap, schema)
    stream_notes += found_notes
    if not named and cmap.stream_col is None and is_json_lines(path) and json_lines.table(path).records and \
            symbol_in_name(path) is None:  # the file's stem would be the stream: "trades" says nothing
        raise ValueError(f"{path}: a REST dump (one JSON array of records) whose records name no instrument, nor "
                         f"does its file name: give the stream, --columns stream_name=NAME (BTCUSDT, BTC-USD), or "
                         f"name the file after it (BTCUSDT-trades.json)")
    if not named and cmap.stream_col is None:
        stream_notes += _unread_identifiers(path, cmap, schema, names, dialect)
    cmap, day_notes = date_of(path, cmap)
    if missing := [c for c in cmap.source_columns() if c not in schema]:
        headerless = ("; its first line is data, not a header: give its columns in order with --csv-names"
                      if dialect is not None and not dialect.header and names is None else "")
        encoding = f"; {why}" if is_csv(path) and (why := not_utf8(path)) else ""  # mojibake names: say why
        if instead := _detected_instead(path, spec):  # the way that reads it, rather than ways to mend the map
            headerless = encoding = ""
        raise ValueError(f"{path}: the column map needs {missing}, which the file lacks; columns found: "
                         f"{list(schema)}{headerless}{encoding}{instead}")
    if cmap.ts_unit == DETECT:  # a map that named its time column, not its unit
        unit, ts_format = detected_unit(cmap.ts, schema.get(cmap.ts) if len(cmap.ts_columns) == 1 else pl.String,
                                        first)
        cmap = replace(cmap, ts_unit=unit, ts_format=ts_format)
        said = (f"{unit}{', ' + ts_format if ts_format else ''}" if unit == "datetime" else
                f"{unit} (spreadsheet serial dates)" if unit == EXCEL_DAYS else
                f"{unit} of each row's day in {cmap.ts_columns[0]!r}" if unit in DAY_CLOCK_UNITS else
                f"{unit} since the epoch")
        unit_notes = [f"{path.name}: column {cmap.ts!r} read as {said}, as its first value shows (--ts-unit or "
                      f"--ts-format to say otherwise)"]
    else:
        unit_notes = []
    if cmap.ts_unit == TIME_OF_DAY and len(cmap.ts_columns) == 1 and CLOCK_ONLY.match(first(cmap.ts) or ""):
        cmap = replace(cmap, ts_unit="datetime")  # `09:00:00.123`: a time of day as text, not a number of seconds
        unit_notes.append(f"{path.name}: column {cmap.ts!r} holds times of day as text ({first(cmap.ts)!r}): read "
                          f"as wall-clock times of {cmap.date}{' in ' + cmap.tz if cmap.tz else ' (UTC)'}")
    if cmap.ts_unit == "datetime" and cmap.ts_format is None and not isinstance(spec, ColumnMap):
        cmap, settled = _settled_format(path, names, dialect, cmap)
        unit_notes += settled
    if cmap.ts_unit == EPOCH:  # the unit of the first time's magnitude: Binance's ms, and us since 2025
        try:
            unit = epoch_unit(float(first(cmap.ts) or "nan"))
        except ValueError:  # not a number: the time check below says what the column holds
            unit = "ns"
        cmap = replace(cmap, ts_unit=unit)
    notes = []
    if guessed is not None:
        notes.append(f"{path.name}: no header row; read as {how} (--csv-names {','.join(names)}): {describe_map(cmap)}")
        notes += bar_notes(path, list(schema), cmap, HEADERLESS_BAR_STAMP)
    elif not isinstance(spec, ColumnMap):
        given = ("no column map given" if spec is None
                 else f"detected, with the keys given ({', '.join(sorted(spec.keys))})")
        notes.append(f"{path.name}: {given}; read as {describe_map(cmap)}")
        notes += vendor_notes(path, list(schema), cmap)
        notes += [shaped_note] if shaped_note else []
    elif spec.preset is None:
        notes += _unnamed_fields(path, cmap, schema, first)
    if cmap.ts_unit == EXCEL_DAYS and not isinstance(spec, ColumnMap):
        notes.append(f"{path.name}: column {cmap.ts!r} read as spreadsheet serial dates (days since 1899-12-30, "
                     f"to the millisecond; as epoch seconds they would be times on 1970-01-01), in UTC: give --tz "
                     f"ZONE if they are local times (a Bloomberg terminal's are)")
    if len(cmap.ts_columns) == 2 and cmap.ts_unit in DAY_CLOCK_UNITS and not isinstance(spec, ColumnMap):
        notes.append(f"{path.name}: column {cmap.ts_columns[1]!r} read as {cmap.ts_unit.replace('_', ' ')} of each "
                     f"row's day in column {cmap.ts_columns[0]!r}, in {cmap.tz or 'UTC'} (--ts-unit "
                     f"ns_after_midnight, us_after_midnight, ... says otherwise; --tz ZONE if they are local times)")
    if cmap.fill_quotes and not isinstance(spec, ColumnMap):
        notes.append(f"{path.name}: its quote rows leave bid or ask empty where it did not change (as MetaTrader's "
                     f"exports do): each takes it from the stream's previous quote (--columns ...,fill_quotes=false "
                     f"rejects such rows instead)")
    # Dukascopy's `Gmt time`, LSEG's `Time[G]`: UTC by their names
    utc_named = any(z in cmap.ts.lower() for z in ("utc", "gmt", "[g]"))
    if notes and cmap.ts_unit == "datetime" and cmap.tz is None and not utc_named \
            and schema.get(cmap.ts) in (pl.String, None):
        text = first(cmap.ts_columns) or ""
        offsets = next((c for c in schema if normal_name(c) in OFFSET_NAMES), None)
        if not UTC_OFFSET.search(text) and offsets is not None:  # LSEG's GMT Offset beside local times
            cmap = replace(cmap, utc_offset=offsets)
            notes.append(f"{path.name}: its times ({text[:30]!r}) carry no UTC offset and column {offsets!r} gives "
                         f"each row's (hours): read as wall-clock times at that offset (--tz ZONE reads them in a "
                         f"zone instead)")
        elif not UTC_OFFSET.search(text):  # a guess cannot know the zone of wall-clock times
            histdata = path.name.upper().startswith("DAT_ASCII_") or cmap.ts_format == "%Y%m%d %H%M%S%3f"
            zone = ("--tz Etc/GMT+5 (HistData's files are in EST all year, no summer time)" if histdata
                    else "e.g. --tz America/New_York")
            notes.append(f"{path.name}: its times ({text[:30]!r}) carry no UTC offset and are read as UTC; if they "
                         f"are local times, give their zone, {zone}")
    number_notes = [f"{path.name}: {dialect.numbers}"] if dialect is not None and dialect.numbers else []
    return cmap, dialect, schema, notes + number_notes + kind_notes + unit_notes + stream_notes + day_notes


def _detected_instead(path: Path, spec: ColumnMap | Refine | None) -> str:
    """For a preset whose columns a file lacks: how the file reads with no map, when it does ("drop --preset")."""
    if not isinstance(spec, ColumnMap) or spec.preset is None:
        return ""
    try:
        detected = _layout(path, None)[0]
    except (ValueError, pl.exceptions.PolarsError):
        return ""
    return f"; drop --preset {spec.preset}: detected as {describe_map(detected)}"


SETTLE_ROWS = 10_000  # rows read to settle a date that reads two ways in the first row


def _settled_format(path: Path, names: Sequence[str] | None, dialect: Dialect | None,
                    cmap: ColumnMap) -> tuple[ColumnMap, list[str]]:
    """A time column whose first date reads two ways (`01/02/2024`: January 2 or February 1), settled by the file's
    next rows when one reading fails on some of them (`01/15/2024` is month first) and the other reads them all:
    that format, with a note. Unsettled (every date of the rows read has day and month <= 12), the map is as it was
    and the read refuses, with both formats."""
    first = _first_text(path, names, dialect, cmap.ts_columns)
    if first is None or not two_way_date(first):
        return cmap, []
    overrides = {c: pl.String for c in cmap.ts_columns} if is_csv(path) else None
    text = _scan(path, names, dialect, overrides).select(_time_column(cmap).cast(pl.String).str.strip_chars()
                                                         .alias("t")).drop_nulls().head(SETTLE_ROWS).collect()["t"]
    reads = [f for f in time_formats(first)
             if text.str.to_datetime(f, time_unit="ns", strict=False).null_count() == 0]
    if len(reads) != 1:
        return cmap, []
    return replace(cmap, ts_format=reads[0]), [
        f"{path.name}: its first date ({first[:24]!r}) reads two ways; its later rows read only as {reads[0]!r} "
        f"(--ts-format says otherwise)"]


def _unnamed_fields(path: Path, cmap: ColumnMap, schema: Mapping[str, Any],
                    first: Callable[[str | tuple[str, ...]], Any]) -> list[str]:
    """A column map given in full is read as given; a column it leaves out that detection would have read as a
    tick field (`qty` beside `--columns ts=time,price=px`) is named in a note, so sizes or sides are not dropped
    without a word."""
    try:
        detected = detect_columns(path, schema, first)
    except ValueError:  # nothing detectable: nothing to say
        return []
    used = set(cmap.source_columns())
    missed = {key: getattr(detected, key) for key in VALUE_FIELDS
              if getattr(cmap, key) is None and getattr(detected, key) not in (None, *used)}
    if not missed:
        return []
    said = "; ".join(f"{column!r} looks like {key}" for key, column in missed.items())
    key, column = next(iter(missed.items()))
    return [f"{path.name}: the column map reads only the columns it names; {said}, not read (name it in the map "
            f"to read it, e.g. --columns ...,{key}={column})"]


def _kind_column(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                 dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """A detected layout with a column saying which kind each row is. Of trade columns alone (`event`: X trade,
    B bid, A ask): only its trade rows are read, the others counted as filtered_out, with a note. Of trade and
    quote columns (LSEG's `Type`: Trade, Quote, Correction, Market Condition): its trade and quote rows are read,
    rows of any other kind (a correction's price would replay as a new trade) counted as filtered_out, with a
    note. A column of such a name whose values are not known marks gets a note only."""
    column = next((c for c in schema if normal_name(c) in EVENT_NAMES), None)
    if column is None or cmap.price is None or cmap.keep is not None:
        return cmap, []
    values = _distinct_text(path, names, dialect, column, 51)
    if len(values) < 2 or len(values) > 50:
        return cmap, []
    trades = [v for v in values if v.lower() in TRADE_MARKS]
    others = [v for v in values if v.lower() in QUOTE_MARKS]
    if cmap.bid is not None:  # trades and quotes are read: only rows of some other kind are left out
        left = [v for v in values if v not in trades and v not in others]
        if not (trades and others and left):
            return cmap, []
        note = (f"{path.name}: column {column!r} marks each row's kind: its {', '.join(trades + others)} rows are "
                f"read, its {', '.join(left)} rows left out and counted as filtered_out (a correction or a status "
                f"message is no new trade or quote; a map given in full reads every row)")
        return replace(cmap, keep={column: trades + others}), [note]
    if trades and others and len(trades) + len(others) == len(values):
        note = (f"{path.name}: column {column!r} marks each row's kind ({', '.join(values)}): its trade rows "
                f"({', '.join(trades)}) are read, the others left out and counted as filtered_out (a map given in "
                f"full reads them otherwise)")
        return replace(cmap, keep={column: trades}), [note]
    return cmap, [f"{path.name}: column {column!r} holds {', '.join(values[:10])}: if it marks kinds of rows (trades "
                  f"and quotes), read only the trades with a keep filter (--columns FILE.yaml with keep: "
                  f"{{{column}: [...]}}, docs/replay.md); every row is read as a trade now"]


SAMPLE_ROWS = 200_000  # rows a layout's heuristics look at (a side code, venues, corrections): one pass, bounded


def _distinct_text(path: Path, names: Sequence[str] | None, dialect: Dialect | None, column: str,
                   limit: int, rows: int | None = None) -> list[str]:
    """Up to `limit` distinct non-empty values of a column (of its first `rows` rows; None: all), as text, sorted."""
    scan = _scan(path, names, dialect, {column: pl.String} if is_csv(path) else None)
    scan = scan if rows is None else scan.head(rows)
    values = scan.select(pl.col(column).cast(pl.String).str.strip_chars().drop_nulls().unique().head(limit))
    return sorted(v for v in values.collect().to_series().to_list() if v)


VENUE_NAMES = ("exchange", "venue", "market", "exchange_id", "exchange_code", "ex", "mic")


def _venue_note(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                dialect: Dialect | None) -> list[str]:
    """A detected layout whose streams leave out a venue column holding several named venues: each stream mixes
    them, wrong for one instrument's separate markets (BTC-USD on several crypto exchanges, each at its own price).
    Said, with the map for a stream per venue. Exchange codes of one or two characters or digits (a consolidated
    tape's: US equities' prints of one symbol on many exchanges, one market) are not."""
    column = next((c for c in schema if normal_name(c) in VENUE_NAMES), None)
    if column is None or column in cmap.source_columns():
        return []
    values = _distinct_text(path, names, dialect, column, 51, SAMPLE_ROWS)
    # a tape's exchange codes are letters or numbers (TAQ's N, P, Q; Polygon's 4, 11): its prints are one market's
    if not 2 <= len(values) <= 50 or all(len(v) <= 2 or v.isdigit() for v in values):
        return []
    streams = f"stream={column}+{cmap.stream_col}" if cmap.stream_col else f"stream={column}"
    return [f"{path.name}: column {column!r} holds {len(values)} venues ({', '.join(values[:5])}"
            f"{', ...' if len(values) > 5 else ''}) and each stream mixes them: right for a consolidated tape, not "
            f"for separate markets with their own prices (a stream per venue: --columns {streams})"]


def _stream_named(spec: ColumnMap | Refine | None) -> bool:
    """Whether the map given names the stream (a fixed name or a column): then it is as the user said."""
    if isinstance(spec, ColumnMap):
        return spec.stream is not None or spec.stream_col is not None
    return isinstance(spec, Refine) and bool({"stream", "stream_col"} & set(spec.keys))


NAME_COLUMNS = ("name", "security_name", "stock_name", "company_name", "issue_name")  # a symbol's name, maybe
IDENTIFIER = re.compile(r"^[A-Za-z0-9][\w.\-/&: ]{0,23}$")  # a symbol, a code, a short name
FLAG_WORDS = frozenset({"true", "false", "t", "f", "y", "n", "yes", "no", "0", "1"})
ID_WORDS = re.compile(r"(code|sym|ticker|name|sec|isin|cusip|instrument|contract|stock|ric|id)")
# columns that repeat short values without naming an instrument: said by their own notes, or read as fields
NOT_IDENTIFIERS = frozenset((*EVENT_NAMES, *RIGHT_NAMES, "side", "aggressor_side", "taker_side", "exchange", "venue",
                             "market", "exchange_id", "exchange_code", "ex", "mic", "currency", "ccy", "flags",
                             "condition", "conditions", "sale_condition", "tr_scond", "tr_corr", "qu_cond", "kind"))


def _identifier_columns(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                        dialect: Dialect | None, columns: list[str]) -> dict[str, list[str]]:
    """Of `columns`, those that look like an instrument's identifier: text (or integers, under a name such as
    `code` or `id`) of 2 to 1,000 distinct short values that repeat (a trade id, one per row, names no instrument),
    in the first SAMPLE_ROWS rows. -> column: up to 5 of its values."""
    candidates = [c for c in columns if c not in cmap.source_columns() and c not in cmap.ts_columns
                  and normal_name(c) not in NOT_IDENTIFIERS and (schema[c] == pl.String or schema[c].is_integer()
                                                                   and ID_WORDS.search(normal_name(c)))]
    if not candidates:
        return {}
    overrides = {c: pl.String for c in candidates} if is_csv(path) else None
    sample = _scan(path, names, dialect, overrides).head(SAMPLE_ROWS).select(
        [pl.col(c).cast(pl.String).str.strip_chars() for c in candidates]).collect()
    found = {}
    for column in candidates:
        values = sample[column].drop_nulls()
        values = values.filter(values != "")
        distinct = values.unique(maintain_order=True)
        flags = set(distinct.str.to_lowercase().head(3).to_list()) <= FLAG_WORDS  # true/false, Y/N: no instruments
        if 2 <= len(distinct) <= 1000 and len(distinct) * 2 <= len(values) and not flags and \
                all(IDENTIFIER.match(v) for v in distinct.head(100).to_list()):
            found[column] = distinct.head(5).to_list()
    return found


def _name_column(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                 dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """A detected layout without a symbol column whose `Name` column holds several short names: its streams, with a
    note (a generic name, read so only when it looks like instruments' names and nothing else names them)."""
    column = next((c for c in schema if normal_name(c) in NAME_COLUMNS), None)
    if column is None or not (found := _identifier_columns(path, cmap, schema, names, dialect, [column])):
        return cmap, []
    return replace(cmap, stream_col=column), [
        f"{path.name}: streams from column {column!r} ({', '.join(found[column][:3])}, ...): no symbol column, and "
        f"it holds several names (--columns stream=COLUMN or stream_name=NAME says otherwise)"]


def _unread_identifiers(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                        dialect: Dialect | None) -> list[str]:
    """Every row goes to one stream (the file's name, or a name the map or the file's name gave) while a column the
    map does not read holds several values that look like instruments' identifiers (a `Code` of 7203 and 9434):
    said, since their prices would alternate in one stream, with the map that gives each its stream."""
    found = _identifier_columns(path, cmap, schema, names, dialect, list(schema))
    if not found:
        return []
    column, values = next(iter(found.items()))
    stream = cmap.stream or cmap.default_stream
    return [Caution(f"{path.name}: every row goes to one stream, {stream}, but column {column!r} holds several "
                    f"values ({', '.join(values[:3])}, ...) that look like instruments: if it names them, give "
                    f"--columns stream={column} (a stream per value; docs/replay.md)")]


# Columns that mark a print as corrected, cancelled or to be excluded (TickData's Correction Indicator and Exclude
# Record Flag, Polygon's correction, Cboe's canceled_trade_condition_id), read by no map unless it filters on them.
# Sale conditions (TAQ's `@ F I`: sweeps, odd lots) describe regular prints and are not among them.
CONDITION_NAMES = ("correction", "correction_indicator", "corr", "exclude_record_flag", "exclude",
                   "canceled_trade_condition_id", "cancelled", "canceled", "is_cancelled", "is_canceled")
REGULAR_MARKS = frozenset({"0", "00", "0.0", "false", "n"})


def _condition_note(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                    dialect: Dialect | None) -> list[str]:
    """Correction columns a detected layout does not read, marking some prints: said, since corrected, cancelled
    and excluded prints then replay as trades like any other."""
    if cmap.price is None or cmap.keep is not None:
        return []
    marked = {}
    for column in (c for c in schema if normal_name(c) in CONDITION_NAMES and c not in cmap.source_columns()):
        values = [v for v in _distinct_text(path, names, dialect, column, 6, SAMPLE_ROWS)
                  if v.lower() not in REGULAR_MARKS]
        if values:
            marked[column] = values
    if not marked:
        return []
    said = "; ".join(f"{c!r} holds {', '.join(v[:5])}" for c, v in marked.items())
    return [f"{path.name}: correction columns are not read ({said}): corrected, cancelled or excluded prints "
            f"replay as trades like any other; to leave them out, give a map with a keep filter on the values of "
            f"regular prints (docs/replay.md, `keep`)"]


# Sale conditions (TAQ's TR_SCOND `@ F I`, Polygon's conditions `12,37`, TickData's Sales Condition): prints of
# their kinds (odd lots, out-of-sequence, after hours, Form T), regular trades that no map reads unless it filters
SALE_CONDITION_NAMES = ("tr_scond", "conditions", "condition", "sale_condition", "sale_conditions", "sales_condition",
                        "sales_conditions", "trade_condition", "trade_conditions", "trade_conds")


def _sale_condition_note(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                         dialect: Dialect | None) -> list[str]:
    """A detected trades layout beside a sale-conditions column it does not filter on: said, since odd lots and
    out-of-sequence or after-hours prints then replay as trades like any other."""
    column = next((c for c in schema if normal_name(c) in SALE_CONDITION_NAMES), None)
    if cmap.price is None or column is None or column in {*cmap.source_columns(), *(cmap.keep or ())}:
        return []
    values = _distinct_text(path, names, dialect, column, 4, SAMPLE_ROWS)
    if not values:
        return []
    shown = ", ".join(repr(v) for v in values[:3]) + (", ..." if len(values) > 3 else "")
    how = ("a keep filter compares whole cells (`12,37` is one value), so to leave out one condition's prints, "
           "filter the file first" if any("," in v for v in values) else "a map's keep filter lists the cells to read")
    return [f"{path.name}: sale conditions are not read ({column!r} holds {shown}): odd-lot, out-of-sequence, "
            f"after-hours and other conditioned prints replay as trades like any other; {how} (docs/replay.md, "
            f"`keep`)"]


# Columns that say a row cancels, corrects or busts an earlier trade (`action` NEW/CANCEL/CORRECT) or name the
# trade it refers to (`orig_trade_id`): replay has no way to undo a tick already replayed, so such rows are said
ACTION_NAMES = ("action", "status", "trade_status", "trade_action", "exec_type", "execution_type", "record_action",
                "update_action", "trade_type", "event_action")
AMENDING_WORDS = frozenset({"cancel", "cancelled", "canceled", "cancellation", "cxl", "correct", "corrected",
                            "correction", "bust", "busted", "break", "broken", "amend", "amended", "amendment",
                            "void", "voided", "delete", "deleted", "reversal", "trade_cancel", "trade_correction",
                            "trade_break", "trade_bust"})
REFERENCE_NAME = re.compile(r"^(orig|original|ref|reference|referenced|corrected|cancel+ed|busted|amended)_"
                            r"(trade_|exec_|execution_)?(id|ref|tid|seq|seq_num|seqnum|sequence|number|num)$")


def _amendment_note(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                    dialect: Dialect | None) -> list[str]:
    """Rows that cancel, correct or bust an earlier trade, by an action/status column's values or a column naming
    the trade they refer to, in a detected trades layout that does not filter on them: said, since each replays
    as a new trade and the trade it refers to stays as read (corrections by reference are never applied)."""
    if cmap.price is None:
        return []
    read = {*cmap.source_columns(), *(cmap.keep or ())}
    said, example = [], None
    for column in (c for c in schema if normal_name(c) in ACTION_NAMES and c not in read):
        values = _distinct_text(path, names, dialect, column, 21, SAMPLE_ROWS)
        amending = [v for v in values if normal_name(v) in AMENDING_WORDS]
        if amending and len(values) <= 20:
            said.append(f"column {column!r} marks rows that amend an earlier trade ({', '.join(amending[:4])})")
            example = example or f"keep: {{{column}: [{', '.join(v for v in values if v not in amending)}]}}"
    for column in (c for c in schema if REFERENCE_NAME.match(normal_name(c)) and c not in read):
        if referred := _distinct_text(path, names, dialect, column, 3, SAMPLE_ROWS):
            said.append(f"column {column!r} refers rows to earlier trades ({', '.join(referred)}, ...)")
            example = example or f"keep: {{{column}: [\"\"]}}, the rows that refer to none"
    if not said:
        return []
    return [Caution(f"{path.name}: {'; '.join(said)}: cancels and corrections by reference are not applied, each "
                    f"such row replays as a new trade and the trade it refers to stays as read. Clean the file "
                    f"first, or leave those rows out with a map's keep filter ({example}; docs/replay.md)")]


# The market a preset's files are from: files of two markets feeding one stream get a note (`mixed_venues`)
PRESET_VENUES = {"binance-trades": "binance", "binance-bbo": "binance", "binance-public-trades": "binance",
                 "binance-public-aggtrades": "binance", "binance-public-klines": "binance",
                 "binance-futures-trades": "binance-futures", "binance-futures-aggtrades": "binance-futures",
                 "binance-futures-bookticker": "binance-futures", "bitstamp-transactions": "bitstamp",
                 "coinbase-trades": "coinbase", "coinbase-matches": "coinbase", "dukascopy": "dukascopy",
                 "lobster-messages": "nasdaq"}
# Vendors' own columns that say whose file it is, when no column names the venue
VENDOR_VENUES = {frozenset({"tickdirection", "trdmatchid"}): "bybit",  # Bybit's public trading history
                 frozenset({"instrument_name", "created_time"}): "okx"}  # OKX's trade history


def _venue_of(plan: Any) -> str | None:
    """The market a file's ticks are from, when its layout says: its preset's, a venue column's one value
    (Tardis.dev's `exchange`: binance-futures), or a vendor's own columns (Bybit's). None when it does not say
    (a DBN file's plan included), and for a tape's one- or two-character exchange codes (one market's prints)."""
    if not isinstance(plan, _FilePlan):
        return None
    path, cmap, schema, dialect = plan.path, plan.columns, plan.schema, plan.dialect
    if cmap.preset in PRESET_VENUES:
        return PRESET_VENUES[cmap.preset]
    column = next((c for c in schema if normal_name(c) in VENUE_NAMES), None)
    if column is not None and column not in cmap.stream_columns:
        values = _distinct_text(path, cmap.names, dialect, column, 2, SAMPLE_ROWS)
        if len(values) == 1 and len(values[0]) > 2 and not values[0].isdigit():
            return values[0].lower()
    normal = {normal_name(n) for n in schema}
    return next((venue for signs, venue in VENDOR_VENUES.items() if signs <= normal), None)


def _plan_streams(plan: Any) -> set[str]:
    """The streams a plan's rows feed: its fixed stream, else its stream column's values in its first rows."""
    cmap = getattr(plan, "columns", None)
    if not isinstance(cmap, ColumnMap):
        return set()
    if cmap.stream_col is None:
        return {cmap.stream or cmap.default_stream or ""}
    found = plan.frame.head(SAMPLE_ROWS).select(pl.col("stream").drop_nulls().unique().head(50)).collect()
    return set(found.to_series().to_list())


def mixed_venues(plans: Sequence[Any]) -> list[str]:
    """A note per stream fed by files of several venues (Binance spot and Binance futures trades, a Bybit file:
    all `BTCUSDT`): one stream of several markets' prices reads as a jumpy market. Files of one venue (its trades
    and its quotes) are one market's."""
    venued = [(plan, venue) for plan in plans if (venue := _venue_of(plan)) is not None]
    if len({venue for _, venue in venued}) < 2:
        return []
    fed: dict[str, dict[str, list[str]]] = {}
    for plan, venue in venued:
        for stream in _plan_streams(plan):
            fed.setdefault(stream, {}).setdefault(venue, []).append(source_path(plan).name)
    notes = []
    for stream, venues in fed.items():
        if len(venues) > 1:
            said = "; ".join(f"{venue} ({', '.join(files[:3])})" for venue, files in venues.items())
            notes.append(Caution(f"stream {stream} is fed by files of {len(venues)} venues: {said}; each market has "
                                 f"its own prices, so one stream mixes them: give each file its own stream in a replay "
                                 f"list (an entry's columns with stream: NAME, or stream_col: a venue column plus the "
                                 f"symbol; docs/replay.md)"))
    return notes


def _time_spans(plan: Any) -> dict[str, tuple[int, int]]:
    """Each stream's first and last time (ns) in a tabular file, from a scan of its time and stream columns; {} for
    a DBN file (read in its own order, record by record)."""
    if not isinstance(plan, _FilePlan):
        return {}
    cmap, ts = plan.columns, pl.col("_ts").drop_nulls()
    if cmap.stream_col is None:
        first, last = plan.frame.select(ts.min().alias("first"), ts.max().alias("last")).collect().row(0)
        found = [(cmap.stream or cmap.default_stream or "", first, last)]
    else:
        found = plan.frame.group_by("stream").agg(ts.min().alias("first"), ts.max().alias("last")).collect().rows()
    return {stream: (_scale(first, plan.ts_factor), _scale(last, plan.ts_factor)) for stream, first, last in found
            if stream is not None and first is not None}


def _kinds(plan: Any) -> set[str]:
    """The kinds of tick a plan's rows make: a trades file and a quotes file of one stream are one market's."""
    cmap = getattr(plan, "columns", None)
    if not isinstance(cmap, ColumnMap):
        return {TRADE, QUOTE}
    return {cmap.kind} if cmap.kind else {k for k, column in ((TRADE, cmap.price), (QUOTE, cmap.bid)) if column}


def _utc(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def overlapping_files(plans: Sequence[Any], selection: StreamSelection | None = None) -> list[str]:
    """A caution per pair of files that feed one stream ticks of one kind over overlapping times (two vendors'
    EURUSD): merged by time, their ticks interleave into one stream as if from one source, each price beside the
    other vendor's. Files that follow each other (consecutive days) and a trades file beside a quotes file (one
    market's) are no concern."""
    fed: dict[str, list[tuple[int, int, Any]]] = defaultdict(list)
    for plan in plans:
        for stream, (first, last) in _time_spans(plan).items():
            if selection is None or selection.matches(stream):
                fed[stream].append((first, last, plan))
    pairs: dict[tuple[str, str], list[tuple[str, int, int]]] = {}  # (file, file) -> (stream, overlap start, end)
    for stream, spans in sorted(fed.items()):
        spans.sort(key=lambda span: span[:2])
        for i, (first, last, plan) in enumerate(spans):
            for other_first, other_last, other in spans[i + 1:]:
                if other_first >= last:  # sorted by start: none after this one overlaps it either
                    break
                if _kinds(plan) & _kinds(other):
                    key = (plan.given_name, other.given_name)
                    pairs.setdefault(key, []).append((stream, other_first, min(last, other_last)))
    notes = []
    for (one, other), streams in pairs.items():
        stream, start, end = streams[0]
        named = f"stream {stream}" if len(streams) == 1 else \
            f"streams {shown([s for s, _, _ in streams])} ({len(streams)})"
        notes.append(Caution(f"{named} fed by both {one} and {other}, whose times overlap ({_utc(start)} to "
                             f"{_utc(end)} UTC{' for ' + stream if len(streams) > 1 else ''}): their ticks interleave "
                             f"into one stream by time, as one source's; if they are two sources of it (two vendors), "
                             f"give each its own stream in a replay list (an entry's columns: {{stream: NAME}}), or "
                             f"replay one (files that follow each other, day after day, are no concern)"))
    return notes


# TAQ's trade correction indicator (WRDS's daily TAQ `TR_CORR`): 00 a regular print, 01 one later corrected (the
# print stood when it was made); 07, 08 cancels, 10 a cancelled correction, 11 and 12 corrections of an earlier print
TAQ_CORRECTION = "tr_corr"
TAQ_REGULAR = ("00", "01")


def _taq_corrections(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                     dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """A detected TAQ trades layout whose `TR_CORR` marks cancelled or corrected prints: only its regular prints
    (00, 01) are read, the others counted as filtered_out, with a note that says how to read them all; a
    cancelled print's price is no trade, and a correction repeats one already read."""
    column = next((c for c in schema if normal_name(c) == TAQ_CORRECTION), None)
    if column is None or cmap.price is None or column in cmap.source_columns():
        return cmap, []
    # a CSV's keep column is read as text; a Parquet copy may hold the marks as numbers: 0 and 1
    integer = not is_csv(path) and schema[column].is_integer()
    regular = [int(v) for v in TAQ_REGULAR] if integer else list(TAQ_REGULAR)
    values = _distinct_text(path, names, dialect, column, 20, SAMPLE_ROWS)
    others = [v for v in values if v not in {keep_key(r) for r in regular}]
    if not others:
        return cmap, []
    listed = ", ".join(str(v) for v in regular)
    full = ",".join(f"{key}={getattr(cmap, attr)}" for key, attr in (("ts", "ts"), ("stream", "stream_col"),
                                                                        ("price", "price"), ("size", "size"))
                    if getattr(cmap, attr) is not None)
    note = (f"{path.name}: column {column!r} marks cancelled and corrected prints ({', '.join(others[:6])}): only "
            f"regular prints ({column} {listed}) are read, the others left out and counted as filtered_out; a map "
            f"given in full reads every print (--columns {full}) (docs/replay.md)")
    return replace(cmap, keep={**(cmap.keep or {}), column: regular}), [note]


# Tardis.dev's CSVs (trades, quotes, book snapshots): an empty bid or ask is a book side with no order (an option
# out of the money), not one that did not change; such a quote is rejected (missing_field), never filled
OFFSET_NAMES = ("gmt_offset", "utc_offset")  # a column of each row's UTC offset in hours (LSEG's `GMT Offset`)
TARDIS_SIGNS = frozenset({"exchange", "symbol", "timestamp", "local_timestamp"})
# MetaTrader's tick export: what marks it is its FLAGS column (which of bid, ask, last, volume the row changed)
METATRADER_TICKS = frozenset({"bid", "ask", "last", "volume", "flags"})


def _fix_sides(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
               dialect: Dialect | None) -> ColumnMap:
    """A detected side column holding 0, 1 and 2 only, 2 among them: FIX's AggressorSide (CME's MDP 3.0 and most
    exchange feeds), 1 buy and 2 sell (read as signed sides, every sell would be rejected); the map's description
    in the notes names it."""
    if cmap.side is None or cmap.side_map is not None or cmap.side not in schema:
        return cmap
    values = {v.removesuffix(".0") for v in _distinct_text(path, names, dialect, cmap.side, 4, SAMPLE_ROWS)}
    if "2" not in values or not values <= set(FIX_AGGRESSOR):
        return cmap
    return replace(cmap, side_map=dict(FIX_AGGRESSOR))


def _writes_only_changes(cmap: ColumnMap, columns: list[str]) -> bool:
    """Whether the layout is MetaTrader's tick export (`<BID> <ASK> <LAST> <VOLUME> <FLAGS>`, or those names
    without the brackets), which leaves a quote's unchanged side empty. Only a layout known to do so fills an
    empty side by detection: in any other file (an NBBO or option quote file) an empty side is no bid or no ask,
    a one-sided quote, whichever row it falls on."""
    if cmap.bid is None or cmap.fill_quotes is not None or cmap.bid not in columns or cmap.ask not in columns:
        return False
    return METATRADER_TICKS <= {normal_name(c) for c in columns}


def _first_text(path: Path, names: Sequence[str] | None, dialect: Dialect | None,
                columns: str | tuple[str, ...]) -> str | None:
    """The first non-empty value of a column (of date and time columns: joined by a space), as text (None: empty)."""
    columns = (columns,) if isinstance(columns, str) else columns
    overrides = {c: pl.String for c in columns} if is_csv(path) else None
    text = pl.concat_str([pl.col(c).cast(pl.String).str.strip_chars() for c in columns], separator=" ")
    found = _scan(path, names, dialect, overrides).select(text.alias("t"))
    found = found.filter(pl.col("t").str.strip_chars() != "")
    found = found.head(1).collect()
    return found.item() if found.height else None


class _Cursor:
    """One file's valid ticks in order, one chunk of `chunk_rows` rows in memory at a time. A tick before its
    stream's latest is rejected here as ts_backwards, as the engine would, but named by its row and the row that
    went ahead: a DBN file is read in its own order, never sorted, and one record stamped ahead of its
    neighbours makes the stream's next ticks go back. A rejected row is counted once the tick after it is
    emitted (`advance`), so a run stopped early (--max-ticks) counts only the rows before its stop, not the rest
    of the chunk read ahead."""

    def __init__(self, plan: Any, chunk_rows: int, rejects: RejectCounter,
                 selection: StreamSelection | None = None) -> None:
        self._plan = plan
        self._selection = selection
        self._batches = plan.batches(chunk_rows)
        self._rejects = rejects
        self._latest: dict[str, tuple[int, int]] = {}  # stream -> (ts, row) of its latest valid tick
        # rejected rows not counted yet: (how many of the chunk's ticks come before it, reject, row)
        self._pending: list[tuple[int, InvalidTick, int]] = []
        self.ticks: list[Tick] = []
        self.pos = 0
        self.fill()

    def advance(self, pos: int) -> None:
        """Ticks up to `pos` of the chunk are emitted: count the rejected rows before the last of them."""
        self.pos = pos
        due = 0
        while due < len(self._pending) and self._pending[due][0] < pos:
            _, err, row = self._pending[due]
            self._rejects.add(err, self._plan, row)
            due += 1
        del self._pending[:due]

    def fill(self) -> bool:
        """Load the next chunk holding at least one valid tick; False once the file is exhausted (its rejected
        rows are then all counted). Rows rejected after the chunk's last tick wait for the next chunk's first."""
        self._pending = [(0, err, row) for _, err, row in self._pending]
        for chunk in self._batches:
            ticks = []
            for row, wire in chunk:
                try:
                    stream = wire.stream if isinstance(wire, InvalidTick) else wire.get("stream")
                    if self._selection is not None:  # first: what else is wrong with the row is no matter
                        self._select(stream)
                    if isinstance(wire, InvalidTick):  # a row refused as it was read (a one-sided quote, ...)
                        raise wire
                    tick = validate(wire)
                    self._in_order(tick, row)
                    ticks.append(tick)
                except InvalidTick as err:
                    self._pending.append((len(ticks), err, row))
            if ticks:
                self.ticks, self.pos = ticks, 0
                return True
        self.ticks = []
        self.advance(1)  # read to its end, no tick after them: every row pending (each at 0) counts now
        self.pos = 0
        return False

    def _select(self, stream: Any) -> None:
        """A row of a stream the selection leaves out is filtered_out, whatever else is wrong with it."""
        if isinstance(stream, str) and not self._selection.matches(stream):
            raise InvalidTick("filtered_out", f"stream {stream!r} is not among the streams selected "
                                              f"{self._selection.quoted()}", stream)

    def _in_order(self, tick: Tick, row: int) -> None:
        latest = self._latest.get(tick.stream)
        if latest is not None and tick.ts < latest[0]:
            raise InvalidTick("ts_backwards", f"stream {tick.stream!r}: ts {tick.ts} < previous {latest[0]}, "
                                              f"{(latest[0] - tick.ts) / 1e9:.1f} s later, of "
                                              f"{self._plan.where(latest[1])} (a row stamped ahead of its "
                                              f"neighbours sends the stream's next ones back)", tick.stream)
        self._latest[tick.stream] = (tick.ts, row)


NO_TRADE = "no trade in this interval"  # a bar's filtered_out: not an error, nor a price of 0
REJECT_HINTS = {  # what a user does about a file's rows rejected for these reasons
    "unknown_side": "; map other side values with side_map in a --columns YAML file (docs/replay.md)",
    "filtered_out": "; not an error: rows left out on purpose and counted (a keep filter's, or rows holding no tick)",
    NOT_JSON: "; the line is skipped and the rest of the file read (a capture cut mid-line, a log line among the "
              "messages)",
}


def _unit_changed(plan: Any, message: str) -> str:
    """For a time out of range in a file whose epoch unit was read from its first time: the hint that the unit
    changes inside it (Binance's public files went from ms to us on 2025-01-01; a concatenation holds both)."""
    columns = getattr(plan, "columns", None)
    got = re.search(r"got (-?\d+)$", message)
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


PRICE_OFFSET = "--price-offset X shifts"
# Zero or below on this many of a file's trade prices, and this share of them, is a market that trades there (a
# power market's hours at 0: 176 of 372 prints), not a bad print or two
FREQUENT_NONPOSITIVE = (10, 0.01)


def _price_offset_hint(err: InvalidTick, plan: Any) -> str:
    """--price-offset for an instrument that trades at zero or below: said once a price below zero is seen, or
    when a file's prices are zero or below on FREQUENT_NONPOSITIVE rows that trade (a count and a share); never
    for a lone 0 (bad data, or a bar without trades, which is filtered_out)."""
    if re.search(r"got -\d", err.message):
        return f"; the files hold prices below zero (a spread, a power market): {PRICE_OFFSET} them above zero " \
               f"(docs/replay.md)"
    if getattr(plan, "nonpositive_prices", False):
        return f"; every trade price of {plan.given_name} is zero or below: for an instrument that trades there, " \
               f"{PRICE_OFFSET} them above zero (docs/replay.md)"
    nonpositive, trading = getattr(plan, "nonpositive_rows", (0, 0))
    if nonpositive >= FREQUENT_NONPOSITIVE[0] and nonpositive >= FREQUENT_NONPOSITIVE[1] * trading:
        return f"; {nonpositive} of the {trading} trade prices of {plan.given_name} are zero or below, too many to " \
               f"be bad prints: for an instrument that trades there (a power market's hours at 0), {PRICE_OFFSET} " \
               f"them above zero (docs/replay.md)"
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


def _unread_cell(plan: Any, row: int, column: str) -> str:
    """Why a row's cell was read as missing: empty, or its text (a CSV's) that is no number or no time the map
    reads; a time the clocks skipped only in a zone that changes its clocks."""
    if column == plan.column_of("side"):
        return ""
    text = plan.cell_text(row, column) if hasattr(plan, "cell_text") else None
    if text is not None and not text.strip():
        return ": empty"
    if column in (plan.column_of("price"), plan.column_of("bid"), plan.column_of("ask")) and text is not None:
        return f": {text!r} is not a number{unread_price_hint(text, getattr(plan, 'columns', None))}"
    if column != plan.column_of("ts"):
        return f": {text!r} is not a number" if text is not None else ": empty, or not a number"
    zone = getattr(getattr(plan, "columns", None), "tz", None)
    clock = f", or a local time the clocks skipped in {zone} (a DST change)" if zone and _has_dst(zone) else ""
    return f": {text!r} is not a time the map reads{clock}" if text is not None else \
        f": empty, or not a time the map reads{clock}"


def _has_dst(zone: str) -> bool:
    """Whether a zone changes its clocks (New York's does; UTC, EST and Etc/GMT+5 do not)."""
    tz = ZoneInfo(zone)
    return any(datetime(2024, month, 1, tzinfo=tz).dst() for month in (1, 7))


class RejectCounter(Counter):
    """Rejected rows by reason, with the first row of each reason as a user finds it (file, line or row,
    column): a Counter, so `replay.rejected == {"missing_field": 3}` reads as before."""

    def __init__(self) -> None:
        super().__init__()
        self.examples: dict[str, str] = {}

    def add(self, err: InvalidTick, plan: Any, row: int) -> None:
        self[err.reason] += 1
        if err.reason not in self.examples:
            column = next((plan.column_of(f) for f in ("ts", "stream", *VALUE_FIELDS)
                           if (err.message.startswith(f"{f} ") or f"'{f}'" in err.message) and plan.column_of(f)),
                          None)
            why = REJECT_HINTS.get(err.reason, "") if err.reason != "filtered_out" or err.stream is None else \
                "; not an error: ticks of the streams not selected"
            if err.reason == "filtered_out" and err.message.startswith(NO_TRADE):
                why = "; not an error"
            if err.reason == "ts_out_of_range":
                why = _unit_changed(plan, err.message)
            if err.reason == "bad_stream":
                why = _stream_hint(plan)
            if err.reason == "crossed_quote" and (columns := getattr(plan, "columns", None)) is not None \
                    and yield_columns(columns):  # a yield's bid is above its ask: the quote is no crossed book
                why = (f"; {columns.bid!r} and {columns.ask!r} are named as yields, and a yield quote's bid is above "
                       f"its ask: convert yields to prices to replay them (docs/replay.md#yield-quoted-instruments)")
            if err.reason == "negative_size" and err.message.startswith("size "):
                why = "; if its sign is the side (negative: a sell), give --columns ...,signed_size=true"
            if err.reason == "missing_field" and column is not None:  # a typed read makes an unreadable cell null
                why = _unread_cell(plan, row, column)
                columns = getattr(plan, "columns", None)
                side = column in (plan.column_of("bid"), plan.column_of("ask"))
                if "one-sided quote" in err.message or "neither side" in err.message:
                    why = ""  # the message says what the empty or 0 side means
                if side and getattr(plan, "empty_sides", False):
                    why += ("; Tardis.dev leaves a side empty when the book has no orders there (an option far out "
                            "of the money): such a quote has no bid and ask to replay")
                elif side and columns is not None and not columns.fill_quotes and "is 0 beside" not in err.message \
                        and "is not a number" not in why:  # a value there (`110-15+`) is no side left empty
                    why += ("; if the file leaves a side empty where it did not change, not where there is none, "
                            "--columns ...,fill_quotes=true carries the stream's previous one")
            self.examples[err.reason] = f"{plan.where(row)}: {err}" + (f" (column {column!r}{why})" if column else why)
        if err.reason == "nonpositive_price" and PRICE_OFFSET not in self.examples[err.reason]:
            self.examples[err.reason] += _price_offset_hint(err, plan)

    def clear(self) -> None:
        super().clear()
        self.examples.clear()


MapSpec = ColumnMap | str | Mapping[str, Any]
FileSpec = str | Path | tuple[str | Path, MapSpec] | Mapping[str, Any]


def source_path(plan: Any) -> Path:
    """The file a user gave for a plan: the zip archive its file came out of, else the file itself."""
    return getattr(plan, "origin", None) or plan.path


def _source_name(plan: Any) -> str:
    """A plan's file as the fingerprint names it: the archive's path and the file's name inside, if zipped."""
    origin = getattr(plan, "origin", None)
    return str(plan.path.resolve()) if origin is None else f"{origin.resolve()}!{plan.path.name}"


def _is_list(item: Any) -> bool:
    return isinstance(item, (str, Path)) and str(item).lower().endswith((".yaml", ".yml"))


def replay_list(path: Path) -> list[dict[str, Any]]:
    """The entries of a replay list (`replay: [{path: ..., columns: ...}, ...]`, YAML read with safe_load; unknown
    keys refused by name), paths relative to the list's own folder: one map per file from the command line."""
    try:
        data = safe_load_unique(path.read_text())
    except OSError as e:
        raise FileNotFoundError(f"replay list {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise ValueError(f"replay list {path}: not valid YAML ({yaml_error_line(e)})") from None
    if not isinstance(data, dict) or set(data) != {"replay"} or not isinstance(data["replay"], list) \
            or not data["replay"]:
        keys = sorted(map(str, data)) if isinstance(data, dict) else type(data).__name__
        raise ValueError(f"replay list {path}: a mapping with one key, replay: [{{path: ..., columns: ...}}, ...]; "
                         f"got {keys}")
    entries = []
    for i, entry in enumerate(data["replay"], start=1):
        if not isinstance(entry, dict) or "path" not in entry or set(entry) - {"path", "columns"}:
            got = sorted(map(str, entry)) if isinstance(entry, dict) else type(entry).__name__
            raise ValueError(f"replay list {path}: entry {i} needs path and may have columns; got {got}")
        entries.append({**entry, "path": str(path.parent / Path(str(entry["path"])).expanduser())})
    return entries


def _file_spec(item: FileSpec, default: ColumnMap | Refine | None) -> tuple[Path, ColumnMap | Refine | None, bool]:
    """A path, a (path, map) pair, or the YAML form {path: ..., columns: ...}; True when the map is the
    entry's own (not the default for every file)."""
    if isinstance(item, tuple):
        return Path(item[0]), as_column_map(item[1]), True
    if isinstance(item, Mapping):
        if "path" not in item or set(item) - {"path", "columns"}:
            raise ValueError(f"a replay file entry needs 'path' and may have 'columns'; got keys {list(item)}")
        if "columns" in item:
            try:
                return Path(item["path"]), as_column_map(item["columns"]), True
            except ValueError as e:  # the entry named: a list of many files has many maps
                raise ValueError(f"{item['path']}: its columns: {e}") from None
        return Path(item["path"]), default, False
    return Path(item), default, False


def _once_each(specs: list[tuple[Path, ColumnMap | Refine | None, bool]]
               ) -> tuple[list[tuple[Path, ColumnMap | Refine | None, bool]], list[str]]:
    """Each file once, however often it is named (overlapping globs: `day/*.parquet day/AAPL.parquet`): a file
    read twice would replay its ticks twice and change every count, label and score after them. The same file
    is the same resolved path; named again with another column map, which reading was meant is unclear: refused.
    Returns the specs kept, in the order first named, and a note per repeat."""
    first: dict[Path, tuple[Path, ColumnMap | Refine | None, bool]] = {}
    notes = []
    for path, cmap, explicit in specs:
        same = path.resolve()
        if same not in first:
            first[same] = (path, cmap, explicit)
            continue
        earlier, earlier_map, _ = first[same]
        if cmap != earlier_map:
            raise ValueError(f"{path} is named twice with different column maps (as {earlier} too): name it once, "
                             f"with the map it is read with")
        named = "named twice" if str(path) == str(earlier) else f"the same file as {earlier}"
        notes.append(f"{path}: {named}; read once")
    return list(first.values()), notes


def _named_apart(plans: list[Any]) -> list[Any]:
    """Plans whose notes would name their files alike (per-day folders: `2026-03-10/AAPL.parquet`,
    `2026-03-11/AAPL.parquet`, ...) name each by the path given instead; a name alone tells no day from another.
    A name that is unique stays short."""
    def names(plan: _FilePlan) -> dict[str, str]:  # name in notes -> the file as given (an archive's note: the archive)
        return {plan.path.name: plan.given_name} | ({plan.origin.name: str(plan.origin)} if plan.origin else {})

    files_named: dict[str, set[str]] = defaultdict(set)
    for plan in plans:
        for name, given in (names(plan) if isinstance(plan, _FilePlan) else {}).items():
            files_named[name].add(given)
    apart = []
    for plan in plans:
        if not isinstance(plan, _FilePlan):
            apart.append(plan)
            continue
        alike = {name: given for name, given in names(plan).items() if len(files_named[name]) > 1}
        notes = tuple(next((type(note)(given + note[len(name):]) for name, given in alike.items()  # a Caution stays
                            if note.startswith(f"{name}: ")), note) for note in plan.notes)
        apart.append(replace(plan, notes=notes))
    return apart


def _no_data_rows(path: Path) -> bool:
    """True for a file with nothing to replay: zero bytes, a CSV of a header alone or blank lines, a Parquet file
    of no rows, a DBN file of its metadata header alone. Such a file (a day with no prints) is skipped; its layout
    cannot be told from no rows (a header alone reads its time column as epoch ns, which --tz would refuse)."""
    if not path.is_file():
        return False  # planning says it is missing
    if path.stat().st_size == 0:
        return True
    try:
        if _is_dbn(path):
            from connectors.dbn import has_records

            return not has_records(path)
        if is_csv(path):
            return not sniff_csv(path).rows
        if is_json_lines(path):
            return json_lines.table(path).objects == 0
        if path.suffix.lower() in PARQUET_SUFFIXES:
            return pl.scan_parquet(path).select(pl.len()).collect().item() == 0
    except (OSError, ImportError, pl.exceptions.PolarsError, ValueError):
        return False  # not readable as such: planning says why
    except Exception:  # noqa: BLE001 - databento-dbn's own decode error: planning names the file as not DBN
        return False
    return False


class FileReplay(Source):
    """Ticks from Parquet/CSV files, merged in event-time order (see the module docstring).

    `files`: a path, or a list of paths, (path, column map) pairs and
    {"path": ..., "columns": ...} dicts, where a map is a ColumnMap, a preset
    name or a dict; `columns` is the map for entries without one (None: detect
    each file's layout from its columns). `streams`: names or fnmatch globs of the
    streams to read (connectors/stream_selection.py; None: every stream).
    """

    def __init__(
        self,
        files: FileSpec | Sequence[FileSpec],
        *,
        columns: MapSpec | None = None,
        speed: float | None = None,
        chunk_rows: int = 4096,
        streams: str | Sequence[str] | None = None,
    ) -> None:
        if speed is not None and not (isinstance(speed, (int, float)) and 0 < speed < float("inf")):
            raise ValueError(f"speed must be None (as fast as possible) or a finite x real time > 0, got {speed!r}")
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
            raise ValueError(f"chunk_rows must be an int >= 1, got {chunk_rows!r}")
        items = [files] if isinstance(files, (str, Path)) else list(files)
        items = [entry for item in items for entry in (replay_list(Path(item)) if _is_list(item) else [item])]
        if not items:
            raise ValueError("FileReplay needs at least one file")
        default = as_column_map(columns)
        specs, self._file_notes = _once_each([_file_spec(item, default) for item in items])
        # zip archives' files, unpacked, and JSON-lines files' Parquet copies, while this replay lives
        self._unpacked: list[Unpacked | json_lines.Opened] = []
        self.plans = _named_apart([plan for spec in specs for plan in self._plans(*spec)])
        self.speed = speed
        self.chunk_rows = chunk_rows
        self.selection = None if streams is None else StreamSelection(streams)
        self._selection_notes = [] if self.selection is None else [self._check_selection()]
        self._venue_notes = mixed_venues(self.plans) + overlapping_files(self.plans, self.selection) \
            if len(self.plans) > 1 else []
        self._fingerprint = fingerprint(self.readings())
        self.rejected = RejectCounter()
        self._open()

    def _plans(self, path: Path, cmap: ColumnMap | Refine | None, explicit: bool) -> list[Any]:
        """The file's plan; for a zip archive, one per file inside, each with the map the archive was given.
        None for a file with no data rows (a day without prints): skipped with a note."""
        utf16 = utf16_encoding(path) if is_csv(path) else None
        if is_csv(path) and utf16 is None and (why := not_utf8(path)):  # read on, its odd bytes replaced: said
            self._file_notes.append(Caution(f"{path}: {why}; read as UTF-8 meanwhile, each byte that is not UTF-8 "
                                            f"replaced (names and symbols that hold one are misspelled)"))
        if is_json_lines(path) and path.is_file():  # its Parquet copy lives while the replay does
            self._unpacked.append(json_lines.Opened(path))
        if not is_zip(path) and utf16 is None:
            if _no_data_rows(path):
                self._file_notes.append(f"{path}: no data rows; skipped")
                return []
            return [_plan(path, cmap, explicit)]
        if not path.is_file():
            raise FileNotFoundError(f"replay file not found: {path}")
        unpacked = Unpacked(path) if utf16 is None else Unpacked.utf16(path, utf16)
        self._unpacked.append(unpacked)
        plans = []
        for i, inside in enumerate(unpacked.paths):
            if utf16 is None and is_csv(inside) and (member := utf16_encoding(inside)):  # UTF-16 in a zip
                copy = Unpacked.utf16(inside, member)
                self._unpacked.append(copy)
                inside = copy.paths[0]
            elif is_csv(inside) and (why := not_utf8(inside)):
                self._file_notes.append(Caution(f"{path} ({inside.name} inside): {why}; read as UTF-8 meanwhile, "
                                                f"each byte that is not UTF-8 replaced"))
            if is_json_lines(inside):
                self._unpacked.append(json_lines.Opened(inside))
            if _no_data_rows(inside):
                named = path if utf16 else f"{path} ({inside.name} inside)"
                self._file_notes.append(f"{named}: no data rows; skipped")
                continue
            try:
                plan = _plan(inside, cmap, explicit)
            except ValueError as e:  # named as the user knows it: the archive, not where it was unpacked
                raise ValueError(str(e).replace(str(inside), str(path) if utf16 else f"{path} ({inside.name} inside)")
                                 ) from None
            if isinstance(plan, _FilePlan):
                plan = replace(plan, origin=path, notes=(unpacked.note(i), *plan.notes))
            else:
                plan.origin = path  # a DBN file inside
            plans.append(plan)
        return plans

    def _check_selection(self) -> str:
        """The note naming the streams selected; refused when a pattern matches none of the streams the files
        hold. A DBN file without symbology names its streams by instrument id, known only once decoded: then the
        patterns are checked against the other files' streams alone, and only a pattern that none matches
        passes unchecked."""
        held, unknown = set(), []
        for plan in self.plans:
            names = plan.stream_names()
            if names is None:
                unknown.append(source_path(plan).name)
            else:
                held |= names
        if not unknown:
            try:
                return self.selection.check(held)
            except NoStreamMatched as e:  # a DBN instrument id given for its symbol: said, with the symbol
                ids = {i: symbols for plan in self.plans if hasattr(plan, "symbols_of_ids")
                       for i, symbols in plan.symbols_of_ids().items()}
                named = [f"{p} is the instrument id of {' / '.join(ids[p])}" for p in self.selection.unmatched(held)
                         if p in ids]
                if not named:
                    raise
                raise NoStreamMatched(f"{e}; {'; '.join(named)} (a DBN file's streams are named by symbol: select "
                                      f"that)") from None
        kept = [s for s in sorted(held) if self.selection.matches(s)]
        return (f"streams selected {self.selection.quoted()}: {', '.join(kept) or 'none'} of the "
                f"other files, and whichever match in {', '.join(unknown)} (no symbology: streams named by "
                f"instrument id, unchecked); the others' ticks are left out and counted as filtered_out")

    def _open(self) -> None:
        self.rejected.clear()
        self.emitted = 0
        self._anchor: tuple[int, int] | None = None  # (monotonic ns, event ts) of the first paced tick
        self.behind_s = 0.0  # with `speed`: how late (wall seconds) the last batch's first tick left its due time
        self.most_behind_s = 0.0
        self._paced_to: tuple[int, int] | None = None  # (monotonic ns, event ts) of the last paced tick
        cursors = [_Cursor(p, self.chunk_rows, self.rejected, self.selection) for p in self.plans]
        # (ts, file index, cursor): the index is unique, so ties go to the earlier file and cursors never compare.
        self._heap = [(c.ticks[0].ts, i, c) for i, c in enumerate(cursors) if c.ticks]
        heapq.heapify(self._heap)

    def _due(self, ts: int, now: int) -> bool:
        if self._anchor is None:
            self._anchor = (now, ts)
        wall0, ts0 = self._anchor
        return (now - wall0) * self.speed >= ts - ts0

    def next_batch(self, max_ticks: int) -> list[Tick]:
        check_max_ticks(max_ticks)
        out: list[Tick] = []
        now = time.monotonic_ns() if self.speed is not None else 0
        heap = self._heap
        while heap and len(out) < max_ticks:
            # Take a run from the earliest file up to the next file's head: one heap update per run, not per tick.
            _, i, cur = heap[0]
            bound = min(h[:2] for h in heap[1:3]) if len(heap) > 1 else None
            ticks, start = cur.ticks, cur.pos
            stop, j = min(len(ticks), start + max_ticks - len(out)), start
            while j < stop and (bound is None or (ticks[j].ts, i) < bound):
                if self.speed is not None and not self._due(ticks[j].ts, now):
                    break
                j += 1
            if j == start:  # the earliest tick is not due yet
                break
            if self.speed is not None and not out:  # due at wall0 + (ts - ts0) / speed: how late it leaves
                wall0, ts0 = self._anchor
                self.behind_s = max(0.0, (now - wall0 - (ticks[start].ts - ts0) / self.speed) / 1e9)
                self.most_behind_s = max(self.most_behind_s, self.behind_s)
            out.extend(ticks[start:j])
            cur.advance(j)
            if j == len(ticks) and not cur.fill():
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (cur.ticks[cur.pos].ts, i, cur))
        self.emitted += len(out)
        if out and self.speed is not None:
            self._paced_to = (now, out[-1].ts)
        return out

    def pace(self) -> str | None:
        """With `speed`, once the replay fell behind it (the engine's or this machine's pace, not the file's): the
        speed asked, the speed reached over the file's clock and the most it was behind; None if it kept up."""
        if self.speed is None or self._paced_to is None or self.most_behind_s < BEHIND_SAID_S:
            return None
        (wall0, ts0), (wall1, ts1) = self._anchor, self._paced_to
        reached = (ts1 - ts0) / (wall1 - wall0) if wall1 > wall0 else math.inf
        return (f"--speed {self.speed:g} was not kept: {reached:.3g}x reached over the file's clock, up to "
                f"{self.most_behind_s:.1f} s behind it (the engine's back-pressure or this machine's load)")

    @property
    def done(self) -> bool:
        return not self._heap

    @property
    def notes(self) -> list[str]:
        """What a user should know about how the files were read: a detected layout, renamed streams, times
        that do not look like the unit given."""
        return (self._file_notes + [note for p in self.plans for note in getattr(p, "notes", ())] + self._venue_notes
                + self._selection_notes)

    @property
    def cautions(self) -> list[str]:
        """The notes a run says again at its end (layout.Caution: the data may mean something else than read)."""
        return [note for note in self.notes if isinstance(note, Caution)]

    @property
    def found_notes(self) -> list[str]:
        """What reading the files found on the way, said at a run's end (known once their records are read): DBN
        instruments named by their id outside their mapping's dates, cancels and fills of orders a book never saw
        (a file starting mid-session), and streams a per-stream price_offset names that no file holds."""
        notes = [note for plan in self.plans for note in plan.found_on_read()]
        shifted = [plan for plan in self.plans if isinstance(plan.price_offset, dict)]
        named = {name for plan in shifted for name in plan.price_offset}
        held = {stream for plan in shifted for stream in plan.streams_held()}
        if unheld := sorted(named - held):
            shown = ", ".join(sorted(held)[:8]) + (", ..." if len(held) > 8 else "")
            notes.append(f"price_offset names stream(s) {', '.join(map(repr, unheld))}, which the files never "
                         f"hold: not shifted (their streams: {shown or 'none'})")
        return notes

    @property
    def sorted_files(self) -> list[Path]:
        """Files that were not in time order and were sorted before replay."""
        return [source_path(p) for p in self.plans if p.sorted_on_read]

    def readings(self) -> list[tuple[str, dict[str, Any]]]:
        """(file, how it is read) per plan, in replay order: what the fingerprint digests, for saying what differs
        when a snapshot's fingerprint is not this replay's."""
        # (sorted: the same selection in another order reads the same, and resumes)
        selected = {} if self.selection is None else {"streams": sorted(self.selection.patterns)}
        return [(_source_name(p), p.describe() | selected) for p in self.plans]

    def rows(self) -> int | None:
        """Rows in all the files (valid or not), for a progress total; None when a file cannot say cheaply."""
        counts = [p.row_count() for p in self.plans]
        return None if None in counts else sum(counts)

    def stats(self) -> dict[str, Any]:
        return {"emitted": self.emitted, "rejected": dict(self.rejected), "done": self.done}

    def snapshot(self) -> dict[str, Any]:
        return {"source": "replay", "fingerprint": self._fingerprint, "emitted": self.emitted}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Reopen the files and skip the ticks already emitted (rejections are recounted on the way)."""
        emitted = check_snapshot(snapshot, "replay", self._fingerprint)
        speed, self.speed = self.speed, None
        self._open()
        while self.emitted < emitted and not self.done:
            self.next_batch(min(self.chunk_rows, emitted - self.emitted))
        self.speed = speed
        if self.emitted < emitted:
            raise ValueError(f"snapshot is at tick {emitted} but the files hold {self.emitted}: did they change?")

    def close(self) -> None:
        """Stop the replay and remove the temporary folders its zip archives and UTF-16 files were unpacked into."""
        self._heap = []
        for unpacked in self._unpacked:
            unpacked.close()

    def __enter__(self) -> FileReplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def replay_ticks(
    files: FileSpec | Sequence[FileSpec],
    *,
    columns: MapSpec | None = None,
    chunk_rows: int = 4096,
    streams: str | Sequence[str] | None = None,
) -> Iterator[Tick]:
    """All valid ticks of `files` in merge order, as fast as possible (for backtests).

    Rejected rows are skipped; build a FileReplay directly to read its `rejected` counts.
    """
    replay = FileReplay(files, columns=columns, chunk_rows=chunk_rows, streams=streams)
    try:
        while not replay.done:
            yield from replay.next_batch(chunk_rows)
    finally:
        replay.close()
