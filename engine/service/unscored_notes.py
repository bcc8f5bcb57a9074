"""Why a backtest left answers unscored, and why a query published nothing: the notes under its scores table.

An answer goes unscored when its query names no codec question, when what the market did is none of the labels it
gave, when the file ends (or a --session-gap pause falls) within the question's horizon; a bps-bucketed question
can be saturated on a stream, or not split it (one bucket on nearly every label). Each note names the cause and
the way out, from the answers file's rows.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import polars as pl

from connectors.labels import NO_LABEL_DEFINED, MarkSeries, ordinary_spacing, session_gap_text
from connectors.rejected_rows import RejectCounter
from connectors.saturation import LabelCount, end_buckets, one_class, one_class_note, saturation_note
from connectors.ticks import shown_name
from engine.quoting import quoted, quoted_list
from engine.service.backtest_scores import QueryScore, question_of
from engine.service.pipeline import TickPipeline
from engine.service.rejections import every_tick_refused, lost_streams
from engine.service.session_gaps import crossing_points
from engine.service.tick_origins import TickOrigins
from engine.stream_patterns import unmatched_hint


class UnscoredWhy(NamedTuple):
    """The notes on a backtest's unscored answers, each keyed by query (BacktestReport's fields of the same names)."""
    unscored_why: dict[str, str]  # why none of its answers was scored
    partly_scored_why: dict[str, str]  # why some were not, for a query that scored others
    stream_unscored_why: dict[str, dict[str, str]]  # stream -> why none on it was, for a query that scored others'
    saturated_why: dict[str, str]  # its bps-bucketed question is saturated on some of its streams
    one_class_why: dict[str, str]  # its bps-bucketed question's labels are one inner bucket on some of its streams


def unscored_reasons(pipeline: TickPipeline, scores: list[QueryScore], graded: pl.LazyFrame, answered: set[str],
                     stream_ticks: dict[str, int], marks: Mapping[str, MarkSeries], gap: int | None,
                     bar_spacing: Mapping[str, int] | None = None) -> UnscoredWhy:
    """Why answers of `scores`' queries went unscored, from their `graded` rows of the answers file (the --test-from
    slice), each stream's accepted ticks (`marks`, counted in `stream_ticks`) and the --session-gap (`gap`, ns);
    `bar_spacing`: the streams read from bar files (`bar_streams`), for the saturation note."""
    outside = _outside_labels(graded)
    unscored_why = {s.query: _why_unscored(pipeline, s, graded.filter(pl.col("query") == s.query), stream_ticks,
                                           outside.get(s.query, 0), marks, gap)
                    for s in scores if s.answers and not s.scored}
    stream_unscored_why = {s.query: _stream_unscored_why(pipeline, s, graded.filter(pl.col("query") == s.query),
                                                         stream_ticks, marks, gap)
                           for s in scores if s.scored and any(not p.scored for p in s.by_stream.values())}
    unrealised = _unrealised(graded)
    partly_scored_why = {s.query: _outside_why(pipeline, s, outside[s.query], unrealised.get(s.query, 0))
                         for s in scores if s.scored and outside.get(s.query)}
    saturated_why = {name: why for name in sorted(answered)
                     if (why := _saturated_why(pipeline, name, graded.filter(pl.col("query") == name), bar_spacing))}
    one_class_why = {name: why for name in sorted(answered)
                     if (why := _one_class_why(pipeline, name, graded.filter(pl.col("query") == name)))}
    return UnscoredWhy(unscored_why, partly_scored_why, stream_unscored_why, saturated_why, one_class_why)


def bar_streams(plans: Sequence[Any], origins: TickOrigins, marks: Mapping[str, MarkSeries]) -> dict[str, int]:
    """The streams whose every accepted tick was read from a bar file (a plan the reader read as bars: its note on
    the built-in questions was said at read time) -> their ordinary spacing (ns): the bars' spacing."""
    bar_files = {i for i, plan in enumerate(plans) if getattr(plan, "bars", False)}  # (a DBN plan has no bars)
    return {stream: ordinary_spacing(series.ts()) for stream, series in marks.items()
            if bar_files and (files := origins.files_of(stream)) and files <= bar_files}


