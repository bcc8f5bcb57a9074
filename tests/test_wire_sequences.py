"""A wire tick's `seq` (review323 #1, #2, #4): a resend after a feed reconnects and the second copy of an A/B line pair
are dropped as duplicates, exactly, counted and never refused; a jump in the numbers is a gap, counted while the
tick is taken; the last number survives a restart through the tick log. Without `seq`, the repeats a reconnect lets
through at the stream's last ts are counted (`repeats_taken`). Real servers on 127.0.0.1 ephemeral ports, raw pyzmq
and msgpack clients (wire_client.py)."""

from __future__ import annotations

import dataclasses
import math
import urllib.request

import msgpack
import zmq

from conftest import serving, tiny_tick_checkpoint
from connectors.tick_sequences import RESENT
from engine.service.cli import main
from engine.service.config import ServiceConfig
from wire_client import CTX, T0, Control, Sub, fresh_stream, held_of, push_socket, stats, trade, wait_stats
from wire_server import clients, resent_after_a_restart, server  # noqa: F401 (fixtures)

MS = 1_000_000


def sequenced(stream: str, n: int, first: int = 1) -> list[dict]:
    """``n`` trades numbered from ``first``, two to a millisecond as real trade feeds have them."""
    return [trade(stream, T0 + (k // 2) * MS, 100.0 + (k % 5) * 0.25, 1 + k % 3, side="buy" if k % 2 else "sell",
                  seq=first + k) for k in range(n)]


def test_a_reconnecting_feeds_resend_is_dropped_as_duplicates_and_a_gap_is_counted(server, clients, capsys) -> None:
    control, sub, push = clients
    ctl, answers, rejects = control(), sub("dir/"), sub("_rejects/")
    stream = fresh_stream("SEQ.R")
    ticks = sequenced(stream, 20)
    before = stats(ctl)
    first = push()
    for k in range(0, 20, 5):
        first.send(msgpack.packb(ticks[k:k + 5]))
    wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 20)
    first.close()
    again = push()  # the handler reconnected: its last message goes again, byte for byte
    again.send(msgpack.packb(ticks[15:20]))
    wait_stats(ctl, lambda st: st["duplicates"] - before["duplicates"] == 5)
    held = held_of(ctl, stream)
    assert (held["ticks"], held["last_seq"], held["duplicates"], held["seq_gaps"]) == (20, 20, 5, 0), held
    # a gap: 21 and 22 never came; 23 is taken at once, the gap counted and its numbers
    again.send(msgpack.packb(trade(stream, T0 + 10 * MS, 101.0, 1.0, seq=23)))
    after = wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 21)
    assert after["rejected"] == before["rejected"]  # nothing refused: no ts_backwards for a resend, nothing lost
    assert (after["seq_gaps"] - before["seq_gaps"], after["seq_missing"] - before["seq_missing"]) == (1, 2)
    assert after["sequence_streams"][stream] == {"duplicates": 5, "seq_gaps": 1, "seq_missing": 2}
    assert f'stream "{stream}": a gap in its seq, 20 -> 23 (2 missing)' in capsys.readouterr().err  # the log says it
    held = held_of(ctl, stream)
    assert (held["ticks"], held["last_seq"], held["seq_gaps"], held["seq_missing"]) == (21, 23, 1, 2), held
    # the answers count each tick once: one per message that took ticks, at the stream's true tick count
    got = answers.until(lambda g: any(p["version"] == 21 for _, p in g if p["stream"] == stream))
    assert [p["version"] for _, p in got if p["stream"] == stream] == [5, 10, 15, 20, 21]
    assert not [p for _, p in rejects.kept if p.get("stream") == stream]
    scrape = urllib.request.urlopen(server["metrics"], timeout=30).read().decode()
    assert f"flashtick_duplicates_total {after['duplicates']}" in scrape
    assert f"flashtick_seq_gaps_total {after['seq_gaps']}" in scrape


