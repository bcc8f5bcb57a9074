"""A sharded front door's restart from its data directory (ShardedPipeline's start, sharded.py).

The registry and the answers come back from the data directory here; every logged item goes through the front
door's encoders (codec state, ordering guards) onto ShardRestores, in log order, with admission as one engine's
replay has it (a limit lowered since); then each shard gets its first restore: its streams' items, from which it
rebuilds and computes what was owed as one engine does (log_replay.split_log, owed_answers.answer_tail). One engine
restarts its own way (engine_restart.py): it books the log on its own scheduler and computes the tail itself; here
the shards compute, and the front door only says what is owed.
"""

from __future__ import annotations

import sys
from typing import Any

from connectors.ticks import counted
from engine.service.kept_queries import register_changed
from engine.service.log_lines import say
from engine.service.owed_answers import TailStarts, answers_owed
from engine.service.shard_restores import ShardRestores


def restart_front_door(front: Any) -> None:
    """On start: registry and answers from the data directory, then every logged item through the
    encoders here (codec state, ordering guards) and to its stream's shard, which rebuilds from them and
    computes what was owed as one engine does (log_replay.split_log, owed_answers.answer_tail)."""
    reregistered: set[str] = set()  # queries the data directory's state did not describe: registered now
    if front.data.queries_path.is_file():
        front.marks, reregistered = front.data.restore_queries(front.registry)
    reregistered |= front.data.restore_answers(front.registry, front.history, front.adaptation)
    for name in reregistered:
        front.forget_query(name)
    changed = (register_changed(front.config.queries, front.registry, front.forget_query, front._configured,
                                front.data.origins) if front.config.queries else [])
    changed = sorted(reregistered - set(changed)) + changed
    restores = ShardRestores(front, accepted=True)
    starts = TailStarts(front.cache, front.registry, front.marks, set(changed))
    tail, refused = restores.place_tail(front.data.replay(front.encoders, restores, answered=starts))
    front.data.replay_refused += refused  # (as one engine counts the tail items its admission refuses)
    for stream in front.encoders.expired_streams():  # (their latest answers kept packed, as live)
        front.cache.pack_stream(stream)
    front.ticks_in = front.data.recovered_ticks
    owed = [item for item in tail if item is not None]
    for item in owed:  # accepted before the stop: seen here as the live run saw them
        front.adaptation.accepted(item)
        front.scores.accepted(item)
    answers = answers_owed(front.registry, front.cache, front.marks, set(changed), tail, starts) if owed else 0
    if answers:  # a clean stop's tail (ticks after each stream's last answer that fired no query) owes none
        print(f"flashtick: computing what was owed: {counted(answers, 'answer')} due on "
              f"{counted(sum(item.ticks for item in owed), 'tick')} of "
              f"{counted(len({item.stream for item in owed}), 'stream')} accepted but not yet answered when the "
              f"service stopped (on the shards; answers follow as they are restored)", file=sys.stderr, flush=True)
    # the logged streams it refused (in log order as one engine's) are said as one engine says them
    front.refused_at_start |= front.turned_away.settle(front.shard_of, front.encoders, front.admission_limit, say)
    front.data.replayed(len(front.shard_of))
    # registered now, after every logged tick: owed none of them (nor any tick of the tail, below)
    front.marks.registered(changed, restores.committed(tail))
    front.save_queries()
    for link in front.links:
        link.lost = True  # until its restore is in
        front.recovery.send_restore(link, restores.logged(link.streams | restores.expired_on(link), tail),
                                    changed=tuple(changed))
