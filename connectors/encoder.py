"""The ingest side behind one object per stream: ordering guard + codec state -> tokens.

`StreamEncoder` holds one stream's state: its last accepted timestamp (the
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
checked in one place (`check_tokens`: ids in the vocabulary, at most
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
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from connectors.codec import Codec
from connectors.lookalike_names import LookalikeNames
from connectors.passed_over import PassedOver
from connectors.ticks import (
    MAX_STREAM_BYTES,
    InvalidTick,
    Tick,
    check_order,
    check_stream,
    check_keys,
    check_normalized,
    check_not_ahead,
    check_ts,
    field_list,
    first_ts_hint,
    tick_items,
    unpack,
    utc_text,
    validate,
    wire_value,
)

TOKENIZED_FIELDS = frozenset(("stream", "ts", "tokens", "ticks"))
# A wire tick priced at zero or below: what its sender does for an instrument that trades there (file replay's
# rejects name --price-offset, which does this for the files)
SHIFT_PRICES = ("; an instrument that trades at zero or below (a spread, a power market) is sent shifted above zero: "
                "add one constant to every price, bid and ask before sending (file replay: --price-offset X)")
PASSED = "passed"  # a tick log record's key: EncodedTick.passed
MAX_TS_UNIT_NOTES = 20  # streams named (stats, stderr) when many first ticks are 0 or look like s/ms/us; all counted
# A wire tick accepted further ahead of the receiver's clock than this is said and counted (ticks_ahead_summary): its
# stream's later ticks must not be older, so one forged or mis-stamped tick (within limits.max_ts_ahead_s, a day)
# refuses the stream's real feed as ts_backwards until the clock passes it. Minutes: above clock skew between hosts
AHEAD_OF_CLOCK_NOTE_NS = 300 * 10**9


class EncodedTick(NamedTuple):
    """Tokens ready for the engine, not yet committed to the stream's state."""

    stream: str
    ts: int
    tokens: list[int]
    ticks: int  # ticks these tokens stand for (1 for a raw tick)
    state: Any  # codec state after this tick; None when pre-tokenized (the codec state does not move)
    tick: Tick | None = None  # the raw tick it came from (None when pre-tokenized): what a tick log keeps
    passed: int = 0  # ticks of its stream stamped ts taken just before it and refused or conflated (PassedOver)

    def to_record(self) -> dict[str, Any]:
        """What a tick log keeps to replay this item through the same encoders: the raw tick, or the tokens, and
        the ticks passed over before it (``passed``, left out when 0: logs written before it have none)."""
        if self.tick is not None:
            record: dict[str, Any] = {"tick": self.tick.to_wire()}
        else:
            record = {"tokenized": {"stream": self.stream, "ts": self.ts, "tokens": self.tokens, "ticks": self.ticks}}
        if self.passed:
            record[PASSED] = self.passed
        return record


def listed_ticks(data: bytes) -> int:
    """The ticks a msgpack message holds, read from its first bytes alone (a list's header gives its length; a map
    is one tick): an oversize message is refused unread, but counted as the ticks it carried."""
    head = data[:1]
    if not head:
        return 1
    first = head[0]
    if 0x90 <= first <= 0x9F:  # fixarray
        listed, header = first & 0x0F, 1
    elif first == 0xDC and len(data) >= 3:  # array 16
        listed, header = int.from_bytes(data[1:3], "big"), 3
    elif first == 0xDD and len(data) >= 5:  # array 32
        listed, header = int.from_bytes(data[1:5], "big"), 5
    else:
        return 1
    # a list of more items than it has bytes after its header is no list of ticks (garbage, or hostile): one message
    return listed if 0 < listed <= len(data) - header else 1


class Rejection(NamedTuple):
    """One refused tick (or message, index -1) with its REASONS code and a human message."""

    index: int
    reason: str
    error: str
    stream: str | None = None  # set once the tick got far enough to have a valid stream name
    count: int = 1  # the ticks it stands for (a shed message: one per stream, from its first tick's index)

    @classmethod
    def of(cls, index: int, err: InvalidTick) -> Rejection:
        return cls(index, err.reason, str(err), err.stream)

    def to_wire(self) -> dict[str, Any]:
        # an error quoting text that was not UTF-8 (decoded with surrogates) is sent escaped, never unsendable
        error = self.error.encode("utf-8", "backslashreplace").decode()
        d: dict[str, Any] = {"index": self.index, "reason": self.reason, "error": error}
        if self.stream is not None:
            d["stream"] = self.stream
        if self.count != 1:
            d["count"] = self.count
        return d


