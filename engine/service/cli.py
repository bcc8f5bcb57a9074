"""The ``flashtick`` command line: serve, feed, subscribe, register, unregister, forget, list, get, ask, streams,
stats, scores, health, ticklog export, keygen, backtest, train, evaluate, demo, answers.

Errors are one readable line on stderr, never a traceback; the exit status says what kind (exit_codes.py, the
table in docs/cli.md: 2 usage or bad input, 3 service busy, 4 service unreachable, 5 output not written, ...).
Every command that connects to a running service takes `--server-key FILE`
(the server's public key: CURVE on) and `--client-key FILE` (this client's
``*.key_secret`` certificate, for a server with an allow-list); the
FLASHTICK_SERVER_KEY and FLASHTICK_CLIENT_KEY environment variables give the
defaults. This module is the entry point: the start (a Ctrl-C while importing),
the parse, the run of a command and its errors. The parser is cli_parser.py;
each command's work is in a module of its own or of its kin: cmd_serve.py
(serve, demo), cmd_feed.py, cmd_subscribe.py, cmd_queries.py (register,
unregister, list), cmd_answers.py (get, answers, topics, ask), cmd_streams.py
(streams, forget), cmd_status.py (stats, scores, health), cmd_local.py (keygen,
ticklog export), cmd_backtest.py, cmd_train.py, cmd_evaluate.py; what they share
is in cli_common.py, cli_reading.py and checkpoint_notes.py.
"""

from __future__ import annotations

import _signal  # the C module: `import signal` first builds its enums (~0.7 ms more of the window below)
import sys

# A Ctrl-C while this module still imported (a loaded machine takes a while) raised KeyboardInterrupt outside main's
# handling: a traceback and an exit by the signal (rc -2), not the documented 130. From here until main runs it is
# noted instead, and said there (the commands' own handling then takes over; a backtest's library imports included);
# a SIGTERM too, said with exit 143. Only when run as the program: a test importing this module keeps its own
# handlers; a process started with a signal ignored keeps it ignored. Before this line the interpreter's own start
# (its site module; with an editable install, setuptools' finder) and the import of the packages `engine` and
# `engine.service` (empty: ~1.4 ms) are Python's to handle: a Ctrl-C there is its traceback.
INTERRUPTED_WHILE_STARTING: list[int] = []


def _note_interrupt(signum: int, _frame: object) -> None:
    INTERRUPTED_WHILE_STARTING.append(signum)


if __name__ == "__main__" or sys.argv[0].endswith("flashtick"):
    if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
        _signal.signal(_signal.SIGINT, _note_interrupt)
    if _signal.getsignal(_signal.SIGTERM) == _signal.SIG_DFL:
        _signal.signal(_signal.SIGTERM, _note_interrupt)

import argparse  # noqa: E402 - after the handler above, as early as it can be
import atexit
import codecs
import io
import importlib
import os
import signal
import threading
import warnings
from pathlib import Path
from typing import NoReturn

from engine.path_words import file_not_found, shown_path
from engine.service.cli_common import (DEFAULT_ANSWERS, DEFAULT_CONTROL, DEFAULT_INGEST, EXAMPLE_QUERIES, Interrupted,
                                       WorkWhole, interrupted_status, raise_interrupted, restore_handlers,
                                       say_failure_as_json, says_json)
from engine.service.cli_parser import (UsageError, asks_for_json, asks_for_log_timestamps, build_parser,
                                       parse_command_line)
from engine.service.exit_codes import USAGE, status_of_error

