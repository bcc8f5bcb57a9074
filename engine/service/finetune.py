"""`flashtick train`: fit a tick model to your own tick files, and score it on a later slice of them.

Fine-tunes the built-in model (or another BinnedCodec checkpoint; `--from-scratch`
builds a new one) with the very loop that trains the built-in model
(engine.service.train_loop.optimise: serving-exact packing, next-token + answer loss).
Each stream is split in time (engine/service/splits.py): training windows and
targets come from the train part, early stopping watches the loss on fixed
batches of the validation part and keeps the best weights, the per-question
answer calibration is fitted on the validation part's answer points
(engine/service/calibrate.py), and the test part is scored at the end against
the baselines of engine/service/evaluation_predictors.py. The output directory is a normal
checkpoint (config.json, model.safetensors, codec.json, calibration.json) with
TRAINING.md (the model card, engine/service/finetune_card.py) and evaluation.json beside it.
Its options are FitOptions (finetune_options.py); the streams it trains on, split into parts and made training
material, are finetune_data.py's.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from connectors.builtin import load_builtin_codec
from connectors.calibration import CALIBRATION_FILE, Calibration
from connectors.cautions import labelled
from connectors.codec import TOKENS_PER_TICK, BinnedCodec, BinnedSpec
from connectors.replay_entries import replay_files
from engine.disk_full import DiskFull
from engine.quoting import quoted
from engine.service.base_lineage import base_record, lineage_caution
from engine.service.calibrate import calibrate_streams, fit_heads, validation_pairs
from engine.service.evaluate import EvalOptions, evaluate_streams
from engine.service.evaluation_report import plot
from engine.service.features import HEAD_FILE, QuestionHead, write_head
from engine.service.finetune_card import split_text, write_model_card
from engine.service.finetune_data import part_groups, split_streams, stopping_validation
from engine.service.finetune_options import FitOptions
from engine.service.output_paths import write_text_atomically
from engine.service.reading_record import reading_of
from engine.service.run_record import InputFiles, files_record, input_files, skipped_record
from engine.service.splits import StreamData, longest_horizon, test_spans
from engine.service.stream_reading import read_streams
from engine.service.tick_checkpoint import load_tick_model, window_ticks
from engine.service.tick_origins import TickOrigins
from engine.service.train_checkpoint import WEIGHTS_FILE, check_room, new_model, save_model
from engine.service.train_config import TrainConfig
from engine.service.train_data import question_tokens, untrained_events
from engine.service.train_loop import optimise
from engine.service.train_tail import FIXED_SECONDS, first_chunk_seconds, tail_of
from engine.service.untrained_tokens import never_trained


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {device}: CUDA is not available here")
    if not (device == "cpu" or device.startswith("cuda")):
        raise ValueError(f"--device must be auto, cpu or cuda[:N], got {quoted(device)}")
    return device


def base_config(cfg: TrainConfig, model: Any) -> TrainConfig:
    """The loop's config with the window and sizes the base checkpoint fixes."""
    c = model.config
    return dataclasses.replace(cfg, max_positions=c.max_position_embeddings,
                               window_ticks=c.max_position_embeddings // TOKENS_PER_TICK - 1, hidden=c.hidden_size,
                               intermediate=c.intermediate_size, layers=c.num_hidden_layers,
                               heads=c.num_attention_heads, kv_heads=c.num_key_value_heads)


def _starting_model(cfg: TrainConfig, options: FitOptions) -> tuple[Any, BinnedCodec, TrainConfig]:
    """The model training starts from: a new one of ``cfg``'s sizes (--from-scratch), or the base checkpoint's,
    whose window and sizes then replace ``cfg``'s."""
    if options.base is None:
        version = options.codec_version or load_builtin_codec().spec.version
        codec = BinnedCodec(BinnedSpec(version=version))
        model = new_model(cfg, codec.vocab_size)
    else:
        model, codec = load_tick_model(options.base)
        cfg = base_config(cfg, model)
        torch.manual_seed(cfg.seed)
    return model, codec, cfg


def _never_trained(codec: BinnedCodec, groups: list[Any], base: Path | None) -> list[str]:
    """The event tokens the trained model never met: none of the training part's ticks holds them and, for a
    fine-tune, its base's card names them too (a base without such a line is taken as trained on them all)."""
    unseen = untrained_events(codec, groups)
    if base is None:
        return unseen
    base_never = {codec.names[token] for token in never_trained(base, codec)}
    return [name for name in unseen if name in base_never]


def _phase(bar_factory: Callable[..., Any] | None, what: str, total: int, unit: str) -> Any:
    return bar_factory(what, total, unit) if bar_factory else None


def _closed(bar: Any) -> None:
    if bar is not None:
        bar.close()


