"""Column maps: which column of a tick file feeds which tick field (`ColumnMap`, its keys checked when built),
and the presets built as maps (`PRESETS`, `preset`, `preset_variant`).

A map is a `ColumnMap`, a preset name, or a dict in the YAML/CLI form that `ColumnMap.from_dict` accepts (unknown
keys are rejected by name). Beside it: the words its keys take (connectors/map_vocabulary.py), the presets as
written (connectors/presets.py), a map as a user gives it (connectors/map_options.py), and what its keys do when a
file is read: the price offset (price_offsets.py), the hours window (hours_window.py), the keep filter
(keep_filter.py), the side maps (side_maps.py). A file without a map has its layout detected (connectors/layout.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from datetime import date as Date
from typing import Any, Mapping, Sequence

from connectors.bar_lengths import checked_bar_stamp
from connectors.hours_window import Hours
from connectors.map_vocabulary import (
    DATE_FROM_NAME,
    DAY_CLOCK_UNITS,
    DECIMALS,
    DETECT,
    EPOCH_IS_UTC,
    LOCAL_TIME_UNITS,
    PRICE_FORMATS,
    QUOTE_FIELDS,
    THIRTY_SECONDS_FORM,
    TRADE_FIELDS,
    TS_UNITS,
    VALUE_FIELDS,
    ZERO_BID_READINGS,
    as_written,
    joined_columns,
)
from connectors.price_offsets import PriceOffset, checked_price_offset
from connectors.presets import PRESET_MAPS, PRESET_VARIANT_MAPS
from connectors.ticks import QUOTE, TRADE
from connectors.time_zones import unknown_zone_hint
from engine.stream_patterns import did_you_mean


def _flag(value: Any) -> bool | None:
    """A map's true/false key as given: a boolean, or its text (a map file reads an unquoted `yes`/`no`/`on`/`off` as
    the text, connectors/map_options.py), None for anything else."""
    return {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}.get(
        str(value).strip().lower())


@dataclass(frozen=True)
class ColumnMap:
    """Which column of a file feeds which tick field.

    `ts` is the event-time column: integers (or floats) in `ts_unit` ("ns",
    "us", "ms", "s") since the epoch, `ts_unit="datetime"` for a datetime,
    date or ISO-text column (naive values are taken as UTC, or as local time
    in `tz`, an IANA zone such as "Europe/London"), or
    `ts_unit="seconds_after_midnight"`: decimal seconds of the wall-clock day
    `date` ("2024-03-01"), in `tz` (default UTC), or of each row's own day when `ts` joins a date column to
    the time (`DATE+TIME_NS`, no `date`: a file of several days). ISO text with a UTC offset
    ("2024-06-03T09:30:00-04:00", "...Z") is read at that offset; `ts_format`
    (polars/chrono strftime codes, e.g. "%Y%m%d %H:%M:%S%.f") reads datetime
    text that is not ISO and implies ts_unit="datetime". `names` gives the columns of
    a header-less CSV, in order. The stream is a
    fixed name (`stream`) or a column (`stream_col`; `a+b+c`: several columns' values joined by a space, one
    stream per option contract); with neither, the file's
    stem. `kind` fixes "trade" or "quote"; None takes the kind whose columns
    are mapped, or, when both are, infers it per row (a row with a price is a
    trade; one with both, a trade printed with the quote it met, replays as two ticks at its time: the
    quote, then the trade). `side_map` translates raw side values, e.g. Binance's
    `is_buyer_maker` {1: "sell", 0: "buy"}; values it does not map are read
    by SIDE_WORDS (buy/sell/b/s in any case, Databento's A (sell) and N
    (none), 1/+1 buy, -1 sell, 0 and "unknown" none), and any other value is
    rejected as `unknown_side`. `ts_unit="epoch"` reads epoch numbers in the
    unit their first value's magnitude shows (Binance's public files went
    from ms to us in 2025). `default_stream` is the stream when the map names
    none and neither the file nor its name does (a preset's, e.g. BTCUSDT).
    `price_scale`: the file's prices are real prices times this (LOBSTER's
    10000, Databento's fixed-point 1e9); price, bid and ask are divided by it.
    `keep` {column: [values]} keeps the rows whose column holds one of the
    values (compared as text, 4.0 as 4) and rejects the others as
    `filtered_out`, e.g. LOBSTER's executions {type: [4, 5]}: a count, not
    silence. `date="file_name"` takes the day from the one ISO date in the
    file's name. `preset` is the preset the map starts from (set by from_dict):
    a preset's stream comes from the file's symbol column when it has one.
    `signed_size`: a trade's size is signed, negative for a sell (Bitfinex's AMOUNT): the side is its sign, the
    size its magnitude.
    `fill_quotes`: a quote row that leaves bid or ask (or a size) empty takes it from the stream's previous
    quote row (MetaTrader's tick exports write only what changed); without it such a row is rejected as
    missing_field.
    `utc_offset`: a column of each row's offset from UTC in hours (LSEG's `GMT Offset`, -5 in New York's winter):
    the times are wall-clock times at that offset, read as time - offset (naive times only; not with `tz`).
    `price_offset`: added to price, bid and ask as read (after `price_scale`): an instrument that trades at zero
    or below (a spread, a power market's negative hours) shifted above zero, the one way the tick contract
    (prices > 0) takes it; moves keep their direction, and their size in bps is of the shifted level. A mapping
    {stream: offset} shifts those streams alone (a calendar spread among its outrights).
    `price_format`: "32nds" reads price, bid and ask written in CME's 32nds (`110-16+`, `110'165`; THIRTY_SECONDS)
    as well as decimals; "decimal" says a column of `110'165`s is thousands grouped by an apostrophe.
    `zero_bid`: what a quote's 0 bid beside an ask above it is: "no_bid" (None, the default: TAQ's and most US
    feeds' "no bid", a one-sided quote rejected as missing_field) or "price" (an option nobody bids, a two-sided
    market: the quote replays with bid 0, its mark ask / 2). A 0 ask is no offer either way.
    `decimal`: a CSV's decimal separator, "comma" (dots group thousands: `3.450,5`) or "point" (commas group:
    `3,450.5`), where its numbers do not tell (`3,450` reads both ways); None: detected (`decimal_reading`).
    `sequence`: the column of each row's sequence number (OPRA's, TAQ's, CME MDP's, an exchange's update id), whole
    numbers compared within a stream (CME's RptSeq counts per instrument): rows of equal times replay by stream,
    each stream's in its order, within a file and across files (connectors/replay.py), not in
    the order they were written; a row without one is rejected as missing_field. Never detected: two files' numbers
    need not be one sequence (TAQ's trades and quotes come from two SIPs, each numbering its own).
    `quote_sides`: a column saying which field each row's price (and size) is, one per row (Bloomberg's tick dump
    `time,type,value,size`: TRADE rows trades, BID/BEST_BID rows the bid, ASK/BEST_ASK rows the ask): the bid and
    ask are read from the price column, their sizes from the size column, each quote taking its other side from
    the stream's previous quote (fill_quotes); a row of another type is missing_field (review291).
    `trade_date`: the date column of `ts=DATE+TIME` holds exchange trade (session) dates, as a column named
    `Trade Date` is read: a futures evening's rows, stamped with the next day's date, are read on the day before
    (connectors/session_dates.py).
    """

    ts: str
    ts_unit: str = "ns"
    stream: str | None = None
    stream_col: str | None = None
    kind: str | None = None
    price: str | None = None
    size: str | None = None
    side: str | None = None
    side_map: dict | None = None
    bid: str | None = None
    ask: str | None = None
    bid_size: str | None = None
    ask_size: str | None = None
    tz: str | None = None
    date: str | None = None
    names: tuple[str, ...] | None = None
    ts_format: str | None = None
    default_stream: str | None = None
    price_scale: float | None = None
    keep: dict | None = None
    preset: str | None = None
    fill_quotes: bool | None = None
    signed_size: bool | None = None
    utc_offset: str | None = None
    price_offset: PriceOffset | None = None
    decimal: str | None = None
    hours: str | None = None
    price_format: str | None = None
    zero_bid: str | None = None
    sequence: str | None = None
    trade_date: str | None = None
    quote_sides: str | None = None
    bar_stamp: str | None = None  # a bar file's stamp: start (as written) or close (connectors/bar_stamps.py)
    bar_length: str | None = None  # the length a bar's close is stamped at after its start (1m, 1h, 1d)

    def __post_init__(self) -> None:
        self._quote_sides()
        self._check_columns()
        self._check_flags()
        self._check_time()
        self._check_keep()
        self._check_readings()
        self._check_names()

    def _quote_sides(self) -> None:
        """`quote_sides`: the price and size columns feed bid and ask too (which, each row's mark says), and a
        quote's other side is the stream's previous one."""
        if self.quote_sides is None:
            return
        if not isinstance(self.quote_sides, str) or not self.quote_sides or self.price is None or \
                self.bid not in (None, self.price) or self.kind is not None:
            raise ValueError(f"quote_sides names the column of each row's type (TRADE, BID, ASK) beside one price "
                             f"column (price=value) and no bid, ask or kind; got quote_sides={self.quote_sides!r}")
        for key, column in (("bid", self.price), ("ask", self.price), ("bid_size", self.size),
                            ("ask_size", self.size)):
            object.__setattr__(self, key, column)
        if self.fill_quotes is None:
            object.__setattr__(self, "fill_quotes", True)

    def _check_columns(self) -> None:
        """The time column and its unit, the stream, and which tick fields are mapped for the kind."""
        if not isinstance(self.ts, str) or not self.ts or not all(self.ts_columns):
            raise ValueError(f"ts must name the event-time column (or date+time columns), got {self.ts!r}")
        if len(self.ts_columns) > 1 and self.ts_unit == "ns":  # the default: date and time columns are text
            object.__setattr__(self, "ts_unit", "datetime")
        if self.ts_unit not in TS_UNITS:
            raise ValueError(f"ts_unit must be one of {TS_UNITS}, got {self.ts_unit!r}")
        if self.stream is not None and (not isinstance(self.stream, str) or not self.stream):
            # a fixed name, not a column: a list here is most often the streams to read, which --streams selects
            raise ValueError(f"stream is one fixed stream name for every row (stream: AAPL); a column of stream names "
                             f"is stream_col: COLUMN, and the streams to read from a file of many are --streams "
                             f"(replay.streams); got {self.stream!r}")
        for name in ("stream_col", "default_stream", "preset", "sequence", "trade_date", *VALUE_FIELDS):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a non-empty column name or omitted, got {value!r}")
        if self.stream_col is not None and not all(self.stream_columns):
            raise ValueError(f"stream_col names a column, or columns joined by '+', got {self.stream_col!r}")
        if self.stream is not None and self.stream_col is not None:
            raise ValueError(f"give a fixed stream or a stream_col, not both ({self.stream!r}, {self.stream_col!r})")
        if self.kind not in (None, TRADE, QUOTE):
            raise ValueError(f"kind must be 'trade', 'quote' or omitted (inferred per row), got {self.kind!r}")
        if self.size is not None and self.price is None:
            raise ValueError("size is mapped without a price (a trade needs a price)")
        if self.price is not None and self.size is None and self.bid is not None:
            raise ValueError("price without size beside bid and ask: map the trades' size too (a price series "
                             "alone, without quotes, reads as trades of size 1)")
        if (self.bid is None) != (self.ask is None):
            raise ValueError("bid and ask must be mapped together (a quote needs both)")
        if self.price is None and self.bid is None:
            raise ValueError("map price (+size) for trades and/or bid+ask for quotes; neither is mapped")
        wrong = {TRADE: QUOTE_FIELDS, QUOTE: TRADE_FIELDS}.get(self.kind, ())
        if mapped := [f for f in wrong if getattr(self, f) is not None]:
            raise ValueError(f"kind={self.kind!r} but {mapped} (fields of the other kind) are mapped; drop them")
        if self.kind == QUOTE and self.bid is None or self.kind == TRADE and self.price is None:
            raise ValueError(f"kind={self.kind!r} needs its price columns mapped")

    def _check_flags(self) -> None:
        """side_map, fill_quotes and signed_size: each against the columns it needs."""
        if self.side_map is not None:
            if self.side is None:
                raise ValueError("side_map given but no side column is mapped")
            bad = {k: v for k, v in dict(self.side_map).items() if v not in ("buy", "sell", None)}
            if bad:
                raise ValueError(f"side_map values must be 'buy', 'sell' or null, got {bad}")
            object.__setattr__(self, "side_map", dict(self.side_map))
        if self.fill_quotes is not None:
            flag = _flag(self.fill_quotes)
            if flag is None:
                raise ValueError(f"fill_quotes must be true or false, got {self.fill_quotes!r}")
            if flag and self.bid is None:
                raise ValueError("fill_quotes carries a quote's missing side forward: map bid and ask too")
            object.__setattr__(self, "fill_quotes", flag or None)  # false is the default: not kept in to_dict
        if self.signed_size is not None:
            flag = _flag(self.signed_size)
            if flag is None:
                raise ValueError(f"signed_size must be true or false, got {self.signed_size!r}")
            if flag and (self.size is None or self.side is not None):
                raise ValueError("signed_size reads a trade's side from its size's sign: map size, and no side column")
            object.__setattr__(self, "signed_size", flag or None)

    def _check_readings(self) -> None:
        """How values are read: price_scale, price_offset, hours, price_format, zero_bid and decimal."""
        if self.price_scale is not None:
            try:
                scale = float(self.price_scale)
            except (TypeError, ValueError):
                scale = math.nan
            if not (0 < scale < math.inf):
                raise ValueError(f"price_scale must be a number > 0 (the file's prices are real prices times it, "
                                 f"e.g. 10000), got {as_written(self.price_scale)}")
            object.__setattr__(self, "price_scale", scale)
        object.__setattr__(self, "price_offset", checked_price_offset(self.price_offset))
        stamp, length = checked_bar_stamp(self.bar_stamp, self.bar_length)
        object.__setattr__(self, "bar_stamp", None if stamp == "start" else stamp)  # the default: not kept
        object.__setattr__(self, "bar_length", length)
        if self.hours is not None:
            Hours.parse(self.hours)
        if self.price_format not in (None, *PRICE_FORMATS):
            raise ValueError(f"price_format must be one of {PRICE_FORMATS} (32nds: CME's notation of Treasury "
                             f"futures, {THIRTY_SECONDS_FORM}; eighths: CBOT grains', 450'4 or 450-4 for 450 4/8), "
                             f"got {self.price_format!r}")
        if self.zero_bid not in (None, *ZERO_BID_READINGS):
            raise ValueError(f"zero_bid must be one of {ZERO_BID_READINGS} (price: a 0 bid beside an ask is an "
                             f"option nobody bids, replayed; no_bid: TAQ's no bid, rejected), got {self.zero_bid!r}")
        object.__setattr__(self, "zero_bid", None if self.zero_bid == "no_bid" else self.zero_bid)  # the default
        if self.decimal not in (None, *DECIMALS):
            raise ValueError(f"decimal is a CSV's decimal separator, {' or '.join(DECIMALS)} (a word: inline "
                             f"--columns splits at commas), got {self.decimal!r}")

    def _check_names(self) -> None:
        """A header-less CSV's names: column names, none repeated, and every column the map reads among them."""
        if self.names is not None:
            names = self.names
            if isinstance(names, str) or not all(isinstance(n, str) and n for n in names) or not names:
                raise ValueError(f"names must be a list of column names (a header-less CSV's), got {names!r}")
            if len(set(names)) != len(names):
                raise ValueError(f"names repeat a column: {list(names)}")
            object.__setattr__(self, "names", tuple(names))
            if missing := [c for c in self.source_columns() if c not in names]:
                raise ValueError(f"the map reads {missing}, which are not among names {list(names)}")

    def _check_time(self) -> None:
        if self.ts_format is not None:
            if not isinstance(self.ts_format, str) or "%" not in self.ts_format:
                raise ValueError(f"ts_format must be strftime codes like '%Y%m%d %H:%M:%S%.f', got {self.ts_format!r}")
            if self.ts_unit in ("ns", DETECT):  # the default: a format says the column is datetime text
                object.__setattr__(self, "ts_unit", "datetime")
            if self.ts_unit != "datetime":
                raise ValueError(f"ts_format reads datetime text; it does not go with ts_unit {self.ts_unit!r}")
        joined = len(self.ts_columns) > 1
        # (ms, us, ns: epoch seconds beside the part of a second in that unit, Rithmic's ssboe+usecs: epoch_parts.py)
        if joined and self.ts_unit not in ("datetime", DETECT, *DAY_CLOCK_UNITS, "ms", "us", "ns"):
            raise ValueError(f"ts {self.ts!r} joins date and time columns: their text is a datetime, or the time a "
                             f"number after midnight of the date ({', '.join(DAY_CLOCK_UNITS)}), or epoch seconds "
                             f"and the part of a second in ts_unit ms, us or ns, not ts_unit {self.ts_unit!r}")
        if joined and self.ts_unit in DAY_CLOCK_UNITS and len(self.ts_columns) != 2:
            raise ValueError(f"ts {self.ts!r} with ts_unit {self.ts_unit!r} names a date column and a time column "
                             f"(DATE+TIME), got {len(self.ts_columns)} columns")
        if self.utc_offset is not None:
            if not isinstance(self.utc_offset, str) or not self.utc_offset:
                raise ValueError(f"utc_offset must name the column of each row's UTC offset in hours, got "
                                 f"{self.utc_offset!r}")
            if self.tz is not None or self.ts_unit not in LOCAL_TIME_UNITS:
                raise ValueError(f"utc_offset reads wall-clock times at each row's offset: it goes with ts_unit "
                                 f"{' or '.join(LOCAL_TIME_UNITS)} and no tz (got ts_unit {self.ts_unit!r}, tz "
                                 f"{self.tz!r})")
        if self.tz is not None:
            if self.ts_unit not in LOCAL_TIME_UNITS:
                raise ValueError(f"tz applies to ts_unit {' or '.join(LOCAL_TIME_UNITS)} (local wall-clock times); "
                                 f"ts_unit {self.ts_unit!r} {EPOCH_IS_UTC}")
            if (hint := unknown_zone_hint(self.tz)) is not None:
                raise ValueError(f"unknown time zone tz={self.tz!r}{hint}")
        if joined and self.ts_unit in DAY_CLOCK_UNITS and self.date is not None:
            raise ValueError(f"ts {self.ts!r} takes each row's day from column {self.ts_columns[0]!r}: drop date "
                             f"{self.date!r}")
        if joined and self.ts_unit == "datetime" and self.date is not None:
            raise ValueError(f"ts {self.ts!r} joins a date column to the time: drop date {self.date!r}")
        # a date also gives the day of times of day written as text (`09:00:00.123`, ts_unit datetime)
        if not joined and (self.ts_unit in DAY_CLOCK_UNITS and self.date is None or self.date is not None and
                           self.ts_unit not in (*DAY_CLOCK_UNITS, "datetime", DETECT)):
            raise ValueError(f"ts_unit {' or '.join(map(repr, DAY_CLOCK_UNITS))} needs date (the trading day, "
                             f"e.g. '2024-03-01'), or each row's day from a date column joined to the time column "
                             f"(ts=DATE+TIME: a file of several days), and date goes with that unit, or with "
                             f"times of day as text (09:00:00.123, ts_unit datetime), only; got "
                             f"ts_unit={self.ts_unit!r}, date={self.date!r}")
        if self.trade_date is not None and (len(self.ts_columns) != 2 or self.ts_columns[0] != self.trade_date):
            # a trade date moves the evening rows of the times of day joined to it: with no time of day beside it
            # there is nothing to move, and another column than ts's date would not be read at all
            raise ValueError(f"trade_date names the date column that ts joins to a time of day (DATE+TIME), got "
                             f"ts={self.ts!r}: --columns ts={self.trade_date}+{self.ts_columns[-1]},"
                             f"trade_date={self.trade_date}")
        if self.date is not None and self.date != DATE_FROM_NAME:
            if isinstance(self.date, Date):  # YAML reads an unquoted 2024-03-01 as a date
                object.__setattr__(self, "date", self.date.isoformat())
            try:
                Date.fromisoformat(self.date)
            except (TypeError, ValueError):
                raise ValueError(f"date must be an ISO date like '2024-03-01' (or {DATE_FROM_NAME!r}: the one "
                                 f"the file's name holds), got {self.date!r}") from None

    def _check_keep(self) -> None:
        if self.keep is None:
            return
        keep = self.keep
        if not isinstance(keep, Mapping) or not keep or not all(isinstance(c, str) and c for c in keep) or not all(
                isinstance(v, (list, tuple)) and v and all(isinstance(x, (str, int, float)) for x in v)
                for v in keep.values()):
            raise ValueError(f"keep must map a column to the values whose rows are kept, e.g. {{type: [4, 5]}}, "
                             f"got {keep!r}")
        object.__setattr__(self, "keep", {c: list(v) for c, v in keep.items()})

    @classmethod
    def from_dict(cls, spec: Mapping[str, Any]) -> ColumnMap:
        """Build from a YAML/JSON-style dict; `preset` names a base that the other keys override."""
        if not isinstance(spec, Mapping):
            raise ValueError(f"a column map is a mapping of field -> column, got {type(spec).__name__}")
        allowed = tuple(f.name for f in fields(cls))
        if unknown := sorted(str(k) for k in spec if k not in allowed):
            raise ValueError(unknown_keys(unknown, allowed))
        spec = dict(spec)
        base = preset(spec["preset"]).to_dict() if spec.get("preset") is not None else {}
        if "stream_col" in spec:  # overriding how the stream is named replaces the preset's way
            base.pop("stream", None)
        if "stream" in spec:
            base.pop("stream_col", None)
        if "ts" not in base | spec:
            raise ValueError(f"a column map needs ts (the time column) unless it refines a detected layout; got "
                             f"{sorted(spec)}")
        return cls(**(base | spec))

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def column_of(self, tick_field: str) -> str | None:
        """The file column that feeds `tick_field` (ts, stream, price, ...), or None."""
        if tick_field == "stream":
            return self.stream_col
        return getattr(self, tick_field, None) if tick_field in ("ts", *VALUE_FIELDS) else None

    @property
    def stream_columns(self) -> tuple[str, ...]:
        """The stream's column(s): `underlying+expiry+strike+right` names one stream per option contract, its
        values joined by a space (`SPY 2024-01-19 470 C`)."""
        return joined_columns(self.stream_col) if self.stream_col else ()

    @property
    def ts_columns(self) -> tuple[str, ...]:
        """The column(s) of the time: `Date+Time` names a date column and a time column, read joined by a space."""
        return joined_columns(self.ts)

    def source_columns(self) -> list[str]:
        """The file columns this map reads, without repeats."""
        names = [*self.ts_columns, *self.stream_columns, *(getattr(self, f) for f in VALUE_FIELDS), *(self.keep or ()),
                 self.utc_offset, self.sequence, self.trade_date, self.quote_sides]
        return list(dict.fromkeys(n for n in names if n is not None))


# The presets (connectors/presets.py) as maps, each knowing its name: built here, beside the class whose
# `preset` key names them as a base
PRESETS: dict[str, ColumnMap] = {name: ColumnMap(**spec, preset=name) for name, spec in PRESET_MAPS.items()}
# A preset's other layouts of the same vendor's files, read when a file lacks the preset's own columns
PRESET_VARIANTS: dict[str, tuple[ColumnMap, ...]] = {
    name: tuple(ColumnMap(**spec, preset=name) for spec in specs) for name, specs in PRESET_VARIANT_MAPS.items()}


def preset_variant(cmap: ColumnMap, columns: Sequence[str]) -> ColumnMap:
    """For a map from a preset whose columns a file lacks: the preset's other layout (PRESET_VARIANTS) that the
    file has, with the keys given over the preset (`--preset dukascopy --tz ...`) kept; else the map itself.
    Column names compare in any case, as `layout.match_case` finds them."""
    have = {c.strip().lower() for c in columns}
    fits = lambda m: all(c.strip().lower() in have for c in m.source_columns())  # noqa: E731
    if cmap.preset not in PRESET_VARIANTS or fits(cmap):
        return cmap
    base = PRESETS[cmap.preset].to_dict()
    given = {k: v for k, v in cmap.to_dict().items() if base.get(k) != v}
    for variant in PRESET_VARIANTS[cmap.preset]:
        try:
            candidate = ColumnMap.from_dict(variant.to_dict() | given)
        except ValueError:
            continue
        if fits(candidate):
            return candidate
    return cmap


def preset(name: str) -> ColumnMap:
    if name not in PRESETS:
        raise ValueError(f"unknown replay preset {name!r}; known presets: {sorted(PRESETS)}")
    return PRESETS[name]


MAP_KEYS = tuple(f.name for f in fields(ColumnMap))


def inline_spelling(unknown: Sequence[str]) -> str:
    """For unknown keys of a map written as YAML (a map file, a replay list entry, the config): the YAML key of
    `stream_name`, which is --columns' inline spelling of a fixed stream (inline, `stream=` is the column)."""
    if "stream_name" not in unknown:
        return ""
    return (" (stream_name is the inline --columns spelling; in YAML a fixed stream is stream: NAME, a stream "
            "column stream_col: COLUMN)")


def unknown_keys(unknown: Sequence[str], known: Sequence[str]) -> str:
    """Keys of a map that are none of `known`, said as a user reads them: `unknown column-map key "syde"; known
    keys: ts, ...; did you mean 'side'?` (the nearest known key by engine.stream_patterns' did_you_mean, as the
    config loader finds its own), with --columns' stream_name spelled as YAML writes it instead of a guess."""
    keys = ", ".join(f'"{key}"' for key in unknown)
    guessed = [key for key in unknown if key != "stream_name"]  # inline_spelling says what stream_name is
    return (f"unknown column-map key{'s' if len(unknown) > 1 else ''} {keys}{inline_spelling(unknown)}; known keys: "
            f"{', '.join(known)}{did_you_mean(guessed, known)}")
