"""A replay's event-time range (`--from` / `--to`): which ticks of the files a run reads, by each tick's own time.

From is inclusive, to exclusive, so a day is `--from 2024-01-02 --to 2024-01-03` and consecutive ranges never
share a tick. A time is ISO 8601 text, a date (its midnight) or a date and time (`2024-01-02T14:30`,
`2024-01-02 14:30:00.25`), in UTC unless it carries its offset (`Z`, `+01:00`) or a zone is given for it (`--tz`:
a desk's day is its market's, `--tz Australia/Sydney --from 2024-04-05` starts at Sydney's midnight), or an
integer of ns since the epoch, as ticks carry it (one that reads as a time of 2000..2100 in s, ms or us is refused
as the unit mistake it is: as ns it is in January 1970). connectors/replay.py applies the range: pushed into a
tabular file's lazy query where its times are numbers, else tick by tick.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from zoneinfo import ZoneInfo

from connectors.tick_times import ts_unit_guess, utc_text
from connectors.utc_offsets import offset_text
from engine.quoting import quoted

FRACTION = re.compile(r"(?<=:\d\d)[.,](\d+)")  # a time's fraction of a second, after its seconds
TIME_KINDS = ("ISO 8601 text (a date, a date and time), an int of ns since the epoch, a datetime (a pandas "
              "Timestamp) or a numpy datetime64")
TIME_SYNTAX = ("ISO 8601 (2024-01-02, 2024-01-02T14:30: on --tz's clock when it is given, else UTC, unless an offset "
               "is given: +01:00, Z) or ns since the epoch")


def parse_time(text: str, option: str = "time", zone: str | None = None) -> int:
    """A time as ns since the epoch (see the module docstring), text without an offset on `zone`'s clock (None:
    UTC); ValueError naming `option` and the syntax, or, for an integer that reads as a time of 2000..2100 in s, ms
    or us (as ns: January 1970), the ns and ISO it meant."""
    given = text.strip()
    if given.isdigit():
        return _epoch_ns(int(given), option)
    when, nanos = _iso_time(given, option)
    return _datetime_ns(when, zone) + nanos


def time_ns(value: Any, option: str = "time", zone: str | None = None) -> int:
    """A time as a Python caller holds it, as ns since the epoch: ISO 8601 text or ns as `parse_time` reads them, an
    int of ns (numpy's too), a datetime (a pandas Timestamp, its ns kept; one without a zone on `zone`'s clock, None:
    UTC, as text without an offset is read) or a numpy datetime64; TypeError naming what is accepted for the rest."""
    if isinstance(value, str):
        return parse_time(value, option, zone)
    if isinstance(value, datetime) and value != value:  # pandas' NaT, a datetime that is no time
        raise ValueError(f"{option} is NaT (no time)")
    if isinstance(value, datetime):  # (a pandas Timestamp is one, its ns beyond the microsecond apart)
        return _datetime_ns(value, zone) + getattr(value, "nanosecond", 0)
    if type(value).__name__ == "datetime64":  # numpy's (numpy is not imported for it): its ns, as an integer
        if str(value) == "NaT":
            raise ValueError(f"{option} is NaT (no time)")
        return int(value.astype("datetime64[ns]").astype("int64"))
    if not isinstance(value, bool) and hasattr(value, "__index__"):  # an int, numpy's int64 among them
        return _epoch_ns(operator.index(value), option)
    raise TypeError(f"{option}: expected {TIME_KINDS}, got {type(value).__qualname__}")


def _epoch_ns(value: int, option: str) -> int:
    """An integer time, refused where it reads as a time of 2000..2100 in s, ms or us (as ns: January 1970)."""
    if (guess := ts_unit_guess(value)) is not None:
        unit, per = guess
        raise ValueError(f"{option} {value} looks like epoch {unit}: give ns ({value * per}) or ISO 8601 "
                         f"({utc_text(value * per)}); as ns it is {utc_text(value)}")
    return value


def _datetime_ns(when: datetime, zone: str | None) -> int:
    """A datetime's instant in ns (to the microsecond), one without a zone on `zone`'s clock (None: UTC)."""
    if when.tzinfo is None:  # (a wall-clock time the clocks skip or repeat: fold 0, said by wall_clock_caveat)
        when = when.replace(tzinfo=ZoneInfo(zone) if zone else timezone.utc)
    delta = when.astimezone(timezone.utc).replace(tzinfo=None) - datetime(1970, 1, 1)
    return (delta.days * 86_400 + delta.seconds) * 10**9 + delta.microseconds * 1000


def wall_clock_caveat(text: str, zone: str) -> str | None:
    """What a time without an offset (as `parse_time` reads it) is read as where `zone`'s clock repeats it (when it
    goes back: the first pass, Python's fold 0) or skips it (when it goes forward: at the offset before the change,
    so New York's skipped 02:30 is 03:30 after it), else None; a file's row at a skipped time is refused, but a
    range's bound is a moment, and what it was read as is said (review411 #9)."""
    given = text.strip()
    when = None if given.isdigit() else _iso_time(given, "time")[0]
    if when is None or when.tzinfo is not None:
        return None
    first, second = (when.replace(tzinfo=ZoneInfo(zone), fold=fold) for fold in (0, 1))
    if first.utcoffset() == second.utcoffset():
        return None
    after = first.astimezone(timezone.utc).astimezone(first.tzinfo)  # as its clock writes that instant
    if after.replace(tzinfo=None) == when:  # a time it writes: twice
        other = f"{given if ':' in given else when.isoformat()}{offset_text(second)}"
        return (f"{given} comes twice on {zone}'s clock (it goes back then): read at its first pass, "
                f"{offset_text(first)}, {utc_text(parse_time(given, zone=zone))}; give {other} for the second")
    return (f"{given} is skipped by {zone}'s clock (it goes forward over it): read at the offset before, "
            f"{offset_text(first)}, {utc_text(parse_time(given, zone=zone))} ({after.time().isoformat()} on its "
            f"clock after the change)")


