"""Scheduler: which streams advance in the next forward, within the token and KV-cell budgets.

Streams submit chunks of tokens (one tick's, or a tokenized batch's) with their
event time. ``next_batch`` takes the streams that have waited longest first
(FIFO by arrival of their oldest pending chunk, so no stream starves whatever
the others' rates), up to ``max_batch_tokens``. The KV pool is the cell
budget: when a batch needs blocks that are not free, the policy decides —
``evict`` drops the least recently active sessions' KV (their token logs stay,
so they rebuild exactly on next use), ``refuse`` admits a new stream only while
the pool can hold a full window for every admitted stream. Accepted data is
never dropped: a stream that cannot fit now waits in its queue.

Context limit: a session that would pass ``window`` tokens keeps its first
``sink_tokens`` (the configured header, if any) plus the most recent tokens
from a chunk boundary, and re-prefills them.
"""

from __future__ import annotations

import time
import zlib
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import torch

from engine.runner import Advance, ModelRunner, Probe
from engine.session import Session


class AdmissionRefused(RuntimeError):
    """A new stream was refused because the KV pool cannot hold another full window."""


@dataclass(frozen=True)
class SchedulerConfig:
    max_batch_tokens: int = 4096
    max_batch_streams: int = 256
    when_full: Literal["evict", "refuse"] = "evict"
    window: int | None = None  # context limit in tokens; None: the model's max positions
    sink_tokens: int = 0  # leading tokens kept on a roll (at least the header)
    keep_fraction: float = 0.5  # share of the window kept (most recent tokens) after a roll
    header: tuple[int, ...] = ()  # tokens every session starts with; their KV is computed once and shared
    probe_reserve: int = 64  # positions kept free past a session's tokens for question (+ answer) probes

    def __post_init__(self) -> None:
        if self.max_batch_tokens <= 0:
            raise ValueError(f"max_batch_tokens must be > 0, got {self.max_batch_tokens}")
        if self.max_batch_streams <= 0:
            raise ValueError(f"max_batch_streams must be > 0, got {self.max_batch_streams}")
        if self.when_full not in ("evict", "refuse"):
            raise ValueError(f"when_full must be 'evict' or 'refuse', got {self.when_full!r}")
        if not 0 < self.keep_fraction < 1:
            raise ValueError(f"keep_fraction must be in (0, 1), got {self.keep_fraction}")
        if self.sink_tokens < 0:
            raise ValueError(f"sink_tokens must be >= 0, got {self.sink_tokens}")
        if self.probe_reserve < 0:
            raise ValueError(f"probe_reserve must be >= 0, got {self.probe_reserve}")


@dataclass
class Chunk:
    tokens: list[int]
    event_ts: int  # event time (ns) of the latest tick in the chunk
    ticks: int  # ticks the chunk carries
    arrival_ns: int  # wall clock when submitted, for freshness


@dataclass(frozen=True)
class StreamProgress:
    """Where a stream stands after a batch; the query layer decides what is due from it."""

    stream: str
    ticks: int  # ticks committed
    event_ts: int  # event time of the latest committed tick
    version: int  # session version
    arrival_ns: int  # wall clock arrival of the latest committed chunk
    surprise: float | None  # NLL (nats) of the latest chunk's tokens, from the ingest forward


@dataclass(eq=False)
class Stream:
    session: Session
    pending: deque[Chunk] = field(default_factory=deque)
    waiting_since: int = 0  # order of arrival of the oldest pending chunk
    ticks: int = 0
    event_ts: int = 0
    arrival_ns: int = 0
    last_active: int = 0  # batch number of the last advance (LRU order)
    boundaries: list[int] = field(default_factory=list)  # token offsets where chunks begin
    next_token_logits: torch.Tensor | None = None  # (vocab,) prediction for the next token

    @property
    def name(self) -> str:
        return self.session.name


@dataclass
class Batch:
    items: list[Advance] = field(default_factory=list)
    streams: list[Stream] = field(default_factory=list)
    chunks: list[list[Chunk]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.items)


@dataclass
class SchedulerStats:
    batches: int = 0
    evictions: int = 0
    evicted_cells: int = 0
    rolls: int = 0
    refused_streams: int = 0
    deferred: int = 0  # times a stream with pending data could not fit in a batch


