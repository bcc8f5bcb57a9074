"""`flashtick evaluate`: score a tick model on the test slice of tick files against naive and
logistic-regression baselines.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

from connectors.cautions import Caution, labelled
from engine.service.builtin_in_sample import SEEN_END, builtin_in_sample_note, builtin_span_caution
from engine.service.checkpoint_notes import compared_reading, current_reading, read_as_trained, trained_on_overlap
from engine.service.cli_common import check_outputs, printable_json
from engine.service.cli_reading import column_map_of, time_range_of
from engine.service.cmd_train import (DEFAULT_SPLIT, pause_notes, rejected_status, say_left_out, say_rejected_if_quiet,
                                      train_common)
from engine.service.output_paths import IMAGE, PARQUET, Output, check_plot_path
from engine.service.reading_record import READING_OPTIONS, reading_mismatch


def _test_streams(args: argparse.Namespace, model: Any, codec: Any, split: Any, said: Callable[[str], None],
                  caution: Callable[[str], None], opened: Callable[[Any], None], origins: Any
                  ) -> tuple[dict[str, int], list[Any], list[str]]:
    """The files read and split as ``split`` (rows rejected, the streams prepared, those left out), what the reading
    and the split leave to say said: notes (``said``), cautions, and price steps across a split; ``opened`` is given
    the files' replay (the run's record names what it read), ``origins`` each tick's file and row."""
    import numpy as np

    from connectors.labels import tick_price
    from connectors.price_steps import price_steps
    from engine.service.evaluate import window_ticks
    from engine.service.stream_reading import read_streams
    from engine.service.splits import (gap_note, min_part_ticks, prepare, short_streams_line,
                                       time_overlap_note)

    replays: list[Any] = []  # (its price offsets: a price step's ratio is one of the files' prices)

    def opening(replay: Any) -> None:
        replays.append(replay)
        opened(replay)

    streams, rejected = read_streams([str(f) for f in args.files], column_map_of(args), note=said,
                                     streams=args.streams, caution=caution, opened=opening,
                                     origins=origins, command="evaluate", time_range=time_range_of(args),
                                     skip_bad_files=args.skip_bad_files)
    # train's rule: a part of fewer ticks left a test slice of one tick, an empty table and exit 0
    min_ticks = min_part_ticks(codec, window_ticks(model))
    prepared, skipped = prepare(codec, streams, split, min_ticks, training=False, name_all=args.verbose,
                                session_gap_ns=args.session_gap, rejected=rejected)
    if (widened := gap_note(codec, split)) is not None:
        caution(widened)
    say_left_out(skipped, short_streams_line(codec, streams, [sd.name for sd in prepared], split, min_ticks), args,
                 lambda line: print(f"flashtick evaluate: note: left out {line}", file=sys.stderr))
    args.ticks_taken = sum(map(len, streams.values()))  # (--max-rejected-share's share is of these and the rejected)
    say_rejected_if_quiet(rejected, args.ticks_taken, args, "flashtick evaluate")
    if (overlap := time_overlap_note(prepared)) is not None:
        caution(overlap)
    for sd in prepared:  # a split between two sessions or a roll, scored as a move (connectors/price_steps.py)
        offset = replays[0].price_offset_of(sd.name) if replays else 0.0
        for step in price_steps(sd.name, sd.ts, np.array([tick_price(t) for t in sd.ticks]), offset):
            caution(Caution(step.caution(args.session_gap)))
    return rejected, prepared, skipped


def _say_evaluation(args: argparse.Namespace, result: dict[str, Any], model_dir: Path, model: Any,
                    prepared: list[Any], split: Any) -> None:
    """The result (--json, or a heading and the table) and the calibration plot (--plot)."""
    from connectors.ticks import counted
    from engine.service.evaluate import window_ticks
    from engine.service.evaluation_report import format_table, plot

    if args.json:
        print(printable_json(result, indent=1))
    else:
        streams = counted(len(prepared), "stream")
        print(f"{model_dir} on {_test_part_words(args, split)} of {streams}, window {window_ticks(model)} "
              f"ticks; baselines fitted on the train slice")
        print(format_table(result, args.by_stream))
    if args.plot is not None:  # after the numbers: a plotting problem never loses them
        try:
            plot(result, args.plot, "flashtick evaluate")
        except OSError as e:
            print(f"flashtick evaluate: warning: the calibration plot was not written: {e}", file=sys.stderr)


