"""A query whose streams match none of the streams there are (review381 #6): `eff` for `EFF` (patterns are
case-sensitive), or the contract `ES[H27]` written as it is (a glob: `[H27]` is one character). A live `register`
says so in its reply and on the CLI's stderr, with the close name or the escaped glob; `get` of such a query on a
stream it does not match says it never answers there, not "yet"; a backtest's note gives the escape too."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from conftest import serving, tiny_tick_checkpoint
from connectors.feed import FeedClient
from connectors.stream_selection import NoStreamMatched, StreamSelection
from connectors.ticks import TRADE, Tick
from engine.service.backtest import run_backtest
from engine.service.cli import main
from engine.service.client import ControlClient
from engine.service.config import ServiceConfig
from engine.stream_patterns import glob_escaped, unmatched_hint
from test_service_limits import wait_for

T0 = 1_717_401_600 * 10**9
QUERIES = "queries:\n  - {name: dir, streams: ['*'], question: direction_5, kind: choice}\n"

pytestmark = pytest.mark.xdist_group("test_unmatched_streams")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("unmatched") / "model")


def trades(stream: str, n: int = 5) -> list[Tick]:
    return [Tick(stream, T0 + i * 10**9, TRADE, price=100.0 + i * 0.01, size=1.0, side="buy") for i in range(n)]


def test_the_escape_and_the_close_name() -> None:
    assert glob_escaped("ES[H27]") == "ES[[]H27]" and glob_escaped("A*B?") == "A[*]B[?]"
    assert 'write "ES[[]H27]" to match it' in unmatched_hint(["ES[H27]"], ["ES[H27]", "EFF"])
    assert unmatched_hint(["eff"], ["ES[H27]", "EFF"]) == '; did you mean "EFF"?'
    assert unmatched_hint(["nothing_close"], ["EFF"]) == ""
    # verify55 R1: a close name is written as the pattern that matches it, and --streams gives the escape too
    assert unmatched_hint(["ESH27"], ["ES[H27]", "EFF"]) == '; did you mean "ES[[]H27]"?'
    with pytest.raises(NoStreamMatched, match=re.escape('write "ES[[]H27]" to match it')):
        StreamSelection(["ES[H27]"]).check(["ES[H27]", "EFF"])


def test_register_and_get_say_when_a_querys_streams_match_none_held(checkpoint: Path, tmp_path: Path,
                                                                       capsys) -> None:
    queries = tmp_path / "q.yaml"
    queries.write_text(QUERIES)
    local = "tcp://127.0.0.1:0"
    config = ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
                                      "queries": str(queries),
                                      "endpoints": {"ingest": local, "answers": local, "control": local}})
    with serving(config) as server, ControlClient(server.endpoints["control"]) as control:
        quiet = control.call("register", yaml="queries:\n  - {name: lower, streams: [eff], question: direction_5, "
                                              "kind: choice}\n")
        assert "notes" not in quiet  # no stream yet: nothing to compare with
        with FeedClient(server.endpoints["ingest"]) as feed:
            feed.send(trades("EFF") + trades("ES[H27]"))
        wait_for(lambda: server.pipeline.ticks_in == 10 and not server.pipeline.busy)
        lower = tmp_path / "qlow.yaml"
        lower.write_text("queries:\n  - {name: lower, streams: [eff], question: direction_5, kind: choice}\n"
                         "  - {name: es, streams: ['ES[H27]'], question: direction_5, kind: choice}\n"
                         "  - {name: fine, streams: ['ES[[]H27]', EFF], question: direction_5, kind: choice}\n"
                         "  - {name: effs, streams: [EFF], question: direction_5, kind: choice}\n")
        assert main(["register", str(lower), "--control", server.endpoints["control"]]) in (0, None)
        err = capsys.readouterr().err
        assert 'flashtick register: note: query "lower": its streams ["eff"] match none of the streams the service ' \
               'holds now ("EFF", "ES[H27]"), so it answers nothing until one that matches comes; did you mean ' \
               '"EFF"?' in err, err
        assert 'note: query "es": its streams ["ES[H27]"] match none' in err
        assert 'the stream "ES[H27]" exists, and its name reads as a glob: write "ES[[]H27]" to match it' in err
        assert 'query "fine"' not in err
        reply = control.call("get", query="lower", stream="EFF")
        assert reply["answer"] is None and reply["matches_stream"] is False
        assert main(["get", "EFF", "lower", "--control", server.endpoints["control"]]) == 1
        err = capsys.readouterr().err
        assert 'flashtick get: query "lower" does not stand on stream "EFF": its streams ["eff"] do not match it; ' \
               'did you mean "EFF"?' in err, err
        assert "yet" not in err
        assert control.call("get", query="fine", stream="ES[H27]").get("matches_stream") is not False
        # a query that covers other streams: those are named, not register's "did you mean" the asked stream
        # (review397 #3: `did you mean "SYN.D" for "SYN.A"` on a get of SYN.D)
        assert control.call("get", query="effs", stream="ES[H27]")["note"] == \
            'query "effs" does not stand on stream "ES[H27]": its streams ["EFF"] do not match it; the streams it ' \
            'covers now: "EFF"'


def test_a_backtest_note_gives_the_escape_of_a_literal_name(checkpoint: Path, tmp_path: Path) -> None:
    data = tmp_path / "uni.parquet"
    pl.DataFrame([t.to_wire() for t in trades("ES[H27]") + trades("EFF")]).write_parquet(data)
    queries = tmp_path / "uni.yaml"
    queries.write_text("queries:\n  - {name: es, streams: ['ES[H27]'], question: direction_5, kind: choice}\n"
                       "  - {name: dir, streams: [EFF], question: direction_5, kind: choice}\n")
    engine = {"model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16}}
    notes: list[str] = []
    run_backtest(ServiceConfig.from_dict(engine), [data], queries, tmp_path / "out.parquet", batch_ms=100.0,
                 progress=False, note=notes.append)
    err = "\n".join(notes)
    assert 'query "es" published no answer: its streams ["ES[H27]"] match none of the streams replayed' in err, err
    assert 'the stream "ES[H27]" exists, and its name reads as a glob: write "ES[[]H27]" to match it' in err
