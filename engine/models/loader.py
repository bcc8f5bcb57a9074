"""Load a Llama-family model from a Hugging Face checkpoint directory or an in-memory transformers model.

A checkpoint directory holds ``config.json`` plus ``model.safetensors``, or the shards its
``model.safetensors.index.json`` lists, in transformers' naming (pickled ``*.bin`` weights are refused).
q/k/v and gate/up are fused on load, and on CPU the linears are laid out once for fast small-M GEMMs
(engine/models/linear.py). No network: only local paths are read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file

from engine.models.config import ModelConfig
from engine.models.linear import bf16_linear_supported, prepare_linears
from engine.models.llama import LlamaModel, Rotary
from engine.quoting import quoted
from engine.rust_paths import rust_path
from engine.text_files import read_text

BUILTIN_MODEL_DIR = Path(__file__).parent / "builtin"


class CheckpointError(ValueError):
    """A checkpoint directory that cannot be loaded, with what is wrong."""


def load_model(
    path: str | Path | None = None, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
    weights: str | None = None,
) -> LlamaModel:
    """Load from a local checkpoint directory; ``None`` loads the built-in tick model.

    ``weights``: the linears' format on CPU, "float32" or "bfloat16" (bf16 GEMMs, fp32 accumulation,
    activations and KV stay in ``dtype``); None follows ``dtype``.
    """
    directory = Path(path) if path is not None else BUILTIN_MODEL_DIR
    hf_config = read_config(directory)  # refuses an unsupported model before its weights are read
    config = model_config(directory, hf_config)
    state = read_weights(directory)
    with _named(directory):
        return build_model(config, state, dtype, device, weights)


def check_checkpoint(directory: Path) -> None:
    """Refuse, in load_model's one line, a checkpoint it would refuse: an unsupported or incomplete
    config.json, weights missing, unreadable or not fitting config.json. For the commands that load a checkpoint
    with transformers (evaluate, train --base), which would print its multi-line load report instead; the
    shapes are checked against a model built on the meta device (no memory, no init)."""
    config = model_config(directory, read_config(directory))
    state = read_weights(directory, shapes_only=True)  # the caller reads the weights next: read them once
    with torch.device("meta"), _no_weight_init():
        expected = LlamaModel(config).state_dict()
    with _named(directory):
        _check_fit(config, _fuse(config, state), expected)


@contextlib.contextmanager
def _named(directory: Path) -> Iterator[None]:
    """A refusal of the weights (which name no file) said with the checkpoint directory first."""
    try:
        yield
    except CheckpointError as e:
        raise CheckpointError(f"{directory}: {e}") from None


def read_checkpoint(path: str | Path) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(config.json as a dict, every tensor of the checkpoint's safetensors files) of a local checkpoint."""
    return read_config(Path(path)), read_weights(Path(path))


def read_config(directory: Path) -> dict[str, Any]:
    if not directory.is_dir():
        raise CheckpointError(f"{directory}: no such directory (a model is a local Hugging Face checkpoint "
                              f"directory: config.json and *.safetensors)")
    config_file = directory / "config.json"
    if not config_file.is_file():
        raise CheckpointError(f"{directory}: no config.json (expected a Hugging Face checkpoint directory)")
    try:
        return json.loads(read_text(config_file))
    except json.JSONDecodeError as e:
        raise CheckpointError(f"{config_file}: not valid JSON: {e}") from None


def model_config(directory: Path, hf_config: dict[str, Any]) -> ModelConfig:
    """The decoder's shape, or an error that names the file and what is unsupported or missing."""
    try:
        return ModelConfig.from_hf(hf_config)
    except KeyError as e:
        raise CheckpointError(f"{directory / 'config.json'}: lacks {quoted(e.args[0])}") from None
    except ValueError as e:
        raise CheckpointError(f"{directory / 'config.json'}: {e}") from None


def read_weights(directory: Path, shapes_only: bool = False) -> dict[str, torch.Tensor]:
    """Every tensor of the files the checkpoint's index lists, else of model.safetensors, else of every
    *.safetensors file. Pickled weights (*.bin, *.pt) are never read: unpickling can run code.

    ``shapes_only``: tensors on the meta device, from each file's header alone (a multi-GB checkpoint checked
    without reading its data; safetensors still refuses a file whose data does not cover its header)."""
    state: dict[str, torch.Tensor] = {}
    for file in _weight_files(directory):
        try:
            state.update(_header_tensors(file) if shapes_only else load_file(rust_path(file)))
        except SafetensorError as e:  # safetensors' own message names no file: "incomplete metadata, ..."
            raise CheckpointError(f"{file}: not a readable safetensors file, truncated or corrupt ({e}); an "
                                  f"interrupted copy, download or save? Copy or save it again") from None
    return state


def _header_tensors(file: Path) -> dict[str, torch.Tensor]:
    """Meta tensors of the shapes and dtypes a safetensors file's header declares."""
    with safe_open(rust_path(file), framework="pt") as opened:
        return {name: torch.empty(opened.get_slice(name).get_shape(), dtype=_SAFETENSORS_DTYPES.get(
            opened.get_slice(name).get_dtype(), torch.float32), device="meta") for name in opened.keys()}


