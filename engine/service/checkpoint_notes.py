"""What a checkpoint `flashtick train` wrote records of its training (evaluation.json: the files, how they were
read, the parts each stream was split into), and what `serve`, `backtest` and `evaluate` do with it: read the files
as training did unless told otherwise, and say when scores are not out of sample.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple

from engine.service.cli_reading import column_map_of, streams_to_read
from engine.service.output_paths import files_read
from engine.service.reading_record import checkpoint_evaluation


def trained_reading(model_path: str | None) -> str:
    """The reading options a checkpoint was trained on, as options (`--price-offset 50`); '' for none."""
    from engine.service.reading_record import FILE_READING, recorded_reading, shown

    recorded = {key: value for key, value in (recorded_reading(model_path) or {}).items() if key in FILE_READING}
    return shown(recorded, recorded) if recorded else ""


def trained_prices(model_path: str | None) -> dict[str, str]:
    """How a checkpoint's training read prices (--price-offset, --price-format, --zero-bid, --sequence), as
    reading_record records them; {} for none. A service says it in `health`, and `feed replay` reads its files with
    it unless given: the model learnt from prices read so, whichever way its ticks now come."""
    from engine.service.reading_record import PRICE_OPTIONS, recorded_reading

    return {key: value for key, value in (recorded_reading(model_path) or {}).items() if key in PRICE_OPTIONS}


def trained_options(same_files: bool, splits: bool) -> dict[str, str]:
    """The one rule of which recorded reading options a run on a checkpoint takes unless given (`evaluate`,
    `backtest --model`, `feed replay` into a service; `serve` adds the offset at ingest): how prices are read and
    ordered (--price-offset, --price-format, --zero-bid, --sequence) on any file, as the model learnt prices at that
    level whatever file holds them; how the files are laid out (--tz ... --streams) only on its training files,
    which other files need not share; and the split (--split, --gap) where the run splits the files (``splits``:
    evaluate's test part is training's, and on the training files over its --from/--to too: _take_time_range; a
    backtest scores every answer)."""
    from engine.service.reading_record import LAYOUT_OPTIONS, PRICE_OPTIONS, SPLIT_OPTIONS

    return PRICE_OPTIONS | (SPLIT_OPTIONS if splits else {}) | (LAYOUT_OPTIONS if same_files else {})


def read_as_trained(args: argparse.Namespace, model_dir: Path | str | None, said: Callable[[str], None],
                    splits: bool, config: Any = None) -> dict[str, str] | None:
    """Read ``args.files`` with the options ``model_dir``'s training read its files with, as trained_options says
    (a mismatch of the ones given is for the caller to say, over the keys it compares); returns what it recorded
    (None: a checkpoint that does not say, of which nothing is assumed): the same files read otherwise drop other
    rows, shift times against each other, order ticks of equal times otherwise and cut other parts."""
    from engine.service.reading_record import recorded_reading

    recorded = recorded_reading(model_dir)
    same_files = reads_training_files(model_dir, args.files)
    if recorded:
        take_recorded(args, recorded, trained_options(same_files, splits), said, config)
    if splits and same_files:
        _take_time_range(args, model_dir, said)
    return recorded


def _take_time_range(args: argparse.Namespace, model_dir: Path | str, said: Callable[[str], None]) -> None:
    """The --from/--to a checkpoint was trained over (`trained_on.time_range`), for `evaluate` of its training files
    given neither (nor a --test-from, which says itself what to score): then its test part is training's, as its
    split's is (review443 #6: the whole files were split, and another test slice scored without a word)."""
    if args.time_from is not None or args.time_to is not None or args.test_from is not None:
        return
    recorded = ((checkpoint_evaluation(Path(model_dir)) or {}).get("trained_on") or {}).get("time_range")
    if not recorded:
        return
    words = recorded.split()  # TimeRange.text(): `--from 2024-08-08T23:58:00Z --to 2024-08-09T00:00:00Z`
    for option, value in zip(words[::2], words[1::2]):
        setattr(args, {"--from": "time_from", "--to": "time_to"}[option], value)
    said(f"reading the files with {recorded}, as this model was trained (its evaluation.json; give --from or --to "
         f"to read another range, or --test-from to score a part of your choosing)")


