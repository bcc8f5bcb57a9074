"""The argparse types of the ``flashtick`` options: each checks one value as it is parsed, so a bad one is a usage
error (exit 2) that names the option, never an error later from deep inside a command."""

from __future__ import annotations

import argparse
import math
import unicodedata

from engine.quoting import quoted


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
        raise argparse.ArgumentTypeError(f"must be {what} {'>=' if zero_ok else '>'} 0, got {quoted(text)}")
    return value


def _session_gap(text: str) -> int:
    """An argparse type: a duration such as 1h, 30m, 90s (ns, us, ms, s, m, h, d) -> int ns > 0."""
    from queries.trigger import parse_duration_ns

    try:
        return parse_duration_ns(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a duration such as 1h, 30m or 90s, got {quoted(text)}") from None



def _count(text: str) -> int:
    """An argparse type: a whole number >= 1 (a usage error, exit 2, otherwise): `--ticks 0` is no run to do."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {quoted(text)}")
    return value


def stream_name(text: str) -> str:
    """A stream name (or topic) typed at the command line, in Unicode NFC, the one form the engine takes: a name
    pasted from a macOS file name (NFD) names the stream that prints alike."""
    return unicodedata.normalize("NFC", text)


class OneQueriesFile(argparse.Action):
    """`--queries FILE` (serve, backtest, demo): one file, as the config's `queries` and `register` take. Given
    twice, argparse kept the last file and ran without the first's queries, silently: a usage error instead."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        earlier = getattr(namespace, self.dest, None)
        if earlier is not self.default:  # (the default is set before parsing: any other object was given here)
            raise argparse.ArgumentError(self, f"given twice ({earlier}, then {values}): a command takes one queries "
                                               f"file, as the config's `queries` and `register` do: list the queries "
                                               f"of both in one file")
        setattr(namespace, self.dest, values)


class GivenOnce(argparse.Action):
    """An option of one value (--tz, --date, --from, ...): argparse keeps the last of two and drops the first
    silently (review375 #1: a second --hours dropped the morning session, exit 0); a usage error instead, unless
    it repeats the same value. One that names a store_const (--no-sequence beside --sequence COLUMN) counts too;
    `set_by` names the option that sets a value (--no-sequence's), for the error."""

    def __init__(self, *args: object, set_by: dict[object, str] | None = None, **kwargs: object) -> None:
        self.set_by = set_by or {}
        self.store_const = "const" in kwargs and "nargs" not in kwargs and "type" not in kwargs
        if self.store_const:
            kwargs["nargs"] = 0
        super().__init__(*args, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        value = self.const if self.store_const else values
        earlier = getattr(namespace, self.dest, None)
        if earlier is not None and earlier != self.default and earlier != value:
            shown = lambda v: self.set_by.get(v) or quoted(v)  # noqa: E731
            raise argparse.ArgumentError(self, f"given again ({shown(value)} after {shown(earlier)}): it takes one "
                                               f"value, and argparse would keep the last and drop the first "
                                               f"silently; give it once")
        setattr(namespace, self.dest, value)
