"""TurnedAway: streams whose logged ticks admission refused after they were accepted, held until the server takes
them (`streams`, `get` and `ask` then say them refused rather than "has sent no data").

Ticks are logged once every check at ingest passed; a restart under a lowered limit (scheduler.max_streams, a smaller
KV pool) can still refuse a logged stream when it replays the log, and a shard can refuse one the sharded front door
accepted. One engine's restart (engine_restart.py) and the sharded front door (sharded.py, shard_restores.py,
shard_replies.py) both keep them here, each with the first reason, and settle them the same way after the start's
replay: a stream admitted after all (an expiry in the log made room) is not refused; the others are forgotten by the
encoders, as a stream refused live is, and said in one warning naming the limit.
"""

from __future__ import annotations

from collections.abc import Callable, Container

from connectors.encoder import StreamEncoders
from engine.service.rejections import turned_away_warning


class TurnedAway:
    """Refused streams: name -> [ticks refused, the first why], in the order first refused."""

    def __init__(self) -> None:
        self.streams: dict[str, list] = {}

    def add(self, stream: str, ticks: int, why: str) -> None:
        held = self.streams.setdefault(stream, [0, why])
        held[0] += ticks

    def discard(self, stream: str) -> None:
        """``stream`` expired after it was refused, with a session held: the later event wins, it reads expired."""
        self.streams.pop(stream, None)

    def settle(self, held: Container[str], encoders: StreamEncoders, limit: Callable[[], str],
               say: Callable[[str], None]) -> set[str]:
        """After a start's replay: the streams a session ends up holding (``held``) are no longer refused; the
        rest are forgotten by ``encoders`` and said (``limit``: which limit turned them away). Returns their
        names, which `streams` counts as refused at this start."""
        for stream in [s for s in self.streams if s in held]:
            del self.streams[stream]
        for stream in self.streams:
            encoders.forget(stream)
        if self.streams:
            say(turned_away_warning(self.streams, limit()))
        return set(self.streams)

    def take(self) -> dict[str, list]:
        """The streams refused since the last call (name -> [ticks refused, the first why]), once: the server
        remembers them with the streams it refused live."""
        taken, self.streams = self.streams, {}
        return taken

    def __contains__(self, stream: object) -> bool:
        return stream in self.streams
