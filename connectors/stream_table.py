"""The stream table behind the ingest side: stream name -> StreamEncoder, and what it keeps of each stream.

Apart from connectors/encoder.py because this is the bookkeeping of streams (who is held, the ordering guard an
expiry leaves behind, what was accepted and when, the state a restart starts from, phase two's commit), whereas
encoder.py holds the decoding of the two ingest wire forms, conflation and the submit path, which read and write
this table. `StreamEncoders` is the one table there is; the service only ever makes that.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from connectors.codec import Codec
from connectors.futures_codes import derivative_kind
from connectors.encoded_items import EncodedTick
from connectors.lookalike_names import LookalikeNames
from connectors.passed_over import PassedOver
from connectors.stamp_notes import StampNotes
from connectors.stream_encoder import StreamEncoder
from connectors.tick_sequences import TickSequences
from connectors.ticks import Tick
from connectors.answered_seqs import SeqAtCount

NAMES_HOLDER = "encoders"  # what LookalikeNames calls the streams held or expired here
EXPIRED_KEPT = 100_000  # expired streams whose ordering guard is kept (scheduler.expired_streams_kept's default)


class StreamTable:
    """Stream name -> StreamEncoder and each stream's marks: the ordering guard kept past an expiry, the quote
    conflation holds, the ticks passed over, when its last tick came off the wire. A stream gets its encoder when
    its first tick is committed (``commit``), so a refused first tick leaves no trace. Made through
    `StreamEncoders` (connectors/encoder.py), whose docstring gives the arguments."""

    def __init__(self, codec: Codec, vocab_size: int | None, max_stream_bytes: int,
                 notify: Callable[[str], None] | None, expired_kept: int = EXPIRED_KEPT,
                 seq_scope: str = "stream") -> None:
        self.codec = codec
        # the expired streams whose guard (and last `seq`, receive clock, sequence counts) are kept, the most
        # recently expired; an older one is forgotten as `forget` does (scheduler.expired_streams_kept)
        self.expired_kept = expired_kept
        # expired streams forgotten past expired_kept, not yet taken by the service (``take_forgotten``), which
        # frees what the answer side holds of them; and how many in all (stats: expired_streams_forgotten)
        self._forgotten: list[str] = []
        self.expired_forgotten = 0
        self.vocab_size = codec.vocab_size if vocab_size is None else vocab_size
        self.max_stream_bytes = max_stream_bytes
        self._encoders: dict[str, StreamEncoder] = {}
        self._expired_last_ts: dict[str, int] = {}  # expired streams' last accepted ts (see drop)
        self._expired_at_last_ts: dict[str, int | None] = {}  # ... and how many of their ticks it stamped
        # ... and their encoder's codec state, tick count and last raw tick (its price level), so the next tick of an
        # expired stream is encoded and counted as if it had never expired (its context is kept too: kept_contexts.py)
        self._expired_codec: dict[str, tuple[Any, int, Tick | None]] = {}
        self.stamp_notes = StampNotes(notify)  # first ts in another unit, ticks ahead of the clock
        self.held: dict[str, EncodedTick] = {}  # each stream's newest quote kept aside by conflation, not submitted
        self.passed_over = PassedOver()  # refused and conflated ticks since each stream's last accepted one
        # the receiver's wall clock (ns) when each stream's last tick was committed from a wire message: how long a
        # stream has been quiet (`accepted` with now_ns); kept past an expiry, as the ordering guard is. A tick
        # replayed from a tick log has no such clock: a stream restarted from one and quiet since has none.
        self.received_ns: dict[str, int] = {}
        # ... and when that tick reached the service, which may be long before its read: a burst the engine cannot
        # take at once waits upstream of the ingest socket, and is read at the engine's pace (review380 #3: a feed
        # stopped 40 s earlier read as idle 0.002 s while the engine was behind). ``idle_s`` counts from it.
        # ``arrival_of(stream, ts, read_ns)`` dates it (the service's receive clock, by the tick's own `ts` for a
        # feed stamped with the wall clock); None, or it answering None: the read time
        self.arrived_ns: dict[str, int] = {}
        self.arrival_of: Callable[[str, int, int], int | None] | None = None
        self._message_ns: int | None = None  # the clock of the wire message being ingested (None: none given)
        self._feed = ""  # the tag of the feed whose messages are read now ("": untagged)
        # the feed (its tag) whose tick each stream took last, live: `streams`' fed_by, which tells a feed another
        # publisher of its streams (review411 #10); absent: an untagged sender's, or none since this start
        self.fed_by: dict[str, str] = {}
        # every name held or expired here (and those the service remembers as refused) by its NFKC fold: a new wire
        # name that folds to another's is refused (lookalike_names.py)
        self.names = LookalikeNames()
        # each stream's last `seq`, duplicates, gaps (per stream, or per feed: ingest.seq_scope; tick_sequences.py)
        self.sequences = TickSequences(notify, seq_scope)
        self.seq_at = SeqAtCount()  # which `seq` the tick that brought a stream to a count carried (answers' tick_seq)
        # the held streams whose names say a derivative (a perpetual, future, swap, option), in the order first held:
        # kept as streams come and go, so `health`'s caveat on them costs O(1), not a walk of every stream held
        self.derivatives: dict[str, None] = {}
        # ... and those the served model was not trained on, kept alike for `health`'s caveat on them; ``trained_on``
        # says whether it trained on a stream (None: it records none, and no stream is kept)
        self.trained_on: Callable[[str], bool] | None = None
        self.not_trained_on: dict[str, None] = {}

    def __len__(self) -> int:
        return len(self._encoders)

    def __contains__(self, stream: object) -> bool:
        return stream in self._encoders

    def __iter__(self) -> Iterator[str]:
        return iter(self._encoders)

    def __getitem__(self, stream: str) -> StreamEncoder:
        return self._encoders[stream]

    def drop(self, stream: str) -> None:
        """A stream expired by the engine: its encoder goes, and what its next tick needs stays (a few values a
        name): the ordering guard (a tick older than one accepted before the expiry is still refused, as the tick
        log's replay would refuse it after a restart) and the codec state and counts (that tick is encoded and
        counted as if the stream had never expired, as a backtest, where nothing expires, encodes it)."""
        encoder = self._encoders.pop(stream, None)
        self.derivatives.pop(stream, None)
        self.not_trained_on.pop(stream, None)
        if encoder is not None and encoder.last_ts is not None:
            self._keep_expired(stream, encoder.last_ts, encoder.at_last_ts)
            self._expired_codec[stream] = (encoder.state, encoder.ticks, encoder.last_tick)
        elif stream not in self._expired_last_ts:  # (nothing of it kept: a name no longer known here)
            self.names.discard(stream, NAMES_HOLDER)

    def _keep_expired(self, stream: str, last_ts: int, at_last_ts: int | None) -> None:
        """``stream``'s guard kept past its expiry, as the newest; the oldest past ``expired_kept`` forgotten. The
        same drops in the same order (a tick log's replay of the expiries) forget the same streams."""
        self._expired_last_ts.pop(stream, None)  # (re-inserted: the dicts' order is the order of expiry)
        self._expired_at_last_ts.pop(stream, None)
        self._expired_last_ts[stream] = last_ts
        self._expired_at_last_ts[stream] = at_last_ts
        while len(self._expired_last_ts) > self.expired_kept:
            oldest = next(iter(self._expired_last_ts))
            self.forget(oldest)
            self._forgotten.append(oldest)
            self.expired_forgotten += 1

    def take_forgotten(self) -> list[str]:
        """The expired streams forgotten past ``expired_kept`` since the last call (each once)."""
        forgotten, self._forgotten = self._forgotten, []
        return forgotten

    def expired_held(self) -> int:
        """Expired streams whose ordering guard is kept (at most ``expired_kept``)."""
        return len(self._expired_last_ts)

    def expired_guards(self) -> dict[str, dict[str, Any]]:
        """The expired streams' guards kept, oldest expiry first, as ``accepted`` says them."""
        return {name: {"ticks": 0, "last_ts": last_ts, "at_last_ts": self._expired_at_last_ts.get(name),
                       **self.sequences.of(name)}
                for name, last_ts in self._expired_last_ts.items() if name not in self._encoders}

    def held_accepted(self) -> dict[str, dict[str, Any]]:
        """The held streams' last accepted ticks, as ``accepted`` says them (no expired one, no name order, no
        price)."""
        return {name: {"ticks": e.ticks, "last_ts": e.last_ts, "at_last_ts": e.at_last_ts,
                       **self.sequences.of(name)}
                for name, e in self._encoders.items()}

    def forget(self, stream: str) -> None:
        """Forget a stream the engine turned away although its ticks were accepted here (a restart's replay under a
        lower scheduler.max_streams): as for a stream admission refused live, nothing of it is held, guard included,
        so `streams` says it was refused rather than giving counts of ticks no session holds."""
        self._encoders.pop(stream, None)
        self.derivatives.pop(stream, None)
        self.not_trained_on.pop(stream, None)
        self._expired_last_ts.pop(stream, None)
        self.names.discard(stream, NAMES_HOLDER)
        self._expired_at_last_ts.pop(stream, None)
        self._expired_codec.pop(stream, None)
        self.sequences.forget(stream)
        self.seq_at.forget(stream)
        self.received_ns.pop(stream, None)
        self.arrived_ns.pop(stream, None)
        self.fed_by.pop(stream, None)
        self.held.pop(stream, None)
        self.passed_over.accepted(stream)

    def expired(self, stream: str) -> bool:
        """Whether ``stream`` sent data and then expired (scheduler.stream_idle_s) with nothing since."""
        return stream not in self._encoders and stream in self._expired_last_ts

    def expired_last_ts(self, stream: str) -> int | None:
        """An expired stream's last accepted ts (it has been idle since), None unless ``expired``."""
        return self._expired_last_ts.get(stream) if stream not in self._encoders else None

    def expired_ticks(self, stream: str) -> int | None:
        """An expired stream's tick count, which its next tick counts on from (an ask's kept answer is that many
        ticks behind it, at most); None unless ``expired`` (or its count was not kept)."""
        kept = self._expired_codec.get(stream) if self.expired(stream) else None
        return None if kept is None else kept[1]

    def expired_streams(self) -> list[str]:
        """The streams ``expired`` holds of, oldest expiry first."""
        return [name for name in self._expired_last_ts if name not in self._encoders]

    def ticks_of(self, stream: str) -> int | None:
        """``stream``'s accepted tick count (None: none held), computed or still waiting for a forward."""
        encoder = self._encoders.get(stream)
        return None if encoder is None else encoder.ticks

    def held_names(self) -> list[str]:
        """Every stream known, held or expired with its ordering guard kept, in name order."""
        return sorted(self._encoders.keys() | self._expired_last_ts.keys())

    def accepted(self, streams: list[str] | None = None, limit: int | None = None, after: str = "",
                 now_ns: int | None = None) -> dict[str, dict[str, Any] | None]:
        """Each stream's last accepted tick: ``{ticks, last_ts, at_last_ts, last_price}`` (``ticks``: its session's
        tick count, kept past an expiry with its ordering guard and codec state; ``at_last_ts``: how many ticks
        stamped ``last_ts``
        were taken up to the last accepted one, refused and conflated ones before it included, None if unknown;
        ``last_price``: the last raw tick's price level, a trade's price or a quote's mid, None if none; ``last_seq``
        and the sequence counts, TickSequences.of), None for a
        name never seen; ``streams`` None: every stream known, in name order past ``after``, the first ``limit``. With
        ``now_ns`` (the wall clock), also ``idle_s``: seconds since its last tick reached the service (``arrived_ns``:
        its read, or earlier where its `ts` shows it waited upstream of the socket; None: none since this process
        started, a stream restored from a tick log)."""
        names = [n for n in self.held_names() if n > after] if streams is None else streams
        out: dict[str, dict[str, Any] | None] = {}
        for name in names[:limit] if limit is not None else names:
            encoder = self._encoders.get(name)
            if encoder is not None:
                out[name] = {"ticks": encoder.ticks, "last_ts": encoder.last_ts, "at_last_ts": encoder.at_last_ts,
                             "last_price": encoder.last_level}
            else:
                last_ts = self._expired_last_ts.get(name)
                out[name] = None if last_ts is None else {"ticks": self._expired_ticks(name), "last_ts": last_ts,
                                                          "at_last_ts": self._expired_at_last_ts.get(name)}
            if out[name] is not None:
                out[name].update(self.sequences.of(name))
            received = self.arrived_ns.get(name, self.received_ns.get(name))
            if now_ns is not None and out[name] is not None:  # (a clock stepped back reads as 0, not negative)
                out[name]["idle_s"] = None if received is None else round(max(0, now_ns - received) / 1e9, 3)
        return out

    def start_at(self, stream: str, ticks: int, last_ts: int | None, state: dict[str, Any] | None = None,
                 at_last_ts: int | None = None, last_seq: int | None = None) -> None:
        """A stream whose earlier ticks are gone (a tick log's retention): it counts on from ``ticks`` and guards
        order from ``last_ts`` (ticks 0: an expired stream, only its guard), with the codec state ``state``
        (``codec_states``' record of it) or, without one, fresh codec state; ``at_last_ts`` as ``accepted`` says
        it (None: unknown); ``last_seq``: its last `seq` (None: none, or an older log)."""
        self.sequences.start_at(stream, last_seq)
        if ticks:
            self.seq_at.committed(stream, ticks, last_seq)  # (the tick at its count: what an answer there covers)
        if ticks == 0:
            if last_ts is not None:
                self.names.add(stream, NAMES_HOLDER)
                self._keep_expired(stream, last_ts, at_last_ts)
            return
        encoder = self._encoders[stream] = self._new_encoder(stream)
        self._expired_last_ts.pop(stream, None)  # (held again: the encoder carries the guard)
        self._expired_at_last_ts.pop(stream, None)
        self._expired_codec.pop(stream, None)
        self._held(stream)
        encoder.ticks, encoder.last_ts, encoder.at_last_ts = ticks, last_ts, at_last_ts
        if state is not None:
            encoder.state = self.codec.state_from_record(state)
        self.names.add(stream, NAMES_HOLDER)

    def codec_states(self) -> dict[str, dict[str, Any]]:
        """Every stream's codec state as plain values (``start_at`` takes them back)."""
        return {name: self.codec.state_record(encoder.state) for name, encoder in self._encoders.items()}

    def _encoder(self, stream: str) -> StreamEncoder:
        encoder = self._encoders.get(stream)
        return encoder if encoder is not None else self._new_encoder(stream)

    def _held(self, stream: str) -> None:
        """``stream`` got its encoder: noted among ``derivatives`` when its name says one, among ``not_trained_on``
        when the model did not train on it."""
        if derivative_kind(stream) is not None:  # (futures_codes.py: the caveat's rule)
            self.derivatives[stream] = None
        if self.trained_on is not None and not self.trained_on(stream):
            self.not_trained_on[stream] = None

    def _expired_ticks(self, stream: str) -> int:
        """An expired stream's tick count, which its next tick goes on from (0: its codec state was not kept)."""
        kept = self._expired_codec.get(stream)
        return 0 if kept is None else kept[1]

    def _new_encoder(self, stream: str) -> StreamEncoder:
        encoder = StreamEncoder(stream, self.codec, self.vocab_size, self.max_stream_bytes)
        encoder.last_ts = self._expired_last_ts.get(stream)
        encoder.at_last_ts = self._expired_at_last_ts.get(stream, 0)
        kept = self._expired_codec.get(stream)
        if kept is not None:  # an expired stream back: encoded and counted on from where it stopped
            encoder.state, encoder.ticks, encoder.last_tick = kept
        return encoder

    # -- phase two ---------------------------------------------------------------------------

    def commit(self, item: EncodedTick) -> None:
        encoder = self._encoders.get(item.stream)
        if encoder is None:
            encoder = self._encoders[item.stream] = self._new_encoder(item.stream)
            self._expired_last_ts.pop(item.stream, None)  # (held again: the encoder carries the guard)
            self._expired_at_last_ts.pop(item.stream, None)
            self._expired_codec.pop(item.stream, None)
            self._held(item.stream)
            self.names.add(item.stream, NAMES_HOLDER)
            if encoder.last_ts is None:  # a stream's very first tick
                self.stamp_notes.first_tick(item.stream, item.ts)
        previous_ts = encoder.last_ts
        encoder.commit(item)
        self.sequences.committed(item.stream, item.tick, previous_ts, self._message_ns is not None, item.ts, item.seq)
        self.seq_at.committed(item.stream, encoder.ticks, item.seq)
        self.passed_over.accepted(item.stream)
        if self._message_ns is not None:
            self.received_ns[item.stream] = self._message_ns
            arrived = self.arrival_of(item.stream, item.ts, self._message_ns) if self.arrival_of is not None else None
            self.arrived_ns[item.stream] = self._message_ns if arrived is None else min(arrived, self._message_ns)
            self.stamp_notes.accepted(item.stream, item.ts, self._message_ns)
            if self._feed:
                self.fed_by[item.stream] = self._feed
            else:
                self.fed_by.pop(item.stream, None)

    def ahead_of_clock_summary(self) -> dict[str, Any]:
        """For stats: wire ticks accepted well ahead of the clock (StampNotes; empty when none)."""
        return self.stamp_notes.ahead_of_clock_summary()

    def reading_feed(self, tag: str | None) -> None:
        """The messages read next came from the feed ``tag`` (their topic frame; None: untagged), whose numbering
        a `seq` of scope "feed" counts in (ingest.seq_scope), and which `fed_by` names."""
        self.sequences.feed = self._feed = tag or ""

    def seen_seq(self, stream: str | None, seq: int | None, ts: int) -> None:
        """A live wire tick of ``stream`` numbered ``seq`` that was not accepted (refused, conflated, shed): its
        number was received all the same (TickSequences.seen; a tick log's replay is no wire)."""
        if self._message_ns is not None:
            self.sequences.seen(stream, seq, ts)

    def note_passed(self, stream: str, ts: int, ticks: int = 1) -> None:
        """``ticks`` of ``stream`` stamped ``ts`` were taken off the wire and refused or conflated (PassedOver); a
        tick log's replay says so of each logged item that had some before it."""
        encoder = self._encoders.get(stream)
        last_ts = encoder.last_ts if encoder is not None else self._expired_last_ts.get(stream)
        self.passed_over.note(stream, ts, ticks, last_ts, held=encoder is not None or last_ts is not None)

    def ts_unit_summary(self) -> dict[str, Any]:
        """For stats: streams whose first ts looked like another unit than ns (StampNotes; empty when none)."""
        return self.stamp_notes.ts_unit_summary()
