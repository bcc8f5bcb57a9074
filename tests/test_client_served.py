"""The Python clients against a real Server (a seeded tiny tick model, ephemeral 127.0.0.1 ports): a GaplessSubscriber
given saved seqs without their epoch that are of another epoch starts over instead of dropping every answer as a
duplicate; an ask naming a stream the service never saw has its own reason and names the close ones."""

from __future__ import annotations

import json
import time

import msgpack
import pytest

from engine.service.client import ControlBusy, ControlClient, ControlError, ControlTimeout, GaplessSubscriber
from wire_client import fresh_stream, push_socket, trade, wait_until
from wire_server import server  # noqa: F401 (fixture)


def feed(endpoints: dict[str, str], stream: str, count: int) -> None:
    push = push_socket(endpoints["ingest"])
    start = time.time_ns() - 10**9 * 3600
    push.send(msgpack.packb([trade(stream, start + i * 10**6, price=100.0 + 0.01 * (i % 7)) for i in range(count)]))
    push.close(linger=5000)


def test_saved_seqs_of_another_epoch_given_without_it_start_over_instead_of_silence(server) -> None:  # noqa: F811
    """Saved seqs past the service's (its seqs started over: no data directory, or another) were taken as this
    epoch's: every live answer was dropped as a duplicate, silently, until the topic passed the saved seq."""
    stream = fresh_stream("EP")
    topic = f"dir/{stream}/"
    with ControlClient(server["control"], timeout_s=30) as control:
        for _ in range(3):
            feed(server, stream, 10)
        wait_until(lambda: control.topics(topic).get(topic, {}).get("last_seq"))
        last = control.topics(topic)[topic]["last_seq"]
        subscriber = GaplessSubscriber(server["answers"], control, [topic], last_seqs={topic: last + 100_000})
        with subscriber, pytest.warns(RuntimeWarning, match="of another epoch"):
            subscriber.wait_ready(timeout_s=30)
        assert subscriber.epochs_seen == 1
        got = []
        deadline = time.monotonic() + 60
        while len(got) < last and time.monotonic() < deadline:
            if (message := subscriber.recv(timeout_s=0.5)) is not None:
                got.append(message[1])
        assert [a["seq"] for a in got[:last]] == list(range(1, last + 1))  # each kept answer, from the first
        assert all(a["epoch"] == subscriber.epoch for a in got)  # fetched ones carry it too


def test_saved_seqs_of_this_epoch_given_without_it_resume_as_before(server) -> None:  # noqa: F811
    stream = fresh_stream("EQ")
    topic = f"dir/{stream}/"
    with ControlClient(server["control"], timeout_s=30) as control:
        feed(server, stream, 30)
        wait_until(lambda: control.topics(topic).get(topic, {}).get("last_seq"))
        last = control.topics(topic)[topic]["last_seq"]
        with GaplessSubscriber(server["answers"], control, [topic], last_seqs={topic: last}) as subscriber:
            subscriber.wait_ready(timeout_s=30)
            assert subscriber.epochs_seen == 0
            feed(server, stream, 10)
            message = subscriber.recv(timeout_s=30)
            assert message is not None and message[1]["seq"] == last + 1


def test_an_ask_on_a_stream_never_seen_has_its_own_reason_and_names_the_close_ones(server) -> None:  # noqa: F811
    stream = fresh_stream("ASK")
    with ControlClient(server["control"], timeout_s=30) as control:
        feed(server, stream, 5)
        wait_until(lambda: stream in control.call("streams", streams=[stream])["streams"]
                   and control.call("streams", streams=[stream])["streams"][stream] is not None)
        with pytest.raises(ControlError) as raised:
            control.call("ask", stream=stream.lower(), query="dir")
    assert raised.value.reason == "unknown_stream"
    assert f"did you mean {json.dumps(stream)}" in str(raised.value)


