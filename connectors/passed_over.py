"""PassedOver: per stream, the ticks taken off the wire since its last accepted one that were not accepted.

A feed resuming after a restart places itself by each stream's ``last_ts`` and ``at_last_ts``
(docs/wire-protocol.md, "A service that stops"): of its ticks stamped ``last_ts`` it leaves out the first
``at_last_ts``. Those must be counted as the feed sent them, so a tick refused (a crossed quote, overloaded,
log_unavailable, ...) or dropped by conflation counts there too when an accepted tick of its stream at the same
``ts`` follows it; counting only accepted ticks made the feed send an accepted one again, taken twice (an equal
``ts`` is accepted). This keeps the run of such ticks at one ``ts`` until the stream's next accepted item, which
carries the count (``EncodedTick.passed``) into the tick log, so a restart's replay counts them too. Ticks not
accepted after a stream's last accepted one are not counted: a resuming feed sends them again, and nothing of
them is held.
"""

from __future__ import annotations

from collections import OrderedDict

# streams with no accepted tick tracked here, the most recent kept: a flood of refused names (1M distinct ones) costs
# this many entries (~200 bytes each), not one per name; a stream whose refused tick is followed by its accepted one
# soon after (the case the count is for: a resuming feed) is among the most recent, unless a flood of this many other
# new names came between the two
MAX_UNHELD_STREAMS = 16_384


class PassedOver:
    def __init__(self) -> None:
        # stream -> (ts, ticks stamped ts taken and not accepted): streams held (an accepted tick, live or before an
        # expiry), bounded by the streams held; and the others, the most recent last, bounded by MAX_UNHELD_STREAMS
        self._runs: dict[str, tuple[int, int]] = {}
        self._unheld: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self.forgotten = 0  # unheld streams' runs dropped for newer ones (their ticks still counted where refused)

    def note(self, stream: str, ts: int, ticks: int, last_ts: int | None, held: bool) -> None:
        """``ticks`` of ``stream`` stamped ``ts`` were refused or conflated; ``last_ts``: its last accepted tick's
        (older ones never count: a feed never sends them again), ``held``: whether the stream has any."""
        if last_ts is not None and ts < last_ts:
            return
        run = self._runs.pop(stream, None) or self._unheld.pop(stream, None)
        if run is not None and run[0] == ts:
            run = (ts, run[1] + ticks)
        else:
            run = (ts, ticks)  # a new ts: the earlier run is before the next accepted tick's ts
        if held:
            self._runs[stream] = run
            return
        self._unheld[stream] = run  # (popped above: now the most recent)
        if len(self._unheld) > MAX_UNHELD_STREAMS:
            self._unheld.popitem(last=False)
            self.forgotten += 1

    def before(self, stream: str, ts: int) -> int:
        """How many ticks of ``stream`` stamped ``ts`` were passed over since its last accepted one."""
        run = self._runs.get(stream) or self._unheld.get(stream)
        return run[1] if run is not None and run[0] == ts else 0

    def accepted(self, stream: str) -> None:
        self._runs.pop(stream, None)
        self._unheld.pop(stream, None)

    def __len__(self) -> int:
        return len(self._runs) + len(self._unheld)
