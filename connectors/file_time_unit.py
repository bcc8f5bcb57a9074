"""A file's time unit and format settled from its first values (`file_time_unit`): a unit left to detect, a
time of day written as text, a datetime's reading (day-first or month-first, two-digit years), dates alone beside
a column of times of day, an epoch count's unit by its magnitude; with the notes that say how. Split from
connectors/file_layout.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import polars as pl

from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.clock_digits import clock_digits
from connectors.cautions import Caution
from connectors.date_columns import clock_left_out, date_read_as_epoch
from connectors.date_readings import settled_reading
from connectors.datetime_text import interval_said
from connectors.datetime_column import CLOCK_ONLY
from connectors.map_options import Refine
from connectors.map_vocabulary import DAY_CLOCK_UNITS, DETECT, EPOCH, EXCEL_DAYS, TIME_OF_DAY
from connectors.time_units import detected_unit, epoch_unit
from engine.quoting import quoted


def file_time_unit(path: Path, spec: ColumnMap | Refine | None, cmap: ColumnMap, schema: Mapping[str, Any],
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
                f"{unit} of each row's day in {quoted(cmap.ts_columns[0])}" if unit in DAY_CLOCK_UNITS else
                f"{unit} since the epoch")
        # the zone its wall-clock times are read in, as a detected map's note says it (epoch counts are instants)
        local = unit in ("datetime", EXCEL_DAYS, *DAY_CLOCK_UNITS) and "%s" not in (ts_format or "")
        zone = f", in {cmap.tz} (the tz given)" if cmap.tz and local else ""
        if unit == "datetime" and len(cmap.ts_columns) == 1:
            said += interval_said(first(cmap.ts))  # (ENTSO-E's MTU: `01.01.2024 00:00 - 01.01.2024 00:15`)
        unit_notes = clock_notes or [f"{path.name}: column {quoted(cmap.ts)} read as {said}, as its first value "
                                     f"shows{zone} (--ts-unit or --ts-format to say otherwise)"]
    else:
        unit_notes = []
    if cmap.ts_unit == TIME_OF_DAY and len(cmap.ts_columns) == 1 and CLOCK_ONLY.match(first(cmap.ts) or ""):
        cmap = replace(cmap, ts_unit="datetime")  # `09:00:00.123`: a time of day as text, not a number of seconds
        unit_notes.append(f"{path.name}: column {quoted(cmap.ts)} holds times of day as text "
                          f"({quoted(first(cmap.ts))}): read as wall-clock times of "
                          f"{cmap.date}{' in ' + cmap.tz if cmap.tz else ' (UTC)'}")
    # dates alone beside a column of times of day (`Date;Heure` mapped ts=Date): said, with the map that joins them
    beside = clock_left_out(list(schema), cmap, first) if cmap.ts_unit == "datetime" else ""
    if cmap.ts_unit == "datetime" and (cmap.ts_format is None or "%y" in cmap.ts_format):  # a full map's too
        given = spec.ts_format is not None if isinstance(spec, ColumnMap) else "ts_format" in getattr(spec, "keys", {})
        cmap, settled = settled_reading(path, names, dialect, cmap, format_given=given, beside=beside)
        unit_notes += settled
    if beside:
        unit_notes.append(Caution(f"{path.name}: column {quoted(cmap.ts)} holds dates alone "
                                  f"({quoted(first(cmap.ts))}){beside}"))
    if cmap.ts_unit == EPOCH:  # the unit of the first time's magnitude: Binance's ms, and us since 2025
        try:
            unit = epoch_unit(float(first(cmap.ts) or "nan"))
        except ValueError:  # not a number: the time check below says what the column holds
            unit = "ns"
        cmap = replace(cmap, ts_unit=unit)
    return cmap, unit_notes
