"""A file's rows in time order: whether an export is written newest first (a REST export's), which rows are out
of sequence among the rows of their time, the stable sort by time (then stream and sequence number) and the note
that says why a file was sorted. connectors/planning.py sorts a tabular file's plan with it, and passes the
newest-first test to connectors/repeated_hour.py, which reads a repeated hour by the file's order."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import polars as pl

from connectors.column_map import ColumnMap
from connectors.durations import duration_text
from connectors.epoch_counts import scaled_ts
from connectors.misread_times import trade_date_caution
from connectors.repeated_hour import RepeatedHour
from connectors.session_dates import EveningsMoved
from engine.quoting import quoted

SEQ = "_seq"  # the row's sequence number (a map's `sequence`), which orders rows of equal times

NEWEST_FIRST_SHARE = 0.99  # of the steps between two times, those back: an export newest first, pages overlapping


def is_newest_first(back_rows: int, forward_rows: int) -> bool:
    """Whether a file is newest first (a REST export: Bybit's, Coinbase's): (nearly) every step between two
    times a step back. Its rows of one time are newest first too, so they are reversed before the stable sort; a
    step forward in 100 is let pass (concatenated pages that overlap), more is a file merged from sources."""
    back, forward = int(back_rows or 0), int(forward_rows or 0)
    return back > 0 and back >= NEWEST_FIRST_SHARE * (back + forward)


def rows_out_of_sequence() -> pl.Expr:
    """Rows whose sequence number is below that of their stream's row before them at the same time, in file order:
    numbers are compared within a stream only (CME's RptSeq, OPRA's per-channel numbers count per instrument)."""
    # a row without a number is rejected, no step: the row after it is compared with the numbered row before it
    numbered = pl.when(pl.col("_ts").is_not_null()).then(pl.col(SEQ)).forward_fill()
    return (numbered.diff().over("_ts", "_stream") < 0).sum()


def in_time_order(path: Path, cmap: ColumnMap, frame: pl.LazyFrame, keys: list[str], facts: Mapping[str, Any],
                  hour: RepeatedHour | None, factor: int, evenings_moved: EveningsMoved | None = None,
                  clock_step: str | None = None) -> tuple[pl.LazyFrame, list[str], int]:
    """The file's rows in time order (reversed first when newest first; rows of equal times by stream and sequence
    number where the map has one), the note that says why they were sorted, and the rows out of sequence.
    `evenings_moved`: a trade date's evening rows were read on the day before (connectors/session_dates.py), so a
    file sorted by trade date then time steps back to them by design: no caution, and the rows it names are said to
    be those, or other streams' where they are not. `clock_step`: the cause when the
    clock stepped back once by about a second (connectors/leap_seconds.clock_step_back), said for the generic one."""
    notes: list[str] = []
    out_of_sequence = int(facts["out_of_sequence"] or 0)
    ties = f"in sequence order (column {quoted(cmap.sequence)}) within each stream" if cmap.sequence is not None else \
        "in file order"
    newest_first = bool(facts["unsorted"]) and is_newest_first(facts["back_rows"], facts["forward_rows"])
    if newest_first:  # rows of one time are newest first too: reversed, the stable sort keeps them oldest first
        frame = frame.reverse()
        ties = ties if cmap.sequence is not None else "in reverse file order (oldest first)"
    if facts["unsorted"] or out_of_sequence:  # stable: rows of equal times (and sequence numbers) keep file order
        # a sequence number orders a stream's own rows (CME's RptSeq counts per instrument): by stream first
        by = ["_ts", *(["stream"] if "stream" in keys else []), SEQ] if cmap.sequence is not None else ["_ts"]
        frame = frame.sort(by, maintain_order=True, nulls_last=True)
    if facts["unsorted"] and _grouped_by_stream(facts) and not (hour and hour.untold) and evenings_moved is None:
        notes.append(f"{path.name}: its rows are grouped by stream, each of its {facts['streams']} streams' rows in "
                     f"time order, one stream's after another's (as LSEG's exports are, by RIC); replayed merged by "
                     f"time, rows of equal times {ties}")
    elif facts["unsorted"]:
        repeated = (f"; in {cmap.tz}, also a wall clock that goes back an hour when summer time ends: the "
                    f"{hour.untold} row(s) in that hour are read at its first pass" if hour and hour.untold else "")
        trade_date = [] if evenings_moved is not None else trade_date_caution(path, cmap, facts)
        forward = int(facts["forward_rows"] or 0)
        cause = (_evenings_cause(evenings_moved, int(facts["back_rows"] or 0)) if evenings_moved is not None else
                 "a trade date's evening rows a day late, as said next" if trade_date else
                 "newest first throughout" if newest_first and not forward else
                 f"newest first, but for {forward} row(s) later than the row before them" if newest_first else
                 clock_step or "newest first, or merged from several sources")
        notes.append(f"{path.name}: its rows are not in time order: {facts['back_rows']} row(s) earlier than the "
                     f"row before them, by up to {duration_text(scaled_ts(facts['largest_back'], factor))} ({cause}"
                     f"{repeated}); replayed {'reversed, then ' if newest_first else ''}sorted by time, rows of "
                     f"equal times {ties}")
        notes += trade_date
    elif out_of_sequence:
        notes.append(f"{path.name}: {out_of_sequence} row(s) of a lower sequence number (column "
                     f"{quoted(cmap.sequence)}) than their stream's row before them at the same time; rows of equal "
                     "times replayed by stream, each stream's in sequence order")
    return frame, notes, out_of_sequence


def _grouped_by_stream(facts: Mapping[str, Any]) -> bool:
    """Whether a file's rows are grouped by stream, each stream's in time order (LSEG's Tick History: all of one
    RIC's rows, then the next's): its steps back are where one stream's rows end and the next's begin, no
    disorder, so no cause of one (newest first, merged sources) is to be guessed."""
    return int(facts["streams"] or 0) > 1 and not int(facts["stream_back_rows"] or 0)


def _evenings_cause(moved: EveningsMoved, back_rows: int) -> str:
    """Which rows of a trade-date file whose evenings were moved a day back are out of time order: the evenings'
    first rows after a day session written before them, or other streams' rows (a thin back month's, written out of
    place), named, never blamed on the evenings (review295 #4)."""
    evenings = "each trade date's evening rows after its day session, read on the day before as said above"
    others = f"rows of {', '.join(moved.others)}" if moved.others else "other rows"
    if moved.back_rows >= back_rows:
        return evenings
    if moved.back_rows:
        return f"{moved.back_rows} of them {evenings}; the others {others}"
    return f"{others}, written out of time order: the evening rows read on the day before are in order"

