"""ShardCalls: a sharded front door's calls to its shards, one in flight per shard (sharded.py's step).

Each idle shard with work gets ONE call: its buffered items, registry ops and asks, with the registry version they
went out under. The replies are collected with ray.wait, never waiting on one shard and at most WAIT_S in all, so
the server's loop gets back to its sockets. A reply goes to ShardReplies; a call that failed, or a shard that says
needs_restore, goes to ShardRecovery.
"""

from __future__ import annotations

from typing import Any

from engine.forward_plan import StepReport
from engine.jobs import JobOutcome
from engine.service.ray_shards import ray_module
from engine.service.shard import GroupEnd
from engine.service.shard_link import ShardLink

WAIT_S = 0.002  # the longest a step waits for a shard's reply before the server polls its sockets again


class ShardCalls:
    """The send and collect of the front door's shard calls. ``front`` is the ShardedPipeline (typed Any: it
    imports this module), whose links, registry version and ingest queue the calls read."""

    def __init__(self, front: Any) -> None:
        self.front = front

    def step(self) -> StepReport | None:
        """Send each idle shard its work, collect the replies that are in (waiting at most WAIT_S), and
        return the answers and ask replies they brought (standing answers already numbered and logged)."""
        ray = ray_module()
        outcomes: list[JobOutcome] = []
        self.front.recovery.poll_reads()
        self.send_all()
        calls = {link.call: link for link in self.front.links if link.call is not None}
        if calls:
            ready, _ = ray.wait(list(calls), num_returns=1, timeout=WAIT_S)
            if ready:
                ready, _ = ray.wait(list(calls), num_returns=len(calls), timeout=0)
            for ref in ready:
                self._finish(calls[ref], outcomes)
            self.send_all()
        return StepReport(outcomes=outcomes) if outcomes or calls else None

    def send_all(self) -> None:
        for link in self.front.links:
            if link.call is None and not link.lost and link.has_work:
                self._send(link)

    def _send(self, link: ShardLink) -> None:
        front = self.front
        items, ops = link.buffer, link.ops
        link.buffer, link.ops = [], []
        link.call_tokens, link.buffered_tokens = link.buffered_tokens, 0
        link.call_version = front.registry.version
        link.call_tickets = [op[1] for op in ops if op[0] == "ask"]
        link.call_streams = {item[0] for item in items if not isinstance(item, GroupEnd)}
        link.call_forgets = {op[1] for op in ops if op[0] == "forget"}
        want_stats, link.stats_due = link.stats_due, False
        link.call_kind = "step"
        # while the ingest queue holds unread messages, a stream must be idle that much longer to expire: its next
        # ticks may be among them (stream_removal.StreamRemoval.expire_idle)
        link.call = link.handle.step.remote(items, ops, front.config.shards.step_ms, want_stats,
                                            unread_s=front.ingest_unread_s)

    def _finish(self, link: ShardLink, outcomes: list[JobOutcome]) -> None:
        ray = ray_module()
        ref, version, tickets, kind = link.call, link.call_version, link.call_tickets, link.call_kind
        # the call's streams too: its reply is of what the shard did after their items (an expiry included)
        link.call, link.call_tokens, link.call_tickets, link.call_streams = None, 0, [], set()
        # streams forgotten here whose shard this call did not tell: what it says of them is of the session that
        # is gone (its answers, progress, expiry); those it told were forgotten first, before its items
        forgets, link.call_forgets = link.call_forgets, set()
        stale = link.forgetting - forgets
        link.forgetting -= forgets  # (a call that failed told nothing: the restore reads the log, which says it)
        try:
            reply = ray.get(ref)
        except ray.exceptions.RayError as e:  # the shard raised, or its actor died: it is restored (ShardRecovery)
            self.front.recovery.failed(link, e, kind, tickets, outcomes)
            return
        if reply.get("needs_restore"):  # restarted by Ray between two calls
            self.front.recovery.lost(link, "restarted", tickets, outcomes, kind)
            return
        link.lost, link.restore_errors = False, 0
        self.front.replies.take(link, reply, version, stale, outcomes)
