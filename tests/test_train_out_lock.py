"""Review224 #2: two `flashtick train` runs on one --out both passed the "new or empty" check at their start, both
exited 0, and the later one replaced the earlier one's checkpoint file by file without --overwrite. A run now holds
--out's lock (backtest's, engine/service/output_lock.py) from before that check to its end: a second run is refused
at once naming the first's pid, and a lock left by a run that is gone (SIGKILL) blocks nothing. A real tiny model
trained through the CLI, the first run a process of its own (forked warm: tests/forked_cli.py)."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from engine.service.cli import main
from forked_cli import cli_popen
from tests.test_train_folders import QUICK, TINY, train, write_days


def test_a_second_train_on_the_same_out_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    files = [str(f) for f in write_days(tmp_path / "days")]
    out, lock = tmp_path / "model", tmp_path / "model" / ".lock"
    first = cli_popen(["train", *files, "--out", str(out), *TINY, *QUICK, "--quiet"], stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300  # a wait for the first to take its lock, not a timed assertion
        while time.monotonic() < deadline and first.poll() is None and not (
                lock.is_file() and lock.read_text().strip() == str(first.pid)):
            time.sleep(0.02)
        assert first.poll() is None, first.communicate()[1][-2000:]
        first.send_signal(signal.SIGSTOP)  # mid-run, for as long as the second takes
        rc, _, err = train(files, out)
        assert rc == 2 and "Traceback" not in err, err[-2000:]
        assert err.strip() == (f"flashtick train: error: --out {out} is being written by a running train (pid "
                               f"{first.pid}): one run writes a checkpoint at a time; wait for it to end (then "
                               f"--overwrite replaces its checkpoint), stop it (kill -TERM {first.pid}), or give "
                               f"another --out"), err
        assert sorted(p.name for p in out.iterdir()) == [".lock"]  # the refused run wrote nothing
        first.kill()  # SIGKILL (a stopped process too): its lock file stays, with its pid
        first.wait(60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(60)
    rc, out_text, err = train(files, out)  # a lock whose process is gone blocks nothing
    assert rc == 0, err[-2000:]
    assert (out / "config.json").is_file() and not lock.exists()


def test_a_refused_train_leaves_no_folder_it_made(tmp_path: Path) -> None:
    """The lock makes --out at the start: a run refused before writing anything does not leave it behind."""
    out = tmp_path / "new" / "model"
    assert main(["train", str(tmp_path / "missing.csv"), "--out", str(out), *TINY]) == 2
    assert not (tmp_path / "new").exists()
