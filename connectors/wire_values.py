"""How a decoded wire value is said in an error sent back on the wire (`wire_type`, `wire_value`: its msgpack type
and, for a scalar, the value, cut short), a bounded list of unknown keys (`field_list`), and the one rule for a text
field (`check_text`: msgpack str, not bin).

Apart from connectors/ticks.py because ticks, pre-tokenized items and control requests all say refused values alike.
"""

from __future__ import annotations

from typing import Any

import msgpack

from connectors.tick_errors import InvalidTick
from engine.quoting import quoted


# in this order: bool is an int subclass, msgpack's ExtType a tuple
_WIRE_TYPES = ((type(None), "nil"), (bool, "bool"), (int, "int"), (float, "float"), (str, "str"),
               (bytes, "bin"), (msgpack.ExtType, "ext"), (msgpack.Timestamp, "ext"), (list, "array"),
               (tuple, "array"), (dict, "map"))


def wire_type(value: Any) -> str:
    """A decoded value's msgpack type, as a client in any language knows it (nil, bool, int, float, str, bin,
    array, map, ext), for errors sent back on the wire; a Python value no msgpack decodes to keeps its own name."""
    for python_type, name in _WIRE_TYPES:
        if isinstance(value, python_type):
            return name
    return type(value).__name__


def wire_value(value: Any, limit: int = 32) -> str:
    """A decoded value for an error: its msgpack type and, for a scalar, the value (``bool true``, ``nil``,
    ``int -1``, ``str 'x'``, cut to ``limit`` characters); a container or ext by its type and size alone."""
    name = wire_type(value)
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return f"bool {'true' if value else 'false'}"
    if isinstance(value, bytes):
        return quoted(value)  # ("bin 3 bytes 43 2e 41")
    if isinstance(value, (int, float, str)):
        return f"{name} {quoted(value, limit)}"
    if isinstance(value, msgpack.ExtType):
        return f"ext (type {value.code})"
    if isinstance(value, msgpack.Timestamp):
        return "ext (msgpack's timestamp, type -1)"
    if isinstance(value, (list, tuple, dict)):
        return f"{name} of {len(value)}"
    return name


def check_text(key: str, value: Any) -> None:
    """A text field is msgpack str: sent as bin (a client packing every string as bytes) or as anything else it is
    `wrong_type`, said as such, whichever field it is."""
    if isinstance(value, bytes):
        raise InvalidTick("wrong_type", f"{key} must be msgpack str, got {quoted(value)}: pack text as str "
                                        "(msgpack's str family), not bin")
    if not isinstance(value, str):
        raise InvalidTick("wrong_type", f"{key} must be a str, got {wire_value(value)}")


def field_list(keys: Any, shown: int = 8) -> str:
    """Unknown keys for an error, bounded: a few of them (each cut to 32 characters) and how many more."""
    names = sorted(str(k)[:32] for k in keys)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"[{', '.join(quoted(name) for name in names[:shown])}]{more}"
