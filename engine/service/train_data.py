"""What a training run reads: the tick model's training material and the batches drawn from it.

A `Source` is one stream's tokens per tick with the realised answer token of each question at each tick; the
built-in model's sources are the synthetic markets (`synthetic_sources`, `wide_synthetic_configs`) and the earlier
part of each real data set (`build_sources`); `flashtick train` makes its own from your files
(engine/service/finetune.py). `sample_batch` draws the windows and question probes of one step, packed as serving
sees them (engine/service/packing.py). The loop that consumes them is engine/service/train_loop.py `optimise`.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np

from connectors.codec import TOKENS_PER_TICK, BinnedCodec
from connectors.labels import label_series, marks_of
from connectors.synthetic import StreamParams, SyntheticConfig, SyntheticMarket
from connectors.ticks import Tick
from engine.service.datasets import load_real
from engine.service.packing import Batch, pack_batch
from engine.service.train_config import TrainConfig


class Source(NamedTuple):
    """One stream's training material: tokens per tick and the answer token per (tick, question)."""

    name: str
    tokens: np.ndarray  # (n_ticks, TOKENS_PER_TICK) int64
    answers: np.ndarray  # (n_ticks, n_questions) int64 answer token id, -1 = no label


def make_source(name: str, codec: BinnedCodec, ticks: list[Tick], regimes: np.ndarray | None) -> Source:
    tokens = np.array(codec.encode_stream(ticks), dtype=np.int64).reshape(-1, TOKENS_PER_TICK)
    marks = marks_of(ticks)
    cols = []
    for q in codec.questions.values():
        idx = label_series(q.spec, marks, regimes)
        ids = np.array(list(q.answers.values()), dtype=np.int64)
        cols.append(np.where(idx >= 0, ids[np.clip(idx, 0, None)], -1))
    return Source(name, tokens, np.stack(cols, axis=1))


def wide_synthetic_configs(seed: int) -> list[SyntheticConfig]:
    """Markets beside the default one, so that training meets other price scales, tick sizes (0.07 to
    3 bp), clocks (0.5 to 160 ticks/s) and quote shares; one stream of each is not enough to learn that
    a token means the same thing everywhere."""
    return [
        SyntheticConfig(seed=seed + 101, streams=(StreamParams("WIDE.EQ1", 35.0, 0.01),
                                                   StreamParams("WIDE.EQ2", 450.0, 0.01)),
                        rate_hz=(0.5, 2.0), move_p=(0.2, 0.5), quote_share=0.5),  # equity-like, slow
        SyntheticConfig(seed=seed + 102, streams=(StreamParams("WIDE.BIG", 61800.0, 0.1),
                                                   StreamParams("WIDE.ALT", 0.35, 0.0001)),
                        rate_hz=(40.0, 160.0), burst_p=(0.4, 0.7), move_p=(0.15, 0.45)),  # crypto-like, fast
        SyntheticConfig(seed=seed + 103, streams=(StreamParams("WIDE.FX1", 1.27, 0.00001),
                                                   StreamParams("WIDE.FX2", 150.3, 0.001)),
                        rate_hz=(2.0, 8.0), quote_share=0.95, move_p=(0.4, 0.7), p_to_volatile=1 / 2000),  # FX-like
    ]


def synthetic_sources(codec: BinnedCodec, cfg: TrainConfig) -> tuple[list[Source], list[str]]:
    markets = [(SyntheticConfig(seed=cfg.synthetic_seed), cfg.synthetic_ticks)]
    if cfg.wide_synthetic:
        markets += [(c, cfg.synthetic_ticks // 4) for c in wide_synthetic_configs(cfg.synthetic_seed)]
    sources, notes = [], []
    for config, n_ticks in markets:
        by_stream = SyntheticMarket(config).generate(n_ticks).by_stream()
        sources += [make_source(name, codec, ticks, np.array([t.regime for t in truths]))
                    for name, (ticks, truths) in by_stream.items()]
        notes.append(f"synthetic market seed {config.seed}: {n_ticks} ticks, streams {', '.join(by_stream)}")
    return sources, notes


def build_sources(
    codec: BinnedCodec, cfg: TrainConfig, data_dir: Path | None
) -> tuple[list[list[Source]], list[str]]:
    """Sources grouped by data set (synthetic, then each real set in ``data_dir``); and a description of the data."""
    synth, notes = synthetic_sources(codec, cfg)
    groups = [synth]
    if data_dir is None:
        notes.append("no real data (--data-dir not given)")
    for ds in [] if data_dir is None else load_real(data_dir, cfg.real_sets):
        train, heldout = ds.split()
        groups.append([make_source(ds.name, codec, train, None)])
        notes.append(f"{ds.name}: first {len(train)} of {len(ds.ticks)} ticks (later {len(heldout)} held out)")
    return groups, notes


def untrained_events(codec: BinnedCodec, groups: list[list[Source]]) -> list[str]:
    """The event tokens no tick of the training data encodes to (`event:trade`, a trade without a side, where every
    trade carries one): their embeddings stay as initialised, which the model's card says on its `- Never trained:`
    line (engine/service/untrained_tokens.py)."""
    seen: set[int] = set()  # (source by source: one concatenation of every token held twice the training set)
    for source in (source for group in groups for source in group):
        seen.update(np.unique(source.tokens).tolist())
    return [name for token, name in enumerate(codec.names[: codec.n_tick_tokens])
            if name.startswith("event:") and token not in seen]


def sample_batch(
    groups: list[list[Source]], weights: np.ndarray, q_tokens: np.ndarray, cfg: TrainConfig, rng: np.random.Generator
) -> Batch:
    W, K = cfg.window_ticks, cfg.questions_per_window
    L = W * TOKENS_PER_TICK
    tick_ids = np.zeros((cfg.batch, L), dtype=np.int64)
    q_ids = np.zeros((cfg.batch, K), dtype=np.int64)
    q_end = np.zeros((cfg.batch, K), dtype=np.int64)
    qa = np.full((cfg.batch, K), -100, dtype=np.int64)
    for b in range(cfg.batch):
        group = groups[rng.choice(len(groups), p=weights)]
        src = group[rng.integers(len(group))]
        start = int(rng.integers(0, len(src.tokens) - W))
        tick_ids[b] = src.tokens[start : start + W].reshape(-1)
        # Answer points j = 0..W-2 (context = ticks start..start+j); any question with a label there.
        jj, qq = np.nonzero(src.answers[start : start + W - 1] >= 0)
        pick = rng.choice(len(jj), size=min(K, len(jj)), replace=False)
        n = len(pick)
        q_ids[b, :n] = q_tokens[qq[pick]]
        q_end[b, :n] = (jj[pick] + 1) * TOKENS_PER_TICK
        qa[b, :n] = src.answers[start + jj[pick], qq[pick]]
    return pack_batch(tick_ids, q_ids, q_end, qa)


def question_tokens(codec: BinnedCodec) -> np.ndarray:
    return np.array([q.tokens[0] for q in codec.questions.values()], dtype=np.int64)  # one token each
