"""Review337: the CLI under a job scheduler. One table of exit statuses (docs/cli.md, engine/service/exit_codes.py)
instead of 2 for everything (#5); an interrupted `train` or `feed` exits by the signal after saying what it kept
(#3, #4); --max-rejected-share makes a replay that rejected too much exit 1, partial (#8); `backtest --resume` can
be re-run unchanged after a success (#2) and a `train --out` re-run is refused with its path quoted (#10). Every
test runs the CLI on real files: a tiny model built from a config, real ZeroMQ sockets on 127.0.0.1."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pty
import resource
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import zmq

from conftest import engine_dir, read_terminal
from forked_cli import cli_popen, cli_run
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.cli import main
from engine.service.cli_parser import build_parser, subcommands
from engine.service.rejected_share import rejected_share_status
from engine.service.rejections import rejected_in_one_line, rejected_lines
from engine.service.run_record import PARQUET_KEY
from tests.test_train_folders import QUICK, START_US, TINY

ROOT = Path(__file__).resolve().parents[1]
QUERIES = "queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, trigger: {ticks: 5}}\n"


def run(*argv: str) -> tuple[int, str, str]:
    """`flashtick ARGV` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as e:  # a usage error: argparse's own exit
            code = e.code
    return code, out.getvalue(), err.getvalue()


def trades_csv(path: Path, rows: int, bad_every: int | None = None) -> Path:
    """``rows`` trades of AAA a minute apart; every ``bad_every``-th with a negative price (rejected on reading)."""
    prices = 60 + np.cumsum(np.random.default_rng(7).choice([-0.01, 0.0, 0.01], rows))
    path.write_text("ts_us,symbol,price,size,aggressor_side\n" + "".join(
        f"{START_US + i * 60_000_000},AAA,{-5 if bad_every and i % bad_every == 0 else prices[i]:.2f},{1 + i % 5},"
        f"{'buy' if i % 3 else 'sell'}\n" for i in range(rows)))
    return path


def test_every_commands_help_points_to_the_exit_status_table_and_usage_errors_stay_2() -> None:
    parser = build_parser()
    commands = {"flashtick": parser, **subcommands(parser), **subcommands(subcommands(parser)["feed"])}
    for name, command in commands.items():
        text = " ".join(command.format_help().split())
        assert "exit status: 0 done; 1 partial" in text and "4 service unreachable" in text, name
        assert "the table is in docs/cli.md" in text, name
    code, _, err = run("backtest", "x.csv", "--max-rejected-share", "1.5")
    assert code == 2 and "--max-rejected-share: a share from 0 to 1 (0.05: 5%), got \"1.5\"" in err, err
    code, _, err = run("evaluate", "builtin", str(ROOT / "missing.csv"))
    assert code == 2 and "not found: " in err and "missing.csv" in err, err
    table = (ROOT / "docs" / "cli.md").read_text()
    for status in ("| 0 |", "| 1 |", "| 2 |", "| 3 |", "| 4 |", "| 5 |", "| 6 |", "| 130 |", "| 143 |"):
        assert status in table, status


def test_a_service_that_is_not_there_is_4_and_a_bad_key_file_is_2(tmp_path: Path) -> None:
    """A scheduler retries 4 (nothing listens: the service not up yet) and alerts on 2 (the command is wrong)."""
    with socket_bound_not_listening() as endpoint:
        for command in (["stats"], ["streams"], ["list"], ["health"], ["get", "A", "q"]):
            code, _, err = run(*command, "--control", endpoint, "--timeout", "5")
            assert code == 4 and "it was refused (nothing listens there)" in err, (command, err)
        code, _, err = run("stats", "--control", endpoint, "--server-key", str(tmp_path / "nope.key"))
        assert code == 2 and "nope.key" in err, err


@contextlib.contextmanager
def socket_bound_not_listening():
    import socket

    with socket.socket() as nobody:  # a port bound, never listening: connections to it are refused
        nobody.bind(("127.0.0.1", 0))
        yield f"tcp://127.0.0.1:{nobody.getsockname()[1]}"


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> Path:
    """A tiny tick model's engine.yaml and q.yaml, and 400 synthetic ticks as Parquet."""
    root = engine_dir(tmp_path_factory.mktemp("sched"), QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(400)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "ticks.parquet")
    return root