# safetensors' header names for the dtypes a checkpoint holds (others, e.g. fp8, are checked as float32: only
# the shapes matter to the check)
_SAFETENSORS_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64,
                       "I64": torch.int64, "I32": torch.int32, "I8": torch.int8, "U8": torch.uint8,
                       "BOOL": torch.bool}


def _weight_files(directory: Path) -> list[Path]:
    index = directory / "model.safetensors.index.json"
    if index.is_file():  # exactly the shards it names: a folder may hold other *.safetensors (consolidated.*)
        names = sorted(set(json.loads(read_text(index)).get("weight_map", {}).values()))
        missing = [name for name in names if not (directory / name).is_file()]
        if missing:
            raise CheckpointError(f"{directory}: {index.name} lists {len(names)} shards, {len(missing)} missing: "
                                  f"{', '.join(missing[:3])} (an interrupted copy or download?)")
        return [directory / name for name in names]
    if (directory / "model.safetensors").is_file():
        return [directory / "model.safetensors"]
    files = sorted(directory.glob("*.safetensors"))
    if files:
        return files
    pickled = sorted(p.name for p in (*directory.glob("*.bin"), *directory.glob("*.pt*")))
    if pickled:
        raise CheckpointError(
            f"{directory}: weights only as {', '.join(pickled[:3])} (pickle), which flashtick does not load: "
            f"unpickling a file can run code. Convert them once to safetensors, with transformers, in a place "
            f"you trust the file: python -c \"from transformers import AutoModelForCausalLM as M; "
            f"M.from_pretrained('{directory}').save_pretrained('{directory}')\" (writes model.safetensors)")
    raise CheckpointError(f"{directory}: no weights: no model.safetensors (or *.safetensors shards) beside its "
                          f"config.json; a checkpoint is the folder save_pretrained writes")


def from_hf_model(
    hf_model: Any, dtype: torch.dtype | None = None, device: str | torch.device = "cpu", weights: str | None = None
) -> LlamaModel:
    """Build from an in-memory transformers ``*ForCausalLM`` (tests and exporters use this)."""
    config = ModelConfig.from_hf(hf_model.config.to_dict())
    state = {k: v.detach() for k, v in hf_model.state_dict().items()}
    return build_model(config, state, dtype or next(hf_model.parameters()).dtype, device, weights)


def default_weights(dtype: torch.dtype) -> str | None:
    """The linears' format when ``weights`` is not given: the model's own dtype (fp16 keeps nn.Linear).

    A bf16 model on a CPU without native bf16 dot products (AVX2 only) keeps nn.Linear too: torch's own
    bf16 GEMM is slow there but it runs, where the oneDNN format would refuse the model."""
    if dtype == torch.float32:
        return "float32"
    if dtype == torch.bfloat16:
        return "bfloat16" if bf16_linear_supported() else "torch"
    return None


def build_model(
    config: ModelConfig, hf_state: dict[str, torch.Tensor], dtype: torch.dtype, device: str | torch.device,
    weights: str | None = None,
) -> LlamaModel:
    config = _with_stored_head(config, hf_state)
    with torch.device("meta"), _no_weight_init():  # no random init of weights that are about to be overwritten
        model = LlamaModel(config)
    # (Module.to_empty's empty_like of a meta tensor runs torch's Python reference op, whose first call imports
    # torch.fx's symbolic shapes and sympy: ~0.4 s of CPU at every model load; torch.empty allocates the same)
    model._apply(lambda t: torch.empty(t.shape, dtype=t.dtype, device=device))
    model.rotary = Rotary(config).to(device)
    fused = _fuse(config, hf_state)
    _check_fit(config, fused, model.state_dict())
    model.load_state_dict(fused, strict=False, assign=False)
    if config.tie_embeddings:
        model.lm_head.weight = model.embed_tokens.weight
    model = model.to(dtype=dtype).eval()
    weights = weights or default_weights(dtype)
    return prepare_linears(model, weights) if weights is not None else model


def _with_stored_head(config: ModelConfig, hf_state: dict[str, torch.Tensor]) -> ModelConfig:
    """``config`` untied when it says tie_word_embeddings but the checkpoint stores an lm_head.weight that differs
    from its embeddings: transformers (5.x) then keeps the stored head, untied, so answers equal its answers only
    with that head; said once, as transformers says it."""
    head, embed = hf_state.get("lm_head.weight"), hf_state.get("model.embed_tokens.weight")
    if not config.tie_embeddings or head is None or embed is None or torch.equal(head, embed):
        return config
    warnings.warn("config.json says tie_word_embeddings: true, but the checkpoint stores an lm_head.weight that "
                  "differs from model.embed_tokens.weight: the stored head is used, untied (as transformers does); "
                  "set tie_word_embeddings: false to say so, or drop lm_head.weight from the safetensors to tie",
                  stacklevel=3)
    return dataclasses.replace(config, tie_embeddings=False)


