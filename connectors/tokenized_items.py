"""The pre-tokenized wire form of the ingest socket (a msgpack list of ``{stream, ts, tokens, ticks, seq}`` from an
out-of-process connector): its fields, the one token rule (`check_tokens`), the one tick-count rule
(`check_ticks`), and how a message of them is read as items (`tokenized_items`); and `listed_ticks`, the ticks a
message holds read from its first bytes alone, for either form.

Apart from connectors/encoder.py because these are rules of a wire form, checked the same way wherever it is read.
"""

from __future__ import annotations

from typing import Any

from connectors.tick_errors import InvalidTick
from connectors.wire_values import wire_value

TOKENIZED_FIELDS = frozenset(("stream", "ts", "tokens", "ticks", "seq"))


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


def tokenized_items(obj: Any) -> list[Any]:
    if not isinstance(obj, list):
        raise InvalidTick("bad_msgpack", f"tokenized message must be a msgpack array, got {wire_value(obj)}")
    return obj
