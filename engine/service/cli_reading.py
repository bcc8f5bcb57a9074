"""The reading options (--columns, --preset, --ts-unit, --price-offset, --sequence, --streams, --from/--to) turned
into what connectors read files with: the column map, the streams read, the event-time range. `feed replay`,
`backtest`, `train`, `evaluate`, `demo` and `ticklog export` read files alike, so they read the options alike.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any



FILE_ORDER = ""  # --no-sequence: rows of equal times in file order, said apart from an option not given (None)


def time_range_of(args: argparse.Namespace, quiet: bool = False) -> Any:
    """--from/--to; a time without an offset (a bare date) on --tz's clock when it is given, as a desk means its
    market's day (review375 #8: Sydney's first hour was cut at UTC's midnight), said in a note (not ``quiet``: read
    again after it was said); else UTC."""
    from connectors.time_range import TimeRange, names_no_offset, wall_clock_caveat
    from connectors.time_zones import unknown_zone_hint

    given = {"--from": getattr(args, "time_from", None), "--to": getattr(args, "time_to", None)}
    zone = getattr(args, "tz", None)
    if zone is not None and unknown_zone_hint(zone) is not None:
        zone = None  # (an unknown zone is refused, naming itself, where the files' map is checked)
    time_range = TimeRange.of(given["--from"], given["--to"], zone)
    naive = [f"{option} {text}" for option, text in given.items() if text is not None and names_no_offset(text)]
    if naive and zone and not quiet:
        # a time its clock repeats or skips is read without a question: which reading was taken is said
        caveats = "".join(f"; {option} {caveat}" for option, text in given.items()
                          if text is not None and (caveat := wall_clock_caveat(text, zone)) is not None)
        print(f"{args.command_name}: note: {' and '.join(naive)} read on {zone}'s clock, as --tz gives it for the "
              f"files' times ({time_range.text()}; give an offset, e.g. 2024-01-02T09:30Z, for another clock)"
              f"{caveats}", file=sys.stderr)
    return time_range


def streams_to_read(args: argparse.Namespace, config: Any = None) -> list[str] | None:
    """The streams to read: --streams, else the config's replay.streams, else None (every stream)."""
    if args.streams is not None:
        return args.streams
    section = config.replay if config is not None else None
    return list(section.streams) if getattr(section, "streams", None) else None


def column_map_of(args: argparse.Namespace, config: Any = None) -> dict[str, Any] | None:
    """The column map of the reading options over the config's replay section: an option given replaces the
    key of the same name, and --columns replaces the section's columns and preset both (a new map). Where neither
    --zero-bid nor the map says how a quote's 0 bid reads, it reads as the service does off the wire
    (``served_zero_bid``): a backtest or feed given a service's config reads an option chain as the service would."""
    from connectors.map_options import map_from_options

    section = config.replay if config is not None else None  # (`feed replay` without --config has none)
    given = lambda option, key: option if option is not None else getattr(section, key, None)  # noqa: E731
    names = tuple(n.strip() for n in args.csv_names.split(",")) if args.csv_names else None
    if args.columns is not None:
        preset, columns = args.preset, args.columns
    else:
        preset, columns = given(args.preset, "preset"), given(None, "columns")
    sequence = getattr(args, "sequence", None)
    spec = map_from_options(preset, columns, detect=True, names=given(names, "names"),
                            ts_unit=given(args.ts_unit, "ts_unit"),
                            tz=given(args.tz, "tz"), date=given(args.date, "date"),
                            ts_format=given(args.ts_format, "ts_format"),
                            price_offset=_price_offset(getattr(args, "price_offset", None)),
                            price_format=getattr(args, "price_format", None), hours=getattr(args, "hours", None),
                            zero_bid=getattr(args, "zero_bid", None), sequence=sequence or None,
                            **_bar_options(args))
    if sequence == FILE_ORDER and spec:  # --no-sequence over a map that names a sequence column: file order
        spec = {key: value for key, value in spec.items() if key != "sequence"} or None
    if "zero_bid" not in (spec or {}) and served_zero_bid(args, config) == "price":
        spec = {**(spec or {}), "zero_bid": "price"}
    return spec


def configured_column_map(config: Any) -> dict[str, Any] | None:
    """The column map of ``config``'s replay section alone, as a command given no reading option reads it (a Python
    run_backtest given no `columns`)."""
    unset = argparse.Namespace(csv_names=None, columns=None, preset=None, ts_unit=None, tz=None, date=None,
                               ts_format=None)
    return column_map_of(unset, config)


def served_zero_bid(args: argparse.Namespace, config: Any = None) -> str | None:
    """How the service reads a wire quote's 0 bid (limits.zero_bid): what `feed` learnt of it from the service's own
    `health` (``args.served_zero_bid``), else the config's (`backtest --config`, `feed --config`)."""
    if getattr(args, "served_zero_bid", None) is not None:  # (feed: a service's health may have said it since)
        return args.served_zero_bid
    return config.limits.zero_bid if config is not None else None


def _bar_options(args: argparse.Namespace) -> dict[str, str]:
    """--bar-stamp and --bar-length as the map's bar_stamp and bar_length (open: the map's start); a length
    without --bar-stamp close is refused in the options' words (the map's own check says its keys')."""
    stamp, length = getattr(args, "bar_stamp", None), getattr(args, "bar_length", None)
    if length is not None and stamp != "close":
        raise ValueError(f"--bar-length {length} is the length added to a bar's start to stamp it at its close: "
                         f"give --bar-stamp close too")
    given = {"bar_stamp": {"open": "start"}.get(stamp, stamp), "bar_length": length}
    return {key: value for key, value in given.items() if value is not None}


def _price_offset(given: list[str] | None) -> str | None:
    """--price-offset as given, once or more: one number for every stream, or STREAM=X each (joined for the
    map's inline form, NAME=X|NAME=X); both kinds at once is refused, as which applies where would be a guess."""
    if not given:
        return None
    named = [value for value in given if "=" in value]
    if named and len(named) < len(given) or not named and len(given) > 1:
        raise ValueError(f"--price-offset is one number for every stream, or STREAM=X for each stream shifted "
                         f"(repeated for several), not both nor two numbers; got {' '.join(given)}")
    return "|".join(given)
