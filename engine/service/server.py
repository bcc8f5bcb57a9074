"""The flashtick service: ZeroMQ ingest, answer topics and a control socket around one engine.

One thread owns every socket and the engine (ZeroMQ sockets and the model are
not shared across threads), in a loop that never blocks while work is pending:

    poll sockets (0 ms if the engine is busy) -> drain ingest and control
    -> engine step -> its answers go out on PUB, waiting asks get their reply -> heartbeat

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
from collections import OrderedDict
from typing import Any

import msgpack
import zmq

from connectors.feed import HEARTBEAT_TOPIC, REJECTS_TOPIC  # the service's own topics, one definition
from connectors.encoder import published_rejections
from engine.jobs import JobOutcome
from engine.memory_limit import resident_bytes
from engine.service.auth import ClientAllowList, FailedHandshakes, allowed_client_keys, server_keypair
from engine.service.config import ServiceConfig
from engine.service.control_ops import ControlOps
from engine.service.control_requests import ERROR_REPLY_CHARS, sendable
from engine.service.control_socket import CONTROL_HWM, ControlSocket, UnsentReplies
from engine.service.drain_slice import DRAIN_SLICE_S
from engine.service.durability import new_epoch
from engine.service.expired_streams import ExpiredStreamsLine
from engine.service.feed_watch import FeedWatch
from engine.service.forward_pace import ForwardPace
from engine.service.kv_thrash import KvThrashWatch
from engine.service.metrics import process_start_time
from engine.service.pipeline import TickPipeline, freeze_heap, thaw_heap
from engine.service.port_binding import bind_retrying, check_port_free, port_in_use
from engine.service.rejections import MAX_REFUSED_STREAMS_KEPT
from engine.service.sharded import ShardedPipeline
from engine.service.starting_replies import StartingReplies
from engine.service.subscriptions_held import SubscriptionsHeld
from engine.service.wire_protocol import TOKENIZED_MARKER, WIRE_PROTOCOL, pack
from queries.cache import Answer
from queries.limits import clip

BEHIND_WARNING_EVERY_S = 10.0
DROPPED_WHEN_BEHIND = {"shed": "ticks refused as overloaded",
                       "conflate": "quotes dropped for a newer one of their stream"}
# Subscribers of the stopped service reconnect by themselves (ZeroMQ retries every 100 ms by default): the answers
# owed at a restart wait this long after the sockets are bound, so a plain SUB that was connected gets them too (a
# GaplessSubscriber fetches whatever it still missed when a heartbeat shows the restart). libzmq reconnects a SUB
# that had not read all the old connection's messages only once it reads them: such a one misses them (seqs show it)
RECONNECT_GRACE_S = 1.0
# the end of limits.drain_s kept for a last read of the ingest queues (at most this, and a tenth of drain_s): what
# came while the stop computed is read (accepted and logged), not dropped with the socket
LAST_READ_S = 1.0
LAST_READ_SHARE = 0.1
# a stop's forwards are each sized to this share of the time it has left, at the recent forwards' pace: one that runs
# twice as slow as they did (a loaded machine's pace moves) still ends in time
FORWARD_SHARE_OF_TIME_LEFT = 0.5
PROCESS_START_TIME = process_start_time()  # (read once: it does not change)


class Server(ControlSocket, ControlOps):
    def __init__(self, config: ServiceConfig, serve_hints: bool = True) -> None:
        """``serve_hints``: the log's lines for an operator of `flashtick serve` (behind its limits.*, what a stop
        left for a feed to resume); the demo, whose user has neither, says its own."""
        self.config = config
        self.serve_hints = serve_hints
        self._waiting: dict[int, Any] = {}  # ask ticket -> the control reply still owed
        self._tickets = 0
        self.context = zmq.Context.instance()
        self.endpoints: dict[str, str] = {}
        self.ready = threading.Event()
        self._stop = threading.Event()
        self._stop_requested: float | None = None  # monotonic time of the first stop(): limits.drain_s counts from it
        self._pace = ForwardPace()  # the recent forwards' seconds per token: the stop sizes its forwards to its time
        self._sockets: dict[str, zmq.Socket] = {}
        self._feed_watches: dict[str, FeedWatch] = {}  # socket name -> its external feed's connection and counts
        self.started_at = time.time()
        self._curve_keys: tuple[bytes, bytes] | None = None  # the server's (public, secret) z85 keys
        self._curve_sockets: set[str] = set()  # the sockets bound with CURVE: their failed handshakes are watched
        self._handshakes: FailedHandshakes | None = None
        self._auth: ClientAllowList | None = None  # the ZAP handler of curve.clients_dir
        self.counters = {"answers_published": 0, "control_requests": 0, "control_errors": 0, "heartbeats": 0,
                         "ingest_messages": 0, "engine_errors": 0, "streams_expired": 0,
                         "answer_fetches": 0, "control_replies_dropped": 0, "subscriptions": 0,
                         "subscription_bytes": 0}
        self._subscriptions = SubscriptionsHeld()
        self._start_curve()
        # the control socket first: while the model loads and the tick log replays (minutes for a long log)
        # `health` answers "starting" rather than nothing, so a supervisor's probe does not take it for a hang
        # with router_mandatory a reply past a client's CONTROL_HWM unread fails (zmq.Again) instead of being
        # dropped unseen: it waits in _unsent, bounded in bytes (limits.control_queue_bytes), and then is counted.
        # Requests too: past CONTROL_HWM of a client's waiting to be read, ZeroMQ stops reading its connection (the
        # client's own queue holds the rest), rather than hold up to 1,000 of max_control_bytes each
        control = self._socket("control", zmq.ROUTER, config.endpoints.control, curve=True,
                               maxmsgsize=config.limits.max_control_bytes, sndhwm=CONTROL_HWM, rcvhwm=CONTROL_HWM,
                               router_mandatory=1)
        self._unsent: dict[bytes, UnsentReplies] = {}  # routing id -> replies ZeroMQ's queue had no room for yet
        self._snapshot: dict[str, Any] = {}
        self._metrics_server: Any = None
        self._starting = StartingReplies(control, config.model.model_id, config.limits.zero_bid, self.started_at,
                                          self._send_reply)
        try:
            # metrics as early: a scrape while the log replays finds the target up and starting, not down
            self._start_metrics()
            # ingest and answers bind once the engine is up; a port taken is said now, before the data directory
            # is made: a fresh --data-dir is not left behind by a start that could never serve
            for name in ("ingest", "answers"):
                check_port_free(name, getattr(config.endpoints, name))
            with self._starting as starting:
                # one engine in this process, or N engine shards (Ray actors) behind the same sockets
                self.pipeline = ShardedPipeline(config) if config.shards.count else \
                    TickPipeline(config, progress=starting.said, defer_owed=True)
        except BaseException:  # (a config the engine refuses): nothing stays bound
            control.close(linger=0)
            self._stop_metrics()
            if self._auth is not None:
                self._auth.stop()
            raise
        self._starting.said("binding ingest and answers")  # until the loop serves (serve_forever)
        # the id of this service's answer seqs: its data directory's (the same at every start), else new at each
        # start, whose seqs begin at 1 again: a client holding seqs of another epoch must start over, not drop these
        data = getattr(self.pipeline, "data", None)
        self.epoch = data.epoch if data is not None else new_epoch()
        self._next_behind_warning = 0.0
        # a restart's tail (ticks logged but not computed before the stop) is computed by the serving loop: until
        # it is and the engine is no longer behind, "behind" is the restart catching up, and the log says that
        self._catching_up, self._said_catching_up = bool(getattr(self.pipeline, "owed_ticks", 0)), False
        self._shed_at_heartbeat = 0  # ticks refused as overloaded up to the last heartbeat
        self._conflated_at_heartbeat = 0  # quotes conflated (when_behind: conflate) up to the last heartbeat
        self._shed_said = 0  # ticks refused or quotes conflated up to the last log line that said so
        self._refused_said, self._next_refused_warning = 0, 0.0  # stream_refused ticks the log has told of
        # the streams admission turned away most recently (name -> [ticks refused, the error]), for `streams`: a
        # client asking about one hears "refused, and why", not "never seen"; bounded, oldest forgotten first
        self._refused_streams: OrderedDict[str, list] = OrderedDict()
        self._take_turned_away()  # (a restart's: logged streams a lowered limit refused)
        self._expired_line = ExpiredStreamsLine(config.scheduler.stream_idle_s)
        self._unread_since: dict[str, float | None] = {}  # per ingest socket: since when messages wait unread
        self._kv_thrash = KvThrashWatch()

    # -- lifecycle ---------------------------------------------------------------------------

    def bind(self) -> dict[str, str]:
        """Create and bind every socket; returns the actual endpoints (ports resolved)."""
        ep, limits = self.config.endpoints, self.config.limits
        # ZeroMQ drops a peer that sends past maxmsgsize without reading the message: a hard cap well above
        # the counted, answered limits (an oversize tick message is read and rejected with a reason). The high-water
        # mark bounds each connection's queue in bytes too: one feed's flood of large messages waits in the feed
        # (its PUSH blocks), not in this process's memory
        ingest = self._socket("ingest", zmq.PULL, ep.ingest, rcvhwm=limits.ingest_rcvhwm,
                              maxmsgsize=limits.ingest_wire_bytes,
                              curve=self.config.curve.ingest)
        # a subscriber's subscriptions are held by libzmq at ~46x their bytes, for as long as it stays connected:
        # one longer than any topic (it can match nothing) drops its connection (XPUB_MANUAL does not help: libzmq
        # keeps every subscription a manual XPUB receives in a trie of its own, to undo them at a disconnect)
        # XPUB, not PUB: it tells the service of each distinct subscription held and of each gone, so stats can say
        # what subscribers make libzmq hold (it publishes exactly as PUB does)
        answers = self._socket("answers", zmq.XPUB, ep.answers, sndhwm=limits.answers_hwm, curve=True,
                               maxmsgsize=limits.longest_subscription_bytes)
        control = self._sockets["control"]  # bound before the recovery (__init__)
        for i, feed in enumerate(ep.feeds):
            sub = self.context.socket(zmq.SUB)
            sub.setsockopt(zmq.SUBSCRIBE, b"")
            sub.rcvhwm = limits.ingest_hwm
            # no maxmsgsize here: past it ZeroMQ drops the connection as a protocol error, and the side that
            # connects (the engine, on a feed) never connects again: one oversize message on the operator's own
            # bus would end that feed for good, silently. Read whole, it is rejected as oversize and counted.
            self._feed_watches[f"feed{i}"] = FeedWatch(feed, sub)
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

    def _socket(self, name: str, kind: int, endpoint: str, curve: bool = False, **options: int) -> zmq.Socket:
        sock = self.context.socket(kind)
        sock.linger = 0
        for option, value in options.items():
            setattr(sock, option, value)
        if curve and self._curve_keys is not None:
            sock.curve_publickey, sock.curve_secretkey = self._curve_keys
            sock.curve_server = True
            self._curve_sockets.add(name)
            if self._auth is not None:  # fail closed: no ZAP handler, no handshake
                sock.zap_domain = f"flashtick-{name}".encode()  # a refusal's log line names the socket
                sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
        if endpoint.endswith(":0"):  # an ephemeral port
            endpoint = endpoint[:-2] + ":*"
        try:
            bind_retrying(sock, endpoint)
        except zmq.ZMQError as e:
            sock.close()
            if e.errno == zmq.EADDRINUSE:
                raise port_in_use(name, endpoint) from None
            raise OSError(f"cannot bind the {name} socket to {endpoint}: {e.strerror} (set endpoints.{name} in the "
                          f"--config file)") from None
        self.endpoints[name] = sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self._sockets[name] = sock
        return sock

    def _start_curve(self) -> None:
        """Read the server's keys and the allowed clients, and start the ZAP handler, before any socket binds."""
        curve = self.config.curve
        if not curve.enabled:
            return
        self._curve_keys = server_keypair(curve.server_secret_key_file, curve.server_public_key_file)
        if curve.clients_dir is not None:
            keys = allowed_client_keys(curve.clients_dir)
            self.context = zmq.Context()  # a ZAP handler serves one context: give this server its own
            self._auth = ClientAllowList(self.context, keys, self.counters)
            self._auth.start()

    def stop(self) -> None:
        if self._stop_requested is None:
            self._stop_requested = time.monotonic()
        self._stop.set()

    def serve_forever(self) -> None:
        if "ingest" not in self._sockets:  # (control was bound at the start)
            self.bind()
        if self.pipeline.recovered or getattr(self.pipeline, "owed_ticks", 0):
            # answers owed from before a restart go out first, once subscribers are back (the owed tail's with
            # the loop's first forwards; ticks arriving meanwhile wait in the ingest queue, then behind the tail)
            time.sleep(RECONNECT_GRACE_S)
        for outcome in self.pipeline.recovered:
            self._deliver(outcome)
        self.pipeline.recovered = []
        freeze_heap()  # after the model, the restored streams and the sockets: no collection walks them again
        self.ready.set()
        next_heartbeat = time.monotonic()
        try:
            while not self._stop.is_set():
                busy = self.pipeline.busy
                wait_ms = 0 if busy else max(0, min(50, int((next_heartbeat - time.monotonic()) * 1000)))
                events = dict(self.poller.poll(wait_ms))
                for name, sock in self._sockets.items():
                    if name == "ingest" or name.startswith("feed"):
                        # a socket left with messages unread (its share of the loop ran out) keeps its clock
                        emptied = sock not in events or self._drain_ingest(sock, self._feed_watches.get(name))
                        self._unread_since[name] = None if emptied else self._unread_since.get(name) or \
                            time.monotonic()
                unread = [since for since in self._unread_since.values() if since is not None]
                self.pipeline.ingest_unread_s = time.monotonic() - min(unread) if unread else 0.0
                if self._sockets["control"] in events:
                    self._drain_control()
                self._send_unsent()
                if self._sockets["answers"] in events:
                    self._subscriptions.read(self._sockets["answers"], self.counters)
                if self._stop.is_set():
                    break  # not a full forward now: the drain sizes its forwards to limits.drain_s
                self._step()
                if time.monotonic() >= next_heartbeat:
                    self._heartbeat()
                    next_heartbeat = time.monotonic() + self.config.limits.heartbeat_s
            self._drain()
        finally:
            self.close()
            thaw_heap()

    def _drain(self) -> None:
        """On stop: read what the feeds already handed to the ingest sockets and compute (and publish) what was
        accepted, again while more arrives meanwhile; then read once more right before the sockets close (accepted
        and logged: a restart owes their answers), so only what is still on the wire when they close is lost, not
        whatever came while the drain computed. All of it within limits.drain_s of the stop: each forward sized to
        a share of the time left (at the recent forwards' pace), the last read given the end of it, reading stopped
        at the deadline; what was not read stays unaccepted (a feed resumes from `streams`). Say what is left."""
        drain_s = self.config.limits.drain_s
        deadline = (self._stop_requested or time.monotonic()) + drain_s
        compute_until = deadline - min(LAST_READ_S, LAST_READ_SHARE * drain_s)  # the rest is the last read's
        read = self._read_queued_ingest(compute_until)
        drained = 0  # tokens computed by the drain: pending before each round of forwards less pending after it
        while True:
            pending = self.pipeline.pending_tokens()
            while self.pipeline.busy and (tokens := self._pace.tokens_within(
                    FORWARD_SHARE_OF_TIME_LEFT * (compute_until - time.monotonic()))):
                self._step(tokens)
            drained += max(0, pending - self.pipeline.pending_tokens())
            if time.monotonic() >= compute_until or not (more := self._read_queued_ingest(compute_until)):
                break
            read += more
        read += self._read_queued_ingest(deadline)  # (accepted, not computed: left)
        self._say_drained(read, drained, unread=time.monotonic() >= deadline and self._ingest_unread())
        self._expired_line.say(time.monotonic(), stopping=True)  # the log accounts for every expiry

    def _say_drained(self, read: int, drained: int, unread: bool) -> None:
        left = self.pipeline.pending_tokens()
        drain_s = self.config.limits.drain_s
        if not self.serve_hints:
            return
        if read:
            print(f"flashtick: read {read} messages the feeds had queued before stopping; a message sent after this "
                  f"is not read (a feed resumes from `streams` once the service is back: `flashtick feed` does)",
                  file=sys.stderr, flush=True)
        if unread:
            print(f"flashtick: stopped reading at limits.drain_s={drain_s:g} s with messages still queued at the "
                  f"ingest sockets: they are not accepted (a feed resumes from `streams` once the service is back: "
                  f"`flashtick feed` does)", file=sys.stderr, flush=True)
        if drained or left:
            print(f"flashtick: drained {drained} pending tokens before stopping"
                  + (f"; {left} still pending after limits.drain_s={drain_s:g} s" if left else ""),
                  file=sys.stderr, flush=True)

    def _ingest_unread(self) -> bool:
        """Whether an ingest socket still holds messages (the drain's time ran out before them)."""
        return any(sock.poll(0) for name, sock in self._sockets.items() if name == "ingest" or name.startswith("feed"))

    def _read_queued_ingest(self, deadline: float) -> int:
        """Messages waiting in the ingest sockets' queues, read until ``deadline``: ZeroMQ took them from the feeds,
        which will not send them again, and closing the sockets drops them unread. Read, they are accepted (in the
        tick log, when there is one, so a restart owes their answers) or refused with a reason like any other
        message. Returns how many were read."""
        before = self.counters["ingest_messages"]
        for name, sock in self._sockets.items():
            if name != "ingest" and not name.startswith("feed"):
                continue
            while time.monotonic() < deadline and not self._drain_ingest(sock, until=deadline):
                pass
        return self.counters["ingest_messages"] - before

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
            reply({"ok": True, "answer": outcome.answer.to_wire(), "cached": early is not None,
                   **({early: True} if early else {}), **self._data_age(outcome.answer.data_ts),
                   **(outcome.context or getattr(outcome.job, "context", None) or {})})  # (a shard's: RemoteJob)
        elif reply is not None:  # its shard lost mid-ask: the same ask, sent again, is answered; else the question's
            reason, error = getattr(outcome.job, "reason", None), outcome.error  # (a shard's: RemoteJob)
            if reason == "unknown_stream":  # its shard holds nothing of the stream: why, as one engine says it
                no_session = self._no_session(outcome.job.stream)
                reason, error = no_session.reason, sendable(clip(str(no_session), ERROR_REPLY_CHARS))
            reply({"ok": False, "reason": reason or ("shard_lost" if outcome.retry else "ask_failed"), "error": error})

    def close(self) -> None:
        self.pipeline.close()
        for watch in self._feed_watches.values():
            watch.close()
        if self._handshakes is not None:
            self._handshakes.close()
            self._handshakes = None
        for sock in self._sockets.values():
            sock.close(linger=0)
        self._sockets.clear()
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
            self.context.term()
        self._stop_metrics()

    # -- ingest ---------------------------------------------------------------------------------

    def _drain_ingest(self, sock: zmq.Socket, watch: FeedWatch | None = None, until: float | None = None) -> bool:
        """Read and ingest the socket's queued messages; True once its queue is empty, False when this turn's
        share ran out first (messages wait unread: `ingest_unread_s`), or the time ``until`` came (a stop's).
        ``watch``: an external feed's, counting."""
        # bounded in messages and in time: a flood of costly messages (a 1 MiB list of bad ticks is a million
        # rejections) must not keep the loop from control requests, forwards and heartbeats
        deadline = time.monotonic() + DRAIN_SLICE_S if until is None else min(time.monotonic() + DRAIN_SLICE_S, until)
        for _ in range(self.config.limits.max_ingest_per_step):
            if time.monotonic() > deadline:
                return False
            try:
                frames = sock.recv_multipart(zmq.NOBLOCK, copy=True)
            except zmq.Again:
                return True
            self.counters["ingest_messages"] += 1
            if watch is not None:
                watch.read()
            if len(frames) == 2 and frames[0] == TOKENIZED_MARKER:
                rejections = self.pipeline.ingest_tokenized(frames[1])
            elif len(frames) == 1:
                rejections = self.pipeline.ingest_message(frames[0])
            elif len(frames) == 2 and _looks_like_ticks(frames[0]):  # [ticks, ticks] or [ticks, topic]: a mistake
                self.pipeline.rejected["bad_framing"] += 1
                rejections = [{"index": -1, "reason": "bad_framing", "error": _framing_error(frames, tick_first=True)}]
            elif len(frames) == 2:  # [topic, ticks]: how PUB feeds frame a message for SUB filtering; topic unread
                rejections = self.pipeline.ingest_message(frames[1])
            else:
                self.pipeline.rejected["bad_framing"] += 1
                rejections = [{"index": -1, "reason": "bad_framing", "error": _framing_error(frames)}]
            self._remember_refused(rejections)
            for rejection in published_rejections(rejections):  # PUSH has no way back: reasons on their own topic
                self._send(REJECTS_TOPIC, rejection)
        return False

    def _remember_refused(self, rejections: list[dict[str, Any]]) -> None:
        """Streams none of whose ticks was accepted, with how many were refused and the first reason: `streams`
        and an `ask` say why such a stream holds nothing (admission turned it away, or every tick was bad: a yield
        quote crossed, a price at zero), where "has sent no data" would send the operator to the feed."""
        for rejection in rejections:
            stream = rejection.get("stream")
            if stream is None or (rejection["reason"] != "stream_refused" and stream in self.pipeline.encoders):
                continue  # (a stream with accepted ticks: its refusals are on `_rejects/` and in the counters)
            held = self._refused_streams.pop(stream, None) or [0, rejection["error"]]  # ("reason: why")
            held[0] += rejection.get("count", 1)
            self._refused_streams[stream] = held  # the most recent last
            if len(self._refused_streams) > MAX_REFUSED_STREAMS_KEPT:
                self._refused_streams.popitem(last=False)

    def _take_turned_away(self) -> None:
        """Streams the engine refused although their ticks were accepted and logged (a restart's replay under a
        lowered scheduler.max_streams; a shard's own admission), which the pipeline has forgotten: remembered as
        streams refused live are, so `streams`, `get` and `ask` say they were refused, not "has sent no data"."""
        turned_away = self.pipeline.take_turned_away()
        self._remember_refused([{"stream": stream, "reason": "stream_refused", "error": error, "count": ticks}
                                for stream, (ticks, error) in turned_away.items()])

    # -- answers ------------------------------------------------------------------------------

    def _publish(self, answer: Answer) -> None:
        self._send(answer.topic, {**answer.to_wire(), "epoch": self.epoch})
        self.counters["answers_published"] += 1

    def _send(self, topic: str, payload: dict[str, Any]) -> None:
        sock = self._sockets.get("answers")
        if sock is not None:  # PUB never blocks: a subscriber past its HWM loses messages (seq shows the gap)
            sock.send_multipart([topic.encode(), pack(payload)], zmq.NOBLOCK)

    def _heartbeat(self) -> None:
        self.counters["heartbeats"] += 1
        if self._handshakes is not None:
            self._handshakes.poll()
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
        self._send(HEARTBEAT_TOPIC, {"seq": self.counters["heartbeats"], "ts": time.time_ns(),
                                     "ticks_in": self.pipeline.ticks_in,
                                     "answers_out": self.counters["answers_published"],
                                     "pending_tokens": pending, "behind": behind,
                                     "lag_s": self._snapshot["lag_s"], "shed": shed, "conflated": conflated,
                                     "max_message_bytes": self.config.limits.max_message_bytes,
                                     "protocol": WIRE_PROTOCOL, "epoch": self.epoch,
                                     "registry_version": self.pipeline.registry.version})
        self._kv_thrash.watch(self._snapshot, self.pipeline, self.config)
        self._watch_feeds()
        self._say_refused_streams()
        # a burst's refusals mostly come after the line its first heartbeat printed: those are said once the
        # line's interval has passed, caught up or not, so the log accounts for every tick shed
        dropped_total = shed_total + conflated_total  # (one of the two, as when_behind says)
        if self.serve_hints and (behind or dropped_total > self._shed_said) and \
                time.monotonic() >= self._next_behind_warning:
            self._next_behind_warning = time.monotonic() + BEHIND_WARNING_EVERY_S
            limits = self.config.limits
            what = DROPPED_WHEN_BEHIND.get(limits.when_behind)
            then = (f"{dropped_total - self._shed_said} {what} since the last such line, {dropped_total} in all"
                    if what else "answers lag") + _most_shed(self._snapshot.get("shed_streams"))
            self._shed_said = dropped_total
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
            print(f"flashtick: behind: {pending} tokens wait for a forward (limits.max_backlog_tokens="
                  f"{limits.max_backlog_tokens}), the oldest data for {self._snapshot['lag_s']:.1f} s "
                  f"(limits.max_lag_s={limits.max_lag_s:g}; or the ingest queue not once emptied for that long); "
                  f"when_behind: {limits.when_behind} ({then})", file=sys.stderr, flush=True)

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
        data = getattr(self.pipeline, "data", None)
        now = time.time()  # stats_time: how fresh a reader (/metrics) finds these figures
        self._snapshot = {**self.pipeline.stats(), **self.counters, "uptime_s": now - self.started_at,
                          "stats_time": now,
                          "kv_thrash": self._kv_thrash.thrashing, "process_resident_memory_bytes": resident_bytes(),
                          "process_start_time_seconds": PROCESS_START_TIME,
                          **({"log_problem": data.problem} if data is not None else {})}
        if self._feed_watches:  # a quiet publisher told apart from one never connected (or dropped)
            self._snapshot["feeds"] = [watch.stats() for watch in self._feed_watches.values()]

    def _watch_feeds(self) -> None:
        for watch in self._feed_watches.values():
            for line in watch.changes():
                print(f"flashtick: feed {watch.endpoint}: {line}", file=sys.stderr, flush=True)


    # -- control --------------------------------------------------------------------------------


    # -- metrics --------------------------------------------------------------------------------

    def _start_metrics(self) -> None:
        """The Prometheus endpoint (endpoints.metrics_port), bound with the control socket, before the model loads."""
        from engine.service.metrics import start_metrics_server

        host, port = self.config.endpoints.metrics_host, self.config.endpoints.metrics_port
        if port is None:
            return
        try:
            self._metrics_server = start_metrics_server(host, port, self._metrics_snapshot)
        except OSError as e:  # like the sockets' bind errors: the key and the endpoint
            raise OSError(f"cannot serve metrics on {host}:{port}: {e.strerror or e}; set endpoints.metrics_port "
                          f"to a free port") from None
        self.endpoints["metrics"] = f"http://{host}:{self._metrics_server.server_port}/metrics"

    def _metrics_snapshot(self) -> dict[str, Any]:
        """What a scrape renders (on the HTTP thread: reads, never touches the engine): the engine thread's last
        snapshot once the loop serves; before that, the start's phase and the process's own figures."""
        if self.ready.is_set():
            return self._snapshot
        return {"starting": self._starting.phase, "process_start_time_seconds": PROCESS_START_TIME,
                "process_resident_memory_bytes": resident_bytes()}

    def _stop_metrics(self) -> None:
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
            self._metrics_server = None


