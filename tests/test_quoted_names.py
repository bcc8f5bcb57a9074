"""Names in the errors and notes a client or a user reads are quoted as JSON writes them (engine/quoting.py), so a
C++, Go or Node client can take the name back out with its JSON parser: a stream refused by admission inside the
`ask` error on the control socket, a selection of streams and a query in a backtest's error and notes. Python's
quotes (`'B'`, `['NQ*']`) were left in these after the wire's own errors moved to JSON's. A real server on
127.0.0.1's ephemeral ports and the real CLI on a file written here."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import engine_dir
from connectors.ticks import Tick, encode
from engine.service.cli import main
from engine.service.client import ControlClient, ControlError
from test_server import checkpoint  # noqa: F401  (the model fixture)
from test_service_limits import live_server, ticks, wait_for

REFUSED = "B.É'Q"  # Python's repr would write "B.É'Q" in its own quotes; the refusal must write it as JSON does
QUERIES = ("queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, trigger: {ticks: 5}}\n"
           "  - {name: no.answer, streams: ['NQ*'], kind: surprise, trigger: batch}\n")


def test_a_stream_refused_by_admission_is_named_in_json_inside_the_asks_error(checkpoint) -> None:
    with live_server(checkpoint, scheduler={"max_streams": 1}) as (server, push):
        held = ticks(10, streams=1)
        push.send(encode(held))
        push.send(encode([Tick(REFUSED, held[-1].ts + 1, "trade", price=100.0, size=1.0, side="buy")]))
        wait_for(lambda: server.pipeline.ticks_in + sum(server.pipeline.rejected.values()) >= 11)
        with ControlClient(server.endpoints["control"], timeout_s=60) as control:
            with pytest.raises(ControlError) as refused:
                control.call("ask", stream=REFUSED, spec={"name": "x", "question": "direction_20", "kind": "choice"})
    said = re.search(r"stream_refused: stream (\".*?[^\\]\") refused: 1 streams are held", str(refused.value))
    assert said is not None, refused.value
    assert json.loads(said.group(1)) == REFUSED


def test_a_selection_and_a_query_are_named_in_json_in_a_backtests_error_and_notes(tmp_path: Path, capsys) -> None:
    files = engine_dir(tmp_path / "engine", QUERIES)
    tape = tmp_path / "tape.csv"
    tape.write_text("timestamp,symbol,price,size\n" + "".join(
        f"2026-03-10 14:30:{i // 10:02d}.{i % 10}00,{('AAPL', 'IBM')[i % 2]},{100 + i % 7 * 0.01:.2f},1\n"
        for i in range(60)))
    argv = ["backtest", str(tape), "--queries", str(files / "q.yaml"), "--config", str(files / "engine.yaml"),
            "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "a.parquet"), "--streams", "AAPL", "NQ*"]) == 2
    err = capsys.readouterr().err
    said = re.search(r"error: streams (\[.*?\]) match none of the streams the files hold", err)
    assert said is not None and json.loads(said.group(1)) == ["NQ*"], err

    assert main([*argv, "--out", str(tmp_path / "b.parquet"), "--streams", "AAPL"]) == 0
    out, err = capsys.readouterr()
    selected = re.search(r"note: streams selected (\[.*?\]): AAPL", err)
    assert selected is not None and json.loads(selected.group(1)) == ["AAPL"], err
    left_out = re.search(r"stream (\".*?\") is not among the streams selected (\[.*?\])", out)
    assert left_out is not None and json.loads(left_out.group(1)) == "IBM" and json.loads(left_out.group(2)) == \
        ["AAPL"], out
    unanswered = re.search(r"note: query (\".*?\") published no answer: its streams (\[.*?\]) match none", err)
    assert unanswered is not None, err
    assert json.loads(unanswered.group(1)) == "no.answer" and json.loads(unanswered.group(2)) == ["NQ*"]
