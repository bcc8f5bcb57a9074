"""`--test-from` given as an event time (`backtest`, `evaluate`): the scored part of each stream starts at its
first tick stamped then or later, the same instant for every stream, rather than at a share of each stream's
ticks. "Train on the first two weeks, score the third" is then `--test-from` the third week's first day.

A time is read as `--from`/`--to` read theirs (connectors/time_range.py: ISO 8601 or ns since the epoch, on --tz's
clock when it has no offset); a number in (0, 1) stays a fraction of each stream's ticks.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def test_start_of(text: str, zone: str | None) -> TestStart:
    """--test-from TIME as a TestStart, a time without an offset on ``zone``'s clock (--tz; None: UTC)."""
    from connectors.time_range import parse_time

    return TestStart(parse_time(text, "--test-from", zone))


test_start_of.__test__ = False  # type: ignore[attr-defined]
