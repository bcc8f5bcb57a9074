"""llama.cpp runs exactly flashtick's weights: a checkpoint exported with benchmarks.gguf_export gives
llama.cpp logits equal to ours for the same token ids, in fp32 (weights and llama.cpp's KV cache).

Tolerance: |llama.cpp - flashtick| <= LOGIT_ATOL + LOGIT_RTOL * |flashtick| on every logit of every
position. Both sides compute in fp32 but sum in different orders (ggml's SIMD matmuls vs torch's),
so they agree to ~1e-6 here, not bit for bit (measured max |diff|: 8e-7 on the tiny Llamas, 5e-6 on
the built-in model whose logits reach ~10); the bound leaves 20x headroom for other SIMD paths.
A wrong Q/K permutation or tensor mapping moves logits by ~0.1-1.

Needs the optional peers extra (``pip install -e '.[peers]'``: gguf, llama-cpp-python); skipped
without it, so ``make test`` never needs it.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

pytest.importorskip("gguf", reason="optional peers extra not installed: pip install -e '.[peers]'")
pytest.importorskip("llama_cpp", reason="optional peers extra not installed: pip install -e '.[peers]'")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/ is a script folder, not installed
from benchmarks.gguf_export import export_gguf, open_llama  # noqa: E402
from engine.engine import Engine  # noqa: E402
from engine.kv_cache import CacheSpec  # noqa: E402
from engine.models import BUILTIN_MODEL_DIR, load_model  # noqa: E402
from engine.runner import ModelRunner  # noqa: E402
from engine.session import Session  # noqa: E402

LOGIT_ATOL = 1e-4
LOGIT_RTOL = 1e-4
SEQUENCE = 40  # tokens: spans a KV block boundary and an SPM-irrelevant id range

TINY_LLAMAS = {
    # GQA, so K's permutation uses the KV head count; untied head
    "gqa": dict(vocab_size=512, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=256),
    # tied embeddings, MHA, a non-default RoPE base and RMS eps
    "tied": dict(vocab_size=300, hidden_size=96, intermediate_size=160, num_hidden_layers=3,
                 num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                 tie_word_embeddings=True, rope_theta=50000.0, rms_norm_eps=1e-5),
    # the peer benchmark's shape, shortened
    "bench": dict(vocab_size=512, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                  num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=512),
}


def flashtick_logits(checkpoint, tokens: list[int]) -> np.ndarray:  # (T, vocab)
    engine = Engine(ModelRunner(load_model(checkpoint), CacheSpec(block_size=16, cells=1024)))
    return engine.advance(Session("parity"), tokens, logits="all").numpy()


def llama_cpp_logits(gguf_path, tokens: list[int], n_ctx: int) -> np.ndarray:  # (T, vocab)
    llm = open_llama(gguf_path, n_ctx=n_ctx, logits_all=True, f32_kv=True)
    llm.eval(tokens)
    return np.array(llm.scores[: len(tokens)], dtype=np.float32)


def assert_match(checkpoint, tmp_path, vocab: int, n_ctx: int) -> None:
    gguf_path = export_gguf(checkpoint, tmp_path / "model.gguf")
    tokens = [random.Random(7).randrange(vocab) for _ in range(SEQUENCE)]
    ours = flashtick_logits(checkpoint, tokens)
    theirs = llama_cpp_logits(gguf_path, tokens, n_ctx)
    assert theirs.shape == ours.shape
    excess = np.abs(theirs - ours) - (LOGIT_ATOL + LOGIT_RTOL * np.abs(ours))
    worst = np.unravel_index(excess.argmax(), ours.shape)
    assert excess.max() <= 0, f"max |diff| {np.abs(theirs - ours).max():.2e} at (position, token) {worst}"
    # and the argmax agrees everywhere (what a greedy answer would read)
    assert (theirs.argmax(-1) == ours.argmax(-1)).all()


@pytest.mark.parametrize("name", sorted(TINY_LLAMAS))
def test_tiny_llama_logits_match_llama_cpp(name, tmp_path):
    torch.manual_seed(0)
    config = TINY_LLAMAS[name]
    LlamaForCausalLM(LlamaConfig(**config)).save_pretrained(tmp_path / "hf")
    assert_match(tmp_path / "hf", tmp_path, config["vocab_size"], config["max_position_embeddings"])


def test_builtin_model_logits_match_llama_cpp(tmp_path):
    if not (BUILTIN_MODEL_DIR / "config.json").is_file():
        pytest.skip(f"built-in model not trained yet ({BUILTIN_MODEL_DIR})")
    model = load_model(None)
    assert_match(BUILTIN_MODEL_DIR, tmp_path, model.config.vocab_size, model.config.max_positions)
