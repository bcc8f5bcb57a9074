"""The flashtick service: ZeroMQ ingest, answer topics and a control socket around one engine.

One thread owns every socket and the engine (ZeroMQ sockets and the model are
not shared across threads), in a loop that never blocks while work is pending:

    poll sockets (0 ms if the engine is busy) -> drain ingest and control
    -> engine step -> its answers go out on PUB, waiting asks get their reply -> heartbeat

This file holds the Server, its sockets' lifecycle and that loop; the loop's parts are modules beside it:
ingest_reading (ingest and feed sockets), control_socket (requests in, replies out), control_ops (what each
op does), ingest_holding (ingest.rename and the reorder window), feed_clocks (each stream's clock offset and
refused ticks), heartbeat (the `_heartbeat/` message, stats snapshot and the operator's log lines), stop_drain (the
drain on stop), starting_replies (control while the model loads), port_binding, and the watchers feed_watch,
subscriptions_held, expired_streams and kv_thrash.

Sockets (all bound to 127.0.0.1 unless configured):
  ingest   PULL  feed handlers PUSH msgpack ticks; a two-frame [b"tokens", msgpack]
                 message carries already-tokenized ticks
  feeds    SUB   optional connections to external PUB feeds (same payloads)
  answers  PUB   [topic, msgpack answer]; "_heartbeat/" and "_rejects/" topics too
  control  ROUTER  msgpack {op, ...} -> {ok: true, ...} | {ok: false, error}
"""

from __future__ import annotations

import sys
import threading
import time
from collections import OrderedDict, deque
from typing import Any

import zmq

from connectors.service_topics import HEARTBEAT_TOPIC, REJECTS_TOPIC  # the service's own topics, one definition
from connectors.service_topics import published_rejections
from connectors.tcp_endpoints import ipv6_for
from engine.jobs import JobOutcome
from engine.memory_limit import resident_bytes
from engine.service.answer_caveats import PublishedCaveats
from engine.service.answer_freshness import AnswerFreshness
from engine.service.auth import FailedHandshakes
from engine.service.config import ServiceConfig
from engine.service.control_ops import ControlOps
from engine.service.control_requests import ERROR_REPLY_CHARS, sendable
from engine.service.control_socket import ControlSocket, UnsentReplies
from engine.service.data_dir_open import new_epoch
from engine.service.log_provenance import checkpoint_dir
from engine.service.loop_turns import LoopTurns
from engine.service.model_digest import model_digest
from engine.service.early_start import EarlyStart, bind_socket
from engine.service.document_parse import DocumentParse
from engine.service.feed_clocks import FeedClocks
from engine.service.feed_watch import FeedWatch
from engine.service.forgotten_refusals import ForgottenRefusals
from engine.service.forward_pace import ForwardPace
from engine.service.heartbeat import PROCESS_START_TIME, Heartbeat
from engine.service.ingest_reading import RECENT_MESSAGES, IngestReading
from engine.service.heap_memory import freeze_heap, thaw_heap
from engine.service.pipeline import TickPipeline
from engine.service.port_binding import check_port_free
from engine.service.server_failure import said_failure
from engine.service.sharded import ShardedPipeline
from engine.service.stop_drain import StopDrain
from engine.service.subscriptions_held import SubscriptionsHeld
from engine.service.unread_clock import UnreadClock
from engine.service.wire_protocol import TOKENIZED_MARKER, pack
from engine.service.metrics_text import replayed_counts
from engine.service.readiness import probe_reply
from queries.cache import Answer
from queries.limits import clip

# Subscribers of the stopped service reconnect by themselves (ZeroMQ retries every 100 ms by default): the answers
# owed at a restart wait this long after the sockets are bound, so a plain SUB that was connected gets them too (a
# GaplessSubscriber fetches whatever it still missed when a heartbeat shows the restart). libzmq reconnects a SUB
# that had not read all the old connection's messages only once it reads them: such a one misses them (seqs show it)
RECONNECT_GRACE_S = 1.0
# at a stop, the answers and control sockets are closed with this linger: the last answers, `_rejects/` entries and
# `stopping` replies still in ZeroMQ's queues go out to subscribers and clients that read them within it (a
# subscriber further behind loses the rest: docs/wire-protocol.md, *Gapless answers*, says how it sees that);
# `flashtick serve` waits for them as it exits (cmd_serve._flush_on_exit). Within the second or two of exiting
# limits.drain_s leaves before a supervisor's SIGKILL
STOP_FLUSH_S = 1.0

