"""HistData's header-less layouts: its tick files (`DAT_ASCII_EURUSD_T_202401.csv`: `20240102 000000123,bid,ask,0`)
known by their name or, renamed by a user (`eurusd_jan2024.csv`), by their rows' shape (`histdata_shaped`: that time
with a bid, an ask and a volume all 0, which no other vendor writes), read as quotes in HistData's fixed EST
(HISTDATA_ZONE) either way; the zone and note of any file named as HistData's; and whether a zone changes its
clocks (`zone_has_dst`), which HistData's times never do.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from connectors.column_map import ColumnMap
from connectors.datetime_text import time_formats
from connectors.file_names import HISTDATA_ZONE, histdata_frame
from connectors.quote_widths import QUOTE_SPREAD_LIMIT

# HistData's tick files (`DAT_ASCII_USDTRY_T_202401.csv`: `20240102 000000123,bid,ask,0`): always bid, ask and a
# volume, whatever the spread of their first rows (an exotic's reopen: 2%); like all its files in HISTDATA_ZONE
HISTDATA_LAYOUT = "HistData's tick layout, as its file name says: a time, the bid, the ask and a volume"
# what a HistData file's frame (file_names.histdata_frame) holds, for the note; each read by its shape
HISTDATA_FRAMES = {"M1": "minute bars", "T": "ticks", "T_LAST": "last prices"}
# ... renamed by its user: known by its rows alone, so the note says how to read its times otherwise
HISTDATA_SHAPED = ("HistData's tick layout, by its rows' shape (a YYYYMMDD HHMMSSmmm time, a bid, an ask and a "
                   "volume 0 on every row: HistData's ASCII ticks, renamed), its times in HistData's fixed EST, as "
                   "the original file's are (--tz UTC, or their zone, if they are not HistData's): a time, the bid, "
                   "the ask and a volume")
HISTDATA_TIME = re.compile(r"\d{8} \d{9}")  # `20240105 150002837`: HistData's ASCII tick time, no other vendor's


def zone_has_dst(zone: str) -> bool:
    """Whether a zone changes its clocks (New York's does; UTC, EST and Etc/GMT+5 do not)."""
    tz = ZoneInfo(zone)
    return any(datetime(2024, month, 1, tzinfo=tz).dst() for month in (1, 7))


def histdata_shaped(rows: tuple[tuple[str, ...], ...]) -> bool:
    """Whether a header-less file's rows are HistData's ASCII ticks whatever its name: each a `YYYYMMDD HHMMSSmmm`
    time, two prices of a quote (the second at or above the first, under QUOTE_SPREAD_LIMIT) and a volume of 0."""
    quotes = 0
    for row in rows:
        if len(row) != 4 or not HISTDATA_TIME.fullmatch(row[0]) or row[3] != "0":
            return False
        try:
            bid, ask = float(row[1]), float(row[2])
        except ValueError:
            return False
        quotes += 0 < bid <= ask < QUOTE_SPREAD_LIMIT * bid
    return bool(rows) and 2 * quotes > len(rows)


def histdata_ticks(time: str, named: bool = True) -> tuple[ColumnMap, str]:
    """The map of a HistData tick file whose first time is `time`: quotes, in HistData's zone; with the layout's
    name for the note, which says how it was told (`named`: by its file name, else by its rows' shape)."""
    formats = time_formats(time)
    return ColumnMap(ts="time", ts_unit="datetime", ts_format=formats[0] if len(formats) == 1 else None,
                     tz=HISTDATA_ZONE, names=("time", "bid", "ask", "volume"), bid="bid", ask="ask"), \
        HISTDATA_LAYOUT if named else HISTDATA_SHAPED


def histdata_zone_named(path: Path) -> tuple[str | None, str]:
    """The zone of a header-less file's times and the start of its layout's note: HistData's zone and its frame,
    when its name is HistData's (`DAT_NT_EURUSD_T_LAST_202403.csv`), whatever layout its rows read in."""
    if (frame := histdata_frame(path)) is None:
        return None, ""
    return HISTDATA_ZONE, f"HistData's {HISTDATA_FRAMES.get(frame, 'file')}, as its file name says: "
