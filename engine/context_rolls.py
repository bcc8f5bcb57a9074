"""Context limit: the window a session may fill, where each stream rolls, and what a roll keeps.

A session that would pass ``window`` tokens keeps its first ``sink_tokens`` (the
configured header, if any) plus the most recent tokens from a chunk boundary,
and re-prefills them. Each stream's first roll comes a little early and every
roll keeps a little less, by shares of its own (``roll_points``), so streams that
start together (a venue's open, a restart) do not all re-prefill in the same
forward. The scheduler applies the rolls (it owns the KV they free); this module
holds the policy alone, so a roll's arithmetic is found, and checked, in one place.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from engine.block_manager import BlockManager
from engine.roll_fit import roll_fits, settings_for_window
from engine.settings import SchedulerConfig
from engine.stream import Stream

# Bumped whenever where sessions roll changes (answers after a roll change with it): a backtest resumes only
# parts written under the same rule (engine/service/backtest_resume.py's run key). 2: roll_points' early first roll.
ROLL_RULE = 2  # not 3 for rolls inside a forward (scheduler.roll_inside_forward): they roll at the same points

Booked = tuple[list[int], list[int], int]  # a session's tokens, chunk boundaries and next roll point
# what a window capped by the pool is, as the start line and the errors of a pool too small say it
POOL_WINDOW = "what the KV pool holds, less the block a roll may straddle"


def window_cause(blocks: BlockManager, window: int, explicit: bool) -> str:
    """Why a session's window is ``window`` tokens: scheduler.window (``explicit``), the pool, or the model's
    positions and where they come from (max_position_embeddings, a Mistral model's sliding_window): the one
    wording of `serve`'s start line and a backtest's summary."""
    if explicit:
        return "scheduler.window"
    if window < blocks.max_positions:
        return (f"{POOL_WINDOW}; the model has {blocks.max_positions} positions ({blocks.positions_cause}): kv.cells, "
                f"kv.bytes or scheduler.window sets it")
    return (f"the model's positions: {blocks.positions_cause}, at most what the pool holds: scheduler.window "
            f"sets it")


def roll_points(name: str, roll_at: int, keep: int, sink: int = 0) -> tuple[int, int]:
    """(tokens past which stream ``name`` rolls the first time, tokens it keeps besides the sink at every
    roll): the window's roll point less up to half the span between rolls, and the keep less up to a
    quarter, both by shares hashed from the name (stable across runs, hosts and restarts). Streams that
    fill up together would otherwise all re-prefill ``keep`` tokens in the same forward, first at
    ``roll_at`` and again at each later roll: one forward many times the usual size, whose answers (and
    every stream's behind it) come late. Only the first roll comes early (later ones come at ``roll_at``,
    the phase it set staying), so the cost is one early roll per stream, not shorter windows for good."""
    span = roll_at - sink - keep  # tokens added between two rolls
    early = zlib.crc32(b"roll:" + name.encode()) % max(1, span // 2)
    less = zlib.crc32(name.encode()) % max(1, keep // 4)
    return roll_at - early, keep - less


def _pool_window_words(blocks: BlockManager) -> str:
    """The pool's window in the words of the start line (engine/service/cmd_serve.py): what the pool holds, less
    the block a roll may straddle. "3 blocks of 32" alone read as 96 positions where the window is 64."""
    pool = blocks.pool
    count = f"{pool.num_blocks} block{'' if pool.num_blocks == 1 else 's'} of {pool.block_size} cells"
    return f"{POOL_WINDOW}: {count}, one held back"


@dataclass(frozen=True)
class ContextWindow:
    """The window every session shares, checked against the model and the KV pool when the scheduler is built:
    ``sink`` tokens always kept, ``keep`` recent tokens kept at a roll, ``roll_at`` the tokens past which a
    session rolls (the window less ``probe_reserve``), ``windows_in_pool`` the full windows the pool holds."""

    window: int
    sink: int
    keep: int
    roll_at: int
    windows_in_pool: int

    @classmethod
    def fit(cls, blocks: BlockManager, config: SchedulerConfig) -> ContextWindow:
        """The window ``config`` asks for, or the model's positions capped to what the pool holds; raises
        ValueError saying which setting to change when it cannot fit."""
        pool = blocks.pool
        # a session's window, plus the block its roll may straddle, must fit in the pool; the default
        # (the model's positions) is capped to what the pool holds, an explicit window is checked
        pool_window = (pool.num_blocks - 1) * pool.block_size
        explicit = config.window
        if explicit is not None and explicit > blocks.max_positions:
            raise ValueError(f"scheduler.window {explicit} is past the model's {blocks.max_positions} positions "
                             f"({blocks.positions_cause}; leave it out for the model's)")
        if explicit is not None and explicit > pool_window:
            raise ValueError(f"scheduler.window {explicit} does not fit the KV pool's window of {pool_window} "
                             f"positions ({_pool_window_words(blocks)}): raise kv.cells / kv.bytes, or leave "
                             f"scheduler.window out")
        window = explicit or min(blocks.max_positions, pool_window)
        sink = max(config.sink_tokens, len(config.header))
        keep = int(window * config.keep_fraction)
        # a session rolls before its tokens plus the longest probe could pass the window
        roll_at = window - config.probe_reserve
        if not roll_fits(window, sink, config.keep_fraction, config.probe_reserve):
            small_pool = window == pool_window and pool_window < blocks.max_positions
            fitting = settings_for_window(window, sink, config.probe_reserve, config.keep_fraction)
            whose = (f"{_pool_window_words(blocks)}; raise kv.cells / kv.bytes" if small_pool else "the model's "
                     "positions (a sliding window, for Mistral), or scheduler.window; lower scheduler.keep_fraction, "
                     "probe_reserve or sink_tokens" + (f", e.g. {fitting}" if fitting else ""))
            raise ValueError(f"sink ({sink}) + kept tokens ({keep}) + probe_reserve "
                             f"({config.probe_reserve}) must be below the window ({window} positions: "
                             f"{whose})")
        window_blocks = pool.blocks_for(window) + 1
        if window_blocks > pool.num_blocks:
            raise ValueError(
                f"KV pool of {pool.capacity_cells} cells cannot hold one session's window of {window} "
                f"tokens; raise kv cells or lower the window"
            )
        return cls(window, sink, keep, roll_at, pool.num_blocks // window_blocks)

    def rolled(self, tokens: list[int], boundaries: list[int], roll_at: int, keep: int, incoming: int
               ) -> Booked | None:
        """(tokens, chunk boundaries, next roll point) after the roll ``incoming`` more tokens make; None if none."""
        if len(tokens) + incoming <= roll_at:
            return None
        target = len(tokens) + incoming - keep  # first token index we would like to keep
        cut = next((b for b in boundaries if b >= target and b > self.sink), len(tokens))
        # the first roll came early (roll_points); the later ones at the window's
        return tokens[: self.sink] + tokens[cut:], [self.sink + b - cut for b in boundaries if b >= cut], self.roll_at

    def booked(self, state: Stream) -> Booked:
        """``state``'s session once its pending chunks are booked, rolls and all (Scheduler.booked)."""
        tokens, boundaries, roll_at = list(state.session.tokens), list(state.boundaries), state.roll_at
        for chunk in state.pending:
            rolled = self.rolled(tokens, boundaries, roll_at, state.keep, len(chunk.tokens))
            if rolled is not None:
                tokens, boundaries, roll_at = rolled
            boundaries.append(len(tokens))
            tokens.extend(chunk.tokens)
        return tokens, boundaries, roll_at

    def discarded(self, state: Stream) -> int:
        """How many of ``state``'s first pending chunks a later roll in the same queue drops before anything
        reads them (SessionBooking.skip_discarded says when a chunk counts); 0 when none."""
        pending = state.pending
        if len(pending) < 3 or not self.rolls_ahead(state):
            return 0  # the common case, checked without copying the token log
        tokens, boundaries, roll_at = list(state.session.tokens), list(state.boundaries), state.roll_at
        skip = 0
        for k, chunk in enumerate(pending):
            if k == len(pending) - 1 or (k and pending[k - 1].checked):
                break  # the last chunk, and every one after a group's end or a due point, is read by queries due there
            rolled = self.rolled(tokens, boundaries, roll_at, state.keep, len(chunk.tokens))
            if rolled is not None:
                tokens, boundaries, roll_at = rolled
                if not chunk.checked:
                    skip = k  # everything before chunk k is gone once it rolls, and nothing reads chunk k alone
            boundaries.append(len(tokens))
            tokens += chunk.tokens
        return skip

    @staticmethod
    def rolls_ahead(state: Stream) -> bool:
        """Whether the queued chunks pass the stream's roll point (reads no more of the queue than the room left)."""
        room = state.roll_at - len(state.session.tokens)
        for chunk in state.pending:
            room -= len(chunk.tokens)
            if room < 0:
                return True
        return False
