"""A tick stamped ahead of the service's clock (review376 #1): one an hour ahead was accepted (within a day), gave its
stream's answers a negative `data_age_ms` that passed any freshness gate, and then refused the real feed for the hour,
while `ask` and `get` replies carried no caveat. Now `limits.max_ts_ahead_s` (10 s) refuses it to its sender, the
stream goes on, and a tick within the bound gives answers whose age is never negative (counted from the earliest
the tick can have come) and that carry a `clock_ahead` caveat, published, asked and got alike. Real sockets on
127.0.0.1, the seeded tiny tick model."""

from __future__ import annotations

import time
import urllib.request

import msgpack

from engine.quoting import quoted
from engine.service.clock_offsets import load_offsets, save_offsets
from engine.service.log_levels import leveled
from engine.service.receive_clock import ReceiveClock
from wire_client import fresh_stream, held_of, trade, wait_stats
from wire_server import clients, server  # noqa: F401 (fixtures)

HOUR_NS = 3600 * 10**9


def test_a_tick_an_hour_ahead_is_refused_to_its_sender_and_the_real_feed_goes_on(clients) -> None:
    control, sub, push = clients
    ctl, answers, rejects = control(), sub("dir/"), sub("_rejects/edge1/")
    stream = fresh_stream("EDGE")
    feed = push()
    now = time.time_ns()
    before = ctl.ok("stats")["stats"]
    for seq, ts in ((1, now), (2, now + HOUR_NS), (3, now + 1000)):
        feed.send_multipart([b"edge1", msgpack.packb(trade(stream, ts, seq=seq))])
    got = rejects.until(lambda g: any(p.get("stream") == stream for _, p in g))
    refused = [p for _, p in got if p.get("stream") == stream]
    assert [(p["index"], p["reason"]) for p in refused] == [(0, "ts_in_future")], refused  # (on _rejects/edge1/)
    assert "limits.max_ts_ahead_s allows 10 s" in refused[0]["error"]
    after = wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 2)
    assert after["rejected"].get("ts_backwards", 0) == before["rejected"].get("ts_backwards", 0)
    held = held_of(ctl, stream)
    # seq 2 was received and refused, not lost: no gap (review376 #10)
    assert (held["ticks"], held["last_ts"], held["last_seq"], held["seq_gaps"]) == (2, now + 1000, 3, 0), held
    published = answers.until(lambda g: any(p["stream"] == stream and p["version"] == 2 for _, p in g))
    assert all(p["data_age_ms"] >= 0 for _, p in published if p["stream"] == stream)
    # the answers say which of the feed's ticks they cover: the refused one is counted in no version
    assert [(p["version"], p["tick_seq"]) for _, p in published if p["stream"] == stream] == [(1, 1), (2, 3)]


