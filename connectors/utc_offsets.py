"""UTC offsets as datetime text writes them after a time: a number (`-04:00`, `+0100`, `Z`), a number after a name
(Dukascopy's `GMT+0100`), or a name that stands for one fixed offset (BigQuery's ` UTC`, a US export's ` EST`,
` EDT`). Each makes the time an instant, read at its offset; a zone's clock (` ET`: EST or EDT by the date) is
no offset, and says which --tz reads it."""

from __future__ import annotations

import re

import polars as pl

# Names of one fixed UTC offset each: a US zone's standard (EST) and daylight (EDT) time are two offsets
NAMED_OFFSETS = {"UTC": "+00:00", "GMT": "+00:00", "EST": "-05:00", "EDT": "-04:00", "CST": "-06:00",
                 "CDT": "-05:00", "MST": "-07:00", "MDT": "-06:00", "PST": "-08:00", "PDT": "-07:00"}
# Names of a zone's clock, whose offset changes with summer time: a time written with one needs its zone given
CLOCK_NAMES = {"ET": "America/New_York", "CT": "America/Chicago", "MT": "America/Denver", "PT": "America/Los_Angeles"}
_NAMES = "|".join(NAMED_OFFSETS)
# The offset written after a time: Z, a number (maybe after UTC or GMT), or a name of one offset
ZONE_TAIL = rf"(Z|((UTC|GMT)\s*)?[+-]\d\d(:?\d\d)?|{_NAMES})"
# A time with its UTC offset ("...09:30:00.123-04:00", "...13:30:00Z", "...13:30:00.123 UTC", "... 09:30 EDT");
# the pattern is also polars' (a row's own offset decides how the row is read)
OFFSET_PATTERN = rf"(?i)\d\d:\d\d(:\d\d([.,]\d+)?)?\s*{ZONE_TAIL}$"
UTC_OFFSET = re.compile(OFFSET_PATTERN)
_TAIL = re.compile(rf"(?i)\s*{ZONE_TAIL}$")
_NAME_TAIL = rf"(?i)\s*({_NAMES})$"
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


def numeric_offsets(text: pl.Expr) -> pl.Expr:
    """Times whose offset is a name (` UTC`, ` EST`) or follows one (`GMT+0100`) with the offset as a number
    (`-05:00`, `+0100`), as polars reads it; other text as it is."""
    name = text.str.extract(_NAME_TAIL, 1).str.to_uppercase()
    named = text.str.replace(_NAME_TAIL, "") + name.replace_strict(NAMED_OFFSETS, default=None, return_dtype=pl.String)
    return pl.when(name.is_null()).then(text.str.replace(_NUMBER_AFTER_NAME, "${1}")).otherwise(named)


def format_reading_names(fmt: str) -> str:
    """A format whose `%Z` reads a zone's name (polars would read it and drop the zone) as one that reads the
    offset `numeric_offsets` writes in its place: `%Y-%m-%d %H:%M:%S %Z` -> `%Y-%m-%d %H:%M:%S%z`."""
    return re.sub(r"\s*%Z", "%z", fmt)


def unknown_zone_name(text: str) -> str | None:
    """The word at the end of a time that a format's `%Z` would read and no NAMED_OFFSETS names (CET, BST, ET),
    else None."""
    word = re.search(r"\s([A-Za-z]{1,6})$", text.strip())
    return word[1] if word is not None and word[1].upper() not in NAMED_OFFSETS else None


def clock_name(text: str) -> tuple[str, str] | None:
    """(name, zone) when a time ends with the name of a zone's clock (` ET`, ` CT`), which is no UTC offset."""
    found = _CLOCK_TAIL.search(text.strip())
    return (found[1], CLOCK_NAMES[found[1]]) if found else None
