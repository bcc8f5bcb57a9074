"""Every command that takes --json says a failure on stdout too, as one JSON object (`ok: false`, the command, the
error in words, the exit status), so a script that parses stdout gets it instead of nothing; stderr's line stays.
Real argument parsing and real runs: a file that is not there, a key file that is not there, a bad value."""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path

import pytest

from engine.service.cli import build_parser, main

MISSING_KEY = "/nonexistent/flashtick-test.key"
# the commands that connect to a service, with what each needs besides its options
CLIENT_COMMANDS = {"list": [], "topics": [], "stats": [], "scores": [], "streams": [], "subscribe": ["dir20/"]}


def json_commands() -> set[str]:
    """Every (sub)command whose parser takes --json, found in the parser (so a new one is not missed here)."""
    found = set()

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:  # noqa: SLF001 - argparse's own
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for sub, child in action.choices.items():
                    walk(child, f"{name} {sub}".strip())
            elif "--json" in action.option_strings:
                found.add(name)

    walk(build_parser(), "")
    return found


def _failure(out: str) -> dict:
    lines = out.splitlines()
    assert len(lines) == 1, out  # one object, nothing else on stdout
    return json.loads(lines[0])


def test_the_commands_that_take_json_are_the_ones_tested_here() -> None:
    assert json_commands() == {"train", "evaluate", *CLIENT_COMMANDS}


@pytest.mark.parametrize("command", sorted(CLIENT_COMMANDS))
def test_a_client_command_that_fails_says_so_in_json_on_stdout(command: str, capsys) -> None:
    code = main([command, *CLIENT_COMMANDS[command], "--json", "--server-key", MISSING_KEY])
    captured = capsys.readouterr()
    assert code == 2
    said = _failure(captured.out)
    assert said == {"ok": False, "command": f"flashtick {command}", "exit_status": 2, "error": said["error"]}
    assert MISSING_KEY in said["error"] and "cannot read key file" in said["error"]
    assert f"flashtick {command}: error: {said['error']}" in captured.err  # stderr keeps its line


def test_train_and_evaluate_that_fail_say_so_in_json_on_stdout(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "no-such-ticks.csv"
    for argv, who in ((["train", str(missing), "--out", str(tmp_path / "m"), "--json"], "flashtick train"),
                      (["evaluate", "builtin", str(missing), "--json"], "flashtick evaluate")):
        code = main(argv)
        captured = capsys.readouterr()
        said = _failure(captured.out)
        assert code == 2 and said["ok"] is False and said["exit_status"] == 2 and said["command"] == who
        assert str(missing) in said["error"] and "replay file not found" in said["error"]
        assert f"{who}: error: {said['error']}" in captured.err


def test_a_usage_error_with_json_is_said_in_json_too(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["train", str(tmp_path / "t.csv"), "--js", "--steps", "many"])  # (an abbreviation argparse takes)
    captured = capsys.readouterr()
    said = _failure(captured.out)
    assert exit_.value.code == 2 and said["exit_status"] == 2 and said["command"] == "flashtick train"
    assert said["error"] == "argument --steps: invalid int value: 'many'"
    assert "flashtick train: error: argument --steps: invalid int value: 'many'" in captured.err


def test_without_json_stdout_stays_empty(tmp_path: Path, capsys) -> None:
    assert main(["evaluate", "builtin", str(tmp_path / "none.csv")]) == 2
    with pytest.raises(SystemExit):
        main(["train", str(tmp_path / "t.csv"), "--steps", "many"])
    with pytest.raises(SystemExit):  # --json of a command that has none: argparse's error alone
        main(["backtest", str(tmp_path / "t.csv"), "--json"])
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("error:") == 3


@pytest.mark.parametrize("command", ["health", "stats"])
def test_the_commands_whose_output_is_json_without_it_say_a_failure_in_json(command: str, tmp_path: Path,
                                                                            capsys) -> None:
    """`health` and `stats` print JSON on success without --json: a script reading their stdout got nothing when
    they failed. A failure (a key file not there; nothing listening; a usage error) is one JSON object there too."""
    assert main([command, "--server-key", MISSING_KEY]) == 2
    captured = capsys.readouterr()
    said = _failure(captured.out)
    assert said == {"ok": False, "command": f"flashtick {command}", "exit_status": 2, "error": said["error"]}
    assert MISSING_KEY in said["error"] and f"flashtick {command}: error: {said['error']}" in captured.err
    with socket.socket() as nobody:  # a port bound, never listening: the connection is refused
        nobody.bind(("127.0.0.1", 0))
        # unreachable, 4: told from a bad option or key file, 2 (docs/cli.md; review337 #5)
        assert main([command, "--control", f"tcp://127.0.0.1:{nobody.getsockname()[1]}", "--timeout", "5"]) == 4
    said = _failure(capsys.readouterr().out)
    assert said["exit_status"] == 4 and "it was refused (nothing listens there)" in said["error"], said
    with pytest.raises(SystemExit) as exit_:
        main([command, "--timeout", "soon"])
    said = _failure(capsys.readouterr().out)
    assert exit_.value.code == 2 and said["command"] == f"flashtick {command}" and "--timeout" in said["error"], said
