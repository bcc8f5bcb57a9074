"""The Python clients as a notebook uses them (review354), against a real Server (a seeded tiny tick model,
ephemeral 127.0.0.1 ports): a DataFrame's rows sent as they are, nulls and all (#5); clients dropped without
close() on a cell re-run close their sockets and end their subscription, with a ResourceWarning (#11); a key an op
does not take refused before anything is sent (#12)."""

from __future__ import annotations

import gc
import time

import msgpack
import polars as pl
import pytest

from connectors.feed import FeedClient
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.client import AnswerSubscriber, ControlClient, ControlError, GaplessSubscriber
from wire_client import fresh_stream, push_socket, wait_until
from wire_server import server  # noqa: F401 (fixture)


def held_ticks(control: ControlClient, names: list[str]) -> int:
    return sum((info or {}).get("ticks", 0) for info in control.call("streams", streams=names)["streams"].values())


def rejected(control: ControlClient) -> dict[str, int]:
    return control.call("stats")["stats"].get("rejected", {})


def test_a_polars_frames_rows_with_nulls_are_taken_whole(server) -> None:  # noqa: F811
    """`df.to_dicts()` gives a quote None for price/size/side and a trade None for bid/ask/...; the wire says a nil
    field is the same as one left out, and every such tick was refused as unknown_field."""
    names = {f"SYN.{c}": fresh_stream("DF") for c in "ABCD"}
    ticks = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(120)
    frame = pl.DataFrame([t.to_wire() for t in ticks]).with_columns(pl.col("stream").replace(names))
    rows = frame.to_dicts()
    assert {r["kind"] for r in rows} == {"trade", "quote"}
    assert all(any(v is None for v in r.values()) for r in rows)  # every row carries the other kind's nulls
    with ControlClient(server["control"], timeout_s=30) as control:
        before = rejected(control)
        with FeedClient(server["ingest"]) as feed:
            assert feed.send(rows) == len(rows)
        wait_until(lambda: held_ticks(control, list(names.values())) == len(rows))
        assert rejected(control) == before


def test_a_foreign_clients_nil_fields_are_left_out(server) -> None:  # noqa: F811
    """The same from a client of another language: msgpack nils, no kind (inferred from the fields not nil)."""
    stream = fresh_stream("NIL")
    start = time.time_ns() - 3600 * 10**9
    maps = [{"stream": stream, "ts": start, "price": 101.5, "size": 2.0, "side": None, "bid": None, "ask": None},
            {"stream": stream, "ts": start + 1, "price": None, "size": None, "bid": 101.0, "ask": 102.0,
             "bid_size": None, "seq": None},
            {"stream": stream, "ts": start + 2, "kind": None, "price": 101.75, "size": 1.0, "ask_size": None}]
    with ControlClient(server["control"], timeout_s=30) as control:
        before = rejected(control)
        push = push_socket(server["ingest"])
        push.send(msgpack.packb(maps))
        push.close(linger=5000)
        wait_until(lambda: held_ticks(control, [stream]) == 3)
        assert rejected(control) == before


def subscriptions(control: ControlClient) -> int:
    return control.call("stats")["stats"]["subscriptions"]


@pytest.mark.filterwarnings("error::ResourceWarning")  # pyzmq's own "Unclosed socket": the client closed none
def test_clients_dropped_unclosed_close_their_sockets_and_end_their_subscription(server) -> None:  # noqa: F811
    """A cell re-run rebinds the name: the old client is collected with its sockets open (4 descriptors and a live
    subscription each time). Its finalizer closes them, saying so."""
    with ControlClient(server["control"], timeout_s=30) as control:
        held = subscriptions(control)
        answers = AnswerSubscriber(server["answers"], [f"dir/{fresh_stream('GC')}/"])
        answers.wait_ready(timeout_s=30)
        wait_until(lambda: subscriptions(control) == held + 1)
        sockets = [answers._sock]
        dropped = ControlClient(server["control"])
        dropped.call("health")
        sockets.append(dropped._sock)
        with pytest.warns(ResourceWarning) as said:
            del answers, dropped
            gc.collect()
        assert sorted(str(w.message).split(" was not closed")[0] for w in said) == [
            f"AnswerSubscriber to {server['answers']}", f"ControlClient to {server['control']}"]
        assert all(sock.closed for sock in sockets)
        wait_until(lambda: subscriptions(control) == held)  # the service no longer holds the subscription


@pytest.mark.filterwarnings("error::ResourceWarning")
def test_a_gapless_subscriber_dropped_unclosed_is_said_once_as_itself(server) -> None:  # noqa: F811
    with ControlClient(server["control"], timeout_s=30) as control:
        gapless = GaplessSubscriber(server["answers"], control, [f"dir/{fresh_stream('GG')}/"])
        sock = gapless.subscriber._sock
        with pytest.warns(ResourceWarning) as said:
            del gapless
            gc.collect()
        said_of = [str(w.message).split(" was not closed")[0] for w in said]
        assert said_of == [f"GaplessSubscriber to {server['answers']}"]
        assert sock.closed
        control.call("health")  # the application's own client is its to close, and still serves


def test_a_closed_client_says_nothing_when_collected(server, recwarn) -> None:  # noqa: F811
    with ControlClient(server["control"]) as control, FeedClient(server["ingest"]) as feed:
        control.call("health")
        feed.send([])
    del control, feed
    gc.collect()
    assert not [w for w in recwarn if issubclass(w.category, ResourceWarning)]


def requests_served(control: ControlClient) -> int:
    return control.call("stats")["stats"]["control_requests"]


def test_a_key_the_op_does_not_take_is_refused_before_it_is_sent(server) -> None:  # noqa: F811
    """`max_stale=20` (the CLI's --max-stale) was sent, ignored by the service with only a note, and the ask computed
    a fresh answer where `max_stale_ticks=20` reads the cache."""
    stream = fresh_stream("KEY")
    with ControlClient(server["control"], timeout_s=30) as control:
        step = -requests_served(control) + requests_served(control)  # what a `stats` call itself adds
        counted = requests_served(control)
        with pytest.raises(TypeError) as refused:
            control.call("ask", stream=stream, query="dir", max_stale=20)
        assert requests_served(control) == counted + step  # nothing was sent
        message = str(refused.value)
        assert message.startswith('ControlClient.call("ask"): key "max_stale" not taken by op "ask" (its keys: '
                                  'stream, query, spec, kind, max_stale_ticks; id; ')
        assert message.endswith('did you mean "max_stale_ticks"?')
        with pytest.raises(TypeError, match=r'keys "verbose", "x" not taken by op "health" \(its keys: none but id'):
            control.call("health", verbose=True, x=1)
        with pytest.raises(ControlError) as unknown:  # the right key is sent: the service answers for the stream
            control.call("ask", stream=stream, query="dir", max_stale_ticks=20, id="mine")
        assert unknown.value.reason == "unknown_stream"
        raw = control.request({"op": "health", "verbose": True})  # the wire's own way: served, with a note
        assert raw["ok"] and raw["note"].startswith('key "verbose" ignored: op "health" takes no such key')
        with pytest.raises(ControlError, match="unknown op"):  # an op this client does not know: the service's word
            control.call("reticulate", splines=3)
