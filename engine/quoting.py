"""How an error quotes a value it names: as JSON writes it, so a C++, Go or Node client's log reads it in no
language's own notation (review308 #4: errors quoted Python literals, `b'C.A'`, `('trade', 'quote')`,
`'AAPL\\xa0US'`). One helper for every error the wire carries (tick rejections on `_rejects/`, control replies).

    quoted("AAPL\\xa0US")        -> "AAPL\\u00a0US"   (a character that does not print, escaped as JSON does)
    quoted("日経225")            -> "日経225"          (one that prints, as it is)
    quoted(b"C.A")              -> bin 3 bytes 43 2e 41
    quoted(("trade", "quote"))  -> ["trade", "quote"]
    quoted(None), quoted(True)  -> null, true
    quoted(Path("a b.csv")), quoted(date(2024, 3, 1)), quoted(numpy.int64(5))  -> "a b.csv", "2024-03-01", 5

Several values a message names in full (the choices a key takes, the columns a map needs), never as Python prints a
list or a tuple (`['x']`, `('ns', 'us')`):

    quoted_list(["x", "y"])               -> ["x", "y"]            (a JSON array, every item)
    quoted_words(("ns", "us", "ms"))      -> "ns", "us" and "ms"
    quoted_choices(KINDS)                 -> "direction", "regime" or "move"   (the values a key takes)

A value is cut short (a refused value may be megabytes): text past ``limit`` characters ends `"..."` outside the
quotes, so what is inside them is the value's own start; bytes show their first 16; containers their first 4 items.
"""

from __future__ import annotations

import datetime
import decimal
import math
import unicodedata
from pathlib import PurePath
from typing import Any, Iterable

MAX_QUOTED = 80  # characters of a quoted text
MAX_BYTES_SHOWN = 16  # bytes of a bin value shown, in hex
MAX_ITEMS_SHOWN = 4  # items of an array or map shown
_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def quoted(value: Any, limit: int = MAX_QUOTED, ascii_only: bool = False, _depth: int = 0) -> str:
    """``value`` as an error quotes it (see the module's docstring). ``ascii_only``: every character past ASCII
    escaped too, as JSON's ensure_ascii writes it (a refused stream name: `e` + U+0301 must not print as `é`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if value.bit_length() <= 128 else f"<an integer of {value.bit_length()} bits>"
    if isinstance(value, float):
        return ("NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity") \
            if not math.isfinite(value) else repr(float(value))  # (numpy 2's float64 repr is `np.float64(...)`)
    if isinstance(value, str):
        return _quoted_text(value, limit, ascii_only)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        shown = " ".join(f"{b:02x}" for b in data[:MAX_BYTES_SHOWN])
        return f"bin {len(data)} bytes{' ' if data else ''}{shown}{' ...' if len(data) > MAX_BYTES_SHOWN else ''}"
    if isinstance(value, (list, tuple, set, frozenset, dict)):
        if _depth >= 2:
            return "[...]" if not isinstance(value, dict) else "{...}"
        more = ", ..." if len(value) > MAX_ITEMS_SHOWN else ""
        if isinstance(value, dict):
            items = list(value.items())[:MAX_ITEMS_SHOWN]
            return "{" + ", ".join(f"{quoted(k, 32, ascii_only, _depth + 1)}: {quoted(v, 32, ascii_only, _depth + 1)}"
                                   for k, v in items) + more + "}"
        items = sorted(value, key=str)[:MAX_ITEMS_SHOWN] if isinstance(value, (set, frozenset)) \
            else list(value[:MAX_ITEMS_SHOWN])
        return "[" + ", ".join(quoted(item, 32, ascii_only, _depth + 1) for item in items) + more + "]"
    if type(value).__module__ == "numpy" and hasattr(value, "item"):  # a numpy scalar a file's column gave
        return quoted(value.item(), limit, ascii_only, _depth)
    if isinstance(value, PurePath):  # a file names a path as text (a message about it: engine/path_words.py)
        return _quoted_text(str(value), limit, ascii_only)
    if isinstance(value, (datetime.date, datetime.time)):  # as JSON encoders write one: ISO 8601 text
        return _quoted_text(value.isoformat(), limit, ascii_only)
    if isinstance(value, decimal.Decimal):
        return str(value)
    code = getattr(value, "code", None)
    if isinstance(code, int) and isinstance(getattr(value, "data", None), bytes):  # msgpack.ExtType
        return f"ext {code} ({len(value.data)} bytes)"
    if type(value).__name__ == "Timestamp":  # msgpack's own timestamp ext
        return "ext -1 (msgpack's timestamp)"
    return f"<{type(value).__name__}>"


def quoted_list(values: Iterable[Any]) -> str:
    """Every one of ``values`` quoted, as a JSON array (`quoted` of a list shows its first few only)."""
    return "[" + ", ".join(quoted(value) for value in values) + "]"


def quoted_words(values: Iterable[Any], last: str = "and") -> str:
    """Every one of ``values`` quoted, in prose: `"a"`, `"a" and "b"`, `"a", "b" and "c"`; no values: `none`."""
    words = [quoted(value) for value in values]
    if len(words) <= 1:
        return words[0] if words else "none"
    return f"{', '.join(words[:-1])} {last} {words[-1]}"


def quoted_choices(values: Iterable[Any]) -> str:
    """The values a key or option takes, for "must be one of ...": `"a", "b" or "c"`."""
    return quoted_words(values, last="or")


def _quoted_text(text: str, limit: int, ascii_only: bool) -> str:
    cut = len(text) > limit
    body = "".join(_escaped(c, ascii_only) for c in (text[: max(1, limit - 3)] if cut else text))
    return f'"{body}"' + (f"... ({len(text)} characters)" if cut else "")


def _escaped(c: str, ascii_only: bool) -> str:
    if c in _JSON_ESCAPES:
        return _JSON_ESCAPES[c]
    if c == " " or (c.isprintable() and (c.isascii() if ascii_only else
                                         unicodedata.category(c) not in ("Cf", "Zs", "Zl", "Zp"))):
        return c
    code = ord(c)
    if code > 0xFFFF:  # (as JSON writes one: its UTF-16 surrogate pair)
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"
