"""Pre-tokenized wire items (`[b"tokens", items]`) under the live ingest rules raw ticks have: a `seq` dedups a
connector's resend, counts gaps and numberings begun again, one numbering per stream across both wire forms, and
survives a restart through the tick log; `ingest.reorder_window_ms` holds them with the stream's raw ticks, so a
stream fed both forms keeps its event-time order. Real servers on 127.0.0.1 ephemeral ports, raw pyzmq and msgpack
clients (wire_client.py)."""

from __future__ import annotations

import msgpack

from conftest import serving, tiny_tick_checkpoint
from engine.service.config import ServiceConfig
from wire_client import T0, Control, Sub, fresh_stream, held_of, push_socket, stats, trade, wait_stats, wait_until
from wire_server import clients, resent_after_a_restart, server  # noqa: F401 (fixtures)

MS = 1_000_000
HOUR = 3600 * 10**9


def items(stream: str, numbers: list[int], at: int = T0) -> list[dict]:
    """Pre-tokenized trades of ``stream`` numbered ``numbers``, a millisecond apart by number (ids in the codec's
    vocabulary: the engine checks only that)."""
    return [{"stream": stream, "ts": at + n * MS, "tokens": [1 + n % 5, 7, 18, 43], "ticks": 1, "seq": n}
            for n in numbers]


def send_tokens(push, listed: list[dict]) -> None:
    push.send_multipart([b"tokens", msgpack.packb(listed)])


def test_a_tokenized_resend_is_dropped_as_duplicates_and_gaps_and_restarts_are_counted(clients) -> None:
    control, sub, push = clients
    ctl, rejects, feed = control(), sub("_rejects/"), push()
    stream = fresh_stream("TSEQ")
    before = stats(ctl)
    send_tokens(feed, items(stream, [1, 2, 3, 4, 5]))
    wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 5)
    send_tokens(feed, items(stream, [4, 5]))  # the connector reconnected and sent its last items again
    after = wait_stats(ctl, lambda st: st["duplicates"] - before["duplicates"] == 2)
    assert after["rejected"] == before["rejected"]  # dropped, not refused as ts_backwards
    held = held_of(ctl, stream)
    assert (held["ticks"], held["last_seq"], held["duplicates"], held["seq_gaps"]) == (5, 5, 2, 0), held
    send_tokens(feed, items(stream, [8]))  # 6 and 7 never came: taken at once, the gap counted
    wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 6)
    held = held_of(ctl, stream)
    assert (held["ticks"], held["last_seq"], held["seq_gaps"], held["seq_missing"]) == (6, 8, 1, 2), held
    # one numbering per stream, whichever form: a raw tick repeating 8 is a duplicate, 9 comes next
    feed.send(msgpack.packb([trade(stream, T0 + 8 * MS, seq=8), trade(stream, T0 + 9 * MS, seq=9)]))
    wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 7)
    held = held_of(ctl, stream)
    assert (held["ticks"], held["last_seq"], held["duplicates"]) == (7, 9, 3), held
    # the venue's numbering begun again the next session: a lower number two hours on is taken, said as a restart
    send_tokens(feed, items(stream, [1], at=T0 + 2 * HOUR))
    after = wait_stats(ctl, lambda st: st["ticks_in"] - before["ticks_in"] == 8)
    assert after["seq_restarts"] - before["seq_restarts"] == 1
    assert held_of(ctl, stream)["last_seq"] == 1
    rejects.beats(3)  # (everything published before them has arrived)
    assert not [p for _, p in rejects.kept if p.get("stream") == stream]


def test_a_bad_seq_on_a_tokenized_item_refuses_it_alone_by_the_raw_ticks_rule(clients) -> None:
    control, sub, push = clients
    ctl, rejects, feed = control(), sub("_rejects/"), push()
    stream = fresh_stream("TSEQ.BAD")
    bad = [{**items(stream, [1])[0], "seq": 1.5}, {**items(stream, [2])[0], "seq": -1}, items(stream, [3])[0]]
    send_tokens(feed, bad)
    got = [p for _, p in rejects.until(lambda g: len([p for _, p in g if p.get("stream") == stream]) >= 2)
           if p.get("stream") == stream]
    assert [(p["index"], p["reason"]) for p in got] == [(0, "wrong_type"), (1, "seq_out_of_range")]
    assert "seq must be an int" in got[0]["error"]
    wait_until(lambda: (held_of(ctl, stream) or {}).get("last_seq") == 3)


def test_a_tokenized_items_seq_survives_a_restart_through_the_tick_log(tmp_path) -> None:
    """The connector resends from where it thought it was, as a raw feed does (test_wire_sequences.py)."""
    stream = fresh_stream("TSEQ.LOG")
    with resent_after_a_restart(tmp_path, stream, lambda feed, seqs: send_tokens(feed, items(stream, list(seqs)))):
        pass


def test_the_reorder_window_holds_tokenized_items_with_the_streams_raw_ticks(tmp_path) -> None:
    """A stream fed raw ticks and tokenized items under ingest.reorder_window_ms: the raw ticks are held, so an
    item sent unheld passed them and they were refused as ts_backwards at their release; a late item is placed by
    its ts as a late raw tick is."""
    config = ServiceConfig.from_dict({
        "model": {"path": str(tiny_tick_checkpoint(tmp_path / "tick"))},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "ingest": {"reorder_window_ms": 300}, "limits": {"heartbeat_s": 0.1}})
    stream = fresh_stream("TMIX")
    with serving(config) as srv:
        ctl, feed = Control(srv.endpoints["control"]), push_socket(srv.endpoints["ingest"])
        rejects = Sub(srv.endpoints["answers"], ["_rejects/"])
        try:
            feed.send(msgpack.packb([trade(stream, T0 + 1 * MS), trade(stream, T0 + 2 * MS)]))
            send_tokens(feed, [{"stream": stream, "ts": T0 + 4 * MS, "tokens": [2, 14, 26, 44]}])
            send_tokens(feed, [{"stream": stream, "ts": T0 + 3 * MS, "tokens": [1, 7, 18, 43], "ticks": 1}])  # late
            feed.send(msgpack.packb(trade(stream, T0 + 5 * MS)))
            done = wait_stats(ctl, lambda st: st["ticks_in"] == 5 and st["reorder"]["held"] == 0)
            assert done["rejected"] == {}, done["rejected"]
            assert done["reorder"]["placed"] == 1
            held = held_of(ctl, stream)
            assert (held["ticks"], held["last_ts"]) == (5, T0 + 5 * MS), held
            rejects.beats(3)
            assert not [p for _, p in rejects.kept if p.get("stream") == stream]
        finally:
            for sock in (ctl, feed, rejects):
                sock.close()
