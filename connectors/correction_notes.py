"""Prints a file marks as corrected, cancelled, conditioned or amending an earlier trade: correction columns left
unread (`condition_note`), sale conditions (`sale_condition_note`), rows that cancel or correct by action or by
reference (`amendment_note`, TRACE's among them), and TAQ's TR_CORR read as its regular prints only
(`taq_corrections`). Replay never undoes a tick, so each is said or filtered, never applied."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.csv_dialect import Dialect
from connectors.field_names import normal_name
from connectors.file_scans import SAMPLE_ROWS, distinct_text, is_csv, scan_file
from connectors.keep_filter import keep_check, keep_key, keep_values, typed_key
from connectors.map_vocabulary import DAY_CLOCK_UNITS
from connectors.shell_words import columns_option
from engine.quoting import quoted


# Columns that mark a print as corrected, cancelled or to be excluded (TickData's Correction Indicator and Exclude
# Record Flag, Polygon's correction, Cboe's canceled_trade_condition_id), read by no map unless it filters on them.
# Sale conditions (TAQ's `@ F I`: sweeps, odd lots) describe regular prints and are not among them.
CONDITION_NAMES = ("correction", "correction_indicator", "trade_correction_indicator", "corr", "exclude_record_flag",
                   "exclude",
                   "canceled_trade_condition_id", "cancelled", "canceled", "is_cancelled", "is_canceled")
REGULAR_MARKS = frozenset({"0", "00", "0.0", "false", "n"})


def condition_note(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                    dialect: Dialect | None) -> list[str]:
    """Correction columns a detected layout does not read, marking some prints: said, since corrected, cancelled
    and excluded prints then replay as trades like any other."""
    if cmap.price is None or cmap.keep is not None:
        return []
    marked = {}
    for column in (c for c in schema if normal_name(c) in CONDITION_NAMES and c not in cmap.source_columns()):
        values = [v for v in distinct_text(path, names, dialect, column, 6, SAMPLE_ROWS)
                  if v.lower() not in REGULAR_MARKS]
        if values:
            marked[column] = values
    if not marked:
        return []
    said = "; ".join(f"{quoted(c)} holds {', '.join(v[:5])}" for c, v in marked.items())
    return [f"{path.name}: correction columns are not read ({said}): corrected, cancelled or excluded prints "
            f"replay as trades like any other; to leave them out, give a map with a keep filter on the values of "
            f"regular prints (docs/replay.md, `keep`)"]


# Sale conditions (TAQ's TR_SCOND `@ F I`, Polygon's conditions `12,37`, TickData's Sales Condition): prints of
# their kinds (odd lots, out-of-sequence, after hours, Form T), regular trades that no map reads unless it filters
SALE_CONDITION_NAMES = ("tr_scond", "conditions", "condition", "sale_condition", "sale_conditions", "sales_condition",
                        "sales_conditions", "trade_condition", "trade_conditions", "trade_conds",
                        "special_conditions",  # Interactive Brokers' historical ticks' `specialConditions`
                        "cond")  # a kdb+ trade table's (`time sym price size ex cond`, TAQ's as q loads it)
# the same names written without underscores, as camelCase gives them (`specialConditions`, `saleCondition`)
JOINED_SALE_CONDITION_NAMES = frozenset(name.replace("_", "") for name in SALE_CONDITION_NAMES)


def sale_condition_note(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                         dialect: Dialect | None) -> list[str]:
    """A detected trades layout beside a sale-conditions column it does not filter on: said, since odd lots and
    out-of-sequence or after-hours prints then replay as trades like any other."""
    column = next((c for c in schema if normal_name(c).replace("_", "") in JOINED_SALE_CONDITION_NAMES), None)
    if cmap.price is None or column is None or column in {*cmap.source_columns(), *(cmap.keep or ())}:
        return []
    values = distinct_text(path, names, dialect, column, 4, SAMPLE_ROWS)
    if not values:
        return []
    shown = ", ".join(quoted(v) for v in values[:3]) + (", ..." if len(values) > 3 else "")
    how = ("a keep filter compares whole cells (`12,37` is one value), so to leave out one condition's prints, "
           "filter the file first" if any("," in v for v in values) else "a map's keep filter lists the cells to read")
    return [f"{path.name}: sale conditions are not read ({quoted(column)} holds {shown}): odd-lot, out-of-sequence, "
            f"after-hours and other conditioned prints replay as trades like any other; {how} (docs/replay.md, "
            f"`keep`)"]


# Columns that say a row cancels, corrects or busts an earlier trade (`action` NEW/CANCEL/CORRECT) or name the
# trade it refers to (`orig_trade_id`): replay has no way to undo a tick already replayed, so such rows are said
ACTION_NAMES = ("action", "status", "trade_status", "trade_action", "exec_type", "execution_type", "record_action",
                "update_action", "trade_type", "event_action")
AMENDING_WORDS = frozenset({"cancel", "cancelled", "canceled", "cancellation", "cxl", "correct", "corrected",
                            "correction", "bust", "busted", "break", "broken", "amend", "amended", "amendment",
                            "void", "voided", "delete", "deleted", "reversal", "trade_cancel", "trade_correction",
                            "trade_break", "trade_bust"})
# FINRA TRACE's status `TRC_ST`: one letter a row, T a trade report; these cancel (X), correct (C) or reverse (R, Y)
# an earlier one. Letters are read as amending under this name only: an `action` of C names no correction
STATUS_CODES = {"trc_st": {"x": "cancel", "c": "correction", "r": "reversal", "y": "reversal"}}
# TRACE's ORIG_MSG_SEQ_NB (the message sequence number of the report it amends) among them
REFERENCE_NAME = re.compile(r"^(orig|original|ref|reference|referenced|corrected|cancel+ed|busted|amended)_"
                            r"(trade_|exec_|execution_|msg_)?(id|ref|tid|seq|seq_num|seqnum|seq_nb|sequence|number|"
                            r"num)$")


def amendment_note(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                    dialect: Dialect | None) -> list[str]:
    """Rows that cancel, correct or bust an earlier trade, by an action/status column's values or a column naming
    the trade they refer to, in a detected trades layout that does not filter on them: said, since each replays
    as a new trade and the trade it refers to stays as read (corrections by reference are never applied)."""
    if cmap.price is None:
        return []
    read = {*cmap.source_columns(), *(cmap.keep or ())}
    said, example = [], None
    for column in (c for c in schema if normal_name(c) in (*ACTION_NAMES, *STATUS_CODES) and c not in read):
        values = distinct_text(path, names, dialect, column, 21, SAMPLE_ROWS)
        codes = STATUS_CODES.get(normal_name(column), {})
        amending = [v for v in values if normal_name(v) in AMENDING_WORDS or normal_name(v) in codes]
        if amending and len(values) <= 20:
            shown = ", ".join(f"{v} {codes[normal_name(v)]}" if normal_name(v) in codes else v for v in amending[:4])
            said.append(f"column {quoted(column)} marks rows that amend an earlier trade ({shown})")
            if example is None:
                trading = _priced_values(path, cmap, names, dialect, column)
                example = f"keep: {{{column}: [{', '.join(v for v in values if v not in amending and v in trading)}]}}"
    still = ""
    for column in (c for c in schema if REFERENCE_NAME.match(normal_name(c)) and c not in read):
        if (referred := distinct_text(path, names, dialect, column, 3, SAMPLE_ROWS)) and \
                _keeps_referring(path, cmap, names, dialect, column):
            said.append(f"column {quoted(column)} refers rows to earlier trades ({', '.join(referred)}, ...)")
            example = example or f"keep: {{{column}: [\"\"]}}, the rows that refer to none"
            still = still or _referred_trades(path, cmap, schema, names, dialect, column)
    if not said:
        return []
    return [Caution(f"{path.name}: {'; '.join(said)}: cancels and corrections by reference are not applied, each "
                    f"such row replays as a new trade and the trade it refers to stays as read. Clean the file "
                    f"first, or leave those rows out with a map's keep filter ({example}; docs/replay.md){still}")]


def _priced_values(path: Path, cmap: ColumnMap, names: Sequence[str] | None, dialect: Dialect | None,
                   column: str) -> set[str]:
    """The values of `column` (stripped, as `distinct_text` gives them) on rows of the file's first SAMPLE_ROWS that
    hold a price: the actions whose rows are trades (NEW), not a halt's or a resume's status rows, which a keep
    listing them would count as missing_field rejects (review430 #5)."""
    overrides = {c: pl.String for c in (column, cmap.price)} if is_csv(path) else None
    price = pl.col(cmap.price).cast(pl.String).str.strip_chars()
    value = pl.col(column).cast(pl.String).str.strip_chars()
    rows = scan_file(path, names, dialect, overrides).head(SAMPLE_ROWS).filter(price.is_not_null() & (price != ""))
    return set(rows.select(value.unique()).collect().to_series().to_list())


def _keeps_referring(path: Path, cmap: ColumnMap, names: Sequence[str] | None, dialect: Dialect | None,
                     reference: str) -> bool:
    """Whether the map's keep (none: every row) keeps a row of the file's first SAMPLE_ROWS that refers to an
    earlier trade by ``reference``: a keep of TRACE's `TRC_ST: [T]` leaves out the cancels and corrections, and
    with them every row that refers back, so a keep on the reference column would be a suggestion already met."""
    if not cmap.keep:
        return True
    columns = list(cmap.keep)
    overrides = {c: pl.String for c in (*columns, reference)} if is_csv(path) else None  # cells as written
    rows = scan_file(path, names, dialect, overrides).head(SAMPLE_ROWS).select(*columns, reference).collect()
    kept = keep_check(cmap.keep)
    return any(kept(row[:-1]) is None for row in rows.iter_rows() if keep_key("" if row[-1] is None else row[-1]))


ID_NAMES = ("trade_id", "id", "tid", "exec_id", "execution_id", "trade_number", "trade_seq", "seq_num", "sequence",
            "msg_seq_nb")  # TRACE's report number, which ORIG_MSG_SEQ_NB refers to


def _referred_trades(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                     dialect: Dialect | None, reference: str) -> str:
    """What a keep filter on the amending rows leaves in: the trades of the file that its reference column refers
    to (a busted print's price among them), counted over the whole file, with the first few's ids and prices; ""
    when no id column is known or no row's id is referred to."""
    own = REFERENCE_NAME.sub(lambda m: (m.group(2) or "") + m.group(3), normal_name(reference))
    ids = next((c for n in (own, *ID_NAMES) for c in schema if normal_name(c) == n and c != reference), None)
    if ids is None:
        return ""
    text = lambda c: pl.col(c).cast(pl.String).str.strip_chars().str.replace(r"\.0+$", "")  # noqa: E731
    overrides = {c: pl.String for c in (ids, reference, cmap.price)} if is_csv(path) else None
    rows = scan_file(path, names, dialect, overrides).select(text(ids).alias("id"), text(reference).alias("ref"),
                                                             pl.col(cmap.price).alias("price"))
    referred = rows.filter(pl.col("ref") != "").select("ref").unique()
    found = rows.join(referred, left_on="id", right_on="ref", how="semi").collect()
    if not found.height:
        return ""
    listed = ", ".join(f"{i} at {p}" for i, p in found.head(3).select("id", "price").iter_rows())
    one = found.height == 1
    return (f". That filter leaves in the {found.height:,} trade{'' if one else 's'} they refer to ({ids} {listed}"
            f"{', ...' if found.height > 3 else ''}): {'it replays' if one else 'they replay'} as read, a busted "
            f"print's price too; only a file cleaned first leaves {'it' if one else 'them'} out")


# TAQ's trade correction indicator (WRDS's daily TAQ `TR_CORR`, NYSE Daily TAQ's `Trade Correction Indicator`): 00 a
# regular print, 01 one later corrected (the print stood when it was made); 07, 08 cancels, 10 a cancelled
# correction, 11 and 12 corrections of an earlier print
TAQ_CORRECTIONS = frozenset({"tr_corr", "trade_correction_indicator"})
TAQ_REGULAR = ("00", "01")


def taq_corrections(path: Path, cmap: ColumnMap, schema: Mapping[str, Any], names: Sequence[str] | None,
                     dialect: Dialect | None) -> tuple[ColumnMap, list[str]]:
    """A detected TAQ trades layout whose `TR_CORR` (`Trade Correction Indicator`) marks cancelled or corrected
    prints: only its regular prints (00, 01) are read, the others counted as filtered_out, with a note that says
    how to read them all; a cancelled print's price is no trade, and a correction repeats one already read."""
    column = next((c for c in schema if normal_name(c) in TAQ_CORRECTIONS), None)
    if column is None or cmap.price is None or column in cmap.source_columns():
        return cmap, []
    # the marks as TAQ writes them, "00" and "01": a keep compares a CSV's cells as text, as written, and a
    # Parquet copy's numbers (0 and 1) by value, so the one keep reads both copies, as a map file holds it
    regular = list(TAQ_REGULAR)
    kept = keep_values(regular)
    integer = not is_csv(path) and schema[column].is_integer()
    values = distinct_text(path, names, dialect, column, 20, SAMPLE_ROWS)
    # codes written as numbers are compared by value, a Parquet copy's and a CSV's re-saved without TAQ's leading
    # zero (`0`, as polars, pandas and Excel write 00 back) alike: review390 #3 read that `0` as a correction
    by_value = integer or all(typed_key(v) is not None for v in values)
    others = [v for v in values if (typed_key(v) not in kept.typed if by_value else keep_key(v) not in kept.texts)]
    if not others:
        return cmap, []
    if not integer and any(keep_key(v) not in kept.texts for v in values if typed_key(v) in kept.typed):
        # a CSV's cells are kept as written: its spellings of 00 and 01 beside TAQ's own
        regular += [typed_key(code) for code in TAQ_REGULAR]
    # (a time of day's unit and day too: Daily TAQ's `Time` read as epoch ms rejected every row)
    day = (("ts_unit", "ts_unit"), ("date", "date")) if cmap.ts_unit in DAY_CLOCK_UNITS else ()
    full = ",".join(f"{key}={getattr(cmap, attr)}" for key, attr in (("ts", "ts"), ("stream", "stream_col"),
                                                                        ("price", "price"), ("size", "size"), *day)
                    if getattr(cmap, attr) is not None)
    in_a_file = f"keep: {{{column}: [{', '.join(json.dumps(v) for v in regular)}]}}"  # quoted: YAML's 00 is no text
    note = (f"{path.name}: column {quoted(column)} marks cancelled and corrected prints ({', '.join(others[:6])}): "
            f"only regular prints ({column} {', '.join(regular)}) are read, the others left out and counted as "
            f"filtered_out; a map given in full reads every print ({columns_option(full)}), and the regular ones "
            f"only with {in_a_file} in its file (docs/replay.md)")
    return replace(cmap, keep={**(cmap.keep or {}), column: regular}), [note]
