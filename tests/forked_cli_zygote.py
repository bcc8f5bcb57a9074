"""The zygote of forked_cli.py (its docstring says what a child is, and why it is real enough): imports what a CLI
child would import, then forks a child per request and reports each child's wait status when it has reaped it.
Run as ``python tests/forked_cli.py ADDRESS``; it ends when its stdin closes (the test process ended), killing and
reaping what it still runs. One thread: it never forks while another thread of its own might hold a lock."""

from __future__ import annotations

import gc
import importlib
import json
import os
import resource
import select
import signal
import socket
import sys
import traceback

_STDIO = ("stdin", "stdout", "stderr")


def serve(address: str, preload: tuple[str, ...], message_bytes: int) -> None:
    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:  # an extra not installed (matplotlib: bench; transformers' train path): the child
            pass  # imports it itself, and says what a fresh process would
    # the preloaded heap (torch, polars, transformers, the engine) exempt from the children's cyclic collections:
    # a child's freeze_heap (serve, backtest) and its automatic full collections walked all of it again (~0.25 s of
    # CPU a forked backtest: a full collection in a child 0.14-0.17 s -> 0.000 s); the state a fresh process would
    # have, collected once here instead of per child
    gc.collect()
    gc.freeze()
    # what this interpreter's start chose from the locale (the children's stdio is rebuilt with it)
    stdio = {name: (getattr(sys, name).encoding, getattr(sys, name).errors) for name in _STDIO}
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(address)
    listener.listen(64)
    wake = os.pipe()  # SIGCHLD, written by Python's C handler: the loop wakes to reap
    for fd in wake:
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake[1])
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}  # pid -> the connection its exit is reported on
    os.write(1, b"ready\n")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)
    try:
        while True:
            readable = select.select([listener, wake[0], 0], [], [])[0]
            if wake[0] in readable:
                while _drained(wake[0]):
                    pass
                _reap(children, block=False)
            if listener in readable:
                conn = listener.accept()[0]
                _fork(conn, message_bytes, stdio, dict(listener=listener, wake=wake, children=children))
            if 0 in readable and not os.read(0, 4096):
                break
    except KeyboardInterrupt:  # (a Ctrl-C of the whole test run)
        pass
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    _reap(children, block=True)


def _drained(fd: int) -> bool:
    try:
        return bool(os.read(fd, 4096))
    except BlockingIOError:
        return False


def _reap(children: dict[int, socket.socket], block: bool) -> None:
    """Every child that has ended, waited for (no zombie left), its status sent to whoever asked for it."""
    while children:
        try:
            pid, status = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = children.pop(pid, None)
        if conn is not None:
            try:
                conn.send(json.dumps({"status": status}).encode(), socket.MSG_NOSIGNAL)
            except OSError:  # the caller is gone: nobody to tell
                pass
            conn.close()


def _fork(conn: socket.socket, message_bytes: int, stdio: dict, held: dict) -> None:
    try:
        message, fds, _flags, _address = socket.recv_fds(conn, message_bytes, 3)
    except OSError:
        conn.close()
        return
    if not message or len(fds) != 3:
        for fd in fds:
            os.close(fd)
        conn.close()
        return
    request = json.loads(message)
    try:
        pid = os.fork()
    except OSError as e:
        for fd in fds:
            os.close(fd)
        conn.send(json.dumps({"error": f"fork: {e.strerror}", "errno": e.errno}).encode(), socket.MSG_NOSIGNAL)
        conn.close()
        return
    if pid == 0:
        _child(request, fds, conn, stdio, held)  # never returns
    for fd in fds:
        os.close(fd)
    held["children"][pid] = conn


def _child(request: dict, fds: list[int], conn: socket.socket, stdio: dict, held: dict) -> None:
    """In the forked child: become the process an exec of `python -m engine.service.cli ARGV` would have made, say
    so to the caller (Popen returns once an exec has succeeded: a new session exists by then), run it, exit."""
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        held["listener"].close()
        for other in held["children"].values():
            other.close()
        for fd in held["wake"]:
            os.close(fd)
        if request["new_session"]:
            os.setsid()
        elif request["process_group"] not in (None, -1):
            os.setpgid(0, request["process_group"])
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in set(fds):
            os.close(fd)
        for limit, soft in request["rlimits"].items():  # (as `ulimit` before the command: this child's alone)
            resource.setrlimit(int(limit), (soft, resource.getrlimit(int(limit))[1]))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        _fresh_stdio(request["env"], stdio)
        if "numpy" in sys.modules:  # (Python's random reseeds itself at a fork; numpy's global state does not)
            sys.modules["numpy"].random.seed()
        sys.path[0] = request["cwd"]  # as `python -m` puts it first
        sys.argv = ["-m", *request["argv"]]
        conn.send(json.dumps({"pid": os.getpid()}).encode(), socket.MSG_NOSIGNAL)
    except BaseException as e:
        try:
            conn.send(json.dumps({"error": f"{type(e).__name__}: {e}", "errno": getattr(e, "errno", None) or 0})
                      .encode(), socket.MSG_NOSIGNAL)
        finally:
            os._exit(255)
    conn.close()
    _exit_as_python_does(_run_cli())


def _fresh_stdio(env: dict[str, str], stdio: dict) -> None:
    """sys.stdin, stdout and stderr over fds 0-2 as Python's start builds them (create_stdio): buffered unless
    PYTHONUNBUFFERED (for output), line-buffered on a tty and for stderr, PYTHONIOENCODING honoured."""
    import io

    unbuffered = bool(env.get("PYTHONUNBUFFERED"))
    encoding, _, errors = env.get("PYTHONIOENCODING", "").partition(":")
    for fd, name in enumerate(_STDIO):
        writes = fd > 0
        buffering = 0 if unbuffered and writes else -1
        buf = io.open(fd, "wb" if writes else "rb", buffering, closefd=False)
        raw = buf.raw if buffering else buf
        raw.name = f"<{name}>"
        own_encoding, own_errors = stdio[name]
        stream = io.TextIOWrapper(buf, encoding or own_encoding, own_errors if fd == 2 else errors or own_errors,
                                  newline="\n", line_buffering=not unbuffered and (raw.isatty() or fd == 2),
                                  write_through=unbuffered)
        stream.mode = "w" if writes else "r"
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _run_cli() -> int | None:
    """`python -m engine.service.cli`'s run: its exit status, or None for an unhandled KeyboardInterrupt."""
    import runpy

    # as in a fresh `python -m` run, the entry module is __main__ alone (its imports stay imported): a module that
    # imports engine.service.cli gets a copy of its own, and runpy has no copy to warn of
    sys.modules.pop("engine.service.cli", None)
    try:
        runpy.run_module("engine.service.cli", run_name="__main__", alter_sys=True)
        return 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        return None
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return 1


def _exit_as_python_does(code: int | None) -> None:
    """What the interpreter does after its main module: non-daemon threads joined, atexit handlers run, stdio
    flushed (a failed flush of stdout: status 120), then the exit; None: death by SIGINT (KeyboardInterrupt)."""
    import atexit
    import threading

    try:
        threading._shutdown()  # noqa: SLF001 - the interpreter's own join of non-daemon threads
        atexit._run_exitfuncs()  # noqa: SLF001
        for name in ("stdout", "stderr"):
            stream = getattr(sys, name)
            try:
                if stream is not None:
                    stream.flush()
            except Exception:
                if name == "stdout":
                    print("Exception ignored on flushing sys.stdout:", file=sys.stderr)
                    traceback.print_exc()
                    code = 120 if code is not None else code
    finally:
        if code is None:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code if code is not None else 130)
