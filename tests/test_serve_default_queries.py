"""`serve --config FILE` whose config has no `queries:` (one written for its ports) registers the built-in model's
example queries, as `backtest` asks them, and says so in its start lines (review310 #12); it published nothing
before. A real `serve` process on ephemeral ports, asked over its control socket."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import yaml

from engine.service.client import ControlClient
from engine.service.cli_common import EXAMPLE_QUERIES

PORTS = "endpoints: {ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', control: 'tcp://127.0.0.1:0'}\n"


def test_serve_without_queries_in_its_config_asks_what_backtest_asks(tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(PORTS)
    process = subprocess.Popen([sys.executable, "-m", "engine.service.cli", "serve", "--config", str(config),
                                "--no-log"], stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        lines = []
        while not lines or "flashtick serving" not in lines[-1]:
            line = process.stderr.readline()
            assert line, "".join(lines)  # (the process ended before serving)
            lines.append(line)
        said = "".join(lines)
        assert f"no `queries:` in the config and none saved: registering {EXAMPLE_QUERIES.name}" in said
        assert "no standing queries are registered" not in said
        # the built-in model's card lists spot data only: said before serving (review310 #7)
        assert "flashtick: INFO: this model's card (TRAINING.md) lists training data of spot markets only" in said
        control = re.search(r"control=(tcp://\S+)", lines[-1])[1]
        with ControlClient(control) as client:
            names = [q["name"] for q in client.call("list")["queries"]]
        examples = yaml.safe_load(EXAMPLE_QUERIES.read_text())["queries"]
        assert names and sorted(names) == sorted(q["name"] for q in examples)
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        process.kill()
        process.wait()
