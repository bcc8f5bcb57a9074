"""A time zone read from the user (`--tz`, a column map's `tz`, `--hours ... ZONE`, a config's `replay.tz`): what
ZoneInfo reads, or the refusal's hint naming the closest IANA names (`America/NewYork`, the commonest typo, got no
"did you mean" where a mistyped stream or config key did: review224 #13); a zone's name of one offset (`MEZ`) the
zone and the --tz that read it, as a header naming it gets.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from connectors.utc_offsets import named_zone_reading
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
    keys = available_timezones()
    same = {_folded(key): key for key in keys}.get(_folded(str(zone)))  # `America/NewYork`: that one, not Nuuk too
    return f"; did you mean {quoted(same)}?" if same is not None else did_you_mean([str(zone)], keys) or EXAMPLES


def _folded(zone: str) -> str:
    """A zone name with case, spaces, `_` and `-` folded away: `america/new york` is `America/New_York`."""
    return "".join(c for c in zone.casefold() if c not in " _-")
