"""CURVE client authentication over real sockets on 127.0.0.1: the allow-list (ZAP), CURVE ingest,
key files, and what a refused client is told."""

from __future__ import annotations

import contextlib
import shutil
import socket
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import zmq

from conftest import serving, tiny_tick_checkpoint
from connectors.feed import FeedClient, FeedTimeout
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.auth import (KeyFileError, allowed_client_keys, keygen, read_keypair, read_public_key,
                                 server_keypair)
from engine.service.client import AnswerSubscriber, ControlClient, ControlError
from engine.service.config import ConfigError, ServiceConfig

pytestmark = pytest.mark.skipif(not zmq.has("curve"), reason="libzmq built without CURVE")

DIR_QUERY = "queries:\n  - {name: dir, streams: ['*'], question: direction_20, kind: choice, trigger: batch}\n"
LOCAL = {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0", "control": "tcp://127.0.0.1:0"}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"))


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """server, alice (listed) and mallory (not listed) keypairs, and the allow-list directory."""
    root = tmp_path_factory.mktemp("keys")
    for name in ("server", "alice", "mallory"):
        keygen(root, name)
    (root / "allowed").mkdir()
    shutil.copy(root / "alice.key", root / "allowed")
    return root


def curve_config(checkpoint, keys, endpoints: dict = LOCAL, **curve) -> ServiceConfig:
    return ServiceConfig.from_dict({
        "model": {"path": str(checkpoint)}, "kv": {"cells": 4096, "block_size": 16},
        "endpoints": endpoints, "limits": {"heartbeat_s": 0.2},
        "curve": {"enabled": True, "server_secret_key_file": str(keys / "server.key_secret"), **curve},
    })


# Bounds that only catch a hang. The server runs on a thread of this process, its ZAP handler on another: on a
# loaded machine (8 test runs on 2 cores) a CURVE handshake with that handler took past FeedClient's 3 s connect
# timeout, and a tick's way to `ticks_in` past a 10 s wait, failing tests whose assertions held
HANG_S = 120.0
HANDSHAKE_MS = int(HANG_S * 1000)  # a listed feed's first send waits this long for its handshake (IMMEDIATE)


def wait_for(predicate, timeout_s: float = HANG_S, state=lambda: "") -> None:
    """Until ``predicate()``; past ``timeout_s`` an AssertionError that says ``state()`` (what was seen instead)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"condition not met in time {state()}"
        time.sleep(0.05)


def _no_zeromq_peers_are_counted_as_failed_handshakes(server, control: ControlClient, capfd) -> None:
    """Random bytes and HTTP get no handshake event from libzmq, only their connection accepted and dropped: each is
    counted as a failed handshake and said on stderr, naming the socket."""
    before = control.call("stats")["stats"]["handshakes_failed"]
    host, port = server.endpoints["control"].removeprefix("tcp://").rsplit(":", 1)
    peers = [bytes(range(1, 256)) * 16] * 3 + [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"] * 2
    for sent in peers:  # one at a time, each closed by the client once sent
        with socket.create_connection((host, int(port)), timeout=10) as peer:
            peer.sendall(sent)
    wait_for(lambda: control.call("stats")["stats"]["handshakes_failed"] == before + len(peers), timeout_s=120)
    assert control.call("health")["status"] == "serving"  # (its own connection, handshaken, is not counted)
    logged = capfd.readouterr().err
    assert "refused a client on the control socket: its handshake failed: " in logged, logged


def _refused_feeds_send_nothing(server, refused: tuple[dict, ...],
                                batches: list) -> tuple[list[threading.Thread], list[BaseException]]:
    """Each feed of ``refused`` (its keys) sends its batch on a thread of its own, all at once: the handshake never
    completes, so each first send waits out its connect time-out."""
    failed: list[BaseException] = []

    def refused_feed(client_keys: dict, batch: list) -> None:
        try:
            # (1 s, not the default 3: the handshake is never to complete, so the wait is only the test's time)
            with FeedClient(server.endpoints["ingest"], linger_ms=0, send_timeout_ms=1000, connect_timeout_ms=1000,
                            **client_keys) as feed, contextlib.suppress(FeedTimeout):
                feed.send(batch)  # queued here (or timed out): the handshake never completes
                time.sleep(0.3)
        except BaseException as e:  # (said by the assertion below)
            failed.append(e)

    feeders = [threading.Thread(target=refused_feed, args=pair) for pair in zip(refused, batches)]
    for feeder in feeders:
        feeder.start()
    return feeders, failed


def test_allow_list_service_documents_and_scrapes_stats_counts_non_zeromq_peers_serves_listed_refuses_unknown_keys(
        checkpoint, keys, capfd) -> None:
    """review261 #5: with curve.clients_dir `stats` carried `auth_allowed` (and `auth_errors`), which no doc named,
    and /metrics showed neither, though wire-protocol.md says every number of `stats` is there. Every top-level key
    of such a service's `stats` is now named in the doc's `stats` row, and every count is scraped.

    Random bytes and HTTP sent to it are counted as failed handshakes (the same without an allow-list:
    test_curve_ingest_without_an_allow_list_...). Listed clients are served; unknown keys are refused at once, said
    in the log with the key and the socket; with its ZAP handler stopped, handshakes fail closed. One service for
    all of these, in this order (the last stops its ZAP handler)."""
    server_key = read_public_key(keys / "server.key")
    alice = {"server_public_key": server_key, "client_keypair": read_keypair(keys / "alice.key_secret")}
    mallory = {"server_public_key": server_key, "client_keypair": read_keypair(keys / "mallory.key_secret")}
    config = curve_config(checkpoint, keys, {**LOCAL, "metrics_port": 0}, clients_dir=str(keys / "allowed"))
    scrapes: list[str] = []

    def scraped_or_absent() -> bool:
        """A scrape taken; whether it counts the handshake, or lacks the line (the assertions below say so)."""
        scrapes.append(urllib.request.urlopen(server.endpoints["metrics"], timeout=HANG_S).read().decode())
        lines = [line for line in scrapes[-1].splitlines() if line.startswith("flashtick_auth_allowed_total ")]
        return len(lines) != 1 or float(lines[0].split()[1]) >= 1

    with serving(config) as server:
        with ControlClient(server.endpoints["control"], timeout_s=HANG_S, **alice) as control:
            stats = control.call("stats")["stats"]
            # /metrics serves a snapshot the engine refreshes each heartbeat: a scrape right after the stats call
            # could predate the count of this client's handshake (`flashtick_auth_allowed_total 0` on a loaded
            # machine)
            wait_for(scraped_or_absent)
            stats = control.call("stats")["stats"]  # (again: the first could predate the handshake's count)
            scraped = scrapes[-1]
            doc = (Path(__file__).parents[1] / "docs" / "wire-protocol.md").read_text()
            # the op's own section (the op table's row is one line: its reply's keys are under "#### Op `stats`")
            row = doc.split("#### Op `stats`", 1)[1].split("\n#### ", 1)[0]
            assert [key for key in stats if f"`{key}`" not in row] == []
            families = {line.split()[2] for line in scraped.splitlines() if line.startswith("# TYPE ")}
            scraped_as = {"uptime_s": "flashtick_process_start_time_seconds", "lag_s": "flashtick_lag_seconds",
                          "stats_time": "flashtick_stats_timestamp_seconds"}  # (the names wire-protocol.md gives)
            counts = [key for key, value in stats.items() if type(value) in (int, float)]
            assert "auth_allowed" in counts and "auth_errors" in counts
            assert [key for key in counts if not {f"flashtick_{key}", f"flashtick_{key}_total",
                                                  scraped_as.get(key)} & families] == []
            allowed = [line for line in scraped.splitlines() if line.startswith("flashtick_auth_allowed_total ")]
            assert stats["auth_allowed"] >= 1 and len(allowed) == 1 and float(allowed[0].split()[1]) >= 1, allowed

            _no_zeromq_peers_are_counted_as_failed_handshakes(server, control, capfd)

        market = SyntheticMarket(SyntheticConfig(seed=1))
        with ControlClient(server.endpoints["control"], timeout_s=10, **alice) as control, \
                AnswerSubscriber(server.endpoints["answers"], ["dir/"], **alice) as answers:
            assert control.call("register", yaml=DIR_QUERY)["registered"] == ["dir"]
            answers.wait_ready(timeout_s=HANG_S)
            with FeedClient(server.endpoints["ingest"], connect_timeout_ms=HANDSHAKE_MS,
                            linger_ms=HANDSHAKE_MS) as feed:  # ingest stays plain without curve.ingest
                feed.send(market.next_batch(20))
            message = answers.recv(timeout_s=HANG_S)
            assert message is not None
            topic, payload = message
            assert topic.startswith("dir/") and payload["seq"] >= 1
            assert control.call("ask", stream=payload["stream"], query="dir")["answer"]["stream"] == payload["stream"]

            # Told at once, not by a time-out: the refusal ("refused the connection: ...") is raised by the client's
            # socket monitor as the handshake fails; a time-out would read "no reply from ... within the time-out",
            # and HANG_S only bounds a hang (no clock in the assertion: a loaded machine may take seconds to refuse)
            for client_keys in (mallory, {"server_public_key": server_key}):  # unknown key; a throwaway keypair
                with ControlClient(server.endpoints["control"], timeout_s=HANG_S, **client_keys) as intruder, \
                        pytest.raises(ControlError, match="refused the connection: the server refused this client's "
                                                          "key .CURVE authentication failed") as refused:
                    intruder.call("register", yaml=DIR_QUERY.replace("dir", "evil"))
                assert not isinstance(refused.value, TimeoutError), refused.value
            with AnswerSubscriber(server.endpoints["answers"], [""], **mallory) as intruder, \
                    pytest.raises(TimeoutError, match="refused the subscription: the server refused this client's key"):
                intruder.wait_ready(timeout_s=HANG_S)
            with ControlClient(server.endpoints["control"], timeout_s=5) as plain, \
                    pytest.raises(ControlError, match="give --server-key"):
                plain.call("health")

            assert [q["name"] for q in control.call("list")["queries"]] == ["dir"]  # nothing got in
            stats = control.call("stats")["stats"]  # the listed client is still served
            assert stats["auth_denied"] >= 3 and stats["auth_allowed"] >= 2 and stats["auth_errors"] == 0
            mallory_key = read_public_key(keys / "mallory.key").decode()
            logged = capfd.readouterr().err  # the log says which key, on which socket
            assert f"refused a client: unknown client key {mallory_key} on the control socket" in logged, logged
            assert f"unknown client key {mallory_key} on the answers socket" in logged, logged
            assert logged.count(f"unknown client key {mallory_key} on the control socket") == 1, logged  # retries not

            server._auth.stop()  # no ZAP handler any more: handshakes fail closed, never open
            with ControlClient(server.endpoints["control"], timeout_s=2, **alice) as late, \
                    pytest.raises(ControlError):
                late.call("health")


def test_curve_ingest_takes_ticks_from_listed_feeds_only_and_a_feed_whose_key_is_refused_is_told_so(
        checkpoint, keys, capfd) -> None:
    """CURVE ingest with an allow-list: feeds without keys, with a throwaway keypair or an unknown key send nothing
    in; a listed feed's ticks go in; the refusals are counted and said.

    A reviewer's feed with a key not in the allow-list ended with "no heartbeat ...: is it the answers endpoint
    of a running `flashtick serve`?", sending an on-call engineer to look for a dead server. One service for both."""
    from connectors.reject_watch import RejectWatch

    server_key = read_public_key(keys / "server.key")
    market = SyntheticMarket(SyntheticConfig(seed=2))
    config = curve_config(checkpoint, keys, clients_dir=str(keys / "allowed"), ingest=True)
    with serving(config) as server, ControlClient(server.endpoints["control"], timeout_s=HANG_S,
                                                  server_public_key=server_key,
                                                  client_keypair=read_keypair(keys / "alice.key_secret")) as control:
        refused = ({}, {"server_public_key": server_key},
                   {"server_public_key": server_key, "client_keypair": read_keypair(keys / "mallory.key_secret")})
        # the three at once, each on its own thread: a first send waits out its connect time-out for a handshake
        # that never completes, 3 waits one after another
        feeders, failed = _refused_feeds_send_nothing(server, refused, [market.next_batch(10) for _ in refused])
        for feeder in feeders:
            feeder.join(HANG_S)
        assert failed == [] and not any(feeder.is_alive() for feeder in feeders), failed
        assert control.call("stats")["stats"]["ticks_in"] == 0
        with FeedClient(server.endpoints["ingest"], server_public_key=server_key, connect_timeout_ms=HANDSHAKE_MS,
                        linger_ms=HANDSHAKE_MS, client_keypair=read_keypair(keys / "alice.key_secret")) as feed:
            feed.send(market.next_batch(10))
        wait_for(lambda: control.call("stats")["stats"]["ticks_in"] == 10)
        # (the ZAP handler counts a denial once it has run: its thread may still be behind on a loaded machine)
        wait_for(lambda: control.call("stats")["stats"]["auth_denied"] >= 2)
        # the feed without keys never reaches the ZAP handler: its failed handshake is counted and said too (it was
        # invisible), naming the socket
        wait_for(lambda: control.call("stats")["stats"]["handshakes_failed"] >= 1)
        logged = capfd.readouterr().err
        assert "flashtick: refused a client on the ingest socket: its handshake failed: a client without CURVE keys " \
               "or with a wrong --server-key" in logged, logged

        for client, why in (({"server_public_key": server_key,
                               "client_keypair": read_keypair(keys / "mallory.key_secret")},
                              "the server refused this client's key (CURVE authentication failed"),
                             # libzmq reports a client without keys as PROTOCOL or NO_DETAIL by the timing of the
                             # server's close (a loaded machine gives NO_DETAIL twice): the specific text, or the
                             # general one that names --server-key too; never "is the service running"
                             ({}, ("the server uses CURVE and this client does not",
                                   "the handshake failed: if the server uses CURVE, give --server-key"))):
            with RejectWatch(server.endpoints["answers"], **client) as watch, \
                    pytest.raises(FeedTimeout, match=r"no heartbeat from .* in 2 s: ") as err:
                # the refusal is known once the server's refusal reached the watch's socket monitor: 2 s did not
                # always suffice on a loaded machine (the ZAP handler's thread behind), which then read as "is it
                # running?". Waited for here, so that the 2 s wait below says what a refusal says
                monitor = watch._handshake  # noqa: SLF001 - the watch's own socket monitor
                wait_for(lambda: monitor.refused() is not None, state=lambda: {
                    name: getattr(monitor, name) for name in ("connected", "succeeded", "failure", "vague",
                                                              "disconnects", "connect_retries")})
                watch.wait_ready(2.0)
            said = (why,) if isinstance(why, str) else why
            assert any(text in str(err.value) for text in said) and "running" not in str(err.value), err.value


def test_curve_ingest_without_an_allow_list_needs_only_the_server_key_and_counts_non_zeromq_peers(
        checkpoint, keys, capfd) -> None:
    """Without curve.clients_dir (no ZAP handler): random bytes and HTTP are counted as failed handshakes as with
    one; a feed with the server's key alone sends in, a plain feed's ticks never get in. One service for both."""
    server_key = read_public_key(keys / "server.key_secret")  # the public half of a secret certificate
    market = SyntheticMarket(SyntheticConfig(seed=3))
    with serving(curve_config(checkpoint, keys, ingest=True)) as server:
        with ControlClient(server.endpoints["control"], timeout_s=60, server_public_key=server_key,
                           client_keypair=read_keypair(keys / "alice.key_secret")) as control:
            _no_zeromq_peers_are_counted_as_failed_handshakes(server, control, capfd)
        with ControlClient(server.endpoints["control"], timeout_s=HANG_S, server_public_key=server_key) as control:
            # the plain feed on its own thread while the keyed feed sends: its first send waits out its connect
            # time-out
            (plain,), failed = _refused_feeds_send_nothing(server, ({},), [market.next_batch(10)])
            with FeedClient(server.endpoints["ingest"], server_public_key=server_key,
                            connect_timeout_ms=HANDSHAKE_MS, linger_ms=HANDSHAKE_MS) as feed:
                feed.send(market.next_batch(10))
            wait_for(lambda: control.call("stats")["stats"]["ticks_in"] == 10)
            plain.join(HANG_S)
            assert failed == [] and not plain.is_alive(), failed
            assert control.call("stats")["stats"]["ticks_in"] == 10  # the plain feed's never got in
            assert "auth_denied" not in control.call("stats")["stats"]  # no ZAP handler without clients_dir


def test_key_files_in_both_formats(keys, tmp_path) -> None:
    public, secret = zmq.curve_keypair()
    (tmp_path / "bare.pub").write_bytes(public + b"\n")
    (tmp_path / "bare.secret").write_bytes(secret)
    assert read_public_key(tmp_path / "bare.pub") == public
    assert read_keypair(tmp_path / "bare.secret") == (public, secret)
    alice_public, alice_secret = read_keypair(keys / "alice.key_secret")
    assert read_public_key(keys / "alice.key") == read_public_key(keys / "alice.key_secret") == alice_public
    assert server_keypair(tmp_path / "bare.secret", tmp_path / "bare.pub") == (public, secret)
    assert list(allowed_client_keys(keys / "allowed")) == [alice_public]
    (tmp_path / "junk.key").write_text("not a key\n")
    for call, message in [
        (lambda: read_keypair(keys / "alice.key"), "alice.key: holds no secret key"),
        (lambda: read_public_key(tmp_path / "junk.key"), "junk.key: not a CURVE key file"),
        (lambda: read_public_key(tmp_path / "missing.key"), "missing.key: cannot read key file"),
        (lambda: server_keypair(keys / "server.key_secret", tmp_path / "bare.pub"), "is not the public key of"),
        (lambda: allowed_client_keys(tmp_path / "nowhere"), "curve.clients_dir: .* is not a directory"),
        (lambda: keygen(keys, "alice"), "exists; not overwriting"),
    ]:
        with pytest.raises((KeyFileError, FileExistsError), match=message):
            call()
    (tmp_path / "empty").mkdir()
    with pytest.raises(KeyFileError, match="holds no client certificate"):
        allowed_client_keys(tmp_path / "empty")


def test_keygen_makes_its_folders_private_and_leaves_an_existing_one_as_it_is(tmp_path, capsys) -> None:
    """`flashtick keygen alice --dir keys/desk` made keys/desk 0755 by the umask, a secret key's folder any user of
    the host could list; made 0700 now, as a data directory is. A folder that exists is the user's choice: kept."""
    from engine.service.cli import main

    assert main(["keygen", "alice", "--dir", str(tmp_path / "keys" / "desk")]) == 0
    capsys.readouterr()
    for folder in (tmp_path / "keys", tmp_path / "keys" / "desk"):
        assert folder.stat().st_mode & 0o777 == 0o700, oct(folder.stat().st_mode)
    assert (tmp_path / "keys" / "desk" / "alice.key_secret").stat().st_mode & 0o777 == 0o600
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)  # (whatever the umask)
    keygen(shared, "bob")
    assert shared.stat().st_mode & 0o777 == 0o755