def names_no_offset(text: str) -> bool:
    """Whether a time (as `parse_time` reads it) is ISO text without an offset, i.e. read as UTC."""
    given = text.strip()
    return not given.isdigit() and _iso_time(given, "time")[0].tzinfo is None


def _iso_time(given: str, option: str) -> tuple[datetime, int]:
    """ISO 8601 text as a datetime (without its fraction of a second) and that fraction in ns."""
    # the fraction of a second apart: datetime keeps microseconds, a tick's time (and utc_text's) has ns
    fraction = FRACTION.search(given)
    nanos = int(fraction[1].ljust(9, "0")[:9]) if fraction else 0
    try:
        when = datetime.fromisoformat((FRACTION.sub("", given, count=1) if fraction else given).replace("z", "Z"))
    except ValueError:
        raise ValueError(f"{option} {quoted(given)} is not a time: give {TIME_SYNTAX}") from None
    return when, nanos


@dataclass(frozen=True)
class TimeRange:
    """Ticks at `start` <= ts < `end` (ns; None: open on that side)."""

    start: int | None = None
    end: int | None = None

    def __post_init__(self) -> None:
        for bound in (self.start, self.end):
            if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int)):
                raise TypeError(f"TimeRange takes ns since the epoch (int) or None, got {type(bound).__qualname__}: "
                                f"TimeRange.of(start, end) reads {TIME_KINDS}")
        if self.start is None and self.end is None:
            raise ValueError("a time range needs a start (--from) or an end (--to)")
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise ValueError(f"--from {utc_text(self.start)} is not before --to {utc_text(self.end)}: the range is "
                             f"{'empty' if self.start == self.end else 'reversed'} (from is inclusive, to exclusive)")

    @classmethod
    def of(cls, start: Any, end: Any, zone: str | None = None) -> TimeRange | None:
        """The range from `start` to `end`: the `--from` / `--to` texts, or times as a Python caller holds them
        (`time_ns`: ns, a datetime, a pandas Timestamp, a numpy datetime64), those without an offset or a zone on
        `zone`'s clock (None: UTC); None when neither is given."""
        if start is None and end is None:
            return None
        return cls(None if start is None else time_ns(start, "--from", zone),
                   None if end is None else time_ns(end, "--to", zone))

    @classmethod
    def given(cls, value: Any) -> TimeRange | None:
        """`time_range` as run_backtest and FileReplay take it: a TimeRange, a ``(start, end)`` pair read by `of`
        (either None: open on that side), or None (every tick); TypeError naming what is accepted for the rest."""
        if value is None or isinstance(value, TimeRange):
            return value
        if isinstance(value, (tuple, list)) and len(value) == 2:
            return cls.of(*value)
        raise TypeError(f"time_range: expected a TimeRange, a (start, end) pair of {TIME_KINDS} (None: open on "
                        f"that side), or None; got {type(value).__qualname__}")

    def holds(self, ts: int) -> bool:
        return (self.start is None or ts >= self.start) and (self.end is None or ts < self.end)

    def overlaps(self, first: int, last: int) -> bool:
        """Whether ticks from `first` to `last` (both held) can fall inside."""
        return (self.start is None or last >= self.start) and (self.end is None or first < self.end)

    def holds_none(self, whose: str, first: int, last: int) -> str:
        """Why a range that none of `whose` ("the files' ticks", running from `first` to `last`) falls in is refused:
        a typo or the wrong clock, not an empty output (backtest, feed replay, ticklog export alike)."""
        return (f"{self.text()} holds none of {whose}: they run from {utc_text(first)} to {utc_text(last)} (from is "
                f"inclusive, to exclusive)")

    def describe(self) -> dict[str, str]:
        """What a replay's fingerprint holds, and what a resume with another range is told."""
        return {key: utc_text(ns) for key, ns in (("from", self.start), ("to", self.end)) if ns is not None}

    def text(self) -> str:
        return " ".join(f"--{key} {value}" for key, value in self.describe().items())
