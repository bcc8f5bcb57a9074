"""Published answers, kept: in memory for gap fills, and on disk so a restart continues every topic's seq.

    AnswerHistory  the last ``keep`` published answers (all topics together); the control op
                   ``answers`` serves "topic T after seq S" from it, so a subscriber that missed
                   messages (PUB drops past a high-water mark, a reconnect, a restart) fills the gap
                   exactly. A topic's seqs are contiguous (every standing answer is published), so the
                   history of a topic is a contiguous run of seqs and a lookup is arithmetic.
    AnswerLog      with a data directory: every published answer appended to DATA_DIR/answers/ (the
                   tick log's format, bounded retention) *before* it is published, with the events that
                   forget answers (a query replaced or removed, a stream expired): b"A" + the answer's
                   cached form (``Answer.to_wire``), or b"F" + {query: name} | {stream: name}. The fields
                   an answer was published with (published_fields.py) are a b"P" record of their own,
                   {topic, seq, fields...}, written with its b"A" in one write, just before it: a release
                   before 0.2.0, which makes its Answer of every key of a b"A" record and skips a kind it
                   does not know, reads the log on a rollback (review400 #8). On start it restores
                   the history (the answers as published), the cache of latest answers, each topic's last
                   seq and each standing query's trigger state. Before a segment roll (after which retention
                   may drop old segments) the whole state is checkpointed to ``state.msgpack``, so no seq is
                   ever handed out twice, however much of the log retention has dropped.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any

import msgpack

from engine.service.log_read_progress import LogReadProgress
from engine.service.log_reading import read
from engine.service.log_stats import LogStats
from engine.service.private_dirs import private
from engine.service.ticklog import TickLog
from queries.cache import Answer, AnswerCache
from queries.registry import Registry


# an answer log record: a published answer, answers to forget, or a stream's tick count after the tick log lost its
# tail ({stream, ticks}: its latest answers past that count are about lost ticks, no longer current)
ANSWER, FORGET, LOST = b"A", b"F", b"L"
PUBLISHED = b"P"  # the fields the answer record right after it was published with (the module's docstring)
RETRY_S = 1.0  # records the log could not take are tried again at most this often (while ticks are refused)
SAY_EVERY_S = 10.0  # at most one stderr line this often while the answer log fails


def _run_of(kept: tuple[int, deque[bytes] | bytes]) -> deque[bytes] | tuple[bytes]:
    """A topic's kept answers, oldest first, whether held as a run (a deque) or as its one answer."""
    answers = kept[1]
    return (answers,) if isinstance(answers, bytes) else answers


