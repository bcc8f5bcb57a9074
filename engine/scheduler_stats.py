"""The scheduler's counters: what it did (forwards, rolls, evictions, rebuilds) and what it put off or refused.

One object shared by the scheduler and the helpers that act for it (eviction, planning), so each counts what it
does where it does it; the service shows them in ``stats`` (engine/service/metrics_families.py says what each counts).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class SchedulerStats:
    batches: int = 0
    evictions: int = 0
    evicted_cells: int = 0
    rolls: int = 0
    rebuilt_streams: int = 0  # forwards that recomputed a stream's evicted or restored KV (not a roll's re-prefill)
    refused_streams: int = 0
    deferred: int = 0  # times a stream with pending data could not fit in a batch
    streams_expired: int = 0  # idle streams dropped (stream_idle_s)
    probes_deferred: int = 0  # jobs moved to a later forward by the probe budget
    jobs_done: int = 0
    jobs_failed: int = 0
    late_evictions: int = 0  # plans that needed room past what planning fitted (see plan(); expected 0)
    # queued tokens booked without a forward: a later roll dropped them before any query read them
    skipped_tokens: int = 0
    # rolls after a stream's first chunk in a forward, going on past its roll point (a segment the probe budget hands
    # back whole is not one: its kept tokens are prefilled by a later forward)
    rolls_in_forward: int = 0
