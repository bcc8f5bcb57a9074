"""The columns a column map names, checked against a file's: the ones it lacks said with the option that names
each (`--columns ts=time`, `--sequence tid`, a preset's key) and the file's columns; keys spelled in another case
than the file's (`TS` for `ts`) read as the file spells them; a price or size column that holds no numbers; a
column a full map leaves out that detection would read as a tick field. connectors/file_layout.py checks a
layout with them before its rows are read."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

import polars as pl

from connectors.column_map import ColumnMap
from connectors.layout import detect_columns
from connectors.map_vocabulary import VALUE_FIELDS, joined_columns
from engine.quoting import quoted, quoted_words


COLUMNS_LISTED = 20  # of a file's columns an error lists at most (a 5,000-column export's would fill a screen)


# a map's keys that name a column
COLUMN_KEYS = ("ts", "stream_col", *VALUE_FIELDS, "sequence", "utc_offset", "trade_date")


def columns_lacking(path: Path, keys: Mapping[str, Any], schema: Mapping[str, Any]) -> str | None:
    """What a map (`keys`: its `to_dict`, or the keys given to refine a detected one) needs that the file lacks: each
    column missing, the option that names it (`--columns ts=time`, `--sequence tid`, a preset's key) and the file's
    columns, at most COLUMNS_LISTED of them; None when it has them all."""
    named = _named_columns(keys)
    missing = list(dict.fromkeys(c for _, _, columns in named for c in columns if c not in schema))
    if not missing:
        return None
    given = [(key, value) for key, value, columns in named if set(columns) & set(missing)]
    if keys.get("preset"):
        option = f"--preset {keys['preset']}: " + ", ".join(f"{key}={value}" for key, value in given)
    elif [key for key, _ in given] == ["sequence"]:
        option = f"--sequence {given[0][1]}"
    else:  # as --columns spells them: `stream=` names the stream column
        option = "--columns " + ",".join(f"{'stream' if key == 'stream_col' else key}={value}" for key, value in given)
    more = f" and {len(schema) - COLUMNS_LISTED:,} more" if len(schema) > COLUMNS_LISTED else ""
    return (f"{path}: the column map needs {quoted_words(missing)}, which the file lacks ({option}); columns found: "
            f"{', '.join(map(quoted, list(schema)[:COLUMNS_LISTED]))}{more}")


def _named_columns(keys: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(key, its value, the columns it names) for each key of a map that names columns (`ts=Date+Time`: two)."""
    named = [(key, value, list(joined_columns(value)) if key in ("ts", "stream_col", "sequence") else [value])
             for key, value in keys.items() if key in COLUMN_KEYS and isinstance(value, str)]
    return named + [("keep", f"{{{column}: ...}}", [column]) for column in keys.get("keep") or ()]


def spelled_as_the_file(keys: Mapping[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Keys given to refine a detected map with each column the file lacks but spells in one other case (`TS` for
    `ts`) as the file does, as `match_case` takes a whole map's."""
    spellings: dict[str, list[str]] = {}
    for name in schema:
        spellings.setdefault(name.strip().lower(), []).append(name)

    def spelled(column: str) -> str:
        found = spellings.get(column.strip().lower(), [])
        return found[0] if column not in schema and len(found) == 1 else column
    return {**keys, **{key: "+".join(map(spelled, columns)) if len(columns) > 1 else spelled(columns[0])
                       for key, _, columns in _named_columns(keys) if key != "keep"}}


def numbers_not_nested(path: Path, cmap: ColumnMap, schema: Mapping[str, Any]) -> None:
    """A price or size column that holds structs, lists or bytes (a nested Parquet field mapped by name) is said
    with the file, the column and its type, before a later step fails on it with polars' own words ("`max`
    operation not supported for dtype `struct[2]`": no file, no column)."""
    for field in ("price", "size", "bid", "ask", "bid_size", "ask_size"):
        column = getattr(cmap, field, None)
        dtype = schema.get(column) if isinstance(column, str) else None
        if dtype is not None and (dtype.is_nested() or dtype == pl.Binary or dtype == pl.Object):
            raise ValueError(f"{path}: column {quoted(column)} (read as {field}) holds {dtype}, not numbers: map "
                             f"{field} to a column of numbers (or of numbers as text), e.g. --columns {field}=COLUMN")


def unnamed_fields(path: Path, cmap: ColumnMap, schema: Mapping[str, Any],
                    first: Callable[[str | tuple[str, ...]], Any]) -> list[str]:
    """A column map given in full is read as given; a column it leaves out that detection would have read as a
    tick field (`qty` beside `--columns ts=time,price=px`) is named in a note, so sizes or sides are not dropped
    without a word."""
    try:
        detected = detect_columns(path, schema, first)
    except ValueError:  # a time or price column detection does not know (Capital IQ's `Pricing Date`,
        # `Share Price`): the map's, so its `Volume` is still named (review291 #6)
        try:
            named = {key: getattr(cmap, key) for key in ("ts", *VALUE_FIELDS) if getattr(cmap, key) is not None}
            detected = detect_columns(path, schema, first, hints=named)
        except ValueError:  # nothing detectable: nothing to say
            return []
    used = set(cmap.source_columns())
    missed = {key: getattr(detected, key) for key in VALUE_FIELDS
              if getattr(cmap, key) is None and getattr(detected, key) not in (None, *used)}
    if not missed:
        return []
    said = "; ".join(f"{quoted(column)} looks like {key}" for key, column in missed.items())
    key, column = next(iter(missed.items()))
    return [f"{path.name}: the column map reads only the columns it names; {said}, not read (name it in the map "
            f"to read it, e.g. --columns ...,{key}={column})"]


def repeated_columns(path: Path, cmap: ColumnMap, schema: Mapping[str, Any]) -> None:
    """A header that repeats a column the map reads (`Dates,PX_LAST,PX_VOLUME,PX_LAST,PX_VOLUME`: Bloomberg BDH's
    securities side by side, which polars reads as PX_LAST and PX_LAST_duplicated_0) is refused: only the first
    security's columns would be read, as the file's one stream (review291 #8)."""
    read = set(cmap.source_columns())
    if repeated := sorted({n.rsplit("_duplicated_", 1)[0] for n in schema if "_duplicated_" in n} & read):
        raise ValueError(f"{path}: its header repeats {', '.join(map(quoted, repeated))}: a sheet of several "
                         f"securities side by side (Bloomberg BDH's wide layout), of which only the first one's "
                         f"columns would be read: save one security per file (its dates and fields alone), or one "
                         f"long table with a ticker column, first (docs/replay.md)")
