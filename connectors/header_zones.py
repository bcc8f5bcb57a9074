"""A time column whose header names the zone of its times, as FX exports write it: `Time (EET)`, `Time (UTC)`
(Dukascopy's and MetaTrader-style exports), `Time (JST)`, `Time (UTC+9)`, `Time[UTC+9]`. The column is the time
column its name before the zone says (`Time`), and its naive times are read in that zone, said in a note (a map
given in full that names the column reads it so too). A zone is UTC/GMT, a zone's clock (`ET`: New York's), an
IANA key (`EET`, `CET`, `Europe/Helsinki`), the name of a zone without summer time that no other zone writes
(`JST`, `HKT`, `KST`, `SGT`), or a whole-hour UTC offset (`UTC+9`, `GMT+09:00`).
A zone written that is none of these (`IST`, `CST`, which several zones write; `UTC+05:30`; `local`; a name of
one offset whose zone keeps summer time or changed its offset, `AEST`, `MEZ`, `BRT`: its clock or that offset all
year?) still makes the column the time column, whose zone then has to be given (--tz): `unknown_zone_refusal` says
how, naming the zone of a name times are written with too (utc_offsets.ZONE_NAMES, one table for both). Anything
else in the parentheses (`ms`) is no zone, and the header is only a name."""

from __future__ import annotations

import functools
import re
from typing import NamedTuple
from zoneinfo import available_timezones

from connectors.utc_offsets import (
    CLOCK_NAMES,
    ZONE_NAMES,
    clock_readings,
    etc_zone,
    named_zone_reading,
    offset_as_zone,
    tz_for_name,
    tz_for_offset,
)
from engine.quoting import quoted

# `Time (EET)`, `Time[UTC+9]`: a name, then the zone in parentheses or brackets (a '+' would split the column in a
# map's `Date+Time`)
_ZONE = r"[A-Za-z][A-Za-z0-9_/+: -]*?"
_ZONED_HEADER = re.compile(rf"^(?P<name>[^()\[\]+]*?\S)\s*(\((?P<zone>{_ZONE})\s*\)|\[(?P<bracketed>{_ZONE})\s*\])$")
UTC_NAMES = frozenset({"UTC", "GMT", "Z"})
# IANA's zones named for a region's time (not a place), whose summer time is the EU's
EU_RULE_ZONES = frozenset({"EET", "CET", "WET", "MET"})
# Zones' names that IANA holds no key for, each written by one zone only (ZONE_NAMES, the names times are written
# with too), which has kept that one offset all year since 2000: Japan's, Hong Kong's, South Korea's, Singapore's
# (not IST: India's, Ireland's and Israel's; not CST: China's, the US's; not BRT, AWST, MSK, whose zones kept summer
# time or moved since, nor AEST, MEZ, whose zones keep summer time: a header naming one is refused, naming its zone)
ONE_ZONE_NAMES = {name: zone for name, (offset, zone) in ZONE_NAMES.items()
                  if {at for _, at in clock_readings(zone)} == {offset}}
# A zone's winter and summer names together (ENTSO-E's `MTU (CET/CEST)`): the clock of a zone that keeps the EU's
# summer time at those offsets (Brussels, where ENTSO-E sits, for CET/CEST)
SUMMER_PAIRS = {"CET/CEST": "Europe/Brussels", "EET/EEST": "Europe/Helsinki", "WET/WEST": "Europe/Lisbon"}
# what else in the parentheses stands for a zone not known here: a name in capitals (`IST`), a local clock
_ZONE_LIKE = re.compile(r"^([A-Z]{2,5}|(?i:local( time)?))$")


class HeaderZone(NamedTuple):
    name: str  # the column's name before its zone: `Time`
    written: str  # the zone as the header writes it: `EET`
    zone: str | None  # the IANA zone its naive times are read in; None: UTC, or a zone not known
    known: bool = True  # False: `Time (IST)`, a zone written that is none known here (--tz gives it)


def header_zone(column: str) -> HeaderZone | None:
    """The zone a column's header names after its name (`Time (EET)`), else None."""
    found = _ZONED_HEADER.match(column.strip())
    if found is None:
        return None
    written = found["zone"] or found["bracketed"]
    offset = offset_as_zone(written)
    if written.upper() in UTC_NAMES:
        zone = None
    elif written.upper() in CLOCK_NAMES:  # `Time (ET)`: New York's clock, summer time included
        zone = CLOCK_NAMES[written.upper()]
    elif written.upper() in SUMMER_PAIRS:  # `MTU (CET/CEST)`: the EU's clock, winter and summer
        zone = SUMMER_PAIRS[written.upper()]
    elif written.upper() in ONE_ZONE_NAMES:
        zone = ONE_ZONE_NAMES[written.upper()]
    elif offset is not None and offset.endswith(":00") and int(offset[1:3]) <= 12:
        # IANA's Etc zones hold whole hours, their sign POSIX's (reversed): UTC+9 is Etc/GMT-9
        zone = None if offset[1:3] == "00" else etc_zone(offset)
    elif (zone := _iana_keys().get(written.lower())) is None:
        return HeaderZone(found["name"], written, None, False) if offset or _ZONE_LIKE.match(written) else None
    return HeaderZone(found["name"], written, zone)


