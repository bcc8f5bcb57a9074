"""How a CSV writes its numbers: a decimal point or a decimal comma, and thousands grouped by commas, dots,
spaces or apostrophes. The patterns that tell them apart, and `decimal_reading`, which reads a file's first
rows to tell which its numbers use (and says so in a note when that was a guess). CSV sniffing
(`sniff_csv`) asks it; planning and replay use the patterns to read and to explain cells.
"""

from __future__ import annotations

import re
from typing import NamedTuple, Sequence

from engine.quoting import quoted

# a cell that is a number, its decimal a point or a comma
NUMBER = re.compile(r"^[+-]?(\d+([.,]\d*)?|\.\d+)([eE][+-]?\d+)?$")
# Numbers as spreadsheets write them: grouping commas (`1,234.5`), or dots grouping and a decimal comma
COMMA_GROUPED = r"^[+-]?\d{1,3}(,\d{3})+(\.\d+)?$"
DOT_GROUPED = re.compile(r"^[+-]?\d{1,3}(\.\d{3})+(,\d+)?$")
# Thousands grouped by a space, a no-break space (French, Excel's) or an apostrophe (Swiss): `1 234,50`, `1'234.50`.
# No grouping mark is then a comma or a dot, so the one after the groups is the decimal, whatever the file's.
GROUP_MARKS = " \u00a0\u202f'\u2019"
SPACE_GROUPED = rf"^[+-]?\d{{1,3}}([{GROUP_MARKS}]\d{{3}})+([.,]\d+)?$"
# A currency sign before or after a number, as Excel's currency format writes it (`61.836,63 €`, `$1,234.50`,
# `-£5`): a unit, read without it and said in a note (as `Price (EUR)` is); the sign kept before it (`\1`)
CURRENCY_SIGNS = "€$£¥₹₽₩₺₿"
CURRENCY_SIGN = rf"^([+-]?)\s*[{CURRENCY_SIGNS}]\s*|\s*[{CURRENCY_SIGNS}]$"
# An ISO 4217 code after a number (`61.836,63 EUR`, `1,234.50 USD`): a unit too, read without it where every cell of
# the column writes the same code (file_scans.currency_codes); never a word for a magnitude (`1,5 MIO`: millions)
NUMBER_WRITTEN = rf"[+-]?\d[\d.,{GROUP_MARKS}]*?"  # a number as any file writes it, grouped or not
CODE_AFTER = re.compile(rf"^({NUMBER_WRITTEN})\s*([A-Z]{{3}})$")
MAGNITUDE_WORDS = frozenset({"MIO", "MLN", "MRD", "BLN", "BIO", "MIL", "THS", "TSD", "PCT", "BPS"})
DECIMAL_COMMA = re.compile(r"^[+-]?(\d+|\d{1,3}(\.\d{3})+),\d+$")
# One group of three digits after a comma or a dot, nothing else (`3,450`, `1.200`): thousands grouped, or a decimal
# of three places. Alone it tells nothing; its column and the file's other numbers do (`decimal_reading`).
ONE_GROUP = re.compile(r"^[+-]?[1-9]\d{0,2}([,.])\d{3}$")
POINT_DECIMAL = re.compile(r"^[+-]?\d*\.\d+$")  # `988.5`, `1.0853`, `0.450` (not one group: ONE_GROUP first)
COMMAS_GROUPING = re.compile(r"^[+-]?\d{1,3}((,\d{3}){2,}(\.\d+)?|(,\d{3})+\.\d+)$")  # `1,234,567`, `1,234.5`
DOTS_GROUPING = re.compile(r"^[+-]?\d{1,3}(\.\d{3}){2,}$")  # `1.234.567`
WHOLE = re.compile(r"^[+-]?\d+$")


class ColumnNumbers(NamedTuple):
    """What one column's cells say of the marks its numbers use: the first cell (or reason) that tells a decimal
    comma, a decimal point, a cell of one group of three digits that reads either way (`3,450`, `1.200`: "" where
    none), the marks that group thousands where no comma or dot does (`61 837,63`), and a time's fraction written
    after a comma or a point (`08:00:01,356`: a clock tells the file's decimal mark, never its grouping)."""

    comma: str = ""
    point: str = ""
    grouped: str = ""
    marks: str = ""
    clock: str = ""

    @property
    def told(self) -> bool | None:
        """Whether its cells tell a decimal comma (True), a point (False), or neither or both (None)."""
        return bool(self.comma) if bool(self.comma) != bool(self.point) else None


