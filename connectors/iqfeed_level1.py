"""DTN IQFeed's live Level 1 messages saved as a file (a capture of its port 5009 in protocol 6.x), read as ticks.

The capture holds `Q,` updates and `P,` summaries of a symbol's whole Level 1 state, their fields those the
`S,CURRENT UPDATE FIELDNAMES` line names (or `S,SELECT UPDATE FIELDS` chose; without either, IQFeed's default set:
`DEFAULT_FIELDS`), among the feed's `S,`, `T,` (time stamp), `F,` (fundamental), `n,` (symbol not found) and `E,`
(error) lines. Each message is a snapshot, not a tick, so the ticks are what changed between a symbol's snapshots:

- a quote where a `Q,` line changes the bid, the ask or their sizes;
- a trade where a `Q,` line says a new trade printed: its Message Contents holds `C` (last qualified), `E`
  (extended) or `O` (other trade) where the field list has it and the line fills it, else its Most Recent Trade
  fields (time, price, size, total volume) differ from the symbol's last ones. IQFeed repeats the last trade's
  fields beside every quote change: those are not replayed again;
- a `P,` summary sets the symbol's state and makes no tick (nor does an update that changes neither).

Times (`HH:MM:SS.ffffff`, US Eastern, no date): a trade's is its Most Recent Trade Time; a quote's the later of its
Bid Time and Ask Time where the field list has them, else the trade's beside it, else the latest time the capture
has shown (its `T,` stamps, the times of the lines before). They are read as microseconds after midnight of the day
the file's name holds, or `--columns date=YYYY-MM-DD` gives; past midnight they count on into the next day
(`_onward`).

`level1_table` makes the frame connectors/json_lines.py writes as the replay's Parquet copy: a row per line (so a
row names its line), a tick row where the line makes one (a quote and a trade in one row replay as the quote, then
the trade), an empty row otherwise: counted as filtered_out when it is an update or summary, a reject when it is a
line that cannot be read (its fields not the field list's, a number or time that is none).
"""

from __future__ import annotations

import functools
import gzip
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from connectors.column_map import ColumnMap

# the names a capture is saved under: text (connectors/file_suffixes.py's CSV ones, not imported: that module
# imports connectors/json_lines.py, which imports this one) or a log, gzipped or not
CAPTURE_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".tsv.gz", ".txt", ".txt.gz", ".log", ".log.gz")
HEAD_BYTES = 1 << 16  # of the file's text: its first messages lie in them
FIELD_LINES = ("S,CURRENT UPDATE FIELDNAMES,", "S,SELECT UPDATE FIELDS,")
# IQFeed's update fields when no `S,SELECT UPDATE FIELDS` chose others (protocol 6's default field set)
DEFAULT_FIELDS = ("Symbol", "Most Recent Trade", "Most Recent Trade Size", "Most Recent Trade Time",
                  "Most Recent Trade Market Center", "Total Volume", "Bid", "Bid Size", "Ask", "Ask Size", "Open",
                  "High", "Low", "Close", "Message Contents", "Most Recent Trade Conditions")
TRADE_FLAGS = frozenset("CEO")  # Message Contents: last qualified, extended and other trade
ZONE = "America/New_York"  # IQFeed's clock
DAY = 86_400 * 10**6  # in microseconds
# the first fields of the feed's messages: a Level 1 update or summary, a system message, a time stamp, a
# fundamental message, a symbol not found, an error
_MESSAGE = re.compile(r"^(?:[QP],[^,\s]+,|S,[A-Z ]+(,|$)|T,\d{8} \d\d:\d\d:\d\d|F,[^,\s]+,|n,[^,\s]+|E,)")
_UPDATE = re.compile(r"^[QP],[^,\s]+,")
_CLOCK = re.compile(r"^(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?$")
_STAMP = re.compile(r"^T,\d{8} (\d\d:\d\d:\d\d)")
# the frame's columns, each tick field's (the map below reads them) and what the line said beside
COLUMNS = {"symbol": pl.String, "time": pl.Int64, "price": pl.Float64, "size": pl.Float64, "bid": pl.Float64,
           "bid_size": pl.Float64, "ask": pl.Float64, "ask_size": pl.Float64, "market_center": pl.String,
           "conditions": pl.String, "message_contents": pl.String}
