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
- a `P,` summary sets the symbol's state and makes no tick (nor does an update that changes neither);
- so does a symbol's first sight, a `Q,` with no `P,` before it (its last trade printed before the capture began),
  unless its Message Contents says what happened then: C/E/O a trade, b/a a quote change.

Times (`HH:MM:SS.ffffff`, US Eastern, no date): a trade's is its Most Recent Trade Time; a quote's the later of its
Bid Time and Ask Time where the field list has them, else the trade's beside it, else the latest time the capture
has shown (its `T,` stamps, the times of the lines before). They are read as microseconds after midnight of the day
the file's name holds, else its first `T,YYYYMMDD` line's (the name's wins where they disagree, said in a note:
connectors/file_layout.py), or `--columns date=YYYY-MM-DD` gives; past midnight they count on into the next day
(`_onward`).

`level1_table` makes the frame connectors/json_lines.py writes as the replay's Parquet copy: a row per line (so a
row names its line), a tick row where the line makes one (a quote and a trade in one row replay as the quote, then
the trade), an empty row otherwise: counted as filtered_out when it is an update or summary, a reject when it is a
line that cannot be read (its fields not the field list's, a number or time that is none).
"""

from __future__ import annotations

import datetime as dt
import functools
import gc
import gzip
import operator
import re
import zlib
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from connectors.column_map import ColumnMap
from engine.quoting import quoted

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
            f"are times of day in US Eastern, and nothing gives their date: no `T,YYYYMMDD HH:MM:SS` time stamp line "
            f"(the feed sends one a second), no Most Recent Trade Date field in its field list (or none filled), and "
            f"no date (YYYY-MM-DD) in the file's name or a folder above it: give the day with --columns "
            f"date=YYYY-MM-DD (or --date YYYY-MM-DD), or name the file with its date (ESZ26_2026-11-30.txt)")


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
    stamp_day: str | None = None  # the capture's first day by its `T,` lines (YYYY-MM-DD), None without one
    field_day: str | None = None  # its first day by its lines' Most Recent Trade Date, None without one


@dataclass
class _State:
    quote_text: tuple  # (bid, bid size, ask, ask size) as written: the same text is the same quote, unparsed
    quote: tuple  # those read as numbers
    trade_text: tuple  # (time, price, size, total volume) as written
    trade: tuple  # those read: the time in microseconds on the capture's clock (`_onward`)


# the fields a `Q,`/`P,` line's ticks are read from, in the order `_Fields.pick` gives them
PICKED = ("Symbol", "Most Recent Trade Time", "Most Recent Trade", "Most Recent Trade Size", "Total Volume", "Bid",
          "Bid Size", "Ask", "Ask Size", "Bid Time", "Ask Time", "Most Recent Trade Market Center",
          "Most Recent Trade Conditions", "Message Contents")
TRADE_DATE = "Most Recent Trade Date"  # a field a capture may select: the day of its Most Recent Trade Time
QUOTE_FLAGS = frozenset("ba")  # Message Contents: a bid update, an ask update (for the first sight of a symbol)
CLOCKS_HELD = 1 << 16  # times of day kept read (a quote's unchanged side repeats its time): cleared past this many


class _Fields:
    """Where each of PICKED lies in a field list's lines: `pick(values)` gives them in one C call from the line
    split at its commas (a field the list lacks: the empty text appended after the line's values). A name listed
    twice is read at its last place, as a dict of the fields would."""

    def __init__(self, fields: tuple[str, ...]) -> None:
        self.fields, self.count = fields, len(fields)
        at = {name: i for i, name in enumerate(fields, start=1)}  # (a line's values start with its message letter)
        self.pick = operator.itemgetter(*(at.get(name, len(fields) + 1) for name in PICKED))
        self.date_at = at.get(TRADE_DATE)  # a line's Most Recent Trade Date (MM/DD/YYYY), where the list has it


def _trade_day(text: str) -> dt.date | None:
    """IQFeed's Most Recent Trade Date, `MM/DD/YYYY`, as a date; None for an empty or unreadable field."""
    try:
        return dt.datetime.strptime(text, "%m/%d/%Y").date() if text else None
    except ValueError:
        return None


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
        raise ValueError(f"time {quoted(text)} is not HH:MM:SS.ffffff")
    hours, minutes, seconds, fraction = found.groups()
    return ((int(hours) * 60 + int(minutes)) * 60 + int(seconds)) * 10**6 + int((fraction or "0").ljust(6, "0"))


def _number(text: str, name: str) -> float | None:
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{name} {quoted(text)} is not a number") from None


def _unreadable(picked: tuple[str, ...]) -> str:
    """Why a line's fields cannot be read: the first of them, in the line's order of reading, that is no time or
    no number (the fast reading below skips the text it has read before, so says none)."""
    symbol, trade_time, price, size, volume, bid, bid_size, ask, ask_size, bid_time, ask_time = picked[:11]
    try:
        _microseconds(trade_time)
        for text, name in ((price, "Most Recent Trade"), (size, "Most Recent Trade Size"), (volume, "Total Volume"),
                           (bid, "Bid"), (bid_size, "Bid Size"), (ask, "Ask"), (ask_size, "Ask Size")):
            _number(text, name)
        _microseconds(bid_time), _microseconds(ask_time)
    except ValueError as e:
        return str(e)
    return "fields do not read"  # (unreachable: the reading failed on one of them)


class _Level1Reader:
    """Reads a capture's lines into columns, a symbol's state at a time (`_State`): see the module's docstring.
    Written for speed in pure Python (review309 #4: ~40k lines/s before): each line's fields picked in one C call,
    a quote's or trade's text compared before it is read as numbers (IQFeed repeats the last trade beside every
    quote change), times of day read once (`_clock`)."""

    def __init__(self, count: int) -> None:
        self.columns: dict[str, list] = {name: [None] * count for name in COLUMNS}
        self.states: dict[str, _State] = {}
        self.latest = 0  # the latest time the capture has shown, in microseconds after midnight
        self.made = {"quotes": 0, "trades": 0}
        self.stamp_day: str | None = None
        self.field_day: str | None = None
        self.given = False  # whether a field list was given (else IQFeed's default fields)
        self._clocks: dict[str, int | None] = {}

    def _clock(self, text: str) -> int | None:
        found = self._clocks.get(text, -1)
        if found == -1:
            if len(self._clocks) >= CLOCKS_HELD:
                self._clocks.clear()
            found = self._clocks[text] = _microseconds(text)
        return found

    def stamp(self, line: str) -> None:
        """A `T,YYYYMMDD HH:MM:SS` line: the feed's clock, once a second; the first one's date is the capture's
        first day (the day before it when its time counts past a midnight the lines before it crossed)."""
        time = _onward(_microseconds(line[11:19]), self.latest)
        if self.stamp_day is None:
            try:
                first = dt.date(int(line[2:6]), int(line[6:8]), int(line[8:10])) - dt.timedelta(days=time // DAY)
                self.stamp_day = first.isoformat()
            except ValueError:  # no calendar date (20261399): no day from it; a later line may give one
                pass
        self.latest = max(self.latest, time)

    def first_day_of_trade(self, day: dt.date, trade_time: str) -> None:
        """The capture's first day from a line's Most Recent Trade Date: the day its trade time is on, less the
        days the capture's clock has counted on past midnights."""
        try:
            time = _onward(self._clock(trade_time), self.latest)
        except ValueError:
            return  # (the line is rejected for it below)
        if time is not None:
            self.field_day = (day - dt.timedelta(days=time // DAY)).isoformat()

    def update(self, index: int, message: str, picked: tuple[str, ...]) -> bool:
        """Reads a `Q,`/`P,` line's fields into row `index`; whether it made a tick. ValueError for a field that
        is no number or time (the state left as it was)."""
        symbol, trade_time, price, size, volume, bid, bid_size, ask, ask_size, bid_time, ask_time, center, \
            conditions, contents = picked
        if not symbol:
            raise ValueError("Symbol is empty")
        latest, state = self.latest, self.states.get(symbol)
        trade_text, quote_text = (trade_time, price, size, volume), (bid, bid_size, ask, ask_size)
        if state is not None and trade_text == state.trade_text:
            trade = state.trade
            if trade[0] is not None and trade[0] < latest - DAY // 2:  # (its time, counted on past a midnight)
                trade = (_onward(trade[0], latest), *trade[1:])
        else:
            trade = (_onward(self._clock(trade_time), latest), float(price) if price else None,
                     float(size) if size else None, float(volume) if volume else None)
        if state is not None and quote_text == state.quote_text:
            quote = state.quote
        else:
            quote = (float(bid) if bid else None, float(bid_size) if bid_size else None,
                     float(ask) if ask else None, float(ask_size) if ask_size else None)
        quote_times = [_onward(t, latest) for t in (self._clock(bid_time), self._clock(ask_time)) if t is not None] \
            if bid_time or ask_time else ()
        new_trade = new_quote = False
        if message == "Q":
            said_trade = "C" in contents or "E" in contents or "O" in contents  # (TRADE_FLAGS, without a set)
            if state is None:  # first sight: its state only, unless the feed says what happened then
                new_quote = "b" in contents or "a" in contents  # (QUOTE_FLAGS)
                new_trade = said_trade
            else:
                new_quote = quote != state.quote
                new_trade = said_trade if contents else trade != state.trade
            new_quote = new_quote and quote[0] is not None and quote[2] is not None
            new_trade = new_trade and trade[0] is not None and trade[1] is not None
        if state is None:
            self.states[symbol] = _State(quote_text, quote, trade_text, trade)
        else:
            state.quote_text, state.quote, state.trade_text, state.trade = quote_text, quote, trade_text, trade
        shown = latest if trade[0] is None or trade[0] < latest else trade[0]
        self.latest = max(shown, *quote_times) if quote_times else shown
        if not (new_trade or new_quote):
            return False
        time = trade[0] if new_trade else max(quote_times) if quote_times else max(latest, trade[0] or 0)
        row = self.columns
        row["symbol"][index], row["time"][index] = symbol, time
        row["market_center"][index], row["conditions"][index] = center or None, conditions or None
        row["message_contents"][index] = contents or None
        if new_trade:
            row["price"][index], row["size"][index] = trade[1], trade[2]
            self.made["trades"] += 1
        if new_quote:
            row["bid"][index], row["bid_size"][index], row["ask"][index], row["ask_size"][index] = quote
            self.made["quotes"] += 1
        return True


def level1_table(lines: list[str]) -> Level1Table:
    """The capture's lines (without their ends) as a row each: see the module's docstring."""
    fields = _Fields(DEFAULT_FIELDS)
    reader = _Level1Reader(len(lines))
    bad: dict[int, tuple[str, str]] = {}
    tickless: dict[int, str] = {}
    collecting = gc.isenabled()
    gc.disable()  # millions of small lists and tuples made and dropped: the collector would scan them all, often
    try:
        _read_lines(lines, reader, bad, tickless, fields)
    finally:
        if collecting:
            gc.enable()
    # built by column: a capture holds millions of lines, and polars reads lists faster than a row of dicts each
    frame = pl.DataFrame(reader.columns, schema=COLUMNS)
    which = "its field list" if reader.given else "IQFeed's default fields (no `S,CURRENT UPDATE FIELDNAMES` line)"
    made = reader.made
    notes = [f"read as DTN IQFeed live Level 1 messages by {which}: {made['quotes']} quote(s) where a `Q,` update "
             f"changed the bid or ask, {made['trades']} trade(s) where one printed a new trade (the last trade "
             f"repeated beside a quote is not replayed again), times of day in US Eastern ({ZONE})"]
    return Level1Table(frame, bad, tickless, notes, reader.stamp_day, reader.field_day)


def _read_lines(lines: list[str], reader: _Level1Reader, bad: dict[int, tuple[str, str]], tickless: dict[int, str],
                fields: _Fields) -> None:
    """Each line read into `reader`'s row of it, or named in `bad` or `tickless`."""
    given = False
    for index, raw in enumerate(lines):
        line = raw.strip()
        head = line[:2]
        if head == "T," and _STAMP.match(line) is not None:  # the feed's clock, once a second
            reader.stamp(line)
            continue
        if head not in ("Q,", "P,") or not _UPDATE.match(line):
            if line.startswith(FIELD_LINES):  # the fields of the updates after it
                fields, given = _Fields(tuple(f for f in line.split(",")[2:] if f)), True
            continue  # S, F, n and E lines: the feed's own messages, no tick
        values = line.split(",")  # the message's letter, then its fields
        count = len(values) - 1
        if count > 1 and values[-1] == "" and count != fields.count:  # the comma IQFeed ends each message with
            values.pop()  # (a field list's last field may be empty too: then it is kept)
            count -= 1
        if count != fields.count:
            bad[index] = ("missing_field", f"a `{line[0]},` line of {count} fields, where its field list "
                                           f"names {fields.count} ({'given' if given else 'IQFeed default'})")
            continue
        values.append("")  # (what a field the list lacks reads as)
        picked = fields.pick(values)
        if reader.field_day is None and fields.date_at is not None and (day := _trade_day(values[fields.date_at])):
            reader.first_day_of_trade(day, picked[1])
        try:
            made = reader.update(index, line[0], picked)
        except ValueError as e:
            why = str(e) if str(e) == "Symbol is empty" else _unreadable(picked)
            bad[index] = ("wrong_type", f"a `{line[0]},` line whose {why}")
            continue
        if not made:
            tickless[index] = "an IQFeed summary (`P,`): it sets the symbol's state, no tick" if line[0] == "P" \
                else "an IQFeed update that changes neither the quote nor the last trade"
    reader.given = given
