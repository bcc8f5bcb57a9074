"""`python -m engine.service.cli ARGS` in a process of its own, forked from a warm multiprocessing "forkserver"
rather than started afresh: ``cli_process(argv, ...)`` (a ``subprocess.Popen``-like handle), ``run_cli(argv, ...)``
(a ``subprocess.CompletedProcess``), and a `serve` up to its "serving" line (``serve_started``,
``serve_until_serving``).

Why: a fresh `flashtick train` process paid the interpreter's start and the imports of torch, transformers, polars
and matplotlib (~10 s of its ~14 s of CPU on a loaded 2-core machine) before it read a tick, and the training
tests that need a process of their own (a file size limit, a kill -9, a lock held by another pid that is stopped)
started several each, as did the `serve` checks of a checkpoint's start lines. The forkserver (stdlib
multiprocessing, one per test worker, started at the first use) imports those once, single-threaded and without
running any torch or polars work (their thread pools start in each child, at its first use), and forks one child
per call.

Why it is real enough for these tests: the child is a real process: its own pid (the lock file records it, signals
reach it), its own rlimits (``file_limit``: RLIMIT_FSIZE, set in the child alone, as `ulimit -f` in a shell), its
own stdout and stderr (pipes read here), its argv, environment and cwd; it runs the CLI's ``main`` as
``python -m engine.service.cli`` does and exits with its status (-N when a signal N killed it). What differs: the
modules were imported before it started, and its parent is the forkserver; a test of imports, of a Ctrl-C while
starting or of anything read from the environment at import time keeps a real ``subprocess.Popen``.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.connection
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# what `train` and `evaluate` import (the costly third-party modules first); a child imports anything else itself
PRELOAD = ["torch", "numpy", "polars", "matplotlib.backends.backend_agg", "transformers",
           "transformers.models.llama.modeling_llama", "engine.service.cli", "engine.service.cmd_train",
           "engine.service.finetune", "engine.service.evaluate", "engine.service.calibrate", "zmq",
           "engine.service.cmd_serve", "engine.service.server"]

_context: multiprocessing.context.ForkServerContext | None = None


def _forks() -> multiprocessing.context.ForkServerContext:
    global _context
    if _context is None:
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
        atexit.register(_stop)
    return _context


def _stop() -> None:
    """Ends the forkserver and waits for it (it ends by itself once this process is gone, but unwaited: its CPU
    time, and its children's, would be counted nowhere)."""
    from multiprocessing import forkserver

    forkserver._forkserver._stop()


def _child(argv: list[str], env: dict[str, str], cwd: str, stdout_fd: int, stderr_fd: int,
           file_limit: int | None) -> None:
    """In the forked child: the caller's environment, cwd, pipes and file size limit, then the CLI's main."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    os.dup2(stdout_fd, 1)
    os.dup2(stderr_fd, 2)
    os.close(stdout_fd)
    os.close(stderr_fd)
    sys.stdout = open(1, "w", closefd=False)  # (Python's stdio as a start builds it over pipes: block buffered)
    sys.stderr = open(2, "w", closefd=False, buffering=1)
    if file_limit is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    from engine.service import cli

    sys.argv = [cli.__file__, *argv]
    try:
        status = cli.main(argv)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    sys.exit(status)


class CliProcess:
    """A forked `python -m engine.service.cli ARGV`, as ``subprocess.Popen(..., stdout=PIPE, stderr=PIPE,
    text=True)`` gives it: pid, poll, wait, send_signal, kill, communicate, returncode. Its output is read on
    threads as it comes (a full pipe would block the child)."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None,
                 file_limit: int | None = None, stderr_lines: bool = False) -> None:
        context = _forks()
        pipes = [os.pipe(), os.pipe()]
        env = {**os.environ, "PYTHONPATH": str(ROOT)} if env is None else env
        # (a Connection pickles as its fd, sent to the forkserver over its socket: reduction.DupFd)
        ends = [multiprocessing.connection.Connection(w, readable=False) for _, w in pipes]
        self._process = context.Process(target=_child_of_connections, daemon=False,
                                        args=(argv, env, str(cwd or os.getcwd()), *ends, file_limit))
        self._process.start()
        for end in ends:
            end.close()  # the child holds its own copies: EOF here once it exits
        self.pid = self._process.pid
        self.args = argv
        self._chunks: tuple[list[bytes], list[bytes]] = ([], [])
        # stderr_lines: the test reads stderr itself, as it comes (``self.stderr``, a text file), as from a Popen's
        self.stderr = open(pipes[1][0], "r") if stderr_lines else None
        self._readers = [threading.Thread(target=_read_all, args=(r, chunks), daemon=True)
                         for (r, _), chunks in zip(pipes[:1] if stderr_lines else pipes, self._chunks)]
        for reader in self._readers:
            reader.start()

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self._process.exitcode

    def send_signal(self, signal: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, signal)

    def kill(self) -> None:
        self._process.kill()

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        for reader in self._readers:
            reader.join(timeout)
        return tuple(b"".join(chunks).decode() for chunks in self._chunks)  # type: ignore[return-value]


def _child_of_connections(argv: list[str], env: dict[str, str], cwd: str, stdout, stderr,
                          file_limit: int | None) -> None:
    _child(argv, env, cwd, stdout.fileno(), stderr.fileno(), file_limit)


def _read_all(fd: int, chunks: list[bytes]) -> None:
    with open(fd, "rb", buffering=0) as pipe:
        while chunk := pipe.read(65536):
            chunks.append(chunk)


def cli_process(argv: list[str], **options) -> CliProcess:
    """`python -m engine.service.cli ARGV` started in a forked process of its own (see the module's docstring)."""
    return CliProcess(argv, **options)


def run_cli(argv: list[str], timeout: float = 600, **options) -> subprocess.CompletedProcess:
    """`subprocess.run([python, -m, engine.service.cli, *argv], capture_output=True, text=True)`, forked."""
    process = CliProcess(argv, **options)
    try:
        out, err = process.communicate(timeout)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(60)
    return subprocess.CompletedProcess(argv, process.returncode, out, err)


def serve_started(argv: list[str], cwd: Path) -> tuple[CliProcess, list[str]]:
    """A forked `flashtick serve ARGV` and its stderr lines up to its "flashtick serving" line (or its exit), as
    tests/test_serve_start.py's start_lines gives a real process's."""
    import time

    process = CliProcess(["serve", *argv], env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
                         cwd=cwd, stderr_lines=True)
    lines: list[str] = []
    deadline = time.monotonic() + 180  # only catches a hang
    while not (lines and lines[-1].startswith("flashtick serving")) and time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:  # its stderr closed: it exited
            break
        lines.append(line.rstrip("\n"))
    return process, lines


def stop_served(process: CliProcess) -> int:
    """SIGTERM, as a supervisor stops a serve, and its exit status (killed if it has not ended in 60 s)."""
    import signal

    try:
        process.send_signal(signal.SIGTERM)
        return process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(60)
        process.stderr.close()


def serve_until_serving(argv: list[str], cwd: Path) -> list[str]:
    """tests/test_serve_start.py's serve_until_serving, forked: the start lines of a `flashtick serve` that must
    come to serve; stopped with SIGTERM after, which it must end by with status 0."""
    process, lines = serve_started(argv, cwd)
    try:
        assert lines and lines[-1].startswith("flashtick serving"), lines
    finally:
        status = stop_served(process)
    assert status == 0, lines
    lines.append(f"pid {process.pid}")  # (last: the first line names it)
    return lines