def test_keygen_refuses_a_name_that_is_no_file_stem_and_a_dir_through_a_file_in_plain_words(tmp_path,
                                                                                           capsys) -> None:
    """`keygen ''` wrote hidden .key/.key_secret; `keygen bad/name` and a --dir through a file said only [Errno 2]
    and [Errno 20]."""
    from engine.service.cli import main

    (tmp_path / "afile").write_text("not a folder")
    for argv, said in [
        (["", "--dir", str(tmp_path)], 'NAME "" must be a file name stem without a path separator'),
        (["bad/name", "--dir", str(tmp_path)], 'NAME "bad/name" must be a file name stem without a path separator'),
        ([".", "--dir", str(tmp_path)], 'NAME "." must be a file name stem without a path separator, not starting '
                                        'with "."'),  # (it wrote a hidden ..key)
        (["x", "--dir", str(tmp_path / "afile")], f"--dir {tmp_path / 'afile'}: {tmp_path / 'afile'} is a file, "
                                                  f"not a folder"),
        (["x", "--dir", str(tmp_path / "afile" / "sub")], f"{tmp_path / 'afile'} is a file, not a folder, so "
                                                          f"{tmp_path / 'afile' / 'sub'} cannot be made under it"),
    ]:
        assert main(["keygen", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("flashtick keygen: error: ") and said in err and "Errno" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]  # nothing written, hidden or not


@pytest.mark.parametrize("curve, message", [
    ({"enabled": True}, "curve.enabled needs server_secret_key_file"),
    ({"clients_dir": "keys/"}, "curve.clients_dir needs curve.enabled: true"),
    ({"ingest": True}, "curve.ingest needs curve.enabled: true"),
    ({"enabled": "yes", "server_secret_key_file": "s"}, "curve.enabled must be true or false"),
    ({"enabled": True, "server_secret_key_file": "s", "clients_dir": 3}, "curve.clients_dir must be a path"),
])
def test_curve_config_mistakes_are_named(curve: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        ServiceConfig.from_dict({"curve": curve}, "engine.yaml")


def test_connections_ending_without_a_handshake_event_are_counted_exactly_once_all_have_closed() -> None:
    """The monitor names connections (fds) on accept and drop only: handshake events are matched by count."""
    from engine.service.auth import _Waiting

    waiting = _Waiting()
    for fd in (11, 12, 13):  # 12 handshakes; 11 and 13 are garbage peers
        waiting.accepted(fd)
    waiting.concluded()
    counted = [waiting.dropped(11), waiting.dropped(13), waiting.dropped(12)]
    assert sum(counted) == 2  # which one is told late, but the count is exact once they are all gone
    waiting.accepted(14)  # a client alone: its event is its own, and its drop later is no failure
    waiting.concluded()
    waiting.accepted(15)  # a garbage peer alone
    assert waiting.dropped(15) is True and waiting.dropped(14) is False
