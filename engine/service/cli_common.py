"""What the ``flashtick`` commands share: the default endpoints, the example queries that ship in the package,
the client of a running service (with its CURVE keys), the service config an in-process command runs, JSON printed
for a person, and the check of output paths against a command's inputs: small helpers in one place, for the
command modules to import.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from engine.path_words import file_not_found, shown_path
from engine.service.output_paths import Output


DEFAULT_INGEST = "tcp://127.0.0.1:5555"
DEFAULT_ANSWERS = "tcp://127.0.0.1:5556"
DEFAULT_CONTROL = "tcp://127.0.0.1:5557"
EXAMPLE_QUERIES = Path(__file__).resolve().parents[2] / "queries" / "examples" / "tick_model.yaml"
TEXT_EXAMPLE_QUERIES = EXAMPLE_QUERIES.with_name("text_model.yaml")


def service_config(path: Path | None, queries: Path | None = None, serving: bool = False,
                   model: Path | None = None) -> Any:
    """The config file's settings (``model``: --model DIR over model.path); only `serve` (``serving``) keeps
    logs: an in-process run (backtest) never replays or appends to a service's data directory."""
    import dataclasses

    from engine.service.config import ServiceConfig

    config = ServiceConfig.load(path) if path else ServiceConfig()
    if model is not None:
        from engine.models.loader import read_config

        read_config(model)  # a missing directory, or one without config.json, named as such
        config = dataclasses.replace(config, model=dataclasses.replace(config.model, path=str(model)))
    if queries is not None:
        if not queries.is_file():
            raise file_not_found("queries file", queries)
        config = dataclasses.replace(config, queries=str(queries))
    elif serving:
        configured_queries_file(config, path)
    return config if serving else config.in_process()


def configured_queries_file(config: Any, path: Path | None) -> Path | None:
    """The config's `queries` file (None when it names none), refused by name when it is not there: the path as it
    was read, from the folder of the config file itself (a link to the config followed), said with that folder, not
    as the query reader's `[Errno 2]`."""
    if config.queries is None:
        return None
    queries = Path(config.queries)
    if not queries.is_file():
        folder = Path(os.path.realpath(path)).parent if path is not None else Path.cwd()
        raise file_not_found("queries file", queries, f" (the `queries` of the config {shown_path(path)}, read from "
                                                      f"the config file's own folder {shown_path(folder)})")
    return queries


def curve_keys(args: argparse.Namespace) -> dict[str, Any]:
    """The client keyword arguments for --server-key / --client-key."""
    if args.client_key is not None and args.server_key is None:
        raise ValueError("--client-key needs --server-key (the server's public key)")
    if args.server_key is None:  # no CURVE: the key files' module (pyzmq's ZAP thread, asyncio) is never imported
        return {"server_public_key": None, "client_keypair": None}
    from engine.service.auth import read_keypair, read_server_public_key

    return {"server_public_key": read_server_public_key(args.server_key) if args.server_key else None,
            "client_keypair": read_keypair(args.client_key) if args.client_key else None}


def control_client(args: argparse.Namespace) -> Any:
    """The control client of a command: a refused connection (nothing listens on the port) is said at once, for
    every command as for `health`: `list`, `stats`, `streams`, `topics` waited out the 10 s connect wait first, and
    said less (review224 #10)."""
    from engine.service.client import ControlClient

    # --timeout is a finite number of seconds > 0 by now (cli_types._timeout)
    return ControlClient(args.control, timeout_s=args.timeout, refused_at_once=True, **curve_keys(args))


def printable_json(value: Any, **options: Any) -> str:
    """JSON as the CLI prints it for a person: `Société.Gén` as it is, not `Soci\\u00e9t\\u00e9.G\\u00e9n`. A
    character that does not print (a bidi override, a line separator: in a generated answer's text, say) stays
    escaped, so it cannot move the terminal's cursor or forge a line; so does one that stdout's encoding lacks (`€`
    under a Latin-1 locale, `é` under an ASCII one), which stdout would write as a backslash escape that is not JSON
    (`\\xe9`) or a codec error. Valid JSON either way (such a character can only be inside a string, where a \\u
    escape means it)."""
    text = json.dumps(value, ensure_ascii=False, **options)
    if text.isascii():
        return text
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    return "".join(c if (c.isprintable() or c in "\n ") and _encodes(c, encoding) else json.dumps(c)[1:-1]
                   for c in text)


def says_json(args: argparse.Namespace) -> bool:
    """Whether the command's stdout is JSON: given --json, or a command whose output is JSON either way (`stats`,
    `health`: its parser's default `json_on_stdout`), whose failure a script reading stdout must get there too."""
    return bool(getattr(args, "json", False) or getattr(args, "json_on_stdout", False))


