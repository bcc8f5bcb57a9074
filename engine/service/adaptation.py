"""Answer adaptation in the service: a named tick question's answers mixed with the stream's own outcomes.

queries/adapt.py holds the method (``OnlineMix``, one per (stream, query)); this feeds it. Every accepted
tick's mark is kept (stream_marks' ``StreamMarks``, labelled by connectors/labels.py as backtests and live
scores label), and when a standing answer at tick count v is computed, the labels of every answer point up
to v - horizon are realised first, from marks only. So an answer depends on the stream's ticks and its
earlier answers alone, never on how far ingest ran ahead of the engine: chunked backtests, one engine and
shards publish the same numbers.

The published value is the mix (``probs``, ``answer`` / ``expected`` from it) with the model's own
distribution beside it (``model_probs``). A stream starts cold at its first answer of a query (the model's
answer, as without adaptation), counting labels from there. Only named codec questions with realised
labels are adapted (not ``regime``, not free-text questions); a stream fed already-tokenized ticks has no
prices and is published as the model answers it. An on-demand ask is read through the current mix without
changing it.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from connectors.questions import QuestionSpec
from engine.service.features import QuestionHead
from engine.service.stream_marks import PRUNE_EVERY, StreamMarks, StreamMarksBook

# a stream's answers re-fed after a restart wait until the oldest reached is this many ticks behind, then go to their
# mixes in one run (AnswerAdaptation._refeed): the marks held meanwhile grow by at most this many
REFEED_EVERY = 1024
from queries.adapt import NO_LABEL, OnlineMix
from queries.probe_answers import CompiledQuery, published_value


class AnswerAdaptation(StreamMarksBook):
    """Fed every accepted tick (``accepted``); ``adapt`` turns a model answer into the published one."""

    def __init__(self, questions: Mapping[str, Any], committed: Callable[[str], int], enabled: bool = True,
                 heads: Mapping[str, QuestionHead] | None = None, session_gap_ns: int | None = None) -> None:
        # a checkpoint's answer heads (answer_head.json) are part of its answers: kept to, even with mixing off
        self.heads = dict(heads or {})
        super().__init__(questions, committed, enabled or bool(self.heads), features=bool(self.heads),
                         session_gap_ns=session_gap_ns)
        self.mixing = enabled  # answers.adapt: online
        self.mixes: dict[str, dict[str, OnlineMix]] = {}  # stream -> query -> its state
        # after a restart: answers published before it, re-fed as the replayed ticks reach them
        self.compile: Callable[[str], CompiledQuery | None] = lambda name: None  # registered query -> compiled
        self._owed: dict[str, deque[tuple[str, int, dict[str, float]]]] = {}  # stream -> (query, version, model)

    def _marked(self, stream: str, state: StreamMarks) -> None:
        owed = self._owed.get(stream)
        if owed and owed[0][1] <= state.ticks:  # re-fed answers reached: fed in runs, their marks kept until then
            if owed[0][1] <= state.ticks - REFEED_EVERY:
                self._refeed(stream, state)
            return
        self._prune(stream, state)

    def _refeed(self, stream: str, state: StreamMarks | None = None) -> None:
        """The answers published before a restart that ``stream``'s ticks have reached, fed to their mixes in one
        run, as each would have been at its own tick: a mix's state depends on its labels and its own answers in
        order alone, never on when they are fed, so a run gives the same mixes and published answers, and its labels
        come from one pass over the marks (``_LabelRun``) instead of a numpy call an answer (~0.2 ms each: most of
        a restart's time on a log of answered ticks). Whatever reads or ends a mix (a live answer, an ask, an
        expiry, a retention start, a query changed) feeds or drops what is pending first."""
        state = state or self.streams.get(stream)
        owed = self._owed.get(stream)
        if state is None or not owed:
            return
        run = _LabelRun(state, self.session_gap_ns)
        while owed and owed[0][1] <= state.ticks:
            query, version, model = owed.popleft()
            compiled = self.compile(query)
            if compiled is not None:  # published already: only the mix's statistics matter
                self._adapt(compiled, stream, {"probs": model}, version, keep=True, publish=False, run=run)
        self._prune(stream, state)

    def _lost_prices(self, stream: str, state: StreamMarks) -> None:
        """No prices from here on: its answers are published as the model gives them (its mixes go, and so do the
        answers re-fed to them: none would change anything now)."""
        self.mixes.pop(stream, None)
        self._owed.pop(stream, None)

    # -- a restart rebuilds the state exactly: the same ticks, the same model answers, in the same order ---

    def owed(self, query: str, stream: str, version: int, value: dict[str, Any]) -> None:
        """An answer published before a restart (in publication order), with its ``model_probs``: re-fed to
        its mix when the replayed ticks of ``stream`` reach ``version``, as it was fed live."""
        model = value.get("model_probs") if isinstance(value, dict) else None
        if model is not None and self.questions:
            self._owed.setdefault(stream, deque()).append((query, version, model))

    def forget_owed(self, query: str | None = None, stream: str | None = None) -> None:
        """A query replaced or removed (its mixes restarted cold), or a stream expired, before the restart."""
        if stream is not None:
            self._owed.pop(stream, None)
        if query is None:  # (a pass over every stream's owed answers per logged expiry: 60 s of a restart, review380)
            return
        for owed in self._owed.values():
            kept = [entry for entry in owed if entry[0] != query]
            owed.clear()
            owed.extend(kept)

    def adapt(self, query: CompiledQuery, stream: str, value: dict[str, Any], version: int,
              keep: bool = True) -> dict[str, Any]:
        """The published value for the model's ``value`` of ``query`` at tick count ``version``; ``keep``:
        a standing answer (it joins the mix's statistics once realised), else an ask (read only)."""
        self._refeed(stream)
        return self._adapt(query, stream, value, version, keep=keep, publish=True)

    def _adapt(self, query: CompiledQuery, stream: str, value: dict[str, Any], version: int, *, keep: bool,
               publish: bool, run: _LabelRun | None = None) -> dict[str, Any]:
        """``adapt``; ``publish`` False: an answer re-fed after a restart, whose published value is not wanted
        (``value`` comes back), its labels from ``run``."""
        spec = self.questions.get(query.spec.question) if query.spec.names_question else None
        probs = value.get("probs")
        state = self.streams.get(stream)
        if spec is None or probs is None or len(query.labels) < 2 or state is None or state.tokenized:
            return value
        head = self.heads.get(query.spec.question) if publish else None  # re-fed: model_probs, headed already
        if head is not None and sorted(query.labels) == sorted(spec.labels) \
                and (x := state.features_after(version)) is not None:
            p = np.array([probs[label] for label in spec.labels])  # (labels,) in the question's order
            probs = dict(zip(spec.labels, head.blend(p[None], x[None])[0].tolist()))
            probs = {label: probs[label] for label in query.labels}  # the query's order
            value = self._published(query, value, np.array(list(probs.values())), None)
        if not self.mixing:
            return value
        mixes = self.mixes.setdefault(stream, {})
        mix = mixes.get(query.spec.name)
        if mix is None:
            if not keep or state.mark_after(version) is None:
                return value
            mix = mixes[query.spec.name] = OnlineMix(len(query.labels), spec.horizon, start=version)
        if keep:
            self._realise(mix, spec, query.labels, state, version, run)
        p = np.array([probs[label] for label in query.labels])  # (labels,) in the query's order
        mixed = mix.answer(p, version, keep=keep, publish=publish)  # (labels,)
        if mixed is None:
            return value
        return self._published(query, value, mixed, probs)

    @staticmethod
    def _published(query: CompiledQuery, value: dict[str, Any], probs: np.ndarray,
                   model: dict[str, float] | None) -> dict[str, Any]:
        """The value published for (labels,) ``probs`` in the query's order: its answer or expectation from them
        (queries.probe_answers.published_value, as the model's own); with ``model`` (what they were mixed from),
        the model's own beside them."""
        out = published_value(query, probs.tolist())
        if model is not None:
            out["model_probs"] = model
            if "expected" in value:
                out["model_expected"] = value["expected"]
        return out

    def _realise(self, mix: OnlineMix, spec: QuestionSpec, labels: tuple[str, ...], state: StreamMarks,
                 version: int, run: _LabelRun | None = None) -> None:
        """Every label the mix is owed before an answer at ``version`` (points up to version - horizon: never
        more, however far ingest ran ahead), in the query's label order (from ``run`` where given)."""
        due = mix.labels_due(version)
        if not due:
            return
        order = [labels.index(name) if name in labels else NO_LABEL for name in spec.labels]  # question -> query
        # labelled in one pass (a `ticks: 50` query realises 50 at a time)
        found = run.labels(spec, due) if run is not None else \
            state.labels(spec, due.start, len(due), self.session_gap_ns)
        for point, label in zip(due, found):
            mix.realise(point, order[label] if label != NO_LABEL else NO_LABEL)

    def _prune(self, stream: str, state: StreamMarks) -> None:
        """Drop marks no label still due can need: before every mix's next point and the committed count."""
        if state.ticks - state.base < PRUNE_EVERY:  # (nothing could go: the bounds below are at most ticks)
            return
        due = min((m.next_point for m in self.mixes.get(stream, {}).values()), default=state.ticks)
        keep_from = min(due, self.committed(stream), state.ticks)
        drop = keep_from - state.base
        if drop >= PRUNE_EVERY:
            state.drop_before(keep_from)

    def drop_stream(self, stream: str) -> None:
        super().drop_stream(stream)
        self.mixes.pop(stream, None)
        self._owed.pop(stream, None)  # answers of the session that went: never re-fed to a later one

    def start_at(self, stream: str, ticks: int) -> None:
        """``stream``'s first ``ticks`` ticks are gone (a tick log's retention): the answers published on them
        cannot be re-fed (no marks label them), so its mixes start cold from there."""
        self._refeed(stream)
        super().start_at(stream, ticks)
        owed = self._owed.get(stream)
        while owed and owed[0][1] <= ticks:
            owed.popleft()

    def forget_owed_past(self, stream: str, ticks: int) -> None:
        """Answers published on ticks of ``stream`` past ``ticks`` that the tick log lost with its tail: never re-fed
        to the new ticks that take their counts."""
        owed = self._owed.get(stream)
        if owed:
            kept = [entry for entry in owed if entry[1] <= ticks]
            owed.clear()
            owed.extend(kept)

    def forget_query(self, name: str) -> None:
        """A query replaced or removed: its mixes go (a new spec starts cold), and so do its re-fed answers that the
        stream's ticks have reached and ``_refeed`` has not fed yet (fed one at a time, they would only have fed the
        mixes that go); those not reached yet stay, as they did."""
        for mixes in self.mixes.values():
            mixes.pop(name, None)
        for stream, owed in self._owed.items():
            state = self.streams.get(stream)
            ticks = state.ticks if state is not None else -1
            reached = next((i for i, entry in enumerate(owed) if entry[1] > ticks), len(owed))
            if any(entry[0] == name for entry in itertools.islice(owed, reached)):
                kept = [entry for i, entry in enumerate(owed) if i >= reached or entry[0] != name]
                owed.clear()
                owed.extend(kept)


class _LabelRun:
    """One stream's labels for a run of re-fed answers (AnswerAdaptation._refeed): each question's labels of every
    answer point whose marks are all held, computed at its first use, in one pass (StreamMarks.labels)."""

    def __init__(self, state: StreamMarks, session_gap_ns: int | None) -> None:
        self.state, self.session_gap_ns = state, session_gap_ns
        self._found: dict[str, list[int]] = {}  # question -> the labels of points state.base, state.base + 1, ...

    def labels(self, spec: QuestionSpec, points: range) -> list[int]:
        """The labels of ``points`` (due, so held: from the mix's next point, never pruned, to ticks - horizon)."""
        found = self._found.get(spec.name)
        if found is None:
            count = max(0, self.state.ticks - spec.horizon - self.state.base + 1)
            found = self._found[spec.name] = self.state.labels(spec, self.state.base, count, self.session_gap_ns)
        base = self.state.base
        return found[points.start - base : points.stop - base]
