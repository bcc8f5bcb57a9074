"""The caveats a stream's answers carry where the service already knows the model is out of its range there
(review325 #9: `scores` warned, while the published answers and `ask` said nothing, so a subscriber could not tell
them from trusted ones). Decided exactly as `flashtick scores` decides it, from the live scores kept anyway
(live_scores.py), so no forward is added and a published answer pays a few dict look-ups:

* ``worse_than_prior``: the query's answers on this stream score worse (Brier) than the stream's own class
  frequencies, with WORST_MIN_SCORED answers scored or more (`scores`' `worse_than_prior`);
* ``saturated_question``: the query's bps-bucketed question (move_bps_50, volatility_50) is saturated on this stream
  (`scores`' `saturated_streams`, connectors/saturation.py);
* ``one_class_question``: the query's bps-bucketed question does not split this stream: nearly all its realised
  labels fall in one inner bucket (`scores`' `one_class_streams`: EURUSD's volatility_50 97% `low`);
* ``context_reset``: the stream's earlier context was given up (an operator's `forget`, or its expiry fell past
  scheduler.expired_streams_kept: engine/kept_contexts.py), so until its first context roll its answers read only
  the ticks since, where a backtest of the same ticks, in which nothing is given up, reads the earlier ones too;
* ``stream_expired`` (a `get` reply's only): the stream has been idle past scheduler.stream_idle_s, so its KV was
  freed; its latest answers are kept with its context (engine/kept_contexts.py) and stand until its next tick;
* and on published answers, ``spot_trained_model`` (market_caveat.py), which `ask` and `get` replies carry already.

Each is ``{kind, text}``, as a reply's `caveats` are (reply_caveats.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from connectors.saturation import bucket_text, one_class
from connectors.tick_times import utc_text
from engine.service.live_scores import WORST_MIN_SCORED, LiveScores
from engine.service.market_caveat import spot_only, stream_caveat
from engine.service.trained_streams import TrainedStreams

if TYPE_CHECKING:  # (the scheduler's module imports torch; this one is read before it is)
    from engine.scheduler import Scheduler

WORSE_THAN_PRIOR = "worse_than_prior"
SATURATED_QUESTION = "saturated_question"
ONE_CLASS_QUESTION = "one_class_question"
CONTEXT_RESET = "context_reset"
STREAM_EXPIRED = "stream_expired"


def context_caveats(scheduler: Scheduler | None, stream: str) -> list[dict[str, str]]:
    """``context_reset`` on ``stream``'s answers while its session holds only ticks since its context was given up
    (``Stream.context_reset``, cleared at its first roll); [] otherwise, or without a scheduler here (sharded)."""
    state = scheduler.streams.get(stream) if scheduler is not None else None
    if state is None or not state.context_reset:
        return []
    return [{"kind": CONTEXT_RESET, "text": (
        f"{stream}'s earlier context was given up (an operator's forget, or it expired past the "
        f"scheduler.expired_streams_kept most recent expiries, whose contexts are kept): this answer reads the "
        f"{len(state.boundaries)} ticks since, where a backtest of the same ticks reads the earlier ones too, until "
        f"its first context roll (raise scheduler.expired_streams_kept for a feed of many sparse names)")}]


def expired_caveat(stream: str, idle_since_ts: int, idle_s: float | None) -> dict[str, str]:
    """``stream_expired`` on a `get` of an expired stream's kept answer: it stands, idle since its last tick."""
    return {"kind": STREAM_EXPIRED, "text": (
        f"{stream} is idle: no tick since {utc_text(idle_since_ts)} (its last tick's ts), and it expired after "
        f"scheduler.stream_idle_s ({idle_s:g} s) without data, its KV freed; this is its latest answer, kept with its "
        f"context, and it stands until its next tick, which goes on from that context")}


def skill_caveats(scores: LiveScores, queries: Iterable[str], stream: str) -> list[dict[str, str]]:
    """The caveats on ``stream``'s answers of the first of ``queries`` (standing query names: the one asked, then
    those asking the same question) that live scores have scored there; [] when none applies."""
    state = scores.streams.get(stream)
    if state is None:
        return []
    for query in queries:
        score, realised = state.scores.get(query), state.realised.get(query)
        if score is None and realised is None:
            continue
        caveats = []
        if score is not None and score.scored >= WORST_MIN_SCORED and score.brier > score.prior_brier:
            caveats.append({"kind": WORSE_THAN_PRIOR, "text": (
                f"on {stream}, the answers of {query} scored worse than the stream's own class frequencies (Brier "
                f"{score.brier / score.scored:.3f} vs {score.prior_brier / score.scored:.3f} over {score.scored} "
                f"answers scored since this start): the model shows no skill on this instrument, likely unlike "
                f"its training data (flashtick scores; fine-tune on it: docs/model.md)")})
        if realised is not None and realised.saturated and query in scores.bucketed:
            spec, buckets = scores.bucketed[query]
            caveats.append({"kind": SATURATED_QUESTION, "text": (
                f"on {stream}, {spec.name} is saturated: most of its realised labels that show a move are "
                f"{buckets.text}, its buckets being fixed in bps, so its answers say little there (flashtick "
                f"scores; ask direction_5/direction_20, which read a sign at any spacing: docs/model.md)")})
        elif realised is not None and query in scores.bucketed:
            spec, buckets = scores.bucketed[query]
            if (one := one_class(stream, realised.by_label, buckets)) is not None:
                caveats.append({"kind": ONE_CLASS_QUESTION, "text": (
                    f"on {stream}, {spec.name} does not split this stream: {one.count} of its {one.labelled} "
                    f"realised labels are {bucket_text(spec, one.label)}, its buckets being fixed in bps, so its "
                    f"answers say little there (flashtick scores; ask direction_5/direction_20: docs/model.md)")})
        return caveats
    return []


def scored_as(spec: Any, registered: list[Any]) -> list[str]:
    """The standing queries whose live scores speak for ``spec``'s answers (a QuerySpec): itself, then those of
    ``registered`` asking its question (an ad-hoc ask of direction_20 is read by a standing query's scores of it)."""
    return [spec.name] + [s.name for s in registered
                          if s.name != spec.name and spec.question is not None and s.question == spec.question]


class PublishedCaveats:
    """What a published answer carries as `caveats` (absent when none): the stream's caveats above, for a model
    trained on spot markets only the one of a derivatives stream, and for a checkpoint that records its streams the
    one of a stream it never trained on (as `ask` and `get` give them). The model's card and record are read once."""

    def __init__(self, scores: LiveScores, model_path: Path | str | None, scheduler: Scheduler | None = None) -> None:
        self.scores = scores
        self.spot_only = spot_only(model_path)
        self.scheduler = scheduler  # one engine's, for context_reset (None: sharded, its shards hold the sessions)
        self.trained = TrainedStreams(model_path)

    def of(self, query: str, stream: str) -> dict[str, list[dict[str, str]]]:
        market = stream_caveat([stream]) if self.spot_only else None
        caveats = ([market] if market is not None else []) + skill_caveats(self.scores, [query], stream)
        caveats += self.trained.caveat([stream])  # (a regex substitution of the name: no cache to grow with streams)
        caveats += context_caveats(self.scheduler, stream)
        return {"caveats": caveats} if caveats else {}
