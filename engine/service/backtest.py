"""Backtests: replay tick files through the very engine that serves live, and score every answer.

In-process, without sockets. Batches are cut by EVENT time (every
``batch_ms`` of tick timestamps the pending ticks are run to completion), so
the answers depend only on the files and the config: the same inputs give a
byte-identical Parquet file. Wall-clock fields are left out of it for that reason.

Scoring: a choice or expectation query that names a codec question is scored
against what the market did next (connectors/labels.py, the one definition used
by training too): accuracy, Brier score, log-loss, and a calibration table and
plot per query, next to the best naive baseline (majority class, "same as the
last interval").

Service glue like server.py (it imports connectors/ and queries/), in a file
of its own because the CLI and tests drive it directly.
"""

from __future__ import annotations

import json
import math
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from connectors.labels import NO_LABEL, label_series, marks_of, persistence_series
from connectors.replay import FileReplay
from connectors.ticks import InvalidTick, Tick
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from queries.cache import Answer

CALIBRATION_BINS = 10


@dataclass
class QueryScore:
    query: str
    answers: int
    scored: int = 0
    accuracy: float | None = None
    brier: float | None = None
    log_loss: float | None = None
    baseline: str | None = None  # the best naive baseline's name
    baseline_accuracy: float | None = None
    calibration: list[dict[str, float]] = field(default_factory=list)


@dataclass
class BacktestReport:
    ticks: int
    rejected: dict[str, int]
    answers: int
    out: Path
    scores: list[QueryScore]

    def summary(self) -> str:
        lines = [f"replayed {self.ticks} ticks ({sum(self.rejected.values())} rejected), "
                 f"{self.answers} answers -> {self.out}",
                 f"{'query':<16}{'answers':>8}{'scored':>8}{'accuracy':>10}{'brier':>8}{'logloss':>9}  baseline"]
        fmt = lambda x: f"{x:.3f}" if x is not None else "-"  # noqa: E731
        for s in self.scores:
            base = f"{s.baseline} {fmt(s.baseline_accuracy)}" if s.baseline else "-"
            lines.append(f"{s.query:<16}{s.answers:>8}{s.scored:>8}{fmt(s.accuracy):>10}{fmt(s.brier):>8}"
                         f"{fmt(s.log_loss):>9}  {base}")
        return "\n".join(lines)


def run_backtest(config: ServiceConfig, files: list[str | Path], queries: str | Path, out: str | Path,
                 columns: Any = None, batch_ms: float = 100.0, max_ticks: int | None = None,
                 progress: bool = True) -> BacktestReport:
    answers: list[Answer] = []
    pipeline = TickPipeline(config)
    pipeline.registry.register_file(queries)
    ticks_by_stream: dict[str, list[Tick]] = defaultdict(list)
    replay = FileReplay(list(files), columns=columns)
    batch_ns = int(batch_ms * 1e6)
    batch_end: int | None = None
    bar = _progress_bar(progress)
    while not replay.done and (max_ticks is None or pipeline.ticks_in < max_ticks):
        want = 4096 if max_ticks is None else min(4096, max_ticks - pipeline.ticks_in)
        for tick in replay.next_batch(want):
            if batch_end is None or tick.ts >= batch_end:  # event-time batch boundary
                answers += pipeline.run_until_idle()
                batch_end = tick.ts - tick.ts % batch_ns + batch_ns
            try:
                pipeline.ingest(tick)
            except InvalidTick as e:
                pipeline.rejected[e.reason] += 1
                continue
            ticks_by_stream[tick.stream].append(tick)
            bar.update(1)
    answers += pipeline.run_until_idle()
    bar.close()
    table = _answer_table(pipeline, answers, ticks_by_stream)
    out = Path(out)
    table.write_parquet(out)
    scores = [_score(name, table.filter(pl.col("query") == name)) for name in sorted(set(table["query"]))]
    out.with_suffix(".scores.json").write_text(json.dumps([vars(s) for s in scores], indent=2) + "\n")
    _plot_calibration(out, scores)  # last: the answers and scores are on disk whatever happens here
    rejected = dict(Counter(replay.rejected) + pipeline.rejected)
    return BacktestReport(pipeline.ticks_in, rejected, len(answers), out, scores)


def _progress_bar(enabled: bool) -> Any:
    from tqdm import tqdm

    return tqdm(unit=" ticks", disable=not enabled or not sys.stderr.isatty(), file=sys.stderr)


