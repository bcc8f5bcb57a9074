"""KV thrash: a KV pool too small for the streams it serves, so more KV is evicted than new tokens are computed
and answers come late while nothing else looks wrong. Watched at each heartbeat, said with a kv.cells that fits."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import Any

from engine.service.config import ServiceConfig
from engine.stream import Stream

THRASH_WINDOW_S = 10.0  # KV thrash is judged over this long (see KvThrashWatch.watch)
THRASH_MIN_CELLS = 10_000  # fewer KV cells evicted than this in a window is never thrash
THRASH_WARNING_EVERY_S = 60.0
# the pool must hold every held stream's whole window once it fills, or each of its ticks evicts another stream's KV
# and recomputes its own (review376 #8: 200 live streams on the default pool, tick-to-answer 6 ms -> 4.5 s). Said at
# once, before the windows fill and answers come late, not only once they do; how many of them ticked within this
# long is said beside it (what is busy now), never what the pool is sized on (review380 #2)
LIVE_S = 60.0
SAY_AGAIN_GROWTH = 1.25  # the `KV pool too small` line is said again once the KV cells wanted grew by this since


class KvThrashWatch:
    """Whether the KV pool thrashes (``thrashing``, stats' `kv_thrash`), from the counts of the last window."""

    def __init__(self) -> None:
        self.thrashing = False
        self._thrashing_since = 0.0  # monotonic time the window that first found it thrashing began
        self.pool_short: str | None = None  # while the live streams' full windows pass the pool: why (`health`)
        self._said_need = 0  # the KV cells the last `KV pool too small` line asked for (0: none said while short)
        self._mark: tuple[float, tuple[int, int]] | None = None  # (monotonic time, (advanced, evicted)) at its start
        self._next_warning = 0.0

    def watch(self, snapshot: dict[str, Any], pipeline: Any, config: ServiceConfig, serving_since: float = 0.0) -> None:
        """KV too small for the streams: more KV is evicted (to be recomputed when its stream next ticks) than new
        tokens are computed, and answers come late while nothing else looks wrong. Judged over THRASH_WINDOW_S; said on
        stderr with a size for kv.cells at most every THRASH_WARNING_EVERY_S, and as `kv_thrash` in stats
        (``snapshot``: the heartbeat's, which it updates; ``pipeline``: one engine's, or the shards' front door;
        ``serving_since``: time.time() live ingest began, before which no tick counts as live)."""
        now = time.monotonic()
        self._watch_live(snapshot, pipeline, config, serving_since)
        # evicted cells, not tokens_rebuilt: a context roll's re-prefill is rebuilt too, and is no sign of a small pool
        counts = (snapshot.get("runner", {}).get("tokens_advanced", 0),
                  snapshot.get("scheduler", {}).get("evicted_cells", 0))
        if self._mark is None or now - self._mark[0] < THRASH_WINDOW_S:
            self._mark = self._mark or (now, counts)
            return
        advanced, evicted = (b - a for a, b in zip(self._mark[1], counts))
        was_thrashing, window_start = self.thrashing, self._mark[0]
        self._mark = (now, counts)
        self.thrashing = evicted > max(advanced, THRASH_MIN_CELLS)
        snapshot["kv_thrash"] = self.thrashing
        if self.thrashing and not was_thrashing:
            self._thrashing_since = window_start
        if was_thrashing and not self.thrashing:  # its end said, as `behind` has `caught up` (review412 #3)
            print(f"flashtick: KV thrash over: the last {THRASH_WINDOW_S:.0f} s evicted {evicted} cells of KV for "
                  f"{advanced} new ones; it thrashed for {window_start - self._thrashing_since:.0f} s",
                  file=sys.stderr, flush=True)
        if self.thrashing and now >= self._next_warning:
            self._next_warning = now + THRASH_WARNING_EVERY_S
            print(f"flashtick: KV thrash: the last {THRASH_WINDOW_S:.0f} s evicted {evicted} cells of KV for "
                  f"{advanced} new ones; {_sizing(snapshot, pipeline, config)}: raise it (answers come late "
                  f"meanwhile)", file=sys.stderr, flush=True)

    def _watch_live(self, snapshot: dict[str, Any], pipeline: Any, config: ServiceConfig, serving_since: float) -> None:
        """Whether the streams the engine holds will want more KV than the pool holds once their windows fill: said
        on stderr the moment it becomes so (once, until it is no longer so), and in `health`'s warnings while it is
        (``pool_short``). Sized on every stream held, not only those that ticked in the last LIVE_S: a stream keeps
        its KV until scheduler.stream_idle_s without data (3600 s by default), so a name printing every few minutes
        holds a window as a busy one does (review380 #2: "293 streams ticked in the last 60 s ... Set kv.cells to
        159392" for a universe that wanted 816,000, the figure the `KV thrash` line gave two lines later). One
        engine's (a sharded front door holds no sessions)."""
        engine = getattr(pipeline, "engine", None)
        capacity = snapshot.get("kv_cells_capacity", 0)
        if engine is None or not capacity or not engine.scheduler.window:
            return
        window, block = engine.scheduler.window, config.kv.block_size
        held = engine.scheduler.streams.values()
        need = _kv_cells_at_full_windows(len(held), window, block)  # (the `KV thrash` line's "once every window")
        if need <= capacity:
            self.pool_short, self._said_need = None, 0
            return
        # said as it starts, and again each time the streams arriving grew the figure by a quarter (review392 #11: 140
        # of 200 streams had come when it was said, and the line's kv.cells was then 30% short); health's warning is
        # kept to the streams held now while it lasts
        say = need >= SAY_AGAIN_GROWTH * self._said_need
        # (a restart's replay stamps each stream it restores as seen then: not a tick of the last minute, review406 #7)
        since = max(time.time_ns() - int(LIVE_S * 1e9), int(serving_since * 1e9))
        live = sum(1 for state in held if state.last_seen_ns >= since)
        idle_s = config.scheduler.stream_idle_s
        keeps = ("scheduler.stream_idle_s is null: each keeps its KV for good" if idle_s is None
                 else f"each keeps its KV until scheduler.stream_idle_s ({idle_s:g} s) without data")
        each = _kv_cells_at_full_windows(1, window, block)
        self.pool_short = (f"{len(held)} streams held ({live} ticked in the last {LIVE_S:.0f} s; {keeps}); "
                           f"once their {window}-token windows fill they want {need} KV cells ({each} each), "
                           f"and kv.cells is {capacity} (about {capacity // each} streams at a full window): past "
                           f"that each tick of a stream evicts another's KV and recomputes its own, and answers "
                           f"come seconds late (KV thrash). Set kv.cells to {need} or more "
                           f"(docs/configuration.md, kv.cells)")
        if say:
            grown = f" (more streams since it was said: it wanted {self._said_need})" if self._said_need else ""
            self._said_need = need
            print(f"flashtick: WARNING: KV pool too small for the live streams{grown}: {self.pool_short}",
                  file=sys.stderr, flush=True)

    def health_warnings(self) -> list[dict[str, str]]:
        """`health`'s warning while the live streams want more KV than the pool holds (none otherwise)."""
        return [{"kind": "kv_pool_small", "message": self.pool_short}] if self.pool_short else []


def _sizing(snapshot: dict[str, Any], pipeline: Any, config: ServiceConfig) -> str:
    """The `KV thrash` line's figures that size kv.cells: the streams, the KV cells they want now and once every
    window is full, and kv.cells. A sharded front door (no engine of its own) gives them for the shard that wants
    most, kv.cells being per shard: the sum over shards named kv.cells no setting had (review401 #5)."""
    block = config.kv.block_size  # a window, and the block a roll may straddle (configuration.md)
    streams, engine = snapshot.get("streams", 0), getattr(pipeline, "engine", None)
    if engine is not None:  # an estimate, not what is resident: the pool is too small to hold it
        window, held = engine.scheduler.window, engine.scheduler.streams.values()
        wants = _wants(kv_cells_wanted(held, window, block), len(held), window, block)
        return f"{streams} streams of up to {window} positions {wants}, kv.cells is {snapshot['kv_cells_capacity']}"
    window, links = pipeline.window, pipeline.links
    shard = max(links, key=lambda link: (link.stats.get("kv_cells_wanted", 0), len(link.streams)))
    wants = _wants(shard.stats.get("kv_cells_wanted", 0), len(shard.streams), window, block)
    return (f"{streams} streams of up to {window} positions on {len(links)} shards, {shard.name}'s "
            f"{len(shard.streams)} of them {wants}, kv.cells is {pipeline.shard_kv_cells} per shard")


def _wants(now: int, streams: int, window: int, block: int) -> str:
    # what they want now grows as their windows fill: a pool sized to it alone thrashes again later
    return (f"want about {now} KV cells to stay resident now (whole blocks of {block}: a quiet stream wants one); up "
            f"to {_kv_cells_at_full_windows(streams, window, block)} once every window is full")


def kv_cells_wanted(streams: Iterable[Stream], window: int, block: int) -> int:
    """KV cells for every stream to stay resident at once: its last positions (up to the window) in whole blocks,
    plus, at the window, the block its roll straddles; a quiet stream wants one block (docs/configuration.md)."""
    wanted = 0
    for state in streams:
        positions = len(state.session.tokens)
        wanted += -(-min(positions, window) // block) * block + (block if positions >= window else 0)
    return wanted


def _kv_cells_at_full_windows(streams: int, window: int, block: int) -> int:
    """KV cells for ``streams`` streams to stay resident once each has reached the window: the window in whole
    blocks, plus the block its roll straddles (docs/configuration.md: 300 streams x 544 for the built-in model)."""
    return streams * (-(-window // block) * block + block)