def test_a_tick_ahead_within_the_bound_is_never_younger_than_zero_and_says_the_clock_is_ahead(server, clients,
                                                                                              capsys) -> None:
    control, sub, push = clients
    ctl, answers = control(), sub("dir/")
    stream, honest = fresh_stream("AHEAD"), fresh_stream("ONTIME")
    feed = push()
    ahead = time.time_ns() + 8 * 10**9  # within limits.max_ts_ahead_s, past ingest.clock_ahead_warn_ms
    feed.send(msgpack.packb([trade(stream, ahead), trade(honest, time.time_ns())]))
    got = answers.until(lambda g: {p["stream"] for _, p in g} >= {stream, honest})
    published = {p["stream"]: p for _, p in got}
    assert published[stream]["data_age_ms"] >= 0 and published[stream]["clock_offset_ms"] < -1000
    assert [c["kind"] for c in published[stream]["caveats"]] == ["clock_ahead"], published[stream]
    assert "ahead of this machine's clock" in published[stream]["caveats"][0]["text"]
    assert "caveats" not in published[honest] and published[honest]["data_age_ms"] >= 0
    # never younger than the answer: counted from the earliest the tick can have come (ts less the stream's lead,
    # -clock_offset_ms), so at least from its read to the answer's computing, where the plain ts gave below 0
    answer = published[stream]
    assert answer["data_age_ms"] >= (answer["answer_ts"] - answer["data_ts"]) / 1e6 - answer["clock_offset_ms"] - 0.01
    assert published[honest]["data_age_ms"] >= (published[honest]["answer_ts"] - published[honest]["data_ts"]) / 1e6
    for reply in (ctl.ok("ask", stream=stream, query="dir", max_stale_ticks=5),
                  ctl.ok("ask", stream=stream, query="dir"), ctl.ok("get", stream=stream, query="dir")):
        assert reply["data_age_ms"] >= 0, reply
        assert [c["kind"] for c in reply["caveats"]] == ["clock_ahead"], reply
    for reply in (ctl.ok("ask", stream=honest, query="dir", max_stale_ticks=5),
                  ctl.ok("get", stream=honest, query="dir")):
        assert reply["data_age_ms"] >= 0 and reply["caveats"] == [], reply
    # review412 #8: said in the log too (`event: feed_clock`), and counted on /metrics, not only in `health`
    said, deadline = "", time.monotonic() + 60
    while "flashtick: clock ahead: " not in said and time.monotonic() < deadline:
        said += capsys.readouterr().err
        time.sleep(0.02)
    line = next(line for line in said.splitlines() if line.startswith("flashtick: clock ahead: "))
    assert line.startswith(f"flashtick: clock ahead: stream {quoted(stream)} is stamped ") and \
        leveled(line)[1:3] == ("WARNING", "feed_clock"), line
    assert ctl.ok("stats")["stats"]["clock_ahead_streams"] == 1
    scraped = urllib.request.urlopen(server["metrics"], timeout=60).read().decode()
    assert "\nflashtick_clock_ahead_streams 1\n" in scraped and "\nflashtick_kv_pool_small 0\n" in scraped


def test_one_stamp_ahead_is_forgotten_two_windows_on_and_a_backlog_within_a_window_still_reads_as_lag(
        tmp_path) -> None:
    """review411 #4: the offset was the smallest read time - ts ever seen, so one tick 9 s ahead (within the bound)
    made every later answer of its stream 9 s too old and `clock_ahead` for the stream's life, kept across restarts.
    Now it is the smallest of the last two windows of read time with ticks."""
    clock, ms = ReceiveClock(), 10**6
    window = clock.window_ns
    start = 1_800_000_000 * 10**9 // window * window  # a window's first ns
    clock.accepted("AHX", start + 9000 * ms, start)  # one stamp 9 s ahead, then the true clock, 2 ms of wire
    clock.accepted("AHX", start + 1000 * ms, start + 1002 * ms)
    clock.accepted("LATE", start, start + 2 * ms)
    assert clock.offset_ns("AHX") == -9000 * ms and clock.most_ahead(250 * ms, 10) == {"AHX": -9000 * ms}
    # a backlog waiting upstream for most of a window, read in the next one: still lag, not clock offset
    behind, stamped = start + window + 60_000 * ms, start + 120_000 * ms  # (4 minutes late)
    assert clock.received_ns("LATE", stamped, behind) == stamped + 2 * ms
    clock.accepted("AHX", behind, behind + 2 * ms)
    assert clock.offset_ns("AHX") == -9000 * ms  # (the last window's smallest still holds)
    clock.accepted("AHX", behind + window, behind + window + 2 * ms)
    assert clock.offset_ns("AHX") == 2 * ms and clock.most_ahead(250 * ms, 10) == {}
    # a clean stop keeps it; once restored, a stray stamp kept is forgotten as one read now is
    save_offsets(tmp_path, clock)
    again = ReceiveClock()
    assert load_offsets(tmp_path, again) == 2 and again.offset_ns("AHX") == 2 * ms
    (tmp_path / "clock_offsets.json").write_text('{"AHX": -9000000000}')
    load_offsets(tmp_path, again := ReceiveClock())
    for read in (behind, behind + window):
        assert again.offset_ns("AHX") == -9000 * ms
        again.accepted("AHX", read, read + 2 * ms)
    assert again.offset_ns("AHX") == 2 * ms