def _answer_table(pipeline: TickPipeline, answers: list[Answer], ticks: dict[str, list[Tick]]) -> pl.DataFrame:
    """One row per answer, with the realised label and the naive baselines where the question has them."""
    questions = pipeline.codec.questions
    marks = {stream: marks_of(ts) for stream, ts in ticks.items()}
    realised_cache: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}
    rows = []
    for a in answers:
        spec = pipeline.registry.get(a.query) if a.query in pipeline.registry else None
        question = questions.get(spec.question) if spec is not None and spec.question else None
        realised = persistence = None
        if question is not None and a.stream in marks:
            key = (question.name, a.stream)
            if key not in realised_cache:
                realised_cache[key] = (label_series(question.spec, marks[a.stream]),
                                       persistence_series(question.spec, marks[a.stream]))
            labels, persisted = realised_cache[key]
            i = a.version - 1  # the answer point: just after the stream's tick number `version`
            realised = question.spec.labels[labels[i]] if labels[i] != NO_LABEL else None
            persistence = question.spec.labels[persisted[i]] if persisted[i] != NO_LABEL else None
        probs = a.value.get("probs")
        rows.append({
            "query": a.query, "stream": a.stream, "topic": a.topic, "seq": a.seq, "ticks": a.version,
            "data_ts": a.data_ts,
            "answer": a.value.get("answer") or (max(probs, key=probs.get) if probs else None),
            "expected": a.value.get("expected"), "nll": a.value.get("nll"), "text": a.value.get("text"),
            "probs": json.dumps(probs, sort_keys=True) if probs else None,
            "realised": realised, "persistence": persistence,
            **_metrics(probs, realised),
        })
    schema = {"query": pl.String, "stream": pl.String, "topic": pl.String, "seq": pl.Int64, "ticks": pl.Int64,
              "data_ts": pl.Int64, "answer": pl.String, "expected": pl.Float64, "nll": pl.Float64,
              "text": pl.String, "probs": pl.String, "realised": pl.String, "persistence": pl.String,
              "correct": pl.Boolean, "brier": pl.Float64, "log_loss": pl.Float64}
    return pl.DataFrame(rows, schema=schema).sort(["data_ts", "query", "stream", "seq"])


def _metrics(probs: dict[str, float] | None, realised: str | None) -> dict[str, Any]:
    if not probs or realised is None or realised not in probs:
        return {"correct": None, "brier": None, "log_loss": None}
    best = max(probs, key=probs.get)
    brier = sum((p - (label == realised)) ** 2 for label, p in probs.items())
    return {"correct": best == realised, "brier": brier, "log_loss": -math.log(max(probs[realised], 1e-12))}


def _score(name: str, rows: pl.DataFrame) -> QueryScore:
    score = QueryScore(name, rows.height)
    scored = rows.filter(pl.col("correct").is_not_null())
    if scored.height == 0:
        return score
    score.scored = scored.height
    score.accuracy = float(scored["correct"].mean())
    score.brier = float(scored["brier"].mean())
    score.log_loss = float(scored["log_loss"].mean())
    realised = scored["realised"].to_list()
    majority, count = Counter(realised).most_common(1)[0]
    baselines = {f"majority({majority})": count / len(realised)}
    persisted = scored.filter(pl.col("persistence").is_not_null())
    if persisted.height:
        baselines["same-as-last"] = float((persisted["persistence"] == persisted["realised"]).mean())
    score.baseline, score.baseline_accuracy = max(baselines.items(), key=lambda kv: kv[1])
    score.calibration = _calibration(scored)
    return score


def _calibration(scored: pl.DataFrame) -> list[dict[str, float]]:
    """Reliability table over every (answer row, label): predicted probability vs observed frequency."""
    predicted, observed = [], []
    for probs, realised in zip(scored["probs"], scored["realised"]):
        for label, p in json.loads(probs).items():
            predicted.append(p)
            observed.append(1.0 if label == realised else 0.0)
    return calibration_table(np.array(predicted), np.array(observed))


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


def _plot_calibration(out: Path, scores: list[QueryScore]) -> None:
    curves = {f"{s.query} (n={s.scored})": s.calibration for s in scores if s.calibration}
    plot_calibration(out.with_suffix(".calibration.png"), curves, "flashtick backtest calibration",
                     "flashtick backtest")


def plot_calibration(path: Path, curves: dict[str, list[dict[str, float]]], title: str, who: str) -> bool:
    """A reliability-diagram PNG, when matplotlib is installed (the `bench` extra); False (and a note) without it."""
    if not curves:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"{who}: matplotlib is not installed; skipping the calibration plot "
              "(pip install 'flashtick[bench]')", file=sys.stderr)
        return False
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], color="grey", linestyle="--", linewidth=1, label="perfectly calibrated")
    for label, table in curves.items():
        ax.plot([c["predicted"] for c in table], [c["observed"] for c in table], marker="o", label=label)
    ax.set_xlabel("predicted probability")
    ax.set_ylabel("observed frequency")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
