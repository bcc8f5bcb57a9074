"""A backtest's scores: each answer against what the market did next, and each query's scores from its answers.

The realised label of an answer is the codec question's (connectors/labels.py, the one definition training uses
too); a query's scores are accuracy, Brier score and log-loss, next to the naive baselines (the class
frequencies, majority class, "same as the last interval") and a calibration table. live_scores.py keeps the same
scores running for `serve`; this module scores a finished answers file, a query at a time.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any, Mapping, NamedTuple

import numpy as np
import polars as pl

from connectors.labels import NO_LABEL, MarkSeries, label_series, persistence_series
from connectors.questions import QuestionSpec
from engine.service.pipeline import TickPipeline
from queries.probe_answers import scored_labels

CALIBRATION_BINS = 10
SCORE_SCHEMA = {"realised": pl.String, "persistence": pl.String, "correct": pl.Boolean, "brier": pl.Float64,
                "log_loss": pl.Float64, "model_correct": pl.Boolean, "model_brier": pl.Float64}


@dataclass
class QueryScore:
    """One query's scores over a backtest's scored answers (``BacktestReport.scores``, ``OUT.scores.json``).

    ``query``: its name. ``answers``: the answers it published; ``scored``: those graded (a realised label known,
    inside the scored part: ``test_from``). ``accuracy``: the share whose most probable label was the realised one.
    ``brier``: the mean multi-class Brier score, sum over labels of (p - [label realised])^2 (0 best, 2 worst).
    ``log_loss``: the mean -ln p of the realised label. ``model_accuracy``, ``model_brier``: the same for the
    model's own answers before adaptation (``answers.adapt: online``), None when not adapted. ``frequency_brier``
    (the table's ``freq.brier``): the Brier of each stream's realised class frequencies as a constant forecast, in
    hindsight, weighted by its scored answers: a ``brier`` at or above it carries no skill. ``baseline`` and
    ``baseline_accuracy``: the better naive forecast (``majority(LABEL)``, each stream's most frequent class, or
    ``same-as-last``, the label realised by the interval before) and its accuracy, over the same scored answers as
    ``accuracy`` (an answer with no interval before it: a miss of same-as-last). ``calibration``: a reliability
    table, one entry per probability bin of tenths (``bin_lo``, ``bin_hi``, ``n`` (answer, label) pairs,
    mean ``predicted`` probability, ``observed`` frequency). ``by_stream``: the same scores from each stream's own
    rows, for a query that answered several streams (empty otherwise); weighted by ``scored``, their accuracy, brier
    and frequency_brier add up to the pooled ones. Every score is None while nothing is scored.
    """
    query: str
    answers: int
    scored: int = 0
    accuracy: float | None = None
    brier: float | None = None
    log_loss: float | None = None
    # the model's own answers before adaptation (answers.adapt: online), on the same rows; None when not adapted
    model_accuracy: float | None = None
    model_brier: float | None = None
    baseline: str | None = None  # the best naive baseline's name
    baseline_accuracy: float | None = None
    # Brier of the realised class frequencies as a constant forecast (1 - sum f^2), each stream's own, weighted
    # by its scored answers: the forecast a model's Brier must beat to carry skill (in hindsight: the
    # frequencies are those of the scored answers); baseline_accuracy's majority class is each stream's too
    frequency_brier: float | None = None
    calibration: list[dict[str, float]] = field(default_factory=list)
    # the same scores from each stream's own rows (of a query that answered several streams): which instrument
    # pulls the pooled row down; weighted by `scored`, their accuracy, brier and freq.brier add up to it
    by_stream: dict[str, QueryScore] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The scores.json entry: the pooled scores, and under `by_stream` each stream's, of the same keys but
        `query` and `by_stream` (present only where the query answered several streams)."""
        pooled = {key: value for key, value in vars(self).items() if key != "by_stream"}
        if not self.by_stream:
            return pooled
        return pooled | {"by_stream": {stream: {key: value for key, value in vars(part).items()
                                                if key not in ("query", "by_stream")}
                                       for stream, part in self.by_stream.items()}}

    @classmethod
    def from_json(cls, entry: dict[str, Any], query: str | None = None) -> QueryScore:
        """A scores.json entry read back (``query``: a `by_stream` entry's, which names none); keys this release
        does not know (a later one's) are left out."""
        known = {f.name for f in fields(cls)} - {"by_stream"}
        pooled = {key: value for key, value in entry.items() if key in known}
        if query is not None:
            pooled["query"] = query
        parts = entry.get("by_stream") or {}
        return cls(**pooled, by_stream={stream: cls.from_json(part, pooled["query"]) for stream, part in parts.items()})


class ScoredQuestion(NamedTuple):
    """What a query's answers are scored against: the named question's spec and, for a text query mapped to it
    (scored_as), each label's choice (the answers' labels); None where the labels are the answers' own."""
    name: str
    spec: QuestionSpec
    choice_of: dict[str, str] | None = None


def question_of(pipeline: TickPipeline, query: str) -> ScoredQuestion | None:
    """The named question a registered query is scored as (a codec question it names, or its scored_as), or None."""
    spec = pipeline.registry.get(query) if query in pipeline.registry else None
    if spec is None or not spec.question:
        return None
    labels = scored_labels(spec, pipeline.codec)
    if labels is not None:
        question = pipeline.codec.scored_questions[spec.scored_as.question]
        return ScoredQuestion(question.name, question, {label: choice for choice, label in labels.items()})
    named = pipeline.codec.questions.get(spec.question)
    return None if named is None else ScoredQuestion(named.name, named.spec)


def scored_part(pipeline: TickPipeline, raw: pl.DataFrame, marks: dict[str, MarkSeries],
                 realised_cache: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]],
                 session_gap_ns: int | None = None) -> pl.DataFrame:
    """One part's answers with the realised label and the naive baselines where the question has them."""
    extra = []
    for query, stream, version, probs, model_probs in raw.select("query", "stream", "ticks", "probs",
                                                                "model_probs").iter_rows():
        question = question_of(pipeline, query)
        realised = persistence = None
        if question is not None and stream in marks:
            key = (question.name, stream)
            if key not in realised_cache:
                series, ts = marks[stream].values(), marks[stream].ts()
                realised_cache[key] = (label_series(question.spec, series, ts=ts, session_gap_ns=session_gap_ns),
                                       persistence_series(question.spec, series, ts, session_gap_ns))
            labels, persisted = realised_cache[key]
            i = version - 1  # the answer point: just after the stream's tick number `version`
            realised = question.spec.labels[labels[i]] if labels[i] != NO_LABEL else None
            persistence = question.spec.labels[persisted[i]] if persisted[i] != NO_LABEL else None
            if question.choice_of is not None:  # scored_as: the realised label as the choice that means it
                realised, persistence = (question.choice_of.get(label) for label in (realised, persistence))
        model = _metrics(json.loads(model_probs) if model_probs else None, realised)
        extra.append({"realised": realised, "persistence": persistence,
                      **_metrics(json.loads(probs) if probs else None, realised),
                      "model_correct": model["correct"], "model_brier": model["brier"]})
    return pl.concat([raw, pl.DataFrame(extra, schema=SCORE_SCHEMA)], how="horizontal")


