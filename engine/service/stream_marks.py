"""Every accepted tick's mark (and event time, and with answer heads its microstructure features), per stream, by
tick count: what labels a published answer after the fact, once its stream has `horizon` more ticks. Live scores
(live_scores.py) and the answer adaptation (adaptation.py) each keep a book of them (``StreamMarksBook``) and say
what they do with a new mark (``_marked``) and with a stream that lost its prices to tokenized ticks
(``_lost_prices``). Memory per stream is the marks no answer can still need dropped in batches (``PRUNE_EVERY``)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from connectors.encoder import EncodedTick
from connectors.labels import MarkTracker, label_series, window_labels
from connectors.questions import QuestionSpec
from connectors.saturation import LabelCount
from connectors.ticks import Tick
from engine.service.features import FeatureTracker
from engine.service.live_score_tally import QueryScore, Waiting

PRUNE_EVERY = 256  # marks dropped from a stream's front in batches (a list slice per tick would be quadratic)


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
    # query -> the labels scored but not yet in `seen`, oldest first: (the tick count its horizon ended at, label
    # index); an answer scored next was made before that tick, when the label was still unknown
    unripe: dict[str, deque[tuple[int, int]]] = field(default_factory=dict)
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

    def labels(self, spec: QuestionSpec, first: int, count: int, session_gap_ns: int | None = None) -> list[int]:
        """``label`` of the ``count`` answer points from ``first`` on, computed at once (connectors.labels'
        ``window_labels``: bit for bit what each gives alone, for one numpy pass instead of one a point)."""
        span = slice(first - self.base, first - self.base + count + spec.horizon)
        times = np.asarray(self.times[span], dtype=np.int64) if session_gap_ns is not None else None
        return window_labels(spec, np.asarray(self.marks[span]), ts=times, session_gap_ns=session_gap_ns).tolist()


class StreamMarksBook:
    """Every accepted tick's mark, per stream, for what labels answers after the fact (live scores here, the
    answer adaptation in adaptation.py); ``_marked`` and ``_lost_prices`` are what each does with them."""

    def __init__(self, questions: Mapping[str, Any], committed: Callable[[str], int], enabled: bool = True,
                 features: bool = False, session_gap_ns: int | None = None) -> None:
        # answers.session_gap_s: labels end at a pause that long or longer in event time
        self.session_gap_ns = session_gap_ns
        # named questions with a realised answer: {name: QuestionSpec}; none when disabled (then nothing is kept)
        # (a codec's Question carries its spec; a text codec's scored_questions are specs themselves)
        specs = {name: getattr(q, "spec", q) for name, q in questions.items()}
        self.questions = {name: spec for name, spec in specs.items()
                          if enabled and isinstance(spec, QuestionSpec) and spec.kind != "regime"}
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