def _saturated_why(pipeline: TickPipeline, query: str, rows: pl.LazyFrame,
                   bar_spacing: Mapping[str, int] | None = None) -> str | None:
    """The note for a query whose bps-bucketed question (move_bps_50, volatility_50) is saturated on most of some
    stream's realised labels (`rows`: the query's graded answers), else None."""
    question = question_of(pipeline, query)
    # (a scored_as query's realised column holds its choices, not the bucket labels the note counts)
    buckets = end_buckets(question.spec) if question is not None and question.choice_of is None else None
    if buckets is None:
        return None
    realised = pl.col("realised")
    counts = (rows.filter(realised.is_not_null()).group_by("stream")
              .agg(moved=(realised != buckets.still).sum(), at_ends=realised.is_in(list(buckets.ends)).sum())
              .sort("stream").collect())
    saturated = [stream for stream, moved, at_ends in counts.iter_rows() if LabelCount(moved, at_ends).saturated]
    return saturation_note(question.spec, buckets, saturated, counts.height, bar_spacing) if saturated else None


def _one_class_why(pipeline: TickPipeline, query: str, rows: pl.LazyFrame) -> str | None:
    """The note for a query whose bps-bucketed question's realised labels (`rows`: its graded answers) fall in one
    inner bucket on nearly all of some stream's answers (connectors/saturation.one_class), else None."""
    question = question_of(pipeline, query)
    buckets = end_buckets(question.spec) if question is not None and question.choice_of is None else None
    if buckets is None:
        return None
    counts = (rows.filter(pl.col("realised").is_not_null()).group_by("stream", "realised").len()
              .sort("stream").collect())
    by_stream: dict[str, dict[str, int]] = {}
    for stream, label, n in counts.iter_rows():
        by_stream.setdefault(stream, {})[label] = n
    found = [one for stream, labels in sorted(by_stream.items()) if (one := one_class(stream, labels, buckets))]
    return one_class_note(question.spec, found, len(by_stream)) if found else None


def _outside_labels(rows: pl.LazyFrame) -> dict[str, int]:
    """Per query, its answers whose realised label is none of the labels it gave a probability to (a query asking
    a subset of a question's answers, `choices: [vlow, vhigh]`): what happened is not among them, so such an
    answer has no Brier or accuracy and is not scored."""
    outside = rows.filter(pl.col("realised").is_not_null() & pl.col("probs").is_not_null()
                          & pl.col("correct").is_null())
    return dict(outside.group_by("query").len().collect().iter_rows())


def _unrealised(rows: pl.LazyFrame) -> dict[str, int]:
    """Per query, its answers with no realised label: the file ends before their horizon."""
    pending = rows.filter(pl.col("realised").is_null() & pl.col("probs").is_not_null())
    return dict(pending.group_by("query").len().collect().iter_rows())


def _outside_why(pipeline: TickPipeline, score: QueryScore, outside: int, unrealised: int = 0) -> str:
    """``unrealised``: also say the answers the file ended too early to label, so the counts add up to the answers
    (said only beside the outside ones: every backtest's last answers of a stream have no label yet)."""
    spec = pipeline.registry.get(score.query) if score.query in pipeline.registry else None
    asked = "values" if spec is not None and spec.kind == "expectation" else "choices"
    pending = (f"; {unrealised} with no realised label (the file ends before their horizon)" if unrealised else "")
    return (f"realised label outside this query's {asked} ({outside} of {score.answers} answers): such an answer "
            f"is not scored (docs/queries.md){pending}")


def _why_unscored(pipeline: TickPipeline, score: QueryScore, rows: pl.LazyFrame, stream_ticks: dict[str, int],
                  outside: int, marks: Mapping[str, MarkSeries] | None = None, session_gap_ns: int | None = None
                  ) -> str:
    """Why none of a query's answers (`rows`) was scored: it asks no named question, it asks the hidden regime,
    what the market did was never one of its labels (``outside``: a subset of the question's answers), fewer
    ticks than the question's horizon followed every answer (29 daily settlements and a 50-tick move), or each
    answer's horizon crossed a pause of ``session_gap_ns`` or more in ``marks``' event times, or ran past the
    file's end."""
    question = question_of(pipeline, score.query)
    if question is None:
        return NO_LABEL_DEFINED
    if question.spec.kind == "regime":
        return (f"{question.name} is the synthetic market's hidden regime, which a file of ticks does not record, so "
                f"there is nothing to score it against")
    if outside:
        return _outside_why(pipeline, score, outside)
    followed = rows.select((pl.col("stream").replace_strict(stream_ticks, default=0, return_dtype=pl.Int64)
                            - pl.col("ticks")).max()).collect().item()
    if followed is not None and followed < question.spec.horizon:
        return (f"{question.name} is scored on the next {question.spec.horizon} ticks of the answer's stream, and no "
                f"answer here had more than {followed} after it: its horizon is longer than what followed (more "
                f"ticks per stream, or a question of a shorter horizon, can be scored)")
    if session_gap_ns is not None and marks is not None:
        return _across_gap_why(question.name, question.spec.horizon, rows, marks, session_gap_ns)
    return NO_LABEL_DEFINED


