"""A `serve --shards N` front door that ends, killed (SIGKILL) or stopped (SIGTERM), leaves none of its local Ray
instance's processes running: Ray's dashboard and runtime-env agents outlived it with parent 1 for a minute or
more, after a SIGTERM too (review234 #4; engine/service/ray_reaper.py). A real `serve` process; its descendants
are listed from /proc before it ends (only this test's own processes: never matched by name) and waited for."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from forked_cli import ForkedPopen, serve_started

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'flashtick[ray]')")

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="lists processes from /proc (Linux)")


def serve_one_shard(config: Path, data_dir: Path) -> ForkedPopen:
    """A real `flashtick serve --shards 1` on its own process, read up to its "serving" line; the stderr lines read
    kept as its ``lines_read``. (Here, not test_durability's `serve`: importing that module imported the engine and
    torch into this process, which needs neither.) Forked from the worker's warm zygote (tests/forked_cli.py): a
    process of its own, whose kill -9 and descendants are what is checked, without a fresh interpreter's imports of
    torch and the engine (the zygote's, made once per worker); it imports Ray itself, as a fresh one would."""
    process, process.lines_read = serve_started(["--config", str(config), "--data-dir", str(data_dir), "--shards", "1"],
                                                ROOT)
    assert process.lines_read and "flashtick serving" in process.lines_read[-1], \
        ["serve exited", *process.lines_read]
    return process


def below(pid: int) -> dict[int, str]:
    """Every process below ``pid``, by pid, with its /proc stat's start time (a pid reused later is another)."""
    parent, started = {}, {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            text = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()
        parent[int(entry)], started[int(entry)] = int(fields[1]), fields[19]
    found, todo = {}, [p for p, up in parent.items() if up == pid]
    while todo:
        child = todo.pop()
        found[child] = started[child]
        todo += [p for p, up in parent.items() if up == child and p not in found]
    return found


def running(processes: dict[int, str]) -> list[int]:
    """Those of ``processes`` still running (not exited, not a zombie waiting for its parent)."""
    alive = []
    for pid, start in processes.items():
        try:
            fields = (text := Path(f"/proc/{pid}/stat").read_text())[text.rfind(")") + 2:].split()
        except OSError:
            continue
        if fields[19] == start and fields[0] != "Z":
            alive.append(pid)
    return alive


# the kill -9 case only: the SIGTERM case passed before the reaper too (ray.shutdown ends the agents) and cost
# another ~37 s of a 2-core CI run
@pytest.mark.parametrize("how", [signal.SIGKILL], ids=["kill -9"])
def test_a_sharded_front_door_that_ends_leaves_no_ray_process_running(tmp_path, how) -> None:
    # the built-in model (what the shard runs is not what is checked): no checkpoint built in this process, which
    # imported torch and transformers for it
    config = tmp_path / "engine.yaml"
    config.write_text("kv: {cells: 4096, block_size: 16}\nshards: {cpus: 0.5}\n"
                      "endpoints: {ingest: 'tcp://127.0.0.1:0', answers: 'tcp://127.0.0.1:0', "
                      "control: 'tcp://127.0.0.1:0'}\n")
    # one shard: its worker is one of Ray's processes as a second one would be, and each costs a process start
    process = serve_one_shard(config, tmp_path / "data")
    # review349 #12: Ray's `E` lines of a healthy local start are explained before them, not left unexplained
    notes = [line for line in process.lines_read if "metrics exporter agent" in line]
    assert notes and notes[0].startswith("flashtick serve: INFO: starting a local Ray instance"), process.lines_read
    # review380 #9: a pool sized for one engine is held once per shard; the start line says the total too
    pool = [line for line in process.lines_read if "KV pool per shard" in line]
    assert pool and "KV pool per shard (x 1: 16 MiB of KV on all shards together): 4096 cells x 4 KiB = 16 MiB" \
        in pool[0], pool or process.lines_read
    try:
        ray_processes = below(process.pid)
        assert len(ray_processes) >= 4, ray_processes  # the GCS, the raylet, its agents, the shard's worker
        process.send_signal(how)
        process.wait(60)
    finally:
        process.kill()
        process.wait(60)
    deadline = time.monotonic() + 30  # a bound on the wait, not a timed assertion: they went, or they stayed
    while running(ray_processes) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:120] for pid in running(ray_processes)}
    for pid in left:  # (what a failure leaves is this test's own: ended here, by pid)
        os.kill(pid, signal.SIGKILL)
    assert not left, left
