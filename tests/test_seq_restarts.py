"""A `seq` that goes back (review376 #2, #3, #10): a feed handler whose counter starts again at 1 had every tick
dropped as a duplicate for an hour, silently, though stamped after all the stream had; a late tick carrying `seq`
was dropped silently and counted as a duplicate and a gap, where the same tick without `seq` was refused as
`ts_backwards` to its sender; a tick refused as `ts_backwards` left a gap in the numbers. review383 #2: the same
`seq` again later with the same values (an A/B line stamped on its own receive clock) was taken twice as a
numbering begun again, where file replay's `sequence` leaves it out as a restamped resend. Real servers on
127.0.0.1 ephemeral ports, raw pyzmq and msgpack clients (wire_client.py)."""

from __future__ import annotations

import urllib.request

import msgpack

from connectors.sequence_watch import RESTAMPED_NS
from connectors.tick_sequences import TickSequences
from connectors.ticks import validate
from engine.service.cli import main
from wire_client import T0, fresh_stream, held_of, quote, stats, trade, wait_stats
from wire_server import clients, server  # noqa: F401 (fixtures)

MS = 1_000_000


def test_a_feed_handler_whose_seq_starts_again_at_one_has_its_later_ticks_taken_and_said(clients, capsys) -> None:
    control, sub, push = clients
    ctl, answers = control(), sub("dir/")
    stream = fresh_stream("SEQR")
    feed = push()
    before = stats(ctl)
    first = [trade(stream, T0 + k * MS, 100.0 + k * 0.01, seq=1 + k) for k in range(10)]
    again = [trade(stream, T0 + (20 + k) * MS, 101.0 + k * 0.01, seq=1 + k) for k in range(10)]  # stamped later
    for tick in first + again:
        feed.send_multipart([b"handler-1", msgpack.packb(tick)])
    after = wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 20)
    assert after["duplicates"] == before["duplicates"] and after["rejected"] == before["rejected"]
    assert after["seq_restarts"] - before["seq_restarts"] == 1 and after["seq_gaps"] == before["seq_gaps"]
    held = held_of(ctl, stream)
    assert (held["ticks"], held["last_seq"], held["seq_restarts"], held["duplicates"]) == (20, 10, 1, 0), held
    assert f'stream "{stream}": its seq went back, 10 -> 1, on a tick stamped after its last one' \
        in capsys.readouterr().err
    got = answers.until(lambda g: any(p["stream"] == stream and p["version"] == 20 for _, p in g))
    assert [p["version"] for _, p in got if p["stream"] == stream] == list(range(1, 21))
    # each answer says which of the publisher's ticks it covers (review376 #7): its version counts the ticks taken
    assert [p["tick_seq"] for _, p in got if p["stream"] == stream] == [*range(1, 11), *range(1, 11)]
    assert ctl.ok("get", stream=stream, query="dir")["answer"]["tick_seq"] == 10
    asked = ctl.ok("ask", stream=stream, query="dir")["answer"]
    assert (asked["version"], asked["tick_seq"]) == (20, 10)
    # a resend of the new numbering's last ticks, with the ts they first had: repeats, dropped as before
    for tick in again[-3:]:
        feed.send_multipart([b"handler-1", msgpack.packb(tick)])
    wait_stats(ctl, lambda st: st["duplicates"] - before["duplicates"] == 3)
    assert held_of(ctl, stream)["ticks"] == 20


