"""The gapless answer subscriber: `GaplessSubscriber`, every answer of its topics once and in seq order per topic,
across PUB drops, reconnects and restarts, by fetching what PUB missed with the control op `answers`
(docs/wire-protocol.md's recipe, done for the user). Built on AnswerSubscriber and ControlClient."""

from __future__ import annotations

import math
import threading
import time
import warnings
from collections import Counter, deque
from collections.abc import Mapping
from numbers import Integral
from typing import Any

from connectors.service_topics import HEARTBEAT_TOPIC
from connectors.unclosed_clients import close_when_collected
from engine.forked_clients import CreatingProcess
from engine.quoting import quoted
from engine.service.answer_subscriber import AnswerSubscriber, topic_prefixes
from engine.service.control_client import FETCH_LIMIT, ControlClient, ControlError


def _saved_seqs(last_seqs: Any) -> dict[str, int]:
    """A GaplessSubscriber's ``last_seqs``, checked: each the last seq delivered on its topic, an int >= 0. A negative
    one (a "nothing seen yet" sentinel) was asked for as `answers after -1`, which the service refuses, and every
    answer of the topic then waited behind that fetch, for ever and silently."""
    if last_seqs is None:
        return {}
    if not isinstance(last_seqs, Mapping):
        raise TypeError(f"last_seqs is a mapping {{topic: last seq delivered}}, as `last_seq` saved it, got "
                        f"{type(last_seqs).__name__}")
    for topic, seq in last_seqs.items():
        if not isinstance(seq, Integral) or isinstance(seq, bool) or seq < 0:
            raise ValueError(f"last_seqs[{quoted(topic)}] is {quoted(seq)}: a saved seq is an int >= 0, the last seq "
                             "delivered on its topic; for a topic with nothing seen yet leave it out (or give 0), "
                             "and its kept answers are fetched from the first")
    return {topic: int(seq) for topic, seq in last_seqs.items()}