# `Price (USD/t)`, `Last Price [EUR]`, `Time (EET)`: a name, then anything in parentheses or brackets (a unit, a zone)
_TAILED_HEADER = re.compile(r"^(?P<name>[^()\[\]+]*?\S)\s*(\([^()]*\)|\[[^\[\]]*\])$")


def name_before_tail(column: str) -> str | None:
    """A header's name before what it writes in parentheses or brackets after it (`Price` of `Price (USD/t)`, a
    unit; `Time` of `Time (EET)`, a zone), else None."""
    found = _TAILED_HEADER.match(column.strip())
    return found["name"] if found else None


def header_unit(column: str) -> str | None:
    """What a header writes in parentheses or brackets after its name (`USD/t` of `Price (USD/t)`), else None."""
    found = _TAILED_HEADER.match(column.strip())
    return found[2][1:-1].strip() if found else None


def zoned_time_column(columns: tuple[str, ...]) -> tuple[str, HeaderZone] | None:
    """The first of a time's columns (`Date+Time (EET)`: two) whose header names a zone, with that zone."""
    return next(((column, zoned) for column in columns if (zoned := header_zone(column)) is not None), None)


@functools.cache
def _iana_keys() -> dict[str, str]:
    """IANA's zone keys by their lower case (`eet` -> `EET`)."""
    return {key.lower(): key for key in available_timezones()}


def header_zone_note(file: str, column: str, zoned: HeaderZone, tz: str | None) -> str:
    """What a zone named in a time column's header was read as: that zone, or the tz given instead."""
    if not zoned.known:
        named = ZONE_NAMES.get(zoned.written.upper())
        which = f"{named[1]}'s {named[0]}" if named else "none known here"
        return f"{file}: column {quoted(column)} names zone {zoned.written}, {which}; its times read in {tz} as given"
    if tz != zoned.zone:
        return (f"{file}: column {quoted(column)} names zone {zoned.written}; its times read in {tz or 'UTC'} as "
                "given instead")
    said = f"{file}: column {quoted(column)} names its zone: its times read"
    if zoned.zone is None:
        return f"{said} as UTC"
    summer = (" as IANA has it, with the EU's summer time (from the last Sunday of March to the last Sunday of "
              "October)" if zoned.zone in EU_RULE_ZONES else "")
    fixed = f" (UTC{zoned.written[3:].strip()} all year)" if offset_as_zone(zoned.written) else ""
    return f"{said} in {zoned.zone}{fixed}{summer}; --tz ZONE says otherwise"


def unknown_zone_refusal(file: str, column: str, zoned: HeaderZone, columns: str) -> str:
    """Why a time column whose header names a zone not known here (`Time (IST)`) is not read without --tz: the
    column, its zone and the options that read it (`columns`: the detected map, as --columns takes it)."""
    if offset := offset_as_zone(zoned.written):  # a part of an hour, or past 12: no Etc zone holds it
        tz = tz_for_offset(offset)
    elif _ZONE_LIKE.match(zoned.written) and not zoned.written.isupper():  # `local`: the writer's clock
        tz = "--tz ZONE (the IANA name of the zone it was written in: Asia/Tokyo, Europe/London, ...)"
    else:
        tz = tz_for_name(zoned.written)
    one = tz.split(" (")[0] if " or " not in tz else "--tz ZONE"  # (several zones write IST: none picked)
    which = "none known here"
    if (named := named_zone_reading(zoned.written)) is not None:  # `Time (MEZ)`: its zone, not how it is meant
        which, tz = named
    return (f"{file}: column {quoted(column)} is its time column, and its header names zone {quoted(zoned.written)}, "
            f"which is {which}: give the zone its times are in, {tz}; a map given in full reads it too: "
            f"--columns '{columns}' {one}")


# a zone's clock (`ET`) or an IANA key (`America/New_York`) written after a time of day, a 12-hour clock's too
_ZONE_AFTER_TIME = re.compile(r"\d:\d\d(:\d\d([.,]\d+)?)?(\s*[AaPp][Mm])?\s+"
                              r"(?P<zone>[A-Za-z]{2}|[A-Za-z_]+/[A-Za-z_/+-]+)$")


def zone_after_time(text: str) -> tuple[str, str] | None:
    """(the name as written, its IANA zone) when a time ends with a name that `header_zone` reads as a zone with
    summer time and no one UTC offset: a zone's clock (`ET`: America/New_York, EST or EDT by the date) or an IANA
    key (`America/New_York`); None for any other text (`EST`, `+02:00`: offsets, read as such)."""
    found = _ZONE_AFTER_TIME.search(text.strip())
    if found is None:
        return None
    word = found["zone"]
    zone = _iana_keys().get(word.lower()) if "/" in word else CLOCK_NAMES.get(word.upper())
    return (word, zone) if zone else None