def compared_reading(model_dir: Path | str | None, files: list[Path], keys: Mapping[str, str]) -> Mapping[str, str]:
    """Of ``keys``, the reading options a run's note of a mismatch compares with training's, by trained_options'
    rule: on the training files every one; on other files not their layout (--tz ... --streams), each file's own
    fact (review433 #10: a Tokyo file read with --tz Asia/Tokyo was said to make scores that "do not compare" with
    those of a model trained on Shanghai files)."""
    from engine.service.reading_record import LAYOUT_OPTIONS

    if reads_training_files(model_dir, files):
        return keys
    return {key: option for key, option in keys.items() if key not in LAYOUT_OPTIONS}


def session_gap_mismatch(recorded: dict[str, str] | None, session_gap_ns: int | None,
                         config_key: str | None = None) -> str | None:
    """How the --session-gap a checkpoint was trained with (``recorded``: recorded_reading's) differs from the one
    this run labels answers with, or None. `backtest` and `evaluate` say it as their option; `serve`, which has no
    such option, names its config key (``config_key``) with both values in seconds, and the value that agrees."""
    from connectors.labels import session_gap_text
    from engine.service.reading_record import LABEL_OPTIONS, reading_mismatch, reading_of, shown
    from queries.trigger import parse_duration_ns

    mismatch = reading_mismatch(recorded, reading_of(None, session_gap_ns=session_gap_ns), LABEL_OPTIONS)
    if mismatch is None or recorded is None or config_key is None:
        return mismatch
    trained = recorded.get("session_gap")
    agreeing = "null" if trained is None else f"{parse_duration_ns(trained) / 1e9:g}"
    now = "null (off)" if session_gap_ns is None else f"{session_gap_ns / 1e9:g} ({session_gap_text(session_gap_ns)})"
    return (f"this model was trained with {shown(recorded, LABEL_OPTIONS)}; this service's {config_key} is {now}: "
            f"its live scores and adaptation label answers otherwise than training did (set {config_key}: "
            f"{agreeing} in the config)")


# the argparse attribute of each recorded reading key where it is not the key itself
_READING_ATTRIBUTES = {"names": "csv_names"}


def _given(args: argparse.Namespace, key: str, config: Any = None) -> bool:
    """Whether this run's command line (or its config's replay section) says how to read ``key`` itself."""
    section = config.replay if config is not None else None
    if key == "columns":
        return args.columns is not None or args.preset is not None or bool(
            getattr(section, "columns", None) or getattr(section, "preset", None))
    if key in ("split", "gap"):
        return getattr(args, key) not in (None, 0)
    return getattr(args, _READING_ATTRIBUTES.get(key, key), None) is not None or bool(getattr(section, key, None))


def take_recorded(args: argparse.Namespace, recorded: dict[str, str], keys: Any, said: Callable[[str], None],
                  config: Any = None) -> None:
    """Set the options among ``keys`` a checkpoint recorded and this run does not give, saying so."""
    from engine.service.reading_record import option_value, shown

    taken = {key: value for key, value in recorded.items() if key in keys and not _given(args, key, config)}
    for key, value in taken.items():
        setattr(args, _READING_ATTRIBUTES.get(key, key), option_value(key, value))
    if taken:
        said(f"reading the files with {shown(taken, taken)}, as this model was trained (its evaluation.json; give "
             f"the option to read them otherwise)")


