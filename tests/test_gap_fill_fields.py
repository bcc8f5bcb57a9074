"""A gap fill (the `answers` op) gives the answers as they were published (fix353): the `data_age_ms`,
`clock_offset_ms` and `caveats` a subscriber saw on PUB, byte for byte, where the history had carried none of them;
and after a restart too, from the answer log. A real server over real ZeroMQ sockets on 127.0.0.1, a real tiny
checkpoint whose card says spot training data (so a perpetual's answers carry `spot_trained_model`), ticks stamped
with the wall clock (so they carry `clock_offset_ms`)."""

from __future__ import annotations

import time
from pathlib import Path

import msgpack

from conftest import serving, tiny_tick_checkpoint
from engine.service.config import ServiceConfig
from engine.service.market_caveat import SPOT_TRAINED_MODEL
from test_cli import DIR_QUERY, LOCAL
from test_spot_model_caveat import SPOT_CARD
from wire_client import Control, Sub, check_answer, push_socket, trade

FIELDS = ("data_age_ms", "clock_offset_ms", "caveats")


def config(checkpoint: Path, tmp_path: Path) -> ServiceConfig:
    (tmp_path / "q.yaml").write_text(DIR_QUERY)
    return ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16},
                                    "endpoints": LOCAL, "limits": {"heartbeat_s": 0.2},
                                    "log": {"dir": str(tmp_path / "data")}, "queries": str(tmp_path / "q.yaml")})


def fields_of(payload: dict) -> bytes:
    return msgpack.packb({name: payload[name] for name in FIELDS if name in payload})


def test_gap_filled_answers_carry_what_was_published(tmp_path: Path) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "m")
    (checkpoint / "TRAINING.md").write_text(SPOT_CARD)
    streams = ("BTC-PERPETUAL", "BTCUSDT")
    with serving(config(checkpoint, tmp_path)) as server:
        control, push = Control(server.endpoints["control"]), push_socket(server.endpoints["ingest"])
        sub = Sub(server.endpoints["answers"], ["dir/"])
        try:
            for i in range(6):  # a message a group: one answer a stream each, stamped now (a live feed's clock)
                now = time.time_ns()
                push.send(msgpack.packb([trade(stream, now, 100.0 + i) for stream in streams]))
            published = sub.until(lambda got: len(got) == 12, timeout_s=60)
            live = {(payload["topic"], payload["seq"]): payload for _, payload in published}
            assert_filled_as_published(control, streams, live)  # from the history in memory
        finally:
            control.close()
            push.close()
            sub.close()
    perpetual = [p for p in live.values() if p["stream"] == "BTC-PERPETUAL"]
    assert all([c["kind"] for c in p["caveats"]] == [SPOT_TRAINED_MODEL] for p in perpetual), perpetual
    assert all("caveats" not in p for p in live.values() if p["stream"] == "BTCUSDT")
    assert all(type(p["clock_offset_ms"]) is float and type(p["data_age_ms"]) is float for p in live.values())
    with serving(config(checkpoint, tmp_path)) as server:  # restarted: the history read back from the answer log
        control = Control(server.endpoints["control"])
        try:
            assert_filled_as_published(control, streams, live)
        finally:
            control.close()


def assert_filled_as_published(control: Control, streams: tuple[str, ...], live: dict) -> None:
    """Every kept answer of ``streams`` as the `answers` op gives it equals the one PUB gave: the fields it was
    published with, byte for byte, and the rest but for the epoch and digest a control reply leaves out."""
    filled = {}
    for stream in streams:
        reply = control.ok("answers", topic=f"dir/{stream}/", after=0)
        assert reply["complete"] is True
        for answer in reply["answers"]:
            check_answer(answer["topic"], answer, published=False, filled=True)
            filled[(answer["topic"], answer["seq"])] = answer
    assert filled.keys() == live.keys()
    for key, answer in filled.items():
        assert fields_of(answer) == fields_of(live[key]), (answer, live[key])
        assert answer == {name: value for name, value in live[key].items() if name not in ("epoch", "model_digest")}
