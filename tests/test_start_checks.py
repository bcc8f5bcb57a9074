"""What `serve` says about its data directory as it starts (review351 #4, #15): a full disk in one line before the
replay, with its own exit status, and a restart after an unclean stop said as such. Real `serve` processes on a
real data directory; a full disk is a file size limit (RLIMIT_FSIZE: writes past it fail with EFBIG)."""

from __future__ import annotations

import resource
import signal
import subprocess
import time
from pathlib import Path

import pytest

from connectors.synthetic import SyntheticConfig, SyntheticMarket
from conftest import tiny_tick_checkpoint
from engine.service.client import ControlClient
from engine.service.exit_codes import DATA_DIR_FULL
from forked_cli import cli_run, serve_started
from test_durability import ROOT, feed_and_wait, send_by_fifty, serve_config, serving_a_disk_that_fills

# the tests share the module's checkpoint: `--dist loadgroup` keeps them on one worker, which builds it once
pytestmark = pytest.mark.xdist_group("test_start_checks")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return tiny_tick_checkpoint(tmp_path_factory.mktemp("tick"))


def serve_forked(config_path: Path, data_dir: Path) -> tuple[subprocess.Popen, dict[str, str]]:
    """test_durability's ``serve`` (no file size limit), forked (tests/forked_cli.py): a `flashtick serve` process
    and its endpoints, its stderr lines up to its "serving" line kept as ``lines_read``."""
    process, lines = serve_started(["--config", str(config_path), "--data-dir", str(data_dir)], cwd=ROOT)
    process.lines_read = lines
    assert lines and lines[-1].startswith("flashtick serving"), lines
    return process, dict(part.split("=", 1) for part in lines[-1].split("flashtick serving ", 1)[1].split())


def test_a_restart_after_kill_9_is_said_as_recovering_and_a_start_on_a_full_disk_says_so_before_the_replay(
        checkpoint, tmp_path) -> None:
    """After kill -9 the start read exactly as after a clean stop: a log pipeline could not count crashes. Now the
    restart says it recovers after an unclean stop (the killed pid named), and a start after a clean stop says
    nothing of it.

    A start on a full disk replayed the whole log, then died with a bare `[Errno 28] No space left on device` and
    exit 5, at every restart: a supervisor's loop that burnt a replay each time. Now the start says the directory,
    the cause and what to do before replaying, and exits DATA_DIR_FULL (7), which docs/cli.md tells a supervisor not
    to restart on; the start after it (room again) reads as after the clean stop before it, not as unclean.

    (One data directory walks through both: each `serve` process costs a torch import, so the kill -9 restart's
    clean stop is the stop the full-disk start follows, as a separate run of each once paid for twice.)"""
    config_path = serve_config(tmp_path, checkpoint)
    process, endpoints = serve_forked(config_path, tmp_path / "data")
    try:
        feed_and_wait(endpoints, SyntheticMarket(SyntheticConfig(seed=3)).next_batch(100), 100)
        killed_pid = process.pid
        process.send_signal(signal.SIGKILL)
        process.wait(30)
    finally:
        process.kill()
    process, endpoints = serve_forked(config_path, tmp_path / "data")
    try:
        said = [line for line in process.lines_read if "unclean stop" in line]
        assert len(said) == 1 and "recovering after an unclean stop" in said[0], process.lines_read
        assert f"pid {killed_pid}" in said[0] and "flashtick: WARNING: recovering" in said[0], said
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0

    # no file may grow past 1,000 bytes: the start's room check (4 KiB) cannot be written. A process of its own,
    # forked warm with the limit set in it alone (as `ulimit -f 1` before the command; it was a fresh interpreter
    # with a preexec_fn, which paid Python's start and torch's import to be refused)
    full = cli_run(["serve", "--config", str(config_path), "--data-dir", str(tmp_path / "data")], cwd=ROOT,
                   rlimits={resource.RLIMIT_FSIZE: 1000}, capture_output=True, text=True, timeout=300)
    assert full.returncode == DATA_DIR_FULL == 7, full.stderr
    errors = [line for line in full.stderr.splitlines() if "ERROR:" in line]
    assert len(errors) == 1, full.stderr
    assert str(tmp_path / "data") in errors[0] and "before replaying the tick log" in errors[0], errors
    assert "file size limit" in errors[0] and "free space there" in errors[0], errors
    assert "recovered" not in full.stderr  # said before the replay, not after it
    # room again: it starts, every tick there; after that clean stop (and the full start's refusal) nothing to say
    process, endpoints = serve_forked(config_path, tmp_path / "data")
    try:
        assert not any("unclean stop" in line for line in process.lines_read), process.lines_read
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)


