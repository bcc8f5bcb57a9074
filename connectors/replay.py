"""File replay: Parquet/CSV/JSON-lines/DBN tick files -> one time-ordered, paced, resumable Source.

Each Parquet or CSV file is a polars lazy scan mapped to tick fields by a
`ColumnMap` (connectors/column_map.py: a preset by name, a dict from YAML, or
detected from the columns); a JSON-lines file is read as the table of its objects' fields through a Parquet
copy (connectors/json_lines.py); a Databento DBN file is decoded and reduced to
trades and top of book by connectors/dbn.py. Both kinds of plan (connectors/planning.py makes them) hand out
(row number, wire map) chunks; each batch's ticks' files and rows are kept in `origins` (a backtest's answers
name them). Files are read in chunks of `chunk_rows` rows and merged by
event time with a heap; ties keep file order, then row order, so a replay is
deterministic. A file whose rows are
not in time order is sorted once (stably) by polars before it is read. Rows
that fail `connectors.ticks.validate` are counted by reason in `rejected` and
skipped, never raised: one bad row must not stop a backtest; the first row of
each reason is kept, located (file, line or row, column), in `rejected.examples`.

Speed: `speed=None` replays as fast as the caller polls; `speed=N` releases
each tick when N x the event time elapsed since the first tick has passed on
the monotonic clock; `max_gap_s` cuts the wall wait between two ticks to that many
seconds, skipping the rest of a long gap (a night, a weekend), and each long wait is
kept for the caller to say (`take_long_waits`, connectors/idle_gaps.py). Either way `next_batch` never waits; a
caller that polls late gets the overdue ticks at once (nothing is dropped). Ticks `leave_out`
takes (a feed's, for the ticks its engine already holds) are passed over at
once, never paced: the clock starts at the first tick released.

This module merges and paces; the parts live beside it: the file entries and replay lists given
(connectors/replay_entries.py), the files opened into plans (connectors/opened_files.py), one cursor per file that
reads its rows into ticks (connectors/file_cursor.py), the files checked and noted as a whole (the streams
selected, the time range, cautions across files: connectors/replay_files.py), the rejected rows' counts
(connectors/rejected_rows.py) and what a user does about them (connectors/reject_hints.py).
"""

from __future__ import annotations

import heapq
import math
import time
from itertools import repeat
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import polars as pl

from connectors.archives import truncation_named
from connectors.bars_across_files import stamped_across_files, without_bars_of_later_files
from connectors.cautions import Caution, about_replayed
from connectors.column_map import PRESETS, ColumnMap, preset  # re-exported: replay users import the mapping from here
from connectors.contract_files import contracts_named_apart
from connectors.file_cursor import NO_SEQUENCE, FileCursor
from connectors.file_plan import source_path
from connectors.frame_files import DEFAULT_NAME, NamedFrame, frames_as_files, in_frame_terms
from connectors.idle_gaps import GapCap, LongWait
from connectors.layout import NoTickLayout, detect_columns  # detect_columns re-exported, as the map's names above
from connectors.layout_notes import alike_reads_once
from connectors.map_options import Refine, as_column_map
from connectors.opened_files import OpenedFiles, named_apart
from connectors.price_offsets import offset_of
from connectors.rejected_rows import RejectCounter
from connectors.same_content import same_content_once
from connectors.replay_files import (
    across_files_notes, check_range, found_on_read, message_lines, selection_note, sequence_columns, source_name,
)
from connectors.sequence_watch import SequenceWatch
from connectors.replay_entries import FileSpec, MapSpec, file_spec, once_each, replay_items
from connectors.shared_keeps import shared_keeps
from connectors.source import BEHIND_SAID_S, Source, check_max_ticks, check_snapshot, fingerprint
from connectors.stream_selection import StreamSelection
from connectors.ticks import Tick
from connectors.time_range import TimeRange
from engine.quoting import quoted

__all__ = ["PRESETS", "ColumnMap", "FileReplay", "as_column_map", "detect_columns", "preset", "replay_ticks"]


