"""What one forward does: the items asked for and the sequences planned from them.

An ``Advance`` commits its tokens to a session; a ``Probe`` evaluates tokens
after the session's committed prefix and commits nothing. The block manager
turns a list of items into a ``ForwardBatch``: one ``Sequence`` per row group of
the ragged forward, with positions, the KV cells each advance writes, and a
rebuild sequence inserted where an evicted session must get its K/V back first.
The runner executes a ``ForwardBatch`` and nothing else; it never allocates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from engine.quoting import quoted
from engine.session import Session

# "last": the last row; "all": one row per token of the item; "none"; an int n: the last n rows;
# a tuple: those rows (indices into the item's own tokens, ascending; -1: the row before them, where the sequence
# rebuilds a tail first).
LogitsWanted = Literal["last", "all", "none"] | int | tuple[int, ...]


@dataclass
class Advance:
    session: Session
    tokens: list[int]
    logits: LogitsWanted = "last"


@dataclass
class Probe:
    """``cut``: evaluate after the session's first ``cut`` tokens (a due point inside a chunk advanced in the
    same or an earlier forward) instead of after all of them; positions then start at ``cut``. ``overlap``: the
    probe's first tokens stand in for that many of the prefix's last ones (ProbeJob.overlap), so it is evaluated
    after the prefix less them."""

    session: Session
    tokens: list[int]
    logits: LogitsWanted = "all"
    cut: int | None = None
    overlap: int = 0


@dataclass
class Sequence:
    """One sequence of the ragged forward, fully laid out."""

    session: Session
    token_ids: list[int]  # rebuilt tail + the item's own tokens
    first_position: int  # == the cached prefix the sequence attends to before its own rows (a probe's cut)
    own_start: int  # index in token_ids where the item's own tokens begin (= tokens rebuilt)
    logits: LogitsWanted
    writes: bool  # an advance or a rebuild: its K/V is written to ``slots`` and committed
    slots: list[int] = field(default_factory=list)  # KV cells written (writes only)
    block_table: list[int] = field(default_factory=list)  # the session's blocks once the batch is allocated

    @property
    def own_tokens(self) -> list[int]:
        return self.token_ids[self.own_start :]

    def logit_rows(self) -> list[int]:
        """Indices into ``token_ids`` whose logits the item wants."""
        n = len(self.token_ids)
        if self.logits == "none" or n == 0:
            return []
        if self.logits == "all":
            return list(range(self.own_start, n))
        if isinstance(self.logits, tuple):  # (-1: the rebuilt tail's last row, asked only where there is one)
            if self.logits and self.own_start + self.logits[0] < 0:
                raise ValueError(f"logit row {self.logits[0]} of {quoted(self.session.name)}: no tail rebuilt before "
                                 f"its own tokens")
            return [self.own_start + i for i in self.logits]
        if isinstance(self.logits, int):
            return list(range(max(self.own_start, n - self.logits), n)) if self.logits > 0 else []
        return [n - 1]


@dataclass
class ForwardBatch:
    """A planned forward: sequences in order, which sequence answers each item, and the cell copies
    (copy-on-write of a shared prefix's partial block) to make before it runs."""

    sequences: list[Sequence] = field(default_factory=list)
    item_sequence: list[int] = field(default_factory=list)  # item i -> index into sequences
    copies: list[tuple[list[int], list[int]]] = field(default_factory=list)  # (source cells, target cells)

    @property
    def num_tokens(self) -> int:
        return sum(len(s.token_ids) for s in self.sequences)
