"""What the scheduler hands over for one forward (``Plan``) and what it books from it (``StepReport``).

``Scheduler.plan()`` fills a ``Plan``: the advances of the streams taken, the chunks and due points (cuts)
each passes, the probe jobs placed after them, the jobs that cannot run, and the ``ForwardBatch`` the block
manager laid out for all of it. A stream that rolls inside the forward (engine/rolls_in_forward.py) has one
advance per segment, in order: the ones before a roll write into a retired session (``retired``), the last one
into the stream's own. ``Scheduler.commit()`` returns a ``StepReport``; the engine returns it from
``step()`` and the service publishes what it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.batch import Advance, ForwardBatch, Probe
from engine.jobs import JobOutcome, ProbeJob, StreamProgress
from engine.session import Session
from engine.stream import Chunk, Cut, Stream


@dataclass
class Plan:
    """One planned forward: stream advances first, then the jobs' probes, in ``forward`` order. The lists
    ``advances``, ``streams``, ``chunks`` and ``cuts`` are parallel, one entry per advance; a stream that rolls
    inside the forward has several entries (its segments), in order."""

    advances: list[Advance] = field(default_factory=list)
    streams: list[Stream] = field(default_factory=list)
    chunks: list[list[Chunk]] = field(default_factory=list)
    cuts: list[list[Cut]] = field(default_factory=list)  # per advance, the due points it passes, in order
    jobs: list[ProbeJob] = field(default_factory=list)
    failed: list[JobOutcome] = field(default_factory=list)  # jobs that cannot run, with the reason
    copies: list[tuple[list[int], list[int]]] = field(default_factory=list)
    forward: ForwardBatch = field(default_factory=ForwardBatch)
    rebuilt: list[Stream] = field(default_factory=list)  # streams whose evicted or restored KV this forward recomputes
    tokens_left: int = 0  # of the forward's token budget, what the advances planned so far left
    # sessions that hold a segment written before a roll inside this forward: freed once the forward is committed
    retired: list[Session] = field(default_factory=list)
    # id(job) -> the advance whose cut the job is placed at: its session (retired or not) is the one it reads
    job_items: dict[int, Advance] = field(default_factory=dict)
    # id(advance) -> (event_ts, arrival_ns) of chunks booked uncomputed after it, before the stream's next segment
    # (skipped at a roll inside the forward): its commit leaves them, and no prediction of the next token
    booked_after: dict[int, tuple[int, int]] = field(default_factory=dict)

    def probes(self, streams: dict[str, Stream]) -> list[Probe]:
        return [Probe(self.session_of(job, streams), tokens, job.logits, job.cut, job.overlap)
                for job in self.jobs for tokens in job.probes]

    def session_of(self, job: ProbeJob, streams: dict[str, Stream]) -> Session:
        """The session ``job`` reads: that of the advance at whose cut it was placed, else its stream's."""
        item = self.job_items.get(id(job))
        return item.session if item is not None else streams[job.stream].session

    def ticks_after(self, state: Stream) -> int:
        """``state``'s tick count once this plan ran (every segment of its advance)."""
        return state.ticks + sum(chunk.ticks for planned, chunks in zip(self.streams, self.chunks)
                                 if planned is state for chunk in chunks)


@dataclass
class StepReport:
    """What one forward produced: the streams it advanced and the finished jobs (answers or errors)."""

    advanced: list[StreamProgress] = field(default_factory=list)
    outcomes: list[JobOutcome] = field(default_factory=list)
    tokens: int = 0
