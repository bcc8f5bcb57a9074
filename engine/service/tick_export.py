"""`flashtick ticklog export`: a data directory's tick log read back as a tick file that `flashtick backtest` and
`flashtick feed replay` read with no preset or column map.

The file holds every accepted tick the log retains, in log order (arrival order: each stream's ticks in its own
time order), in the wire's columns (connectors/ticks.py): ``stream, ts, kind, price, size, side, bid, ask,
bid_size, ask_size``, ``ts`` int64 ns, a column no exported tick has left out. Pre-tokenized items carry tokens,
not prices: they are counted and left out, as are the log's own records (segment starts, expiries).

Nothing in the data directory is written or locked, so an export runs beside a `flashtick serve` using it: it reads
the records logged when it began, up to the last whole one (ticklog.read_unchanged). A damaged record follows a
restart's rules without their repairs: a torn tail is left out of the file (never cut from the log), damage
before it stops the export with the file and byte offset unless ``skip_corrupt``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import polars as pl

from connectors.stream_selection import StreamSelection
from connectors.ticks import counted, utc_text
from connectors.time_range import TimeRange
from engine.service.answer_parts import write_atomically
from engine.service.ticklog import CorruptLog, LogStats, read_unchanged, segments

COLUMNS: dict[str, Any] = {"stream": pl.String, "ts": pl.Int64, "kind": pl.String, "price": pl.Float64,
                           "size": pl.Float64, "side": pl.String, "bid": pl.Float64, "ask": pl.Float64,
                           "bid_size": pl.Float64, "ask_size": pl.Float64}  # the wire's, in its order
ALWAYS = ("stream", "ts", "kind")
CHUNK_TICKS = 65_536
SUFFIXES = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


class ExportError(ValueError):
    """An export that cannot run or stopped: one line a user can act on."""


@dataclass
class ExportSummary:
    ticks: int = 0
    streams: int = 0
    segments: int = 0
    dropped: int = 0  # records retention dropped before the first segment kept (the log's first record number)
    first_ts: int | None = None
    last_ts: int | None = None
    tokenized: int = 0  # pre-tokenized items: no prices to export
    left_out: int = 0  # ticks outside --streams / --from / --to
    torn_tails: int = 0
    corrupt_skipped: int = 0

    def line(self, data_dir: Path, out: Path) -> str:
        """The one line said on stderr."""
        span = (f", {utc_text(self.first_ts)} to {utc_text(self.last_ts)}" if self.first_ts is not None else "")
        notes = [f"{counted(self.left_out, 'tick')} outside --streams/--from/--to left out"] * (self.left_out > 0)
        tokenized = counted(self.tokenized, "pre-tokenized item")
        notes += [f"{tokenized} left out (tokens, no prices)"] * (self.tokenized > 0)
        notes += [f"{counted(self.corrupt_skipped, 'damaged region')} skipped"] * (self.corrupt_skipped > 0)
        notes += ["an incomplete last record left out"] * (self.torn_tails > 0)
        notes += [f"the log's first {counted(self.dropped, 'record')} were dropped by retention (its ticks too)"
                  ] * (self.dropped > 0)
        return (f"flashtick ticklog export: {counted(self.ticks, 'tick')} of {counted(self.streams, 'stream')} from "
                f"{counted(self.segments, 'segment')} of {data_dir / 'ticks'}{span} -> {out}"
                + "".join(f"; {note}" for note in notes))


def export_ticks(data_dir: Path, out: Path, streams: list[str] | None = None, time_range: TimeRange | None = None,
                 skip_corrupt: bool = False) -> ExportSummary:
    """Write the ticks of ``data_dir``'s tick log to ``out`` (Parquet or CSV by its suffix; written whole or not
    at all); returns what was written."""
    data_dir = Path(data_dir).expanduser()
    fmt = SUFFIXES.get(out.suffix.lower())
    if fmt is None:
        raise ExportError(f"--out {out}: give a file ending in .parquet (or .pq) or .csv")
    directory = data_dir / "ticks"
    if not directory.is_dir() or not segments(directory):
        raise ExportError(f"{data_dir} holds no tick log ({directory}/ticks-*.log): give the data directory a "
                          f"`flashtick serve --data-dir` wrote")
    selection = StreamSelection(streams) if streams else None
    summary = ExportSummary(segments=len(segments(directory)))
    columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}
    chunks: list[pl.DataFrame] = []  # columnar as read: a tick as Python objects costs ~10x its row in a frame
    seen: set[str] = set()
    stats = LogStats()
    first_number: int | None = None
    try:
        for number, payload in read_unchanged(directory, skip_corrupt=skip_corrupt, stats=stats,
                                              skip_option="--skip-corrupt"):
            if first_number is None:  # past 0: retention dropped the records before it
                first_number = summary.dropped = number
            record = msgpack.unpackb(payload, raw=False)
            tick = record.get("tick")
            if tick is None:
                summary.tokenized += "tokenized" in record  # (the rest: segment starts and expiries)
                continue
            seen.add(tick["stream"])
            if (selection is not None and not selection.matches(tick["stream"])) or \
                    (time_range is not None and not time_range.holds(tick["ts"])):
                summary.left_out += 1
                continue
            for name, values in columns.items():
                values.append(tick.get(name))
            if len(columns["ts"]) == CHUNK_TICKS:
                chunks.append(pl.DataFrame(columns, schema=COLUMNS))
                columns = {name: [] for name in COLUMNS}
    except CorruptLog as e:
        raise ExportError(f"{e.path}: damaged record at byte {e.offset} ({e.why}); nothing was written: "
                          f"--skip-corrupt exports past it (its records are lost), and the log is left as it is")
    if selection is not None:
        selection.check(seen)  # a pattern matching none of the logged streams is a typo, not an empty export
    frame = pl.concat([*chunks, pl.DataFrame(columns, schema=COLUMNS)])
    frame = frame.select([name for name in COLUMNS if name in ALWAYS or frame[name].null_count() < frame.height])
    write_atomically(out, frame.write_parquet if fmt == "parquet" else frame.write_csv)
    summary.ticks = frame.height
    summary.streams = frame["stream"].n_unique()
    if frame.height:
        summary.first_ts, summary.last_ts = frame["ts"].min(), frame["ts"].max()
    summary.torn_tails, summary.corrupt_skipped = stats.torn_tails, stats.corrupt_skipped
    return summary
