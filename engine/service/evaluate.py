"""`flashtick evaluate`: a tick model against a quant's first baselines, on the test slice of your own files.

Per codec question, on every labelled answer point of each stream's test part
(engine/service/splits.py; capped by `max_points`, taken as evenly spread runs
of consecutive points; with `batch_ms`, only the last tick of each event-time
batch, where a backtest with that --batch-ms answers): accuracy and Brier of

* `model` - the checkpoint's answer distribution, probed exactly as serving does
  (engine.service.packing.pack_batch), with at least half a window of context, read
  through the checkpoint's calibration (queries.probe_answers.calibrated_probs, as serving);
* `raw` - the same without calibration (softmax over the answer logits), when the
  checkpoint is calibrated;
* `adapted` - what serving publishes with answers.adapt: online (queries/adapt.py): the model's answers mixed,
  per stream, with that stream's realised labels from the start of its test part on (causal: an answer at tick
  t uses labels of ticks up to t - horizon); `adapt=False` leaves it out;
* `adapted_history` (with `adapt_history`) - the same, fed first with the train part's labels and the model's
  answers on some of its ticks: a stream served since its start;
* `prior` - each stream's class frequencies in its train part;
* `majority` - always each stream's most frequent class in its train part (one-hot);
* `logistic` - multinomial logistic regression on microstructure features
  (engine/service/features.py) fitted on the train part's answer points;

and, for model minus each baseline, a 95% block-bootstrap interval: the answer
points (per question, streams one after another, in time order) are cut into
blocks of `block` consecutive points, which are resampled with replacement, so
neighbouring answers whose futures overlap stay together. A calibration table
(and a PNG with matplotlib) for the model.

Its options are engine/service/evaluation_options.py; the checkpoint's loading is engine/service/tick_checkpoint.py;
which ticks are answer points (and their --points-out table) is engine/service/evaluation_points.py; the model's
answers there (probed, calibrated, headed) are engine/service/evaluation_answers.py; each predictor's answers (the
model's forms, the baselines fitted) are engine/service/evaluation_predictors.py; their scores (accuracy, Brier,
bootstrap intervals) are engine/service/evaluation_scores.py; what `evaluate` and `train` print of the result (the
table, the verdict, the plot) is engine/service/evaluation_report.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np

from connectors.codec import BinnedCodec
from connectors.durations import duration_text
from connectors.labels import closes_spanned, ordinary_spacing
from connectors.questions import Question
from connectors.ticks import utc_text
from engine.service.evaluation_answers import answer_logits
from engine.service.evaluation_options import EvalOptions
from engine.service.evaluation_points import batch_last_ticks, burst_share, chosen_ticks, points_table, write_points
from engine.service.evaluation_predictors import history_answers, predictor_probs, scored_entries
from engine.service.evaluation_scores import score_question, scores_by_stream
from engine.service.features import QuestionHead
from engine.service.session_gaps import GAP_NOTE_NS, sampled_note
from engine.service.split_closures import split_closures
from engine.service.splits import StreamData
from engine.service.tick_checkpoint import window_ticks
from engine.service.tick_origins import TickOrigins


def scored_test_points(sd: StreamData, W: int, options: EvalOptions) -> tuple[np.ndarray, np.ndarray, int, int]:
    """One stream's test-part answer points that are scored (ticks, question indices): with `batch_ms`, only the
    batch ends, then at most about `max_points` of them; and how many were labelled and how many were batch ends."""
    ii, qq = sd.points("test")
    labelled = len(ii)
    if options.batch_ms is not None:  # as the backtest rounds it
        at_batch_end = batch_last_ticks(np.array([t.ts for t in sd.ticks], dtype=np.int64),
                                        int(options.batch_ms * 1e6))
        ii, qq = ii[at_batch_end[ii]], qq[at_batch_end[ii]]
    batch_ends = len(ii)
    keep = np.isin(ii, chosen_ticks(np.unique(ii), W - W // 2, options.max_points))
    return ii[keep], qq[keep], labelled, batch_ends


def _sampled(qs: list[Question], streams: list[StreamData]) -> dict[str, str]:
    """The note on streams sampled an hour or more apart as a rule (session_gaps.sampled_note, the backtest's
    words), as the answer points' `sampled_note`; empty without one."""
    note = sampled_note({q.name: q.spec.horizon for q in qs if q.spec.kind != "regime"},
                        {sd.name: ordinary_spacing(sd.ts) for sd in streams})
    return {} if note is None else {"sampled_note": note}


