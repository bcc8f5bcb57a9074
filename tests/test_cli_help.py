"""`--help` says what every argument is: each option and positional of every subcommand has a line of help, and a
help shared by many commands says what it means for the command it is shown under."""

from __future__ import annotations

import argparse

from engine.service.cli_parser import build_parser, subcommands


def arguments(parser: argparse.ArgumentParser, name: str = "flashtick") -> list[tuple[str, argparse.Action]]:
    """(command, argument) for every argument of `parser` and of its subcommands, all the way down."""
    found = []
    for action in parser._actions:  # noqa: SLF001 - argparse's own
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for sub_name, sub in action.choices.items():
                found += arguments(sub, f"{name} {sub_name}")
        elif not isinstance(action, argparse._HelpAction):  # noqa: SLF001
            found.append((name, action))
    return found


def test_every_argument_of_every_command_has_help() -> None:
    """--seed (feed synthetic, train, evaluate), ask's and get's stream, register's file ... showed a bare name."""
    bare = [f"{command} {action.option_strings[0] if action.option_strings else action.dest}"
            for command, action in arguments(build_parser()) if not action.help]
    assert not bare, f"arguments with no help: {bare}"


def test_each_commands_timeout_says_what_that_command_waits_for() -> None:
    """One --timeout help about asks and `health` was shown under 12 commands, `list` and `register` included."""
    helps = {command: action.help for command, action in arguments(build_parser()) if "--timeout" in
             action.option_strings}
    assert len(helps) == 12 and len(set(helps.values())) == 12, helps
    assert "the list of registered queries" in helps["flashtick list"] and "ask" not in helps["flashtick list"]
    assert "ticks accepted before the ask" in helps["flashtick ask"]
    refused = [command for command, text in helps.items() if "at once when it is refused" in text]
    assert refused == list(helps), refused  # every one, as health (review224 #10)


def test_the_file_help_names_every_kind_of_tick_file_and_serve_queries_its_default() -> None:
    parser = build_parser()
    files = {command: action.help for command, action in arguments(parser) if action.dest == "files"}
    assert set(files) == {"flashtick feed replay", "flashtick backtest", "flashtick train", "flashtick evaluate"}
    for text in files.values():
        assert "JSON lines" in text and ".csv.gz" in text and "DBN" in text and ".zip" in text, text
    serve_queries = next(action.help for action in subcommands(parser)["serve"]._actions  # noqa: SLF001
                         if "--queries" in action.option_strings)
    assert "default:" in serve_queries and "queries/examples/tick_model.yaml" in serve_queries


def test_the_price_format_help_names_the_2_and_3_year_notes_eighths_of_a_32nd() -> None:
    """`--price-format 32nds` reads ZT's and Z3N's `104-161` ... `104-168`; its help named only 110-16+ and 110'165."""
    helps = {action.help for _, action in arguments(build_parser()) if "--price-format" in action.option_strings}
    assert helps and all("104-161" in text and "104-168" in text and "eighths of a 32nd" in text for text in helps)


def test_price_format_takes_every_format_a_column_map_takes() -> None:
    """`--price-format` offered decimal, 32nds and eighths; a map's price_format takes sqrt_price_x96 too."""
    from connectors.map_vocabulary import PRICE_FORMATS

    choices = [action.choices for _, action in arguments(build_parser()) if "--price-format" in action.option_strings]
    assert choices and all(tuple(options) == PRICE_FORMATS for options in choices)
    assert "sqrt_price_x96" in PRICE_FORMATS
