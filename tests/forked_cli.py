"""`python -m engine.service.cli ARGS` as a process forked from a warm "zygote" rather than started afresh:
``cli_popen(args, **popen_kwargs)`` (a ``subprocess.Popen``) and ``cli_run(args, **run_kwargs)`` (a
``subprocess.CompletedProcess``), with the CLI's arguments after ``engine.service.cli``.

Why: a fresh CLI process paid the interpreter's start and the imports of torch, polars and the engine (~2 s of CPU
idle, ~6 s on a loaded 2-core CI machine) before it did anything, and the tests that need a real process (signals,
exit statuses, a kill -9, stdin/stdout pipes) started hundreds of them. Here each test worker starts one zygote,
lazily, per PYTHONPATH: it imports those modules once (PRELOAD: the modules `serve` and `backtest` import; no zmq
context, no torch work and no thread of its own before a fork) and forks one child per request.

Why it is real enough: the child is a real process in every way a test sees. It has its own pid; it takes the
caller's stdin, stdout and stderr file descriptors (passed over a Unix socket with SCM_RIGHTS), its argv, env and
cwd, a new session when asked (``start_new_session``) or a process group (``process_group``); its signal
dispositions are those an exec'd Python has (the zygote's own SIGCHLD handler and wakeup fd are undone, no signal is
blocked); its stdio is rebuilt as Python builds it at a start (line buffering on a tty, PYTHONUNBUFFERED,
PYTHONIOENCODING); it runs the module as ``python -m`` does (``runpy``, ``__main__``, sys.argv, sys.path[0] its cwd),
then Python's exit (non-daemon threads joined, atexit handlers, stdio flushed, a SystemExit's status, a traceback
and status 1 for an exception, death by SIGINT for an unhandled KeyboardInterrupt) and ``os._exit``. The zygote
reaps every child (no zombies) and reports its wait status on the request's connection: ``returncode`` is the exit
status, -N for a death by signal N, and ``wait(timeout)`` waits for that report (no polling).

What differs, and so is not what these children are for (such tests keep a real ``subprocess.Popen``, saying so in a
comment): the modules were imported before the child started, so "is torch imported before X", a Ctrl-C while
importing, ``-X importtime`` and anything read from the environment at import time (locale and LC_* for stdio's
encoding, OMP/MKL settings torch reads at import) are the zygote's; fds other than 0-2 are not inherited from the
caller (no ``pass_fds``, no ``close_fds=False``), no ``preexec_fn``, user, group or umask; rlimits are the zygote's;
its parent is the zygote; ``PYTHONHASHSEED`` is the zygote's; polars' own SIGINT hook (installed by its import) is
replaced by Python's handler, as the CLI's start replaces it; numpy's global random state is reseeded at the fork.
"""

from __future__ import annotations

import errno
import inspect
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# What the zygote imports before it forks: what `serve` and `backtest` import (measured: sys.modules after a run),
# the costly third-party ones first. A child imports anything else itself, as a fresh process would.
PRELOAD = ("torch", "torch.fx.experimental.symbolic_shapes", "numpy", "polars", "zmq", "yaml", "safetensors",
           "matplotlib.backends.backend_agg", "engine.service.cli", "engine.service.cmd_serve",
           "engine.service.cmd_backtest", "engine.service.server", "engine.service.backtest", "engine.service.pipeline",
           "engine.models.loader", "engine.engine", "connectors.replay", "queries.registry",
           # `train` and `evaluate` (the training tests' children): transformers is their costliest import
           "transformers", "transformers.models.llama.modeling_llama", "engine.service.cmd_train",
           "engine.service.finetune", "engine.service.evaluate", "engine.service.calibrate")
# the checkout these tests test: a request with no PYTHONPATH gets a zygote that imports it from here (its child, as a
# fresh process would, imports the installed flashtick: in CI and a user's clone, an editable install of this one)
ROOT = Path(__file__).resolve().parent.parent
# (the bytes one request or reply may take: argv and env as JSON)
MESSAGE_BYTES = 1 << 20
START_TIMEOUT_S = 600

# Popen keywords a fork cannot honour as an exec would; a test that needs one keeps a real Popen
_UNSUPPORTED = {"preexec_fn": None, "pass_fds": (), "shell": False, "executable": None, "user": None, "group": None,
                "extra_groups": None, "umask": -1, "close_fds": True}


