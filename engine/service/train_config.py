"""What a training run is: `TrainConfig`, the settings of the one training loop (`optimise`: steps, batch,
learning rate, the model's sizes, the data mix, the wall-clock guard), shared by the built-in model's recipe
(engine/service/train_builtin.py) and `flashtick train` (engine/service/finetune.py). Its own module so that what
configures a run is found by name, apart from the data it reads, the loop that runs it and the command lines that
build it; checked when built.
"""

from __future__ import annotations

from dataclasses import dataclass

from connectors.codec import SPEC_VERSIONS, TOKENS_PER_TICK
from engine.quoting import quoted_choices, quoted_list, quoted_words
from engine.service.datasets import DEFAULT_SETS, LOADERS


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 0
    steps: int = 400
    batch: int = 8
    window_ticks: int = 127  # 508 tick tokens: a probe at position <= 508 stays inside max_positions
    questions_per_window: int = 64
    max_positions: int = 512
    hidden: int = 256
    intermediate: int = 512
    layers: int = 4
    heads: int = 8
    kv_heads: int = 4
    lr: float = 2e-3
    warmup: int = 40
    weight_decay: float = 0.01
    qa_weight: float = 1.0
    synthetic_ticks: int = 400_000
    synthetic_seed: int = 1
    # add wide_synthetic_configs() (their ticks: synthetic_ticks / 4 each) to the synthetic group
    wide_synthetic: bool = False
    real_sets: tuple[str, ...] = DEFAULT_SETS  # real data sets used when --data-dir is given, in `mix` order
    mix: tuple[float, ...] = (0.5, 0.2, 0.3)  # synthetic, then each of real_sets (renormalised if absent)
    codec_version: int = 1
    threads: int = 1  # on a shared 2-core box one thread beat two by ~2.5x (no OpenMP barrier stalls)
    max_minutes: float = 23.0
    stop_after: int | None = None  # stop after this many steps, schedule unchanged (reproduces a cut run)

    def __post_init__(self) -> None:
        if (self.window_ticks + 1) * TOKENS_PER_TICK > self.max_positions:
            raise ValueError(
                f"window_ticks={self.window_ticks} needs max_positions >= {(self.window_ticks + 1) * TOKENS_PER_TICK}"
            )
        for name in ("steps", "batch", "window_ticks", "questions_per_window", "threads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if len(self.mix) != 1 + len(self.real_sets) or min(self.mix) < 0 or sum(self.mix) <= 0:
            raise ValueError(f"mix needs one weight >= 0 for synthetic and one per real set "
                             f"({quoted_words(self.real_sets)}), got {quoted_list(self.mix)}")
        unknown = [n for n in self.real_sets if n not in LOADERS]
        if unknown:
            raise ValueError(f"unknown real data sets {quoted_words(unknown)}; known: {quoted_words(sorted(LOADERS))}")
        if self.codec_version not in SPEC_VERSIONS:
            raise ValueError(f"codec_version must be one of {quoted_choices(SPEC_VERSIONS)}, got {self.codec_version}")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"hidden ({self.hidden}) % heads ({self.heads}) and heads % kv_heads must be 0")
