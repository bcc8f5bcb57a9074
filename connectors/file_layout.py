"""The layout one file is read with: its column map (given in full; detected by connectors/layout.py; or
detected, then refined by the keys given: connectors/detected_map.py), its CSV dialect, its columns and their types
(connectors/columns_read.py), and the notes that say how it was read when that was a guess. Its streams are named
by connectors/file_streams.py, its time unit and format settled from its first values by
connectors/file_time_unit.py; what its values say about its rows comes from connectors/content_notes.py and its
neighbours (venue_notes.py, correction_notes.py, instrument_identifiers.py), the map's columns are checked against
the file's by connectors/mapped_columns.py, and the zone its naive times are read in by
connectors/naive_time_zones.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import polars as pl

from connectors.archives import not_utf8
from connectors.clock_digits import counts_within_the_day
from connectors.column_map import PRESETS, ColumnMap, preset_variant
from connectors.column_decimals import mapped_decimals
from connectors.columns_read import ColumnsRead
from connectors.content_notes import quote_sides_unread, unread_quote_marks
from connectors.correction_notes import amendment_note
from connectors.csv_dialect import (
    banner_note,
    Dialect,
    banner_refusal,
    check_line_lengths,
    long_rows,
    sniff_csv,
)
from connectors import json_lines
from connectors.epoch_parts import epoch_parts_map
from connectors.exchange_shapes import ONE_SIDED_WHY
from connectors.detected_map import detected_map
from connectors.field_names import normal_name
from connectors.file_names import one_side_export
from connectors.name_dates import date_of
from connectors.file_streams import stream_of_file
from connectors.file_suffixes import PARQUET_SUFFIXES
from connectors.file_time_unit import file_time_unit
from connectors.file_scans import currency_codes, first_text, is_csv, scan_file, signed_cells, time_sample
from connectors.headerless_csv import headerless_map, quote_cautions
from connectors.layout import NoTickLayout, match_case
from connectors.layout_notes import (
    bar_notes,
    currency_notes,
    describe_map,
    headerless_bar_stamp,
    other_clock_note,
    vendor_notes,
)
from connectors.map_options import Refine
from connectors.map_vocabulary import DATE_FROM_NAME
from connectors.preset_detection import preset_lacking_keep
from connectors.iqfeed_level1 import is_level1_capture, undated_refusal
from connectors.trailer_lines import trailer_note
from connectors.unreadable_files import UnreadableFile
from connectors.mapped_columns import (
    columns_lacking,
    numbers_not_nested,
    repeated_columns,
    unnamed_fields,
)
from connectors.naive_time_zones import histdata_zone, naive_time_notes, zone_of_header
from connectors.size_readings import size_notes
from connectors.venue_zones import mapped_venue_zone
from engine.quoting import quoted, quoted_list


def layout(path: Path, spec: ColumnMap | Refine | None, long_rows_of: bool = False, own_map: bool = False,
            ) -> tuple[ColumnMap, Dialect | None, dict, list[str]]:
    """The map a file is read with (given; detected; or detected, then refined), its CSV dialect, its columns,
    and the notes that say how it was read when that was a guess. `long_rows_of`: the dialect names the CSV's rows
    with more fields than its columns, which are read truncated (`long_rows`)."""
    if not isinstance(spec, ColumnMap) and (why := one_side_export(path)):
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
        spec, cmap, kind_notes, date_notes, zone_notes, shaped_note = detected_map(path, spec, read, first, own_map)
    if read.given_names is not None and names != read.given_names:  # the header names the columns: read by it
        cmap = replace(cmap, names=names)
    if columns_lacking(path, cmap.to_dict(), schema) and (banner := banner_refusal(path, dialect)):
        raise NoTickLayout(banner)  # the columns read are a banner's first line: no map mends that
    kind_notes = read.header_notes + kind_notes
    cmap, stream_notes = stream_of_file(path, spec, cmap, schema, names, dialect)
    try:
        cmap, day_notes = _level1_day(path, cmap) if is_level1_capture(path) else date_of(path, cmap)
    except ValueError:
        if is_level1_capture(path):  # IQFeed's times of day: said in its own words, with --columns date=
            raise ValueError(undated_refusal(path)) from None
        raise
    _refuse_lacking(path, spec, cmap, schema, names, dialect)
    unread_quote_marks(path, cmap, names, dialect)  # QUOTE BID under quote_sides: no row's price is lost unsaid
    # snapshots' total volume as the size; TRACE's `5MM+`, read as its cap
    stream_notes += size_notes(path, cmap, schema, names, dialect)
    if isinstance(spec, ColumnMap):  # a full map over TRACE's columns replays cancels as a detected one does: said
        kind_notes += amendment_note(path, cmap, schema, names, dialect)
    numbers_not_nested(path, cmap, schema)
    cmap, parts_notes = epoch_parts_map(path, cmap, first)  # `ts=ssboe+usecs`: epoch seconds, no date
    cmap, unit_notes = file_time_unit(path, spec, cmap, schema, names, dialect, first)
    counts_within_the_day(path, cmap, schema, names, dialect)  # (TAQ's clock digits read as ns: 25.8 h)
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
    dialect, number_notes = mapped_decimals(path, cmap, dialect, list(schema))  # each number column's own mark
    number_notes += currency_notes(path, cmap, first, currency_codes(path, cmap, dialect),
                                   lambda column: signed_cells(path, cmap, dialect, column))
    number_notes += banner_note(path, dialect) + trailer_note(path, dialect.trailer if dialect is not None else "")
    notes = date_notes + notes + zone_notes
    return cmap, dialect, schema, notes + number_notes + kind_notes + parts_notes + unit_notes + stream_notes + \
        day_notes


def _columns_read(path: Path, spec: ColumnMap | Refine | None, long_rows_of: bool) -> ColumnsRead:
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
        guessed, how = headerless_map(path, dialect.rows, dialect.separator, dialect.sample)
        names = guessed.names
    if dialect is not None and dialect.sample:  # (the guess's alone: a plan keeps no copy)
        dialect = replace(dialect, sample=())
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
        if (refused := banner_refusal(path, dialect)) is not None:
            raise ValueError(refused) from None
        # a CSV polars cannot read is one of a layout it does not take; a Parquet file, one cut short or damaged
        unreadable = UnreadableFile if path.suffix.lower() in PARQUET_SUFFIXES else ValueError
        raise unreadable(f"{path}: cannot read it as {path.suffix.lower()}: {str(e).splitlines()[0]}") from None
    return ColumnsRead(names, given_names, guessed, how, dialect, schema, header_notes)


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


def _preset_less_filter(names: list[str], cmap: ColumnMap) -> str:
    """How a note names a preset detection read the file by without its filter (the file lacks the keep column):
    the preset is named, and so is the column, as every row is read (none left out as the preset's filter would);
    empty when the map is no such preset's."""
    if (lacking := preset_lacking_keep(names)) is None:
        return ""
    name, columns = lacking
    preset = PRESETS[name]
    if cmap.keep is not None or (cmap.price, cmap.side_map) != (preset.price, preset.side_map):
        return ""  # a refinement made it another map
    said = ", ".join(quoted(column) for column in columns)
    return (f"preset {name} less its filter (the file has its columns but not its keep column {said}: every row is "
            f"read, none left out as the preset's filter would): ")


def _read_as_notes(path: Path, spec: ColumnMap | Refine | None, cmap: ColumnMap, read: ColumnsRead,
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
        given = ("no column map given" if spec is None or not spec.keys  # (none left for it: `_other_kinds_...`)
                 else f"detected, with the keys given ({', '.join(sorted(spec.keys))})")
        # a preset picked by its columns says so: its vendor's reading (sides, zone, filters) came with it
        by_preset = f"preset {cmap.preset} (the file has its columns): " if cmap.preset else \
            _preset_less_filter(list(schema), cmap)
        notes.append(f"{path.name}: {given}; read as {by_preset}{describe_map(cmap)}")
        notes += vendor_notes(path, list(schema), cmap, dialect, by_keys=shaped_note is not None)
        cmap, zoned_notes = zone_of_header(path, cmap, schema, first)
        notes += zoned_notes
        read_too = json_lines.table(path).shape.clocks_read if shaped_note else frozenset()  # (its note says them)
        notes += [] if "ts" in getattr(spec, "keys", {}) else other_clock_note(
            path, [name for name in schema if name not in read_too], cmap)
        notes += [shaped_note] if shaped_note else []
    elif spec.preset is None:
        quote_sides_unread(path, cmap, schema, names, dialect)  # Bloomberg's BID/ASK rows are no trades
        notes += unnamed_fields(path, cmap, schema, first)
    # (serial dates and counts after midnight: naive_time_notes says how they were read, for a full map too)
    if cmap.fill_quotes and cmap.quote_sides is None and not isinstance(spec, ColumnMap):  # (its own note)
        # why its rows are one-sided: the venue's own way, as its shape's note names it, else MetaTrader's export
        why = next((why for said, why in ONE_SIDED_WHY.items() if shaped_note is not None and said in shaped_note),
                   "as MetaTrader's exports do")
        notes.append(f"{path.name}: its quote rows leave bid or ask empty where it did not change ({why}): each "
                     f"takes it from the stream's previous quote (--columns ...,fill_quotes=false rejects such rows "
                     f"instead)")
    return cmap, notes


def _level1_day(path: Path, cmap: ColumnMap) -> tuple[ColumnMap, list[str]]:
    """An IQFeed Level 1 capture's day: the feed's own, its first `T,` time stamp line's, else its lines' Most Recent
    Trade Date (the first one's), else the one its name (or a folder above it) holds; the feed's wins where they
    disagree (a file named for its trade date holds a session that opened the evening before: review336 #11), with
    a note naming both. ValueError where none gives one (the capture's own refusal says how to give it)."""
    if cmap.date != DATE_FROM_NAME:  # a day given (--date, --columns date=)
        return date_of(path, cmap)
    table = json_lines.table(path)
    feed = [(day, said) for day, said in ((table.stamp_day, "its first `T,` time stamp line (the feed's clock)"),
                                         (table.field_day, "its lines' Most Recent Trade Date")) if day is not None]
    try:
        named, notes = date_of(path, cmap)
    except ValueError:
        if not feed:
            raise
        named, notes = None, []
    if not feed or named is not None and named.date == feed[0][0]:
        return named, notes
    day, said = feed[0]
    if named is None:
        return replace(cmap, date=day), [f"{path.name}: the day is {day}, from {said} (its name holds none), times "
                                         f"in {cmap.tz} (--date gives another)"]
    return replace(cmap, date=day), [f"{path.name}: the day is {day}, from {said}, not its name's {named.date}: the "
                                     f"feed's own date is read (a file named for a trade date may hold a session "
                                     f"that opened the evening before); --date {named.date} reads it on the name's "
                                     f"day"]


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
        return (f"{path}: {given} {len(names)} columns {quoted_list(names)}, which do not fit the file's rows "
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


