"""Which decimal mark each number column of a CSV is read with, once its column map names them (`mapped_decimals`).

A column's own cells decide (`212,35`, `0,450`: a decimal comma; `10.45`, `1,234.5`: a point; `988` beside `1.200`s:
dots grouping), else the map's other number columns' cells, else a fraction in its time (`08:00:01,356`: a comma).
A column the map does not read tells nothing: a German Eurex export's contract month `06.2025` made every FDAX price
`22.962` read as 22.962, not 22962 (review373 #1). A column of cells that read two ways (`10.450`: 10.45 or 10450)
with nothing telling which (not even its name: `Kurs`, `Prezzo` and B3's `PrecoNegocio` are written with a
decimal comma) is refused before any row is read, naming the cell and the `decimal` key (review373 #7):
a guess would read it 1000 times off, silently, one way or the other.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import NamedTuple, Sequence

from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.map_vocabulary import NUMERIC_FIELDS
from connectors.number_separators import ColumnNumbers, reading, reading_note
from engine.quoting import quoted

DECIMAL_DOCS = "docs/replay.md#column-maps"
# Number columns' names in the languages whose exports write a decimal comma (German, French, Italian, Spanish,
# Portuguese: connectors/field_names.py's European names, B3's): the last thing that tells, after every cell
COMMA_LANGUAGE_NAMES = frozenset({
    "kurs", "preis", "prix", "prezzo", "precio", "cours", "preco", "preço", "preconegocio", "menge", "stück",
    "stueck", "quantité", "quantite", "quantità", "quantita", "cantidad", "anzahl", "quantidade",
    "quantidadenegociada", "geld", "geldkurs", "brief", "briefkurs", "geldvolumen", "briefvolumen", "geldmenge",
    "briefmenge", "achat", "vente", "denaro", "lettera", "compra", "venta", "precio_compra", "precio_venta",
    "preço_compra", "preço_venda", "preco_compra", "preco_venda", "prezzo_denaro", "prezzo_lettera"})


class Decided(NamedTuple):
    """One number column's decimal mark (a comma: True) and what told it, for the note."""

    comma: bool
    told: str


def mapped_decimals(path: Path, cmap: ColumnMap, dialect: Dialect | None,
                    names: Sequence[str]) -> tuple[Dialect | None, list[str]]:
    """The dialect with the decimal mark of each of the map's number columns (`Dialect.column_decimals`), and the
    note that says how they were read; a ValueError naming the cell, and the key that says it, where a column's
    cells read two ways and no price, size or time of the file tells which. `names`: the file's columns in order.
    A dialect whose decimal was given, or sniffed per column of no such file (a comma-delimited one), is kept."""
    if dialect is None or not dialect.columns or len(dialect.columns) != len(names):
        return dialect, [f"{path.name}: {dialect.numbers}"] if dialect is not None and dialect.numbers else []
    position = {name: i for i, name in enumerate(names)}
    numbers = list(dict.fromkeys(c for f in NUMERIC_FIELDS if (c := getattr(cmap, f)) is not None and c in position))
    seen = {column: dialect.columns[position[column]] for column in numbers}
    clock = next((found.clock for c in cmap.ts_columns if c in position and (found := dialect.columns[position[c]])
                  .clock), "")
    decided: dict[str, Decided] = {}
    for column, found in seen.items():
        if (told := _decided(column, found, seen, clock)) is not None:
            decided[column] = told
        elif found.grouped:
            raise ValueError(_refusal(path, column, found.grouped))
    if not decided:
        return replace(dialect, numbers=""), []
    main = decided.get(cmap.price) or next(iter(decided.values()))
    dialect = replace(dialect, decimal_comma=main.comma, numbers="",
                      column_decimals=tuple((column, told.comma) for column, told in decided.items()))
    return dialect, _notes(path, decided, seen)


def _decided(column: str, found: ColumnNumbers, seen: dict[str, ColumnNumbers], clock: str) -> Decided | None:
    """A number column's decimal mark: its cells', the other number columns' where its own do not tell, else its
    time's fraction; None where nothing tells and none of its cells reads two ways (or one does: refused)."""
    if found.told is not None:
        return Decided(found.told, f"as {found.comma or found.point} shows")
    if found.comma and found.point:  # cells tell both ways: a point, the comma's cells rejected naming the key
        return Decided(False, f"cells tell both ways ({found.comma}, {found.point})")
    others = {other: numbers for other, numbers in seen.items() if other != column and numbers.told is not None}
    if len({numbers.told for numbers in others.values()}) == 1:
        other, numbers = next(iter(others.items()))
        return Decided(bool(numbers.told), f"as column {quoted(other)}'s {numbers.comma or numbers.point} shows")
    if clock:
        mark = "," if "," in clock.rsplit(":", 1)[-1] else "."
        return Decided(mark == ",", f"as the time {quoted(clock)} shows")
    if named := next((name for name in seen if normal_name(name) in COMMA_LANGUAGE_NAMES), None):
        return Decided(True, f"as the column name {quoted(named)}, in a language written with a decimal comma, shows")
    return None


def _refusal(path: Path, column: str, cell: str) -> str:
    """Why a column whose numbers read two ways is not read: the cell, its two readings, and the key for each."""
    return (f"{path}: column {quoted(column)}'s {quoted(cell)} reads two ways, {reading(cell, False)} with a decimal "
            f"point or {reading(cell, True)} with a decimal comma, and no cell of the file's prices, sizes or times "
            f"tells which (a decimal such as \"10.45\", a grouped \"1.234.567\", a time's \"09:00:00,331\"): say "
            f"which with --columns ...,decimal=point (commas grouping thousands) or --columns ...,decimal=comma "
            f"(dots grouping them), or `decimal:` in a YAML map ({DECIMAL_DOCS})")


def _notes(path: Path, decided: dict[str, Decided], seen: dict[str, ColumnNumbers]) -> list[str]:
    """The note on how the number columns were read: one for them all where they read alike, else one a column;
    none where every cell is a plain decimal with a point (nothing read two ways, nothing European)."""
    def note(columns: list[str]) -> str:
        told = decided[columns[0]]
        grouped = [seen[c].grouped for c in columns if seen[c].grouped]
        telling = [seen[c].comma if told.comma else seen[c].point for c in columns]
        return reading_note(told.comma, told.told, grouped, "".join(seen[c].marks for c in columns),
                            [t for t in telling if t])
    said = [c for c in decided if decided[c].comma or seen[c].grouped]
    if not said:
        return []
    if len({decided[c].comma for c in decided}) == 1:
        return [f"{path.name}: {note(list(decided))}"]
    return [f"{path.name}: column {quoted(c)}: {note([c])}" for c in decided]
