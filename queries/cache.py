"""The latest answer per (query, stream), stamped with the tick count and event time it was computed at.

Reading is a dictionary lookup with no lock: `put` replaces entries whole
(an `Answer` is immutable) under a lock, and a dict read concurrent with a
single-key write is safe. Sequence numbers are per topic and outlive dropped
answers, so a subscriber never sees a topic's seq go backwards, even when a
query is replaced and its answers dropped.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from typing import Any

import msgpack


@dataclass(frozen=True)
class Answer:
    """One computed answer. `version` is the stream's committed tick count when computed, `data_ts` the
    event time (int ns) of the latest tick included, `answer_ts` the wall clock (int ns) when computed,
    `query_version` the registry version at which the query that computed it was (re)registered (0: a spec asked
    ad hoc, or an answer logged before it was recorded), so a consumer tells a replaced query's answers apart."""

    query: str
    stream: str
    topic: str
    seq: int
    version: int
    data_ts: int
    answer_ts: int
    value: dict[str, Any]
    model: str
    query_version: int = 0

    def __post_init__(self) -> None:
        if self.seq < 0:
            raise ValueError(f"answer seq is >= 0 (0: computed for an ask, never published), got {self.seq}")
        if self.version < 0:
            raise ValueError(f"answer version is a tick count, >= 0, got {self.version}")

    def stale_ticks(self, current_version: int) -> int:
        """How many ticks the stream has committed since this answer was computed."""
        return current_version - self.version

    @classmethod
    def from_wire(cls, wire: dict[str, Any]) -> Answer:
        """An answer back from its wire form, the keys a published payload adds to it (``data_age_ms``, ``caveats``,
        ...: kept beside it in the answer log and the gap-fill history) left out."""
        return cls(**{name: wire[name] for name in ANSWER_FIELDS if name in wire})

    def to_wire(self) -> dict[str, Any]:
        """The published payload: msgpack-able primitives. The value is the evaluator's own dict, shared with the
        cached answer, not a copy (asdict's deep copy was a tenth of a backtest): read it, don't change it."""
        return {name: getattr(self, name) for name in ANSWER_FIELDS}


ANSWER_FIELDS = tuple(f.name for f in fields(Answer))


