"""A map's `keep` filter ({column: [values]}): which rows a replay keeps by what their columns hold, and why a row
left out was (`keep_check`, the words of its `filtered_out` reject). A cell of text (every CSV cell of a keep column)
is compared with the values as text (`keep_key`: a value's end spaces dropped), so TAQ's `00` keeps `00`, not `0`; a
typed cell (a Parquet or JSON number or boolean) has no text written, and is compared by its value (`typed_key`:
`01` keeps 1, `4` keeps 4.0, `true` keeps True). A column's values may instead be tests (`KEEP_TESTS`): `not` (the
values whose rows are left out, every other kept), `contains` and `not_contains` (text a cell must hold, or must
not: TAQ's sale conditions hold one character per condition, `I` an odd lot, review355 #11). Its own module
because the file plan applies it and the notes on a file's contents compare cells with it, while the map only
validates its shape.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable, Mapping, NamedTuple, Sequence

from engine.quoting import quoted

if TYPE_CHECKING:  # polars is imported where an expression is built (a file replay): the
    import polars as pl  # service's config imports this module, and each shard's and CLI start paid it

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


# a keep column's tests, where its values are a mapping: `{Sale Condition: {not_contains: [I]}}`
KEEP_TESTS = ("not", "contains", "not_contains")


class KeepValues(NamedTuple):
    texts: frozenset[str]  # what a text cell must hold (keep_key)
    typed: frozenset[str]  # what a typed cell must hold (typed_key): the values that read as numbers or booleans
    excluded: bool = False  # `not`: the values are those whose rows are left out
    contains: tuple[str, ...] = ()  # text a cell must hold one of (`contains`), as written
    lacks: tuple[str, ...] = ()  # text a cell must hold none of (`not_contains`)


def keep_values(values: Sequence[Any] | Mapping[str, Sequence[Any]]) -> KeepValues:
    """One column's `keep` values (or tests) as its text cells and its typed cells compare with them."""
    tests = values if isinstance(values, Mapping) else {}
    listed = tests.get("not", ()) if tests else values
    typed = (typed_key(v) for v in listed)
    return KeepValues(frozenset(keep_key(v) for v in listed), frozenset(k for k in typed if k is not None),
                      excluded="not" in tests, contains=tuple(str(v) for v in tests.get("contains", ())),
                      lacks=tuple(str(v) for v in tests.get("not_contains", ())))


def _holds(values: KeepValues, cell: Any) -> bool:
    """Whether a cell is kept: it holds one of a column's `keep` values (none of them, under `not`) and passes its
    `contains` tests. A typed one (a Parquet or JSON number or boolean) is compared by its value, any other (text,
    or nothing: "") as text."""
    if isinstance(cell, (bool, int, float)):
        listed = typed_key(cell) in values.typed
    else:
        listed = ("" if cell is None else keep_key(cell)) in values.texts
    if values.contains or values.lacks or values.excluded:
        text = "" if cell is None else str(cell)
        return not listed and (not values.contains or any(t in text for t in values.contains)) and \
            not any(t in text for t in values.lacks)
    return listed


class SharedKeep(NamedTuple):
    """A file read by several entries of a replay list, each keeping other values of one column (a venue's RICs in
    its zone: replay_entries.kept_apart): which of the rows this entry's keep leaves out it counts as left out. A
    row another entry keeps is that entry's to read, no row left out; one no entry keeps is counted by the first
    entry alone, so that the summary counts each row of the file once (it said rows of the others as filtered)."""
    column: int  # where the column the entries keep apart on stands among this entry's keep columns
    own: KeepValues  # the values this entry keeps on it
    others: tuple[KeepValues, ...]  # the values each other entry of the file keeps on it
    first: bool  # the file's first entry: it counts the rows no entry keeps

    def counts(self, cells: Sequence[Any]) -> bool:
        """Whether a row this entry's keep left out (``cells``: its keep columns' cells) is counted by it."""
        cell = cells[self.column]
        return _holds(self.own, cell) or self.first and not any(_holds(other, cell) for other in self.others)


def keep_expr(values: Sequence[Any] | Mapping[str, Sequence[Any]], cell: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """`_holds` as a polars expression over a column of cells of `dtype`."""
    import polars as pl

    wanted = keep_values(values)
    if dtype.is_numeric():
        listed = cell.cast(pl.Float64).is_in([float(k) for k in wanted.typed if k not in ("true", "false")])
    elif dtype == pl.Boolean:
        listed = cell.cast(pl.String).is_in(list(wanted.typed))
    else:
        listed = cell.cast(pl.String).str.strip_chars().is_in(list(wanted.texts))
    listed = pl.when(cell.is_null()).then(pl.lit("" in wanted.texts)).otherwise(listed)
    if not (wanted.contains or wanted.lacks or wanted.excluded):
        return listed
    text = cell.cast(pl.String).fill_null("")
    kept = ~listed
    if wanted.contains:
        kept &= pl.any_horizontal(*(text.str.contains(t, literal=True) for t in wanted.contains))
    for t in wanted.lacks:
        kept &= ~text.str.contains(t, literal=True)
    return kept


def planned_keep(i: int, name: str) -> str:
    """Where a plan's frame holds the i-th column a map keeps on (connectors/row_exprs.py names it so)."""
    return f"_keep{i}"


def source_keep(i: int, name: str) -> str:
    """Where a file's own rows hold the i-th column a map keeps on: under its name."""
    return name


def kept_rows(keep: Mapping[str, Sequence[Any] | Mapping[str, Sequence[Any]]] | None, schema: Mapping[str, Any],
              column: Callable[[int, str], str]) -> pl.Expr:
    """The rows a map's `keep` reads, as a polars expression: each kept column's cells (`column(i, name)`: where
    the i-th kept column is in the frame, its source name or a plan's `_keep{i}`) hold one of its values."""
    import polars as pl

    kept = pl.lit(True)
    for i, (name, values) in enumerate((keep or {}).items()):
        kept = kept & keep_expr(values, pl.col(column(i, name)), schema[column(i, name)])
    return kept


def keep_said(values: Sequence[Any] | Mapping[str, Sequence[Any]]) -> str:
    """A column's keep as a message shows it: `00, 01`; `not "@  I"`; `not containing I, X`."""
    if not isinstance(values, Mapping):
        return ", ".join(_shown(str(v)) for v in values)
    words = {"not": "not", "contains": "containing", "not_contains": "not containing"}
    return "; ".join(f"{words[test]} {', '.join(_shown(str(v)) for v in listed)}" for test, listed in values.items())


def _shown(value: str) -> str:
    """A keep value or cell as a message shows it: quoted when spaces or nothing could hide in it (TAQ's `@  I`)."""
    return quoted(value) if value == "" or " " in value else value


def keep_check(keep: Mapping[str, Sequence[Any]]) -> Callable[[Sequence[Any]], str | None]:
    """For a row's cells of the `keep` columns (in its order): None when the row is kept, else why not. A value ""
    keeps the rows whose cell is empty (a reference column of rows that refer to nothing)."""
    wanted = []
    for column, values in keep.items():
        text = keep_said(values)
        listed = values.get("not", ()) if isinstance(values, Mapping) else values
        trimmed = [v for v in listed if isinstance(v, str) and v != v.strip()]
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
