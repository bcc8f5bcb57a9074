"""The service's own constants of the wire protocol (docs/wire-protocol.md) and how its payloads pack: the
protocol's version that `health` replies and heartbeats carry, and the first frame that marks tokenized ticks on
the ingest socket. One definition, read by the server, its control replies and its heartbeat."""

from __future__ import annotations

from typing import Any

import msgpack

TOKENIZED_MARKER = b"tokens"
# The wire protocol's version, in `health` replies and heartbeats (docs/wire-protocol.md, "Compatibility"): it
# stays while changes are additions a parser can ignore (a new key, op, reason or topic), and goes up with
# anything that breaks a client written to the current page (a key removed or renamed, a type or framing changed)
WIRE_PROTOCOL = 1


def pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def raw_map_value(payload: bytes, key: str) -> bytes | None:
    """The msgpack bytes of ``key``'s value in the map ``payload`` holds, exactly as they came (a float32 stays
    float32, a uint16 stays uint16); None when ``payload`` is no map, or ``key`` is not one of its str keys, or
    comes more than once. A control reply echoes a request's `id` so, byte for byte (review308 #6: a client keying
    its pending requests on the id's bytes missed a reply whose id was re-encoded)."""
    try:
        unpacker = msgpack.Unpacker(raw=True, strict_map_key=False, max_buffer_size=max(len(payload), 1))
        unpacker.feed(payload)
        found = None
        for _ in range(unpacker.read_map_header()):
            start = unpacker.tell()
            name = unpacker.unpack()
            is_str = payload[start] in _STR_HEADS or 0xA0 <= payload[start] <= 0xBF
            value_start = unpacker.tell()
            unpacker.skip()
            if is_str and name == key.encode():
                if found is not None:
                    return None
                found = payload[value_start:unpacker.tell()]
        return found
    except Exception:  # (not a map, cut short: the request's own error says so; the reply packs the decoded id)
        return None


_STR_HEADS = (0xD9, 0xDA, 0xDB)  # str8, str16, str32 (fixstr is 0xa0-0xbf)


def pack_with_raw(obj: dict, key: str, raw: bytes) -> bytes:
    """``obj`` packed as a msgpack map with one more entry, ``key`` -> ``raw`` (msgpack bytes, written as they are)."""
    count = len(obj) + 1
    body = pack(obj)
    skip = 1 if body[0] & 0xF0 == 0x80 else 3 if body[0] == 0xDE else 5  # (fixmap, map16, map32 header)
    head = (bytes([0x80 | count]) if count < 16 else b"\xde" + count.to_bytes(2, "big") if count < 1 << 16
            else b"\xdf" + count.to_bytes(4, "big"))
    return head + body[skip:] + pack(key) + raw