def test_a_seq_again_later_with_its_values_is_a_restamped_resend_as_replay_reads_it() -> None:
    """The live rule is file replay's: a number again at a later ts with the kind and values it had, within the
    hour, is a duplicate (counted as restamped, said once); with other values, or past the hour, a numbering begun
    again (taken); a pre-tokenized item, which has no values to compare, starts a numbering again as before."""
    said: list[str] = []
    sequences = TickSequences(said.append)
    first = validate(trade("AB2", T0, 250.5, seq=7000))
    sequences.committed("AB2", first, None, True)
    for line_b in (validate(trade("AB2", T0 + 30 * MS, 250.5, seq=7000)),
                   validate(trade("AB2", T0 + RESTAMPED_NS, 250.5, seq=7000))):
        assert sequences.duplicate("AB2", 7000, line_b.ts, T0, tick=line_b)
    assert (sequences.duplicates["AB2"], sequences.restamped["AB2"]) == (2, 2)
    assert sequences.summary()["duplicates_restamped"] == 2 and len(said) == 1
    assert 'stream "AB2": seq 7000 again, stamped later' in said[0] and "a resend restamped" in said[0]
    for new_session in (validate(trade("AB2", T0 + 30 * MS, 250.75, seq=7000)),  # other values
                        validate(trade("AB2", T0 + RESTAMPED_NS + 1, 250.5, seq=7000)),  # past the look-back
                        validate(quote("AB2", T0 + 30 * MS, seq=7000))):  # another kind under the number
        assert not sequences.duplicate("AB2", 7000, new_session.ts, T0, tick=new_session)
    assert not sequences.duplicate("AB2", 7000, T0 + 30 * MS, T0)  # (a pre-tokenized item's: no values)
    assert sequences.duplicates["AB2"] == 2


def test_ab_lines_each_stamped_on_receipt_are_taken_once(server, clients, capsys) -> None:
    """A/B lines of one feed, B's copy of each trade stamped 30 ms after A's, sent as the lines deliver them (A's
    tick, then B's): each trade is taken once, B's copies counted as restamped duplicates, no numbering begun
    again (every tick was taken twice, 10 `seq_restarts` for 10 trades). The stream's own count of them is in
    `streams` and on its `flashtick streams` line (session 48 left it in `stats`' total alone)."""
    control, _, push = clients
    ctl, feed = control(), push()
    stream = fresh_stream("AB")
    before = stats(ctl)
    for k in range(10):
        for line_ts in (T0 + k * 10 * MS, T0 + k * 10 * MS + 30 * MS):
            feed.send(msgpack.packb(trade(stream, line_ts, 250.0 + k * 0.01, seq=7000 + k)))
    after = wait_stats(ctl, lambda st: st["duplicates"] - before["duplicates"] == 10)
    assert after["duplicates_restamped"] - before["duplicates_restamped"] == 10
    assert after["seq_restarts"] == before["seq_restarts"] and after["ticks_in"] - before["ticks_in"] == 10
    held = held_of(ctl, stream)
    assert (held["ticks"], held["last_seq"], held["duplicates"], held["duplicates_restamped"], held["seq_restarts"]) \
        == (10, 7009, 10, 10, 0), held
    assert f'stream "{stream}": seq 7000 again, stamped later' in capsys.readouterr().err
    assert main(["streams", stream, "--control", server["control"]]) in (0, None)
    assert capsys.readouterr().out.rstrip("\n").endswith("\tlast_seq 7009\tduplicates 10 (10 restamped)")


def test_a_late_tick_is_refused_alike_with_or_without_seq_and_is_no_duplicate(server, clients, capsys) -> None:
    control, sub, push = clients
    ctl, rejects = control(), sub("_rejects/ooo/")
    with_seq, without = fresh_stream("OOO.SEQ"), fresh_stream("OOO.NOSEQ")
    feed = push()
    before = stats(ctl)
    for stream, numbered in ((with_seq, True), (without, False)):
        for k in (1, 2, 4, 3, 5):  # seq 3 arrives late, its ts between 2's and 4's
            tick = trade(stream, T0 + k * MS, 100.0 + k, **({"seq": k} if numbered else {}))
            feed.send_multipart([b"ooo", msgpack.packb(tick)])
    got = rejects.until(lambda g: {p.get("stream") for _, p in g} >= {with_seq, without})
    told = {p["stream"]: (p["index"], p["reason"]) for _, p in got}
    assert told == {with_seq: (0, "ts_backwards"), without: (0, "ts_backwards")}, got
    after = wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 8)
    assert after["duplicates"] == before["duplicates"]
    assert after["rejected"]["ts_backwards"] - before["rejected"].get("ts_backwards", 0) == 2
    held = held_of(ctl, with_seq)
    # the gap 2 -> 4 was counted when 4 came; 3 came after all: late, not missing any more
    assert (held["ticks"], held["last_seq"], held["duplicates"], held["seq_gaps"], held["seq_missing"],
            held["seq_late"]) == (4, 5, 0, 1, 1, 1), held
    assert after["seq_late"] - before["seq_late"] == 1
    scrape = urllib.request.urlopen(server["metrics"], timeout=30).read().decode()
    assert f"flashtick_seq_late_total {after['seq_late']}" in scrape
    assert held_of(ctl, without)["ticks"] == 4
    capsys.readouterr()
    assert main(["streams", with_seq, "--control", server["control"]]) in (0, None)
    assert "\tseq_gaps 1 (1 missing, 1 came late)" in capsys.readouterr().out