def current_reading(args: argparse.Namespace, config: Any = None) -> dict[str, str]:
    """How this run reads its files, as reading_record records it."""
    from engine.service.reading_record import reading_of
    from engine.service.splits import SplitSpec

    split = SplitSpec.parse(args.split).text() if getattr(args, "split", None) else None
    # a backtest's session gap is its config's (--session-gap overrides it there), evaluate's its option
    session_gap = config.answers.session_gap_ns if config is not None else getattr(args, "session_gap", None)
    return reading_of(column_map_of(args, config), streams_to_read(args, config), split, getattr(args, "gap", 0) or 0,
                      session_gap)


def reads_training_files(model_dir: Path | str | None, files: list[Path]) -> bool:
    """Whether every file given is one the checkpoint (`flashtick train`'s) was trained on: then the way training
    read them is the way to read them again."""
    if model_dir is None or (seen := _trained_on(checkpoint_evaluation(Path(model_dir)), files)) is None:
        return False
    return seen.every_file


class TrainedOn(NamedTuple):
    """What a checkpoint `flashtick train` wrote was trained and validated on, among the files a run reads."""

    files: list[str]  # the run's files it was trained on, as the run names them (a folder or pattern: all its files)
    seen_end: float  # the fraction of each stream's ticks it was trained and validated on
    streams: dict[str, int] | None  # stream -> its last trained or validated tick's event time (ns); None: not kept
    every_file: bool  # every file the run reads is one it was trained on
    starts: dict[str, int] | None = None  # stream -> its first trained tick's event time (ns); None: not kept

    def overlapping(self, spans: dict[str, tuple[int, int]]) -> list[tuple[str, int, int]]:
        """The streams of ``spans`` (stream -> the first and last event time a run scores, ns) whose scored ticks
        fall inside the time span this checkpoint trained and validated on, as (stream, first, last): the same
        ticks whatever file holds them (a Parquet copy, a shorter export). A checkpoint that kept no start: from
        the stream's beginning."""
        starts = self.starts or {}
        return [(name, *spans[name]) for name in sorted(spans.keys() & (self.streams or {}).keys())
                if spans[name][0] <= self.streams[name] and spans[name][1] >= starts.get(name, spans[name][1])]


def _trained_on(evaluation: dict[str, Any] | None, files: list[Path]) -> TrainedOn | None:
    """Which of ``files`` the checkpoint of ``evaluation`` (checkpoint_evaluation) was trained and validated on, the
    fraction of each stream's ticks that covered and the streams it trained on (a checkpoint from before they were
    kept: None); None when none of the files (or not one of ours, or from before this was kept)."""
    try:
        trained = (evaluation or {})["trained_on"]
        # both sides as the files a replay reads: a folder or pattern given matches the files trained on, and a
        # checkpoint that recorded a folder or a replay list (before the files were) matches the files in it
        trained_files = {str(f.resolve()) for path in trained["files"] for f in files_read(path)}
        same, every_file = [], True
        for given in files:
            read = files_read(given)
            seen = [str(f) for f in read if str(f.resolve()) in trained_files]
            every_file &= len(seen) == len(read)
            same += [str(given)] if seen and len(seen) == len(read) else seen
        kept, starts = _stream_times(trained.get("streams")), _stream_times(trained.get("stream_starts"))
        if not same:  # other files: their ticks may still be the ones trained on (times compare, names do not)
            return None if kept is None else TrainedOn([], float(trained["seen_end"]), kept, False, starts)
        return TrainedOn(sorted(set(same)), float(trained["seen_end"]), kept, every_file, starts)
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def _stream_times(recorded: Any) -> dict[str, int] | None:
    """A recorded stream -> event time (ns) map, None where not kept."""
    return {str(name): int(ts) for name, ts in recorded.items()} if isinstance(recorded, dict) else None


