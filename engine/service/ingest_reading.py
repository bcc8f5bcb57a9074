"""Reading the ingest sockets (the PULL socket and the feeds' SUB sockets): each message's framing told apart
(ticks, [topic, ticks], tokenized ticks, or a mistake said as bad_framing), handed to the pipeline, its
rejections published on `_rejects/`, and the streams none of whose ticks was accepted remembered with why (for
`streams`, `get` and `ask`). Bounded per turn of the loop, so a flood cannot stall control, forwards, heartbeats."""

from __future__ import annotations

import functools
import time
from collections import OrderedDict, deque
from typing import Any

import msgpack
import zmq

from connectors.encoded_items import Rejection
from connectors.service_topics import echoed_topic, published_rejections, rejects_topic
from connectors.tick_errors import InvalidTick
from engine.service.config import ServiceConfig
from engine.service.drain_slice import DRAIN_SLICE_S
from engine.service.feed_watch import FeedWatch
from engine.service.ingest_holding import IngestHolding
from engine.service.forgotten_refusals import ForgottenRefusals
from engine.service.pipeline import TickPipeline
from engine.service.placed_feeds import PlacedFeeds
from engine.service.rejections import MAX_REFUSED_STREAMS_KEPT, REFUSED_HOLDER
from engine.service.sharded import ShardedPipeline
from engine.service.stream_refusals import StreamRefusals
from engine.service.unread_clock import UnreadClock, unread_wait_s
from engine.service.unread_ingest import unread_bytes, wire_bytes
from engine.service.wire_protocol import TOKENIZED_MARKER
from engine.quoting import quoted

# the ingest messages read last whose mean size counts the bytes unread at the socket in messages: those waiting
# came after them on their connections (a whole queue of the socket's, 32 messages by default)
RECENT_MESSAGES = 32
# a feed's placing `streams` reads what is queued on ingest for at most this long, and waits this long for more
PLACING_DRAIN_S = 10.0
PLACING_SETTLE_MS = 50
# settles that found a message while the kernel held nothing unread on the ingest connections: what keeps coming
# then is another feed's steady flow, not a backlog queued before the read (whose bytes the kernel still holds)
STEADY_FLOW_SETTLES = 3
# a msgpack array of no item, in each of its three headers (fixarray, array16, array32): a message that holds no
# tick is refused as `empty_list` and counted, not taken silently (review308 #8)
EMPTY_LISTS = (b"\x90", b"\xdc\x00\x00", b"\xdd\x00\x00\x00\x00")


