"""ShardReplies: a shard's reply taken in at a sharded front door (shard_calls.py collects the replies).

A reply says what the shard did with its call: the standing answers it computed (each gets its topic's next seq
here, through the stream's answer mix, and goes to the answer log; one whose query was replaced or removed after the
call went out is dropped), the asks' replies (read as this front door published them), each stream's progress and
the backlog, streams its admission refused or it expired for idleness (forgotten here as one engine forgets them),
and, after a restore, what it rebuilt.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any


from connectors.ticks import counted
from engine.jobs import JobOutcome
from engine.service.shard import RemoteJob
from engine.service.shard_link import ShardLink
from engine.service.stream_removal import forget_answer_side
from queries.cache import Answer
from queries.spec import QuerySpec


class ShardReplies:
    """The front door's reading of its shards' replies. ``front`` is the ShardedPipeline (typed Any: it imports
    this module), whose answers, streams and counters the replies change."""

    def __init__(self, front: Any) -> None:
        self.front = front

    def take(self, link: ShardLink, reply: dict[str, Any], version: int, stale: set[str],
             outcomes: list[JobOutcome]) -> None:
        """``link``'s shard's reply to a call that went out at registry ``version``: its standing answers
        published, its asks' replies, its streams' progress, stats, refusals, restore and expiries, each added
        to ``outcomes`` or kept here; nothing of the ``stale`` streams (forgotten here after the call went out)."""
        front = self.front
        for wire in reply["answers"]:
            if wire["stream"] in stale:
                continue
            answer = self._publishable(Answer(**wire), version)
            if answer is not None:
                outcomes.append(JobOutcome(RemoteJob(None), answer))
        for ticket, wire, error, early, context, reason in reply["replies"]:
            spec, stream = front._asked.pop(ticket, (None, None))
            answer = self._as_published(Answer(**wire), spec) if wire else None
            outcomes.append(JobOutcome(RemoteJob(ticket, early, context, reason, stream), answer, error))
        front.progress.update((stream, ticks) for stream, ticks in reply["progress"].items() if stream not in stale)
        link.reported_pending, link.shard_busy = reply["pending_tokens"], reply["busy"]
        if "stats" in reply:
            link.stats = reply["stats"]
        for stream, (ticks, error) in reply.get("refused", {}).items():
            if stream not in stale:
                self._refused_by_shard(link, stream, ticks, error)
        if "restored" in reply:
            restored = reply["restored"]
            refused = reply.get("refused", {})
            if not link.restores:  # its first: the start's (a later one rebuilds a lost shard's streams)
                front.refused_at_start |= refused.keys()
            link.restores.append(restored)
            # (in ticks, as one engine says it: a stream retention left no item of is refused with its count)
            turned_away = (f"; refused {counted(sum(ticks for ticks, _ in refused.values()), 'logged tick')} of "
                           f"{counted(len(refused), 'stream')}: {front.admission_limit()} (was the limit lowered since "
                           f"they were logged? `streams` and `ask` say them refused)") if refused else ""
            print(f"flashtick: {link.name} restored {restored['streams']} streams from {restored['items']} logged "
                  f"items in {restored['s']:.2f} s{turned_away}", file=sys.stderr, flush=True)
        for stream in reply.get("expired", ()):
            if stream not in stale:
                self._expire(link, stream)

    def _publishable(self, answer: Answer, version: int) -> Answer | None:
        """The answer with its topic's next seq, logged and kept; None if its query was replaced or removed
        after the call that computed it went out."""
        front = self.front
        if front.registry.current(answer.query) is None or front.registry.query_version(answer.query) > version:
            front.stale_dropped += 1
            return None
        query = front.flash.compiled(front.registry.current(answer.query))
        answer = dataclasses.replace(answer, value=front.adaptation.adapt(query, answer.stream, answer.value,
                                                                          answer.version),
                                     query_version=front.registry.query_version(answer.query))
        answer = front.cache.publish(answer)
        kept = front.published.kept(answer)
        front.history.add(answer.topic, answer.seq, kept.packed)
        front.data.answers.record(answer, kept.fields)  # before it is published: a seq seen is never handed out again
        front.data.answers.roll_if_full()  # (the cache holds what the log does here: its checkpoint may be taken)
        front.answers_out += 1
        front.scores.expect(answer, front.registry.current(answer.query))
        return answer

    def _as_published(self, answer: Answer, spec: QuerySpec | None) -> Answer:
        """An ask's answer as this front door published it: one a shard answered early from its cache (seq > 0)
        carries the shard's own seq; the same answer here has the topic's seq. One computed for the asker
        (seq 0) is read through the stream's current answer mix, as one engine reads it (``keep=False``: an
        ask never changes what is published): the shards answer with the model's own value, the mixes live
        here."""
        front = self.front
        if answer.seq == 0:
            if spec is None:
                return answer
            value = front.adaptation.adapt(front.flash.compiled(spec), answer.stream, answer.value, answer.version,
                                           keep=False)
            registered = front.registry.current(spec.name) is spec
            return dataclasses.replace(answer, value=value, query_version=(
                front.registry.query_version(spec.name) if registered else 0))
        published = front.cache.get(answer.query, answer.stream)
        if published is not None and published.version == answer.version:
            return published
        return dataclasses.replace(answer, seq=0)

    def _expire(self, link: ShardLink, stream: str) -> None:
        if not self._let_go(link, stream):
            return  # it sent data since: the shard takes its kept context back, the front door keeps it
        front = self.front
        # its KV goes; its codec state, trigger state, context and latest answers stay (engine/kept_contexts.py:
        # `get` reads them, said idle), the answers until its context is given up (logged: a restart does the same)
        front.encoders.drop(stream)
        front.cache.pack_stream(stream)  # (kept packed: a quarter of the memory)
        for forgotten in front.encoders.take_forgotten():  # (scheduler.expired_streams_kept)
            front.cache.drop_stream(forgotten)
            front.data.answers.forget_stream(forgotten)
            forget_answer_side(front.registry, front.cache, forgotten)
        front.data.items.log_expired(stream)
        front._expired.append(stream)

    def _refused_by_shard(self, link: ShardLink, stream: str, ticks: int, error: str) -> None:
        """``ticks`` of ``stream`` that its shard's admission refused after this front door accepted and logged them
        (a restart under a lowered scheduler.max_streams): handed to the server as refused, and the stream forgotten
        here as one engine forgets it, so `streams` does not show counts no session holds and admission counts
        the shard's streams as it does; not while more of it waits to go to the shard (its reply says again)."""
        self.front.turned_away.add(stream, ticks, error)
        if self._let_go(link, stream):
            self.front.encoders.forget(stream)

    def _let_go(self, link: ShardLink, stream: str) -> bool:
        """``stream``, which its shard no longer holds (expired, refused), let go of here: its shard, progress, live
        scores and answer mix; False, keeping it, while items of it wait to go to the shard (which takes it again)."""
        if link.buffers(stream):
            return False
        front = self.front
        link.streams.discard(stream)
        front.shard_of.pop(stream, None)
        front.progress.pop(stream, None)
        front.scores.drop_stream(stream)
        front.adaptation.drop_stream(stream)
        front.receive_clock.drop(stream)  # (its next ticks may come from another clock)
        return True
