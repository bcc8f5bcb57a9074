"""A stream as the scheduler sees it: its session, the chunks waiting for a forward, and its counters."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import torch

from engine.jobs import StreamProgress
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

    def surprise(self, tokens: list[int], rows: torch.Tensor) -> float | None:
        """NLL of the last chunk's tokens. ``rows`` holds the logits of the last len(tokens)+1
        positions (fewer when the chunk was the whole advance: then the previous forward's
        final prediction covers the first token)."""
        predictions = rows[:-1]  # (k or k-1, vocab): row j predicts the token after it
        if predictions.shape[0] < len(tokens):
            if self.next_token_logits is None:
                tokens = tokens[len(tokens) - predictions.shape[0] :]
            else:
                predictions = torch.cat([self.next_token_logits[None], predictions])
        if not tokens:
            return None
        logp = torch.log_softmax(predictions.float(), dim=-1)
        return float(-logp[torch.arange(len(tokens)), torch.tensor(tokens)].sum())

    def progress(self, chunks: list[Chunk], surprise: float | None) -> StreamProgress:
        """Where the stream stands once ``chunks`` (taken, not yet committed) are; surprise as given."""
        last = chunks[-1] if chunks else None
        return StreamProgress(
            stream=self.name,
            ticks=self.ticks + sum(c.ticks for c in chunks),
            event_ts=last.event_ts if last else self.event_ts,
            version=self.session.version + (1 if chunks else 0),
            arrival_ns=last.arrival_ns if last else self.arrival_ns,
            surprise=surprise,
        )
