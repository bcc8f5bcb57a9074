"""A detected time column beside one that writes the same instants finer: Gemini's trades (its REST API and the
exports made from it) carry `timestamp` in seconds and `timestampms` in milliseconds. Detection finds the first by
its name; read alone, its trades in one second share one time, their spacing lost. The finer column, named as the
time column with its unit after it (`timestampms`, `timestamp_ms`, `ts_us`), is read instead when the file's rows
show that both write one instant on every row (`finer_clock`); a finer column that does not agree is named and left
unread. The finer column's name keeps `other_clock_note` from calling the coarse one another clock
(`finer_name_of`)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl

from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.file_scans import SAMPLE_ROWS, is_csv, scan_file
from connectors.map_vocabulary import UNITS
from connectors.time_units import epoch_unit
from connectors.shell_words import columns_option
from engine.quoting import quoted

UNIT_AFTER = re.compile(r"^(?P<base>.+?)_?(?P<unit>ms|us|ns)$")  # `timestampms`, `timestamp_ms`, `ts_us`


def finer_name_of(column: str, coarse: str) -> bool:
    """Whether `column` is named as the time column `coarse` with an epoch unit after it (`timestampms` of
    `timestamp`)."""
    found = UNIT_AFTER.match(normal_name(column))
    return found is not None and found["base"] == normal_name(coarse) != normal_name(column)


def finer_clock(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """The map reading the finer of two epoch time columns of the same instants, with a note; a finer one whose
    instants differ on some row of the file's first SAMPLE_ROWS is named in a note and not read."""
    if len(cmap.ts_columns) != 1 or cmap.ts_unit not in UNITS:
        return cmap, []
    for column in (c for c in schema if finer_name_of(c, cmap.ts)):
        overrides = {cmap.ts: pl.String, column: pl.String} if is_csv(path) else None
        rows = scan_file(path, names, dialect, overrides).select(
            coarse=pl.col(cmap.ts).cast(pl.String).cast(pl.Float64, strict=False),
            fine=pl.col(column).cast(pl.String).cast(pl.Float64, strict=False)).drop_nulls().head(SAMPLE_ROWS)
        rows = rows.collect()
        if part := _part_of_second(path, cmap, column, rows):
            return part
        if not rows.height or UNITS[unit := epoch_unit(rows["fine"][0])] >= UNITS[cmap.ts_unit]:
            continue
        # one instant: the finer time within one coarse unit of the coarse one (truncated or rounded), compared in
        # the coarse unit, whose magnitudes float64 holds exactly enough
        apart = (rows["fine"] * (UNITS[unit] / UNITS[cmap.ts_unit]) - rows["coarse"]).abs()
        if (apart < 1).all():
            note = (f"{path.name}: column {quoted(column)} read as the time, in {unit}: it writes the instants of "
                    f"{quoted(cmap.ts)} ({cmap.ts_unit}) finer, on each of its first {rows.height:,} rows "
                    f"({columns_option(f'ts={cmap.ts}')} reads that one)")
            return replace(cmap, ts=column, ts_unit=unit, ts_format=None), [note]
        row = rows.row(int((apart >= 1).arg_max()), named=True)
        return cmap, [f"{path.name}: column {quoted(column)} ({unit}) is named as {quoted(cmap.ts)} in finer units "
                      f"but writes other instants ({row['fine']:.0f} beside {row['coarse']:.0f}): not read, its ticks "
                      f"are stamped with {quoted(cmap.ts)} ({columns_option(f'ts={column}')} reads that one)"]
    return cmap, []


def _part_of_second(path: Path, cmap: ColumnMap, column: str, rows: pl.DataFrame
                    ) -> tuple[ColumnMap, list[str]] | None:
    """Epoch seconds beside the part of each second in the unit the other column's name says, as CoinDesk's
    (CCData's) trades write `TIMESTAMP` and `TIMESTAMP_NS` (342000000: .342 s): the map joining the two
    (`ts=SECONDS+PART`, connectors/epoch_parts.py), with a note; None when the values are no such part."""
    named = UNIT_AFTER.match(normal_name(column))
    if cmap.ts_unit != "s" or not rows.height or named is None:
        return None
    unit = named["unit"]
    fine, coarse = rows["fine"], rows["coarse"]
    if not ((fine >= 0) & (fine < 10**9 // UNITS[unit]) & (fine == fine.floor()) & (coarse == coarse.floor())).all():
        return None
    note = (f"{path.name}: column {quoted(cmap.ts)} holds epoch seconds and {quoted(column)} the {unit} within each "
            f"second, on each of its first {rows.height:,} rows: read as one time "
            f"({columns_option(f'ts={cmap.ts}+{column}')} --ts-unit {unit})")
    return replace(cmap, ts=f"{cmap.ts}+{column}", ts_unit=unit, ts_format=None), [note]
