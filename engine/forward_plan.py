"""What the scheduler hands over for one forward (``Plan``) and what it books from it (``StepReport``).

``Scheduler.plan()`` fills a ``Plan``: the advances of the streams taken, the chunks and due points (cuts)
each passes, the probe jobs placed after them, the jobs that cannot run, and the ``ForwardBatch`` the block
manager laid out for all of it. ``Scheduler.commit()`` returns a ``StepReport``; the engine returns it from
``step()`` and the service publishes what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.batch import Advance, ForwardBatch, Probe
from engine.jobs import JobOutcome, ProbeJob, StreamProgress
from engine.stream import Chunk, Cut, Stream


@dataclass
class Plan:
    """One planned forward: stream advances first, then the jobs' probes, in ``forward`` order."""

    advances: list[Advance] = field(default_factory=list)
    streams: list[Stream] = field(default_factory=list)
    chunks: list[list[Chunk]] = field(default_factory=list)
    cuts: list[list[Cut]] = field(default_factory=list)  # per advance, the due points it passes, in order
    jobs: list[ProbeJob] = field(default_factory=list)
    failed: list[JobOutcome] = field(default_factory=list)  # jobs that cannot run, with the reason
    copies: list[tuple[list[int], list[int]]] = field(default_factory=list)
    forward: ForwardBatch = field(default_factory=ForwardBatch)
    rebuilt: list[Stream] = field(default_factory=list)  # streams whose evicted or restored KV this forward recomputes

    def probes(self, streams: dict[str, Stream]) -> list[Probe]:
        return [Probe(streams[job.stream].session, tokens, job.logits, job.cut)
                for job in self.jobs for tokens in job.probes]

    def ticks_after(self, state: Stream) -> int:
        """``state``'s tick count once this plan ran."""
        for planned, chunks in zip(self.streams, self.chunks):
            if planned is state:
                return state.ticks + sum(chunk.ticks for chunk in chunks)
        return state.ticks


@dataclass
class StepReport:
    """What one forward produced: the streams it advanced and the finished jobs (answers or errors)."""

    advanced: list[StreamProgress] = field(default_factory=list)
    outcomes: list[JobOutcome] = field(default_factory=list)
    tokens: int = 0
