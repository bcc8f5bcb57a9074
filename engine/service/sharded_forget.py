"""An operator's `forget STREAM` at a sharded front door (ShardedPipeline.forget_stream, sharded.py).

One engine forgets a stream in one place (TickPipeline.forget_stream); here the stream lives in two, the front door
and its shard, with a call possibly in flight between them. So the forget is refused (StreamBusy, "send the request
again") while items of the stream wait for its shard or an ask on it waits for a reply, and its shard is told by an
op queued ahead of the items accepted from now on, the front door ignoring what the shard says of the stream before
that op reaches it (ShardCalls._finish).
"""

from __future__ import annotations

from typing import Any

from engine.quoting import quoted
from engine.service.pipeline import StreamBusy


def forget_stream(front: Any, stream: str) -> None:
    """Drop ``stream`` at an operator's request as TickPipeline.forget_stream does: logged first (raises
    LogWriteError, forgetting nothing, when the log refuses that), then from every layer of ``front`` (the
    ShardedPipeline), its ordering guard included, and its shard told by an op ahead of the items accepted from now
    on (Shard._forget). StreamBusy while items of it wait here or in the call in flight, or an ask on it waits for
    its reply. What its shard has not computed yet goes with the session, as a restart drops it at the log's record;
    what the shard says of the stream before the op reaches it is not taken (ShardCalls._finish)."""
    link = front.shard_of.get(stream)
    if link is not None and (stream in link.call_streams or link.buffers(stream)):
        raise StreamBusy(f"stream {quoted(stream)} has data waiting for its shard ({link.name}): send the request "
                         f"again in a moment (or once its feed is stopped)")
    if any(asked == stream for _, asked in front._asked.values()):
        raise StreamBusy(f"stream {quoted(stream)} has an ask waiting for its shard's reply: send the request again "
                         f"in a moment")
    front.data.items.log_forgotten(stream)
    if link is not None:
        link.streams.discard(stream)
        del front.shard_of[stream]
        if not link.failed:  # (a shard given up on is restored from the log at the restart, which says it)
            link.ops.append(("forget", stream))
            link.forgetting.add(stream)
    front.progress.pop(stream, None)
    front.encoders.forget(stream)
    front.registry.drop_stream(stream, keep_grid=False)
    front.cache.drop_stream(stream)
    front.flash.drop_stream(stream)
    front.scores.drop_stream(stream)
    front.adaptation.drop_stream(stream)
    front.receive_clock.drop(stream)
    front.data.answers.forget_stream(stream)
