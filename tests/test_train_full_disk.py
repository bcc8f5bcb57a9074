"""A full disk (or a read-only one) under `train` and `evaluate`: the weights were said in one line naming the file
(output_paths.write_atomically), but config.json, codec.json, evaluation.json, TRAINING.md and the calibration plot
were written plainly, so a disk that filled after the weights said Python's "[Errno 28] No space left on device"
(no file) or matplotlib's error. Every output of both commands now goes through the one writer. A real tiny model
trained through the CLI; the full disk is a small tmpfs (root only) or the file size limit that `ulimit -f` sets."""

from __future__ import annotations

import contextlib
import io
import os
import re
import resource
import subprocess
from pathlib import Path

import pytest

from engine.service.cli import main
from engine.service.output_paths import temporary_name, write_text_atomically
from tests.test_train_folders import QUICK, train, write_days
from tests.train_cache import trained_copy

PAGE = os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def small_tmpfs(where: Path, size: int):
    """A tmpfs of ``size`` bytes mounted at ``where`` (skips without root or a kernel that lets us mount)."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("a full disk needs a small tmpfs, which needs root to mount")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


def test_a_disk_that_fills_after_the_weights_is_said_naming_config_json(tmp_path: Path, tmp_path_factory) -> None:
    """A tmpfs with room for --out's lock and the weights alone: the next file, config.json, fails; it said
    "[Errno 28] No space left on device" and now names the file, as the weights' own message does."""
    files = [str(f) for f in write_days(tmp_path / "days")]
    rc, _, _ = trained_copy(tmp_path_factory, tmp_path / "sized")  # the same tiny model where the disk is not full: its
    # weights' size (trained once per process: tests/train_cache.py)
    assert rc == 0
    weights = (tmp_path / "sized" / "model.safetensors").stat().st_size
    pages = 1 + -(-weights // PAGE)  # the lock file's page and the weights' (tmpfs counts whole pages)
    with small_tmpfs(tmp_path / "small", pages * PAGE) as small:
        rc, _, err = train(files, small / "model")
        assert rc == 2, err
        # (written beside --out, renamed into place once whole: staged_dir.py; the error says --out was left as is)
        staged = r"\.model\.\w+\.partial"
        where = re.escape(str(small.resolve()))
        assert re.fullmatch(rf"flashtick train: error: cannot write {where}/{staged}/config\.json: no space left on "
                            rf"the device \([\d,]+ bytes free of {pages * PAGE:,} on the file system of {where}/"
                            rf"{staged}\); the trained weights are lost with it: free space there, or give --out on a "
                            rf"disk with room, and run the same command again; "
                            rf"--out {re.escape(str(small / 'model'))} was left as it was: the unfinished "
                            rf"output written beside it \({staged}\) was removed",
                            err.splitlines()[-1]), err
        assert not any(small.iterdir())  # its space given back, the unfinished checkpoint with it


def test_a_disk_that_cannot_hold_the_weights_is_refused_before_the_training(tmp_path: Path) -> None:
    """review442 #11: onto a 64 KiB file system, `train` read, trained, calibrated and scored for 50 s, then failed
    writing the weights and threw them away, saying nothing to do. Its weights' size is known once the model is
    built: a disk with less room is refused then, before the reading, with what to do."""
    from engine.disk_full import DiskFull
    from engine.service.train_checkpoint import check_room, new_model, weights_bytes
    from engine.service.train_config import TrainConfig

    model = new_model(TrainConfig(hidden=64, intermediate=128, layers=1, heads=2, kv_heads=1), 512)  # ~400 kB
    with small_tmpfs(tmp_path / "small", 16 * PAGE) as small:
        with pytest.raises(DiskFull) as refused:
            check_room(model, small / ".model.x.partial")
        check_room(model, tmp_path)  # (a disk with room: no refusal)
    assert refused.value.errno == 28 and re.fullmatch(
        rf"no room for the checkpoint in {re.escape(str(small))}: its weights take {weights_bytes(model):,} bytes "
        rf"and there are [\d,]+ bytes free of {16 * PAGE:,} on the file system of {re.escape(str(small))}; free "
        rf"space there, or give --out on a disk with room \(nothing was read or trained\)", str(refused.value))


def test_evaluate_plot_and_a_text_output_past_the_file_size_limit_name_the_file(tmp_path: Path,
                                                                              tmp_path_factory) -> None:
    """`ulimit -f` (RLIMIT_FSIZE) under the plot's size: evaluate's numbers are printed and its warning names the
    image (matplotlib's own error before); a text output is said the same way."""
    files = [str(f) for f in write_days(tmp_path / "days")]
    rc, _, err = trained_copy(tmp_path_factory, tmp_path / "model")
    assert rc == 0, err
    plot = tmp_path / "cal.png"
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    out_text, err_text = io.StringIO(), io.StringIO()
    resource.setrlimit(resource.RLIMIT_FSIZE, (16384, hard))  # the plot is ~37 KB
    try:
        with contextlib.redirect_stdout(out_text), contextlib.redirect_stderr(err_text):
            rc = main(["evaluate", str(tmp_path / "model"), *files, "--plot", str(plot), *QUICK])
        with pytest.raises(OSError) as refused:
            write_text_atomically(tmp_path / "big.md", "x" * 20000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    err = err_text.getvalue()
    assert rc == 0 and "Brier" in out_text.getvalue() and not plot.exists(), err
    limit = "the file is larger than this process may write (its file size limit, ulimit -f, is 16,384 bytes)"
    assert f"flashtick evaluate: warning: the calibration plot was not written: cannot write {plot}: {limit}" in err
    assert str(refused.value) == f"cannot write {tmp_path / 'big.md'}: {limit}"
    assert not temporary_name(plot).exists() and not (tmp_path / "big.md.tmp").exists()


def test_an_out_on_a_disk_with_no_byte_free_is_said_full_and_left_as_it_was(tmp_path: Path) -> None:
    """verify56: on a file system with no byte free, the lock of a new --out failed with "[Errno 28] No space left
    on device" alone, and left the --out folder behind with its empty lock file. Said now as a full disk naming the
    lock, and the folders the run made are removed."""
    from engine.disk_full import DiskFull
    from engine.service.cmd_train import out_held

    with small_tmpfs(tmp_path / "full", 4 * PAGE) as full:
        with contextlib.suppress(OSError), open(full / "filler", "wb") as filler:
            filler.write(b"\0" * (8 * PAGE))  # (as much as fits: the rest is refused)
        with pytest.raises(DiskFull) as refused, out_held(full / "runs" / "model"):
            pass
        assert not (full / "runs").exists()
    assert str(refused.value).startswith(f"cannot write {full}/runs/model/.lock: no space left on the device")
