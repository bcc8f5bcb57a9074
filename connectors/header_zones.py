"""A time column whose header names the zone of its times, as FX exports write it: `Time (EET)`, `Time (UTC)`
(Dukascopy's and MetaTrader-style exports). The column is the time column its name before the zone says (`Time`),
and its naive times are read in that zone, said in a note. A zone is UTC/GMT, a zone's clock (`ET`: New York's) or
an IANA key (`EET`, `CET`, `Europe/Helsinki`); anything else in the parentheses (`ms`, `CST`, which several zones
write) is no zone, and the header is only a name."""

from __future__ import annotations

import functools
import re
from typing import NamedTuple
from zoneinfo import available_timezones

from connectors.utc_offsets import CLOCK_NAMES

# `Time (EET)`: a name, then the zone in parentheses (a '+' would split the column in a map's `Date+Time`)
_ZONED_HEADER = re.compile(r"^(?P<name>[^()+]*?\S)\s*\((?P<zone>[A-Za-z][A-Za-z0-9_/-]*)\)$")
UTC_NAMES = frozenset({"UTC", "GMT", "Z"})
# IANA's zones named for a region's time (not a place), whose summer time is the EU's
EU_RULE_ZONES = frozenset({"EET", "CET", "WET", "MET"})


class HeaderZone(NamedTuple):
    name: str  # the column's name before its zone: `Time`
    written: str  # the zone as the header writes it: `EET`
    zone: str | None  # the IANA zone its naive times are read in; None: UTC


def header_zone(column: str) -> HeaderZone | None:
    """The zone a column's header names after its name (`Time (EET)`), else None."""
    found = _ZONED_HEADER.match(column.strip())
    if found is None:
        return None
    written = found["zone"]
    if written.upper() in UTC_NAMES:
        zone = None
    elif written.upper() in CLOCK_NAMES:  # `Time (ET)`: New York's clock, summer time included
        zone = CLOCK_NAMES[written.upper()]
    elif (zone := _iana_keys().get(written.lower())) is None:
        return None
    return HeaderZone(found["name"], written, zone)


def zoned_time_column(columns: tuple[str, ...]) -> tuple[str, HeaderZone] | None:
    """The first of a time's columns (`Date+Time (EET)`: two) whose header names a zone, with that zone."""
    return next(((column, zoned) for column in columns if (zoned := header_zone(column)) is not None), None)


@functools.cache
def _iana_keys() -> dict[str, str]:
    """IANA's zone keys by their lower case (`eet` -> `EET`)."""
    return {key.lower(): key for key in available_timezones()}


def header_zone_note(file: str, column: str, zoned: HeaderZone, tz: str | None) -> str:
    """What a zone named in a time column's header was read as: that zone, or the tz given instead."""
    if tz != zoned.zone:
        return f"{file}: column {column!r} names zone {zoned.written}; its times read in {tz or 'UTC'} as given instead"
    said = f"{file}: column {column!r} names its zone: its times read"
    if zoned.zone is None:
        return f"{said} as UTC"
    summer = (" as IANA has it, with the EU's summer time (from the last Sunday of March to the last Sunday of "
              "October)" if zoned.zone in EU_RULE_ZONES else "")
    return f"{said} in {zoned.zone}{summer}; --tz ZONE says otherwise"
