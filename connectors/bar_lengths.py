"""A bar's length as a map writes it (`bar_length: 1m`), and the map's `bar_stamp` checked (connectors/
column_map.py checks a map's keys here; connectors/bar_stamps.py applies them)."""

from __future__ import annotations

import re
from typing import Any

from engine.quoting import quoted, quoted_choices

UNIT_NS = {"s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9, "d": 86400 * 10**9, "w": 7 * 86400 * 10**9}
BAR_STAMPS = ("start", "close")
LENGTH = re.compile(r"^([1-9]\d*)(s|m|min|h|d|w)$")


def checked_bar_stamp(stamp: Any, length: Any) -> tuple[str | None, str | None]:
    """A map's `bar_stamp` and `bar_length` as given, checked: a ValueError a user can act on otherwise."""
    if stamp not in (None, *BAR_STAMPS):
        raise ValueError(f"bar_stamp must be one of {quoted_choices(BAR_STAMPS)} (close: a start-stamped bar replayed "
                         f"at its start plus its length, as a live bar builder sends it), got {quoted(stamp)}")
    if length is not None:
        if not isinstance(length, str) or LENGTH.match(length.strip()) is None:
            raise ValueError(f"bar_length is a bar's length as a number and a unit, s, m, h, d or w (1m, 5m, 1h, "
                             f"1d), got {quoted(length)}")
        if stamp != "close":
            raise ValueError(f"bar_length {length} is the length added to a bar's start: give bar_stamp=close too")
    return stamp, length.strip() if isinstance(length, str) else None


def length_ns(text: str) -> int:
    found = LENGTH.match(text)
    assert found is not None  # (checked_bar_stamp)
    return int(found[1]) * UNIT_NS[found[2][0]]


def shown_length(ns: int) -> str:
    for unit in ("w", "d", "h", "m", "s"):
        if ns % UNIT_NS[unit] == 0:
            return f"{ns // UNIT_NS[unit]}{unit}"
    return f"{ns / 10**9:g}s"
