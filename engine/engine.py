"""Engine: the loop that keeps every stream's session advanced and its standing questions answered.

    batch   = scheduler.next_batch()            # advances across streams, within the budgets
    jobs    = asks + planner.due(preview)       # on-demand first, then the flash queries now due
    outputs = runner.run(advances + probes)     # ONE forward: probes see this batch's new ticks
    scheduler.commit(batch, outputs); job.done(...)

Ingest and the questions it makes due share one forward, so a flash answer
costs its question tokens only, never a second pass over the batch. The engine
core knows streams, tokens and event times — never ticks or YAML: the query
layer plugs in through ``QueryPlanner``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from engine.runner import LogitsWanted, ModelRunner, Probe
from engine.scheduler import Scheduler, SchedulerConfig, StreamProgress


@dataclass
class ProbeJob:
    """Token sequences to evaluate after one stream's committed prefix, and what to do with the logits.

    ``done(logits, progress)`` gets one tensor per probe (rows per ``logits``) and the
    stream's progress after the batch; it may return a follow-up job (a generate step).
    """

    stream: str
    probes: list[list[int]]
    done: Callable[[list[torch.Tensor], StreamProgress], "ProbeJob | None"]
    logits: LogitsWanted = "last"
    idle: bool = False  # low priority: run when no ingest is pending (generate queries)
    fail: Callable[[str], None] | None = None  # told why, when the job cannot run


IDLE_EVERY = 8


class QueryPlanner(Protocol):
    def due(self, progress: list[StreamProgress]) -> list[ProbeJob]:
        """Jobs for the standing queries due once these streams have advanced."""
        ...


@dataclass
class StepReport:
    advanced: list[StreamProgress] = field(default_factory=list)
    jobs: int = 0
    tokens: int = 0


@dataclass
class EngineStats:
    jobs_done: int = 0
    jobs_failed: int = 0


class UnknownStream(KeyError):
    """A question was asked of a stream that has never sent data."""


class Engine:
    def __init__(self, runner: ModelRunner, config: SchedulerConfig | None = None,
                 planner: QueryPlanner | None = None) -> None:
        self.runner = runner
        self.scheduler = Scheduler(runner, config)
        self.planner = planner
        self._asks: deque[ProbeJob] = deque()
        self._idle: deque[ProbeJob] = deque()
        self.stats = EngineStats()
        self._steps = 0

    def submit(self, stream: str, tokens: list[int], event_ts: int, ticks: int = 1) -> None:
        self.scheduler.submit(stream, tokens, event_ts, ticks)

    def ask(self, job: ProbeJob) -> None:
        """Queue an on-demand job; it runs in the next forward, ahead of flash work."""
        if job.stream not in self.scheduler.streams:
            raise UnknownStream(job.stream)
        (self._idle if job.idle else self._asks).append(job)

    def progress(self, stream: str) -> StreamProgress:
        state = self.scheduler.streams.get(stream)
        if state is None:
            raise UnknownStream(stream)
        return self.scheduler.progress_of(state, [], None)

    @property
    def busy(self) -> bool:
        return bool(self._asks or self._idle or any(s.pending for s in self.scheduler.streams.values()))

    def step(self) -> StepReport | None:
        """One forward; None when there was nothing to do."""
        batch = self.scheduler.next_batch()
        asks = list(self._asks)
        self._asks.clear()
        self._steps += 1
        if not batch and not asks and not self._idle:
            return None
        # idle work (generate steps) runs when nothing else does, and every IDLE_EVERY forwards regardless,
        # so a stream under constant load still gets its generated answers
        if self._idle and ((not batch and not asks) or self._steps % IDLE_EVERY == 0):
            asks.append(self._idle.popleft())
        streams = self.scheduler.streams
        items: list = list(batch.items)
        jobs: list[ProbeJob] = []
        for job in asks:  # on-demand first; one that cannot fit waits for the next forward
            probes = [Probe(streams[job.stream].session, tokens, job.logits) for tokens in job.probes]
            if not self._fits_window(job, batch):
                continue
            if self.scheduler.make_room(items + probes):
                items += probes
                jobs.append(job)
            else:
                self._asks.append(job)
        # flash queries are due only on streams advanced in this batch: their KV is resident
        for job in self.planner.due(self.scheduler.preview(batch)) if self.planner and batch else []:
            if job.idle:
                self._idle.append(job)
                continue
            if not self._fits_window(job, batch):
                continue
            items += [Probe(streams[job.stream].session, tokens, job.logits) for tokens in job.probes]
            jobs.append(job)
        outputs = self.runner.run(items)
        committed = self.scheduler.commit(batch, outputs[: len(batch)])
        by_stream = {p.stream: p for p in committed}
        cursor = len(batch)
        for job in jobs:
            logits = outputs[cursor : cursor + len(job.probes)]
            cursor += len(job.probes)
            follow_up = job.done(logits, by_stream.get(job.stream) or self.progress(job.stream))
            self.stats.jobs_done += 1
            if follow_up is not None:
                (self._idle if follow_up.idle else self._asks).append(follow_up)
        return StepReport(committed, len(jobs), sum(len(i.tokens) for i in items))

    def _fits_window(self, job: ProbeJob, batch: Any) -> bool:
        """A probe may not run past the model's positions; the job is failed with the reason instead."""
        state = self.scheduler.streams[job.stream]
        incoming = sum(len(item.tokens) for item in batch.items if item.session is state.session)
        longest = max((len(p) for p in job.probes), default=0)
        limit = self.runner.config.max_positions
        if len(state.session.tokens) + incoming + longest <= limit:
            return True
        self.stats.jobs_failed += 1
        if job.fail is not None:
            job.fail(f"probe of {longest} tokens on stream {job.stream!r} would pass the model's {limit} positions "
                     f"(raise scheduler.probe_reserve or shorten the question)")
        return False

    def run_until_idle(self, max_steps: int | None = None) -> int:
        """Step until nothing is pending; returns the number of forwards."""
        steps = 0
        while (max_steps is None or steps < max_steps) and self.step() is not None:
            steps += 1
        return steps
