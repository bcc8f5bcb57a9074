"""The answers a restart owes: the standing queries the stopped process had not answered yet, due on ticks past
each stream's last answer or, never answered there, past the query's registration (RegistrationMarks). They are
counted before the replay's tail is computed (to say how many a start will compute) and computed after it, a tick
group at a time as the live run would have (answer_tail), by one engine (engine_restart.py) or a shard (shard.py)."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable

from connectors.encoder import EncodedTick
from engine.engine import Engine
from engine.forward_plan import StepReport
from engine.jobs import JobOutcome, ProbeJob, StreamProgress
from engine.scheduler import AdmissionRefused
from engine.service.move_marks import move_mark
from engine.service.registration_marks import RegistrationMarks
from queries.cache import Answer, AnswerCache
from queries.flash import FlashQueries
from queries.registry import Registry
from queries.spec import QuerySpec


def owed_jobs(registry: Registry, cache: AnswerCache, marks: RegistrationMarks, flash: FlashQueries, stream: str,
              progress: StreamProgress) -> list[ProbeJob]:
    """After a restore, the probe work of the standing queries due on ``stream`` that the stopped process never
    answered: due on ticks past its last answer, or, never answered on the stream, past its registration (one
    registered after the stream's last tick is owed nothing: it fires on the stream's next batch, as it would
    have without the restart)."""
    jobs = []
    for spec in registry.due(stream, progress.ticks, progress.event_ts):
        if _owed(cache, marks, spec.name, stream, progress.ticks):
            jobs.append(flash.job_for(spec, stream))
        elif cache.get(spec.name, stream) is None:  # registered after the stream's last tick: its next batch fires it
            registry.unfire(spec.name, stream)
    return jobs


def _owed(cache: AnswerCache, marks: RegistrationMarks, query: str, stream: str, ticks: int) -> bool:
    """Whether the stopped process left ``query`` unanswered on ``stream`` at tick count ``ticks``: due past its
    last answer there or, never answered there, past its registration."""
    last = cache.get(query, stream)
    return marks.owes(query, stream, ticks) if last is None else last.version < ticks


def answers_owed_at_latest(registry: Registry, cache: AnswerCache, marks: RegistrationMarks, changed: set[str],
                           streams: Iterable[StreamProgress]) -> dict[str, int]:
    """How many answers ``owed_jobs`` will ask for on each of ``streams`` (booked whole by the replay: none of their
    ticks in its tail) that is owed any, recording nothing; a query the config changed at this start (``changed``)
    is owed none."""
    owed: dict[str, int] = {}
    for progress in streams:
        for spec, ticks in registry.would_fire(progress.stream, [(progress.ticks, progress.event_ts)]):
            if spec.name not in changed and _owed(cache, marks, spec.name, progress.stream, ticks):
                owed[progress.stream] = owed.get(progress.stream, 0) + 1
    return owed


def live_tail_points(cache: AnswerCache, registry: Registry, marks: RegistrationMarks, streams: set[str]
                     ) -> dict[str, tuple[int, int | None] | None]:
    """Where each of ``streams``' tail begins (split_log's ``answered``) when a live front door rebuilds a lost shard,
    whose cache holds every answer published: at the stream's latest answer, over every standing query (how far the
    engine that computed it had got); on a stream with none yet (its first ticks came just before the loss or
    while the shard was down), at its queries' registration (``registration_point``), so its ticks are computed
    group by group as one engine's restart computes them, not booked whole and owed one answer at the latest. A
    restart reads the answer log, which may lack some answers (TailStarts)."""
    answered: dict[str, tuple[int, int]] = {}
    for answer in cache.latest():
        if answer.stream in streams and answer.version > answered.get(answer.stream, (0, 0))[0]:
            answered[answer.stream] = (answer.version, answer.data_ts)
    return {stream: answered[stream] if stream in answered else registration_point(registry, marks, stream)
            for stream in streams}


def registration_point(registry: Registry, marks: RegistrationMarks, stream: str, changed: Container[str] = ()
                       ) -> tuple[int, None] | None:
    """Where the tail of ``stream``, none of whose answers is known, begins: at the earliest tick count at which
    one of its standing queries (``changed`` left out: registered after every logged tick) was registered, with no
    event time (the first item reaching that count); None when none fires by itself (nothing is owed: booked
    whole)."""
    counts = [marks.start(spec.name, stream) for spec in registry.matching(stream)
              if spec.trigger.fires_by_itself and spec.name not in changed]
    return (min(counts), None) if counts else None


class TailStarts:
    """Where a restart's tail of ticks begins on each stream (split_log's ``answered``): where the earliest of its
    standing queries was left unanswered. That is the stream's latest logged answer, unless a query would have
    fired by then and has no answer logged since its own last one (there, with that answer's event time), or was
    never answered on the stream (at the tick count it was registered at; no event time known: the first item
    reaching that count). The latest logged answer alone is not enough: an answer log that failed among one
    group's answers (a full disk) leaves the stream's other queries unlogged there and later, and booking the
    stream up to it skipped their answers, which subscribers had, and gave their seqs to the next ticks' answers."""

    def __init__(self, cache: AnswerCache, registry: Registry, marks: RegistrationMarks,
                 changed: Container[str] = ()) -> None:
        self._latest: dict[str, dict[str, Answer]] = {}  # stream -> query -> its latest logged answer
        for answer in cache.latest():
            self._latest.setdefault(answer.stream, {})[answer.query] = answer
        self._registry, self._marks, self._changed = registry, marks, changed
        self._points: dict[str, tuple[int, int | None] | None] = {}

    def get(self, stream: str) -> tuple[int, int | None] | None:
        """``stream``'s start: (tick count, event time of that tick, or None: the first item reaching the count),
        or None: nothing is owed on it (booked whole)."""
        if stream not in self._points:
            self._points[stream] = self._start(stream)
        return self._points[stream]

    def answered(self, stream: str) -> int | None:
        """The tick count past which the restart owes answers on ``stream``: where its tail begins (``get``), a
        stream with no answer logged included (its queries' registration points: its ticks past them are owed, and
        retention must keep them); None when nothing is owed on it (no standing query matches it). A stream expired
        or forgotten before the stop may be held to its queries' registration points here too: the live bound
        (the engine's committed counts) takes over after the replay, and the next heartbeat drops what this kept."""
        start = self.get(stream)
        return None if start is None else start[0]

    def _start(self, stream: str) -> tuple[int, int | None] | None:
        answers = self._latest.get(stream, {})
        if not answers:
            return registration_point(self._registry, self._marks, stream, self._changed)
        newest = max(answers.values(), key=lambda a: a.version)
        point: tuple[int, int | None] = (newest.version, newest.data_ts)
        # the queries that fire by the newest answer's tick, after their own last answers (trigger state restored)
        due = {spec.name for spec, _ in self._registry.would_fire(stream, [(newest.version, newest.data_ts)])}
        for spec in self._registry.matching(stream):
            if not spec.trigger.fires_by_itself or spec.name in self._changed:
                continue
            last = answers.get(spec.name)
            if last is None:
                behind: tuple[int, int | None] | None = (self._marks.start(spec.name, stream), None)
            elif spec.trigger.on_moves:  # where it fired since is in the ticks' prices: their replay computes it
                behind = (last.version, last.data_ts) if last.version < newest.version else None
            else:
                behind = (last.version, last.data_ts) if spec.name in due else None
            if behind is not None and behind[0] < point[0]:
                point = behind
        return point


def steps_while_full(engine: Engine, step: Callable[[], StepReport | None]) -> list[JobOutcome]:
    """Forwards (``step``) while a full one is pending (``Scheduler.forward_full``); their outcomes."""
    outcomes: list[JobOutcome] = []
    while engine.scheduler.forward_full():
        report = step()
        if report is None:
            break
        outcomes += report.outcomes
    return outcomes


def restart_owes(cache: AnswerCache, marks: RegistrationMarks, changed: set[str]
                 ) -> Callable[[QuerySpec, str, int], bool]:
    """Whether a restart owes ``query`` an answer at ``stream``'s tick count: past its last answer there
    (``cache``), or, never answered there, past its registration (``marks``); a query the config changed at
    this start (registered after every logged tick) is owed none."""
    floors = {(a.query, a.stream): a.version for a in cache.latest()}

    def owes(spec: QuerySpec, stream: str, ticks: int) -> bool:
        if spec.name in changed:
            return False
        floor = floors.get((spec.name, stream))
        return ticks > (floor if floor is not None else marks.start(spec.name, stream))

    return owes


def answers_owed(registry: Registry, cache: AnswerCache, marks: RegistrationMarks, changed: set[str],
                 tail: Iterable[EncodedTick | None], starts: TailStarts) -> int:
    """How many answers a restart's ``tail`` owes, from where it began (``starts``, what split_log was given), the
    answer log's points (``cache``) and the registration marks: answers_owed_in_tail with restart_owes, as both
    pipelines count them."""
    return answers_owed_in_tail(registry, tail, starts, restart_owes(cache, marks, changed))


def answers_owed_in_tail(registry: Registry, tail: Iterable[EncodedTick | None], starts: TailStarts,
                         owes: Callable[[QuerySpec, str, int], bool]) -> int:
    """How many answers a replay's tail (split_log) owes: the standing queries its tick groups (one per wire
    message and stream, as answer_tail cuts them) make due, from where each stream's tail began (``starts``), that
    ``owes`` (restart_owes) lets through. Nothing is recorded. A service stopped cleanly had answered all that
    was due: its tail is the ticks after each stream's last answer that fired no query, and owes 0."""
    counts: dict[str, int] = {}
    group_ends: dict[str, list[tuple[int, int]]] = {}
    open_groups: dict[str, int] = {}  # stream -> event time of its open group's latest item
    marked: dict[str, list[tuple[int, int, float]]] = {}  # stream -> its priced items: where move queries fire

    def close_groups() -> None:
        for stream, ts in open_groups.items():
            group_ends.setdefault(stream, []).append((counts[stream], ts))
        open_groups.clear()

    for item in tail:
        if item is None:  # a message began: the live run closed its groups here
            close_groups()
            continue
        if item.stream not in counts:
            start = starts.get(item.stream)
            counts[item.stream] = 0 if start is None else start[0]
        counts[item.stream] += item.ticks
        open_groups[item.stream] = item.ts
        if (mark := move_mark(item.tick)) is not None:
            marked.setdefault(item.stream, []).append((counts[item.stream], item.ts, mark))
    close_groups()
    return sum(owes(spec, stream, ticks) for stream, ends in group_ends.items()
               for spec, ticks in registry.would_fire(stream, ends)) + sum(
        owes(spec, stream, ticks) for stream, points in marked.items()
        for spec, ticks in registry.would_move(stream, points))


def answer_tail(engine: Engine, flash: FlashQueries, registry: Registry, cache: AnswerCache,
                marks: RegistrationMarks, tail: Iterable[EncodedTick | None], changed: set[str], *,
                step: Callable[[], StepReport | None], accepted: Callable[[EncodedTick], None],
                refused_item: Callable[[EncodedTick, str], None] = lambda item, why: None
                ) -> tuple[list[JobOutcome], set[str], int]:
    """A replay's tail (split_log) computed as the live run would have: a tick group per wire message and
    stream, each group's due standing queries answered at its cut (the chunked path of a burst). A query
    answers only ticks past its last answer (``cache``), or past its registration (``marks``) when it has none
    on the stream, and a query the config changed at this start (``changed``: registered after every logged
    tick) none. ``step`` runs one forward (the caller's, which keeps its answers); ``accepted`` sees each item
    submitted, ``refused_item`` each one admission refused (with why). Returns (outcomes, streams fed, items
    refused)."""
    owed = restart_owes(cache, marks, changed)

    def owes(spec: QuerySpec, progress: StreamProgress) -> bool:
        return owed(spec, progress.stream, progress.ticks)

    outcomes: list[JobOutcome] = []
    streams: set[str] = set()
    refused = 0
    flash.owes = owes
    try:
        for item in tail:
            if item is None:  # a message began: the live run closed its groups here
                engine.close_groups()
                outcomes += steps_while_full(engine, step)
                continue
            try:
                engine.submit(item.stream, item.tokens, item.ts, item.ticks)
            except AdmissionRefused as e:  # the limits changed since: counted, never fatal (as the replay does)
                refused += 1
                refused_item(item, str(e))
                continue
            accepted(item)
            streams.add(item.stream)
        engine.close_groups()
        while (report := step()) is not None:
            outcomes += report.outcomes
    finally:
        flash.owes = None
    for name in changed:  # it fires first on each stream's next batch, as if registered now
        for stream in streams:
            registry.unfire(name, stream)
    return outcomes, streams, refused
