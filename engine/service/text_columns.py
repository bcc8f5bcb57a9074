"""Table columns of names as a terminal shows them: a stream named `トヨタ自動車` or `三菱ＵＦＪ` takes two cells a
character, so padding it by its count of characters pushed every number after it out of its column (review375 #11).
`display_width` counts cells (East Asian wide and fullwidth characters two, combining marks none), `padded` pads to
a width in cells, and `name_width` sizes a table's name column to its longest name."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable


def display_width(text: str) -> int:
    """The terminal cells ``text`` takes: 2 for a wide or fullwidth character (CJK), 0 for a combining mark or a
    format character (a zero-width joiner), 1 for any other."""
    width = 0
    for char in text:
        if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
            continue
        width += 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1
    return width


def padded(text: str, width: int) -> str:
    """``text`` left-aligned in ``width`` cells (as f"{text:<{width}}" is for ASCII; wider text is left whole)."""
    return text + " " * max(0, width - display_width(text))


def name_width(names: Iterable[str], least: int) -> int:
    """A name column's width in cells: ``least``, or the longest name and a space before the next column."""
    return max([least, *(display_width(name) + 1 for name in names)])
