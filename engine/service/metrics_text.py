"""The stats snapshot as Prometheus text (`render`): a HELP, a TYPE and the samples of each family, in a fixed
order, with only what is known during a start, the counters less what the start's replay counted
(`replayed_counts`), and the lag carried forward to the scrape's time (`lag_now`). The
families' names and help are engine/service/metrics_families.py; the HTTP server that serves this text is
engine/service/metrics.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from connectors.tick_errors import SERVICE_REASONS
from engine.service.ages import age_said
from engine.service.metrics_families import (
    COUNTERS, GAUGES, LIVE_SCORES, LOG_FIGURES, PROCESS_GAUGES, RUNNER_COUNTERS, SCHEDULER_COUNTERS,
    SPECULATION_COUNTERS,
)
from engine.service.metrics_limits import METRICS_MAX_CONNECTIONS, METRICS_REQUEST_TIMEOUT_S


def lag_now(snapshot: dict[str, Any], now: float | None = None) -> float:
    """``lag_s`` carried forward to ``now`` (time.time()): the snapshot's oldest waiting data, taken to wait still,
    has waited the time since the snapshot too. Between heartbeats (seconds apart under load) a scrape then sees the
    lag grow, where it saw a flat figure; 0 stays 0 (nothing waited at the refresh; what came since is not known)."""
    lag = snapshot.get("lag_s", 0.0)
    if not lag or "stats_time" not in snapshot:
        return lag
    return age_said(lag + max(0.0, (time.time() if now is None else now) - snapshot["stats_time"]))


REPLAYED_GROUPS = ("scheduler", "runner", "speculation")  # the maps of stats whose counters a start's replay moves


def replayed_counts(stats: dict[str, Any]) -> dict[str, Any]:
    """The counters of ``stats`` as a start's replay of the tick log left them (taken as the service begins to
    serve, before any live tick): the `_total` families count from them, this process's live work only. With the
    replayed work in them (`stats`' ticks_in, rolls, forwards), a restart with retention brought them down and
    Prometheus read a counter reset and an increase of every tick replayed (review412 #7)."""
    return {**{key: stats[key] for key in COUNTERS if isinstance(stats.get(key), int)},
            **{group: dict(stats.get(group) or {}) for group in REPLAYED_GROUPS}}


def render(snapshot: dict[str, Any], now: float | None = None) -> str:
    """The snapshot as Prometheus text (``now``: the scrape's time.time(), for the lag). One with ``starting`` (the
    start's phase: the service loads its model or replays its tick log) gives only what is known then: serving 0,
    the phase, the process's figures."""
    text = _Text()
    _service_state(text.metric, snapshot)
    if snapshot.get("starting"):
        return text.joined()
    _engine_figures(text.metric, snapshot)
    _waiting(text.metric, snapshot, now)
    _rejections(text.metric, snapshot)
    _loop_and_log(text.metric, snapshot)
    _answers_and_shards(text.metric, snapshot)
    return text.joined()


class _Text:
    """The families rendered so far, in order: a HELP, a TYPE and the samples of each."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(self, name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        self.lines.append(f"# HELP flashtick_{name} {help_text}")
        self.lines.append(f"# TYPE flashtick_{name} {kind}")
        self.lines.extend(f"flashtick_{name}{labels} {value}" for labels, value in samples)

    def joined(self) -> str:
        return "\n".join(self.lines) + "\n"


Metric = Callable[[str, str, str, list[tuple[str, float]]], None]  # _Text.metric


def _service_state(metric: Metric, snapshot: dict[str, Any]) -> None:
    """What is known during a start too: serving, the start's phase, the process's figures, this endpoint's own."""
    starting = snapshot.get("starting")
    shards_down = any(s["state"] != "serving" for s in snapshot.get("shards") or ())
    metric("serving", "gauge", "1 while the service serves (`flashtick health`: serving); 0 while it starts, or "
           "while degraded: its logs cannot be written (flashtick_log_problem), a shard is down, or its answers are "
           "stale (flashtick_answers_stale)",
           [("", int(not starting and not snapshot.get("log_problem") and not shards_down
                     and not snapshot.get("answers_stale")))])
    # the phase without its progress figures ("replaying the tick log", not "...: 4,000 of 9,000 tokens"): a label
    # value that changed with every scrape would make a new series each time
    metric("starting", "gauge", "1 while the service starts, labelled with what it does (loading the model, "
           "replaying the tick log, ...); no sample once it serves",
           [(f'{{phase="{_label(starting.split(":", 1)[0])}"}}', 1)] if starting else [])
    for key, help_text in PROCESS_GAUGES.items():
        if snapshot.get(key) is not None:  # (no such figure here: no sample rather than a false one)
            metric(key, "gauge", help_text, [("", snapshot[key])])
    if "scrapes_abandoned" in snapshot:  # this endpoint's own, counted from the start
        metric("scrapes_abandoned_total", "counter", "Scrapes whose client closed the connection before the reply "
               "was written (a scraper's time-out: the service was slow to answer, or the network)",
               [("", snapshot["scrapes_abandoned"])])
    if "connections_refused" in snapshot:
        metric("metrics_connections_refused_total", "counter", "Connections to this endpoint closed unread because "
               f"{METRICS_MAX_CONNECTIONS} were open already, each past its request (one whose request has not come "
               f"{METRICS_REQUEST_TIMEOUT_S:g} s after its connect is closed)", [("", snapshot["connections_refused"])])
    if "connections_evicted" in snapshot:
        metric("metrics_connections_evicted_total", "counter", f"Connections to this endpoint closed before their "
               f"request had all come, to make room for a new one while {METRICS_MAX_CONNECTIONS} were open (the "
               f"oldest such one each time): clients that connect and send slowly or nothing",
               [("", snapshot["connections_evicted"])])


def _engine_figures(metric: Metric, snapshot: dict[str, Any]) -> None:
    """The engine's counters and gauges, its GEMM kernel cache, the answers a restart owes, the figures' age."""
    replayed = snapshot.get("replayed", {})
    for key, help_text in COUNTERS.items():
        metric(f"{key}_total", "counter", help_text, [("", _since_serving(snapshot.get(key, 0), replayed.get(key, 0)))])
    for key, help_text in GAUGES.items():
        value = snapshot.get(key, 0)
        if value is None:  # (no such figure here: no sample rather than a false one)
            continue
        metric(key, "gauge", help_text, [("", int(value) if isinstance(value, bool) else value)])
    if "gemm_kernels" in snapshot:  # oneDNN's compiled GEMMs (model.kernel_cache): a cache step, not a leak
        metric("gemm_kernels", "gauge", "oneDNN GEMM kernels held compiled, ~0.5 MB each, at most model.kernel_cache "
               "(flashtick_gemm_kernel_cache): RSS steps as it fills", [("", snapshot["gemm_kernels"])])
        metric("gemm_kernel_cache", "gauge", "model.kernel_cache: the most oneDNN GEMM kernels held",
               [("", snapshot["gemm_kernel_cache"])])
        metric("gemm_kernels_compiled_total", "counter", "oneDNN GEMM kernels compiled (one per weight shape and "
               "forward row bucket not held; a compile also evicts the least recently used past the cap)",
               [("", snapshot["gemm_kernels_compiled"])])
    if "owed_ticks" in snapshot:  # one engine's (a --shards front door owes a restart's answers otherwise)
        metric("owed_ticks", "gauge", "Ticks a restart owes answers for (logged but not computed before the stop) "
               "still to compute: 0 once it has caught up", [("", snapshot["owed_ticks"])])
    if "stats_time" in snapshot:
        metric("stats_timestamp_seconds", "gauge", "When the engine thread last refreshed the figures here (each "
               "heartbeat, each `stats` request), in seconds since the Unix epoch: time() minus it is their age",
               [("", round(snapshot["stats_time"], 3))])


def _waiting(metric: Metric, snapshot: dict[str, Any], now: float | None) -> None:
    """The lag as of the scrape, and the streams whose data has waited longest."""
    metric("lag_seconds", "gauge", "Seconds the oldest data not yet computed has waited, as of this scrape: accepted, "
           "or unread in the ingest queue (limits.max_lag_s); the data waiting at the last refresh is taken to wait "
           "still (an upper bound: lower if it was computed since; 0 when nothing waited then)",
           [("", lag_now(snapshot, now))])
    if snapshot.get("answer_age_s") is not None:
        metric("answer_age_seconds", "gauge", "Seconds since the newest answer was published, as of the last refresh "
               "(no sample before the first; limits.max_answer_age_s bounds it while ticks arrive)",
               [("", snapshot["answer_age_s"])])
    if snapshot.get("tick_age_s") is not None:
        metric("tick_age_seconds", "gauge", "Seconds since ticks were last accepted, as of the last refresh (to the "
               "heartbeat; no sample before the first tick of this run)", [("", snapshot["tick_age_s"])])
    # the few streams behind the longest, by name (at most LONGEST_WAITING_SAID series at a time: no per-stream
    # family for thousands of streams), so an alert says which names are late, not only that something is
    waiting = snapshot.get("longest_waiting") or {}
    metric("stream_waiting_seconds", "gauge", "Of the streams whose oldest data waiting for a forward has waited "
           "longest (stats longest_waiting, 5 at most), how long it has, as of the last refresh; none while nothing "
           "waits (`flashtick streams` says every stream's)",
           [(f'{{stream="{_label(name)}"}}', w["waiting_s"]) for name, w in waiting.items()])
    metric("stream_waiting_ticks", "gauge", "Of the same streams, the ticks waiting for a forward",
           [(f'{{stream="{_label(name)}"}}', w["waiting_ticks"]) for name, w in waiting.items()])


def _rejections(metric: Metric, snapshot: dict[str, Any]) -> None:
    """Ticks rejected, by reason and by stream, and what the reorder window holds and placed."""
    # every reason a service counts, 0 until its first (review392 #4): Prometheus' increase() counts no series'
    # appearance, so an alert on a reason first seen between two scrapes never fired
    rejected = dict.fromkeys(SERVICE_REASONS, 0) | snapshot.get("rejected", {})
    metric("rejected_total", "counter", "Ticks or messages rejected, by reason",
           [(f'{{reason="{r}"}}', n) for r, n in sorted(rejected.items())])
    by_stream = snapshot.get("rejected_streams") or {}  # the most refused streams, the rest as _other: bounded
    metric("rejected_by_stream_total", "counter", "Ticks rejected, by stream and reason: the 10 streams refused most "
           "(stats rejected_streams), every other stream's summed under stream=\"_other\"; a stream entering the 10 "
           "comes as a series already counted, so alert on rejected_total and read the streams here",
           [(f'{{stream="{_label(stream)}",reason="{r}"}}', n) for stream, reasons in by_stream.items()
            for r, n in sorted(reasons.items())])
    if "reorder" in snapshot:  # ingest.reorder_window_ms
        metric("reorder_held_ticks", "gauge", "Ticks held by ingest.reorder_window_ms, not yet released to the engine",
               [("", snapshot["reorder"]["held"])])
        metric("late_ticks_placed_total", "counter", "Ticks read after a newer one of their stream and placed before "
               "it by ingest.reorder_window_ms (refused as ts_backwards without it)",
               [("", snapshot["reorder"]["placed"])])


def _loop_and_log(metric: Metric, snapshot: dict[str, Any]) -> None:
    """The scheduler's, runner's and speculation's counters, and the data directory's logs."""
    for group, prefix, counters in (("scheduler", "", SCHEDULER_COUNTERS), ("runner", "", RUNNER_COUNTERS),
                                    ("speculation", "speculation_", SPECULATION_COUNTERS)):
        replayed = snapshot.get("replayed", {}).get(group, {})
        for key, help_text in counters.items():
            metric(f"{prefix}{key}_total", "counter", help_text,
                   [("", _since_serving(snapshot.get(group, {}).get(key, 0), replayed.get(key, 0)))])
    log = snapshot.get("log")
    if isinstance(log, dict):
        metric("log_problem", "gauge", "1 while ticks are refused (log_unavailable) because the data directory's logs "
               "cannot be written (a full disk, a file size limit, a removed directory): `flashtick health` says "
               "degraded and why", [("", int(bool(snapshot.get("log_problem"))))])
        for path, name, kind, help_text in LOG_FIGURES:
            value: Any = log
            for key in path:
                value = value.get(key, 0) if isinstance(value, dict) else 0
            metric(name, kind, help_text, [("", value)])


def _answers_and_shards(metric: Metric, snapshot: dict[str, Any]) -> None:
    """Live scores per query, each shard's state, and the answers' freshness and data age quantiles."""
    scores = snapshot.get("scores", {})  # live scores per query (engine/service/live_scores.py)
    for key, name, kind, help_text in LIVE_SCORES:
        metric(name, kind, help_text, [(f'{{query="{_label(query)}"}}', s[key]) for query, s in sorted(scores.items())
                                       if s.get(key) is not None])
    shards = snapshot.get("shards")  # with --shards: each shard's state and restarts, so an outage can alert
    if shards:
        metric("shard_serving", "gauge", "1 while the shard serves; 0 while it is restored after a loss, or failed",
               [(f'{{shard="{_label(s["name"])}"}}', int(s["state"] == "serving")) for s in shards])
        metric("shard_restarts_total", "counter", "Times the shard was lost and restored from the tick log",
               [(f'{{shard="{_label(s["name"])}"}}', s["restarts"]) for s in shards])
        metric("shard_resident_memory_bytes", "gauge", "Resident memory (RSS) of the shard's process, as of its last "
               "reply", [(f'{{shard="{_label(s["name"])}"}}', s["resident_memory_bytes"]) for s in shards
                         if s.get("resident_memory_bytes") is not None])
        if snapshot.get("shards_resident_memory_bytes") is not None:  # (alert on it beside the front door's own)
            metric("shards_resident_memory_bytes", "gauge", "Resident memory (RSS) of every shard's process together "
                   "(process_resident_memory_bytes is the front door's alone)",
                   [("", snapshot["shards_resident_memory_bytes"])])
    quantile_families = (
        ("freshness_ms", "answer_freshness_ms", "Tick read off the ingest socket to answer cached, over the last "
                                                "10,000 published answers (not a time window: kept when answers stop)"),
        ("data_age_ms", "answer_data_age_ms", "Answered tick's own ts to answer cached, over the last 10,000 published "
                                              "answers (negative: ts ahead of this clock)"))
    for key, name, help_text in quantile_families:
        quantiles = snapshot.get(key, {})
        metric(name, "gauge", help_text,
               [(f'{{quantile="{q}"}}', quantiles[k]) for q, k in (("0.5", "p50"), ("0.99", "p99")) if k in quantiles])


def _since_serving(count: int, replayed: int) -> int:
    # (never below 0: with --shards a shard restored mid-run counts from its own replay again, below the baseline)
    return max(0, count - replayed)


def _label(value: str) -> str:
    """A Prometheus label value: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
