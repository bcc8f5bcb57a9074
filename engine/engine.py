"""Engine: the loop that keeps every stream's session advanced and its standing questions answered.

    plan    = scheduler.plan()               # advances + due probes, within every budget, KV allocated
    outputs = runner.run(plan.forward)       # ONE forward: probes see this batch's new ticks
    report  = scheduler.commit(plan, outputs)  # sessions booked; jobs turn logits into answers

``step()`` returns the report (advanced streams, answers, errors); the service
publishes. The engine core knows streams, tokens and event times — never ticks
or YAML: the query layer plugs in through ``QueryPlanner`` and ``ProbeJob``.

``run()``, ``advance()`` and ``probe()`` drive sessions directly, outside the
stream loop (tests, benchmarks, tools): the same allocation, forward and booking.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from engine.batch import Advance, LogitsWanted, Probe
from engine.block_manager import BlockManager
from engine.forward_plan import StepReport
from engine.jobs import JobOutcome, ProbeJob, QueryPlanner, StreamProgress
from engine.runner import ModelRunner
from engine.scheduler import Scheduler, SchedulerConfig
from engine.session import Session


class Engine:
    def __init__(self, runner: ModelRunner, config: SchedulerConfig | None = None,
                 planner: QueryPlanner | None = None) -> None:
        self.runner = runner
        self.blocks = BlockManager(runner.kv.new_pool(), runner.config.max_positions,
                                   getattr(runner.config, "positions_cause", "its max_position_embeddings"))
        self.scheduler = Scheduler(self.blocks, config, planner)
        self._in_flight = False
        if self.scheduler.header is not None:  # computed once; sessions share its blocks
            (rows,) = self.run([Advance(self.scheduler.header, [], "last")])  # (1, vocab)
            self.scheduler.header_logits = rows[-1]  # predicts every stream's first token (its first surprise)

    def step(self, max_tokens: int | None = None) -> StepReport | None:
        """One forward (of about ``max_tokens`` at most, when given: Scheduler.plan); None when there was nothing
        to do."""
        plan = self.scheduler.plan(max_tokens)
        if plan is None:
            return None
        self._in_flight = True  # the plan took its chunks off the queues: busy until they are committed
        try:
            return self.scheduler.commit(plan, self.runner.run(plan.forward))
        finally:
            self._in_flight = False

    def run_until_idle(self, max_steps: int | None = None) -> list[JobOutcome]:
        """Step until nothing is pending; returns every finished job's outcome, in order."""
        outcomes: list[JobOutcome] = []
        steps = 0
        while (max_steps is None or steps < max_steps) and (report := self.step()) is not None:
            outcomes += report.outcomes
            steps += 1
        return outcomes

    def rebuild(self) -> int:
        """Compute the KV of every restored session that fits the free pool (see Scheduler.restore);
        returns the forwards it took."""
        forwards = 0
        while (plan := self.scheduler.plan_rebuild()) is not None:
            self.scheduler.commit_rebuild(plan, self.runner.run(plan.forward))
            forwards += 1
        return forwards

    # -- the stream loop's inputs ------------------------------------------------------------------

    def submit(self, stream: str, tokens: list[int], event_ts: int, ticks: int = 1, cut: bool = False,
               arrival_ns: int | None = None, received_ns: int | None = None) -> None:
        self.scheduler.submit(stream, tokens, event_ts, ticks, cut, arrival_ns, received_ns)

    def close_groups(self, streams: Iterable[str] | None = None) -> None:
        """End the current tick group of ``streams`` (default: every stream with pending data): standing
        queries are due right there, whenever the forward that reaches it runs."""
        for stream in self.scheduler.streams if streams is None else streams:
            self.scheduler.close_group(stream)

    def ask(self, job: ProbeJob) -> None:
        """Queue an on-demand job; it runs in the next forward with room, ahead of standing queries."""
        self.scheduler.ask(job)

    def progress(self, stream: str) -> StreamProgress:
        return self.scheduler.progress(stream)

    @property
    def busy(self) -> bool:
        """Work accepted and not yet committed (another thread may ask while a forward runs)."""
        return self._in_flight or self.scheduler.busy

    # -- direct use of sessions, outside the stream loop --------------------------------------------

    def run(self, items: list[Advance | Probe]) -> list[torch.Tensor]:
        """One forward over explicit items; returns each item's logits, (rows, vocab) fp32."""
        batch = self.blocks.allocate(items)
        logits = self.runner.run(batch)
        self.blocks.commit(batch)
        return logits

    def advance(self, session: Session, tokens: list[int], logits: LogitsWanted = "last") -> torch.Tensor:
        """Commit ``tokens`` to ``session``; returns their logits."""
        return self.run([Advance(session, list(tokens), logits)])[0]

    def probe(self, session: Session, tokens: list[int], logits: LogitsWanted = "all") -> torch.Tensor:
        """Logits of ``tokens`` evaluated after the committed prefix; the session is left as it was."""
        return self.run([Probe(session, list(tokens), logits)])[0]

    def evict(self, session: Session) -> int:
        return self.blocks.evict(session)

    def fork(self, session: Session, name: str) -> Session:
        """A new session with ``session``'s committed prefix: full blocks shared, the partial one copied."""
        child = Session(name, tokens=session.tokens[: session.num_cached])
        copy = self.blocks.adopt_prefix(child, session, session.num_cached)
        if copy is not None:
            self.runner.kv.copy_cells(*copy)
        return child
