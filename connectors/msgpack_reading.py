"""How every wire message is read from msgpack (ticks and control requests alike): `read_msgpack` and its
`NotMsgpack` (saying why, in msgpack's terms, and when the bytes look like JSON), `unpack` (bounded, refusing as
`bad_msgpack`), maps with a key given twice (`RepeatedKeys`, refused by `check_keys` with keys that are not str),
and the items of a raw-tick message (`tick_items`).

Apart from connectors/ticks.py because this is the byte-level reading; the tick schema and its checks come after it.
"""

from __future__ import annotations

import re
from typing import Any

import msgpack

from connectors.tick_errors import InvalidTick
from connectors.wire_values import wire_value
from engine.quoting import quoted


def unpack(data: bytes, *, max_bytes: int = 64 << 20) -> Any:
    """msgpack -> Python object; raises InvalidTick("bad_msgpack") on garbage or over `max_bytes`."""
    if len(data) > max_bytes:
        raise InvalidTick("bad_msgpack", f"message of {len(data)} bytes > {max_bytes}")
    if not data:
        raise InvalidTick("bad_msgpack", "an empty frame: a message holds msgpack ticks (a map, or a list of them)")
    try:
        return read_msgpack(data)
    except NotMsgpack as err:
        raise InvalidTick("bad_msgpack", str(err)) from None


class NotMsgpack(ValueError):
    """Bytes that hold no single msgpack value the engine can read; the message says why, in msgpack's terms."""


def read_msgpack(data: bytes) -> Any:
    """One msgpack value as every wire message is read (ticks and control requests alike): keys of any type, text
    that is not UTF-8 decoded with surrogates (which no stream name, field or value allows) and a map with a key
    given twice (a `RepeatedKeys`) come through, so that the one item at fault is refused saying why (check_keys)
    and the rest of its message is kept (~0.4 us a tick for the hook). Raises NotMsgpack."""
    try:  # (unpackb bounds container sizes by len(data))
        return msgpack.unpackb(data, raw=False, strict_map_key=False, unicode_errors="surrogateescape",
                               object_pairs_hook=_decoded_map)
    except TypeError:  # a map or an array as a map key (unhashable): no tick or request holds one
        why = ": a map key that is a map or an array"
    except msgpack.ExtraData:
        why = ": bytes left over after its first value (one frame holds one value)"
    except msgpack.StackError:
        why = ": nested deeper than the decoder allows"
    except msgpack.FormatError:
        why = ": a byte that starts no msgpack value"
    except Exception as err:  # msgpack raises several unrelated types on garbage; said in msgpack's own terms
        why = _garbage_said(str(err), len(data))
    raise NotMsgpack(f"not valid msgpack{why}{json_hint(data)}")


# Python msgpack's bound on a container's header (`4294967295 exceeds max_map_len(2)`): its own parameters, derived
# from the frame's length, which read to a client in another language as if maps held two entries at most
OVER_LENGTH = re.compile(r"(\d+) exceeds max_(map|array|str|bin|ext)_len")
CONTAINER_SAID = {"map": "a map of", "array": "an array of", "str": "a string of", "bin": "binary data of",
                  "ext": "an ext value of"}


def _garbage_said(error: str, size: int) -> str:
    """Why the decoder gave up, without its language's words: a header claiming more entries or bytes than the
    whole frame holds is a value cut short (or a length that is garbage), said with both numbers."""
    if "incomplete input" in error:
        return ": it ends inside a value (cut short?)"
    if (over := OVER_LENGTH.search(error)) is not None:
        unit = "entries" if over[2] in ("map", "array") else "bytes"
        return (f": it ends inside a value (cut short?): a header says {CONTAINER_SAID[over[2]]} {int(over[1]):,} "
                f"{unit}, more than the {size:,}-byte frame holds")
    return f" ({error})"


class RepeatedKeys(dict):
    """A decoded map in which a key came more than once (msgpack allows it; a plain decode keeps the last value,
    so a hand-rolled encoder's bug would move a tick to another stream or price without a word)."""

    repeated: list[Any]


def _decoded_map(pairs: list[tuple[Any, Any]]) -> dict:
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        keys = [key for key, _ in pairs]
        mapping = RepeatedKeys(mapping)
        mapping.repeated = sorted({key for key in keys if keys.count(key) > 1}, key=repr)
        if len({repr(value) for key, value in pairs if key == "stream"}) > 1:
            del mapping["stream"]  # two stream names: the rejection is no more one stream's than the other's
    return mapping


def json_hint(data: bytes) -> str:
    """What to add to a msgpack error when the bytes look like JSON text (a common first try)."""
    if data.lstrip()[:1] in (b"{", b"["):
        return ("; it looks like JSON text: the engine reads msgpack (pack the same value as msgpack), see "
                "docs/wire-protocol.md")
    return ""


def check_keys(obj: dict) -> None:
    """Map keys are msgpack str: a key sent as bin (a client packing every string as bytes) is `wrong_type`,
    said as such, rather than every field looking missing."""
    if isinstance(obj, RepeatedKeys):
        raise InvalidTick("duplicate_key", f"key {', '.join(quoted(k, 32) for k in obj.repeated[:8])} given more "
                                           f"than once in one tick map: which value was meant cannot be told")
    for key in obj:
        if isinstance(key, bytes):
            raise InvalidTick("wrong_type", f"map keys must be msgpack str, got {quoted(key)}: pack text as "
                                            "str (msgpack's str family), not bin")
        if not isinstance(key, str):
            raise InvalidTick("wrong_type", f"map keys must be msgpack str, got {wire_value(key)}")


def columnar_refusal(obj: dict) -> InvalidTick | None:
    """A map whose values are all lists of one length (or `{"columns": {...}}` of them) is a table sent as columns,
    as a q bridge hands one over (pykx's `.py()` of a table, qpython's dict of lists): refused in one rejection that
    says to send a list of row maps, not as a tick whose fields are arrays (review324 #8). The wire takes rows only:
    one shape, whose per-tick rejections locate each tick by its index (docs/wire-protocol.md)."""
    table = obj.get("columns") if len(obj) == 1 and isinstance(obj.get("columns"), dict) else obj
    lengths = {len(v) if isinstance(v, list) else -1 for v in table.values()}
    if len(table) < 2 or len(lengths) != 1 or min(lengths) < 1:
        return None
    shown = ", ".join(f"{quoted(str(k))}: [{len(v)} values]" for k, v in list(table.items())[:4])
    return InvalidTick("not_a_map", f"a table sent as columns ({{{shown}{', ...' if len(table) > 4 else ''}}}): the "
                                    f"wire takes a tick map or a list of them, one map per row: send a list of rows, "
                                    f"[{{stream, ts, price, size}}, ...] (in Python [dict(zip(columns, row)) for row "
                                    f"in zip(*columns.values())], with the wire's names: docs/wire-protocol.md)")


def tick_items(obj: Any) -> list[Any]:
    """The items of an unpacked raw-tick message: one map or a list; raises InvalidTick("not_a_map"), naming the
    rows to send for a table sent as columns (`columnar_refusal`)."""
    if isinstance(obj, dict):
        if (refusal := columnar_refusal(obj)) is not None:
            raise refusal
        return [obj]
    if isinstance(obj, list):
        return obj
    raise InvalidTick("not_a_map", f"a message is a tick map or an array of them, got {wire_value(obj)}")
