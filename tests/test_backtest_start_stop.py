"""A Ctrl-C while `flashtick backtest` loads its model and opens its files, and one as it exits on an error: exit
130 with one line, never a traceback nor a death by the signal, and nothing left on disk by a run that replayed
nothing. A real `flashtick backtest` process on the built-in model, the signal sent as its stderr shows the line
that says it is in that phase, as a user watching it would."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import polars as pl

from connectors.synthetic import SyntheticConfig, SyntheticMarket
from forked_cli import cli_popen

ROOT = Path(__file__).resolve().parents[1]
LOADING = "no --queries: asking"  # said once the config is read, before the model loads and the files open
FAILED = "flashtick backtest: error: "


def signalled(args: list[str], marks: tuple[str, ...]) -> tuple[int, list[str]]:
    """`flashtick backtest ARGS` (the built-in model and queries), sent SIGINT as its stderr shows each of
    `marks` in turn: its exit status and its stderr's lines."""
    # forked (tests/forked_cli.py): its SIGINT is Python's default handler, as the zygote's is (started after
    # conftest's _ctrl_c_as_at_a_terminal), however this process was started
    child = cli_popen(["backtest", *args], env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL,
                      stderr=subprocess.PIPE, text=True)
    left, said = list(marks), []
    try:
        for line in child.stderr:
            said.append(line.rstrip("\n"))
            if left and left[0] in line:
                left.pop(0)
                child.send_signal(signal.SIGINT)
        code = child.wait(120)
    finally:
        if child.poll() is None:
            child.kill()
    assert not left, f"never shown: {left}\n" + "\n".join(said)
    assert not any("Traceback" in line or "Fatal Python error" in line for line in said), said
    return code, said


def test_ctrl_c_while_the_model_loads_ends_the_run_at_once_in_one_line(tmp_path: Path) -> None:
    """A Ctrl-C while the model loaded said "stopping at the next batch boundary", loaded it, opened the files,
    replayed a batch and left a checkpoint folder a fresh run then refused (add --resume, or delete it); one in the
    start before its handlers (the config) exited 130, and a second one then, in Python's teardown, killed the
    process by the signal (rc -2, no line). Now: one line, exit 130, nothing on disk, whichever it met; the second
    Ctrl-C, as the line shows, changes nothing."""
    ticks = tmp_path / "ticks.parquet"
    pl.DataFrame([t.to_wire() for t in SyntheticMarket(SyntheticConfig(seed=5)).next_batch(600)]).write_parquet(ticks)
    out = tmp_path / "a.parquet"
    code, said = signalled([str(ticks), "--out", str(out)], (LOADING, "interrupted"))
    assert code == 130, said
    assert [line for line in said if LOADING not in line] == [
        "flashtick backtest: interrupted before any tick; nothing kept"], said
    assert not out.exists() and not out.with_name(out.name + ".parts").exists()


def test_ctrl_c_as_a_backtest_exits_on_an_error_is_said_in_one_line(tmp_path: Path) -> None:
    """A file refused once the model had loaded: its error said, exit 2; a Ctrl-C then met Python's teardown
    (seconds, with torch loaded) and killed the process by the signal (rc -2). Now the exit is quick and its
    signals noted: exit 2 when it has ended before the signal, else 130 with one line after the error."""
    bids = tmp_path / "ES 03-26.Bid.txt"  # NinjaTrader's best bids alone: refused as its layout is read
    bids.write_text("".join(f"20260302 0930{i:02d};5012.25;3\n" for i in range(20)))
    code, said = signalled([str(bids), "--out", str(tmp_path / "a.parquet")], (FAILED,))
    errors = [line for line in said if line.startswith(FAILED)]
    assert len(errors) == 1 and "a NinjaTrader export of the best bid alone" in errors[0], said
    assert code in (2, 130), said
    after = said[said.index(errors[0]) + 1:]
    assert after == ([] if code == 2 else [
        "flashtick backtest: interrupted while exiting on the error above; what was on disk is kept"]), said