# a clock's fraction of a second after a comma or a point (`08:00:01,356`, `31.03.2025 09:00:00.203736`)
CLOCK_FRACTION = re.compile(r"(?:^|[ T])\d{1,2}:\d\d:\d\d([.,])\d+")


def column_numbers(column: Sequence[str], comma_delimited: bool = False) -> ColumnNumbers:
    """What one column's cells (a CSV's first lines) say of its numbers' marks (`ColumnNumbers`). In a
    comma-delimited file (`comma_delimited`) a dot in `1.085` is a decimal point, not a group (a rate's, as such
    files have always been read): only a comma's `"1,234"`, which a cell holds quoted, reads two ways."""
    comma = point = clock = ""
    marks: set[str] = set()
    ones: dict[str, list[str]] = {",": [], ".": []}
    cells = [without_currency(cell) for cell in column]  # `61.836,63 €` tells as `61.836,63` does
    for cell in cells:
        if spaced := re.match(SPACE_GROUPED, cell):
            marks.add(spaced[1][0])
        elif (one := ONE_GROUP.match(cell)) and not (comma_delimited and one[1] == "."):
            ones[one[1]].append(cell)
        elif DECIMAL_COMMA.match(cell) or DOTS_GROUPING.match(cell):
            comma = comma or quoted(cell)
        elif POINT_DECIMAL.match(cell) or COMMAS_GROUPING.match(cell):
            point = point or quoted(cell)
        elif not clock and CLOCK_FRACTION.search(cell):
            clock = cell
    wholes = [c for c in cells if WHOLE.match(c)]
    short = next((c for c in wholes if len(c.lstrip("+-")) <= 3), None)  # under a thousand
    # `988` beside `3,450`s: a price under a thousand, so the comma groups thousands (a point), as `988` beside
    # `1.200`s tells dots grouping; `3000` beside them, a thousand written without grouping: the mark is no group
    whole, grouping = (short, True) if short is not None else (next(iter(wholes), None), False)
    for mark, told_comma in ((",", not grouping), (".", grouping)):
        if whole is not None and ones[mark]:
            told = f"{quoted(whole)} beside {quoted(ones[mark][0])} in one column"
            comma, point = (comma or told, point) if told_comma else (comma, point or told)
    grouped = next(iter(ones[","] + ones["."]), "")
    return ColumnNumbers(comma, point, grouped, "".join(sorted(marks)), clock)


def columns_numbers(rows: Sequence[Sequence[str]], comma_delimited: bool = False) -> tuple[ColumnNumbers, ...]:
    """`column_numbers` of each column of a CSV's first rows (those as wide as the first)."""
    width = len(rows[0]) if rows else 0
    return tuple(column_numbers(column, comma_delimited) for column in zip(*(row for row in rows
                                                                              if len(row) == width)))


def decimal_reading(separator: str, rows: Sequence[Sequence[str]],
                    columns: Sequence[ColumnNumbers] | None = None) -> tuple[bool, str]:
    """Whether a CSV's numbers use a decimal comma, and what a note says of how they were read ("": nothing to say),
    from every column: the first guess, before a column map says which columns hold numbers (then
    connectors/column_decimals.py decides each number column's from those columns, and the times, alone).

    A comma-delimited file's decimal is a point. Otherwise some cells tell: `1,0853`, `0,450`, `42.002,00` and
    `1.234.567` a decimal comma; `988.5`, `1.0853`, `1,234,567` and `1,234.5` a point, and so does a whole number
    (`988`) in a column of `3,450`s (a price below a thousand, written without grouping), as `988` beside `1.200`s
    tells dots grouping. Where no cell tells (every such number one group of three digits), the file's delimiter
    decides (a `;` file is written as Europe writes numbers: a decimal comma, dots grouping), and the note names
    the `decimal` key that says otherwise. `columns`: `columns_numbers(rows)`, when read already."""
    if separator == ",":
        return _quoted_decimal_comma(rows)
    columns = columns_numbers(rows) if columns is None else columns
    comma = [c.comma for c in columns if c.comma]
    point = [c.point for c in columns if c.point]
    grouped = [c.grouped for c in columns if c.grouped]
    if not grouped and (not comma or point):
        return False, ""  # plain decimals, or none: nothing to say
    if comma and not point or point and not comma:
        decimal_comma = bool(comma)
        told = f"as {(comma or point)[0]} shows"
    else:  # no cell tells (or cells tell both): a `;` file writes numbers as Europe does
        decimal_comma = separator == ";" and not point
        told = "no cell tells which" if not point else f"cells tell both ways ({comma[0]}, {point[0]})"
    marks = "".join(c.marks for c in columns)
    return decimal_comma, reading_note(decimal_comma, told, grouped, marks, comma if decimal_comma else point)


