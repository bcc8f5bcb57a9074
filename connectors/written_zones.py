"""Datetime text written with its zone after the time (`09:30:00.123 AM ET`, `04:00:00 PM America/New_York`): the
zone found in a file's first time, and the map that reads the file's times in it, as --tz would. Split from
connectors/event_time.py; the times themselves are read by connectors/datetime_column.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from connectors.column_map import ColumnMap
from connectors.datetime_column import NAIVE_TZ_ONLY
from connectors.datetime_text import built_formats
from connectors.header_zones import zone_after_time
from engine.quoting import quoted


def time_with_zone(text: str | None) -> tuple[tuple[str, str], list[str]] | None:
    """Datetime text written with its zone after the time (`01/15/2024 03:30:00 PM ET`, `... America/New_York`):
    (the name as written and its IANA zone, the formats built from the text that read it, the name as text); None
    for any other text. A header-less file's time column is found by it as a header's is read by it."""
    found = zone_after_time(text) if text is not None else None
    formats = built_formats(text) if found is not None else []
    return (found, formats) if formats else None


def zone_in_times(path: Path, cmap: ColumnMap, first: str | None, full_map: bool) -> tuple[ColumnMap, list[str]]:
    """A map whose datetime text is written with its zone after the time (`09:30:00.123 AM ET`, `04:00:00 PM
    America/New_York`, `zone_after_time`), read in that zone as --tz would read it (summer time included), the name
    read as text by the format built from the first time; with a note. A tz given for every file (--tz) is for
    naive times: not applied, said, as beside times that carry their offset; a map given in full that names another
    zone is refused (the same rule). The map as it is when the first time is written otherwise, or its date reads
    two ways (refused as before, naming the --tz)."""
    zoned = time_with_zone(first) if cmap.ts_unit == "datetime" else None
    if zoned is None:
        return cmap, []
    (word, zone), formats = zoned
    # a format that reads the name as text: given, or settled by the file's later rows (`03/06/2026 ... PM ET`
    # then `03/16/...`), which read the times as UTC, the name dropped, when only a format built here was zoned
    fmt = cmap.ts_format if cmap.ts_format and cmap.ts_format.rstrip().endswith(word) else \
        None if cmap.ts_format or len(formats) != 1 else formats[0]
    if fmt is None:
        return cmap, []
    named = f"their zone, {zone}" if word == zone else f"{word}, the clock of {zone}"
    notes = [f"{path.name}: its times are written with {named}: read in that zone, summer time included "
             f"(--ts-format {quoted(fmt)} --tz {zone})"]
    if cmap.tz is not None and cmap.tz != zone:
        if full_map:
            raise ValueError(f"{path}: ts column {quoted(cmap.ts)} carries its zone ({quoted(first, 48)}: {zone}); "
                             f"tz={quoted(cmap.tz)} is {NAIVE_TZ_ONLY}")
        notes.insert(0, f"{path.name}: its times carry their own zone, so --tz {cmap.tz} (for naive times) is not "
                        f"applied to it")
    return replace(cmap, ts_format=fmt, tz=zone), notes
