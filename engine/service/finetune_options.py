"""FitOptions: what `flashtick train` does beyond the shared TrainConfig (the split, the base model, early
stopping, the device, evaluation, the answer heads, the streams read), checked when built. Its own module so that
the fit (finetune.py) and what it trains on (finetune_data.py) both take it, as train_config.py is for TrainConfig."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from connectors.codec import SPEC_VERSIONS
from connectors.time_range import TimeRange
from engine.models import BUILTIN_MODEL_DIR
from engine.quoting import quoted_choices
from engine.service.evaluate import EvalOptions
from engine.service.splits import SplitSpec


@dataclass(frozen=True)
class FitOptions:
    """What `flashtick train` does beyond the shared TrainConfig (steps, batch, lr, sizes, minutes, seed)."""

    split: SplitSpec = SplitSpec()
    base: Path | None = BUILTIN_MODEL_DIR  # None: from scratch
    eval_every: int = 20
    patience: int = 5
    val_batches: int = 8
    device: str = "auto"
    evaluation: EvalOptions = EvalOptions()
    codec_version: int | None = None  # from scratch: BinnedCodec spec version; None = the built-in model's
    head: bool = True  # fit the answer heads (features.QuestionHead) on the train and validation parts
    streams: tuple[str, ...] | None = None  # the streams of the files to train on (names or globs); None: every one
    name_left_out: bool = False  # --verbose: each stream too short to split named, not more than SHORT_NAMED summed up
    # --points-out: the test answer points scored, a row each (evaluation_points.write_points)
    points_out: Path | None = None
    # --session-gap: a label horizon across a pause that long or longer in event time leaves its point unlabelled
    # in every part
    session_gap_ns: int | None = None
    # --from/--to: the ticks of the files trained on, by event time, before the split (None: every tick)
    time_range: TimeRange | None = None
    skip_bad_files: bool = False  # --skip-bad-files: a file that cannot be read is left out, said, not refused

    def __post_init__(self) -> None:
        for name in ("eval_every", "patience", "val_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.codec_version is not None and self.codec_version not in SPEC_VERSIONS:
            raise ValueError(f"codec version must be one of {quoted_choices(SPEC_VERSIONS)}, got {self.codec_version}")
