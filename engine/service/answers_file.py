"""The answers file a backtest writes: its checkpoint parts scored one at a time and joined in one total order.

The file's bytes depend only on the answers, never on how the run was cut into parts (a resume, the wall clock's
checkpoints): rows follow ANSWER_ORDER and are written in row groups of a fixed size, so memory holds one part.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl

from connectors.labels import MarkSeries
from engine.rust_paths import rust_path
from engine.service.answer_parts import RAW_SCHEMA, AnswerParts
from engine.service.backtest_scores import SCORE_SCHEMA, scored_part
from engine.service.output_paths import said_if_disk_full, write_atomically
from engine.service.pipeline import TickPipeline

ANSWER_ORDER = ["data_ts", "query", "stream", "seq"]  # the answers file's total order: it does not depend on the parts
ROW_GROUP_ROWS = 65_536


def write_answers(pipeline: TickPipeline, parts: AnswerParts, series: dict[str, MarkSeries], out: Path,
                  session_gap_ns: int | None = None, metadata: dict[str, str] | None = None) -> int:
    """Score the answer parts one at a time and write them to `out` in the total order ANSWER_ORDER, the checkpoint
    `parts` marked whole with them (AnswerParts.answers_written); returns the rows written. Memory holds one part
    (a checkpoint's answers), not the run's: a day of answers is written in fixed-size row groups, so the file's
    bytes do not depend on how the run was cut into parts either.
    ``session_gap_ns``: an answer whose horizon crosses a pause that long or longer in event time gets no realised
    label. ``metadata``: the file's Parquet key-value metadata (the run's provenance record, run_record.py)."""
    realised_cache: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    scored: list[Path] = []
    ends: list[tuple[tuple, tuple]] = []  # each scored part's first and last sort key
    rows = 0
    for path in parts.paths():
        part = scored_part(pipeline, pl.read_parquet(rust_path(path)), series, realised_cache, session_gap_ns)
        part = part.sort(ANSWER_ORDER)
        scored.append(path.with_name("scored-" + path.name))  # in the parts' dir: removed with it, or on --resume
        with said_if_disk_full(scored[-1], scored[-1]):
            part.write_parquet(rust_path(scored[-1]))
        rows += part.height
        keys = part.select(ANSWER_ORDER)
        ends.append((keys.row(0), keys.row(-1)))
    if not scored:
        empty = pl.DataFrame(schema=RAW_SCHEMA | SCORE_SCHEMA)
        write_atomically(out, lambda tmp: empty.write_parquet(rust_path(tmp), metadata=metadata),
                         before_rename=lambda whole: parts.answers_written(whole, 0))
        return 0
    # parts follow the replay, so each usually ends before the next begins and they are joined as they are; a
    # file out of time order interleaves them, and they are merged by one (out-of-core) sort instead
    in_order = all(None not in a + b and a <= b for (_, a), (b, _) in zip(ends, ends[1:]))
    answers = (pl.concat([pl.scan_parquet(rust_path(p)) for p in scored]) if in_order
               else pl.scan_parquet([rust_path(p) for p in scored]).sort(ANSWER_ORDER, maintain_order=True))
    # the checkpoint says the answers are whole before they are renamed into place, never after: a stop between the
    # two (a second Ctrl-C) then leaves them to be scored, not replayed again (AnswerParts.written_rows)
    write_atomically(out, lambda tmp: answers.sink_parquet(rust_path(tmp), row_group_size=ROW_GROUP_ROWS,
                                                           metadata=metadata),
                     before_rename=lambda whole: parts.answers_written(whole, rows))
    return rows
