"""Planning one replay file. A DBN file gets connectors/dbn.py's plan; a Parquet, CSV or JSON-lines file a
`FilePlan` (connectors/file_plan.py): one lazy polars query that applies the column map its layout settled
(connectors/file_layout.py): its event times (connectors/event_time.py), and its rows read as wire fields
(connectors/row_exprs.py: stream names, numbers as a CSV writes them, quotes filled, a book export's columns); with
what one pass over the file finds (connectors/file_facts.py: rows out of time order, names with '/', prices at zero
or below, a footer line) said in notes (connectors/plan_notes.py), and a file refused with the option that reads
it."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import polars as pl

from connectors import json_lines
from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.csv_quotes import unclosed_quote_refusal
from connectors.cut_lines import cut_row
from connectors.datetime_column import NAIVE_TZ_ONLY
from connectors.epoch_counts import TEXT_COUNT, WHOLE_TEXT_UNITS, is_text_count
from connectors.event_time import apply_utc_offset, beyond_int64_s, ts_expr, ts_in_ns, wall_clock_ns
from connectors.local_times import time_column
from connectors.written_zones import zone_in_times
from connectors.datetime_text import is_interval
from connectors.derivative_streams import derivative_rows, derivative_stream
from connectors.pass_marks import pass_mark
from connectors.field_names import normal_name
from connectors.file_facts import file_facts, footer_line, time_span, zone_named
from connectors.file_layout import layout
from connectors.file_plan import FilePlan, row_in_file
from connectors.level_book import TARDIS_L2
from connectors.file_scans import first_text, int96_instants, is_csv, is_dbn, time_sample
from connectors.hours_window import Hours, hours_text
from connectors.json_lines import is_json_lines
from connectors.junk_lines import junk_reason
from connectors.leap_seconds import (
    clock_step_back,
    in_leap_second,
    leap_text_notes,
    posix_repeats,
    sixtieth_second,
)
from connectors.layout_notes import trade_bars
from connectors.map_options import Refine
from connectors.map_vocabulary import EPOCH_IS_UTC, UNITS, ZERO_BID_READINGS
from connectors.night_dates import nights_on_next_day
from connectors.plan_notes import (
    int96_note,
    nfc_stream,
    price_and_zone_notes,
    refuse_unread_times,
    row_notes,
    stream_and_clock_notes,
)
from connectors.price_offsets import PriceOffset, checked_price_offset
from connectors.repeated_hour import repeated_hour
from connectors.yield_offsets import rate_columns
from connectors.zero_sizes import zero_size_note
from connectors.price_series import sized_as_series
from connectors.quote_widths import QUOTE_SPREAD_LIMIT, headerless_quotes
from connectors.row_exprs import ROW, TS_BEYOND, csv_overrides, file_rows, filled_quotes, frame_of, row_exprs
from connectors.bar_questions import with_bar_questions_note
from connectors.bar_stamps import stamped_at_close
from connectors.closed_days import with_closed_days_note
from connectors.repeated_bars import without_repeated_bars
from connectors.row_order import in_time_order, is_newest_first
from connectors.session_dates import trade_date_evenings
from connectors.shifted_prices import ZeroPrices, offset_step_notes, settle_top, settling_streams, zero_prices
from engine.path_words import NotRead, file_not_found, shown_path
from engine.quoting import quoted, quoted_choices


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
        raise file_not_found("replay file", path) from None
    except OSError as e:
        raise NotRead(path, e) from None
    if stat.S_ISREG(mode):
        try:  # a mode that denies this user reading it, said here: the readers behind meet it as `[Errno 13]`
            os.close(os.open(path, os.O_RDONLY))
        except OSError as e:
            raise NotRead(path, e) from None
        return path
    kind = ("a folder" if stat.S_ISDIR(mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else
            "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
    raise ValueError(f"{shown_path(path)} is {kind}, not a file: a replay reads each file more than once (its layout, "
                     f"then its rows); write what it holds to a file and give that")


def plan_file(path: Path, cmap: ColumnMap | Refine | None, explicit: bool) -> Any:
    try:
        return _plan_file(path, cmap, explicit)
    except pl.exceptions.ComputeError as e:  # polars' many lines, echoing the file: said in one when a quote did it
        if is_csv(path) and (refusal := unclosed_quote_refusal(path, e)) is not None:
            raise refusal from None
        raise


def _plan_file(path: Path, cmap: ColumnMap | Refine | None, explicit: bool) -> Any:
    regular_file(path)
    if is_dbn(path):  # an order-by-order feed, reduced to trades and top of book
        from connectors.dbn import DbnPlan

        return DbnPlan(path, *_dbn_keys(path, cmap, explicit))
    try:
        return _ragged_plan(path, cmap, explicit)
    except (pl.exceptions.PolarsError, ValueError) as e:
        if explicit or (naive_only := _without_tz(path, cmap, e)) is None:
            raise
        return naive_only  # --tz for every file: a file whose times carry their own offset keeps it


def _ragged_plan(path: Path, cmap: ColumnMap | Refine | None, own_map: bool) -> FilePlan:
    """The plan of a table file; a CSV refused for a row with more fields than its columns is read again,
    truncating such rows, which are then rejected by their line (the normal read never looks for them). Both
    plan_file's first read and its read without --tz come here, so a stray separator in a file whose times carry
    their own offset is rejected as in any other (the retry without tz once escaped this and ended the run with
    polars' own text)."""
    try:
        return _table_plan(path, cmap, own_map=own_map)
    except (pl.exceptions.PolarsError, ValueError) as e:
        if not is_csv(path) or not LONG_ROW_ERRORS.search(str(e)):
            raise
        refused = e
    try:
        return _table_plan(path, cmap, long_rows_of=True, own_map=own_map)
    except ValueError as e:
        if NAIVE_TZ_ONLY in str(e) or EPOCH_IS_UTC in str(e):
            raise  # the map refused, not the rows: plan_file reads the file again without the tz given for all
        raise refused from None  # not a few stray rows: its rows do not fit its columns
    except pl.exceptions.PolarsError:
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
    plan = _ragged_plan(path, Refine(rest) if rest else None, own_map=False)
    carry = "count from the epoch (1970-01-01 UTC)" if epoch else "carry their own UTC offset"
    said = (f"{path.name}: its times {carry}, so --tz {tz} (for naive times) is not applied to it"
            + (f" (the hours kept, {quoted(rest['hours'])}, are on its wall clock)" if bare_hours else ""))
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
        raise ValueError(f"{path}: zero_bid must be one of {quoted_choices(ZERO_BID_READINGS)}, got {quoted(zero_bid)}")
    return checked_price_offset(keys.get("price_offset")), hours, zero_bid


def bare_hours_refused(path: Path, hours: str) -> str:
    """A window without a zone, and no tz to put it on: whose wall clock it means cannot be guessed (even for
    times that carry their own zone, UTC's is seldom the one a trader writes hours in)."""
    return (f"{path}: hours {quoted(hours)} are a wall clock's, and no zone is given for it (none after the window, no "
            f"--tz): write the zone after the window, e.g. '{hours} America/New_York' or '{hours} UTC'")


def zoned_hours(hours: str, tz: str) -> str:
    """A window without a zone, on the wall clock of the `tz` given for every file, for a file whose times carry
    their own zone (a DBN file's, `...Z` text, a UTC Parquet), to which `tz` itself does not apply."""
    return f"{hours_text(hours).strip()} {tz}"


def _table_plan(path: Path, cmap: ColumnMap | Refine | None, long_rows_of: bool = False,
                own_map: bool = False) -> FilePlan:
    """The plan of a Parquet or CSV file; `long_rows_of`: find the CSV's rows with more fields than its columns;
    `own_map`: the map is the file's own (a replay list entry's), not the one for every file."""
    given = cmap
    cmap, dialect, schema, notes = layout(path, cmap, long_rows_of, own_map)
    cmap, nfc_notes = nfc_stream(path, cmap)
    notes += nfc_notes
    cmap, derivative_notes = derivative_stream(path, given, cmap, schema)  # BTCUSDT.PERP beside spot's BTCUSDT
    notes += derivative_notes
    notes += _dialect_notes(path, dialect, schema)
    counted, first, overrides, ts_type, type_notes = _time_type(path, cmap, dialect, schema,
                                                                local_map=own_map or isinstance(given, ColumnMap))
    notes += type_notes
    text_times = ts_type == pl.String and cmap.ts_unit == "datetime" and not cmap.ts_format
    if not counted:
        first = (time_sample if text_times else first_text)(path, cmap.names, dialect, cmap.ts_columns)
    cmap, zoned_notes = zone_in_times(path, cmap, first, isinstance(given, ColumnMap))  # `... PM ET`: its zone
    notes += zoned_notes
    if cmap.hours is not None and Hours.parse(cmap.hours).zone is None and cmap.tz is None:
        raise ValueError(bare_hours_refused(path, cmap.hours))
    ts = apply_utc_offset(path, cmap, ts_expr(path, cmap, ts_type, first), first).alias("_ts")
    exprs, keys, raw_stream, price_texts, book, book_notes, unread_inputs = row_exprs(path, given, cmap, schema,
                                                                                       dialect, overrides, ts)
    notes = _levels_said(cmap, notes, book) + book_notes
    rows, junk = file_rows(path, cmap, dialect, overrides)
    notes += _derivative_stream_rows(path, cmap, schema, exprs, keys, rows)
    wall = wall_clock_ns(path, cmap, ts_type, first)
    marks = pass_mark(time_column(cmap)) if text_times and is_interval(first) else None  # `(CET)`, `02:00B`
    hour = repeated_hour(rows, wall, cmap.tz, cmap.stream_columns, ROW, is_newest_first, marks)
    if hour is not None and hour.second_rows.len():  # read at the later offset: told by the file's order
        second_pass = pl.col(ROW).is_in(hour.second_rows.implode())
        exprs[0] = apply_utc_offset(path, cmap, ts_expr(path, cmap, ts_type, first, second_pass), first).alias("_ts")
    exprs[0], session_notes, evenings_moved = trade_date_evenings(path, cmap, rows, exprs[0], wall,
                                                                       raw_stream)
    notes += session_notes
    exprs[0], night_notes = nights_on_next_day(path, cmap, rows, exprs[0], wall, raw_stream,  # 16:30 to 06:00
                                               lambda row: row_in_file(path, cmap, dialect, row))
    notes += night_notes
    if (sixtieth := sixtieth_second(cmap, ts_type)) is not None:  # `23:59:60.5`: not the next second's .5
        exprs[0] = in_leap_second(exprs[0], cmap, sixtieth)
    factor = 1 if ts_in_ns(cmap, ts_type) else UNITS[cmap.ts_unit]
    named = zone_named(cmap, ts_type)
    facts = file_facts(path, cmap, rows, exprs, keys, raw_stream, price_texts, dialect, factor, named, first,
                       sixtieth)
    notes += leap_text_notes(path, facts)
    if (repeats := posix_repeats(rows, exprs[0], raw_stream, facts, factor)) is not None:  # a clock stepped back
        exprs[0] = repeats.ts(exprs[0], factor)  # in a leap second: its second pass after the first, in file order
        facts = file_facts(path, cmap, rows, exprs, keys, raw_stream, price_texts, dialect, factor, named, first,
                           sixtieth)
        notes += repeats.notes(path, factor)
    notes += sized_as_series(path, cmap, exprs, keys, facts)  # an index's levels beside trades: size 1
    facts = _past_int64(path, cmap, rows, ts_type, first, exprs, keys, facts)
    frame = frame_of(rows, exprs, unread_inputs)
    notes += price_and_zone_notes(path, cmap, facts, first, named)
    notes += zero_size_note(path, facts, hours_given=cmap.hours is not None)  # indicative quotes, said once
    refuse_unread_times(path, cmap, rows, facts, first, named)
    # a clock stepped back once by a second outside a leap second (posix_repeats read those): named with its row
    clock_step = clock_step_back(facts, factor, lambda row: row_in_file(path, cmap, dialect, row))
    frame, order_notes, out_of_sequence = in_time_order(path, cmap, frame, keys, facts, hour, factor,
                                                           evenings_moved, clock_step)
    notes += order_notes
    if cmap.fill_quotes:  # after the sort: "previous" is in time order, per stream
        frame = frame.with_columns(filled_quotes(keys))
    notes += stream_and_clock_notes(path, cmap, rows, raw_stream, facts, hour, factor)
    plan = _file_plan(path, given, cmap, schema, dialect, rows, junk, exprs[0], frame, keys, facts,
                      bool(facts["unsorted"] or out_of_sequence), factor, notes, book)
    # (the closed days' note before a close stamp moves the times: it names a day as the file writes it)
    return with_bar_questions_note(stamped_at_close(with_closed_days_note(without_repeated_bars(
        row_notes(plan, rows, raw_stream, schema)))))


def _past_int64(path: Path, cmap: ColumnMap, rows: pl.LazyFrame, ts_type: Any, first: str | None,
                exprs: list[pl.Expr], keys: list[str], facts: dict[str, Any]) -> dict[str, Any]:
    """The facts with `beyond_int64`: whether rows whose time did not read hold times int64 ns do not (past 2262),
    which each row then carries (TS_BEYOND, after the wire fields' keys) for FilePlan to reject as ts_out_of_range.
    Looked for only where a row's time did not read: one more pass over such a file, none over others."""
    beyond = beyond_int64_s(path, cmap, ts_type, first) if facts["untimed"] else None
    if beyond is None or not rows.select(beyond.is_not_null().any()).collect().item():
        return facts | {"beyond_int64": False}
    exprs.insert(len(keys) + 1, beyond.alias(TS_BEYOND))  # (exprs[0] is the time)
    keys.append(TS_BEYOND)
    return facts | {"beyond_int64": True}


def _levels_said(cmap: ColumnMap, notes: list[str], book: str | None) -> list[str]:
    """The notes, where a Tardis L2 file's map is said, naming its price, amount and side a level's, not a trade's."""
    if book != TARDIS_L2:
        return notes
    trade = f"price={cmap.price}, size={cmap.size}, side={cmap.side}"
    return [note.replace(trade, f"book levels price={cmap.price}, amount={cmap.size}, side={cmap.side}")
            for note in notes]


def _derivative_stream_rows(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], exprs: list[pl.Expr],
                            keys: list[str], rows: pl.LazyFrame) -> list[str]:
    """A derivatives market's rows: their stream column's names by the same rule as a file's stream (the stream
    expression in `exprs` replaced), and the notes that say so."""
    if "stream" not in keys:
        return []
    at = keys.index("stream") + 1  # (exprs[0] is the time)
    named, derivative_notes = derivative_rows(exprs[at], path, cmap, schema, rows)
    exprs[at] = named.alias("stream")
    return derivative_notes

