"""Why no row of a file's time column reads, and the option that reads it (`time_hint`, `epoch_format_hint`); the
zone names written after a file's first times (`zone_words`) and a refusal when one of them names no offset known
here (`unread_zone_names`). Split from connectors/event_time.py, which builds the expressions that read the times."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from connectors.column_map import ColumnMap
from connectors.datetime_text import built_formats, is_iso_time, time_formats
from connectors.datetime_column import EPOCH_CODE, naive_time, zone_reading
from connectors.epoch_counts import fraction_of_unit
from connectors.event_time import DAY_CLOCK_LIMIT_NS
from connectors.local_times import time_column
from connectors.map_vocabulary import CLOCK_DIGIT_UNITS, CLOCK_FRACTION_DIGITS, DAY_CLOCK_UNITS, UNITS
from connectors.ticks import TS_MAX
from connectors.time_units import epoch_unit
from connectors.utc_offsets import (
    CLOCK_NAMES,
    UTC_OFFSET,
    clock_name,
    tz_for_name,
    unknown_zone_name,
    zone_writing,
)
from engine.quoting import quoted


# a word written after a time of day (`10:00:00 AEST`, `9:30:00 PM EST`): a zone's name, or AM/PM
_WORD_AFTER_TIME = r"\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:\s*[AaPp][Mm]\s)?\s*([A-Za-z]{2,6})$"


def zone_words(rows: pl.LazyFrame, cmap: ColumnMap, sample: int) -> list[str]:
    """The distinct words written after the times of a file's first `sample` rows (`AEST`, `AEDT`; AM/PM aside),
    in capitals, in the order they first come: the zone names a refusal names, all of them."""
    words = time_column(cmap).cast(pl.String).str.strip_chars().str.extract(_WORD_AFTER_TIME, 1).str.to_uppercase()
    found = rows.head(sample).select(words.drop_nulls().unique(maintain_order=True).head(16)).collect()
    return [word for word in found.to_series().to_list() if word not in ("AM", "PM")]


def _names_hint(names: list[str], fits: list[str]) -> str:
    """How times written with several zones' names (`GMT` then `BST`) are all read: `%Z` (in the format `fits`
    proposes) with the --tz of a zone that writes them all, else each one's --tz."""
    if (zone := zone_writing(names)) is not None:
        reading = re.sub(r"\s*(%Z|[A-Za-z]+)$", " %Z", fits[0]) if fits else "... %Z"
        return (f"{zone} writes them all: give --ts-format {quoted(reading)} --tz {zone}, whose %Z then reads each "
                f"name at the offset {zone} writes it for")
    each = "; ".join(f"{name}: {tz_for_name(name)}" for name in names)
    return f"no one zone known here writes them all ({each}): a format's %Z with --tz reads that zone's names only"


def unread_zone_names(path: Path, cmap: ColumnMap, first: str, words: list[str]) -> str | None:
    """Why a file whose times are written with several zones' names is refused when one of them names no offset
    known here (`GMT`, then `BST`: the BST rows would not read), and how to read them all; None when each is read."""
    reading = zone_reading(cmap, first)
    unread = [word for word in words if unknown_zone_name(f"00:00 {word}", reading) and word not in CLOCK_NAMES]
    if not unread:
        return None
    fits = [f for f in time_formats(first) or built_formats(first) if f != cmap.ts_format]
    return (f"{path}: column {quoted(cmap.ts)} holds times written with {', '.join(words)} (its first rows; "
            f"{quoted(first, 40)}), and {', '.join(unread)} names no one UTC offset known here, so those rows' times "
            f"would not be read: {_names_hint(words, fits)}")


