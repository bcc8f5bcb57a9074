"""The notes a tabular file's plan says about how its rows were read, from the facts one pass found
(connectors/file_facts.py): prices in 32nds or as yields, zone names several zones share, a session's hours the
clocks skip, stream names renamed ('/' -> '-', NFC), an hour the clock repeats, a fixed-offset zone named for a
region, the epoch unit read, and the rows named as a user finds them (header rows repeated, trades repeated, lone
prints); with the refusal of times that do not read. connectors/planning.py calls them in the order it builds
the plan."""

from __future__ import annotations

import unicodedata
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.content_notes import trades_alone
from connectors.datetime_text import built_formats
from connectors.epoch_counts import scaled_ts
from connectors.file_plan import FilePlan
from connectors.file_scans import SAMPLE_ROWS
from connectors.hours_window import Hours
from connectors.lone_prints import lone_caution, lone_prints, priced_rows
from connectors.map_vocabulary import UNITS
from connectors.market_zones import each_exchange_clock, misread_markets
from connectors.misread_times import time_cautions
from connectors.price_notation import fractional_caution, refuse_mixed_32nds, yield_caution
from connectors.price_units import two_levels, two_levels_cautions
from connectors.repeated_hour import RepeatedHour
from connectors import json_lines
from connectors.repeated_trades import (
    OVERLAPPING_PAGES, repeated_caution, repeated_ids, shared_id_note, trade_columns, trade_id_column,
)
from connectors.row_exprs import ROW
from connectors.stream_names import venue_caution
from connectors.time_hints import time_hint, unread_zone_names, zone_words
from connectors.time_units import epoch_note, epoch_unit
from connectors.utc_offsets import SUMMER_CHECKED, UTC_OFFSET, names_read_in, shared_name_notes, us_names_in_summer
from connectors.shell_words import columns_option
from engine.quoting import quoted


# Zone names that read as a region's clock but are fixed offsets all year (IANA keeps them for old systems)
FIXED_ZONES = {"EST": ("New York", "America/New_York"), "MST": ("Denver", "America/Denver"),
               "HST": ("Honolulu", "Pacific/Honolulu")}


# said when a file's stream names (a column's values, or its file name: macOS writes those decomposed) were not in
# Unicode NFC: they replay in NFC, as the engine's wire takes them (connectors.ticks.check_normalized)
NFD_WRITTEN = "written decomposed (NFD: an accent as a code point of its own, as macOS writes file names)"


def _renamed_onto(path: Path, streams: pl.LazyFrame) -> list[str]:
    """A caution for names that '/' -> '-' makes one with a name the file already writes with '-' (`BF/B` and
    `BF-B`): their rows would replay as one stream, prices of two sources interleaved, unless the file means one
    instrument twice, which it cannot tell."""
    held = set(streams.select(pl.col("_stream").drop_nulls().unique()).collect().to_series().to_list())
    both = sorted(name for name in held if "/" in name and name.replace("/", "-") in held)
    if not both:
        return []
    pairs = "; ".join(f"{quoted(name)} and {quoted(name.replace('/', '-'))} both replay as "
                      f"{quoted(name.replace('/', '-'))}"
                      for name in both[:3])
    return [Caution(f"{path.name}: {pairs}{'; ...' if len(both) > 3 else ''}: one stream each, two names' rows "
                    f"interleaved. If they are two instruments, name the streams by another column (--columns "
                    f"stream=COLUMN) or rename one in the file")]


def nfc_stream(path: Path, cmap: ColumnMap) -> tuple[ColumnMap, list[str]]:
    """The map with its fixed stream name in Unicode NFC, with a note when it was not (a file name macOS wrote in
    NFD): the engine takes NFC names only."""
    if cmap.stream is None or (nfc := unicodedata.normalize("NFC", cmap.stream)) == cmap.stream:
        return cmap, []
    return replace(cmap, stream=nfc), [f"{path.name}: stream {nfc}: its name was {NFD_WRITTEN}; it replays in "
                                       f"Unicode NFC, the one form the engine takes"]


