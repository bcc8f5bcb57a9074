"""What a feed did, said when it ends: `FeedStats`, the counts `run_feed` returns (ticks and messages sent, the
engine's rejections of our streams, restarts resumed, ticks the engine never accounted for, time spent waiting on
it) and `summary`, the one line (and the engine's first error of each reason) that `flashtick feed` prints.
"""

from __future__ import annotations

from typing import NamedTuple

from connectors.event_time_batches import MAX_BATCH_TICKS
from connectors.ticks import counted

class FeedStats(NamedTuple):
    ticks: int
    messages: int
    seconds: float  # the sending: from the first read of the source to the last message sent
    rejected: dict[str, int] | None = None  # reason -> count for our streams; None when not watched
    unattributed: int = 0  # rejections without a stream seen meanwhile (maybe another feed's)
    others: int = 0  # rejections of our streams' ticks another publisher sent (its tag echoed, not ours)
    unconfirmed: int = 0  # with a FeedResume: ticks sent that the engine had neither accepted nor refused at the end
    restarts: int = 0  # with a FeedResume: connections to the engine that dropped and were resumed
    resent: int = 0  # ticks sent again after those
    lost: int = 0  # ticks the engine had taken and a restart did not keep (not sent again: the feed had let them go)
    superseded: int = 0  # with a FeedResume: ticks the engine left out for a feed placed after this one began
    sent_twice: int = 0  # ... and as sent twice, as many as it took of their streams after placing this feed
    split_batches: int = 0  # with batch_ns: event-time batches too large for one message, sent in several
    held_back: int = 0  # with batch_ns: ticks read of the batch open at a stop, not sent (not in ``ticks``)
    first_errors: dict[str, str] | None = None  # reason -> the engine's text of the first such rejection, when watched
    # with a FeedResume: of ``seconds``, those spent waiting on the engine's control socket (its `streams` replies,
    # late from a busy engine: nothing is sent meanwhile); and after the last send, those spent waiting for the engine
    # to account for every tick sent (not in ``seconds``: the pace of the feed is not the engine's catching up)
    control_s: float = 0.0
    wait_s: float = 0.0

    def summary(self) -> str:
        """One line: "sent N ticks in M messages over S s" and, when watched, "; K rejected (reason: n, ...)"."""
        line = f"sent {counted(self.ticks, 'tick')} in {counted(self.messages, 'message')} over {self.seconds:.1f} s"
        if self.control_s >= CONTROL_SAID_S:
            line += f" ({self.control_s:.1f} s of it waiting on the engine's control socket, sending nothing)"
        if self.wait_s >= CONTROL_SAID_S:  # (a stop, or a stalled engine, ends the wait before it took them all)
            line += f", then {self.wait_s:.1f} s " + ("waiting for the engine to take them" if self.unconfirmed else
                                                     "until the engine had taken every tick")
        if self.rejected is None:
            return line + self._split() + self._resumed()
        n = sum(self.rejected.values())
        line += f"; {n} rejected" + (f" ({', '.join(f'{r}: {c}' for r, c in sorted(self.rejected.items()))})"
                                     if n else "")
        if self.unattributed:
            line += f"; {self.unattributed} rejections without a stream (maybe another feed's)"
        if self.others:  # one stream, one publisher: said, not counted as ours
            line += (f"; {counted(self.others, 'rejection')} of ticks another publisher sent of these streams (not "
                     f"counted here)")
        firsts = [f"\n  first {reason}: {error}" for reason, error in sorted((self.first_errors or {}).items())
                  if self.rejected.get(reason)]  # why, in the engine's words, not only how many
        return line + self._split() + self._resumed() + "".join(firsts)

    def _split(self) -> str:
        line = (f"; {counted(self.split_batches, 'event-time batch')} over {MAX_BATCH_TICKS:,} ticks sent in several "
                f"messages of {MAX_BATCH_TICKS:,} (a backtest cuts it so too)") if self.split_batches else ""
        if self.held_back:  # review400 #1, review402 #1: a part sent alone answered where a backtest does not
            line += (f"; {counted(self.held_back, 'tick')} of the event-time batch open at the stop held back, not "
                     f"sent: the next run sends that batch whole, one tick group as a backtest cuts it")
        return line

    def _resumed(self) -> str:
        line = ""
        if self.restarts:
            line += (f"; the engine's connection dropped {counted(self.restarts, 'time')}, "
                     f"{counted(self.resent, 'tick')} sent again")
        if self.lost:  # sent = what the engine holds + this + rejected + unconfirmed: the line must add up
            line += (f"; {counted(self.lost, 'tick')} the engine had taken lost with a restart that did not keep them "
                     f"(its data directory?): not sent again")
        if self.superseded:  # one stream, one publisher (review430 #11: the line must add up to what was sent)
            line += (f"; {counted(self.superseded, 'tick')} left out by the engine for another feed's of the same "
                     f"streams, placed after this one began")
        if self.sent_twice:
            line += (f"; {counted(self.sent_twice, 'tick')} left out by the engine as sent twice, as many as it took "
                     f"of these streams after placing this feed (a stopped feed's last ticks read late; or another "
                     f"feed's, and then these are lost: a stream takes one publisher)")
        if self.unconfirmed:
            line += (f"; {self.unconfirmed} not accounted for by the engine (neither accepted nor refused) when the "
                     f"feed stopped waiting: `flashtick streams` says what it holds")
        return line


CONTROL_SAID_S = 0.1  # a wait on the engine this long is said in the summary (a shorter one changes no figure shown)
