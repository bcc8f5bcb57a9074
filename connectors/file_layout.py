"""The layout one file is read with: its column map (given in full; detected by connectors/layout.py; or
detected, then refined by the keys given), its CSV dialect, its columns and their types, and the notes that say
how it was read when that was a guess. The time unit and format are settled from the file's first values; what
its values say about its rows comes from connectors/content_notes.py and its neighbours (venue_notes.py,
correction_notes.py, instrument_identifiers.py), the map's columns are checked against the
file's by connectors/mapped_columns.py, and the zone its naive times are read in by
connectors/naive_time_zones.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Sequence

import polars as pl

from connectors import json_lines
from connectors.archives import not_utf8
from connectors.column_map import ColumnMap, preset_variant
from connectors.contract_column import contract_beside_root, levels_split_by
from connectors.content_notes import fix_sides, kind_column, maker_sides, quote_sides_unread
from connectors.correction_notes import amendment_note, condition_note, sale_condition_note, taq_corrections
from connectors.csv_dialect import (
    banner_note,
    Dialect,
    banner_refusal,
    check_line_lengths,
    long_rows,
    sniff_csv,
)
from connectors.clock_digits import clock_digits
from connectors.cautions import Caution
from connectors.date_columns import clock_left_out, date_read_as_epoch
from connectors.epoch_parts import epoch_parts_map
from connectors.date_readings import settled_reading
from connectors.datetime_text import interval_said
from connectors.datetime_column import CLOCK_ONLY
from connectors.field_names import normal_name
from connectors.bloomberg_names import bdh_stream
from connectors.file_names import date_of, one_side_export, stream_of, symbol_in_name
from connectors.file_scans import currency_codes, first_text, is_csv, scan_file, time_sample
from connectors.finer_clock import finer_clock
from connectors.headerless_csv import headerless_map, quote_cautions
from connectors.instrument_identifiers import instrument_column, name_column, unread_identifiers
from connectors.lme_prompts import prompt_beside_metal
from connectors.json_lines import is_json_lines
from connectors.layout import NoTickLayout, detect_columns, match_case
from connectors.layout_notes import (
    bar_notes,
    coinbase_sides,
    currency_notes,
    describe_map,
    headerless_bar_stamp,
    other_clock_note,
    vendor_notes,
)
from connectors.map_options import Refine
from connectors.map_vocabulary import (
    DAY_CLOCK_UNITS,
    DETECT,
    EPOCH,
    EXCEL_DAYS,
    TIME_OF_DAY,
)
from connectors.iqfeed_level1 import level1_refusal
from connectors.mapped_columns import (
    columns_lacking,
    numbers_not_nested,
    repeated_columns,
    spelled_as_the_file,
    unnamed_fields,
)
from connectors.naive_time_zones import histdata_zone, naive_time_notes, zone_of_header
from connectors.size_readings import size_notes
from connectors.time_units import detected_unit, epoch_unit
from connectors.shell_words import columns_option
from connectors.venue_notes import venue_note
from connectors.venue_zones import mapped_venue_zone, venue_zone, venue_zone_note


def layout(path: Path, spec: ColumnMap | Refine | None, long_rows_of: bool = False, own_map: bool = False,
            ) -> tuple[ColumnMap, Dialect | None, dict, list[str]]:
    """The map a file is read with (given; detected; or detected, then refined), its CSV dialect, its columns,
    and the notes that say how it was read when that was a guess. `long_rows_of`: the dialect names the CSV's rows
    with more fields than its columns, which are read truncated (`long_rows`)."""
    if not isinstance(spec, ColumnMap) and (why := one_side_export(path)):
        raise ValueError(why)
    if is_csv(path) and (why := level1_refusal(path)):  # IQFeed's live Q,/P, lines: no map reads them
        raise ValueError(why)
    read = _columns_read(path, spec, long_rows_of)
    names, dialect, schema = read.names, read.dialect, read.schema
    first = lambda column: first_text(path, names, dialect, column)  # noqa: E731
    date_notes: list[str] = []
    zone_notes: list[str] = []
    shaped_note = None
    if isinstance(spec, ColumnMap):
        cmap = match_case(preset_variant(spec, list(schema)), schema)
        kind_notes = [f"{path.name}: --preset {spec.preset} read in its vendor's other layout: {describe_map(cmap)}"] \
            if cmap.ts != spec.ts and spec.preset is not None and cmap.preset == spec.preset else []
    else:
        spec, cmap, kind_notes, date_notes, zone_notes, shaped_note = _detected_map(path, spec, read, first, own_map)
    if read.given_names is not None and names != read.given_names:  # the header names the columns: read by it
        cmap = replace(cmap, names=names)
    if columns_lacking(path, cmap.to_dict(), schema) and (banner := banner_refusal(path, dialect)):
        raise NoTickLayout(banner)  # the columns read are a banner's first line: no map mends that
    kind_notes = read.header_notes + kind_notes
    cmap, stream_notes = _stream_of_file(path, spec, cmap, schema, names, dialect)
    cmap, day_notes = date_of(path, cmap)
    _refuse_lacking(path, spec, cmap, schema, names, dialect)
    # snapshots' total volume as the size; TRACE's `5MM+`, read as its cap
    stream_notes += size_notes(path, cmap, schema, names, dialect)
    if isinstance(spec, ColumnMap):  # a full map over TRACE's columns replays cancels as a detected one does: said
        kind_notes += amendment_note(path, cmap, schema, names, dialect)
    numbers_not_nested(path, cmap, schema)
    cmap, parts_notes = epoch_parts_map(path, cmap, first)  # `ts=ssboe+usecs`: epoch seconds, no date
    cmap, unit_notes = _time_unit(path, spec, cmap, schema, names, dialect, first)
    if isinstance(spec, ColumnMap):  # a full map that names `Time (JST)` reads its zone as detection does
        cmap, zone_notes = zone_of_header(path, cmap, schema, first)
        # TAQ's `ts=DATE+TIME_M`, TRACE's and B3's own columns: their venue's zone, as a detected layout's
        cmap, venue_notes = mapped_venue_zone(path, cmap, schema,
                                              lambda: time_sample(path, names, dialect, cmap.ts_columns))
        zone_notes += venue_notes
    cmap, notes = _read_as_notes(path, spec, cmap, read, shaped_note, first)
    # every layout, a full map's too: naive times read as UTC are said (an offset column is detection's to read)
    cmap, naive_notes = naive_time_notes(path, cmap, schema, names, dialect, first,
                                         detected=not isinstance(spec, ColumnMap))
    notes += naive_notes
    number_notes = [f"{path.name}: {dialect.numbers}"] if dialect is not None and dialect.numbers else []
    number_notes += currency_notes(path, cmap, first, currency_codes(path, cmap, dialect))
    number_notes += banner_note(path, dialect)
    notes = date_notes + notes + zone_notes
    return cmap, dialect, schema, notes + number_notes + kind_notes + parts_notes + unit_notes + stream_notes + \
        day_notes


class _ColumnsRead(NamedTuple):
    """A file's columns as `layout` first reads them: before any map is applied."""

    names: tuple[str, ...] | list[str] | None  # the column names it is read by (None: its header's)
    given_names: tuple[str, ...] | list[str] | None  # the names given (a preset's, --csv-names), if any
    guessed: ColumnMap | None  # a header-less CSV's layout, guessed from its rows
    how: str  # what the guess read it as
    dialect: Dialect | None  # a CSV's
    schema: dict  # its columns and their types
    header_notes: list[str]  # a header skipped for the names given


