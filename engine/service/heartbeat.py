"""The heartbeat, every limits.heartbeat_s: the `_heartbeat/` message (the engine's progress, whether it is
behind, the protocol and the epoch), the stats snapshot refreshed, idle streams expired, and the log's lines
of what an operator must hear (behind, catching up, streams refused, KV thrash, feeds connected or lost)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from connectors.service_topics import HEARTBEAT_TOPIC
from engine.memory_limit import resident_bytes
from engine.service.ages import age_said
from engine.service.auth import FailedHandshakes
from engine.service.config import ServiceConfig
from engine.service.descriptor_limit import DescriptorWatch
from engine.service.expired_streams import ExpiredStreamsLine
from engine.service.feed_watch import FeedWatch
from engine.service.heartbeat_seqs import HeartbeatSeqs
from engine.service.kv_thrash import KvThrashWatch
from engine.service.pipeline import TickPipeline
from engine.service.process_start import process_start_time
from engine.service.answer_freshness import STALE_QUERIES_SAID, AnswerFreshness, StaleAnswersLines
from engine.service.reorder_window import ReorderWindow
from engine.service.sharded import ShardedPipeline
from engine.service.stream_refusals import StreamRefusals
from engine.service.unread_ingest import unread_bytes
from engine.service.wire_protocol import WIRE_PROTOCOL

BEHIND_WARNING_EVERY_S = 10.0
DROPPED_WHEN_BEHIND = {"shed": "ticks refused as overloaded",
                       "conflate": "quotes dropped for a newer one of their stream"}
PROCESS_START_TIME = process_start_time()  # (read once: it does not change)


class Heartbeat:
    """The Server's heartbeat (a mixin: it reads the server's pipeline, counters and sockets)."""

    config: ServiceConfig
    pipeline: TickPipeline | ShardedPipeline
    counters: dict[str, int]
    epoch: str
    started_at: float
    answer_freshness: AnswerFreshness  # each standing query's newest answer (the server's _publish tells it)
    serve_hints: bool
    _snapshot: dict[str, Any]  # stats as of the last heartbeat (or `stats` request): what /metrics renders
    _handshakes: FailedHandshakes | None
    _feed_watches: dict[str, FeedWatch]
    stream_refusals: StreamRefusals
    reorder: ReorderWindow | None
    _clocks_ahead: Callable[[], dict[str, int]]  # (FeedClocks')
    _say_clocks_ahead: Callable[[dict[str, int]], None]

    def _init_heartbeat(self) -> None:
        """The heartbeat's own state, once the pipeline is up (its restart's tail tells catching up)."""
        self._next_behind_warning = 0.0
        # a restart's tail (ticks logged but not computed before the stop) is computed by the serving loop: until
        # it is and the engine is no longer behind, "behind" is the restart catching up, and the log says that
        self._catching_up, self._said_catching_up = bool(getattr(self.pipeline, "owed_ticks", 0)), False
        self._shed_at_heartbeat = 0  # ticks refused as overloaded up to the last heartbeat
        self._conflated_at_heartbeat = 0  # quotes conflated (when_behind: conflate) up to the last heartbeat
        self._shed_said = 0  # ticks refused or quotes conflated up to the last log line that said so
        # a line said the engine behind (not a restart's catching up, which says its own end) and no line since that
        # it caught up; and since when (monotonic) heartbeats have found it behind
        self._said_behind, self._behind_since = False, None
        self._refused_said, self._next_refused_warning = 0, 0.0  # stream_refused ticks the log has told of
        self._expired_line = ExpiredStreamsLine(self.config.scheduler.stream_idle_s)
        self._kv_thrash = KvThrashWatch()
        self._descriptors = DescriptorWatch(self.counters)  # none free: clients past the limit wait unanswered
        # ticks_in at the last refresh (a restart's recovered ticks are not arriving ones), and when it last grew
        self._ticks_seen, self._tick_at = self.pipeline.ticks_in, None
        self._log_refused_said = 0  # log_unavailable refusals the behind / caught-up lines have told of
        self._stale_queries: list[str] = []  # every standing query stale at the last refresh (the snapshot names 5)
        self._stale_lines = StaleAnswersLines()
        # each topic's last seq, for heartbeats: a loss at a topic's tail shows as a gap (heartbeat_seqs.py)
        self._heartbeat_seqs = HeartbeatSeqs(lambda: self.pipeline.cache.topic_names(),
                                             lambda topic: self.pipeline.cache.last_seq(topic),
                                             self.config.limits.heartbeat_s)

    def _heartbeat(self) -> None:
        self.counters["heartbeats"] += 1
        if self._handshakes is not None:
            self._handshakes.poll()
        self._descriptors.poll()
        expired = self.pipeline.expire_idle()
        self.counters["streams_expired"] += len(expired)
        self._expired_line.add(expired)
        self._expired_line.say(time.monotonic())
        data = getattr(self.pipeline, "data", None)
        if data is not None:
            data.check()
        self._refresh_snapshot()
        # shedding (or conflating) keeps the engine under its limits, so a heartbeat may find it caught up just after
        # it refused most of a burst: one that refused ticks since the last heartbeat says behind too, and how many
        shed_total = self._snapshot["rejected"].get("overloaded", 0)
        shed, self._shed_at_heartbeat = shed_total - self._shed_at_heartbeat, shed_total
        conflated_total = self._snapshot.get("conflated", 0)
        conflated, self._conflated_at_heartbeat = conflated_total - self._conflated_at_heartbeat, conflated_total
        pending, behind = self._snapshot["pending_tokens"], self._snapshot["behind"] or shed > 0 or conflated > 0
        if self._catching_up and not behind and not getattr(self.pipeline, "owed_ticks", 0):
            self._catching_up = False
            if self._said_catching_up:
                print("flashtick: caught up after the restart", file=sys.stderr, flush=True)
                self._said_behind = False
        self._send(HEARTBEAT_TOPIC, {"seq": self.counters["heartbeats"], "ts": time.time_ns(),
                                     "ticks_in": self.pipeline.ticks_in,
                                     "answers_out": self.counters["answers_published"],
                                     "pending_tokens": pending, "unread_messages": self._snapshot["unread_messages"],
                                     "unread_bytes": self._snapshot["unread_bytes"], "behind": behind,
                                     "lag_s": self._snapshot["lag_s"], "shed": shed, "conflated": conflated,
                                     "max_message_bytes": self.config.limits.max_message_bytes,
                                     "protocol": WIRE_PROTOCOL, "epoch": self.epoch,
                                     "registry_version": self.pipeline.registry.version,
                                     "last_seqs": self._heartbeat_seqs.take()})
        self._kv_thrash.watch(self._snapshot, self.pipeline, self.config, getattr(self, "_serving_since", 0.0))
        self._watch_feeds()
        self._say_refused_streams()
        self.stream_refusals.check_late(self.pipeline.encoders.ticks_of)  # (two clocks on one stream: said)
        self._say_behind(behind, pending, shed_total + conflated_total)  # (one of the two, as when_behind says)
        self._say_clocks_ahead(self._clocks_ahead_now)
        stale_line = self._stale_lines.line(self._stale_queries, self.config.limits.max_answer_age_s, time.monotonic())
        if stale_line is not None and self.serve_hints:
            print(stale_line, file=sys.stderr, flush=True)

    def _say_behind(self, behind: bool, pending: int, dropped_total: int) -> None:
        """The log's line of an engine behind its limits (or catching up after a restart, or caught up with
        ticks refused or conflated since the last such line), at most every BEHIND_WARNING_EVERY_S."""
        now = time.monotonic()
        if not behind:
            behind_for, self._behind_since = now - (self._behind_since or now), None
            if self._said_behind:  # at once, not at the line's interval: whoever read "behind" last reads this
                self._say_caught_up(behind_for, dropped_total)
                return
        elif self._behind_since is None:
            self._behind_since = now
        # a burst's refusals mostly come after the line its first heartbeat printed: those are said once the
        # line's interval has passed, caught up or not, so the log accounts for every tick shed
        if self.serve_hints and (behind or dropped_total > self._shed_said) and now >= self._next_behind_warning:
            self._next_behind_warning = now + BEHIND_WARNING_EVERY_S
            limits = self.config.limits
            then = self._dropped(dropped_total, "answers lag")
            self._said_behind = not self._catching_up and behind  # (a restart's catching up says its own end)
            if not behind:  # caught up since: only the refusals are left to say
                print(f"flashtick: caught up; when_behind: {limits.when_behind} ({then})", file=sys.stderr, flush=True)
                return
            if self._catching_up:
                self._said_catching_up = True
                print(f"flashtick: catching up after the restart: {getattr(self.pipeline, 'owed_ticks', 0)} logged "
                      f"ticks still to compute; {pending} tokens wait for a forward, the oldest data for "
                      f"{self._snapshot['lag_s']:.1f} s (new ticks queue behind them; when_behind: "
                      f"{limits.when_behind} ({then}))", file=sys.stderr, flush=True)
                return
            if not self._snapshot["behind"]:  # behind only between heartbeats: its refusals kept it under the limits
                print(f"flashtick: behind since the last heartbeat, kept under the limits by when_behind: "
                      f"{limits.when_behind} ({then}); now {pending} tokens wait for a forward, the oldest data for "
                      f"{self._snapshot['lag_s']:.1f} s", file=sys.stderr, flush=True)
                return
            where = where_the_backlog_is(pending, self._snapshot.get("unread_messages"),
                                         self._snapshot.get("unread_bytes"))
            print(f"flashtick: behind: {pending} tokens wait for a forward (limits.max_backlog_tokens="
                  f"{limits.max_backlog_tokens}), the oldest data for {self._snapshot['lag_s']:.1f} s "
                  f"(limits.max_lag_s={limits.max_lag_s:g}; read or still waiting to be read); "
                  f"{where}"
                  f"{_longest_waiting(self._snapshot.get('longest_waiting'))}; "
                  f"when_behind: {limits.when_behind} ({then})", file=sys.stderr, flush=True)

    def _say_caught_up(self, behind_for: float, dropped_total: int) -> None:
        """The line that ends a stretch the log said behind, once, when a heartbeat first finds the backlog cleared
        (every when_behind: under `lag` nothing else would say it, and the last line would read "behind" for
        good): how long heartbeats found it behind, and what was refused or conflated since the last line."""
        if not self.serve_hints:
            return
        self._said_behind = False
        then = self._dropped(dropped_total, "answers lagged, none shed")
        print(f"flashtick: caught up; behind for {behind_for:.1f} s; when_behind: {self.config.limits.when_behind} "
              f"({then})", file=sys.stderr, flush=True)

    def _dropped(self, dropped_total: int, none: str) -> str:
        """What when_behind refused or conflated since the last line that said so (counted as said), or ``none``
        (`lag`), with the streams refused most."""
        what = DROPPED_WHEN_BEHIND.get(self.config.limits.when_behind)
        then = (f"{dropped_total - self._shed_said} {what} since the last such line, {dropped_total} in all"
                if what else none) + _most_shed(self._snapshot.get("shed_streams"))
        self._shed_said = dropped_total
        # ticks the data directory refused meanwhile (a full disk) are said here too: "none refused" beside a
        # full disk's refusals read as a contradiction in a shipped log (review351 #12)
        log_refused = self._snapshot["rejected"].get("log_unavailable", 0)
        if log_refused > self._log_refused_said:
            then += (f"; {log_refused - self._log_refused_said} refused (disk full: log_unavailable) since the last "
                     f"such line, {log_refused} in all")
            self._log_refused_said = log_refused
        return then

    def _say_refused_streams(self) -> None:
        """New streams turned away (scheduler.when_full: refuse, or scheduler.max_streams) are refused on
        `_rejects/` one by one; the operator reading the log hears of them too, at most every
        BEHIND_WARNING_EVERY_S, with the limit that refused them (not both limits beside a pool's use: a pool that
        admits 30 streams of a full window each is mostly empty while they are new)."""
        refused = self._snapshot["rejected"].get("stream_refused", 0)
        if refused <= self._refused_said or time.monotonic() < self._next_refused_warning:
            return
        self._next_refused_warning = time.monotonic() + BEHIND_WARNING_EVERY_S
        print(f"flashtick: refused {refused - self._refused_said} ticks of new streams since the last such line "
              f"({refused} in all): {self.pipeline.admission_limit()}; `_rejects/` names the streams",
              file=sys.stderr, flush=True)
        self._refused_said = refused

    def _refresh_snapshot(self) -> None:
        self._refresh_unread()  # (IngestReading's: the unread data's wait as of now, not of the last read)
        data = getattr(self.pipeline, "data", None)
        now = time.time()  # stats_time: how fresh a reader (/metrics) finds these figures
        self._snapshot = {**self.pipeline.stats(), **self.counters, "uptime_s": now - self.started_at,
                          "stats_time": now,
                          "kv_thrash": self._kv_thrash.thrashing,
                          "kv_pool_small": self._kv_thrash.pool_short is not None,
                          "process_resident_memory_bytes": resident_bytes(),
                          "process_start_time_seconds": PROCESS_START_TIME,
                          **({"log_problem": data.items.problem} if data is not None else {})}
        self._snapshot["rejected_streams"] = self.stream_refusals.most()  # (stream_refusals.py)
        self._clocks_ahead_now = self._clocks_ahead()  # (FeedClocks': the heartbeat says those newly ahead)
        self._snapshot["clock_ahead_streams"] = len(self._clocks_ahead_now)
        self._snapshot.update(self._unread())
        self._snapshot.update(self._freshness(now))
        if self.reorder is not None:  # ingest.reorder_window_ms: what it holds, and the late ticks it placed
            self._snapshot["reorder"] = {"held": len(self.reorder), "placed": self.reorder.placed,
                                         "released_early": self.reorder.released_early}
        if self._feed_watches:  # a quiet publisher told apart from one never connected (or dropped)
            self._snapshot["feeds"] = [watch.stats() for watch in self._feed_watches.values()]

    def _unread(self) -> dict[str, int | None]:
        """What waits at the ingest socket before it is read (unread_ingest.py): `unread_bytes` in this host's
        kernel buffers, and `unread_messages`, those bytes at the mean size of the last messages read there (an
        estimate: right while what waits is like what came just before it); None where it cannot be seen."""
        waiting = unread_bytes(self.endpoints.get("ingest", "")) if hasattr(self, "endpoints") else None
        recent = getattr(self, "recent_message_bytes", ())
        per_message = sum(recent) / len(recent) if recent else None
        messages = None if waiting is None else 0 if not waiting else \
            round(waiting / per_message) if per_message else None
        return {"unread_bytes": waiting, "unread_messages": messages}

    def _freshness(self, now: float) -> dict[str, Any]:
        """How old the newest answer and the newest accepted tick are (None: none yet), and whether answers are
        stale while ticks arrive (limits.max_answer_age_s): `health`, /readyz and /metrics read them."""
        if self.pipeline.ticks_in != self._ticks_seen:
            self._ticks_seen, self._tick_at = self.pipeline.ticks_in, now
        answer_at = getattr(self, "_answer_at", None)
        answer_age = None if answer_at is None else age_said(now - answer_at)
        tick_age = None if self._tick_at is None else age_said(now - self._tick_at)
        registry = self.pipeline.registry
        encoders = getattr(self.pipeline, "encoders", None)
        stale = self.answer_freshness.stale(registry.list(), registry.matching,
                                            encoders.received_ns if encoders is not None else {}, now,
                                            getattr(self, "_serving_since", now), self.config.limits.max_answer_age_s)
        self._stale_queries = stale
        return {"answer_age_s": answer_age, "tick_age_s": tick_age, "answers_stale": bool(stale),
                **({"stale_queries": stale[:STALE_QUERIES_SAID]} if stale else {})}

    def _watch_feeds(self) -> None:
        for watch in self._feed_watches.values():
            for line in watch.changes():
                print(f"flashtick: feed {watch.endpoint}: {line}", file=sys.stderr, flush=True)


def _most_shed(counts: dict[str, int] | None) -> str:
    """The most refused streams (stats' shed_streams) for the behind line: which feed floods, for the operator."""
    if not counts:
        return ""
    most = ", ".join(f"{stream} {n}" for stream, n in counts.items())
    return f"; most refused streams (in all): {most} (stats shed_streams)"


def where_the_backlog_is(pending: int, unread_messages: int | None, unread_bytes: int | None) -> str:
    """Where the data the `behind` line dates waits: accepted tokens are counted only once a message is read, and
    the engine reads at its own pace, so a burst mostly waits unread at the ingest socket (review379 #12: "0 tokens
    wait for a forward ..., the oldest data for 5.7 s" read as a contradiction). Said with the socket's unread
    messages and bytes (stats' `unread_messages`, `unread_bytes`), or that they cannot be seen here."""
    if unread_bytes is None:
        where = ("what waits unread at the ingest socket is not seen here (a tcp:// endpoint on Linux shows it): "
                 "the backlog is there or in the senders' queues")
        return where if not pending else f"besides the accepted tokens, {where}"
    if not unread_bytes:
        return ("nothing waits unread at the ingest socket" if pending else
                "nothing waits unread in this host's buffers either: the backlog is in the socket's small queue "
                "or the senders' own queues, read at the engine's pace")
    messages = f"about {unread_messages:,} messages, " if unread_messages is not None else ""
    unread = f"{messages}{unread_bytes:,} bytes unread at the ingest socket (read at the engine's pace)"
    return f"the backlog waits unread: {unread}" if not pending else f"besides them, {unread}"


def _longest_waiting(waiting: dict[str, dict] | None) -> str:
    """The streams behind the longest (stats' longest_waiting) for the behind line: which names are late."""
    if not waiting:
        return ""
    said = ", ".join(f"{name} {w['waiting_s']:.1f} s ({w['waiting_ticks']} ticks)" for name, w in waiting.items())
    return f"; waiting longest: {said}"