def backtest(root: Path, files: list[str], out: Path, *extra: str) -> list[str]:
    return ["backtest", *files, "--queries", str(root / "q.yaml"), "--config", str(root / "engine.yaml"),
            "--out", str(out), "--quiet", *extra]


def test_backtest_resume_runs_unchanged_every_hour(engine: Path, tmp_path: Path, monkeypatch) -> None:
    """The one command line a scheduler can run every hour: it starts where nothing is, does nothing (exit 0) where
    the same run finished, and refuses (2, naming what differs) a finished run of other inputs."""
    out = tmp_path / "out dir" / "answers.parquet"
    argv = backtest(engine, [str(engine / "ticks.parquet")], out, "--resume")
    code, _, err = run(*argv)
    assert code == 0 and "starting from the beginning" in err and out.is_file(), err
    written = out.stat().st_mtime_ns, out.with_suffix(".scores.json").read_bytes()
    code, out_text, err = run(*argv)  # the same command, the next hour
    assert code == 0, err
    assert f"flashtick backtest: already complete: {out} holds every answer of this run (" in err, err
    assert (out.stat().st_mtime_ns, out.with_suffix(".scores.json").read_bytes()) == written  # nothing rewritten
    code, _, err = run(*argv, "--threads", "2")  # how fast, not what: the same run
    assert code == 0 and "already complete" in err, err
    # review407 #2, #3: an input touched (a copy, a restore: its bytes the same) is the same file, and the answers
    # file's record holds no modification time to move
    os.utime(engine / "ticks.parquet", ns=(1, 1))
    code, _, err = run(*argv)
    assert code == 0 and "already complete" in err, err
    assert '"mtime_ns"' not in pl.read_parquet_metadata(out)[PARQUET_KEY]
    # review407 #5: a finished run by another commit (a `git pull` since) is complete, said with what differs
    manifest = out.with_suffix(".manifest.json")
    written_by = json.loads(manifest.read_text())
    written_by["run"]["commit"] = "0123abcd"
    manifest.write_text(json.dumps(written_by))
    metadata = pl.read_parquet_metadata(out)
    run_in_file = json.loads(metadata[PARQUET_KEY]) | {"commit": "0123abcd"}
    pl.read_parquet(out).write_parquet(out, metadata=metadata | {PARQUET_KEY: json.dumps(run_in_file)})
    written = out.stat().st_mtime_ns, written[1]
    code, _, err = run(*argv)
    assert code == 0 and "already complete" in err and 'its commit "0123abcd" then, ' in err, err
    assert "differs: its answers are what that one computed; remove" in err, err
    # review407 #10: the model directory spelled from another folder, and the same queries under another name, are
    # this run (they were "its config, config_digest, model differ" and "its queries differs")
    (tmp_path / "same.yaml").write_bytes((engine / "q.yaml").read_bytes())
    monkeypatch.chdir(engine)
    renamed = [str(tmp_path / "same.yaml") if arg == str(engine / "q.yaml") else arg for arg in argv]
    code, _, err = run(*renamed, "--model", "model")
    assert code == 0 and "already complete" in err, err
    code, _, err = run(*argv, "--max-ticks", "300")  # another run: its answers are not these
    assert code == 2 and "holds a finished backtest" in err and "max_ticks" in err, err
    assert out.stat().st_mtime_ns == written[0]


def test_backtest_resume_of_a_folder_that_gained_a_day_names_the_file_added(engine: Path, tmp_path: Path) -> None:
    """A folder of daily files that gained a day: --resume's refusal names the new file (review382 #10: "its
    files, readings differ" named none) and says how to answer the new day alone; a day's file edited is named as
    changed."""
    ticks = pl.read_parquet(engine / "ticks.parquet")
    days = tmp_path / "days"
    days.mkdir()
    ticks.slice(0, 200).write_parquet(days / "day1.parquet")
    out = tmp_path / "answers.parquet"
    argv = backtest(engine, [str(days)], out, "--resume", "--no-plot")
    code, _, err = run(*argv)
    assert code == 0, err
    ticks.slice(200, 200).write_parquet(days / "day2.parquet")  # the next day's download
    code, _, err = run(*argv)
    assert code == 2, err
    assert f"its files (1 file added: {days / 'day2.parquet'}) differ" in err, err
    assert "to answer only the new files, backtest them (or the folder with --from the first new day)" in err, err
    ticks.slice(0, 150).write_parquet(days / "day1.parquet")  # and the first day cut short
    code, _, err = run(*argv)
    assert code == 2, err
    assert (f"its files (1 file added: {days / 'day2.parquet'}; 1 file changed (other bytes): "
            f"{days / 'day1.parquet'}) differ") in err, err
    assert "to answer only the new files" not in err  # not only added: one run over every file is the answer