def _calibrated(model: Any, codec: BinnedCodec, streams: list[StreamData], options: FitOptions,
                eval_options: EvalOptions, validated: bool, bar: Any = None
                ) -> tuple[BinnedCodec, dict[str, QuestionHead]]:
    """The codec with the answer calibration fitted to the trained weights on the validation part, and the answer
    heads (with ``options.head``); without a validation part (``validated`` False), uncalibrated and no heads.
    ``bar``: told the validation windows as they run."""
    heads: dict[str, QuestionHead] = {}
    if validated:  # the base model's calibration belongs to the base weights: refit it to these
        pairs = validation_pairs(model, codec, streams, eval_options, advance=bar.update if bar else None)
        source = (f"the validation part of the training files (split "
                  f"{split_text(options.split, max(options.split.gap, longest_horizon(codec)))})")
        codec = codec.with_calibration(calibrate_streams(model, codec, streams, source, eval_options, pairs=pairs))
        if options.head:
            heads = fit_heads(codec, streams, pairs, eval_options)
    else:
        codec = codec.with_calibration(Calibration(source="none: the split has no validation part, so the answers "
                                                   "are uncalibrated (temperature 1, bias 0)"))
    return codec, heads


# the files of a checkpoint `fit` writes (answer_head.json and calibration.png not every time): what --overwrite
# replaces in --out, where anything else (a user's notes, a backtests/ folder) is kept (staged_dir.staged_directory)
CHECKPOINT_FILES = frozenset({WEIGHTS_FILE, "config.json", "codec.json", CALIBRATION_FILE, HEAD_FILE,
                              "evaluation.json", "calibration.png", "TRAINING.md"})


def _save_checkpoint(model: Any, codec: BinnedCodec, heads: dict[str, QuestionHead], out: Path, files: int,
                     log: Callable[[str], None]) -> None:
    """The trained checkpoint in ``out``, with the answer heads fitted to it (of ``files`` files) or none."""
    save_model(model, codec, out)
    (out / HEAD_FILE).unlink(missing_ok=True)  # an --overwrite of a checkpoint with heads: never a stale one
    if heads:
        write_head(out, heads, f"train part (regression) and validation part (weight) of {files} file(s)")
        log("answer heads: " + ", ".join(f"{name} model weight {h.model_weight:g} (validation Brier "
                                          f"{h.brier_model} -> {h.brier_blend})" for name, h in heads.items()))


def _trained_on(files: list[str], options: FitOptions, reading: dict[str, Any], streams: list[StreamData]
                ) -> dict[str, Any]:
    """What it was trained on, so `flashtick evaluate` can say when a test slice is not out of sample."""
    # the files read, a folder's and a pattern's among them: a later run that names them otherwise still matches
    return {"files": [str(Path(f).resolve()) for f in replay_files(files)],
            "seen_end": options.split.train + options.split.validation,  # fitted, stopped and calibrated on
            "reading": reading,  # reading_record.READING_OPTIONS: evaluate reads with them
            # --from/--to: seen_end is a share of the ticks inside it, so a later run of the same files compares
            # event times (the streams' below), not shares
            "time_range": None if options.time_range is None else options.time_range.text(),
            # the streams trained on (one the split left out is not), each with its last trained or validated
            # tick's event time (ns): where its seen part ends however a later run reads the files
            "streams": {sd.name: sd.ticks[max(sd.parts.train.stop, sd.parts.validation.stop) - 1].ts
                        for sd in streams},
            # and its first trained tick's: scores on other files (a Parquet copy, a shorter export) are in sample
            # when their ticks of a stream fall between the two
            "stream_starts": {sd.name: sd.ticks[sd.parts.train.start].ts for sd in streams}}


