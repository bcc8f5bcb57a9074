"""`flashtick ticklog export`: a data directory's tick log read back as a tick file that `flashtick backtest` and
`flashtick feed replay` read with no preset or column map.

The file holds every accepted tick the log retains, in log order (arrival order: each stream's ticks in its own
time order), in the wire's columns (connectors/ticks.py): ``stream, ts, kind, price, size, side, bid, ask,
bid_size, ask_size, seq``, ``ts`` int64 ns, ``seq`` uint64 (null for a tick sent without one: `feed replay` sends it
again as the wire's seq, so a serve holding the ticks drops them as duplicates), a column no exported tick has left
out; in a CSV, a stream name a spreadsheet
would run as a formula has a leading ``'``, which flashtick's CSV reader takes off (connectors/formula_guard.py).
Pre-tokenized items carry tokens, not prices: they are counted and left out, as are the log's own records (segment
starts, expiries). The ticks of a stream logged before a ``{forgotten: stream}`` record (`flashtick forget`: an
operator dropped the stream, often for a forged tick stamped ahead of the clock) are left out and counted too: a
restart drops them there, so the file holds what the service holds and a backtest of it answers as the service did.
Prices are written as the venue printed them: a service whose model was trained with --price-offset adds it at
ingest and logs the shifted ticks; the offset it applied (meta.json's ingest_price_offset) is taken off again and
named in a Parquet export's metadata, so `feed replay` of the export into that service shifts them once, not twice.
So are the ticks of a message whose end the log lacks (message_ends.py: a kill as it was read in, or a message being
read in as the export began), which a restart drops too.

Nothing in the data directory is written or locked, so an export runs beside a `flashtick serve` using it: it reads
the records logged when it began, up to the last whole one (log_reading.read_unchanged). A damaged record follows a
restart's rules without their repairs: a torn tail is left out of the file (never cut from the log), damage
before it stops the export with the file and byte offset unless ``skip_corrupt``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import polars as pl

from connectors.formula_guard import GUARD_NEEDED, guarded
from connectors.price_offsets import PriceOffset, checked_price_offset, shown_offset
from connectors.stream_selection import StreamSelection
from connectors.ticks import counted, utc_text
from connectors.time_range import TimeRange
from connectors.wire_offsets import unshifted_tick
from engine.path_words import shown_path
from engine.rust_paths import rust_path
from engine.service.log_format import segments
from engine.service.log_reading import CorruptLog, read_unchanged
from engine.service.log_stats import LogStats
from engine.service.message_ends import MESSAGE_START, is_item, item_ticks, whole_messages
from engine.service.output_paths import said_if_disk_full, write_atomically
from engine.service.reading_record import INGEST_PRICE_OFFSET
from engine.text_files import read_text
from engine.service.ticklog import FORGOTTEN, LOGGED, SEGMENT_START

COLUMNS: dict[str, Any] = {"stream": pl.String, "ts": pl.Int64, "kind": pl.String, "price": pl.Float64,
                           "size": pl.Float64, "side": pl.String, "bid": pl.Float64, "ask": pl.Float64,
                           "bid_size": pl.Float64, "ask_size": pl.Float64, "seq": pl.UInt64}  # the wire's, in its order
ALWAYS = ("stream", "ts", "kind")
RECORD = "_record"  # a spilled tick's log record number: a later {forgotten: stream} record drops the ticks before it
SPILLED = COLUMNS | {RECORD: pl.Int64}
CHUNK_TICKS = 65_536
SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


def _unended_said(ticks: int, messages: int) -> str:
    """The export's words on the ``ticks`` of ``messages`` whose end the log lacks, each counted (review402 #3: 28
    ticks of 3 messages read as "messages", as if of one stop)."""
    if messages == 1:
        return (f"{counted(ticks, 'tick')} of a message whose end the log lacks (cut short by a stop as it was read "
                f"in, or being read in: a restart drops it too)")
    return (f"{counted(ticks, 'tick')} of {counted(messages, 'message')} whose end the log lacks (each cut short by a "
            f"stop as it was read in, the last perhaps being read in: a restart drops them too)")


class ExportError(ValueError):
    """An export that cannot run or stopped: one line a user can act on."""


@dataclass
class ExportSummary:
    ticks: int = 0  # written
    streams: int = 0
    segments: int = 0
    first_ts: int | None = None
    last_ts: int | None = None
    left_out: int = 0  # ticks outside --streams / --from / --to
    forgotten: int = 0  # ticks (of the selection) logged before a `flashtick forget` of their stream
    forgotten_streams: int = 0  # the streams they are of
    tokenized: int = 0  # pre-tokenized items: no prices to export
    tokenized_ticks: int = 0  # the ticks they hold
    unended: int = 0  # ticks of messages whose end the log lacks (message_ends.py)
    unended_messages: int = 0  # ... and how many messages
    torn_tails: int = 0
    corrupt_skipped: int = 0  # damaged regions --skip-corrupt went past
    corrupt_records: int = 0  # about how many records began in them
    dropped: int = 0  # records retention dropped before the first segment kept (the log's first record number)
    dropped_ticks: int | None = None  # the ticks among them, as that segment's start counts them; None: not said
    formula_names: int = 0  # streams whose names a CSV holds with a leading ' (a spreadsheet would run them)
    price_offset: PriceOffset | None = None  # the service's ingest offset, taken off the logged prices

    def line(self, data_dir: Path, out: Path) -> str:
        """The one line said on stderr: what was written, then what the log held and was not written (and why),
        then what the log no longer holds."""
        span = (f", {utc_text(self.first_ts)} to {utc_text(self.last_ts)}," if self.first_ts is not None else "")
        said = (f"flashtick ticklog export: wrote {counted(self.ticks, 'tick')} of {counted(self.streams, 'stream')}"
                f"{span} to {out} (read from {counted(self.segments, 'segment')} of {data_dir / 'ticks'})")
        skipped = [f"{counted(self.left_out, 'tick')} outside --streams/--from/--to"] * (self.left_out > 0)
        its, them = ("its", "it") if self.forgotten == 1 else ("their", "them")
        skipped += [f"{counted(self.forgotten, 'tick')} of {counted(self.forgotten_streams, 'stream')} logged before "
                    f"a `flashtick forget` of {its} stream (a restart drops {them} too)"] * (self.forgotten > 0)
        skipped += [f"{counted(self.tokenized_ticks, 'pre-tokenized tick')} in {counted(self.tokenized, 'item')} "
                    f"(tokens, no prices)"] * (self.tokenized > 0)
        skipped += [f"{counted(self.corrupt_skipped, 'damaged region')} (--skip-corrupt; about "
                    f"{counted(self.corrupt_records, 'record')} lost with their ticks)"] * (self.corrupt_skipped > 0)
        skipped += [_unended_said(self.unended, self.unended_messages)] * (self.unended > 0)
        skipped += ["an incomplete last record (a torn tail, or one being written)"] * (self.torn_tails > 0)
        if skipped:
            said += "; not written: " + ", ".join(skipped)
        if self.dropped:
            lost = (f"the first {counted(self.dropped, 'record')}" if self.dropped_ticks is None else
                    f"its first {counted(self.dropped_ticks, 'tick')} ({counted(self.dropped, 'record')})")
            said += f"; no longer in the log: {lost}, dropped by retention"
        if self.formula_names:
            said += (f"; {counted(self.formula_names, 'stream name')} beginning with =, +, -, @, a tab or a CR "
                     f"written with a leading ' (a spreadsheet opening the CSV would run it as a formula; "
                     f"flashtick's readers take it off)")
        if self.price_offset is not None:
            said += (f"; prices as the venue printed them: the service's ingest offset "
                     f"{shown_offset(self.price_offset)} (its model's training --price-offset) taken off")
        return said


def recorded_offset(data_dir: Path) -> PriceOffset | None:
    """The price offset the service that wrote ``data_dir`` added at ingest (meta.json's ingest_price_offset, as its
    `health` says it), or None: its logged ticks hold the shifted prices. A directory written before the key was
    recorded says none (read as logged)."""
    try:
        meta = json.loads(read_text(data_dir / "meta.json"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ExportError(f"{data_dir / 'meta.json'}: unreadable ({e}): it says which price offset the service "
                          f"added at ingest, which the export takes off") from None
    try:
        return checked_price_offset(meta.get(INGEST_PRICE_OFFSET)) if isinstance(meta, dict) else None
    except ValueError as e:
        raise ExportError(f"{data_dir / 'meta.json'}: {INGEST_PRICE_OFFSET} {e}") from None


def check_export_paths(data_dir: Path, out: Path) -> None:
    """Raise ExportError, before any work, when ``data_dir`` holds no tick log, or when ``out`` lies in a data
    directory (``data_dir`` or any folder above ``out`` holding ``meta.json`` and ``ticks/``): the export writes
    nothing in one, since it runs beside a serve that owns what is there. One rule for every such path, first
    export or not (a file there is no input of the export, which reads only the tick segments)."""
    data_dir = Path(data_dir).expanduser()
    directory = data_dir / "ticks"
    if not directory.is_dir() or not segments(directory):
        raise ExportError(f"{shown_path(data_dir)} holds no tick log ({shown_path(directory)}/ticks-*.log): give the "
                          f"data directory a "
                          f"`flashtick serve --data-dir` wrote")
    target = out.expanduser().resolve()
    given = data_dir.resolve()
    for folder in target.parents:
        if folder == given or ((folder / "meta.json").is_file() and (folder / "ticks").is_dir()):
            raise ExportError(f"--out {shown_path(out)} is inside the data directory {shown_path(folder)}: the export "
                              f"writes nothing in a "
                              f"data directory (it runs beside a serve using it, which owns what is there); give a "
                              f"path outside it")


def export_ticks(data_dir: Path, out: Path, streams: list[str] | None = None, time_range: TimeRange | None = None,
                 skip_corrupt: bool = False, chunk_ticks: int = CHUNK_TICKS) -> ExportSummary:
    """Write the ticks of ``data_dir``'s tick log to ``out`` (Parquet or CSV by its suffix; written whole or not
    at all); returns what was written. Memory holds one chunk of ``chunk_ticks`` ticks, not the export: each chunk
    goes to a spill file (``OUT.chunks/``) as it fills, and the file is written from them at the end, in row
    groups of ``chunk_ticks`` (a column is left out only once every tick was seen without it)."""
    data_dir = Path(data_dir).expanduser()
    fmt = SUFFIXES.get(out.suffix.lower())
    if fmt is None:
        raise ExportError(f"--out {shown_path(out)}: give a file ending in .parquet (or .pq) or .csv")
    check_export_paths(data_dir, out)
    directory = data_dir / "ticks"
    selection = StreamSelection(streams) if streams else None
    offset = recorded_offset(data_dir)
    summary = ExportSummary(segments=len(segments(directory)), price_offset=offset)
    spill = _Spill(out.with_name(out.name + ".chunks"), chunk_ticks)
    seen: set[str] = set()
    stats = LogStats()
    first_number: int | None = None
    span: tuple[int, int] | None = None  # the selected streams' first and last times, whatever the range
    held = False  # a tick of the selected streams inside the range: else the range is refused, as backtest's is
    try:
        records = ((number, msgpack.unpackb(payload, raw=False)) for number, payload in
                   read_unchanged(directory, skip_corrupt=skip_corrupt, stats=stats, skip_option="--skip-corrupt"))
        for number, record, unended, _ in whole_messages(records):
            if first_number is None:  # past 0: retention dropped the records before it
                first_number = summary.dropped = number
                if number:  # the kept segment's start counts the ticks logged before it (a log of an older one: not)
                    summary.dropped_ticks = record.get(LOGGED) if SEGMENT_START in record else None
            if unended:
                summary.unended += item_ticks(record) if is_item(record) else 0
                summary.unended_messages += bool(record.get(MESSAGE_START))  # (each begins with its first item)
                continue
            tick = record.get("tick")
            if tick is None:
                if "tokenized" in record:  # (the rest: segment starts and expiries, no ticks)
                    summary.tokenized += 1
                    summary.tokenized_ticks += record["tokenized"]["ticks"]
                elif FORGOTTEN in record:
                    spill.forgotten_at[record[FORGOTTEN]] = number
                continue
            seen.add(tick["stream"])
            if selection is not None and not selection.matches(tick["stream"]):
                summary.left_out += 1
                continue
            ts = tick["ts"]
            span = (ts, ts) if span is None else (min(span[0], ts), max(span[1], ts))
            if time_range is not None and not time_range.holds(ts):
                summary.left_out += 1
                continue
            held = True
            spill.add(unshifted_tick(tick, offset), number)  # (as sent: a replay into the service adds it again)
        spill.flush()
        spill.count_kept()
        if selection is not None:
            selection.check(seen)  # a pattern matching none of the logged streams is a typo, not an empty export
        if time_range is not None and span is not None and not held:  # a typo or the wrong clock, as for backtest
            raise ExportError(time_range.holds_none("the log's ticks" + (" of the streams selected" if selection
                                                                         else ""), *span))
        metadata = {INGEST_PRICE_OFFSET: shown_offset(offset)} if offset is not None else None
        write_atomically(out, lambda tmp: spill.write(tmp, fmt, metadata))
        if fmt == "csv":
            summary.formula_names = sum(1 for stream in spill.streams if re.match(GUARD_NEEDED, stream))
    except CorruptLog as e:
        raise ExportError(f"{e.path}: damaged record at byte {e.offset} ({e.why}); nothing was written: "
                          f"--skip-corrupt exports past it (its records are lost), and the log is left as it is")
    finally:
        spill.remove()
    summary.ticks, summary.streams = spill.ticks, len(spill.streams)
    summary.forgotten, summary.forgotten_streams = spill.forgotten, spill.forgotten_streams
    summary.first_ts, summary.last_ts = spill.first_ts, spill.last_ts
    summary.torn_tails, summary.corrupt_skipped = stats.torn_tails, stats.corrupt_skipped
    summary.corrupt_records = stats.corrupt_records
    return summary


class _Spill:
    """The export's ticks, a chunk at a time: the chunk filling (columnar, as read: a tick as Python objects costs
    ~10x its row in a frame), the full chunks on disk beside the output, and what the summary says of the ticks kept
    of them (those of a stream logged before its last forget are not: known only once the log is read)."""

    def __init__(self, directory: Path, chunk_ticks: int) -> None:
        if chunk_ticks < 1:
            raise ValueError(f"chunk_ticks must be >= 1, got {chunk_ticks}")
        self.directory = directory
        self.chunk_ticks = chunk_ticks
        self.columns: dict[str, list[Any]] = {name: [] for name in SPILLED}
        self.paths: list[Path] = []
        self.forgotten_at: dict[str, int] = {}  # stream -> the record number of its last forget
        self.present = {name: False for name in COLUMNS}  # a kept tick has a value in the column: it is written
        self.ticks = 0  # kept
        self.streams: set[str] = set()
        self.first_ts: int | None = None
        self.last_ts: int | None = None
        self.forgotten = self.forgotten_streams = 0  # ticks left out as logged before their stream's forget
        self.remove()  # what an export to the same file killed before its end left
        self.directory.mkdir()

    def add(self, tick: dict[str, Any], number: int) -> None:
        for name in COLUMNS:
            self.columns[name].append(tick.get(name))
        self.columns[RECORD].append(number)
        if len(self.columns["ts"]) == self.chunk_ticks:
            self.flush()

    def flush(self) -> None:
        """The chunk filling, written to the next spill file (nothing when it is empty)."""
        chunk = pl.DataFrame(self.columns, schema=SPILLED)
        self.columns = {name: [] for name in SPILLED}
        if not chunk.height:
            return
        self.paths.append(self.directory / f"chunk-{len(self.paths):06d}.parquet")
        with said_if_disk_full(self.paths[-1], self.paths[-1]):  # polars' own words named no file
            chunk.write_parquet(rust_path(self.paths[-1]), compression="lz4")  # read back soon: speed over size

    def _spilled(self) -> pl.LazyFrame:
        """Every spilled tick, in order, with ``_kept``: not logged before its stream's last forget."""
        ticks = pl.concat([pl.scan_parquet(rust_path(p)) for p in self.paths]) if self.paths else \
            pl.LazyFrame(schema=SPILLED)
        forget_record = pl.col("stream").replace_strict(self.forgotten_at, default=-1, return_dtype=pl.Int64)
        return ticks.with_columns((pl.col(RECORD) > forget_record).alias("_kept"))

    def count_kept(self) -> None:
        """What the summary says, and which columns are written: one pass over the spill, a row per stream."""
        kept = pl.col("_kept")
        per_stream = self._spilled().group_by("stream").agg(
            kept.sum().alias("_ticks"), (~kept).sum().alias("_forgotten"),
            pl.col("ts").filter(kept).min().alias("_min"), pl.col("ts").filter(kept).max().alias("_max"),
            *(pl.col(name).filter(kept).is_not_null().any() for name in COLUMNS if name not in ALWAYS)).collect()
        written = per_stream.filter(pl.col("_ticks") > 0)
        self.ticks, self.streams = int(written["_ticks"].sum()), set(written["stream"])
        self.first_ts, self.last_ts = written["_min"].min(), written["_max"].max()
        self.forgotten = int(per_stream["_forgotten"].sum())
        self.forgotten_streams = per_stream.filter(pl.col("_forgotten") > 0).height
        self.present = {name: name in ALWAYS or bool(written[name].any()) for name in COLUMNS}

    def write(self, path: Path, fmt: str, metadata: dict[str, str] | None = None) -> None:
        """The ticks kept, in order, to ``path``: streamed by polars, a row group at a time; ``metadata``: the
        Parquet file's key-value metadata (a CSV has none: the summary line says it)."""
        ticks = self._spilled().filter(pl.col("_kept")).select(name for name in COLUMNS if self.present[name])
        if fmt == "parquet":
            ticks.sink_parquet(rust_path(path), row_group_size=self.chunk_ticks, metadata=metadata)
        else:  # names come from the wire: one a spreadsheet would take for a formula is quoted as text (OWASP)
            ticks.with_columns(guarded(pl.col("stream")).alias("stream")).sink_csv(rust_path(path))

    def remove(self) -> None:
        """The spill files and their directory gone (only files this export names: nothing else is deleted)."""
        if not self.directory.is_dir():
            return
        for path in self.directory.glob("chunk-*.parquet"):
            path.unlink()
        self.directory.rmdir()
