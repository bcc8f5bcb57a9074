"""Naive times read as UTC that look like a US equity session's New York clock (review324 #12): a kdb+ export's
`time` of AAPL, MSFT, ... from 09:30 to 16:00 carries no zone, and read as UTC its open falls at 09:30Z (04:30 in
New York). Said as a warning naming `--tz America/New_York`, not switched: the same shape in UTC is possible, and
TAQ's own layout (by its names, connectors/venue_zones.py) is the one read in New York time on its own. Apart
from connectors/naive_time_zones.py, which says the note on naive times it adds to."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

import polars as pl

from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.file_scans import distinct_text, is_csv, scan_file
from connectors.local_times import time_column

SESSION_ROWS = 20_000  # a file's first rows whose clocks and symbols are looked at
OPEN_MINUTE, CLOSE_MINUTE = 9 * 60 + 30, 16 * 60  # the regular session, 09:30..16:00 New York
OPENING_WINDOW = 30  # the first time within this many minutes of the open: a session's start, not its middle
US_TICKER = re.compile(r"^[A-Z]{1,5}([./ ][A-Z])?$")  # AAPL, BRK.B, BF B: a US listing's symbol
# the clock of datetime text, after its date (`2019.02.04D09:30`, `2019-02-04T09:30`, `2019.02.04 0D09:30`) or alone
CLOCK = r"(?:^|[ TD])(\d{1,2}):(\d\d)"


def us_session_said(path: Path, cmap: ColumnMap, names: Sequence[str] | None, dialect: Dialect | None) -> str:
    """A clause for the note on naive times read as UTC when the file's first SESSION_ROWS times lie within a US
    equity session (09:30..16:00, the first near the open) and its streams are US tickers; '' otherwise."""
    if cmap.stream_col is None or len(cmap.stream_columns) != 1:
        return ""
    symbols = distinct_text(path, names, dialect, cmap.stream_col, 21, SESSION_ROWS)
    if not symbols or not all(US_TICKER.match(s) for s in symbols):
        return ""
    overrides = {c: pl.String for c in cmap.ts_columns} if is_csv(path) else None
    clock = time_column(cmap).cast(pl.String).str.extract_groups(CLOCK)
    minute = (clock.struct.field("1").cast(pl.Int64, strict=False) * 60 +
              clock.struct.field("2").cast(pl.Int64, strict=False)).alias("minute")
    minutes = scan_file(path, names, dialect, overrides).head(SESSION_ROWS).select(minute).drop_nulls() \
        .collect().to_series()
    if minutes.is_empty() or not (OPEN_MINUTE <= minutes[0] < OPEN_MINUTE + OPENING_WINDOW) or \
            not minutes.is_between(OPEN_MINUTE, CLOSE_MINUTE).all():
        return ""
    shown = ", ".join(symbols[:3]) + (", ..." if len(symbols) > 3 else "")
    return (f"; they start at a US equity session's open ({minutes[0] // 60:02d}:{minutes[0] % 60:02d}, within "
            f"09:30..16:00) on US tickers ({shown}); as UTC the open is at 04:30 or 05:30 in New York: if they are "
            f"New York time, as a kdb+ or TAQ export's are, give --tz America/New_York")
