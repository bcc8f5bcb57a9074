"""A binned tick model's checkpoint as `train` and `evaluate` load it, and the ticks one window of it holds.

`evaluate`, `train`'s evaluation, the calibration and the fine-tune read the model through transformers'
LlamaForCausalLM (the reference forward), not through the serving engine; the checkpoint is refused the way
`serve` and `backtest` refuse it (engine/models/loader.py check_checkpoint), in one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from connectors.builtin import load_codec
from connectors.codec import TOKENS_PER_TICK, BinnedCodec
from engine.models.loader import check_checkpoint


def load_tick_model(model_dir: Path, device: str = "cpu", command: str = "train") -> tuple[Any, BinnedCodec]:
    """A checkpoint directory with config.json, model.safetensors and codec.json (a BinnedCodec tick model);
    a text model is refused with what ``command`` would have its user do instead."""
    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # one checkpoint from a local folder: no bar on the user's terminal
    # refused as backtest and serve refuse it, in one line (a directory without weights, a truncated file,
    # weights that do not fit config.json), not with transformers' multi-line load report
    check_checkpoint(model_dir)
    if not (model_dir / "codec.json").is_file():
        from engine.service.text_evaluation import text_model_refusal

        raise ValueError(text_model_refusal(model_dir, command))
    codec = load_codec(model_dir)  # with the calibration.json fitted to these weights, if any
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # its load report (warning level, ANSI colours) says nothing checked above
    try:
        model = LlamaForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa").to(device).eval()
    finally:
        hf_logging.set_verbosity(verbosity)
    return model, codec


def window_ticks(model: Any) -> int:
    """Ticks per window so that a probe after the last tick stays inside max_position_embeddings."""
    return model.config.max_position_embeddings // TOKENS_PER_TICK - 1