# main is the console script's; build_parser and EXAMPLE_QUERIES are imported from here by tests and benchmarks
# (where they were before the commands had modules of their own); default_data_dir is cmd_serve's, which a client
# command does not import
__all__ = ["EXAMPLE_QUERIES", "build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    _stdout_closed_refused()
    _output_that_shows_any_name()
    _our_warnings_as_lines()
    plain = sys.stderr
    try:
        try:
            _end_of_start()  # Python's own Ctrl-C from here on: a Ctrl-C in a blocking read must still end it
            given = sys.argv[1:] if argv is None else argv
            parser = build_parser(given)  # the command given built in full; the others by name alone
            if asks_for_log_timestamps(parser, given):  # every line, the parse's
                from engine.service.log_lines import TimestampedLines

                sys.stderr = TimestampedLines(plain)  # type: ignore[assignment]
            try:
                args = parse_command_line(parser, argv)
                # the command line as given, for the records a run writes (run_record.py: "re-run this")
                args.command_line = ["flashtick", *given]
            except UsageError as e:  # said on stderr; with --json on stdout too
                if asks_for_json(parser, given):
                    say_failure_as_json(e.prog, e.message, USAGE)
                raise
            _sigterm_as_the_command_has_it(args.command)
            _load_polars(args)
            _load_torch(args)
        except KeyboardInterrupt as e:  # (a command's own, from _run on, is its to say)
            print("flashtick: interrupted while starting; nothing done", file=sys.stderr)
            return interrupted_status(e)
        except ImportError as e:  # the parser imports our connectors: another project's may have replaced them
            _say_error("flashtick", e)
            _say_package_clash()
            return USAGE
        return _run(args, argv)
    finally:
        sys.stderr = plain


class _ClosedStdout(io.TextIOBase):
    """sys.stdout of a process started with fd 1 closed, where Python leaves None and print() drops what it is
    given: a command's output was lost and it exited 0. Its first write fails it in one line instead (as coreutils'
    `cat >&-`: "standard output: Bad file descriptor"); a command that prints nothing there (serve) goes on."""

    def write(self, text: str) -> int:
        raise OSError("cannot write to standard output: it was closed when flashtick started")


def _stdout_closed_refused() -> None:
    if sys.stdout is not None:
        return
    try:
        os.fstat(1)
    except OSError:  # fd 1 stays taken, by /dev/null: a socket or log file opened later must not get it and be
        null = os.open(os.devnull, os.O_WRONLY)  # written to by a library that prints to fd 1
        if null != 1:
            os.dup2(null, 1)
            os.close(null)
    sys.stdout = _ClosedStdout()


# where our own modules live: a warning raised there is the CLI's to say (other libraries' keep Python's form)
OWN_SOURCES = tuple(str(Path(__file__).resolve().parents[2] / name) for name in ("engine", "connectors", "queries"))


def _our_warnings_as_lines() -> None:
    """A warning of ours (a checkpoint loaded otherwise than its config.json says) is said as one `flashtick: warning:`
    line, as the CLI's other warnings are, not in Python's form (the file, the line number and its source line)."""
    warnings.showwarning = _show_warning


_python_show_warning = warnings.showwarning


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001 - Python's
    if not str(filename).startswith(OWN_SOURCES):
        _python_show_warning(message, category, filename, lineno, file, line)
        return
    print(f"flashtick: warning: {message}", file=sys.stderr if file is None else file)


def _output_that_shows_any_name() -> None:
    """stdout (and stderr) write a character their encoding lacks as a backslash escape (`DAX\\u20ac`): Python's stdout
    is strict in the locale's encoding, so under a Latin-1 or ASCII locale one stream name outside it (`日経225`)
    ended `stats`, `streams`, `list`, a subscriber and a backtest's summary with a codec error, printing nothing. JSON
    is escaped as JSON where the encoding lacks a character (cli_common.printable_json). The one place for it: every
    command starts here. A file name's bytes that the locale could not decode (Python keeps them as surrogate
    escapes) are written back as they were, so the name shows as `ls` shows it (`_shown_bytes`)."""
    codecs.register_error(SHOWN, _shown_bytes)
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and hasattr(stream, "reconfigure"):  # (a test's captured stream may not have it)
            stream.reconfigure(errors=SHOWN)


SHOWN = "flashtick.shown"  # the codec error handler of stdout and stderr


def _shown_bytes(error: UnicodeError) -> tuple[bytes, int]:
    """A character the output's encoding lacks: a surrogate escape (0xDC80-0xDCFF, a file name's undecodable byte)
    as that byte, any other as a backslash escape (`\\u20ac`), as Python's surrogateescape and backslashreplace do."""
    if not isinstance(error, UnicodeEncodeError):
        raise error
    shown = bytearray()
    for char in error.object[error.start:error.end]:
        code = ord(char)
        if 0xDC80 <= code <= 0xDCFF:
            shown.append(code - 0xDC00)
        else:
            shown += (f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF
                      else f"\\U{code:08x}").encode("ascii")
    return bytes(shown), error.end


def _end_of_start() -> None:
    """Python's own Ctrl-C handling back (where the start noted it instead); a signal noted meanwhile raised."""
    if signal.getsignal(signal.SIGINT) is _note_interrupt:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if INTERRUPTED_WHILE_STARTING:
        raise Interrupted(INTERRUPTED_WHILE_STARTING[0])


def _sigterm_as_the_command_has_it(command: str) -> None:
    """SIGTERM, noted through the parse, as the command has it from here: a batch job (backtest, train, evaluate,
    feed) takes it as a Ctrl-C, exit 143 (raise_interrupted; each phase says its line, and what was kept; a feed and
    a train set their own stop at the next step), the other commands die by it until they set their own (serve: a
    stop). A SIGTERM noted meanwhile raised."""
    if signal.getsignal(signal.SIGTERM) is not _note_interrupt:
        return
    signal.signal(signal.SIGTERM, raise_interrupted if command in _BATCH_JOBS else signal.SIG_DFL)
    _end_of_start()


_BATCH_JOBS = frozenset({"backtest", "train", "evaluate", "feed"})  # what a scheduler stops with SIGTERM


# The commands that only talk to a running service (or write keys): no polars, and a quick start.
_SERVICE_CLIENTS = frozenset({"subscribe", "register", "unregister", "forget", "list", "get", "answers", "topics",
                              "ask", "stats", "scores", "streams", "health", "keygen"})


def _load_polars(args: argparse.Namespace) -> None:
    """Import polars, and keep a Ctrl-C able to end a blocking read. Polars' import installs its own SIGINT handler
    (to stop a long query) with SA_RESTART: the kernel then resumes a read the signal interrupted, and Python, which
    raises KeyboardInterrupt when a call returns, heard of it only when the read ended, if ever (a backtest reading its
    config from a pipe hung on a Ctrl-C: pola-rs/polars#21739). siginterrupt clears that one flag and keeps polars'
    handler, which still passes the signal on to Python's."""
    if args.command in _SERVICE_CLIENTS:
        return
    importlib.import_module("polars")  # for its SIGINT handler, installed on import (no name of it is used)

    if threading.current_thread() is threading.main_thread():  # (signal settings are the main thread's to change)
        signal.siginterrupt(signal.SIGINT, True)


_TORCH_JOBS = frozenset({"backtest", "train", "evaluate"})  # the batch jobs that load a model


def _load_torch(args: argparse.Namespace) -> None:
    """Import torch (numpy with it) for a batch job that loads a model, SIGINT and SIGTERM noted meanwhile and raised
    once it is in: raised inside those imports, the interrupt left a C extension half-loaded, and the job exited 2 on
    "module 'numpy' has no attribute 'matrix'" or "cannot load module more than once", or aborted (SIGABRT) through
    pybind11 with a C++ traceback (review407 #6: a scheduler cancelling a job in its first second saw bad input)."""
    if args.command not in _TORCH_JOBS or threading.current_thread() is not threading.main_thread():
        return
    noted: list[int] = []
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    for signum, handler in handlers.items():
        if handler is not signal.SIG_IGN:
            signal.signal(signum, lambda number, _frame: noted.append(number))
    try:
        importlib.import_module("torch")
    finally:
        restore_handlers(handlers)
    if noted:
        raise Interrupted(noted[0])


def _run(args: argparse.Namespace, argv: list[str] | None) -> int:
    try:
        if getattr(args, "files", None):  # `-`, a pipe: copied to a file first, as a replay reads a file twice
            from engine.service.stdin_files import spool_streams

            spool_streams(args)
        _check_named_files(args)
        _client_endpoints(args)
        code = args.run(args) or 0
        if argv is None and args.command == "serve":  # the process's own command line: it exits next
            _exit_now(code)
    except KeyboardInterrupt as e:
        code = interrupted_status(e)
        if says_json(args):
            say_failure_as_json(args.command_name, "interrupted", code)
    except BrokenPipeError:  # `flashtick answers ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error when Python flushes
        return 0
    except Exception as e:  # one readable line for the user (a line per problem), not a traceback
        _say_error(args.command_name, e)  # `flashtick ticklog export`, as its usage errors say
        if isinstance(e, ImportError):
            _say_package_clash()
        code = status_of_error(e)
        if says_json(args):
            say_failure_as_json(args.command_name, str(e).strip() or type(e).__name__, code)
    if (whole := getattr(args, "work_whole", None)) is not None:  # a backtest ended, or failed (cli_common.WorkWhole)
        if argv is None:  # its handlers kept through the exit, which is quick: no teardown for a signal to hit
            _exit_now(code, whole)
        whole.restore()
        return whole.ended(code)
    return code


def _say_error(who: str, error: BaseException) -> None:
    """``error`` on stderr as `WHO: error: message`, each of its lines so prefixed: a query file with several
    problems says a line each, and a log reader that keys on `flashtick ...: error:` finds every one of them."""
    for line in (str(error).strip() or type(error).__name__).splitlines():
        print(f"{who}: error: {line}", file=sys.stderr)


def _exit_now(code: int, whole: WorkWhole | None = None) -> NoReturn:
    """End a `serve` process now, its work done (its logs closed, its summary said). Python's own exit tears the
    heap down object by object: 0.45 s after an idle serve on a 2-core machine, 2.7 s measured at load average 10,
    past a supervisor's stop time-out sized from limits.drain_s (and with triton loaded its bindings, nanobind,
    reported each object still alive as a leak). The atexit handlers still run (Ray's, with shards) and the output
    is flushed; the threads left are daemons. A backtest's (`whole`: its handlers still noting a signal) ends so
    too: a Ctrl-C in that teardown (2.2 s measured) killed it by the signal (rc -2), and one in an atexit callback
    printed a traceback; noted instead, a finished run says it in one line and exits 130, a stopped one keeps its
    status."""
    atexit._run_exitfuncs()  # noqa: SLF001 - what Python's exit would run, without the teardown after it
    if whole is not None:
        code = whole.ended(code)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader gone, or the stream closed: nothing more to say there
            pass
    os._exit(code)


def _say_package_clash() -> None:
    """After an import failed: a line naming another distribution that provides one of our top-level packages
    (PyPI has a `queries` and a `connectors`), whose files then stand in for ours and fail, e.g. with
    "No module named 'psycopg2'". Only then: reading every distribution's metadata takes most of a second."""
    try:
        from engine.service.installation import clash_diagnosis

        line = clash_diagnosis()
    except Exception:  # noqa: BLE001 - a diagnosis of a broken install must not replace the error it explains
        return
    if line is not None:
        print(line, file=sys.stderr)


def _check_named_files(args: argparse.Namespace) -> None:
    """A --config or --queries file (or the file `register` sends) that does not exist, said before anything loads;
    where its name is one of the examples that ship inside the package, where that one is: the docs' commands name
    them as `queries/examples/...`, a path that exists only in a clone."""
    named = [("config file", getattr(args, "config", None)), ("queries file", getattr(args, "queries", None))]
    if args.command == "register":
        named.append(("queries file", args.file))
    for what, path in named:
        if path is None or path.exists():
            continue
        packaged = EXAMPLE_QUERIES.parent / path.name
        shipped = f"; flashtick ships an example of that name at {shown_path(packaged)}" if packaged.is_file() else ""
        raise file_not_found(what, path, shipped)


def _client_endpoints(args: argparse.Namespace) -> None:
    """A client command's endpoints: its flag, else the --config file's (the engine's own), else the defaults.
    A client command is feed, subscribe, or any command with a --control flag."""
    if args.command not in ("feed", "subscribe") and not hasattr(args, "control"):
        return
    endpoints = None
    if args.command == "feed" and args.config is not None:  # (a feed imports the replay's modules anyway)
        from engine.service.config import ServiceConfig

        config = ServiceConfig.load(args.config)
        endpoints = config.endpoints
        args.config_batch_ms = config.replay.batch_ms  # `feed replay` cuts batches as `backtest` with it does
        args.feed_config = config  # ... and reads its files with the config's replay section and limits.zero_bid
    elif args.config is not None:  # the endpoints alone, not the engine's config machinery (config_document.py)
        from engine.service.config_document import client_endpoints

        endpoints = client_endpoints(args.config)

    def connectable(bound: str) -> str:  # a service bound to every interface is reached on this host
        return bound.replace("://*:", "://127.0.0.1:").replace("://0.0.0.0:", "://127.0.0.1:").replace(
            "://[::]:", "://[::1]:")

    if args.command == "feed":
        if args.endpoint is None:
            args.endpoint = connectable(endpoints.ingest) if endpoints else DEFAULT_INGEST
        if args.answers is None and endpoints is not None:
            args.answers = connectable(endpoints.answers)
        if args.control is None and endpoints is not None:
            args.control = connectable(endpoints.control)
    elif args.command == "subscribe":
        if args.endpoint is None:
            args.endpoint = connectable(endpoints.answers) if endpoints else DEFAULT_ANSWERS
        if args.control is None and endpoints is not None:
            args.control = connectable(endpoints.control)
        elif args.control is None and args.endpoint == DEFAULT_ANSWERS:
            args.control = DEFAULT_CONTROL
    elif args.control is None:
        args.control = connectable(endpoints.control) if endpoints else DEFAULT_CONTROL


if __name__ == "__main__":
    sys.exit(main())
