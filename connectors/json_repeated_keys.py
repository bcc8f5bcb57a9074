"""A key given twice in one JSON object, found in a JSON-lines file or a REST dump's array and refused as
`duplicate_key`: polars' read keeps the first value and Python's json the last, so which was meant cannot be told.

A cheap scan marks the lines that may repeat a key; only those are parsed again in Python to tell
(connectors/json_objects.py reads the files through these).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import polars as pl

from engine.quoting import quoted

DUPLICATE_KEY = "duplicate_key"  # a line with a key twice in one object: the wire's reason for a tick map's


# Every JSON string of a line, a key's with its colon: scanned from the line's start, each match begins at a string's
# opening quote (a quote outside strings opens one), so a key is never read out of a value's text
JSON_STRING = r'"(?:[^"\\]|\\.)*"\s*:?'


def may_repeat_keys(lines: list[bytes]) -> set[int]:
    """The rows whose line may hold a key twice in one object: a key's text twice in the line (at any depth, so a
    message's array of ticks of the same keys is one), or a backslash (a key written escaped, `"\\u0070"` = `"p"`).
    polars' read keeps the first of two values without a word. A Python parse of every line would tell, at about
    three times polars' read (200k Binance trades: 2.1 s against 0.75 s); this scan costs about polars' read (there,
    +0.6 s on a 2.9 s replay), and only its lines are parsed again to tell (`unique_pairs`): none of a flat file's
    clean lines, but each line of a file whose messages hold arrays of ticks (200k OKX messages of 3: +4 s on 16 s),
    a trade-off taken for an exact check."""
    try:
        texts = pl.Series(lines, dtype=pl.Binary).cast(pl.String)
    except pl.exceptions.ComputeError:  # a line not UTF-8: a file polars does not read, each line parsed in Python
        return set(range(len(lines)))
    keys = texts.str.extract_all(JSON_STRING).list.eval(
        pl.element().filter(pl.element().str.ends_with(":")).str.strip_chars_end(": \t\r\n"))
    maybe = (keys.list.n_unique() != keys.list.len()) | texts.str.contains("\\", literal=True)
    return set(maybe.arg_true().to_list())


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict:
    """An object's pairs as a dict (json's `object_pairs_hook`), refusing a key given twice in one object."""
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        keys = [key for key, _ in pairs]
        twice = next(key for key in keys if keys.count(key) > 1)
        raise RepeatedKey(twice, [value for key, value in pairs if key == twice])
    return mapping


def repeats_a_key(line: bytes) -> bool:
    """Whether a line (that polars read) holds a key twice in one object."""
    try:
        json.loads(line, object_pairs_hook=unique_pairs)
    except RepeatedKey:
        return True
    except (ValueError, RecursionError):  # not for polars to have read: the line by line pass says what it is
        return True
    return False


class RepeatedKey(Exception):
    def __init__(self, key: str, values: list[Any]) -> None:
        shown = ", ".join(quoted(value, 34) for value in values[:4])
        super().__init__(f"key {quoted(key, 34)} given more than once in one object ({shown}): which value was meant "
                         f"cannot be told")


def records_with_a_key_twice(data: bytes) -> dict[int, tuple[str, str]]:
    """Record index -> (duplicate_key, why) for each record of a JSON array (one polars read) holding a key twice in
    one object, at any depth. The array is parsed again in Python, record by record, to tell: unlike a line of
    JSON lines, a record repeats its keys in the next (on one line) and may spread one object over several lines
    (pretty-printed), so no cheaper scan tells. A REST dump is a page or a few (1,000 records a page; 200k
    Binance trades, 32 MB: 2.4 s against 1.2 s without it)."""
    text = data.decode("utf-8-sig", errors="replace")
    repeats: list[RepeatedKey] = []

    def pairs(items: list[tuple[str, Any]]) -> dict:
        try:
            return unique_pairs(items)
        except RepeatedKey as e:
            repeats.append(e)
            return {}

    decoder, space = json.JSONDecoder(object_pairs_hook=pairs), json.decoder.WHITESPACE
    bad: dict[int, tuple[str, str]] = {}
    at = space.match(text, text.index("[") + 1).end()
    try:
        for record in itertools.count():
            if text.startswith("]", at):
                break
            _, end = decoder.raw_decode(text, at)
            if repeats:
                shown = quoted(" ".join(text[at : min(end, at + 200)].split()), 60)  # on one line
                line = text.count("\n", 0, at) + 1
                bad[record] = DUPLICATE_KEY, f"{repeats[0]} (the record at line {line}): {shown}"
                repeats.clear()
            at = space.match(text, end).end()
            at = space.match(text, at + 1).end() if text.startswith(",", at) else at
    except (ValueError, RecursionError):  # not for polars to have read: its read stands
        return bad
    return bad