def _across_pauses(sd: StreamData, qs: list[Question], ii: np.ndarray, qq: np.ndarray) -> int:
    """How many of the answer points (ii, qq) have a label that spans a pause of GAP_NOTE_NS or more: a close
    (closes_spanned: a series whose ticks are that far apart as a rule has none)."""
    return sum(int(closes_spanned(sd.ts, q.spec.horizon, GAP_NOTE_NS)[ii[qq == qi]].sum())
               for qi, q in enumerate(qs) if q.spec.kind != "regime")


def _streams_record(streams: list[StreamData]) -> dict[str, dict[str, Any]]:
    """Each stream's tick count, parts (tick index ranges), test span (ns) and parts' event times."""
    return {sd.name: {"ticks": len(sd.ticks), **{p: [r.start, r.stop] for p, r in
                                                 zip(("train", "validation", "test"), sd.parts)},
                      "test_span_ns": (sd.ticks[sd.parts[2].stop - 1].ts - sd.ticks[sd.parts[2].start].ts
                                       if len(sd.parts[2]) else 0),
                      "times": part_times([sd])}
            for sd in streams}


class _Gathered(NamedTuple):
    """Each question's train features and labels and test entries (scored_entries) over every stream, and the test
    part's counts: its labelled points, those --batch-ms keeps, and the scored points whose label spans a pause."""
    train_x: list[list[np.ndarray]]
    train_y: list[list[np.ndarray]]
    test: list[list[Any]]
    labelled: int
    batch_ends: int
    across_pauses: int


def _gathered(model: Any, codec: BinnedCodec, streams: list[StreamData], qs: list[Question], W: int,
              options: EvalOptions, heads: dict[str, QuestionHead],
              advance: Callable[[int], None] | None = None) -> _Gathered:
    """Every stream's train points (for the baselines) and scored test points with the model's answers on them,
    by question: one pass over the streams, each stream's model work done once."""
    train_x, train_y, test = [[] for _ in qs], [[] for _ in qs], [[] for _ in qs]
    labelled, batch_ends = 0, 0  # the test part's labelled points, and those --batch-ms keeps
    across_pauses = 0  # scored points whose label spans a pause of GAP_NOTE_NS or more in event time
    feats = [sd.features for sd in streams]
    for sd, x in zip(streams, feats):
        ii, qq = sd.points("train")
        for qi in range(len(qs)):
            train_x[qi].append(x[ii[qq == qi]])
            train_y[qi].append(sd.labels[ii[qq == qi], qi])
        history = history_answers(model, codec, sd, W, options, advance)  # adapted_history: train answers first
        ii, qq, stream_labelled, stream_batch_ends = scored_test_points(sd, W, options)
        labelled, batch_ends = labelled + stream_labelled, batch_ends + stream_batch_ends
        across_pauses += _across_pauses(sd, qs, ii, qq)
        logits = answer_logits(model, codec, sd, ii, qq, options, advance)
        for qi, entry in enumerate(scored_entries(codec, sd, x, ii, qq, logits, history, heads, options)):
            test[qi].append(entry)
    return _Gathered(train_x, train_y, test, labelled, batch_ends, across_pauses)


