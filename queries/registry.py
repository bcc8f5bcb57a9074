"""The registered standing queries, versioned, and which of them are due after a batch.

Reads (`list`, `get`, `matching`) go through one immutable snapshot that a
mutation swaps whole, so the engine thread never sees half a registration
while the control-socket thread registers. Mutations and `due()` (which
records firings) hold one lock; it is uncontended in the engine loop's steady
state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from engine.quoting import quoted
from queries.limits import QueryLimits, excerpt
from queries.price_moves import PriceMoves
from queries.spec_errors import UnknownQueryError  # re-exported: callers import it from the registry
from queries.codec_questions import NamedQuestion, check_questions
from queries.spec import (DEFAULT_TOPIC, QuerySpec, QuerySpecError, check_limits, refused_gate, refused_name,
                          unanswerable_reason)
from queries.yaml_loader import load_queries, located_in, read_queries_file


@dataclass(frozen=True)
class _Snapshot:
    specs: Mapping[str, QuerySpec]  # name -> spec, in registration order (a replaced query keeps its place)
    versions: Mapping[str, int]  # name -> registry version at which it was last (re)registered
    version: int
    # stream -> matching specs; filled lazily by readers, never shared across snapshots, so a swap invalidates it
    by_stream: dict[str, tuple[QuerySpec, ...]] = field(default_factory=dict)
    # whether any query fires on price moves (`move_bps`): without one, each accepted tick skips the move lookup
    has_moves: bool = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "has_moves", any(_watches_moves(spec) for spec in self.specs.values()))


def _watches_moves(spec: QuerySpec) -> bool:
    return spec.trigger.on_moves and spec.trigger.fires_by_itself


@dataclass
class _Fired:
    """Per (query, stream): the grid cell of the last firing (tick or event-time bucket) and the tick count."""

    cell: int | None
    ticks: int


def _fires(spec: QuerySpec, last: _Fired | None, ticks: int, event_ts: int) -> _Fired | None:
    """The firing `spec` records at a group end of (ticks, event_ts) after its ``last`` one, or None: not due."""
    cell = spec.trigger.cell(ticks, event_ts)
    if cell is None or last is None or ticks < last.ticks or cell > last.cell:
        return _Fired(cell, ticks)
    return None


def _check_topic_namespaces(specs: Iterable[QuerySpec], new: set[str]) -> None:
    """Raises the first of topic_clashes."""
    if clashes := topic_clashes(specs, new):
        raise clashes[0]


def topic_clashes(specs: Iterable[QuerySpec], new: set[str]) -> list[QuerySpecError]:
    """Topics beginning `NAME/` belong to the query NAME when it publishes on its default topic
    (`{query}/{stream}/`): another query whose topic starts there would interleave its answers with NAME's on
    NAME's own topics. Topics shared on purpose (`topic: alerts/` on several queries) stay allowed. Each error
    names the query of ``new`` (this registration's) that makes the clash."""
    specs = list(specs)
    owners = {spec.name for spec in specs if spec.topic == DEFAULT_TOPIC}
    clashes = []
    for spec in specs:
        if spec.topic == DEFAULT_TOPIC:
            continue
        prefix = spec.topic.replace("{query}", spec.name).split("{")[0]  # the literal start of its topics
        owner = prefix.split("/")[0] if "/" in prefix else None
        if owner is None or owner == spec.name or owner not in owners or not {spec.name, owner} & new:
            continue
        if spec.name in new:
            why = (f"its topic {excerpt(spec.topic)} starts where query {excerpt(owner)} publishes on its default "
                   f"topics, {owner}/{{stream}}/: their answers would interleave there; give it a topic of its own")
        else:
            why = (f"query {excerpt(spec.name)} publishes on {excerpt(spec.topic)}, inside this query's default "
                   f"topics {owner}/{{stream}}/: their answers would interleave there; give it another name, or a "
                   f"topic of its own")
        clashes.append(QuerySpecError(why, query=spec.name if spec.name in new else owner, key="topic"))
    return clashes


class Registry:
    """Standing queries by name. `questions` (the model codec's, by name) checks names and labels when given;
    `limits` bound the documents it reads and how many queries it holds; `answerable` (raising ValueError for a
    query the serving model cannot answer, e.g. by compiling it) refuses such a query when it is registered,
    rather than at every batch it is due."""

    def __init__(self, questions: Mapping[str, NamedQuestion] | None = None, limits: QueryLimits | None = None,
                 answerable: Callable[[QuerySpec], object] | None = None) -> None:
        self.questions = questions
        self.limits = limits or QueryLimits()
        self.answerable = answerable
        self._lock = threading.Lock()
        self._snap = _Snapshot(MappingProxyType({}), MappingProxyType({}), 0)
        self._fired: dict[str, dict[str, _Fired]] = {}  # query name -> stream -> last firing; under _lock
        self._moves = PriceMoves()  # the move_bps queries' references and due points; under _lock

    # ---- mutations: all or nothing, one version bump each ----

    def register(self, specs: Iterable[QuerySpec] | str, source: str = "<string>", restoring: bool = False
                 ) -> list[QuerySpec]:
        """Adds or replaces queries from specs or YAML text; if any is invalid nothing changes. ``restoring``:
        queries already accepted (a restart, a shard given its front door's), taken as they are even where a
        later flashtick's checks across queries (topic namespaces) would refuse them. Returns the specs registered
        afresh: the new ones and those that differ from the spec registered under their name.

        A replaced query takes effect atomically, keeps its place in `list()`,
        gets a new per-query version, and starts its trigger state afresh. A spec equal to the registered one
        (`1000ms` and `1s` are one period: `unchanged`) is no change: it keeps its version and trigger state, as a
        restart keeps it, so re-registering a whole file after adding one query leaves the others as they were; only
        how it is shown (its period as written this time) is taken from the new one.
        """
        if isinstance(specs, str):
            new = load_queries(specs, source, self.questions, self.limits, across=self.document_clashes)
        else:
            new = list(specs)
            if len(new) > self.limits.max_queries:  # refused before checking each one
                raise QuerySpecError(f"{len(new)} queries in one registration, over the limit of "
                                     f"{self.limits.max_queries} (max_queries); nothing was registered")
            self._check(new)
        if not new:
            return []
        try:
            return self._register(new, restoring)
        except QuerySpecError as e:  # found past the document's parse: located in it like its other problems
            if not isinstance(specs, str):
                raise
            raise located_in(e, specs, source, self.limits) from None

    def document_clashes(self, valid: list[QuerySpec]) -> list[QuerySpecError]:
        """The topic clashes of a document's ``valid`` queries (registered over the queries held now), for its
        error list when others of its queries are invalid: all said at once, not on the next try (review397 #2)."""
        merged = {**self._snap.specs, **{spec.name: spec for spec in valid}}
        return topic_clashes(merged.values(), {spec.name for spec in valid})

    def _register(self, new: list[QuerySpec], restoring: bool) -> list[QuerySpec]:
        for spec in () if restoring else new:
            if (why := refused_name(spec.name)) is not None:
                raise QuerySpecError(why, query=spec.name, key="name")
            if (why := refused_gate(spec)) is not None:
                raise QuerySpecError(why, query=spec.name, key="gate")
        for spec in new if self.answerable is not None else ():
            try:
                self.answerable(spec)
            except ValueError as e:
                raise QuerySpecError(unanswerable_reason(e, spec), query=spec.name) from None
        with self._lock:
            old = self._snap
            fresh = [spec for spec in new if old.specs.get(spec.name) != spec]
            # unchanged, written differently (`1000ms` for `1s`): shown as written now, its state kept
            reworded = [spec for spec in new if old.specs.get(spec.name) == spec
                        and old.specs[spec.name].to_dict() != spec.to_dict()]
            if not fresh and not reworded:
                return []  # every spec as registered already: nothing changes, not even the version
            total = len(old.specs) + sum(1 for name in {s.name for s in new} if name not in old.specs)
            if total > self.limits.max_queries:
                raise QuerySpecError(f"registering {len(new)} queries would make {total}, over the limit of "
                                     f"{self.limits.max_queries} (max_queries); nothing was registered")
            version = old.version + 1
            merged, versions = dict(old.specs), dict(old.versions)
            for spec in fresh + reworded:
                merged[spec.name] = spec
            if not restoring:
                _check_topic_namespaces(merged.values(), {spec.name for spec in fresh})
            for spec in fresh:
                versions[spec.name] = version
                self._fired.pop(spec.name, None)
                self._moves.forget(spec.name)
            self._snap = _Snapshot(MappingProxyType(merged), MappingProxyType(versions), version)
        return fresh

    def restore_versions(self, version: int, versions: Mapping[str, int]) -> None:
        """After a restart re-registered the saved queries: the registry version and each query's version as they
        were before it (clients compare them; they never go backwards). Names not registered now are ignored."""
        with self._lock:
            old = self._snap
            if version < old.version:
                return
            kept = {name: versions.get(name, v) for name, v in old.versions.items()}
            self._snap = _Snapshot(old.specs, MappingProxyType(kept), version)

    def register_file(self, path: str | Path, restoring: bool = False) -> list[QuerySpec]:
        return self.register(read_queries_file(path, self.limits), str(path), restoring=restoring)

    def unregister(self, name: str) -> QuerySpec:
        """Removes a query and its trigger state; returns it. Unknown names raise UnknownQueryError."""
        return self.unregister_all([name])[0]

    def unregister_all(self, names: list[str]) -> list[QuerySpec]:
        """Removes the named queries and their trigger state as one change (one version), all or nothing: an
        unknown name raises UnknownQueryError and removes none. Returns the removed specs, in ``names``' order."""
        with self._lock:
            old = self._snap
            for name in names:
                if name not in old.specs:
                    raise self._unknown(name, old)
            gone = set(names)
            specs = {k: v for k, v in old.specs.items() if k not in gone}
            versions = {k: v for k, v in old.versions.items() if k not in gone}
            self._snap = _Snapshot(MappingProxyType(specs), MappingProxyType(versions), old.version + 1)
            for name in gone:
                self._fired.pop(name, None)
                self._moves.forget(name)
            return [old.specs[name] for name in dict.fromkeys(names)]

    def _check(self, specs: list[QuerySpec]) -> None:
        seen: set[str] = set()
        for spec in specs:
            if not isinstance(spec, QuerySpec):
                raise QuerySpecError(f"register() takes QuerySpecs or YAML text, got {type(spec).__name__}")
            if spec.name in seen:
                raise QuerySpecError("duplicate query name in one registration", query=spec.name)
            seen.add(spec.name)
            check_limits(spec, self.limits)
            if self.questions is not None:
                check_questions(spec, self.questions)

    # ---- reads: one snapshot, no lock ----

    @property
    def version(self) -> int:
        """Bumped on every change; 0 before the first registration."""
        return self._snap.version

    def query_version(self, name: str) -> int:
        """The registry version at which `name` was last (re)registered."""
        snap = self._snap
        if name not in snap.versions:
            raise self._unknown(name, snap)
        return snap.versions[name]

    def list(self) -> list[QuerySpec]:
        return list(self._snap.specs.values())

    def get(self, name: str) -> QuerySpec:
        snap = self._snap
        if name not in snap.specs:
            raise self._unknown(name, snap)
        return snap.specs[name]

    def current(self, name: str) -> QuerySpec | None:
        """The spec registered under `name` now, or None."""
        return self._snap.specs.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._snap.specs

    def __len__(self) -> int:
        return len(self._snap.specs)

    @property
    def has_move_queries(self) -> bool:
        """Whether any registered query fires on price moves (`{move_bps: N}`): where none does, an accepted tick's
        mark needs no lookup at all (engine/service/move_marks.py)."""
        return self._snap.has_moves

    def publishes_on(self, topic: str) -> bool:
        """Whether a registered query publishes on ``topic`` (a removed one's topics are retired: queries/cache.py)."""
        return any(spec.publishes_on(topic) for spec in self._snap.specs.values())

    def matching(self, stream: str) -> list[QuerySpec]:
        """Queries whose stream selector matches `stream`, in registration order (cached per stream)."""
        return list(self._matching(self._snap, stream))

    @staticmethod
    def _matching(snap: _Snapshot, stream: str) -> tuple[QuerySpec, ...]:
        found = snap.by_stream.get(stream)
        if found is None:
            found = tuple(s for s in snap.specs.values() if s.matches(stream))
            snap.by_stream[stream] = found
        return found

    @staticmethod
    def _unknown(name: str, snap: _Snapshot) -> UnknownQueryError:
        names = list(snap.specs)
        known = ", ".join(names[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "") or "none"
        return UnknownQueryError(f"no query named {quoted(name)} (registered: {known})")

    # ---- triggers ----

    def due(self, stream: str, ticks: int, event_ts: int, group_end: bool = True) -> list[QuerySpec]:
        """The queries matching `stream` that are due now, recorded as fired.

        Call once after each batch that advanced `stream`, with its total
        committed tick count and the event time (int ns) of its latest tick.
        A query fires on its first call for a stream; then `batch` fires every
        call, `{ticks: N}` when the count enters a new multiple of N, and
        `{interval: T}` when the event time enters a new multiple of T (a jump
        across several fires once). A tick count that goes backwards (the
        stream was reset) fires and starts over. `on_demand` never fires here.
        `{move_bps: N}` fires where ``moved`` said it does, at that tick count
        alone; a due point that is no ``group_end`` (one ``moved`` made inside
        a group) fires nothing else.
        """
        snap = self._snap
        out = []
        with self._lock:
            moved = self._moves.take(stream, ticks)
            for spec in self._matching(snap, stream):
                if not spec.trigger.fires_by_itself:
                    continue
                if self._snap.specs.get(spec.name) is not spec:
                    continue  # replaced or removed since we took the snapshot
                if spec.trigger.on_moves or not group_end:
                    if spec.trigger.on_moves and spec.name in moved:
                        out.append(spec)
                    continue
                per_stream = self._fired.setdefault(spec.name, {})
                if (fired := _fires(spec, per_stream.get(stream), ticks, event_ts)) is not None:
                    per_stream[stream] = fired
                    out.append(spec)
        return out

    def moved(self, stream: str, ticks: int, ts: int, mark: float) -> list[str]:
        """The move queries (`{move_bps: N}`) that `stream`'s tick at count ``ticks``, stamped ``ts``, its mark
        ``mark``, fires: its first marked tick, or one N bps or more from the mark where the query last fired
        (queries/price_moves.py). Each call moves their references; ``due_at`` then records the due point, where
        the engine reaches one."""
        snap = self._snap
        specs = [spec for spec in self._matching(snap, stream) if _watches_moves(spec)] if snap.has_moves else []
        if not specs:
            return []
        with self._lock:
            return [spec.name for spec in specs
                    if self._moves.observe(spec.name, stream, ticks, ts, mark, spec.trigger.move_bps)]

    def would_move(self, stream: str, points: list[tuple[int, int, float]]) -> list[tuple[QuerySpec, int]]:
        """The (move query, tick count) firings ``moved`` would make at `stream`'s next ticks ((tick count, event
        time, mark) each, in order), recording none: what a restart's tail owes them."""
        snap = self._snap
        specs = [spec for spec in self._matching(snap, stream) if _watches_moves(spec)] if snap.has_moves else []
        if not specs:
            return []
        with self._lock:
            return [(spec, ticks) for spec in specs
                    for ticks in self._moves.would_fire(spec.name, stream, points, spec.trigger.move_bps)]

    def due_at(self, stream: str, ticks: int, queries: list[str]) -> None:
        """``queries`` (``moved``'s) are due at `stream`'s tick count ``ticks``: ``due`` fires them there."""
        with self._lock:
            self._moves.due_at(stream, ticks, queries)

    def would_fire(self, stream: str, group_ends: Iterable[tuple[int, int]]) -> list[tuple[QuerySpec, int]]:
        """The (query, tick count) firings that ``due`` would record at `stream`'s next group ends ((committed
        tick count, event time) each, in order), recording none: what a restart's tail of ticks owes. A move query
        is not among them: where it fires depends on the ticks' prices, which only their replay (``moved``) sees."""
        snap = self._snap
        specs = [spec for spec in self._matching(snap, stream)
                 if spec.trigger.fires_by_itself and not spec.trigger.on_moves]
        with self._lock:
            last = {spec.name: self._fired.get(spec.name, {}).get(stream) for spec in specs}
        out = []
        for ticks, event_ts in group_ends:
            for spec in specs:
                if (fired := _fires(spec, last[spec.name], ticks, event_ts)) is not None:
                    last[spec.name] = fired
                    out.append((spec, ticks))
        return out

    def restore_fired(self, query: str, stream: str, ticks: int, event_ts: int) -> None:
        """Trigger state after a restart: as if ``query`` last fired on ``stream`` at (ticks, event_ts), the
        version and event time of its last published answer, so it fires next where it would have."""
        spec = self.current(query)
        if spec is None or not spec.trigger.fires_by_itself:
            return
        with self._lock:
            if spec.trigger.on_moves:  # its reference: the mark of that tick, as the rebuild's replay reaches it
                self._moves.anchor(query, stream, ticks, event_ts)
                return
            self._fired.setdefault(query, {})[stream] = _Fired(spec.trigger.cell(ticks, event_ts), ticks)

    def unfire(self, query: str, stream: str) -> None:
        """Take back a firing that ``due`` recorded but nothing answered: ``query`` fires on ``stream``'s next call
        as on its first (a restart's answers owed: a query registered after the stream's last tick)."""
        with self._lock:
            self._fired.get(query, {}).pop(stream, None)
            self._moves.forget(query, stream)

    def replayed_expiry(self, stream: str) -> None:
        """A restart's tick log replay passed an expiry or a `forget` of ``stream``: the move references its earlier
        ticks set go, as they went live (PriceMoves.replayed_expiry); the state restored from the answer log stays."""
        with self._lock:
            self._moves.replayed_expiry(stream)

    def drop_stream(self, stream: str, keep_grid: bool = True) -> None:
        """Forgets trigger state for a closed stream (expired): it fires afresh if it comes back, except a query
        whose trigger keeps its grid (`keeps_grid`: `interval`, an event-time grid): a sparse stream back within
        the same cell does not fire again there, as a backtest (where nothing expires) would not. Its tick count
        starts over. ``keep_grid``
        False: the grid goes too (a stream forgotten with its ordering guard: its next tick may be older)."""
        with self._lock:
            self._moves.drop_stream(stream)
            # the queries it matched, cached: the lookup is redone if it comes back, and a feed whose names churn
            # would otherwise hold an entry for every name ever seen (review353: ~0.2 KB each, never freed)
            self._snap.by_stream.pop(stream, None)
            for name, per_stream in self._fired.items():
                last = per_stream.pop(stream, None)
                spec = self._snap.specs.get(name)
                if keep_grid and last is not None and spec is not None and spec.trigger.keeps_grid:
                    per_stream[stream] = _Fired(last.cell, 0)
