"""Property-based fuzz of the ingest decoder: thousands of generated wire messages, raw and pre-tokenized,
through the real per-stream encoders and the built-in codec. Never a crash; every refused item has a
reason from the documented list; every item is either accepted or refused, never both, never neither."""

from __future__ import annotations

import math

import msgpack
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from connectors.builtin import load_builtin_codec
from connectors.encoder import StreamEncoders
from connectors.tick_errors import REASONS

CODEC = load_builtin_codec()
FIELDS = ("stream", "ts", "kind", "price", "size", "side", "bid", "ask", "bid_size", "ask_size", "seq", "extra")

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12), st.binary(max_size=8), st.sampled_from(["trade", "quote", "buy", "sell", "BTCUSDT", ""]),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4),
                                                                                           inner, max_size=3),
                      max_leaves=6)
# Mostly plausible ticks (the interesting edges are near valid ones), some anything-goes maps.
plausible_tick = st.fixed_dictionaries(
    {"stream": st.sampled_from(["A", "B", "a/b", "", "x" * 300]),
     "ts": st.integers(0, 2**63 - 1) | st.integers(-10, 10) | st.floats(),
     "price": st.floats(min_value=-1e12, max_value=1e12) | st.floats() | st.integers(-5, 10**6),
     "size": st.floats(allow_nan=True) | st.integers(-5, 10**6)},
    optional={"kind": st.sampled_from(["trade", "quote", "book", 3]), "side": st.sampled_from(["buy", "sell", "x", 1]),
              "bid": st.floats(1, 1e6), "ask": st.floats(1, 1e6), "bid_size": st.floats(0, 1e3),
              "ask_size": st.floats(0, 1e3), "extra": values})
any_map = st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), values, max_size=8)
items = st.one_of(plausible_tick, any_map, values)
messages = st.one_of(items, st.lists(items, max_size=12))

tokenized_item = st.one_of(
    st.fixed_dictionaries({"stream": st.sampled_from(["T", "", 5]), "ts": st.integers(-3, 2**64 - 1) | st.floats(),
                           "tokens": st.lists(st.integers(-3, CODEC.vocab_size + 3), max_size=6) | values,
                           "ticks": st.integers(-2, 5) | values}),
    any_map, values)


def encoders() -> StreamEncoders:
    return StreamEncoders(CODEC, CODEC.vocab_size, max_message_bytes=1 << 16, max_item_tokens=64)


def check(result, count: int | None) -> None:
    assert all(r.reason in REASONS for r in result.rejections), result.rejections
    assert all(r.error for r in result.rejections)
    for item in result.accepted:
        assert item.tokens and all(0 <= t < CODEC.vocab_size for t in item.tokens)
        assert math.isfinite(item.ts) and item.ticks >= 1
    if count is not None and not any(r.index == -1 for r in result.rejections):
        indices = sorted([r.index for r in result.rejections])
        assert len(result.accepted) + len(indices) == count and len(set(indices)) == len(indices)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=messages)
def test_raw_messages_never_crash_and_every_item_is_accepted_or_refused_with_a_reason(message) -> None:
    accepted = []
    result = encoders().ingest_message(msgpack.packb(message, use_bin_type=True), accepted.append)
    assert accepted == result.accepted
    check(result, len(message) if isinstance(message, list) else 1 if isinstance(message, dict) else None)


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(message=st.lists(tokenized_item, max_size=10) | values)
def test_tokenized_messages_never_crash(message) -> None:
    accepted = []
    result = encoders().ingest_tokenized(msgpack.packb(message, use_bin_type=True), accepted.append)
    check(result, len(message) if isinstance(message, list) else None)


@settings(max_examples=1000, deadline=None)
@given(data=st.binary(max_size=256))
def test_arbitrary_bytes_never_crash(data) -> None:
    for ingest in (encoders().ingest_message, encoders().ingest_tokenized):
        result = ingest(data, lambda item: None)
        check(result, None)