def int96_note(name: str, column: str, tz: str | None) -> str:
    """What a Parquet file's INT96 timestamps without Spark's metadata are read as (file_scans.int96_instants): UTC,
    as Impala, Hive and parquet-mr store them, and how a file whose writer stored wall-clock times is read in its
    zone; or, given that zone in the file's own map, read so."""
    said = (f"{name}: column {quoted(column)} holds INT96 timestamps without Spark's metadata (Impala's, Hive's, older "
            f"parquet-mr's)")
    if tz is not None:
        return f"{said}: read as wall-clock times in {tz}, as the file's own map asks (INT96 is UTC by convention)"
    return (f"{said}, which those writers store as UTC instants: read as UTC (a --tz for every file is not applied "
            f"to them). If its writer stored wall-clock times instead (Hive or Impala told not to convert), give "
            f"this file its own map with their zone: a replay list entry `{{path: {name}, columns: {{tz: ZONE}}}}`, "
            f"or a --columns map naming every column, ts={column} and tz=ZONE among them")


def price_and_zone_notes(path: Path, cmap: ColumnMap, facts: Mapping[str, Any], first: str | None,
                          named: bool) -> list[str]:
    """The notes on prices in 32nds or as yields, and on zone names several zones share (CST) or written in a
    season whose name they do not fit (CST in July); a ValueError for a price column of 32nds, some of which would
    read 1000 times too large."""
    refuse_mixed_32nds(path, cmap, facts)
    notes = fractional_caution(path, cmap, facts) + yield_caution(path, cmap, facts["crossed_rows"])
    notes += shared_name_notes(path.name, facts["zone_names"] or (), names_read_in(cmap.tz, first), cmap.tz)
    if named:
        found = {name: (facts[f"summer_{name}"], facts[f"summer_first_{name}"]) for name in SUMMER_CHECKED}
        formats = built_formats(first) if first and any(rows for rows, _ in found.values()) else []
        notes += us_names_in_summer(path.name, found, names_read_in(cmap.tz, first), formats)
    return notes


# columns of epoch counts a vendor writes beside its date text (CryptoDataDownload's `unix` beside `date`)
EPOCH_BESIDE = ("unix", "unix_time", "unix_timestamp", "epoch", "timestamp", "ts", "timestamp_ms", "time_ms")


def _epoch_beside(cmap: ColumnMap, rows: pl.LazyFrame) -> str:
    """For a refusal of a time column no row of which reads: an integer column of epoch counts beside it, which
    reads without a format ("" when there is none)."""
    schema = rows.collect_schema()
    column = next((c for c in schema if c not in cmap.ts_columns and c.strip().lower() in EPOCH_BESIDE
                   and schema[c].is_integer()), None)
    return f"; or read the epoch count in column {quoted(column)} beside it: {columns_option(f'ts={column}')}" \
        if column else ""


def refuse_unread_times(path: Path, cmap: ColumnMap, rows: pl.LazyFrame, facts: Mapping[str, Any],
                         first: str | None, named: bool) -> None:
    """A ValueError when no row's time reads, or when some of the zone names the times are written with read and
    others do not (GMT read, BST not)."""
    words = zone_words(rows, cmap, SAMPLE_ROWS) if named and first is not None else []
    unread = unread_zone_names(path, cmap, first, words) if len(words) > 1 else None  # GMT read, BST not
    # (a first time of a name that reads, `3:00:00 PM GMT`, beside `PM BST`: polars reads neither without a format)
    if not facts["timed"] and first is not None and not (unread and UTC_OFFSET.search(first)) and \
            not _past_int64_as_read(cmap, first, facts):
        raise ValueError(time_hint(path, cmap, first, words) + _epoch_beside(cmap, rows))
    if unread:
        raise ValueError(unread)


def _past_int64_as_read(cmap: ColumnMap, first: str, facts: Mapping[str, Any]) -> bool:
    """Whether the times of a file none of whose times reads are times int64 ns do not hold, in the unit they are
    read in (`2300-01-01T00:00:00Z`, epoch seconds of 2300): each row is then rejected as ts_out_of_range, as a
    count scaled in Python is (review411 #5), where a count another unit reads as a present-day time (ms read as
    s) is refused naming that unit (`time_hint`)."""
    if not facts["beyond_int64"]:
        return False
    if cmap.ts_unit not in UNITS:  # date-time text, a Parquet datetime: no unit to misread
        return True
    try:
        return epoch_unit(float(first)) == cmap.ts_unit
    except ValueError:
        return True


