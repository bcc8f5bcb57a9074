"""The client commands (`ask`, `list`, `stats`, `health`, `streams`, `get`) talk to a running service over the
control socket: each runs in a process of its own and must start fast, so none imports torch, transformers,
polars or the engine (review350: `flashtick ask` took seconds where the same ask through ControlClient took 330 ms;
the parser's --preset help pulled in polars, the CURVE module and zmq's monitor helpers asyncio). A real service on
127.0.0.1, each command a real process."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from conftest import serving
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import encode
from engine.service.client import ControlClient
from engine.service.config import ConfigError, ServiceConfig
from engine.service.config_document import CONFIG_KEYS, client_endpoints

HEAVY = ("torch", "transformers", "polars", "numpy", "asyncio", "engine.engine", "engine.service.pipeline")
# what reading a --config's endpoints needs not: the engine's config and its sections' modules (review400 #7)
CONFIG_MACHINERY = ("engine.service.config", "engine.service.config_replay", "engine.settings",
                    "connectors.column_map")


def client_process(watched: tuple[str, ...]) -> str:
    """The command in a process of its own; at its exit it says which of ``watched`` were ever imported."""
    return ("import atexit, json, sys\n"
            f"watched = {watched!r}\n"
            "atexit.register(lambda: print('imported:', json.dumps([m for m in watched if m in sys.modules]), "
            "file=sys.stderr))\n"
            "from engine.service.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")


def imported(done: subprocess.CompletedProcess) -> list[str]:
    """What a ``client_process`` said it imported of its watched modules."""
    said = next(line for line in done.stderr.splitlines() if line.startswith("imported: "))
    return json.loads(said.removeprefix("imported: "))
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
    done = subprocess.run([sys.executable, "-c", client_process(HEAVY), *argv, "--control", control],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert imported(done) == [], done.stderr


def test_a_client_command_given_a_config_reads_its_endpoints_alone(service, tmp_path) -> None:
    """review400 #7: a client command given `--config` (the README's way to reach a service on other endpoints)
    built the whole ServiceConfig to read three endpoints: every section's module, ~0.06 s more CPU a call than
    `--control`. It reads the document and builds `endpoints` alone now, still refusing an unknown top-level or
    `endpoints` key by name, and the document's keys are still the config's."""
    control, _ = service
    config = tmp_path / "engine.yaml"
    config.write_text(f"endpoints:\n  control: {control}\nmodel: {{threads: 1}}\n")
    done = subprocess.run([sys.executable, "-c", client_process(CONFIG_MACHINERY), "list", "--config", str(config)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "up " in done.stdout, done.stderr
    assert imported(done) == [], done.stderr
    assert client_endpoints(config).control == control
    for typo, refusal in [("endpoint: {control: x}", 'unknown key "endpoint" in top level'),
                          ("endpoints: {contrl: x}", 'unknown key "contrl" in section "endpoints"'),
                          ("endpoints: {control: 5}", "endpoints.control must be a ZeroMQ endpoint")]:
        config.write_text(typo)
        with pytest.raises(ConfigError, match=refusal):
            client_endpoints(config)
    assert CONFIG_KEYS == {f.name for f in dataclasses.fields(ServiceConfig)}