def _same_files_note(seen: TrainedOn, inside: list[tuple[str, int, int]]) -> str | None:
    """Why the test slice of the training files, cut by a time or read over a time range, is not out of sample, if
    it is not: it begins inside the event times the model trained and validated on (``inside``, as in
    _other_files_note)."""
    from connectors.ticks import utc_text

    if not inside:
        return None
    name, first, last = inside[0]
    more = f"; so for {len(inside) - 1} more stream{'s' * (len(inside) > 2)}" if len(inside) > 1 else ""
    return (f"this model was trained and validated on stream {name}'s ticks up to {utc_text(seen.streams[name])} "
            f"(UTC event times, its evaluation.json), and the test slice of {name} runs from {utc_text(first)} to "
            f"{utc_text(last)}{more}: those scores are not out of sample (give a --test-from after "
            f"{utc_text(seen.streams[name])})")


def _other_files_note(seen: TrainedOn, inside: list[tuple[str, int, int]], scored: str, fix: str) -> str | None:
    """Why scores on files other than the training files are not out of sample, if they are not: their ticks of a
    stream trained on fall inside the event times it was trained and validated on (``inside``: TrainedOn.overlapping
    of what is ``scored``)."""
    from connectors.ticks import utc_text

    if not inside:
        return None
    name, first, last = inside[0]
    since = f" from {utc_text(seen.starts[name])}" if seen.starts and name in seen.starts else ""
    more = f"; so for {len(inside) - 1} more stream{'s' * (len(inside) > 2)}" if len(inside) > 1 else ""
    return (f"this model was trained and validated on stream {name}'s ticks{since} up to "
            f"{utc_text(seen.streams[name])} (UTC event times, its evaluation.json), and {scored} of {name} runs "
            f"from {utc_text(first)} to {utc_text(last)}, inside them{more}: these files are not the training files, "
            f"but their ticks are the ones it saw, so those scores are not out of sample ({fix})")


TEST_PART = "test"  # `backtest --test-from test`: the checkpoint's own test part, as `evaluate` scores it


def own_test_from(evaluation: dict[str, Any] | None, model_path: str | None) -> float:
    """What `backtest --test-from test` stands for: the share of each stream's ticks the checkpoint at ``model_path``
    (None: the built-in model) was trained and validated on, from its evaluation.json (``evaluation``:
    checkpoint_evaluation's), so test_part_starts cuts its streams where `evaluate`'s test part starts. A ValueError
    naming the checkpoint when it records no split: guessing one would score ticks it may have trained on."""
    own = f"--test-from {TEST_PART} scores the model's own test part, and"
    fraction = "give a fraction of each stream's ticks instead, e.g. --test-from"
    if model_path is None:
        raise ValueError(f"{own} the built-in model records no split (no evaluation.json: it trained on a synthetic "
                         f"market and the first 80% of the ticks of the shared BTCUSDT and EURUSD sets, docs/model.md; "
                         f"any other instrument is out of sample): {fraction} 0.8")
    where = Path(model_path) / "evaluation.json"
    if evaluation is None:
        raise ValueError(f"{own} {model_path} records no split: {where} (written by `flashtick train`) is missing or "
                         f"unreadable: {fraction} 0.85")
    try:
        seen_end = float(evaluation["trained_on"]["seen_end"])
    except (KeyError, TypeError, ValueError):
        seen_end = None
    if seen_end is None or not 0 < seen_end < 1:
        raise ValueError(f"{own} {where} records no split (trained_on.seen_end, the train and validation parts' "
                         f"share): {fraction} 0.85")
    return seen_end


def own_test_note(test_from: float) -> str:
    """What `--test-from test` (run_backtest's `test_from="test"`) stands for, said once read (own_test_from)."""
    from engine.service.backtest_report import percent

    return (f"--test-from {TEST_PART}: this model was trained and validated on the first {percent(test_from)} of "
            f"each stream's ticks (its evaluation.json): scoring the answers after them, as --test-from "
            f"{test_from:g}")


