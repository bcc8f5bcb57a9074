"""Property-based fuzz of the ingest decoder: generated wire messages, raw and pre-tokenized, through the real
per-stream encoders and the built-in codec. Never a crash; every refused item has a reason from the documented
list; every item is either accepted or refused, never both, never neither.

The examples are drawn from a fixed seed (`derandomize`): 300 a property, beside the known edges written out as
`@example`s (each refusal reason the wire can cause, the integer and float extremes, truncated msgpack). Drawing
them was the cost of this file (1,000 a property: ~26 s of a CI run); the edges no longer depend on the draw."""

from __future__ import annotations

import math

import msgpack
from hypothesis import HealthCheck, example, given, settings
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


# seeded draws: the same examples every run (see the module's docstring)
FUZZ = settings(max_examples=300, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TRADE = {"stream": "A", "ts": 1, "price": 1.0, "size": 1.0}
# raw ticks at each edge the decoder tells apart: one accepted, then one of each refusal the wire can cause
RAW_EDGES = [
    TRADE, [TRADE, {**TRADE, "ts": 2}], [], [TRADE, None, 7, "x", b"\x00", [TRADE]], {}, None, 3, "trade",
    {**TRADE, "stream": ""}, {**TRADE, "stream": "a/b"}, {**TRADE, "stream": "x" * 300}, {**TRADE, "stream": 5},
    {"ts": 1, "price": 1.0, "size": 1.0}, {"stream": "A", "price": 1.0, "size": 1.0}, {**TRADE, "ts": 1.5},
    {**TRADE, "ts": -1}, {**TRADE, "ts": 2**63}, {**TRADE, "ts": 2**64 - 1}, {**TRADE, "ts": -(2**63)},
    {**TRADE, "ts": float("nan")}, {**TRADE, "price": float("nan")}, {**TRADE, "price": float("inf")},
    {**TRADE, "price": 0.0}, {**TRADE, "price": -1.0}, {**TRADE, "price": 1e300}, {**TRADE, "price": "1"},
    {**TRADE, "size": float("nan")}, {**TRADE, "size": -1.0}, {**TRADE, "size": 1e300}, {**TRADE, "size": True},
    {**TRADE, "kind": "book"}, {**TRADE, "kind": 3}, {**TRADE, "side": "x"}, {**TRADE, "side": 1},
    {**TRADE, "seq": -1}, {**TRADE, "seq": 2**64 - 1}, {**TRADE, "extra": {"a": [1, {"b": None}]}}, {**TRADE, "x": 1},
    {"stream": "A", "ts": 1, "kind": "quote", "bid": 2.0, "ask": 1.0}, {"stream": "A", "ts": 1, "bid": 0, "ask": 0},
    {"stream": "A", "ts": 1, "bid": 1.0, "ask": 2.0, "bid_size": -1.0, "ask_size": float("inf")},
    {**TRADE, "bid": 1.0, "ask": 2.0}, [TRADE] * 12, [{**TRADE, "ts": 2}, TRADE], {**TRADE, "stream": "A" * 70_000}]
# pre-tokenized items at their edges: tokens outside the vocabulary, tick counts below one, wrong types
TOKENIZED = {"stream": "T", "ts": 1, "tokens": [0, 1], "ticks": 1}
TOKENIZED_EDGES = [
    [TOKENIZED], [], None, TOKENIZED, [TOKENIZED, {**TOKENIZED, "ts": 2}], [{**TOKENIZED, "tokens": []}],
    [{**TOKENIZED, "tokens": [-1]}], [{**TOKENIZED, "tokens": [CODEC.vocab_size]}], [{**TOKENIZED, "tokens": [0] * 65}],
    [{**TOKENIZED, "tokens": "01"}], [{**TOKENIZED, "tokens": [0.5]}], [{**TOKENIZED, "ticks": 0}],
    [{**TOKENIZED, "ticks": -2}], [{**TOKENIZED, "ticks": [1]}], [{**TOKENIZED, "stream": 5}],
    [{**TOKENIZED, "stream": ""}], [{**TOKENIZED, "ts": float("nan")}], [{**TOKENIZED, "ts": 2**64 - 1}],
    [{**TOKENIZED, "ts": -3}], [{"tokens": [0], "ticks": 1}], [TOKENIZED, 7, "x", [TOKENIZED]]]
# bytes that are not one msgpack object: empty, a reserved byte, truncated containers, two objects back to back
BYTE_EDGES = [b"", b"\xc1", b"\x91", b"\xdc\xff\xff", b"\xdd\xff\xff\xff\xff", b"\x80", b"\x90", b"\x81\xa1a",
              b"\x91\x80\x91\x80", b"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00", b"\xd9\x05ab",
              b"\x82\xa6stream\xa1A\xa6stream\xa1B"]  # (the last: a map with one key twice)


def with_examples(name: str, edges: list):
    """``@example(name=edge)`` for every edge: run each time, before the draws."""
    def decorate(test):
        for edge in reversed(edges):
            test = example(**{name: edge})(test)
        return test
    return decorate


@FUZZ
@given(message=messages)
@with_examples("message", RAW_EDGES)
def test_raw_messages_never_crash_and_every_item_is_accepted_or_refused_with_a_reason(message) -> None:
    accepted = []
    result = encoders().ingest_message(msgpack.packb(message, use_bin_type=True), accepted.append)
    assert accepted == result.accepted
    check(result, len(message) if isinstance(message, list) else 1 if isinstance(message, dict) else None)


@FUZZ
@given(message=st.lists(tokenized_item, max_size=10) | values)
@with_examples("message", TOKENIZED_EDGES)
def test_tokenized_messages_never_crash(message) -> None:
    accepted = []
    result = encoders().ingest_tokenized(msgpack.packb(message, use_bin_type=True), accepted.append)
    check(result, len(message) if isinstance(message, list) else None)


@FUZZ
@given(data=st.binary(max_size=256))
@with_examples("data", BYTE_EDGES + [msgpack.packb(edge) for edge in RAW_EDGES[:4]])
def test_arbitrary_bytes_never_crash(data) -> None:
    for ingest in (encoders().ingest_message, encoders().ingest_tokenized):
        result = ingest(data, lambda item: None)
        check(result, None)
