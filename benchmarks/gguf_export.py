"""Export a Llama-family Hugging Face checkpoint (config.json + *.safetensors) to GGUF for llama.cpp.

So llama.cpp runs exactly the weights flashtick runs. Needs the optional ``gguf``
package (``pip install -e '.[peers]'``); the engine core never imports this file.

What is written (arch ``llama``, as llama.cpp's own HF converter does for Llama/Mistral):
  * hyper-parameters: context length, embedding length, block count, feed-forward
    length, head counts (+ key/value length when head_dim != hidden/heads), RoPE
    dimension and base, RMS eps, vocab size; ``linear`` RoPE scaling as a factor,
    ``llama3`` RoPE scaling as a ``rope_freqs`` tensor of per-frequency divisors;
  * tensors under llama.cpp's names; Q and K rows permuted from Hugging Face's
    rotate-half layout back to the interleaved-pair layout llama.cpp's RoPE uses;
    tied embeddings write no ``output.weight`` (llama.cpp then reuses ``token_embd``);
  * a token-id-only vocabulary: an SPM ("llama") tokenizer section with dummy
    token strings (``<unk>``, ``<s>``, ``</s>``, then ``<t3>``...), zero scores and
    NORMAL types. Callers feed token ids, never text; llama.cpp only logs that the
    vocabulary has no newline byte token.

    python -m benchmarks.gguf_export CHECKPOINT_DIR OUT.gguf [--dtype f32|f16]
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import require_extra
from engine.models.config import ModelConfig, rope_inv_freq
from engine.models.loader import CheckpointError
from engine.models.loader import read_checkpoint as read_engine_checkpoint

ARCH = "llama"
EXPORTABLE = ("llama", "mistral")  # no q/k/v bias; Qwen2 would need arch "qwen2" and biases
SPECIAL = ("<unk>", "<s>", "</s>")  # ids 0, 1, 2: llama.cpp's SPM defaults


class ExportError(ValueError):
    """A checkpoint this exporter cannot write as a llama-arch GGUF, with the reason."""


def permute_rotary(weight: np.ndarray, n_heads: int) -> np.ndarray:
    """HF rotate-half rows -> llama.cpp interleaved pairs, per head (the inverse of HF's conversion)."""
    rows = weight.shape[0]
    return weight.reshape(n_heads, 2, rows // n_heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def read_checkpoint(checkpoint_dir: str | Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """The checkpoint as the engine's loader reads it, with transformers' "model." prefix dropped."""
    try:
        config, state = read_engine_checkpoint(checkpoint_dir)
    except CheckpointError as e:
        raise ExportError(str(e)) from None
    return config, {k.removeprefix("model."): v for k, v in state.items()}


def export_gguf(checkpoint_dir: str | Path, out_path: str | Path, dtype: str = "f32") -> Path:
    """Write ``out_path``; ``dtype`` f32 or f16 for 2-D weights (norms and RoPE factors stay f32)."""
    import gguf  # optional peer dependency

    if dtype not in ("f32", "f16"):
        raise ExportError(f"dtype must be f32 or f16, got {dtype!r}")
    hf_config, state = read_checkpoint(checkpoint_dir)
    config = ModelConfig.from_hf(hf_config)
    if config.model_type not in EXPORTABLE or config.qkv_bias or config.o_bias or config.mlp_bias:
        raise ExportError(f"only bias-free {EXPORTABLE} checkpoints are exported, got {config.model_type!r}")
    out_path = Path(out_path)
    writer = gguf.GGUFWriter(str(out_path), ARCH)
    _write_hparams(writer, gguf, config, dtype)
    _write_vocab(writer, config.vocab_size)
    for name, array in _tensors(config, state, dtype):
        writer.add_tensor(name, array)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out_path


def open_llama(gguf_path: str | Path, n_ctx: int, logits_all: bool = False, f32_kv: bool = False,
               n_threads: int = 2, n_batch: int = 512):
    """llama.cpp on ``gguf_path`` as it was measured on this machine: flash attention off on CPU, weights mmap'd
    (several instances share them). ``f32_kv`` keeps K/V in fp32 (parity tests); the default is
    llama.cpp's own f16 KV cache."""
    import llama_cpp  # optional peer dependency

    kv_type = {"type_k": llama_cpp.GGML_TYPE_F32, "type_v": llama_cpp.GGML_TYPE_F32} if f32_kv else {}
    return llama_cpp.Llama(model_path=str(gguf_path), n_ctx=n_ctx, n_batch=n_batch, n_ubatch=n_batch,
                           n_threads=n_threads, n_threads_batch=n_threads, flash_attn=False,
                           logits_all=logits_all, verbose=False, **kv_type)


def _write_hparams(writer, gguf, config: ModelConfig, dtype: str) -> None:
    writer.add_name("flashtick-export")
    writer.add_context_length(config.max_positions)
    writer.add_embedding_length(config.hidden_size)
    writer.add_block_count(config.num_layers)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(config.num_heads)
    writer.add_head_count_kv(config.num_kv_heads)
    if config.head_dim * config.num_heads != config.hidden_size:
        writer.add_key_length(config.head_dim)
        writer.add_value_length(config.head_dim)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_rope_freq_base(float(config.rope["rope_theta"]))
    if config.rope["rope_type"] == "linear":
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(float(config.rope["factor"]))
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    writer.add_vocab_size(config.vocab_size)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32 if dtype == "f32" else gguf.LlamaFileType.MOSTLY_F16)


def _write_vocab(writer, vocab_size: int) -> None:
    if vocab_size < len(SPECIAL):
        raise ExportError(f"vocab_size {vocab_size} is below the {len(SPECIAL)} special tokens llama.cpp expects")
    tokens = list(SPECIAL) + [f"<t{i}>" for i in range(len(SPECIAL), vocab_size)]
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores([0.0] * vocab_size)
    writer.add_token_types([1] * vocab_size)  # NORMAL: the dummy ids behave as ordinary tokens
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(False)  # token ids are fed as they are
    writer.add_add_eos_token(False)


def _tensors(config: ModelConfig, state: dict[str, torch.Tensor], dtype: str):
    """(llama.cpp name, numpy array) in HF (out, in) layout; GGUF stores the reversed shape."""
    matrix = np.float32 if dtype == "f32" else np.float16

    def get(name: str, as_type=matrix) -> np.ndarray:
        if name not in state:
            raise ExportError(f"checkpoint lacks weight {name!r}")
        return state[name].to(torch.float32).numpy().astype(as_type)

    yield "token_embd.weight", get("embed_tokens.weight")
    yield "output_norm.weight", get("norm.weight", np.float32)
    if not config.tie_embeddings:
        yield "output.weight", get("lm_head.weight")
    if config.rope["rope_type"] == "llama3":
        plain = dataclasses.replace(config, rope={"rope_type": "default", "rope_theta": config.rope["rope_theta"]})
        # llama.cpp divides each frequency by its factor: factor = unscaled / scaled
        yield "rope_freqs.weight", (rope_inv_freq(plain) / rope_inv_freq(config)).numpy().astype(np.float32)
    for i in range(config.num_layers):
        a, m, b = f"layers.{i}.self_attn.", f"layers.{i}.mlp.", f"blk.{i}."
        yield b + "attn_norm.weight", get(f"layers.{i}.input_layernorm.weight", np.float32)
        yield b + "attn_q.weight", permute_rotary(get(a + "q_proj.weight"), config.num_heads)
        yield b + "attn_k.weight", permute_rotary(get(a + "k_proj.weight"), config.num_kv_heads)
        yield b + "attn_v.weight", get(a + "v_proj.weight")
        yield b + "attn_output.weight", get(a + "o_proj.weight")
        yield b + "ffn_norm.weight", get(f"layers.{i}.post_attention_layernorm.weight", np.float32)
        yield b + "ffn_gate.weight", get(m + "gate_proj.weight")
        yield b + "ffn_up.weight", get(m + "up_proj.weight")
        yield b + "ffn_down.weight", get(m + "down_proj.weight")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", help="Hugging Face checkpoint directory (config.json + *.safetensors)")
    parser.add_argument("out", help="output .gguf path")
    parser.add_argument("--dtype", choices=("f32", "f16"), default="f32")
    args = parser.parse_args(argv)
    require_extra("peers", "gguf")
    path = export_gguf(args.checkpoint, args.out, args.dtype)
    print(f"gguf_export: {args.checkpoint} -> {path} ({path.stat().st_size / 2**20:.1f} MiB, {args.dtype})")


if __name__ == "__main__":
    main()