def test_part_starts(evaluation: dict[str, Any] | None, test_from: float | None) -> dict[str, tuple[int, int]]:
    """Where a `backtest --model --test-from` at the checkpoint's own split (0.85 of the default 70/15/15) starts
    scoring each stream it trained on: stream -> (its ticks in training, its test part's first tick), the tick
    evaluate's test part starts at, after the gap (--gap, at least the longest horizon); the fraction alone
    (6800 of 8000) scored the gap's 50 ticks too. {} for any other --test-from or checkpoint."""
    try:
        if test_from is None or abs(float(evaluation["trained_on"]["seen_end"]) - test_from) > 1e-9:
            return {}
        return {str(name): (int(part["ticks"]), int(part["test"][0])) for name, part in evaluation["streams"].items()}
    except (KeyError, TypeError, ValueError, IndexError):
        return {}


NAMED_STREAMS = 6  # streams a note names; beyond them, how many more


def _seen_text(seen: TrainedOn, streams: list[str] | None) -> str:
    """What a checkpoint was trained and validated on, in words: the first 85% of `streams`' ticks in its files
    (None: a checkpoint that did not keep its streams, said of the files)."""
    from engine.service.backtest_report import percent

    files = ", ".join(seen.files)
    if streams is None:
        return f"the first {percent(seen.seen_end)} of {files}"
    named = ", ".join(streams[:NAMED_STREAMS]) + (f" and {len(streams) - NAMED_STREAMS} more"
                                                   if len(streams) > NAMED_STREAMS else "")
    return f"the first {percent(seen.seen_end)} of the ticks of stream{'s' * (len(streams) > 1)} {named} in {files}"


def in_sample_note(evaluation: dict[str, Any] | None, files: list[Path], report: Any, test_from: float | None,
                   max_ticks: int | None, same_reading: bool) -> str | None:
    """Why a `backtest --model` run's scores are not out of sample, if they are not: it scores answers inside the
    ticks the checkpoint was trained and validated on (of the streams it trained on). Said in the training run's
    tick positions where they are this run's (``same_reading``: the files read with the same options and event-time
    range, and each stream as many ticks as training read, or fewer where --max-ticks cut the run), else in event
    times, or, from a checkpoint that kept none, by saying the positions do not map."""
    from connectors.ticks import utc_text

    seen = _trained_on(evaluation, files)
    if seen is None:
        return None
    if not seen.files:
        spans = {name: (first, report.split_ends.get(name, first)) for name, first in report.split_times.items()}
        return _other_files_note(seen, seen.overlapping(spans), "the scored span",
                                 "give a --test-from that scores only later ticks, or score other ticks")
    shared = None if seen.streams is None else sorted(report.stream_ticks.keys() & seen.streams.keys())
    if shared == []:  # none of this run's streams was trained on (a stream its split left out, another file's)
        return None
    trained_ticks = {name: part.get("ticks") for name, part in (evaluation or {}).get("streams", {}).items()}
    mapped = same_reading and all(
        n == trained_ticks.get(name) or (max_ticks is not None and n <= (trained_ticks.get(name) or 0))
        for name, n in report.stream_ticks.items() if name in trained_ticks)
    by_time = hasattr(test_from, "ns")  # --test-from TIME (test_start.TestStart): compared in event times
    inside = _scored_inside(evaluation, report.stream_ticks, test_from) if mapped and not by_time else None
    if inside:
        where = (f" (stream {inside[0][0]}: scored from its tick {inside[0][1]:,}, trained and validated on its "
                 f"ticks before {inside[0][2]:,})")
    elif inside is None and seen.streams is not None:  # where the seen part ends in time, however read
        late = [(name, report.split_times[name]) for name in shared
                if name in report.split_times and report.split_times[name] <= seen.streams[name]]
        if not late:
            return None
        name, first = late[0]
        where = (f" (stream {name}: scored from {utc_text(first)}, trained and validated on its ticks up to "
                 f"{utc_text(seen.streams[name])}, UTC event times" + (")" if by_time else ": this run reads the "
                 "files otherwise than training did, so training's tick positions do not map onto its ticks)"))
        if by_time:
            return (f"this model was trained and validated on {_seen_text(seen, shared)}, and --test-from "
                    f"{test_from.text()}{where}: the scores below are not out of sample (give a --test-from after "
                    f"{utc_text(max(seen.streams[n] for n in shared if n in seen.streams))})")
    elif inside is None and not by_time and (test_from is None or test_from < seen.seen_end - 1e-9):
        where = ("" if mapped else " (this run reads the files otherwise than training did, so training's tick "
                 "positions do not map onto its ticks)")
    else:
        return None
    scored = ("every answer was scored" if test_from is None else f"--test-from {test_from.text()}" if by_time
              else f"--test-from {test_from:g}")
    whole = ", over the whole files" if inside else ""  # (a run --max-ticks cut: its fractions are of fewer ticks)
    return (f"this model was trained and validated on {_seen_text(seen, shared)}, and {scored}{where}: the scores "
            f"below are not out of sample (give --test-from {seen.seen_end:g} or later{whole})")