def _dialect_notes(path: Path, dialect: Dialect | None, schema: Mapping[str, Any]) -> list[str]:
    """What a CSV's dialect found in its rows: rows longer than its columns, rows ending in an empty last cell."""
    notes = []
    if dialect is not None and dialect.long_rows:
        notes.append(f"{path.name}: {len(dialect.long_rows)} row(s) with more fields than its {len(schema)} columns: "
                     f"each rejected as extra_fields (the first is named among the rejects), the others read")
    if dialect is not None and dialect.empty_tails:
        notes.append(f"{path.name}: {dialect.empty_tails} row(s) end with a separator past its {len(schema)} columns "
                     f"(an empty last cell, as Excel and broker exports write): read without it")
    return notes


def _time_type(path: Path, cmap: ColumnMap, dialect: Dialect | None, schema: Mapping[str, Any], local_map: bool,
               ) -> tuple[bool, str | None, dict | None, Any, list[str]]:
    """How the scan reads the time column: whether it is a CSV's count read as text (`counted`), its first value
    then, the CSV's column types, the time's type, and the note on Parquet INT96 instants. `local_map`: the map is
    the file's own or given in full, so its `tz` is the INT96 times' wall clock."""
    # a CSV's count of ms/us/ns written with a point or an exponent anywhere in its column (`.000`, Gate.io's
    # `...123.456`, R's `1.709967601e12`) is read as text, exactly: a first value without one no longer decides it,
    # so a later `1712345678123.456` reads too
    counted = is_csv(path) and cmap.ts_unit in WHOLE_TEXT_UNITS
    first = first_text(path, cmap.names, dialect, cmap.ts_columns) if counted else None
    pointed = first if first is None or is_text_count(first) or len(cmap.ts_columns) > 1 else \
        first_text(path, cmap.names, dialect, cmap.ts_columns, TEXT_COUNT) or first
    overrides = csv_overrides(cmap, pointed) if is_csv(path) else None
    # what the scan below will read: date+time columns are joined as text
    ts_type = pl.String if len(cmap.ts_columns) > 1 else overrides[cmap.ts] if overrides else schema[cmap.ts]
    notes = []
    if len(cmap.ts_columns) == 1 and cmap.ts in int96_instants(path):  # Impala's, Hive's: UTC by convention
        local = cmap.tz is not None and local_map
        ts_type = pl.Datetime(ts_type.time_unit) if local else ts_type  # the file's own tz: its wall clock
        notes.append(int96_note(path.name, cmap.ts, cmap.tz if local else None))
    return counted, first, overrides, ts_type, notes


