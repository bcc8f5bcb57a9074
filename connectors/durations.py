"""A span of time said in the unit that reads best (`duration_text`: 3 ms, 1.5 s, 42 min), as the notes, logs
and reports that name a gap, a lag or a run's length write it."""

from __future__ import annotations


# (unit, its ns, the least count shown in it): 90 s reads `90 s`, not `1.5 min`
DURATION_UNITS = (("days", 86_400e9, 2), ("h", 3_600e9, 2), ("min", 60e9, 2), ("s", 1e9, 1), ("ms", 1e6, 1),
                  ("us", 1e3, 1), ("ns", 1, 0))


def duration_text(ns: float) -> str:
    """A span of time in the unit that reads best, to 3 significant digits: 3 ms, 1.5 s, 42 min, 2 h, 3 days.
    The unit is chosen by the rounded count, so 999.9999 ms reads `1 s`, never `1e+03 ms`; a count past 999 of
    the largest unit is written out (`1500 days`)."""
    for unit, size, least in DURATION_UNITS:
        shown = float(f"{ns / size:.3g}")
        if abs(shown) >= least:
            return f"{shown:.3g} {unit}" if abs(shown) < 1000 else f"{shown:.0f} {unit}"
    raise AssertionError("unreachable: every count is at least 0 ns")