def _in_sample_notes(args: argparse.Namespace, model_dir: Path, prepared: list[Any], split: Any) -> list[str]:
    """Why the test slice's scores are not out of sample, if they are not: it lies inside what the checkpoint
    trained on (checkpoint_notes.trained_on_overlap), else inside what a model it descends from trained on
    (base_lineage.py, review443 #1); for the built-in model, a shared set it trained on (builtin_in_sample.py). A
    connectors.cautions.Caution is said as a warning."""
    from engine.models import BUILTIN_MODEL_DIR
    from engine.service.base_lineage import checkpoint_lineage, lineage_caution
    from engine.service.splits import test_spans

    tested = test_spans(prepared)
    if model_dir.resolve() != BUILTIN_MODEL_DIR.resolve():
        by_time = split.test_from_ns is not None or time_range_of(args, quiet=True) is not None
        said = trained_on_overlap(model_dir, args.files, split, tested, by_time) or lineage_caution(
            checkpoint_lineage(model_dir), tested, "the test slice", "give a --test-from after that span's end")
        return [] if said is None else [said]
    # (a test part cut at a time starts at no one share: judged as if every tick were scored, the cautious reading)
    scored_from = 1 - split.test if split.test_from_ns is None else None
    if (said := builtin_in_sample_note(args.files, scored_from, f"give a --split whose test part starts at "
                                                                f"{SEEN_END:.0%} or later, e.g. 70/10/20")) is not None:
        return [said]  # (review349 #5)
    caution = builtin_span_caution(tested)  # a copy of those ticks elsewhere (review400 #5)
    return [] if caution is None else [caution]


def _split_from_test_from(args: argparse.Namespace) -> Any:
    """--test-from: a fraction sets --split's test share (train and validation sharing the rest as the split has
    them), so the record, the heading and the notes all say the split scored; a time is returned
    (test_start.TestStart), for the split to cut each stream there; None without it."""
    from engine.service.splits import SplitSpec
    from engine.service.test_start import test_start_of

    if args.test_from is None:
        return None
    if isinstance(args.test_from, str):
        return test_start_of(args.test_from, args.tz, args.command_name)
    share = args.test_from
    if not 0 < share < 1:
        raise ValueError(f"--test-from must be a fraction in (0, 1) of each stream's ticks, e.g. 0.8, or an event "
                         f"time, e.g. 2024-03-13 (to score whole files the model never saw: the time they start), "
                         f"got {share:g}")
    given = SplitSpec.parse(args.split or DEFAULT_SPLIT)
    seen = given.train + given.validation
    train = round(100 * share * given.train / seen, 4)
    args.split = f"{train:g}/{round(100 * share - train, 4):g}/{round(100 * (1 - share), 4):g}"
    return None


def _test_from_text(split: Any) -> str | None:
    """--test-from TIME as the record and --json keep it (UTC ISO 8601); None: the split's shares cut the parts."""
    from connectors.ticks import utc_text

    return None if split.test_from_ns is None else utc_text(split.test_from_ns)


def _test_part_words(args: argparse.Namespace, split: Any) -> str:
    """What was scored, for the heading: the test slice of a split, or each stream's ticks from a time on."""
    from connectors.ticks import utc_text

    if split.test_from_ns is None:
        return f"the test slice ({args.split})"
    return (f"the test part from {utc_text(split.test_from_ns)} on (--test-from: each stream's every tick from "
            f"then; the ticks before it, less the gap, are the train part)")


# evaluate's options that change its scores, past the reading (current_reading) and the device and threads
SCORING_OPTIONS = ("batch_ms", "max_points", "block", "resamples", "seed")


