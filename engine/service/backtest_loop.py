"""The backtest loop: ticks from the files into the pipeline, answered at each event-time batch boundary.

Batches are cut by EVENT time (connectors/event_time_batches.py), a batch of more than MAX_BATCH_TICKS ticks into
groups of that many (as `feed replay --batch-ms` sends it in messages of that many, each a live tick group, so the
live run answers where the backtest does), and checkpoints fall on a fixed grid of ticks (FLUSH_TICKS), so which
ticks share a forward, and the answers' bits with it, depend only on the files and the config, never on the wall
clock. A stop request is honoured at a boundary, after a checkpoint.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connectors.encoder import EncodedTick
from connectors.event_time_batches import MAX_BATCH_TICKS, batch_end
from connectors.labels import MarkSeries
from connectors.replay import FileReplay
from connectors.ticks import InvalidTick, Tick
from engine.service.answer_parts import AnswerParts
from engine.service.pipeline import TickPipeline
from engine.service.replay_progress import position_text, show_position, show_read
from engine.service.tick_origins import TickOrigins
from queries.cache import Answer

READ_TICKS = 4096  # ticks taken from the files at a time (also per forward when rebuilding for a resume)
FLUSH_TICKS = 512  # the engine runs until idle at the first batch boundary after each multiple (checkpoints go there)


class BacktestInterrupted(Exception):
    """Stopped (a `stop` that returned true, a Ctrl-C, a signal to the CLI) at an event-time batch boundary after
    a checkpoint, or before the scores of a whole answers file: the same call with ``resume=True`` (the same
    command with --resume) continues. What was kept, for a caller that goes on from it (review354 #7):

    - ``ticks``: the replay ticks whose answers are kept (None: not known where it stopped);
    - ``answers``: the answers kept;
    - ``kept``: where: the checkpoint folder (``OUT.parts``), or the answers file when ``scores_owed``;
    - ``scores_owed``: the answers are whole in the answers file, their scores and plot not made yet;
    - ``resume``: how to go on, in words.
    """

    RESUME = "call run_backtest again with the same arguments and resume=True (the CLI: the same command with --resume)"

    def __init__(self, message: str, *, ticks: int | None = None, answers: int | None = None,
                 kept: Path | None = None, scores_owed: bool = False) -> None:
        super().__init__(message)
        self.ticks, self.answers, self.kept, self.scores_owed = ticks, answers, kept, scores_owed
        self.resume = self.RESUME


def replay_from(pipeline: TickPipeline, replay: FileReplay, parts: AnswerParts, consumed: int,
                marks: dict[str, MarkSeries], origins: TickOrigins, *, batch_ns: int, max_ticks: int | None,
                checkpoint_s: float, stop: Callable[[], bool], bar: Any, chunked: bool) -> int:
    """The backtest loop from tick `consumed` on; returns the replay ticks consumed in all. `origins` gets each
    accepted tick's file and row, and names them in the answers made after it."""
    answers: list[Answer] = []
    batch_ends: int | None = None  # where the current event-time batch ends (connectors.event_time_batches.batch_end)
    group_ticks = 0  # ticks of the current group: a batch of more than MAX_BATCH_TICKS is cut after each that many
    saved_at = time.monotonic()
    next_flush = (consumed // FLUSH_TICKS + 1) * FLUSH_TICKS
    reached: tuple[int, tuple[int, int]] | None = None  # the last tick taken: its event time and its file and row
    while not replay.done and (max_ticks is None or pipeline.ticks_in < max_ticks):
        want = READ_TICKS if max_ticks is None else min(READ_TICKS, max_ticks - pipeline.ticks_in)
        ticks = replay.next_batch(want)
        for tick, origin in zip(ticks, replay.origins):  # (origins: the batch's, set by next_batch)
            # an event-time batch boundary, or a burst's MAX_BATCH_TICKS-th tick: a tick group ends here
            if batch_ends is None or tick.ts >= batch_ends or group_ticks == MAX_BATCH_TICKS:
                answers += pipeline.end_group() if chunked else pipeline.run_until_idle()
                stopping = batch_ends is not None and stop()  # (the first tick ends no batch: none to stop after)
                if stopping or consumed >= next_flush:
                    # a checkpoint holds every answer before `consumed`, so the engine runs until idle for it; at
                    # a fixed tick grid, whether or not the wall clock makes a checkpoint there, so which ticks
                    # share a forward (and the answers' last bits with it) never depends on when checkpoints fell
                    answers += pipeline.run_until_idle()
                    next_flush = (consumed // FLUSH_TICKS + 1) * FLUSH_TICKS
                    if stopping or time.monotonic() - saved_at >= checkpoint_s:
                        parts.save(answers, consumed, origins, pipeline.answer_context)
                        answers, saved_at = [], time.monotonic()
                if stopping:
                    where = f" ({position_text(replay, *reached)})" if reached is not None else ""
                    raise BacktestInterrupted(f"interrupted after {consumed} ticks{where}; {parts.answers} answers "
                                              f"kept in "
                                              f"{parts.dir}; run the same command with --resume (resume=True from "
                                              f"Python) to continue", ticks=consumed, answers=parts.answers,
                                              kept=parts.dir)
                batch_ends = batch_end(tick.ts, batch_ns)  # (a burst's next group: the same window's end)
                group_ticks = 0
                show_read(bar, replay, consumed)
                if reached is not None:
                    show_position(bar, replay, *reached)
            reached = (tick.ts, origin)  # the last tick taken: where a stop after it says the run is
            consumed += 1
            group_ticks += 1
            ingest_tick(pipeline, tick, marks, origins, origin)
    show_read(bar, replay, consumed)
    answers += pipeline.run_until_idle()
    parts.save(answers, consumed, origins, pipeline.answer_context)
    return consumed


def ingest_tick(pipeline: TickPipeline, tick: Tick, marks: dict[str, MarkSeries], origins: TickOrigins,
                origin: tuple[int, int], book: Callable[[EncodedTick], None] | None = None) -> None:
    """One tick into the pipeline (or, with `book`, through its encoders into `book`), counted either way; once
    accepted, its mark and its `origin` (file index, row: FileReplay.origins) are kept for its stream."""
    try:
        if book is None:
            pipeline.ingest(tick)
        else:
            pipeline.encoders.ingest(tick, book)
            pipeline.ticks_in += 1
    except InvalidTick as e:  # the engine's own refusals (a codec that cannot render a tick, too many tokens)
        pipeline.rejected[e.reason] += 1
        pipeline.reject_examples.setdefault(e.reason, f"stream {tick.stream} tick at ts {tick.ts}: {e}")
        return
    marks[tick.stream].append(tick)
    origins.add(tick.stream, *origin)
