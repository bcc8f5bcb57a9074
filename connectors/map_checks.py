"""The checks a column map runs when built (`ColumnMap.__post_init__`): each key's value, the keys against each
other (the kind against its price columns, a unit against the date and zone beside it, a flag against the columns
it needs), and the values normalized as kept (a flag's text as a boolean, a YAML date as ISO text). A base of
`ColumnMap` (connectors/column_map.py, which holds the keys and what each means), so that a refusal's words sit
with the check that gives them; its methods read the keys and properties the map defines."""

from __future__ import annotations

import math
from datetime import date as Date
from typing import Any, Mapping

from connectors.bar_lengths import checked_bar_stamp
from connectors.hours_window import Hours, hours_text
from connectors.keep_filter import KEEP_TESTS
from connectors.map_vocabulary import (
    DATE_FROM_NAME,
    DAY_CLOCK_UNITS,
    DECIMALS,
    DETECT,
    EPOCH_IS_UTC,
    LOCAL_TIME_UNITS,
    NS_PART_NAME,
    PRICE_FORMATS,
    QUOTE_FIELDS,
    THIRTY_SECONDS_FORM,
    TRADE_FIELDS,
    TS_UNITS,
    VALUE_FIELDS,
    ZERO_BID_READINGS,
    as_written,
)
from connectors.onchain_swaps import POOL_SIGN, check_swap_keys
from connectors.price_offsets import checked_price_offset
from connectors.ticks import QUOTE, TRADE
from connectors.time_zones import unknown_zone_hint
from engine.quoting import quoted, quoted_choices, quoted_list, quoted_words


def _flag(value: Any) -> bool | None:
    """A map's true/false key as given: a boolean, or its text (a map file reads an unquoted `yes`/`no`/`on`/`off` as
    the text, connectors/map_options.py), None for anything else."""
    return {"true": True, "yes": True, "on": True, "false": False, "no": False, "off": False}.get(
        str(value).strip().lower())