class ForkedPopen(subprocess.Popen):
    """A ``subprocess.Popen`` whose child the zygote forks: pipes, text mode, communicate, send_signal, kill and
    the context manager are Popen's own; only the start and the wait are the zygote's."""

    def __init__(self, args, rlimits: dict[int, int] | None = None, **kwargs) -> None:
        """``rlimits``: soft limits set in the child alone (``{resource.RLIMIT_FSIZE: n}``, as `ulimit -f` before a
        command), where a real Popen would take a ``preexec_fn``."""
        self._rlimits = {int(k): int(v) for k, v in (rlimits or {}).items()}
        refused = [name for name, default in _UNSUPPORTED.items() if name in kwargs and kwargs[name] != default]
        if refused:
            raise TypeError(f"a forked CLI child cannot take {', '.join(refused)}: use subprocess.Popen")
        self._report: socket.socket | None = None
        super().__init__([sys.executable, "-m", "engine.service.cli", *map(os.fsdecode, args)], **kwargs)

    def _execute_child(self, *params) -> None:  # (Popen calls it with its parameters by position)
        given = _EXECUTE_CHILD.bind(self, *params).arguments
        fds = [given["p2cread"], given["c2pwrite"], given["errwrite"]]
        fds = [fd if fd != -1 else default for fd, default in zip(fds, (0, 1, 2))]
        env = dict(os.environ) if given["env"] is None else {os.fsdecode(k): os.fsdecode(v)
                                                             for k, v in given["env"].items()}
        cwd = os.path.abspath(os.fsdecode(given["cwd"])) if given["cwd"] is not None else os.getcwd()
        if not os.path.isdir(cwd):  # as Popen raises it (its child's chdir failed)
            code = errno.ENOTDIR if os.path.exists(cwd) else errno.ENOENT
            raise (NotADirectoryError if code == errno.ENOTDIR else FileNotFoundError)(code, os.strerror(code),
                                                                                     given["cwd"])
        request = dict(argv=self.args[3:], env=env, cwd=cwd, new_session=bool(given["start_new_session"]),
                       process_group=given.get("process_group", -1), rlimits=self._rlimits)
        try:
            self.pid, self._report = _zygote(env.get("PYTHONPATH") or str(ROOT)).fork(request, fds)
            self._child_created = True
        finally:
            self._close_pipe_fds(given["p2cread"], given["p2cwrite"], given["c2pread"], given["c2pwrite"],
                                 given["errread"], given["errwrite"])

    def _internal_poll(self, _deadstate=None, **_ignored) -> int | None:
        if self.returncode is None and self._waitpid_lock.acquire(False):
            try:
                self._take_report(0)
            except OSError:
                if _deadstate is not None:  # (Popen's __del__: nothing to wait for any more)
                    self.returncode = _deadstate
            finally:
                self._waitpid_lock.release()
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            with self._waitpid_lock:
                left = None if end is None else max(0.0, end - time.monotonic())
                if not self._take_report(left) and end is not None and time.monotonic() >= end:
                    raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def _take_report(self, timeout: float | None) -> bool:
        """Read the zygote's report of the child's exit, waiting up to ``timeout`` s (None: until it comes)."""
        if self._report is None:
            return self.returncode is not None
        if not select.select([self._report], [], [], timeout)[0]:
            return False
        reply = self._report.recv(MESSAGE_BYTES)
        self._report.close()
        self._report = None
        if not reply:
            raise ChildProcessError(f"the fork server ended before it reported the exit of pid {self.pid}")
        status = json.loads(reply)["status"]
        self._handle_exitstatus(status)
        return True


_EXECUTE_CHILD = inspect.signature(subprocess.Popen._execute_child)


def cli_popen(args, **popen_kwargs) -> ForkedPopen:
    """``subprocess.Popen([sys.executable, "-m", "engine.service.cli", *args], **popen_kwargs)``, forked."""
    return ForkedPopen(args, **popen_kwargs)