class AnswerHistory:
    """The last ``keep`` published answers, packed (msgpack, ~300 bytes each with the built-in model's answers),
    each topic's in seq order. A topic with one answer kept holds it bare: an empty deque alone is ~600 bytes,
    and a feed whose names churn has most of its topics at one or two answers (review353: ~1.2 KB of history an
    answer when each held a deque)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._all: deque[tuple[str, int]] = deque()  # (topic, seq) of each kept answer, oldest first
        # topic -> (seq of its oldest, its packed answers: bare while it is one)
        self._by_topic: dict[str, tuple[int, deque[bytes] | bytes]] = {}

    def add(self, topic: str, seq: int, packed: bytes) -> None:
        """A published answer (``packed``: its msgpack wire form, seq ``seq``)."""
        kept = self._by_topic.get(topic)
        if kept is None or kept[0] + len(_run_of(kept)) != seq:  # a new topic, or seqs restarted past a lost window
            self._by_topic[topic] = (seq, packed)
        elif isinstance(kept[1], bytes):
            self._by_topic[topic] = (kept[0], deque((kept[1], packed)))
        else:
            kept[1].append(packed)
        self._all.append((topic, seq))
        while len(self._all) > self.keep:
            oldest, oldest_seq = self._all.popleft()
            first, answers = self._by_topic.get(oldest, (None, None))
            if first != oldest_seq:
                continue  # it was discarded with a run of seqs that did not continue
            if isinstance(answers, bytes) or len(answers) == 1:
                del self._by_topic[oldest]
                continue
            answers.popleft()  # a topic's oldest is the oldest overall among its own
            self._by_topic[oldest] = (first + 1, answers[0] if len(answers) == 1 else answers)

    def after(self, topic: str, seq: int, limit: int) -> tuple[list[dict[str, Any]], bool]:
        """Up to ``limit`` answers of ``topic`` with seq > ``seq``, oldest first, and whether they start right
        after ``seq`` (False: older answers are no longer kept, so the caller has a gap it cannot fill)."""
        kept = self._by_topic.get(topic)
        if kept is None:
            return [], True
        first, answers = kept[0], _run_of(kept)
        start = seq + 1 - first  # seqs are contiguous within a topic's history
        if start >= len(answers):  # past the newest kept: a seq of any size (islice takes none past sys.maxsize)
            return [], True
        picked = itertools.islice(answers, max(0, start), max(0, start) + limit)
        return [msgpack.unpackb(packed, raw=False) for packed in picked], start >= 0

    def newest_kept_before(self, stale: Answer, ticks: int) -> Answer | None:
        """The newest kept answer of ``stale``'s query and stream, published before it under the same registration,
        about a tick count at most ``ticks`` (what was current before the ticks past ``ticks`` were lost), or None.
        Going back, a count that rises is an earlier session of the stream (before it expired): not taken."""
        kept = self._by_topic.get(stale.topic)
        above = stale.version
        for packed in reversed(_run_of(kept) if kept else ()):
            answer = msgpack.unpackb(packed, raw=False)
            if (answer["query"], answer["stream"]) != (stale.query, stale.stream) or answer["seq"] >= stale.seq:
                continue
            if answer.get("query_version", 0) != stale.query_version or answer["version"] > above:
                return None
            if answer["version"] <= ticks:
                return Answer.from_wire(answer)
            above = answer["version"]
        return None

    def oldest_seq(self, topic: str) -> int | None:
        kept = self._by_topic.get(topic)
        return kept[0] if kept else None

    def __len__(self) -> int:
        return len(self._all)


def _superseded(cache: AnswerCache, registry: Registry) -> set[str]:
    """Queries whose kept answers belong to a registration the restored queries no longer hold: the query is not
    registered, or was (re)registered after those answers (their ``query_version`` is older than its own; 0: not
    recorded, kept). A register or unregister saves the queries before the answer log records its forget event,
    so a process killed between the two leaves such answers: forgotten here, as the forget event would have
    (a query owed answers on the ticks before its new registration would be answered again under it)."""
    return {answer.query for answer in cache.latest()
            if answer.query not in registry
            or 0 < answer.query_version < registry.query_version(answer.query)}


STATE_KEYS = ("covers", "seqs", "latest")  # what every state.msgpack holds (later keys have defaults)


def state_damage(path: Path) -> str | None:
    """Why the answer log's checkpoint at ``path`` cannot be read (parse error, or not the map a checkpoint is),
    None when it can or there is none. It is written whole and renamed into place, so damage is the disk's, or a
    hand's (review392 #8: a bare "unpack(b) received extra data" stopped the start, naming no file)."""
    try:
        state = msgpack.unpackb(path.read_bytes(), raw=False) if path.is_file() else None
    except (ValueError, TypeError, msgpack.UnpackException) as e:  # (ExtraData, FormatError, StackError; a map
        # keyed by a list: TypeError)
        return f"{type(e).__name__}: {e}"
    if state is None or isinstance(state, dict) and all(key in state for key in STATE_KEYS):
        return None
    keys = f" of keys {', '.join(map(str, state))}" if isinstance(state, dict) else ""
    return f"not an answer-log checkpoint: a {type(state).__name__}{keys}"