def test_a_bad_seq_refuses_its_tick_alone_and_other_sequence_keys_are_told_to_send_seq(clients) -> None:
    control, sub, push = clients
    ctl, feed, rejects = control(), push(), sub("_rejects/")
    stream = fresh_stream("SEQ.BAD")
    feed.send(msgpack.packb([trade(stream, T0, seq=1.5), trade(stream, T0, seq=-1), trade(stream, T0, seq=True),
                             trade(stream, T0, trade_id=7), trade(stream, T0, seq=2**64 - 1)]))
    got = [p for _, p in rejects.until(lambda g: len([p for _, p in g if p.get("stream") == stream]) >= 4)
           if p.get("stream") == stream]
    assert [(p["index"], p["reason"]) for p in got] == [(0, "wrong_type"), (1, "seq_out_of_range"),
                                                         (2, "wrong_type"), (3, "unknown_field")]
    assert "seq must be an int" in got[0]["error"] and "the wire's field for a sequence number" in got[3]["error"]
    assert held_of(ctl, stream)["last_seq"] == 2**64 - 1  # a uint64 number, exactly


def test_without_seq_a_resend_at_the_streams_last_ts_is_counted_as_repeats_taken(clients) -> None:
    """Without `seq` the wire cannot tell a resend from a new trade: the ticks before the last ts are refused as
    ts_backwards, those at it are taken, and counted, so a desk sees them (feed-resume.md says how to drop them).
    The refusals say the ticks copy ones taken, a resend (review431 #3: said as two clocks interleaving)."""
    control, sub, push = clients
    ctl, rejects = control(), sub("_rejects/")
    stream = fresh_stream("SEQ.NONE")
    ticks = [trade(stream, T0 + k * MS, 100.0 + k, 1.0) for k in range(7)]
    ticks += [trade(stream, T0 + 7 * MS, 110.0 + k, 1.0 + k) for k in range(3)]  # three trades of one millisecond
    before = stats(ctl)
    first = push()
    first.send(msgpack.packb(ticks))
    wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 10)
    first.close()
    again = push()
    again.send(msgpack.packb(ticks[5:]))
    after = wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 13)
    assert after["repeats_taken"] - before["repeats_taken"] == 3
    assert after["rejected"].get("ts_backwards", 0) - before["rejected"].get("ts_backwards", 0) == 2
    held = held_of(ctl, stream)
    assert (held["ticks"], held["repeats_taken"], held["last_seq"]) == (13, 3, None), held
    refused = rejects.until(lambda got: len([p for _, p in got if p.get("stream") == stream]) == 2)
    assert all(RESENT in p["error"] for _, p in refused if p.get("stream") == stream), refused


def ab_config(tmp_path, lines: list[str]) -> ServiceConfig:
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice,"
                       " trigger: batch}\n")
    return ServiceConfig.from_dict({
        "model": {"path": str(tiny_tick_checkpoint(tmp_path / "tick"))},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0",
                      "feeds": lines},
        "limits": {"heartbeat_s": 0.1}, "queries": str(queries)})