class Ingested(NamedTuple):
    """What one message gave: the accepted items (in order) and the rejections."""

    accepted: list[EncodedTick]
    rejections: list[Rejection]

    @property
    def ticks(self) -> int:
        return sum(item.ticks for item in self.accepted)


Submit = Callable[[EncodedTick], None]
"""Hands an encoded item on (to the engine); raises InvalidTick (e.g. "stream_refused") to refuse it."""


def check_tokens(tokens: Any, vocab_size: int, max_tokens: int | None = None) -> list[int]:
    """The one token rule: a non-empty list of at most `max_tokens` ints in [0, vocab_size)."""
    if not isinstance(tokens, list) or not tokens:
        got = "an empty array" if isinstance(tokens, list) else wire_value(tokens)
        raise InvalidTick("bad_tokens", f"tokens must be a non-empty array of ints, got {got}")
    if max_tokens is not None and len(tokens) > max_tokens:  # before the per-token loop: refused cheaply
        raise InvalidTick("bad_tokens", f"{len(tokens)} tokens in one item; the engine takes at most {max_tokens} "
                                        "(its window less the sink and probe reserve): split it into smaller items")
    for t in tokens:
        if type(t) is not int or not 0 <= t < vocab_size:  # type(): a bool is not a token id
            raise InvalidTick("bad_tokens", f"token {wire_value(t)} is not an id in [0, {vocab_size})")
    return tokens


def check_ticks(ticks: Any, num_tokens: int) -> int:
    """The one tick-count rule of a pre-tokenized item: an int in [1, num_tokens] (a tick has a token at least)."""
    if type(ticks) is not int or ticks < 1:  # type(): a bool is not a count
        raise InvalidTick("wrong_type", f"ticks must be an int >= 1, got {wire_value(ticks)}")
    if ticks > num_tokens:
        raise InvalidTick("bad_tokens", f"ticks {ticks} > {num_tokens} tokens: every tick has a token at least")
    return ticks


class StreamEncoder:
    """One stream's ingest state: the last accepted ts and the codec state, with counters."""

    def __init__(self, stream: str, codec: Codec, vocab_size: int, max_stream_bytes: int = MAX_STREAM_BYTES) -> None:
        self.stream = check_stream(stream, max_stream_bytes)
        self.codec = codec
        self.vocab_size = vocab_size
        self.state: Any = codec.new_state()
        self.last_ts: int | None = None
        # of the ticks taken stamped last_ts, how many up to the last accepted one, those refused or conflated before
        # it included (None: unknown, a start after retention in an older log): a feed resending a file whose ticks
        # share timestamps tells by it which of them are in
        self.at_last_ts: int | None = 0
        self.ticks = 0  # committed ticks, raw and pre-tokenized
        # the price level of the last raw tick committed (None: none, or only pre-tokenized items): a feed compares
        # its first price with it, to tell a stream continued at another level (another --price-offset)
        self.last_level: float | None = None

    def encode(self, tick: Tick) -> EncodedTick:
        """Tokens for a validated tick of this stream; raises InvalidTick("ts_backwards"). Mutates nothing."""
        if tick.stream != self.stream:
            raise ValueError(f"tick of stream {tick.stream!r} given to the encoder of {self.stream!r}")
        check_order(self.stream, tick.ts, self.last_ts)
        state = copy.copy(self.state)
        try:
            tokens = self.codec.encode(tick, state)
        except Exception as e:  # a codec must never take the service down over one tick; the copy is dropped
            raise InvalidTick("unencodable", f"stream {self.stream!r}: the codec could not encode this tick "
                                             f"({type(e).__name__}: {e})", self.stream) from None
        return EncodedTick(self.stream, tick.ts, tokens, 1, state, tick)

    def accept(self, ts: int, tokens: list[int], ticks: int = 1) -> EncodedTick:
        """A pre-tokenized item of this stream (tokens and ticks already checked, see StreamEncoders.accept);
        raises InvalidTick("ts_backwards"). Mutates nothing."""
        check_order(self.stream, ts, self.last_ts)
        return EncodedTick(self.stream, ts, tokens, ticks, None)

    def commit(self, item: EncodedTick) -> None:
        """Advance the stream past `item` (which this encoder made and the engine took)."""
        if item.ts != self.last_ts:
            self.at_last_ts = item.passed + item.ticks
        elif self.at_last_ts is not None:
            self.at_last_ts += item.passed + item.ticks
        self.last_ts = item.ts
        if item.state is not None:
            self.state = item.state
        if item.tick is not None and item.tick.level is not None:
            self.last_level = item.tick.level
        self.ticks += item.ticks


