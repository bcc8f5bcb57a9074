"""Checkpoints written by transformers' save_pretrained load through our loader and match."""

from __future__ import annotations

import json
import random

import pytest
import torch

from conftest import hf_logits, tiny_hf_model
from engine.engine import Engine
from engine.kv_cache import CacheSpec
from engine.models import CheckpointError, load_model
from engine.runner import ModelRunner
from engine.session import Session


@pytest.mark.parametrize("family", ["llama3", "qwen2-tied", "mistral"])
def test_save_pretrained_checkpoint_loads_and_matches(tmp_path, family: str) -> None:
    hf = tiny_hf_model(family, seed=3)
    # small shards so the multi-file path is exercised
    hf.save_pretrained(tmp_path, max_shard_size="100KB")
    assert len(list(tmp_path.glob("*.safetensors"))) > 1
    model = load_model(tmp_path)
    rng = random.Random(0)
    tokens = [rng.randrange(hf.config.vocab_size) for _ in range(90)]
    engine, session = Engine(ModelRunner(model, CacheSpec(block_size=16, cells=2048))), Session("s")
    engine.advance(session, tokens[:70])
    assert (engine.probe(session, tokens[70:]) - hf_logits(hf, tokens)[70:]).abs().max() <= 1e-4


def test_loader_errors_name_the_problem(tmp_path) -> None:
    with pytest.raises(CheckpointError, match="no config.json"):
        load_model(tmp_path)
    hf = tiny_hf_model("llama3")
    hf.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "hidden_act": "gelu"}))
    with pytest.raises(ValueError, match="only SiLU"):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**config, "rope_parameters": {"rope_type": "yarn"}}))
    with pytest.raises(ValueError, match="RoPE type 'yarn' is not supported"):
        load_model(tmp_path)
    for f in tmp_path.glob("*.safetensors"):
        f.unlink()
    with pytest.raises(CheckpointError, match="no \\*.safetensors"):
        load_model(tmp_path)


def test_bf16_load(tmp_path) -> None:
    tiny_hf_model("llama3").save_pretrained(tmp_path)
    model = load_model(tmp_path, dtype=torch.bfloat16)
    assert next(model.parameters()).dtype == torch.bfloat16