def first_share(n: int, fraction: float) -> int:
    """How many of ``n`` ticks the first ``fraction`` of them is, rounded down: 70% of 180,000 is 126,000 (the
    float product, 125999.99999999999, lost a tick)."""
    return int(round(n * fraction, 6))


def later_slice(table: pl.LazyFrame, marks: dict[str, MarkSeries], test_from: Any,
                test_starts: Mapping[str, tuple[int, int]] | None = None) -> pl.LazyFrame:
    """The answers given after the first `test_from` of their stream's ticks (answer point = tick `ticks`); a
    stream of ``test_starts`` (stream -> (its ticks in training, its test part's first tick): test_part_starts)
    that has as many ticks here is cut where its test part starts instead, after the gap, as evaluate scores it.
    A `test_from` of an event time (test_start.TestStart): the answers whose data time is then or later."""
    if (ns := getattr(test_from, "ns", None)) is not None:
        return table.filter(pl.col("data_ts") >= ns)
    starts = test_starts or {}
    cut = {stream: starts[stream][1] if stream in starts and starts[stream][0] == len(m)
           else first_share(len(m), test_from) for stream, m in marks.items()}
    return table.filter(pl.col("ticks") > pl.col("stream").replace_strict(cut, default=0, return_dtype=pl.Int64))


def _metrics(probs: dict[str, float] | None, realised: str | None) -> dict[str, Any]:
    if not probs or realised is None or realised not in probs:
        return {"correct": None, "brier": None, "log_loss": None}
    best = max(probs, key=probs.get)
    brier = sum((p - (label == realised)) ** 2 for label, p in probs.items())
    return {"correct": best == realised, "brier": brier, "log_loss": -math.log(max(probs[realised], 1e-12))}