def cmd_evaluate(args: argparse.Namespace) -> int | None:
    import dataclasses

    from engine.models import BUILTIN_MODEL_DIR
    from engine.service.evaluate import batch_ms_left_nothing, evaluate_streams
    from engine.service.tick_checkpoint import load_tick_model
    from connectors.ticks import counted
    from engine.service.features import read_head
    from engine.service.finetune import resolve_device
    from engine.service.splits import longest_horizon
    from engine.service.run_record import (MANIFEST_SUFFIX, InputFiles, evaluation_record, input_files,
                                           manifest_text)
    from engine.service.output_paths import write_text_atomically
    from engine.service.text_evaluation import evaluate_text_model, is_text_model, text_model_refusal
    from engine.service.tick_origins import TickOrigins
    from engine.service.trained_streams import TrainedStreams
    from engine.service.untrained_tokens import UntrainedTokens
    import numpy as np
    import torch

    check_outputs(args, [Output("--points-out", args.points_out, kind=PARQUET, example="points.parquet"),
                         Output("--points-out (its provenance record beside it)", None if args.points_out is None
                                else args.points_out.with_suffix(MANIFEST_SUFFIX)),
                         Output("--plot", args.plot, kind=IMAGE, example="calibration.png")])
    if args.plot is not None:
        check_plot_path("--plot", args.plot)
    model_dir = BUILTIN_MODEL_DIR if args.model == "builtin" else Path(args.model)

    def say(line: str) -> None:
        print(f"flashtick evaluate: {labelled(line)}", file=sys.stderr)

    cautions: list[str] = []  # as said, for the record: a script reading --json gets what stderr shows (review443 #3)

    def caution(line: str) -> None:  # changes what the scores mean: said under --quiet too (it quiets the reading)
        cautions.append(labelled(line))
        say(line)

    said = (lambda line: None) if args.quiet else say
    if is_text_model(model_dir):  # scored on its scored_as queries by a backtest of the test part
        if args.queries is None:
            raise ValueError(text_model_refusal(model_dir, "evaluate"))
        _split_from_test_from(args)
        split, _ = train_common(args)
        return evaluate_text_model(args, model_dir, split.train + split.validation if args.test_from is None or
                                   isinstance(args.test_from, float) else args.test_from)
    if args.queries is not None:
        raise ValueError("--queries applies to a Hugging Face text model's evaluation; a tick model is scored on its "
                         "codec's named questions")
    recorded = read_as_trained(args, model_dir, said, splits=True)  # its --split too, before the split is parsed
    compared = compared_reading(model_dir, args.files, READING_OPTIONS)  # (other files' layout is their own)
    if (mismatch := reading_mismatch(recorded, current_reading(args), compared)) is not None:
        said(mismatch)
    test_start = _split_from_test_from(args)
    split, options = train_common(args)
    if test_start is not None:
        split = dataclasses.replace(split, test_from_ns=test_start.ns)
    device = resolve_device(args.device)
    model, codec = load_tick_model(model_dir, device, "evaluate")
    read: list[InputFiles] = []
    origins = TickOrigins()  # each tick's file and row, named by its answer points (--points-out)
    rejected, prepared, skipped = _test_streams(args, model, codec, split, said, caution,
                                                lambda replay: read.append(input_files(replay)), origins)
    if (stranger := TrainedStreams(model_dir).note(sd.name for sd in prepared)) is not None:  # (review443 #2)
        caution(stranger)
    untrained = UntrainedTokens(model_dir, codec, None)  # streams sending a token the model never trained on
    for sd in prepared:
        untrained.accepted(sd.name, sd.tokens.ravel().tolist())  # (counted: a handful of such ticks is none)
    for caveat in untrained.held_caveat():  # every such stream, as a backtest names them (review440 #7)
        caution(caveat["text"])
    # what made the scores, as a backtest records it: in --json, beside --points-out and in its metadata
    record = evaluation_record(model_dir, codec, read[0], current_reading(args), {
        "split": split.text(), "test_from": _test_from_text(split),
        "time_range": None if (ranged := time_range_of(args, quiet=True)) is None else ranged.text(), "device": device,
        "threads": torch.get_num_threads(),
        **{name: getattr(args, name) for name in SCORING_OPTIONS}})
    result = evaluate_streams(model, codec, prepared, dataclasses.replace(options, device=device),
                              read_head(model_dir, codec), points_out=args.points_out, origins=origins,
                              record=record)
    if (why := batch_ms_left_nothing(result)) is not None:
        raise ValueError(f"nothing to score: {why}")
    if not result["questions"]:  # never an empty table that exits 0
        raise ValueError(f"nothing to score: no question has a realised answer in both the train and the test part "
                         f"(--split {args.split}) of {counted(len(prepared), 'stream')}")
    result |= {"model": str(model_dir), "files": [str(f) for f in args.files], "split": args.split,
               "test_from": _test_from_text(split),
               "gap": max(split.gap, longest_horizon(codec)), "rejected": rejected, "skipped": skipped,
               "session_gap_ns": args.session_gap}
    for note in pause_notes(result, args.session_gap, "unscored"):
        caution(note)
    for note in _in_sample_notes(args, model_dir, prepared, split):  # under --json too (review443 #3)
        caution(note)
    # the record, and beside it the command line that made it, as a backtest's manifest holds them
    command_line = getattr(args, "command_line", None)
    result |= {"cautions": cautions, "run": record, "argv": command_line}
    if args.points_out is not None and args.points_out.is_file():  # (a run that scores nothing writes no points)
        write_text_atomically(args.points_out.with_suffix(MANIFEST_SUFFIX),
                              manifest_text(record, command_line, points=args.points_out.name))
    _say_evaluation(args, result, model_dir, model, prepared, split)
    return rejected_status(rejected, args.ticks_taken, args, "flashtick evaluate")