def _columns_read(path: Path, spec: ColumnMap | Refine | None, long_rows_of: bool) -> _ColumnsRead:
    """The file's dialect, the names its columns are read by (given, its header's, or a header-less layout's
    guess) and its schema; a ValueError saying why when polars cannot read it so."""
    names = spec.names if isinstance(spec, ColumnMap) else spec.keys.get("names") if spec is not None else None
    decimal = spec.decimal if isinstance(spec, ColumnMap) else spec.keys.get("decimal") if spec is not None else None
    dialect = sniff_csv(path, decimal) if is_csv(path) else None
    if dialect is not None:  # before polars reads past the first lines
        check_line_lengths(path)
    guessed, how = None, ""
    given_names = names
    header_notes: list[str] = []
    if names is not None and dialect is not None and dialect.header:  # a preset or --csv-names over a header row
        names, header_notes = _names_over_header(path, tuple(names), dialect, spec)
    if names is None and not isinstance(spec, ColumnMap) and dialect is not None and not dialect.header \
            and dialect.rows:
        guessed, how = headerless_map(path, dialect.rows, dialect.separator)
        names = guessed.names
    # a header-less file given its names whose rows end with a separator (`...;100;`) reads as a header file whose
    # rows do (review259 #3): the empty last cell is no data, a row with a cell there is rejected by its line
    trailing = names is not None and dialect is not None and not dialect.header and dialect.tails_empty(len(names))
    if (long_rows_of or trailing) and dialect is not None:
        if names is not None and dialect.width > len(names) and not trailing:  # most rows are longer: too few names
            raise ValueError(f"{path}: its rows have {dialect.width} fields, more than the {len(names)} names")
        found = long_rows(path, dialect, len(names) if names is not None else None)
        dialect = replace(dialect, long_rows=found.rows, empty_tails=found.empty_tails)
    try:
        schema = dict(scan_file(path, names, dialect).collect_schema())
    except pl.exceptions.PolarsError as e:
        if names is not None:
            raise ValueError(_names_misfit(path, names, dialect, spec, e)) from None
        raise ValueError(banner_refusal(path, dialect) or
                         f"{path}: cannot read it as {path.suffix.lower()}: {str(e).splitlines()[0]}") from None
    return _ColumnsRead(names, given_names, guessed, how, dialect, schema, header_notes)


