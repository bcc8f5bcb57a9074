"""The parser a command line builds: only the command it names in full (cli_parser.build_parser), every other one by
its name and its line in `flashtick --help`, so that a client command (`list`, `ask`) imports no other command's
module. Its help must read as the whole parser's, every (sub)command's, and `flashtick --help` must still list
every command."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from engine.service.cli import main
from engine.service.cli_parser import build_parser, subcommands

# every command `flashtick --help` lists, in its order (one left out of the parser's table fails here)
COMMANDS = ["serve", "feed", "subscribe", "register", "unregister", "forget", "list", "get", "answers", "topics",
            "ask", "stats", "scores", "streams", "health", "ticklog", "keygen", "backtest", "train", "evaluate",
            "demo"]


def _paths(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    yield path
    for name, command in subcommands(parser).items():
        yield from _paths(command, (*path, name))


def _said_help(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> str:
    """What `flashtick PATH --help` prints, run as the console script runs it (its parser built for that line)."""
    with pytest.raises(SystemExit) as exited:
        main([*path, "--help"])
    assert exited.value.code == 0
    return capsys.readouterr().out


def test_every_commands_help_is_the_whole_parsers_and_the_top_level_lists_every_command(monkeypatch, capsys) -> None:
    monkeypatch.setenv("COLUMNS", "100")  # (argparse wraps to the terminal's width: one width for both)
    whole = build_parser()  # every command built in full, as before the parser was built for one command line
    paths = list(_paths(whole))
    assert list(subcommands(whole)) == COMMANDS
    assert {("feed", "replay"), ("feed", "synthetic"), ("ticklog", "export")} <= set(paths)
    for path in paths:
        command = whole
        for name in path:
            command = subcommands(command)[name]
        assert _said_help(path, capsys) == command.format_help(), path
    listed = _said_help((), capsys)  # each command on a line of its own, with its line of help, in order
    lines = listed.split("positional arguments:")[1].split("options:")[0].splitlines()
    assert [line.split()[0] for line in lines if line.startswith("    ") and line[4] != " "] == COMMANDS, listed
    assert listed == whole.format_help()


def test_a_client_command_builds_and_imports_nothing_of_the_other_commands() -> None:
    """`flashtick list --help` in a process of its own: no other command's cmd_*.py module, no reading options'
    presets table, no `serve` code; `backtest --help` builds its reading options (the presets) and `evaluate`'s
    builds backtest's parser with it (it backtests a text model's queries)."""
    # a command built by name alone has its --help and --log-timestamps only
    probe = ("import contextlib, io, json, sys\n"
             "from engine.service.cli import main\n"
             "from engine.service.cli_parser import build_parser, subcommands\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    try:\n"
             "        main(sys.argv[1:])\n"
             "    except SystemExit:\n"
             "        pass\n"
             "built = {name: len(command._actions) > 2 for name, command in "
             "subcommands(build_parser(sys.argv[1:])).items()}\n"
             "print(json.dumps({'modules': sorted(m for m in sys.modules if m.startswith(('engine.service.cmd_', "
             "'connectors.presets'))), 'built': sorted(name for name, full in built.items() if full)}))\n")

    def run(*argv: str) -> dict:
        done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    assert run("list", "--help") == {"modules": [], "built": ["list"]}
    backtest = run("backtest", "--help")
    assert backtest["built"] == ["backtest"] and "connectors.presets" in backtest["modules"]
    assert not [m for m in backtest["modules"] if m.startswith("engine.service.cmd_")]
    assert run("evaluate", "--help")["built"] == ["backtest", "evaluate"]
