"""LOBSTER's files by name: a day of a ticker is `TICKER_DATE_START_END_message_N.csv`, its messages (read with
`--preset lobster-messages`), beside `TICKER_DATE_START_END_orderbook_N.csv`, the book after each message (N levels
of ask price, ask size, bid price, bid size; no time of its own: its row k is message k's). Replay reads the
message file; the order book beside it, in a folder, a pattern, a list or a zip archive, is skipped by name with a
note, and given alone it is refused naming its message file (review390 #5: a folder as LOBSTER's archive unpacks
was refused on the order book's four columns, and nothing said to give the message file alone)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from connectors.shell_words import shell_word

ORDERBOOK_NAME = re.compile(r"^(?P<day>.+_\d{4}-\d{2}-\d{2}_\d+_\d+)_orderbook_(?P<levels>\d+)\.csv$", re.I)


def message_file(path: Path) -> Path | None:
    """The message file of a LOBSTER order book by its name (`..._orderbook_1.csv`: `..._message_1.csv` beside it);
    None for any other name."""
    named = ORDERBOOK_NAME.match(path.name)
    return path.with_name(f"{named['day']}_message_{named['levels']}.csv") if named else None


def books_beside_messages(paths: Iterable[Path]) -> list[Path]:
    """The LOBSTER order books among ``paths`` whose message file is among them too."""
    paths = list(paths)
    given = set(paths)
    return [path for path in paths if message_file(path) in given]


def books_skipped(books: list[Path]) -> str:
    """The clause of a note on the order books left out beside their message files."""
    names = ", ".join(book.name for book in books)
    return (f"skipped {names}: LOBSTER's order book beside its message file (the book after each message, no times "
            f"of its own): the message file is read (--preset lobster-messages: its executions as trades), the "
            f"book's quotes are not")


def book_refusal(path: Path) -> str | None:
    """Why a LOBSTER order book given alone is not read, naming the file that is; None for any other name."""
    if (messages := message_file(path)) is None:
        return None
    return (f"{path}: LOBSTER's order book (the book after each message of {messages.name}, no times of its own), "
            f"not a file of ticks: replay reads its message file, {shell_word(str(messages))} --preset "
            f"lobster-messages (its executions as trades; the book's quotes are not read)")
