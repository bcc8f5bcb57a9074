"""A JSON-lines file (or a file of one JSON array of objects) read into a frame of its objects, a row per line or
record: a line that is not a JSON object, or that holds a key twice, is an empty row and a reject by its row.

connectors/json_lines.py turns the frame into the replay's table; the repeated-key checks are
connectors/json_repeated_keys.py.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import polars as pl

from connectors.archives import text_opener, truncation_named
from connectors.json_repeated_keys import (
    DUPLICATE_KEY, RepeatedKey, may_repeat_keys, records_with_a_key_twice, repeats_a_key, unique_pairs,
)
from engine.quoting import quoted

NOT_JSON = "not_json"  # the reject reason of a line that is not a JSON object
RECEIVED = "local_ts"  # the field a line's receive-time prefix is read into (hftbacktest's and Tardis.dev's name)
# A collector's receive time before each message (`1723161256612000000 {...}`, an ISO time, a tab between)
RECEIVE_PREFIX = re.compile(rb"^(\d{10,19}(?:\.\d+)?|\d{4}-\d\d-\d\d[T ][\d:.]+(?:Z|[+-]\d\d:?\d\d)?)[ \t]+(\{.*)$")
# Kraken v1's trade message: [channelID, [[price, volume, time, side, orderType, misc], ...], "trade", pair]
# (Kraken Spot WebSocket v1 docs, channel trade); each trade's fields named as that page names them
KRAKEN_V1_TRADE = ("price", "volume", "time", "side", "orderType", "misc")
# Kraken's REST trades (GET /0/public/Trades): {"error": [], "result": {PAIR: [[price, volume, time, side,
# orderType, misc, trade_id], ...], "last": ...}}: the same arrays, the trade's id after them
KRAKEN_REST_TRADE = (*KRAKEN_V1_TRADE, "trade_id")
KRAKEN_REST_KEYS = {"error", "result"}


# bytes of a (decompressed) JSON-lines file split into lines at a time; gzip drops what the read that finds a cut
# decompressed, so a cut file's last whole line is named to within these bytes
READ_CHUNK = 1 << 16


def read_lines(path: Path) -> list[bytes]:
    """A JSON-lines file's lines (a UTF-8 byte-order mark dropped, a last empty line left out), read a chunk at a
    time: a `.jsonl.gz`'s text is never held whole beside its lines (twice the file's size, at the peak). One cut
    short is named (connectors/archives.py `truncation_named`) with its last line read whole."""
    lines: list[bytes] = []
    with truncation_named(path):  # a cut .jsonl.gz: named, and said to be cut short
        try:
            with text_opener(path)(path, "rb") as f:
                _split_into(f, lines)
        except OSError as e:
            raise ValueError(f"{path}: cannot read it: {e}") from None
    if lines:
        lines[0] = lines[0].removeprefix(b"\xef\xbb\xbf")
    return lines[:-1] if lines and not lines[-1].strip() else lines


def _split_into(f: Any, lines: list[bytes]) -> None:
    """Appends `f`'s lines to `lines` (the last one, unended, too: "" after a final newline). A gzip stream that
    ends early raises EOFError naming the last line read whole, counted from 1 (0: none)."""
    pending: list[bytes] = []  # the unended line's pieces (a REST dump on one line spans many chunks)
    try:
        while chunk := f.read(READ_CHUNK):
            if b"\n" not in chunk:
                pending.append(chunk)
                continue
            parts = chunk.split(b"\n")
            pending.append(parts[0])
            lines.append(b"".join(pending))
            lines.extend(parts[1:-1])
            pending = [parts[-1]]
    except EOFError as e:
        raise EOFError(f"{e}; its last line read whole is line {len(lines):,}") from None
    lines.append(b"".join(pending))


def pretty_documents(lines: list[bytes]) -> list[bytes] | None:
    """A file of JSON objects spread over lines (`curl ... | jq .` saves a REST body so: `{`, `"error": [],`, ...;
    pages of one saved one after another) as one line per object, so that it reads as the same body on one line
    does; None for any other file: one whose first line is a whole JSON value (JSON lines), or whose text is not
    JSON objects and whitespace alone (its lines are read, and rejected, one by one)."""
    first = next((line.strip() for line in lines if line.strip()), b"")
    if first[:1] != b"{" or _is_json(first):
        return None
    try:
        text = b"\n".join(lines).decode()
    except UnicodeDecodeError:
        return None
    decoder, documents, at = json.JSONDecoder(), [], 0
    while (at := _after_space(text, at)) < len(text):
        try:
            value, end = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            return None
        if not isinstance(value, dict):
            return None
        # its own text on one line (a JSON string holds no line break), so a key given twice is still seen
        documents.append(text[at:end].replace("\r", " ").replace("\n", " ").encode())
        at = end
    return documents or None


def _after_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _is_json(text: bytes) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def line_objects(path: Path, lines: list[bytes]) -> tuple[pl.DataFrame, dict[int, tuple[str, str]]]:
    """One row per line: its object's top-level fields; an empty row for a blank line, one that is no object, or
    one with a key twice in an object."""
    data = b"\n".join(lines)
    recheck = may_repeat_keys(lines)
    try:  # most files are clean: polars alone (it skips blank lines, so a height short of the lines is not clean)
        frame = pl.read_ndjson(io.BytesIO(data), infer_schema_length=None)
        if frame.height == len(lines) and not any(repeats_a_key(lines[row]) for row in sorted(recheck)) \
                and not KRAKEN_REST_KEYS <= set(frame.columns):  # (its arrays of trades are lifted below)
            return frame, {}
    except pl.exceptions.PolarsError:
        pass
    fixed, bad = [], {}
    shapes: dict[str, dict[str, int]] = {}  # top-level key -> {object or list: its first line}, for the refusal
    for row, line in enumerate(lines):
        text = line.strip()
        if not text:
            fixed.append(b"{}")
            continue
        shown = quoted(text[:60].decode(errors='replace'))
        try:
            value = json.loads(text, object_pairs_hook=unique_pairs if row in recheck else None)
        except RecursionError:  # a line of 200,000 '[': one bad row, as a line that is not JSON is, not the file's end
            bad[row] = NOT_JSON, f"nested deeper than a tick's object is read ({len(text):,} bytes): {shown}"
            fixed.append(b"{}")
            continue
        except RepeatedKey as e:
            bad[row] = DUPLICATE_KEY, f"{e}: {shown}"
            fixed.append(b"{}")
            continue
        except ValueError as e:
            if (stamped := received_message(text)) is not None:  # `<receive time> <json>`: hftbacktest's captures
                fixed.append(stamped)
                continue
            why = f"not JSON ({e.msg}, column {e.colno})" if isinstance(e, json.JSONDecodeError) else "not UTF-8"
            bad[row] = NOT_JSON, f"{why}: {shown}"
            fixed.append(b"{}")
            continue
        if (trades := kraken_v1_trades(value) or kraken_rest_trades(value)) is not None:
            fixed.append(trades)
            continue
        if not isinstance(value, dict):
            bad[row] = NOT_JSON, f"a JSON {type(value).__name__.replace('dict', 'object')}, not an object: {shown}"
            fixed.append(b"{}")
            continue
        for key, item in value.items():
            if isinstance(item, (dict, list)):
                shapes.setdefault(key, {}).setdefault("an object" if isinstance(item, dict) else "a list", row)
        fixed.append(text)
    try:
        return pl.read_ndjson(io.BytesIO(b"\n".join(fixed)), infer_schema_length=None), bad
    except pl.exceptions.PolarsError:
        mixed = next(((key, found) for key, found in shapes.items() if len(found) > 1), None)
        where = "a field" if mixed is None else f"{quoted(mixed[0])}" + "".join(
            f", {kind} on line {row + 1}" for kind, row in mixed[1].items())
        raise ValueError(f"{path}: its messages are of kinds no one table holds ({where}): a capture of several "
                         f"channels whose messages differ so; replay each channel from a file of its own (grep "
                         f"its channel or topic into one), or see docs/replay.md's vendor table for the "
                         f"captures read together") from None


def one_array(lines: list[bytes]) -> pl.DataFrame | None:
    """A file that is one JSON array of objects (a REST dump, `[{...}, {...}]`, on one line or many) as a row per
    object; None for any other file (also one of a JSON array a line: Kraken v1's messages, each a reject)."""
    start = next((line.lstrip()[:1] for line in lines if line.strip()), b"")
    if start != b"[":
        return None
    try:
        return pl.read_json(io.BytesIO(b"\n".join(lines)), infer_schema_length=None)
    except pl.exceptions.PolarsError:  # not one document, or an array of other values than objects
        return None


def records_read(records: pl.DataFrame, lines: list[bytes]) -> tuple[pl.DataFrame, dict[int, tuple[str, str]]]:
    """A REST dump's records (`one_array`), each record that holds a key twice in one object an empty row and a
    `duplicate_key` reject by its index, as such a line of a JSON-lines file is: polars kept the first value."""
    bad = records_with_a_key_twice(b"\n".join(lines))
    if not bad:
        return records, bad
    kept = ~pl.int_range(pl.len()).is_in(list(bad))
    return records.select(pl.when(kept).then(pl.col(c)).alias(c) for c in records.columns), bad


def received_message(text: bytes) -> bytes | None:
    """A line of a capture that writes its receive time before each message (`<ns> {...}`, hftbacktest's
    format), as that message's object with the time as its `local_ts` field (a number stays a number); None for
    any other line."""
    found = RECEIVE_PREFIX.match(text)
    if found is None:
        return None
    try:
        value = json.loads(found[2])
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or RECEIVED in value:
        return None
    stamp = found[1].decode()
    return json.dumps({RECEIVED: int(stamp) if stamp.isdigit() else stamp, **value}).encode()


def kraken_v1_trades(value: Any) -> bytes | None:
    """A Kraken v1 trade message (an array: `[337, [["61800.0", "0.1", "1723161255.342", "b", "m", ""]], "trade",
    "XBT/USD"]`) as an object holding its trades under `data` (`{"channel": "trade", "pair": "XBT/USD",
    "data": [{"price": ..., "volume": ..., ...}]}`), read as other venues' arrays are; None for anything else."""
    if not (isinstance(value, list) and len(value) == 4 and isinstance(value[0], int) and value[2] == "trade"
            and isinstance(value[3], str) and isinstance(value[1], list) and value[1]
            and all(isinstance(t, list) and len(t) >= len(KRAKEN_V1_TRADE) for t in value[1])):
        return None
    trades = [dict(zip(KRAKEN_V1_TRADE, (str(v) for v in t))) for t in value[1]]
    return json.dumps({"channelID": value[0], "channel": "trade", "pair": value[3], "data": trades}).encode()


def _kraken_trade(row: Any) -> bool:
    """Whether a value is one trade of Kraken's arrays: price, volume, time, side b/s, orderType m/l, misc (id)."""
    return isinstance(row, list) and len(row) in (len(KRAKEN_V1_TRADE), len(KRAKEN_REST_TRADE)) \
        and row[3] in ("b", "s") and row[4] in ("m", "l")


def kraken_rest_trades(value: Any) -> bytes | None:
    """A Kraken REST trades response (`{"error": [], "result": {"XXBTZUSD": [["60000.1", "0.01", 1717405200.1234,
    "b", "l", "", 1]], "last": "..."}}`) as a message holding its trades under `data`, each naming its `pair`, read
    as the websocket's v1 arrays are (`kraken_v1_trades`); None for anything else: an error, an empty result (its
    own refusal: a failed download), OHLC or spread arrays (no side b/s, no order type m/l)."""
    if not (isinstance(value, dict) and value.keys() == KRAKEN_REST_KEYS and value["error"] == []
            and isinstance(value["result"], dict)):
        return None
    pairs = {pair: rows for pair, rows in value["result"].items() if pair != "last"}
    if not pairs or not all(isinstance(rows, list) and rows and all(map(_kraken_trade, rows))
                            for rows in pairs.values()):
        return None
    trades = [{"pair": pair, **dict(zip(KRAKEN_REST_TRADE, (str(v) for v in row)))}
              for pair, rows in pairs.items() for row in rows]
    return json.dumps({"channel": "trade", "last": str(value["result"].get("last")), "data": trades}).encode()

