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
TICKS = 200  # (what the scoring and its stops meet does not depend on the run's length: 200 score every query)
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


# the tests share the module's checkpoint, ticks and reference backtest:
# `--dist loadgroup` keeps them on one worker, which builds it once
pytestmark = pytest.mark.xdist_group("test_backtest_scoring_stop")


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


def interrupted(root: Path, out: str, marks: tuple[str, ...], monkeypatch, *extra: str,
                stream: str = "stderr") -> tuple[int, str]:
    """`flashtick backtest` with SIGINT sent as `stream` shows each of `marks`: its exit status and that stream."""
    watcher = SignalAtLine(getattr(sys, stream), marks)
    monkeypatch.setattr(sys, stream, watcher)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal's Ctrl-C meets it
    try:
        code = main(cli(root, out, *extra))
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back as main returns
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


def test_ctrl_c_while_scoring_or_while_a_resume_rereads_stops_before_the_scores_a_second_aborts_and_resume_makes_them(
        setup: Path, monkeypatch, capsys) -> None:
    """One Ctrl-C as the scoring begins said "stopping at the next batch boundary", then the run went on to its
    scores, plot and summary and exited 0; the answers are whole by then, so it now says so, stops with exit 130,
    and --resume scores that answers file (it refused: "the run there is complete").

    A --resume that only scores reads the files again first (for what the market did after each answer): a Ctrl-C
    there said "stopping at the next batch boundary", though no batch is run. It is a stop before the scores, and
    says so (SIGINT as the resume's note that it reads the files again shows).

    A second Ctrl-C while scoring aborts at once: it said only "after the answers were written", not that the
    scores and plot were missing, and nothing made them. Here in a --resume that scores, the second Ctrl-C sent as
    the first one's line shows.

    In the order a user meets them, on one answers file: the stop while scoring, a stop while the resume rereads,
    an abort while the next resume scores, then the resume that makes the scores, and the same command again."""
    out = setup / "cut.parquet"
    code, err = interrupted(setup, "cut.parquet", (SCORING,), monkeypatch)
    assert code == 130, err[-3000:]
    assert "next batch boundary" not in err, err[-3000:]
    assert f"the answers are written to {out}; stopping the scores (again to abort now)" in err, err[-3000:]
    assert f"stopped before the scores: the answers are whole in {out}; run the same command with --resume" in err
    assert out.read_bytes() == (setup / "whole.parquet").read_bytes()
    assert not (setup / "cut.scores.json").exists() and not (setup / "cut.calibration.png").exists()

    code, err = interrupted(setup, "cut.parquet", ("reading the files again",), monkeypatch, "--resume")
    assert code == 130, err[-3000:]
    assert "next batch boundary" not in err, err[-3000:]
    assert f"the answers are written to {out}; stopping the scores (again to abort now)" in err, err[-3000:]
    assert f"stopped before the scores: the answers are whole in {out}; run the same command with --resume" in err

    code, err = interrupted(setup, "cut.parquet", (SCORING, "stopping the scores"), monkeypatch, "--resume")
    assert code == 130, err[-3000:]
    assert (f"aborted; the answers are whole in {out}, but not their scores and plot: run the same command with "
            f"--resume to make them") in err, err[-3000:]
    assert not (setup / "cut.scores.json").exists()
    capsys.readouterr()

    assert main(cli(setup, "cut.parquet", "--resume")) == 0
    said = capsys.readouterr()
    assert f"{out} holds every answer" in said.err and "scoring them" in said.err, said.err[-3000:]
    assert said.out.startswith("replayed ") and "query " in said.out  # the summary table, as a run prints it
    # it computed no answer: not "resumed after 500" (ticks), as a resume that replays from a checkpoint says
    assert "scored from the answers file: none computed again" in said.out.splitlines()[0], said.out[:300]
    assert "resumed after" not in said.out
    assert_scored_as_uninterrupted(setup, "cut")
    # complete with its scores: the same command again does nothing, exit 0 (it was refused, exit 2: review337 #2)
    assert main(cli(setup, "cut.parquet", "--resume")) == 0
    assert f"already complete: {out} holds every answer of this run" in capsys.readouterr().err


def test_an_abort_as_the_answers_file_is_renamed_in_says_it_is_whole_and_resume_scores_it(setup: Path, monkeypatch,
                                                                                         capsys) -> None:
    """The checkpoint was marked whole only after the answers file was renamed into place (and after the line that
    says it is): an abort there named the last checkpoint ("2198 answers of the first 2400 ticks kept ... --resume
    to continue from there"), and --resume replayed the run to write the same file again. The checkpoint is marked
    whole before the rename now: the abort (SIGINT as "scoring them" shows, again as the first one's line shows)
    says the answers are whole, and --resume scores them without computing an answer."""
    out = setup / "renamed.parquet"
    code, err = interrupted(setup, "renamed.parquet", (SCORING, "stopping the scores"), monkeypatch)
    assert code == 130, err[-3000:]
    assert f"aborted; the answers are whole in {out}, but not their scores and plot" in err, err[-3000:]
    assert out.read_bytes() == (setup / "whole.parquet").read_bytes()
    capsys.readouterr()
    assert main(cli(setup, "renamed.parquet", "--resume")) == 0
    assert f"{out} holds every answer" in capsys.readouterr().err
    assert_scored_as_uninterrupted(setup, "renamed")


