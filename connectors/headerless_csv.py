"""The layout of a CSV whose first line is data, not a header (`headerless_map`): a header-less preset whose cells
its first rows have (Binance's public files), a vendor's layout known by its shape or its name (NinjaTrader's and
HistData's bars and ticks, Dukascopy's quotes), or a time and two numbers read as a quote or a trade by what most
rows show. Anything else is refused with the options that read it. HistData writes its times, ticks and minute
bars alike, in EST all year (HISTDATA_ZONE): its layouts are connectors/histdata_layout.py's.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

from connectors.cautions import Caution
from connectors.column_map import PRESETS, ColumnMap
from connectors.csv_dialect import DATE_LIKE
from connectors.date_columns import CLOCK_TEXT
from connectors.datetime_text import is_iso_time, time_formats
from connectors.written_zones import time_with_zone
from connectors.file_names import HISTDATA_ZONE, histdata_frame
from connectors.histdata_layout import histdata_shaped, histdata_ticks, histdata_zone_named
from connectors.iqfeed_ticks import iqfeed_ticks
from connectors.map_vocabulary import UNITS
from connectors.number_separators import NUMBER
from connectors.presets import LOBSTER_NAMES, detected_by
from connectors.quote_widths import QUOTE_SPREAD_LIMIT, size_beside_price
from connectors.ticks import utc_text
from connectors.time_units import is_epoch


def headerless_map(path: Path, rows: tuple[tuple[str, ...], ...], separator: str = ",",
                   sample: tuple[tuple[str, ...], ...] = ()) -> tuple[ColumnMap, str]:
    """The map of a CSV without a header: a HEADERLESS preset whose cells the first rows have, else a time (epoch
    number or datetime text, maybe beside a symbol) and two numbers: a quote when they are mostly within 1% of
    each other or the second above the first by under 20% (`_quote_pair`), the lower the bid, else a trade's price
    and size (so too when over 1% apart and the second is whole where the first has decimals, or when over the
    whole `sample`, the first lines read, the second is whole, in round lots, and twice the first on some rows:
    quote_widths.size_beside_price); a HistData tick file (by its name, or renamed, by its rows' shape:
    histdata_layout.py) always bid, ask, volume in EST; MetaTrader's bars (a date and a time in two columns) and
    MetaStock's (a symbol and a YYYYMMDDHHMM number) by their shape; any file named as HistData's
    (`histdata_frame`: its ticks, last prices and minute bars, of every platform) in its zone (EST all year). With
    the name of the layout, for the note.
    Anything else is refused with the options that read it."""
    width = Counter(len(row) for row in rows).most_common(1)[0][0]
    rows = tuple(row for row in rows if len(row) == width) if len(rows) > 2 else rows  # a stray field: not the layout
    for name, cmap in PRESETS.items():
        if cmap.names is not None and detected_by(name) is not None and len(cmap.names) == width and \
                all(_fits(cmap, row) for row in rows):
            return cmap, f"preset {name}"
    if (dated := _dated_bars(path, rows)) is not None:
        return dated
    if (iqfeed := iqfeed_ticks(rows)) is not None:  # a vendor's fixed layout, known by its shape
        return iqfeed
    kinds = [_kind(c) for c in rows[0]]
    if kinds == ["time", "number", "number", "number"] and (histdata_frame(path) == "T" or histdata_shaped(rows)):
        return histdata_ticks(rows[0][0], named=histdata_frame(path) == "T")
    times = [i for i, k in enumerate(kinds) if k == "time"]
    numbers = [i for i, k in enumerate(kinds) if k == "number"]
    texts = [i for i, k in enumerate(kinds) if k == "text"]
    bitfinex = _bitfinex_shaped(rows, kinds, width)
    if bitfinex and any(_float(row[2]) < 0 for row in rows):  # a sell among them: AMOUNT is signed
        return ColumnMap(ts="MTS", ts_unit="ms", names=BITFINEX_NAMES, price="PRICE", size="AMOUNT",
                         signed_size=True), BITFINEX_LAYOUT
    # the time in the first or second column; past them only a sure one (Kraken's REST `price,volume,time`)
    if len(times) == 1 and (times[0] <= 1 or _time_rank(rows[0][times[0]]) == SURE_TIME) and len(texts) <= 1 \
            and set(texts) <= {0, 1} and len(numbers) >= 2 and all(len(row) == width for row in rows):
        names = [f"column_{i + 1}" for i in range(width)]
        names[times[0]] = "time"
        if texts:
            names[texts[0]] = "symbol"
        clock = _clock_after_date(rows, times[0])
        if clock is not None:  # Kibot's `01/02/2024,09:30,...`: the two halves of one time, read as one
            names[times[0]], names[clock] = "date", "time"
        if (found := _numbers_layout(path, rows, numbers, names, sample or rows)) is not None:
            fields, how = found
            stream = {"stream_col": "symbol"} if texts else {}
            unit = is_epoch(rows[0][times[0]]) or "datetime"
            first = " ".join(rows[0][times[0]:clock + 1]) if clock is not None else rows[0][times[0]]
            formats = time_formats(first) if unit == "datetime" else []
            zone, named = histdata_zone_named(path)
            cmap = ColumnMap(ts="date+time" if clock is not None else "time", ts_unit=unit,
                             ts_format=formats[0] if len(formats) == 1 else None, names=tuple(names), tz=zone,
                             **stream, **fields)
            how = how.replace("a time", "a date, a time of day", 1) if clock is not None else how
            return cmap, f"{named}{how}"
    hint = _headerless_hint(path, rows[0], kinds, separator)
    if bitfinex:
        hint += (f". If it holds Bitfinex's trades (no sell among its first rows, so AMOUNT's sign does not tell): "
                 f"--csv-names {','.join(BITFINEX_NAMES)}")
    nearly = [name for name, cmap in PRESETS.items() if cmap.names is not None and len(cmap.names) == width and
              detected_by(name) is not None and 2 * sum(_fits(cmap, row) for row in rows) >= len(rows)]
    if nearly:  # a few bad rows among the first lines: the preset still reads the file, rejecting them
        hint += (f". Most of its first lines fit preset {nearly[0]}: --preset {nearly[0]} reads it, its rows that "
                 f"do not fit rejected and counted")
    raise ValueError(hint)


def _clock_after_date(rows: tuple[tuple[str, ...], ...], date: int) -> int | None:
    """The column after `date` when, on every sampled row, `date` holds a date alone and that column a time of day
    alone (Kibot's `01/02/2024,09:30,...`): one time written in two columns, as `clock_beside` finds under a
    header. Read as the date alone, every row of a day fell at its midnight and a minute file's bars collapsed
    into one a day (review430 #7). None otherwise."""
    if date + 1 >= len(rows[0]) or not all(
            DATE_LIKE.fullmatch(row[date].strip()) and CLOCK_TEXT.match(row[date + 1].strip()) for row in rows):
        return None
    return date + 1


HEADERLESS_BARS = ("open", "high", "low", "close", "volume")


class BarShape(NamedTuple):
    """A bar export whose time is no datetime to the header-less guess, told by its first two cells."""
    name: str  # for the note of one not named as HistData's
    first: re.Pattern[str]
    second: re.Pattern[str]
    names: tuple[str, ...]
    ts: str
    ts_format: str  # `{seconds}`: `:%S` where the first row's time of day has them
    layout: str


# MetaTrader's (its History Center; HistData's DAT_MT_): `2024.01.02,17:00,o,h,l,c,v`, date and minute apart;
# MetaStock's (HistData's DAT_MS_): `EURUSD,202401021700,o,h,l,c,v`, the symbol, then the minute as one number
BAR_SHAPES = (
    BarShape("MetaTrader bars", re.compile(r"^\d{4}\.\d{2}\.\d{2}$"), re.compile(r"^\d{2}:\d{2}(:\d{2})?$"),
             ("date", "time", *HEADERLESS_BARS), "date+time", "%Y.%m.%d %H:%M{seconds}",
             "a date, a time and a bar's open, high, low, close and volume"),
    BarShape("MetaStock bars", re.compile(r"^[A-Za-z][A-Za-z0-9./_-]*$"), re.compile(r"^(19|20)\d{10}$"),
             ("symbol", "time", *HEADERLESS_BARS), "time", "%Y%m%d%H%M",
             "a symbol, a time (YYYYMMDDHHMM) and a bar's open, high, low, close and volume"),
)

def _dated_bars(path: Path, rows: tuple[tuple[str, ...], ...]) -> tuple[ColumnMap, str] | None:
    """The map of a bar export in one of BAR_SHAPES (MetaTrader's date and time of day, MetaStock's symbol and
    YYYYMMDDHHMM), whose time alone is no datetime to the header-less guess; in HistData's zone when the file name
    is its (DAT_MT_EURUSD_M1_2024.csv, DAT_MS_...). None when the rows are in none of them."""
    shape = next((shape for shape in BAR_SHAPES if len(rows[0]) == len(shape.names) and all(
        len(row) == len(rows[0]) and shape.first.match(row[0]) and shape.second.match(row[1]) for row in rows)), None)
    if shape is None or not _most(rows, lambda row: _is_bar([_float(cell) for cell in row[2:]])):
        return None
    try:
        ts_format = shape.ts_format.format(seconds=":%S" if rows[0][1].count(":") == 2 else "")
        datetime.strptime(" ".join(rows[0][:2]) if "+" in shape.ts else rows[0][1], ts_format)
    except ValueError:  # twelve digits that are no minute (an id): not this shape
        return None
    zone, named = histdata_zone_named(path)
    cmap = ColumnMap(ts=shape.ts, ts_unit="datetime", ts_format=ts_format, tz=zone, names=shape.names,
                     price="close", size="volume", **({"stream_col": "symbol"} if "symbol" in shape.names else {}))
    return cmap, f"{named or shape.name + ': '}{shape.layout}"


def _numbers_layout(path: Path, rows: tuple[tuple[str, ...], ...], numbers: list[int], names: list[str],
                    sample: tuple[tuple[str, ...], ...]) -> tuple[dict[str, str], str] | None:
    """The tick fields of a header-less file's numeric columns (named in `names`, in place) and the layout's name,
    by what most sampled rows show: a bad row or two (a 0 bid at the open, a crossed quote) is rejected when read,
    not a reason to read the columns as something else. None when they do not tell: a number left unread must be
    0 on every sampled row (HistData's volume), never a column dropped silently. Two numbers whose second is, over
    the whole `sample`, neither a quote's ask nor surely a size are refused, naming both readings' --csv-names."""
    if len(numbers) == len(HEADERLESS_BARS) and _most(rows, lambda row: _is_bar([_float(row[i]) for i in numbers])):
        for i, name in zip(numbers, HEADERLESS_BARS):  # NinjaTrader's and HistData's minute bars
            names[i] = name
        return {"price": "close", "size": "volume"}, "a time and a bar's open, high, low, close and volume"
    if len(numbers) >= 4 and _most(rows, lambda row: _last_bid_ask([_float(row[i]) for i in numbers[:3]])):
        read, fields = numbers[:4], ("price", "bid", "ask", "size")  # NinjaTrader's `time;last;bid;ask;volume`
        how = "a time, a last price, the bid and ask it met, and a size"
    else:
        read, how = numbers[:2], "a time and two numbers"
        pairs = [(_float(row[read[0]]), _float(row[read[1]])) for row in rows]
        quote_like = _most(pairs, _quote_pair)
        lots = size_beside_price([row for row in sample if len(row) == len(names)], read) if quote_like else None
        if lots is not None and not lots.is_size:
            raise ValueError(f"{path}: its first line is data, not a header, and its two numbers read as neither a "
                             f"quote nor a trade: {lots.said}. Give its columns: --csv-names "
                             f"{_names_said(names, read, ('price', 'size'))} reads a trade's price and size, "
                             f"--csv-names {_names_said(names, read, ('bid', 'ask'))} a quote (docs/replay.md)")
        # (why a quote-like pair is a price and size)
        sized = lots.said if lots is not None else _size_said(rows, read, pairs) if quote_like else ""
        if quote_like and not sized:
            fields = ("bid", "ask") if _most(pairs, lambda pair: pair[0] <= pair[1]) else ("ask", "bid")
            if len(numbers) == 4:  # two more: the sides' sizes in their order (Dukascopy's Ask,Bid,AskVolume,...)
                read, fields = numbers, (*fields, *(f"{side}_size" for side in fields))
                how = "a time, two prices of a quote and their sizes"
        else:
            fields = ("price", "size")
            how = (f"a time, a price and a size ({sized}; --csv-names {_names_said(names, read, ('bid', 'ask'))} "
                   f"reads a quote)") if sized else how
    if any(_float(row[i]) != 0 for i in numbers if i not in read for row in rows):
        return None
    for i, name in zip(read, fields):
        names[i] = name
    return {field: field for field in fields}, how


def _size_said(rows: tuple[tuple[str, ...], ...], read: list[int], pairs: list[tuple[float, float]]) -> str:
    """Why two numbers that may read as a quote are a trade's price and size, or "" when nothing says so. The
    second is written whole where the first has decimals on most rows (a quote writes its sides alike), and over
    1% above it (lots of 150 on USD/JPY at 141, a wide quote's ask to the eye), or within 1% and below it on some
    rows, above on others (150 lots at 149.9 and 150.2): an ask is never below its bid, nor a bid above its ask,
    but on a bad row or two."""
    if not _most(rows, lambda row: _whole_beside_decimal(row[read[0]], row[read[1]])):
        return ""
    if not _most(pairs, _tight_pair):
        return f"the second number whole where the first is not: a size, not the ask of a quote {_wide_said(pairs)}"
    below, above = sum(second < first for first, second in pairs), sum(second > first for first, second in pairs)
    if SIDES_CROSSING * min(below, above) < len(pairs):
        return ""
    return (f"the second number whole where the first is not, and below it on {below} of the first {len(pairs)} "
            f"rows, above it on {above}: a size near its price, not a quote's other side, which keeps its order")


SIDES_CROSSING = 5  # a fifth of the rows each way: no quote's bad rows


def _quote_pair(pair: tuple[float, float]) -> bool:
    """Whether two numbers are a quote's bid and ask rather than a trade's price and size: within 1% of each other
    (in either order: Dukascopy writes the ask first), or the second above the first by under 20% (an exotic's
    spread at a reopen, 2%; a trade's size is seldom within 20% above its price)."""
    return _tight_pair(pair) or 0 < pair[0] <= pair[1] < QUOTE_SPREAD_LIMIT * pair[0]


def _tight_pair(pair: tuple[float, float]) -> bool:
    """Whether two numbers are within 1% of each other, as a quote's two sides nearly always are."""
    low, high = min(pair), max(pair)
    return 0 < low and high - low <= 0.01 * low


def _whole_beside_decimal(first: str, second: str) -> bool:
    """Whether the second cell is written as a whole number and the first with decimals: a size beside a price,
    where a quote writes its bid and ask to the same decimals."""
    return bool(re.fullmatch(r"[+-]?\d+", second.strip())) and bool(re.search(r"[.,]\d*[1-9]", first))


def quote_cautions(path: Path, rows: tuple[tuple[str, ...], ...], cmap: ColumnMap) -> list[str]:
    """A caution for a header-less file read as a quote whose first rows a trade's price and size would show too:
    mostly over 1% wide (decimal sizes just above their price, which `_numbers_layout` cannot tell from an ask),
    or within 1% with the second number written whole where the first has decimals and holding fewer values than
    the first (150 lots beside a price of 149.9 that moves; a half-tick quote's ask, 101 beside 100.5, moves with
    its bid). It names both readings' --csv-names; empty for any other reading."""
    if cmap.bid is None or cmap.names is None or cmap.tz == HISTDATA_ZONE or cmap.price is not None:
        return []
    at = [cmap.names.index(cmap.bid), cmap.names.index(cmap.ask)]
    read = sorted(at)
    rows = tuple(row for row in rows if len(row) == len(cmap.names))
    pairs = [(_float(row[read[0]]), _float(row[read[1]])) for row in rows]
    trade = f"if its two numbers are a trade's price and size, --csv-names " \
            f"{_names_said(list(cmap.names), read, ('price', 'size'))} reads them so"
    if not pairs:
        return []
    if not _most(pairs, _tight_pair):
        return [Caution(f"{path.name}: read as a quote, though most of its first rows are over 1% wide (the middle "
                        f"one {_wide_said(pairs)}); {trade}")]
    firsts, seconds = len({first for first, _ in pairs}), len({second for _, second in pairs})
    if seconds >= firsts or not _most(rows, lambda row: _whole_beside_decimal(row[read[0]], row[read[1]])):
        return []
    return [Caution(f"{path.name}: read as a quote, though on most of its first rows the second number is written "
                    f"whole where the first has decimals, and it takes {seconds} value{'s' * (seconds > 1)} to the "
                    f"first's {firsts}: a size holding still beside a moving price looks so; {trade}")]


def _wide_said(pairs: list[tuple[float, float]]) -> str:
    """How wide the median pair of a header-less file's first rows is, as a quote: `6.2% wide (141.234 / 150)`."""
    low, high = sorted(pairs, key=lambda pair: pair[1] / pair[0] if pair[0] else 0)[len(pairs) // 2]
    return f"{100 * (high / low - 1):.1f}% wide ({low:g} / {high:g})" if low else f"({low:g} / {high:g})"


def _names_said(names: list[str], read: list[int], fields: tuple[str, str]) -> str:
    """The --csv-names that reads the columns at `read` as `fields`, the other columns as named."""
    said = list(names)
    for i, field in zip(read, fields):
        said[i] = field
    return ",".join(said)


def _most(items: Sequence[Any], test: Callable[[Any], bool]) -> bool:
    """Whether most of the sampled items (more than half) pass: a few bad rows do not decide a file's layout."""
    return 2 * sum(bool(test(item)) for item in items) > len(items)


def _is_bar(values: list[float]) -> bool:
    """Whether open, high, low, close and volume are a bar's: the high the highest, the low the lowest, a range
    under half the high (two prices and two sizes are not a bar), a volume of 0 or more."""
    opening, high, low, close, volume = values
    return 0 < low <= min(opening, close) and max(opening, close) <= high <= 2 * low and volume >= 0


def _last_bid_ask(values: list[float]) -> bool:
    """Whether three numbers are a last price and the bid and ask: all within 1%, bid <= ask."""
    last, bid, ask = values
    return 0 < bid <= ask <= 1.01 * bid and 0.99 * bid <= last <= 1.01 * ask


# Bitfinex's REST trades (`ID,MTS,AMOUNT,PRICE`) as saved without a header: AMOUNT negative for a sell
BITFINEX_NAMES = ("ID", "MTS", "AMOUNT", "PRICE")
BITFINEX_LAYOUT = "Bitfinex's trades: an id, a time in ms, a signed amount (negative: a sell) and a price"


def _bitfinex_shaped(rows: tuple[tuple[str, ...], ...], kinds: list[str], width: int) -> bool:
    """Whether rows have the shape of Bitfinex's header-less trades: an integer id (which may read as epoch seconds:
    1.5e9 is 2017), a time in ms, a nonzero amount and a positive price. Read so only when some amount is negative
    (a sell): without one, two numbers after a time and an id could be anything."""
    if width != 4 or kinds[1] != "time" or is_epoch(rows[0][1]) != "ms" or kinds[2:] != ["number", "number"]:
        return False
    return all(len(row) == 4 and row[0].isdigit() and _float(row[2]) != 0 and _float(row[3]) > 0 for row in rows)


# How surely a cell is a time, by its value: datetime text, an epoch in ms/us/ns or decimal seconds are; an integer
# of epoch seconds may be an id (Bitfinex's trade id 1500000000 reads as 2017-07-14)
SURE_TIME, MAYBE_TIME = 2, 1


def _time_rank(cell: str) -> int:
    unit = is_epoch(cell)
    return MAYBE_TIME if unit == "s" and cell.isdigit() else SURE_TIME if unit or _kind(cell) == "time" else 0


def _cell_said(cell: str, kind: str) -> str:
    """What a header-less file's cell looks like, for a refusal: a time with its unit and date, an integer that
    may be an id or a time, a number, text."""
    unit = is_epoch(cell)
    if unit is not None:
        when = utc_text(int(Decimal(cell) * UNITS[unit]))  # exact: decimal seconds as a float are off by ~100 ns
        since = f"{UNITS_SAID[unit]} since the epoch ({when})"
        return f"an integer: an id, or {since}" if _time_rank(cell) == MAYBE_TIME else f"a time, {since}"
    return {"time": "a date and time", "number": "a number", "bool": "true/false", "text": "text"}.get(
        kind, "empty" if cell == "" else "other")


UNITS_SAID = {"s": "seconds", "ms": "ms", "us": "us", "ns": "ns"}


def _headerless_hint(path: Path, row: tuple[str, ...], kinds: list[str], separator: str = ",") -> str:
    # the surest times are named time, time_2, ... (names must differ); an id that may read as a time is c1
    ranks = [_time_rank(cell) if kind == "time" else 0 for cell, kind in zip(row, kinds)]
    times = [i for i, rank in enumerate(ranks) if rank and rank == max(ranks)]
    names = [("time" if times.index(i) == 0 else f"time_{times.index(i) + 1}") if i in times else f"c{i + 1}"
             for i in range(len(kinds))]
    said = "; ".join(f"{i + 1} ({cell[:24]}) {_cell_said(cell, kind)}"
                     for i, (cell, kind) in enumerate(zip(row, kinds)))
    hint = (f"{path}: its first line is data, not a header ({separator.join(row)[:80]}), and its layout cannot be "
            f"guessed: give its {len(row)} columns in order with --csv-names and map them with --columns, e.g. "
            f"--csv-names {','.join(names)} --columns ts=...,price=...,size=... (docs/replay.md); its columns: "
            f"{said}")
    try:
        seconds = float(row[0])
    except ValueError:
        return hint
    if 0 <= seconds < 86_400 and len(row) == len(LOBSTER_NAMES) and row[1] in tuple("1234567") and \
            row[5] in ("1", "-1"):
        return (f"{path}: its first line is data, not a header ({','.join(row)[:80]}): it looks like a LOBSTER "
                f"message file ({','.join(LOBSTER_NAMES)}): --preset lobster-messages reads its executions as trades "
                f"(add --date YYYY-MM-DD when its name holds no date; docs/replay.md)")
    if 0 <= seconds < 86_400 and "." in row[0] and not times:  # beside an epoch time, a price
        hint += (f". Its first column ({row[0]}) looks like seconds after midnight: --ts-unit "
                 f"seconds_after_midnight --date YYYY-MM-DD")
    return hint


def _kind(cell: str) -> str:
    # `... 3:04:05 PM ET`: the zone after the time read as under a header (written_zones.zone_in_times)
    if is_epoch(cell) or (not NUMBER.match(cell) and (is_iso_time(cell) or time_formats(cell) or time_with_zone(cell))):
        return "time"
    if NUMBER.match(cell):
        return "number"
    return "bool" if cell.lower() in ("true", "false") else "text" if re.search("[A-Za-z]", cell) else "other"


def _fits(cmap: ColumnMap, row: tuple[str, ...]) -> bool:
    """Whether a row's cells are what a header-less preset's columns hold: its time an epoch number, its side
    flag true/false, its price and size numbers, and its id columns integers."""
    if len(row) != len(cmap.names):
        return False
    cells = dict(zip(cmap.names, row))
    numeric = [cmap.price, cmap.size, *(n for n in cmap.names if n.endswith("id"))]
    times = [n for n in cmap.names if n.endswith("_time") or n == cmap.ts]  # a kline's open and close times
    return all(is_epoch(cells[n]) for n in times) and (cmap.side is None or cells[cmap.side].lower() in (
        "true", "false")) and all(NUMBER.match(cells[n]) for n in numeric if n)


def _float(text: str) -> float:
    try:
        return float(text.replace(",", "."))
    except ValueError:
        return float("nan")