class AnswerCache:
    """Latest answer per (query, stream). `clock` stamps answer_ts; pass a fixed one for byte-identical replays."""

    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._answers: dict[str, dict[str, Answer]] = {}  # query -> stream -> latest answer
        self._seq: dict[str, int] = {}  # topic -> last seq handed out
        # the highest seq of the topics forgotten (forget_topics): a topic not in _seq starts above it, so a topic
        # forgotten and used again never repeats a seq, for one int instead of a seq per topic ever used
        self.seq_floor = 0
        self._count = 0
        # stream -> query -> (topic, answer_ts, packed wire form): the latest answers of a stream expired for idleness,
        # kept with its context and packed (~300 bytes each, against ~1.2 KiB as objects: a scanner keeps up to
        # scheduler.expired_streams_kept such streams) until it is answered again (``pack_stream``)
        self._idle: dict[str, dict[str, tuple[str, int, bytes]]] = {}
        # query -> stream -> (topic, seq) of the latest answer drop_query forgot, until the query answers the stream
        # again: a `get` then says the query was replaced after that seq, not that the stream has no answer "yet"
        self._forgotten: dict[str, dict[str, tuple[str, int]]] = {}
        # topic -> last seq, of the topics no registered query publishes on any more (``retire_topics``: a query
        # removed, or replaced by one with another topic): still listed by ``topics`` and numbered by ``last_seq``
        # while the gap-fill history keeps answers of them (a client away meanwhile still finds and fills them),
        # then dropped (``drop_retired``) under ``seq_floor``: the seqs kept follow the registered queries' topics,
        # not every topic ever published on
        self._retired: dict[str, int] = {}
        # topic -> its first seq, where that is past 1 (it began past ``seq_floor``): a gap fill from 0 then misses
        # nothing before it (``first_seq``)
        self._first: dict[str, int] = {}

    def put(
        self, query: str, stream: str, topic: str, value: dict[str, Any], version: int, data_ts: int, model: str,
        query_version: int = 0,
    ) -> Answer:
        """Caches (and returns, for publishing) the answer with the topic's next seq; last put wins."""
        with self._lock:
            seq = self._next_seq(topic)
            answer = Answer(query, stream, topic, seq, version, data_ts, self._clock(), value, model, query_version)
            self._seq[topic] = seq
            if self._idle:
                self._unpack(stream)
            if self._forgotten:
                self._forgotten.get(query, {}).pop(stream, None)
            per_query = self._answers.setdefault(query, {})
            self._count += stream not in per_query
            per_query[stream] = answer
        return answer

    def publish(self, answer: Answer) -> Answer:
        """An answer computed elsewhere (an engine shard, whose own seqs do not count): cached as the latest and
        returned with the topic's next seq here, so one cache numbers every topic, whichever engine computed it."""
        with self._lock:
            seq = self._next_seq(answer.topic)
            answer = replace(answer, seq=seq)
            self._seq[answer.topic] = seq
            if self._idle:
                self._unpack(answer.stream)
            if self._forgotten:
                self._forgotten.get(answer.query, {}).pop(answer.stream, None)
            per_query = self._answers.setdefault(answer.query, {})
            self._count += answer.stream not in per_query
            per_query[answer.stream] = answer
        return answer

    def _next_seq(self, topic: str) -> int:
        """The topic's next seq (under the lock): after its last, a retired one's too (in use again), else past
        ``seq_floor``."""
        last = self._seq.get(topic)
        if last is None:
            last = self._retired.pop(topic, None)
            if last is None and self.seq_floor:  # a topic begun (or begun again) past the seqs forgotten
                last = self.seq_floor
                self._first[topic] = last + 1
        return (last or 0) + 1

    def first_seq(self, topic: str) -> int:
        """The seq of the first answer ``topic`` had (as far as its seqs are kept): 1, or past ``seq_floor`` for a
        topic begun after seqs were forgotten (a gap fill from 0 misses none before it)."""
        return self._first.get(topic, 1)

    def unpublished(self, query: str, stream: str, topic: str, value: dict[str, Any], version: int, data_ts: int,
                    model: str, query_version: int = 0) -> Answer:
        """An answer for one asker only (seq 0): not cached, so it never replaces what subscribers saw."""
        return Answer(query, stream, topic, 0, version, data_ts, self._clock(), value, model, query_version)

    def get(self, query: str, stream: str) -> Answer | None:
        per_query = self._answers.get(query)
        answer = None if per_query is None else per_query.get(stream)
        if answer is None and self._idle:
            packed = self._idle.get(stream, {}).get(query)
            answer = None if packed is None else _unpacked(packed)
        return answer

    def pack_stream(self, stream: str) -> int:
        """``stream`` expired for idleness: its latest answers are kept packed (``get`` and ``latest`` still read
        them) until an answer of it is cached again; returns how many."""
        with self._lock:
            packed = {query: (a.topic, a.answer_ts, msgpack.packb(a.to_wire(), use_bin_type=True))
                      for query, per_query in self._answers.items() if (a := per_query.get(stream)) is not None}
            if packed:  # (kept packed before they leave: a lock-free get finds them in one place or the other)
                self._idle.setdefault(stream, {}).update(packed)
                for query in packed:
                    del self._answers[query][stream]
        return len(packed)

    def _unpack(self, stream: str) -> None:
        """(Under the lock) ``stream``'s packed answers back as objects: it is answered again."""
        idle = self._idle.get(stream)
        if idle is None:
            return
        for query, packed in idle.items():
            self._answers.setdefault(query, {})[stream] = _unpacked(packed)
        del self._idle[stream]

    def get_fresh(self, query: str, stream: str, current_version: int, max_stale_ticks: int = 0) -> Answer | None:
        """The cached answer if at most `max_stale_ticks` ticks behind `current_version`, else None (compute anew)."""
        if max_stale_ticks < 0:
            raise ValueError(f"max_stale_ticks must be >= 0, got {max_stale_ticks}")
        answer = self.get(query, stream)
        if answer is None or answer.stale_ticks(current_version) > max_stale_ticks:
            return None
        return answer

    def drop_query(self, name: str) -> int:
        """Forgets a query's answers (on unregister or replace); returns how many. Topic seqs are kept, and so is
        where each stream's last answer was (`forgotten`)."""
        with self._lock:
            dropped = self._answers.pop(name, {})
            for stream in [s for s, idle in self._idle.items() if name in idle]:
                dropped[stream] = _unpacked(self._idle[stream].pop(name))
                if not self._idle[stream]:
                    del self._idle[stream]
            self._count -= len(dropped)
            if dropped:
                self._forgotten.setdefault(name, {}).update({s: (a.topic, a.seq) for s, a in dropped.items()})
        return len(dropped)

    def forgotten(self, query: str, stream: str) -> tuple[str, int] | None:
        """The topic and seq of the last answer of ``query`` on ``stream`` that `drop_query` forgot (the query
        replaced, or unregistered and registered again), while the query has not answered the stream since."""
        return self._forgotten.get(query, {}).get(stream)

    def drop_answer(self, query: str, stream: str) -> bool:
        """Forgets the latest answer of ``query`` on ``stream`` (one about a tick the stream no longer holds); whether
        there was one. Topic seqs are kept."""
        with self._lock:
            dropped = self._answers.get(query, {}).pop(stream, None) is not None
            if not dropped and query in self._idle.get(stream, {}):
                dropped = self._idle[stream].pop(query) is not None
            self._count -= dropped
        return dropped

    def drop_stream(self, stream: str) -> int:
        """Forgets every answer for a closed stream; returns how many."""
        with self._lock:
            n = sum(per_query.pop(stream, None) is not None for per_query in self._answers.values())
            n += len(self._idle.pop(stream, {}))
            self._count -= n
            for per_query in self._forgotten.values():  # its session is gone: what a `get` says is that
                per_query.pop(stream, None)
        return n

    def forget_topics(self, topics: list[str]) -> None:
        """``topics`` (an expired stream's, forgotten: stream_removal.forget_answer_side) are no longer numbered
        here: one used again goes on past ``seq_floor``, the highest seq any forgotten topic reached."""
        with self._lock:
            for topic in topics:
                self.seq_floor = max(self.seq_floor, self._seq.pop(topic, 0), self._retired.pop(topic, 0))
                self._first.pop(topic, None)

    def retire_topics(self, was_owned: Callable[[str], bool], owned: Callable[[str], bool]) -> list[str]:
        """The topics ``was_owned`` says a changed query published on (a query removed or replaced) that no
        registered query publishes on now (``owned``) are retired (see ``_retired``); returns them."""
        with self._lock:
            retired = [topic for topic in self._seq if was_owned(topic) and not owned(topic)]
            for topic in retired:
                self._retired[topic] = self._seq.pop(topic)
        return retired

    def drop_retired(self, kept: Callable[[str], bool]) -> int:
        """Retired topics of which the gap-fill history keeps no answer (``kept``: whether it keeps any) are
        forgotten, their seqs under ``seq_floor`` (one used again goes on past it, so none is handed out twice), and
        so is what a `get` said of their queries' dropped answers; returns how many."""
        with self._lock:
            gone = {topic for topic in self._retired if not kept(topic)}
            for topic in gone:
                self.seq_floor = max(self.seq_floor, self._retired.pop(topic))
                self._first.pop(topic, None)
            for query in list(self._forgotten):
                per_stream = self._forgotten[query]
                for stream in [s for s, (topic, _) in per_stream.items() if topic in gone]:
                    del per_stream[stream]
                if not per_stream:
                    del self._forgotten[query]
        return len(gone)

    def seqs(self) -> dict[str, int]:
        """Every topic's last seq, the retired ones' included (for a checkpoint)."""
        with self._lock:
            return {**self._retired, **self._seq}

    def latest(self) -> list[Answer]:
        """Every cached answer (the latest per query and stream)."""
        with self._lock:
            return [a for per_query in self._answers.values() for a in per_query.values()] + \
                [_unpacked(packed) for idle in self._idle.values() for packed in idle.values()]

    def first_seqs(self) -> dict[str, int]:
        """``first_seq`` of every topic begun past 1 (for a checkpoint)."""
        with self._lock:
            return dict(self._first)

    def restore(self, answers: list[Answer], seqs: dict[str, int], first_seqs: dict[str, int] | None = None) -> None:
        """After a restart: ``answers`` become the latest (in order), and no topic's seq goes below what
        ``seqs`` or the answers say was handed out, so seqs continue and are never reused. ``first_seqs``: the
        checkpoint's; a topic an answer begins (not numbered yet) past 1 begun there."""
        with self._lock:
            for topic, seq in seqs.items():
                self._seq[topic] = max(self._seq.get(topic, 0), seq)
            self._first.update(first_seqs or {})
            for answer in answers:
                if answer.topic not in self._seq and answer.seq > 1:
                    self._first[answer.topic] = answer.seq
                self._seq[answer.topic] = max(self._seq.get(answer.topic, 0), answer.seq)
                if self._idle:
                    self._unpack(answer.stream)
                per_query = self._answers.setdefault(answer.query, {})
                self._count += answer.stream not in per_query
                per_query[answer.stream] = answer

    def topics(self, prefix: str = "", after: str = "", limit: int | None = None) -> dict[str, dict[str, Any]]:
        """Every topic published on whose name starts with ``prefix`` and sorts past ``after`` (a page's last; ""
        for the first), in name order, at most ``limit``: ``{topic: {last_seq, answer_ts}}``. ``answer_ts`` is
        the latest cached answer's (None once its stream closed or its query was replaced); ``retired: True`` on a
        topic no registered query publishes on now (its query removed, or moved to another topic), listed while the
        history keeps answers of it. How a client that was away finds the topics that began meanwhile."""
        with self._lock:
            names = sorted(t for t in (*self._seq, *self._retired) if t.startswith(prefix) and t > after)[:limit]
            answer_ts: dict[str, int] = {}  # a topic several queries or streams share: its latest answer's
            for per_query in self._answers.values():
                for a in per_query.values():
                    answer_ts[a.topic] = max(answer_ts.get(a.topic, a.answer_ts), a.answer_ts)
            for idle in self._idle.values():
                for topic, ts, _ in idle.values():
                    answer_ts[topic] = max(answer_ts.get(topic, ts), ts)
            return {t: {"last_seq": self.last_seq(t), "answer_ts": answer_ts.get(t),
                        **({"retired": True} if t in self._retired else {})} for t in names}

    def topic_names(self) -> list[str]:
        """Every topic published on, retired ones included, in name order."""
        with self._lock:
            return sorted((*self._seq, *self._retired))

    def last_seq(self, topic: str) -> int:
        """The last seq handed out on `topic`, 0 if none (or none is kept: a retired topic dropped)."""
        seq = self._seq.get(topic)
        return seq if seq is not None else self._retired.get(topic, 0)

    @property
    def topics_numbered(self) -> int:
        """Topics whose last seq is kept, retired ones included (what grows with topics: stats, tests)."""
        return len(self._seq) + len(self._retired)

    def __len__(self) -> int:
        return self._count


def _unpacked(packed: tuple[str, int, bytes]) -> Answer:
    """An idle stream's answer as kept by ``pack_stream``, back as an Answer."""
    return Answer.from_wire(msgpack.unpackb(packed[2], raw=False))
