"""ShardRecovery: a sharded front door's shard lost and restored from the tick log (sharded.py drives it).

A call that fails (the shard raised: its actor is restarted; the actor died: Ray restarts it) or a reply that says
needs_restore leaves the shard lost: the asks it owed are refused as retries (``shard_lost``), its streams' records
are read from the tick log on a thread (up to the record the log had reached), and the shard is restored from them
with the registry and trigger state as they are now; items accepted meanwhile wait in its buffer and follow the
restore. A restore that keeps raising, or an actor Ray does not restart, is given up on: its streams' ticks are
logged and computed when the service restarts. The front door's start sends every shard its first restore here too.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from connectors.encoder import StreamEncoders
from engine.jobs import JobOutcome
from engine.service.owed_answers import live_tail_points
from engine.service.ray_shards import ray_module
from engine.service.shard import RemoteJob
from engine.service.shard_link import ShardLink
from engine.service.shard_restores import ShardRestores
from queries.spec import dump_queries

RETRY_S = 0.25  # a restore that found the actor not back yet is tried again this much later
MAX_RESTORE_ERRORS = 3  # a restore that raised (or found the actor dead) this many times in a row will not succeed


class ShardRecovery:
    """The loss and restore of the front door's shards. ``front`` is the ShardedPipeline (typed Any: it imports
    this module); the tick log is read on this object's own thread."""

    def __init__(self, front: Any) -> None:
        self.front = front
        self._reader = ThreadPoolExecutor(1, thread_name_prefix="shard-restore")

    def close(self) -> None:
        self._reader.shutdown(wait=True, cancel_futures=True)

    def failed(self, link: ShardLink, error: Exception, kind: str, tickets: list[Any],
               outcomes: list[JobOutcome]) -> None:
        """A call to ``link``'s shard raised ``error`` (a RayError) instead of replying."""
        ray = ray_module()
        if isinstance(error, ray.exceptions.RayTaskError):  # our code raised in the shard: its state is suspect
            why = f"{type(error.cause).__name__}: {error.cause}"
            link.restore_errors += kind == "restore"
            if link.restore_errors >= MAX_RESTORE_ERRORS:
                self.give_up(link, why, outcomes, tickets)
                return
            ray.kill(link.handle, no_restart=False)  # Ray starts it afresh; it is restored below
            self.lost(link, why, tickets, outcomes, kind)
            return
        # the actor died (killed, OOM, its host lost): Ray restarts it
        if kind == "restore" and isinstance(error, ray.exceptions.ActorDiedError):
            # dead, not restarting (that is ActorUnavailableError): shards.max_restarts used up, or its
            # constructor raised when Ray started it again; retrying the restore would read the log for ever
            link.restore_errors += 1
            if link.restore_errors >= MAX_RESTORE_ERRORS:
                self.give_up(link, _dead_why(error, self.front.config.shards.max_restarts), outcomes, tickets)
                return
        self.lost(link, type(error).__name__, tickets, outcomes, kind)

    def lost(self, link: ShardLink, why: str, tickets: list[Any], outcomes: list[JobOutcome], kind: str) -> None:
        if kind == "restore":  # the actor is not back yet (Ray is restarting it): try again shortly
            link.not_before = time.monotonic() + RETRY_S
            return
        link.restarts += 1
        link.retire_stats()  # the restarted actor counts from 0: the service's totals must not fall
        link.lost, link.not_before = True, 0.0
        self.refuse_asks(tickets, outcomes,
                         f"{link.name} was lost before answering (it is rebuilt from the tick log): ask again")
        link.buffer, link.buffered_tokens = [], 0  # logged: the restore reads them back
        link.reported_pending, link.shard_busy = 0, False
        print(f"flashtick: {link.name} lost ({why}); rebuilding its {len(link.streams)} streams from the tick log",
              file=sys.stderr, flush=True)

    def _read_log(self, link: ShardLink) -> None:
        """Read the lost shard's streams from the tick log, on a thread, up to the last record accepted: booked
        up to each stream's last published answer (one with none yet: its queries' registration), the rest computed
        group by group (split_log, live_tail_points); items accepted from now on wait in its buffer and follow the
        restore."""
        link.buffer, link.buffered_tokens = [], 0
        # the streams forgotten so far are forgotten in the log read here (split_log): their ops would drop a
        # session of the stream the restore rebuilt from items logged after the forget
        link.ops = [op for op in link.ops if op[0] != "forget"]
        link.forgetting.clear()
        front, live = self.front, self.front.encoders
        upto = front.data.log.next_record
        encoders = StreamEncoders(front.codec, live.vocab_size, live.max_message_bytes,
                                  max_item_tokens=live.max_item_tokens, max_stream_bytes=live.max_stream_bytes,
                                  expired_kept=live.expired_kept)
        streams = set(link.streams)
        answered = live_tail_points(front.cache, front.registry, front.marks, streams)  # here: they are this thread's

        def read() -> dict[str, Any]:
            restores = ShardRestores(front, accepted=False)
            tail = front.data.read_items(streams, upto, encoders, restores, answered)
            return restores.logged(streams, tail)

        link.reading = self._reader.submit(read)

    def refuse_asks(self, tickets: list[Any], outcomes: list[JobOutcome], error: str) -> None:
        """Each of ``tickets`` answered with ``error``, as a retry (``shard_lost``): its shard cannot answer it."""
        for ticket in tickets:
            self.front._asked.pop(ticket, None)
            outcomes.append(JobOutcome(RemoteJob(ticket), error=error, retry=True))

    def give_up(self, link: ShardLink, why: str, outcomes: list[JobOutcome], tickets: Iterable[Any] = ()) -> None:
        """A restore that keeps raising is a bug, and an actor Ray does not restart will not come back: stop
        retrying and say so. The asks that waited for the restore are refused (``shard_lost``), as are those sent
        from now on (``ask``): each gets its reply now, not at its client's time-out. Ticks for the shard's streams
        are still accepted and logged (nothing accepted is lost): a restart computes them."""
        link.failed = why
        waiting = [*tickets, *(op[1] for op in link.ops if op[0] == "ask")]
        link.ops = []  # registry changes and forgotten streams too: a restart restores it from the log and registry
        link.forgetting.clear()
        self.refuse_asks(waiting, outcomes, f"{link.name} was lost and could not be restored ({why}): its streams are "
                                            f"computed again when the service restarts")
        print(f"flashtick: {link.name} could not be restored ({why}, {link.restore_errors} times); its "
              f"{len(link.streams)} streams are logged but not computed until the service restarts",
              file=sys.stderr, flush=True)

    def poll_reads(self) -> None:
        for link in self.front.links:
            if link.failed:
                link.buffer, link.buffered_tokens = [], 0  # logged; a restart replays them
                link.ops = []  # registry changes: a restart restores every shard with the whole registry
                continue
            if link.lost and link.call is None and link.reading is None and time.monotonic() >= link.not_before:
                self._read_log(link)
            if link.reading is not None and link.reading.done():
                future, link.reading = link.reading, None
                try:
                    packed = future.result()
                except Exception as e:  # e.g. retention dropped a segment while it was read: read again
                    print(f"flashtick: {link.name}: reading the tick log failed ({type(e).__name__}: {e}); "
                          f"trying again", file=sys.stderr, flush=True)
                    link.not_before = time.monotonic() + RETRY_S
                    continue
                self.send_restore(link, packed)

    def send_restore(self, link: ShardLink, logged: dict[str, Any], changed: tuple[str, ...] = ()) -> None:
        """Restore ``link``'s shard from ``logged`` (pack_logged of its streams' logged items)."""
        # the restore carries the registry as it is now; asks and streams forgotten since the log was read follow it
        front = self.front
        link.ops = [op for op in link.ops if op[0] in ("ask", "forget")]
        latest = [a.to_wire() for a in front.cache.latest() if a.stream in link.streams]
        queries = dump_queries(front.registry.list()) if len(front.registry) else ""
        link.call_version = front.registry.version
        link.call_tickets, link.call_streams, link.call_forgets = [], set(), set()
        link.call_kind = "restore"
        marks = {query: {stream: ticks for stream, ticks in snapshot.items() if stream in link.streams}
                 for query, snapshot in front.marks.marks.items()}
        link.call = link.handle.restore.remote(queries, latest, logged, marks, True, changed)


def _dead_why(error: Exception, max_restarts: int) -> str:
    """Why a shard's actor is dead for good, from Ray's ActorDiedError (its text is many lines)."""
    if getattr(error, "actor_init_failed", False):
        return "ActorDiedError: its process could not start again (the shard's constructor raised)"
    return f"ActorDiedError: Ray does not restart its process again (shards.max_restarts: {max_restarts})"
