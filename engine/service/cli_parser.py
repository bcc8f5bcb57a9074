"""The ``flashtick`` argument parser, built from a function a subcommand (cli_parser_clients.py: the commands
that connect to a running service; cli_parser_local.py: the ones that run here) over the option groups they share
(cli_options.py) and the argparse types that check a value (cli_types.py); and the parse itself (a usage error said
in one line with where its command's help is, an unknown option as its own command's; --log-timestamps read before
the parse).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from engine.service.cli_options import SharedOptions
from engine.service.cli_parser_clients import (add_answers, add_ask, add_feed, add_forget, add_get, add_health,
                                               add_list, add_register, add_scores, add_stats, add_streams,
                                               add_subscribe, add_topics, add_unregister)
from engine.service.cli_parser_local import (add_backtest, add_demo, add_evaluate, add_keygen, add_serve, add_ticklog,
                                             add_train)

# the subcommands in the order `flashtick --help` lists them: each one's line there, and what builds its parser
SUBCOMMANDS: dict[str, tuple[str, Callable[[Any, SharedOptions, str], None]]] = {
    "serve": ("run the engine service (ZeroMQ ingest, answers, control)", add_serve),
    "feed": ("push ticks into a running engine", add_feed),
    "subscribe": ("print answers as they are published", add_subscribe),
    "register": ("register (or replace) queries from a YAML file", add_register),
    "unregister": ("remove a registered query (its cached answers go too)", add_unregister),
    "forget": ("drop streams (one, several names, or --glob PATTERN), ordering guards included (a tick stamped ahead "
               "of the clock blocks its feed as ts_backwards): recorded in the tick log, logged",
               add_forget),
    "list": ("the registered queries", add_list),
    "get": ("the cached answer of a query on a stream (computes nothing)", add_get),
    "answers": ("a topic's published answers after a seq (fill a gap)", add_answers),
    "topics": ("the answer topics published on, with their last seq (what a client that was away looks for)",
               add_topics),
    "ask": ("ask a registered query (or a question of the model, e.g. direction_5, or, of a text model, --question "
            "TEXT) on a stream now",
            add_ask),
    "stats": ("the engine's counters (JSON; a failure too)", add_stats),
    "scores": ("live scores: each query's answers against what the market did next, beside the streams' own class "
               "frequencies",
               add_scores),
    "streams": ("each stream's last accepted tick (ts, count): where a feed resumes after a restart; every stream: "
                "the refused ones after them, `NAME refused (N ticks)`; exit 1 when a name given was refused "
                "(admission turned it away, or every tick of it was bad)",
                add_streams),
    "health": ("is the service up: status, uptime, streams, model", add_health),
    "ticklog": ("read a data directory's tick log back", add_ticklog),
    "keygen": ("make a CURVE keypair: NAME.key (public) and NAME.key_secret", add_keygen),
    "backtest": ("replay files in-process and score every answer", add_backtest),
    "train": ("fit a tick model to your own tick files and score it", add_train),
    "evaluate": ("score a tick model on the test slice of tick files against naive and logistic-regression baselines "
                 "(a text model: its --queries' scored_as answers)",
                 add_evaluate),
    "demo": ("the engine on the built-in model, a live feed and live answers", add_demo),
}
# a command whose run reads another's command line, built with it: evaluate backtests a text model's queries
BUILT_WITH = {"evaluate": ("backtest",)}


class CommandParser(argparse.ArgumentParser):
    """An argparse parser whose usage error is the error, then where the help is: argparse printed the command's
    whole usage first (11 lines for `feed replay`, 17 for `train` at 100 columns) and the error last, under options
    the user had not asked about. Every subcommand's parser is one too (add_subparsers makes its parsers of the
    parent's class)."""

    def error(self, message: str) -> NoReturn:
        self._print_message(f"{self.prog}: error: {message}\nsee {self.prog} --help\n", sys.stderr)
        raise UsageError(message, f"{self.prog}")


