"""The zone of a venue's own files, whose layout names the venue by its columns and whose times are the venue's
wall clock, written without an offset. Read as UTC they were hours off: NYSE TAQ's (as WRDS serves them: daily
TAQ's trades `ctm`, quotes `cqm`, NBBO `nbbom`, the NBBO files with `BEST_*` columns; TAQ-like `SYMBOL,DATE,
TIME_M,...` exports; NYSE's own Daily TAQ files, `Time` of HHMMSSxxxxxxxxx) a 09:30 open at 05:30 New York time
(review 115, finding 15; review355 #4); B3's public trades file
(NEGOCIOSAVISTA: `DataNegocio+HoraFechamento`) 3 hours early; FINRA TRACE's (`TRD_EXCTN_DT+TRD_EXCTN_TM`, Eastern
time) and Cboe DataShop's (`underlying_symbol,quote_datetime,...`, Eastern time) 4 or 5. A detected layout of
one of them is read in its venue's zone, with a note, unless --tz (a map's `tz`) says otherwise, and so is a full
map that reads the venue's own time columns (the map TAQ's note prints). The one place for it: layouts known by
their file's name or fixed columns (HistData's, IQFeed's, LOBSTER's) carry their zone in their own definition."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping

from connectors.column_map import ColumnMap
from connectors.field_names import normal_name
from connectors.map_vocabulary import DAY_CLOCK_UNITS
from connectors.utc_offsets import UTC_OFFSET

TAQ_CLOCK = "time_m"  # TAQ's time of day (to the nanosecond since 2015), beside its DATE
# columns no other layout has: WRDS's symbol root and share class, daily TAQ's correction, condition and sequence
# fields, monthly TAQ's G127
TAQ_MARKS = frozenset({"sym_root", "sym_suffix", "tr_corr", "tr_scond", "tr_seqnum", "qu_cond", "qu_seqnum",
                       "natbbo_ind", "nbbo_qu_cond", "g127", "best_bidex", "best_askex"})


# NYSE's own Daily TAQ files (`EQY_US_ALL_TRADE_YYYYMMDD`, `_NBBO_`, `_QUOTE_`): one `Time` column of clock digits
# (HHMMSSxxxxxxxxx, the day in the name) beside columns no other layout writes
DAILY_TAQ_CLOCK = "time"
DAILY_TAQ_MARKS = frozenset({"trade_correction_indicator", "trade_stop_stock_indicator", "source_of_trade",
                             "trade_reporting_facility", "national_bbo_ind", "finra_bbo_indicator",
                             "quote_cancel_correction", "source_of_quote", "national_bbo_luld_indicator",
                             "best_bid_exchange", "best_offer_exchange", "luld_nbbo_indicator"})


def is_taq(cmap: ColumnMap, schema: Mapping[str, Any]) -> bool:
    """Whether a detected map reads a TAQ file's times: a date and a time-of-day column (`DATE+TIME_M`), the
    clock TAQ's TIME_M or the file holding a column only TAQ writes; or NYSE Daily TAQ's one `Time` of a day's
    clock beside a column only it writes."""
    columns = {normal_name(c) for c in schema}
    if len(cmap.ts_columns) == 1:
        return normal_name(cmap.ts) == DAILY_TAQ_CLOCK and cmap.ts_unit in DAY_CLOCK_UNITS and \
            bool(columns & DAILY_TAQ_MARKS)
    if len(cmap.ts_columns) != 2:
        return False
    return normal_name(cmap.ts_columns[1]) == TAQ_CLOCK or bool(columns & TAQ_MARKS)


def is_datashop(cmap: ColumnMap, schema: Mapping[str, Any]) -> bool:
    """Whether a map reads a Cboe DataShop file's times: its `quote_datetime` beside its `underlying_symbol`, the
    columns its option and equity trade, quote and interval files all open with."""
    return tuple(map(normal_name, cmap.ts_columns)) == (DATASHOP_CLOCK,) and \
        DATASHOP_MARK in {normal_name(c) for c in schema}


DATASHOP_CLOCK, DATASHOP_MARK = "quote_datetime", "underlying_symbol"


def _times_in(date: str, clock: str) -> Callable[[ColumnMap, Mapping[str, Any]], bool]:
    """Whether a detected map reads its time from the venue's own date and clock columns (names no other file
    writes: B3's `DataNegocio+HoraFechamento`, FINRA TRACE's `TRD_EXCTN_DT+TRD_EXCTN_TM`)."""
    return lambda cmap, schema: tuple(map(normal_name, cmap.ts_columns)) == (date, clock)


@dataclass(frozen=True)
class VenueZone:
    """A venue whose files' layout names it, the zone its naive times are in, and how the note says it."""
    venue: str  # as the note names it: "TAQ", "B3", "FINRA TRACE"
    zone: str
    clock: str  # the wall clock, for the note: "New York wall-clock times (America/New_York, summer time included)"
    reads: Callable[[ColumnMap, Mapping[str, Any]], bool]