def reading_note(decimal_comma: bool, told: str, grouped: Sequence[str], marks: str, telling: Sequence[str]) -> str:
    """The note that says how numbers were read: their decimal mark, the mark grouping thousands, why, how a cell of
    one group reads (`grouped`'s first), and the `decimal` key that reads them the other way."""
    # the grouping mark the cells show: a dot (or a comma), unless only spaces or apostrophes group them (a French
    # file's `61 837,63` was said to have "dots grouping thousands": review259 #8)
    spaced = " and ".join(sorted({MARK_NAMES[mark] for mark in marks}))
    by_separator = bool(grouped) or _grouped_by_separator(list(telling))
    marked = spaced if spaced and not by_separator else "dots" if decimal_comma else "commas"
    said = f"a decimal comma, {marked} grouping thousands" if decimal_comma else \
        f"a decimal point, {marked} grouping thousands"
    other = "point" if decimal_comma else "comma"
    example = next(iter(grouped), None)
    shown = (f": {quoted(example)} is {reading(example, decimal_comma)}, not {reading(example, not decimal_comma)}"
             if example else "")
    return f"numbers read with {said} ({told}){shown}; --columns ...,decimal={other} if its decimal is a {other}"


MARK_NAMES = {" ": "spaces", "\u00a0": "no-break spaces", "\u202f": "narrow no-break spaces", "'": "apostrophes",
              "\u2019": "apostrophes"}


def _grouped_by_separator(told: list[str]) -> bool:
    """Whether any cell that told the decimal is grouped by a dot or a comma (`'42.002,00'`, `'1,234.5'`)."""
    cells = [cell.strip("'") for cell in told]
    return any(DOTS_GROUPING.match(c) or COMMAS_GROUPING.match(c) or DOT_GROUPED.match(c) and "." in c for c in cells)


def _quoted_decimal_comma(rows: Sequence[Sequence[str]]) -> tuple[bool, str]:
    """Whether a comma-delimited file's numbers use a decimal comma: a cell can hold a comma only quoted, so
    `"61837,63"` and `"0,02000"` (no group of three digits) in a column of numbers tell it, when no cell writes a
    decimal point (a text column's `"1,5"`, a trade condition, tells nothing)."""
    width = len(rows[0]) if rows else 0
    columns = zip(*(row for row in rows if len(row) == width))
    cells = [cell for column in columns if all(NUMBER.match(c) for c in column if c) for cell in column]
    told = next((c for c in cells if DECIMAL_COMMA.match(c) and not ONE_GROUP.match(c) and "." not in c), None)
    if told is None or any(POINT_DECIMAL.match(c) or COMMAS_GROUPING.match(c) for c in cells):
        return False, ""
    return True, (f"numbers read with a decimal comma (as the quoted {quoted(told)} shows, in a comma-delimited file); "
                  f"--columns ...,decimal=point if its decimal is a point")


def reading(cell: str, decimal_comma: bool) -> str:
    """A number's text read with a decimal comma (dots grouping) or a decimal point (commas grouping), as text."""
    text = cell.replace(".", "").replace(",", ".") if decimal_comma else cell.replace(",", "")
    return f"{float(text):g}" if abs(float(text)) < 1e15 else text


def without_currency(cell: str) -> str:
    """A cell's text without a currency sign before or after its number (CURRENCY_SIGN), or an ISO code after it."""
    cell = re.sub(CURRENCY_SIGN, r"\1", cell)
    return cell[:-3].rstrip() if code_after(cell) else cell


def code_after(cell: str) -> str | None:
    """The ISO currency code written after a cell's number (`61.836,63 EUR`: EUR), else None."""
    found = CODE_AFTER.match(cell.strip())
    return found[2] if found and found[2] not in MAGNITUDE_WORDS else None