def _framing_error(frames: list[bytes], tick_first: bool = False) -> str:
    first = ascii(frames[0][:16]) if frames else "nothing"
    what = "whose first frame is itself ticks (it would be read as a topic and dropped) " if tick_first else ""
    return (f"bad_framing: a message of {len(frames)} frames {what}(the first {first}); ingest takes one frame "
            f"(msgpack ticks), two frames [topic, msgpack ticks] or [b'tokens', msgpack array] (tokenized ticks)")


def _most_shed(counts: dict[str, int] | None) -> str:
    """The most refused streams (stats' shed_streams) for the behind line: which feed floods, for the operator."""
    if not counts:
        return ""
    most = ", ".join(f"{stream} {n}" for stream, n in counts.items())
    return f"; most refused streams (in all): {most} (stats shed_streams)"


def _looks_like_ticks(frame: bytes) -> bool:
    """Whether a two-frame message's first frame (its topic, never read) is a msgpack tick map or list of them:
    [ticks, topic] or [tickA, tickB] would otherwise lose ticks without a word. Only a frame that starts like a
    msgpack map or array is decoded, so plain topics (stream names) cost a byte's look."""
    if not frame or not (0x80 <= frame[0] <= 0x9F or 0xDC <= frame[0] <= 0xDF):
        return False
    try:
        obj = msgpack.unpackb(frame, raw=False, strict_map_key=False)
    except Exception:  # not msgpack after all: a topic like any other
        return False
    first = obj[0] if isinstance(obj, list) and obj else obj
    return isinstance(first, dict) and "stream" in first
