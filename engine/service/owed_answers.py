"""The answers a restart owes: the standing queries the stopped process had not answered yet, due on ticks past
each stream's last answer or, never answered there, past the query's registration (RegistrationMarks). They are
counted before the replay's tail is computed (to say how many a start will compute) and computed after it, a tick
group at a time as the live run would have (answer_tail), by one engine (engine_restart.py) or a shard (shard.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from connectors.encoder import EncodedTick
from engine.engine import Engine
from engine.forward_plan import StepReport
from engine.jobs import JobOutcome, ProbeJob, StreamProgress
from engine.scheduler import AdmissionRefused
from engine.service.registration_marks import RegistrationMarks
from queries.cache import AnswerCache
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


def answered_points(cache: AnswerCache, streams: set[str] | None = None) -> dict[str, tuple[int, int]]:
    """Each stream's latest answered (tick count, event time), over every standing query (of ``streams`` only, when
    given): how far the engine that computed it had got, where split_log's tail begins."""
    points: dict[str, tuple[int, int]] = {}
    for answer in cache.latest():
        if (streams is None or answer.stream in streams) and answer.version > points.get(answer.stream, (0, 0))[0]:
            points[answer.stream] = (answer.version, answer.data_ts)
    return points


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
                 tail: Iterable[EncodedTick | None]) -> int:
    """How many answers a restart's ``tail`` owes, from the answer log's points (``cache``) and the registration
    marks: answers_owed_in_tail with restart_owes, as both pipelines count them."""
    return answers_owed_in_tail(registry, tail, answered_points(cache), restart_owes(cache, marks, changed))


def answers_owed_in_tail(registry: Registry, tail: Iterable[EncodedTick | None],
                         answered: dict[str, tuple[int, int]], owes: Callable[[QuerySpec, str, int], bool]) -> int:
    """How many answers a replay's tail (split_log) owes: the standing queries its tick groups (one per wire
    message and stream, as answer_tail cuts them) make due, from each stream's ``answered`` point on, that
    ``owes`` (restart_owes) lets through. Nothing is recorded. A service stopped cleanly had answered all that
    was due: its tail is the ticks after each stream's last answer that fired no query, and owes 0."""
    counts = {stream: ticks for stream, (ticks, _) in answered.items()}
    group_ends: dict[str, list[tuple[int, int]]] = {}
    open_groups: dict[str, int] = {}  # stream -> event time of its open group's latest item

    def close_groups() -> None:
        for stream, ts in open_groups.items():
            group_ends.setdefault(stream, []).append((counts[stream], ts))
        open_groups.clear()

    for item in tail:
        if item is None:  # a message began: the live run closed its groups here
            close_groups()
            continue
        counts[item.stream] = counts.get(item.stream, 0) + item.ticks
        open_groups[item.stream] = item.ts
    close_groups()
    return sum(owes(spec, stream, ticks) for stream, ends in group_ends.items()
               for spec, ticks in registry.would_fire(stream, ends))


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
