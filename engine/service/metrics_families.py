"""The metric families /metrics exposes from the stats snapshot: each one's stats key, its name and its help
text, a table per part of `stats` (the service's counters and gauges, the scheduler's, the runner's, speculation's,
the process's, the tick and answer logs', the live scores'); every counter is this process's live work, the start's
replay left out (metrics_text.replayed_counts). Their own module so that what a scrape shows, and what each figure
means, reads as one table apart from how it is written out (engine/service/metrics_text.py).
"""

from __future__ import annotations

COUNTERS = {
    "ticks_in": "Ticks accepted since the service began to serve (a restart's replayed ones: log_recovered_ticks)",
    "expired_streams_forgotten": "Expired streams forgotten, ordering guard and all, past "
                                 "scheduler.expired_streams_kept (a later tick of one starts a new stream)",
    "conflated": "Quotes dropped for a newer one of their stream while behind (limits.when_behind: conflate)",
    "duplicates": "Wire ticks dropped because their seq repeats one their stream took (a resend, an A/B line's "
                  "second copy): not rejections",
    "duplicates_restamped": "Of the duplicates, resends restamped: a seq again at a later ts with the kind and "
                            "values it had (an A/B line stamped on its own receive clock), left out as replay does",
    "seq_gaps": "Jumps in a stream's seq past the next number (the ticks were taken; numbers missing: seq_missing)",
    "seq_missing": "Sequence numbers the gaps skipped, all streams together",
    "seq_late": "Sequence numbers a gap skipped that came after all: a late tick (refused as ts_backwards, or taken)",
    "seq_restarts": "Lower seqs taken as a numbering begun again (stamped after the stream's last tick)",
    "repeats_taken": "Ticks without seq taken at their stream's last ts with the last tick's values (a resend taken "
                     "again, or a trade that matched it: send seq to tell)",
    "placing_duplicates": "Ticks left out as sent twice around a feed's placing `streams` (drain, tag): a killed "
                          "feed's read after the reply, and the placed feed's copy of them",
    "answers_published": "Answers published on the PUB socket",
    "ingest_messages": "Ingest messages received",
    "control_requests": "Control requests received",
    "control_errors": "Control requests answered with an error",
    "control_replies_dropped": "Control replies dropped: their client had limits.control_queue_bytes of replies "
                               "unread, or had disconnected",
    "engine_errors": "Engine steps that failed (the service kept serving)",
    "streams_expired": "Idle streams expired (scheduler.stream_idle_s): their KV freed, their context kept",
    "contexts_resumed": "Expired streams that came back onto their kept context (their answers as if never expired)",
    "contexts_given_up": "Kept contexts given up: past scheduler.expired_streams_kept, or `forget` (that stream's "
                         "next answers carry the context_reset caveat)",
    "auth_denied": "CURVE handshakes refused: client key not in curve.clients_dir",
    "auth_allowed": "CURVE handshakes let in: client key in curve.clients_dir (one per connection, a reconnect "
                    "counted again)",
    "auth_errors": "CURVE key checks (ZAP requests) that failed inside the service and were refused for it "
                   "(expected 0: each is a line on stderr)",
    "handshakes_failed": "Connections to CURVE sockets whose handshake failed before a key was checked (a client "
                         "without keys, a peer that is no ZeroMQ client)",
    "descriptors_exhausted": "Heartbeats that found no file descriptor free: new connections are not accepted",
    "answers_out": "Standing answers the engine computed (answers_published counts those sent on the PUB socket)",
    "answer_fetches": "Answers ops served (a subscriber filling a gap from the kept history)",
    "query_errors": "Query jobs that ended in an error, asks included",
    "subscriptions_unmatchable": "Subscriptions longer than any topic (they match nothing; each is said in the log "
                                 "at the first and at each power of two)",
    "heartbeats": "Heartbeats the engine thread sent (limits.heartbeat_s apart while it runs): one that stops rising "
                  "while the service answers scrapes is an engine thread stalled in a long forward, or stuck",
}
GAUGES = {
    "expired_streams_held": "Expired streams whose ordering guard and last seq are kept (at most "
                            "scheduler.expired_streams_kept)",
    "kv_cells_used": "KV cells held by sessions",
    "kv_cells_capacity": "KV pool size in cells",
    "kv_cells_touched": "KV cells up to the highest ever held (their memory is committed)",
    "kv_cell_bytes": "Bytes one KV cell (a token's K and V in every layer) takes",
    "kv_bytes_capacity": "KV pool size in bytes",
    "sessions_resident": "Sessions whose KV is resident",
    "streams": "Streams known",
    "contexts_kept": "Expired streams whose context (tokens, not KV) is kept for their next tick (at most "
                     "scheduler.expired_streams_kept)",
    "pending_tokens": "Tokens waiting for a forward",
    "unread_messages": "Messages waiting unread at the ingest socket, before they are decoded or tokenised (this "
                       "host's kernel buffers for its connections, at the mean size of the last 32 messages read: "
                       "an estimate; Linux, tcp:// only)",
    "unread_bytes": "Bytes this host's kernel holds for the ingest connections, not yet read (Linux, tcp:// only)",
    "behind": "1 while more than limits.max_backlog_tokens wait for a forward, or data waited past limits.max_lag_s",
    "kv_thrash": "1 while evicted sessions are recomputed more than new tokens are (kv.cells too small)",
    "kv_pool_small": "1 while the streams held want more KV cells once their windows fill than kv.cells holds "
                     "(health's kv_pool_small warning: kv_thrash comes once they fill)",
    "clock_ahead_streams": "Streams whose feed's clock runs more than ingest.clock_ahead_warn_ms ahead of this "
                           "machine's (health's clock_ahead warnings name them; their answers carry the caveat)",
    "answers_stale": "1 while a standing query's own streams tick and its newest answer is older than "
                     "limits.max_answer_age_s (health: degraded, stale_queries; /readyz 503)",
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
    "rolls_in_forward": "Rolls after a stream's first chunk in a forward: a stream behind went on past its roll point "
                        "in the same forward, its kept tokens prefilled there (scheduler.roll_inside_forward)",
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
    (("ticks_dropped_unended_message",), "log_ticks_dropped_unended_message", "gauge", "Ticks of messages a kill cut"),
    (("ticks_unended_at_log_end",), "log_ticks_unended_at_log_end", "gauge", "Of those, the last logged message's: "
                                                                              "what the stop before this start cut"),
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
