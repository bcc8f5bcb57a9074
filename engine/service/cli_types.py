"""The argparse types of the ``flashtick`` options: each checks one value as it is parsed, so a bad one is a usage
error (exit 2) that names the option, never an error later from deep inside a command."""

from __future__ import annotations

import argparse
import math
import unicodedata
import weakref


def _positive(text: str) -> float:
    """An argparse type: a finite number > 0 (a usage error, exit 2, otherwise)."""
    return _finite_number(text, zero_ok=False)


def _non_negative(text: str) -> float:
    """An argparse type: a finite number >= 0 (a usage error, exit 2, otherwise)."""
    return _finite_number(text, zero_ok=True)


def _speed(text: str) -> float:
    """An argparse type for `feed replay --speed`: a finite x real time > 0. 0, a negative or inf was refused by
    FileReplay as "speed must be None (as fast as possible) ...", a value no command line can give: the way to ask
    for as fast as possible is to leave the option out."""
    try:
        return _positive(text)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{e} (leave --speed out for as fast as possible)") from None


def _timeout(text: str) -> float:
    """An argparse type for every control command's --timeout: a finite number of seconds > 0. `inf` got past
    a check of `> 0` and was refused inside the client as "timeout_s ...", a name the user never typed."""
    return _finite_number(text, zero_ok=False, what="a finite number of seconds")


def _finite_number(text: str, zero_ok: bool, what: str = "a finite number") -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 <= value if zero_ok else 0 < value) or not value < math.inf:
        raise argparse.ArgumentTypeError(f"must be {what} {'>=' if zero_ok else '>'} 0, got {text!r}")
    return value


def _session_gap(text: str) -> int:
    """An argparse type: a duration such as 1h, 30m, 90s (ns, us, ms, s, m, h, d) -> int ns > 0."""
    from queries.trigger import parse_duration_ns

    try:
        return parse_duration_ns(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a duration such as 1h, 30m or 90s, got {text!r}") from None



def _count(text: str) -> int:
    """An argparse type: a whole number >= 1 (a usage error, exit 2, otherwise): `--ticks 0` is no run to do."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}")
    return value


def stream_name(text: str) -> str:
    """A stream name (or topic) typed at the command line, in Unicode NFC, the one form the engine takes: a name
    pasted from a macOS file name (NFD) names the stream that prints alike."""
    return unicodedata.normalize("NFC", text)


class OneValue(argparse._StoreAction):  # noqa: SLF001 - argparse's own `store`, with a check before it
    """Every single-valued option of every command (cli_parser.one_value_each makes each plain `store` option one):
    given twice, argparse kept the last value silently (`serve --model A ... --model B` served B, `backtest --out`
    wrote the second): a usage error naming the option instead, as the YAML files' keys given twice and the wire's
    `duplicate_key` are. Options documented as repeatable (`--price-offset`) are `append` and not touched."""

    hint = "it takes one value: give it once"

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        # which parses set it already, by their namespace (a weak reference: a default equal to the value given,
        # `--limit 100`, cannot tell a given value from the default, and a namespace cannot be hashed)
        given = vars(self).setdefault("given_in", [])
        given[:] = [ref for ref in given if ref() is not None]
        if any(ref() is namespace for ref in given):
            shown = lambda v: " ".join(map(str, v)) if isinstance(v, list) else str(v)  # noqa: E731
            raise argparse.ArgumentError(self, f"given twice ({shown(getattr(namespace, self.dest))}, then "
                                               f"{shown(values)}): {self.hint}")
        given.append(weakref.ref(namespace))
        setattr(namespace, self.dest, values)


class OneQueriesFile(OneValue):
    """`--queries FILE` (serve, backtest, demo): one file, as the config's `queries` and `register` take. Given
    twice, argparse kept the last file and ran without the first's queries, silently: a usage error instead."""

    hint = "a command takes one queries file, as the config's `queries` and `register` do: list the queries of " \
           "both in one file"
