"""One pair, one name, live as in files (review379 #7): a live LMAX-style `EUR/USD` was refused (`bad_stream: contains
"/"`) while file replay names it `EUR-USD`, and `ingest.rename` wanted one entry per pair, so a pair added upstream
was refused. `ingest.slashes: dash` reads a '/' as file replay does (one rule, connectors/stream_names.dashed_name),
`ingest.rename` takes a pattern (`"*/*": "*-*.lmax"`), and `get`/`ask`/`forget` of the slashed name find the stream.
A real server, real sockets on 127.0.0.1."""

from __future__ import annotations

import msgpack
import polars as pl
import pytest

from conftest import serving, tiny_tick_checkpoint
from connectors.feed import FeedClient
from connectors.replay import FileReplay
from connectors.ticks import InvalidTick, quote
from engine.service.client import ControlClient
from engine.service.config import ConfigError
from test_service_limits import EPHEMERAL, pipeline_config, wait_for

BASE_TS = 1_704_463_200_000_000_000
QUERY = "queries:\n  - {name: dir5, streams: ['*'], question: direction_5, kind: choice, trigger: {ticks: 5}}\n"


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"))


def quotes(stream: str, n: int, first: int = 0) -> list[dict]:
    return [{"stream": stream, "ts": BASE_TS + (first + i) * 10**8, "bid": 1.0943 + i * 1e-5, "ask": 1.0944 + i * 1e-5}
            for i in range(n)]


def served(checkpoint, tmp_path, ingest: dict):
    (tmp_path / "q.yaml").write_text(QUERY)
    return serving(pipeline_config(checkpoint, endpoints=EPHEMERAL, ingest=ingest, queries=str(tmp_path / "q.yaml")))


def push_all(server, ticks: list[dict]) -> None:
    import zmq
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.linger = 1000
    push.connect(server.endpoints["ingest"])
    try:
        for i in range(0, len(ticks), 10):
            push.send(msgpack.packb(ticks[i: i + 10]))
    finally:
        push.close()


def test_slashes_dash_names_a_live_pair_as_file_replay_does_and_get_ask_find_it(model, tmp_path) -> None:
    path = tmp_path / "eurusd.csv"
    pl.DataFrame(quotes("EUR/USD", 3)).write_csv(path)
    replayed = {tick.stream for tick in FileReplay([path]).next_batch(10)}
    assert replayed == {"EUR-USD"}
    # review392 #10: the Python API's quote() refused the venue's name such a service takes; venue_name=True sends it
    with pytest.raises(InvalidTick, match=r'contains "/".*send it as it is with venue_name=True'):
        quote("EUR/USD", BASE_TS, 1.0943, 1.0944)
    with served(model, tmp_path, {"slashes": "dash"}) as server:
        push_all(server, quotes("EUR/USD", 25))
        wait_for(lambda: server.pipeline.ticks_in == 25, timeout_s=60)  # (then a second connection's, in order)
        with FeedClient(server.endpoints["ingest"]) as feed:
            feed.send([quote(t["stream"], t["ts"], t["bid"], t["ask"], venue_name=True)
                       for t in quotes("EUR/USD", 5, first=25)])
        wait_for(lambda: server.pipeline.ticks_in == 30, timeout_s=60)
        with ControlClient(server.endpoints["control"]) as control:
            streams = control.call("streams")["streams"]
            assert set(streams) == replayed, streams  # the name file replay gives, one session
            wait_for(lambda: control.call("get", stream="EUR/USD", query="dir5")["answer"] is not None, timeout_s=60)
            answer = control.call("get", stream="EUR/USD", query="dir5")["answer"]
            assert answer["stream"] == "EUR-USD" and answer["topic"] == "dir5/EUR-USD/"
            assert control.call("ask", stream="EUR/USD", query="dir5")["answer"]["stream"] == "EUR-USD"
    assert dict(server.pipeline.rejected) == {}