class IngestReading(IngestHolding):
    """The Server's ingest sockets (a mixin: it reads the server's sockets and feeds its pipeline, through
    IngestHolding's renaming and reorder window)."""

    config: ServiceConfig
    pipeline: TickPipeline | ShardedPipeline
    counters: dict[str, int]
    _sockets: dict[str, zmq.Socket]
    _feed_watches: dict[str, FeedWatch]  # socket name -> its external feed's connection and counts
    _unread_clocks: dict[zmq.Socket, UnreadClock]  # per ingest socket: since when messages wait unread
    _refused_streams: OrderedDict[str, list]  # stream -> [ticks refused, the error], the most recent last
    _refused_forgotten: int  # refused streams that fell out of _refused_streams
    placed_feeds: PlacedFeeds  # (IngestHolding's) feeds placed by `streams`, and the feeds read before them
    stream_refusals: StreamRefusals  # refused ticks counted by stream and reason (stream_refusals.py)
    _forgotten_refusals: ForgottenRefusals  # ... their names, in a bounded filter
    endpoints: dict[str, str]  # the bound endpoints (ports resolved)
    recent_message_bytes: deque[int]  # the sizes of the last RECENT_MESSAGES read on the ingest socket

    def _read_ingest(self, events: dict[zmq.Socket, int]) -> None:
        """Read the ingest and feed sockets ``events`` (the loop's poll) found messages on, and keep, per socket,
        since when messages wait unread (the pipeline's ``ingest_unread_s``)."""
        ingest = [(name, sock) for name, sock in self._sockets.items() if name == "ingest" or name.startswith("feed")]
        if not self.pipeline.busy and not any(sock in events for _, sock in ingest):
            # nothing to compute and nothing came: data its ts dates earlier waited upstream, not for this engine
            self.pipeline.idle_at_ns = time.time_ns()
        for name, sock in ingest:
            self._read_unread(name, sock, events)
        self._release_due()
        self._refresh_unread()

    def _refresh_unread(self) -> None:
        """The pipeline's ``ingest_unread_s`` as of now (a heartbeat's or a reply's, a read's, a forward after the
        last read)."""
        self.pipeline.ingest_unread_s = unread_wait_s(list(self._unread_clocks.values()), time.time())

    def _read_unread(self, name: str, sock: zmq.Socket, events: dict[zmq.Socket, int]) -> None:
        """Read ``sock`` if the poll found messages on it, keeping since when what it holds has waited
        (unread_clock.py), told to the pipeline before the read, so shedding weighs the ticks read by their wait
        as of now, not as of the last turn, a forward ago (review243 #1, review392 #1)."""
        clock = self._unread_clocks.get(sock)
        if clock is None:  # (the kernel's view of the bound ingest endpoint's connections; a feed's is remote)
            view = functools.partial(unread_bytes, self.endpoints.get("ingest", "")) if name == "ingest" else None
            clock = self._unread_clocks[sock] = UnreadClock(time.time(), view)
        if sock not in events:  # (polled after a forward: ZeroMQ had the while to refill it from the connection)
            clock.found_empty(time.time())
            return
        clock.found(time.time())
        self._refresh_unread()
        self.pipeline.last_received_ns = None
        emptied = self._drain_ingest(sock, self._feed_watches.get(name))
        if self.pipeline.last_received_ns is not None:
            clock.dated(self.pipeline.last_received_ns / 1e9)
        elif emptied:
            clock.emptied(time.time())

    def _counted_read(self, sock: zmq.Socket, frames: list[bytes]) -> None:
        """A message read on an ingest or feed socket, counted; its size on the wire (unread_ingest.wire_bytes) told
        to the socket's unread clock and, on the ingest socket, kept among the last RECENT_MESSAGES', whose mean is
        what the bytes still unread there are counted in (heartbeat.py: review391 #5, the mean since the start read
        a burst of batches after single ticks as 20 times the messages there were)."""
        self.counters["ingest_messages"] += 1
        size = wire_bytes(frames)
        if sock is self._sockets.get("ingest"):
            self.recent_message_bytes.append(size)
        if (clock := self._unread_clocks.get(sock)) is not None:
            clock.read(size)

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
            self._counted_read(sock, frames)
            if watch is not None:
                watch.read()
            tag = echoed_topic(frames[0]) if len(frames) == 2 and frames[0] != TOKENIZED_MARKER else None
            if tag is not None:  # (a feed placed later reads the feeds read before it: placed_feeds.py)
                self.placed_feeds.read(tag)
            self.pipeline.encoders.reading_feed(tag)  # (whose numbering a feed-wide seq counts in: ingest.seq_scope)
            if frames[-1] in EMPTY_LISTS and len(frames) <= 2:  # (an encoder's bug that empties every batch)
                rejections = self._message_refused(InvalidTick(
                    "empty_list", "the message holds an empty list: no tick taken (send one tick map or a list of at "
                                  "least one)"))
            elif len(frames) == 2 and frames[0] == TOKENIZED_MARKER:
                rejections = self._ingest_tokenized(frames[1])
            elif len(frames) == 1:
                rejections = self._ingest_raw(frames[0], tag)
            elif len(frames) == 2 and _looks_like_ticks(frames[0]):  # [ticks, ticks] or [ticks, topic]: a mistake
                rejections = self._message_refused(_framing_error(frames, tick_first=True))
            elif len(frames) == 2:  # [topic, ticks]: how PUB feeds frame a message for SUB filtering; topic unread
                rejections = self._ingest_raw(frames[1], tag)
            else:
                rejections = self._message_refused(_framing_error(frames))
            self._publish_rejections(rejections, tag)
        return False

    def _publish_rejections(self, rejections: list[dict[str, Any]], tag: str | None) -> None:
        """A message's refusals: counted by stream, remembered for streams that hold nothing, and published on
        `_rejects/` (PUSH has no way back), under the sender's topic ``tag`` when it gave one."""
        if rejections and tag is not None:  # whose they are, for the sender (and its own topic: rejects_topic)
            rejections = [{**rejection, "topic": tag} for rejection in rejections]
        self.stream_refusals.add(rejections, self.pipeline.encoders.ticks_of)
        self._remember_refused(rejections)
        for rejection in published_rejections(rejections):  # PUSH has no way back: reasons on their own topic
            self._send(rejects_topic(tag), rejection)

    def _ingest_unread(self, within_s: float = 0.0) -> bool:
        """Whether an ingest socket holds messages (the drain's time ran out before them), or one reaches it within
        ``within_s`` (a stop tells a feed still sending from one gone quiet)."""
        within_ms = max(0, int(within_s * 1000))
        return any(sock.poll(within_ms) for name, sock in self._sockets.items()
                   if name == "ingest" or name.startswith("feed"))

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
        self._release_all()  # (held ticks are not in the tick log: a stop, or a feed placing itself, takes them)
        return self.counters["ingest_messages"] - before

    def _read_before_placing(self) -> None:
        """Before a `streams` reply that places a feed (``drain``, a feed's first): the messages already queued on
        the ingest sockets, read. A feed killed and run again otherwise placed itself before the dead feed's last
        messages, still queued here; it sent their ticks again and each stamped at a stream's last `ts` was taken
        twice (review234 #2: 30,008 ticks held of a 30,000-tick file on a 5 ms clock). Bounded (PLACING_DRAIN_S):
        another feed's flood must not hold the reply."""
        self._read_until_settled(time.monotonic() + PLACING_DRAIN_S)

    def _read_until_settled(self, deadline: float, steady_flow_ends: bool = True) -> int:
        """The messages queued on the ingest sockets, read until they stay empty for PLACING_SETTLE_MS, or until
        ``deadline``: after a queue reads empty it is polled a moment more, since ZeroMQ's I/O thread moves what
        the kernel still holds of a connection into the queue as it drains (a burst waits mostly there).
        ``steady_flow_ends``: also once STEADY_FLOW_SETTLES settles found a message while the kernel held none of the
        ingest connections' bytes: a feed sending more often than the settle never let the queues stay empty, and a
        placing `streams` (or a stop's first read) held the loop for the whole bound, no forward, no heartbeat
        (review435 #1: 10 s a try beside a feed of 50 messages a second). Returns how many were read."""
        read = steady_settles = 0
        ingest = [sock for name, sock in self._sockets.items() if name == "ingest" or name.startswith("feed")]
        endpoint = self.endpoints.get("ingest", "")
        while time.monotonic() < deadline:
            read += self._read_queued_ingest(deadline)
            settle_ms = max(0, min(PLACING_SETTLE_MS, int((deadline - time.monotonic()) * 1000)))
            if any(sock.poll(settle_ms) for sock in ingest):
                if steady_flow_ends and unread_bytes(endpoint) == 0:  # (None: not to be seen here, read on)
                    steady_settles += 1
                    if steady_settles >= STEADY_FLOW_SETTLES:
                        break
                continue
            # on a loaded host ZeroMQ's I/O thread may take longer than the settle to refill the queue: the kernel
            # says whether the ingest connections still hold bytes unread (unread_ingest.py; Linux, tcp://)
            if not unread_bytes(endpoint):  # (None: not to be seen here)
                break
        return read

    def _refuse_unread(self, until: float) -> int:
        """A stop past limits.drain_s: the messages the ingest sockets still hold, read until ``until`` and each
        refused whole as `stopping` (counted, and said on `_rejects/` under its sender's topic), where closing the
        sockets dropped them unsaid (review376 #4). Returns how many."""
        refused = 0
        for name, sock in self._sockets.items():
            if name != "ingest" and not name.startswith("feed"):
                continue
            while time.monotonic() < until:
                try:
                    frames = sock.recv_multipart(zmq.NOBLOCK, copy=True)
                except zmq.Again:
                    break
                self._counted_read(sock, frames)  # (as a read message's: the mean size stays true)
                refused += 1
                tag = echoed_topic(frames[0]) if len(frames) == 2 and frames[0] != TOKENIZED_MARKER else None
                self._publish_rejections(self._message_refused(InvalidTick(
                    "stopping", "the service is stopping and its limits.drain_s ran out before this message: not "
                                "taken (send it again once the service is back: `streams` says each stream's last "
                                "seq and ts)")), tag)
        return refused

    def _remember_refused(self, rejections: list[dict[str, Any]]) -> None:
        """Streams none of whose ticks was accepted, with how many were refused and the first reason: `streams`
        and an `ask` say why such a stream holds nothing (admission turned it away, or every tick was bad: a yield
        quote crossed, a price at zero), where "has sent no data" would send the operator to the feed."""
        for rejection in rejections:
            stream = rejection.get("stream")
            if stream is None or (rejection["reason"] != "stream_refused" and stream in self.pipeline.encoders):
                continue  # (a stream with accepted ticks: its refusals are on `_rejects/` and in the counters)
            held = self._refused_streams.pop(stream, None)
            if held is None:  # a name known from now on, a lookalike of it refused (one refused as one is not)
                held = [0, rejection["error"]]  # ("reason: why")
                if self.pipeline.encoders.names.lookalike(stream) is None:
                    self.pipeline.encoders.names.add(stream, REFUSED_HOLDER)
            held[0] += rejection.get("count", 1)
            self._refused_streams[stream] = held  # the most recent last
            if len(self._refused_streams) > MAX_REFUSED_STREAMS_KEPT:
                forgotten = self._refused_streams.popitem(last=False)[0]
                self.pipeline.encoders.names.discard(forgotten, REFUSED_HOLDER)
                self._refused_forgotten += 1
                self._forgotten_refusals.add(forgotten)  # (bounded: `streams NAME` says it was refused, not unseen)

    def _message_refused(self, err: InvalidTick) -> list[dict[str, Any]]:
        """A whole message refused before any tick of it was read (index -1): counted under its reason, which
        InvalidTick holds to REASONS, and said on `_rejects/`."""
        self.pipeline.rejected[err.reason] += 1
        return [Rejection.of(-1, err).to_wire()]

    def _take_turned_away(self) -> None:
        """Streams the engine refused although their ticks were accepted and logged (a restart's replay under a
        lowered scheduler.max_streams; a shard's own admission), which the pipeline has forgotten: remembered as
        streams refused live are, so `streams`, `get` and `ask` say they were refused, not "has sent no data"."""
        turned_away = self.pipeline.take_turned_away()
        self._remember_refused([{"stream": stream, "reason": "stream_refused", "error": error, "count": ticks}
                                for stream, (ticks, error) in turned_away.items()])


def _framing_error(frames: list[bytes], tick_first: bool = False) -> InvalidTick:
    first = quoted(frames[0]) if frames else "nothing"
    what = "whose first frame is itself ticks (it would be read as a topic and dropped) " if tick_first else ""
    return InvalidTick("bad_framing", f"a message of {len(frames)} frames {what}(the first {first}); ingest takes one "
                       f"frame (msgpack ticks), two frames [topic, msgpack ticks] or [\"tokens\", msgpack array] "
                       f"(tokenized ticks)")


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