# tests import the service's topics and the tokenized ticks' marker from here (defined in connectors.service_topics
# and wire_protocol): named so they stay importable where they always were
__all__ = ["HEARTBEAT_TOPIC", "REJECTS_TOPIC", "TOKENIZED_MARKER", "Server"]


class Server(IngestReading, ControlSocket, ControlOps, Heartbeat, StopDrain, FeedClocks):
    """The service around one engine (or its shards): binds the sockets, runs the loop (serve_forever) until
    stop(), and closes. Its parts are mixins, each in the module of its name, sharing this object's state."""

    _published_caveats: PublishedCaveats | None = None  # what a published answer carries as caveats (answer_caveats.py)

    def __init__(self, config: ServiceConfig, serve_hints: bool = True, early: EarlyStart | None = None) -> None:
        """``serve_hints``: the log's lines for an operator of `flashtick serve` (behind its limits.*, what a stop
        left for a feed to resume); the demo, whose user has neither, says its own. ``early``: the control socket
        and metrics endpoint `flashtick serve` bound before importing this module (else bound here, first)."""
        self.config = config
        self.serve_hints = serve_hints
        self._waiting: dict[int, Any] = {}  # ask ticket -> the control reply still owed
        self._parsing: DocumentParse | None = None  # a `register` whose document a thread of its own parses
        self._tickets = 0
        self.ready = threading.Event()
        self._stop = threading.Event()
        self._stop_requested: float | None = None  # monotonic time of the first stop(): limits.drain_s counts from it
        self._pace = ForwardPace()  # the recent forwards' seconds per token: the stop sizes its forwards to its time
        self._heap_frozen = False  # whether serving froze the heap (heap_memory.freeze_heap), for its thaw at the stop
        self._unread_clocks: dict[zmq.Socket, UnreadClock] = {}  # per ingest socket: since when data waits unread
        self.recent_message_bytes: deque[int] = deque(maxlen=RECENT_MESSAGES)  # (IngestReading's)
        self._feed_watches: dict[str, FeedWatch] = {}  # socket name -> its external feed's connection and counts
        self._handshakes: FailedHandshakes | None = None
        # the control socket and metrics first (EarlyStart): while the engine imports, the model loads and the tick
        # log replays (minutes for a long log) `health` answers "starting" rather than nothing, so a supervisor's
        # probe does not take it for a hang
        early = early if early is not None else EarlyStart(config, phase="loading the model")
        self.started_at = early.started_at
        self.context, self.endpoints, self._sockets = early.context, early.endpoints, early._sockets
        self._curve_keys, self._curve_sockets, self._auth = early._curve_keys, early._curve_sockets, early._auth
        self.counters = early.counters  # (the ZAP handler's auth_* counts go on in it)
        self.counters.update({"answers_published": 0, "control_requests": 0, "control_errors": 0, "heartbeats": 0,
                              "ingest_messages": 0, "engine_errors": 0, "streams_expired": 0, "answer_fetches": 0,
                              "control_replies_dropped": early.dropped_replies, "subscriptions": 0,
                              "subscription_bytes": 0, "subscriptions_unmatchable": 0})
        self._subscriptions = SubscriptionsHeld(config.limits.longest_topic_bytes)
        control = early.control
        self._unsent: dict[bytes, UnsentReplies] = {}  # routing id -> replies ZeroMQ's queue had no room for yet
        self._snapshot: dict[str, Any] = {}
        self._metrics_server: Any = early.metrics_server
        self._starting = early.starting
        self._starting.said("loading the model")
        self._starting._send = self._send_reply  # (replies past a client's queue wait and are counted from here)
        early._snapshot = self._metrics_snapshot
        self._loop = LoopTurns(config.limits.stall_s)  # when the serving loop last turned (/healthz), its stalls
        self._answer_at: float | None = None  # time.time() of the newest answer published (readiness.py)
        self.answer_freshness = AnswerFreshness()  # ... and of each query's (answer_freshness.py)
        self._serving_since = time.time()
        early._probe = self._http_probe
        self._early = early
        self._start_pipeline(control)
        self._starting.said("binding ingest and answers")  # until the loop serves (serve_forever)
        # the id of this service's answer seqs: its data directory's (the same at every start), else new at each
        # start, whose seqs begin at 1 again: a client holding seqs of another epoch must start over, not drop these
        data = getattr(self.pipeline, "data", None)
        self.epoch = data.epoch if data is not None else new_epoch()
        # which model answers, every byte of its files (model_digest.py): published with each answer, so a desk can
        # tie what it acted on to a model, not to a folder's name (review349 #3)
        self.model_digest = model_digest(checkpoint_dir(self.config.model.path)).digest
        self._init_feed_clocks()
        self._init_holding()
        self._init_heartbeat()
        # the streams admission turned away most recently (name -> [ticks refused, the error]), for `streams`: a
        # client asking about one hears "refused, and why", not "never seen"; bounded, oldest forgotten first
        self._refused_streams: OrderedDict[str, list] = OrderedDict()
        self._refused_forgotten = 0  # ... and how many of them fell out of it (`streams` counts them: refused_more)
        self._forgotten_refusals = ForgottenRefusals()  # ... and their names, bounded: "refused earlier", not "never"
        self._take_turned_away()  # (a restart's: logged streams a lowered limit refused)

    def _start_pipeline(self, control: zmq.Socket) -> None:
        """Load the model and recover the streams (one engine, or the shards) while ``control`` answers that the
        service is starting; a start that fails leaves nothing bound."""
        config = self.config
        try:
            # ingest and answers bind once the engine is up; a port taken is said now, before the data directory
            # is made: a fresh --data-dir is not left behind by a start that could never serve
            for name in ("ingest", "answers"):
                check_port_free(name, getattr(config.endpoints, name))
            with self._starting as starting:
                # one engine in this process, or N engine shards (Ray actors) behind the same sockets
                self.pipeline = ShardedPipeline(config) if config.shards.count else \
                    TickPipeline(config, progress=starting.said, defer_owed=True)
            self.pipeline.published.of = self._published_fields  # kept with each answer from here on
        except BaseException:  # (a config the engine refuses): nothing stays bound
            self._early.close()
            self._metrics_server = self._auth = None
            raise

    # -- lifecycle ---------------------------------------------------------------------------

    def bind(self) -> dict[str, str]:
        """Create and bind every socket; returns the actual endpoints (ports resolved)."""
        ep, limits = self.config.endpoints, self.config.limits
        # ZeroMQ drops a peer that sends past maxmsgsize without reading the message: a hard cap well above
        # the counted, answered limits (an oversize tick message is read and rejected with a reason). The high-water
        # mark bounds each connection's queue in bytes too: one feed's flood of large messages waits in the feed
        # (its PUSH blocks), not in this process's memory
        ingest = bind_socket(self, "ingest", zmq.PULL, ep.ingest, rcvhwm=limits.ingest_rcvhwm,
                              maxmsgsize=limits.ingest_wire_bytes,
                              curve=self.config.curve.ingest)
        # a subscriber's subscriptions are held by libzmq at ~46x their bytes, for as long as it stays connected:
        # one longer than any topic (it can match nothing) is held and counted (SubscriptionsHeld), and only one
        # past limits.max_subscription_bytes drops its connection (XPUB_MANUAL does not help: libzmq keeps every
        # subscription a manual XPUB receives in a trie of its own, to undo them at a disconnect)
        # XPUB, not PUB: it tells the service of each distinct subscription held and of each gone, so stats can say
        # what subscribers make libzmq hold (it publishes exactly as PUB does)
        answers = bind_socket(self, "answers", zmq.XPUB, ep.answers, sndhwm=limits.answers_hwm, curve=True,
                               maxmsgsize=limits.answers_wire_bytes)
        control = self._sockets["control"]  # bound before the recovery (__init__)
        for i, feed in enumerate(ep.feeds):
            sub = self.context.socket(zmq.SUB)
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            sub.rcvhwm = limits.ingest_hwm
            # no maxmsgsize here: past it ZeroMQ drops the connection as a protocol error, and the side that
            # connects (the engine, on a feed) never connects again: one oversize message on the operator's own
            # bus would end that feed for good, silently. Read whole, it is rejected as oversize and counted.
            self._feed_watches[f"feed{i}"] = FeedWatch(feed, sub)
            ipv6_for(sub, feed)
            sub.connect(feed)
            self._sockets[f"feed{i}"] = sub
        self.poller = zmq.Poller()
        for sock in (ingest, control, answers, *(s for k, s in self._sockets.items() if k.startswith("feed"))):
            self.poller.register(sock, zmq.POLLIN)
        if self._curve_sockets and self._handshakes is None:  # (control's is bound before the others: all now)
            self._handshakes = FailedHandshakes({n: self._sockets[n] for n in sorted(self._curve_sockets)},
                                                self.counters)
        self._refresh_snapshot()
        return self.endpoints

    def stop(self) -> None:
        if self._stop_requested is None:
            self._stop_requested = time.monotonic()
        self._stop.set()

    def serve_forever(self) -> None:
        """Serve until stop(): each turn reads the sockets, then one engine step (the engine schedules, runs and
        commits one forward; its answers go out), then the heartbeat when due; at the stop, the drain."""
        self._start_serving()
        next_heartbeat = time.monotonic()
        try:
            while not self._stop.is_set():
                self._loop.turned(time.monotonic())
                self._read_sockets(next_heartbeat)
                if self._stop.is_set():
                    break  # not a full forward now: the drain sizes its forwards to limits.drain_s
                self._step()
                if time.monotonic() >= next_heartbeat:
                    self._heartbeat()
                    next_heartbeat = time.monotonic() + self.config.limits.heartbeat_s
            self._drain()
        except Exception as e:  # a bug of the loop's own (an engine step's is counted and served past: _step)
            if (data := getattr(self.pipeline, "data", None)) is not None:
                data.failed = True  # its lock left as a running service's: the next start says a crash
            raise said_failure(e) from e
        finally:
            self.close()
            thaw_heap(self._heap_frozen)

    def _start_serving(self) -> None:
        """Bind ingest and answers, send the answers owed from before a restart, and say ready."""
        if "ingest" not in self._sockets:  # (control was bound at the start)
            self.bind()
        if self.pipeline.recovered or getattr(self.pipeline, "owed_ticks", 0):
            # answers owed from before a restart go out first, once subscribers are back (the owed tail's with
            # the loop's first forwards; ticks arriving meanwhile wait in the ingest queue, then behind the tail)
            time.sleep(RECONNECT_GRACE_S)
        for outcome in self.pipeline.recovered:
            self._deliver(outcome)
        self.pipeline.recovered = []
        # after the model, the restored streams and the sockets: no collection walks them again
        self._heap_frozen = freeze_heap()
        self._serving_since = time.time()
        self._replayed = replayed_counts(self.pipeline.stats())  # (what /metrics' counters leave out)
        self._loop.turned(time.monotonic())
        self.ready.set()

    def _read_sockets(self, next_heartbeat: float) -> None:
        """Wait for messages (not at all while the engine has work, else until the heartbeat, 50 ms at most), then
        read each socket's, a bounded share each: ingest and feeds, control requests, subscriptions."""
        busy = self.pipeline.busy
        wait_ms = 0 if busy else max(0, min(50, int((next_heartbeat - time.monotonic()) * 1000)))
        wait_ms = self._holding_wait_ms(wait_ms)  # (no longer than until held ticks are due: ingest_holding.py)
        events = dict(self.poller.poll(wait_ms))
        self._read_ingest(events)
        self._take_parsed()  # (a `register` parsed off this thread: applied here)
        if self._sockets["control"] in events:
            self._drain_control()
        self._send_unsent()
        if self._sockets["answers"] in events:
            self._subscriptions.read(self._sockets["answers"], self.counters)

    def _step(self, max_tokens: int | None = None) -> None:
        """One forward (of about ``max_tokens`` at most, when given) and its answers out."""
        for rejection in published_rejections(self.pipeline.flush_held()):  # the quotes conflation kept aside
            self._send(REJECTS_TOPIC, rejection)
        try:
            started = time.monotonic()
            report = self.pipeline.step(max_tokens)
            if report is not None:
                self._pace.add(report.tokens, time.monotonic() - started)
            self._take_turned_away()  # (first: an ask's reply on a stream a shard has just refused says so)
            for outcome in report.outcomes if report is not None else []:
                self._deliver(outcome)
        except Exception as e:  # a bug must not take the service down: count it, say it, keep serving
            self.counters["engine_errors"] += 1
            print(f"flashtick: engine step failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)

    def _deliver(self, outcome: JobOutcome) -> None:
        """A standing query's answer goes out on its topic; an ask's to the asker alone."""
        if outcome.job.ticket is None:
            if outcome.answer is not None:
                self._publish(outcome.answer)
            return
        reply = self._waiting.pop(outcome.job.ticket, None)
        if reply is not None and outcome.answer is not None:
            early = getattr(outcome.job, "early", None)  # a shard's ask answered without a forward (RemoteJob)
            reply({"ok": True, "answer": self._answer_wire(outcome.answer), "cached": early is not None,
                   **({early: True} if early else {}), **self._data_age(outcome.answer.stream, outcome.answer.data_ts),
                   **(outcome.context or getattr(outcome.job, "context", None) or {})})  # (a shard's: RemoteJob)
        elif reply is not None:  # its shard lost mid-ask: the same ask, sent again, is answered; else the question's
            reason, error = getattr(outcome.job, "reason", None), outcome.error  # (a shard's: RemoteJob)
            if reason == "unknown_stream" and error is None:  # its shard holds nothing of it: why, as one engine says
                error = sendable(clip(str(self._no_session(outcome.job.stream)), ERROR_REPLY_CHARS))
            if reason is not None:  # a refusal one engine makes at once, counted as its reply is
                self.counters["control_errors"] += 1
            reply({"ok": False, "reason": reason or ("shard_lost" if outcome.retry else "ask_failed"), "error": error})

    def close(self) -> None:
        self.pipeline.close()
        for watch in self._feed_watches.values():
            watch.close()
        if self._handshakes is not None:
            self._handshakes.close()
            self._handshakes = None
        for name, sock in self._sockets.items():
            sock.close(linger=round(STOP_FLUSH_S * 1000) if name in ("answers", "control") else 0)
        self._sockets.clear()
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
            self.context.term()
        self._stop_metrics()

    # -- answers ------------------------------------------------------------------------------

    def _published_fields(self, answer: Answer) -> dict[str, Any]:
        """What a published answer carries beyond its cached form: its data age and stream's clock offset now, its
        caveats (published_fields.py: fixed when it is kept, so a gap fill gives the same)."""
        if self._published_caveats is None:  # (made at the first answer: the model's card is read once)
            engine = getattr(self.pipeline, "engine", None)  # (one engine's; a sharded front door holds none)
            self._published_caveats = PublishedCaveats(self.pipeline.scores, self.config.model.path,
                                                       engine.scheduler if engine is not None else None)
        caveats = self._published_caveats.of(answer.query, answer.stream).get("caveats", [])
        untrained = getattr(self.pipeline, "untrained", None)  # (one engine's: a sharded front door reads no tokens)
        caveats = self._clock_caveats(answer.stream) + caveats + (untrained.caveat(answer.stream) if untrained else [])
        return {**self._tick_seq(answer), **self._answer_feed(answer.stream, answer.data_ts),
                **({"caveats": caveats} if caveats else {})}

    def _publish(self, answer: Answer) -> None:
        fields = self.pipeline.published.take(answer)
        if fields is None:  # kept before the server told the pipeline (none expected): its fields as of now
            fields = self._published_fields(answer)
        self._send(answer.topic, {**answer.to_wire(), "epoch": self.epoch, "model_digest": self.model_digest,
                                  **fields})
        self.counters["answers_published"] += 1
        self._heartbeat_seqs.published(answer.topic, answer.seq)
        self._answer_at = time.time()
        self.answer_freshness.published(answer.query, self._answer_at)

    def _send(self, topic: str, payload: dict[str, Any]) -> None:
        sock = self._sockets.get("answers")
        if sock is not None:  # PUB never blocks: a subscriber past its HWM loses messages (seq shows the gap)
            sock.send_multipart([topic.encode(), pack(payload)], zmq.NOBLOCK)

    # -- metrics --------------------------------------------------------------------------------

    def _metrics_snapshot(self) -> dict[str, Any]:
        """What a scrape renders (on the HTTP thread: reads, never touches the engine): the engine thread's last
        snapshot once the loop serves; before that, the start's phase and the process's own figures."""
        if self.ready.is_set():
            return {**self._snapshot, "replayed": self._replayed}
        return {"starting": self._starting.phase, "process_start_time_seconds": PROCESS_START_TIME,
                "process_resident_memory_bytes": resident_bytes()}

    def _http_probe(self, path: str) -> tuple[int, dict[str, Any]]:
        """/healthz and /readyz (on the HTTP thread, as /metrics): from the last snapshot and the loop's last turn."""
        loop_age = self._loop.age(time.monotonic()) if self.ready.is_set() else None
        return probe_reply(path, self._metrics_snapshot(), loop_age, self.config.limits)

    def _stop_metrics(self) -> None:
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
            self._metrics_server = None
