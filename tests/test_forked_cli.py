"""The fork server of the CLI tests (tests/forked_cli.py): a forked `flashtick` child is a real process as a test
sees one: its exit status, its death by a signal or a kill -9, its stdin/stdout/stderr, the env and cwd it was
given, its session, reaped with no zombie left, several at once. Real CLI commands, no stand-in."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from forked_cli import cli_popen, cli_run


def _free_endpoint() -> str:
    """A loopback TCP endpoint nothing listens on (a subscriber to it waits, as on a service not started yet)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def _waiting_subscriber(**popen) -> subprocess.Popen:
    return cli_popen(["subscribe", "dir/", "--endpoint", _free_endpoint()], stdout=subprocess.DEVNULL,
                     stderr=subprocess.PIPE, text=True, **popen)


def _status_line(pid: int, key: str) -> str:
    return next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith(key + ":"))


def test_a_forked_child_has_the_clis_exit_status_stdout_stderr_and_stdin(tmp_path: Path) -> None:
    """`--version` exits 0 with its line on stdout (nothing on stderr: no line of the zygote's, no warning of
    runpy's), an unknown option 2 with its usage error on stderr and its JSON on stdout, and a backtest of `-`
    reads what is written to its stdin."""
    version = cli_run(["--version"], capture_output=True, text=True, timeout=300)
    assert version.returncode == 0 and version.stdout.startswith("flashtick ") and version.stderr == "", version
    assert version.args[1:3] == ["-m", "engine.service.cli"]
    bogus = cli_run(["stats", "--bogus"], capture_output=True, text=True, timeout=300)
    assert bogus.returncode == 2 and "flashtick stats: error: unrecognized arguments: --bogus" in bogus.stderr, bogus
    assert '"exit_status": 2' in bogus.stdout and "flashtick stats: error" not in bogus.stdout, bogus  # (its JSON)
    piped = cli_run(["backtest", "-", "--out", str(tmp_path / "a.parquet")], input="a,b\n1,2\n", capture_output=True,
                    text=True, timeout=300)
    assert piped.returncode == 2, piped
    assert "standard input: a stream, read whole (8 bytes)" in piped.stderr, piped.stderr
    with pytest.raises(subprocess.CalledProcessError):
        cli_run(["stats", "--bogus"], capture_output=True, check=True, timeout=300)


def test_a_forked_child_runs_in_the_cwd_and_env_it_is_given_and_only_those(tmp_path: Path, monkeypatch) -> None:
    """`keygen` writes into the child's cwd; FLASHTICK_SERVER_KEY is read from the env given (replacing this
    process's, as an exec's env does); a cwd that does not exist is refused as Popen refuses it."""
    made = cli_run(["keygen", "alice"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made
    assert {p.name for p in tmp_path.iterdir()} == {"alice.key", "alice.key_secret"}
    monkeypatch.setenv("FLASHTICK_SERVER_KEY", str(tmp_path / "this-process.key"))
    stats = ["stats", "--control", "tcp://127.0.0.1:1", "--timeout", "0.1"]
    given = {k: v for k, v in os.environ.items() if k != "FLASHTICK_SERVER_KEY"}
    unkeyed = cli_run(stats, env=given, capture_output=True, text=True, timeout=300)
    assert unkeyed.returncode == 4 and "cannot read key file" not in unkeyed.stderr, unkeyed
    keyed = cli_run(stats, env={**given, "FLASHTICK_SERVER_KEY": "given.key"}, cwd=tmp_path, capture_output=True,
                    text=True, timeout=300)
    assert keyed.returncode == 2 and "given.key: cannot read key file" in keyed.stderr, keyed
    with pytest.raises(FileNotFoundError):
        cli_popen(["--version"], cwd=tmp_path / "absent")


def test_forked_children_die_by_signals_as_real_ones_and_are_reaped_three_at_once() -> None:
    """Three waiting subscribers at once, each its own process (pid, stderr) with no signal blocked and the
    zygote's SIGCHLD handler gone; one in a session of its own. SIGUSR1 (nobody handles it) kills the first:
    returncode -10; a kill -9 of its group the second: -9; a Ctrl-C, once the third says it waits, is the CLI's
    own: 130 and no traceback. Each is reaped by the time its wait returns (no zombie), and a wait with a timeout on
    a running child times out."""
    first, second, third = children = [_waiting_subscriber(), _waiting_subscriber(start_new_session=True),
                                       _waiting_subscriber()]
    try:
        assert len({child.pid for child in children} | {os.getpid()}) == 4
        assert os.getsid(second.pid) == second.pid == os.getpgid(second.pid)  # set by the time Popen returns
        assert os.getpgid(first.pid) == os.getpgrp()  # (a child not asked for a session: this process's group)
        for child in children:
            assert int(_status_line(child.pid, "SigBlk").split()[1], 16) == 0
            caught = int(_status_line(child.pid, "SigCgt").split()[1], 16)
            assert not caught & (1 << (signal.SIGCHLD - 1)), hex(caught)
        with pytest.raises(subprocess.TimeoutExpired):
            first.wait(timeout=0.2)
        first.send_signal(signal.SIGUSR1)
        assert first.wait(timeout=120) == -signal.SIGUSR1
        assert second.poll() is None and third.poll() is None  # the others run on
        os.killpg(second.pid, signal.SIGKILL)
        assert second.wait(timeout=120) == -signal.SIGKILL
        waiting = third.stderr.readline()  # (its start is over: the CLI's Ctrl-C handling is in place)
        assert waiting.startswith("flashtick subscribe: note: no heartbeat from "), waiting
        third.send_signal(signal.SIGINT)
        assert third.wait(timeout=120) == 130
        assert "Traceback" not in third.stderr.read()
        for child in children:
            assert not Path(f"/proc/{child.pid}").exists()  # reaped, not a zombie
    finally:
        for child in children:
            child.kill()
            child.wait()
            child.stderr.close()