def _scored_inside(evaluation: dict[str, Any] | None, stream_ticks: dict[str, int], test_from: float | None
                   ) -> list[tuple[str, int, int]] | None:
    """Streams of a backtest whose scored answers begin inside the ticks a checkpoint was trained and validated on:
    (stream, the first scored tick, the end of those ticks), counted in ticks, so a run cut short (--max-ticks),
    whose fractions are of fewer ticks than training's, is judged right; None when the checkpoint does not say
    where each stream's parts were (then the fractions are compared)."""
    try:
        parts = (evaluation or {})["streams"]
        seen = {name: max(p["train"][1], p["validation"][1]) for name, p in parts.items()}
    except (KeyError, TypeError, AttributeError):
        return None
    from engine.service.backtest_scores import first_share

    first_scored = {name: 0 if test_from is None else first_share(n, test_from) for name, n in stream_ticks.items()}
    return [(name, first_scored[name], seen[name]) for name in sorted(first_scored.keys() & seen.keys())
            if first_scored[name] < seen[name]]


def trained_on_overlap(model_dir: Path, files: list[Path], split: Any, evaluated: dict[str, tuple[int, int]],
                       by_time: bool = False) -> str | None:
    """Why the test slice is not out of sample for a checkpoint `flashtick train` wrote, if it is not: the same
    files, streams it trained on among the ``evaluated`` ones (stream -> its test slice's first and last event
    time, ns), and the test slice starts inside the part the model was trained on; or other files whose test
    slice of a stream trained on lies inside the event times the model trained and validated on."""
    from engine.service.backtest_report import percent

    evaluation = checkpoint_evaluation(model_dir)
    seen = _trained_on(evaluation, files)
    # a time range (train's or this run's) or a test part cut at a time: the shares of the same files are of other
    # ticks, so the test slice is compared with what training saw in event times
    by_time = by_time or bool(((evaluation or {}).get("trained_on") or {}).get("time_range"))
    if seen is not None and seen.files and by_time and seen.streams is not None:
        return _same_files_note(seen, seen.overlapping(evaluated))
    if seen is not None and not seen.files:
        return _other_files_note(seen, seen.overlapping(evaluated), "the test slice",
                                 "score ticks after those it saw: later ticks, or a --split whose test part begins "
                                 "after them")
    test_start = split.train + split.validation
    if seen is None or test_start >= seen.seen_end - 1e-9:
        return None
    shared = None if seen.streams is None else sorted(evaluated.keys() & seen.streams.keys())
    if shared == []:  # none of them was trained on: a stream its split left out, or one of another file's
        return None
    return (f"this model was trained and validated on {_seen_text(seen, shared)}; the test slice starts at "
            f"{percent(test_start)}, inside it: those scores are not out of sample (give a --split whose test part "
            f"starts at {percent(seen.seen_end)} or later)")