def test_without_it_a_slashed_name_is_refused_and_the_refusal_names_the_option(model, tmp_path) -> None:
    with served(model, tmp_path, {}) as server:
        push_all(server, quotes("EUR/USD", 3) + quotes("EURUSD", 3))
        wait_for(lambda: server.pipeline.ticks_in + server.pipeline.rejected["bad_stream"] == 6, timeout_s=60)
        with ControlClient(server.endpoints["control"]) as control:
            reply = control.request({"op": "get", "stream": "EUR/USD", "query": "dir5"})
    assert server.pipeline.rejected["bad_stream"] == 3 and server.pipeline.ticks_in == 3
    hint = "serve's ingest.slashes: dash (or an ingest.rename pattern, \"*/*\": \"*-*\") reads such names so live"
    assert reply["ok"] is False and hint in reply["error"], reply


def test_a_rename_pattern_names_a_whole_ecn_feed_and_a_pair_added_upstream(model, tmp_path) -> None:
    rename = {"XAU/USD": "GOLD", "*/*": "*-*.lmax"}  # a name written whole comes first, then the patterns
    with served(model, tmp_path, {"rename": rename}) as server:
        pairs = ["EUR/USD", "USD/JPY", "GBP/USD", "XAU/USD"]  # GBP/USD: the one a per-pair map left out
        push_all(server, [t for i, pair in enumerate(pairs) for t in quotes(pair, 10, 100 * i)]
                 + quotes("A/B/C", 1))  # (each '*' one part: 'B/C' keeps its '/', refused)
        wait_for(lambda: server.pipeline.ticks_in + server.pipeline.rejected["bad_stream"] == 41, timeout_s=60)
        with ControlClient(server.endpoints["control"]) as control:
            streams = control.call("streams")["streams"]
            assert set(streams) == {"EUR-USD.lmax", "USD-JPY.lmax", "GBP-USD.lmax", "GOLD"}, streams
            wait_for(lambda: control.call("get", stream="GBP/USD", query="dir5")["answer"] is not None, timeout_s=60)
            assert control.call("get", stream="GBP/USD", query="dir5")["answer"]["stream"] == "GBP-USD.lmax"
            # a feed resuming under the venue's names finds its streams (review391 #6: nil, "never seen"), answered
            # under the names it asked, each renamed one saying its stream; a placing call too
            asked = control.call("streams", streams=["GBP/USD", "GOLD", "NZD/USD"], drain=True)
            assert list(asked["streams"]) == ["GBP/USD", "GOLD", "NZD/USD"] and asked["streams"]["NZD/USD"] is None
            gbp, last_ts = asked["streams"]["GBP/USD"], streams["GBP-USD.lmax"]["last_ts"]
            assert (gbp["stream"], gbp["ticks"], gbp["last_ts"]) == ("GBP-USD.lmax", 10, last_ts), gbp
            assert asked["streams"]["GOLD"]["ticks"] == 10 and "stream" not in asked["streams"]["GOLD"]
            most = control.call("streams", streams=["XAU/USD", "USD/JPY"], sort="ticks", limit=1)["streams"]
            assert list(most) == ["XAU/USD"] and most["XAU/USD"]["stream"] == "GOLD", most  # (ties by name)
            assert control.call("forget", stream="XAU/USD")["ok"]
            assert "GOLD" not in control.call("streams")["streams"]
            # several names at once find theirs the same way (forget's `streams`, all or nothing)
            assert control.call("forget", streams=["EUR/USD", "USD-JPY.lmax"])["ok"]
            assert set(control.call("streams")["streams"]) == {"GBP-USD.lmax"}
    assert server.pipeline.rejected["bad_stream"] == 1


@pytest.mark.parametrize("ingest, said", [
    ({"rename": {"*/*": "*"}}, "holds 2 '*' and its stream name '*' holds 1"),
    ({"rename": {"*": "X*"}}, "is '*' alone: it would rename every stream"),
    ({"rename": {"*/*": "_*-*"}}, "not a valid stream name"),
    ({"slashes": "strip"}, "ingest.slashes must be \"refuse\" or \"dash\""),
])
def test_a_pattern_or_policy_that_cannot_work_is_refused_at_load(model, ingest, said) -> None:
    with pytest.raises(ConfigError) as refused:
        pipeline_config(model, ingest=ingest)
    assert said in str(refused.value), refused.value