def _detected_map(path: Path, spec: Refine | None, read: _ColumnsRead, first: Callable[..., Any], own_map: bool,
                  ) -> tuple[Refine | None, ColumnMap, list[str], list[str], list[str], str | None]:
    """The map detection reads a file with, refined by the keys given (`spec`), with what the file's contents
    add to it (a date read as epoch, a kind column, a finer clock, sides, corrections): (the keys as the file
    spells its columns, the map, the notes on its kinds, on its dates, on its zone, an exchange shape's note)."""
    names, dialect, schema, guessed = read.names, read.dialect, read.schema, read.guessed
    every = "" if own_map else " (the keys given apply to every file; a replay list gives each file its own " \
                               "map: docs/replay.md)"
    if isinstance(spec, Refine):  # its columns as the file spells them (`TS` for `ts`), as a whole map's are
        spec = Refine(spelled_as_the_file(spec.keys, schema))
        # detection reads the time column given by its name (polars' error would name no option); the other
        # columns are checked once the keys are applied, after what is wrong with the keys themselves
        timed = {key: spec.keys[key] for key in ("ts", "trade_date") if key in spec.keys}  # (`trade_date=TD`)
        if timed and (lacking := columns_lacking(path, timed, schema)):
            raise NoTickLayout(f"{lacking}{every}")
    try:
        hints = spec.keys if isinstance(spec, Refine) else None
        shaped = json_lines.table(path).columns_for(hints) if is_json_lines(path) else None  # an exchange's
        shaped_note = json_lines.table(path).shape.note if shaped is not None and guessed is None else None
        cmap = guessed or shaped or detect_columns(path, schema, first, hints)
    except ValueError as e:  # names misread from another encoding than UTF-8 are why: said
        if isinstance(e, NoTickLayout) and (banner := banner_refusal(path, dialect)):  # a banner's line as header
            raise NoTickLayout(banner) from None
        if is_csv(path) and (why := not_utf8(path)):
            raise ValueError(f"{e}; {why}") from None
        if isinstance(e, NoTickLayout) and is_json_lines(path) and (nested := json_lines.nested_arrays(schema)):
            # a column map would not reach the ticks either: say where they are and how to lift them out
            each = ".[]" if json_lines.table(path).records else ""
            raise NoTickLayout(
                f"cannot detect the column layout of {path}: columns found {list(schema)}, and its objects hold "
                f"arrays of objects under {', '.join(map(repr, nested[:3]))}, where its ticks may be; no column map "
                f"reaches them (replay unwraps `data`, `params.data`, `tick.data` and Alpaca's `trades`/`quotes`: "
                f"docs/replay.md, JSON lines): write them one object a line first, e.g. jq -c "
                f"'{each}.{nested[0]}[]' {path.name} > ticks.jsonl") from None
        raise
    if names is not None and cmap.names is None:
        cmap = replace(cmap, names=tuple(names))
    keys = spec.keys if isinstance(spec, Refine) else {}
    unit_said = "ts_format" in keys or keys.get("ts_unit") not in (None, *DAY_CLOCK_UNITS)
    date_notes: list[str] = []
    if guessed is None and not unit_said:  # a time column named (ts=trade_date) is not paired with another
        cmap, date_notes = date_read_as_epoch(path, cmap, schema, names, dialect, may_pair="ts" not in keys)
    if guessed is None and not {"ts_unit", "ts_format"} & set(keys):  # `090001418`: 09:00:01.418, not 90 s
        cmap, clock_notes = clock_digits(path, cmap, schema, names, dialect)
        date_notes += clock_notes
    if _writes_only_changes(cmap, list(schema)):
        cmap = replace(cmap, fill_quotes=True)
    zoned = cmap.tz is not None  # a layout known to write its zone (IQFeed's Eastern time): no venue's note
    # TAQ's New York, B3's Sao Paulo, unless --tz says otherwise (or the times carry their offset)
    detected = cmap = venue_zone(cmap, schema, lambda: time_sample(path, names, dialect, cmap.ts_columns))
    try:
        cmap = spec.apply(cmap) if isinstance(spec, Refine) else cmap
    except ValueError as e:  # the keys given, applied to each file: name the one they do not fit
        raise ValueError(f"{path}: {e}{every}") from None
    zone_notes = [] if "tz" in keys or zoned else venue_zone_note(path, detected, cmap, schema)
    cmap, kind_notes = kind_column(path, cmap, schema, names, dialect)
    if not {"ts", "ts_unit", "ts_format"} & set(keys):  # a time column or unit given is read as given
        cmap, clock_notes = finer_clock(path, cmap, schema, names, dialect)
        kind_notes += clock_notes
    cmap = maker_sides(path, fix_sides(path, cmap, schema, names, dialect), schema, names, dialect)
    cmap = cmap if "side" in keys else coinbase_sides(path, list(schema), cmap)  # by its name, with a note
    cmap, correction_notes = taq_corrections(path, cmap, schema, names, dialect)
    kind_notes += venue_note(path, cmap, schema, names, dialect) + correction_notes + [
        note for said in (condition_note, amendment_note, sale_condition_note)
        for note in said(path, cmap, schema, names, dialect)]
    return spec, cmap, kind_notes, date_notes, zone_notes, shaped_note


