"""While `limits.when_behind: shed` refuses whole messages, a tick whose `seq` repeats one its stream took is still a
duplicate (dropped, counted as one), not an `overloaded` refusal: a feed's resend is no load, and counted as
overloaded it read as data lost. Raw and tokenized messages, a real server on 127.0.0.1 ephemeral ports, raw pyzmq
and msgpack clients (wire_client.py)."""

from __future__ import annotations

import msgpack

from conftest import serving, tiny_tick_checkpoint
from engine.service.config import ServiceConfig
from wire_client import T0, Control, Sub, fresh_stream, held_of, push_socket, stats, trade, wait_until

MS = 1_000_000
ATTEMPTS = 20  # a message is shed whole only when read before the forward that clears the backlog: tried again


def _tokens(stream: str, seq: int) -> dict:
    return {"stream": stream, "ts": T0 + seq * MS, "tokens": [1 + seq % 5, 7, 18, 43], "seq": seq}


def _send(push, stream: str, seqs: list[int], tokenized: bool) -> None:
    if tokenized:
        push.send_multipart([b"tokens", msgpack.packb([_tokens(stream, n) for n in seqs])])
    else:
        push.send(msgpack.packb([trade(stream, T0 + n * MS, 100.0 + n, 1.0, seq=n) for n in seqs]))


def _settled(ctl: Control, stream: str) -> dict:
    """``stream``'s figures once both of its second message's ticks are accounted for: taken, dropped as a
    duplicate or refused."""
    def done() -> bool:
        held = held_of(ctl, stream)
        return held["ticks"] - 1 + held["duplicates"] + sum(held.get("rejected", {}).values()) == 2
    wait_until(done, timeout_s=30)
    return held_of(ctl, stream)


def _shed_with_a_resend(ctl: Control, rejects: Sub, push, tokenized: bool) -> tuple[dict, list[dict]]:
    """A stream that took seq 1, then a message of its seq 1 again and seq 2 read while the engine is behind (a
    message of another stream just before it put the backlog past the bound): its figures and its rejections."""
    for _ in range(ATTEMPTS):
        stream, padding = fresh_stream("SHED.DUP"), fresh_stream("SHED.PAD")
        _send(push, stream, [1], tokenized)
        wait_until(lambda: (held_of(ctl, stream) or {}).get("ticks") == 1 and not stats(ctl)["behind"])
        push.send(msgpack.packb([trade(padding, T0 + k * MS, 50.0 + k, 1.0) for k in range(3)]))
        _send(push, stream, [1, 2], tokenized)
        held = _settled(ctl, stream)
        if held["ticks"] == 1:  # shed, not read after a forward
            rejects.beats(3)  # (everything published before them has arrived)
            return held, [p for _, p in rejects.kept if p.get("stream") == stream]
    raise AssertionError(f"no message was shed in {ATTEMPTS} tries")


def test_a_resend_in_a_message_shed_whole_counts_as_duplicates_not_overloaded(tmp_path) -> None:
    config = ServiceConfig.from_dict({
        "model": {"path": str(tiny_tick_checkpoint(tmp_path / "tick"))},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"},
        "limits": {"heartbeat_s": 0.1, "max_backlog_tokens": 1, "when_behind": "shed"}})
    with serving(config) as srv:
        ctl, push = Control(srv.endpoints["control"]), push_socket(srv.endpoints["ingest"])
        rejects = Sub(srv.endpoints["answers"], ["_rejects/"])
        try:
            for tokenized in (False, True):
                held, refused = _shed_with_a_resend(ctl, rejects, push, tokenized)
                assert (held["duplicates"], held["last_seq"], held["rejected"]) == (1, 1, {"overloaded": 1}), held
                # one rejection for the stream, of its one tick shed: the one after its resend
                assert [(r["reason"], r["index"], r.get("count", 1)) for r in refused] == [("overloaded", 1, 1)]
        finally:
            for sock in (ctl, push, rejects):
                sock.close()
