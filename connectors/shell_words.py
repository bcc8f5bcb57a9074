"""Options a note suggests, written to paste into a shell: a column named `Delivery Start (CET)` quoted, so that
`--columns 'stream=Delivery Start (CET)'` is one word rather than a syntax error (review248 #9)."""

from __future__ import annotations

import shlex


def shell_word(text: str) -> str:
    """`text` as one shell word: as it is when nothing in it needs quoting (`stream=asset_id`), else quoted."""
    return shlex.quote(text)


def columns_option(*keys: str) -> str:
    """The `--columns` option that gives these map keys (`stream=symbol`, `bid=yes_bid`), pasteable."""
    return f"--columns {shell_word(','.join(keys))}"
