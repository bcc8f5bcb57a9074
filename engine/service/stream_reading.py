"""A user's tick files read for `train` and `evaluate`: every valid tick grouped by stream, inside --from/--to,
and the rows the reading rejected (`Rejected`), before splits.py cuts each stream into its parts."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

from connectors.cautions import Caution
from connectors.replay import FileReplay
from connectors.ticks import Tick
from connectors.time_range import TimeRange
from connectors.zero_crossings import holes_refusal
from engine.service.no_data import NoData, refuse_absent_inputs
from engine.service.rejections import rejected_lines
from engine.service.tick_origins import TickOrigins


class Rejected(dict):
    """The ticks a reading rejected: reason -> count (a dict, as records and --json keep it), with ``said``, the
    reading's line per reason (its first row and the fix it proposes: `rejected_lines`), for an error the
    rejections may have caused to name them under --quiet too (a stream left too short to split by 77% of its
    prices refused at or below zero needs --price-offset, not another --split)."""

    def __init__(self, counts: Mapping[str, int], said: list[str]) -> None:
        super().__init__(counts)
        self.said = said


def read_streams(files: list[str], columns: Any = None, note: Callable[[str], None] = lambda _: None,
                 streams: list[str] | None = None, caution: Callable[[str], None] | None = None,
                 opened: Callable[[FileReplay], None] = lambda _: None, origins: TickOrigins | None = None,
                 command: str = "this run", time_range: TimeRange | None = None, skip_bad_files: bool = False
                 ) -> tuple[dict[str, list[Tick]], Rejected]:
    """Every valid tick of `files` (FileReplay: presets, column maps, detection), grouped by stream;
    and the rejected rows by reason (`Rejected`). ``note`` is told how the files are read (the map detected, a time zone
    assumed, ...), as `backtest` tells it; ``caution`` (default ``note``) the reading's cautions among them (two
    instruments in one stream, two sources interleaved: connectors/cautions.py), which change what the scores mean
    and so are said where the plain notes are quieted (--quiet). ``streams`` (names or globs) reads those alone.
    ``opened`` is given the replay once its files are open (evaluate records them: run_record.input_files);
    ``origins`` gets each tick's file and row, as a backtest's does (--points-out names them). A stream whose
    prices cross zero, its rows at or below it refused out of its middle, is refused (zero_crossings.py): no label
    of ``command`` (`train`, `evaluate`) may span such a hole. ``time_range`` (--from/--to) keeps the ticks stamped
    inside it alone, before any split: the rows left out are said in a note. ``skip_bad_files``: FileReplay's
    (--skip-bad-files)."""
    refuse_absent_inputs(files)  # a pattern that matches no file yet, an empty folder: no data yet (NoData)
    replay = FileReplay(files, columns=columns, streams=streams, time_range=time_range, skip_bad_files=skip_bad_files)
    opened(replay)
    for line in replay.notes:
        say = caution if caution is not None and isinstance(line, Caution) else note
        say(line)
    by_stream: dict[str, list[Tick]] = defaultdict(list)
    while not replay.done:
        ticks = replay.next_batch(65536)
        for tick in ticks:
            by_stream[tick.stream].append(tick)
        if origins is not None:  # every tick read is one of its stream's (prepare keeps them all, in order)
            for tick, origin in zip(ticks, replay.origins):
                origins.add(tick.stream, *origin)
    rejected = replay.rejected
    if time_range is not None and not by_stream and replay.range_left_out:
        raise ValueError(f"{time_range.text()} left out every row the files hold ({replay.range_left_out:,}): give a "
                         f"range that holds some of their ticks")
    if time_range is not None:
        note(f"{time_range.text()}: {replay.range_left_out:,} row(s) of the files outside it left out")
    read = sum(map(len, by_stream.values()))  # none read: the error below says so, no share to warn of
    said = [line.strip() for line in rejected_lines(dict(rejected), rejected.examples, read or None,
                                                    rejected.streams_of())]
    if not by_stream and said:
        raise ValueError("no tick was read from the files: every row was rejected: " + "; ".join(said))
    if not by_stream:  # each file a header alone or zero bytes: no data yet, not a mistake (no_data.py)
        raise NoData("no tick was read from the files: they hold no data rows")
    for line in said:
        note(line)
    if (holes := holes_refusal(rejected, command)) is not None:
        raise ValueError(holes)
    return dict(by_stream), Rejected(Counter(rejected), [line for line in said if not line.startswith("warning: ")])