def _across_gap_why(name: str, horizon: int, rows: pl.LazyFrame, marks: Mapping[str, MarkSeries],
                    session_gap_ns: int) -> str:
    """Why a named question's answers went unscored under --session-gap: the answers whose horizon crossed a pause
    that long or longer (counted), the others ending too near their stream's last tick to be labelled."""
    answered = rows.filter(pl.col("probs").is_not_null()).select("stream", "ticks")
    total = answered.select(pl.len()).collect().item()
    crossed = answered.join(crossing_points(marks, horizon, session_gap_ns), on=["stream", "ticks"],
                            how="semi").select(pl.len()).collect().item()
    if not crossed:
        return NO_LABEL_DEFINED
    others = total - crossed
    rest = (f"; the other {others} {'is' if others == 1 else 'are'} within {horizon} ticks of their stream's last "
            f"tick (the file ends before their horizon)") if crossed < total else ""
    return (f"{name} is scored on the next {horizon} ticks of the answer's stream, and {crossed} of its {total} "
            f"answers had those ticks cross a pause of --session-gap {session_gap_text(session_gap_ns)} or "
            f"more (answers.session_gap_s){rest}: such an answer is not scored (a longer --session-gap, or none, "
            f"scores across the pauses)")


def _stream_unscored_why(pipeline: TickPipeline, score: QueryScore, rows: pl.LazyFrame, stream_ticks: dict[str, int],
                         marks: Mapping[str, MarkSeries], session_gap_ns: int | None) -> dict[str, str]:
    """Why none of a query's answers on a stream was scored, for each such stream of a query that answered several
    (`rows`: the query's answers): the reasons a query gets, from that stream's answers alone (a thin stream whose
    answers under --test-from all lie within the question's horizon of its last tick)."""
    unscored = {}
    for stream, part in score.by_stream.items():
        if part.answers and not part.scored:
            own = rows.filter(pl.col("stream") == stream)
            outside = own.filter(pl.col("realised").is_not_null() & pl.col("probs").is_not_null()
                                 & pl.col("correct").is_null()).select(pl.len()).collect().item()
            unscored[stream] = _why_unscored(pipeline, part, own, stream_ticks, outside, marks, session_gap_ns)
    return unscored


def say_silent_queries(pipeline: TickPipeline, answered: set[str], streams: list[str],
                        note: Callable[[str], None], rejected: RejectCounter) -> None:
    """A note for each query that published nothing: its stream selector matched only streams of the files that
    lost every tick (say how, and the way out), none of the streams replayed (say which there were), or its trigger
    never fired."""
    shown = ", ".join(map(shown_name, streams[:8])) + (f", ... ({len(streams)} in all)" if len(streams) > 8 else "")
    lost = lost_streams(rejected.by_stream, set(streams))
    for spec in pipeline.registry.list():
        if spec.name in answered:
            continue
        if not spec.trigger.fires_by_itself:  # said before the run, as skipped
            continue
        if any(spec.matches(stream) for stream in streams):
            note(f"query {quoted(spec.name)} published no answer: its trigger never fired on these ticks")
        elif refused := {stream: reasons for stream, reasons in lost.items() if spec.matches(stream)}:
            note(f"query {quoted(spec.name)} published no answer: its streams {quoted_list(spec.streams)} match "
                 f"{every_tick_refused(refused, rejected.lowest_nonpositive)}")
        else:
            note(f"query {quoted(spec.name)} published no answer: its streams {quoted_list(spec.streams)} match "
                 f"none of the streams replayed ({shown}){unmatched_hint(spec.streams, streams)}")
