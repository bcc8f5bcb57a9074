"""Backtest output that survives an interruption: part files, a real `flashtick backtest` killed with SIGKILL
and resumed, the same answers as an uninterrupted run; progress on a terminal; rejected rows summarised."""

from __future__ import annotations

import fcntl
import functools
import json
import os
import pty
import re
import shutil
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import polars as pl
import pytest

from conftest import read_terminal, tiny_tick_checkpoint
from forked_cli import cli_popen
from connectors.codec import TOKENS_PER_TICK
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.run_record import without_file_times
from engine.service.backtest import BacktestReport, run_backtest as library_run_backtest
from engine.service.cli import main
from engine.service.config import ServiceConfig

# in-process runs without the calibration plot, about half of a short run's time, where a test does not read it
# (plot=True)
run_backtest = functools.partial(library_run_backtest, plot=False)

ROOT = Path(__file__).resolve().parents[1]
QUERIES = """
queries:
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: {ticks: 5}}
  - {name: move50, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {interval: 2s}}
  - {name: nll, streams: ["*"], kind: surprise, trigger: batch}
"""
# the first checkpoint falls after 512 ticks (backtest_loop.FLUSH_TICKS): a run stopped or killed there (TICKS // 3
# is short of it) still has ~1,000 to go, a margin for the signals sent as it shows (with 500, a loaded host's run
# finished its replay first)
TICKS = 1500
# the module's checkpoint's max_position_embeddings: a quarter of tests/conftest.py TINY's, so its sessions roll
# after 64 ticks of a stream (TICKS // 3, where the killed run is cut, holds more): a run of TICKS crosses rolls
WINDOW = 256
FLOAT_COLUMNS = ("expected", "nll", "brier", "log_loss", "model_brier")


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("resume")  # (as conftest.engine_dir makes one, with a checkpoint of WINDOW)
    checkpoint = tiny_tick_checkpoint(root / "model", max_position_embeddings=WINDOW)
    (root / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 16384, block_size: 16}}\n")
    (root / "q.yaml").write_text(QUERIES)
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(TICKS)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "ticks.parquet")
    return root


@pytest.fixture(scope="module")
def long_ticks(setup: Path) -> Path:
    """The module's ticks and 9 times as many after them, for the tests that signal a run while it replays and never
    resume it: a signal sent once the first checkpoint shows (after 512 ticks) lands while ticks still flow, however
    fast the host (an idle one replayed the ~1,000 ticks left of TICKS within the test's 0.2 s); the run stops there,
    so the length costs nothing past the file."""
    path = setup / "long_ticks.parquet"
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(10 * TICKS)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(path)
    return path


@pytest.fixture(scope="module")
def uninterrupted(setup: Path) -> BacktestReport:
    """The reference: the same backtest run start to end (whole.parquet)."""
    config = ServiceConfig.load(setup / "engine.yaml")
    return run_backtest(config, [setup / "ticks.parquet"], setup / "q.yaml", setup / "whole.parquet", progress=False)


def cli(root: Path, out: str, *extra: str, ticks: str = "ticks.parquet") -> list[str]:
    """The command line of a backtest of the module's files to `out`, with no calibration plot (none is read here)."""
    return ["backtest", str(root / ticks), "--queries", str(root / "q.yaml"), "--out", str(root / out),
            "--config", str(root / "engine.yaml"), "--no-plot", *extra]


def assert_same_answers(got: pl.DataFrame, want: pl.DataFrame) -> None:
    """Row for row: every key, label and answer equal; probabilities and values equal to fp32 tolerance (the
    resumed sessions were rebuilt with more ticks per forward, which may move the last bits)."""
    assert got.columns == want.columns and got.height == want.height
    exact = [c for c in want.columns if c not in (*FLOAT_COLUMNS, "probs", "model_probs")]
    assert got.select(exact).equals(want.select(exact))
    for column in FLOAT_COLUMNS:
        diff = (got[column] - want[column]).abs().max()
        assert diff is None or diff <= 1e-4, (column, diff)
    for g, w in [*zip(got["probs"], want["probs"]), *zip(got["model_probs"], want["model_probs"])]:
        assert (g is None) == (w is None)
        if g is not None:
            gp, wp = json.loads(g), json.loads(w)
            assert gp.keys() == wp.keys() and all(abs(gp[k] - wp[k]) <= 1e-4 for k in gp)