def score_query(name: str, rows: pl.LazyFrame) -> QueryScore:
    """A query's scores from its rows of the answers file, pooled and (of several streams) each stream's; what is
    read is its scored rows' metrics, with the probabilities decoded to floats as they are read (not its answers'
    JSON text)."""
    answers = dict(rows.group_by("stream").len().sort("stream").collect().iter_rows())
    score = QueryScore(name, sum(answers.values()))
    if len(answers) > 1:
        score.by_stream = {stream: QueryScore(name, n) for stream, n in answers.items()}
    scored = rows.filter(pl.col("correct").is_not_null())
    first = scored.select("probs").head(1).collect()
    if first.height == 0:
        return score
    labels = list(json.loads(first.item()))  # one question's labels, on every row (written with sorted keys)
    probs = pl.col("probs").str.json_decode(pl.Struct({label: pl.Float64 for label in labels}))
    scored = scored.select("stream", "correct", "brier", "log_loss", "model_correct", "model_brier", "realised",
                           "persistence", probs).collect()
    _fill_scores(score, scored, labels)
    if score.by_stream:
        for (stream,), part in scored.partition_by("stream", as_dict=True, maintain_order=True).items():
            _fill_scores(score.by_stream[stream], part, labels)
    return score


def _fill_scores(score: QueryScore, scored: pl.DataFrame, labels: list[str]) -> None:
    """`score`'s metrics, baselines and calibration from its `scored` rows (the probabilities decoded)."""
    score.scored = scored.height
    score.accuracy = float(scored["correct"].mean())
    score.brier = float(scored["brier"].mean())
    score.log_loss = float(scored["log_loss"].mean())
    adapted = scored.filter(pl.col("model_correct").is_not_null())
    if adapted.height == scored.height:
        score.model_accuracy = float(adapted["model_correct"].mean())
        score.model_brier = float(adapted["model_brier"].mean())
    score.frequency_brier, majority, majority_accuracy = stream_frequency_baselines(scored)
    baselines = {f"majority({majority})": majority_accuracy}
    if scored["persistence"].is_not_null().any():
        # over every scored answer, as the model's accuracy: one with no interval before it (within `horizon` ticks
        # of its stream's start or a pause) is a miss; averaged over the others only, it beat a model it did not
        hits = (scored["persistence"] == scored["realised"]).fill_null(False)
        baselines["same-as-last"] = float(hits.mean())
    score.baseline, score.baseline_accuracy = max(baselines.items(), key=lambda kv: kv[1])
    score.calibration = _calibration(scored, labels)


def stream_frequency_baselines(scored: pl.DataFrame) -> tuple[float, str, float]:
    """The class-frequency forecast's Brier and the majority class's accuracy, each stream's own (its scored
    answers' realised frequencies) weighted by its scored answers, and the majority's name: one label, or
    "each stream's" where they differ. Never pooled over streams: 8 equities whose vol50 labels were each one
    class (AAPL all `high`, TSLA all `vhigh`) pooled into a Brier of 0.406 that any answers beat, against 0."""
    briers, hits, majorities = 0.0, 0, set()
    for _, realised in scored.group_by("stream", maintain_order=True):  # one order: the same float sum each run
        counts = Counter(realised["realised"].to_list())
        label, count = counts.most_common(1)[0]
        briers += realised.height - sum(n * n for n in counts.values()) / realised.height  # n_s (1 - sum f^2)
        hits += count
        majorities.add(label)
    return briers / scored.height, majorities.pop() if len(majorities) == 1 else "each stream's", hits / scored.height


def _calibration(scored: pl.DataFrame, labels: list[str]) -> list[dict[str, float]]:
    """Reliability table over every (answer row, label): predicted probability vs observed frequency."""
    probs = scored["probs"].struct.unnest()
    predicted = probs.select(labels).to_numpy().astype(np.float64)  # (rows, labels); NaN: a label not answered
    observed = np.stack([(scored["realised"] == label).to_numpy() for label in labels], axis=1).astype(np.float64)
    answered = ~np.isnan(predicted)
    return calibration_table(predicted[answered], observed[answered])  # row by row, labels in order, as answered


def calibration_table(predicted: np.ndarray, observed: np.ndarray) -> list[dict[str, float]]:
    """Bin (probability, 0/1 outcome) pairs into CALIBRATION_BINS equal-width bins: mean predicted vs observed."""
    bins = np.minimum((predicted * CALIBRATION_BINS).astype(int), CALIBRATION_BINS - 1)
    table = []
    for b in range(CALIBRATION_BINS):
        mask = bins == b
        if mask.any():
            table.append({"bin_lo": b / CALIBRATION_BINS, "bin_hi": (b + 1) / CALIBRATION_BINS, "n": int(mask.sum()),
                          "predicted": float(predicted[mask].mean()), "observed": float(observed[mask].mean())})
    return table
