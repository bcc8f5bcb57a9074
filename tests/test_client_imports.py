"""The client commands (`ask`, `list`, `stats`, `health`, `streams`, `get`) talk to a running service over the
control socket: each runs in a process of its own and must start fast, so none imports torch, transformers,
polars or the engine (review350: `flashtick ask` took seconds where the same ask through ControlClient took 330 ms;
the parser's --preset help pulled in polars, the CURVE module and zmq's monitor helpers asyncio). A real service on
127.0.0.1, each command a real process."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import serving
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.client import ControlClient
from engine.service.config import ServiceConfig

HEAVY = ("torch", "transformers", "polars", "numpy", "asyncio", "engine.engine", "engine.service.pipeline")
# the command in a process of its own; at its exit it says which of HEAVY were ever imported
CLIENT_PROCESS = ("import atexit, json, sys\n"
                  f"heavy = {HEAVY!r}\n"
                  "atexit.register(lambda: print('imported:', json.dumps([m for m in heavy if m in sys.modules]), "
                  "file=sys.stderr))\n"
                  "from engine.service.cli import main\n"
                  "sys.exit(main(sys.argv[1:]))\n")
QUERY = "queries: [{name: up, streams: ['*'], question: direction_5, kind: choice, trigger: batch}]\n"


@pytest.fixture(scope="module")
def service():
    config = ServiceConfig.from_dict({"endpoints": {"ingest": "tcp://127.0.0.1:0", "answers": "tcp://127.0.0.1:0",
                                                    "control": "tcp://127.0.0.1:0"}, "log": {"enabled": False}})
    with serving(config) as server:
        control = server.endpoints["control"]
        ticks = SyntheticMarket(SyntheticConfig(seed=1)).next_batch(40)
        with ControlClient(control) as client:
            client.call("register", yaml=QUERY)
            import zmq

            push = zmq.Context.instance().socket(zmq.PUSH)
            push.connect(server.endpoints["ingest"])
            push.send(encode(ticks))
            push.close(linger=5000)
            while not client.call("stats")["stats"].get("answers_out"):  # (a hang is caught by pytest's timeout)
                pass
        yield control, ticks[0].stream


@pytest.mark.parametrize("command", ["ask", "list", "stats", "health", "streams", "get"])
def test_a_client_command_imports_no_engine(service, command: str) -> None:
    control, stream = service
    argv = {"ask": ["ask", stream, "up"], "get": ["get", stream, "up"]}.get(command, [command])
    done = subprocess.run([sys.executable, "-c", CLIENT_PROCESS, *argv, "--control", control], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    imported = next(line for line in done.stderr.splitlines() if line.startswith("imported: "))
    assert json.loads(imported.removeprefix("imported: ")) == [], done.stderr