class ColumnMapChecks:
    """The checks of `ColumnMap`, run in this order by its `__post_init__`; each raises ValueError naming the key."""

    def _quote_sides(self) -> None:
        """`quote_sides`: the price and size columns feed bid and ask too (which, each row's mark says), and a
        quote's other side is the stream's previous one."""
        if self.quote_sides is None:
            return
        if not isinstance(self.quote_sides, str) or not self.quote_sides or self.price is None or \
                self.bid not in (None, self.price) or self.kind is not None:
            raise ValueError(f"quote_sides names the column of each row's type (TRADE, BID, ASK) beside one price "
                             "column (price=value) and no bid, ask or kind; got "
                             f"quote_sides={quoted(self.quote_sides)}")
        for key, column in (("bid", self.price), ("ask", self.price), ("bid_size", self.size),
                            ("ask_size", self.size)):
            object.__setattr__(self, key, column)
        if self.fill_quotes is None:
            object.__setattr__(self, "fill_quotes", True)

    def _check_columns(self) -> None:
        """The time column and its unit, the stream, and which tick fields are mapped for the kind."""
        if not isinstance(self.ts, str) or not self.ts or not all(self.ts_columns):
            raise ValueError(f"ts must name the event-time column (or date+time columns), got {quoted(self.ts)}")
        # the default: date and time columns are text; a part of a second named as ns counts in it (epoch_parts.py)
        if len(self.ts_columns) > 1 and self.ts_unit == "ns" and not NS_PART_NAME.search(self.ts_columns[-1]):
            object.__setattr__(self, "ts_unit", "datetime")
        if self.ts_unit not in TS_UNITS:
            raise ValueError(f"ts_unit must be one of {quoted_choices(TS_UNITS)}, got {quoted(self.ts_unit)}")
        if self.stream is not None and (not isinstance(self.stream, str) or not self.stream):
            # a fixed name, not a column: a list here is most often the streams to read, which --streams selects
            raise ValueError(f"stream is one fixed stream name for every row (stream: AAPL); a column of stream names "
                             f"is stream_col: COLUMN, and the streams to read from a file of many are --streams "
                             f"(replay.streams); got {quoted(self.stream)}")
        for name in ("stream_col", "default_stream", "preset", "sequence", "trade_date", *VALUE_FIELDS):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ValueError(f"{name} must be a non-empty column name or omitted, got {quoted(value)}")
        if self.sequence is not None and (not all(self.sequence_columns) or len(self.sequence_columns) > 2):
            raise ValueError(f"sequence names a column, or two joined by '+' (block_number+log_index: the block, "
                             f"then the index within it), got {quoted(self.sequence)}")
        if self.stream_col is not None and not all(self.stream_columns):
            raise ValueError(f"stream_col names a column, or columns joined by '+', got {quoted(self.stream_col)}")
        if self.stream is not None and self.stream_col is not None:
            raise ValueError(f"give a fixed stream or a stream_col, not both ({quoted(self.stream)}, "
                             f"{quoted(self.stream_col)})")
        if self.kind not in (None, TRADE, QUOTE):
            raise ValueError(f'kind must be "trade", "quote" or omitted (inferred per row), got {quoted(self.kind)}')
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
            raise ValueError(f"kind={quoted(self.kind)} but {mapped} (fields of the other kind) are mapped; drop them")
        if self.kind == QUOTE and self.bid is None or self.kind == TRADE and self.price is None:
            raise ValueError(f"kind={quoted(self.kind)} needs its price columns mapped")

    def _check_flags(self) -> None:
        """side_map, fill_quotes and signed_size: each against the columns it needs."""
        if self.side_map is not None:
            if self.side is None:
                raise ValueError("side_map given but no side column is mapped")
            bad = {k: v for k, v in dict(self.side_map).items() if v not in ("buy", "sell", None)}
            if bad:
                raise ValueError(f'side_map values must be "buy", "sell" or null, got {quoted(bad)}')
            object.__setattr__(self, "side_map", dict(self.side_map))
        if self.fill_quotes is not None:
            flag = _flag(self.fill_quotes)
            if flag is None:
                raise ValueError(f"fill_quotes must be true or false, got {quoted(self.fill_quotes)}")
            if flag and self.bid is None:
                raise ValueError("fill_quotes carries a quote's missing side forward: map bid and ask too")
            object.__setattr__(self, "fill_quotes", flag or None)  # false is the default: not kept in to_dict
        if self.signed_size is not None:
            # pool: a DEX pool's amount, its sign the pool's (connectors/onchain_swaps.py)
            flag = POOL_SIGN if str(self.signed_size).strip().lower() == POOL_SIGN else _flag(self.signed_size)
            if flag is None:
                raise ValueError(f"signed_size must be true, false or pool (a DEX pool-side amount: negative, the "
                                 f"pool paid it out, a buy), got {quoted(self.signed_size)}")
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
            object.__setattr__(self, "hours", hours_text(self.hours))  # a YAML list of windows: one text
        if self.price_format not in (None, *PRICE_FORMATS):
            raise ValueError(f"price_format must be one of {quoted_choices(PRICE_FORMATS)} (32nds: CME's notation of "
                             f"Treasury futures, {THIRTY_SECONDS_FORM}; eighths: CBOT grains', 450'4 or 450-4 for 450 "
                             "4/8; sqrt_price_x96: a Uniswap v3 pool's price, with token_decimals and base_token), "
                             f"got {quoted(self.price_format)}")
        check_swap_keys(self)
        if self.zero_bid not in (None, *ZERO_BID_READINGS):
            raise ValueError(f"zero_bid must be one of {quoted_choices(ZERO_BID_READINGS)} (price: a 0 bid beside an "
                             "ask is an option nobody bids, replayed; no_bid: TAQ's no bid, rejected), got "
                             f"{quoted(self.zero_bid)}")
        object.__setattr__(self, "zero_bid", None if self.zero_bid == "no_bid" else self.zero_bid)  # the default
        if self.decimal not in (None, *DECIMALS):
            raise ValueError(f"decimal is a CSV's decimal separator, {' or '.join(DECIMALS)} (a word: inline "
                             f"--columns splits at commas), got {quoted(self.decimal)}")

    def _check_names(self) -> None:
        """A header-less CSV's names: column names, none repeated, and every column the map reads among them."""
        if self.names is not None:
            names = self.names
            if isinstance(names, str) or not all(isinstance(n, str) and n for n in names) or not names:
                raise ValueError(f"names must be a list of column names (a header-less CSV's), got {quoted(names)}")
            if len(set(names)) != len(names):
                raise ValueError(f"names repeat a column: {quoted_list(names)}")
            object.__setattr__(self, "names", tuple(names))
            if missing := [c for c in self.source_columns() if c not in names]:
                raise ValueError(f"the map reads {quoted_words(missing)}, which are not among names "
                                 f"{quoted_list(names)}")

    def _check_time(self) -> None:
        if self.ts_format is not None:
            if not isinstance(self.ts_format, str) or "%" not in self.ts_format:
                raise ValueError("ts_format must be strftime codes like \"%Y%m%d %H:%M:%S%.f\", got "
                                 f"{quoted(self.ts_format)}")
            if self.ts_unit in ("ns", DETECT):  # the default: a format says the column is datetime text
                object.__setattr__(self, "ts_unit", "datetime")
            if self.ts_unit != "datetime":
                raise ValueError(f"ts_format reads datetime text; it does not go with ts_unit {quoted(self.ts_unit)}")
        joined = len(self.ts_columns) > 1
        # (ms, us, ns: epoch seconds beside the part of a second in that unit, Rithmic's ssboe+usecs: epoch_parts.py)
        if joined and self.ts_unit not in ("datetime", DETECT, *DAY_CLOCK_UNITS, "ms", "us", "ns"):
            raise ValueError(f"ts {quoted(self.ts)} joins date and time columns: their text is a datetime, or the "
                             f"time a number after midnight of the date ({', '.join(DAY_CLOCK_UNITS)}), or epoch "
                             "seconds and the part of a second in ts_unit ms, us or ns, not ts_unit "
                             f"{quoted(self.ts_unit)}")
        if joined and self.ts_unit in DAY_CLOCK_UNITS and len(self.ts_columns) != 2:
            raise ValueError(f"ts {quoted(self.ts)} with ts_unit {quoted(self.ts_unit)} names a date column and a "
                             f"time column (DATE+TIME), got {len(self.ts_columns)} columns")
        if self.utc_offset is not None:
            if not isinstance(self.utc_offset, str) or not self.utc_offset:
                raise ValueError(f"utc_offset must name the column of each row's UTC offset in hours, got "
                                 f"{quoted(self.utc_offset)}")
            if self.tz is not None or self.ts_unit not in LOCAL_TIME_UNITS:
                raise ValueError(f"utc_offset reads wall-clock times at each row's offset: it goes with ts_unit "
                                 f"{' or '.join(LOCAL_TIME_UNITS)} and no tz (got ts_unit {quoted(self.ts_unit)}, tz "
                                 f"{quoted(self.tz)})")
        if self.tz is not None:
            if self.ts_unit not in LOCAL_TIME_UNITS:
                raise ValueError(f"tz applies to ts_unit {' or '.join(LOCAL_TIME_UNITS)} (local wall-clock times); "
                                 f"ts_unit {quoted(self.ts_unit)} {EPOCH_IS_UTC}")
            if (hint := unknown_zone_hint(self.tz)) is not None:
                raise ValueError(f"unknown time zone tz={quoted(self.tz)}{hint}")
        if joined and self.ts_unit in DAY_CLOCK_UNITS and self.date is not None:
            raise ValueError(f"ts {quoted(self.ts)} takes each row's day from column {quoted(self.ts_columns[0])}: "
                             f"drop date {quoted(self.date)}")
        if joined and self.ts_unit == "datetime" and self.date is not None:
            raise ValueError(f"ts {quoted(self.ts)} joins a date column to the time: drop date {quoted(self.date)}")
        # a date also gives the day of times of day written as text (`09:00:00.123`, ts_unit datetime)
        if not joined and (self.ts_unit in DAY_CLOCK_UNITS and self.date is None or self.date is not None and
                           self.ts_unit not in (*DAY_CLOCK_UNITS, "datetime", DETECT)):
            raise ValueError(f"ts_unit {' or '.join(map(quoted, DAY_CLOCK_UNITS))} needs date (the trading day, "
                             f"e.g. '2024-03-01'), or each row's day from a date column joined to the time column "
                             f"(ts=DATE+TIME: a file of several days), and date goes with that unit, or with "
                             f"times of day as text (09:00:00.123, ts_unit datetime), only; got "
                             f"ts_unit={quoted(self.ts_unit)}, date={quoted(self.date)}")
        if self.trade_date is not None and (len(self.ts_columns) != 2 or self.ts_columns[0] != self.trade_date):
            # a trade date moves the evening rows of the times of day joined to it: with no time of day beside it
            # there is nothing to move, and another column than ts's date would not be read at all
            raise ValueError(f"trade_date names the date column that ts joins to a time of day (DATE+TIME), got "
                             f"ts={quoted(self.ts)}: --columns ts={self.trade_date}+{self.ts_columns[-1]},"
                             f"trade_date={self.trade_date}")
        if self.date is not None and self.date != DATE_FROM_NAME:
            if isinstance(self.date, Date):  # YAML reads an unquoted 2024-03-01 as a date
                object.__setattr__(self, "date", self.date.isoformat())
            try:
                Date.fromisoformat(self.date)
            except (TypeError, ValueError):
                raise ValueError(f"date must be an ISO date like '2024-03-01' (or {quoted(DATE_FROM_NAME)}: the one "
                                 f"the file's name holds), got {quoted(self.date)}") from None

    def _check_keep(self) -> None:
        if self.keep is None:
            return
        keep = self.keep
        def listed(v: Any) -> bool:
            return isinstance(v, (list, tuple)) and bool(v) and all(isinstance(x, (str, int, float)) for x in v)

        for column, tests in (keep.items() if isinstance(keep, Mapping) else ()):
            if isinstance(tests, Mapping) and (unknown := [t for t in tests if t not in KEEP_TESTS]):
                raise ValueError(f"keep: {quoted(column)}: unknown test {quoted(unknown[0])}; a column's tests are "
                                 f"{', '.join(KEEP_TESTS)} (e.g. {{{column}: {{not_contains: [I]}}}}), or a list of "
                                 f"the values whose rows are kept")
        if not isinstance(keep, Mapping) or not keep or not all(isinstance(c, str) and c for c in keep) or not all(
                listed(v) or isinstance(v, Mapping) and v and all(listed(x) for x in v.values())
                for v in keep.values()):
            raise ValueError(f"keep must map a column to the values whose rows are kept, e.g. {{type: [4, 5]}}, or "
                             f"to tests of its cells ({', '.join(KEEP_TESTS)}: {{Sale Condition: {{not_contains: "
                             f"[I]}}}}), got {quoted(keep)}")
        object.__setattr__(self, "keep", {c: {t: list(x) for t, x in v.items()} if isinstance(v, Mapping) else list(v)
                                          for c, v in keep.items()})

