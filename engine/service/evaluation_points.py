"""The answer points `flashtick evaluate` (and `train`'s scores) score: which ticks of a stream's test part they are,
and the table of them that --points-out writes.

Every labelled tick by default; with --batch-ms only the ticks that end an event-time batch, where a backtest with
that width answers (`batch_last_ticks`); how many of a test part's ticks come in bursts, which makes the two differ
(`burst_share`); at most about --max-points of them, as evenly spread runs (`chosen_ticks`). The scoring itself is
engine/service/evaluate.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from connectors.event_time_batches import batch_end
from engine.rust_paths import rust_path
from engine.service.output_paths import write_atomically
from engine.service.splits import StreamData
from engine.service.tick_origins import TickOrigins


BURST_NS = 1_000_000  # ticks closer than this to the next one of their stream are one burst (one order's fills)


def batch_last_ticks(ts: np.ndarray, batch_ns: int) -> np.ndarray:
    """(n,) bool: which of one stream's ticks (event times ``ts``, ns, in replay order) end their event-time batch,
    the ticks a backtest with that batch width answers the stream at (trigger: batch). The backtest cuts the
    merged ticks of every stream where one reaches connectors.event_time_batches.batch_end of the batch's first
    tick; those ends lie on multiples of ``batch_ns``, so a stream's tick ends its batch when its next tick is at or
    past its own batch_end (its stream's last tick always does)."""
    ends = batch_end(ts, batch_ns)
    return np.append(ts[1:] >= ends[:-1], True) if len(ts) else np.zeros(0, dtype=bool)


def burst_share(streams: list[StreamData]) -> float:
    """The share of the test parts' ticks (all streams) stamped within BURST_NS of their stream's next tick."""
    gaps = [np.diff(np.array([t.ts for t in sd.ticks[sd.parts.test.start : sd.parts.test.stop]], dtype=np.int64))
            for sd in streams]
    gaps = np.concatenate(gaps) if gaps else np.zeros(0, dtype=np.int64)
    return float((gaps < BURST_NS).mean()) if len(gaps) else 0.0


def chosen_ticks(ticks: np.ndarray, run: int, max_points: int) -> np.ndarray:
    """At most about `max_points` of the sorted answer ticks: evenly spread runs of `run` consecutive ones."""
    if len(ticks) <= max_points:
        return ticks
    runs = np.array_split(ticks, int(np.ceil(len(ticks) / run)))
    keep = np.unique(np.linspace(0, len(runs) - 1, max(1, max_points // run)).round().astype(int))
    return np.concatenate([runs[k] for k in keep])


def points_table(question: str, labels: list[str], y: np.ndarray, probs: dict[str, np.ndarray],
                 streams: list[StreamData], parts: list[tuple], origins: TickOrigins | None = None) -> pl.DataFrame:
    """One row per scored answer point of `question` (rows in the order they were scored): its stream, tick index
    (0-based, in the stream's ticks as read), the file and row that tick was read from (``origins``, looked up as a
    backtest's answers look theirs up: a point at tick index i is its stream's (i + 1)-th tick; null without
    ``origins``), event time, realised label and each predictor's probabilities."""
    ticks = {sd.name: sd.ticks for sd in streams}
    names = [name for *_, name, ii in parts for _ in ii]
    tick = np.concatenate([ii for *_, ii in parts]).astype(np.int64)
    where = [(origins or TickOrigins()).of(name, i + 1) for name, i in zip(names, tick.tolist())]
    return pl.DataFrame({
        "stream": names, "tick": tick,
        "file": pl.Series([f for f, _ in where], dtype=pl.Int32),
        "row": pl.Series([r for _, r in where], dtype=pl.Int64),
        "data_ts": pl.Series([ticks[name][i].ts for name, i in zip(names, tick.tolist())], dtype=pl.Int64),
        "question": [question] * len(y), "labels": pl.Series([labels] * len(y), dtype=pl.List(pl.String)),
        "realised": [labels[k] for k in y.tolist()],
        **{name: pl.Series(p.tolist(), dtype=pl.List(pl.Float64)) for name, p in probs.items()}})


def write_points(path: Path, tables: list[pl.DataFrame], record: dict[str, Any] | None = None) -> None:
    """Every question's scored answer points in one Parquet file (a predictor a question lacks: null there); with
    the run's ``record`` (its `files` are what the points' `file` indexes) as JSON under the Parquet key-value
    metadata key `flashtick`, as a backtest's answers file holds its own."""
    table = pl.concat(tables, how="diagonal") if tables else pl.DataFrame()
    metadata = None if record is None else {"flashtick": json.dumps(record, sort_keys=True, default=str)}
    write_atomically(path, lambda tmp: table.write_parquet(rust_path(tmp), metadata=metadata))
