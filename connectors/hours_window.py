"""A map's `hours` (`--hours 09:30-16:00 America/New_York`): the time-of-day window a replay keeps, on its zone's
wall clock, summer time included. `Hours` parses the window, tells a time inside it from one outside (the
`filtered_out` reject that says the row's clock), and finds the days on which the window falls wholly in the time
the clocks skip. Its own module because the file and DBN plans apply it, the planning checks it and the map only
validates it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date as Date
from datetime import datetime, timedelta
from typing import Any, Callable
from zoneinfo import ZoneInfo

from connectors.ticks import InvalidTick
from connectors.time_zones import unknown_zone_hint
from engine.quoting import quoted

HOURS_LEFT_OUT = "is outside the hours kept"  # an `hours` window's filtered_out (rejected_rows.py's LEFT_OUT_CAUSES)
# `hours`: a time-of-day window, `09:30-16:00` (seconds optional), maybe followed by its IANA zone
HOURS = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?\s*-\s*(\d{1,2}):(\d{2})(?::(\d{2}))?(?:\s+(\S+))?$")
QUARTER_HOUR_NS = 900 * 10**9  # every zone's clock changes on a quarter hour of UTC: one offset per quarter


@dataclass(frozen=True)
class Hours:
    """A time-of-day window (`09:30-16:00 America/New_York`): from its start, included, to its end, excluded, on the
    wall clock of its zone, summer time included (an end before the start spans midnight: `18:00-17:00`)."""

    start_s: int
    end_s: int
    zone: str | None

    @classmethod
    def parse(cls, text: Any) -> Hours:
        found = HOURS.match(text.strip()) if isinstance(text, str) else None
        clock = [int(g or 0) for g in found.groups()[:6]] if found else []
        if not found or clock[0] > 24 or clock[3] > 24 or max(clock[1], clock[2], clock[4], clock[5]) > 59:
            raise ValueError(f"hours must be a time-of-day window START-END, maybe with its zone, e.g. "
                             f"'09:30-16:00' or '09:30-16:00 America/New_York', got {quoted(text)}")
        start, end = (min(h * 3600 + m * 60 + sec, 86400) for h, m, sec in (clock[:3], clock[3:]))
        if start == end:
            raise ValueError(f"hours {quoted(text)} is an empty window: its start is its end")
        zone = found.group(7)
        if zone is not None and (hint := unknown_zone_hint(zone)) is not None:
            raise ValueError(f"hours {quoted(text)}: unknown time zone {quoted(zone)}{hint}")
        return cls(start, end, zone)

    def inside(self, zone: str) -> Callable[[int], bool]:
        """Whether an epoch-ns time is inside the window on `zone`'s wall clock (this window's own zone first)."""
        tz = ZoneInfo(self.zone or zone)
        offsets: dict[int, int] = {}  # quarter hour since the epoch -> the zone's UTC offset then, in ns
        start, end, day = self.start_s * 10**9, self.end_s * 10**9, 86400 * 10**9

        def inside(ts: int) -> bool:
            quarter = ts // QUARTER_HOUR_NS
            if (offset := offsets.get(quarter)) is None:
                moment = datetime.fromtimestamp(quarter * QUARTER_HOUR_NS / 1e9, tz)
                offset = offsets[quarter] = int(moment.utcoffset().total_seconds()) * 10**9
            clock = (ts + offset) % day
            return start <= clock < end if start < end else clock >= start or clock < end

        return inside

    def skipped_on(self, zone: str, first_ns: int, last_ns: int) -> list[Date]:
        """The days from `first_ns` to `last_ns` on which this window lies wholly in the time the clocks skip when
        summer time starts (02:00-02:30 in New York on 2026-03-08): no row of that day can fall inside it."""
        tz = ZoneInfo(self.zone or zone)
        if self.start_s > self.end_s:  # a window across midnight is never wholly inside one day's skipped time
            return []
        first, last = (datetime.fromtimestamp(ns // 10**9, tz).date() for ns in (first_ns, last_ns))
        days = []
        for ordinal in range(first.toordinal(), min(last.toordinal(), first.toordinal() + 366 * 50) + 1):
            day = Date.fromordinal(ordinal)
            if all(_skipped(day, second, tz) for second in (self.start_s, self.end_s - 1)):  # a gap is one span
                days.append(day)
        return days

    def left_out(self, zone: str, as_given: str) -> Callable[[int], InvalidTick | None]:
        """For an epoch-ns time: None inside the window, else the `filtered_out` reject that says its clock on
        this window's zone (or ``zone``) and the window ``as_given``."""
        inside, clock_zone = self.inside(zone), ZoneInfo(self.zone or zone)

        def left_out(ts: int) -> InvalidTick | None:
            if inside(ts):
                return None
            clock = datetime.fromtimestamp(ts // 10**9, clock_zone).strftime("%H:%M:%S")
            return InvalidTick("filtered_out", f"ts at {clock} {clock_zone.key} {HOURS_LEFT_OUT} ({as_given})")

        return left_out


def _skipped(day: Date, second: int, tz: ZoneInfo) -> bool:
    """Whether `second` of `day`'s wall clock in `tz` is a time the clocks skip (it reads back as another)."""
    wall = datetime(day.year, day.month, day.day) + timedelta(seconds=second)
    return wall.replace(tzinfo=tz).astimezone(ZoneInfo("UTC")).astimezone(tz).replace(tzinfo=None) != wall
