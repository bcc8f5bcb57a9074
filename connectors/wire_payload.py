"""A message's payload on the engine's sockets: msgpack of one tick (a map) or a batch (a list of maps), and the
hook that turns numpy values, DataFrame arrays and aware datetimes into the plain values they hold (anything else
msgpack cannot pack is refused with a message naming it). Shared by the feed client and the service's control
client, which packs its requests alike; msgpack, never pickle: the engine must not run code a client sends.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import msgpack

from connectors.plain_values import plain, unsendable_hint
from connectors.ticks import Tick

SendItem = Tick | Mapping[str, Any]


def _wire(item: Any) -> dict[str, Any]:
    if isinstance(item, Tick):
        return item.to_wire()
    if isinstance(item, Mapping):
        return dict(item)
    raise TypeError(f"a tick is a Tick or a dict, got {type(item).__name__}")


def packable(value: Any) -> Any:
    """msgpack's hook for values it cannot pack: numpy scalars and arrays, aware datetimes as the plain values they
    hold (plain_values.plain); anything else refused with what to send instead."""
    if (converted := plain(value)) is not value:
        return converted
    kind = "an int past 64 bits" if isinstance(value, int) else type(value).__name__
    shown = " ".join(repr(value).split())  # (on one line: a frame's or an array's repr is several)
    shown = shown if len(shown) <= 40 else shown[:37] + "..."
    raise TypeError(f"value {shown} ({kind}) cannot be sent: a tick's fields are str, int (64-bit), float or None, "
                    f"a request's values those or lists and maps of them{unsendable_hint(value)}")


def pack(ticks: SendItem | Sequence[SendItem]) -> tuple[bytes, int]:
    """msgpack payload of one tick (a map) or a batch (a list of maps), and how many ticks it holds."""
    if isinstance(ticks, (Tick, Mapping)):
        return msgpack.packb(_wire(ticks), use_bin_type=True, default=packable), 1
    if isinstance(ticks, (list, tuple)):
        return msgpack.packb([_wire(t) for t in ticks], use_bin_type=True, default=packable), len(ticks)
    raise TypeError(f"send() takes a Tick, a dict or a list of them, got {type(ticks).__name__}")
