"""What a backtest says about labels across pauses in event time: the weekend of FX, an equity's night, a halt.

A label horizon counts ticks, so an answer just before a close is labelled from the ticks after the reopen. With
``answers.session_gap_s`` (backtest --session-gap) such an answer gets no realised label (connectors/labels.py);
this counts, from the answers file, the scored answers whose labels span a pause of GAP_NOTE_NS or more (without the
option, or with a longer one) and the answers the option left unscored, and says both in a note; and it turns the
split-like price steps across such pauses and the steps that stay, a roll's (connectors/price_steps.py), into
cautions. A stream sampled an hour or more apart as a rule (an hourly auction, daily settlements or bars:
connectors/labels.py `ordinary_spacing`) has every tick across such a pause by its sampling: its answers are not
counted as labelled across a close (--session-gap 1h would leave every one unscored), and a note says instead what
its labels span.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import polars as pl

from connectors.bar_questions import horizon_span
from connectors.durations import duration_text
from connectors.labels import MarkSeries, closes_spanned, ordinary_spacing, session_gap_text, spanned_gaps
from connectors.price_steps import price_steps
from connectors.questions import QuestionSpec
from connectors.ticks import shown_name, utc_text

GAP_NOTE_NS = 3_600_000_000_000  # a pause of an hour or more (the notes say it in words): another session


def crossing_points(series: Mapping[str, MarkSeries], horizon: int, gap_ns: int, closes: bool = False
                    ) -> pl.LazyFrame:
    """(stream, ticks) of every answer point whose `horizon` crosses a pause of ``gap_ns`` or more (``ticks``: the
    answers file's tick count, the answer point's index + 1); ``closes``: none of a stream sampled ``gap_ns`` or
    more apart as a rule (`closes_spanned`), for the note on labels across a close."""
    spanned = closes_spanned if closes else spanned_gaps
    frames = [pl.DataFrame({"stream": stream, "ticks": np.nonzero(crossed)[0].astype(np.int64) + 1})
              for stream, s in series.items() if (crossed := spanned(s.ts(), horizon, gap_ns)).any()]
    return (pl.concat(frames) if frames else pl.DataFrame(schema={"stream": pl.String, "ticks": pl.Int64})).lazy()


def crossed_pauses(series: Mapping[str, MarkSeries], points: Mapping[str, list[tuple[np.ndarray, int]]],
                   gap_ns: int) -> list[tuple[str, int, int]]:
    """(stream, before, after ts) of each pause of ``gap_ns`` or more that a label crosses: ``points`` maps a stream
    to its answer points (0-based tick indexes, shape (k,)) with their horizon; a label from tick i crosses the
    pauses between ticks i..i + horizon (`spanned_gaps`). Not every pause of the file: a --test-from slice's answers
    cross the pauses in it (review440 #3: the note named a weekend before the slice, and counted the file's)."""
    pauses = []
    for stream, answered in points.items():
        ts = series[stream].ts()
        wide = np.flatnonzero(np.diff(ts) >= gap_ns)  # (w,) j: the pause between ticks j and j + 1
        covered = np.zeros(len(wide) + 1, dtype=np.int64)  # +1 where a label's run of pauses starts, -1 past its end
        for index, horizon in answered:
            np.add.at(covered, np.searchsorted(wide, index), 1)
            np.add.at(covered, np.searchsorted(wide, index + horizon), -1)
        pauses += [(stream, int(ts[j]), int(ts[j + 1])) for j in wide[np.cumsum(covered)[:-1] > 0]]
    return pauses


def gap_notes(questions: Mapping[str, QuestionSpec], graded: pl.LazyFrame, series: Mapping[str, MarkSeries],
              session_gap_ns: int | None) -> list[str]:
    """The notes on labels across pauses: ``questions`` maps each answered query to its named question's spec (a
    query without one is left out); ``graded`` is the answers file's scored slice."""
    spanning: dict[str, int] = {}  # query -> its scored answers labelled across a pause of GAP_NOTE_NS or more
    left_out: dict[str, int] = {}  # query -> its answers --session-gap left without a label
    points: dict[str, list[tuple[np.ndarray, int]]] = {}  # stream -> its scored answer points across, horizon
    crossing: dict[tuple[int, int, bool], pl.LazyFrame] = {}  # (horizon, gap, closes) -> crossing points, made once

    def crossing_at(horizon: int, gap_ns: int, closes: bool = False) -> pl.LazyFrame:
        if (horizon, gap_ns, closes) not in crossing:
            crossing[horizon, gap_ns, closes] = crossing_points(series, horizon, gap_ns, closes).collect().lazy()
        return crossing[horizon, gap_ns, closes]

    for query, spec in sorted(questions.items()):
        if spec.kind == "regime":
            continue
        rows = graded.filter(pl.col("query") == query)
        if session_gap_ns is None or session_gap_ns > GAP_NOTE_NS:
            scored = rows.filter(pl.col("correct").is_not_null()).select("stream", "ticks")
            hits = scored.join(crossing_at(spec.horizon, GAP_NOTE_NS, closes=True), on=["stream", "ticks"],
                               how="semi").collect()
            if hits.height:
                spanning[query] = hits.height
                for (stream,), ticks in hits.group_by("stream"):
                    points.setdefault(stream, []).append((ticks["ticks"].to_numpy() - 1, spec.horizon))
        if session_gap_ns is not None:
            answered = rows.filter(pl.col("probs").is_not_null()).select("stream", "ticks")
            n = answered.join(crossing_at(spec.horizon, session_gap_ns), on=["stream", "ticks"],
                              how="semi").select(pl.len()).collect().item()
            if n:
                left_out[query] = n
    horizons = {query: spec.horizon for query, spec in sorted(questions.items()) if spec.kind != "regime"}
    spacing = {stream: ordinary_spacing(s.ts()) for stream, s in series.items()}
    notes = [said] if (said := sampled_note(horizons, spacing)) is not None else []
    if left_out:
        notes.append(f"--session-gap {session_gap_text(session_gap_ns)} (answers.session_gap_s): "
                     f"{sum(left_out.values())} answers ({_per_query(left_out)}) have a label horizon across a pause "
                     f"of {session_gap_text(session_gap_ns)} or more in their stream's event times and are not scored "
                     f"(realised left null)")
    if spanning:
        pauses = sorted(crossed_pauses(series, points, GAP_NOTE_NS))
        stream, before, after = max(pauses, key=lambda pause: pause[2] - pause[1])  # (the first stream, in a tie)
        pauses = len(pauses)
        given = ("" if session_gap_ns is None else
                 f" (within --session-gap {session_gap_text(session_gap_ns)})")
        notes.append(f"{sum(spanning.values())} scored answers ({_per_query(spanning)}) are labelled across a pause "
                     f"of an hour or more in their stream's event times{given} ({pauses} such "
                     f"pause{'s' if pauses != 1 else ''}; the widest: {shown_name(stream)}, "
                     f"{duration_text(after - before)} from {utc_text(before)} to {utc_text(after)}): an answer "
                     f"before a close is scored against the reopen; --session-gap 1h leaves such answers unscored")
    return notes


def sampled_note(horizons: Mapping[str, int], spacing: Mapping[str, int]) -> str | None:
    """What the labels of the streams sampled GAP_NOTE_NS or more apart as a rule span (their horizons in their own
    intervals), and that their spacing is no close; None without such a stream or a labelled query. ``horizons``:
    each labelled query's (backtest) or question's (evaluate, train) horizon in ticks; ``spacing``: each stream's
    `ordinary_spacing`. The one note of the three commands."""
    sampled = sorted(stream for stream, ns in spacing.items() if ns >= GAP_NOTE_NS)
    if not sampled or not horizons:
        return None
    one = len({spacing[stream] for stream in sampled}) == 1
    apart = (duration_text(spacing[sampled[0]]) if one else
             "an hour or more (" + ", ".join(f"{shown_name(s)} {duration_text(spacing[s])}" for s in sampled[:3])
             + (", ..." if len(sampled) > 3 else "") + ")")
    by_horizon: dict[int, list[str]] = {}
    for query, h in horizons.items():
        by_horizon.setdefault(h, []).append(query)
    span = "; ".join(f"{' and '.join(queries)}: {h} ticks" + (f", {horizon_span(h, spacing[sampled[0]])}"
                                                                if one else "") for h, queries in by_horizon.items())
    its = "its" if len(sampled) == 1 else "their"
    names = ", ".join(map(shown_name, sampled[:3])) + (f" and {len(sampled) - 3} more" if len(sampled) > 3 else "")
    return (f"{names}: {its} ticks are {apart} apart as a rule (a series "
            f"sampled hourly or daily: an auction's hours, settlements, bars), so a label spans {its} own intervals "
            f"({span}) and {its} pauses of an hour or more are {its} sampling, not closes: not counted as labels "
            f"across a pause, and no --session-gap is advised for {'it' if len(sampled) == 1 else 'them'} (one at "
            f"{its} spacing or under leaves no answer scored)")


def _per_query(counts: dict[str, int]) -> str:
    return ", ".join(f"{query} {n}" for query, n in counts.items())


def split_cautions(series: Mapping[str, MarkSeries], session_gap_ns: int | None,
                   offset_of: Callable[[str], float]) -> list[str]:
    """A caution per split-like price step across a pause and per step that stays (a roll), stream by stream in
    name order; ``offset_of`` a stream's --price-offset, which its prices were read with."""
    return [step.caution(session_gap_ns) for stream in sorted(series)
            for step in price_steps(stream, series[stream].ts(), series[stream].own_prices(), offset_of(stream))]
