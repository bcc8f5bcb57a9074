"""Live scores: every published answer of a named tick question scored against what the market then did.

`flashtick evaluate` and `backtest` score a model after the fact; a service running on an instrument nobody
evaluated should say, while it runs, whether its answers carry skill there. For each standing query on a
named codec question (direction, volatility, move: the questions with a realised answer in
connectors/labels.py) every published answer waits until its stream has `horizon` more ticks, is labelled
exactly as backtests label it, and is scored beside the naive forecast a quant compares with first: the
stream's own class frequencies so far (`prior`, Brier, add-one smoothed: (count + 1) / (n + labels), a uniform
guess before any label; its most frequent class, `majority`, accuracy: a guess among the classes tied for most
frequent, so 1/labels before any label). Both are online: the prior at an answer uses only labels realised before
that answer was scored.

    stats["scores"] = {query: {"scored": n, "accuracy": .., "brier": .., "prior_brier": .., "majority_accuracy": ..,
                               "model_accuracy": .., "model_brier": .. (the model's own answers, `model_probs`,
                               where answers.adapt published a mix; else None),
                               "pending": answers waiting for their future, "unscorable": ..,
                               "across_gap": answers whose horizon crossed a pause of
                               answers.session_gap_s or more (not scored),
                               "outside_labels": answers whose realised label is none of the query's own, and
                               "unscored_why" (where there are such): that, said with the count,
                               "worse_than_prior": [{"stream", "scored", "brier", "prior_brier"}, ...],
                               "thin_streams": {"streams", "scored", "brier", "prior_brier"},
                               "saturated_streams": n, "saturated_why" (where n is not 0): the note}}

`worse_than_prior` names the streams (worst first, at most 5, each with 100 answers scored or more) where
the query's answers score worse than that stream's own class frequencies: with many instruments, where
the model needs fine-tuning. `thin_streams` pools the streams with fewer answers scored than that (a chain of
option series that each tick a few times never reaches it): their answers' Brier beside their class frequencies'.
`saturated_streams` counts the streams where a question bucketed in bps (move_bps_50, volatility_50) is saturated
(connectors/saturation.py: most realised labels that show a move in an end bucket, wherever one step of the price
is many bps: a tick large against the price, a price near zero, rows a day apart).

Scores count from when the process started (a restart starts them afresh; the answers themselves are
unaffected: this only reads them). A stream fed already-tokenized ticks has no prices to label with and is
not scored (`unscorable`), nor is the `regime` question (its ground truth exists on synthetic data only). A
query asking a subset of a question's answers (`choices: [up, down]`) scores only the answers whose realised
label is one of its own: the others are counted (`outside_labels`), as a backtest counts them.
Memory per stream is the marks since the oldest answer still waiting, plus those the engine has not yet
committed (``committed`` says how far it got), never the whole history.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from connectors.encoder import EncodedTick
from connectors.labels import NO_LABEL, MarkTracker, label_series
from connectors.questions import QuestionSpec
from connectors.saturation import EndBuckets, LabelCount, end_buckets, saturation_note
from connectors.ticks import Tick
from engine.service.features import FeatureTracker
from queries.cache import Answer
from queries.spec import QuerySpec

PRUNE_EVERY = 256  # marks dropped from a stream's front in batches (a list slice per tick would be quadratic)
WORST_STREAMS = 5  # streams named per query where its answers score worse than the stream's class frequencies
WORST_MIN_SCORED = 100  # ... once that many of its answers there are scored (fewer say little)


@dataclass
class QueryScore:
    scored: int = 0
    correct: int = 0
    brier: float = 0.0
    prior_brier: float = 0.0
    majority_correct: float = 0.0  # expected hits of the majority guess (a tie: a share of one)
    unscorable: int = 0
    outside_labels: int = 0  # realised, but as a label the query did not ask about (a subset of the answers)
    across_gap: int = 0  # left unlabelled: the horizon crossed a pause of answers.session_gap_s or more
    # the model's own answers (``model_probs``, beside what answers.adapt published), on the same answers
    model_scored: int = 0
    model_correct: int = 0
    model_brier: float = 0.0

    def add(self, correct: bool, brier: float, prior_brier: float, majority_correct: float,
            model: tuple[bool, float] | None = None) -> None:
        self.scored += 1
        self.correct += int(correct)
        self.brier += brier
        self.prior_brier += prior_brier
        self.majority_correct += majority_correct
        if model is not None:
            self.model_scored += 1
            self.model_correct += int(model[0])
            self.model_brier += model[1]

    def mean(self, total: float, count: int | None = None) -> float | None:
        count = self.scored if count is None else count
        return round(total / count, 6) if count else None

    def summary(self, pending: int) -> dict[str, Any]:
        return {"scored": self.scored, "accuracy": self.mean(self.correct), "brier": self.mean(self.brier),
                "prior_brier": self.mean(self.prior_brier), "majority_accuracy": self.mean(self.majority_correct),
                "model_accuracy": self.mean(self.model_correct, self.model_scored),
                "model_brier": self.mean(self.model_brier, self.model_scored),
                "pending": pending, "unscorable": self.unscorable, "outside_labels": self.outside_labels,
                "across_gap": self.across_gap}


@dataclass
class StreamMarks:
    """One stream's marks by tick count: ``marks[i - base]`` is the mark after its i-th tick (1-based)."""

    tracker: MarkTracker = field(default_factory=MarkTracker)
    marks: list[float] = field(default_factory=list)
    times: list[int] = field(default_factory=list)  # times[i - base]: the event time of its i-th tick, beside marks
    # with a book that keeps them (the answer adaptation, for answer heads): features[i - base] beside marks[i - base]
    feature_tracker: FeatureTracker | None = None
    features: list[np.ndarray] = field(default_factory=list)
    base: int = 1
    ticks: int = 0
    tokenized: bool = False  # it got ticks without prices: its counts no longer match the engine's
    waiting: dict[str, deque[Waiting]] = field(default_factory=dict)  # query -> its answers, oldest first
    seen: dict[str, np.ndarray] = field(default_factory=dict)  # query -> realised label counts so far
    scores: dict[str, QueryScore] = field(default_factory=dict)  # query -> its scores on this stream
    # query -> its realised labels that moved and those in an end bucket, for a bps-bucketed question's
    realised: dict[str, LabelCount] = field(default_factory=dict)

    def mark_after(self, tick_count: int) -> float | None:
        i = tick_count - self.base
        return self.marks[i] if 0 <= i < len(self.marks) and tick_count >= 1 else None

    def features_after(self, tick_count: int) -> np.ndarray | None:
        """(F,) the microstructure features after the stream's ``tick_count``-th tick, where they are kept."""
        i = tick_count - self.base
        return self.features[i] if 0 <= i < len(self.features) and tick_count >= 1 else None

    def drop_before(self, tick_count: int) -> None:
        """Forget the marks (and features) of ticks before ``tick_count``."""
        drop = tick_count - self.base
        del self.marks[:drop]
        del self.times[:drop]
        del self.features[:drop]
        self.base = tick_count

    def label(self, spec: QuestionSpec, point: int, session_gap_ns: int | None = None) -> int:
        """The realised label index of the answer point just after tick ``point`` (its mark and ``horizon``
        more must be kept: ``point + horizon <= ticks``); NO_LABEL where labels.py gives none (with
        ``session_gap_ns``: also where the horizon crosses a pause that long or longer in event time)."""
        span = slice(point - self.base, point - self.base + spec.horizon + 1)  # the answer point, `horizon` more
        times = np.asarray(self.times[span], dtype=np.int64) if session_gap_ns is not None else None
        return int(label_series(spec, np.asarray(self.marks[span]), ts=times, session_gap_ns=session_gap_ns)[0])


