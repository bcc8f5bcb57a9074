"""The caveats on how to read a service's answers, said once at `serve`'s start and again in every `ask` and `get`
reply and in `health` (``caveats``: docs/wire-protocol.md), so a client that never reads the service's log sees
them too: the model was trained on prices shifted by --price-offset (the service adds it at ingest), or on files
read with other options (a feed must send ticks read alike), its training
labelled answers with another session gap than this service does, a query asks ``regime`` (ground truth on the
synthetic market only), a spot-trained model answers a derivatives stream (market_caveat.py), a checkpoint answers
a stream it never trained on (trained_streams.py). Each is ``{kind, text}``: ``kind`` stable for a client's switch,
``text`` for people, the start's note word for word."""

from __future__ import annotations

from typing import Any

from engine.service.checkpoint_notes import session_gap_mismatch
from engine.service.config import ServiceConfig
from engine.service.market_caveat import spot_only, stream_caveat
from engine.service.trained_streams import TrainedStreams

INGEST_PRICE_OFFSET = "ingest_price_offset"  # the model learnt prices shifted by --price-offset: added at ingest
TRAINED_READING = "trained_reading"  # it learnt from files read with --price-format, --tz and the like
SESSION_GAP = "session_gap"  # its training's --session-gap differs from answers.session_gap_s
REGIME_QUESTION = "regime_question"  # the query asks the synthetic market's hidden regime


def model_caveats(config: ServiceConfig) -> list[dict[str, str]]:
    """The caveats of the served model, whatever is asked of it (read from its checkpoint's records once)."""
    from engine.service.reading_record import FILE_READING, recorded_reading, shown

    recorded = recorded_reading(config.model.path) or {}
    caveats = []
    if "price_offset" in recorded:  # applied at ingest (StreamEncoders): said, so a feed does not shift twice
        caveats.append({"kind": INGEST_PRICE_OFFSET, "text": (
            f"this model was trained on prices read with {shown(recorded, ['price_offset'])}: the service adds "
            f"{ingest_shift_text(recorded['price_offset'])}, whoever sends them, so feeds send prices as the venue "
            f"prints them (`health`'s ingest_price_offset; docs/model.md)")})
    if other := {key: value for key, value in recorded.items() if key in FILE_READING and key != "price_offset"}:
        caveats.append({"kind": TRAINED_READING, "text": (
            f"this model was trained on files read with {shown(other, other)}: the service reads ticks as they are "
            f"sent: `flashtick feed replay` reads its files so unless given the options (its `health` says them), "
            f"any other feed must send ticks read alike (docs/model.md)")})
    # live scores and the adaptation label with answers.session_gap_s, training with its --session-gap
    if labelled := session_gap_mismatch(recorded or None, config.answers.session_gap_ns, "answers.session_gap_s"):
        caveats.append({"kind": SESSION_GAP, "text": labelled})
    return caveats


def ingest_shift_text(recorded_offset: str) -> str:
    """What the ingest offset adds to which ticks, in words (after "adds"): a per-stream offset (a bare one is
    recorded per stream trained on: reading_record.py) leaves every other stream unshifted."""
    from connectors.price_offsets import checked_price_offset

    offset = checked_price_offset(recorded_offset)
    if not isinstance(offset, dict):
        return f"{offset:g} to every tick it takes"
    names = list(offset)
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    unshifted = "alone (every other stream is taken unshifted)"
    if len(set(offset.values())) == 1:
        return (f"{offset[names[0]]:+g} to the ticks of stream{'s' * (len(names) > 1)} {', '.join(names[:5])}{more} "
                f"{unshifted}")
    shifts = ", ".join(f"{name} {offset[name]:+g}" for name in names[:5])
    return f"each stream's own offset to its ticks ({shifts}{more}) {unshifted}"


SYNTHETIC_PREFIX = "SYN."  # the synthetic market's streams (connectors/synthetic.py), where regime has ground truth


def regime_caveat(specs: list[Any], questions: dict[str, Any], stream: str | None = None) -> dict[str, str] | None:
    """The caveat of the queries among ``specs`` that ask the hidden regime, which only the synthetic market records
    (its answers on a real stream read "calm" at 0.99 through a crash); None when none does. Answers are left as
    they are. A codec question asked directly (no query registered: its spec's name is the question's) is named as
    the question, and queries that ask it of synthetic streams alone (SYN.*: their patterns, or ``stream``, the one
    an ask or get is about) are told so, not warned of real ones (review315 #8)."""
    asking = [spec for spec in specs
              if spec.question in questions and questions[spec.question].spec.kind == "regime"]
    if not asking:
        return None
    names = [f"question {spec.name}" if spec.name == spec.question else f"query {spec.name}" for spec in asking]
    named = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    asks = f"ask{'s' * (len(asking) == 1)} regime, the synthetic market's hidden regime"
    asked = [stream] if stream is not None else [pattern for spec in asking for pattern in spec.streams]
    if all(pattern.startswith(SYNTHETIC_PREFIX) for pattern in asked):
        return {"kind": REGIME_QUESTION, "text": (
            f"{named} {asks} of synthetic streams (SYN.*) alone, where it has ground truth and was calibrated; "
            f"asked of a real stream its answers would be no evidence of a regime "
            f"(docs/queries.md#questions-without-real-data-calibration)")}
    return {"kind": REGIME_QUESTION, "text": (
        f"{named} {asks}: it has ground truth, and was calibrated, on synthetic data only (SYN.*), so on a "
        f"real stream its answers and probabilities are no evidence of a regime; volatility_50 asks what the ticks "
        f"did (docs/queries.md#questions-without-real-data-calibration)")}


class ReplyCaveats:
    """A service's caveats, for its replies: the model's read once, a query's regime caveat per reply, and a
    spot-trained model's on the derivative streams a reply is about (market_caveat.py)."""

    def __init__(self, config: ServiceConfig, questions: dict[str, Any]) -> None:
        self.model = model_caveats(config)
        self.questions = questions
        self.spot_only = spot_only(config.model.path)  # (read from the model's card once)
        self.trained = TrainedStreams(config.model.path)  # (and its evaluation.json)

    def of(self, specs: list[Any], streams: list[str] = (), derivatives: tuple[list[str], int] | None = None,
           not_trained: tuple[list[str], int] | None = None) -> list[dict[str, str]]:
        """The caveats of a reply about the answers of ``specs`` (an ask's or get's query; `health`: every query
        registered) on ``streams`` (the one asked), the model's first; `health` gives ``derivatives`` and
        ``not_trained`` instead: the first derivative streams held and the first held streams the model did not
        train on, and how many of each are held (O(1), however many streams are held)."""
        streams = list(streams)
        regime = regime_caveat(specs, self.questions, streams[0] if len(streams) == 1 else None)
        market = None if not self.spot_only else \
            stream_caveat(*derivatives) if derivatives is not None else stream_caveat(streams)
        untrained = self.trained.caveat(*not_trained) if not_trained is not None else self.trained.caveat(streams)
        return self.model + [caveat for caveat in (regime, market) if caveat is not None] + untrained
