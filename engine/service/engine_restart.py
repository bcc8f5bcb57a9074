"""One engine's restart from its data directory (TickPipeline with `log.dir`): the tick log replayed onto the
scheduler uncomputed (_EngineReplay, log_replay.py's ReplayTarget), then what the stopped process owed: the tail of
ticks past each stream's last answer computed a tick group at a time as the live run would have, at once or queued
for the serving loop (`defer_owed`, the server's way: bound first), and the answers owed at each stream's latest
tick; and the logged streams admission refused at this start (a limit lowered since), said and handed to the server
(held in a TurnedAway, turned_away.py, as the sharded front door holds its own).
A shard restarts its own way (shard.py); the rules of what is owed are owed_answers.py's."""

from __future__ import annotations

import sys
from typing import Any, Callable

from connectors.encoder import EncodedTick
from connectors.ticks import counted
from engine.forward_plan import StepReport
from engine.jobs import JobOutcome
from engine.scheduler import AdmissionRefused
from engine.service.owed_answers import (TailStarts, answer_tail, answers_owed, answers_owed_at_latest, owed_jobs,
                                         restart_owes)
from engine.service.turned_away import TurnedAway
from queries.spec import QuerySpec


class EngineRestart:
    """What one engine's restart holds until it is done: the deferred tail's end on each stream (and the queries
    the config changed at this start), the streams admission refused. ``pipeline`` is the TickPipeline restarted
    (typed Any: it imports this module); ``progress`` says what the restart is doing (`health` while it starts,
    starting_replies.py); ``say`` is the service's log line."""

    def __init__(self, pipeline: Any, progress: Callable[[str], None], say: Callable[[str], None]) -> None:
        self.pipeline = pipeline
        self._progress = progress
        self.say = say
        self._tail_end: dict[str, int] = {}  # deferred owed work: each stream's tick count at its tail's end
        self._tail_changed: set[str] = set()  # ... and the queries the config changed at this start
        # logged streams admission refused at this start (a lower scheduler.max_streams, a smaller pool), until the
        # server takes them (take_turned_away)
        self.turned_away = TurnedAway()
        self.refused_at_start: set[str] = set()  # their names, kept (`streams` counts them: refused_at_start)

    def replay(self, changed: list[str], defer_owed: bool) -> list[JobOutcome]:
        """The tick log replayed, then what the restart owes (``changed``: the queries the config changed at this
        start); the answers owed at the restart, computed (none yet with ``defer_owed``: the serving loop computes
        them once ingest and answers are bound)."""
        pipeline = self.pipeline
        self._progress("replaying the tick log")
        self._starts = TailStarts(pipeline.cache, pipeline.registry, pipeline.marks, set(changed))
        tail = pipeline.data.replay(pipeline.encoders, _EngineReplay(self), answered=self._starts,
                                    turned_away=self.turned_away, progress=self._progress)
        # the streams it brings back: those the replay booked, and those whose whole log is owed tail (a stream
        # refused at an earlier start never had a query registered meanwhile: its ticks are computed after this)
        back = set(pipeline.engine.scheduler.streams) | {item.stream for item in tail if item is not None}
        for stream in pipeline.encoders.expired_streams():  # (their latest answers kept packed, as live)
            pipeline.cache.pack_stream(stream)
        pipeline.data.replayed(len(back), pipeline.engine.rebuild())
        pipeline.ticks_in = pipeline.data.recovered_ticks
        recovered: list[JobOutcome] = []
        if defer_owed:  # the server's way: bound first, the owed tail computed by its loop, new ticks behind it
            self._owe(tail, set(changed))
        else:
            recovered = self._answer_tail(tail, set(changed))
        # a query the config changed is registered now, after every logged tick: it owes none of them
        pipeline.marks.registered(changed, pipeline._committed() | self._tail_end)
        pipeline.save_queries()
        recovered += self._answers_owed(run=not defer_owed)
        self._say_turned_away()
        return recovered

    def turn_away(self, stream: str, ticks: int, why: str) -> None:
        """Logged ticks of ``stream`` the restart's admission refused (``why``): remembered while none is held."""
        self.turned_away.add(stream, ticks, f"stream_refused: {why}, at this start's tick log replay")

    def _say_turned_away(self) -> None:
        """After a restart: the logged streams admission refused (a limit lowered since they were logged) are
        forgotten by the encoders, as a stream refused live is, and said, naming the limit; the server then says
        them refused (`streams`, `get`, `ask`) rather than "has sent no data"."""
        self.refused_at_start = self.turned_away.settle(self.pipeline.engine.scheduler.streams, self.pipeline.encoders,
                                                        self.pipeline.admission_limit, self.say)

    def take_turned_away(self) -> dict[str, list]:
        """The streams refused at this start (name -> [items refused, the first why]), once: the server remembers
        them with the streams it refused live."""
        return self.turned_away.take()

    def _answer_tail(self, tail: list[EncodedTick | None], changed: set[str]) -> list[JobOutcome]:
        """The logged items past each stream's answered point, computed as the live run would have
        (owed_answers.answer_tail); the answers kept as live ones are."""
        pipeline = self.pipeline
        items = [item for item in tail if item is not None]
        owed = self._say_owed(tail, items, changed, "computing what was owed: ", "ingest and answers are bound "
                              "after it (`health` says starting meanwhile)")
        if not items:
            return []
        total, start = sum(len(item.tokens) for item in items), pipeline.runner.stats.tokens_advanced
        ticks = counted(sum(item.ticks for item in items), "tick")
        doing = "computing what was owed" if owed else "computing the ticks after each stream's last answer"

        def step() -> StepReport | None:  # a forward of the tail, and how far it has come
            report = pipeline.step()
            done = min(total, pipeline.runner.stats.tokens_advanced - start)
            self._progress(f"{doing}: {ticks}, {done:,} of {total:,} tokens ({done / total:.0%})")
            return report

        outcomes, _, refused = answer_tail(pipeline.engine, pipeline.flash, pipeline.registry, pipeline.cache,
                                           pipeline.marks, tail, changed, step=step, accepted=pipeline._accepted,
                                           refused_item=lambda item, why: self.turn_away(item.stream, item.ticks,
                                                                                          why))
        pipeline.data.replay_refused += refused
        return outcomes

    def _answers_owed(self, run: bool = True) -> list[JobOutcome]:
        """After a replay and its tail: standing queries due on ticks that were accepted but never answered
        before the process stopped and that no tick group answered (a stream the replay booked whole),
        computed now, once, at the stream's latest tick (``run``; else asked, for the serving loop to compute; a
        stream whose deferred tail is still to compute is answered by that tail's groups)."""
        pipeline = self.pipeline
        if run:
            self._progress("computing the answers owed at each stream's latest tick")
        for stream in pipeline.engine.scheduler.streams:
            if stream in self._tail_end:
                continue
            progress = pipeline.engine.progress(stream)
            for job in owed_jobs(pipeline.registry, pipeline.cache, pipeline.marks, pipeline.flash, stream,
                                 progress):
                pipeline.engine.ask(job)
        return pipeline._kept(pipeline.engine.run_until_idle()) if run else []

    def _owe(self, tail: list[EncodedTick | None], changed: set[str]) -> None:
        """A replay's tail queued as the stopped process had it (its items, a tick group per wire message), for the
        serving loop to compute once ingest is bound: ticks arriving meanwhile queue behind it, each stream in
        order. Until every stream's tail is computed, its groups answer only the queries the stopped process owed
        there (owed_answers.answer_tail's rule; `flash.owes`), and a query the config changed waits for new ticks."""
        pipeline = self.pipeline
        items = [item for item in tail if item is not None]
        self._say_owed(tail, items, changed, "owed: ", "computed once ingest and answers are bound (new ticks "
                       "queue behind them; `lag_s` and `owed_ticks` in stats say how far it is)")
        if not items:
            return
        held = pipeline.engine.scheduler.streams  # (a stream whose every logged tick is owed is not held yet)
        end = {stream: pipeline.engine.progress(stream).ticks if stream in held else 0
               for stream in {item.stream for item in items}}
        for item in tail:
            if item is None:  # a message began: the live run closed its groups here
                pipeline.engine.close_groups()
                continue
            try:
                pipeline.engine.submit(item.stream, item.tokens, item.ts, item.ticks)
            except AdmissionRefused as e:  # the limits changed since: counted, never fatal (as the replay does)
                pipeline.data.replay_refused += 1
                self.turn_away(item.stream, item.ticks, str(e))
                continue
            pipeline._accepted(item)
            end[item.stream] += item.ticks
        pipeline.engine.close_groups()
        self._tail_end, self._tail_changed = end, changed
        owed = restart_owes(pipeline.cache, pipeline.marks, changed)

        def owes(spec: QuerySpec, progress: Any) -> bool:
            tail_end = self._tail_end.get(progress.stream)
            if tail_end is None or progress.ticks > tail_end:
                return True  # past the tail: ticks that came after the restart
            return owed(spec, progress.stream, progress.ticks)

        pipeline.flash.owes = owes

    def _say_owed(self, tail: list[EncodedTick | None], items: list[EncodedTick], changed: set[str], lead: str,
                  then: str) -> int:
        """Says, when the restart owes answers, how many and where; returns how many are due on the tail's ticks.
        Those are computed a tick group at a time; a stream the replay booked whole (its last answer is not in the
        logs: its first answers went unlogged, or retention dropped its answered tick) is owed one answer per due
        query at its latest tick (``_answers_owed``), counted here too, so the line says what is then published.
        A tail that owes none (a clean stop: its ticks came after each stream's last answer and fired no query)
        is computed unsaid."""
        pipeline = self.pipeline
        owed = answers_owed(pipeline.registry, pipeline.cache, pipeline.marks, changed, tail, self._starts)
        in_tail = {item.stream for item in items}
        whole = [pipeline.engine.progress(s) for s in pipeline.engine.scheduler.streams if s not in in_tail]
        at_latest = answers_owed_at_latest(pipeline.registry, pipeline.cache, pipeline.marks, changed, whole)
        latest = sum(at_latest.values())
        both = bool(owed and latest)  # then the total leads, and each part gives its number alone
        part = (lambda n: str(n)) if both else (lambda n: counted(n, "answer"))  # noqa: E731
        where = [f"{part(owed)} due on {counted(sum(i.ticks for i in items), 'tick')} of "
                 f"{counted(len(in_tail), 'stream')} accepted but not yet answered when the service "
                 f"stopped"] * bool(owed)
        where += [f"{part(latest)} at the latest tick of {counted(len(at_latest), 'stream')} whose last answer the "
                  f"logs do not hold"] * bool(latest)
        if where:
            total = f"{counted(owed + latest, 'answer')}: " if both else ""
            print(f"flashtick: {lead}{total}{'; '.join(where)}; {then}", file=sys.stderr, flush=True)
        return owed

    def tail_progress(self) -> None:
        """Streams whose deferred tail is computed leave it; with the last, the restart's rules end (as at the end
        of owed_answers.answer_tail: a changed query fires first on each stream's next batch)."""
        if not self._tail_end:
            return
        done = [s for s, end in self._tail_end.items()
                if s not in self.pipeline.engine.scheduler.streams or self.pipeline.engine.progress(s).ticks >= end]
        for stream in done:
            del self._tail_end[stream]
            for name in self._tail_changed:
                self.pipeline.registry.unfire(name, stream)
        if not self._tail_end:
            self.pipeline.flash.owes = None

    @property
    def owed_ticks(self) -> int:
        """Ticks of a deferred restart tail not computed yet."""
        return sum(max(0, end - self.pipeline.engine.progress(s).ticks) for s, end in self._tail_end.items()
                   if s in self.pipeline.engine.scheduler.streams)