def test_every_serve_line_gets_a_level_and_json_is_one_object_a_line() -> None:
    """review351 #14: `flashtick: note:` for a folder's mode, no level at all for ticks lost to a full disk. Each
    line now has INFO, WARNING or ERROR (its own word kept as its level), or is one JSON object a line."""
    import io
    import json

    from engine.service.log_levels import LeveledLines

    lines = ["flashtick: ticks refused (log_unavailable): short write (is the disk full?)",
             "flashtick: note: data directory /d can be listed by other users", "flashtick: caught up; behind 2 s",
             "flashtick serve: error: log.dir /d: full", "flashtick serving ingest=tcp://127.0.0.1:1 answers=x"]
    text = io.StringIO()
    leveled = LeveledLines(text)
    for line in lines:
        print(line, file=leveled)  # (print writes the text, then its newline: one line each)
    assert text.getvalue().splitlines() == [
        "flashtick: WARNING: ticks refused (log_unavailable): short write (is the disk full?)",
        "flashtick: INFO: data directory /d can be listed by other users", "flashtick: INFO: caught up; behind 2 s",
        "flashtick serve: ERROR: log.dir /d: full", "flashtick serving ingest=tcp://127.0.0.1:1 answers=x"]
    as_json = io.StringIO()
    leveled = LeveledLines(as_json, "json")
    leveled.write("flashtick: behind: 10 tokens wait")
    leveled.write("\n")
    record = json.loads(as_json.getvalue())
    assert record["level"] == "WARNING" and record["event"] == "behind" and record["ts"].endswith("Z"), record
    assert record["fields"] == {"source": "flashtick", "message": "behind: 10 tokens wait"}, record


def test_the_conditions_a_desk_routes_on_have_an_event_of_their_own() -> None:
    """Review412 #3: these lines (as `serve` writes them) had the catch-all `event: message`."""
    from engine.service.log_levels import leveled

    lines = {
        "flashtick: WARNING: KV pool too small for the live streams: 24 streams held": ("WARNING", "kv_pool_small"),
        "flashtick: KV thrash over: the last 10 s evicted 0 cells of KV for 0 new ones; it thrashed for 40 s":
            ("INFO", "kv_thrash_over"),
        "flashtick: warning: log.retention_bytes 512.0 MiB + log.answers_retention_bytes 256.0 MiB exceed the size "
        "of the filesystem holding /d (3.0 MiB)": ("WARNING", "retention_past_disk"),
        "flashtick: WARNING: could not keep the streams' clock offsets in /d/clock_offsets.json: [Errno 28] No "
        "space left on device": ("WARNING", "clock_offsets_unkept"),
        "flashtick: the tick log is writable again after 3.0 s; 1 ticks were refused meanwhile": ("INFO",
                                                                                                  "log_writable"),
        "flashtick: answer log: writable again after 61.7 s; every answer published is logged; ticks are accepted":
            ("INFO", "log_writable"),
        "flashtick serve: error: log.dir /d: a 4,096-byte write failed before replaying the tick log: no space left":
            ("ERROR", "log_dir_full"),
    }
    assert {line: leveled(line)[1:3] for line in lines} == lines


def test_the_caught_up_line_counts_the_ticks_a_full_disk_refused(checkpoint, tmp_path) -> None:
    """review351 #12: `caught up; ... (answers lagged, none refused)` came four seconds after `ticks refused
    (log_unavailable)`, in a log an operator reads line by line. The caught-up line counts them."""
    # behind as soon as anything waits, and heartbeats often: the log says behind, then caught up
    config_path = serve_config(tmp_path, checkpoint, max_backlog_tokens=1, max_lag_s=0.001, heartbeat_s=0.05)
    with serving_a_disk_that_fills(config_path, tmp_path / "data") as (process, endpoints, ticks):
        with ControlClient(endpoints["control"], timeout_s=30) as control:
            send_by_fifty(endpoints, ticks)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                stats = control.call("stats")["stats"]
                if stats["ticks_in"] + stats["rejected"].get("log_unavailable", 0) == 1000 and \
                        not stats["pending_tokens"]:
                    break
                time.sleep(0.1)
            refused = stats["rejected"]["log_unavailable"]
            time.sleep(1)  # a few heartbeats: the one that finds the backlog cleared says caught up
        process.send_signal(signal.SIGTERM)
        said = process.communicate(timeout=60)[1]
    lines = said.splitlines()
    caught_up = [at for at, line in enumerate(lines) if "caught up;" in line]
    assert refused > 0 and "none refused" not in said, said
    assert f"{refused} rejected (log_unavailable {refused})" in lines[-1], said  # the stop line, whatever came before
    # Whether a heartbeat finds the service behind at all is timing (the full disk's refusals cost nothing to
    # compute; on an idle host the 303 ticks taken may all be computed between two heartbeats, and then no behind
    # nor caught-up line is printed: seen on main too). Where the log said behind, every refusal is counted by the
    # time it says caught up: in that line, or, when the disk refused them all before, in the behind line it ends.
    if caught_up:
        counted = [line for line in lines[:caught_up[-1] + 1] if "refused (disk full: log_unavailable)" in line]
        assert counted and f"{refused} in all" in counted[-1], said
