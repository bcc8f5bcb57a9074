"""The model a training run starts from and the checkpoint it leaves: `new_model` builds a fresh Llama of a
TrainConfig's sizes (seeded), `save_model` writes the checkpoint folder serving loads (model.safetensors through its
temporary name, config.json, codec.json and the codec's calibration.json). The built-in model's recipe
(engine/service/train_builtin.py) and `flashtick train` (engine/service/finetune.py, cmd_train.py's WEIGHTS_FILE
check) both build and write their models here.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformers import LlamaConfig, LlamaForCausalLM

from connectors.calibration import CALIBRATION_FILE
from connectors.codec import BinnedCodec
from engine.disk_full import DiskFull, free_bytes, space_left
from engine.path_words import shown_path
from engine.rust_paths import rust_path
from engine.service.output_paths import write_atomically, write_text_atomically
from engine.service.train_config import TrainConfig


def model_config(cfg: TrainConfig, vocab_size: int) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=cfg.hidden,
        intermediate_size=cfg.intermediate,
        num_hidden_layers=cfg.layers,
        num_attention_heads=cfg.heads,
        num_key_value_heads=cfg.kv_heads,
        max_position_embeddings=cfg.max_positions,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=None,
        eos_token_id=None,
        attn_implementation="sdpa",
    )


WEIGHTS_FILE = "model.safetensors"  # written through its temporary name: `train` checks that name before any work


def save_model(model: LlamaForCausalLM, codec: BinnedCodec, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu", torch.float32).contiguous() for k, v in model.state_dict().items()}

    def write(tmp: Path) -> None:
        save_file(state, rust_path(tmp), metadata={"format": "pt"})
        tmp.chmod(0o666 & ~current_umask())  # safetensors writes 0600: a reader of config.json could not read these

    write_atomically(out_dir / WEIGHTS_FILE, write)
    # every file through the one writer, so a full disk is said naming the file whichever it is (config.json said
    # "[Errno 28] No space left on device"); the text is what config.to_json_file and write_calibration write
    write_text_atomically(out_dir / "config.json", model.config.to_json_string())
    write_text_atomically(out_dir / "codec.json", codec.to_json() + "\n")
    # The codec's calibration belongs to these weights: a fresh model's is identity (fit it with
    # engine/service/calibrate.py); never leave a calibration.json fitted to other weights behind.
    write_text_atomically(out_dir / CALIBRATION_FILE, codec.calibration.to_json() + "\n")


def weights_bytes(model: LlamaForCausalLM) -> int:
    """The bytes of the weights save_model writes (float32, whatever the model's dtype): the least its checkpoint
    takes on disk (its header and the JSON files beside it are a few kB more)."""
    return 4 * sum(tensor.numel() for tensor in model.state_dict().values())


def check_room(model: LlamaForCausalLM, out_dir: Path) -> None:
    """DiskFull when the file system of ``out_dir`` (the staging folder beside --out) has less free space than
    ``model``'s weights take, before any training: a run trained to the end, then failed writing the weights and
    threw them away (review442 #11: 50 s there, the README's --max-minutes 10 on a quota'd disk)."""
    needed, free = weights_bytes(model), free_bytes(out_dir)
    if free is None or free >= needed:
        return
    full = DiskFull(f"no room for the checkpoint in {shown_path(out_dir.parent)}: its weights take {needed:,} bytes "
                    f"and there are {space_left(out_dir.parent)}; free space there, or give --out on a disk with "
                    f"room (nothing was read or trained)")
    full.errno = errno.ENOSPC  # (given as OSError's first argument, it would print as "[Errno 28] ...")
    raise full


def current_umask() -> int:
    """The process's umask (read by setting it: the moment between is one no file of ours is made in)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def new_model(cfg: TrainConfig, vocab_size: int) -> LlamaForCausalLM:
    torch.manual_seed(cfg.seed)
    return LlamaForCausalLM(model_config(cfg, vocab_size))
