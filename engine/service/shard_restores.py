"""ShardRestores: what a read of the tick log gives a shard's restore, at a sharded front door (sharded.py).

The log's replay (log_replay.ReplayTarget) books each item, retention start and expiry here, by stream; ``logged``
then packs one shard's share for its restore (shard.pack_logged). Both the front door's start (every shard) and a
lost shard's restore (the log read on a thread) read the log onto it, so it lives apart from either.
"""

from __future__ import annotations

from typing import Any

from connectors.encoder import EncodedTick
from engine.scheduler import AdmissionRefused
from engine.service.move_marks import move_mark
from engine.service.shard_items import Item, pack_logged


class ShardRestores:
    """A tick log replay's target (log_replay.ReplayTarget) at a sharded front door: each booked item, retention
    start and expiry goes to the restore of its stream's shard. At the start (``accepted``) the front door's
    own per-stream state (live scores, the answer adaptation) sees them as the live path did; a shard restored
    mid-run (read on a thread) leaves that state, which never stopped, alone."""

    def __init__(self, front: Any, accepted: bool) -> None:
        self.front = front  # the ShardedPipeline (typed Any: it imports this module)
        self.accepted = accepted
        self.items: dict[str, list[Item]] = {}  # stream -> its booked items, in order
        self.starts: dict[str, tuple[int, int]] = {}  # stream -> (ticks, last ts) retention dropped
        self._counts: dict[str, int] = {}  # stream -> its tick count so far (at the start: the move references')
        # streams the live run expired and that sent nothing since: their shard restores their items and expires them
        # again, so their contexts are kept there as live (engine/kept_contexts.py)
        self.expired: dict[str, Any] = {}  # stream -> the ShardLink that held it (None: not placed here)

    def restore(self, item: EncodedTick) -> None:
        if self.accepted and (problem := self._refused(item.stream, item.ticks)) is not None:
            raise AdmissionRefused(problem)  # (split_log counts it, refused as stream_refused)
        self.expired.pop(item.stream, None)
        self.items.setdefault(item.stream, []).append((item.stream, item.tokens, item.ts, item.ticks,
                                                        move_mark(item.tick)))
        if self.accepted:
            self.front._owner(item.stream)
            self.front.adaptation.accepted(item)
            self.front.scores.accepted(item)
            # the front door's own move references, as the shard's replay sets them: what it says the tail owes
            count = self._counts.get(item.stream, self.starts.get(item.stream, (0, 0))[0]) + item.ticks
            self._counts[item.stream] = count
            if (mark := move_mark(item.tick)) is not None:
                self.front.registry.moved(item.stream, count, item.ts, mark)

    def start_at(self, stream: str, ticks: int, last_ts: int, booked: Any = None) -> None:
        if self.accepted and self._refused(stream, ticks) is not None:
            return
        self.starts[stream] = (ticks, last_ts)  # (a front door's log keeps no sessions: the shards hold them)
        if self.accepted:
            self.front._owner(stream)
            self.front.progress[stream] = ticks
            self.front.scores.start_at(stream, ticks)
            self.front.adaptation.start_at(stream, ticks)

    def drop(self, stream: str, forgotten: bool = False) -> None:
        """An expiry (or a `forget`). A stream a shard holds reads expired, as live: the refusals of its items
        before it go (the later event wins). One this start refused and has not admitted since holds nothing to
        expire: it stays refused at this start, as one engine's replay keeps it (engine_restart._EngineReplay.drop);
        a forgotten one counts nowhere. An expired one keeps its items, restored and expired again by its shard
        (its context kept there, as live), and its counts here."""
        if not forgotten:  # let go of here as the live expiry does: its slot is free for the streams after it
            if self.accepted and stream in self.front.shard_of:
                self.front.turned_away.discard(stream)
            self.expired[stream] = self._let_go(stream) if self.accepted else None
            return
        self.expired.pop(stream, None)
        self.items.pop(stream, None)
        self.starts.pop(stream, None)
        self._counts.pop(stream, None)
        if self.accepted:
            self.front.registry.replayed_expiry(stream)
            self.front.turned_away.discard(stream)
            self._let_go(stream)

    def _let_go(self, stream: str) -> Any:
        """``stream`` let go of at the front door, as a live expiry does (shard_replies._let_go): its shard, progress,
        live scores and answer mix; returns the ShardLink that held it (None: none did)."""
        link = self.front.shard_of.pop(stream, None)
        if link is not None:
            link.streams.discard(stream)
        self.front.progress.pop(stream, None)
        self.front.scores.drop_stream(stream)
        self.front.adaptation.drop_stream(stream)
        return link

    def context_gone(self, stream: str) -> None:
        """(A front door holds no session, and a shard's restart restores no expired stream's context.)"""

    def expired_on(self, link: Any) -> set[str]:
        """The expired streams ``link``'s shard held, whose items it restores and expires again."""
        return {stream for stream, held_by in self.expired.items() if held_by is link}

    def forget(self, stream: str) -> None:
        self.drop(stream, forgotten=True)  # (its items go before any shard sees them: no shard refuses them)

    def _refused(self, stream: str, ticks: int) -> str | None:
        """At the start (``accepted``), admission in log order, as one engine's replay admits (a limit lowered
        since the log was written): a stream its shard holds nothing of is refused where that shard holds as many
        streams as it may now, each expiry read so far having freed its stream's slot. The shard saw only the streams
        held at the end, all at once, and so admitted others: those an expiry had not made room for yet. Refused,
        its ticks are counted as one engine's are (why); it never reaches a shard."""
        if stream in self.front.shard_of:
            return None
        problem = self.front._admission_problem(stream)
        if problem is not None:
            self.front.turned_away.add(stream, ticks, f"stream_refused: {problem}")
        return problem

    def place_tail(self, tail: list[EncodedTick | None]) -> tuple[list[EncodedTick | None], int]:
        """The owed tail's streams placed on their shards, admitted in its order as ``restore`` admits booked items.
        A stream whose whole log is owed (the stop came before any answer of it was logged) was booked nothing, so
        only its tail places it: without this no shard was sent it and the restart held none of its ticks. Returns
        the tail less the items admission refused (a limit lowered since; counted in turned_away), and how many."""
        kept: list[EncodedTick | None] = []
        refused = 0
        for item in tail:
            if item is not None and self.accepted:
                if self._refused(item.stream, item.ticks) is not None:
                    refused += 1
                    continue
                self.front._owner(item.stream)
            kept.append(item)
        return kept, refused

    def committed(self, tail: list[EncodedTick | None]) -> dict[str, int]:
        """Every stream's tick count once the tail is in (where a query registered now starts)."""
        counts = {stream: self.starts.get(stream, (0, 0))[0] + sum(item[3] for item in items)
                  for stream, items in self.items.items()}
        for stream in self.starts.keys() - counts.keys():
            counts[stream] = self.starts[stream][0]
        for item in tail:
            if item is not None:
                counts[item.stream] = counts.get(item.stream, 0) + item.ticks
        return counts

    def logged(self, mine: set[str], tail: list[EncodedTick | None]) -> dict[str, Any]:
        """What restores the shard of the streams ``mine``: their items, starts and tail (pack_logged)."""
        items = [item for stream in self.items if stream in mine for item in self.items[stream]]
        starts = {stream: start for stream, start in self.starts.items() if stream in mine}
        return {**pack_logged(items, starts, [item for item in tail if item is None or item.stream in mine]),
                "expired": [stream for stream in self.expired if stream in mine]}
