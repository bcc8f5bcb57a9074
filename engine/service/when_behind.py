"""`limits.when_behind` at a front door's message: what one engine's pipeline and the sharded front door alike do
with a wire message that arrives while behind: refuse it whole unread (shed, with the `overloaded` reject naming
the limit), or conflate its quotes (conflate). Which single ticks are shed, and the streams counted, is
shedding.py's."""

from __future__ import annotations

from typing import Any

from connectors.ticks import InvalidTick


def overloaded(pending_tokens: int, lag_s: float, limits: Any, stream: str | None) -> InvalidTick:
    """The reject for a tick that arrives while the engine is behind and `when_behind` is shed, naming the limit
    that made it behind (the one to raise, or the load to lower)."""
    if pending_tokens > limits.max_backlog_tokens:
        why = f"{pending_tokens} tokens pending (limits.max_backlog_tokens {limits.max_backlog_tokens})"
    else:
        why = f"data waiting {lag_s:.1f} s to be computed or read (limits.max_lag_s {limits.max_lag_s:g})"
    return InvalidTick("overloaded", f"the engine is behind: {why}; when_behind: shed", stream)


def shed_message(pipeline: Any, data: bytes, tokenized: bool) -> list[dict[str, Any]] | None:
    """A message every stream of which ``pipeline`` (one engine's or the sharded front door's) refuses now with
    when_behind: shed (its ``shed_refusal``), refused whole (StreamEncoders.shed_message): the rejections, counted;
    or None to ingest it (not shedding, a stream of it accepted, or not a message that decodes)."""
    if pipeline.config.limits.when_behind != "shed" or pipeline.shed_refusal(None) is None:
        return None
    result = pipeline.encoders.shed_message(data, pipeline.shed_refusal, tokenized)
    return None if result is None else pipeline._counted(result)


def conflating(pipeline: Any) -> bool:
    """Whether a raw message arriving now at ``pipeline`` (one engine's or the sharded front door's) has its quotes
    conflated: when_behind: conflate, and behind (connectors/encoder.py StreamEncoders, hold_quotes)."""
    return pipeline.config.limits.when_behind == "conflate" and pipeline.behind