NEW_YORK = "New York wall-clock times (America/New_York, summer time included)"
VENUE_ZONES = (
    VenueZone("TAQ", "America/New_York", NEW_YORK, is_taq),
    VenueZone("B3", "America/Sao_Paulo", "Sao Paulo wall-clock times (America/Sao_Paulo)",
              _times_in("datanegocio", "horafechamento")),
    VenueZone("FINRA TRACE", "America/New_York", NEW_YORK, _times_in("trd_exctn_dt", "trd_exctn_tm")),
    # its specifications give every time in US Eastern (datashop.cboe.com): a 09:30 open read as UTC was 04:30 or
    # 05:30 in New York
    VenueZone("Cboe DataShop", "America/New_York", NEW_YORK, is_datashop),
)


def venue_of(cmap: ColumnMap, schema: Mapping[str, Any]) -> VenueZone | None:
    """The venue whose layout a detected map reads, else None."""
    return next((venue for venue in VENUE_ZONES if venue.reads(cmap, schema)), None)


def venue_zone(cmap: ColumnMap, schema: Mapping[str, Any], first_time: Callable[[], Any]) -> ColumnMap:
    """A detected map of a venue's layout in the venue's zone (before the keys given apply: --tz replaces it).
    `first_time`: the file's first time as written; one that carries its UTC offset keeps it (the zone is for
    naive times: given to such a file, the file was refused as if the user had given a --tz to drop)."""
    venue = venue_of(cmap, schema) if cmap.tz is None else None
    if venue is None or UTC_OFFSET.search(str(first_time() or "")):
        return cmap
    return replace(cmap, tz=venue.zone)


def venue_zone_note(path: Path, detected: ColumnMap, cmap: ColumnMap, schema: Mapping[str, Any]) -> list[str]:
    """Said when a file's times are read in its venue's zone because its layout is the venue's."""
    venue = venue_of(detected, schema)
    if venue is None or detected.tz != venue.zone or cmap.tz != venue.zone:
        return []
    return [f"{path.name}: its times ({'+'.join(cmap.ts_columns)}) read as {venue.clock}, the zone {venue.venue} "
            f"writes them in (--tz ZONE says otherwise)"]


def mapped_venue_zone(path: Path, cmap: ColumnMap, schema: Mapping[str, Any],
                      first_time: Callable[[], Any]) -> tuple[ColumnMap, list[str]]:
    """A full map (no preset) naming a venue's own time columns (`ts=DATE+TIME_M` of a TAQ file) and no `tz`, in
    the venue's zone with the note a detected layout gets: read as UTC, the pasted map (the one TAQ's note prints)
    put every time 4-5 h early."""
    if cmap.preset is not None:  # a preset's map carries its own zone (or none) by its definition
        return cmap, []
    zoned = venue_zone(cmap, schema, first_time)
    return zoned, venue_zone_note(path, zoned, zoned, schema) if zoned is not cmap else []
