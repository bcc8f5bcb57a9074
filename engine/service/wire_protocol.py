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
