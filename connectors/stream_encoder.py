"""`StreamEncoder`: one stream's ingest state, its last accepted ts (the ordering guard) and its codec state, with
the two-phase encode/commit that leaves that state as it was when a tick is refused anywhere (see
connectors/encoder.py's docstring; `StreamEncoders` there holds one of these per stream).
"""

from __future__ import annotations

import copy
from typing import Any

from connectors.codec import Codec
from connectors.encoded_items import EncodedTick
from connectors.stream_names import MAX_STREAM_BYTES, check_stream
from connectors.tick_errors import InvalidTick
from connectors.tick_times import check_order
from connectors.ticks import Tick
from engine.quoting import quoted


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
        # the last raw tick committed (None: none, or only pre-tokenized items), whose price level a feed compares
        # its first price with, to tell a stream continued at another level (another --price-offset): `last_level`
        self.last_tick: Tick | None = None

    @property
    def last_level(self) -> float | None:
        """The price level of the last raw tick committed (Tick.level), worked out when asked (`streams`), not for
        every tick: a quote's mid is rounded to its decimals, which takes a few µs a tick on the ingest path."""
        return None if self.last_tick is None else self.last_tick.level

    def encode(self, tick: Tick) -> EncodedTick:
        """Tokens for a validated tick of this stream; raises InvalidTick("ts_backwards"). Mutates nothing."""
        if tick.stream != self.stream:
            raise ValueError(f"tick of stream {quoted(tick.stream)} given to the encoder of {quoted(self.stream)}")
        check_order(self.stream, tick.ts, self.last_ts)
        state = copy.copy(self.state)
        try:
            tokens = self.codec.encode(tick, state)
        except Exception as e:  # a codec must never take the service down over one tick; the copy is dropped
            raise InvalidTick("unencodable", f"stream {quoted(self.stream)}: the codec could not encode this tick "
                                             f"({type(e).__name__}: {e})", self.stream) from None
        return EncodedTick(self.stream, tick.ts, tokens, 1, state, tick, seq=tick.seq)

    def accept(self, ts: int, tokens: list[int], ticks: int = 1, seq: int | None = None) -> EncodedTick:
        """A pre-tokenized item of this stream (tokens, ticks and ``seq`` already checked, see
        StreamEncoders.accept); raises InvalidTick("ts_backwards"). Mutates nothing."""
        check_order(self.stream, ts, self.last_ts)
        return EncodedTick(self.stream, ts, tokens, ticks, None, seq=seq)

    def commit(self, item: EncodedTick) -> None:
        """Advance the stream past `item` (which this encoder made and the engine took)."""
        if item.ts != self.last_ts:
            self.at_last_ts = item.passed + item.ticks
        elif self.at_last_ts is not None:
            self.at_last_ts += item.passed + item.ticks
        self.last_ts = item.ts
        if item.state is not None:
            self.state = item.state
        if item.tick is not None:  # (a raw tick, validated: a price, or a bid or an ask, gives it a level)
            self.last_tick = item.tick
        self.ticks += item.ticks