class Scheduler:
    def __init__(self, runner: ModelRunner, config: SchedulerConfig | None = None) -> None:
        self.runner = runner
        self.config = config or SchedulerConfig()
        self.window = min(self.config.window or runner.config.max_positions, runner.config.max_positions)
        self.sink = max(self.config.sink_tokens, len(self.config.header))
        self.keep = int(self.window * self.config.keep_fraction)
        # a session rolls before its tokens plus the longest probe could pass the window
        self.roll_at = self.window - self.config.probe_reserve
        pool = runner.kv.pool
        if self.sink + self.keep >= self.roll_at:
            raise ValueError(f"sink ({self.sink}) + kept tokens ({self.keep}) + probe_reserve "
                             f"({self.config.probe_reserve}) must be below the window ({self.window})")
        window_blocks = pool.blocks_for(self.window) + 1
        if window_blocks > pool.num_blocks:
            raise ValueError(
                f"KV pool of {pool.capacity_cells} cells cannot hold one session's window of {self.window} tokens; "
                f"raise kv cells or lower the window"
            )
        self.max_streams_admitted = pool.num_blocks // window_blocks  # for the 'refuse' policy
        self.streams: dict[str, Stream] = {}
        self.stats = SchedulerStats()
        self._arrivals = 0
        self._batch_no = 0
        self._header: Session | None = None
        if self.config.header:
            self._header = runner.open_session("__header__", list(self.config.header))
            runner.run([Advance(self._header, [], "none")])

    # -- ingest ----------------------------------------------------------------------------

    def submit(self, stream: str, tokens: list[int], event_ts: int, ticks: int = 1) -> None:
        """Queue a chunk for ``stream``; raises AdmissionRefused for a new stream the pool cannot take."""
        state = self.streams.get(stream) or self._admit(stream)
        if not state.pending:
            self._arrivals += 1
            state.waiting_since = self._arrivals
        state.pending.append(Chunk(list(tokens), event_ts, ticks, time.time_ns()))

    def _admit(self, name: str) -> Stream:
        if self.config.when_full == "refuse" and len(self.streams) >= self.max_streams_admitted:
            self.stats.refused_streams += 1
            raise AdmissionRefused(
                f"stream {name!r} refused: the KV pool holds {self.max_streams_admitted} streams of "
                f"{self.window} tokens and all are admitted"
            )
        session = self.runner.open_session(name, list(self.config.header))
        state = Stream(session)
        self.streams[name] = state
        return state

    def pending_tokens(self) -> int:
        return sum(len(c.tokens) for s in self.streams.values() for c in s.pending)

    # -- batching ----------------------------------------------------------------------------

    def next_batch(self) -> Batch:
        """Advances for the streams that waited longest, within the token budget and the KV pool."""
        batch = Batch()
        budget = self.config.max_batch_tokens
        waiting = sorted((s for s in self.streams.values() if s.pending), key=lambda s: s.waiting_since)
        for state in waiting:
            if len(batch) >= self.config.max_batch_streams:
                break
            chunks = self._take_chunks(state, budget, first=not batch.items)
            if not chunks:
                break
            tokens = [t for c in chunks for t in c.tokens]
            self._roll_if_needed(state, len(tokens))
            if state.session.num_cached == 0 and self.runner.kv.pool.num_free:
                self._share_header(state.session)
            cost = len(tokens) + state.session.num_uncached
            item = Advance(state.session, tokens, logits=len(chunks[-1].tokens) + 1)
            if not self.make_room(batch.items + [item]):
                state.pending.extendleft(reversed(chunks))
                self.stats.deferred += 1
                continue
            batch.items.append(item)
            batch.streams.append(state)
            batch.chunks.append(chunks)
            budget -= cost
        return batch

    def _take_chunks(self, state: Stream, budget: int, first: bool) -> list[Chunk]:
        """Whole chunks up to the budget; an oversized chunk goes alone into an empty batch."""
        chunks: list[Chunk] = []
        used = state.session.num_uncached
        room = self.roll_at - len(state.session.tokens)
        while state.pending:
            size = len(state.pending[0].tokens)
            fits_budget = used + size <= budget or (first and not chunks)
            fits_window = size <= room or not chunks  # a roll happens before the first chunk only
            if not (fits_budget and fits_window):
                break
            chunks.append(state.pending.popleft())
            used += size
            room -= size
        return chunks

    def make_room(self, items: list[Advance | Probe]) -> bool:
        """Evict least recently active sessions outside ``items`` until they fit; False if impossible."""
        pool = self.runner.kv.pool
        needed = self.runner.blocks_needed(items)
        if needed <= pool.num_free:
            return True
        if self.config.when_full == "refuse":
            return False
        busy = {id(item.session) for item in items}
        victims = sorted(
            (s for s in self.streams.values() if s.session.blocks and id(s.session) not in busy),
            key=lambda s: s.last_active,
        )
        for victim in victims:
            self.stats.evicted_cells += victim.session.evict(pool)
            self.stats.evictions += 1
            if needed <= pool.num_free:
                return True
        return needed <= pool.num_free

    def _roll_if_needed(self, state: Stream, incoming: int) -> None:
        """Keep sink + recent tokens (from a chunk boundary) when the window would overflow."""
        session = state.session
        if len(session.tokens) + incoming <= self.roll_at:
            return
        # a per-stream share of the keep (stable across runs) staggers the rolls of streams that fill up
        # together, so one forward does not re-prefill all of them at once
        keep = self.keep - zlib.crc32(session.name.encode()) % max(1, self.keep // 4)
        target = len(session.tokens) + incoming - keep  # first token index we would like to keep
        cut = next((b for b in state.boundaries if b >= target and b > self.sink), len(session.tokens))
        kept = session.tokens[: self.sink] + session.tokens[cut:]
        session.evict(self.runner.kv.pool)
        session.tokens = kept
        state.boundaries = [self.sink + b - cut for b in state.boundaries if b >= cut]
        self.stats.rolls += 1

    def _share_header(self, session: Session) -> None:
        """A session whose KV is gone starts again from the shared header's blocks."""
        header = self._header
        if header is not None and session.num_cached == 0 and session.tokens[: len(header.tokens)] == header.tokens:
            session.adopt_prefix(header, len(header.tokens), self.runner.kv)

    # -- after the forward ------------------------------------------------------------------------

    def preview(self, batch: Batch) -> list[StreamProgress]:
        """The progress each stream in ``batch`` will have once it is committed (surprise unknown yet)."""
        return [self.progress_of(state, chunks, None) for state, chunks in zip(batch.streams, batch.chunks)]

    def commit(self, batch: Batch, logits: list[torch.Tensor]) -> list[StreamProgress]:
        """Book the advances of a batch that ran; ``logits`` are the runner's outputs for its items."""
        self._batch_no += 1
        self.stats.batches += 1
        progress = []
        for state, chunks, rows in zip(batch.streams, batch.chunks, logits):
            length_before = len(state.session.tokens) - sum(len(c.tokens) for c in chunks)
            offset = length_before
            for chunk in chunks:
                state.boundaries.append(offset)
                offset += len(chunk.tokens)
            surprise = self._surprise(state, chunks[-1].tokens, rows)
            state.next_token_logits = rows[-1].clone() if rows.shape[0] else state.next_token_logits
            state.ticks += sum(c.ticks for c in chunks)
            state.event_ts = chunks[-1].event_ts
            state.arrival_ns = chunks[-1].arrival_ns
            state.last_active = self._batch_no
            progress.append(self.progress_of(state, [], surprise))
        return progress

    def _surprise(self, state: Stream, tokens: list[int], rows: torch.Tensor) -> float | None:
        """NLL of the last chunk's tokens. ``rows`` holds the logits of the last len(tokens)+1
        positions (fewer when the chunk was the whole advance: then the previous forward's
        final prediction covers the first token)."""
        predictions = rows[:-1]  # (k or k-1, vocab): row j predicts the token after it
        if predictions.shape[0] < len(tokens):
            if state.next_token_logits is None:
                tokens = tokens[len(tokens) - predictions.shape[0] :]
            else:
                predictions = torch.cat([state.next_token_logits[None], predictions])
        if not tokens:
            return None
        logp = torch.log_softmax(predictions.float(), dim=-1)
        return float(-logp[torch.arange(len(tokens)), torch.tensor(tokens)].sum())

    @staticmethod
    def progress_of(state: Stream, chunks: list[Chunk], surprise: float | None) -> StreamProgress:
        last = chunks[-1] if chunks else None
        return StreamProgress(
            stream=state.name,
            ticks=state.ticks + sum(c.ticks for c in chunks),
            event_ts=last.event_ts if last else state.event_ts,
            version=state.session.version + (1 if chunks else 0),
            arrival_ns=last.arrival_ns if last else state.arrival_ns,
            surprise=surprise,
        )

    def kv_summary(self) -> dict[str, int]:
        pool = self.runner.kv.pool
        return {
            "kv_cells_capacity": pool.capacity_cells,
            "kv_cells_used": pool.used_cells,
            "sessions_resident": sum(1 for s in self.streams.values() if s.session.blocks),
            "streams": len(self.streams),
        }


__all__ = ["Scheduler", "SchedulerConfig", "StreamProgress", "Batch", "AdmissionRefused"]