def _stream_of_file(path: Path, spec: ColumnMap | Refine | None, cmap: ColumnMap, schema: Mapping[str, Any],
                    names: Sequence[str] | None, dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """The map with the file's streams named (a column of names, a contract beside its root, the file's name),
    unless the map given names them, with the notes that say how; a ValueError for a fixed name that is also a
    column, or a REST dump that names no instrument."""
    if cmap.stream is not None and cmap.stream_col is None and \
            (column := next((n for n in schema if n.strip().lower() == cmap.stream.strip().lower()), None)):
        raise ValueError(f"{path}: the column map names one fixed stream, {cmap.stream!r}, which is also a column of "
                         f"the file: every row would go to that one stream. For a stream per value of the column give "
                         f"stream_col: {column} (inline: --columns ...,stream={column}); a fixed name that is no "
                         f"column is stream: NAME (inline: stream_name=NAME)")
    named = _stream_named(spec)
    if not named and cmap.stream is None and cmap.stream_col is None and cmap.default_stream is None:
        cmap, stream_notes = name_column(path, cmap, schema, names, dialect)
    else:
        stream_notes = []
    if not named:  # no ticker column: the security a BDH title block names
        cmap, title_notes = bdh_stream(path, cmap, dialect.banner if dialect is not None else ())
        stream_notes += title_notes
    cmap, found_notes = stream_of(path, cmap, schema, detected=not isinstance(spec, ColumnMap))
    stream_notes += found_notes
    if not named and not isinstance(spec, ColumnMap):  # `symbol` ES beside `contract` ESZ4/ESH5: a stream each
        fixed = cmap.stream
        cmap, prompt_notes = prompt_beside_metal(path, cmap, schema, names, dialect)  # CAD 3M and CAD Cash
        stream_notes += prompt_notes
        cmap, contract_notes = contract_beside_root(path, cmap, schema, names, dialect)
        if fixed is not None and cmap.stream is None:  # a product and its contracts name the streams, not the file
            stream_notes = [n for n in stream_notes if n not in found_notes]
        stream_notes += contract_notes + levels_split_by(path, cmap, schema, names, dialect)
    if not named and cmap.stream_col is None and is_json_lines(path) and json_lines.table(path).records and \
            symbol_in_name(path) is None:  # the file's stem would be the stream: "trades" says nothing
        if (found := instrument_column(path, cmap, schema, names, dialect)) is not None:  # a fixed name would merge
            column, values = found
            raise ValueError(f"{path}: a REST dump (one JSON array of records) whose records' column {column!r} holds "
                             f"several values ({', '.join(values[:3])}, ...) that look like instruments, read by no "
                             f"known name: give {columns_option(f'stream={column}')} (a stream per value; "
                             f"docs/replay.md)")
        raise ValueError(f"{path}: a REST dump (one JSON array of records) whose records name no instrument, nor "
                         f"does its file name: give the stream, --columns stream_name=NAME (BTCUSDT, BTC-USD), or "
                         f"name the file after it (BTCUSDT-trades.json)")
    if cmap.stream_col is None:  # a fixed name too: it names the stream, not the file's one instrument
        stream_notes += unread_identifiers(path, cmap, schema, names, dialect, named)
    return cmap, stream_notes


def _refuse_lacking(path: Path, spec: ColumnMap | Refine | None, cmap: ColumnMap, schema: Mapping[str, Any],
                    names: Sequence[str] | None, dialect: Dialect | None) -> None:
    """A NoTickLayout naming the columns the map needs that the file lacks, and what would read it instead."""
    if lacking := columns_lacking(path, cmap.to_dict(), schema):
        headerless = ("; its first line is data, not a header: give its columns in order with --csv-names"
                      if dialect is not None and not dialect.header and names is None else "")
        encoding = f"; {why}" if is_csv(path) and (why := not_utf8(path)) else ""  # mojibake names: say why
        if instead := _detected_instead(path, spec):  # the way that reads it, rather than ways to mend the map
            headerless = encoding = ""
        raise NoTickLayout(f"{lacking}{headerless}{encoding}{instead}")


def _time_unit(path: Path, spec: ColumnMap | Refine | None, cmap: ColumnMap, schema: Mapping[str, Any],
               names: Sequence[str] | None, dialect: Dialect | None,
               first: Callable[..., Any]) -> tuple[ColumnMap, list[str]]:
    """The map with its time unit and format settled from the file's first values (a unit to detect, a time of
    day as text, a datetime's reading, an epoch count's magnitude), with the notes that say how."""
    if cmap.ts_unit == DETECT:  # a map that named its time column, not its unit
        unit, ts_format = detected_unit(cmap.ts, schema.get(cmap.ts) if len(cmap.ts_columns) == 1 else pl.String,
                                        first)
        cmap = replace(cmap, ts_unit=unit, ts_format=ts_format)
        date_read_as_epoch(path, cmap, schema, names, dialect, may_pair=False)  # refuses a date read as epoch units
        cmap, clock_notes = clock_digits(path, cmap, schema, names, dialect)  # `090001418`: 09:00:01.418, not 90 s
        unit = cmap.ts_unit
        said = (f"{unit}{', ' + ts_format if ts_format else ''}" if unit == "datetime" else
                f"{unit} (spreadsheet serial dates)" if unit == EXCEL_DAYS else
                f"{unit} of each row's day in {cmap.ts_columns[0]!r}" if unit in DAY_CLOCK_UNITS else
                f"{unit} since the epoch")
        # the zone its wall-clock times are read in, as a detected map's note says it (epoch counts are instants)
        local = unit in ("datetime", EXCEL_DAYS, *DAY_CLOCK_UNITS) and "%s" not in (ts_format or "")
        zone = f", in {cmap.tz} (the tz given)" if cmap.tz and local else ""
        if unit == "datetime" and len(cmap.ts_columns) == 1:
            said += interval_said(first(cmap.ts))  # (ENTSO-E's MTU: `01.01.2024 00:00 - 01.01.2024 00:15`)
        unit_notes = clock_notes or [f"{path.name}: column {cmap.ts!r} read as {said}, as its first value shows{zone} "
                                     f"(--ts-unit or --ts-format to say otherwise)"]
    else:
        unit_notes = []
    if cmap.ts_unit == TIME_OF_DAY and len(cmap.ts_columns) == 1 and CLOCK_ONLY.match(first(cmap.ts) or ""):
        cmap = replace(cmap, ts_unit="datetime")  # `09:00:00.123`: a time of day as text, not a number of seconds
        unit_notes.append(f"{path.name}: column {cmap.ts!r} holds times of day as text ({first(cmap.ts)!r}): read "
                          f"as wall-clock times of {cmap.date}{' in ' + cmap.tz if cmap.tz else ' (UTC)'}")
    # dates alone beside a column of times of day (`Date;Heure` mapped ts=Date): said, with the map that joins them
    beside = clock_left_out(list(schema), cmap, first) if cmap.ts_unit == "datetime" else ""
    if cmap.ts_unit == "datetime" and (cmap.ts_format is None or "%y" in cmap.ts_format):  # a full map's too
        given = spec.ts_format is not None if isinstance(spec, ColumnMap) else "ts_format" in getattr(spec, "keys", {})
        cmap, settled = settled_reading(path, names, dialect, cmap, format_given=given, beside=beside)
        unit_notes += settled
    if beside:
        unit_notes.append(Caution(f"{path.name}: column {cmap.ts!r} holds dates alone ({first(cmap.ts)!r}){beside}"))
    if cmap.ts_unit == EPOCH:  # the unit of the first time's magnitude: Binance's ms, and us since 2025
        try:
            unit = epoch_unit(float(first(cmap.ts) or "nan"))
        except ValueError:  # not a number: the time check below says what the column holds
            unit = "ns"
        cmap = replace(cmap, ts_unit=unit)
    return cmap, unit_notes


def _read_as_notes(path: Path, spec: ColumnMap | Refine | None, cmap: ColumnMap, read: _ColumnsRead,
                   shaped_note: str | None, first: Callable[..., Any]) -> tuple[ColumnMap, list[str]]:
    """The notes that say how a guessed or detected layout reads the file (a header-less guess, a detection and
    its vendor's notes, a full map's columns left unread, serial dates, a day's clock, quotes filled), with the
    map read in the zone its time column's header names."""
    names, dialect, schema, guessed = read.names, read.dialect, read.schema, read.guessed
    repeated_columns(path, cmap, schema)  # BDH's securities side by side: not the first one alone
    notes = []
    if guessed is not None:
        notes.append(f"{path.name}: no header row; read as {read.how} (--csv-names {','.join(names)}): "
                     f"{describe_map(cmap)}")
        notes += bar_notes(path, list(schema), cmap, headerless_bar_stamp(path, cmap))
        notes += histdata_zone(path, guessed, cmap)
        notes += quote_cautions(path, dialect.rows, guessed) if dialect is not None else []
    elif not isinstance(spec, ColumnMap):
        given = ("no column map given" if spec is None
                 else f"detected, with the keys given ({', '.join(sorted(spec.keys))})")
        notes.append(f"{path.name}: {given}; read as {describe_map(cmap)}")
        notes += vendor_notes(path, list(schema), cmap, by_keys=shaped_note is not None)
        cmap, zoned_notes = zone_of_header(path, cmap, schema, first)
        notes += zoned_notes
        notes += [] if "ts" in getattr(spec, "keys", {}) else other_clock_note(path, list(schema), cmap)
        notes += [shaped_note] if shaped_note else []
    elif spec.preset is None:
        quote_sides_unread(path, cmap, schema, names, dialect)  # Bloomberg's BID/ASK rows are no trades
        notes += unnamed_fields(path, cmap, schema, first)
    # (serial dates and counts after midnight: naive_time_notes says how they were read, for a full map too)
    if cmap.fill_quotes and cmap.quote_sides is None and not isinstance(spec, ColumnMap):  # (its own note)
        notes.append(f"{path.name}: its quote rows leave bid or ask empty where it did not change (as MetaTrader's "
                     f"exports do): each takes it from the stream's previous quote (--columns ...,fill_quotes=false "
                     f"rejects such rows instead)")
    return cmap, notes


def _names_over_header(path: Path, names: tuple[str, ...], dialect: Dialect, spec: ColumnMap | Refine | None,
                       ) -> tuple[tuple[str, ...] | None, list[str]]:
    """Column names given (a preset's, --csv-names) for a CSV whose first line is a header (Binance's newer public
    files have one, the older none): that line is never data. A header that names every column given is read by
    its own names (None), in whatever order it has them; a header of as many other names is skipped and the
    columns read by position, with a note. A header of another width keeps the names, which polars then refuses
    (`_names_misfit`)."""
    header = list(scan_file(path, None, dialect).collect_schema())
    if {normal_name(n) for n in names} <= {normal_name(c) for c in header}:
        return None, []
    if len(header) != len(names):
        return names, []
    given = f"--preset {spec.preset}" if isinstance(spec, ColumnMap) and spec.preset else "the names given"
    return names, [f"{path.name}: its first line is a header ({', '.join(header)}) that names other columns than "
                   f"{given} ({', '.join(names)}): skipped, and the columns read in the order given"]


def _names_misfit(path: Path, names: Sequence[str], dialect: Dialect | None, spec: ColumnMap | Refine | None,
                  error: Exception) -> str:
    """Why column names given (a preset's, --csv-names) do not read a CSV: the file's column count and theirs, and
    the preset, or the detection without one, that reads it, when one does; polars' own words otherwise."""
    if dialect is not None and dialect.header:
        width = len(scan_file(path, None, dialect).collect_schema())
    else:
        width = dialect.width if dialect is not None else 0
    preset = spec.preset if isinstance(spec, ColumnMap) else None
    given = f"--preset {preset} names" if preset else "the names given are"
    if not width or width == len(names):
        return (f"{path}: {given} {len(names)} columns {list(names)}, which do not fit the file's rows "
                f"({str(error).splitlines()[0]})")
    try:
        detected = layout(path, None)[0]
    except (ValueError, pl.exceptions.PolarsError):
        detected = None
    if detected is not None and detected.preset is not None and detected.preset != preset:
        fits = f"; --preset {detected.preset} fits it (as the file is detected without --preset)"
    elif detected is not None:
        fits = f"; without {'--preset' if preset else 'the names'} it is detected as {describe_map(detected)}"
    else:
        fits = ""
    return f"{path}: the file has {width} columns, {given} {len(names)} ({', '.join(names)}){fits}"


def _detected_instead(path: Path, spec: ColumnMap | Refine | None) -> str:

    """For a preset whose columns a file lacks: how the file reads with no map, when it does ("drop --preset")."""
    if not isinstance(spec, ColumnMap) or spec.preset is None:
        return ""
    try:
        detected = layout(path, None)[0]
    except (ValueError, pl.exceptions.PolarsError):
        return ""
    return f"; drop --preset {spec.preset}: detected as {describe_map(detected)}"


def _stream_named(spec: ColumnMap | Refine | None) -> bool:
    """Whether the map given names the stream (a fixed name or a column): then it is as the user said."""
    if isinstance(spec, ColumnMap):
        return spec.stream is not None or spec.stream_col is not None
    return isinstance(spec, Refine) and bool({"stream", "stream_col"} & set(spec.keys))


# MetaTrader's tick export: what marks it is its FLAGS column (which of bid, ask, last, volume the row changed)
METATRADER_TICKS = frozenset({"bid", "ask", "last", "volume", "flags"})


def _writes_only_changes(cmap: ColumnMap, columns: list[str]) -> bool:
    """Whether the layout is MetaTrader's tick export (`<BID> <ASK> <LAST> <VOLUME> <FLAGS>`, or those names
    without the brackets), which leaves a quote's unchanged side empty. Only a layout known to do so fills an
    empty side by detection: in any other file (an NBBO or option quote file) an empty side is no bid or no ask,
    a one-sided quote, whichever row it falls on."""
    if cmap.bid is None or cmap.fill_quotes is not None or cmap.bid not in columns or cmap.ask not in columns:
        return False
    return METATRADER_TICKS <= {normal_name(c) for c in columns}


