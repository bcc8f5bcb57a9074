"""The map detection reads a file with (connectors/layout.py, a header-less guess, an exchange's JSON shape),
refined by the keys given, with what the file's contents add to it: a date read as epoch, a clock's digits, a
MetaTrader export's unchanged sides filled, the venue's zone, a kind column, a finer clock, sides, TAQ's
corrections, and the notes that say so. Split from connectors/file_layout.py, which settles the rest of the
layout."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from connectors import json_lines
from connectors.archives import not_utf8
from connectors.column_map import ColumnMap
from connectors.columns_read import ColumnsRead
from connectors.column_names import EVENT_NAMES
from connectors.content_notes import fix_sides, kind_column, maker_sides
from connectors.correction_notes import amendment_note, condition_note, sale_condition_note, taq_corrections
from connectors.csv_dialect import Dialect, banner_refusal
from connectors.clock_digits import clock_digits, dated_clock_digits, lone_clock_digits
from connectors.date_columns import date_read_as_epoch
from connectors.field_names import normal_name
from connectors.file_scans import is_csv, time_sample
from connectors.finer_clock import finer_clock
from connectors.json_lines import is_json_lines
from connectors.layout import NoTickLayout, detect_columns
from connectors.layout_notes import coinbase_sides
from connectors.lseg_qualifiers import qualifier_note
from connectors.trading_modes import trading_mode_note
from connectors.iqfeed_level1 import is_level1_capture
from connectors.iqfeed_ticks import IQFEED_NAMES
from connectors.map_options import Refine
from connectors.map_vocabulary import DAY_CLOCK_UNITS, UNITS
from connectors.name_dates import named_day
from connectors.mapped_columns import columns_lacking, spelled_as_the_file
from connectors.venue_notes import venue_note
from connectors.venue_zones import venue_zone, venue_zone_note
from engine.quoting import quoted, quoted_list


def detected_map(path: Path, spec: Refine | None, read: ColumnsRead, first: Callable[..., Any], own_map: bool,
                 ) -> tuple[Refine | None, ColumnMap, list[str], list[str], list[str], str | None]:
    """The map detection reads a file with, refined by the keys given (`spec`), with what the file's contents
    add to it (a date read as epoch, a kind column, a finer clock, sides, corrections): (the keys as the file
    spells its columns, the map, the notes on its kinds, on its dates, on its zone, an exchange shape's note)."""
    names, dialect, schema, guessed = read.names, read.dialect, read.schema, read.guessed
    every = "" if own_map else " (the keys given apply to every file; a replay list gives each file its own " \
                               "map: docs/replay.md)"
    if isinstance(spec, Refine):  # its columns as the file spells them (`TS` for `ts`), as a whole map's are
        spec = Refine(spelled_as_the_file(spec.keys, schema), spec.across_files)
        # detection reads the time column given by its name (polars' error would name no option); the other
        # columns are checked once the keys are applied, after what is wrong with the keys themselves
        timed = {key: spec.keys[key] for key in ("ts", "trade_date") if key in spec.keys}  # (`trade_date=TD`)
        if timed and (lacking := columns_lacking(path, timed, schema)):
            raise NoTickLayout(f"{lacking}{every}")
    try:
        hints = spec.keys if isinstance(spec, Refine) else None
        shaped = json_lines.table(path).columns_for(hints) if is_json_lines(path) else None  # an exchange's
        shaped_note = json_lines.table(path).shape.note if shaped is not None and guessed is None else None
        cmap = guessed or shaped or detect_columns(path, schema, first, hints)
    except ValueError as e:  # names misread from another encoding than UTF-8 are why: said
        if isinstance(e, NoTickLayout) and (banner := banner_refusal(path, dialect)):  # a banner's line as header
            raise NoTickLayout(banner) from None
        if is_csv(path) and (why := not_utf8(path)):  # the cause first, not after a long list of presets
            raise ValueError(f"{path}: {why}; so its column names read wrong: {e}") from None
        if isinstance(e, NoTickLayout) and (pool := [c for c in schema if normal_name(c) == "sqrtpricex96"]):
            # a DEX pool's Swap events (Uniswap v3's): their price is the pool's, in both tokens' base units
            raise NoTickLayout(f"{e}. {quoted(pool[0])} is a Uniswap v3 pool's price: a map reads it with "
                               f"price_format=sqrt_price_x96, token_decimals=D0/D1 and base_token=0|1, the size from "
                               f"the base token's amount with signed_size=pool (docs/replay.md#on-chain-swaps)"
                               ) from None
        if isinstance(e, NoTickLayout) and is_json_lines(path) and (nested := json_lines.nested_arrays(schema)):
            # a column map would not reach the ticks either: say where they are and how to lift them out
            each = ".[]" if json_lines.table(path).records else ""
            raise NoTickLayout(
                f"cannot detect the column layout of {path}: columns found {quoted_list(schema)}, and its objects hold "
                f"arrays of objects under {', '.join(map(quoted, nested[:3]))}, where its ticks may be; no column map "
                f"reaches them (replay unwraps `data`, `params.data`, `tick.data` and Alpaca's `trades`/`quotes`: "
                f"docs/replay.md, JSON lines): write them one object a line first, e.g. jq -c "
                f"'{each}.{nested[0]}[]' {path.name} > ticks.jsonl") from None
        raise
    if names is not None and cmap.names is None:
        cmap = replace(cmap, names=tuple(names))
    keys = spec.keys if isinstance(spec, Refine) else {}
    unit_said = "ts_format" in keys or keys.get("ts_unit") not in (None, *DAY_CLOCK_UNITS)
    date_notes: list[str] = []
    if guessed is None and not unit_said:  # a time column named (ts=trade_date) is not paired with another
        cmap, date_notes = date_read_as_epoch(path, cmap, schema, names, dialect, may_pair="ts" not in keys)
    if guessed is None and not {"ts_unit", "ts_format"} & set(keys):  # `090001418`: 09:00:01.418, not 90 s
        cmap, clock_notes = clock_digits(path, cmap, schema, names, dialect)
        date_notes += clock_notes
    if guessed is None and "ts_format" not in keys and keys.get("ts_unit") in (None, "hhmmss_ns"):
        # NYSE Daily TAQ's `Time` (040125562680053): clock digits, the day in the file's name
        cmap, clock_notes = lone_clock_digits(path, cmap, schema, names, dialect)
        date_notes += clock_notes if "ts_unit" not in keys else []
    if guessed is None and not {"ts_unit", "ts_format"} & set(keys):  # `90016599`: 09:00:16.599 of a dated file
        day = keys.get("date") or named_day(path)
        cmap, clock_notes = dated_clock_digits(path, cmap, schema, names, dialect, day)
        date_notes += clock_notes
        if "date" in keys and cmap.ts_unit in UNITS and len(cmap.ts_columns) == 1:
            raise ValueError(_dated_epoch_refusal(path, cmap, keys["date"], first(cmap.ts)))
    if _writes_only_changes(cmap, list(schema)):
        cmap = replace(cmap, fill_quotes=True)
    zoned = cmap.tz is not None  # a layout known to write its zone (IQFeed's Eastern time): no venue's note
    fixed_zone: list[str] = []
    if zoned and _iqfeed_clock(path, guessed) and isinstance(spec, Refine) and not own_map and \
            keys.get("tz") not in (None, cmap.tz):
        # a --tz for every file is for naive times whose zone the file does not say: IQFeed's clock is always DTN's
        # US Eastern (review336 #6: a JPX file's --tz moved an IQFeed capture beside it by 14 h)
        fixed_zone = [f"{path.name}: its times are its format's clock, {cmap.tz}, so --tz {keys['tz']} (for the "
                      f"files whose times name no zone) is not applied to it; its own map in a replay list "
                      f"(columns: {{tz: ZONE}}) reads it in another"]
        spec = Refine({k: v for k, v in spec.keys.items() if k != "tz"}, spec.across_files)
        keys = spec.keys
    # TAQ's New York, B3's Sao Paulo, unless --tz says otherwise (or the times carry their offset)
    detected = cmap = venue_zone(cmap, schema, lambda: time_sample(path, names, dialect, cmap.ts_columns))
    other_kind: list[str] = []
    if isinstance(spec, Refine) and spec.across_files and not own_map:
        spec, other_kind = _other_kinds_keys_left_out(path, spec, cmap, schema)
    try:
        cmap = spec.apply(cmap) if isinstance(spec, Refine) else cmap
    except ValueError as e:  # the keys given, applied to each file: name the one they do not fit
        raise ValueError(f"{path}: {e}{every}") from None
    zone_notes = [] if "tz" in keys or zoned else venue_zone_note(path, detected, cmap, schema)
    cmap, kind_notes = _kinds_beside_keep(path, cmap, schema, names, dialect, "keep" in keys)
    if not {"ts", "ts_unit", "ts_format"} & set(keys):  # a time column or unit given is read as given
        cmap, clock_notes = finer_clock(path, cmap, schema, names, dialect)
        kind_notes += clock_notes
    cmap = maker_sides(path, fix_sides(path, cmap, schema, names, dialect), schema, names, dialect)
    cmap = cmap if "side" in keys else coinbase_sides(path, list(schema), cmap)  # by its name, with a note
    cmap, correction_notes = taq_corrections(path, cmap, schema, names, dialect)
    kind_notes += venue_note(path, cmap, schema, names, dialect) + correction_notes + [
        note for said in (condition_note, amendment_note, sale_condition_note, qualifier_note, trading_mode_note)
        for note in said(path, cmap, schema, names, dialect)]
    return spec, cmap, fixed_zone + other_kind + kind_notes, date_notes, zone_notes, shaped_note


def _kinds_beside_keep(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                       dialect: Dialect | None, keep_given: bool) -> tuple[ColumnMap, list[str]]:
    """The map with a column marking each row's kind read (`kind_column`), a `keep` given in the keys refining
    that reading rather than replacing it: LSEG's detected `Type in Trade|Quote` stays beside the user's filter on
    `Qualifiers` (review373 #6: the Type filter went without a word, its `Market Condition` rows then rejected).
    A keep that names the kind column itself says which kinds to read: it is the one filter on it."""
    kinds = next((c for c in schema if normal_name(c) in EVENT_NAMES), None)
    given = cmap.keep
    if not keep_given or not given or kinds is None or kinds in given:
        return kind_column(path, cmap, schema, names, dialect)
    cmap, notes = kind_column(path, replace(cmap, keep=None), schema, names, dialect)
    detected = cmap.keep or {}
    notes += [f"{path.name}: the keep given ({', '.join(map(quoted, given))}) applies beside the filter detected on "
              f"{quoted(kinds)}: a row is read when both keep it"] if detected else []
    return replace(cmap, keep={**detected, **given}), notes


def _dated_epoch_refusal(path: Path, cmap: ColumnMap, day: str, value: Any) -> str:
    """A date given for a time column detection reads as an epoch count (which carries its own date): said in
    the words of what was given and what was detected, not as a map whose ts_unit nobody gave (review375 #6)."""
    return (f"{path}: date {quoted(day)} (--date) gives the day of times of day, but column {quoted(cmap.ts)} holds "
            f"{quoted(str(value), 40)}, which detection reads as epoch {cmap.ts_unit} (a time since 1970, its date "
            f"its own), and not as a clock's digits: give its unit, --ts-unit hhmmss, hhmmss_ms, ... for a wall "
            f"clock's HHMMSS digits or ..._after_midnight for a count of the day, or drop --date for epoch times")


def _iqfeed_clock(path: Path, guessed: ColumnMap | None) -> bool:
    """Whether a file is one of DTN IQFeed's (a Level 1 capture, its tick history), whose times are US Eastern."""
    return is_level1_capture(path) or guessed is not None and set(IQFEED_NAMES[:7]) <= set(guessed.names or ())


KIND_KEYS = {"trades": ("price", "size", "side"), "quotes": ("bid", "ask", "bid_size", "ask_size")}


def _other_kinds_keys_left_out(path: Path, spec: Refine, cmap: ColumnMap, schema: Mapping[str, Any],
                               ) -> tuple[Refine, list[str]]:
    """The keys given for every file without those of the other kind of ticks that name columns this file lacks:
    `--columns bid_size=bsize,ask_size=asize` for `trade.csv quote.csv` (kdb+tick's pair) reads the quote file's
    sizes and leaves the trade file's map as detected, with a note (review324 #2); was a refusal of the trade
    file. A key of this file's own kind that names a column it lacks is still refused (a typo, a wrong file)."""
    own = KIND_KEYS["quotes"] if cmap.price is None else KIND_KEYS["trades"] if cmap.bid is None else ()
    left = [k for k in spec.keys if k not in own and any(k in keys for keys in KIND_KEYS.values())
            and isinstance(spec.keys[k], str) and spec.keys[k] not in schema]
    if not own or not left:
        return spec, []
    kind = "quotes" if cmap.price is None else "trades"
    given = ",".join(f"{k}={spec.keys[k]}" for k in left)
    return Refine({k: v for k, v in spec.keys.items() if k not in left}, spec.across_files), [
        f"{path.name}: --columns {given} not applied to this file of {kind}, which lacks "
        f"{', '.join(quoted(spec.keys[k]) for k in left)}: those keys read the other files' ticks"]


# MetaTrader's tick export: what marks it is its FLAGS column (which of bid, ask, last, volume the row changed)
METATRADER_TICKS = frozenset({"bid", "ask", "last", "volume", "flags"})


def _writes_only_changes(cmap: ColumnMap, columns: list[str]) -> bool:
    """Whether the layout is MetaTrader's tick export (`<BID> <ASK> <LAST> <VOLUME> <FLAGS>`, or those names
    without the brackets), which leaves a quote's unchanged side empty. Only a layout known to do so fills an
    empty side by detection: in any other file (an NBBO or option quote file) an empty side is no bid or no ask,
    a one-sided quote, whichever row it falls on."""
    if cmap.bid is None or cmap.fill_quotes is not None or cmap.bid not in columns or cmap.ask not in columns:
        return False
    return METATRADER_TICKS <= {normal_name(c) for c in columns}