def _check_fit(config: ModelConfig, fused: dict[str, torch.Tensor], expected: dict[str, torch.Tensor]) -> None:
    """Refuse weights whose shapes are not the ones config.json makes (an edited vocab_size, hidden_size, head
    count), or that leave a weight of the model unset."""
    wrong = [(name, tuple(tensor.shape), tuple(expected[name].shape)) for name, tensor in fused.items()
             if name in expected and tuple(tensor.shape) != tuple(expected[name].shape)]
    if wrong:
        name, held, built = wrong[0]
        raise CheckpointError(f"the weights do not fit config.json: {name} is {held} in the safetensors, but "
                              f"config.json's sizes (vocab_size {config.vocab_size}, hidden_size {config.hidden_size}, "
                              f"...) make it {built}" + (f" ({len(wrong) - 1} more such)" if len(wrong) > 1 else ""))
    missing = sorted(set(expected) - set(fused) - ({"lm_head.weight"} if config.tie_embeddings else set()))
    if missing:
        raise CheckpointError(f"checkpoint lacks weights: {missing[:5]}")


@contextlib.contextmanager
def _no_weight_init() -> Iterator[None]:
    """The modules' reset_parameters made no-ops while the model is built on the meta device.

    Even on "meta", torch runs an init like ``normal_`` through its Python reference ops, and the first
    such call imports torch._dynamo: 1-1.3 s at every start of every command. The weights are loaded
    right after, so nothing is lost (transformers' ``no_init_weights`` does the same)."""
    names = ("normal_", "uniform_", "kaiming_uniform_", "zeros_", "ones_")
    saved = {name: getattr(torch.nn.init, name) for name in names}
    try:
        for name in names:
            setattr(torch.nn.init, name, lambda tensor, *args, **kwargs: tensor)
        yield
    finally:
        for name, init in saved.items():
            setattr(torch.nn.init, name, init)


class _Taken(dict):
    """A dict that remembers which keys were read: the checkpoint's weights the model took."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.taken: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        value = super().__getitem__(key)
        self.taken.add(key)
        return value


def _fuse(config: ModelConfig, hf: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers names -> ours, concatenating q/k/v and gate/up."""
    hf = _Taken((k.removeprefix("model."), v) for k, v in hf.items())
    if "lm_head.weight" not in hf and not config.tie_embeddings:
        raise CheckpointError("checkpoint has no lm_head.weight and tie_word_embeddings is false")
    out: dict[str, torch.Tensor] = {
        "embed_tokens.weight": hf["embed_tokens.weight"],
        "norm.weight": hf["norm.weight"],
    }
    if not config.tie_embeddings:
        out["lm_head.weight"] = hf["lm_head.weight"]
    for i in range(config.num_layers):
        p, q = f"layers.{i}.", f"layers.{i}.self_attn."
        try:
            out[q + "qkv_proj.weight"] = torch.cat([hf[q + f"{n}_proj.weight"] for n in "qkv"])
            if config.qkv_bias:
                out[q + "qkv_proj.bias"] = torch.cat([hf[q + f"{n}_proj.bias"] for n in "qkv"])
            out[q + "o_proj.weight"] = hf[q + "o_proj.weight"]
            if config.o_bias:
                out[q + "o_proj.bias"] = hf[q + "o_proj.bias"]
            m = p + "mlp."
            out[m + "gate_up_proj.weight"] = torch.cat([hf[m + "gate_proj.weight"], hf[m + "up_proj.weight"]])
            out[m + "down_proj.weight"] = hf[m + "down_proj.weight"]
            if config.mlp_bias:
                out[m + "gate_up_proj.bias"] = torch.cat([hf[m + "gate_proj.bias"], hf[m + "up_proj.bias"]])
                out[m + "down_proj.bias"] = hf[m + "down_proj.bias"]
            for norm in ("input_layernorm", "post_attention_layernorm"):
                out[p + norm + ".weight"] = hf[p + norm + ".weight"]
        except KeyError as missing:
            held = len({name.split(".")[1] for name in hf if name.startswith("layers.")})
            if not any(name.startswith(p) for name in hf):  # a whole layer: weights of a shallower model
                raise CheckpointError(f"the weights do not fit config.json: it has num_hidden_layers "
                                      f"{config.num_layers}, the safetensors hold {held} layers") from None
            raise CheckpointError(f"checkpoint lacks weight {quoted(missing.args[0])} for layer {i}") from None
    unused = sorted(name for name in hf.keys() - hf.taken
                    if not name.endswith("rotary_emb.inv_freq") and name != "lm_head.weight")  # (tied: a copy)
    if unused:  # a weight the model would not apply: a bias its config does not declare, another architecture's
        raise CheckpointError(f"checkpoint has {len(unused)} weights a {config.model_type} model of this config.json "
                              f"does not use, e.g. {', '.join(unused[:3])}: its config does not describe them")
    return out