def test_a_stop_between_marking_the_answers_whole_and_renaming_them_is_finished_by_resume(setup: Path, monkeypatch,
                                                                                        capsys) -> None:
    """What a stop between the two steps leaves (the checkpoint marked whole, the file still under its temporary
    name OUT.tmp, which keeps its size and time through the rename): --resume renames it into place and scores it."""
    out = setup / "unrenamed.parquet"
    assert interrupted(setup, "unrenamed.parquet", (SCORING,), monkeypatch)[0] == 130
    out.rename(out.with_name(out.name + ".tmp"))
    capsys.readouterr()
    assert main(cli(setup, "unrenamed.parquet", "--resume")) == 0
    assert f"{out} holds every answer" in capsys.readouterr().err
    assert not out.with_name(out.name + ".tmp").exists()
    assert_scored_as_uninterrupted(setup, "unrenamed")


def whole_line(root: Path, out: str) -> str:
    return (f"flashtick backtest: interrupted after the run: nothing lost, the answers are whole in {root / out}, "
            f"their scores in {(root / out).with_suffix('.scores.json')}")


def test_ctrl_c_at_the_summary_says_the_run_is_whole_and_exits_130(setup: Path, monkeypatch, capsys) -> None:
    """The handlers were put back before the summary printed: a Ctrl-C there cut it short with a bare
    KeyboardInterrupt, and the process (sys.exit(main())) exited 130 with no word, or by the signal. Now it is noted:
    the summary prints whole, then one line says the answers and scores are whole, exit 130."""
    capsys.readouterr()
    code, printed = interrupted(setup, "summary.parquet", ("replayed ",), monkeypatch, stream="stdout")
    err = capsys.readouterr().err
    assert code == 130, err[-3000:]
    assert printed.startswith("replayed ") and "freq.brier, majority" in printed  # the summary, whole
    assert err.count("interrupted after the run") == 1 and whole_line(setup, "summary.parquet") in err
    assert "Traceback" not in err
    assert_scored_as_uninterrupted(setup, "summary")


LAUNCHER = """
import atexit, os, signal, sys
# a Ctrl-C reaches the main thread (the libraries' threads, started later, inherit the block): the handler runs
# while the exit waits below, not at some later point
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
def at_exit():  # registered first, so run last of the exit's callbacks: as the process ends
    print("launcher: exiting", file=sys.stderr, flush=True)
    os.read(int(os.environ["GO_FD"]), 1)
atexit.register(at_exit)
from engine.service.cli import main
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
sys.exit(main())
"""


def launched(root: Path, out: str, marks: tuple[str, ...]) -> tuple[int, str, str]:
    """`flashtick backtest` in a process of its own, run as the console script runs it (`sys.exit(main())`), with
    SIGINT sent as its stderr shows each of `marks` ("launcher: exiting": its exit's last atexit callback has begun,
    and waits for the signal to be sent): its exit status, stdout and stderr."""
    import subprocess

    # a real process (not tests/forked_cli.py's): its own launcher code (-c), an fd passed, SIGINT set before exec
    go_read, go_write = os.pipe()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "GO_FD": str(go_read)}
    child = subprocess.Popen([sys.executable, "-c", LAUNCHER, *cli(root, out)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, pass_fds=(go_read,),
                             # (a SIGINT this process ignores would stay ignored in the child)
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.default_int_handler))
    os.close(go_read)
    left = list(marks)
    try:
        said = []
        for line in child.stderr:
            said.append(line)
            if left and left[0] in line:
                child.send_signal(signal.SIGINT)
                if left.pop(0).startswith("launcher: exiting"):
                    os.write(go_write, b"x")
        printed = child.stdout.read()
        code = child.wait(60)
    finally:
        os.close(go_write)
        if child.poll() is None:
            child.kill()
    err = "".join(said)
    assert not left, f"never shown: {left}\n{err[-3000:]}"
    assert "Traceback" not in err and "Fatal Python error" not in err, err[-3000:]
    return code, printed, err


def test_ctrl_c_as_the_process_exits_says_the_run_is_whole_and_exits_130(setup: Path) -> None:
    """A Ctrl-C in a finished backtest's exit (2.2 s of teardown with torch loaded, on a loaded 2-core host) was
    printed as a traceback from an atexit callback (rc 0), or killed the process by the signal (rc -2) once Python
    had put its default back; now the CLI's handling lasts until the process ends: one line, exit 130."""
    code, printed, err = launched(setup, "exiting.parquet", ("launcher: exiting",))
    assert code == 130, err[-3000:]
    assert printed.startswith("replayed ")
    assert err.count("interrupted after the run") == 1 and whole_line(setup, "exiting.parquet") in err
    assert_scored_as_uninterrupted(setup, "exiting")


def test_ctrl_c_as_a_stopped_run_exits_keeps_its_exit_status(setup: Path) -> None:
    """The same in the exit of a run stopped before its scores (a second Ctrl-C as it ends, after the line that
    says how to resume): a traceback from an atexit callback, or a death by the signal; now exit 130 as the stop
    said, and --resume scores the answers as it would have."""
    code, printed, err = launched(setup, "stopped.parquet", (SCORING, "launcher: exiting"))
    assert code == 130, err[-3000:]
    assert printed == "" and "stopped before the scores" in err and "interrupted after the run" not in err
    assert main(cli(setup, "stopped.parquet", "--resume")) == 0
    assert_scored_as_uninterrupted(setup, "stopped")