def test_ab_lines_publishing_the_same_sequenced_ticks_are_arbitrated_to_one_copy_each(tmp_path) -> None:
    """Two PUB buses publishing the same sequenced trades, interleaved with either line first: the engine holds each
    trade once, counts each second copy as a duplicate, refuses none, and answers as one line alone does (the same
    ticks pushed once under another name on the same server)."""
    lines = [CTX.socket(zmq.XPUB) for _ in range(2)]  # an XPUB sees the service's subscription arrive
    for line in lines:
        line.linger = 0
        line.bind("tcp://127.0.0.1:*")
    with serving(ab_config(tmp_path, [line.getsockopt_string(zmq.LAST_ENDPOINT) for line in lines])) as srv:
        ctl, answers = Control(srv.endpoints["control"]), Sub(srv.endpoints["answers"], ["dir/"])
        alone = push_socket(srv.endpoints["ingest"])
        try:
            for line in lines:
                assert line.poll(10_000) and line.recv() == b"\x01"  # subscribed to every topic
            ticks = sequenced("ESZ6.AB", 40)
            for k, tick in enumerate(ticks):
                for line in (lines if k % 2 else lines[::-1]):  # which line is first changes tick by tick
                    line.send_multipart([b"ESZ6", msgpack.packb([tick])])
                alone.send(msgpack.packb([{**tick, "stream": "ESZ6.ONE"}]))
            done = wait_stats(ctl, lambda st: st["ticks_in"] == 80 and st["duplicates"] == 40)
            assert done["rejected"] == {} and done["seq_gaps"] == 0
            held = held_of(ctl, "ESZ6.AB")
            assert (held["ticks"], held["last_seq"], held["duplicates"]) == (40, 40, 40), held
            got = answers.until(lambda g: sum(p["version"] == 40 for _, p in g) == 2)
            ab = [p for _, p in got if p["stream"] == "ESZ6.AB"]
            one = [p for _, p in got if p["stream"] == "ESZ6.ONE"]
            assert [p["version"] for p in ab] == [p["version"] for p in one] == list(range(1, 41))
            for a, b in zip(ab, one):
                assert a["data_ts"] == b["data_ts"] and a["value"]["answer"] == b["value"]["answer"]
                assert all(math.isclose(a["value"]["probs"][k], b["value"]["probs"][k], abs_tol=1e-5)
                           for k in b["value"]["probs"])
        finally:
            for sock in (ctl, answers, alone, *lines):
                sock.close()


def test_the_last_seq_survives_a_restart_through_the_tick_log(tmp_path, capsys) -> None:
    stream = fresh_stream("SEQ.LOG")
    ticks = sequenced(stream, 12)  # (seqs 1..12)
    with resent_after_a_restart(tmp_path, stream, lambda feed, seqs: feed.send(msgpack.packb(
            [ticks[seq - 1] for seq in seqs]))) as endpoints:
        capsys.readouterr()
        assert main(["streams", stream, "--control", endpoints["control"]]) == 0
        assert capsys.readouterr().out.rstrip("\n").endswith("\tlast_seq 12\tduplicates 4")  # its line says it


def test_the_last_seq_survives_retention_through_the_segment_start_record(tmp_path) -> None:
    """A stream whose every sequenced tick lies in segments retention dropped: the segment start record carries its
    last `seq`, so after a restart a resend of its last ticks is still dropped as duplicates."""
    from connectors.ticks import encode, trade as tick
    from engine.service.pipeline import TickPipeline

    small = {"dir": str(tmp_path / "data"), "segment_bytes": 16384, "retention_bytes": 3 * 16384}
    made = {"model": {"path": str(tiny_tick_checkpoint(tmp_path / "tick", max_position_embeddings=256))},
            "kv": {"cells": 8192, "block_size": 16}, "log": small}
    quiet = [tick("QUIET", T0 + i, 100.0 + i % 3, 1.0, "buy") for i in range(30)]
    quiet = [dataclasses.replace(t, seq=501 + i) for i, t in enumerate(quiet)]
    live = TickPipeline(ServiceConfig.from_dict(made))
    try:
        assert live.ingest_message(encode(quiet)) == []
        for i in range(0, 600, 10):  # other streams' ticks, until the segments holding QUIET's are dropped
            assert live.ingest_message(encode([tick(f"R{k % 2}", T0 + 100 + i + k, 50.0 + k % 5, 1.0, "sell")
                                               for k in range(10)])) == []
            live.run_until_idle()
        assert live.data.stats()["ticks_dropped_by_retention"] >= 30
    finally:
        live.close()
    recovered = TickPipeline(ServiceConfig.from_dict(made))
    try:
        held = recovered.encoders.accepted(["QUIET"])["QUIET"]
        assert (held["ticks"], held["last_seq"]) == (30, 530), held
        assert recovered.ingest_message(encode(quiet[-3:])) == []  # a resend: dropped, not refused
        assert recovered.stats()["duplicates"] == 3 and recovered.encoders.ticks_of("QUIET") == 30
    finally:
        recovered.close()
