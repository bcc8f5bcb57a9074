"""Which reading a file's date text has when its first value does not say: a date that reads as month/day and as
day/month (`11/12/2026`, `12-04-2026`) is settled by the file's next rows when only one reading reads them all, or
refused with what those rows show (`settled_reading`); a two-digit year (`04-Dec-26`) is read in the century polars
gives it (1970-2069), said in a note."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import NamedTuple, Sequence

import polars as pl

from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.datetime_text import (
    chrono_text,
    date_readings,
    day_month_date,
    time_formats,
    two_way_date,
    two_way_refusal,
)
from connectors.local_times import time_column
from connectors.file_scans import first_text, is_csv, scan_file
from engine.quoting import quoted

SETTLE_ROWS = 10_000  # rows read to settle a date that reads two ways in the first row


class RowsRead(NamedTuple):
    """What a file's first SETTLE_ROWS times show of a two-way date's readings: the readings that read every one,
    the rows each reading alone reads (their count and the first), the rows no reading reads (and the first), and
    the first row each reading does not read (None: it reads them all)."""

    rows: int
    read_all: list[str]
    only: dict[str, tuple[int, str | None]]
    unread: int
    missed: dict[str, str | None]
    first_unread: str | None


def settled_reading(path: Path, names: Sequence[str] | None, dialect: Dialect | None, cmap: ColumnMap,
                    format_given: bool, beside: str = "") -> tuple[ColumnMap, list[str]]:
    """The map of a datetime text column whose format was not given, with the notes that say how it was read: a
    first date that reads two ways settled by the next rows when one reading alone reads them all (refused, with
    what they show, when none does), and the century of a two-digit year. A first date that reads one way only
    (`04/14/2020`) gets that reading's format, as a detected map does: polars' own guess would be day-first.
    `beside`: what a refusal adds of a column of times of day beside dates alone (date_columns.clock_left_out)."""
    notes = []
    first = first_text(path, names, dialect, cmap.ts_columns)
    # a map given with ts_unit datetime and no format (a detected map has its format already)
    if cmap.ts_format is None and first is not None and day_month_date(first) and len(one := time_formats(first)) == 1:
        cmap = replace(cmap, ts_format=one[0])
    if cmap.ts_format is None and first is not None and two_way_date(first):
        readings = date_readings(first)
        where = f"{path}: column {quoted(cmap.ts)}"
        if not readings:  # no reading to settle: said so, no format proposed
            raise ValueError(two_way_refusal(where, first, readings) + beside)
        read = _rows_read(path, names, dialect, cmap, readings)
        if len(read.read_all) != 1:
            raise ValueError(two_way_refusal(where, first, readings, _advice(read)) + beside)
        cmap = replace(cmap, ts_format=read.read_all[0])
        notes.append(f"{path.name}: its first date ({quoted(first, 24)}) reads two ways; its later rows read only as "
                     f"{quoted(cmap.ts_format)} (--ts-format says otherwise)")
    if first is not None and cmap.ts_format is not None and "%y" in cmap.ts_format and not format_given:
        stamp = pl.select(chrono_text(pl.lit(first)).str.to_datetime(cmap.ts_format, time_unit="ns",
                                                                      strict=False)).item()
        year = f"read as {stamp.year}" if stamp is not None else "read"
        notes.append(f"{path.name}: its dates write the year in two digits ({quoted(first, 24)}): {year}, as polars "
                     "reads %y: 00-69 as 2000-2069, 70-99 as 1970-1999")
    return cmap, notes


def _rows_read(path: Path, names: Sequence[str] | None, dialect: Dialect | None, cmap: ColumnMap,
               readings: list[str]) -> RowsRead:
    """Which of a two-way date's readings read each of the file's first SETTLE_ROWS times, as the read will see
    them (a decimal comma before the fraction read as a point, as `ts_expr` reads it)."""
    overrides = {c: pl.String for c in cmap.ts_columns} if is_csv(path) else None
    text = pl.col("t")
    reads = {f"r{i}": chrono_text(text).str.to_datetime(f, time_unit="ns", strict=False).is_not_null()
             for i, f in enumerate(readings)}
    frame = scan_file(path, names, dialect, overrides).select(time_column(cmap).cast(pl.String).str.strip_chars()
                                                              .alias("t")).drop_nulls().filter(text != "")
    frame = frame.head(SETTLE_ROWS).with_columns(**reads).with_columns(n=pl.sum_horizontal(*reads)).collect()
    only = {}
    for i, f in enumerate(readings):
        alone = frame.filter(pl.col(f"r{i}") & (pl.col("n") == 1))["t"]
        only[f] = (len(alone), alone[0] if len(alone) else None)
    read_all = [f for i, f in enumerate(readings) if frame[f"r{i}"].all()]
    missed = {f: next(iter(frame.filter(~pl.col(f"r{i}"))["t"]), None) for i, f in enumerate(readings)}
    unread = frame.filter(pl.col("n") == 0)["t"]
    return RowsRead(frame.height, read_all, only, len(unread), missed, next(iter(unread), None))


def _advice(read: RowsRead) -> str:
    """The refusal's advice from what the rows show: the one reading that rows read alone, else each reading."""
    alone = {f: found for f, found in read.only.items() if found[0]}
    options = " or ".join(f"--ts-format {quoted(f)}" for f in read.only)
    unread = f"; {read.unread:,} of them read no way" if read.unread else ""
    if len(alone) == 1:
        ((f, (count, example)),) = alone.items()
        return (f"--ts-format {quoted(f)}: of its first {read.rows:,} rows, {count:,} read only so "
                f"({quoted(example, 40)}{' and more' if count > 1 else ''}){unread}")
    if alone:
        shown = " and others only as ".join(f"{quoted(f)} ({quoted(example, 40)})" for f, (_, example) in alone.items())
        return (f"{options}: of its first {read.rows:,} rows, some read only as {shown}: dates written both ways, "
                f"which no one format reads{unread}")
    if read.unread and not read.read_all:  # some rows read every way, the others none: counted apart
        return (f"{options}: of its first {read.rows:,} rows, {read.rows - read.unread:,} read "
                f"{_ways(len(read.only))} and {read.unread:,} no way ({quoted(read.first_unread, 40)})")
    if not read.read_all or len(read.read_all) == len(read.only):
        return f"{options}: every date of its first {read.rows:,} rows reads {_ways(len(read.only))}"
    # a dashed two-digit year's three readings (`04-12-26`), one ruled out by a row (`13-12-26`: no month 13) and
    # two left (day-first, year-first): those two, and the rows that rule the others out
    fitting = " or ".join(f"--ts-format {quoted(f)}" for f in read.read_all)
    ruled_out = "; ".join(f"{quoted(example, 40)} does not read as {quoted(f)}" for f, example in read.missed.items()
                          if example is not None)
    return f"{fitting}: every date of its first {read.rows:,} rows reads {_ways(len(read.read_all))} ({ruled_out})"


def _ways(n: int) -> str:
    return "both ways" if n == 2 else f"all {n} ways"
