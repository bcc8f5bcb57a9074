"""Where wire messages begin and end in the tick log, and the messages a kill cut short.

The service logs each accepted item as it reads a message in, so a process killed meanwhile (kill -9, OOM) leaves
part of that message in the log. Nothing of it was computed or answered (a message's tick groups close only at its
end, and the engine loop runs between messages) and the feed was told nothing about it, so a restart that booked that
part would answer it as a tick group of its own, where a run that never stopped had one group for the whole message
(`flashtick feed` sends the rest again as another). So the first item of a message of several carries
``MESSAGE_START`` with the value ``ENDS_LOGGED``, and the message's last logged item is followed by a record of its
own, ``{MESSAGE_END: True}``: a reader holds a message's records until its end record and drops the items of one
that has none (``whole_messages``). The feed's resend, which asks the engine what it holds, then sends the message
whole. A message of one item (a tick per message: most live feeds) is whole once its item is: ``WHOLE`` on it,
and no end record, so such a feed's log costs what it did.

A tick log that refuses appends from some point on (its directory moved away or removed, its file deleted, an fsync
failed: ticklog.py latches) may notice it part way through a message: the message's items logged before it were
accepted, computed and answered (the sender's rejections name the rest), so the message is ended there, the end
record written after all (TickLog.append_closing, into the file that holds those items) with ``LATCHED``: why, where
the message began and how many of its ticks were kept and refused. A restart on that file books the kept items as
the message they were, and says what happened (``whole_messages``' ``latched``; recovery_report.py).

A log written before end records (its message starts carry ``True``, 2026-12-05) is read as before: no message of it
is held back, none dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import msgpack

from engine.service.ticklog import SEGMENT_START

MESSAGE_START = "m"  # a tick log record's key: this item began a wire message (its tick groups end before it)
ENDS_LOGGED = 2  # MESSAGE_START's value where the message's end is logged (``True``: a log of an earlier version)
WHOLE = 3  # MESSAGE_START's value on a message of one item: it is its own end (one-tick feeds write no end records)
MESSAGE_END = "e"  # a record of its own, {e: true}, after the last logged item of a message of several
END_RECORD = msgpack.packb({MESSAGE_END: True}, use_bin_type=True)  # (16 bytes in the log with its header)
# beside MESSAGE_END on the end of a message the log stopped taking part way through: {why: TickLog.latched_kind,
# first: the record number of its first item, listed: the ticks the message listed, kept: ticks logged, refused:
# ticks the log refused}; an earlier version reads the record as a plain end
LATCHED = "latched"


def latched_end(why: str, first: int, listed: int, kept: int, refused: int) -> bytes:
    """The end record of a message the tick log stopped taking part way through (``LATCHED``)."""
    return msgpack.packb({MESSAGE_END: True, LATCHED: {"why": why, "first": first, "listed": listed, "kept": kept,
                                                       "refused": refused}}, use_bin_type=True)


class LogRecord(NamedTuple):
    """One decoded tick log record, as ``whole_messages`` hands it on."""

    number: int
    record: dict[str, Any]
    unended: bool  # of a message whose end record never came: an item not to book (a kill cut the message short)
    # (unended) of the message the records end in: what the stop before a restart cut (or, nothing logged since, an
    # earlier one); not: one a later run's records follow, said by the start after the stop that cut it
    last: bool = False


def is_item(record: dict[str, Any]) -> bool:
    """A logged tick or pre-tokenized item (not one of the log's own records)."""
    return "tick" in record or "tokenized" in record


def item_ticks(record: dict[str, Any]) -> int:
    """The ticks a logged item holds."""
    return 1 if "tick" in record else record["tokenized"]["ticks"]


def whole_messages(records: Iterable[tuple[int, dict[str, Any]]],
                   latched: Callable[[dict[str, Any]], None] | None = None) -> Iterator[LogRecord]:
    """Every record of ``records`` (number, decoded payload) in order, but the records of a message whose end is
    logged held back until its end record comes; those of one whose end never came (the log ended, or another
    message, an expiry or a forget came first: a restart appended after a kill) are handed on ``unended``. End
    records themselves are not handed on. A segment start inside a message (a roll while it was read in) is part
    of it: under an unended message it counts the cut items, so it is handed on ``unended`` too, and ``last`` when
    the records end in it. ``latched`` is called with each end record's ``LATCHED`` map, where the log stopped taking
    a message part way through."""
    held: list[tuple[int, dict[str, Any]]] | None = None
    for number, record in records:
        if held is not None:
            if MESSAGE_END in record:
                if latched is not None and LATCHED in record:
                    latched(record[LATCHED])
                yield from (LogRecord(n, r, False) for n, r in held)
                held = None
                continue
            if SEGMENT_START in record or (is_item(record) and not record.get(MESSAGE_START)):
                held.append((number, record))
                continue
            # the message never ended: the process stopped while it read it in, and this is the next run's
            yield from (LogRecord(n, r, True) for n, r in held)
            held = None
        if record.get(MESSAGE_START) == ENDS_LOGGED:
            held = [(number, record)]
        elif MESSAGE_END not in record:  # (an end whose message began in a segment retention dropped: nothing held)
            yield LogRecord(number, record, False)
    if held is not None:
        yield from (LogRecord(n, r, True, True) for n, r in held)