def majority_hit(counts: np.ndarray, y: int) -> float:
    """The expected accuracy on realised label ``y`` of guessing the most frequent label so far (``counts``, in the
    query's label order), a tie broken uniformly: 1/m when ``y`` is one of the m labels seen most often, else 0; so
    1/labels before any label. (``counts.argmax()`` took the first label listed: a stream's first answer counted
    as a hit whenever its label was the query's first, so the score depended on the order the labels are listed.)"""
    most = counts == counts.max()
    return float(most[y]) / int(most.sum())


class StreamMarksBook:
    """Every accepted tick's mark, per stream, for what labels answers after the fact (live scores here, the
    answer adaptation in adaptation.py); ``_marked`` and ``_lost_prices`` are what each does with them."""

    def __init__(self, questions: Mapping[str, Any], committed: Callable[[str], int], enabled: bool = True,
                 features: bool = False, session_gap_ns: int | None = None) -> None:
        # answers.session_gap_s: labels end at a pause that long or longer in event time
        self.session_gap_ns = session_gap_ns
        # named questions with a realised answer: {name: QuestionSpec}; none when disabled (then nothing is kept)
        self.questions = {name: q.spec for name, q in questions.items()
                          if enabled and hasattr(q, "spec") and q.spec.kind != "regime"}
        self.committed = committed  # the engine's committed tick count of a stream (answers come at or after it)
        self.streams: dict[str, StreamMarks] = {}
        self.keep_features = features and bool(self.questions)  # each tick's microstructure features beside its mark

    def accepted(self, item: EncodedTick) -> None:
        """An accepted ingest item, live or replayed from the tick log after a restart: a raw tick's price
        labels the answers before it; tokens alone leave the stream without labels."""
        if not self.questions:  # disabled, or a model without such questions (a text codec's): nothing to label
            return
        if item.tick is not None:
            self.observe(item.tick)
        else:
            self.tokenized(item.stream, item.ticks)

    def observe(self, tick: Tick) -> None:
        """An accepted tick, in its stream's order (live and when a restart replays the tick log)."""
        state = self.streams.get(tick.stream)
        if state is None:
            state = self.streams[tick.stream] = StreamMarks()
        state.ticks += 1
        if state.tokenized:  # its tick counts no longer line up with marks: nothing more to keep
            return
        mark = state.tracker.update(tick)
        state.marks.append(mark)
        state.times.append(tick.ts)
        if self.keep_features:
            if state.feature_tracker is None:
                state.feature_tracker = FeatureTracker()
            state.features.append(state.feature_tracker.update(tick, mark))
        self._marked(tick.stream, state)

    def tokenized(self, stream: str, ticks: int) -> None:
        """Ticks that came already tokenized: no prices, so this stream's answers can no longer be labelled."""
        state = self.streams.setdefault(stream, StreamMarks())
        state.tokenized = True
        state.ticks += ticks
        state.marks.clear()
        state.times.clear()
        state.features.clear()
        self._lost_prices(stream, state)

    def _marked(self, stream: str, state: StreamMarks) -> None:
        """A new mark was kept for ``stream``."""

    def _lost_prices(self, stream: str, state: StreamMarks) -> None:
        """``stream`` went tokenized: its marks are gone."""

    def drop_stream(self, stream: str) -> None:
        self.streams.pop(stream, None)

    def start_at(self, stream: str, ticks: int) -> None:
        """``stream``'s first ``ticks`` ticks are gone (a tick log's retention): its marks count on from there."""
        if self.questions:
            self.streams[stream] = StreamMarks(base=ticks + 1, ticks=ticks)


