"""A stream as the scheduler sees it: its session, the chunks waiting for a forward, and its counters."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from itertools import accumulate

import torch

from engine.jobs import ProbeJob, StreamProgress
from engine.session import Session


@dataclass
class Chunk:
    tokens: list[int]
    event_ts: int  # event time (ns) of the latest tick in the chunk
    ticks: int  # ticks the chunk carries
    arrival_ns: int  # wall clock when submitted, for freshness
    cut: bool = False  # it closes a tick group: standing queries are checked right after it
    received_ns: int = 0  # wall clock when it reached the service, if before arrival_ns (a wait upstream): lag
    # a due point inside its group (Scheduler.due_point: the query layer's price-move triggers), a cut that closes
    # no group, so the queries checked at group ends are not checked here
    due: bool = False

    @property
    def checked(self) -> bool:
        """Standing queries are checked right after it (a group's end or a due point): its prefix is read."""
        return self.cut or self.due


@dataclass(eq=False)
class Stream:
    session: Session
    roll_at: int  # tokens past which the session rolls next (its first roll comes early: context_rolls.roll_points)
    keep: int  # tokens a roll keeps besides the sink
    pending: deque[Chunk] = field(default_factory=deque)
    waiting_since: int = 0  # order of arrival of the oldest pending chunk
    pending_tokens: int = 0  # the tokens of its pending chunks (the scheduler keeps it with them)
    pending_ticks: int = 0  # ... and their ticks
    ticks: int = 0
    event_ts: int = 0
    arrival_ns: int = 0
    last_active: int = 0  # batch number of the last advance (LRU order)
    last_seen_ns: int = 0  # wall clock of the latest submitted chunk (idle expiry)
    rebuilds: int = 0  # forwards that recomputed this session's evicted or restored KV (`streams` says it per stream)
    boundaries: list[int] = field(default_factory=list)  # token offsets where chunks begin
    next_token_logits: torch.Tensor | None = None  # (vocab,) prediction for the next token
    # with next_token_logits None: its context's last row is that prediction (tokens a restore booked as the live run
    # left them, no roll since), so the forward that rebuilds the context computes it (Scheduler.plan)
    context_predicts: bool = False
    # its earlier context was given up (engine/kept_contexts.py): its answers say so until its first roll, when a
    # run that kept it (a backtest) would have rolled its context to recent ticks too
    context_reset: bool = False

    @property
    def name(self) -> str:
        return self.session.name

    def surprise(self, tokens: list[int], rows: torch.Tensor) -> float | None:
        """NLL of the last chunk's tokens. ``rows`` holds the logits of the last len(tokens)+1
        positions (fewer when the chunk began the advance and the forward rebuilt no tail before it: then the
        previous forward's final prediction covers the first token)."""
        predictions = rows[:-1]  # (k or k-1, vocab): row j predicts the token after it
        if predictions.shape[0] < len(tokens):
            if self.next_token_logits is None:
                tokens = tokens[len(tokens) - predictions.shape[0] :]
            else:
                predictions = torch.cat([self.next_token_logits[None], predictions])
        if not tokens:
            return None
        logp = torch.log_softmax(predictions.float(), dim=-1)
        return float(-logp[torch.arange(len(tokens)), torch.tensor(tokens)].sum())

    def progress(self, chunks: list[Chunk], surprise: float | None) -> StreamProgress:
        """Where the stream stands once ``chunks`` (taken, not yet committed) are; surprise as given."""
        last = chunks[-1] if chunks else None
        return StreamProgress(
            stream=self.name,
            ticks=self.ticks + sum(c.ticks for c in chunks),
            event_ts=last.event_ts if last else self.event_ts,
            version=self.session.version + (1 if chunks else 0),
            arrival_ns=last.arrival_ns if last else self.arrival_ns,
            surprise=surprise,
            context_tokens=len(self.session.tokens) + sum(len(c.tokens) for c in chunks),
            context_ticks=len(self.boundaries) + len(chunks),
        )


@dataclass
class Cut:
    """A due point inside an advance: right after its chunk ``chunk``, ``position`` session tokens in.
    Standing queries due there are evaluated against exactly that prefix (``ProbeJob.cut``)."""

    chunk: int
    position: int
    progress: StreamProgress  # the stream at that point; surprise filled in at commit
    jobs: list[ProbeJob] = field(default_factory=list)  # the jobs due there


def cuts_of(state: Stream, chunks: list[Chunk], closes: list[bool], ticks_before: int = 0) -> list[Cut]:
    """The cuts of an advance of ``chunks`` (placed after the session's current tokens): one per closed group and
    one per due point inside a group (``Chunk.due``, its progress not a ``group_end``).
    ``ticks_before``: ticks of the stream's earlier segments in the same forward, not yet committed."""
    cuts = []
    position, ticks = len(state.session.tokens), state.ticks + ticks_before
    for k, (chunk, closed) in enumerate(zip(chunks, closes)):
        position += len(chunk.tokens)
        ticks += chunk.ticks
        if closed or chunk.due:
            progress = StreamProgress(state.name, ticks, chunk.event_ts, state.session.version + 1,
                                      chunk.arrival_ns, None, position, len(state.boundaries) + k + 1, closed)
            cuts.append(Cut(k, position, progress))
    return cuts


def _spans(chunks: list[Chunk]) -> list[tuple[int, int]]:
    """Each chunk's [start, end) among the advance's own tokens."""
    ends = list(accumulate(len(c.tokens) for c in chunks))
    return [(end - len(c.tokens), end) for c, end in zip(chunks, ends)]


def logit_rows(chunks: list[Chunk], cuts: list[Cut], row_before: bool = False) -> tuple[int, ...]:
    """The advance's own rows whose logits the commit needs: for the last chunk and each cut's chunk, the row
    before it and its own rows (their NLL, the ``surprise`` of that point); the last row always. ``row_before``:
    row -1 too, the rebuilt tail's last (the prediction of the first chunk's first token, where the stream holds
    none: a restored context's; batch.Sequence.logit_rows)."""
    spans = _spans(chunks)
    rows: set[int] = {-1} if row_before else set()
    for k in {c.chunk for c in cuts} | {len(chunks) - 1}:
        start, end = spans[k]
        rows.update(range(max(0, start - 1), end))
    return tuple(sorted(rows))


def chunk_surprises(state: Stream, chunks: list[Chunk], wanted: tuple[int, ...], rows: torch.Tensor,
                    which: list[int]) -> dict[int, float | None]:
    """NLL of chunks ``which`` from the advance's logits ``rows`` ((len(wanted), vocab), one per own row in
    ``wanted``); before the state's ``next_token_logits`` moves past this advance."""
    spans = _spans(chunks)
    row_of = {own: r for r, own in enumerate(wanted)}
    out: dict[int, float | None] = {}
    for k in which:
        start, end = spans[k]
        picked = [row_of[i] for i in range(-1 if start == 0 and -1 in row_of else max(0, start - 1), end)]
        out[k] = state.surprise(chunks[k].tokens, rows[picked])  # (len(tokens) or +1, vocab)
    return out