def time_hint(path: Path, cmap: ColumnMap, first: str, words: list[str] | None = None) -> str:
    """Why no row's time could be read, and the option that reads it; `words`: those after the file's first times
    (`zone_words`), every zone name a refusal names."""
    where = f"{path}: no row's time could be read: column {quoted(cmap.ts)} holds {quoted(first, 40)}"
    if cmap.ts_unit in CLOCK_DIGIT_UNITS:
        return (f"{where}, not a wall clock's HHMMSS digits ({6 + CLOCK_FRACTION_DIGITS[cmap.ts_unit]} of them, "
                f"hour < 24, minutes and seconds < 60) as ts_unit {cmap.ts_unit} reads: give the unit of its digits, "
                f"or ..._after_midnight for a count")
    if (fraction := fraction_of_unit(first, cmap.ts_unit)) is not None:
        return f"{where}, {fraction}: if the column counts a larger unit, give it with --ts-unit"
    try:
        number = float(first)
    except ValueError:
        number = None
    if number is not None and cmap.ts_unit in DAY_CLOCK_UNITS:
        others = [u for u, ns in DAY_CLOCK_UNITS.items()  # (counts: clock digits are no number * ns)
                  if u not in CLOCK_DIGIT_UNITS and 0 <= number * ns < DAY_CLOCK_LIMIT_NS]
        return (f"{where}, which is not a time of one day in {cmap.ts_unit}"
                + (f": give --ts-unit {others[0]}" if others else ""))
    if number is not None and cmap.ts_unit == "datetime":
        return f"{where}, a number: give its epoch unit, e.g. --ts-unit {epoch_unit(number)}"
    if number is not None and cmap.ts_unit in UNITS and abs(number) * UNITS[cmap.ts_unit] >= TS_MAX:
        other = epoch_unit(number)  # (none when it is the unit read: review411 #5 named it to the user giving it)
        return (f"{where}, which as {cmap.ts_unit} since the epoch is past the year 2262 (the last instant int64 "
                f"nanoseconds hold)" + (f": if it counts {other}, give --ts-unit {other}" if other != cmap.ts_unit
                                        else ""))
    if number is None and cmap.ts_unit in UNITS:
        return (f"{where}, not a number of {cmap.ts_unit} since the epoch: for date/time text give --ts-unit "
                f"datetime (and --ts-format if it is not ISO 8601)")
    if cmap.ts_unit == "datetime" and (hint := epoch_format_hint(first, cmap.ts_format)) is not None:
        return f"{where}: {hint}"
    fits = [f for f in time_formats(first) or built_formats(first) if f != cmap.ts_format]
    if cmap.ts_unit == "datetime" and (clock := clock_name(first)) is not None:
        name, zone = clock
        example = f", e.g. --ts-format {quoted(fits[0])}" if fits else ""
        return (f"{where}: {quoted(name)} names the clock of {zone}, not a UTC offset (it is {name[0]}ST or "
                f"{name[0]}DT by the date): give that zone, --tz {zone}, and a format that reads the name as "
                f"text{example}")
    if cmap.ts_unit == "datetime" and cmap.ts_format and is_iso_time(first.strip()):
        # ISO 8601 read without a format: the one given (--ts-format applies to every file of a run) is another
        # file's (review315 #11: a FactSet export's beside an ISO file)
        return (f"{where}, ISO 8601, which the format given, {quoted(cmap.ts_format)}, does not read: a --ts-format "
                f"applies to every file of the run; to give it to one file alone, name that file in a replay list "
                f"entry with its own map (`replay: [{{path: FILE, columns: {{ts_format: '{cmap.ts_format}'}}}}]`) "
                f"or in its own column map file, and read this one without it (docs/replay.md)")
    if cmap.ts_unit == "datetime":
        # a format built from the value quoted; none proposed where none is built (a common one, given as an example
        # of the codes, read no row of such a file)
        example = (", e.g. --ts-format " + " or ".join(quoted(f) for f in fits) if fits else
                   " (no format built here reads it; docs/replay.md lists the codes)")
        word = unknown_zone_name(first) if fits and UTC_OFFSET.search(first) is None else None
        names = list(dict.fromkeys([word.upper(), *(words or [])])) if word else []
        when = naive_time(first, fits[0]) if word else None
        zone = (f" and its zone with {tz_for_name(word, when)} ({quoted(word)} is read as text, not applied)"
                if word else "")
        if len(names) > 1:  # `AEST` then `AEDT`: no name written as text reads them all
            zone = f"; but its first rows' times are written with {', '.join(names)}: {_names_hint(names, fits)}"
        return (f"{where}, which is not ISO 8601{' nor ' + quoted(cmap.ts_format) if cmap.ts_format else ''}: "
                f"give its format with strftime codes{example}{zone}"
                + (" (both read it: which is the day?)" if len(fits) == 2 else
                   f" (all {len(fits)} read it: which is the day, which the year?)" if len(fits) > 2 else ""))
    return f"{where}, not a number of {cmap.ts_unit}"


def epoch_format_hint(text: str, ts_format: str | None) -> str | None:
    """The option that reads an epoch count written as text (`1723161255342`, `1723161255342ms`) that the map
    does not, or a `%s` format puts outside 1970..2200; None for other text."""
    count = re.fullmatch(r"\s*(\d{9,19})(s|ms|us|ns)?\s*", text)
    if count is None or (ts_format is not None and EPOCH_CODE not in ts_format):
        return None
    unit, suffix = epoch_unit(int(count[1])), count[2]
    if suffix and ts_format == f"%s{suffix}":  # read as it says, and still no present-day time
        magnitude = f" (at its magnitude it counts {unit})" if unit != suffix else ""
        return f"{count[1]} {suffix} since the epoch, which is not in 1970..2200{magnitude}"
    option = f"--ts-format {quoted('%s' + suffix)}" if suffix else f"--ts-unit {unit} (and no --ts-format)"
    if ts_format is None:
        return f"an epoch count with its unit written after it: give {option}"
    return (f"--ts-format {quoted(ts_format)} reads no time in 1970..2200 from it"
            f"{'' if suffix else f': at its magnitude it counts {unit}'}: give {option}")
