"""`flashtick train` that failed part way (a disk that filled after the weights) left a partial checkpoint in --out:
model.safetensors, config.json, codec.json and calibration.json without evaluation.json or the model card, which
`serve --model` and `evaluate` loaded; with --overwrite, the new weights beside the last run's card and scores. The
checkpoint is now written beside --out and renamed into place once whole (engine/service/staged_dir.py). A real
tiny model trained through the CLI; the write that fails is a real one, past the file size limit (RLIMIT_FSIZE,
`ulimit -f`) of a `flashtick train` process of its own (forked warm: tests/forked_cli.py): its weights fit
under it, its evaluation.json does not."""

from __future__ import annotations

import json
import re
import resource
import signal
import subprocess
import time
from pathlib import Path

from tests.test_train_folders import QUICK, TINY, train, write_days
from tests.train_cache import trained_copy
from forked_cli import cli_popen, cli_run

SMALL = ["--hidden", "4", "--intermediate", "8"]  # weights of ~6 KB: smaller than the run's evaluation.json (~10 KB)
WEIGHTS = "model.safetensors"
WRITTEN_FIRST = (WEIGHTS, "config.json", "codec.json", "calibration.json")  # before evaluation.json


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def train_limited(files: list[str], out: Path, limit: int, *options: str) -> subprocess.CompletedProcess:
    """`flashtick train` in a process whose files may not grow past ``limit`` bytes (a write past it: EFBIG): a
    process of its own, forked warm (tests/forked_cli.py)."""
    return cli_run(["train", *files, "--out", str(out), *TINY, *QUICK, *SMALL, "--quiet", *options],
                   rlimits={resource.RLIMIT_FSIZE: limit}, capture_output=True, text=True, timeout=600)


def test_a_train_that_fails_part_way_on_a_new_out_leaves_no_checkpoint(tmp_path: Path) -> None:
    """A new --out: the weights, config.json, codec.json and calibration.json were there, a loadable checkpoint
    without its scores or card; now no --out at all, as before the run."""
    files = [str(f) for f in write_days(tmp_path / "days")]
    failed = train_limited(files, tmp_path / "new" / "model", 8192)  # (the run above: weights ~6 KB, scores ~10 KB)
    assert failed.returncode == 2 and "the file is larger than this process may write" in failed.stderr, \
        failed.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["days"]  # nor the folder it made for --out


