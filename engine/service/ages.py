"""How replies say an age or a lag (``lag_s``, ``answer_age_s``, ``tick_age_s``...): in seconds, rounded *up* to the
millisecond. A limit is checked on the unrounded figure, so rounding to nearest could show a service degraded
for an age "1.0" under a limit of 1.0 s; rounded up, a figure past its limit always reads past it."""

from __future__ import annotations

import math


def age_said(seconds: float) -> float:
    """``seconds`` (>= 0) as a reply says it: the next millisecond up (1.0002 -> 1.001, 0.25 -> 0.25)."""
    return math.ceil(round(seconds * 1000.0, 6)) / 1000.0
