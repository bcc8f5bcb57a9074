"""Stream names that Unicode NFKC folds to one another (review207 #6): `LOOK.A`, `LOOK\u2024A`, fullwidth `ＬＯＯＫ.A`
and `LOOK\uff0eA` were four streams that print alike. A new name whose fold is a known stream's is refused now,
naming that stream, over real sockets, after a restart from the tick log, and for names remembered as refused;
a fullwidth name alone, or one differing in case, is a stream of its own."""

from __future__ import annotations

import json

import msgpack
import pytest

from conftest import serving, tiny_tick_checkpoint
from engine.service.config import ServiceConfig
from wire_client import T0, Control, Sub, push_socket, quote, stats, trade, wait_stats

HANG_S = 120.0  # only catches a hang (the machine is shared)
LOOKALIKES = ["LOOK\u2024A", "\uff2c\uff2f\uff2f\uff2b.A", "LOOK\uff0eA"]  # ONE DOT LEADER, fullwidth, FULLWIDTH STOP
# characters that print as nothing, which str.isprintable passes and NFKC keeps (review406 #5: each was a stream)
INVISIBLE = ["LOOK.A\u034f", "LOO\ufe00K.A", "LOOK.A\U000e0100", "LOOK.A\u3164", "LOOK.A\u2800"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"))


def config(checkpoint, data_dir) -> ServiceConfig:
    return ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}, "log": {"dir": str(data_dir)},
        "limits": {"heartbeat_s": 0.2},
        "endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"}})


def refusals(server, messages: list[bytes]) -> list[dict]:
    """Each message (one tick) sent in turn, and the `_rejects/` entry or acceptance it got: the entry, or None."""
    control, rejects, feed = Control(server.endpoints["control"]), Sub(server.endpoints["answers"], ["_rejects/"]), \
        push_socket(server.endpoints["ingest"])
    try:
        got = []
        for message in messages:
            before = stats(control)
            feed.send(message)
            after = wait_stats(control, lambda s: s["ticks_in"] + sum(s["rejected"].values())
                               > before["ticks_in"] + sum(before["rejected"].values()), HANG_S)
            refused = sum(after["rejected"].values()) > sum(before["rejected"].values())
            got.append(rejects.until(lambda kept: len(kept) > 0, HANG_S).pop()[1] if refused else None)
            rejects.kept.clear()
        return got
    finally:
        feed.close()
        rejects.close()
        control.close()


def test_names_that_fold_to_a_known_stream_are_refused_naming_it_across_a_restart(checkpoint, tmp_path) -> None:
    data = tmp_path / "data"
    with serving(config(checkpoint, data)) as server:
        got = refusals(server, [msgpack.packb(trade(name, T0))
                                for name in ["LOOK.A", *LOOKALIKES, *INVISIBLE, "look.a"]])
        control = Control(server.endpoints["control"])
        held = control.ok("streams")["streams"]
        counted = stats(control)["rejected"]
        control.close()
    assert got[0] is None and got[-1] is None, got  # LOOK.A, then look.a (case kept: its own stream)
    for name, entry in zip([*LOOKALIKES, *INVISIBLE], got[1:-1]):
        assert entry["reason"] == "bad_stream" and entry["stream"] == name, entry
        assert entry["error"].startswith(f'bad_stream: stream {json.dumps(name)} prints like "LOOK.A", a stream this '
                                         f'service knows already: Unicode NFKC, less what prints as nothing, folds '
                                         f'both to "LOOK.A" ('), entry
        assert 'send its ticks as "LOOK.A" if it is that instrument, or give it a name of its own' in entry["error"]
    assert got[3]["error"].count("U+FF0E FULLWIDTH FULL STOP") == 1, got[3]
    assert "U+2800 BRAILLE PATTERN BLANK" in entry["error"], entry
    assert set(held) == {"LOOK.A", "look.a"} and counted["bad_stream"] == 8, (held, counted)
    with serving(config(checkpoint, data)) as server:  # the names the tick log holds are known at once
        got = refusals(server, [msgpack.packb(trade("LOOK\uff0eA", T0 + 2)), msgpack.packb(trade("LOOK.A", T0 + 2)),
                                msgpack.packb(trade("\uff2e\uff2b\uff12\uff12\uff15", T0 + 2))])
    assert got[0]["reason"] == "bad_stream" and 'prints like "LOOK.A"' in got[0]["error"], got
    assert got[1:] == [None, None], got  # the stream itself, and a fullwidth name of its own (ＮＫ２２５)


def test_a_lookalike_of_a_stream_refused_and_remembered_is_refused_and_tokenized_items_alike(checkpoint,
                                                                                              tmp_path) -> None:
    """A name none of whose ticks was accepted is remembered (`streams` says why it holds nothing): known too. A
    name refused as a lookalike is not known for it, so its later ticks are refused the same way."""
    with serving(config(checkpoint, tmp_path / "data")) as server:
        crossed = msgpack.packb(quote("\uff31\uff31.B", T0, bid=101.4, ask=101.3))  # ＱＱ.B: a crossed quote
        tokenized = [b"tokens", msgpack.packb([{"stream": "QQ\uff0eB", "ts": T0, "tokens": [1]}])]
        got = refusals(server, [crossed, msgpack.packb(trade("QQ.B", T0)), msgpack.packb(trade("QQ.B", T0 + 1))])
        feed = push_socket(server.endpoints["ingest"])
        control, rejects = Control(server.endpoints["control"]), Sub(server.endpoints["answers"], ["_rejects/"])
        feed.send_multipart(tokenized)
        entry = rejects.until(lambda kept: len(kept) > 0, HANG_S)[0][1]
        feed.close()
        rejects.close()
        control.close()
    assert got[0]["reason"] == "crossed_quote", got
    assert [g["reason"] for g in got[1:]] == ["bad_stream"] * 2, got
    assert all('prints like "\uff31\uff31.B"' in g["error"] for g in got[1:]), got
    assert entry["reason"] == "bad_stream" and 'prints like "\uff31\uff31.B"' in entry["error"], entry