def _file_plan(path: Path, given: ColumnMap | Refine | None, cmap: ColumnMap, schema: Mapping[str, Any],
               dialect: Dialect | None, rows: Any, junk: Mapping[int, Any], ts: Any, frame: Any, keys: list[str],
               facts: Mapping[str, Any], unsorted: bool, factor: int, notes: list[str], book: str | None,
               ) -> FilePlan:
    """The plan of a file whose rows are read and ordered: what its rejects, notes and scores need to know of it
    (its footer and junk lines, a JSON-lines file's bad lines, zero prices, a prediction market's settling)."""
    empty_sides = cmap.bid is not None and TARDIS_SIGNS <= {normal_name(n) for n in schema}
    unit_given = isinstance(given, ColumnMap) and given.ts_unit in UNITS or \
        isinstance(given, Refine) and given.keys.get("ts_unit") in UNITS
    footer = footer_line(rows, ts, dialect.separator, junk) if is_csv(path) else None
    junk_why = {row: junk_reason(cells, dialect.separator, len(schema)) for row, cells in junk.items()
                if footer is None or row != footer[0]}
    lines = json_lines.table(path) if is_json_lines(path) else None  # (parsed once, kept by the module)
    bad_lines = lines.bad_lines if lines is not None else {}
    tickless = lines.skipped if lines is not None else {}
    notes += lines.notes if lines is not None else []
    top = settle_top(cmap, schema)  # a prediction market's cents (1-99) settle at 0 too
    cut, cut_notes = cut_row(path, dialect, len(schema), rows, ROW) if is_csv(path) else (None, [])
    if footer is not None and footer[0] == cut:  # a footer without its newline is the footer, left out, not cut
        cut, cut_notes = None, []
    notes += cut_notes
    at_zero = zero_prices(frame, keys, cmap) if facts["nonpositive_rows"] or facts["zero_sides"] else \
        ZeroPrices(frozenset(), {}, frozenset(), {})
    notes += offset_step_notes(path.name, cmap, at_zero)  # an offset that makes one step many bps
    return FilePlan(path, cmap, frame, tuple(keys), unsorted, factor,
                    tuple(notes), book=book, dialect=dialect, schema=schema, unit_given=unit_given,
                    empty_sides=empty_sides, bars=trade_bars(cmap, schema),
                    nonpositive_prices=bool(facts["nonpositive_prices"]),
                    nonpositive_rows=(int(facts["nonpositive_rows"] or 0), int(facts["trading_rows"] or 0)),
                    near_zero_streams=at_zero.near_zero, crossing_streams=at_zero.crossing,
                    yield_streams=at_zero.yields | (frozenset(at_zero.lowest) if rate_columns(
                        (cmap.price, cmap.bid, cmap.ask)) else frozenset()),
                    lowest_prices=at_zero.lowest,
                    cut_streams=at_zero.cut,
                    settling_streams=settling_streams(frame, keys, top, cmap.price_scale) if facts["nonpositive_rows"]
                    else frozenset(),
                    settle_top=top,
                    long_rows=dict(dialect.long_rows) if dialect is not None else {}, bad_lines=bad_lines,
                    span=time_span(facts["min_ts"], facts["max_ts"], factor),
                    tickless=tickless, footer=footer, header_rows=frozenset(facts["header_rows"]), junk=junk_why,
                    end_messages=frozenset(facts["end_messages"]), cut_row=cut,
                    quote_width_limit=QUOTE_SPREAD_LIMIT if headerless_quotes(cmap, dialect) else None)


# Tardis.dev's CSVs (trades, quotes, book snapshots): an empty bid or ask is a book side with no order (an option
# out of the money), not one that did not change; such a quote is rejected (missing_field), never filled
TARDIS_SIGNS = frozenset({"exchange", "symbol", "timestamp", "local_timestamp"})