LEVEL1_MAP = ColumnMap(ts="time", ts_unit="us_after_midnight", date="file_name", tz=ZONE, stream_col="symbol",
                       price="price", size="size", bid="bid", ask="ask", bid_size="bid_size", ask_size="ask_size")


def undated_refusal(path: Path) -> str:
    """Why a capture whose day neither its name (nor a folder above it) holds nor a key gives is not read, and how
    to give it (connectors/file_layout.py says it where the map's `date` finds none)."""
    return (f"{path}: DTN IQFeed live Level 1 messages: their times (Most Recent Trade Time, Bid Time, Ask Time) "
            f"are times of day in US Eastern without a date, and neither the file's name nor a folder above it "
            f"holds one (YYYY-MM-DD): give the day with --columns date=YYYY-MM-DD (or --date YYYY-MM-DD), or name "
            f"the file with its date (ESZ26_2026-11-30.txt)")


def is_level1_capture(path: Path) -> bool:
    """A text file (`CAPTURE_SUFFIXES`) whose first lines are all IQFeed's messages, with an
    update, a summary or a field list among them; cached by size and modification time."""
    name = path.name.lower()
    if not name.endswith(CAPTURE_SUFFIXES) or not path.is_file():
        return False
    stat = path.stat()
    return _sniffed(str(path), stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _sniffed(path: str, size: int, mtime_ns: int) -> bool:
    try:
        with (gzip.open if path.lower().endswith(".gz") else open)(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except (OSError, EOFError, zlib.error):
        return False  # (the read itself says what is wrong with the file)
    text = head.decode("utf-8", "replace").splitlines()
    text = text[:-1] if len(head) == HEAD_BYTES else text  # (a line cut by the read is no message's shape)
    lines = [line.strip() for line in text if line.strip()][:200]
    if not lines or not all(_MESSAGE.match(line) for line in lines):
        return False
    return any(_UPDATE.match(line) or line.startswith(FIELD_LINES) for line in lines)


@dataclass
class Level1Table:
    frame: pl.DataFrame  # a row per line
    bad: dict[int, tuple[str, str]]  # row -> (reason, why): a line that cannot be read
    tickless: dict[int, str]  # row -> what it is: an update or summary that makes no tick
    notes: list[str]


@dataclass
class _State:
    quote: tuple | None = None  # (bid, bid size, ask, ask size)
    trade: tuple | None = None  # (time, price, size, total volume)


def _onward(time: int | None, latest: int) -> int | None:
    """A time of day on the capture's clock: moved on by whole days while it lies over half a day before the latest
    time shown (a capture running past midnight, as a futures session from 18:00 ET does, counts on from its first
    day: 00:00:01 after 23:59:59 is the next day's, read as 24:00:01)."""
    while time is not None and time < latest - DAY // 2:
        time += DAY
    return time


def _microseconds(text: str) -> int | None:
    """`HH:MM:SS.ffffff` as microseconds after midnight; None for an empty field; ValueError for another shape."""
    if not text:
        return None
    found = _CLOCK.match(text)
    if found is None:
        raise ValueError(f"time {text!r} is not HH:MM:SS.ffffff")
    hours, minutes, seconds, fraction = found.groups()
    return ((int(hours) * 60 + int(minutes)) * 60 + int(seconds)) * 10**6 + int((fraction or "0").ljust(6, "0"))


def _number(text: str, name: str) -> float | None:
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name} {text!r} is not a number") from None


def level1_table(lines: list[str]) -> Level1Table:
    """The capture's lines (without their ends) as a row each: see the module's docstring."""
    fields, given = DEFAULT_FIELDS, False
    states: dict[str, _State] = {}
    rows: list[dict | None] = []
    bad: dict[int, tuple[str, str]] = {}
    tickless: dict[int, str] = {}
    latest = 0  # the latest time the capture has shown, in microseconds after midnight
    made = {"quotes": 0, "trades": 0}
    for index, raw in enumerate(lines):
        line = raw.strip()
        rows.append(None)
        if line.startswith(FIELD_LINES):  # the fields of the updates after it
            fields, given = tuple(f for f in line.split(",")[2:] if f), True
            continue
        if (stamp := _STAMP.match(line)) is not None:  # the feed's clock, once a second
            latest = max(latest, _onward(_microseconds(stamp[1]), latest))
            continue
        if not _UPDATE.match(line):  # S, F, n and E lines: the feed's own messages, no tick
            continue
        values = line.split(",")[1:]
        if len(values) > 1 and values[-1] == "" and len(values) != len(fields):  # the comma IQFeed ends each
            values = values[:-1]  # message with (a field list's last field may be empty too: then it is kept)
        if len(values) != len(fields):
            bad[index] = ("missing_field", f"a `{line[0]},` line of {len(values)} fields, where its field list "
                                           f"names {len(fields)} ({'given' if given else 'IQFeed default'})")
            continue
        cells = dict(zip(fields, values))
        try:
            row, latest = _row(line[0], cells, states, latest)
        except ValueError as e:
            bad[index] = ("wrong_type", f"a `{line[0]},` line whose {e}")
            continue
        if row is None:
            tickless[index] = "an IQFeed summary (`P,`): it sets the symbol's state, no tick" if line[0] == "P" \
                else "an IQFeed update that changes neither the quote nor the last trade"
            continue
        made["quotes"] += row["bid"] is not None
        made["trades"] += row["price"] is not None
        rows[index] = row
    # built by column: a capture holds millions of lines, and polars reads lists faster than a row of dicts each
    frame = pl.DataFrame({name: [row[name] if row else None for row in rows] for name in COLUMNS}, schema=COLUMNS)
    which = "its field list" if given else "IQFeed's default fields (no `S,CURRENT UPDATE FIELDNAMES` line)"
    notes = [f"read as DTN IQFeed live Level 1 messages by {which}: {made['quotes']} quote(s) where a `Q,` update "
             f"changed the bid or ask, {made['trades']} trade(s) where one printed a new trade (the last trade "
             f"repeated beside a quote is not replayed again), times of day in US Eastern ({ZONE})"]
    return Level1Table(frame, bad, tickless, notes)


def _row(message: str, cells: dict[str, str], states: dict[str, _State], latest: int) -> tuple[dict | None, int]:
    """The tick row a `Q,`/`P,` line makes (None: none) and the latest time shown after it."""
    symbol = cells.get("Symbol", "")
    if not symbol:
        raise ValueError("Symbol is empty")
    trade_time = _onward(_microseconds(cells.get("Most Recent Trade Time", "")), latest)
    trade = (trade_time, _number(cells.get("Most Recent Trade", ""), "Most Recent Trade"),
             _number(cells.get("Most Recent Trade Size", ""), "Most Recent Trade Size"),
             _number(cells.get("Total Volume", ""), "Total Volume"))
    quote = (_number(cells.get("Bid", ""), "Bid"), _number(cells.get("Bid Size", ""), "Bid Size"),
             _number(cells.get("Ask", ""), "Ask"), _number(cells.get("Ask Size", ""), "Ask Size"))
    quote_times = [_onward(t, latest) for t in (_microseconds(cells.get("Bid Time", "")),
                                                _microseconds(cells.get("Ask Time", ""))) if t is not None]
    state = states.setdefault(symbol, _State())
    contents = cells.get("Message Contents", "")
    if message == "P":
        new_trade, new_quote = False, False
    else:
        new_quote = quote != state.quote and quote[0] is not None and quote[2] is not None
        if contents:  # the feed says what the update holds
            new_trade = bool(TRADE_FLAGS & set(contents))
        else:
            new_trade = trade != state.trade
        new_trade = new_trade and trade[0] is not None and trade[1] is not None
    state.quote, state.trade = quote, trade
    shown = [t for t in (trade_time, *quote_times) if t is not None]
    if not (new_trade or new_quote):
        return None, max([latest, *shown])
    if new_trade:
        time = trade_time
    else:
        time = max(quote_times) if quote_times else max(latest, trade_time or 0)
    row = {"symbol": symbol, "time": time, "price": None, "size": None, "bid": None, "bid_size": None,
           "ask": None, "ask_size": None, "market_center": cells.get("Most Recent Trade Market Center") or None,
           "conditions": cells.get("Most Recent Trade Conditions") or None, "message_contents": contents or None}
    if new_trade:
        row |= {"price": trade[1], "size": trade[2]}
    if new_quote:
        row |= {"bid": quote[0], "bid_size": quote[1], "ask": quote[2], "ask_size": quote[3]}
    return row, max([latest, *shown])
