"""Whether the serving loop turns: when it last did (/healthz's liveness, readiness.py), and the log's lines of a
stall past limits.stall_s (review412 #10: a 40 s stall of the engine thread left no line, during or after). The
first probe to find the loop stalled says so from the HTTP thread, `the engine loop has not turned for N s`; the
loop, once it turns again, says how long it did not (`the engine loop did not turn for N s`): both `event: stalled`.
"""

from __future__ import annotations

import sys


class LoopTurns:
    """When the serving loop last turned (``turned_at``, monotonic; None until it serves), and its stall's lines."""

    def __init__(self, stall_s: float) -> None:
        self.stall_s = stall_s
        self.turned_at: float | None = None
        self._stall_said = False  # a probe said the stall now lasting (the loop's own line comes once it turns)

    def turned(self, now: float) -> None:
        """The loop turns at ``now``: a stall that ends here is said, with how long it lasted."""
        if self.turned_at is not None and now - self.turned_at > self.stall_s:
            print(f"flashtick: the engine loop did not turn for {now - self.turned_at:.1f} s (limits.stall_s="
                  f"{self.stall_s:g}; /healthz answered 503 stalled meanwhile): it turns again",
                  file=sys.stderr, flush=True)
        self.turned_at, self._stall_said = now, False

    def age(self, now: float) -> float | None:
        """Seconds since the loop last turned (None before it serves), off the engine thread: the first call to
        find it stalled says so."""
        if self.turned_at is None:
            return None
        age = now - self.turned_at
        if age > self.stall_s and not self._stall_said:
            self._stall_said = True
            print(f"flashtick: the engine loop has not turned for {age:.1f} s (limits.stall_s={self.stall_s:g}): "
                  f"/healthz answers 503 stalled until it does", file=sys.stderr, flush=True)
        return age
