"""Live scores: every published answer of a named tick question scored against what the market then did.

`flashtick evaluate` and `backtest` score a model after the fact; a service running on an instrument nobody
evaluated should say, while it runs, whether its answers carry skill there. For each standing query on a
named codec question (direction, volatility, move: the questions with a realised answer in
connectors/labels.py) every published answer waits until its stream has `horizon` more ticks, is labelled
exactly as backtests label it, and is scored beside the naive forecast a quant compares with first: the
stream's own class frequencies so far (`prior`, Brier, add-one smoothed: (count + 1) / (n + labels), a uniform
guess before any label; its most frequent class, `majority`, accuracy: a guess among the classes tied for most
frequent, so 1/labels before any label). Both are online: the prior at an answer made after the stream's tick v
counts only the labels realised by then (of the answers at or before v - horizon), not those of the answers scored
before it whose horizon ended after v: up to `horizon` labels from its future (review434 #2).

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
                               "saturated_streams": n, "saturated_why" (where n is not 0): the note,
                               "one_class_streams": n, "one_class_why" (where n is not 0): the note}}

`worse_than_prior` names the streams (worst first, at most 5, each with 100 answers scored or more) where
the query's answers score worse than that stream's own class frequencies: with many instruments, where
the model needs fine-tuning. `thin_streams` pools the streams with fewer answers scored than that (a chain of
option series that each tick a few times never reaches it): their answers' Brier beside their class frequencies'.
`saturated_streams` counts the streams where a question bucketed in bps (move_bps_50, volatility_50) is saturated
(connectors/saturation.py: most realised labels that show a move in an end bucket, wherever one step of the price
is many bps: a tick large against the price, a price near zero, rows a day apart); `one_class_streams` those where
95% or more of its realised labels are one inner bucket (EURUSD's `volatility_50`: 97% `low`), where an accuracy of
0.95 is that bucket's share, not skill.

Scores count from when the process started (a restart starts them afresh; the answers themselves are
unaffected: this only reads them). A stream fed already-tokenized ticks has no prices to label with and is
not scored (`unscorable`), nor is the `regime` question (its ground truth exists on synthetic data only). A
query asking a subset of a question's answers (`choices: [up, down]`) scores only the answers whose realised
label is one of its own: the others are counted (`outside_labels`), as a backtest counts them.
Memory per stream is the marks since the oldest answer still waiting, plus those the engine has not yet
committed (``committed`` says how far it got), and a query's last `horizon` labels, never the whole history. The
marks are kept in a StreamMarksBook (stream_marks.py), the sums in the tallies of live_score_tally.py.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from connectors.labels import NO_LABEL
from connectors.questions import QuestionSpec
from connectors.saturation import (EndBuckets, LabelCount, end_buckets, one_class, one_class_note,
                                  saturation_note)
from engine.service.live_score_tally import QueryScore, ThinStreams, Waiting, majority_hit
from engine.service.stream_marks import PRUNE_EVERY, StreamMarks, StreamMarksBook
from queries.cache import Answer
from queries.spec import QuerySpec

WORST_STREAMS = 5  # streams named per query where its answers score worse than the stream's class frequencies
WORST_MIN_SCORED = 100  # ... once that many of its answers there are scored (fewer say little)


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
        scored_as = query.scored_as if query is not None else None
        named = scored_as.question if scored_as is not None else (
            query.question if query is not None and query.names_question else None)
        spec = self.questions.get(named) if named is not None else None
        probs = answer.value.get("probs") if isinstance(answer.value, dict) else None
        if spec is None or probs is None:
            return
        state = self.streams.get(answer.stream)
        if state is None or state.tokenized or state.mark_after(answer.version) is None:
            self._score(answer.query).unscorable += 1
            return
        own = answer.value.get("model_probs")  # the model's answer, where answers.adapt published a mix
        answered = tuple(probs)
        labels = answered
        if scored_as is not None:  # its choices, as the labels they mean (checked one to one at registration)
            label_of = scored_as.mapping(query.choices or (), spec.labels)
            labels = tuple(label_of[choice] for choice in answered)
        self.asked[answer.query] = "values" if query.kind == "expectation" else "choices"
        state.waiting.setdefault(answer.query, deque()).append(Waiting(
            answer.version, spec, labels, np.array([probs[name] for name in answered]),
            None if own is None else np.array([own[name] for name in answered])))
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
        unripe = state.unripe.setdefault(query, deque())
        while unripe and unripe[0][0] <= answer.version:  # the labels this answer could have known
            counts[unripe.popleft()[1]] += 1
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
        unripe.append((answer.version + answer.spec.horizon, y))

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
        if state.ticks - state.base < PRUNE_EVERY:  # (nothing could go: the bounds below are at most ticks)
            return
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
            state.unripe.pop(name, None)
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
            return {"saturated_streams": 0, "one_class_streams": 0}
        counted = {stream: state.realised[query] for stream, state in self.streams.items() if query in state.realised}
        saturated = sorted(stream for stream, count in counted.items() if count.saturated)
        spec, buckets = self.bucketed[query]
        found = [one for stream, count in sorted(counted.items())
                 if (one := one_class(stream, count.by_label, buckets)) is not None]
        return {"saturated_streams": len(saturated),
                **({"saturated_why": saturation_note(spec, buckets, saturated, len(counted))} if saturated else {}),
                "one_class_streams": len(found),
                **({"one_class_why": one_class_note(spec, found, len(counted))} if found else {})}