def evaluate_streams(model: Any, codec: BinnedCodec, streams: list[StreamData],
                     options: EvalOptions | None = None, heads: dict[str, QuestionHead] | None = None,
                     points_out: Path | None = None, origins: TickOrigins | None = None,
                     record: dict[str, Any] | None = None,
                     advance: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Score `model` on the test part of `streams` against baselines fitted on their train parts (``advance``:
    told the model's windows as they run, for progress); ``heads``:
    the checkpoint's answer heads (read_head), part of its answers ("model", and what "adapted" adapts);
    ``points_out``: a Parquet file to write every scored answer point to (write_points), each naming the file and
    row of its tick (``origins``: read_streams') and holding the run's ``record`` (whose `files` those index)."""
    options = options or EvalOptions()
    heads = heads or {}
    rng = np.random.default_rng(options.seed)
    qs = list(codec.questions.values())
    W = window_ticks(model)
    train_x, train_y, test, labelled, batch_ends, across_pauses = _gathered(model, codec, streams, qs, W, options,
                                                                             heads, advance)
    results, scored_points = {}, []
    for qi, q in enumerate(qs):
        y = np.concatenate([t[1] for t in test[qi]])
        ty = np.concatenate(train_y[qi])
        if len(y) == 0 or len(ty) == 0:
            continue  # e.g. `regime`: no ground truth in files
        probs, prior, own = predictor_probs(codec, qi, q, train_x[qi], train_y[qi], test[qi], options, heads)
        if points_out is not None:
            scored_points.append(points_table(q.name, list(q.labels), y, probs, streams, test[qi], origins))
        results[q.name] = score_question(probs, y, options, rng) | {
            "labels": list(q.labels), "train_points": int(len(ty)), "train_frequencies": prior.round(4).tolist(),
            **({"train_frequencies_by_stream": {sd.name: p.round(4).tolist() for sd, p in zip(streams, own)},
                "by_stream": scores_by_stream(probs, y, [(sd.name, len(t[1])) for sd, t in zip(streams, test[qi])])}
               if len(streams) > 1 else {}),
            "answer_calibration": q.calibration.to_dict(),
            **({"answer_head": {"model_weight": heads[q.name].model_weight}} if q.name in heads else {})}
    if points_out is not None and results:  # a run that scored nothing leaves no file (an empty one read as a result)
        write_points(points_out, scored_points, record)
    return {"questions": results, "window_ticks": W, "options": vars(options),
            "answer_points": {"batch_ms": options.batch_ms, "within_1ms_of_next": round(burst_share(streams), 4),
                              "labelled": labelled, **({"batch_ends": batch_ends} if options.batch_ms else {}),
                              "across_pauses": across_pauses, **_sampled(qs, streams)},
            "calibration_source": codec.calibration.source,
            "streams": _streams_record(streams),
            "part_times": part_times(streams),
            # (no wall time: two runs of the same model and files write the same evaluation.json, review407 #7)
            "split_closures": split_closures(streams)}


# The answer calibration's fitting policy (engine/service/calibrate.py), here beside the scores whose tables say its
# outcome (engine/service/evaluation_report.py): fewer validation points than this leave a question uncalibrated
MIN_POINTS = 200
# A question whose validation answers hold fewer than this of a second answer (volatility on a calm slice: all
# "low") has nothing to calibrate or blend against: fitted there, T and b (and a head's weight) would only make the
# model surer of the one answer, whatever the test part holds. It keeps T = 1, b = 0 and ships no head.
MIN_SECOND_ANSWER = 20


def batch_ms_left_nothing(result: dict[str, Any]) -> str | None:
    """Why nothing was scored when --batch-ms, not the files, took every labelled point of the test part; else None.
    Said with the test part's longest span in a stream: a batch longer than that ends past every labelled tick."""
    points = result["answer_points"]
    if result["questions"] or points["batch_ms"] is None or points["batch_ends"] or not points["labelled"]:
        return None
    spans = [sd["test_span_ns"] for sd in result["streams"].values()]
    batch_ms = int(points["batch_ms"]) if points["batch_ms"] == int(points["batch_ms"]) else points["batch_ms"]
    return (f"--batch-ms {batch_ms} leaves no labelled batch end in the test part (its span: "
            f"{duration_text(max(spans))}{' in its longest stream' if len(spans) > 1 else ''}; "
            f"{points['labelled']:,} labelled ticks without --batch-ms): give a --batch-ms well under that span")


def part_times(streams: list[StreamData]) -> dict[str, list[str] | None]:
    """Each part's first and last event time over `streams`, as UTC text (None: the part is empty): where the
    split fell in time, which tick indices do not say."""
    times = {}
    for i, part in enumerate(("train", "validation", "test")):
        spans = [(sd.ticks[r.start].ts, sd.ticks[r.stop - 1].ts) for sd in streams if len(r := sd.parts[i])]
        times[part] = [utc_text(min(s[0] for s in spans)), utc_text(max(s[1] for s in spans))] if spans else None
    return times