class Waiting(NamedTuple):
    """A published answer waiting for its future: what scoring it needs, not the answer (a stream keeps one per
    query for each of its last `horizon` ticks: thousands of streams hold hundreds of thousands of these)."""

    version: int  # the tick count it answered
    spec: QuestionSpec
    labels: tuple[str, ...]  # the query's answers, in its order
    probs: np.ndarray  # (labels,) what was published
    model: np.ndarray | None  # (labels,) the model's own answer, where answers.adapt published a mix


class LiveScores(StreamMarksBook):
    """Fed every accepted tick (``observe``) and every published standing answer (``expect``)."""

    def __init__(self, questions: Mapping[str, Any], committed: Callable[[str], int], enabled: bool = True,
                 session_gap_ns: int | None = None) -> None:
        super().__init__(questions, committed, enabled, session_gap_ns=session_gap_ns)
        self.scores: dict[str, QueryScore] = {}
        self.asked: dict[str, str] = {}  # query -> what its labels are written as, "choices" or "values"
        # query -> its question and that question's end buckets, where it is bucketed in bps (saturation)
        self.bucketed: dict[str, tuple[QuestionSpec, EndBuckets]] = {}

    def _marked(self, stream: str, state: StreamMarks) -> None:
        self._realise(stream, state)
        self._prune(stream, state)

    def _lost_prices(self, stream: str, state: StreamMarks) -> None:
        for query, waiting in state.waiting.items():
            self._score(query).unscorable += len(waiting)
        state.waiting.clear()

    def expect(self, answer: Answer, query: QuerySpec | None) -> None:
        """A published standing answer of ``query`` (its registered spec; None if it went meanwhile)."""
        named = query is not None and query.names_question
        spec = self.questions.get(query.question) if named else None
        probs = answer.value.get("probs") if isinstance(answer.value, dict) else None
        if spec is None or probs is None:
            return
        state = self.streams.get(answer.stream)
        if state is None or state.tokenized or state.mark_after(answer.version) is None:
            self._score(answer.query).unscorable += 1
            return
        own = answer.value.get("model_probs")  # the model's answer, where answers.adapt published a mix
        labels = tuple(probs)
        self.asked[answer.query] = "values" if query.kind == "expectation" else "choices"
        state.waiting.setdefault(answer.query, deque()).append(Waiting(
            answer.version, spec, labels, np.array([probs[name] for name in labels]),
            None if own is None else np.array([own[name] for name in labels])))
        self._realise(answer.stream, state)

    def _realise(self, stream: str, state: StreamMarks) -> None:
        """Score every waiting answer of ``stream`` whose future is complete."""
        for query, waiting in state.waiting.items():
            while waiting and waiting[0].version + waiting[0].spec.horizon <= state.ticks:
                answer = waiting.popleft()
                self._add(query, state, answer, state.label(answer.spec, answer.version, self.session_gap_ns))

    def _add(self, query: str, state: StreamMarks, answer: Waiting, label: int) -> None:
        score = self._score(query)
        labels, p = answer.labels, answer.probs  # (labels,) the query's own answer order
        realised = answer.spec.labels[label] if label != NO_LABEL else None
        if realised is None:  # a full horizon goes unlabelled only across a pause of the session gap or more
            if self.session_gap_ns is not None:
                score.across_gap += 1
            else:
                score.unscorable += 1
            return
        buckets = end_buckets(answer.spec)
        if buckets is not None:  # counted whether or not the query asked this label: the question saturates
            self.bucketed[query] = (answer.spec, buckets)
            state.realised.setdefault(query, LabelCount()).add(realised, buckets)
        if realised not in labels:  # a query asking a subset of the answers: what happened is none of them
            score.outside_labels += 1
            return
        y = labels.index(realised)
        counts = state.seen.setdefault(query, np.zeros(len(labels)))
        # add-one (Laplace): a uniform guess before any label, the stream's frequencies as labels accrue. The raw
        # frequencies were a point mass after one label (Brier 2 when the next differs), worse than a uniform guess
        # on thin series, so a weak model looked better than the class frequencies wherever a stream ticks rarely
        prior = (counts + 1.0) / (counts.sum() + len(labels))
        onehot = np.eye(len(labels))[y]
        own = answer.model  # the model's answer, where answers.adapt published a mix
        model = None if own is None else (own.argmax() == y, float(np.square(own - onehot).sum()))
        scored = (p.argmax() == y, float(np.square(p - onehot).sum()), float(np.square(prior - onehot).sum()),
                  majority_hit(counts, y), model)
        score.add(*scored)
        state.scores.setdefault(query, QueryScore()).add(*scored)
        counts[y] += 1

    def _outside_why(self, query: str, score: QueryScore) -> dict[str, str]:
        """Why some of ``query``'s answers were not scored, where its realised labels fell outside its own, in the
        words of a backtest's note."""
        if not score.outside_labels:
            return {}
        realised = score.scored + score.outside_labels
        return {"unscored_why": f"realised label outside this query's {self.asked.get(query, 'choices')} "
                                f"({score.outside_labels} of {realised} answers realised): such an answer is not "
                                f"scored (docs/queries.md)"}

    def _score(self, query: str) -> QueryScore:
        return self.scores.setdefault(query, QueryScore())

    def _prune(self, stream: str, state: StreamMarks) -> None:
        """Drop marks no answer can still need: before the oldest waiting answer's point and before the
        engine's committed count (answers still to come are at or after it)."""
        oldest = min((w[0].version for w in state.waiting.values() if w), default=state.ticks)
        keep_from = min(oldest, self.committed(stream), state.ticks)  # tick count of the first mark kept
        drop = keep_from - state.base
        if drop >= PRUNE_EVERY:
            state.drop_before(keep_from)

    def forget_query(self, name: str) -> None:
        """A query replaced or removed: its scores and waiting answers go (a new spec scores afresh)."""
        self.scores.pop(name, None)
        self.asked.pop(name, None)
        self.bucketed.pop(name, None)
        for state in self.streams.values():
            state.realised.pop(name, None)
            state.waiting.pop(name, None)
            state.seen.pop(name, None)
            state.scores.pop(name, None)

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per query, its scores over every stream, the streams (at most WORST_STREAMS, with at least
        WORST_MIN_SCORED answers scored) where its answers score worse than the stream's class frequencies, and
        the streams below that many pooled (`thin_streams`): a chain of thin series never reaches it one by one."""
        pending: dict[str, int] = {}
        worse: dict[str, list[tuple[float, str, QueryScore]]] = {}
        thin: dict[str, ThinStreams] = {}
        for stream, state in self.streams.items():
            for query, waiting in state.waiting.items():
                pending[query] = pending.get(query, 0) + len(waiting)
            for query, score in state.scores.items():
                excess = (score.brier - score.prior_brier) / max(score.scored, 1)
                if score.scored >= WORST_MIN_SCORED and excess > 0:
                    worse.setdefault(query, []).append((excess, stream, score))
                elif score.scored < WORST_MIN_SCORED:
                    thin.setdefault(query, ThinStreams()).add(score)
        named = lambda stream, s: {"stream": stream, "scored": s.scored, "brier": s.mean(s.brier),  # noqa: E731
                                   "prior_brier": s.mean(s.prior_brier)}
        worst = lambda query: [named(stream, s) for _, stream, s in  # noqa: E731
                               sorted(worse.get(query, []), key=lambda w: (-w[0], w[1]))[:WORST_STREAMS]]
        # a query whose answers all still wait for their future is listed too, with none scored
        listed = {**{query: QueryScore() for query in pending}, **self.scores}
        return {query: score.summary(pending.get(query, 0)) | self._outside_why(query, score)
                | {"worse_than_prior": worst(query), "thin_streams": thin.get(query, ThinStreams()).summary()}
                | self._saturated(query) for query, score in sorted(listed.items())}

    def _saturated(self, query: str) -> dict[str, Any]:
        """The streams where ``query``'s bps-bucketed question is saturated (connectors/saturation.py): how many,
        and where there are any, the note `flashtick scores` prints (`saturated_why`)."""
        if query not in self.bucketed:
            return {"saturated_streams": 0}
        counted = {stream: state.realised[query] for stream, state in self.streams.items() if query in state.realised}
        saturated = sorted(stream for stream, count in counted.items() if count.saturated)
        return {"saturated_streams": len(saturated),
                **({"saturated_why": saturation_note(*self.bucketed[query], saturated, len(counted))}
                   if saturated else {})}


@dataclass
class ThinStreams:
    """A query's scores pooled over the streams with fewer than WORST_MIN_SCORED answers scored each."""

    streams: int = 0
    scored: int = 0
    brier: float = 0.0
    prior_brier: float = 0.0

    def add(self, score: QueryScore) -> None:
        self.streams += 1
        self.scored += score.scored
        self.brier += score.brier
        self.prior_brier += score.prior_brier

    def summary(self) -> dict[str, Any]:
        mean = lambda total: round(total / self.scored, 6) if self.scored else None  # noqa: E731
        return {"streams": self.streams, "scored": self.scored, "brier": mean(self.brier),
                "prior_brier": mean(self.prior_brier)}
