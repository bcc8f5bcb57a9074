"""Prometheus text exposition of the service's counters, served from a snapshot.

The engine thread refreshes the snapshot (each heartbeat); the HTTP thread only
reads that dict, so a scrape never touches live engine state.
"""

from __future__ import annotations

import io
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from connectors.tcp_endpoints import is_ipv6_address

COUNTERS = {
    "ticks_in": "Ticks accepted",
    "conflated": "Quotes dropped for a newer one of their stream while behind (limits.when_behind: conflate)",
    "answers_published": "Answers published on the PUB socket",
    "ingest_messages": "Ingest messages received",
    "control_requests": "Control requests received",
    "control_errors": "Control requests answered with an error",
    "control_replies_dropped": "Control replies dropped: their client had limits.control_queue_bytes of replies "
                               "unread, or had disconnected",
    "engine_errors": "Engine steps that failed (the service kept serving)",
    "streams_expired": "Idle streams dropped (scheduler.stream_idle_s)",
    "auth_denied": "CURVE handshakes refused: client key not in curve.clients_dir",
    "handshakes_failed": "Connections to CURVE sockets whose handshake failed before a key was checked (a client "
                         "without keys, a peer that is no ZeroMQ client)",
    "answers_out": "Standing answers the engine computed (answers_published counts those sent on the PUB socket)",
    "answer_fetches": "Answers ops served (a subscriber filling a gap from the kept history)",
    "query_errors": "Query jobs that ended in an error, asks included",
    "heartbeats": "Heartbeats the engine thread sent (limits.heartbeat_s apart while it runs): one that stops rising "
                  "while the service answers scrapes is an engine thread stalled in a long forward, or stuck",
}
GAUGES = {
    "kv_cells_used": "KV cells held by sessions",
    "kv_cells_capacity": "KV pool size in cells",
    "kv_cell_bytes": "Bytes one KV cell (a token's K and V in every layer) takes",
    "kv_bytes_capacity": "KV pool size in bytes",
    "sessions_resident": "Sessions whose KV is resident",
    "streams": "Streams known",
    "pending_tokens": "Tokens waiting for a forward",
    "behind": "1 while more than limits.max_backlog_tokens wait for a forward, or data waited past limits.max_lag_s",
    "kv_thrash": "1 while evicted sessions are recomputed more than new tokens are (kv.cells too small)",
    "queries": "Registered queries",
    "subscriptions": "Distinct subscriptions the answer socket's subscribers hold (libzmq keeps each in memory, "
                     "about 46 bytes a byte, until its subscribers disconnect)",
    "subscription_bytes": "Bytes of those subscriptions",
}
SCHEDULER_COUNTERS = {  # engine/scheduler_stats.py's SchedulerStats: what each counts, not its name again
    "evictions": "Sessions whose KV was evicted to make room in the KV pool (recomputed when their stream next "
                 "ticks or is asked)",
    "evicted_cells": "KV cells those evictions freed",
    "rebuilt_streams": "Streams whose evicted or restored KV was recomputed, once per rebuild (a context roll's "
                       "re-prefill is counted in rolls)",
    "rolls": "Context rolls: a session at its window (scheduler.window) kept its sink and most recent tokens and "
             "recomputed them",
    "refused_streams": "Ticks refused because their stream could not be admitted (scheduler.max_streams, "
                       "when_full: refuse): one per tick, not per stream",
    "deferred": "Times a stream with data waiting was left out of a forward for want of room in the KV pool (it "
                "goes in a later one)",
    "batches": "Forwards the scheduler planned and committed: each engine step's one batch of tick advances and "
               "query probes (restore rebuilds not included)",
    "probes_deferred": "Times query probes were put off to a later forward: past scheduler.max_probe_tokens, or no "
                       "room in the KV pool",
    "jobs_done": "Query jobs finished: standing answers computed, asks answered by a forward, idle work "
                 "(answers decoded ahead, audits), each once",
    "jobs_failed": "Query jobs that failed: their probe would pass the model's positions (scheduler.probe_reserve)",
    "skipped_tokens": "Queued tokens never computed: a later roll of their stream, before the end of their tick "
                      "group, dropped them from the window",
    "late_evictions": "Forwards that needed KV room past what their planning fitted, evicting then (expected 0)",
}
RUNNER_COUNTERS = {  # engine/runner.py's RunnerStats
    "forwards": "Forward passes the model ran (many streams in one), restore rebuilds included",
    "tokens_advanced": "Ticks' new tokens computed into sessions (not recomputed ones, not probes)",
    "tokens_rebuilt": "Tokens recomputed: KV evicted or restored, and the tokens a context roll keeps (more than "
                      "tokens_advanced without rolls: kv.cells is too small, see kv_thrash)",
    "tokens_probed": "Query probe tokens computed (questions evaluated against a session, not kept in it)",
}
SPECULATION_COUNTERS = {  # queries/flash.py's FlashStats (stats.speculation), as speculation_<key>_total
    "drafted": "Prompt-lookup draft tokens proposed",
    "decode_forwards": "Generate steps: forwards that decoded",
    "prepositioned": "Generate answers decoded ahead of an ask",
    "preposition_hits": "Asks answered by an answer decoded ahead (the stream had not moved)",
    "gate_asks": "Asks on gated queries",
    "gate_audited": "Gated answers recomputed at idle priority",
}
PROCESS_GAUGES = {  # known from the start, before the model loads
    "process_start_time_seconds": "Start time of the service process since the Unix epoch, in seconds (as "
                                  "process_start_time_seconds of Prometheus client libraries)",
    "process_resident_memory_bytes": "Resident memory of the service process (RSS)",
}
LOG_FIGURES = (  # (stats path under `log`, metric, type, help): with a data directory; every number `stats.log` has
    (("appended",), "log_appended_total", "counter", "Tick log records appended"),
    (("append_errors",), "log_append_errors_total", "counter", "Tick log writes that failed, each refused tick's "
                                                               "(ticks refused while the answer log fails are "
                                                               "counted in rejected_total only)"),
    (("fsyncs",), "log_fsyncs_total", "counter", "Tick log fsyncs"),
    (("segments_dropped",), "log_segments_dropped_total", "counter", "Tick log segments dropped by retention"),
    (("ticks_dropped_by_retention",), "log_ticks_dropped_by_retention_total", "counter",
     "Ticks the tick log segments retention dropped held, since the log began (a restart no longer recovers them)"),
    (("torn_tails",), "log_torn_tails_total", "counter", "Damaged tick log ends truncated on read"),
    (("corrupt_skipped",), "log_corrupt_skipped_total", "counter", "Damaged tick log regions skipped "
                                                                   "(log.skip_corrupt)"),
    (("corrupt_records",), "log_corrupt_records_total", "counter", "Tick log records that began in the damaged "
                                                                   "regions skipped (about)"),
    (("recovered_ticks",), "log_recovered_ticks", "gauge", "Ticks this start recovered from the tick log"),
    (("replay_refused",), "log_replay_refused", "gauge", "Logged items this start's replay refused (a limit "
                                                         "lowered since they were logged)"),
    (("recovered_answers",), "log_recovered_answers", "gauge", "Answers this start recovered from the answer log"),
    (("recovery_s",), "log_recovery_seconds", "gauge", "Seconds this start took to replay the logs"),
    (("rebuild_forwards",), "log_rebuild_forwards", "gauge", "Forwards this start ran to recompute the sessions"),
    (("damaged_files",), "log_damaged_files", "gauge",
     "Damaged copies kept beside the tick and answer logs (a log.skip_corrupt repair's originals, a torn tail's cut "
     "bytes)"),
    (("damaged_bytes",), "log_damaged_bytes", "gauge", "Bytes of those damaged files"),
    (("answers", "appended"), "answer_log_appended_total", "counter", "Answer log records appended"),
    (("answers", "errors"), "answer_log_errors_total", "counter", "Answer log writes that failed, each retry of a "
                                                                 "waiting answer too (every second while the log "
                                                                 "fails; the answers were published)"),
    (("answers", "unlogged"), "answer_log_unlogged", "gauge", "Published answers waiting for the answer log to "
                                                             "take them"),
    (("answers", "fsyncs"), "answer_log_fsyncs_total", "counter", "Answer log fsyncs"),
    (("answers", "segments_dropped"), "answer_log_segments_dropped_total", "counter",
     "Answer log segments dropped by retention"),
    (("answers", "torn_tails"), "answer_log_torn_tails_total", "counter", "Damaged answer log ends truncated on read"),
    (("answers", "corrupt_skipped"), "answer_log_corrupt_skipped_total", "counter",
     "Damaged answer log regions skipped"),
)
LIVE_SCORES = (  # (stats key, metric, type, help), one sample per query
    ("scored", "live_scored_total", "counter", "Published answers scored against the realised answer, since the "
                                               "query was registered (replacing it starts again at 0)"),
    ("accuracy", "live_accuracy", "gauge", "Share of scored answers whose most likely label was realised"),
    ("brier", "live_brier", "gauge", "Mean Brier score of the scored answers"),
    ("prior_brier", "live_prior_brier", "gauge", "Mean Brier score of the stream's class frequencies so far "
                                                 "(add-one smoothed)"),
    ("majority_accuracy", "live_majority_accuracy", "gauge", "Accuracy of guessing the stream's most frequent label so "
                                                           "far (a tie: a share)"),
    ("model_accuracy", "live_model_accuracy", "gauge", "Accuracy of the model's own answers before adaptation"),
    ("model_brier", "live_model_brier", "gauge", "Mean Brier score of the model's own answers before adaptation"),
)


