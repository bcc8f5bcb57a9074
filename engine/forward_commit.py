"""After a forward: what it produced booked (Scheduler.commit). Each stream's advanced chunks become its token
log's boundaries, tick count, event time and next prediction, the surprise of each cut is set on the jobs placed
there, the retired segments of rolls inside the forward give their blocks back, and each job's outputs become its
answer (or a follow-up queued: before other idle work, so a topic's answers keep the order of their cuts)."""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Callable

import torch

from engine.block_manager import BlockManager
from engine.forward_plan import Plan, StepReport
from engine.jobs import JobOutcome, ProbeJob, StreamProgress
from engine.scheduler_stats import SchedulerStats
from engine.stream import chunk_surprises


class ForwardCommit:
    def __init__(self, blocks: BlockManager, stats: SchedulerStats, asks: deque[ProbeJob], idle: deque[ProbeJob],
                 progress: Callable[[str], StreamProgress]) -> None:
        # the scheduler's own, shared: follow-ups join its job queues; ``progress`` is a stream's as committed
        self.blocks = blocks
        self.stats = stats
        self._asks = asks
        self._idle = idle
        self._progress = progress
        self._batch_no = 0  # forwards committed: a stream's last_active (LRU eviction's order)

    def commit(self, plan: Plan, logits: list[torch.Tensor]) -> StepReport:
        """Book a forward that ran (``logits``: the runner's outputs per item) and finish its jobs."""
        self.blocks.commit(plan.forward)
        for retired in plan.retired:  # segments written before a roll inside the forward: read, now dropped
            self.blocks.evict(retired)
        self.stats.rebuilt_streams += len(plan.rebuilt)
        for state in plan.rebuilt:
            state.rebuilds += 1
        advanced = self._commit_advances(plan, logits[: len(plan.advances)])
        by_stream = {p.stream: p for p in advanced}
        report = StepReport(advanced, list(plan.failed), plan.forward.num_tokens)
        cursor = len(plan.advances)
        for job in plan.jobs:
            outputs = logits[cursor : cursor + len(job.probes)]
            cursor += len(job.probes)
            at = job.at or by_stream.get(job.stream) or self._progress(job.stream)
            result = job.answer_from(outputs, at)
            follow_up = result.follow_up
            if follow_up is not None:
                if follow_up.cut is None and follow_up.stream == job.stream:  # it goes on where its parent was
                    follow_up.cut, follow_up.at = job.cut, job.at
                # a follow-up runs before other idle work, so a topic's answers keep the order of their cuts
                self._idle.appendleft(follow_up) if follow_up.idle else self._asks.append(follow_up)
            else:
                self.stats.jobs_done += 1
                report.outcomes.append(JobOutcome(job, result.answer, at=at))
        return report

    def _commit_advances(self, plan: Plan, logits: list[torch.Tensor]) -> list[StreamProgress]:
        self._batch_no += 1
        self.stats.batches += 1
        progress: dict[str, StreamProgress] = {}  # per stream, after its last segment
        for state, chunks, cuts, item, rows in zip(plan.streams, plan.chunks, plan.cuts, plan.advances, logits):
            if item.session is state.session:  # (a retired segment's chunks were booked when it was retired)
                offset = len(state.session.tokens) - len(item.tokens)
                for chunk in chunks:
                    state.boundaries.append(offset)
                    offset += len(chunk.tokens)
            surprises = chunk_surprises(state, chunks, item.logits, rows, [c.chunk for c in cuts] + [len(chunks) - 1])
            for cut in cuts:  # the jobs of a cut (idle ones included, they run later) see its progress
                cut.progress = replace(cut.progress, surprise=surprises[cut.chunk])
                for job in cut.jobs:
                    job.at = cut.progress
            state.next_token_logits = rows[-1].clone() if rows.shape[0] else state.next_token_logits
            state.ticks += sum(c.ticks for c in chunks)
            state.event_ts = chunks[-1].event_ts
            state.arrival_ns = chunks[-1].arrival_ns
            state.last_active = self._batch_no
            if id(item) in plan.booked_after:  # chunks booked uncomputed after this segment: they are the latest
                (state.event_ts, state.arrival_ns), state.next_token_logits = plan.booked_after[id(item)], None
            progress[state.name] = state.progress([], surprises[len(chunks) - 1])
        return list(progress.values())
