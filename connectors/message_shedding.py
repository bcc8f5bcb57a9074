"""What shedding reads of a wire message (`limits.when_behind: shed`): its items' stream names and how many ticks
each stream has in it, without validating or encoding any tick, so a whole message is refused at the cost of
reading it (`StreamEncoders.shed_message` builds the rejections).

Apart from connectors/encoder.py because it is the one read of a message that skips the checks every other path
makes.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from connectors.msgpack_reading import tick_items, unpack
from connectors.stream_names import check_stream
from connectors.tick_errors import InvalidTick
from connectors.tokenized_items import tokenized_items


class MessageStreams(NamedTuple):
    """A message's items as read, each one's valid stream name (None: none) and, per stream, its first index and
    its count of ticks."""

    items: list[Any]
    named: list[str | None]
    first: dict[str | None, list[int]]  # stream -> [index of its first tick, its ticks]


def message_streams(data: bytes, tokenized: bool, max_message_bytes: int, max_stream_bytes: int
                    ) -> MessageStreams | None:
    """The streams of a raw (or, ``tokenized``, a pre-tokenized) message; None for one over ``max_message_bytes``
    or one that does not decode (the normal path says why)."""
    if len(data) > max_message_bytes:
        return None
    try:
        items = (tokenized_items if tokenized else tick_items)(unpack(data, max_bytes=max_message_bytes))
    except InvalidTick:
        return None
    first: dict[str | None, list[int]] = {}  # stream -> [index of its first tick, its ticks]
    named: list[str | None] = []
    for index, obj in enumerate(items):
        stream = obj.get("stream") if isinstance(obj, dict) else None
        try:
            stream = check_stream(stream, max_stream_bytes)  # echoed on `_rejects/` only if a valid name
        except InvalidTick:
            stream = None
        first.setdefault(stream, [index, 0])[1] += 1
        named.append(stream)
    return MessageStreams(items, named, first)