class FileReplay(Source):
    """Ticks from Parquet/CSV files, merged in event-time order (see the module docstring).

    `files`: a path, or a list of paths, (path, column map) pairs and
    {"path": ..., "columns": ...} dicts (a DataFrame in memory in place of a path: connectors/frame_files.py),
    where a map is a ColumnMap, a preset name or a dict (a folder or a file pattern: the files it stands for,
    connectors/input_paths.py); `columns` is the map for entries without one (None: detect each file's layout
    from its columns). `streams`: names or fnmatch globs of the streams to read (connectors/stream_selection.py;
    None: every stream). `time_range`: the ticks read, by their event time (a TimeRange or a (start, end) pair,
    TimeRange.given: connectors/time_range.py; None: all);
    `range_left_out` counts the rows it left out. `skip_bad_files`: a file that cannot be read (cut short,
    damaged: connectors/unreadable_files.py) is left out, said by name, rather than refusing the replay;
    `skipped_files` lists those and the second copies of a file's bytes (connectors/same_content.py), read once.
    """

    def __init__(
        self,
        files: FileSpec | Sequence[FileSpec],
        *,
        columns: MapSpec | None = None,
        speed: float | None = None,
        max_gap_s: float | None = None,
        chunk_rows: int = 4096,
        streams: str | Sequence[str] | None = None,
        time_range: TimeRange | tuple[Any, Any] | None = None,
        skip_bad_files: bool = False,
    ) -> None:
        if speed is not None and not (isinstance(speed, (int, float)) and 0 < speed < float("inf")):
            raise ValueError("speed must be None (as fast as possible) or a finite x real time > 0, got "
                             f"{quoted(speed)}")
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, int) or chunk_rows < 1:
            raise ValueError(f"chunk_rows must be an int >= 1, got {quoted(chunk_rows)}")
        # a DataFrame held in memory is read through its Parquet copy, as that file would be (frame_files.py)
        files, self._frame_copies = frames_as_files(files)
        found = replay_items(files)  # replay lists' entries; a folder, a pattern no shell expanded: their files
        if not found.items:
            raise ValueError("FileReplay needs at least one file")
        if max_gap_s is not None and speed is None:
            raise ValueError("max_gap_s caps the waits of a paced replay: give speed too")
        GapCap(max_gap_s)  # checks max_gap_s now, before any file is read
        default = as_column_map(columns)
        specs, repeats = once_each([file_spec(item, default) for item in found.items])
        self.speed, self.max_gap_s, self.chunk_rows = speed, max_gap_s, chunk_rows
        self.time_range = TimeRange.given(time_range)  # a (start, end) pair a notebook holds, as well
        self.selection = None if streams is None else StreamSelection(streams)
        self._opened = OpenedFiles(skip_bad_files)  # its copies live while this replay does
        try:
            self._read_files(specs, found.folder_texts, [*found.notes, *repeats])
        except BaseException as e:  # a refusal partway (the second file, after an archive was unpacked): its copies
            if isinstance(e, NoTickLayout):  # a DataFrame's: how to map it from Python, where its index went
                in_frame_terms(e, self._frame_copies)
            self.close()  # go now, not when the exception (its traceback holds this replay) is let go
            raise

    @classmethod
    def from_frame(cls, frame: Any, name: str = DEFAULT_NAME, **options: Any) -> FileReplay:
        """A replay of a DataFrame held in memory (polars, or pandas), read as a Parquet file of its table would be:
        its columns detected (or mapped by ``columns=``), and, without a symbol column, its stream named ``name``
        (connectors/frame_files.py). ``options``: FileReplay's keywords."""
        return cls(NamedFrame(name, frame), **options)

    def _read_files(self, specs: list[tuple[Path, ColumnMap | Refine | None, bool]], folder_texts: dict[Path, Path],
                    found_notes: list[str]) -> None:
        """The files read into plans, checked against the streams and time range asked for, and opened."""
        self.plans, copies_said, copies = same_content_once(named_apart(contracts_named_apart(shared_keeps(
            self._opened.plans_of(specs, folder_texts)))))
        self.plans = stamped_across_files(self.plans)  # (before the range is cut: it cuts at the stamps chosen)
        self._file_notes = [*found_notes, *self._opened.notes, *copies_said]
        # files left out whole, (file, why): unreadable ones (skip_bad_files) and second copies of a file's bytes
        self.skipped_files: list[tuple[str, str]] = [*self._opened.bad_files, *copies]
        self._selection_notes = [] if self.selection is None else [selection_note(self.plans, self.selection)]
        if self.time_range is not None:
            check_range(self.plans, self.time_range)
            self.plans = [plan.within(self.time_range) for plan in self.plans]
        self._dropped_by_query: int | None = None  # rows the plans' lazy queries left out by the range, once counted
        # (before the notes across files: a bar a later file replaces is no longer one of its file's)
        self.plans, replaced_bars = without_bars_of_later_files(self.plans)
        self._venue_notes = replaced_bars + (across_files_notes(self.plans, self.selection) if len(self.plans) > 1
                                             else [])
        self._fingerprint = fingerprint(self.readings())
        self._lines = [message_lines(plan) for plan in self.plans]  # (for `origins`)
        self.rejected = RejectCounter()
        # called once per tick in replay order, before pacing: True leaves the tick out (not released, not waited
        # for); it still counts in `emitted`, the position in the files a snapshot restores
        self.leave_out: Callable[[Tick], bool] | None = None
        self._open()

    @property
    def range_left_out(self) -> int:
        """Rows (a DBN file's records) the time range left out: those the plans' lazy queries dropped (counted
        once, by a scan of the time column) and those left out as they were read."""
        if self.time_range is None:
            return 0
        if self._dropped_by_query is None:
            self._dropped_by_query = sum(plan.range_dropped.select(pl.len()).collect().item() for plan in self.plans
                                         if getattr(plan, "range_dropped", None) is not None)
        return self._dropped_by_query + sum(cursor.outside_rows for cursor in self._cursors)

    def _open(self) -> None:
        self.rejected.clear()
        self.emitted = 0  # positions in the files, resends and leave_out's ticks among them (snapshot, restore)
        self.released = 0  # the ticks released (stats' emitted)
        # the last batch's runs: (file index, the rows list they are a slice of, its start and end)
        self._runs: list[tuple[int, list[int], int, int]] = []
        self._anchor: tuple[int, int] | None = None  # (monotonic ns, event ts) of the first paced tick
        self.behind_s = 0.0  # with `speed`: how late (wall seconds) the last batch's first tick left its due time
        self.most_behind_s = 0.0
        self._behind_ns = 0  # wall time the replay ran behind `speed` (BEHIND_SAID_S or more late), for pace()
        self._paced_to: tuple[int, int] | None = None  # (monotonic ns, event ts) of the last paced tick
        self._kept_not_due: Tick | None = None  # the tick leave_out kept that was not due at the last call
        self.gaps = GapCap(self.max_gap_s)
        # a map's sequence column: its numbers' repeats left out (a recovery feed's resend), its gaps said
        columns = sequence_columns(self.plans)
        self._sequences = SequenceWatch(composite="+" in columns) if columns else None
        self._last_sent_ts: int | None = None  # with `speed`: the event time of the last tick released
        self._gap_measured: Tick | None = None  # the tick whose gap from the last one released was measured
        cursors = self._cursors = [FileCursor(p, self.chunk_rows, self.rejected, self.selection, self.time_range)
                                   for p in self.plans]
        # (ts, (stream, sequence number), file index, cursor): the index is unique, so ties of a time, a stream and a
        # sequence number (or of files without one) go to the earlier file and cursors never compare.
        self._heap = [(c.ticks[0].ts, c.sequences[0], i, c) for i, c in enumerate(cursors) if c.ticks]
        heapq.heapify(self._heap)

    def _due(self, ts: int, now: int) -> bool:
        if self._anchor is None:
            self._anchor = (now, ts)
        wall0, ts0 = self._anchor
        return (now - wall0) * self.speed >= ts - ts0

    def next_batch(self, max_ticks: int) -> list[Tick]:
        check_max_ticks(max_ticks)
        out: list[Tick] = []
        runs: list[tuple[int, list[int], int, int]] = []  # of `out`, for `origins` when asked: no copy per run
        now = time.monotonic_ns() if self.speed is not None else 0
        heap = self._heap
        sent_ts = self._last_sent_ts  # with `speed`: the event time of the last tick released
        watch = self._sequences
        picking = self.leave_out is not None or watch is not None  # a run's ticks taken one by one, not sliced
        while heap and len(out) < max_ticks:
            # Take a run from the earliest file up to the next file's head: one heap update per run, not per tick.
            _, _, i, cur = heap[0]
            bound = min(h[:3] for h in heap[1:3]) if len(heap) > 1 else None
            ticks, sequences, start = cur.ticks, cur.sequences, cur.pos
            stop, j = min(len(ticks), start + max_ticks - len(out)), start
            released, kept_rows = [], []  # with leave_out or a sequence watch: the run's ticks kept, and their rows
            while j < stop and (bound is None or (ticks[j].ts, sequences[j], i) < bound):
                tick = ticks[j]
                # (a kept tick that was not due yet is met again at the next call: each is asked once a tick)
                if watch is not None and tick is not self._kept_not_due and sequences[j] is not NO_SEQUENCE \
                        and watch.repeat(tick, sequences[j][1], cur.plan, cur.rows[j]):
                    j += 1  # a resend: never released, but a position in the files (`emitted`) as leave_out's
                    continue
                if self.leave_out is not None and tick is not self._kept_not_due and self.leave_out(tick):
                    j += 1
                    continue
                if self.speed is not None and tick is not self._gap_measured:
                    self._measure_gap(tick, now, sent_ts)
                if self.speed is not None and not self._due(tick.ts, now):
                    self._kept_not_due = tick
                    break
                if self.speed is not None and not out and (not released if picking else j == start):
                    wall0, ts0 = self._anchor  # how late the batch's first tick leaves: due at wall0 + (ts-ts0)/speed
                    self.behind_s = max(0.0, (now - wall0 - (tick.ts - ts0) / self.speed) / 1e9)
                    self.most_behind_s = max(self.most_behind_s, self.behind_s)
                if picking:
                    released.append(tick)
                    kept_rows.append(cur.rows[j])
                sent_ts = tick.ts
                j += 1
            if j == start:  # the earliest tick is not due yet
                break
            out.extend(released if picking else ticks[start:j])
            self.released += len(released) if picking else j - start
            # (a cursor's rows list is replaced by its next chunk's, never changed: it stays the run's)
            runs.append((i, kept_rows, 0, len(kept_rows)) if picking else (i, cur.rows, start, j))
            self.emitted += j - start
            cur.advance(j)
            if j == len(ticks) and not cur.fill():
                heapq.heappop(heap)
            else:
                heapq.heapreplace(heap, (cur.ticks[cur.pos].ts, cur.sequences[cur.pos], i, cur))
        self._runs = runs
        if out and self.speed is not None:
            self._last_sent_ts = sent_ts
            if self._paced_to is not None and self.behind_s >= BEHIND_SAID_S:  # the time since the last batch: late
                self._behind_ns += now - self._paced_to[0]
            self._paced_to = (now, out[-1].ts)
        return out

    @property
    def origins(self) -> list[tuple[int, int]]:
        """Where each tick of the last batch was read, in its order: (the file's index in `plans`, its row as
        FileCursor numbers it: a CSV's data row after the header, a Parquet file's row index, a JSON-lines file's
        line, a DBN file's record; 0-based). Made when asked (a backtest asks, a feed does not): a batch keeps its
        runs' rows alone."""
        origins: list[tuple[int, int]] = []
        for i, rows, start, end in self._runs:
            lines = self._lines[i]  # a JSON-lines file's rows are its ticks: their lines
            origins.extend(zip(repeat(i), rows[start:end] if lines is None else
                               [lines[row] for row in rows[start:end]]))
        return origins

    def _measure_gap(self, tick: Tick, now: int, last_ts: int | None) -> None:
        """Once per tick before it is released: its wall wait, said when long, and cut to max_gap_s (the replay's
        clock skips the rest of the gap)."""
        self._gap_measured = tick
        if last_ts is None or self._anchor is None or tick.ts <= last_ts:
            return
        skipped = self.gaps.skip_ns(tick.ts - last_ts, self.speed)
        wall0, ts0 = self._anchor = (self._anchor[0], self._anchor[1] + skipped)
        self.gaps.waiting(tick.ts, tick.ts - last_ts, (wall0 + (tick.ts - ts0) / self.speed - now) / 1e9, skipped,
                          self.speed)

    def take_long_waits(self) -> list[LongWait]:
        """The long waits for a next tick begun since the last call (connectors/idle_gaps.py), to be said."""
        waits, self.gaps.waits = self.gaps.waits, []
        return waits

    def pace(self) -> str | None:
        """With `speed`, once the replay fell behind it (the engine's or this machine's pace, not the file's): the
        share of the run it was behind and by how much at most, and whether it caught up by its end (a replay behind
        sends what is due at once, so it does once the hold-up ends) or the speed it reached over the file's clock
        if not; None if it kept up throughout."""
        if self.speed is None or self._paced_to is None or self.most_behind_s < BEHIND_SAID_S:
            return None
        (wall0, ts0), (wall1, ts1) = self._anchor, self._paced_to
        share = self._behind_ns / (wall1 - wall0) if wall1 > wall0 else 1.0
        behind = (f"behind it for {'under 1%' if share < 0.01 else f'{share:.0%}'} of the run, up to "
                  f"{self.most_behind_s:.1f} s (the engine's back-pressure or this machine's load)")
        if self.behind_s < BEHIND_SAID_S:  # its last batch left on time
            return f"--speed {self.speed:g} was kept in the end: {behind}, then caught up"
        reached = (ts1 - ts0) / (wall1 - wall0) if wall1 > wall0 else math.inf
        return f"--speed {self.speed:g} was not kept: {reached:.3g}x reached over the file's clock, {behind}"

    @property
    def done(self) -> bool:
        return not self._heap

    @property
    def notes(self) -> list[str]:
        """What a user should know about how the files were read: a detected layout, renamed streams, times
        that do not look like the unit given."""
        return (self._file_notes + alike_reads_once([note for p in self.plans for note in getattr(p, "notes", ())
                                                     if about_replayed(note, self.selection)])
                + self._venue_notes + self._selection_notes)

    @property
    def cautions(self) -> list[str]:
        """The notes a run says again at its end (cautions.Caution: the data may mean something else than read)."""
        return [note for note in self.notes if isinstance(note, Caution)]

    @property
    def found_notes(self) -> list[str]:
        """What reading the files found on the way, said at a run's end (replay_files.found_on_read)."""
        return found_on_read(self.plans, self._sequences)

    @property
    def sorted_files(self) -> list[Path]:
        """Files that were not in time order and were sorted before replay."""
        return [source_path(p) for p in self.plans if p.sorted_on_read]

    def price_offset_of(self, stream: str) -> float:
        """A stream's --price-offset (a map's price_offset) in these files: the first file's that shifts it, else 0."""
        return next((found for plan in self.plans if (found := offset_of(plan.price_offset, stream))), 0.0)

    def readings(self) -> list[tuple[str, dict[str, Any]]]:
        """(file, how it is read) per plan, in replay order: what the fingerprint digests, for saying what differs
        when a snapshot's fingerprint is not this replay's."""
        # (sorted: the same selection in another order reads the same, and resumes)
        selected = {} if self.selection is None else {"streams": sorted(self.selection.patterns)}
        selected |= {} if self.time_range is None else self.time_range.describe()  # from, to
        return [(source_name(p), p.describe() | selected) for p in self.plans]

    def rows(self) -> int | None:
        """Rows in all the files (valid or not), for a progress total; None when a file cannot say cheaply."""
        counts = []
        for plan in self.plans:
            with truncation_named(plan.path, getattr(plan, "given_name", None)):
                counts.append(plan.row_count())
        return None if None in counts else sum(counts)

    def stats(self) -> dict[str, Any]:
        # emitted: the ticks released; `emitted` (the attribute) counts file positions, resends left out among them,
        # for snapshot and restore
        left_out = {"sequence_repeat": self._sequences.repeats} if self._sequences and self._sequences.repeats else {}
        return {"emitted": self.released, "rejected": dict(self.rejected), **({"left_out": left_out} if left_out
                                                                               else {}), "done": self.done}

    def snapshot(self) -> dict[str, Any]:
        return {"source": "replay", "fingerprint": self._fingerprint, "emitted": self.emitted}

    def restore(self, snapshot: dict[str, Any]) -> None:
        """Reopen the files and skip the ticks already emitted (rejections are recounted on the way)."""
        emitted = check_snapshot(snapshot, "replay", self._fingerprint)
        speed, self.speed = self.speed, None
        self._open()
        while self.emitted < emitted and not self.done:
            self.next_batch(min(self.chunk_rows, emitted - self.emitted))
        self.speed = speed
        if self.emitted < emitted:
            raise ValueError(f"snapshot is at tick {emitted} but the files hold {self.emitted}: did they change?")

    def close(self) -> None:
        """Stop the replay and remove the temporary folders its zip archives and UTF-16 files were unpacked into."""
        self._heap = []
        self._opened.close()
        for copy in self._frame_copies:
            copy.close()

    def __enter__(self) -> FileReplay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def replay_ticks(
    files: FileSpec | Sequence[FileSpec],
    *,
    columns: MapSpec | None = None,
    chunk_rows: int = 4096,
    streams: str | Sequence[str] | None = None,
    time_range: TimeRange | None = None,
) -> Iterator[Tick]:
    """All valid ticks of `files` in merge order, as fast as possible (for backtests).

    Rejected rows are skipped; build a FileReplay directly to read its `rejected` counts.
    """
    replay = FileReplay(files, columns=columns, chunk_rows=chunk_rows, streams=streams, time_range=time_range)
    try:
        while not replay.done:
            yield from replay.next_batch(chunk_rows)
    finally:
        replay.close()
