"""The `flashtick` command under a locale that is not UTF-8 (real subprocesses; the service is a real Server on
ephemeral 127.0.0.1 ports). The C locale with Python's UTF-8 mode and locale coercion turned off stands for every
such locale (Latin-1 images, some ssh set-ups): it exists on every host, and its ASCII lacks every name used here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import msgpack

from engine.service.client import ControlClient
from wire_client import push_socket, trade, wait_until
from wire_server import server  # noqa: F401 (fixture)

ROOT = Path(__file__).resolve().parents[1]
# a locale whose encoding is ASCII, as Python sees it: no UTF-8 mode, no coercion to C.UTF-8
ASCII_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
NAMES = ("DAX€", "日経225")  # outside ASCII and Latin-1 both


def flashtick(*argv: str, cwd: Path = ROOT, **popen: object) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONIOENCODING", "LANGUAGE")}
    env |= ASCII_LOCALE | {"PYTHONPATH": str(ROOT)}
    popen = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE} | popen
    return subprocess.run([sys.executable, "-m", "engine.service.cli", *argv], cwd=cwd, env=env, timeout=300,
                          **popen)


def fed(endpoints: dict[str, str]) -> None:
    """The service holds a stream of each of NAMES."""
    push = push_socket(endpoints["ingest"])
    start = time.time_ns() - 10**9 * 3600
    push.send(msgpack.packb([trade(name, start + i * 10**6, price=100.0 + 0.01 * (i % 7))
                             for i in range(20) for name in NAMES]))
    push.close(linger=5000)
    with ControlClient(endpoints["control"], timeout_s=30) as control:
        wait_until(lambda: all(control.call("streams", streams=list(NAMES))["streams"].get(n) for n in NAMES))


def test_client_commands_show_names_their_locale_cannot_encode_instead_of_a_codec_error(server) -> None:  # noqa: F811
    """`streams`, `stats`, `list` exited 2 with "'ascii' codec can't encode characters" and printed nothing, not
    even the streams it could show; `--json` likewise. Text shows such a character as a backslash escape, JSON as a
    JSON escape, so it still parses to the name."""
    fed(server)
    text = flashtick("streams", "--control", server["control"])
    assert text.returncode == 0, text.stderr
    assert b"DAX\\u20ac" in text.stdout and b"\\u65e5\\u7d4c225" in text.stdout
    for command in (["streams", "--json"], ["stats"], ["list", "--json"]):
        done = flashtick(*command, "--control", server["control"])
        assert done.returncode == 0, (command, done.stderr)
        parsed = json.loads(done.stdout)  # ASCII bytes, and valid JSON
        if command[0] == "streams":
            assert set(NAMES) <= set(parsed["streams"])


def test_a_client_command_started_with_stdout_closed_fails_saying_so(server) -> None:  # noqa: F811
    """Started with fd 1 closed (`>&-`, a supervisor's or cron's set-up), `list`, `stats` and `get` exited 0 having
    printed nothing: Python sets sys.stdout to None then, and print() drops what it is given. Now the first write
    fails the command in one line, as coreutils' `cat >&-` does; a closed pipe (`| head -1`) still exits 0."""
    for command in (["list"], ["stats"]):
        done = flashtick(*command, "--control", server["control"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=lambda: os.close(1))
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.decode().splitlines() == [
            f"flashtick {command[0]}: error: cannot write to standard output: it was closed when flashtick started"]
