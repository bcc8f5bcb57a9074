"""What `flashtick train` trains on: the streams read from the user's files, split in time into parts (those too
short left out, what the split leaves undone said: ``validation_note``), and each part as training material (its
tick tokens and answer labels, a group per stream) and the fixed validation batches early stopping watches. Apart
from the fit (finetune.py), which starts a model, optimises, calibrates and saves."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from connectors.codec import BinnedCodec
from connectors.ticks import Tick, counted
from engine.service.evaluate import MIN_POINTS
from engine.service.finetune_options import FitOptions
from engine.service.splits import (
    SHORT_NAMED, SplitSpec, StreamData, gap_note, min_part_ticks, prepare, short_streams_line, time_overlap_note,
)
from engine.service.stream_reading import Rejected
from engine.service.train_config import TrainConfig
from engine.service.train_data import Source, sample_batch
from engine.service.train_stopping import Validation


def to_source(codec: BinnedCodec, sd: StreamData, part: str) -> Source:
    """A part of a stream as training material: its tick tokens and answer token ids (-1 = no label)."""
    r = getattr(sd.parts, part)
    labels = sd.labels[r.start : r.stop]
    ids = [np.array(list(q.answers.values()), dtype=np.int64) for q in codec.questions.values()]
    answers = np.stack([np.where(labels[:, qi] >= 0, ids[qi][np.clip(labels[:, qi], 0, None)], -1)
                        for qi in range(len(ids))], axis=1)
    return Source(f"{sd.name}:{part}", sd.tokens[r.start : r.stop], answers)


def part_groups(codec: BinnedCodec, streams: list[StreamData], part: str
                ) -> tuple[list[list[Source]], np.ndarray]:
    """One group per stream, drawn in proportion to the part's length."""
    sources = [to_source(codec, sd, part) for sd in streams]
    weights = np.array([len(s.tokens) for s in sources], dtype=np.float64)
    return [[s] for s in sources], weights / weights.sum()


def split_streams(codec: BinnedCodec, streams_raw: dict[str, list[Tick]], rejected: Rejected, cfg: TrainConfig,
                  options: FitOptions, log: Callable[[str], None], caution: Callable[[str], None]
                  ) -> tuple[list[StreamData], dict[str, Any]]:
    """The streams read, split into parts (those too short left out: the rows ``rejected`` named in the error when
    that leaves too few), and what the split says, said as it is found: the record's skipped, left_out, overlap and
    validation_note."""
    min_ticks = min_part_ticks(codec, cfg.window_ticks)
    streams, skipped = prepare(codec, streams_raw, options.split, min_ticks, name_all=options.name_left_out,
                               session_gap_ns=options.session_gap_ns, rejected=rejected)
    # an option chain's thousands of short series in one line (the model card, --json and --verbose name each)
    left_out = short_streams_line(codec, streams_raw, [sd.name for sd in streams], options.split, min_ticks)
    if (widened := gap_note(codec, options.split)) is not None:
        caution(f"note: {widened}")
    if (overlap := time_overlap_note(streams)) is not None:
        caution(f"note: {overlap}")
    for note in skipped if options.name_left_out or len(skipped) <= SHORT_NAMED else [left_out]:
        log(f"left out {note}")
    if (thin := validation_note(codec, streams, options.split, head=options.head)) is not None:
        caution(f"note: {thin}")  # before the optimisation: a run to stop and split otherwise
    return streams, {"skipped": skipped, "left_out": left_out, "overlap": overlap, "validation_note": thin}


def stopping_validation(codec: BinnedCodec, streams: list[StreamData], q_tokens: np.ndarray, cfg: TrainConfig,
                        options: FitOptions) -> Validation | None:
    """The fixed batches of the validation part early stopping watches; None when the split has no such part."""
    if options.split.validation <= 0:
        return None
    vgroups, vweights = part_groups(codec, streams, "validation")
    vrng = np.random.default_rng(cfg.seed + 1)
    return Validation([sample_batch(vgroups, vweights, q_tokens, cfg, vrng) for _ in range(options.val_batches)],
                      options.eval_every, options.patience)


def validation_note(codec: BinnedCodec, streams: list[StreamData], split: SplitSpec, head: bool = True) -> str | None:
    """What a split without a validation part, or one whose validation part labels fewer than MIN_POINTS answer
    points of a question (pooled over the streams), leaves undone: early stopping, calibration, answer heads (not
    under ``head`` False, --no-head: none was asked for, and naming it blamed the split for it). None when every
    question has enough."""
    heads = " and without answer heads" if head else ""
    if not split.validation:
        return (f"--split {100 * split.train:g}/{100 * split.test:g} has no validation part: training runs its "
                f"--steps (within --max-minutes) without early stopping and keeps the last step's weights, and the "
                f"answers ship uncalibrated{heads} (a split such as 70/15/15 has one)")
    labelled = {name: 0 for name, q in codec.questions.items() if q.spec.kind != "regime"}  # (no labels in files)
    names = list(codec.questions)
    for sd in streams:
        _, qq = sd.points("validation")
        for qi, n in enumerate(np.bincount(qq, minlength=len(names))):
            if names[qi] in labelled:
                labelled[names[qi]] += int(n)
    thin = [f"{name} ({n})" for name, n in labelled.items() if n < MIN_POINTS]
    if not thin:
        return None
    ticks = counted(sum(len(sd.parts.validation) for sd in streams), "tick")
    fitted = "answer calibration and answer head are" if head else "answer calibration is"
    return (f"the validation part is small: its {ticks} (--split {split.text()}, {counted(len(streams), 'stream')}) "
            f"hold fewer labelled answer points than the {MIN_POINTS} a question's {fitted} fitted on for "
            f"{_and(thin)}: {'its' if len(thin) == 1 else 'their'} answers ship uncalibrated"
            f"{' and without a head' if head else ''}, and early stopping watches the loss on windows of those "
            f"{ticks} alone; a larger validation part (--split) or more ticks fits them")


def _and(names: list[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
