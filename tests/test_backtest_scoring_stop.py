"""A Ctrl-C once a backtest's answers file is whole, while it scores them: the run says the answers are safe, stops
before the scores with exit 130, and `--resume` makes the scores and plot from the answers file, byte for byte
those of an uninterrupted run (review190 #1 and #2).

The signal is real (os.kill of this process, met by the handlers `flashtick backtest` installs) and sent at a
fixed point: from the write of the stderr line that says the scoring has begun, as a user watching it would."""

from __future__ import annotations

import io
import os
import signal
import sys
from pathlib import Path

import polars as pl
import pytest

from conftest import engine_dir
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.cli import main

QUERIES = """
queries:
  - {name: dir5, streams: ["*"], question: direction_5, kind: choice, trigger: {ticks: 3}}
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: nll, streams: ["*"], kind: surprise, trigger: {ticks: 10}}
"""
TICKS = 1200
SCORING = "scoring them"  # the end of the stderr line that says the answers are whole and their scoring begins


class SignalAtLine(io.TextIOBase):
    """stderr that passes every write on and, when a line holding one of `marks` is written, sends this process
    SIGINT right away (the handler runs before the line's writer goes on)."""

    def __init__(self, passed_to: io.TextIOBase, marks: tuple[str, ...]) -> None:
        self.passed_to, self.marks, self.text = passed_to, list(marks), ""

    def write(self, s: str) -> int:
        self.text += s
        self.passed_to.write(s)
        if self.marks and self.marks[0] in s:
            self.marks.pop(0)
            os.kill(os.getpid(), signal.SIGINT)
        return len(s)

    def flush(self) -> None:
        self.passed_to.flush()


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Path:
    root = engine_dir(tmp_path_factory.mktemp("scoring_stop"), QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=3)).next_batch(TICKS)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "ticks.parquet")
    assert main(cli(root, "whole.parquet")) == 0  # the reference: the same backtest, start to end
    return root


def cli(root: Path, out: str, *extra: str) -> list[str]:
    return ["backtest", str(root / "ticks.parquet"), "--queries", str(root / "q.yaml"), "--out", str(root / out),
            "--config", str(root / "engine.yaml"), "--quiet", *extra]


def interrupted(root: Path, out: str, marks: tuple[str, ...], monkeypatch, *extra: str) -> tuple[int, str]:
    """`flashtick backtest` with SIGINT sent as stderr shows each of `marks`: its exit status and stderr."""
    watcher = SignalAtLine(sys.stderr, marks)
    monkeypatch.setattr(sys, "stderr", watcher)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's Ctrl-C meets it
    try:
        code = main(cli(root, out, *extra))
    finally:
        signal.signal(signal.SIGINT, previous)
        monkeypatch.undo()
    assert not watcher.marks, f"never shown: {watcher.marks}\n{watcher.text[-3000:]}"
    return code, watcher.text


def assert_scored_as_uninterrupted(root: Path, out: str) -> None:
    """`out`'s answers, scores and plot byte for byte those of the uninterrupted run; its checkpoint gone."""
    for suffix in (".parquet", ".scores.json", ".calibration.png"):
        got, want = (root / (name + suffix) for name in (out, "whole"))
        assert got.read_bytes() == want.read_bytes(), suffix
    assert not (root / f"{out}.parquet.parts").exists()


def test_ctrl_c_while_scoring_stops_before_the_scores_and_resume_makes_them(setup: Path, monkeypatch,
                                                                            capsys) -> None:
    """One Ctrl-C as the scoring begins said "stopping at the next batch boundary", then the run went on to its
    scores, plot and summary and exited 0; the answers are whole by then, so it now says so, stops with exit 130,
    and --resume scores that answers file (it refused: "the run there is complete")."""
    code, err = interrupted(setup, "cut.parquet", (SCORING,), monkeypatch)
    out = setup / "cut.parquet"
    assert code == 130, err[-3000:]
    assert "next batch boundary" not in err, err[-3000:]
    assert f"the answers are written to {out}; stopping the scores (again to abort now)" in err, err[-3000:]
    assert f"stopped before the scores: the answers are whole in {out}; run the same command with --resume" in err
    assert out.read_bytes() == (setup / "whole.parquet").read_bytes()
    assert not (setup / "cut.scores.json").exists() and not (setup / "cut.calibration.png").exists()
    capsys.readouterr()

    assert main(cli(setup, "cut.parquet", "--resume")) == 0
    said = capsys.readouterr()
    assert f"{out} holds every answer" in said.err and "scoring them" in said.err, said.err[-3000:]
    assert said.out.startswith("replayed ") and "query " in said.out  # the summary table, as a run prints it
    assert_scored_as_uninterrupted(setup, "cut")
    # complete with its scores: nothing to resume, refused as before
    assert main(cli(setup, "cut.parquet", "--resume")) == 2
    assert "holds a finished backtest" in capsys.readouterr().err


def test_a_second_ctrl_c_while_scoring_aborts_and_says_how_to_get_the_scores(setup: Path, monkeypatch,
                                                                             capsys) -> None:
    """A second Ctrl-C while scoring aborts at once: it said only "after the answers were written", not that the
    scores and plot were missing, and nothing made them. Here in a --resume that scores (a first run's own scoring
    begins as its checkpoint is marked whole), the second Ctrl-C sent as the first one's line shows."""
    out = setup / "abort.parquet"
    assert interrupted(setup, "abort.parquet", (SCORING,), monkeypatch)[0] == 130
    code, err = interrupted(setup, "abort.parquet", (SCORING, "stopping the scores"), monkeypatch, "--resume")
    assert code == 130, err[-3000:]
    assert (f"aborted; the answers are whole in {out}, but not their scores and plot: run the same command with "
            f"--resume to make them") in err, err[-3000:]
    assert not (setup / "abort.scores.json").exists()
    capsys.readouterr()
    assert main(cli(setup, "abort.parquet", "--resume")) == 0
    assert_scored_as_uninterrupted(setup, "abort")