def tree_of(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder`` by its relative path: a file's bytes, a folder's None."""
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))}


def test_a_train_that_fails_part_way_leaves_out_as_it_was_and_an_overwrite_keeps_what_out_holds_besides_it(
        tmp_path: Path, tmp_path_factory) -> None:
    """A train that failed part way (its 5th file, evaluation.json, past the file size limit) left its new weights
    beside the last run's card and scores: --out is now left byte for byte as it was, nothing beside it, and the
    error says so; the same run with room replaces the checkpoint whole, --out's mode kept.

    review272 #1: `train --overwrite` replaced --out as a whole, deleting a user's notes and backtests/ folder
    kept beside the checkpoint (exit 0, nothing said). Only the checkpoint's files are replaced now; a run that
    fails part way still leaves --out byte for byte as it was. The second run goes through a symlink to --out.
    (One checkpoint, one failed run and one replacing run for both: the --out the failed run leaves as it was holds
    the user's files too.)"""
    from engine.service.finetune import CHECKPOINT_FILES

    files = [str(f) for f in write_days(tmp_path / "days")]
    out, link = tmp_path / "model", tmp_path / "link"
    rc, _, err = trained_copy(tmp_path_factory, out, *SMALL)  # (trained once per process: tests/train_cache.py)
    assert rc == 0, err[-2000:]
    checkpoint, mode = files_of(out), out.stat().st_mode
    assert set(checkpoint) <= CHECKPOINT_FILES, set(checkpoint) - CHECKPOINT_FILES  # every file a run writes
    (out / "my_notes.txt").write_text("my notes\n")
    (out / "backtests").mkdir()
    (out / "backtests" / "run1.parquet").write_bytes(b"x\n")
    before = tree_of(out)
    sizes = {name: len(data) for name, data in checkpoint.items()}
    limit = (max(sizes[n] for n in WRITTEN_FIRST) + sizes["evaluation.json"]) // 2
    assert max(sizes[n] for n in WRITTEN_FIRST) < limit < sizes["evaluation.json"], sizes  # fails at its 5th file

    failed = train_limited(files, out, limit, "--overwrite", "--steps", "2")  # other weights than the first run's
    assert failed.returncode == 2 and "Traceback" not in failed.stderr, failed.stderr[-2000:]
    assert tree_of(out) == before  # the first run's checkpoint, byte for byte: no new weights beside its card
    assert sorted(p.name for p in tmp_path.iterdir()) == ["days", "model"]  # nothing left beside it
    (said,) = [line for line in failed.stderr.splitlines() if "error:" in line]
    staged = r"\.model\.\w+\.partial"  # mkdtemp's name beside --out
    assert re.fullmatch(rf"flashtick train: error: cannot write {re.escape(str(tmp_path))}/{staged}/evaluation\.json: "
                        rf"the file is larger than this process may write \(.*\); --out {re.escape(str(out))} was "
                        rf"left as it was: the unfinished output written beside it \({staged}\) was removed",
                        said), said

    link.symlink_to(out.name)
    rc, _, err = train(files, link, *SMALL, "--overwrite", "--steps", "2")  # the same run with room: replaced whole
    assert rc == 0, err[-2000:]
    after = tree_of(out)
    assert {k: after[k] for k in ("my_notes.txt", "backtests", "backtests/run1.parquet")} == \
        {k: before[k] for k in ("my_notes.txt", "backtests", "backtests/run1.parquet")}  # kept, as they were
    assert sorted(after) == sorted(before) and after[WEIGHTS] != before[WEIGHTS]  # the new checkpoint's weights
    assert {name: after[name] for name in checkpoint} != checkpoint and out.stat().st_mode == mode
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["days", "link", "model"]


def test_a_later_train_removes_what_a_killed_one_left_beside_out(tmp_path: Path) -> None:
    """review272 #4: a train killed with -9 left its hidden `.OUT.XXXXXXXX.partial` folder beside --out, and no later
    run removed it (a kill late in a run: a whole checkpoint's weights). A later train on that --out holds its lock,
    so no other run writes there: it removes the folder and says so. A real kill -9 of a train process, sent once
    its staging folder is there (the folder stays until the swap at the run's end, so the wait is not a race)."""
    files = [str(f) for f in write_days(tmp_path / "days")]
    out = tmp_path / "model"
    first = cli_popen(["train", *files, "--out", str(out), *TINY, *QUICK, "--quiet"], stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300  # a wait for the run to make its staging folder, not a timed assertion
        while time.monotonic() < deadline and first.poll() is None and not list(tmp_path.glob(".model.*.partial")):
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)
        assert first.wait(60) == -signal.SIGKILL, first.communicate()[1][-2000:]  # killed, not finished
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(60)
    (left,) = tmp_path.glob(".model.*.partial")
    other = tmp_path / ".model.x.abcdefgh.partial"  # --out model.x's run's (mkdtemp's 8 characters after `model.x.`)
    other.mkdir()
    swapping = tmp_path / ".model.abcdefgh.replaced"  # a run killed mid-swap: what --out held, the user's notes too
    swapping.mkdir()
    (swapping / "my_notes.txt").write_text("my notes\n")

    rc, _, err = train(files, out)
    assert rc == 0, err[-2000:]
    previous = tmp_path / "model.previous-abcdefgh"  # --out held no checkpoint: renamed, said once (fix286 #2)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["days", "model", other.name, previous.name])
    assert f"flashtick train: note: removed {left.name} beside --out {out}: the unfinished checkpoint of a train on " \
           f"it that was killed before it finished" in err.splitlines(), err
    assert f"flashtick train: {previous} is what --out {out} held before a train on it was killed while replacing " \
           f"it, which left --out without it (renamed from {swapping.name}, said this once): move back what you " \
           f"want of it, then remove it" in err.splitlines(), err
    assert (previous / "my_notes.txt").read_text() == "my notes\n" and (out / "config.json").is_file()


def test_a_killed_runs_folder_removed_is_said_under_quiet_and_json(tmp_path: Path) -> None:
    """fix286 #1: the note that a killed run's staging folder beside --out was removed went through the progress
    log, which --quiet and --json silence: a folder was deleted and nothing said so. It is said on stderr always;
    --json's stdout stays one JSON document, whose cautions hold the note too. The folder is left by hand, named
    as mkdtemp names a run's (a kill is test_a_later_train_removes_what_a_killed_one_left_beside_out's)."""
    files = [str(f) for f in write_days(tmp_path / "days")]
    out = tmp_path / "model"
    for quiet in ("--quiet", "--json"):
        left = tmp_path / ".model.abcdefgh.partial"
        left.mkdir()
        (left / WEIGHTS).write_bytes(b"half a checkpoint")
        rc, text, err = train(files, out, quiet, *(("--overwrite",) if out.exists() else ()))
        assert rc == 0, err[-2000:]
        assert not left.exists()
        said = (f"note: removed {left.name} beside --out {out}: the unfinished checkpoint of a train on it that was "
                f"killed before it finished")
        assert f"flashtick train: {said}" in err.splitlines(), (quiet, err)
        if quiet == "--json":
            assert said in json.loads(text)["cautions"]


def test_an_old_out_left_by_a_kill_mid_swap_is_dealt_with_once(tmp_path: Path, tmp_path_factory) -> None:
    """fix286 #2: a train killed between the swap's two renames left --out's old folder as `.OUT.X.replaced`, and
    every later train named it again, for ever. With a whole checkpoint in --out (its model card there: the swap
    had put it in place) the swap is finished: what the old folder held besides a checkpoint moves into --out, the
    rest goes, said. With none (a kill between the renames: --out gone), it may hold the only copy of the old
    checkpoint: renamed to a visible `OUT.previous-X` beside --out and named once. The folders are left by hand."""
    files = [str(f) for f in write_days(tmp_path / "days")]
    out = tmp_path / "model"
    rc, _, err = trained_copy(tmp_path_factory, out, *SMALL)
    assert rc == 0, err[-2000:]
    checkpoint = files_of(out)
    old = tmp_path / ".model.abcdefgh.replaced"
    old.mkdir()
    for name, data in checkpoint.items():
        (old / name).write_bytes(data)
    (old / "my_notes.txt").write_text("my notes\n")
    (old / "backtests").mkdir()
    (old / "backtests" / "run1.parquet").write_bytes(b"x\n")
    rc, _, err = train(files, out, *SMALL, "--overwrite", "--quiet")
    assert rc == 0, err[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["days", "model"]
    assert (out / "my_notes.txt").read_text() == "my notes\n" and (out / "backtests" / "run1.parquet").is_file()
    assert f"flashtick train: note: removed {old.name} beside --out {out}: the checkpoint --out held before a train " \
           f"on it that was killed while replacing it, replaced by the whole checkpoint now there; moved into it " \
           f"what it held besides a checkpoint: backtests, my_notes.txt" in err.splitlines(), err

    gone = tmp_path / "fresh"  # killed between the renames: --out absent, its checkpoint only in the old folder
    aside = tmp_path / ".fresh.abcdefgh.replaced"
    aside.mkdir()
    for name, data in checkpoint.items():
        (aside / name).write_bytes(data)
    kept = tree_of(aside)
    previous = tmp_path / "fresh.previous-abcdefgh"
    for again in ((), ("--overwrite",)):
        rc, _, err = train(files, gone, *SMALL, "--quiet", *again)
        assert rc == 0, err[-2000:]
        assert not aside.exists() and tree_of(previous) == kept and (gone / "TRAINING.md").is_file()
        said = [line for line in err.splitlines() if "abcdefgh" in line]
        assert said == ([] if again else [
            f"flashtick train: {previous} is what --out {gone} held before a train on it was killed while replacing "
            f"it, which left --out without it (renamed from {aside.name}, said this once): move back what you want "
            f"of it, then remove it"]), err


def test_points_out_is_whole_and_only_beside_a_checkpoint_put_in_place(tmp_path: Path) -> None:
    """fix286 #3: `train --points-out` wrote the points during the run, outside the staging of --out: a run that
    failed after them (a full disk at calibration.png) left new points beside an --out left as it was, and one that
    failed writing them left half a file (8 KB of 17, under `ulimit -f 8`) as POINTS.tmp. The points are now put
    in place after the checkpoint, and a failed write leaves nothing. Real writes past RLIMIT_FSIZE."""
    files = [str(f) for f in write_days(tmp_path / "days")]
    out, points = tmp_path / "model", tmp_path / "points.parquet"
    rc, _, err = train(files, out, *SMALL, "--points-out", str(points))
    assert rc == 0, err[-2000:]
    before, first = files_of(out), points.read_bytes()
    sizes = {name: len(data) for name, data in before.items()} | {"points": len(first)}
    earlier = max(sizes[n] for n in (*WRITTEN_FIRST, "evaluation.json"))  # written before the points (or after)
    assert earlier < sizes["points"] < sizes["calibration.png"], sizes  # (the order of the limits below)

    after_points = (sizes["points"] + sizes["calibration.png"]) // 2  # fails at calibration.png, after the points
    failed = train_limited(files, out, after_points, "--overwrite", "--steps", "2", "--points-out", str(points))
    assert failed.returncode == 2 and "calibration.png" in failed.stderr, failed.stderr[-2000:]
    assert files_of(out) == before and points.read_bytes() == first  # the first run's, both
    at_points = (earlier + sizes["points"]) // 2  # fails writing the points
    failed = train_limited(files, out, at_points, "--overwrite", "--steps", "2", "--points-out",
                           str(tmp_path / "new.parquet"))
    assert failed.returncode == 2 and "was left as it was" in failed.stderr, failed.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["days", "model", "points.parquet"]  # no half a file
