"""engine.service.train_builtin options for the v2 model: codec version, real data sets and their mix, the wide
synthetic market, the window length; a tiny run writes a checkpoint whose codec.json is the version asked for."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from connectors.codec import TOKENS_PER_TICK, BinnedCodec, BinnedSpec
from engine.service.tick_checkpoint import load_tick_model, window_ticks
from engine.service.train_builtin import main, train, write_training_md
from engine.service.train_config import TrainConfig
from engine.service.train_data import synthetic_sources, wide_synthetic_configs
from engine.service.untrained_tokens import never_trained

TINY = dict(hidden=32, intermediate=64, layers=1, heads=2, kv_heads=1, batch=2, questions_per_window=8, warmup=1)


def test_config_refuses_a_mix_that_does_not_match_the_sets() -> None:
    with pytest.raises(ValueError, match="one per real set"):
        TrainConfig(real_sets=("BTCUSDT", "ETHUSDT", "EURUSD"), mix=(0.5, 0.2, 0.3))
    with pytest.raises(ValueError, match="unknown real data sets"):
        TrainConfig(real_sets=("SPX",), mix=(0.5, 0.5))
    with pytest.raises(ValueError, match="codec_version"):
        TrainConfig(codec_version=7)


def test_cli_reports_a_bad_mix_as_a_usage_error(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--sets", "BTCUSDT", "--mix", "1,2,3", "--out", "unused"])
    assert "one per real set" in capsys.readouterr().err


def test_calibrate_only_of_a_folder_without_a_model_is_a_usage_error(capsys, tmp_path: Path) -> None:
    """It was the checkpoint loader's traceback, exit 1."""
    with pytest.raises(SystemExit) as stopped:
        main(["--calibrate-only", "--out", str(tmp_path)])
    assert stopped.value.code == 2 and f"--out {tmp_path} holds no model (no config.json)" in capsys.readouterr().err


def test_wide_synthetic_spans_price_scales_and_clocks() -> None:
    cfg = TrainConfig(wide_synthetic=True, synthetic_ticks=4000, codec_version=2)
    sources, notes = synthetic_sources(BinnedCodec(BinnedSpec(version=2)), cfg)
    assert len(notes) == 1 + len(wide_synthetic_configs(cfg.synthetic_seed))
    prices = [s.price for c in wide_synthetic_configs(1) for s in c.streams]
    assert min(prices) < 2 and max(prices) > 10_000
    assert len(sources) == 4 + sum(len(c.streams) for c in wide_synthetic_configs(1))
    assert all(src.tokens.shape[1] == TOKENS_PER_TICK and (src.answers >= 0).any() for src in sources)


def test_tiny_v2_run_writes_a_v2_checkpoint_of_the_window_asked_for(tmp_path: Path) -> None:
    cfg = TrainConfig(steps=2, synthetic_ticks=3000, wide_synthetic=True, codec_version=2, window_ticks=31,
                      max_positions=128, **TINY)
    stats = train(cfg, tmp_path, log=lambda _: None)
    assert stats["steps_done"] == 2 and np.isfinite(stats["final_lm_loss"])
    model, codec = load_tick_model(tmp_path)
    assert codec.spec.version == 2 and window_ticks(model) == 31
    # every synthetic trade carries its side: the card names the side-unknown events never trained, and a run
    # reads them from it (review410 #1)
    unsided = {f"event:trade/s{k}" for k in range(5)}
    assert unsided <= set(stats["never_trained"])
    write_training_md(cfg, stats, tmp_path, "test")
    assert {codec.names[token] for token in never_trained(tmp_path, codec)} == set(stats["never_trained"])