def test_a_register_too_large_for_the_control_socket_says_so_instead_of_a_restart(server, tmp_path,  # noqa: F811
                                                                                   capsys) -> None:
    """A queries file over limits.max_control_bytes: ZeroMQ drops the connection, and `flashtick register` said "the
    service restarted? ask again", which fails the same way for ever (a supervisor retrying on it loops)."""
    from engine.service.cli import main

    big = tmp_path / "big.yaml"
    big.write_text("queries: [{name: bq, streams: ['*'], question: direction_5, kind: choice, trigger: batch}]\n#"
                   + "x" * (3 << 20) + "\n")  # over this server's 1 MiB max_control_bytes
    capsys.readouterr()
    code = main(["register", str(big), "--control", server["control"], "--timeout", "30"])
    err = capsys.readouterr().err
    assert code == 2 and f"{big}: the connection dropped on a register of 3,145,8" in err and \
        "limits.max_control_bytes" in err and "restarted" not in err, err


def test_forget_of_a_stream_never_seen_has_the_reason_of_ask_and_names_the_close_ones(server) -> None:  # noqa: F811
    """Review 115 (finding 14): `forget` of an unknown stream replied bad_request with no did-you-mean, where `ask`
    of the same name replies unknown_stream and names the close ones."""
    stream = fresh_stream("FGT")
    with ControlClient(server["control"], timeout_s=30) as control:
        feed(server, stream, 5)
        wait_until(lambda: control.call("streams", streams=[stream])["streams"][stream] is not None)
        with pytest.raises(ControlError) as raised:
            control.call("forget", stream=stream.lower())
    assert raised.value.reason == "unknown_stream"
    assert "nothing to forget" in str(raised.value) and f"did you mean {json.dumps(stream)}" in str(raised.value)


def test_a_reply_wait_too_short_for_any_reply_is_named_as_the_cause_not_a_busy_service(server) -> None:  # noqa: F811
    """Review 115 (finding 14): a 1 ns reply wait on an idle, connected service raised ControlBusy, said as `(0 s)`
    and "the service did not answer in time (busy?)": the cause is the time-out."""
    with ControlClient(server["control"], timeout_s=30) as control:
        control.call("health")  # connected, and the service answers
        # (a reply may still beat a 1 ns wait when this process is descheduled between the send and the first poll,
        # as in one run beside a second suite: the call is tried until one runs out)
        for _ in range(50):
            try:
                control.call("health", timeout_s=1e-9)
            except ControlTimeout as late:
                raised = late
                break
        else:
            pytest.fail("50 calls with a 1 ns reply wait all got their reply")
        assert not isinstance(raised, ControlBusy)
        assert "within the time-out (1e-09 s): the time-out may be too short" in str(raised), raised
        assert "busy" not in str(raised) and "timeout_s" in str(raised)
        assert control.call("health")["ok"]  # the late reply of the short call is not taken for this one's


def test_a_negative_saved_seq_is_refused_at_once_and_leaving_the_topic_out_fetches_it_all(server) -> None:  # noqa: F811
    """Review 115 (finding 4): last_seqs={topic: -1} (a "nothing seen yet" sentinel) delivered nothing, ever, silently:
    its fetch `answers after -1` was refused, and every answer of the topic waited behind it."""
    stream = fresh_stream("NEG")
    topic = f"dir/{stream}/"
    with ControlClient(server["control"], timeout_s=30) as control:
        feed(server, stream, 30)
        wait_until(lambda: control.topics(topic).get(topic, {}).get("last_seq"))
        for saved in (-1, -5, 2.0, None):
            with pytest.raises(ValueError, match=rf'last_seqs\["{topic}"\] is {json.dumps(saved)}: a saved seq is an '
                                                 r"int >= 0.*leave it out \(or give 0\)"):
                GaplessSubscriber(server["answers"], control, [topic], last_seqs={topic: saved})
        with GaplessSubscriber(server["answers"], control, [topic], last_seqs={}) as subscriber:  # as the error says
            subscriber.wait_ready(timeout_s=30)
            message = subscriber.recv(timeout_s=30)
            assert message is not None and message[0] == topic and message[1]["seq"] == 1