class GaplessSubscriber:
    """Every answer of the subscribed topics exactly once, in seq order per topic, across PUB drops, reconnects
    and restarts of the service or of this client: the recipe of docs/wire-protocol.md, done for you.

    Subscribe; on each answer, one whose seq is at most the topic's last seen is a duplicate and is dropped,
    one past last + 1 means answers were missed: they are fetched with the control op ``answers`` (after the
    last seen seq) and delivered first. ``wait_ready`` also fetches whatever came after ``last_seqs`` while this
    client was away. Heartbeats are watched too: one whose seq went back (the service restarted, and may have
    published the answers it owed before this client reconnected) or skipped some (this client was away) makes
    it fetch every topic it has seen, so an answer is not left undelivered until its topic's next one. A fetch
    the service does not answer (it went down meanwhile) is tried again at the next heartbeat, the topic's newer
    answers held back until then. Answers
    the service no longer keeps (``log.answers_keep``) are counted in ``unrecoverable`` and passed over in
    ``last_seq`` as soon as a fetch finds them gone, never invented. The
    service's own topics (``_heartbeat/``, ``_rejects/``) are not delivered.

    Seqs are the service's data directory's: a service without one (``--no-log``), or with another, numbers
    from 1 again, under another ``epoch`` (in heartbeats, answers and ``health``). An answer or heartbeat of a new
    epoch makes this client start over on every topic, as one resumed with nothing: each topic's kept answers of
    the new epoch from its first (``epochs_seen`` counts such changes). A client that saves ``last_seq`` saves
    ``epoch`` with it and gives both back, so that seqs of another epoch are never taken for this one's. A saved seq
    is an int >= 0: a negative one is refused (ValueError); a topic with nothing seen yet is left out (or given 0).
    Threads sharing one take turns (a `recv` waits for another's within its own time-out).
    """

    def __init__(self, endpoint: str, control: ControlClient, topics: list[str] | None = None,
                 last_seqs: dict[str, int] | None = None, epoch: str | None = None, **curve: Any) -> None:
        if not callable(getattr(control, "call", None)):
            raise TypeError(f"GaplessSubscriber needs a ControlClient of the same service (it fetches missed answers "
                            f"with its `answers` op), got a {type(control).__name__}")
        saved = _saved_seqs(last_seqs)  # (checked before any socket is made)
        wanted = topic_prefixes(topics)
        if not any(HEARTBEAT_TOPIC.startswith(prefix) for prefix in wanted):
            wanted.append(HEARTBEAT_TOPIC)  # watched, never delivered
        self.subscriber = AnswerSubscriber(endpoint, wanted, **curve)
        self.subscriber.unclosed.detach()  # said as this client's, not its inner subscriber's
        self.unclosed = close_when_collected(self, f"GaplessSubscriber to {endpoint}", self.subscriber.close)
        # A topic first met past its seq 1 has answers this client missed. Resumed (``last_seqs`` given, even
        # empty), every one the service keeps is owed: the topic began while the client was away. Fresh, those
        # published since it started (server time, from its first heartbeat): "from now on", not the history.
        self.since_ns: int | None = None if last_seqs is not None else -1  # -1: set by the first heartbeat
        self.heartbeat_seq: int | None = None  # the latest heartbeat's seq
        self._unfilled: set[str] = set()  # topics whose gap fetch the service did not answer: again at a heartbeat
        self._held: dict[str, list[dict[str, Any]]] = {}  # their answers that arrived meanwhile, in order
        self.restarts_seen = 0  # heartbeats whose seq went back: the service restarted
        self.control = control
        self.last_seq: dict[str, int] = saved
        self.epoch = epoch  # whose seqs last_seq holds (None: not known yet; the service's first word sets it)
        self.epochs_seen = 0  # times the service's epoch changed under this client: it started over
        self.filled = 0  # answers fetched to fill gaps
        self.unrecoverable = 0  # answers missed that the service no longer keeps
        # per topic: answers PUB did not deliver (drops, time away), those fetched (filled) and those no longer kept
        # (unrecoverable) alike, so an application sees which topic's history has a hole (review421 #3)
        self.missed: Counter[str] = Counter()
        # per topic, the seqs fetched that PUB may still deliver (a fetch after a restart's heartbeat runs ahead of
        # answers in flight): one that arrives later was not missed after all. Seqs below one PUB delivered are
        # dropped (PUB keeps a topic's order: they will not come), so this holds only what is in flight.
        self._fetched: dict[str, set[int]] = {}
        self._ready: deque[tuple[str, dict[str, Any]]] = deque()
        self._discovery_owed = False  # a `topics` call the service did not answer: again at the next heartbeat
        self._turn = threading.Lock()  # one reader at a time: the state above is one thread's
        self._process = CreatingProcess(f"GaplessSubscriber to {endpoint}")

    def wait_ready(self, timeout_s: float = 5.0) -> None:
        self._process.check()
        with self._turn:
            self._wait_ready(timeout_s)

    def _wait_ready(self, timeout_s: float) -> None:
        try:
            self.subscriber.wait_ready(timeout_s)
        except TimeoutError as e:
            raise TimeoutError(f"{e}{self._starting_note()}") from None
        epoch_given = self.epoch is not None
        try:
            serving = self.control.call("health").get("epoch")  # (None while it starts: the first heartbeat's)
        except ControlError:
            serving = None
        if serving is not None:
            self._epoch(serving)
        if not epoch_given and self.last_seq:
            self._start_over_if_seqs_of_another_epoch()
        for topic, seq in list(self.last_seq.items()):
            self._fill(topic, seq, None)
        if self.since_ns is None:  # resumed: topics may have begun while it was away
            self._discover()

    def _starting_note(self) -> str:
        """The control socket answers while the service starts, its answers socket not bound yet: said as such."""
        try:
            health = self.control.call("health", timeout_s=1.0)
        except ControlError:
            return ""
        if health.get("status") != "starting":
            return ""
        return (f"; the service is starting ({health.get('phase') or 'health: starting'}): its answers socket binds "
                f"once it serves; wait_ready again")

    def _start_over_if_seqs_of_another_epoch(self) -> None:
        """``last_seqs`` given without their ``epoch``: a saved seq past its topic's last at the service cannot be of
        this epoch (seqs only grow within one), so they are of an earlier service's: every answer PUB brings would be
        taken for a duplicate and dropped, silently, until the topic passed the saved seq. The client starts over
        as at a change of epoch (``epochs_seen``), with a warning saying to save ``epoch`` beside the seqs."""
        known: dict[str, dict[str, Any]] = {}
        try:
            for prefix in self.subscriber.topics:
                if not prefix.startswith("_"):
                    known.update(self.control.topics(prefix))
        except ControlError:  # not answered now: nothing to compare with
            return
        ahead = {topic: seq for topic, seq in self.last_seq.items()
                 if topic in known and seq > (known[topic].get("last_seq") or 0)}
        if not ahead:
            return
        topic, seq = next(iter(sorted(ahead.items())))
        warnings.warn(f"GaplessSubscriber: last_seqs hold seqs past the service's ({len(ahead)} topics, e.g. {topic} "
                      f"{seq} where the service's last is {known[topic].get('last_seq') or 0}): they are of another "
                      f"epoch (the service restarted without its data directory, or another service); starting "
                      f"over from each topic's first kept answer. Save `epoch` with `last_seq` and give both back",
                      RuntimeWarning, stacklevel=3)
        self.epochs_seen += 1
        self.last_seq.clear()
        self.since_ns = None

    def recv(self, timeout_s: float | None = 5.0) -> tuple[str, dict[str, Any]] | None:
        """The next answer in seq order per topic, or None after ``timeout_s`` (None: wait for ever)."""
        deadline = math.inf if timeout_s is None else time.monotonic() + timeout_s
        self._process.check()  # (before the turn: a fork()ed child's copy of it may be held for ever)
        if not self._turn.acquire(timeout=-1 if timeout_s is None else max(0.0, timeout_s)):
            return None
        try:
            return self._next(deadline)
        finally:
            self._turn.release()

    def _next(self, deadline: float) -> tuple[str, dict[str, Any]] | None:
        while not self._ready:
            message = self.subscriber.recv(None if deadline == math.inf else max(0.0, deadline - time.monotonic()))
            if message is None:
                return None
            topic, answer = message
            if (epoch := answer.get("epoch")) is not None and epoch != self.epoch:
                self._epoch(epoch)
            if topic.startswith(HEARTBEAT_TOPIC):
                self._heartbeat(answer.get("seq"), answer.get("ts"))
                self._tails(answer.get("last_seqs"))
                continue
            if topic.startswith("_"):
                continue
            if topic in self._unfilled:  # behind a gap not fetched yet: it waits, so the order holds
                self._held.setdefault(topic, []).append(answer)
                continue
            self._delivered_by_pub(topic, answer["seq"])
            last = self.last_seq.get(topic)
            if last is not None and answer["seq"] <= last:
                continue  # already delivered (a fill got it first)
            if answer["seq"] > (last or 0) + 1 and (last is not None or self.since_ns != -1):
                self._fill(topic, last or 0, answer["seq"] - 1)  # a gap, or a new topic met past its first answer
                if topic in self._unfilled:
                    self._held.setdefault(topic, []).append(answer)
                    continue
            self._deliver(topic, answer)
        return self._ready.popleft()

    def _epoch(self, epoch: str) -> None:
        """The service's epoch: a change means its seqs started over (no data directory kept them), so what this
        client holds says nothing of the new ones: it starts over as one resumed with nothing."""
        if self.epoch is not None and epoch != self.epoch:
            self.epochs_seen += 1
            self.last_seq.clear()
            self._fetched.clear()
            self._held.clear()
            self._unfilled.clear()
            self.since_ns = None  # every kept answer of the new epoch is owed, from each topic's first
            self._discovery_owed = True  # topics of it not met yet: found at the next heartbeat
        self.epoch = epoch

    def _delivered_by_pub(self, topic: str, seq: int) -> None:
        """PUB delivered ``topic``'s answer ``seq``: if a fetch got it first, it was not missed after all."""
        fetched = self._fetched.get(topic)
        if not fetched:
            return
        if seq in fetched:
            self.missed[topic] -= 1
        fetched.difference_update([s for s in fetched if s <= seq])

    def _heartbeat(self, seq: Any, ts: Any = None) -> None:
        """A heartbeat whose seq went back (a restart) or skipped (heartbeats missed: so may answers have been):
        every topic seen so far is fetched past its last seq."""
        if type(seq) is not int:
            return
        if self.since_ns == -1:  # a fresh subscriber begins at the first heartbeat it sees
            self.since_ns = int(ts) if type(ts) is int else 0
            self._discover(fill=False)  # the topics older than it, known at once: no fetch each at first sight
        self._retry_fills()
        last, self.heartbeat_seq = self.heartbeat_seq, seq
        if last is None or seq == last + 1:
            if self._discovery_owed:
                self._discover()
            return
        self.restarts_seen += seq <= last
        for topic, after in list(self.last_seq.items()):
            self._fill(topic, after, None)
        self._discover()

    def _tails(self, last_seqs: Any) -> None:
        """A heartbeat's `last_seqs`: a topic this client follows whose last seq published is past its own lost
        its tail (past the high-water mark, or in a stop it read too slowly for), which no later answer of the
        topic may ever show as a gap: fetched."""
        if not isinstance(last_seqs, dict):  # (a service of an earlier version sends none)
            return
        for topic, seq in last_seqs.items():
            last = self.last_seq.get(topic)
            if last is not None and type(seq) is int and seq > last:
                self._fill(topic, last, seq)

    def _discover(self, fill: bool = True) -> None:
        """Topics of this client's prefixes that it has not met, found with the op ``topics``: a topic that began
        while it was away (a new stream's answers) and published nothing since would otherwise never be met. A
        resumed client fills each from its first kept answer; a fresh one those published since it began, and takes
        a topic whose latest answer is older than itself as seen up to that answer (so meeting it later on PUB
        costs no search for where "since it began" starts). ``fill=False`` (a fresh client's first heartbeat: PUB
        delivers everything from here on) only does the latter."""
        found: dict[str, dict[str, Any]] = {}
        try:
            for prefix in self.subscriber.topics:
                if not prefix.startswith("_"):  # the service's own topics (the heartbeats' prefix): never delivered
                    found.update(self.control.topics(prefix))
        except ControlError as e:  # restarting: again at the next heartbeat; a service without the op: never
            self._discovery_owed = "unknown op" not in str(e)
            return
        self._discovery_owed = False
        for topic, info in sorted(found.items()):
            if topic in self.last_seq or topic.startswith("_") or not info["last_seq"]:
                continue
            answer_ts = info.get("answer_ts")
            if self.since_ns is None:
                self._fill(topic, 0, None)
            elif self.since_ns == -1 or answer_ts is None:
                continue  # not begun yet; no latest answer to date the topic by: a search at first sight
            elif answer_ts < self.since_ns:
                self.last_seq[topic] = info["last_seq"]  # nothing of it since this client began
            elif fill:
                self._fill(topic, 0, info["last_seq"])  # published since this client began

    def _fill(self, topic: str, after: int, upto: int | None) -> None:
        """Fetch and queue ``topic``'s answers after seq ``after`` (up to ``upto``, or all the service has). A fetch
        the service does not answer (it is restarting) is not an error: the topic is fetched again at the next
        heartbeat, and what arrives on it meanwhile waits, so its order holds."""
        if topic in self._unfilled:
            return
        try:
            self._fetch(topic, after, upto)
        except ControlError:
            self._unfilled.add(topic)

    def _retry_fills(self) -> None:
        """Topics whose fetch failed: everything after their last delivered seq, then what waited behind."""
        for topic in list(self._unfilled):
            try:
                self._fetch(topic, self.last_seq.get(topic, 0), None)
            except ControlError:
                continue
            self._unfilled.discard(topic)
            for answer in self._held.pop(topic, ()):  # PUB's, held behind the fetch: not missed if it got them
                self._delivered_by_pub(topic, answer["seq"])
                if answer["seq"] > self.last_seq[topic]:
                    self._deliver(topic, answer)

    def _fetch(self, topic: str, after: int, upto: int | None) -> None:
        # a topic this client never had: a fresh one takes what was published since it began (since_ns), and the
        # service's older answers are no gap of its own
        since = self.since_ns if topic not in self.last_seq and self.since_ns not in (None, -1) else None
        if since is not None and upto is not None:
            after = max(after, self._published_before(topic, since, upto))
        while upto is None or after < upto:
            reply = self.control.call("answers", topic=topic, after=after, limit=FETCH_LIMIT)
            answers = [a for a in reply["answers"] if (upto is None or a["seq"] <= upto)
                       and a.get("topic", topic) == topic]  # (the reply is this request's: ControlClient's ids)
            begun = max(after, reply.get("first_seq", 1) - 1)  # (seqs before a topic's first were never its own)
            # the last seq no longer kept: before the first kept one, else the gap's end, else the topic's last (none
            # of it kept: a resumed client's topic quiet since, review421 #8, said at once, not at its next answer)
            gone = answers[0]["seq"] - 1 if answers else upto if upto is not None else reply.get("last_seq")
            if since is None and type(gone) is int and gone > begun:
                self._unrecoverable(topic, gone - begun, gone)
            if not answers:
                return
            for answer in answers:
                if since is not None and answer.get("answer_ts", since) < since:
                    continue  # published before this client began
                self.filled += 1
                self.missed[topic] += 1
                self._fetched.setdefault(topic, set()).add(answer["seq"])
                self._deliver(topic, answer)
            after = answers[-1]["seq"]
            if upto is None and len(reply["answers"]) < FETCH_LIMIT:
                return

    def _unrecoverable(self, topic: str, count: int, upto: int) -> None:
        """``count`` answers of ``topic``, up to seq ``upto``, that the service no longer keeps: missed all the same,
        and passed over (``last_seq``), so that no later fetch counts them again."""
        self.unrecoverable += count
        self.missed[topic] += count
        self.last_seq[topic] = max(self.last_seq.get(topic, 0), upto)

    def _published_before(self, topic: str, since: int, upto: int) -> int:
        """The last seq of ``topic`` (at most ``upto``) published before server time ``since``: one call for a topic
        older than this client (its answer ``upto`` is), else a binary search of one-answer fetches (a topic first
        met at seq 50,000 costs ~16 calls, not its whole kept history)."""
        lo, hi = 0, upto  # every kept answer with seq <= lo is before `since`; the answer seq hi + 1 is not
        kept = self.control.call("answers", topic=topic, after=upto - 1, limit=1)["answers"]  # the usual case first:
        if kept and kept[0]["seq"] == upto and kept[0].get("answer_ts", since) < since:  # an old topic, none missed
            return upto
        while lo < hi:
            mid = (lo + hi + 1) // 2
            kept = self.control.call("answers", topic=topic, after=mid - 1, limit=1)["answers"]
            found = kept[0] if kept and kept[0].get("topic", topic) == topic else None
            if found is None or found["seq"] > hi or found.get("answer_ts", since) >= since:
                hi = mid - 1  # answer mid (or the first kept past it) is from since on
            else:
                lo = found["seq"]
        return lo

    def _deliver(self, topic: str, answer: dict[str, Any]) -> None:
        if "epoch" not in answer and self.epoch is not None:  # a fetched one (control replies carry none): every
            answer["epoch"] = self.epoch  # answer delivered has the same keys
        self.last_seq[topic] = answer["seq"]
        self._ready.append((topic, answer))

    def close(self) -> None:
        self.unclosed.detach()
        self.subscriber.close()

    def __enter__(self) -> "GaplessSubscriber":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
