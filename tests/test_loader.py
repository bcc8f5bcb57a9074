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
from engine.models.linear import OneDNNLinear, bf16_linear_supported
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
    with pytest.raises(ValueError, match='RoPE type "yarn" is not supported'):
        load_model(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    for f in tmp_path.glob("*.safetensors"):
        f.unlink()
    with pytest.raises(CheckpointError, match="no weights: no model.safetensors"):
        load_model(tmp_path)


def test_bf16_load(tmp_path) -> None:
    tiny_hf_model("llama3").save_pretrained(tmp_path)
    model = load_model(tmp_path, dtype=torch.bfloat16)
    assert next(model.parameters()).dtype == torch.bfloat16
    # oneDNN's bf16 GEMMs where the CPU has bf16 dot products; plain nn.Linear (slow, but it runs) elsewhere
    linear_types = {type(m) for m in model.modules() if isinstance(m, (torch.nn.Linear, OneDNNLinear))}
    assert linear_types == ({OneDNNLinear} if bf16_linear_supported() else {torch.nn.Linear})


def test_unsupported_architecture_is_refused_by_name(tmp_path) -> None:
    from transformers import GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(vocab_size=64, n_embd=32, n_layer=1, n_head=2, n_positions=64)).save_pretrained(tmp_path)
    with pytest.raises(CheckpointError, match='model_type "gpt2" \\(GPT2LMHeadModel\\) is not supported: .*'
                                              '"llama", "mistral" or "qwen2"'):
        load_model(tmp_path)


def test_rope_scaling_is_checked_by_name(tmp_path) -> None:
    tiny_hf_model("llama2-linear-rope").save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["rope_parameters"].pop("factor")
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match='config.json: RoPE type "linear" needs "factor"'):
        load_model(tmp_path)
    # older checkpoints: rope_scaling with "type", rope_theta beside it
    config.pop("rope_parameters")
    (tmp_path / "config.json").write_text(json.dumps({**config, "rope_theta": 1e4,
                                                      "rope_scaling": {"type": "dynamic", "factor": 2.0}}))
    with pytest.raises(CheckpointError, match='RoPE type "dynamic" is not supported; supported: "default", "linear" '
                                              'and "llama3"'):
        load_model(tmp_path)


def test_pickled_weights_are_never_unpickled(tmp_path) -> None:
    """A pytorch_model.bin only: refused with the conversion to run, and the pickle is never opened."""
    import pathlib
    import pickle

    class Payload:
        def __reduce__(self):
            return pathlib.Path.touch, (tmp_path / "unpickled",)

    tiny_hf_model("llama3").config.save_pretrained(tmp_path)
    (tmp_path / "pytorch_model.bin").write_bytes(pickle.dumps(Payload()))
    with pytest.raises(CheckpointError, match="pytorch_model.bin \\(pickle\\), which flashtick does not load.*"
                                              "save_pretrained"):
        load_model(tmp_path)
    assert not (tmp_path / "unpickled").exists()


def test_sharded_checkpoint_reads_the_files_its_index_lists(tmp_path) -> None:
    from safetensors.torch import save_file

    from engine.models.loader import read_weights

    hf = tiny_hf_model("mistral")
    hf.save_pretrained(tmp_path, max_shard_size="60KB")
    # Mistral's releases ship consolidated.safetensors (their own naming) beside the transformers shards
    save_file({"layers.0.attention.wq.weight": torch.zeros(64, 64)}, str(tmp_path / "consolidated.safetensors"))
    assert set(read_weights(tmp_path)) == set(hf.state_dict())
    load_model(tmp_path)
    shard = sorted(tmp_path.glob("model-*.safetensors"))[1]
    shard.unlink()
    with pytest.raises(CheckpointError, match=f"shards, 1 missing: {shard.name}"):
        load_model(tmp_path)


def test_directory_and_config_errors_name_the_file(tmp_path) -> None:
    with pytest.raises(CheckpointError, match="no such directory"):
        load_model(tmp_path / "absent")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="config.json: not valid JSON"):
        load_model(tmp_path)
    config = tiny_hf_model("llama3").config.to_dict()
    config.pop("num_attention_heads")
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match='config.json: lacks "num_attention_heads"'):
        load_model(tmp_path)


def test_a_weight_the_config_does_not_describe_is_refused_by_name(tmp_path) -> None:
    """A checkpoint tensor the model would not apply (here an attention output bias under a config without
    attention_bias) is refused, naming it, rather than silently dropped: dropping it gives wrong logits."""
    from safetensors.torch import load_file, save_file

    tiny_hf_model("llama3").save_pretrained(tmp_path)
    (path,) = tmp_path.glob("*.safetensors")
    state = load_file(path)
    state["model.layers.0.self_attn.o_proj.bias"] = torch.ones(state["model.layers.0.self_attn.o_proj.weight"].shape[0])
    save_file(state, path, metadata={"format": "pt"})
    with pytest.raises(CheckpointError, match="does not use, e.g. layers.0.self_attn.o_proj.bias"):
        load_model(tmp_path)


