"""ModelConfig: the Llama-family decoder's shape, read from a Hugging Face config.json.

Supported families: Llama 2/3 (incl. ``llama3`` and ``linear`` RoPE scaling),
Mistral (full attention; a sliding window caps the usable context instead),
Qwen2/2.5 (q/k/v bias). GQA, tied or untied embeddings, SiLU MLP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from engine.quoting import quoted, quoted_choices, quoted_words
from engine.roll_fit import settings_for_window

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2")
ROPE_KEYS = {  # RoPE type -> the parameters it needs
    "default": (), "linear": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}
SUPPORTED_ROPE_TYPES = tuple(ROPE_KEYS)


@dataclass(frozen=True)
class ModelConfig:
    model_type: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    max_positions: int
    rms_norm_eps: float = 1e-6
    rope: dict[str, Any] = field(default_factory=lambda: {"rope_type": "default", "rope_theta": 10000.0})
    qkv_bias: bool = False
    o_bias: bool = False  # the attention output's bias (Llama's attention_bias biases q, k, v and o)
    mlp_bias: bool = False
    tie_embeddings: bool = False
    # where max_positions comes from, as the start line and the errors about the window say it (window_cause)
    positions_cause: str = "its max_position_embeddings"

    def __post_init__(self) -> None:
        if self.model_type not in SUPPORTED_MODEL_TYPES:
            raise ValueError(f"model_type must be one of {quoted_choices(SUPPORTED_MODEL_TYPES)}, got "
                             f"{quoted(self.model_type)}")
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
                     "head_dim", "max_positions"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        rope_type = self.rope.get("rope_type", "default")
        if rope_type not in SUPPORTED_ROPE_TYPES:
            raise ValueError(f"RoPE type {quoted(rope_type)} is not supported; supported: "
                             f"{quoted_words(SUPPORTED_ROPE_TYPES)} "
                             f"(rope_parameters, or rope_scaling, in config.json)")
        missing = [key for key in ROPE_KEYS[rope_type] if key not in self.rope]
        if missing:
            raise ValueError(f"RoPE type {quoted(rope_type)} needs {quoted_words(missing)} in rope_parameters (or "
                             "rope_scaling)")

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes of K and V one token occupies across all layers, per byte of element size."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim

    @classmethod
    def from_hf(cls, hf: dict[str, Any]) -> "ModelConfig":
        """Build from a Hugging Face config dict (config.json or PretrainedConfig.to_dict())."""
        model_type = hf.get("model_type", "")
        if model_type not in SUPPORTED_MODEL_TYPES:  # before any key lookup: a GPT-2 config lacks Llama's keys
            architectures = ", ".join(hf.get("architectures") or []) or "no architectures listed"
            raise ValueError(f"model_type {quoted(model_type)} ({architectures}) is not supported: flashtick runs "
                             f"Llama-family decoders, model_type one of {quoted_choices(SUPPORTED_MODEL_TYPES)}")
        heads_of = [name for name in hf.get("architectures") or [] if isinstance(name, str)]
        if heads_of and not any(name.endswith("ForCausalLM") for name in heads_of):
            # (a classifier's score.weight in place of lm_head: refused by what it is, not by the missing head, whose
            # message sent a user to tie_word_embeddings: review432 #3)
            raise ValueError(f"architectures {', '.join(heads_of)} is not a causal language model: flashtick answers "
                             f"from next-token logits (an lm_head), so serve a ...ForCausalLM checkpoint "
                             f"(config.json's architectures, e.g. {model_type.capitalize()}ForCausalLM)")
        if hf.get("hidden_act", "silu") != "silu":
            raise ValueError(f"only SiLU MLPs are supported, config has hidden_act {quoted(hf.get('hidden_act'))}: "
                             "flashtick runs Llama 2/3, Mistral and Qwen2/2.5 checkpoints, whose MLP is SwiGLU "
                             "(hidden_act \"silu\"); editing hidden_act would change the model's answers, so serve a "
                             "checkpoint of one of those families")
        heads = hf["num_attention_heads"]
        max_positions = hf["max_position_embeddings"]
        window = hf.get("sliding_window")
        cause = "its max_position_embeddings"
        if model_type == "mistral" and window and window < max_positions:
            # Full attention within the window equals sliding-window attention, so
            # the session's context is capped at the window (DESIGN: context limit).
            cause = f"its sliding_window, below its max_position_embeddings of {max_positions}"
            max_positions = window
        if model_type == "qwen2" and hf.get("use_sliding_window"):
            raise ValueError(_qwen2_sliding_window(hf))
        return cls(
            model_type=model_type,
            vocab_size=hf["vocab_size"],
            hidden_size=hf["hidden_size"],
            intermediate_size=hf["intermediate_size"],
            num_layers=hf["num_hidden_layers"],
            num_heads=heads,
            num_kv_heads=hf.get("num_key_value_heads") or heads,
            head_dim=hf.get("head_dim") or hf["hidden_size"] // heads,
            max_positions=max_positions,
            rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
            rope=_rope_parameters(hf),
            # as transformers builds them: Qwen2 biases q/k/v only, Llama q/k/v/o with attention_bias, Mistral none
            qkv_bias=model_type == "qwen2" or (model_type == "llama" and bool(hf.get("attention_bias", False))),
            o_bias=model_type == "llama" and bool(hf.get("attention_bias", False)),
            mlp_bias=bool(hf.get("mlp_bias", False)),
            tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
            positions_cause=cause,
        )


def _qwen2_sliding_window(hf: dict[str, Any]) -> str:
    """The refusal of a Qwen2 config with use_sliding_window true, and whether false is right for it: Qwen2 slides
    the window only in the layers from max_window_layers on, so with max_window_layers >= num_hidden_layers no layer
    slides and false computes the same model (the released Qwen2/2.5 configs ship false)."""
    layers, full = hf.get("num_hidden_layers"), hf.get("max_window_layers")
    head = ("Qwen2 sliding-window attention is not supported (use_sliding_window=true); the released Qwen2 and "
            "Qwen2.5 configs set it false, so this one was edited or fine-tuned that way")
    if isinstance(layers, int) and isinstance(full, int) and full >= layers:
        return (f"{head}: its max_window_layers ({full}) >= num_hidden_layers ({layers}), so no layer slides and "
                f"use_sliding_window: false in config.json is the same model")
    window = hf.get("sliding_window")
    fitting = settings_for_window(window) if isinstance(window, int) and window > 0 else None
    settings = f"`{fitting}`" if fitting else f"scheduler.window at most {window}"
    return (f"{head}: with max_window_layers {full} below num_hidden_layers {layers} its upper layers attend only "
            f"the last {window} tokens; within a window that short full attention is the same, so use_sliding_window:"
            f" false in config.json with {settings} in flashtick's config gives this model's answers (a longer "
            f"window would not)")


def _rope_parameters(hf: dict[str, Any]) -> dict[str, Any]:
    """transformers 5 writes ``rope_parameters``; older checkpoints ``rope_theta`` + ``rope_scaling``."""
    params = dict(hf.get("rope_parameters") or {})
    if not params:
        params = dict(hf.get("rope_scaling") or {})
        params["rope_theta"] = hf.get("rope_theta", 10000.0)
    rope_type = params.pop("type", None) or params.get("rope_type") or "default"
    params["rope_type"] = rope_type
    params.setdefault("rope_theta", hf.get("rope_theta", 10000.0))
    return params


def rope_inv_freq(config: ModelConfig) -> torch.Tensor:  # (head_dim // 2,) fp32
    """Inverse frequencies, computed exactly as transformers does for each supported RoPE type."""
    dim = config.head_dim
    base = float(config.rope["rope_theta"])
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    rope_type = config.rope["rope_type"]
    if rope_type == "linear":
        return inv_freq / float(config.rope["factor"])
    if rope_type == "llama3":
        factor = float(config.rope["factor"])
        low, high = float(config.rope["low_freq_factor"]), float(config.rope["high_freq_factor"])
        old_len = float(config.rope["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)
        smooth = (old_len / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < old_len / high) * ~(wavelen > old_len / low)
        return torch.where(medium, smoothed, scaled)
    return inv_freq