def stream_and_clock_notes(path: Path, cmap: ColumnMap, rows: pl.LazyFrame, raw_stream: pl.Expr,
                            facts: Mapping[str, Any], hour: RepeatedHour | None, factor: int) -> list[str]:
    """The notes on days its session hours do not exist, stream names renamed ('/', NFC), an hour the clock
    repeats, a fixed-offset zone named for a region, the epoch unit read and times that look misread."""
    notes: list[str] = []
    if cmap.hours is not None and facts["min_ts"] is not None:
        notes += _skipped_hours(path, cmap, scaled_ts(facts["min_ts"], factor), scaled_ts(facts["max_ts"], factor))
    if facts["slashes"]:
        notes.append(f"{path.name}: stream names with '/' replay with '-' instead (EUR/USD as EUR-USD): "
                     f"answer topics use '/' as their separator{venue_caution('EUR-USD')}")
        notes += _renamed_onto(path, rows.select(raw_stream.alias("_stream")))
    if facts["yellow_keys"]:
        notes.append(f"{path.name}: stream names written as Bloomberg securities replay without their yellow key "
                     f"(`ESZ4 Index` as ESZ4, `AAPL US Equity` as AAPL US), as a file so named does, so that one "
                     f"security is one stream however a file names it")
    if facts["denormalized"]:
        notes.append(f"{path.name}: stream names {NFD_WRITTEN} replay in Unicode NFC, the one form the engine "
                     f"takes, so that a name is one stream however it was written")
    notes += hour.notes(path.name) if hour is not None else []
    notes += _markets_elsewhere(path, cmap, facts, factor)
    if (region := FIXED_ZONES.get(cmap.tz or "")) is not None:  # a trader's "EST" means New York's clock
        notes.append(f"{path.name}: tz {cmap.tz} is a fixed offset all year, with no summer time: if the times are "
                     f"{region[0]}'s clock (summer time included), give --tz {region[1]}")
    unit_said = []
    if facts["first_ts"] is not None and cmap.ts_unit in UNITS:
        unit_said = epoch_note(path, cmap, scaled_ts(facts["first_ts"], factor))
        notes += unit_said
    if facts["min_ts"] is not None:  # (none in a file whose every time is past 2262: `_past_int64_as_read`)
        notes += time_cautions(path, cmap, facts, scaled_ts(facts["min_ts"], factor),
                               scaled_ts(facts["max_ts"], factor), bool(unit_said))
    return notes


def row_notes(plan: FilePlan, rows: pl.LazyFrame, raw_stream: pl.Expr, schema: Mapping[str, Any]) -> FilePlan:
    """The plan with the notes that name rows as the user finds them (its `where`, so made after it): header rows
    repeated, trades repeated or sharing an id, prices at two levels in one stream, lone prints."""
    path, cmap = plan.path, plan.columns
    id_column = trade_id_column(cmap, schema)
    if header_rows := sorted(plan.header_rows):  # (its `where`, as below)
        more = f" and {len(header_rows) - 1} more repeat" if len(header_rows) > 1 else " repeats"
        plan = replace(plan, notes=(*plan.notes, f"{plan.where(header_rows[0])}{more} the header row: "
                                                 f"files joined one after another (a concatenated export); left out "
                                                 f"as filtered_out, no tick"))
    if id_column is not None:  # (after the plan is made: its `where` names a row as the user finds it)
        plan = replace(plan, trade_ids=rows.select(ROW, pl.col(id_column).cast(pl.String).alias("_id")))
        # the header's repeats are no trades: their "id" is the column's name (trdMatchID), and each was a "repeat"
        trades = rows.filter(~pl.col(ROW).is_in(header_rows)) if header_rows else rows
        same, other = repeated_ids(trades, raw_stream, id_column, ROW, trade_columns(cmap))
        line = lambda row: plan.where(row).removeprefix(f"{plan.given_name} ")  # noqa: E731 (the name is said)
        shape = json_lines.table(path).shape if json_lines.is_json_lines(path) else None  # a capture's own cause
        cause = shape.repeats if shape is not None and shape.repeats else OVERLAPPING_PAGES
        said = ([repeated_caution(path.name, same, line, cause, cmap.sequence)] if same else []) + \
            ([shared_id_note(path.name, other, line)] if other else [])
        plan = replace(plan, notes=(*plan.notes, *said)) if said else plan
    series = priced_rows(plan.frame, plan.keys, cmap) if plan.book is None else None  # (an order's price: none)
    if series is not None:
        line = lambda row: plan.where(row).removeprefix(f"{plan.given_name} ")  # noqa: E731
        said = two_levels_cautions(path.name, two_levels(series), line,
                                   lambda: trades_alone(path, cmap, schema, plan.dialect))
        if (lone := lone_prints(series)) is not None:
            said.append(lone_caution(path.name, lone, line, plan.ts_factor))
        plan = replace(plan, notes=(*plan.notes, *said))
    return plan


