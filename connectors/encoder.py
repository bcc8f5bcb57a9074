"""The ingest side behind one object per stream: ordering guard + codec state -> tokens.

`StreamEncoder` (connectors/stream_encoder.py) holds one stream's state: its last accepted timestamp (the
ordering guard) and its codec state. Encoding is two-phase so that a tick
refused anywhere (ordering, token range, or downstream by the engine) leaves
that state exactly as it was:

    item = encoder.encode(tick)      # checks, encodes on a copy of the codec state; mutates nothing
    submit(item)                     # hand the tokens on; may refuse with InvalidTick
    encoder.commit(item)             # only now: last ts and codec state advance

`StreamEncoders` maps stream name -> StreamEncoder and decodes both wire forms
of the ingest socket (see connectors/ticks.py for the raw tick map):

    raw           one msgpack tick map, or a list of them
    pre-tokenized a msgpack list of ``{stream: str, ts: int ns, tokens: [int], ticks: int}``
                  from an out-of-process connector (``ticks`` defaults to 1)

Both forms share one ordering guard per stream and the same stream-name and ts
rules (connectors.ticks.check_stream / check_ts / check_order); tokens are
checked in one place (connectors/tokenized_items.py's `check_tokens`: ids in the vocabulary, at most
`max_item_tokens` of them, because an item longer than the engine's usable
window could never be placed and would stall its stream), tick counts in
another (`check_ticks`: 1 <= ticks <= len(tokens), every tick has a token). A
pre-tokenized item does not advance the codec state: the next raw tick on that
stream is encoded relative to the previous raw one.

Conflation (the service's ``limits.when_behind: conflate``): a raw message ingested
with ``hold_quotes`` keeps each quote aside, checked and encoded but not submitted,
until something else of its stream arrives (then it goes first, in order) or
``flush_held`` runs before the next forward. A newer quote of the stream replaces
the one held, which is dropped and counted (``conflated``): the engine computes the
newest top of book and every trade, not each quote it could not keep up with.

Beside it: the table of streams it builds on (connectors/stream_table.py: each stream's encoder, its
guard past an expiry, phase two's commit), what it hands on and back (connectors/encoded_items.py), its
notes on odd timestamps (stamp_notes.py) and what shedding reads of a message (message_shedding.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from connectors.codec import Codec
from connectors.encoded_items import PASSED, EncodedTick, Ingested, Rejection, Submit
from connectors.message_shedding import message_streams
from connectors.msgpack_reading import check_keys, tick_items, unpack
from connectors.price_offsets import PriceOffset
from connectors.shifted_prices import lifting_offset, nonpositive_reading, offset_option, shifted_text
from connectors.stream_encoder import StreamEncoder
from connectors.stream_table import EXPIRED_KEPT, StreamTable
from connectors.stream_names import MAX_STREAM_BYTES, check_normalized, check_stream
from connectors.tick_errors import InvalidTick
from connectors.tick_sequences import resent_refusal
from connectors.tick_times import check_not_ahead, check_order, check_ts, check_ts_unit
from connectors.ticks import Tick, check_seq, counted, validate
from connectors.tokenized_items import TOKENIZED_FIELDS, check_ticks, check_tokens, listed_ticks, tokenized_items
from connectors.wire_offsets import shifted_wire_tick
from connectors.wire_values import field_list, wire_value
from engine.quoting import quoted

# A wire tick priced at zero or below: what its sender does for an instrument that trades there (file replay's
# rejects name --price-offset, which does this for the files)
SHIFT_PRICES = ("; an instrument that trades at zero or below (a spread, a power market) is sent shifted above zero: "
                "add one constant to every price, bid and ask before sending (file replay: --price-offset X)")


def nonpositive_error(err: InvalidTick, price_offset: PriceOffset | None) -> str:
    """A wire tick's nonpositive_price error with what its sender does about it. A price the service shifted itself
    (``price_offset``: its model's training --price-offset) and left at or below zero is said as sent, with the
    offset and the shifted price; the way out is a model trained with a larger offset, since a sender that shifted
    its prices too would have them shifted twice (review410 #4). Any other gets SHIFT_PRICES."""
    reading = nonpositive_reading(err, price_offset)
    if reading is None or not reading.offset:
        return err.message + SHIFT_PRICES
    larger = offset_option(reading.stream if isinstance(price_offset, dict) else None, lifting_offset(reading.read))
    said = shifted_text(reading, "this service's ingest price offset")
    return (f"{said}: the service adds its model's training --price-offset to every tick itself (health's "
            f"ingest_price_offset), so ticks are sent as the venue prints them; a price this low needs a model "
            f"trained with a larger offset (flashtick train FILES {larger})")


# the names other modules import from here (they moved beside it): kept importable where they were
__all__ = ["SHIFT_PRICES", "PASSED", "EncodedTick", "Ingested", "StreamEncoder", "StreamEncoders", "listed_ticks"]


# Items refused before they name a stream (not a map; a map without "stream") are said one by one up to this many a
# message, then counted: a 1 MB message of 1,000,000 one-byte nils cost ~8 s of the engine thread building an error
# for each, though at most ~100 are published (review406 #6); a tick naming its stream is at least ~10 bytes
SAID_STREAMLESS = 100
NAMELESS = {"not_a_map": "a tick is a map", "missing_stream": 'field "stream" is required'}


def _nameless(obj: Any) -> str | None:
    """The reason an item past SAID_STREAMLESS is counted without its own error: not a map, or a map of text keys
    without "stream" (a key sent as bin gets its own hint); None for an item checked as every other."""
    if type(obj) is not dict:
        return "not_a_map"
    if "stream" not in obj and all(type(key) is str for key in obj):
        return "missing_stream"
    return None


class StreamEncoders(StreamTable):
    """Stream name -> StreamEncoder, and the decoding of both ingest wire forms.

    `vocab_size` bounds pre-tokenized ids (the model's vocabulary; defaults to the
    codec's). `max_item_tokens` bounds the tokens of one item, raw or
    pre-tokenized (the service passes the longest chunk its scheduler can place;
    None: no bound). `max_stream_bytes` bounds stream names. A stream gets its
    encoder when its first tick is committed, so a refused first tick leaves no trace.
    A first tick whose ts is 0 or looks like seconds, ms or us rather than ns is accepted and
    noted (`ts_unit_summary`, and `notify` when given). `max_ts_ahead_ns` bounds how far past
    the wall clock a wire message's ts may be (`check_not_ahead`; None: no bound), checked
    only where the caller gives the message's clock (`now_ns`): a live service, never a log's replay.
    `expired_kept`: the expired streams whose ordering guard is kept (StreamTable). `seq_scope`: what one `seq`
    numbering counts, "stream" or "feed" (ingest.seq_scope, connectors/tick_sequences.py).
    """

    def __init__(self, codec: Codec, vocab_size: int | None = None, max_message_bytes: int = 64 << 20, *,
                 max_item_tokens: int | None = None, max_stream_bytes: int = MAX_STREAM_BYTES,
                 notify: Callable[[str], None] | None = None, max_ts_ahead_ns: int | None = None,
                 zero_bid_is_price: bool = False, price_offset: PriceOffset | None = None,
                 expired_kept: int = EXPIRED_KEPT, seq_scope: str = "stream") -> None:
        for name, value in (("max_message_bytes", max_message_bytes), ("max_stream_bytes", max_stream_bytes),
                            ("max_item_tokens", 1 if max_item_tokens is None else max_item_tokens)):
            if type(value) is not int or value <= 0:
                raise ValueError(f"{name} must be an int > 0, got {quoted(value)}")
        super().__init__(codec, vocab_size, max_stream_bytes, notify, expired_kept, seq_scope)
        self.max_message_bytes = max_message_bytes
        self.max_item_tokens = max_item_tokens
        self.max_ts_ahead_ns = max_ts_ahead_ns
        self.zero_bid_is_price = zero_bid_is_price  # a wire quote's 0 bid is a price (limits.zero_bid: price)
        # added to each wire tick's prices before its checks (the served model's training offset): never to a tick
        # log's replay, which holds the ticks as accepted, shifted
        self.price_offset = price_offset
        self.conflated = 0  # quotes dropped for a newer one of their stream (never submitted, never logged)

    # -- one item, two phases --------------------------------------------------------------

    def encode(self, tick: Tick) -> EncodedTick:
        """Phase one for a raw tick (its stream name is checked when its encoder is made); raises
        InvalidTick. Mutates nothing."""
        item = self._encoder(tick.stream).encode(tick)
        if self.max_item_tokens is not None and len(item.tokens) > self.max_item_tokens:  # a text codec's long line
            raise InvalidTick("bad_tokens", f"tick of {len(item.tokens)} tokens; the engine takes at most "
                                            f"{self.max_item_tokens} in one item", tick.stream)
        return item

    def accept(self, item: Any) -> EncodedTick | None:
        """Phase one for one pre-tokenized map; raises InvalidTick. Mutates nothing but the duplicates' count: None
        for an item whose `seq` repeats one its stream took (dropped, counted, before its ordering guard, as a raw
        tick's resend is)."""
        stream, ts, tokens, ticks, seq = self._tokenized_fields(item)
        if self._duplicate(stream, seq, ts):
            return None
        try:
            return self._encoder(stream).accept(ts, tokens, ticks, seq)
        except InvalidTick as err:
            err.stream = stream
            raise

    def _tokenized_fields(self, item: Any) -> tuple[str, int, list[int], int, int | None]:
        """A pre-tokenized map's checked fields: stream, ts, tokens, ticks and seq (None: none sent)."""
        if not isinstance(item, dict):
            raise InvalidTick("not_a_map", f"a tokenized tick is a map, got {wire_value(item)}")
        if "stream" not in item:  # perhaps sent with its key as bin, or given twice: say that rather than "missing"
            check_keys(item)
        stream = check_normalized(check_stream(item.get("stream"), self.max_stream_bytes))
        try:  # from here a refusal names its stream, as a raw tick's does
            check_keys(item)
            extra = set(item) - TOKENIZED_FIELDS
            if extra:
                raise InvalidTick("unknown_field", f"fields {field_list(extra)} not allowed in a tokenized tick")
            ts = check_ts(item)
            if item.get("tokens") is None:  # (nil is left out, as for any field)
                raise InvalidTick("missing_field", "field \"tokens\" is required (an array of token ids)")
            tokens = check_tokens(item["tokens"], self.vocab_size, self.max_item_tokens)
            ticks = check_ticks(1 if item.get("ticks") is None else item["ticks"], len(tokens))  # (nil: left out)
            seq = None if item.get("seq") is None else check_seq(item["seq"])
        except InvalidTick as err:
            err.stream = stream
            raise
        return stream, ts, tokens, ticks, seq

    def _note_refused(self, stream: str | None, obj: Any) -> None:
        """A wire item refused before it was encoded, counted where it has a valid stream name and an int ts."""
        ts = obj.get("ts") if isinstance(obj, dict) else None
        if stream is not None and type(ts) is int:  # type(): a bool is not a ts
            ticks = obj.get("ticks", 1)  # (a pre-tokenized item's)
            self.note_passed(stream, ts, ticks if type(ticks) is int and ticks >= 1 else 1)
        seq = obj.get("seq") if isinstance(obj, dict) else None
        if type(seq) is int and seq >= 0 and type(ts) is int:  # (its number was received: no gap for it)
            self.seen_seq(stream, seq, ts)

    # -- whole paths: check, submit, commit -------------------------------------------------

    def ingest(self, tick: Tick, submit: Submit) -> EncodedTick:
        """Encode one validated tick, submit it and commit; raises InvalidTick and then changes nothing.
        Not conflated: a quote of its stream held aside goes first."""
        held = self.held.pop(tick.stream, None)
        if held is not None:
            self._submit(held, submit)
        return self._submit(self.encode(tick), submit)

    def ingest_message(self, data: bytes, submit: Submit, hold_quotes: bool = False, now_ns: int | None = None
                       ) -> Ingested:
        """A raw wire message (one tick map or a list); never raises, one bad tick never drops the rest.
        ``hold_quotes``: conflate its quotes (see the module doc); they are neither accepted nor refused yet.
        ``now_ns``: the receiver's wall clock, for ``max_ts_ahead_ns`` (None: not checked) and ``received_ns``."""
        result = Ingested([], [])
        if now_ns is not None:
            self._message_ns = now_ns

        def first_phase(obj: Any) -> EncodedTick | None:
            try:
                tick = validate(shifted_wire_tick(obj, self.price_offset), self.max_stream_bytes,
                                self.zero_bid_is_price)
            except InvalidTick as err:
                if err.reason != "nonpositive_price":
                    raise
                raise InvalidTick(err.reason, nonpositive_error(err, self.price_offset), err.stream) from None
            held = self.held.get(tick.stream)
            if self._duplicate(tick.stream, tick.seq, tick.ts, held, tick):
                return None  # a duplicate: dropped and counted, never refused (tick_sequences.py)
            self._check_live(tick.stream, tick.ts, now_ns)
            supersedes = held is not None and hold_quotes and not tick.is_trade and tick.ts >= held.ts
            if held is not None and not supersedes:  # the stream's held quote goes first, as it came
                del self.held[tick.stream]
                self._submit_or_reject(held, submit, result)
            try:  # (a quote that supersedes is encoded against the same committed state)
                item = self.encode(tick)
            except InvalidTick as err:  # a late tick without seq that copies one taken: a resend, said so
                if err.reason == "ts_backwards" and now_ns is not None and tick.seq is None \
                        and self.sequences.resent(tick):
                    raise resent_refusal(err) from None
                raise
            if hold_quotes and not tick.is_trade:
                self.conflated += supersedes  # only now: a quote that fails its checks leaves the held one held
                if supersedes:
                    self.note_passed(held.stream, held.ts, held.ticks)
                    self.seen_seq(held.stream, held.seq, held.ts)
                self.held[tick.stream] = item
                return None
            return item

        return self._ingest(data, submit, tick_items, first_phase, result)

    def ingest_tokenized(self, data: bytes, submit: Submit, now_ns: int | None = None) -> Ingested:
        """A pre-tokenized wire message (a msgpack list of maps); never raises. ``now_ns`` as for
        ``ingest_message``."""
        if now_ns is not None:
            self._message_ns = now_ns

        def first_phase(obj: Any) -> EncodedTick | None:
            item = self.accept(obj)
            if item is not None:  # (None: a duplicate, dropped and counted)
                self._check_live(item.stream, item.ts, now_ns)
            return item

        return self._ingest(data, submit, tokenized_items, first_phase, self.flush_held(submit))

    def _duplicate(self, stream: str, seq: int | None, ts: int, held: EncodedTick | None = None,
                   tick: Tick | None = None) -> bool:
        """Whether a wire item's `seq` repeats one its stream took (or conflation holds): a duplicate, counted
        (``tick``: a raw tick's, whose values tell a restamped resend from a numbering begun again)."""
        if seq is None:
            return False
        known = self._encoders.get(stream)
        last_ts = known.last_ts if known is not None else self._expired_last_ts.get(stream)
        return self.sequences.duplicate(stream, seq, ts, last_ts, held.seq if held is not None else None,
                                        held.ts if held is not None else None, tick)

    def _check_live(self, stream: str, ts: int, now_ns: int | None) -> None:
        """The checks of a wire tick's stream and ts against this service's state, for a live message only (one
        with its clock, ``now_ns``; never a tick log's replay): not stamped too far ahead of the clock, and a new
        name that is no lookalike of a known one."""
        if now_ns is None:
            return
        if self.max_ts_ahead_ns is not None:
            check_not_ahead(stream, ts, now_ns, self.max_ts_ahead_ns)
        known = self._encoders.get(stream)
        last_ts = known.last_ts if known is not None else self._expired_last_ts.get(stream)
        check_ts_unit(stream, ts, now_ns, last_ts)
        if last_ts is not None and last_ts > now_ns:  # (the guard ahead of the clock: said why, review376 #1)
            check_order(stream, ts, last_ts, now_ns)
        if stream not in self._encoders:
            self.names.check_new(stream)

    def flush_held(self, submit: Submit) -> Ingested:
        """Submit every quote conflation holds (before a forward, or before items whose stream is known only once
        checked); the ones refused now (the stream refused by the engine) come back with index -1."""
        result = Ingested([], [])
        held, self.held = self.held, {}
        for item in held.values():
            self._submit_or_reject(item, submit, result)
        return result

    def _submit_or_reject(self, item: EncodedTick, submit: Submit, result: Ingested) -> None:
        try:
            item = self._submit(item, submit)
        except InvalidTick as err:
            result.rejections.append(Rejection.of(-1, err))
            return
        result.accepted.append(item)

    def shed_message(self, data: bytes, refusal: Callable[[str | None, float | None], InvalidTick | None],
                     tokenized: bool = False) -> Ingested | None:
        """A whole message refused (the engine is behind and sheds), one rejection per stream with the count of its
        ticks and ``refusal(stream, waited_s)``'s reason, none of them validated or encoded: refusing tick by tick
        cost as much as accepting, so a queue of messages behind a shedding engine drained no faster than the feed
        filled it. ``waited_s``: how long the stream's newest tick of the message waited before now, as the tick
        by tick path weighs each tick's wait (the least of its ticks': a stream refused here would have every tick
        refused there; review391 #7: weighed as no wait, a feed stamped with the wall clock had its waiting burst
        accepted here, then refused tick by tick); None where no tick of it is dated by its `ts` (the refusal then
        weighs the ingest queue's unread wait, as the tick by tick path does). A tick whose `seq` repeats one its
        stream took is a duplicate, dropped and counted as one, as when not shedding (only those are validated: a
        resend is no load to shed).
        None for a message that does not decode (the normal path says why), or one with a stream ``refusal``
        accepts (None for it): that message is read tick by tick. A tick without a valid stream name gets
        ``refusal(None, None)``'s reason."""
        read = message_streams(data, tokenized, self.max_message_bytes, self.max_stream_bytes)
        if read is None:
            return None
        items, named, streams = read
        waited = self._least_waits(items, named, time.time_ns())
        errors = {stream: refusal(stream, waited.get(stream)) for stream in streams}
        if any(err is None for err in errors.values()):
            return None
        repeats = self._shed_duplicates(items, named, tokenized)
        first: dict[str | None, list[int]] = {}  # stream -> [index of its first tick shed, its ticks shed]
        for index, stream in enumerate(named):
            if index not in repeats:
                first.setdefault(stream, [index, 0])[1] += 1
        for index, (stream, obj) in enumerate(zip(named, items)):
            if index not in repeats:
                self._note_refused(stream, obj)
        return Ingested([], [Rejection(index, errors[stream].reason, str(errors[stream]), stream, n)
                             for stream, (index, n) in first.items()])

    def _least_waits(self, items: list[Any], named: list[str | None], now_ns: int) -> dict[str, float]:
        """Each stream's wait before ``now_ns`` of its newest tick (by `ts`) in a message, as ``arrival_of`` dates
        it; absent where none is dated (no `ts` that is an int, a stream not stamped with the wall clock)."""
        newest: dict[str, int] = {}
        for stream, obj in zip(named, items):
            ts = obj.get("ts") if stream is not None and isinstance(obj, dict) else None
            if type(ts) is int and ts > newest.get(stream, -1):
                newest[stream] = ts
        arrived = {stream: self.arrival_of(stream, ts, now_ns) if self.arrival_of is not None else None
                   for stream, ts in newest.items()}
        return {stream: max(0.0, (now_ns - at) / 1e9) for stream, at in arrived.items() if at is not None}

    def _shed_duplicates(self, items: list[Any], named: list[str | None], tokenized: bool) -> set[int]:
        """The indices of a shed message's items whose `seq` repeats one their stream took, counted as duplicates.
        Only an item whose `seq` is an int no greater than its stream's last is validated (a cheap look first)."""
        repeats: set[int] = set()
        for index, (stream, obj) in enumerate(zip(named, items)):
            last = self.sequences.last.get(stream) if stream is not None else None
            seq = obj.get("seq") if last is not None and isinstance(obj, dict) else None
            if type(seq) is not int or seq > last:
                continue
            tick = None
            try:
                if tokenized:
                    stream, ts, _, _, seq = self._tokenized_fields(obj)
                else:
                    tick = validate(shifted_wire_tick(obj, self.price_offset), self.max_stream_bytes,
                                    self.zero_bid_is_price)
                    ts = tick.ts
            except InvalidTick:  # (a bad tick is shed with the rest)
                continue
            if self._duplicate(stream, seq, ts, self.held.get(stream), tick):
                repeats.add(index)
        return repeats

    def _ingest(self, data: bytes, submit: Submit, items_of: Callable[[Any], list[Any]],
                first_phase: Callable[[Any], EncodedTick | None], result: Ingested) -> Ingested:
        """Each item of the message checked (``first_phase``: None for one held aside), submitted and committed,
        into ``result`` (which may hold held quotes submitted first)."""
        if len(data) > self.max_message_bytes:
            ticks = listed_ticks(data)
            error = (f"oversize: message of {len(data)} bytes ({ticks} tick{'s' if ticks != 1 else ''}) > "
                     f"{self.max_message_bytes} "
                     f"(limits.max_message_bytes): none of its ticks was read; send them in smaller messages")
            result.rejections.append(Rejection(-1, "oversize", error, count=ticks))
            return result
        try:
            items = items_of(unpack(data, max_bytes=self.max_message_bytes))
        except InvalidTick as err:
            result.rejections.append(Rejection.of(-1, err))
            return result
        streamless = 0  # items refused before they named a stream, said one by one up to SAID_STREAMLESS
        # reason -> [index of the first item counted past those, items, where its rejection goes among the rest]
        tallied: dict[str, list[int]] = {}
        for index, obj in enumerate(items):
            if streamless >= SAID_STREAMLESS and (reason := _nameless(obj)) is not None:
                tallied.setdefault(reason, [index, 0, len(result.rejections)])[1] += 1
                continue
            try:
                item = first_phase(obj)
            except InvalidTick as err:
                streamless += err.stream is None
                self._note_refused(err.stream, obj)
                result.rejections.append(Rejection.of(index, err))
                continue
            if item is None:
                continue
            try:
                item = self._submit(item, submit)
            except InvalidTick as err:
                result.rejections.append(Rejection.of(index, err))
                continue
            result.accepted.append(item)
        for reason, (first, n, at) in sorted(tallied.items(), key=lambda e: (-e[1][2], -e[1][0])):  # (index order)
            result.rejections.insert(at, Rejection(first, reason, f"{counted(n, 'item')} more with no stream named "
                                                                  f"({reason}: {NAMELESS[reason]}), the first at "
                                                                  f"index {first}: counted, not said one by one",
                                                   count=n))
        return result

    def _submit(self, item: EncodedTick, submit: Submit) -> EncodedTick:
        """``item`` with the ticks passed over before it (``passed``), submitted and committed; refused, it is one."""
        if passed := self.passed_over.before(item.stream, item.ts):
            item = item._replace(passed=passed)
        try:
            submit(item)
        except InvalidTick as err:
            err.stream = err.stream or item.stream
            self.note_passed(item.stream, item.ts, item.ticks)
            self.seen_seq(item.stream, item.seq, item.ts)
            raise
        self.commit(item)
        return item