def process_start_time() -> float | None:
    """When this process started, in seconds since the Unix epoch, from /proc (Linux): the boot time plus the
    process's start in clock ticks since boot, as Prometheus client libraries read it; None where there is none."""
    try:
        with open("/proc/self/stat") as f:  # the command name in parentheses may hold spaces: fields after it
            since_boot = int(f.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
        return boot + since_boot
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def lag_now(snapshot: dict[str, Any], now: float | None = None) -> float:
    """``lag_s`` carried forward to ``now`` (time.time()): the snapshot's oldest waiting data, taken to wait still,
    has waited the time since the snapshot too. Between heartbeats (seconds apart under load) a scrape then sees the
    lag grow, where it saw a flat figure; 0 stays 0 (nothing waited at the refresh; what came since is not known)."""
    lag = snapshot.get("lag_s", 0.0)
    if not lag or "stats_time" not in snapshot:
        return lag
    return round(lag + max(0.0, (time.time() if now is None else now) - snapshot["stats_time"]), 3)


def render(snapshot: dict[str, Any], now: float | None = None) -> str:
    """The snapshot as Prometheus text (``now``: the scrape's time.time(), for the lag). One with ``starting`` (the
    start's phase: the service loads its model or replays its tick log) gives only what is known then: serving 0,
    the phase, the process's figures."""
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP flashtick_{name} {help_text}")
        lines.append(f"# TYPE flashtick_{name} {kind}")
        lines.extend(f"flashtick_{name}{labels} {value}" for labels, value in samples)

    starting = snapshot.get("starting")
    shards_down = any(s["state"] != "serving" for s in snapshot.get("shards") or ())
    metric("serving", "gauge", "1 while the service serves (`flashtick health`: serving); 0 while it starts, or "
           "while degraded: its logs cannot be written (flashtick_log_problem) or a shard is down",
           [("", int(not starting and not snapshot.get("log_problem") and not shards_down))])
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
    if starting:
        return "\n".join(lines) + "\n"
    for key, help_text in COUNTERS.items():
        metric(f"{key}_total", "counter", help_text, [("", snapshot.get(key, 0))])
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
    metric("lag_seconds", "gauge", "Seconds the oldest data not yet computed has waited, as of this scrape: accepted, "
           "or unread in the ingest queue (limits.max_lag_s); the data waiting at the last refresh is taken to wait "
           "still (an upper bound: lower if it was computed since; 0 when nothing waited then)", [("", lag_now(snapshot, now))])
    rejected = snapshot.get("rejected", {})
    metric("rejected_total", "counter", "Ticks or messages rejected, by reason",
           [(f'{{reason="{r}"}}', n) for r, n in sorted(rejected.items())])  # none yet: no sample (no fake reason)
    for group, prefix, counters in (("scheduler", "", SCHEDULER_COUNTERS), ("runner", "", RUNNER_COUNTERS),
                                    ("speculation", "speculation_", SPECULATION_COUNTERS)):
        for key, help_text in counters.items():
            metric(f"{prefix}{key}_total", "counter", help_text, [("", snapshot.get(group, {}).get(key, 0))])
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
    quantile_families = (
        ("freshness_ms", "answer_freshness_ms", "Tick read off the ingest socket to answer cached, over the last "
                                                "10,000 published answers (not a time window: kept when answers stop)"),
        ("data_age_ms", "answer_data_age_ms", "Answered tick's own ts to answer cached, over the last 10,000 published "
                                              "answers (negative: ts ahead of this clock)"))
    for key, name, help_text in quantile_families:
        quantiles = snapshot.get(key, {})
        metric(name, "gauge", help_text,
               [(f'{{quantile="{q}"}}', quantiles[k]) for q, k in (("0.5", "p50"), ("0.99", "p99")) if k in quantiles])
    return "\n".join(lines) + "\n"


def _label(value: str) -> str:
    """A Prometheus label value: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


METRICS_POLL_S = 0.1  # a stop's shutdown() waits for the serving thread's next poll (http.server's default: 0.5 s)
# Each connection holds a thread while it is open: a client that opens many and sends nothing (or a byte at a time)
# would hold hundreds of threads and descriptors. A scraper sends its request at once and the reply is small, so a
# connection whose whole request has not come this long after its accept is closed (a deadline, not a time-out per
# read: one byte every 2 s held a connection for ever), and past this many open at once the oldest one still
# sending its request is closed to make room for a new one (counted), so a scrape gets in while they trickle
METRICS_REQUEST_TIMEOUT_S = 5.0
METRICS_MAX_CONNECTIONS = 16


# a scraper that gives up (Prometheus at its scrape_timeout, `curl -m`) closes the connection, often with a reset,
# before the reply is written: normal, not the service's fault, and no news for its log
CLIENT_GONE_ERRORS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class _Connection:
    """An open connection: when it was accepted, and whether its request is still coming (only such a one is closed
    to make room: a reply being written finishes on its own)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.deadline = time.monotonic() + METRICS_REQUEST_TIMEOUT_S
        self.reading = True
        self.evicted = False


class _RequestReader(io.RawIOBase):
    """A connection's reads of its request, all before its deadline; none once the server closed it for room."""

    def __init__(self, connection: _Connection) -> None:
        self.connection = connection

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self.connection.deadline - time.monotonic()
        if left <= 0 or self.connection.evicted:  # (TimeoutError: http.server closes the connection, unanswered)
            raise TimeoutError("the request did not come in time, or the connection was closed to make room")
        self.connection.sock.settimeout(left)
        received = self.connection.sock.recv_into(buffer)
        if self.connection.evicted:
            raise TimeoutError("the connection was closed to make room for a new one")
        return received


class MetricsHTTPServer(ThreadingHTTPServer):
    """The /metrics server: a scrape its client gave up on is counted (``scrapes_abandoned``), not logged; any other
    error in a request is one line on stderr, not socketserver's traceback. At most METRICS_MAX_CONNECTIONS are
    served at once: past them the oldest one still sending its request is closed for a new one (counted in
    ``connections_evicted``), or, when every open one has sent its request, the new one is closed unread (counted in
    ``connections_refused``)."""

    scrapes_abandoned = 0  # (+= on several request threads: a count that may miss one is good enough here)
    connections_refused = 0  # (only the serving thread adds to these two)
    connections_evicted = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open_lock = threading.Lock()
        self._open: dict[Any, _Connection] = {}  # request socket -> its connection, until its thread ends

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            if sum(not c.evicted for c in self._open.values()) >= METRICS_MAX_CONNECTIONS and not self._evict_one():
                self.connections_refused += 1
                self.shutdown_request(request)
                return
            self._open[request] = _Connection(request)
        try:
            super().process_request(request, client_address)
        except BaseException:  # (no thread started: nothing else lets the connection go)
            with self._open_lock:
                self._open.pop(request, None)
            raise

    def _evict_one(self) -> bool:
        """Close the oldest connection still sending its request (under ``_open_lock``); False when there is none."""
        waiting = [c for c in self._open.values() if c.reading and not c.evicted]
        if not waiting:
            return False
        oldest = min(waiting, key=lambda c: c.deadline)
        oldest.evicted = True
        self.connections_evicted += 1
        try:
            oldest.sock.shutdown(socket.SHUT_RDWR)  # its thread's read returns now; the thread closes it
        except OSError:
            pass
        return True

    def connection_of(self, request: Any) -> _Connection:
        with self._open_lock:
            return self._open[request]

    def request_read(self, request: Any) -> bool:
        """The request on ``request`` is read: it is no longer closed for room. False if it was closed already."""
        with self._open_lock:
            connection = self._open[request]
            connection.reading = False
            return not connection.evicted

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open.pop(request, None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, CLIENT_GONE_ERRORS):
            self.scrapes_abandoned += 1
            return
        print(f"flashtick: metrics: a request from {client_address[0]}:{client_address[1]} failed: "
              f"{type(error).__name__}: {error}", file=sys.stderr, flush=True)


class MetricsHTTPServer6(MetricsHTTPServer):
    """The /metrics server on an IPv6 host (endpoints.metrics_host `::1` or `::`)."""

    address_family = socket.AF_INET6


def start_metrics_server(host: str, port: int, snapshot: Callable[[], dict[str, Any]]) -> MetricsHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        timeout = METRICS_REQUEST_TIMEOUT_S  # each write's; the request's reads have one deadline (_RequestReader)

        def setup(self) -> None:
            super().setup()
            self.rfile = io.BufferedReader(_RequestReader(server.connection_of(self.request)))

        def do_GET(self, head: bool = False) -> None:  # noqa: N802 (http.server's naming)
            if not server.request_read(self.request):  # closed for room as its last byte came: no reply
                self.close_connection = True
                return
            self.connection.settimeout(self.timeout)
            if self.path.split("?", 1)[0].rstrip("/") != "/metrics":  # a scraper's ?query parameters are ignored
                self.send_error(404, "only /metrics is served")
                return
            body = render({**snapshot(), "scrapes_abandoned": server.scrapes_abandoned,
                           "connections_refused": server.connections_refused,
                           "connections_evicted": server.connections_evicted}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)

        def do_HEAD(self) -> None:  # noqa: N802 (health checkers probe with HEAD)
            self.do_GET(head=True)

        def log_message(self, *args: Any) -> None:  # quiet: scrapes are not news
            pass

    # an IPv6 host (`::1`, `::`: every address, IPv4 ones too where the kernel maps them) needs an IPv6 socket
    server = (MetricsHTTPServer6 if is_ipv6_address(host) else MetricsHTTPServer)((host, port), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": METRICS_POLL_S}, name="flashtick-metrics",
                     daemon=True).start()
    return server
