"""`serve --log-timestamps`: each line the service writes to stderr starts with the UTC time it was written.

A service run under a supervisor that stamps lines itself (journald, Kubernetes) needs none; one run under
nohup or a plain file redirect otherwise logs "behind", "caught up" and restart lines that cannot be placed in
time. The service's lines are plain prints to stderr (one place for every message), so the stamp is put on the
stream rather than on each call. `say` writes one such line, `flashtick: ...`, for the modules that share it."""

from __future__ import annotations

import sys
import threading
from datetime import datetime, timezone
from typing import TextIO

from engine.quoting import quoted


def say(line: str) -> None:
    """One line of the service's log (stderr), as the server writes its own."""
    print(f"flashtick: {line}", file=sys.stderr, flush=True)


def named_few(names: list[str], shown: int = 5) -> str:
    """The first ``shown`` of ``names`` quoted as JSON writes them (engine/quoting.py), and how many in all past
    them: `"A", "B", ... (12 in all)` (a line naming every stream or query of thousands would bury the log)."""
    return ", ".join(map(quoted, names[:shown])) + (f", ... ({len(names)} in all)" if len(names) > shown else "")


def utc_stamp() -> str:
    """`2026-12-03T12:40:01.123Z`: ISO 8601, milliseconds, UTC (sorts as text; no zone to guess)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class WrappedStream:
    """What a stream wrapper over stderr passes through to the stream it writes to (flush, isatty, fileno,
    encoding): TimestampedLines here, log_levels.LeveledLines."""

    _stream: TextIO

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return self._stream.encoding


class TimestampedLines(WrappedStream):
    """A text stream that writes to ``stream``, each line prefixed with ``utc_stamp()`` and a space when its first
    character is written. Safe across threads: a line written in pieces (print's text, then its newline) from
    one thread is stamped once, and pieces of two threads' lines are not interleaved mid-stamp."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._at_line_start = True
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            out = []
            for piece in text.splitlines(keepends=True):
                if self._at_line_start:
                    out.append(utc_stamp() + " ")
                out.append(piece)
                self._at_line_start = piece.endswith(("\n", "\r"))
            self._stream.write("".join(out))
        return len(text)
