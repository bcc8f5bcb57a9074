"""Contexts kept past an expiry. A stream silent past ``scheduler.stream_idle_s`` gives its KV back to the pool (what
expiry is for: memory under churn), but its committed tokens (the context its answers attend), chunk boundaries,
roll phase, counts and last prediction are kept here, packed, so its next tick continues the same session: the
forward that takes it recomputes the KV exactly, as for a session LRU eviction emptied, and its answers equal those
of a run in which it never expired (a backtest, where nothing expires). A name that prints twice a day therefore
answers each print from the context a backtest of the same ticks has, not from one tick.

Bounded, since a feed's names churn (options series, delistings): the ``expired_streams_kept`` most recently expired
streams keep theirs (the bound under which the ingest side keeps their ordering guards and codec state). An older
one is forgotten, and so is one an operator `forget`s: such a name's next tick starts a new context, and the
scheduler marks that stream (``Stream.context_reset``) until its first roll, so its answers carry a caveat.

A kept context costs its tokens and boundaries as 4-byte ints (a window of the built-in model: ~2.5 KiB) and its
last prediction (the vocabulary's floats: 0.5 KiB for the built-in model; not kept past KEPT_PREDICTION_MAX
entries, where the next chunk's surprise then loses its first token's term, as after a restart), against the
window's KV it gave back (2 MiB for the built-in model).
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from dataclasses import dataclass

import torch

from engine.session import Session
from engine.stream import Stream

KEPT_PREDICTION_MAX = 4096  # vocabulary sizes up to this keep a stream's last prediction (16 KiB of floats)


@dataclass
class KeptContext:
    """An expired stream's session without its KV, packed."""

    tokens: array
    boundaries: array
    roll_at: int
    keep: int
    ticks: int
    event_ts: int
    arrival_ns: int
    version: int
    rebuilds: int
    prediction: torch.Tensor | None

    @classmethod
    def of(cls, state: Stream) -> KeptContext:
        logits = state.next_token_logits
        kept = logits if logits is not None and logits.numel() <= KEPT_PREDICTION_MAX else None
        return cls(array("i", state.session.tokens), array("i", state.boundaries), state.roll_at, state.keep,
                   state.ticks, state.event_ts, state.arrival_ns, state.session.version, state.rebuilds, kept)

    def stream(self, name: str) -> Stream:
        """The stream as it was at its expiry, its KV to be recomputed (``num_cached`` 0)."""
        session = Session(name, self.tokens.tolist(), version=self.version)
        return Stream(session, roll_at=self.roll_at, keep=self.keep, ticks=self.ticks, event_ts=self.event_ts,
                      arrival_ns=self.arrival_ns, rebuilds=self.rebuilds, boundaries=self.boundaries.tolist(),
                      next_token_logits=self.prediction)


class KeptContexts:
    """Expired streams' contexts, the most recently expired last, at most ``limit``; and the names whose context
    was given up (forgotten past the limit, or by `forget`), at most ``limit`` too, so the stream that comes back
    is told apart from a new one (its answers then say that their context was reset)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._kept: OrderedDict[str, KeptContext] = OrderedDict()
        self._given_up: OrderedDict[str, None] = OrderedDict()
        self.resumed = 0  # streams that came back onto their kept context
        self.given_up = 0  # contexts forgotten past the limit or by `forget`

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, name: object) -> bool:
        return name in self._kept

    def keep(self, state: Stream) -> None:
        """``state`` expired: its context kept (its KV is the caller's to free); the oldest past the limit given up."""
        self._given_up.pop(state.name, None)
        if self.limit == 0:
            self._give_up(state.name)
            return
        self._kept[state.name] = KeptContext.of(state)
        while len(self._kept) > self.limit:
            self._give_up(next(iter(self._kept)))

    def take(self, name: str) -> Stream | None:
        """``name``'s kept context as a stream again (it is no longer kept here), None when none is kept."""
        kept = self._kept.pop(name, None)
        if kept is None:
            return None
        self.resumed += 1
        return kept.stream(name)

    def forget(self, name: str) -> None:
        """``name``'s context given up (an operator's `forget`, or the ingest side forgot the stream): its next tick
        starts a new one, marked as reset."""
        self._give_up(name)

    def was_reset(self, name: str) -> bool:
        """Whether ``name`` had a context that was given up (taken: asked once, as it is admitted again)."""
        return self._given_up.pop(name, False) is None

    def _give_up(self, name: str) -> None:
        had = self._kept.pop(name, None) is not None
        self.given_up += had
        self._given_up.pop(name, None)
        self._given_up[name] = None
        while len(self._given_up) > max(self.limit, 1):
            self._given_up.popitem(last=False)
