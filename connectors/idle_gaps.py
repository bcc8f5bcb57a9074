"""A paced replay's long waits: a file spanning a night or a weekend, replayed at `speed` N, waits the gap / N of
wall time for its next tick (a weekend's 65.5 h at x100: 39 min) and sends nothing meanwhile. Each wait longer
than LONG_WAIT_SAID_S is said (when the next tick is stamped, and how long the wait is), and with `max_gap_s` a wait
is cut to that many wall seconds: the replay's clock skips the rest of the gap."""

from __future__ import annotations

from typing import NamedTuple

from connectors.durations import duration_text
from connectors.ticks import utc_text
from engine.quoting import quoted

# A replay silent longer than this looks hung: it says why. A few seconds, so that an ordinary pause in trading
# at a high --speed (a quiet minute at x20: 3 s) is not said, while an overnight gap at x100 (10 min) always is.
LONG_WAIT_SAID_S = 5.0


class LongWait(NamedTuple):
    """A wait for a paced replay's next tick: said when it begins."""

    ts: int  # the next tick's event time (ns)
    gap_ns: int  # event time since the tick before it
    wait_s: float  # wall seconds until it is sent
    cut_from_s: float | None  # the wall seconds max_gap_s cut the wait from; None: not cut

    def text(self, speed: float, max_gap_s: float | None) -> str:
        gap = duration_text(self.gap_ns)
        if self.cut_from_s is None:
            cut = " (--max-gap SECONDS shortens such waits)" if max_gap_s is None else ""
            return (f"next tick at {utc_text(self.ts)}, {gap} of event time after the last: sent in "
                    f"{duration_text(self.wait_s * 1e9)} at --speed {speed:g}{cut}")
        return (f"next tick at {utc_text(self.ts)}, {gap} of event time after the last "
                f"({duration_text(self.cut_from_s * 1e9)} at --speed {speed:g}): shortened to {max_gap_s:g} s by "
                f"--max-gap")


class GapCap:
    """The waits of one paced replay: which to say, and, with ``max_gap_s``, how much event time to skip."""

    def __init__(self, max_gap_s: float | None) -> None:
        if max_gap_s is not None and not (isinstance(max_gap_s, (int, float)) and 0 < max_gap_s < float("inf")):
            raise ValueError(f"max_gap_s must be None (no cap) or a finite number of wall seconds > 0, got "
                             f"{quoted(max_gap_s)}")
        self.max_gap_s = max_gap_s
        self.shortened = 0  # gaps cut
        self.saved_s = 0.0  # wall seconds those cuts saved
        self.waits: list[LongWait] = []  # said ones, not yet taken

    def skip_ns(self, gap_ns: int, speed: float) -> int:
        """The event time to skip before a tick ``gap_ns`` after the last one sent: what exceeds max_gap_s."""
        if self.max_gap_s is None or gap_ns / speed <= self.max_gap_s * 1e9:
            return 0
        skip = gap_ns - int(self.max_gap_s * speed * 1e9)
        self.shortened += 1
        self.saved_s += skip / speed / 1e9
        return skip

    def waiting(self, ts: int, gap_ns: int, wait_s: float, skipped_ns: int, speed: float) -> None:
        """A tick due ``wait_s`` wall seconds from now (after a skip of ``skipped_ns``): said if that is long."""
        cut_from_s = (wait_s + skipped_ns / speed / 1e9) if skipped_ns else None
        if max(wait_s, cut_from_s or 0.0) > LONG_WAIT_SAID_S:
            self.waits.append(LongWait(ts, gap_ns, max(wait_s, 0.0), cut_from_s))

    def summary(self) -> str | None:
        """The gaps --max-gap shortened, in one line; None for none."""
        if not self.shortened:
            return None
        return (f"--max-gap {self.max_gap_s:g} shortened {self.shortened} gap{'s' * (self.shortened > 1)} between "
                f"ticks, {duration_text(self.saved_s * 1e9)} of wall time in all")
