"""`--test-from` given as an event time (`backtest`, `evaluate`): the scored part of each stream starts at its
first tick stamped then or later, the same instant for every stream, rather than at a share of each stream's
ticks. "Train on the first two weeks, score the third" is then `--test-from` the third week's first day.

A time is read as `--from`/`--to` read theirs (connectors/time_range.py: ISO 8601 or ns since the epoch, on --tz's
clock when it has no offset); a number in (0, 1) stays a fraction of each stream's ticks.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from connectors.tick_times import utc_text


@dataclass(frozen=True)
class TestStart:
    """Score from this event time on (ns since the epoch, UTC)."""

    __test__ = False  # (not a pytest test class, whatever its name)

    ns: int

    def text(self) -> str:
        """As the summary and the run record write it: UTC ISO 8601."""
        return utc_text(self.ns)


def looks_like_time(text: str) -> bool:
    """Whether --test-from's text is a time (a date, a date and time, or ns since the epoch) rather than a fraction:
    a fraction is below 1, a time has a date's dashes or many digits."""
    given = text.strip()
    return "-" in given[1:] or (given.isdigit() and len(given) > 4)


def test_start_of(text: str, zone: str | None, command: str) -> TestStart:
    """--test-from TIME as a TestStart, a time without an offset on ``zone``'s clock (--tz; None: UTC); one that
    clock repeats or skips is said in a note of ``command``'s, with the reading taken, as --from's is."""
    from connectors.time_range import parse_time, wall_clock_caveat

    start = TestStart(parse_time(text, "--test-from", zone))
    if zone is not None and (caveat := wall_clock_caveat(text, zone)) is not None:
        print(f"{command}: note: --test-from {caveat}", file=sys.stderr)
    return start


def test_start_given(test_from: Any) -> Any:
    """run_backtest's ``test_from`` as a Python caller holds it: a time as a TestStart (text as --test-from TIME reads
    it, on UTC's clock without an offset; a datetime, pandas Timestamp, numpy datetime64 or an int (numpy's too) of
    ns since the epoch, read as time_range.time_ns reads them); anything else as given (a fraction, "test", a
    TestStart: checked with the run's other numbers)."""
    from connectors.time_range import time_ns

    # an int (numpy's too: anything with __index__, as time_ns reads it) is no fraction in (0, 1): ns since the epoch
    whole = not isinstance(test_from, bool) and hasattr(test_from, "__index__")
    if isinstance(test_from, str) and looks_like_time(test_from) or isinstance(test_from, datetime) \
            or type(test_from).__name__ == "datetime64" or whole:
        return TestStart(time_ns(test_from, "test_from (--test-from)"))
    return test_from


test_start_given.__test__ = False  # type: ignore[attr-defined]
test_start_of.__test__ = False  # type: ignore[attr-defined]
