"""What a restart finds the tick log lost that the answer log still refers to, once the replay is done: its tail
(a host crash under group fsync, or damage cut away: answers past a stream's ticks kept, no longer served as
current) or whole streams (segments removed: said, their last answers still served). DataDir.replay calls both."""

from __future__ import annotations

import sys
from collections.abc import Container
from pathlib import Path
from typing import Any

from connectors.encoder import StreamEncoders
from connectors.ticks import counted
from engine.quoting import quoted
from engine.service.answer_log import AnswerHistory, AnswerLog
from engine.service.log_lines import named_few
from queries.registry import Registry


def forget_lost_answers(answers: AnswerLog, restored: tuple[Registry, AnswerHistory, Any] | None,
                        encoders: StreamEncoders, turned_away: Container[str]) -> None:
    """Latest answers about ticks the tick log no longer holds (its tail lost to a host crash under group fsync,
    or cut as damaged; skip_corrupt): a stream came back with fewer ticks than its answers' ``version``. They
    are not served as current (`get`, `ask --max-stale`: AnswerLog.forget_lost), and said. (Their replay
    booked the stream whole: every tick kept had been answered.) ``restored``: DataDir.restore_answers' arguments,
    None when it did not run."""
    if restored is None:
        return
    registry, history, replayed = restored
    counts: dict[str, int] = {}
    for answer in answers.cache.latest():
        ticks = encoders.ticks_of(answer.stream)
        if ticks is not None and answer.stream not in turned_away and answer.version > ticks:
            counts[answer.stream] = ticks
    if not counts:
        return
    taken = answers.forget_lost(counts, history, registry, replayed)
    named = ", ".join(f"{quoted(s)} holds {n:,} ticks" for s, n in sorted(counts.items())[:5])
    more = f", ... ({len(counts)} streams in all)" if len(counts) > 5 else ""
    print(f"flashtick: warning: {counted(len(taken), 'answer')} refer to ticks lost with the log's tail ({named}"
          f"{more}; the answers went to tick {max(a.version for a in taken):,}): they are no longer served as "
          f"current; each query's latest answer on the ticks kept is. The next ticks take the lost ones' "
          f"counts, so their answers' `version` repeats the lost answers' (a later `seq` tells them apart)",
          file=sys.stderr, flush=True)


def say_lost_streams(answers: AnswerLog, encoders: StreamEncoders, turned_away: Container[str],
                     tick_log: Path) -> None:
    """Streams the answer log has answers of but the tick log (in directory ``tick_log``) knows nothing of (neither
    ticks nor an expiry): its segments were removed. The operator must hear it at the start, not find sessions gone.
    A stream whose logged ticks admission refused (``turned_away``) is not one: its cause is said by the caller."""
    lost = sorted({a.stream for a in answers.cache.latest()
                   if a.stream not in encoders and not encoders.expired(a.stream) and a.stream not in turned_away})
    if lost:
        print(f"flashtick: warning: the answer log has answers of {counted(len(lost), 'stream')} the tick log "
              f"holds nothing of ({named_few(lost)}): were tick log segments in {tick_log} removed? "
              f"Their last answers are still served (`get`) and their topics' seqs go on; their next ticks start "
              f"new sessions", file=sys.stderr, flush=True)