def test_a_killed_backtest_refuses_a_second_run_while_it_runs_and_resumes_to_the_uninterrupted_answers(
        setup: Path, uninterrupted: BacktestReport, capsys) -> None:
    """A real `flashtick backtest` stopped mid-run (SIGSTOP), then killed with SIGKILL and resumed: the same answers
    as an uninterrupted run.

    Review 104: a --resume started while the first run of the same --out still ran (Ctrl-C'd but not yet out, or
    ignoring SIGINT in the background) interleaved their part files, and one of the two exited 0 with answers
    missing or duplicated. The first holds OUT.parts' lock for its whole run: a second process, fresh or --resume,
    is refused naming its pid; once the first is gone (SIGKILL: no handler ran, the lock file stays), its lock
    blocks nothing."""
    whole = uninterrupted
    assert whole.ticks == TICKS and not (setup / "whole.parquet.parts").exists()  # parts go once out is whole

    lock, manifest = setup / "cut.parquet.parts" / "lock", setup / "cut.parquet.parts" / "progress.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = cli_popen(cli(setup, "cut.parquet", "--checkpoint-s", "0.05"), env=env, stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and child.poll() is None:
            if manifest.is_file() and 0 < json.loads(manifest.read_text())["consumed"] >= TICKS // 3:
                break
            time.sleep(0.02)
        assert child.poll() is None, "the backtest finished before it could be stopped mid-run"
        child.send_signal(signal.SIGSTOP)  # mid-run, for as long as the second takes to start
        # the second runs in this process (another process than the first all the same): the same CLI, without
        # two interpreters importing torch (the test's longest part under load)
        for again in ([], ["--resume"]):
            capsys.readouterr()
            code = main(cli(setup, "cut.parquet", "--quiet", *again))
            stderr = capsys.readouterr().err
            assert code == 2, stderr[-2000:]
            refusal = [line for line in stderr.splitlines() if "error:" in line]
            assert len(refusal) == 1 and "Traceback" not in stderr, stderr[-2000:]
            assert refusal[0].startswith(f"flashtick backtest: error: {setup / 'cut.parquet.parts'} is in use by "
                                         f"a running backtest (pid {child.pid}): "), refusal
            assert f"kill -TERM {child.pid}" in refusal[0]
        assert not (setup / "cut.parquet").exists() and lock.read_text().strip() == str(child.pid)
        child.kill()  # SIGKILL (a stopped process too): no handler runs, only what was on disk counts
        child.wait(60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(60)
    assert lock.read_text().strip() == str(child.pid)  # its lock file is left, with its pid
    kept = json.loads(manifest.read_text())
    assert 0 < kept["consumed"] < TICKS and kept["parts"]
    assert not (setup / "cut.parquet").exists()
    # the rebuild must cross a context roll: some stream's tokens (4 a tick) before the cut pass the window
    streams = pl.read_parquet(setup / "ticks.parquet")["stream"][: kept["consumed"]].value_counts()
    assert streams["count"].max() * TOKENS_PER_TICK > WINDOW
    so_far = pl.read_parquet(setup / "cut.parquet.parts" / "*.parquet")  # readable while unfinished
    assert so_far.height == kept["answers"] > 0

    assert main(cli(setup, "cut.parquet", "--quiet")) == 2  # without --resume an unfinished run is not clobbered
    assert main(cli(setup, "cut.parquet", "--resume", "--quiet")) == 0  # a lock whose process is gone blocks nothing
    assert not (setup / "cut.parquet.parts").exists()
    resumed, want = pl.read_parquet(setup / "cut.parquet"), pl.read_parquet(setup / "whole.parquet")
    assert_same_answers(resumed, want)
    assert json.loads((setup / "cut.scores.json").read_text())[0]["answers"] == whole.scores[0].answers


def test_a_part_file_removed_under_a_running_backtest_is_said_in_one_line(setup: Path) -> None:
    """A part that vanished mid-run (the folder removed by something else) surfaced as polars' raw `No such file
    or directory (os error 2): OUT.parts/part-000001.parquet`: now one line that says what happened and what to do."""
    config = ServiceConfig.load(setup / "engine.yaml")
    parts = setup / "removed.parquet.parts"
    polls = iter(range(10**9))

    def remove_the_parts_at_the_100th_boundary() -> bool:
        if next(polls) == 100:
            shutil.rmtree(parts)
        return False

    from engine.service.answer_parts import PartsGone

    with pytest.raises(PartsGone) as gone:
        run_backtest(config, [setup / "ticks.parquet"], setup / "q.yaml", setup / "removed.parquet", progress=False,
                     checkpoint_s=1e-6, stop=remove_the_parts_at_the_100th_boundary)
    said = str(gone.value)
    assert "\n" not in said and "os error" not in said, said
    assert said.startswith(str(parts) + "/") and f"vanished while this backtest wrote {parts}: " in said, said
    assert f"{setup / 'removed.parquet'} was not written: run the same command with --resume" in said, said


def test_stop_request_checkpoints_and_resume_refuses_other_inputs(setup: Path, uninterrupted: BacktestReport,
                                                                  capsys) -> None:
    config = ServiceConfig.load(setup / "engine.yaml")
    polls = iter(range(10**9))
    out = setup / "stopped.parquet"
    from engine.service.backtest import BacktestInterrupted

    with pytest.raises(BacktestInterrupted, match="--resume"):
        run_backtest(config, [setup / "ticks.parquet"], setup / "q.yaml", out, progress=False,
                     stop=lambda: next(polls) >= 280)  # as SIGTERM would, at the 280th batch boundary (of ~330)
    kept = json.loads((setup / "stopped.parquet.parts" / "progress.json").read_text())
    assert kept["consumed"] > 0 and kept["answers"] > 0
    (setup / "q2.yaml").write_text(QUERIES.replace("ticks: 5", "ticks: 7"))
    code = main(["backtest", str(setup / "ticks.parquet"), "--queries", str(setup / "q2.yaml"), "--out", str(out),
                 "--config", str(setup / "engine.yaml"), "--resume", "--quiet"])
    assert code == 2 and "different queries (--queries)" in capsys.readouterr().err
    code = main(["backtest", str(setup / "ticks.parquet"), "--queries", str(setup / "q.yaml"), "--out", str(out),
                 "--config", str(setup / "engine.yaml"), "--resume", "--quiet", "--batch-ms", "50"])
    assert code == 2 and "with different --batch-ms (100 then, 50 now);" in capsys.readouterr().err  # named, valued
    import dataclasses

    import torch

    threads = torch.get_num_threads()
    notes: list[str] = []
    assert kept["threads"] == 1  # the engine.yaml's model.threads, the default
    # on more threads (--threads): how fast, not what; the resume is taken, with a note on the last bits (late in
    # the run: two threads of a tiny model's forwards spin more CPU than they compute)
    try:
        faster = dataclasses.replace(config, model=dataclasses.replace(config.model, threads=2))
        report = run_backtest(faster, [setup / "ticks.parquet"], setup / "q.yaml", out, progress=False, resume=True,
                              note=notes.append)
    finally:
        torch.set_num_threads(threads)
    assert report.resumed_at == kept["consumed"] and report.ticks == TICKS
    assert [line for line in notes if "CPU threads" in line] == [
        f"resuming at 2 CPU threads (--threads) a run checkpointed at 1: the answers after the resume point "
        f"({kept['consumed']} ticks) may differ in their last float bits from a run at 1 (runs are byte-identical "
        f"only at the same thread count)"]
    assert_same_answers(pl.read_parquet(out), pl.read_parquet(setup / "whole.parquet"))


def test_a_parts_folder_stopped_before_its_first_checkpoint_does_not_refuse_a_fresh_run(setup: Path) -> None:
    """review218 #3: a second Ctrl-C as the replay began (before any checkpoint) said "no checkpoint was written
    yet: nothing kept; --resume starts from the beginning" but left OUT.parts holding its lock file, and the same
    command was then refused ("holds an unfinished backtest"). A folder with no checkpoint holds nothing to
    continue: a fresh run clears it and goes on."""
    from engine.service.answer_parts import LOCK

    out = setup / "early.parquet"
    parts = out.with_name(out.name + ".parts")
    parts.mkdir()
    (parts / LOCK).write_text("")  # what such an abort leaves: the lock file, free, and nothing else
    (parts / "stray.parquet").write_bytes(b"half")  # (a part cut short: written after no checkpoint)
    report = run_backtest(ServiceConfig.load(setup / "engine.yaml"), [setup / "ticks.parquet"], setup / "q.yaml", out,
                          progress=False, max_ticks=300)
    assert report.ticks == 300 and report.resumed_at == 0 and out.is_file() and not parts.exists()


def test_a_checkpoint_that_cannot_be_resumed_leaves_its_lock_free(tmp_path: Path) -> None:
    """A manifest refused (or failing) after its lock was taken lets go of the lock: the next try says the same
    problem, not "in use by a running backtest" (its own pid)."""
    from engine.service.answer_parts import AnswerParts

    key = {"files": "f", "queries": "q"}
    parts = tmp_path / "out.parquet.parts"
    parts.mkdir()
    (parts / "progress.json").write_text(json.dumps({"key": key, "consumed": 5}))  # no parts list: unusable
    for _ in range(2):
        with pytest.raises(ValueError, match='is damaged: it has no "parts" field'):
            AnswerParts.open(tmp_path / "out.parquet", key, resume=True)
    whole = {"consumed": 5, "parts": [], "answers": 0, "last_seq": {}}
    (parts / "progress.json").write_text(json.dumps({"key": {**key, "queries": "other"}, **whole}))
    for _ in range(2):
        with pytest.raises(ValueError, match="different queries"):
            AnswerParts.open(tmp_path / "out.parquet", key, resume=True)


def test_a_resume_with_no_checkpoint_is_said_through_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """review384 #7: `resume=True` where no checkpoint was kept printed the CLI's `flashtick backtest:` line to a
    Python caller's stderr; it is one of the run's notes, told to `note` (the CLI prints it as it prints the rest)."""
    from engine.service.answer_parts import AnswerParts

    notes: list[str] = []
    parts = AnswerParts.open(tmp_path / "out.parquet", {"files": "f"}, resume=True, note=notes.append)
    parts.release()
    assert notes == [f"no checkpoint in {tmp_path / 'out.parquet.parts'}; starting from the beginning"]
    assert capsys.readouterr().err == ""


def stopped_early(setup: Path, name: str) -> tuple[Path, Path]:
    """A backtest of the first 600 ticks stopped at its 40th poll (a checkpoint left): its output and parts folder."""
    from engine.service.backtest import BacktestInterrupted

    config = ServiceConfig.load(setup / "engine.yaml")
    out, polls = setup / name, iter(range(10**9))
    with pytest.raises(BacktestInterrupted):
        run_backtest(config, [setup / "ticks.parquet"], setup / "q.yaml", out, progress=False, max_ticks=600,
                     stop=lambda: next(polls) >= 40)
    return out, setup / f"{name}.parts"


def test_a_stopped_checkpoint_refuses_each_changed_setting_by_name_resumes_with_its_provenance_and_starts_over(
        setup: Path, capsys) -> None:
    """One run stopped early (a checkpoint left), met as a user meets it: each resume it cannot take is refused by
    name, with the manifest put back after each; the same command then resumes, recording so; starting over as told
    works.

    A run that raised right after taking OUT.parts' lock (the resume's note on thread counts, the progress bar
    reading the files' rows) kept the lock until the process ended, so a second run of the same --out in that
    process (a notebook, a script retrying) was refused as "in use by a running backtest" (its own pid). Every raise
    after the lock is taken now releases it: the resume below runs in this process.

    --session-gap was part of the config's digest, so a resume with another one was refused as "different config
    (--model, --config ...)", neither of which had changed. It is named, with both values, and the same gap resumes
    (the gap ends the adaptation's labels, so the published answers depend on it). A resume under another
    answers.adapt was refused as "different config" alone; the settings that change answers (answer_settings.py, the
    list serve's meta.json records) are named with their values. The same release with another --config: the
    refusal names each setting that differs, then and now (it said only "config (--model, --config ...)").

    Parts from a flashtick that rolled sessions elsewhere (before context_rolls.ROLL_RULE, or another one) would
    splice answers of two context rules into one table: refused by name, nothing written.

    A progress.json missing a field (a hand edit, a tool that rewrote it) raised a bare KeyError: the CLI said
    `error: 'consumed'`. It is called damaged, the field named, and the way out said; following it works.

    review321 #4: a half-done backtest of 0.1.0 resumed under the next release was refused as "different config
    (--model, --config ...)" with neither given: the release's own new settings moved the config's digest, and
    "resume with the same config" could not work. The checkpoint records its release now; one of another release
    (or none: before 0.2.0) is refused naming it, the settings that differ by key, and what works: start over, or
    finish it with that release. Starting over as told works.

    review206 #2: answers.parquet held only `ARROW:schema` and the scores no run header, so two runs differing in
    answers.adapt (or model, files, options) made indistinguishable outputs, and the resume key went with the parts
    folder. The answers file now holds the run's record as Parquet metadata (`flashtick`, JSON) and
    OUT.manifest.json the same under `run`: a resumed run's equals an uninterrupted one's, and a run under
    answers.adapt off differs from it in that setting (and the config's digest) alone.

    And the provenance record of a resumed run equaled an uninterrupted one's (in the answers file's metadata too),
    so nothing said it was resumed. The manifest beside it now says `resumed` and, when it was, from which
    checkpoint (ticks, answers, part files kept, or the answers file whole and only the scores owed). One stopped
    run, resumed, and one uninterrupted run of the same ticks serve both."""
    import dataclasses

    import torch

    from engine.service.release import BEFORE_RECORDS, this_release

    out, parts = stopped_early(setup, "refused.parquet")
    saved = (parts / "progress.json").read_text()
    manifest = kept = json.loads(saved)
    assert kept["consumed"] > 0
    command = cli(setup, "refused.parquet", "--resume", "--quiet", "--max-ticks", "600")
    config = ServiceConfig.load(setup / "engine.yaml")

    # a raise right after the lock is taken lets go of it
    def refuse_other_threads(line: str) -> None:  # a caller for whom another thread count is a bad option
        if "CPU threads" in line:
            raise ValueError(f"refused: {line}")

    threads = torch.get_num_threads()
    try:
        faster = dataclasses.replace(config, model=dataclasses.replace(config.model, threads=2))
        with pytest.raises(ValueError, match="refused: resuming at 2 CPU threads"):  # right after the lock is taken
            run_backtest(faster, [setup / "ticks.parquet"], setup / "q.yaml", out, progress=False, max_ticks=600,
                         resume=True, note=refuse_other_threads)
    finally:
        torch.set_num_threads(threads)

    # another session gap: named with both values
    capsys.readouterr()
    assert main([*command, "--session-gap", "1ms"]) == 2
    err = capsys.readouterr().err
    assert f"{parts} was written by a backtest with different --session-gap (answers.session_gap_s) (not given " \
           f"then, 0.001s now);" in err and "config" not in err.split("different", 1)[1].split(";")[0], err

    # another answers.adapt: named with its values
    other = setup / "adapt_off.yaml"
    other.write_text((setup / "engine.yaml").read_text() + "answers: {adapt: 'off'}\n")
    assert main([str(other) if arg == str(setup / "engine.yaml") else arg for arg in command]) == 2
    assert (f"{parts} was written by a backtest with different config (--model, --config: the model or engine "
            f"settings) (answers.adapt \"online\" then, \"off\" now);" in capsys.readouterr().err)

    # another --config of the same release: each setting that differs named by key
    (setup / "other.yaml").write_text((setup / "engine.yaml").read_text() + "limits: {max_queries: 500}\n")
    assert main([str(setup / "other.yaml") if arg == str(setup / "engine.yaml") else arg for arg in command]) == 2
    err = capsys.readouterr().err
    assert ("with different config (--model, --config: the model or engine settings) (limits.max_queries 1000 "
            "then, 500 now);") in err, err

    # parts of another roll rule: refused, nothing written
    older_rule = json.loads(saved)
    del older_rule["key"]["context_roll_rule"]  # as a checkpoint written before the rule was recorded
    (parts / "progress.json").write_text(json.dumps(older_rule))
    assert main(command) == 2 and "rolled sessions elsewhere" in capsys.readouterr().err
    assert not out.exists()

    # a damaged manifest: the field named and the way out said
    for damage, said in (({"consumed": None}, 'it has no "consumed" field (the ticks its parts cover)'),
                         ({"parts": "part-000001.parquet"}, 'its "parts" field (the names of its part files) is '
                          "\"part-000001.parquet\", not a list of file names")):
        damaged = {k: v for k, v in {**manifest, **damage}.items() if v is not None}
        (parts / "progress.json").write_text(json.dumps(damaged))
        capsys.readouterr()
        assert main(command) == 2
        assert capsys.readouterr().err.splitlines()[-1] == (
            f"flashtick backtest: error: {parts / 'progress.json'} is damaged: {said}, so its checkpoint cannot be "
            f"resumed; remove {parts} and run the command again to start over (a run without --resume refuses the "
            f"folder while it is there)")

    # a checkpoint of an earlier release: named, with what works
    assert manifest["release"] == this_release().record()
    assert manifest["key"]["config_values"]["limits.max_queries"] == 1000
    # a 0.1.0 build's checkpoint: no release, no values, a digest over fewer settings
    older = {**manifest, "key": {k: v for k, v in manifest["key"].items() if k != "config_values"} | {"config": "0"}}
    del older["release"]
    (parts / "progress.json").write_text(json.dumps(older))
    assert main(command) == 2
    err = capsys.readouterr().err
    assert f"{parts} was written by a backtest of {BEFORE_RECORDS}, and this is flashtick {this_release()}" in err
    assert "--model, --config" not in err and "limits.max_new_streams_per_message " in err, err
    assert (f"Start over: delete {parts} and run the command again without --resume; or finish it with the release "
            f"that wrote it") in err
    # a later release's: its values recorded, so the setting that differs is named with both values
    values = manifest["key"]["config_values"] | {"limits.max_queries": 500}
    later = {**manifest, "release": {"version": "0.1.9", "commit": "ab" * 20},
             "key": manifest["key"] | {"config": "0", "config_values": values}}
    (parts / "progress.json").write_text(json.dumps(later))
    assert main(command) == 2
    err = capsys.readouterr().err
    assert "written by a backtest of 0.1.9 (git abababab)" in err
    assert "differs in engine settings (limits.max_queries 500 then, 1000 now)" in err, err
    assert "(a checkout of its commit abababab)" in err

    # the same command resumes (in this process: the lock the raise above took is free), and says so in its outputs
    (parts / "progress.json").write_text(saved)
    assert main(command) == 0 and not parts.exists() and pl.read_parquet(out).height > 0
    assert "replayed 600 ticks" in capsys.readouterr().out

    def record(out: Path) -> dict:
        kept = json.loads(pl.read_parquet_metadata(out)["flashtick"])
        # (the manifest's record also keeps each input's modification time, which the answers file's leaves out)
        assert without_file_times(json.loads(out.with_suffix(".manifest.json").read_text())["run"]) == kept
        return kept

    run_backtest(config, [setup / "ticks.parquet"], setup / "q.yaml", setup / "fresh.parquet", progress=False,
                 max_ticks=600)
    resumed, fresh = record(out), record(setup / "fresh.parquet")
    # the manifests: the resumed one says from which checkpoint, the uninterrupted one that it was not resumed
    resumed_manifest = json.loads(out.with_suffix(".manifest.json").read_text())
    whole = json.loads((setup / "fresh.manifest.json").read_text())
    assert resumed_manifest["resumed"] is True and resumed_manifest["resumed_from"] == {
        "ticks": kept["consumed"], "answers": kept["answers"], "parts": len(kept["parts"]),
        "answers_file_whole": False}, resumed_manifest
    assert whole["resumed"] is False and "resumed_from" not in whole
    assert resumed_manifest["run"] == whole["run"] | {"resumed": {"after_ticks": kept["consumed"]}}
    assert resumed_manifest["answers"]["rows"] == whole["answers"]["rows"]
    # the answers file's record (its Parquet metadata) says it too (review349 #7: a file apart from its manifest)
    assert resumed == without_file_times(resumed_manifest["run"])
    assert resumed.pop("resumed")["after_ticks"] > 0 and resumed == fresh  # (review349 #7: says it was resumed)
    ticks = (setup / "ticks.parquet").stat()
    assert whole["run"]["files"] == [{"path": str((setup / "ticks.parquet").resolve()), "size": ticks.st_size,
                                      "mtime_ns": ticks.st_mtime_ns, "digest": fresh["files"][0]["digest"]}]
    assert fresh["files"][0]["digest"]
    assert "mtime_ns" not in fresh["files"][0]  # (the answers file's record: no wall-clock value, review407 #3)
    assert fresh["queries"]["text"] == QUERIES and fresh["max_ticks"] == 600 and fresh["batch_ms"] == 100
    assert len(fresh["model"]["digest"]) == 64 and fresh["settings"]["answers.adapt"] == "online"
    off = dataclasses.replace(config, answers=dataclasses.replace(config.answers, adapt="off"))
    run_backtest(off, [setup / "ticks.parquet"], setup / "q.yaml", setup / "off.parquet", progress=False,
                 max_ticks=600)
    unadapted = record(setup / "off.parquet")
    assert {k for k in fresh if fresh[k] != unadapted[k]} == {"settings", "config", "config_digest"}
    assert {k: v for k, v in unadapted["settings"].items() if fresh["settings"][k] != v} == {"answers.adapt": "off"}

    # starting over as the refusals tell (the parts folder deleted; here the resumed run's outputs too, so that the
    # command meets what it met then: neither), with --resume and without
    for again in (command, [arg for arg in command if arg != "--resume"]):
        for suffix in (".parquet", ".scores.json", ".manifest.json"):
            out.with_suffix(suffix).unlink()
        assert main(again) == 0 and pl.read_parquet(out).height > 0


def test_a_file_corrected_in_place_with_its_size_and_time_kept_is_not_resumed(setup: Path, capsys) -> None:
    """review206 #4: the resume key checked each file's size and modification time only, so a file whose prices
    were corrected in place (the same byte count) and given its old time back (cp -p, rsync -t, touch -r) was
    resumed: answers before the checkpoint from the old rows, after it from the new. A digest of its bytes (whole
    up to 64 MiB, file_samples.py) now tells it: refused, the file named; put back, it resumes."""
    ticks = setup / "edited.csv"
    pl.read_parquet(setup / "ticks.parquet").head(600).write_csv(ticks)
    original = ticks.read_bytes()
    command = ["backtest", str(ticks), "--queries", str(setup / "q.yaml"), "--out", str(setup / "edited.parquet"),
               "--config", str(setup / "engine.yaml"), "--resume", "--quiet"]
    from engine.service.backtest import BacktestInterrupted

    polls = iter(range(10**9))
    with pytest.raises(BacktestInterrupted):
        run_backtest(ServiceConfig.load(setup / "engine.yaml"), [ticks], setup / "q.yaml", setup / "edited.parquet",
                     progress=False, stop=lambda: next(polls) >= 40)
    assert json.loads((setup / "edited.parquet.parts" / "progress.json").read_text())["consumed"] > 0
    stat = ticks.stat()
    lines = original.split(b"\n")
    middle = len(lines) // 2
    fields = lines[middle].split(b",")
    at = next(i for i, f in enumerate(fields) if f[:1].isdigit() and b"." in f)  # a price: one digit changed
    fields[at] = (b"1" if fields[at][:1] != b"1" else b"2") + fields[at][1:]
    lines[middle] = b",".join(fields)
    ticks.write_bytes(b"\n".join(lines))
    os.utime(ticks, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # its time given back, as cp -p does
    assert ticks.stat().st_size == stat.st_size and ticks.stat().st_mtime_ns == stat.st_mtime_ns
    capsys.readouterr()
    assert main(command) == 2
    assert (f"was written by a backtest with different file contents (the same size and modification time, other "
            f"bytes: {ticks.resolve()}: corrected in place, or copied over keeping its time?);"
            in capsys.readouterr().err)
    ticks.write_bytes(original)
    os.utime(ticks, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert main(command) == 0 and pl.read_parquet(setup / "edited.parquet").height > 0


def test_sigterm_stops_at_a_checkpoint_and_says_how_to_resume(setup: Path, long_ticks: Path) -> None:
    manifest = setup / "term.parquet.parts" / "progress.json"
    child = cli_popen(cli(setup, "term.parquet", "--checkpoint-s", "0.05", ticks=long_ticks.name),
                      env={**os.environ, "PYTHONPATH": str(ROOT)},
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None and not (
            manifest.is_file() and json.loads(manifest.read_text())["consumed"] > 0):
        time.sleep(0.02)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=300)
    assert child.returncode == 143, err[-2000:]  # 128 + SIGTERM, as in every phase (test_backtest_signals.py)
    assert "interrupted after" in err and "--resume" in err
    kept = json.loads(manifest.read_text())
    assert 0 < kept["consumed"] < 10 * TICKS and not (setup / "term.parquet").exists()


def test_progress_bar_on_a_terminal_and_quiet_elsewhere(setup: Path, monkeypatch) -> None:
    """stderr on a real pseudo-terminal: the bar shows ticks done of the total, a rate and an ETA, live."""
    def run(ticks: int, *extra: str) -> tuple[int, str]:
        leader, follower = pty.openpty()
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))  # as a terminal window
        reader, seen = read_terminal(leader)
        with open(follower, "w", closefd=True) as terminal:
            monkeypatch.setattr(sys, "stderr", terminal)
            code = main(cli(setup, "bar.parquet", "--max-ticks", str(ticks), *extra))
            monkeypatch.undo()
        reader.join(10)
        os.close(leader)
        return code, b"".join(seen).decode(errors="replace")

    code, shown = run(TICKS)  # long enough to redraw: chunked is fast
    assert code == 0 and f"{TICKS}/{TICKS}" in shown and "ticks/s" in shown and "<" in shown, shown[-500:]
    # live, not 0 then done
    assert len({line.split("|")[-1][:8] for line in shown.split("\r") if "ticks/s" in line}) > 2
    code, shown = run(TICKS // 5, "--quiet")  # (quiet from its first tick: a short run shows it as well)
    assert code == 0 and "ticks/s" not in shown


def test_a_run_that_rejects_every_row_exits_non_zero_with_the_reasons(setup: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "bad.csv").write_text("ts,price,size\n1,-5,1\n2,-6,1\n3,N/A,1\n")
    code = main(["backtest", str(tmp_path / "bad.csv"), "--queries", str(setup / "q.yaml"), "--out",
                 str(tmp_path / "a.parquet"), "--config", str(setup / "engine.yaml"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "every row was rejected" in err
    assert f"rejected nonpositive_price: 2 (first: {tmp_path / 'bad.csv'} line 2: " in err
    assert 'column "price"' in err and "rejected missing_field: 1" in err
    assert not (tmp_path / "a.parquet").exists() and not (tmp_path / "a.parquet.parts").exists()


def test_summary_lists_rejected_rows_by_reason(setup: Path, tmp_path: Path, capsys) -> None:
    rows = [t.to_wire() for t in SyntheticMarket(SyntheticConfig(seed=2)).next_batch(200)]
    rows[10]["price"] = rows[10]["bid"] = None
    pl.DataFrame(rows).with_columns(pl.col("ts").cast(pl.Int64)).write_parquet(tmp_path / "t.parquet")
    code = main(["backtest", "--no-plot", str(tmp_path / "t.parquet"), "--queries", str(setup / "q.yaml"), "--out",
                 str(tmp_path / "a.parquet"), "--config", str(setup / "engine.yaml")])
    out, err = capsys.readouterr()
    assert code == 0 and "replayed 199 ticks (1 rejected)" in out, err
    assert "ticks/s" not in err  # stderr is not a terminal here: no bar without --quiet either
    # the file holds several streams: the line names the one that lost the row; its price left out is missing_field
    # as on the wire (review391 #2: it was unknown_kind, where a price sent as nil was missing_field)
    assert f"rejected missing_field: 1 ({rows[10]['stream']} 1; first: {tmp_path / 't.parquet'} row 11: " in out


def _asleep_in_a_pipe_read(pid: int) -> bool:
    """Whether the process's main thread sleeps in a pipe's read (Linux's /proc wait channel; False elsewhere)."""
    try:
        return "pipe_read" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("resuming", [False, True])
def test_ctrl_c_before_the_run_begins_says_nothing_was_kept(setup: Path, tmp_path: Path, resuming: bool) -> None:
    """A Ctrl-C while the backtest still loads (its libraries, config, model) once exited 130 without a word.
    The config is a named pipe the backtest blocks reading, so the signal lands there, not by timing. It once hung
    there: the kernel gave the signal to a library's thread, not to the main thread asleep in the read. Resuming, the
    checkpoint is left as it was, and said so (it said "nothing kept" over 960 answers kept)."""
    config = tmp_path / "engine.yaml"
    os.mkfifo(config)
    if resuming:  # the checkpoint an interrupted run left: a manifest naming what it kept
        (tmp_path / "a.parquet.parts").mkdir()
        (tmp_path / "a.parquet.parts" / "progress.json").write_text('{"consumed": 960, "answers": 960, "parts": []}')
    child = cli_popen(["backtest", str(setup / "ticks.parquet"), "--queries", str(setup / "q.yaml"), "--out",
                       str(tmp_path / "a.parquet"), "--config", str(config), *(["--resume"] if resuming else [])],
                      env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                      text=True)
    deadline = time.monotonic() + 120
    writer = None
    while writer is None and time.monotonic() < deadline and child.poll() is None:
        try:  # succeeds once the backtest has opened the pipe to read it
            writer = os.open(config, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            time.sleep(0.02)
    # let the read block first: the kernel may hand a signal to a library's worker thread (numpy's OpenBLAS pool)
    # when the main thread sleeps in a read, which then never heard of it (a CI run hung here for 300 s). Waited
    # for as the kernel says it (the main thread's wait channel), at most the half second this once slept for
    settle = time.monotonic() + 0.5
    while child.poll() is None and time.monotonic() < settle and not _asleep_in_a_pipe_read(child.pid):
        time.sleep(0.01)
    try:
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        pytest.fail("the backtest did not end on a Ctrl-C while it read its config")
    finally:
        if writer is not None:
            os.close(writer)
    if resuming:
        assert child.returncode == 130 and err.startswith("flashtick backtest: interrupted before any tick; nothing "
                                                          "changed: 960 answers of the first 960 ticks kept in "), err
        assert "--resume to continue from there" in err
        assert (tmp_path / "a.parquet.parts" / "progress.json").is_file()
        return
    assert child.returncode == 130 and err == "flashtick backtest: interrupted before any tick; nothing kept\n", err
    assert not (tmp_path / "a.parquet").exists() and not (tmp_path / "a.parquet.parts").exists()


def test_a_backtest_started_ignoring_sigint_keeps_ignoring_it(setup: Path, long_ticks: Path) -> None:
    """`cmd &` in a script (or nohup) starts a backtest with SIGINT ignored: a Ctrl-C at the terminal was ignored
    while it loaded, then stopped it once its ticks flowed. It stays ignored; SIGTERM still stops it."""
    manifest = setup / "bg.parquet.parts" / "progress.json"
    # a real process: the SIGINT ignored is set between its fork and its exec (preexec_fn), as a shell's `cmd &`
    child = subprocess.Popen([sys.executable, "-m", "engine.service.cli", *cli(setup, "bg.parquet",
                              "--checkpoint-s", "0.05", ticks=long_ticks.name)],
                             env={**os.environ, "PYTHONPATH": str(ROOT)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None and not (
            manifest.is_file() and json.loads(manifest.read_text())["consumed"] > 0):
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)  # ignored: no "stopping at the next batch boundary"
    time.sleep(0.2)
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=300)
    assert child.returncode == 143 and err.count("stopping at the next batch boundary") == 1, err[-2000:]
    assert "interrupted after" in err
    assert ("note: started with SIGINT ignored (a script's \"cmd &\", or nohup): Ctrl-C and kill -INT do not stop "
            "it; kill -TERM PID does, at the next batch boundary, exit 143") in err  # (review349 #10)


@pytest.mark.parametrize("when", ["started", "loading", "replaying"])
def test_ctrl_c_at_any_point_of_a_backtest_ends_it_as_documented(setup: Path, long_ticks: Path, tmp_path: Path,
                                                                 when: str) -> None:
    """A Ctrl-C ~3 s into a backtest once ended it by the signal (rc -2, a traceback) instead of exit 130 with a
    line saying what was kept: one landing while the program still imported its own modules met Python's default
    handling. Sent right after the start (the CLI module importing, `-X importtime` says when), while the libraries
    load (torch importing) and while ticks replay, it ends the run with 130 and a line, never a traceback."""
    out = tmp_path / "a.parquet"
    argv = ["backtest", str(long_ticks), "--queries", str(setup / "q.yaml"), "--out", str(out),
            "--config", str(setup / "engine.yaml"), "--checkpoint-s", "0.05"]
    # a real process while it still imports (its imports are what is timed); once it replays, a forked one
    start = cli_popen if when == "replaying" else lambda argv, **popen: subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "engine.service.cli", *argv], **popen)
    child = start(argv, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                  text=True)
    marks = {"started": lambda line: line.endswith("| argparse\n"),  # imported by the CLI module, past its start
             "loading": lambda line: re.search(r"\|\s+torch\.", line)}  # a part of torch: torch still importing
    lines: list[str] = []
    marked = threading.Event()

    def read() -> None:  # (importtime writes a lot: read it all, and mark the moment as soon as it shows)
        for line in child.stderr:
            lines.append(line)
            if when in marks and not marked.is_set() and marks[when](line):
                marked.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    manifest = out.with_name(out.name + ".parts") / "progress.json"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and child.poll() is None and not marked.wait(0.005):
        if when == "replaying" and manifest.is_file() and json.loads(manifest.read_text())["consumed"] > 0:
            break
    child.send_signal(signal.SIGINT)
    child.wait(timeout=300)
    reader.join(10)
    said = [line for line in lines if not line.startswith("import time:")]
    assert child.returncode == 130 and not any("Traceback" in line for line in said), said
    expected = {"started": ("flashtick: interrupted while starting; nothing done",
                            "flashtick backtest: interrupted before any tick; nothing kept"),
                # (torch imports with the signal noted, raised once it is in: review407 #6)
                "loading": ("flashtick: interrupted while starting; nothing done",
                            "flashtick backtest: interrupted before any tick; nothing kept"),
                "replaying": ("flashtick backtest: interrupted after ",)}[when]
    assert said and said[-1].startswith(expected), said


def test_a_full_disk_is_said_in_one_line_naming_the_file_and_resume_continues(setup: Path,
                                                                                uninterrupted: BacktestReport,
                                                                                capsys) -> None:
    """Review224 #6: a full disk or `ulimit -f` during a backtest said polars' "parquet: File out of specification:
    underlying IO error: File too large (os error 27)": no file, no --resume, a .tmp part left taking the space.
    Now one line naming the part, the cause and --resume, the .tmp gone; --resume then completes the run. The file
    size limit (RLIMIT_FSIZE, what `ulimit -f` sets) stands in for a full disk here: the same write fails (EFBIG;
    Python ignores SIGXFSZ), without root or a small mount. `ticklog export` is said the same way."""
    import resource

    import msgpack

    from engine.service.ticklog import TickLog

    out, data = setup / "full.parquet", setup / "full-data"
    with TickLog(data / "ticks", fsync="never") as log:
        for tick in SyntheticMarket(SyntheticConfig(seed=3)).next_batch(2000):
            log.append(msgpack.packb({"tick": tick.to_wire()}, use_bin_type=True))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    capsys.readouterr()
    resource.setrlimit(resource.RLIMIT_FSIZE, (8192, hard))  # a part of a checkpoint's answers is larger
    try:
        # a checkpoint at the first tick grid point (512): its part is the first write, long before the run's end
        code = main(cli(setup, "full.parquet", "--quiet", "--checkpoint-s", "0.001"))
        exported = main(["ticklog", "export", str(data), "--out", str(setup / "ticks-export.csv")])
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    err = capsys.readouterr().err
    parts = setup / "full.parquet.parts"
    assert code == 5 and exported == 5, err  # output not written (docs/cli.md)
    errors = [line for line in err.splitlines() if "error:" in line]
    assert errors[0] == (
        f"flashtick backtest: error: cannot write {parts / 'part-000001.parquet'}: the file is larger than this "
        f"process may write (its file size limit, ulimit -f, is 8,192 bytes); raise the limit and "
        f"run the same command with --resume to continue from the last checkpoint ({parts})"), err
    assert len(errors) == 2 and errors[1].startswith(  # (what to do after it: tests/test_export_outputs.py)
        f"flashtick ticklog export: error: cannot write {setup / 'ticks-export.csv'}: the file is larger than this "
        f"process may write (its file size limit, ulimit -f, is 8,192 bytes); nothing was written"), err
    assert sorted(p.name for p in parts.iterdir()) == ["lock"]  # the .tmp part went, giving its space back
    assert not (setup / "ticks-export.csv").exists() and not (setup / "ticks-export.csv.chunks").exists()
    assert main(cli(setup, "full.parquet", "--resume", "--quiet")) == 0
    assert_same_answers(pl.read_parquet(out), pl.read_parquet(setup / "whole.parquet"))


def resent_and_gapped(path: Path, n: int = 1200) -> dict[str, list[tuple[int, int]]]:
    """Synthetic ticks numbered per stream (column seq), with a number skipped (a gap) every 23 rows and, every 37,
    a restamped resend of the stream's tick 30 to 45 rows back, written to `path`. -> for each resend and gap, the
    rows of the tick it repeats or follows and of itself (a stop between the two splits it), by kind."""
    ticks = SyntheticMarket(SyntheticConfig(seed=7)).next_batch(n)
    rows: list[dict] = []
    last: dict[str, int] = {}  # stream -> its last row
    numbers: dict[str, int] = {}
    spans: dict[str, list[tuple[int, int]]] = {"resend": [], "gap": []}
    for i, tick in enumerate(ticks):
        if i % 37 == 36 and (back := next((j for j in range(len(rows) - 30, len(rows) - 45, -1)
                                           if rows[j]["stream"] == tick.stream), None)) is not None:
            spans["resend"].append((back, len(rows)))
            rows.append({**rows[back], "ts": tick.ts})  # the same values and number, at a later time (restamped)
        if i % 7 == 3 and tick.stream in last:
            spans["gap"].append((last[tick.stream], len(rows)))
        numbers[tick.stream] = numbers.get(tick.stream, 0) + (2 if i % 7 == 3 else 1)
        last[tick.stream] = len(rows)
        rows.append({**tick.to_wire(), "seq": numbers[tick.stream]})
    pl.DataFrame(rows).write_parquet(path)
    return spans


def test_a_resumed_backtest_leaves_out_the_resends_and_says_the_gaps_of_an_uninterrupted_one(setup: Path) -> None:
    """fix298 #2: the sequence watch keeps recent ticks to catch restamped resends (fix294); a resumed run rebuilds
    its sessions by reading the files again through the same replay, so it must leave out the same resends, say the
    same gaps and give the same answers as a run that was never stopped, with resends and gaps across the stop."""
    config = ServiceConfig.load(setup / "engine.yaml")
    path = setup / "resent.parquet"
    spans = resent_and_gapped(path)
    run = {"columns": {"sequence": "seq"}, "progress": False}
    whole = run_backtest(config, [path], setup / "q.yaml", setup / "resent_whole.parquet", **run)
    assert any("restamped" in n for n in whole.found_notes) and any("gap(s)" in n for n in whole.found_notes)
    polls = iter(range(10**9))
    from engine.service.backtest import BacktestInterrupted

    with pytest.raises(BacktestInterrupted):
        run_backtest(config, [path], setup / "q.yaml", setup / "resent_cut.parquet", stop=lambda: next(polls) >= 120,
                     **run)
    consumed = json.loads((setup / "resent_cut.parquet.parts" / "progress.json").read_text())["consumed"]
    for kind in ("resend", "gap"):  # one across the stop at least: the watch's memory is what the resume needs
        assert any(before < consumed <= after for before, after in spans[kind]), (kind, consumed, spans[kind])
    resumed = run_backtest(config, [path], setup / "q.yaml", setup / "resent_cut.parquet", resume=True, **run)
    assert resumed.resumed_at == consumed and (resumed.ticks, resumed.rejected) == (whole.ticks, whole.rejected)
    assert resumed.found_notes == whole.found_notes
    assert_same_answers(pl.read_parquet(setup / "resent_cut.parquet"), pl.read_parquet(setup / "resent_whole.parquet"))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_torch_imports_is_raised_once_it_is_in(monkeypatch, signum: int) -> None:
    """review407 #6: raised inside torch's import, a stop left a C extension half-loaded: the job exited 2 on "module
    'numpy' has no attribute 'matrix'" or aborted through pybind11. The import runs with SIGINT and SIGTERM noted;
    the first one noted is raised after it, and the handlers are the job's again."""
    import argparse
    import importlib

    from engine.service import cli
    from engine.service.cli_common import Interrupted, raise_interrupted

    imported = []

    def import_module(name: str):  # the signal comes in the middle of the import
        os.kill(os.getpid(), signum)
        imported.append(name)

    before = {s: signal.signal(s, raise_interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        monkeypatch.setattr(importlib, "import_module", import_module)
        with pytest.raises(Interrupted) as raised:
            cli._load_torch(argparse.Namespace(command="backtest"))
        assert imported == ["torch"] and raised.value.signum == signum
        assert all(signal.getsignal(s) is raise_interrupted for s in before)
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)
