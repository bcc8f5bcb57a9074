"""A map's `hours` (`--hours 09:30-16:00 America/New_York`, or several windows: Tokyo's two sessions around its
lunch, `09:00-11:30,12:30-15:00 Asia/Tokyo`): the time-of-day windows a replay keeps, on their zone's wall clock,
summer time included. `Hours` parses them, tells a time inside one from one outside all (the `filtered_out` reject
that says the row's clock), and finds the days on which they fall wholly in the time the clocks skip. Its own
module because the file and DBN plans apply it, the planning checks it and the map only validates it.
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
# one window of `hours`, `09:30-16:00` (seconds optional); its hours may pass 24 (JPX's night session, 16:30-30:00)
WINDOW = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?-(\d{1,2}):(\d{2})(?::(\d{2}))?$")
CLOCK_DASH = re.compile(r"(\d)\s*-\s*(\d)")  # `09:30 - 16:00` as `09:30-16:00`, before splitting at spaces
DAY_S = 86400
QUARTER_HOUR_NS = 900 * 10**9  # every zone's clock changes on a quarter hour of UTC: one offset per quarter
HOURS_SYNTAX = ("a time-of-day window START-END, or several (a lunch break left out: '09:00-11:30,12:30-15:00'), "
                "maybe with their zone, e.g. '09:30-16:00' or '09:00-11:30,12:30-15:00 Asia/Tokyo'")


def hours_text(given: Any) -> Any:
    """`hours` as one text: a YAML list of windows (`["09:00-11:30", "12:30-15:00 Asia/Tokyo"]`) joined by commas,
    which `Hours.parse` reads as the same windows; anything else as given (checked by `Hours.parse`)."""
    if isinstance(given, (list, tuple)) and given and all(isinstance(item, str) for item in given):
        return ", ".join(item.strip() for item in given)
    return given


@dataclass(frozen=True)
class Hours:
    """Time-of-day windows (`09:00-11:30,12:30-15:00 Asia/Tokyo`): each from its start, included, to its end,
    excluded, on the wall clock of their zone, summer time included; a time inside any of them is kept. An end
    before the start spans midnight (`18:00-17:00`), as does an end past 24:00 (JPX's `16:30-30:00`, 06:00)."""

    windows: tuple[tuple[int, int], ...]  # (start, end) in seconds of the day; end < start: across midnight
    zone: str | None

    @classmethod
    def parse(cls, given: Any) -> Hours:
        text = hours_text(given)
        words = CLOCK_DASH.sub(r"\1-\2", text).replace(",", " ").split() if isinstance(text, str) else []
        windows = [_window(word, text) for word in words if WINDOW.match(word)]
        zones = list(dict.fromkeys(word for word in words if not WINDOW.match(word)))
        if not windows or any(not re.search(r"[A-Za-z]", zone) for zone in zones):
            raise ValueError(f"hours must be {HOURS_SYNTAX}, got {quoted(given)}")
        if len(zones) > 1:  # one clock for all the windows, as one --tz is for all the files
            raise ValueError(f"hours {quoted(text)} name several zones ({', '.join(zones)}): the windows of one "
                             f"hours are on one wall clock; write its zone once, after them")
        zone = zones[0] if zones else None
        if zone is not None and (hint := unknown_zone_hint(zone)) is not None:
            raise ValueError(f"hours {quoted(text)}: unknown time zone {quoted(zone)}{hint}")
        return cls(tuple(windows), zone)

    def inside(self, zone: str) -> Callable[[int], bool]:
        """Whether an epoch-ns time is inside a window on `zone`'s wall clock (this window's own zone first)."""
        tz = ZoneInfo(self.zone or zone)
        offsets: dict[int, int] = {}  # quarter hour since the epoch -> the zone's UTC offset then, in ns
        day = DAY_S * 10**9
        windows = [(start * 10**9, end * 10**9) for start, end in self.windows]

        def inside(ts: int) -> bool:
            quarter = ts // QUARTER_HOUR_NS
            if (offset := offsets.get(quarter)) is None:
                moment = datetime.fromtimestamp(quarter * QUARTER_HOUR_NS / 1e9, tz)
                offset = offsets[quarter] = int(moment.utcoffset().total_seconds()) * 10**9
            clock = (ts + offset) % day
            return any(start <= clock < end if start < end else clock >= start or clock < end
                       for start, end in windows)

        return inside

    def skipped_on(self, zone: str, first_ns: int, last_ns: int) -> list[Date]:
        """The days from `first_ns` to `last_ns` on which every window lies wholly in the time the clocks skip when
        summer time starts (02:00-02:30 in New York on 2026-03-08): no row of that day can fall inside them."""
        tz = ZoneInfo(self.zone or zone)
        if any(start > end for start, end in self.windows):  # one across midnight is never wholly in skipped time
            return []
        first, last = (datetime.fromtimestamp(ns // 10**9, tz).date() for ns in (first_ns, last_ns))
        days = []
        for ordinal in range(first.toordinal(), min(last.toordinal(), first.toordinal() + 366 * 50) + 1):
            day = Date.fromordinal(ordinal)
            if all(_skipped(day, second, tz) for start, end in self.windows for second in (start, end - 1)):
                days.append(day)  # (a skipped time is one span: both ends of a window in it, all of it is)
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


def _window(word: str, text: str) -> tuple[int, int]:
    """One window's (start, end) in seconds of the day. Hours past 24 are the next day's, as JPX writes its night
    session (`16:30-30:00`: to 06:00): such a window ends after its start, within a day of it."""
    clock = [int(g or 0) for g in WINDOW.match(word).groups()]
    start, end = (h * 3600 + m * 60 + sec for h, m, sec in (clock[:3], clock[3:]))
    if max(clock[0], clock[3]) > 47 or max(clock[1], clock[2], clock[4], clock[5]) > 59:
        raise ValueError(f"hours must be {HOURS_SYNTAX}, got {quoted(text)}")
    if start == end:
        raise ValueError(f"hours {quoted(text)}: {word} is an empty window: its start is its end")
    if max(start, end) > DAY_S:  # the past-24 notation
        if not start < end <= start + DAY_S:
            raise ValueError(f"hours {quoted(text)}: {word} is no window: one written past 24:00 (JPX's "
                             f"16:30-30:00, to 06:00 the next day) ends after its start and within 24 hours of it")
        start, end = start % DAY_S, end % DAY_S or DAY_S
    return start, end


def _skipped(day: Date, second: int, tz: ZoneInfo) -> bool:
    """Whether `second` of `day`'s wall clock in `tz` is a time the clocks skip (it reads back as another)."""
    wall = datetime(day.year, day.month, day.day) + timedelta(seconds=second)
    return wall.replace(tzinfo=tz).astimezone(ZoneInfo("UTC")).astimezone(tz).replace(tzinfo=None) != wall