def cli_run(args, *, input=None, capture_output: bool = False, timeout: float | None = None, check: bool = False,
            **popen_kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, "-m", "engine.service.cli", *args], ...)``, forked (run's own logic)."""
    if input is not None:
        popen_kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        popen_kwargs["stdout"] = popen_kwargs["stderr"] = subprocess.PIPE
    with cli_popen(args, **popen_kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        except BaseException:
            process.kill()
            raise
        code = process.poll()
    if check and code:
        raise subprocess.CalledProcessError(code, process.args, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(process.args, code, stdout, stderr)


def serve_started(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[ForkedPopen, list[str]]:
    """A forked `flashtick serve ARGV` and its stderr lines up to its "flashtick serving" line (or its exit)."""
    process = cli_popen(["serve", *argv], stderr=subprocess.PIPE, text=True, cwd=cwd,
                        env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"})
    return process, start_lines(process)


def start_lines(process: subprocess.Popen) -> list[str]:
    """A starting `flashtick serve`'s stderr lines (a text pipe), read up to its "flashtick serving" line (after
    its UTC time with --log-timestamps), or up to the end of its stderr (it exited); forked or not."""
    lines: list[str] = []
    deadline = time.monotonic() + 180  # only catches a hang
    while not (lines and "flashtick serving" in lines[-1]) and time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:  # its stderr closed: it exited
            break
        lines.append(line.rstrip("\n"))
    return lines


def stop_served(process: ForkedPopen) -> int:
    """SIGTERM, as a supervisor stops a serve, and its exit status (killed if it has not ended in 60 s)."""
    try:
        process.send_signal(signal.SIGTERM)
        return process.wait(60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(60)
        process.stderr.close()


def serve_until_serving(argv: list[str], cwd: Path) -> list[str]:
    """The start lines of a `flashtick serve` that must come to serve, then stopped with SIGTERM, which it must end
    by with status 0; last, ``pid N`` (its first line names it)."""
    process, lines = serve_started(argv, cwd)
    try:
        assert lines and lines[-1].startswith("flashtick serving"), lines
    finally:
        status = stop_served(process)
    assert status == 0, lines
    lines.append(f"pid {process.pid}")
    return lines


class _Zygote:
    """The test side of one zygote process: started, then asked for forks."""

    def __init__(self, pythonpath: str | None) -> None:
        self._scratch = tempfile.TemporaryDirectory(prefix="forked-cli-")
        self.address = os.path.join(self._scratch.name, "zygote")
        self.log = Path(self._scratch.name) / "zygote.log"
        env = {k: v for k, v in os.environ.items() if k not in _PER_CHILD_ENV}
        if pythonpath is None:
            env.pop("PYTHONPATH", None)
        else:
            env["PYTHONPATH"] = pythonpath
        with open(self.log, "wb") as log:  # (its own lines, never a test's captured stderr)
            # stdin: a pipe whose end is its signal to stop, however this process ends
            self.process = subprocess.Popen([sys.executable, __file__, self.address], env=env, cwd=self._scratch.name,
                                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
        # (a bound that only catches a hang: its imports take seconds, a minute on a loaded 2-core machine)
        started = select.select([self.process.stdout], [], [], START_TIMEOUT_S)[0]
        ready = self.process.stdout.readline() if started else b""
        self.process.stdout.close()
        if ready != b"ready\n":
            self.process.kill()
            self.process.wait()
            raise RuntimeError(f"the fork server did not start: {self.log.read_text(errors='replace')[-3000:]}")

    def fork(self, request: dict, fds: list[int]) -> tuple[int, socket.socket]:
        """A child forked for ``request`` with ``fds`` as its 0, 1 and 2: its pid, and the connection its exit's
        report comes on."""
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            conn.connect(self.address)
            socket.send_fds(conn, [json.dumps(request).encode()], fds)
            reply = conn.recv(MESSAGE_BYTES)
            if not reply:
                raise ChildProcessError(f"the fork server ended: {self.log.read_text(errors='replace')[-3000:]}")
            answer = json.loads(reply)
            if "error" in answer:  # (as Popen raises an exec's failure)
                raise OSError(answer["errno"], answer["error"])
            if "pid" not in answer:
                raise ChildProcessError(f"the forked child ended before it started (wait status {answer['status']})")
            return answer["pid"], conn
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        self.process.stdin.close()  # its end: it kills what it still runs, reaps it and exits
        self.process.wait()
        self._scratch.cleanup()


_PER_CHILD_ENV = ("PYTHONUNBUFFERED", "PYTHONIOENCODING")  # read from each request's env, not the zygote's
_ZYGOTES: dict[str | None, _Zygote] = {}
_ZYGOTES_LOCK = threading.Lock()


def _zygote(pythonpath: str | None) -> _Zygote:
    with _ZYGOTES_LOCK:
        if pythonpath not in _ZYGOTES:
            if not _ZYGOTES:
                import atexit

                atexit.register(_close_zygotes)
            _ZYGOTES[pythonpath] = _Zygote(pythonpath)
        return _ZYGOTES[pythonpath]


def _close_zygotes() -> None:
    with _ZYGOTES_LOCK:
        for zygote in _ZYGOTES.values():
            zygote.close()
        _ZYGOTES.clear()


if __name__ == "__main__":  # the zygote (tests/forked_cli_zygote.py does its work)
    sys.path[0] = os.path.dirname(os.path.abspath(__file__))
    from forked_cli_zygote import serve

    serve(sys.argv[1], PRELOAD, MESSAGE_BYTES)
