"""Column maps: which column of a tick file feeds which tick field (`ColumnMap`, its keys checked when built),
and the presets built as maps (`PRESETS`, `preset`, `preset_variant`).

A map is a `ColumnMap`, a preset name, or a dict in the YAML/CLI form that `ColumnMap.from_dict` accepts (unknown
keys are rejected by name). Beside it: the checks its keys pass when it is built (connectors/map_checks.py), the
words its keys take (connectors/map_vocabulary.py), the presets as written (connectors/presets.py), a map as a user
gives it (connectors/map_options.py), and what its keys do when a file is read: the price offset (price_offsets.py),
the hours window (hours_window.py), the keep filter (keep_filter.py), the side maps (side_maps.py). A file without a
map has its layout detected (connectors/layout.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping, Sequence

from connectors.map_checks import ColumnMapChecks
from connectors.map_vocabulary import VALUE_FIELDS, joined_columns
from connectors.price_offsets import PriceOffset
from connectors.presets import PRESET_MAPS, PRESET_VARIANT_MAPS, preset_keys
from engine.quoting import quoted
from engine.stream_patterns import did_you_mean


@dataclass(frozen=True)
class ColumnMap(ColumnMapChecks):
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
    size_scale: float | None = None  # on-chain swaps' keys (connectors/onchain_swaps.py)
    token_decimals: tuple[int, int] | None = None
    base_token: int | None = None

    def __post_init__(self) -> None:
        self._quote_sides()
        self._check_columns()
        self._check_flags()
        self._check_time()
        self._check_keep()
        self._check_readings()
        self._check_names()

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
                             f"{', '.join(map(quoted, sorted(spec)))}")
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

    @property
    def sequence_columns(self) -> tuple[str, ...]:
        """The sequence number's column(s): `block_number+log_index` orders an on-chain export's events by block,
        then by their index within it (connectors/row_exprs.py joins the two into one number)."""
        return joined_columns(self.sequence) if self.sequence else ()

    def source_columns(self) -> list[str]:
        """The file columns this map reads, without repeats."""
        names = [*self.ts_columns, *self.stream_columns, *(getattr(self, f) for f in VALUE_FIELDS), *(self.keep or ()),
                 self.utc_offset, *self.sequence_columns, self.trade_date, self.quote_sides]
        return list(dict.fromkeys(n for n in names if n is not None))


# The presets (connectors/presets.py) as maps, each knowing its name: built here, beside the class whose
# `preset` key names them as a base
PRESETS: dict[str, ColumnMap] = {name: ColumnMap(**preset_keys(spec), preset=name)
                                 for name, spec in PRESET_MAPS.items()}
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
        raise ValueError(f"unknown replay preset {quoted(name)}; known presets: {', '.join(sorted(PRESETS))}")
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