def test_backtest_over_max_rejected_share_exits_1_with_its_work_kept(engine: Path, tmp_path: Path) -> None:
    bad = trades_csv(tmp_path / "bad AAA.csv", 300, bad_every=3)  # 100 of 300 rejected: 33%
    code, _, err = run(*backtest(engine, [str(bad)], tmp_path / "a.parquet"))
    assert code == 0, err  # the default: rejected rows are said, and never change the status
    code, _, err = run(*backtest(engine, [str(bad)], tmp_path / "b.parquet", "--max-rejected-share", "0.4"))
    assert code == 0 and "partial" not in err, err
    code, _, err = run(*backtest(engine, [str(bad)], tmp_path / "c.parquet", "--max-rejected-share", "0.05"))
    assert code == 1, err
    assert ("flashtick backtest: partial: 100 of the 300 ticks read (33.3%) were rejected, over "
            "--max-rejected-share 0.05") in err, err
    assert pl.read_parquet(tmp_path / "c.parquet").height == pl.read_parquet(tmp_path / "a.parquet").height


def test_rows_a_filter_left_out_count_on_neither_side_of_the_rejected_share(capsys) -> None:
    """One ticker of a whole-market file (`--streams AAPL`): its 50 rejects of 100 rows read are 50%, not 0.5% of
    the 10,000 rows the filter left out too (review430 #9); the misread-column warning counts them so as well."""
    rejected = {"missing_field": 50, "filtered_out": 9900}
    assert rejected_share_status(rejected, 50, 0.05, "flashtick backtest") == 1
    assert ("flashtick backtest: partial: 50 of the 100 ticks read (the 9,900 a filter left out not counted) "
            "(50.0%) were rejected") in capsys.readouterr().err
    assert rejected_lines(rejected, {}, accepted=50)[0].startswith("warning: missing_field 50 (50%) of the 100 ticks")
    assert rejected_in_one_line(rejected, 50).startswith("warning: 50 of the 100 ticks read rejected")


def test_a_halts_quotes_of_no_market_are_read_not_rejected_in_the_share(capsys) -> None:
    """A LULD halt's 0/0 quotes (`no_market`, "counted apart" in docs/replay.md) are the market's state the venue
    sent, no bad rows: they count among the ticks read, never the rejected, so a halt day passes a strict limit."""
    assert rejected_share_status({"no_market": 20}, 980, 0.01, "flashtick backtest") is None
    assert rejected_share_status({"no_market": 20, "missing_field": 30}, 950, 0.01, "flashtick backtest") == 1
    assert ("partial: 30 of the 1,000 ticks read (20 quotes of no market, a halt's, read and not counted as rejected) "
            "(3.0%) were rejected") in capsys.readouterr().err


def test_a_finished_runs_no_op_resume_exits_as_the_run_did(engine: Path, tmp_path: Path) -> None:
    """`backtest --resume` of a finished run that rejected more than --max-rejected-share allows: the first run
    exited 1 (partial), and so does every hourly re-run that finds it complete; without the option, 0."""
    bad = trades_csv(tmp_path / "bad AAA.csv", 300, bad_every=3)  # 100 of 300 rejected: 33%
    argv = backtest(engine, [str(bad)], tmp_path / "c.parquet", "--resume", "--max-rejected-share", "0.05")
    code, _, err = run(*argv)
    assert code == 1 and "partial: 100 of the 300 ticks read (33.3%)" in err, err
    code, _, err = run(*argv)  # the next hour: nothing to do, and the same status
    assert code == 1 and "already complete" in err, err
    assert "partial: 100 of the 300 ticks read (33.3%) were rejected, over --max-rejected-share 0.05" in err, err
    code, _, err = run(*argv[:-1], "0.5")  # a looser limit: within it
    assert code == 0 and "already complete" in err and "partial" not in err, err
    code, _, err = run(*argv[:-2])  # no limit: rejected rows never change the status
    assert code == 0 and "already complete" in err and "partial" not in err, err


