"""A map's `keep` filter ({column: [values]}): which rows a replay keeps by what their columns hold, and why a row
left out was (`keep_check`, the words of its `filtered_out` reject). A cell of text (every CSV cell of a keep column)
is compared with the values as text (`keep_key`: a value's end spaces dropped), so TAQ's `00` keeps `00`, not `0`; a
typed cell (a Parquet or JSON number or boolean) has no text written, and is compared by its value (`typed_key`:
`01` keeps 1, `4` keeps 4.0, `true` keeps True). Its own module because the file plan applies it and the notes on
a file's contents compare cells with it, while the map only validates its shape.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from engine.quoting import quoted

KEEP_LEAVES_OUT = "which the map's keep leaves out"  # a keep filter's filtered_out (rejected_rows.py's LEFT_OUT_CAUSES)


_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")  # a decimal number as text (no `_`, `nan`, `inf`)


def keep_key(value: Any) -> str:
    """A text cell or a `keep` value as `keep` compares them: its text without spaces at its ends (a value given
    in Python as a number or a boolean: 4.0 as 4, True as true, as a map file writes them)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def typed_key(value: Any) -> str | None:
    """A typed cell (a number or a boolean) or a `keep` value as they compare by value: `01`, 1 and 1.0 as 1, `4.5`
    as 4.5, `True` and True as true; None for a value that is no number nor boolean."""
    if isinstance(value, bool) or isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return str(value).strip().lower()
    text = str(value).strip()
    if isinstance(value, str) and not _NUMBER.fullmatch(text):
        return None
    if re.fullmatch(r"[+-]?\d+", text):  # a whole number as an int: 2**63 as a float would lose its last digits
        return str(int(text))
    number = float(value)
    return str(int(number)) if number.is_integer() else repr(number)


class KeepValues(NamedTuple):
    texts: frozenset[str]  # what a text cell must hold (keep_key)
    typed: frozenset[str]  # what a typed cell must hold (typed_key): the values that read as numbers or booleans


def keep_values(values: Sequence[Any]) -> KeepValues:
    """One column's `keep` values as its text cells and its typed cells compare with them."""
    typed = (typed_key(v) for v in values)
    return KeepValues(frozenset(keep_key(v) for v in values), frozenset(k for k in typed if k is not None))


def _holds(values: KeepValues, cell: Any) -> bool:
    """Whether a cell holds one of a column's `keep` values: a typed one (a Parquet or JSON number or boolean) by
    its value, any other (text, or nothing: "") as text."""
    if isinstance(cell, (bool, int, float)):
        return typed_key(cell) in values.typed
    return ("" if cell is None else keep_key(cell)) in values.texts


def _shown(value: str) -> str:
    """A keep value or cell as a message shows it: quoted when spaces or nothing could hide in it (TAQ's `@  I`)."""
    return quoted(value) if value == "" or " " in value else value


def keep_check(keep: Mapping[str, Sequence[Any]]) -> Callable[[Sequence[Any]], str | None]:
    """For a row's cells of the `keep` columns (in its order): None when the row is kept, else why not. A value ""
    keeps the rows whose cell is empty (a reference column of rows that refer to nothing)."""
    wanted = []
    for column, values in keep.items():
        text = ", ".join(_shown(str(v)) for v in values)
        trimmed = [v for v in values if isinstance(v, str) and v != v.strip()]
        if trimmed:  # as given, and how they compare: a filter written with TAQ's padding must not look unread
            text += f"; compared without spaces at their ends: {', '.join(_shown(keep_key(v)) for v in trimmed)}"
        wanted.append((column, keep_values(values), text))

    def check(cells: Sequence[Any]) -> str | None:
        for (column, values, text), cell in zip(wanted, cells):
            if not _holds(values, cell):
                held = "" if cell is None else keep_key(cell)
                shown = "nothing" if held == "" else _shown(held)
                return f"column {quoted(column)} holds {shown}, {KEEP_LEAVES_OUT} (it keeps {text})"
        return None

    return check
