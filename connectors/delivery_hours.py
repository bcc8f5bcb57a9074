"""A power contract's delivery start written as local clock time (EPEX's `DeliveryStart` as many exports write it,
Nord Pool's `Delivery Start (CET)`), naming the stream: when summer time ends the clock repeats an hour, and the
hour delivered in its first pass (3A) and the one delivered in its second (3B) are two contracts, ~30 EUR/MWh apart,
that the text writes alike (`2024-10-27 02:00`). Read by that text both go to one stream, its prices alternating
between them, and every label across a switch scores the jump between two contracts (review441 #3, #7). The text
cannot tell them apart (their trades interleave in time, the end is written alike too), so the file gets a caution
naming the hour and the way out: a delivery column in UTC or with its offset, or --streams leaving its streams out (a
run that does so no longer says it: verify55 R6). A zone comes from the column's
header (`(CET)`), else --tz; a column that names none is checked against the zones power and futures markets keep
their clocks in."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import polars as pl

from connectors.cautions import StreamCaution
from connectors.column_map import ColumnMap
from connectors.column_names import DELIVERY_START_NAMES
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.file_scans import is_csv, scan_file
from connectors.header_zones import UTC_NAMES, header_zone, name_before_tail
from connectors.row_exprs import stream_names
from engine.quoting import quoted

# The zones a delivery time written with none is checked in: Europe's (CET, UK) and the US's eastern and central
# clocks, where the power and futures markets that write local delivery times keep theirs
DELIVERY_ZONES = ("Europe/Berlin", "Europe/London", "America/New_York", "America/Chicago")
HOURS_SAID = 3  # repeated delivery times a caution names, the rest counted


def repeated_delivery_hours(path: Path, cmap: ColumnMap, names: Sequence[str] | None,
                            dialect: Dialect | None) -> list[str]:
    """A caution for each delivery-start column of the stream (``cmap``'s) whose local clock times fall in an hour
    the clock repeats when summer time ends (in the zone its header names, else --tz, else DELIVERY_ZONES): the
    contracts of both passes of that hour share those streams. None for times in UTC or with an offset."""
    cautions = []
    for column in cmap.stream_columns:
        if normal_name(name_before_tail(column) or column) not in DELIVERY_START_NAMES:
            continue
        written = header_zone(column)
        if written is not None and (written.written.upper() in UTC_NAMES or not written.known):
            continue  # in UTC, no hour repeats; a zone not known is refused where the file's times are read
        zones = (written.zone,) if written is not None else (cmap.tz,) if cmap.tz else DELIVERY_ZONES
        found = _repeated(path, names, dialect, column, [zone for zone in zones if zone])
        if found is not None:
            zone, times = found
            merged = _streams_of(path, names, dialect, cmap, column, times)
            shown = ", ".join(times[:HOURS_SAID]) + (f" and {len(times) - HOURS_SAID} more"
                                                     if len(times) > HOURS_SAID else "")
            whose = "" if written is not None or cmap.tz else " (if that is their clock: the column names no zone)"
            cautions.append(StreamCaution(
                f"{path.name}: column {quoted(column)} names the streams by local clock times without a UTC offset, "
                f"and {shown} {'falls' if len(times) == 1 else 'fall'} in the hour the clock repeats when summer "
                f"time ends in {zone}{whose}: the contracts delivered in its first and its second pass (EPEX's hours "
                f"3A and 3B) "
                f"are written alike, so their trades go to one stream, its prices alternating between two "
                f"contracts', and each label across a switch scores that jump. Read the delivery from a column in "
                f"UTC or with its offset (`2024-10-27T02:00+01:00`), or leave that hour's streams out (--streams)",
                merged))
    return cautions


def _streams_of(path: Path, names: Sequence[str] | None, dialect: Dialect | None, cmap: ColumnMap, column: str,
                times: list[str]) -> frozenset[str]:
    """The streams whose ``column`` writes one of ``times`` (the hours repeated): those the caution is about."""
    rows, text = _delivery_column(path, names, dialect, column)
    return frozenset(rows.filter(text.is_in(times)).select(stream_names(cmap).unique()).drop_nulls().collect()
                     .to_series().to_list())


def _delivery_column(path: Path, names: Sequence[str] | None, dialect: Dialect | None,
                     column: str) -> tuple[pl.LazyFrame, pl.Expr]:
    """The file's rows, and ``column``'s cells as the file writes them (text, without spaces at its ends)."""
    overrides = {column: pl.String} if is_csv(path) else None
    return scan_file(path, names, dialect, overrides), pl.col(column).cast(pl.String).str.strip_chars()


def _repeated(path: Path, names: Sequence[str] | None, dialect: Dialect | None, column: str,
              zones: list[str]) -> tuple[str, list[str]] | None:
    """The first of ``zones`` in which some of ``column``'s times (those read as naive date-times) fall in an hour
    the clock repeats, with those times as the file writes them; None when no zone has one."""
    rows, text = _delivery_column(path, names, dialect, column)
    values = rows.select(text.unique()).drop_nulls().collect()
    try:
        wall = values.select(pl.col(column).str.to_datetime(strict=False).alias("_wall"), pl.col(column))
    except pl.exceptions.PolarsError:  # no date-times (a delivery month, a product code): no hour to repeat
        return None
    if wall["_wall"].dtype.time_zone is not None:  # written with an offset or a Z: each an instant
        return None
    for zone in zones:
        def local(ambiguous: str) -> pl.Expr:
            return pl.col("_wall").dt.replace_time_zone(zone, ambiguous=ambiguous, non_existent="null")
        # null when repeated (or skipped, in spring: no such contract), an instant at its first pass when repeated
        repeated = wall.filter(local("null").is_null() & local("earliest").is_not_null()).sort("_wall")
        if repeated.height:
            return zone, repeated[column].to_list()
    return None
