"""Session: one stream's committed tokens and the KV blocks that hold them. Passive state.

``tokens`` is the committed log; token i sits at position i. ``blocks`` hold
the K/V of ``tokens[:num_cached]`` (and, between planning and commit, cells
reserved for the tokens being written). An evicted session keeps its log and
drops its blocks (``num_cached == 0``); the next forward that touches it
rebuilds the missing K/V exactly. Only the scheduler's block manager changes
``blocks`` and ``num_cached``; a probe never changes anything here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.quoting import quoted


@dataclass(eq=False)
class Session:
    name: str
    tokens: list[int] = field(default_factory=list)
    blocks: list[int] = field(default_factory=list)
    num_cached: int = 0
    version: int = 0  # advances committed; answers are stamped with it

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        if not 0 <= self.num_cached <= len(self.tokens):
            raise ValueError(f"session {quoted(self.name)}: num_cached={self.num_cached} outside [0, "
                             f"{len(self.tokens)}]")

    @property
    def num_uncached(self) -> int:
        return len(self.tokens) - self.num_cached