def fit(files: list[str], columns: Any, out: Path, cfg: TrainConfig, options: FitOptions, log: Callable[[str], None],
        bar_factory: Callable[..., Any] | None = None, on_step: Callable[[int], None] | None = None,
        caution: Callable[[str], None] | None = None, started: float | None = None) -> dict[str, Any]:
    """Train, keep the best validation weights, save the checkpoint, score the test part; the run's record.
    ``caution`` (default ``log``) takes the notes that change what the results mean or what to do (a --gap
    widened, streams over the same hours, a thin validation part, the reading's cautions: two instruments in one
    stream): `train --quiet` says them still. ``bar_factory(what, total, unit)``: each phase's progress
    (phase_progress.PhaseProgress). ``started``: when --max-minutes began (the command's start; default now): the
    reading before training and the calibration and scoring after it fit in it too (train_tail.py)."""
    said = caution or log
    started = time.time() if started is None else started
    cautions: list[str] = []  # as said, for the record: a script reading --json gets what a terminal shows

    def caution(line: str) -> None:
        cautions.append(line)
        said(line)

    t0 = started
    device = resolve_device(options.device)
    model, codec, cfg = _starting_model(cfg, options)
    check_room(model, out)  # a disk that cannot hold the weights, said before the reading and the training
    read: list[InputFiles] = []  # with --points-out: the files its points' `file` indexes, and each tick's origin
    origins = TickOrigins() if options.points_out is not None else None

    def opened(replay: Any) -> None:
        if origins is not None:  # (each file's bytes digested: only for the points that name them)
            read.append(input_files(replay))

    bar = _phase(bar_factory, "reading", len(files), "files")  # (a slow file's read says itself every 10 s)
    streams_raw, rejected = read_streams(files, columns, note=lambda line: log(f"note: {line}"),
                                         streams=options.streams, caution=lambda line: caution(labelled(line)),
                                         opened=opened, origins=origins, command="train",
                                         time_range=options.time_range, skip_bad_files=options.skip_bad_files)
    if bar is not None:
        bar.update(len(files))
        bar.close()
    streams, split_notes = split_streams(codec, streams_raw, rejected, cfg, options, log, caution)
    base = base_record(options.base)  # the ticks its starting weights learnt from, for every in-sample check
    in_sample = lineage_caution({"base": base}, test_spans(streams), "the test part",
                                "--from a time after that span's end, or --from-scratch")
    if in_sample is not None:
        caution(labelled(in_sample))
    groups, weights = part_groups(codec, streams, "train")
    never = _never_trained(codec, groups, options.base)
    q_tokens = question_tokens(codec)
    val = stopping_validation(codec, streams, q_tokens, cfg, options)
    log(f"{sum(len(s.ticks) for s in streams)} ticks in {len(streams)} streams; training on {device}")
    eval_options = dataclasses.replace(options.evaluation, device=device)
    tail = tail_of(streams, window_ticks(model), eval_options, val is not None)
    log(f"budget: --max-minutes {cfg.max_minutes:g} bounds the whole run: reading took {time.time() - started:.1f} s;"
        f" training stops in time for the calibration ({tail.validation:,} windows) and scoring "
        f"({tail.test:,} windows) after it, priced at its own forwards")
    bar = _phase(bar_factory, "training", cfg.steps, "steps")
    stats = optimise(model, groups, weights, q_tokens, cfg, log, np.random.default_rng(cfg.seed), device, val,
                     on_step=on_step, bar=bar, check_start=True, started=started,
                     tail=(FIXED_SECONDS, tail.forwards(cfg.batch)), tail_windows=tail.windows,
                     time_tail=lambda: first_chunk_seconds(model, codec, streams, window_ticks(model), eval_options))
    _closed(bar)
    model.eval()
    bar = _phase(bar_factory, "calibrating on the validation part", tail.validation, "windows")
    codec, heads = _calibrated(model, codec, streams, options, eval_options, val is not None, bar)
    _closed(bar)
    log(f"answer calibration: {codec.calibration.source}")
    try:
        _save_checkpoint(model, codec, heads, out, len(files), log)
    except DiskFull as e:  # (the disk filled during the training: the check before it found room)
        full = DiskFull(f"{e}; the trained weights are lost with it: free space there, or give --out on a disk "
                        f"with room, and run the same command again")
        full.errno = e.errno
        raise full from None
    points_record = {"command": "train", "files": files_record(*read[0][:3]), **skipped_record(read[0].skipped)} \
        if read else None
    bar = _phase(bar_factory, "scoring the test part", tail.test, "windows")
    evaluation = evaluate_streams(model, codec, streams, eval_options, heads, points_out=options.points_out,
                                  origins=origins, record=points_record, advance=bar.update if bar else None)
    _closed(bar)
    reading = reading_of(columns, options.streams, options.split.text(), options.split.gap, options.session_gap_ns)
    record = {"files": [str(f) for f in files], "reading": reading,
              "base": base["model"] if base else "from scratch", "in_sample": in_sample,
              "device": device, "split": split_text(options.split, max(options.split.gap, longest_horizon(codec))),
              "selected_streams": list(options.streams) if options.streams else None,  # None: every one
              "time_range": None if options.time_range is None else options.time_range.text(),  # --from/--to
              "rejected": rejected, "ticks_read": sum(map(len, streams_raw.values())),  # taken (rejected: the rest)
              **split_notes, "cautions": cautions,
              "params": sum(p.numel() for p in model.parameters()), "config": run_config(cfg),
              "training": stats, "calibration": json.loads(codec.calibration.to_json()),
              "heads": {name: {k: v for k, v in h.to_dict().items() if k not in ("mean", "scale", "weights", "bias")}
                        for name, h in heads.items()}, "evaluation": evaluation,
              "total_seconds": round(time.time() - t0, 1), "never_trained": never}
    trained_on = _trained_on(files, options, reading, streams) | {"base": base}
    write_text_atomically(out / "evaluation.json", json.dumps(evaluation | {"trained_on": trained_on}, indent=1) + "\n")
    plotted = plot(evaluation, out / "calibration.png", "flashtick train")
    write_model_card(out, record, plotted)
    return record


# the built-in model's data recipe (engine/service/train_builtin.py): a run on the user's files uses none of it
BUILTIN_RECIPE_KEYS = ("synthetic_ticks", "synthetic_seed", "wide_synthetic", "real_sets", "mix")


def run_config(cfg: Any) -> dict[str, Any]:
    """The training settings this run used, as its record and `--json` give them."""
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in BUILTIN_RECIPE_KEYS}