def no_data_inputs(tmp_path: Path) -> dict[str, list[str]]:
    """Inputs that hold no tick yet, as an hourly job meets them before its data lands."""
    (tmp_path / "hdr.csv").write_text("ts_us,symbol,price,size,aggressor_side\n")
    (tmp_path / "zero.csv").write_text("")
    (tmp_path / "drop").mkdir()
    return {"no file matches": [str(tmp_path / "today" / "*.csv")],
            "is an empty folder: no data yet": [str(tmp_path / "drop")],
            "no data rows": [str(tmp_path / "hdr.csv"), str(tmp_path / "zero.csv")]}


def mistakes(tmp_path: Path) -> dict[str, list[str]]:
    """Inputs a re-run will not mend: still usage errors (2)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.pdf").write_bytes(b"%PDF-1.4")
    every_bad = trades_csv(tmp_path / "bad.csv", 40, bad_every=1)
    return {"not found": [str(tmp_path / "typo.csv")], "a folder holding no tick file": [str(tmp_path / "docs")],
            "every row was rejected": [str(every_bad)]}


def test_no_data_yet_is_6_for_backtest_and_a_mistake_stays_2(engine: Path, tmp_path: Path) -> None:
    """A job a scheduler runs every hour tells "no data yet" (6: skip or retry) from "typed it wrong" (2: alert)."""
    for said, files in no_data_inputs(tmp_path).items():
        out = tmp_path / "out.parquet"
        code, _, err = run(*backtest(engine, files, out))
        assert code == 6 and said in err and not out.exists(), (said, err)
    for said, files in mistakes(tmp_path).items():
        code, _, err = run(*backtest(engine, files, tmp_path / "out.parquet"))
        assert code == 2 and said in err, (said, err)


def test_no_data_yet_is_6_for_feed_train_and_evaluate(tmp_path: Path) -> None:
    pull = zmq.Context.instance().socket(zmq.PULL)
    pull.linger = 0
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    try:
        for said, files in no_data_inputs(tmp_path).items():
            code, _, err = run("feed", "replay", *files, "--endpoint", f"tcp://127.0.0.1:{port}", "--control", "",
                               "--answers", "")
            assert code == 6 and said in err, ("feed", said, err)
            code, _, err = run("train", *files, "--out", str(tmp_path / "m"), *TINY, "--quiet")
            assert code == 6 and said in err and not (tmp_path / "m").exists(), ("train", said, err)
            code, _, err = run("evaluate", "builtin", *files, *QUICK, "--quiet")
            assert code == 6 and said in err, ("evaluate", said, err)
        for said, files in mistakes(tmp_path).items():
            code, _, err = run("feed", "replay", *files, "--endpoint", f"tcp://127.0.0.1:{port}", "--control", "",
                               "--answers", "")
            assert code == 2, ("feed", said, err)
            code, _, err = run("evaluate", "builtin", *files, *QUICK, "--quiet")
            assert code == 2 and said in err, ("evaluate", said, err)
    finally:
        pull.close()


def test_a_backtest_that_cannot_write_its_output_exits_5(engine: Path, tmp_path: Path) -> None:
    """A full disk (here a file size limit, EFBIG, as `ulimit -f` sets) is 5: free space and resume, not a typo."""
    # a process of its own: the file size limit is set in the child alone, as `ulimit -f` would be (forked from the
    # warm zygote: a fresh interpreter's start and imports were most of this test's CPU)
    done = cli_run(backtest(engine, [str(engine / "ticks.parquet")], tmp_path / "full.parquet"),
                   env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                   rlimits={resource.RLIMIT_FSIZE: 2048}, timeout=600)
    assert done.returncode == 5, done.stderr[-3000:]
    assert "flashtick backtest: error: " in done.stderr and "Traceback" not in done.stderr, done.stderr[-3000:]


def test_feed_replay_over_max_rejected_share_exits_1_after_sending_the_rest(tmp_path: Path) -> None:
    bad = trades_csv(tmp_path / "bad XRP.csv", 300, bad_every=3)  # review337 #8: every third price set to -5
    pull = zmq.Context.instance().socket(zmq.PULL)
    pull.linger = 0
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    try:
        feed = ["feed", "replay", str(bad), "--endpoint", f"tcp://127.0.0.1:{port}", "--control", "", "--answers", ""]
        code, _, err = run(*feed)
        assert code == 0 and "nonpositive_price" in err, err
        code, _, err = run(*feed, "--max-rejected-share", "0.25")
        assert code == 1, err
        assert ("flashtick feed replay: partial: 100 of the 300 ticks read (33.3%) were rejected, over "
                "--max-rejected-share 0.25") in err, err
        assert "sent 200 ticks" in err, err
    finally:
        pull.close()


def test_train_refuses_an_out_holding_a_checkpoint_naming_it_quoted(tmp_path: Path) -> None:
    """A re-run after a success is refused (exit 2), its --out quoted as a shell takes it back (review337 #10)."""
    out = tmp_path / "mon modèle"
    out.mkdir()
    for name in ("config.json", "TRAINING.md"):
        (out / name).write_text("{}")
    code, _, err = run("train", str(trades_csv(tmp_path / "t.csv", 100)), "--out", str(out), *TINY)
    assert code == 2, err
    assert f"--out '{out}' already holds TRAINING.md, config.json (a finished train's checkpoint" in err, err
    assert "--overwrite to replace the checkpoint there" in err and not (out / ".lock").exists()


def test_train_and_evaluate_over_max_rejected_share_exit_1_with_their_work_done(tmp_path: Path) -> None:
    bad = trades_csv(tmp_path / "AAA.csv", 1200, bad_every=4)  # 300 of 1,200 rejected: 25%, 900 left to split
    code, _, err = run("train", str(bad), "--out", str(tmp_path / "m"), *TINY, *QUICK, "--quiet",
                       "--max-rejected-share", "0.2")
    assert code == 1, err[-3000:]
    assert "flashtick train: partial: 300 of the 1,200 ticks read (25.0%) were rejected" in err, err
    assert (tmp_path / "m" / "config.json").is_file() and not (tmp_path / "m" / ".lock").exists()
    code, out, err = run("evaluate", str(tmp_path / "m"), str(bad), *QUICK, "--quiet", "--max-rejected-share", "0.2")
    assert code == 1 and "flashtick evaluate: partial: 300 of the 1,200 ticks read (25.0%)" in err, err[-3000:]
    assert "test slice" in out, out  # its scores printed all the same
    code, _, err = run("evaluate", str(tmp_path / "m"), str(bad), *QUICK, "--quiet", "--max-rejected-share", "0.3")
    assert code == 0, err[-3000:]


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_train_stopped_by_a_signal_keeps_its_best_weights_and_exits_by_it(tmp_path: Path, signame: str) -> None:
    """Review337 #3/#4: SIGTERM killed a train at once (nothing said, the work lost, its .lock left) and a Ctrl-C'd
    one exited 0. Both now stop at the step under way, keep the best weights, write and score them, release the
    lock, say so, and exit 128 + the signal. stderr is a terminal, so the run says its steps: the signal is sent
    once one is said (the optimisation under way)."""
    data = trades_csv(tmp_path / "AAA.csv", 1200)
    out = tmp_path / "model"
    leader, follower = pty.openpty()
    assert TINY[-4:] == ["--steps", "1", "--batch", "1"]
    tiny = [*TINY[:-4], "--batch", "1"]
    child = cli_popen(["train", str(data), "--out", str(out), *tiny, *QUICK, "--steps", "100000", "--max-minutes",
                       "30", "--eval-every", "5"], env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                      stderr=follower, text=True)
    os.close(follower)
    reader, seen = read_terminal(leader)
    try:
        deadline = time.monotonic() + 600  # a hang guard, not a timed assertion
        while time.monotonic() < deadline and child.poll() is None and b"step 10/" not in b"".join(seen):
            time.sleep(0.05)
        assert child.poll() is None, b"".join(seen).decode(errors="replace")[-3000:]
        child.send_signal(getattr(signal, signame))
        stdout, _ = child.communicate(timeout=600)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(60)
    reader.join(30)
    os.close(leader)
    err = b"".join(seen).decode(errors="replace").replace("\r", "\n")
    status = 128 + getattr(signal, signame)
    assert child.returncode == status, err[-3000:]
    how = "Ctrl-C" if signame == "SIGINT" else "SIGTERM"
    assert f"interrupted ({how}) after " in err and f"({how} again aborts without writing)" in err, err[-3000:]
    assert "flashtick train: interrupted: the best weights of " in err and f"exit {status}" in err, err[-3000:]
    assert "trained " in stdout and f"(interrupted ({how}) after" in stdout, stdout
    assert (out / "model.safetensors").is_file() and not (out / ".lock").exists()
    assert f"interrupted ({how})" in (out / "TRAINING.md").read_text()