class UsageError(SystemExit):
    """A usage error, said on stderr already: SystemExit(2), as argparse's, keeping the message and the command's
    name for a command given --json, whose stdout says it too (cli.py)."""

    def __init__(self, message: str, prog: str) -> None:
        super().__init__(2)
        self.message, self.prog = message, prog


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser; given the command line it will parse (``argv``), only the command it names is built in
    full, every other one by its name and line in `flashtick --help` alone, whose output is the same: a client
    command (`ask`, `list`) then builds and imports nothing of the others' (their option groups, the presets table
    of the reading options, their cmd_*.py modules: a fifth of its start)."""
    parser = CommandParser(prog="flashtick", description="Streaming inference engine for market data.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    shared = SharedOptions()
    built = None if argv is None else _named_commands(argv)
    for name, (line, add) in SUBCOMMANDS.items():
        if built is None or name in built:
            add(sub, shared, line)
        else:
            sub.add_parser(name, help=line)
    _add_log_timestamps(parser)
    _point_to_exit_statuses(parser)
    # a release engineer's first check after an install, and what inventory scripts call (review224 #8)
    parser.add_argument("--version", "-V", action=_VersionAction, help="print the versions of flashtick, torch and "
                        "Python in one line and exit")
    return parser


def _named_commands(argv: list[str]) -> set[str]:
    """The command ``argv`` names (flashtick's own options take no value: its first word that is not an option), with
    those it is built with (BUILT_WITH); none for a command line that names none (`flashtick --help`)."""
    command = next((token for token in argv if not token.startswith("-")), None)
    return {command, *BUILT_WITH.get(command, ())} if command in SUBCOMMANDS else set()


class _VersionAction(argparse.Action):
    """argparse's "version", its line made when asked for (release.version_line reads package metadata)."""

    def __init__(self, option_strings: list[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, nargs=0, help=help)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from engine.service.release import version_line

        print(version_line())
        parser.exit()


def _point_to_exit_statuses(parser: argparse.ArgumentParser) -> None:
    """Every command's --help ends with the exit statuses in one line and where their table is (review337 #5)."""
    from engine.service.exit_codes import EXIT_STATUS_EPILOG

    parser.epilog = f"{parser.epilog}\n\n{EXIT_STATUS_EPILOG}" if parser.epilog else EXIT_STATUS_EPILOG
    for command in {id(c): c for c in subcommands(parser).values()}.values():
        _point_to_exit_statuses(command)


def _add_log_timestamps(parser: argparse.ArgumentParser) -> None:
    """--log-timestamps on ``parser`` and on every subcommand under it, before or after the command alike. It is
    read before the parse (by asks_for_log_timestamps, so that the parse's own usage error is stamped too); the
    parsed value is never used, so no default: a subcommand's would overwrite the one given before the command."""
    parser.add_argument("--log-timestamps", dest="stamp_stderr", action="store_true", default=argparse.SUPPRESS,
                        help="start each line written to stderr with its UTC time (2026-12-03T12:40:01.123Z): for a "
                             "log kept in a file (a supervisor that stamps lines, journald or Kubernetes, needs none)")
    for command in {id(c): c for c in subcommands(parser).values()}.values():
        _add_log_timestamps(command)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands ``parser`` takes, by name (none for a command without any)."""
    return next((action.choices for action in parser._actions  # noqa: SLF001 - argparse's own
                 if isinstance(action, argparse._SubParsersAction)), {})  # noqa: SLF001


def parse_command_line(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """parse_args, but an unknown option is reported as an error of the (sub)command it was given to (whose --help
    shows the options it has), not of the top-level `flashtick`; one given before the command is said to be
    (argparse reported it as the command's). A command's rules across its arguments (`check_usage`: `ask` takes a
    query or --question) are usage errors too, said before anything connects. `command_name` is the (sub)command's
    full name (`flashtick ticklog export`), the prefix of every error of its run as of its usage errors."""
    args, unknown = parser.parse_known_args(argv)
    command = _chosen_command(parser, args)
    if unknown:
        given = sys.argv[1:] if argv is None else argv
        # flashtick's own options take no value: the first word that is not an option is the command
        before = given[:next((i for i, token in enumerate(given) if not token.startswith("-")), len(given))]
        if early := [token for token in unknown if token in before]:
            parser.error(f"unrecognized arguments: {' '.join(early)} (given before the command {args.command}: "
                         f"a command's own options go after it)")
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    if (check := getattr(args, "check_usage", None)) is not None:
        try:
            check(args)
        except ValueError as e:
            command.error(str(e))
    args.command_name = command.prog
    return args


def _chosen_command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The deepest (sub)command ``args`` chose: `feed replay`, `subscribe`, ..."""
    command = parser
    while True:
        chosen = next((action.choices[value] for action in command._actions  # noqa: SLF001 - argparse's own
                       if isinstance(action, argparse._SubParsersAction)  # noqa: SLF001
                       and (value := getattr(args, action.dest, None)) in action.choices), None)
        if chosen is None:
            return command
        command = chosen


def asks_for_log_timestamps(parser: argparse.ArgumentParser, argv: list[str]) -> bool:
    """Whether ``argv`` gives --log-timestamps (or an abbreviation argparse takes for it at that place: before the
    command, or after it among the command's options), read before the parse so that the parse's own usage error
    is stamped like every other line of the run."""
    return _gives_option(parser, argv, "--log-timestamps")


def asks_for_json(parser: argparse.ArgumentParser, argv: list[str]) -> bool:
    """Whether ``argv`` gives a command that takes --json its --json (or an abbreviation argparse takes for it), read
    without the parse, whose usage error a script reading the command's JSON must get on stdout too; or a command
    whose output is JSON without it (`stats`, `health`: its parser's default `json_on_stdout`)."""
    return _gives_option(parser, argv, "--json") or bool(_command_of(parser, argv).get_default("json_on_stdout"))


def _command_of(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.ArgumentParser:
    """The (sub)command parser ``argv`` names, read without the parse (its first words that name subcommands)."""
    command = parser
    for token in argv:
        if token == "--":
            break
        if not token.startswith("-"):
            command = subcommands(command).get(token, command)
    return command


def _gives_option(parser: argparse.ArgumentParser, argv: list[str], option: str) -> bool:
    """Whether ``argv`` gives ``option`` where its (sub)command takes it, as argparse would read it there."""
    command = parser
    for token in argv:
        if token == "--":  # what follows is positional, whatever it looks like
            break
        if not token.startswith("-"):  # a (sub)command goes a level down; another word is an argument's
            command = subcommands(command).get(token, command)
            continue
        name = token.split("=", 1)[0]
        taken = [given for action in command._actions for given in action.option_strings]  # noqa: SLF001
        if name.startswith("--") and [o for o in taken if o.startswith(name)] == [option]:
            return True
    return False

