"""What the encoders note of accepted ticks' timestamps, said as they happen (``notify``) and summed up for stats: a
stream whose first ts is 0 or looks like seconds, ms or us rather than ns (`ts_unit_suspects`), and wire ticks
accepted well ahead of the receiver's clock (`ticks_ahead_of_clock`), which block their stream's later real ticks.

Apart from connectors/encoder.py because these are notes for the operator, kept beside the ingest path; accepting or
refusing a tick never depends on them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from connectors.tick_times import first_ts_hint, utc_text
from engine.quoting import quoted

MAX_TS_UNIT_NOTES = 20  # streams named (stats, stderr) when many first ticks are 0 or look like s/ms/us; all counted
# A wire tick accepted further ahead of the receiver's clock than this is said and counted (ticks_ahead_summary): its
# stream's later ticks must not be older, so one forged or mis-stamped tick (within limits.max_ts_ahead_s, once set
# past its default of 10 s) refuses the stream's real feed as ts_backwards until the clock passes it. Minutes: above
# clock skew between hosts
AHEAD_OF_CLOCK_NOTE_NS = 300 * 10**9


class StampNotes:
    """The notes of one `StreamEncoders`: the first MAX_TS_UNIT_NOTES streams of each kind named, every one counted."""

    def __init__(self, notify: Callable[[str], None] | None = None) -> None:
        # streams whose first ts is 0 or looks like s/ms/us, not ns (first_ts_hint): the first MAX_TS_UNIT_NOTES, and a
        # count
        self.ts_unit_notes: dict[str, str] = {}
        self.ts_unit_streams = 0
        self.notify = notify  # where such notes are said as they happen (the service's log); None: only counted
        # streams with wire ticks accepted over AHEAD_OF_CLOCK_NOTE_NS ahead of the clock: the first
        # MAX_TS_UNIT_NOTES, each [ticks, most seconds ahead], and how many such ticks in all
        self.ahead_of_clock: dict[str, list] = {}
        self.ahead_of_clock_ticks = 0

    def first_tick(self, stream: str, ts: int) -> None:
        """A stream's very first tick (no ordering guard before it) was accepted, stamped ``ts``."""
        if (hint := first_ts_hint(ts)) is not None:
            self.ts_unit_streams += 1
            if len(self.ts_unit_notes) < MAX_TS_UNIT_NOTES:
                self.ts_unit_notes[stream] = hint
                if self.notify is not None:
                    self.notify(f"stream {quoted(stream)}: {hint}")

    def accepted(self, stream: str, ts: int, now_ns: int) -> None:
        """A wire tick of ``stream`` stamped ``ts`` accepted at the receiver's clock ``now_ns``."""
        if ts - now_ns > AHEAD_OF_CLOCK_NOTE_NS:
            self._note_ahead_of_clock(stream, ts, now_ns)

    def _note_ahead_of_clock(self, stream: str, ts: int, now_ns: int) -> None:
        """A wire tick of ``stream`` accepted well ahead of the clock: counted, and said for a stream's first."""
        self.ahead_of_clock_ticks += 1
        ahead_s = (ts - now_ns) / 1e9
        noted = self.ahead_of_clock.get(stream)
        if noted is not None:
            noted[0], noted[1] = noted[0] + 1, max(noted[1], round(ahead_s, 3))
            return
        if len(self.ahead_of_clock) >= MAX_TS_UNIT_NOTES:
            return
        self.ahead_of_clock[stream] = [1, round(ahead_s, 3)]
        if self.notify is not None:
            ahead = f"{ahead_s / 3600:.1f} h" if ahead_s >= 3600 else f"{ahead_s / 60:.0f} min"
            self.notify(f"stream {quoted(stream)}: accepted a tick stamped {ahead} ahead of this clock (ts {ts}, "
                        f"{utc_text(ts)}): its later ticks older than that are refused as ts_backwards until the "
                        f"clock passes it; if the stamp is wrong (forged, or a clock or unit mistake), `flashtick "
                        f"forget {stream}` drops the stream, its ordering guard included (stats ticks_ahead_of_clock)")

    def ahead_of_clock_summary(self) -> dict[str, Any]:
        """For stats: wire ticks accepted over AHEAD_OF_CLOCK_NOTE_NS ahead of the clock (empty when none)."""
        if not self.ahead_of_clock_ticks:
            return {}
        return {"ticks_ahead_of_clock": {"ticks": self.ahead_of_clock_ticks, "streams": {
            stream: {"ticks": ticks, "max_ahead_s": ahead} for stream, (ticks, ahead) in self.ahead_of_clock.items()}}}

    def ts_unit_summary(self) -> dict[str, Any]:
        """For stats: streams whose first ts was 0 or looked like seconds, ms or us rather than ns (empty when none)."""
        if not self.ts_unit_streams:
            return {}
        return {"ts_unit_suspects": {"streams": self.ts_unit_streams, "first": dict(self.ts_unit_notes)}}
