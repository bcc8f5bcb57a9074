"""Probe jobs: how the layer above (standing queries, on-demand asks) gets questions into the loop.

The scheduler plans a job's probes into a forward and, once it ran, calls
``job.answer_from(logits, progress)``; what that returns (an answer of any type, and
maybe a follow-up job such as the next decode step) comes back out of
``Engine.step()`` as a ``JobOutcome``. The core never publishes anything.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import torch

from engine.batch import LogitsWanted


@dataclass(frozen=True)
class StreamProgress:
    """Where a stream stands after a batch; the query layer decides what is due from it."""

    stream: str
    ticks: int  # ticks committed
    event_ts: int  # event time of the latest committed tick
    version: int  # session version
    arrival_ns: int  # wall clock arrival of the latest committed chunk
    surprise: float | None  # NLL (nats) of the latest chunk's tokens, from the ingest forward
    # what a probe at this point attends: the session's tokens (header and sink included; a roll keeps fewer), and
    # the whole chunks among them (a tick each, a tokenized item each; not a rolled-away tick's tokens the sink kept)
    context_tokens: int = 0
    context_ticks: int = 0
    # False at a due point inside a tick group (a chunk the layer above marked: Chunk.due): only what asked for that
    # point is due there, never what is checked at group ends
    group_end: bool = True

    @property
    def context(self) -> dict[str, int]:
        """What a probe here attends, as an ask's reply and `streams` say it (docs/wire-protocol.md)."""
        return {"context_tokens": self.context_tokens, "context_ticks": self.context_ticks}


class JobResult(NamedTuple):
    answer: Any = None  # what the job produced (the query layer's Answer); None while a follow-up runs
    follow_up: "ProbeJob | None" = None  # more work for the same request, queued for a later forward


@dataclass(eq=False)
class ProbeJob:
    """Token sequences to evaluate after one stream's committed prefix, and what to make of the logits.

    ``answer_from(logits, progress)`` gets one tensor per probe (rows per ``logits``) and the
    stream's progress after the batch. ``ticket`` is the requester's (e.g. a control
    request waiting for its reply); follow-up jobs carry it on.

    A standing query made due inside a chunk is evaluated at its cut: after the session's
    first ``cut`` tokens, with ``at`` (the stream's progress at that point) as its progress.
    The scheduler sets both; a follow-up job continues at its parent's cut.
    """

    stream: str
    probes: list[list[int]]
    answer_from: Callable[[list[torch.Tensor], StreamProgress], JobResult]
    logits: LogitsWanted = "last"
    idle: bool = False  # low priority: run when no ingest is pending (generate queries)
    ticket: Any = None
    cut: int | None = None  # evaluate after this many session tokens; None: after everything committed
    at: StreamProgress | None = None  # the progress at ``cut``, handed to ``answer_from``
    # work for a later ask (an answer decoded ahead): evaluated after everything committed when it runs, never at
    # the cut it fell due at (a burst would otherwise decode ahead for a tick count the stream has left)
    latest: bool = False
    # an ask waits until its stream has computed this many ticks: those accepted before it (read your writes),
    # so it is never answered from part of a burst the engine is still working through (Scheduler.ask)
    after_ticks: int = 0
    # how many of the session's last tokens (before the cut) the probes' first tokens stand in for: a tokenizer
    # merges the question's start into the text those ended (a line's "\n" and the question's into one "\n\n")
    overlap: int = 0

    @property
    def num_tokens(self) -> int:
        return sum(len(p) for p in self.probes)


@dataclass(frozen=True)
class JobOutcome:
    """A finished job: its answer, or why it could not run."""

    job: ProbeJob
    answer: Any = None
    error: str | None = None
    retry: bool = False  # the error is of the moment (the shard computing it was lost): asked again, it is answered
    at: StreamProgress | None = None  # where the stream stood when the job's last probe ran (its context)

    @property
    def context(self) -> dict[str, int]:
        """What the answer attended, as an ask's reply says it (docs/wire-protocol.md): the session's tokens and
        the whole ticks among them, fewer after a roll; empty for an outcome of no forward."""
        return {} if self.at is None else self.at.context


class QueryPlanner(Protocol):
    def due(self, progress: list[StreamProgress]) -> list[ProbeJob]:
        """Jobs for the standing queries due once these streams have advanced."""
        ...
