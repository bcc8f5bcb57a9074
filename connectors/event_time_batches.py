"""Event-time batches: the tick groups a backtest answers at (engine/service/backtest_loop.py), cut by where each
batch's ``batch_ns`` window ends (`batch_end`, one definition for the backtest, `evaluate --batch-ms` and the live
feed), and the cutter that sends a live feed in the same batches (`flashtick feed --batch-ms`), so that a live run
of a file answers at the ticks its backtest answers at.
"""

from __future__ import annotations

from connectors.ticks import Tick
from engine.quoting import quoted

# An event-time batch of more ticks is sent in messages of this many (the service's default max_message_bytes,
# 1 MiB, holds ~13,000 ticks of a short stream name)
MAX_BATCH_TICKS = 8192


def batch_end(ts: int, batch_ns: int) -> int:
    """Where the event-time batch a tick stamped ``ts`` starts ends: the end of its ``batch_ns`` window. A tick at or
    past it starts the next batch (the backtest's tick groups, and EventTimeCutter's messages)."""
    return ts - ts % batch_ns + batch_ns


class EventTimeCutter:
    """Cuts ticks, in the order they are sent, into the event-time batches a backtest answers at
    (engine/service/backtest_loop.py): a batch starts at a tick and takes every following tick stamped before the
    end of that tick's ``batch_ns`` window (``ts - ts % batch_ns + batch_ns``); the first tick at or past it
    starts the next. Sent one message each, the batches are the live engine's tick groups, so a live run of a
    file answers at the ticks its backtest with the same ``--batch-ms`` answers at."""

    def __init__(self, batch_ns: int) -> None:
        if isinstance(batch_ns, bool) or not isinstance(batch_ns, int) or batch_ns <= 0:
            raise ValueError(f"batch_ns must be an int > 0, got {quoted(batch_ns)}")
        self.batch_ns = batch_ns
        self.held: list[Tick] = []  # the open batch: its end is not seen yet
        self._end: int | None = None

    def add(self, ticks: list[Tick]) -> list[list[Tick]]:
        """The batches that ``ticks`` complete, in order."""
        done = []
        for tick in ticks:
            if self._end is None or tick.ts >= self._end:
                if self.held:
                    done.append(self.held)
                self.held, self._end = [], batch_end(tick.ts, self.batch_ns)
            self.held.append(tick)
        return done

    @property
    def end(self) -> int | None:
        """Where the open batch's window ends (None with no batch open): once no tick stamped before it can come
        any more, the batch is complete (a paced feed sends it then: connectors/feed_pump.py)."""
        return self._end if self.held else None

    def flush(self) -> list[list[Tick]]:
        """The open batch, at the end of the ticks (or of the feed)."""
        held, self.held, self._end = self.held, [], None
        return [held] if held else []
