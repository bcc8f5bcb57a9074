"""SeqAtCount: which `seq` of its feed's a stream's answer at a tick count covers (review376 #7: an answer carried
the service's `version`, its count of the ticks it accepted, and nothing a publisher owns, so a strategy could not
key "which of my ticks did this answer" once one tick was refused, dropped as a duplicate or lost at a stop).

An answer's `version` is its stream's tick count when computed; the tick that brought the count there carried the
`seq` the answer covers (`tick_seq` on the answer). Most feeds number a stream's ticks one by one, so seq - count
stays the same from tick to tick: per stream this keeps only where it changes (a gap, a refused tick, a numbering
begun again, a tick without `seq`), the BREAKS_KEPT most recent, so a well-behaved stream costs one pair. An answer
computed long after its tick (a backlog) still finds it; one older than every break kept, or on a tick without
`seq`, has none. Fed by the stream table's commit, a tick log's replay included, so a restart knows the same.
Apart from connectors/tick_sequences.py because that decides what a `seq` does to a tick; this only remembers it.
"""

from __future__ import annotations

from bisect import bisect_right

BREAKS_KEPT = 64  # a stream's most recent changes of seq - count kept (an answer older than all of them: no tick_seq)


class SeqAtCount:
    """Per stream: the counts at which seq - count changed, and the offset from each (None: ticks without seq)."""

    def __init__(self) -> None:
        self._counts: dict[str, list[int]] = {}  # stream -> the tick counts where the offset changed, rising
        self._offsets: dict[str, list[int | None]] = {}  # stream -> seq - count from each of them (None: no seq)

    def committed(self, stream: str, count: int, seq: int | None) -> None:
        """A tick (or a tokenized item of several) of ``stream`` taken, bringing its count to ``count``, numbered
        ``seq`` (None: sent without one)."""
        offsets = self._offsets.get(stream)
        offset = None if seq is None else seq - count
        if offsets is None:
            if offset is None:
                return  # (a stream never numbered costs nothing)
            self._counts[stream], self._offsets[stream] = [count], [offset]
            return
        counts = self._counts[stream]
        if count <= counts[-1]:  # the count went back (a stream started again): what was kept is another count's
            self._counts[stream], self._offsets[stream] = [count], [offset]
            return
        if offsets[-1] == offset:
            return
        counts.append(count)
        offsets.append(offset)
        if len(counts) > BREAKS_KEPT:
            del counts[0], offsets[0]

    def of(self, stream: str, count: int) -> int | None:
        """The `seq` of the tick that brought ``stream`` to ``count`` (None: it carried none, or it is older than
        every change kept)."""
        counts = self._counts.get(stream)
        if counts is None:
            return None
        at = bisect_right(counts, count) - 1
        if at < 0:
            return None
        offset = self._offsets[stream][at]
        return None if offset is None else count + offset

    def forget(self, stream: str) -> None:
        """A stream forgotten (its count starts again at its next tick)."""
        self._counts.pop(stream, None)
        self._offsets.pop(stream, None)