class AnswerLog:
    """The answer log of a data directory. ``record`` every published answer before publishing it."""

    def __init__(self, directory: Path, cache: AnswerCache, *, fsync: str, group_ms: float, segment_bytes: int,
                 retention_bytes: int | None, skip_corrupt: bool = False) -> None:
        self.directory = Path(directory)
        self.state_path = self.directory / "state.msgpack"
        self.cache = cache
        self.logged_query_versions: dict[str, int] = {}  # query -> highest query_version read back
        self.errors = 0  # writes that failed: each record's first try and each retry (a stuck record: every RETRY_S)
        self._failing_since: float | None = None  # monotonic time of the first failed write while records wait
        # records not written yet, in order, behind the first that failed: written when the log takes them again;
        # meanwhile the service refuses new ticks (DataDir.items.append), so this holds only what was in flight
        self._unlogged: deque[tuple[bytes, ...]] = deque()  # (the records of one write each)
        self._retry_at = 0.0
        self._said_at = -SAY_EVERY_S
        self.read_stats = LogStats()
        self.log = TickLog(self.directory, fsync=fsync, group_ms=group_ms, segment_bytes=segment_bytes,
                           retention_bytes=retention_bytes, prefix="answers", before_roll=self._checkpoint,
                           roll_on_append=False, skip_corrupt=skip_corrupt)

    def record(self, answer: Answer, published: dict[str, Any]) -> None:
        """A published answer, and the fields it is published with beside its cached form (none: no record)."""
        record = ANSWER + msgpack.packb(answer.to_wire(), use_bin_type=True)
        if published:
            self._append(PUBLISHED + msgpack.packb({"topic": answer.topic, "seq": answer.seq, **published},
                                                   use_bin_type=True), record)
        else:
            self._append(record)

    def roll_if_full(self) -> None:
        """A new segment if the open one is full, called where the cache holds what the log does (every answer it
        numbered recorded): the checkpoint before the roll is the cache, and a kill between it and a record not yet
        written left a checkpoint claiming an answer no record holds, so no restart owed it (review402 #4: its seq
        skipped for good). Records waiting for the disk hold it off; a failure is counted and tried again later."""
        if self._unlogged:
            return
        try:
            self.log.roll_if_full()
        except OSError as e:
            self.errors += 1
            self._say_roll(e)

    def _say_roll(self, error: OSError) -> None:
        now = time.monotonic()
        if now - self._said_at >= SAY_EVERY_S:
            self._said_at = now
            print(f"flashtick: answer log: a new segment could not be begun ({error}): the open one goes on "
                  f"growing; tried again after the next answers", file=sys.stderr, flush=True)

    def forget_query(self, name: str) -> None:
        self._append(FORGET + msgpack.packb({"query": name}))

    def forget_stream(self, stream: str) -> None:
        self._append(FORGET + msgpack.packb({"stream": stream}))

    def _append(self, *records: bytes) -> None:
        """``records``, in one write. Records the log refuses (a full disk) are kept and written later, in order: a
        restart must find every answer a subscriber saw, or it would publish the answers owed again under seqs
        already handed out. While any are kept, ``failing`` is true and the service refuses new ticks, so what
        waits is only what was in flight; the answers themselves are still published (and served from memory for
        gap fills)."""
        if self._unlogged:  # (not written: behind the ones that wait, in order)
            self._unlogged.append(records)
            if time.monotonic() >= self._retry_at:
                self._retry()
            return
        try:
            self.log.append(*records)
        except OSError as e:
            self.errors += 1
            self._unlogged.append(records)
            self._failing_since = time.monotonic()
            self._retry_at = time.monotonic() + RETRY_S
            self._say(e)

    @property
    def failing(self) -> bool:
        """Whether records wait to be written (tried again first, at most every RETRY_S)."""
        if self._unlogged and time.monotonic() >= self._retry_at:
            self._retry()
        return bool(self._unlogged)

    def _retry(self) -> None:
        self._retry_at = time.monotonic() + RETRY_S
        while self._unlogged:
            try:
                self.log.append(*self._unlogged[0])
            except OSError as e:
                self.errors += 1
                self._say(e)
                return
            self._unlogged.popleft()
        failed_for = time.monotonic() - (self._failing_since or time.monotonic())
        self._failing_since = None
        print(f"flashtick: answer log: writable again after {failed_for:.1f} s; every answer published is logged; "
              f"ticks are accepted", file=sys.stderr, flush=True)

    def _say(self, error: OSError) -> None:
        now = time.monotonic()
        if now - self._said_at >= SAY_EVERY_S:
            self._said_at = now
            print(f"flashtick: answer log: {error}: {len(self._unlogged)} answers wait to be logged (published, "
                  f"kept in memory); new ticks are refused (log_unavailable) until the log takes them",
                  file=sys.stderr, flush=True)

    @property
    def unlogged(self) -> int:
        """Answers published that wait to be logged."""
        return len(self._unlogged)

    def _checkpoint(self, next_record: int) -> None:
        """Everything the records before ``next_record`` say, in one file replaced atomically."""
        state = {"covers": next_record, "seqs": self.cache.seqs(), "seq_floor": self.cache.seq_floor,
                 "first_seqs": self.cache.first_seqs(),
                 "latest": [a.to_wire() for a in self.cache.latest()]}
        tmp = self.state_path.with_suffix(".tmp")
        with open(tmp, "wb", opener=private) as f:
            f.write(msgpack.packb(state, use_bin_type=True))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.state_path)

    def restore(self, registry: Registry, history: AnswerHistory, skip_corrupt: bool,
                replayed: Any = None) -> int:
        """Seqs, latest answers and trigger state back into the cache and registry; the retained answers into
        ``history``; every retained answer and forget event, in order, to ``replayed`` (an AnswerAdaptation:
        ``owed``, ``forget_owed``) when given. Returns how many answers were read."""
        count = self.read_back(history, skip_corrupt, replayed)
        self.settle(registry, replayed)
        self.retire_unregistered(registry, history)
        return count

    def retire_unregistered(self, registry: Registry, history: AnswerHistory) -> None:
        """After a restart's read back: the topics no registered query publishes on retired, and dropped where
        ``history`` keeps none of their answers (queries/cache.py ``_retired``): seqs of queries removed before
        the stop are not kept for ever."""
        self.cache.retire_topics(lambda topic: True, registry.publishes_on)
        self.cache.drop_retired(lambda topic: history.oldest_seq(topic) is not None)

    def read_back(self, history: AnswerHistory, skip_corrupt: bool, replayed: Any = None,
                  progress: LogReadProgress | None = None) -> int:
        """``restore``'s reading: the cache and ``history`` filled, ``replayed`` fed, and ``logged_query_versions``
        (each query's highest ``query_version`` the log and its checkpoint hold) known; ``settle`` then checks
        the answers against the registry. ``progress`` hears of every record read."""
        covers = 0
        self.logged_query_versions = {}
        # (a damaged checkpoint: the start refused it, or, with skip_corrupt, reads the log's records alone under a
        # new epoch: DataDir._open_parts)
        if self.state_path.is_file() and state_damage(self.state_path) is None:
            state = msgpack.unpackb(self.state_path.read_bytes(), raw=False)
            covers = state["covers"]
            latest = [Answer(**a) for a in state["latest"]]
            self.cache.restore(latest, state["seqs"], state.get("first_seqs"))  # (older files: none)
            self.cache.seq_floor = max(self.cache.seq_floor, state.get("seq_floor", 0))  # (older files: none)
            for answer in latest:
                self._logged_version(answer)
        count = 0
        published: dict[str, Any] | None = None  # a PUBLISHED record's, for the answer record right after it
        for number, payload in read(self.directory, skip_corrupt=skip_corrupt, stats=self.read_stats,
                                    prefix="answers"):
            if progress is not None:
                progress.read(len(payload))
            kind, body = payload[:1], payload[1:]
            before, published = published, None
            if kind == PUBLISHED:
                published = msgpack.unpackb(body, raw=False)
            elif kind == ANSWER:
                # read as the dict it is: an Answer is made only for the cache (a tenth of a long log's read)
                wire = msgpack.unpackb(body, raw=False)
                if before is not None and (before["topic"], before["seq"]) == (wire["topic"], wire["seq"]):
                    # (as published_fields.py packed it: topic and seq keep their place, the fields follow)
                    wire = {**wire, **before}
                    body = msgpack.packb(wire, use_bin_type=True)
                history.add(wire["topic"], wire["seq"], body)
                self._logged_query_version(wire["query"], wire.get("query_version", 0))
                count += 1
                if replayed is not None:
                    replayed.owed(wire["query"], wire["stream"], wire["version"], wire["value"])
                if number >= covers:
                    self.cache.restore([Answer.from_wire(wire)], {})
            elif kind == LOST:
                lost = msgpack.unpackb(body, raw=False)
                if replayed is not None:
                    replayed.forget_owed_past(lost["stream"], lost["ticks"])
                if number >= covers:
                    self._take_back(lost["stream"], lost["ticks"], history)
            elif kind == FORGET and number >= covers:
                forget = msgpack.unpackb(body, raw=False)
                if replayed is not None:
                    replayed.forget_owed(forget.get("query"), forget.get("stream"))
                if "query" in forget:
                    self.cache.drop_query(forget["query"])
                else:
                    self.cache.drop_stream(forget["stream"])
        return count

    def forget_lost(self, counts: dict[str, int], history: AnswerHistory, registry: Registry,
                    replayed: Any = None) -> list[Answer]:
        """After a restart's replay: ``counts`` holds the streams whose latest answers are about ticks past the count
        the tick log kept (its tail was lost: a host crash, a damaged end cut). Each such answer stops being the
        current one: the latest answer its query published on the ticks kept takes its place (from ``history``;
        none kept: none, and the query fires on the stream's next tick as on its first), its trigger state follows,
        and ``replayed`` never re-feeds it. A ``LOST`` record says so in the log, so that a later restart, whose
        counts have gone on past it, does not take the stale answer back. Returns the answers taken back."""
        taken: list[Answer] = []
        for stream, ticks in counts.items():
            self._append(LOST + msgpack.packb({"stream": stream, "ticks": ticks}))
            if replayed is not None:
                replayed.forget_owed_past(stream, ticks)
            for stale, kept in self._take_back(stream, ticks, history):
                taken.append(stale)
                if kept is None:
                    registry.unfire(stale.query, stream)
                else:
                    registry.restore_fired(kept.query, stream, kept.version, kept.data_ts)
        return taken

    def _take_back(self, stream: str, ticks: int, history: AnswerHistory) -> list[tuple[Answer, Answer | None]]:
        """The latest answers of ``stream`` past tick count ``ticks`` replaced by the newest kept before them (or
        dropped); (stale, replacement or None) of each."""
        changed = []
        for stale in [a for a in self.cache.latest() if a.stream == stream and a.version > ticks]:
            kept = history.newest_kept_before(stale, ticks)
            if kept is None:
                self.cache.drop_answer(stale.query, stream)
            else:
                self.cache.restore([kept], {})
            changed.append((stale, kept))
        return changed

    def _logged_version(self, answer: Answer) -> None:
        self._logged_query_version(answer.query, answer.query_version)

    def _logged_query_version(self, query: str, query_version: int) -> None:
        known = self.logged_query_versions.get(query, 0)
        self.logged_query_versions[query] = max(known, query_version)

    def settle(self, registry: Registry, replayed: Any = None) -> None:
        """The answers read back that the registered queries no longer hold forgotten (``_superseded``), and each
        standing query's trigger state restored from the latest answers kept."""
        for name in _superseded(self.cache, registry):
            self.cache.drop_query(name)
            if replayed is not None:
                replayed.forget_owed(name, None)
        for answer in self.cache.latest():
            registry.restore_fired(answer.query, answer.stream, answer.version, answer.data_ts)

    def stats(self) -> dict[str, Any]:
        return {"appended": self.log.stats.appended, "errors": self.errors, "unlogged": self.unlogged,
                "fsyncs": self.log.stats.fsyncs,
                "segments_dropped": self.log.stats.segments_dropped,
                "torn_tails": self.log.stats.torn_tails + self.read_stats.torn_tails,
                "corrupt_skipped": self.log.stats.corrupt_skipped + self.read_stats.corrupt_skipped}

    def close(self) -> None:
        if self._unlogged:
            self._retry()
        # (not the forget events among them; an answer's record ends its write)
        answers = sum(records[-1][:1] == ANSWER for records in self._unlogged)
        if answers:  # a restart computes them again, owed (owed_answers.TailStarts begins each stream's tail there)
            print(f"flashtick: answer log: {answers} published answers could not be logged: after a restart they "
                  f"are published again, each under its own seq", file=sys.stderr, flush=True)
        self.log.close()
