"""What a backtest says about labels across pauses in event time: the weekend of FX, an equity's night, a halt.

A label horizon counts ticks, so an answer just before a close is labelled from the ticks after the reopen. With
``answers.session_gap_s`` (backtest --session-gap) such an answer gets no realised label (connectors/labels.py);
this counts, from the answers file, the scored answers whose labels span a pause of GAP_NOTE_NS or more (without the
option, or with a longer one) and the answers the option left unscored, and says both in a note; and it turns the
split-like price steps across such pauses and the steps that stay, a roll's (connectors/price_steps.py), into
cautions.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from connectors.event_time import duration_text
from connectors.labels import MarkSeries, session_gap_text, spanned_gaps
from connectors.price_steps import price_steps
from connectors.questions import QuestionSpec
from connectors.ticks import shown_name, utc_text

GAP_NOTE_NS = 3_600_000_000_000  # a pause of an hour or more (the notes say it in words): another session


def crossing_points(series: Mapping[str, MarkSeries], horizon: int, gap_ns: int) -> pl.LazyFrame:
    """(stream, ticks) of every answer point whose `horizon` crosses a pause of ``gap_ns`` or more (``ticks``: the
    answers file's tick count, the answer point's index + 1)."""
    frames = [pl.DataFrame({"stream": stream, "ticks": np.nonzero(crossed)[0].astype(np.int64) + 1})
              for stream, s in series.items() if (crossed := spanned_gaps(s.ts(), horizon, gap_ns)).any()]
    return (pl.concat(frames) if frames else pl.DataFrame(schema={"stream": pl.String, "ticks": pl.Int64})).lazy()


def widest_pause(series: Mapping[str, MarkSeries], streams: list[str], gap_ns: int) -> tuple[str, int, int, int]:
    """(stream, its pauses of ``gap_ns`` or more, before, after ts) of the widest such pause among ``streams``."""
    widest, count = ("", 0, 0), 0
    for stream in streams:
        ts = series[stream].ts()
        gaps = np.diff(ts)
        if not len(gaps):  # one tick: no pause
            continue
        count += int((gaps >= gap_ns).sum())  # as spanned_gaps counts a pause
        j = int(gaps.argmax())
        if gaps[j] > widest[2] - widest[1]:
            widest = (stream, int(ts[j]), int(ts[j + 1]))
    return widest[0], count, widest[1], widest[2]


def gap_notes(questions: Mapping[str, QuestionSpec], graded: pl.LazyFrame, series: Mapping[str, MarkSeries],
              session_gap_ns: int | None) -> list[str]:
    """The notes on labels across pauses: ``questions`` maps each answered query to its named question's spec (a
    query without one is left out); ``graded`` is the answers file's scored slice."""
    spanning: dict[str, int] = {}  # query -> its scored answers labelled across a pause of GAP_NOTE_NS or more
    left_out: dict[str, int] = {}  # query -> its answers --session-gap left without a label
    streams: set[str] = set()
    crossing: dict[tuple[int, int], pl.LazyFrame] = {}  # (horizon, gap) -> its crossing points, made once

    def crossing_at(horizon: int, gap_ns: int) -> pl.LazyFrame:
        if (horizon, gap_ns) not in crossing:
            crossing[horizon, gap_ns] = crossing_points(series, horizon, gap_ns).collect().lazy()
        return crossing[horizon, gap_ns]

    for query, spec in sorted(questions.items()):
        if spec.kind == "regime":
            continue
        rows = graded.filter(pl.col("query") == query)
        if session_gap_ns is None or session_gap_ns > GAP_NOTE_NS:
            scored = rows.filter(pl.col("correct").is_not_null()).select("stream", "ticks")
            hits = scored.join(crossing_at(spec.horizon, GAP_NOTE_NS), on=["stream", "ticks"],
                               how="semi").select("stream").collect()["stream"]
            if len(hits):
                spanning[query] = len(hits)
                streams.update(hits.unique().to_list())
        if session_gap_ns is not None:
            answered = rows.filter(pl.col("probs").is_not_null()).select("stream", "ticks")
            n = answered.join(crossing_at(spec.horizon, session_gap_ns), on=["stream", "ticks"],
                              how="semi").select(pl.len()).collect().item()
            if n:
                left_out[query] = n
    notes = []
    if left_out:
        notes.append(f"--session-gap {session_gap_text(session_gap_ns)} (answers.session_gap_s): "
                     f"{sum(left_out.values())} answers ({_per_query(left_out)}) have a label horizon across a pause "
                     f"of {session_gap_text(session_gap_ns)} or more in their stream's event times and are not scored "
                     f"(realised left null)")
    if spanning:
        stream, pauses, before, after = widest_pause(series, sorted(streams), GAP_NOTE_NS)
        given = ("" if session_gap_ns is None else
                 f" (within --session-gap {session_gap_text(session_gap_ns)})")
        notes.append(f"{sum(spanning.values())} scored answers ({_per_query(spanning)}) are labelled across a pause "
                     f"of an hour or more in their stream's event times{given} ({pauses} such "
                     f"pause{'s' if pauses != 1 else ''}; the widest: {shown_name(stream)}, "
                     f"{duration_text(after - before)} from {utc_text(before)} to {utc_text(after)}): an answer "
                     f"before a close is scored against the reopen; --session-gap 1h leaves such answers unscored")
    return notes


def _per_query(counts: dict[str, int]) -> str:
    return ", ".join(f"{query} {n}" for query, n in counts.items())


def split_cautions(series: Mapping[str, MarkSeries], session_gap_ns: int | None) -> list[str]:
    """A caution per split-like price step across a pause and per step that stays (a roll), stream by stream in
    name order."""
    return [step.caution(session_gap_ns) for stream in sorted(series)
            for step in price_steps(stream, series[stream].ts(), series[stream].own_prices())]
