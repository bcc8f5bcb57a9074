"""Times a file's plan reads that look misread, said as cautions (repeated at a run's end) by every command that
reads files: every tick at one time, or times before 1980 (a unit misread: dates read as epoch seconds put every
tick in 1970)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from connectors.column_map import DAY_CLOCK_UNITS, EXCEL_DAYS, UNITS, ColumnMap
from connectors.layout import Caution
from connectors.ticks import utc_text

EPOCH_1980_NS = 315_532_800 * 10**9


def time_facts() -> list[pl.Expr]:
    """What the plan's one pass over the file counts for `time_cautions`: its timed rows."""
    return [pl.col("_ts").is_not_null().sum().alias("timed_rows")]


def _reading(cmap: ColumnMap) -> str:
    """How the time column was read, for a caution: its column(s) and unit."""
    unit = (f"{cmap.ts_unit} since the epoch" if cmap.ts_unit in UNITS else
            f"{cmap.ts_unit} of each row's day in {cmap.ts_columns[0]!r}" if cmap.ts_unit in DAY_CLOCK_UNITS else
            "spreadsheet serial dates" if cmap.ts_unit == EXCEL_DAYS else cmap.ts_unit)
    return f"column {cmap.ts!r} read as {unit}"


def time_cautions(path: Path, cmap: ColumnMap, facts: dict[str, Any], first_ns: Any, last_ns: Any,
                  unit_said: bool) -> list[str]:
    """Cautions on a file's times (`first_ns`, `last_ns`: its earliest and latest, in ns): all one time over
    several rows, or times before 1980 (unless `unit_said`: a note already names the unit that reads them)."""
    if type(first_ns) is not int or type(last_ns) is not int:
        return []
    out = []
    if first_ns == last_ns and facts["timed_rows"] > 1:
        out.append(Caution(f"{path.name}: every one of its {facts['timed_rows']} timed rows has the same time, "
                           f"{utc_text(first_ns)} ({_reading(cmap)}): if its ticks did not all happen at once, the "
                           f"time is misread (another column, or --ts-unit; docs/replay.md)"))
    if first_ns < EPOCH_1980_NS and not unit_said:
        out.append(Caution(f"{path.name}: its times start at {utc_text(first_ns)}, before 1980 ({_reading(cmap)}): "
                           f"unless the data is that old, the time's column or unit is misread (dates or times of "
                           f"day read as epoch units?): --columns ts=... --ts-unit ... (docs/replay.md)"))
    return out
