"""The log line of streams expired for idleness (scheduler.stream_idle_s): the first said at once, later ones
gathered and said at most every EXPIRED_LINE_EVERY_S."""

from __future__ import annotations

import sys

from engine.quoting import quoted

MAX_NAMED_EXPIRED = 5  # streams named in a log line of those expired for idleness
EXPIRE_PER_TURN = 4096  # streams one heartbeat (or shard step) expires at most: a whole chain gone quiet, the rest next
EXPIRED_LINE_EVERY_S = 10.0  # after the first, streams expired for idleness are said at most this often


class ExpiredStreamsLine:
    """Streams expired for idleness, said on stderr: their KV is freed (their context kept, engine/kept_contexts.py),
    so an operator sizing kv.cells sees the churn. A chain of option series going quiet one by one expires a few at
    almost every heartbeat: the first expiry is said at once, later ones at most every EXPIRED_LINE_EVERY_S, with
    how many since the last such line and in all, the first few named (stats' `streams_expired` counts every
    one)."""

    def __init__(self, idle_s: float | None) -> None:
        self.idle_s = idle_s
        self.said = 0  # streams expired that a line has told of
        self.waiting = 0  # streams expired since the last line
        self.named: list[str] = []  # the first MAX_NAMED_EXPIRED of those waiting
        self.next_line_at = 0.0  # (monotonic) no line before this, unless the service is stopping

    def add(self, expired: list[str]) -> None:
        self.waiting += len(expired)
        self.named += expired[: MAX_NAMED_EXPIRED - len(self.named)]

    def say(self, now: float, stopping: bool = False) -> None:
        if not self.waiting or (now < self.next_line_at and not stopping):
            return
        n, first = self.waiting, self.said == 0
        names = ", ".join(map(quoted, self.named)) + (f" and {n - len(self.named)} more" if n > len(self.named) else "")
        what = f"{n} stream{'s' if n != 1 else ''} with no data for scheduler.stream_idle_s ({self.idle_s:g} s)"
        self.said, self.waiting, self.named = self.said + n, 0, []
        self.next_line_at = now + EXPIRED_LINE_EVERY_S
        if first:
            print(f"flashtick: expired {what}: {names}; their KV went back to the pool and their context is kept: "
                  f"a stream's next tick goes on from it, its KV recomputed then (later expiries are said at most "
                  f"every {EXPIRED_LINE_EVERY_S:g} s)",
                  file=sys.stderr, flush=True)
            return
        print(f"flashtick: expired {what} since the last such line ({self.said} in all): {names}",
              file=sys.stderr, flush=True)
