"""Whether answers are stale, per standing query (limits.max_answer_age_s): a query is stale when a tick of one of
its own streams was accepted within the bound and its own newest answer is older than it. Counted over every tick
and every answer together, a query covering some streams read stale while only the others ticked (a desk's rates
query at night beside a crypto feed); per query, each is judged by its own streams. `health`, /readyz, /metrics
and `stats` read the result (heartbeat.py, readiness.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from engine.quoting import quoted
from queries.spec import QuerySpec

STALE_QUERIES_SAID = 5  # the stale queries `health` and /readyz name (the first by name)


class AnswerFreshness:
    """When each standing query last published (``published``), and which are stale now (``stale``)."""

    def __init__(self) -> None:
        self._answered: dict[str, float] = {}  # query -> time.time() of its newest published answer
        # query -> since when it is waited on without an answer: the start of serving for those registered then,
        # else the first check that saw it registered (within a heartbeat of its registration)
        self._waited_since: dict[str, float] = {}
        self._checked = False

    def published(self, query: str, now: float) -> None:
        self._answered[query] = now

    def stale(self, specs: Iterable[QuerySpec], matching: Callable[[str], Iterable[QuerySpec]],
              received_ns: Mapping[str, int], now: float, serving_since: float, bound_s: float | None) -> list[str]:
        """The standing queries (``specs``: those registered; ``on_demand`` ones never count) whose newest answer,
        or with none since serving began, the time they have been waited on, is older than ``bound_s``, while a
        stream they cover (``matching``: the queries a stream's ticks feed) had a tick accepted within it
        (``received_ns``: each stream's last wire tick, time.time_ns()); sorted by name. None bound: never."""
        registered = {spec.name: spec for spec in specs if spec.trigger.fires_by_itself}
        for table in (self._answered, self._waited_since):  # (unregistered queries: forgotten)
            for name in [name for name in table if name not in registered]:
                del table[name]
        for name in registered:
            self._waited_since.setdefault(name, serving_since if not self._checked else now)
        self._checked = True
        if bound_s is None:
            return []
        late = {name for name in registered
                if now - self._answered.get(name, self._waited_since[name]) > bound_s}
        if not late:
            return []
        since_ns = (now - bound_s) * 1e9
        stale: set[str] = set()
        for stream, received in received_ns.items():
            if received >= since_ns:
                stale.update(spec.name for spec in matching(stream) if spec.name in late)
                if stale == late:
                    break
        return sorted(stale)


class StaleAnswersLines:
    """The log's lines of stale answers (review412 #1: /readyz went 503 `answers_stale` with no line at all): a
    WARNING as queries go stale, naming those not said yet, and an INFO line once none is, with how long it lasted
    (the pair `behind` / `caught up` is)."""

    def __init__(self) -> None:
        self._said: set[str] = set()  # the stale queries the log has named, while some are stale
        self._since: float | None = None  # monotonic time the first of them went stale

    def line(self, stale: list[str], bound_s: float | None, now: float) -> str | None:
        """The line to say for the queries stale now (``stale``, sorted), if any: at ``now`` (monotonic)."""
        if not stale:
            if self._since is None:
                return None
            lasted, self._since, self._said = now - self._since, None, set()
            return f"flashtick: answers fresh again: no standing query is stale (stale for {lasted:.1f} s)"
        new = [name for name in stale if name not in self._said]
        self._since = self._since if self._since is not None else now
        self._said = set(stale)
        if not new:
            return None
        named = ", ".join(quoted(name) for name in new[:STALE_QUERIES_SAID])
        more = f" and {len(new) - STALE_QUERIES_SAID} more" if len(new) > STALE_QUERIES_SAID else ""
        return (f"flashtick: answers stale: {named}{more} published no answer within limits.max_answer_age_s="
                f"{bound_s:g} s while ticks of their own streams arrive ({len(stale)} stale in all; /readyz 503 "
                f"answers_stale, flashtick_serving 0)")
