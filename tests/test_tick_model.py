"""The shipped built-in tick model: loads offline, matches its codec, and the
training layout of question probes equals the serving view (plain forward of ticks + question)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from transformers import LlamaForCausalLM  # noqa: E402

from connectors.builtin import load_builtin_codec  # noqa: E402
from connectors.synthetic import SyntheticConfig, SyntheticMarket  # noqa: E402
from engine.models import BUILTIN_MODEL_DIR  # noqa: E402
from engine.service.packing import pack_batch  # noqa: E402


@pytest.fixture(scope="module")
def loaded() -> LlamaForCausalLM:
    return LlamaForCausalLM.from_pretrained(BUILTIN_MODEL_DIR, attn_implementation="sdpa").eval()


def test_only_the_shipped_files_are_there() -> None:
    names = {p.name for p in BUILTIN_MODEL_DIR.iterdir()}
    assert {"config.json", "model.safetensors", "codec.json", "TRAINING.md"} <= names
    assert not {"generation_config.json", "model.safetensors.tmp"} & names
    assert (BUILTIN_MODEL_DIR / "model.safetensors").stat().st_size < 15 * 2**20


def test_loads_offline_with_finite_logits(loaded) -> None:
    model = loaded
    codec = load_builtin_codec()
    tokens = codec.encode_stream(SyntheticMarket(SyntheticConfig(seed=9)).next_batch(16))
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([tokens])).logits
    assert logits.shape == (1, len(tokens), codec.vocab_size)
    assert torch.isfinite(logits).all()


def test_codec_json_matches_model_vocab() -> None:
    config = json.loads((BUILTIN_MODEL_DIR / "config.json").read_text())
    codec = load_builtin_codec()
    assert config["vocab_size"] == codec.vocab_size
    assert all(t < codec.vocab_size for q in codec.questions.values() for t in q.tokens + list(q.answers.values()))


def test_probe_layout_equals_plain_forward(loaded) -> None:
    model = loaded
    codec = load_builtin_codec()
    ticks = [t for t in SyntheticMarket(SyntheticConfig(seed=9)).next_batch(200) if t.stream == "SYN.A"][:20]
    tick_ids = np.array([codec.encode_stream(ticks)])
    qs = list(codec.questions.values())
    q_ids = np.array([[qs[i % len(qs)].tokens[0] for i in range(6)]])
    q_end = np.array([[4, 8, 20, 40, 44, 76]])
    batch = pack_batch(tick_ids, q_ids, q_end, np.full_like(q_ids, -100))
    L = tick_ids.shape[1]
    with torch.no_grad():
        packed = model(input_ids=batch.ids, attention_mask=batch.mask, position_ids=batch.pos).logits[0]
        plain = model(input_ids=torch.from_numpy(tick_ids)).logits[0]
        torch.testing.assert_close(packed[:L], plain, atol=1e-4, rtol=1e-4)
        for k in range(q_ids.shape[1]):
            n = int(q_end[0, k])
            seq = torch.from_numpy(np.concatenate([tick_ids[0, :n], q_ids[0, k : k + 1]]))[None]
            torch.testing.assert_close(packed[L + k], model(input_ids=seq).logits[0, -1], atol=1e-4, rtol=1e-4)
