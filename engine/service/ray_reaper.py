"""The local Ray instance a `--shards` front door starts ends with it, however the front door ends.

`ray.init()` starting a local instance makes its GCS and raylet die with the driver (Ray's fate sharing), but the
raylet's own children, the dashboard agent and the runtime-env agent, outlive it: after a kill -9 of `serve --shards
N` they ran on with parent 1 for a minute or more (they try to report the raylet's death to a GCS that is gone), and
one pair outlived even a SIGTERM's ray.shutdown() (review234 #4). A supervisor restarting serve on each crash left a
pair per crash.

So the front door starts this watcher (``start``) before it starts Ray: a process of its own session (a terminal's
Ctrl-C to the service's group does not reach it) reading a pipe the front door holds. Every second it notes Ray's
processes below the front door: its children run from Ray's package folder (the GCS, the raylet, the monitors)
and everything below them (the agents, the shard actors' workers), each by pid and start time, so a pid reused
later is never taken for one, and no other child of the front door (a test's own) is touched; when the pipe
closes (the front door exited, was killed, or closed it after ray.shutdown()) it sends each one still running
SIGTERM, then SIGKILL to any left after ``GRACE_S``, and exits.
Linux only (it reads /proc); elsewhere it is not started.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

SCAN_S = 1.0  # how often the front door's descendants are noted (a worker Ray starts is noted within this)
GRACE_S = 3.0  # how long SIGTERM is given before SIGKILL


def start(ray_folder: str) -> subprocess.Popen | None:
    """The watcher of this process's Ray (its processes run from ``ray_folder``, Ray's package), started; None
    where /proc is not there. The caller keeps it (its stdin is the pipe) and calls ``stop`` after
    ray.shutdown()."""
    if not Path("/proc/self/stat").is_file():
        return None
    return subprocess.Popen([sys.executable, "-m", "engine.service.ray_reaper", str(os.getpid()), ray_folder],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, start_new_session=True)


def stop(watcher: subprocess.Popen | None) -> None:
    """The front door is done with Ray: what is left of it goes now (the pipe closed is the watcher's signal)."""
    if watcher is not None and watcher.stdin is not None:
        watcher.stdin.close()


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks since boot) of ``pid``, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # after the command's name, which may hold spaces and ')'
    return int(fields[1]), int(fields[19])


def descendants(pid: int, ray_folder: str) -> dict[int, int]:
    """Ray's processes below ``pid``: its children run from ``ray_folder`` and every process below them, by pid,
    with its start time."""
    children: dict[int, list[int]] = {}
    started: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) is not None:
            children.setdefault(stat[0], []).append(int(entry))
            started[int(entry)] = stat[1]
    found, todo = {}, [child for child in children.get(pid, []) if ray_folder in _command(child)]
    while todo:
        child = todo.pop()
        if child not in found and child in started:
            found[child] = started[child]
            todo += children.get(child, [])
    return found


def _command(pid: int) -> str:
    """``pid``'s command line, its arguments joined by spaces ('' when gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def watch(front_door: int, ray_folder: str, pipe: IO[bytes]) -> None:
    """Note the front door's Ray processes until ``pipe`` closes, then end those still running."""
    noted: dict[int, int] = {}
    while True:
        noted |= descendants(front_door, ray_folder)
        noted.pop(os.getpid(), None)
        readable, _, _ = select.select([pipe], [], [], SCAN_S)
        if readable and not os.read(pipe.fileno(), 4096):  # end of file: the front door is gone or done
            break
    reap(noted)


def reap(noted: dict[int, int]) -> None:
    """SIGTERM to each noted process still running (the same process: its start time unchanged), then SIGKILL to
    those left after GRACE_S."""
    def running() -> list[int]:
        return [pid for pid, start in noted.items() if (stat := _stat(pid)) is not None and stat[1] == start
                and not _zombie(pid)]

    for sig, wait_s in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, 0.0)):
        for pid in running():
            try:
                os.kill(pid, sig)
            except OSError:  # gone meanwhile (or not ours to signal: left alone)
                pass
        deadline = time.monotonic() + wait_s
        while running() and time.monotonic() < deadline:
            time.sleep(0.1)


def _zombie(pid: int) -> bool:
    """An exited process its parent has not waited for yet (nothing left to end)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return text[text.rfind(")") + 2:].split()[0] == "Z"


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # (its own session: only a stray kill reaches it; it ends itself)
    watch(int(sys.argv[1]), sys.argv[2], sys.stdin.buffer)
