"""A map's `keep` filter ({column: [values]}): which rows a replay keeps by what their columns hold, compared as
text (`keep_key`: 4.0 as 4, True as true, a value's end spaces dropped), and why a row left out was (`keep_check`,
the words of its `filtered_out` reject). Its own module because the file plan applies it and the notes on a
file's contents compare cells with it, while the map only validates its shape.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

KEEP_LEAVES_OUT = "which the map's keep leaves out"  # a keep filter's filtered_out (rejected_rows.py's LEFT_OUT_CAUSES)


def keep_key(value: Any) -> str:
    """A cell or a `keep` value as `keep` compares them: text, with 4.0 as 4 and True as true."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _shown(value: str) -> str:
    """A keep value or cell as a message shows it: quoted when spaces or nothing could hide in it (TAQ's `@  I`)."""
    return repr(value) if value == "" or " " in value else value


def keep_check(keep: Mapping[str, Sequence[Any]]) -> Callable[[Sequence[Any]], str | None]:
    """For a row's cells of the `keep` columns (in its order): None when the row is kept, else why not. A value ""
    keeps the rows whose cell is empty (a reference column of rows that refer to nothing)."""
    wanted = []
    for column, values in keep.items():
        text = ", ".join(_shown(str(v)) for v in values)
        trimmed = [v for v in values if isinstance(v, str) and v != v.strip()]
        if trimmed:  # as given, and how they compare: a filter written with TAQ's padding must not look unread
            text += f"; compared without spaces at their ends: {', '.join(_shown(keep_key(v)) for v in trimmed)}"
        wanted.append((column, {keep_key(v) for v in values}, text))

    def check(cells: Sequence[Any]) -> str | None:
        for (column, values, text), cell in zip(wanted, cells):
            held = "" if cell is None else keep_key(cell)
            if held not in values:
                shown = "nothing" if held == "" else _shown(held)
                return f"column {column!r} holds {shown}, {KEEP_LEAVES_OUT} (it keeps {text})"
        return None

    return check
