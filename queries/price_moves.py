"""Price-move triggers (`{move_bps: N}`): per (query, stream) the reference mark, and the due points moves made.

A `move_bps` query fires at the tick whose mark (the service's: a trade's price, a two-sided quote's mid) first lies
N basis points or more from its reference, either way; the reference is then that mark. The stream's first marked
tick fires too and sets the first reference. So where it fires is a function of the stream's marks alone, never of
how ticks are grouped into messages, batches or forwards: the service hands every accepted tick's mark over
(``observe``), and a tick that fires a query becomes a due point of its own inside its group (Scheduler.due_point),
where the registry's ``due`` answers the queries recorded here (``take``) and no others.

Whatever rebuilds trigger state restores the reference: a restart or `--resume` says where each query last fired
(``anchor``: the tick count and event time of its last answer), and the reference becomes the mark of that very
tick as the rebuild's replay reaches it; ticks replayed before it are passed over, as are ticks already seen. The
event time tells that tick from one of the same count before an expiry the log replays (a stream that expired
counts its ticks from 1 again).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.basis_points import bps_moved


@dataclass(frozen=True)
class Reference:
    """The mark at a query's last firing on a stream, and the stream's tick count and event time there; ``mark``
    None: an anchor (a restart's or a resume's), whose mark is that of the tick at (``ticks``, ``ts``) once the
    replay reaches it."""

    mark: float | None
    ticks: int
    ts: int


def moved(mark: float, reference: float, bps: float) -> bool:
    """Whether ``mark`` lies ``bps`` basis points or more from ``reference``, either way, as the decimal prices say
    it (bps_moved: 100 -> 100.1 is 10 bps, though float division makes it 9.9999999999994)."""
    if reference == 0:  # (no relative move from a zero price: any other mark is one)
        return mark != 0
    return abs(bps_moved(mark, reference)) >= bps


class PriceMoves:
    """The references and pending due points of every move query; the Registry holds one, under its lock."""

    def __init__(self) -> None:
        self.references: dict[str, dict[str, Reference]] = {}  # query -> stream -> reference
        self._due: dict[str, dict[int, set[str]]] = {}  # stream -> tick count -> the move queries due there

    def observe(self, query: str, stream: str, ticks: int, ts: int, mark: float, bps: float) -> bool:
        """The tick at count ``ticks`` of ``stream``, stamped ``ts``, has ``mark``: whether it fires ``query`` (its
        reference moves)."""
        per_stream = self.references.setdefault(query, {})
        reference = per_stream.get(stream)
        if reference is not None and reference.mark is None:  # an anchor: its own tick sets the reference, or
            if (ticks, ts) == (reference.ticks, reference.ts) or ts > reference.ts:
                per_stream[stream] = Reference(mark, ticks, ts)  # (retention dropped it) the first tick after it
            return False
        if reference is not None:
            if ticks <= reference.ticks or not moved(mark, reference.mark, bps):
                return False  # (a tick seen already, replayed)
        per_stream[stream] = Reference(mark, ticks, ts)
        return True

    def would_fire(self, query: str, stream: str, points: list[tuple[int, int, float]], bps: float) -> list[int]:
        """The tick counts of ``points`` ((tick count, event time, mark) of ``stream``'s next ticks, in order) that
        would fire ``query``, its reference left as it is: what a restart's tail owes, counted before it is run."""
        per_stream = self.references.setdefault(query, {})
        kept = per_stream.get(stream)
        try:
            return [ticks for ticks, ts, mark in points if self.observe(query, stream, ticks, ts, mark, bps)]
        finally:
            if kept is None:
                per_stream.pop(stream, None)
            else:
                per_stream[stream] = kept

    def due_at(self, stream: str, ticks: int, queries: list[str]) -> None:
        """``queries`` fired at ``stream``'s tick ``ticks``, a due point the engine will reach."""
        self._due.setdefault(stream, {}).setdefault(ticks, set()).update(queries)

    def take(self, stream: str, ticks: int) -> set[str]:
        """The move queries due at ``stream``'s tick count ``ticks``, taken. Points before it are dropped: the engine
        checks a stream's due points in order, so those were booked by a rebuild (answered before it) or their query
        was replaced, never to be reached."""
        points = self._due.get(stream)
        if not points:
            return set()
        due = points.pop(ticks, set())
        for passed in [t for t in points if t < ticks]:
            del points[passed]
        return due

    def would_take(self, stream: str, ticks: int) -> set[str]:
        """What ``take`` would return, taking nothing."""
        return set(self._due.get(stream, {}).get(ticks, ()))

    def anchor(self, query: str, stream: str, ticks: int, ts: int) -> None:
        """``query`` last fired on ``stream`` at tick count ``ticks``, event time ``ts`` (a restart's answer log, a
        resume's parts): its reference is that tick's mark. One already taken there (the rebuild replayed that
        tick) is kept."""
        per_stream = self.references.setdefault(query, {})
        reference = per_stream.get(stream)
        if reference is None or reference.mark is None or (reference.ticks, reference.ts) != (ticks, ts):
            per_stream[stream] = Reference(None, ticks, ts)

    def forget(self, query: str, stream: str | None = None) -> None:
        """``query``'s references (on ``stream`` alone, when given) and due points go: it fires afresh."""
        if stream is None:
            self.references.pop(query, None)
        else:
            self.references.get(query, {}).pop(stream, None)
        for points in self._due.values() if stream is None else [self._due.get(stream, {})]:
            for names in points.values():
                names.discard(query)

    def drop_stream(self, stream: str) -> None:
        """A stream expired or forgotten: its tick count starts over, so every query fires on its first tick back."""
        for per_stream in self.references.values():
            per_stream.pop(stream, None)
        self._due.pop(stream, None)

    def replayed_expiry(self, stream: str) -> None:
        """A restart's replay passed an expiry (or a `forget`) of ``stream``: the references its ticks before it set
        go, as the live run's did there; an anchor not reached yet stays (its tick comes after the expiry)."""
        for per_stream in self.references.values():
            reference = per_stream.get(stream)
            if reference is not None and reference.mark is not None:
                del per_stream[stream]
        self._due.pop(stream, None)
