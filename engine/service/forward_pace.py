"""How long the engine's recent forwards took per token: a stop sizes its last forwards to the time left with it."""

from __future__ import annotations

from collections import deque

PACE_FORWARDS = 8  # the most recent forwards the pace is taken over (a loaded machine's pace moves: recent ones)


class ForwardPace:
    """Seconds per token over the last PACE_FORWARDS forwards, weighted by their tokens."""

    def __init__(self) -> None:
        self._recent: deque[tuple[int, float]] = deque(maxlen=PACE_FORWARDS)  # (tokens, seconds) per forward

    def add(self, tokens: int, seconds: float) -> None:
        if tokens > 0:
            self._recent.append((tokens, seconds))

    @property
    def seconds_per_token(self) -> float | None:
        """None until a forward was timed."""
        tokens = sum(t for t, _ in self._recent)
        return sum(s for _, s in self._recent) / tokens if tokens else None

    def tokens_within(self, seconds: float) -> int:
        """About how many tokens one forward computes in ``seconds`` at the recent pace; 1 (the smallest forward:
        one stream's next chunk) while no forward was timed, so that one measures the pace; 0 when no time is left."""
        if seconds <= 0:
            return 0
        pace = self.seconds_per_token
        return 1 if pace is None else int(seconds / max(pace, 1e-9))
