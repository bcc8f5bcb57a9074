"""A time zone read from the user (`--tz`, a column map's `tz`, `--hours ... ZONE`, a config's `replay.tz`): what
ZoneInfo reads, or the refusal's hint naming the closest IANA names (`America/NewYork`, the commonest typo, got no
"did you mean" where a mistyped stream or config key did: review224 #13); a zone's name of one offset (`MEZ`) the
zone and the --tz that read it, as a header naming it gets; a UTC offset (`UTC+9`, `GMT+09:00`) the Etc zone a
header `Time (UTC+9)` is read in, Etc/GMT-9, or for a part of an hour (`UTC+05:30`) a zone at it: never the key
spelled closest, `Etc/GMT+9`, whose sign is POSIX's, -09:00 (review411 #12).
"""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from connectors.utc_offsets import etc_zone, named_zone_reading, offset_as_zone, tz_for_name, tz_for_offset, zones_named
from engine.quoting import quoted
from engine.stream_patterns import did_you_mean

EXAMPLES = "; use an IANA name like 'Europe/London', 'America/New_York' or 'UTC'"


def unknown_zone_hint(zone: object) -> str | None:
    """None when ``zone`` is a zone ZoneInfo reads; else the end of its refusal: "; did you mean 'America/New_York'?"
    (the closest IANA names, case and spaces folded), or IANA examples when none is close."""
    try:
        ZoneInfo(zone)  # type: ignore[arg-type]  (a YAML value may be any type: refused below)
        return None
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        pass
    if (named := named_zone_reading(str(zone))) is not None:  # `MEZ`: Berlin's, not the closest key spelled (MET)
        which, tz = named
        return f"; {str(zone).upper()} is {which}: give {tz}"
    if (offset := offset_as_zone(str(zone))) is not None:
        return _offset_hint(str(zone), offset)
    if zones_named(str(zone)):  # `IST`, `CST`: several zones' abbreviation, China's and India's among them, not the
        # US zones spelled closest (review433 #8: --tz CST was asked "did you mean UCT or MST or HST?")
        name = str(zone).upper()
        return f"; {name} is an abbreviation that zones write for their times: give {tz_for_name(name)}"
    keys = available_timezones()
    same = {_folded(key): key for key in keys}.get(_folded(str(zone)))  # `America/NewYork`: that one, not Nuuk too
    return f"; did you mean {quoted(same)}?" if same is not None else did_you_mean([str(zone)], keys) or EXAMPLES


def _folded(zone: str) -> str:
    """A zone name with case, spaces, `_` and `-` folded away: `america/new york` is `America/New_York`."""
    return "".join(c for c in zone.casefold() if c not in " _-")


def _offset_hint(zone: str, offset: str) -> str:
    """The refusal's end for a UTC offset given as a zone: a desk's `UTC+9` means +09:00 (a header `Time (UTC+9)`
    is read so), but POSIX's TZ reads it as -09:00, so it is not guessed: the IANA zone that holds it is named."""
    if offset[1:] == "00:00":
        return f"; {zone} is UTC: give --tz UTC"
    if (etc := etc_zone(offset)) is None or etc not in available_timezones():  # a part of an hour, or past +14
        return f"; {zone} is {offset} all year, which no Etc zone holds: give {tz_for_offset(offset)}"
    reversed_sign = f"Etc/GMT{offset[0]}{int(offset[1:3])}"  # the key spelled closest, the other side of Greenwich
    not_that = f": {reversed_sign} is {'-' if offset[0] == '+' else '+'}{offset[1:]}" \
        if reversed_sign in available_timezones() else ""
    return (f"; {zone} is {offset} all year, no summer time: give --tz {etc} (an Etc zone's sign is POSIX's, "
            f"reversed{not_that}), or the zone of the market whose clock it is, if its times follow that zone's "
            f"summer time")