def say_failure_as_json(who: str, error: str, code: int) -> None:
    """A command whose stdout is JSON (`says_json`) that fails: one JSON object on stdout (besides stderr's line),
    so a script that parses stdout gets the failure in words and the exit status rather than nothing."""
    try:
        print(json.dumps({"ok": False, "command": who, "error": error, "exit_status": code}), flush=True)
    except (OSError, ValueError):  # stdout closed or its reader gone: stderr has said it
        pass


def _encodes(char: str, encoding: str) -> bool:
    try:
        char.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def context_text(reply: dict, sep: str) -> str:
    """What a computed answer attends, as `streams` and `ask` replies say it (`context 812 tokens / 203 ticks`,
    after ``sep``); '' when the reply has none (a cached answer, no session held, an older server)."""
    if reply.get("context_tokens") is None:
        return ""
    return f"{sep}context {reply['context_tokens']} tokens / {reply['context_ticks']} ticks"


def is_tick_model(config: Any) -> bool:
    """The built-in model, or a checkpoint with a tick codec (codec.json): the example queries are its questions."""
    return config.model.path is None or (Path(config.model.path) / "codec.json").is_file()


def check_outputs(args: argparse.Namespace, outputs: list[Output], *more_inputs: Path) -> None:
    """Refuse, before any work, an output path that is (or, for a directory, holds) one of the command's inputs:
    its files, replay lists, --columns, --queries and --config files, model directories and data directory; then
    an output named with a suffix other than what it is written as (Output.kind), and one the command could not write
    at its end (a directory where a file goes, no folder to write it in)."""
    from engine.service.output_paths import check_outputs_against

    inputs = [*getattr(args, "files", []), *more_inputs]
    for name in ("queries", "config", "base", "data_dir"):
        if isinstance(value := getattr(args, name, None), Path):
            inputs.append(value)
    if (model := getattr(args, "model", None)) is not None and str(model) != "builtin":
        inputs.append(Path(model))
    if (columns := getattr(args, "columns", None)) is not None and Path(columns).is_file():
        inputs.append(Path(columns))
    check_outputs_against([o for o in outputs if o.path is not None], inputs)


class Interrupted(KeyboardInterrupt):
    """A KeyboardInterrupt one of our handlers raised for `signum` (SIGTERM's too), so that whatever phase catches
    it exits by the signal that came (exit_status), not by the 130 a plain KeyboardInterrupt stands for."""

    def __init__(self, signum: int) -> None:
        super().__init__()
        self.signum = signum


def exit_status(signum: int | None) -> int:
    """The one mapping of a signal to a command's exit status, every phase of a command alike: 128 + its number
    (SIGINT 130, SIGTERM 143). None is a KeyboardInterrupt of Python's own handler: a Ctrl-C."""
    return 128 + (signum if signum is not None else signal.SIGINT)


def interrupted_status(interrupt: KeyboardInterrupt) -> int:
    """exit_status of the signal a KeyboardInterrupt stands for (Interrupted's, else SIGINT)."""
    return exit_status(getattr(interrupt, "signum", None))


def raise_interrupted(signum: int, _frame: Any) -> None:
    """A handler for SIGTERM (or SIGINT) as Python's own is for a Ctrl-C: the signal ends the work where it is."""
    raise Interrupted(signum)


class WorkWhole:
    """SIGINT and SIGTERM once a command's work is whole on disk (a backtest's answers, scores and plot; or, `said`
    None, what a stopped one kept, said already), until its process ends or main() returns. They are noted, never
    raised: a KeyboardInterrupt then cut the summary short or was printed as a traceback from an atexit callback,
    and one in the interpreter's teardown (seconds, with torch loaded) killed the process by the signal (rc -2).
    `ended` says the one line `said` and gives 128 + the signal (a stopped run's own status when `said` is None)."""

    def __init__(self, said: str | None, inherited: dict[int, Any]) -> None:
        self.said, self.inherited = said, inherited
        self.signum: int | None = None
        self.code: int | None = None  # once said: the exit status it gave
        for signum, handler in inherited.items():  # (one the process was started ignoring stays ignored)
            if handler is not signal.SIG_IGN:
                signal.signal(signum, self._note)

    def _note(self, signum: int, _: Any) -> None:
        self.signum = self.signum or signum

    def ended(self, code: int) -> int:
        """`code`, or 128 + the signal that came, said once on stderr (the process's exit asks again after main)."""
        if self.signum is not None and self.code is None and self.said is not None:
            print(self.said, file=sys.stderr, flush=True)
            self.code = exit_status(self.signum)
        return code if self.code is None else self.code

    def restore(self) -> None:
        """The handlers as they were before the command's own: main() returns to a caller in this process."""
        restore_handlers(self.inherited)


def restore_handlers(handlers: dict[int, Any]) -> None:
    """Each signal's handler put back as `handlers` (signal.getsignal's) has it; None (not set from Python) as the
    default."""
    for signum, handler in handlers.items():
        signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
