"""What a start says once the tick log is replayed (DataDir.replayed): the ticks recovered, of how many streams held
and expired, in how long, what retention had dropped and what a kill cut short; and the damaged log files kept,
at every start while any is."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from connectors.ticks import counted
from engine.service.log_stats import LogStats


def say_recovered(tick_log: Path, streams: int, recovered_ticks: int, expired_ticks: int, expired_streams: int,
                  read_stats: LogStats, recovery_s: float) -> None:
    """The start's line on its replay of ``tick_log`` (none when it recovered nothing and left nothing out):
    ``streams`` held, ``recovered_ticks`` of them and of those expired for idleness before the stop (their
    ``expired_ticks``, of ``expired_streams``), ``read_stats`` of the replay, ``recovery_s`` it took."""
    unended = _unended_text(read_stats.ticks_unended_at_log_end)
    if recovered_ticks:
        dropped = read_stats.ticks_dropped_by_retention
        older = f" ({counted(dropped, 'older tick')} dropped by retention)" if dropped else ""
        print(f"flashtick: recovered {_recovered_text(streams, recovered_ticks, expired_ticks, expired_streams)} "
              f"from {tick_log} in {recovery_s:.1f} s{older}{unended}", file=sys.stderr, flush=True)
    elif read_stats.ticks_unended_at_log_end:  # (its only ticks were of such a message)
        print(f"flashtick: recovered no tick from {tick_log}{unended}", file=sys.stderr, flush=True)


# what latched the tick log, as its end records name it (TickLog.latched_kind), said as a restart's warning
_LATCHED_WHY = {"moved": "the tick log's directory was moved or renamed",
                "removed": "the tick log's directory was removed", "deleted": "the tick log's file was deleted",
                "fsync": "an fsync of the tick log failed"}


def say_latched_messages(latched: list[dict[str, Any]], tick_log: Path) -> None:
    """Each message the tick log stopped taking part way through (message_ends.LATCHED), as a warning: what
    happened, and what of the message this start holds (the ticks accepted before the log noticed) and what the
    sender was told was refused. Not a stop's cut: nothing accepted of it is left out."""
    for end in latched:
        why = _LATCHED_WHY.get(end.get("why"), "the tick log stopped taking appends")
        print(f"flashtick: warning: {why} while a message of {counted(end.get('listed', 0), 'tick')} was read in "
              f"(its first at record {end.get('first', 0):,} of {tick_log}): its {counted(end.get('kept', 0), 'tick')} "
              f"accepted before the tick log noticed are kept (replayed and answered as the live run did); "
              f"{end.get('refused', 0):,} were refused (log_unavailable, told the sender on _rejects/), and the live "
              f"run refused every tick after it until it was restarted", file=sys.stderr, flush=True)


def _unended_text(cut: int) -> str:
    """What the replay left out of the last logged message, which a kill cut short (message_ends.py), said on the
    start's line: the start after that stop (or, while nothing is logged after it, each one). The messages earlier
    stops cut, which later runs logged after, were said by the starts after those stops (review402 #3)."""
    return (f"; left out {counted(cut, 'tick')} of the last logged message, cut short by a stop as it was read in "
            f"(never answered; `flashtick feed` sends such a message again whole)" if cut else "")


# what became of the expired streams (engine/kept_contexts.py): a restart keeps their contexts as the live run did
_KEPT = ("their contexts and latest answers kept (the scheduler.expired_streams_kept most recently expired): a "
         "stream's next tick goes on from its context, its version counting on")


def _recovered_text(streams: int, recovered_ticks: int, expired_ticks: int, expired_streams: int) -> str:
    """`N ticks of M streams`, both of the ``streams`` held; the ticks of sessions expired for idleness before
    the stop said apart, with their streams. Every logged stream may have expired: then none is held, and
    "of 0 streams" would read like a failed recovery."""
    of_expired = f" of {counted(expired_streams, 'stream')}" if expired_streams else ""
    if not streams:
        return (f"{counted(recovered_ticks, 'tick')}{of_expired} (no stream is held: each logged stream "
                f"expired for idleness, {_KEPT})")
    expired = (f" (and {counted(expired_ticks, 'tick')}{of_expired} expired for idleness before the stop: "
               f"replayed, not held; {_KEPT})" if expired_ticks else "")
    return f"{counted(recovered_ticks - expired_ticks, 'tick')} of {counted(streams, 'stream')}{expired}"


def say_damaged_copies(copies: dict[Path, int], root: Path) -> None:
    """At every start while any is kept (``copies``: DataDir.damaged_copies, in data directory ``root``): the
    operator looks at them, then removes them (docs/durability.md); kept unsaid, they would sit in the directory
    for ever, outside retention's budget."""
    if copies:
        size = sum(copies.values())
        named = [f"{path.parent.name}/{path.name}" for path in copies]
        print(f"flashtick: note: {counted(len(copies), 'damaged log file')} ({size:,} "
              f"bytes: originals log.skip_corrupt repaired, torn tails' cut bytes) kept in {root} "
              f"({', '.join(named[:3])}{', ...' if len(named) > 3 else ''}): retention keeps them: remove them "
              f"once looked at (docs/durability.md)", file=sys.stderr, flush=True)
