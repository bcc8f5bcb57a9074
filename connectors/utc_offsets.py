"""UTC offsets as datetime text writes them after a time: a number (`-04:00`, `+0100`, `Z`), a number after a name
(Dukascopy's `GMT+0100`), or a name that stands for one fixed offset (BigQuery's ` UTC`, a US export's ` EST`,
` EDT`, an ASX export's ` AEST`, ` AEDT`: ZONE_NAMES). Each makes the time an instant, read at its offset; a zone's
clock (` ET`: EST or EDT by the date) is no offset, and says which --tz reads it. A name other zones write too (CST:
US Central's, China's and Cuba's) is read as the US zone's, said in a note, unless --tz names a zone that writes it:
then at that zone's offset for it; CST (PST) on a date a US clock writes CDT (PDT) is refused, naming both
readings' --tz. IST, which names three zones' times and none first, is read with --tz only. Other names (BST) are
no offset: a refusal names the --tz of a zone that writes them (`tz_for_name`), and a format's `%Z` with --tz reads
each name that zone writes at the offset it writes it for (`names_in_zone`)."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from engine.quoting import quoted

if TYPE_CHECKING:  # polars is imported where an expression is built (a file replay): the
    import polars as pl  # service's config imports this module, and each shard's and CLI start paid it

# Zones' names outside the US that stand for one UTC offset each wherever they are written, with the zone whose
# clock writes them (its standard and its summer name by the date: AEST, then AEDT from October): a time written
# with one is read at its offset; a time column's header naming one names that zone (connectors/header_zones.py)
ZONE_NAMES: dict[str, tuple[str, str]] = {
    "AEST": ("+10:00", "Australia/Sydney"), "AEDT": ("+11:00", "Australia/Sydney"),
    "ACST": ("+09:30", "Australia/Adelaide"), "ACDT": ("+10:30", "Australia/Adelaide"),
    "AWST": ("+08:00", "Australia/Perth"), "NZST": ("+12:00", "Pacific/Auckland"),
    "NZDT": ("+13:00", "Pacific/Auckland"), "JST": ("+09:00", "Asia/Tokyo"), "KST": ("+09:00", "Asia/Seoul"),
    "HKT": ("+08:00", "Asia/Hong_Kong"), "SGT": ("+08:00", "Asia/Singapore"),
    "CET": ("+01:00", "Europe/Paris"), "CEST": ("+02:00", "Europe/Paris"),
    "MEZ": ("+01:00", "Europe/Berlin"), "MESZ": ("+02:00", "Europe/Berlin"),  # German exports' CET, CEST
    "EET": ("+02:00", "Europe/Athens"), "EEST": ("+03:00", "Europe/Athens"),
    "WET": ("+00:00", "Europe/Lisbon"), "WEST": ("+01:00", "Europe/Lisbon"),
    "BRT": ("-03:00", "America/Sao_Paulo"), "MSK": ("+03:00", "Europe/Moscow"),
}
# Names of one fixed UTC offset each: a US zone's standard (EST) and daylight (EDT) time are two offsets
NAMED_OFFSETS = {"UTC": "+00:00", "GMT": "+00:00", "EST": "-05:00", "EDT": "-04:00", "CST": "-06:00",
                 "CDT": "-05:00", "MST": "-07:00", "MDT": "-06:00", "PST": "-08:00", "PDT": "-07:00",
                 **{name: offset for name, (offset, _) in ZONE_NAMES.items()}}
# A name that zones write for other offsets with none of them first (IANA's: India Standard Time +05:30, Israel's
# +02:00, Irish Standard Time, Dublin's summer, +01:00): a time written with it is read only with the --tz of one
NAMES_NEEDING_TZ = ("IST",)
# NAMED_OFFSETS' names that other zones write for other offsets (IANA's abbreviations): the zones, by what a user
# would call them; a file's times are read at the US zone's offset unless --tz names one of these
SHARED_NAMES = {"CST": ("US Central Standard Time", ("China Standard Time", "Asia/Shanghai"),
                        ("Cuba's standard time", "America/Havana")),
                "CDT": ("US Central Daylight Time", ("Cuba's summer time", "America/Havana")),
                "PST": ("US Pacific Standard Time", ("Philippine Standard Time", "Asia/Manila"))}
# SHARED_NAMES' standard times whose US zone writes its summer name from March to November (CDT, PDT): a time
# written with one on such a date is another zone's (China's CST, the Philippines' PST), unless --tz says otherwise
US_SUMMER_ZONES = {"CST": "America/Chicago", "PST": "America/Los_Angeles"}
# EST on such a date is read as it is, -05:00 (feeds write it all year, HistData's, as clocks that keep it do,
# Panama's and Jamaica's), with a note naming New York's clock
SUMMER_CHECKED = US_SUMMER_ZONES | {"EST": "America/New_York"}
# Names of a zone's clock, whose offset changes with summer time: a time written with one needs its zone given
CLOCK_NAMES = {"ET": "America/New_York", "CT": "America/Chicago", "MT": "America/Denver", "PT": "America/Los_Angeles"}
# (longest first: `CEST` before `EST`, where only a look-behind would keep them apart)
_NAMES = "|".join(sorted([*NAMED_OFFSETS, *NAMES_NEEDING_TZ], key=len, reverse=True))
# The offset written after a time: Z, a number (maybe after UTC or GMT), or a name of one offset
ZONE_TAIL = rf"(Z|((UTC|GMT)\s*)?[+-]\d\d(:?\d\d)?|{_NAMES})"
# A time with its UTC offset ("...09:30:00.123-04:00", "...13:30:00Z", "...13:30:00.123 UTC", "... 09:30 EDT"),
# after a 12-hour clock's AM/PM too ("... 9:30:00 PM EST"); the pattern is also polars' (a row's own offset decides
# how the row is read)
OFFSET_PATTERN = rf"(?i)\d\d:\d\d(:\d\d([.,]\d+)?)?(\s*[AP]M)?\s*{ZONE_TAIL}$"
UTC_OFFSET = re.compile(OFFSET_PATTERN)
# (a name is a whole word: `EST` is not the end of `CEST` nor `AEST`; only Python's re has the look-behind)
_TAIL = re.compile(rf"(?i)(?<![A-Za-z])\s*{ZONE_TAIL}$")
_NAME_TAIL = rf"(?i)\s*({_NAMES})$"
_NAME_WORD = re.compile(rf"(?i)(?<![A-Za-z])\s*({_NAMES})$")
_NAME_WORD_POLARS = rf"(?i)(?:^|[^A-Za-z])\s*({_NAMES})$"  # the word as polars' regex (no look-behind) finds it
_NUMBER_AFTER_NAME = r"(?i)\s*(?:UTC|GMT)\s*([+-]\d\d(:?\d\d)?)$"
_CLOCK_TAIL = re.compile(rf"\s+({'|'.join(CLOCK_NAMES)})$")


def zone_tail(text: str, after_clock: bool = True) -> re.Match | None:
    """Where a time's UTC offset is written at the end of `text` (its spaces before it included), else None;
    `after_clock`: only right after a time of day (`09:30 EST`, not `9:30 PM EST`, nor the `-2024` of a date)."""
    return _TAIL.search(text) if UTC_OFFSET.search(text) or not after_clock else None


def tail_format(tail: str) -> str:
    """The strftime codes that read an offset as `zone_tail` found it: a number as `%z` (after the name written
    before it, `GMT%z`), a name as `%Z` (read at its offset: `numeric_offsets`), Z as itself."""
    if tail.strip().upper() == "Z":
        return tail
    number = re.search(r"[+-]\d\d(:?\d\d)?$", tail)
    if number is None:
        return re.sub(r"\S+$", "%Z", tail)
    return tail[: number.start()] + ("%z" if number[1] else "%#z")


def numeric_offsets(text: pl.Expr, zone_reading: Mapping[str, str] | None = None) -> pl.Expr:
    """Times whose offset is a name (` UTC`, ` EST`) or follows one (`GMT+0100`) with the offset as a number
    (`-05:00`, `+0100`), as polars reads it; other text as it is. `zone_reading`: names read at other offsets than
    NAMED_OFFSETS' (`names_read_in`: CST as +08:00 with --tz Asia/Shanghai), or that it has none for (a format's
    `%Z` with --tz Europe/London: BST as +01:00, `names_in_zone`)."""
    import polars as pl

    offsets = NAMED_OFFSETS | dict(zone_reading or {})
    name = zone_name_of(text, offsets)
    names = "|".join(sorted(offsets, key=len, reverse=True))
    named = text.str.replace(rf"(?i)\s*({names})$", "") + \
        name.replace_strict(offsets, default=None, return_dtype=pl.String)
    return pl.when(name.is_null()).then(text.str.replace(_NUMBER_AFTER_NAME, "${1}")).otherwise(named)


def format_reading_names(fmt: str) -> str:
    """A format whose `%Z` reads a zone's name (polars would read it and drop the zone) as one that reads the
    offset `numeric_offsets` writes in its place: `%Y-%m-%d %H:%M:%S %Z` -> `%Y-%m-%d %H:%M:%S%z`."""
    return re.sub(r"\s*%Z", "%z", fmt)


MERIDIEM_MARKERS = ("AM", "PM")


def unknown_zone_name(text: str, read: Iterable[str] = ()) -> str | None:
    """The word at the end of a time that a format's `%Z` would read and no NAMED_OFFSETS names (BST, IST, ET), nor
    `read` (the names --tz's zone writes), else None."""
    word = re.search(r"\s([A-Za-z]{1,6})$", text.strip())
    # a 12-hour clock's `AM`/`PM` is `%p`, not a zone: the hint must not ask for the zone that writes 'AM'
    known = {*NAMED_OFFSETS, *MERIDIEM_MARKERS, *(name.upper() for name in read)}
    return word[1] if word is not None and word[1].upper() not in known else None


def clock_name(text: str) -> tuple[str, str] | None:
    """(name, zone) when a time ends with the name of a zone's clock (` ET`, ` CT`), which is no UTC offset."""
    found = _CLOCK_TAIL.search(text.strip())
    return (found[1], CLOCK_NAMES[found[1]]) if found else None


def zone_name_of(text: pl.Expr, names: Iterable[str] = ()) -> pl.Expr:
    """The NAMED_OFFSETS name (or one of `names`) that ends each time (`EST`, in capitals), else null."""
    if names:
        words = "|".join(sorted({*names, *NAMED_OFFSETS, *NAMES_NEEDING_TZ}, key=len, reverse=True))
        return text.str.extract(rf"(?i)(?:^|[^A-Za-z])\s*({words})$", 1).str.to_uppercase()
    return text.str.extract(_NAME_WORD_POLARS, 1).str.to_uppercase()


def offset_text(local: datetime) -> str:
    """The UTC offset of an aware datetime as ISO writes it, `+09:00`, `-04:00`."""
    minutes = int(local.utcoffset().total_seconds()) // 60
    return f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


@functools.lru_cache(maxsize=64)
def clock_readings(zone: str) -> tuple[tuple[str, str], ...]:
    """What a zone's clock writes on a winter and a summer day of each year from 2000 to 2040, in order: (the name
    IANA writes, `BST` or `+03`, the UTC offset, `+01:00`); empty for a zone not known."""
    try:
        tz = ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return ()
    found = []
    for year in range(2000, 2041):
        for month in (1, 7):
            local = datetime(year, month, 15, 12, tzinfo=timezone.utc).astimezone(tz)
            found.append((local.tzname() or "", offset_text(local)))
    return tuple(found)


def names_in_zone(zone: str) -> dict[str, str]:
    """The names a zone's clock writes for its times (IANA's: not its numbers, `+03`), each with the UTC offset it
    stands for there, the latest (Europe/London: GMT +00:00, BST +01:00); empty for a zone not known."""
    return {name.upper(): offset for name, offset in clock_readings(zone) if name.isalpha()}


def names_written_in(zone: str) -> dict[str, str]:
    """The SHARED_NAMES (and NAMES_NEEDING_TZ) a zone writes for its times, each with the UTC offset it stands for
    there (Asia/Shanghai: CST +08:00; America/Chicago: CST -06:00, CDT -05:00; Asia/Kolkata: IST +05:30); empty for
    a zone that writes none of them."""
    return {name: offset for name, offset in names_in_zone(zone).items()
            if name in SHARED_NAMES or name in NAMES_NEEDING_TZ}


def name_needing_tz(text: str) -> str | None:
    """The NAMES_NEEDING_TZ name that ends a time (`... 09:15:00 IST`), else None."""
    found = _NAME_WORD.search(text.strip())
    return found[1].upper() if found is not None and found[1].upper() in NAMES_NEEDING_TZ else None


def names_read_in(zone: str | None, first: str | None) -> dict[str, str]:
    """The offsets `zone` (a map's tz, --tz) writes SHARED_NAMES for, when the file's time `first` ends with one of
    them: read at those offsets, not NAMED_OFFSETS' (--tz Asia/Shanghai reads `09:30 CST` as 09:30+08:00); else
    empty, and the tz, which is for naive times, has nothing to do with these times."""
    name = _NAME_WORD.search(first.strip()) if first is not None and zone is not None else None
    written = names_written_in(zone) if name is not None else {}
    return written if name is not None and name[1].upper() in written else {}


def shared_name_notes(file: str, names: Iterable[str], zone_reading: Mapping[str, str], tz: str | None) -> list[str]:
    """What the SHARED_NAMES a file's times are written with were read as, once per file: at the offset of the
    zone --tz names (`zone_reading`), else as the US zone's, naming the others that write it and their --tz."""
    notes = []
    for name in sorted(set(names) & set(SHARED_NAMES)):
        if name in zone_reading:
            notes.append(f"{file}: its times' {name} read as {tz} (the tz given) writes it, {zone_reading[name]}")
            continue
        us, *others = SHARED_NAMES[name]
        also = " and ".join(f"{what} ({names_written_in(zone)[name]})" for what, zone in others)
        zones = [zone for _, zone in others]
        choice = zones[0] + "".join(f" (or {zone})" for zone in zones[1:])
        are, those = ("are", "one of those") if len(others) > 1 else ("is", "that")
        notes.append(f"{file}: its times are written with {name}, read as {us} ({NAMED_OFFSETS[name]}); {also} "
                     f"{are} written {name} too: if they are {those}, give --tz {choice}")
    return notes


# Zones a refusal names first for a zone's name, where several zones write it (CEST: Paris, Berlin, ...)
MARKET_ZONES = ("Europe/London", "Europe/Paris", "Europe/Berlin", "Europe/Zurich", "Europe/Athens", "Europe/Moscow",
                "Asia/Kolkata", "Asia/Tokyo", "Asia/Hong_Kong", "Asia/Shanghai", "Asia/Seoul", "Asia/Jakarta",
                "Australia/Sydney", "Australia/Brisbane", "Australia/Adelaide", "Pacific/Auckland", "Europe/Dublin",
                "Asia/Jerusalem", "Africa/Johannesburg", "America/Sao_Paulo", "America/Chicago", "America/New_York",
                "America/Los_Angeles", "America/Denver", "America/Anchorage", "Pacific/Honolulu")
_REGIONS = ("Africa/", "America/", "Asia/", "Atlantic/", "Australia/", "Europe/", "Indian/", "Pacific/")


@functools.lru_cache(maxsize=1)
def _zones_by_name() -> dict[str, dict[str, list[str]]]:
    """Each name IANA's zones write for their times (in a winter and a summer month of 2024) -> the UTC offset it
    stands for -> the region/city zones that write it so."""
    found: dict[str, dict[str, list[str]]] = {}
    for zone in sorted(available_timezones()):
        if not zone.startswith(_REGIONS):
            continue
        for month in (1, 7):
            local = datetime(2024, month, 15, 12, tzinfo=timezone.utc).astimezone(ZoneInfo(zone))
            zones = found.setdefault(local.tzname(), {}).setdefault(offset_text(local), [])
            if zone not in zones:
                zones.append(zone)
    return found


def zones_named(name: str) -> bool:
    """Whether IANA's zones write `name` for their times (`IST`, `CST`, `BST`), in a winter or a summer month."""
    return name.upper() in _zones_by_name()


def tz_for_name(name: str, when: datetime | None = None) -> str:
    """The --tz that reads times written with a zone's name (`CEST`: `--tz Europe/Paris`), one zone for each UTC
    offset zones write it for (`IST`: India's, Ireland's, Israel's); `--tz ZONE` with what to look for when no zone
    writes it. `when` (the file's first time, naive): a zone whose clock writes another name then (Paris in July
    writes CEST, not CET) would read the time at the other offset: the name's fixed offset instead (`Etc/GMT-1`)."""
    by_offset = _zones_by_name().get(name.upper(), {})
    if not by_offset and name.upper() in ZONE_NAMES:  # a name IANA has no zone write (German MEZ, Brazil's BRT)
        offset, zone = ZONE_NAMES[name.upper()]
        by_offset = {offset: [zone]}
    picks = [_on_that_date(next((z for z in MARKET_ZONES if z in zones), zones[0]), offset, name, when)
             for offset, zones in by_offset.items()]
    if not picks:
        return f"--tz ZONE (the IANA name of the zone whose clock writes {quoted(name)})"
    if len(picks) == 1:
        return f"--tz {picks[0]}"
    said = [f"--tz {zone}" + ("" if "(" in zone else f" ({offset})") for zone, offset in zip(picks, by_offset)]
    return f"{', '.join(said[:-1])} or {said[-1]}, whichever zone's {name} it is"


def zone_writing(names: Iterable[str]) -> str | None:
    """A zone whose clock writes every one of `names` (`GMT`, `BST`: Europe/London), a market's first, else None."""
    zones: set[str] | None = None
    for name in names:
        writing = {zone for by_offset in [_zones_by_name().get(name.upper(), {})] for found in by_offset.values()
                   for zone in found}
        writing |= {ZONE_NAMES[name.upper()][1]} if name.upper() in ZONE_NAMES else set()
        zones = writing if zones is None else zones & writing
    if not zones:
        return None
    return next((zone for zone in MARKET_ZONES if zone in zones), min(zones))


def tz_for_offset(offset: str) -> str:
    """The --tz of a zone at a UTC offset (`+05:30`), for one that no Etc zone holds (a part of an hour): a
    market's zone if one is at it, else the first such zone; `--tz ZONE` with what to look for when none is."""
    zones = [zone for by_offset in _zones_by_name().values() for zone in by_offset.get(offset, [])]
    if not zones:
        return f"--tz ZONE (the IANA name of a zone at UTC{offset})"
    return f"--tz {next((z for z in MARKET_ZONES if z in zones), zones[0])} (a zone at UTC{offset})"


def _on_that_date(zone: str, offset: str, name: str, when: datetime | None) -> str:
    """`zone`, or when its clock writes another name than `name` at `when`, the fixed offset `name` stands for as
    IANA's Etc zone (whose sign is POSIX's, reversed: +01:00 is Etc/GMT-1), said as such."""
    hours, minutes = int(offset[1:3]), int(offset[4:6])
    at = timedelta(hours=hours, minutes=minutes) * (-1 if offset[0] == "-" else 1)
    if when is None or when.replace(tzinfo=ZoneInfo(zone)).utcoffset() == at:  # (by offset: MEZ is CET there)
        return zone
    if (fixed := etc_zone(offset)) is None:
        return f"{zone} (its clock writes {when.replace(tzinfo=ZoneInfo(zone)).tzname()} on that date)"
    return f"{fixed} ({name} all year, {offset}; {zone} writes {when.replace(tzinfo=ZoneInfo(zone)).tzname()} then)"


def named_zone_reading(name: str) -> tuple[str, str] | None:
    """For a zone's name of one offset (ZONE_NAMES: German exports' `MEZ`, `AEST`, `BRT`), (what it is, the --tz
    that reads times meant in it): where that zone's clock keeps summer time, its clock or the offset all year (a
    time column's header `Time (MEZ)` and `--tz MEZ` are answered alike, rather than with the IANA key spelled
    closest, `MET`); None for any other name."""
    if (named := ZONE_NAMES.get(name.upper())) is None:
        return None
    offset, zone = named
    if {at for _, at in clock_readings(zone)} == {offset}:
        return f"{zone}'s {offset} all year", f"--tz {zone}"
    fixed = f" or --tz {etc} ({offset} all year)" if (etc := etc_zone(offset)) else ""
    return f"{zone}'s {offset}, but its times may be that zone's clock, summer time included", \
        f"--tz {zone} (its clock){fixed}"


# `UTC+9`, `GMT-05:00`, `UTC+0530`, `+09:00`: a fixed UTC offset written where a zone's name goes
_OFFSET_AS_ZONE = re.compile(r"^((UTC|GMT)\s*)?(?P<sign>[+-])(?P<hours>\d\d?)(:?(?P<minutes>\d\d))?$", re.IGNORECASE)


def offset_as_zone(text: str) -> str | None:
    """The UTC offset that a zone written as one means (`UTC+9`, `GMT+09:00`, `UTC+0530`), as `+09:00`, its sign
    ISO's (east of Greenwich is +, as a desk writes it; POSIX's TZ and IANA's Etc zones reverse it), else None."""
    found = _OFFSET_AS_ZONE.match(text.strip())
    if found is None:
        return None
    return f"{found['sign']}{int(found['hours']):02d}:{found['minutes'] or '00'}"


def etc_zone(offset: str) -> str | None:
    """IANA's Etc zone of a whole-hour UTC offset (`+01:00`: Etc/GMT-1, its sign POSIX's, reversed), else None (no
    Etc zone holds a fraction of an hour)."""
    hours, minutes = int(offset[1:3]), int(offset[4:6])
    if minutes:
        return None
    return "Etc/GMT" if hours == 0 else f"Etc/GMT{'+' if offset[0] == '-' else '-'}{hours}"


def in_us_summer(ts_ns: pl.Expr, name: pl.Expr, written: str) -> pl.Expr:
    """Per row: whether its instant (int ns) is written with `written` (a SUMMER_CHECKED name) on a date that US
    zone keeps summer time (its clock writes CDT, PDT, EDT then)."""
    import polars as pl

    local = pl.from_epoch(ts_ns, "ns").dt.replace_time_zone("UTC").dt.convert_time_zone(SUMMER_CHECKED[written])
    return (name == written) & (local.dt.dst_offset() > pl.duration(seconds=0))


def us_names_in_summer(file: str, found: Mapping[str, tuple[int, int | None]], zone_reading: Mapping[str, str],
                       formats: Iterable[str]) -> list[str]:
    """`found`: SUMMER_CHECKED name -> (its rows on a date its US zone keeps summer time, the first one's instant).
    Refuses CST (PST) there, unless --tz names a zone that writes it (`zone_reading`), naming both readings' --tz;
    says EST there in a note, with the format (of `formats`, built from the file's first time) and --tz that read it
    as New York's clock."""
    notes = []
    for name, (rows, first_ns) in sorted(found.items()):
        if not rows or name in zone_reading:
            continue
        us_zone = SUMMER_CHECKED[name]
        day = "" if first_ns is None else \
            f" (from {datetime.fromtimestamp(first_ns / 1e9, ZoneInfo(us_zone)).date().isoformat()})"
        if name in US_SUMMER_ZONES:
            _refuse_in_summer(file, name, rows, day)
        fmt = next((f.replace("%Z", name) for f in formats if f.endswith("%Z")), None)
        follow = (f"--ts-format '{fmt}' --tz {us_zone}" if fmt else
                  f"--ts-format with {name} as text and --tz {us_zone}")
        notes.append(f"{file}: {rows} of its times are written with {name} on dates when New York keeps summer time"
                     f"{day}, when its clock writes EDT: read at {name}'s {NAMED_OFFSETS[name]}, as feeds that write "
                     f"{name} all year mean it; if they are New York's clock, give {follow}")
    return notes


def _refuse_in_summer(file: str, name: str, rows: int, day: str) -> None:
    """Refuses times written CST (PST) on dates US Central (Pacific) keeps summer time, when a US clock writes CDT
    (PDT): China's (the Philippines') standard time, most likely, 14 (16) h from the US reading."""
    us_zone = US_SUMMER_ZONES[name]
    july = datetime(2024, 7, 15, 12, tzinfo=timezone.utc)
    summer_name = july.astimezone(ZoneInfo(us_zone)).tzname()
    others = [(what, zone) for what, zone in SHARED_NAMES[name][1:]
              if july.astimezone(ZoneInfo(zone)).tzname() == name]  # (Cuba writes CDT then: not its CST)
    likely = " or ".join(f"{what} ({names_written_in(zone)[name]})" for what, zone in others)
    tz = " or ".join(f"--tz {zone}" for _, zone in others)
    region = SHARED_NAMES[name][0].removesuffix(" Standard Time")
    raise ValueError(f"{file}: {rows} of its times are written with {name} on dates when {region} keeps summer "
                     f"time{day}, when a US clock writes {summer_name}: they are likely {likely}; give {tz} to "
                     f"read them so, or --tz {us_zone} to read them as {SHARED_NAMES[name][0]} "
                     f"({NAMED_OFFSETS[name]}) all the same")