class _EngineReplay:
    """A tick log replay's target (log_replay.ReplayTarget) in one engine: items booked on the scheduler and
    seen by what marks ticks beside it (live scores, the answer adaptation), as the live path's would be."""

    def __init__(self, restart: EngineRestart) -> None:
        self.restart = restart
        self.pipeline = restart.pipeline
        self.scheduler = restart.pipeline.engine.scheduler
        self.refused: dict[str, int] = {}  # stream -> items admission refused (each counted in refused_streams)

    def restore(self, item: EncodedTick) -> None:
        try:
            self.scheduler.restore(item.stream, item.tokens, item.ts, item.ticks)
        except AdmissionRefused as e:  # (split_log counts it, refused as stream_refused)
            self.restart.turn_away(item.stream, item.ticks, str(e))
            self.refused[item.stream] = self.refused.get(item.stream, 0) + 1
            raise
        self.pipeline._accepted(item)

    def start_at(self, stream: str, ticks: int, last_ts: int, booked: Any = None) -> None:
        problem = self.scheduler.start_at(stream, ticks, last_ts, booked)
        if problem is not None:  # the limits changed since it was logged
            self.restart.turn_away(stream, ticks, problem)
        self.pipeline.scores.start_at(stream, ticks)
        self.pipeline.adaptation.start_at(stream, ticks)

    def drop(self, stream: str) -> None:
        """An expiry. A stream whose session this replay holds reads expired, as live, its context kept as live
        keeps it (engine/kept_contexts.py): the refusals of its items before it go (the later event wins), nor are
        they counted in refused_streams. One the replay refused and has not admitted since holds nothing to expire:
        it stays refused at this start, said and counted as a held stream refused is (review200 #2: they read
        "expired" with `at_last_ts: null`, unsaid)."""
        self._removed(stream, stream in self.scheduler.streams)
        self.scheduler.expire(stream)

    def context_gone(self, stream: str) -> None:
        self.scheduler.kept.forget(stream)

    def forget(self, stream: str) -> None:
        """As an expiry, its context given up and its answer side with it (split_log forgets its ordering guard
        too): it reads as never seen."""
        self._removed(stream, stream in self.scheduler.streams)
        self.scheduler.drop(stream)
        self.pipeline.scores.drop_stream(stream)
        self.pipeline.adaptation.drop_stream(stream)
        self.pipeline.registry.replayed_expiry(stream)

    def _removed(self, stream: str, held: bool) -> None:
        if held:
            self.restart.turned_away.discard(stream)
            self.scheduler.stats.refused_streams -= self.refused.pop(stream, 0)