def test_a_late_tick_stamped_at_the_streams_last_ts_is_taken_and_a_refused_number_is_no_gap(clients) -> None:
    control, _, push = clients
    ctl = control()
    stream = fresh_stream("LATE")
    feed = push()
    before = stats(ctl)
    # 1, 2 taken; 3 refused (a year back: ts_backwards); 4 taken: no gap, 3 was received
    for seq, ts in ((1, T0), (2, T0 + MS), (3, T0 - 365 * 86_400 * 10**9), (4, T0 + 2 * MS)):
        feed.send(msgpack.packb(trade(stream, ts, seq=seq)))
    wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 3)
    held = held_of(ctl, stream)
    assert (held["last_seq"], held["seq_gaps"], held["seq_missing"]) == (4, 0, 0), held
    # 6 skips 5; 5 then comes stamped as the stream's last tick: taken (the ordering guard allows it), late
    feed.send(msgpack.packb([trade(stream, T0 + 3 * MS, seq=6), trade(stream, T0 + 3 * MS, seq=5)]))
    wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 5)
    held = held_of(ctl, stream)
    assert (held["last_seq"], held["seq_gaps"], held["seq_missing"], held["seq_late"], held["duplicates"]) == \
        (6, 1, 1, 1, 0), held
    # and a resend of 5 now is a duplicate: its number was taken
    feed.send(msgpack.packb(trade(stream, T0 + 3 * MS, seq=5)))
    wait_stats(ctl, lambda st: st["duplicates"] - before["duplicates"] == 1)


def test_tick_seq_is_known_again_after_a_restart_and_kept_in_the_gap_fill(tmp_path) -> None:
    """A restart rebuilds which seq each count's tick carried from the tick log (a refused tick's number skipped),
    and the `answers` gap fill returns each answer's tick_seq as it was published."""
    from conftest import serving, tiny_tick_checkpoint
    from engine.service.config import ServiceConfig
    from wire_client import Control, Sub, push_socket

    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice,"
                       " trigger: batch}\n")
    config = ServiceConfig.from_dict({
        "model": {"path": str(tiny_tick_checkpoint(tmp_path / "tick"))}, "log": {"dir": str(tmp_path / "data")},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "limits": {"heartbeat_s": 0.1}, "queries": str(queries)})
    stream = "SEQ.RESTART"
    sent = [(1, T0), (2, T0 + MS), (3, T0 - MS), (4, T0 + 2 * MS)]  # 3 refused (ts_backwards)
    for run, ticks in enumerate((sent, [(5, T0 + 3 * MS)])):
        with serving(config) as srv:
            ctl, answers = Control(srv.endpoints["control"]), Sub(srv.endpoints["answers"], ["dir/"])
            feed = push_socket(srv.endpoints["ingest"])
            try:
                for seq, ts in ticks:
                    feed.send(msgpack.packb(trade(stream, ts, seq=seq)))
                version = 3 if run == 0 else 4
                got = answers.until(lambda g: any(p["version"] == version for _, p in g))
                published = [(p["version"], p["tick_seq"]) for _, p in got]
                if run == 1:
                    assert published == [(4, 5)], published  # the count's tick known again from the tick log
                    filled = ctl.ok("answers", topic=f"dir/{stream}/", after=0)["answers"]
                    assert [(a["version"], a["tick_seq"]) for a in filled] == [(1, 1), (2, 2), (3, 4), (4, 5)]
                    assert ctl.ok("get", stream=stream, query="dir")["answer"]["tick_seq"] == 5
                else:
                    assert published == [(1, 1), (2, 2), (3, 4)], published
            finally:
                for sock in (ctl, answers, feed):
                    sock.close()
