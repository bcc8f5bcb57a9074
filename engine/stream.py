"""A stream as the scheduler sees it: its session, the chunks waiting for a forward, and its counters."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import torch

from engine.session import Session


@dataclass
class Chunk:
    tokens: list[int]
    event_ts: int  # event time (ns) of the latest tick in the chunk
    ticks: int  # ticks the chunk carries
    arrival_ns: int  # wall clock when submitted, for freshness


@dataclass(eq=False)
class Stream:
    session: Session
    pending: deque[Chunk] = field(default_factory=deque)
    waiting_since: int = 0  # order of arrival of the oldest pending chunk
    ticks: int = 0
    event_ts: int = 0
    arrival_ns: int = 0
    last_active: int = 0  # batch number of the last advance (LRU order)
    last_seen_ns: int = 0  # wall clock of the latest submitted chunk (idle expiry)
    boundaries: list[int] = field(default_factory=list)  # token offsets where chunks begin
    next_token_logits: torch.Tensor | None = None  # (vocab,) prediction for the next token

    @property
    def name(self) -> str:
        return self.session.name