def test_a_stored_head_that_differs_from_tied_embeddings_is_used_untied_as_transformers_does(tmp_path) -> None:
    """review385 #3: config.json saying tie_word_embeddings: true beside a stored lm_head.weight unlike the
    embeddings answered with the embeddings as the head, silently; transformers keeps the stored head (untied)."""
    hf = tiny_hf_model("llama3", seed=4)
    assert not hf.config.tie_word_embeddings
    hf.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    with pytest.warns(UserWarning, match="differs from model.embed_tokens.weight: the stored head is used, untied"):
        model = load_model(tmp_path)
    assert not model.config.tie_embeddings
    tokens = list(range(1, 30))
    engine, session = Engine(ModelRunner(model, CacheSpec(block_size=16, cells=256))), Session("s")
    assert (engine.probe(session, tokens) - hf_logits(hf, tokens)).abs().max() <= 1e-4


def test_a_config_whose_sizes_disagree_with_the_weights_is_refused_in_one_line(tmp_path) -> None:
    """An edited vocab_size gave torch's multi-line `Error(s) in loading state_dict ... size mismatch`."""
    tiny_hf_model("llama3").save_pretrained(tmp_path)
    config_path = tmp_path / "config.json"
    config = json.loads(config_path.read_text())
    held = config["vocab_size"]
    config_path.write_text(json.dumps({**config, "vocab_size": held // 2}))
    with pytest.raises(CheckpointError) as refused:
        load_model(tmp_path)
    said = str(refused.value)
    assert "\n" not in said and said.startswith(f"{tmp_path}: the weights do not fit config.json: embed_tokens.weight "
                                                f"is ({held}, ")
    assert f"config.json's sizes (vocab_size {held // 2}, hidden_size" in said, said


def test_weights_of_a_shallower_model_and_a_truncated_file_are_refused_naming_them(tmp_path) -> None:
    """A 4-layer config beside a 2-layer model's weights named the first missing weight, not the mismatch; a
    truncated model.safetensors gave safetensors' "incomplete metadata, file not fully covered", naming no file."""
    tiny_hf_model("llama3").save_pretrained(tmp_path)
    config_path = tmp_path / "config.json"
    config = json.loads(config_path.read_text())
    layers = config["num_hidden_layers"]
    config_path.write_text(json.dumps({**config, "num_hidden_layers": layers + 2}))
    with pytest.raises(CheckpointError, match=f"^{tmp_path}: the weights do not fit config.json: it has "
                                              f"num_hidden_layers {layers + 2}, the safetensors hold {layers} layers$"):
        load_model(tmp_path)
    config_path.write_text(json.dumps(config))
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(CheckpointError) as refused:
        load_model(tmp_path)
    said = str(refused.value)
    assert "\n" not in said and said.startswith(f"{weights}: not a readable safetensors file, truncated or "
                                                f"corrupt ("), said


def test_check_checkpoint_reads_headers_only_and_refuses_as_load_model_does(tmp_path) -> None:
    """evaluate and train --base check a checkpoint before transformers loads it: the check read every weight
    once more. It now reads the safetensors headers alone and still refuses what load_model refuses."""
    from engine.models.loader import check_checkpoint, read_weights

    tiny_hf_model("llama3").save_pretrained(tmp_path)
    held = read_weights(tmp_path)
    shapes = read_weights(tmp_path, shapes_only=True)
    assert {name: (tuple(t.shape), t.dtype) for name, t in shapes.items()} == {
        name: (tuple(t.shape), t.dtype) for name, t in held.items()}
    assert all(t.device.type == "meta" for t in shapes.values())
    check_checkpoint(tmp_path)
    config_path = tmp_path / "config.json"
    config = json.loads(config_path.read_text())
    config_path.write_text(json.dumps({**config, "vocab_size": config["vocab_size"] // 2}))
    with pytest.raises(CheckpointError, match="the weights do not fit config.json: embed_tokens.weight"):
        check_checkpoint(tmp_path)
    config_path.write_text(json.dumps(config))
    weights = tmp_path / "model.safetensors"
    whole = weights.read_bytes()
    for cut in (whole[:1000], whole[:-1]):  # inside the header; the data short by its last byte
        weights.write_bytes(cut)
        with pytest.raises(CheckpointError, match="not a readable safetensors file, truncated or corrupt"):
            check_checkpoint(tmp_path)
    weights.write_bytes(b"")
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        check_checkpoint(tmp_path)