def _markets_elsewhere(path: Path, cmap: ColumnMap, facts: Mapping[str, Any], factor: int) -> list[str]:
    """A warning for a file whose naive times are read in a zone (--tz, one for every file; UTC for LSEG's `Time[L]`,
    whose `[L]` says each RIC's exchange's local clock) while its streams' names point at exchanges on other clocks
    (`0005.HK`, `TCS.NS` under `--tz Asia/Tokyo`): their times are off by the difference (review375 #3: a
    cross-market study misaligned without a word). A file whose streams are on several clocks is read a clock per
    run (review440 #8: one entry's zone for the whole file would read the other venues' streams wrong)."""
    local_named = cmap.tz is None and each_exchange_clock(cmap.ts)
    zone = cmap.tz or ("UTC" if local_named else None)
    if zone is None or cmap.ts_unit in UNITS or cmap.utc_offset is not None or facts["min_ts"] is None \
            or not facts.get("market_streams"):
        return []
    first, last = scaled_ts(facts["min_ts"], factor), scaled_ts(facts["max_ts"], factor)
    if not (misread := misread_markets(zone, facts["market_streams"], first, last)):
        return []
    named = "; ".join(f"{', '.join(streams[:3])}{' and others' if len(streams) > 3 else ''} ({market.market}: "
                      f"{market.zone})" for market, streams in misread.items())
    clocks: dict[str, list[str]] = {}  # zone -> its streams, the zone read in first where streams are on it
    elsewhere = {stream for streams in misread.values() for stream in streams}
    if on_zone := sorted(set(facts["market_streams"]) - elsewhere):
        clocks[zone] = on_zone
    for market, streams in misread.items():
        clocks.setdefault(market.zone, []).extend(streams)
    read = (f"its times are read as UTC while its header's {quoted(cmap.ts)} says local times (LSEG's [L]: each "
            f"RIC's exchange's clock), and" if local_named else f"its times are read in {zone}, but")
    if len(clocks) > 1 and len(cmap.stream_columns) == 1:  # each clock's streams kept by an entry of their own
        entries = ", ".join(f"{{path: {path.name}, columns: {{tz: {clock}, keep: {{{quoted(cmap.stream_columns[0])}: "
                            f"[{', '.join(map(quoted, streams))}]}}}}}}" for clock, streams in clocks.items())
        fix = f"give each clock's streams an entry of the file with its zone in a replay list " \
              f"(`replay: [{entries}]`, docs/replay.md)"
    elif len(clocks) > 1:
        fix = "read each clock's streams in its own run (--streams, --tz)"
    elif local_named:
        fix = f"give --tz {next(iter(clocks))}"
    else:
        fix = (f"give each market's files their own zone in a replay list (`replay: [{{path: {path.name}, columns: "
               f"{{tz: {next(iter(clocks))}}}}}]`, docs/replay.md), or read them in their own run")
    return [Caution(f"{path.name}: {read} streams name exchanges on other clocks: {named}; if the file writes "
                    f"their local times, each is read hours off: {fix}")]


def _skipped_hours(path: Path, cmap: ColumnMap, first_ns: Any, last_ns: Any) -> list[str]:
    """A note for the days of the file on which its `hours` window is a time the clocks skip (summer time starts):
    that day's rows are all left out, and not because they are outside the session."""
    if type(first_ns) is not int or type(last_ns) is not int:
        return []
    hours = Hours.parse(cmap.hours)
    zone = hours.zone or cmap.tz or "UTC"
    days = hours.skipped_on(zone, first_ns, last_ns)
    if not days:
        return []
    named = ", ".join(str(day) for day in days[:3]) + (", ..." if len(days) > 3 else "")
    return [f"{path.name}: hours {quoted(cmap.hours)} do not exist on {named} in {zone}: the clocks skip them when "
            "summer time starts, so every row of that day is left out"]