NAMES_HOLDER = "encoders"  # what LookalikeNames calls the streams held or expired here


class StreamEncoders:
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
    """

    def __init__(self, codec: Codec, vocab_size: int | None = None, max_message_bytes: int = 64 << 20, *,
                 max_item_tokens: int | None = None, max_stream_bytes: int = MAX_STREAM_BYTES,
                 notify: Callable[[str], None] | None = None, max_ts_ahead_ns: int | None = None,
                 zero_bid_is_price: bool = False) -> None:
        for name, value in (("max_message_bytes", max_message_bytes), ("max_stream_bytes", max_stream_bytes),
                            ("max_item_tokens", 1 if max_item_tokens is None else max_item_tokens)):
            if type(value) is not int or value <= 0:
                raise ValueError(f"{name} must be an int > 0, got {value!r}")
        self.codec = codec
        self.vocab_size = codec.vocab_size if vocab_size is None else vocab_size
        self.max_message_bytes = max_message_bytes
        self.max_item_tokens = max_item_tokens
        self.max_stream_bytes = max_stream_bytes
        self.max_ts_ahead_ns = max_ts_ahead_ns
        self.zero_bid_is_price = zero_bid_is_price  # a wire quote's 0 bid is a price (limits.zero_bid: price)
        self._encoders: dict[str, StreamEncoder] = {}
        self._expired_last_ts: dict[str, int] = {}  # expired streams' last accepted ts (see drop)
        self._expired_at_last_ts: dict[str, int | None] = {}  # ... and how many of their ticks it stamped
        # streams whose first ts is 0 or looks like s/ms/us, not ns (first_ts_hint): the first MAX_TS_UNIT_NOTES, and a
        # count
        self.ts_unit_notes: dict[str, str] = {}
        self.ts_unit_streams = 0
        self.notify = notify  # where such notes are said as they happen (the service's log); None: only counted
        self.held: dict[str, EncodedTick] = {}  # each stream's newest quote kept aside by conflation, not submitted
        self.conflated = 0  # quotes dropped for a newer one of their stream (never submitted, never logged)
        self.passed_over = PassedOver()  # refused and conflated ticks since each stream's last accepted one
        # the receiver's wall clock (ns) when each stream's last tick was committed from a wire message: how long a
        # stream has been quiet (`accepted` with now_ns); kept past an expiry, as the ordering guard is. A tick
        # replayed from a tick log has no such clock: a stream restarted from one and quiet since has none.
        self.received_ns: dict[str, int] = {}
        self._message_ns: int | None = None  # the clock of the wire message being ingested (None: none given)
        # streams with wire ticks accepted over AHEAD_OF_CLOCK_NOTE_NS ahead of the clock: the first
        # MAX_TS_UNIT_NOTES, each [ticks, most seconds ahead], and how many such ticks in all
        self.ahead_of_clock: dict[str, list] = {}
        self.ahead_of_clock_ticks = 0
        # every name held or expired here (and those the service remembers as refused) by its NFKC fold: a new wire
        # name that folds to another's is refused (lookalike_names.py)
        self.names = LookalikeNames()

    def __len__(self) -> int:
        return len(self._encoders)

    def __contains__(self, stream: object) -> bool:
        return stream in self._encoders

    def __iter__(self) -> Iterator[str]:
        return iter(self._encoders)

    def __getitem__(self, stream: str) -> StreamEncoder:
        return self._encoders[stream]

    def drop(self, stream: str) -> None:
        """Forget a stream (expired by the engine): its next tick starts it afresh, except that its ordering
        guard stays (one int a name): a tick older than one accepted before the expiry is still refused, as
        the tick log's replay would refuse it after a restart."""
        encoder = self._encoders.pop(stream, None)
        if encoder is not None and encoder.last_ts is not None:
            self._expired_last_ts[stream] = encoder.last_ts
            self._expired_at_last_ts[stream] = encoder.at_last_ts
        elif stream not in self._expired_last_ts:  # (nothing of it kept: a name no longer known here)
            self.names.discard(stream, NAMES_HOLDER)

    def forget(self, stream: str) -> None:
        """Forget a stream the engine turned away although its ticks were accepted here (a restart's replay under a
        lower scheduler.max_streams): as for a stream admission refused live, nothing of it is held, guard included,
        so `streams` says it was refused rather than giving counts of ticks no session holds."""
        self._encoders.pop(stream, None)
        self._expired_last_ts.pop(stream, None)
        self.names.discard(stream, NAMES_HOLDER)
        self._expired_at_last_ts.pop(stream, None)
        self.received_ns.pop(stream, None)
        self.held.pop(stream, None)
        self.passed_over.accepted(stream)

    def expired(self, stream: str) -> bool:
        """Whether ``stream`` sent data and then expired (scheduler.stream_idle_s) with nothing since."""
        return stream not in self._encoders and stream in self._expired_last_ts

    def ticks_of(self, stream: str) -> int | None:
        """``stream``'s accepted tick count (None: none held), computed or still waiting for a forward."""
        encoder = self._encoders.get(stream)
        return None if encoder is None else encoder.ticks

    def accepted(self, streams: list[str] | None = None, limit: int | None = None, after: str = "",
                 now_ns: int | None = None) -> dict[str, dict[str, Any] | None]:
        """Each stream's last accepted tick: ``{ticks, last_ts, at_last_ts, last_price}`` (``ticks``: its session's
        tick count, 0 after an expiry, whose ordering guard stays; ``at_last_ts``: how many ticks stamped ``last_ts``
        were taken up to the last accepted one, refused and conflated ones before it included, None if unknown;
        ``last_price``: the last raw tick's price level, a trade's price or a quote's mid, None if none), None for a
        name never seen; ``streams`` None: every stream known, in name order past ``after``, the first ``limit``. With
        ``now_ns`` (the wall clock), also ``idle_s``: seconds since its last tick came off the wire (None: none since
        this process started, a stream restored from a tick log)."""
        names = sorted(n for n in self._encoders.keys() | self._expired_last_ts.keys() if n > after) \
            if streams is None else streams
        out: dict[str, dict[str, Any] | None] = {}
        for name in names[:limit] if limit is not None else names:
            encoder = self._encoders.get(name)
            if encoder is not None:
                out[name] = {"ticks": encoder.ticks, "last_ts": encoder.last_ts, "at_last_ts": encoder.at_last_ts,
                             "last_price": encoder.last_level}
            else:
                last_ts = self._expired_last_ts.get(name)
                out[name] = None if last_ts is None else {"ticks": 0, "last_ts": last_ts,
                                                          "at_last_ts": self._expired_at_last_ts.get(name)}
            received = self.received_ns.get(name)
            if now_ns is not None and out[name] is not None:  # (a clock stepped back reads as 0, not negative)
                out[name]["idle_s"] = None if received is None else round(max(0, now_ns - received) / 1e9, 3)
        return out

    def start_at(self, stream: str, ticks: int, last_ts: int | None, state: dict[str, Any] | None = None,
                 at_last_ts: int | None = None) -> None:
        """A stream whose earlier ticks are gone (a tick log's retention): it counts on from ``ticks`` and guards
        order from ``last_ts`` (ticks 0: an expired stream, only its guard), with the codec state ``state``
        (``codec_states``' record of it) or, without one, fresh codec state; ``at_last_ts`` as ``accepted`` says
        it (None: unknown)."""
        if ticks == 0:
            if last_ts is not None:
                self._expired_last_ts[stream] = last_ts
                self._expired_at_last_ts[stream] = at_last_ts
                self.names.add(stream, NAMES_HOLDER)
            return
        encoder = self._encoders[stream] = self._new_encoder(stream)
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

    def _new_encoder(self, stream: str) -> StreamEncoder:
        encoder = StreamEncoder(stream, self.codec, self.vocab_size, self.max_stream_bytes)
        encoder.last_ts = self._expired_last_ts.get(stream)
        encoder.at_last_ts = self._expired_at_last_ts.get(stream, 0)
        return encoder

    # -- one item, two phases --------------------------------------------------------------

    def encode(self, tick: Tick) -> EncodedTick:
        """Phase one for a raw tick (its stream name is checked when its encoder is made); raises
        InvalidTick. Mutates nothing."""
        item = self._encoder(tick.stream).encode(tick)
        if self.max_item_tokens is not None and len(item.tokens) > self.max_item_tokens:  # a text codec's long line
            raise InvalidTick("bad_tokens", f"tick of {len(item.tokens)} tokens; the engine takes at most "
                                            f"{self.max_item_tokens} in one item", tick.stream)
        return item

    def accept(self, item: Any) -> EncodedTick:
        """Phase one for one pre-tokenized map; raises InvalidTick. Mutates nothing."""
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
                raise InvalidTick("missing_field", "field 'tokens' is required (an array of token ids)")
            tokens = check_tokens(item["tokens"], self.vocab_size, self.max_item_tokens)
            ticks = check_ticks(item.get("ticks", 1), len(tokens))
            return self._encoder(stream).accept(ts, tokens, ticks)
        except InvalidTick as err:
            err.stream = stream
            raise

    def commit(self, item: EncodedTick) -> None:
        encoder = self._encoders.get(item.stream)
        if encoder is None:
            encoder = self._encoders[item.stream] = self._new_encoder(item.stream)
            self.names.add(item.stream, NAMES_HOLDER)
            if encoder.last_ts is None and (hint := first_ts_hint(item.ts)) is not None:  # a stream's very first tick
                self.ts_unit_streams += 1
                if len(self.ts_unit_notes) < MAX_TS_UNIT_NOTES:
                    self.ts_unit_notes[item.stream] = hint
                    if self.notify is not None:
                        self.notify(f"stream {item.stream!r}: {hint}")
        encoder.commit(item)
        self.passed_over.accepted(item.stream)
        if self._message_ns is not None:
            self.received_ns[item.stream] = self._message_ns
            if item.ts - self._message_ns > AHEAD_OF_CLOCK_NOTE_NS:
                self._note_ahead_of_clock(item.stream, item.ts, self._message_ns)

    def _note_ahead_of_clock(self, stream: str, ts: int, now_ns: int) -> None:
        """A wire tick of ``stream`` accepted well ahead of the clock: counted, and said for a stream's first."""
        self.ahead_of_clock_ticks += 1
        ahead_s = (ts - now_ns) / 1e9
        noted = self.ahead_of_clock.get(stream)
        if noted is not None:
            noted[0], noted[1] = noted[0] + 1, max(noted[1], round(ahead_s, 3))
            return
        if len(self.ahead_of_clock) >= MAX_TS_UNIT_NOTES:
            return
        self.ahead_of_clock[stream] = [1, round(ahead_s, 3)]
        if self.notify is not None:
            ahead = f"{ahead_s / 3600:.1f} h" if ahead_s >= 3600 else f"{ahead_s / 60:.0f} min"
            self.notify(f"stream {stream!r}: accepted a tick stamped {ahead} ahead of this clock (ts {ts}, "
                        f"{utc_text(ts)}): its later ticks older than that are refused as ts_backwards until the "
                        f"clock passes it; if the stamp is wrong (forged, or a clock or unit mistake), `flashtick "
                        f"forget {stream}` drops the stream, its ordering guard included (stats ticks_ahead_of_clock)")

    def ahead_of_clock_summary(self) -> dict[str, Any]:
        """For stats: wire ticks accepted over AHEAD_OF_CLOCK_NOTE_NS ahead of the clock (empty when none)."""
        if not self.ahead_of_clock_ticks:
            return {}
        return {"ticks_ahead_of_clock": {"ticks": self.ahead_of_clock_ticks, "streams": {
            stream: {"ticks": ticks, "max_ahead_s": ahead} for stream, (ticks, ahead) in self.ahead_of_clock.items()}}}

    def note_passed(self, stream: str, ts: int, ticks: int = 1) -> None:
        """``ticks`` of ``stream`` stamped ``ts`` were taken off the wire and refused or conflated (PassedOver); a
        tick log's replay says so of each logged item that had some before it."""
        encoder = self._encoders.get(stream)
        last_ts = encoder.last_ts if encoder is not None else self._expired_last_ts.get(stream)
        self.passed_over.note(stream, ts, ticks, last_ts, held=encoder is not None or last_ts is not None)

    def _note_refused(self, stream: str | None, obj: Any) -> None:
        """A wire item refused before it was encoded, counted where it has a valid stream name and an int ts."""
        ts = obj.get("ts") if isinstance(obj, dict) else None
        if stream is not None and type(ts) is int:  # type(): a bool is not a ts
            ticks = obj.get("ticks", 1)  # (a pre-tokenized item's)
            self.note_passed(stream, ts, ticks if type(ticks) is int and ticks >= 1 else 1)

    def ts_unit_summary(self) -> dict[str, Any]:
        """For stats: streams whose first ts was 0 or looked like seconds, ms or us rather than ns (empty when none)."""
        if not self.ts_unit_streams:
            return {}
        return {"ts_unit_suspects": {"streams": self.ts_unit_streams, "first": dict(self.ts_unit_notes)}}

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
                tick = validate(obj, self.max_stream_bytes, self.zero_bid_is_price)
            except InvalidTick as err:
                if err.reason != "nonpositive_price":
                    raise
                raise InvalidTick(err.reason, err.message + SHIFT_PRICES, err.stream) from None
            self._check_live(tick.stream, tick.ts, now_ns)
            held = self.held.get(tick.stream)
            supersedes = held is not None and hold_quotes and not tick.is_trade and tick.ts >= held.ts
            if held is not None and not supersedes:  # the stream's held quote goes first, as it came
                del self.held[tick.stream]
                self._submit_or_reject(held, submit, result)
            item = self.encode(tick)  # (a quote that supersedes is encoded against the same committed state)
            if hold_quotes and not tick.is_trade:
                self.conflated += supersedes  # only now: a quote that fails its checks leaves the held one held
                if supersedes:
                    self.note_passed(held.stream, held.ts, held.ticks)
                self.held[tick.stream] = item
                return None
            return item

        return self._ingest(data, submit, tick_items, first_phase, result)

    def ingest_tokenized(self, data: bytes, submit: Submit, now_ns: int | None = None) -> Ingested:
        """A pre-tokenized wire message (a msgpack list of maps); never raises. ``now_ns`` as for
        ``ingest_message``."""
        if now_ns is not None:
            self._message_ns = now_ns

        def first_phase(obj: Any) -> EncodedTick:
            item = self.accept(obj)
            self._check_live(item.stream, item.ts, now_ns)
            return item

        return self._ingest(data, submit, _tokenized_items, first_phase, self.flush_held(submit))

    def _check_live(self, stream: str, ts: int, now_ns: int | None) -> None:
        """The checks of a wire tick's stream and ts against this service's state, for a live message only (one
        with its clock, ``now_ns``; never a tick log's replay): not stamped too far ahead of the clock, and a new
        name that is no lookalike of a known one."""
        if now_ns is None:
            return
        if self.max_ts_ahead_ns is not None:
            check_not_ahead(stream, ts, now_ns, self.max_ts_ahead_ns)
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

    def shed_message(self, data: bytes, refusal: Callable[[str | None], InvalidTick | None],
                     tokenized: bool = False) -> Ingested | None:
        """A whole message refused (the engine is behind and sheds), one rejection per stream with the count of its
        ticks and ``refusal(stream)``'s reason, none of them validated or encoded: refusing tick by tick cost as much
        as accepting, so a queue of messages behind a shedding engine drained no faster than the feed filled it.
        None for a message that does not decode (the normal path says why), or one with a stream ``refusal``
        accepts (None for it): that message is read tick by tick. A tick without a valid stream name gets
        ``refusal(None)``'s reason."""
        if len(data) > self.max_message_bytes:
            return None
        try:
            items = (_tokenized_items if tokenized else tick_items)(unpack(data, max_bytes=self.max_message_bytes))
        except InvalidTick:
            return None
        first: dict[str | None, list[int]] = {}  # stream -> [index of its first tick, its ticks]
        named: list[str | None] = []
        for index, obj in enumerate(items):
            stream = obj.get("stream") if isinstance(obj, dict) else None
            try:
                stream = check_stream(stream, self.max_stream_bytes)  # echoed on `_rejects/` only if a valid name
            except InvalidTick:
                stream = None
            first.setdefault(stream, [index, 0])[1] += 1
            named.append(stream)
        errors = {stream: refusal(stream) for stream in first}
        if any(err is None for err in errors.values()):
            return None
        for stream, obj in zip(named, items):
            self._note_refused(stream, obj)
        return Ingested([], [Rejection(index, errors[stream].reason, str(errors[stream]), stream, n)
                             for stream, (index, n) in first.items()])

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
        for index, obj in enumerate(items):
            try:
                item = first_phase(obj)
            except InvalidTick as err:
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
            raise
        self.commit(item)
        return item


def _tokenized_items(obj: Any) -> list[Any]:
    if not isinstance(obj, list):
        raise InvalidTick("bad_msgpack", f"tokenized message must be a msgpack array, got {wire_value(obj)}")
    return obj
