"""A backtest's exit status is the signal's that ended it, in every phase: 130 for a Ctrl-C, 143 for SIGTERM
(cli_common.exit_status), with the phase's one line and never a traceback. A real `flashtick backtest` process; each
phase is reached by what the run shows (a pipe it blocks reading, its checkpoint), not by timing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from conftest import engine_dir
from forked_cli import cli_popen
from connectors.synthetic import SyntheticConfig, SyntheticMarket

ROOT = Path(__file__).resolve().parents[1]
QUERIES = "queries: [{name: dir20, streams: ['*'], question: direction_20, kind: choice, trigger: {ticks: 5}}]\n"


# the tests share the module's checkpoint and ticks:
# `--dist loadgroup` keeps them on one worker, which builds it once
pytestmark = pytest.mark.xdist_group("test_backtest_signals")


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Path:
    root = engine_dir(tmp_path_factory.mktemp("signals"), QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(2500)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "ticks.parquet")
    return root


def _blocked_on(pipe: Path, child: subprocess.Popen) -> int:
    """A writer's end of `pipe` once the backtest has opened it to read (it then blocks in the read)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None:
        try:
            return os.open(pipe, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.02)
    raise AssertionError(f"the backtest never read {pipe}: {child.communicate()[1][-2000:]}")


def _replaying(manifest: Path, child: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None and not (
            manifest.is_file() and json.loads(manifest.read_text())["consumed"] > 0):
        time.sleep(0.02)


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("phase", ["config", "reading_record", "replaying"])
def test_a_signal_exits_by_its_number_in_every_phase(setup: Path, tmp_path: Path, phase: str, signame: str) -> None:
    """`config`: the config file is a pipe the run blocks reading (the libraries loaded with Python's own handling);
    `reading_record`: the model's evaluation.json is one, read after the handlers that abort the model's load are
    set and before run_backtest is called (a SIGTERM there exited 130); `replaying`: a checkpoint is written, the
    first signal stops at the next batch boundary."""
    out, config, model = tmp_path / "a.parquet", setup / "engine.yaml", None
    if phase == "config":
        config = tmp_path / "engine.yaml"
        os.mkfifo(config)
    elif phase == "reading_record":  # the tiny checkpoint with a pipe for the record of how training read its files
        model = tmp_path / "model"
        model.mkdir()
        for f in (setup / "model").iterdir():
            (model / f.name).symlink_to(f)
        os.mkfifo(model / "evaluation.json")
    command = ["backtest", str(setup / "ticks.parquet"), "--queries", str(setup / "q.yaml"), "--out", str(out),
               "--config", str(config), "--checkpoint-s", "0.05", *(["--model", str(model)] if model else [])]
    child = cli_popen(command, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                      stderr=subprocess.PIPE, text=True)
    writer = None
    try:
        if phase == "replaying":
            _replaying(out.with_name(out.name + ".parts") / "progress.json", child)
        else:
            writer = _blocked_on(config if phase == "config" else model / "evaluation.json", child)
        signum = getattr(signal, signame)
        child.send_signal(signum)
        try:
            child.wait(30)
        except subprocess.TimeoutExpired:  # the kernel gave the signal to a library's thread, not to the main thread
            os.close(writer)  # asleep in the read: the end of the pipe wakes it, and it sees the signal then
            writer = None
        err = child.communicate(timeout=300)[1]
    finally:
        if writer is not None:
            os.close(writer)
        if child.poll() is None:
            child.kill()
    said = err.strip().splitlines()
    assert child.returncode == 128 + signum and "Traceback" not in err, err[-2000:]
    assert said[-1] == "flashtick backtest: interrupted before any tick; nothing kept" if phase != "replaying" else \
        said[-1].startswith("flashtick backtest: interrupted after "), said


START = """
import _signal, json, sys
sys.argv = ["flashtick", "--version"]
seen = []
def hook(event, args):  # every module imported while the entry module runs, and whether Ctrl-C was ours by then
    if event == "import" and "engine.service.cli" in sys.modules:
        seen.append([args[0], _signal.getsignal(_signal.SIGINT) is not _signal.default_int_handler])
sys.addaudithook(hook)
import engine.service.cli
print(json.dumps([name for name, ours in seen if not ours]))
"""


def test_the_entry_module_takes_ctrl_c_before_it_imports_anything() -> None:
    """Review218 (seen once): a Ctrl-C ~0.36 s into `flashtick backtest`, on a loaded machine, printed a traceback
    ending in the console script's `from engine.service.cli import main` (rc -2). Before the entry module's handler
    the interpreter's start and the import of `engine` and `engine.service` (empty packages) are Python's; the
    entry module itself imported `signal` first, whose enums took ~0.7 ms of that window (a loop of Ctrl-Cs caught
    one there). It imports nothing before its handler now (`_signal` is built in). A real interpreter (not
    tests/forked_cli.py's): what it imports, and when, is what is checked."""
    done = subprocess.run([sys.executable, "-c", START], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == [], done.stdout
