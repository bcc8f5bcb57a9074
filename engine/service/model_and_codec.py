"""The model a service runs and the codec that turns its ticks into tokens, built from the config's `model:` and
`codec:` sections and checked against each other (vocabulary, header ids, device), with the checkpoint's answer
heads. One engine (pipeline.py), a shard (shard.py) and the sharded front door (sharded.py) all load them here, so
a checkpoint is read and refused the same way whichever runs it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from connectors.builtin import load_builtin_codec, load_codec
from connectors.codec import Codec
from connectors.text_codec import TextCodec, TextCodecConfig
from engine.models import BUILTIN_MODEL_DIR, LlamaModel, load_model
from engine.models.linear import bound_kernel_cache
from engine.models.loader import model_config, read_config
from engine.quoting import quoted
from engine.service.config import ConfigError, ServiceConfig
from engine.service.features import read_head
from engine.text_files import read_text

TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json")
TEMPLATE_KEYS = ("trade_template", "quote_template")  # codec: keys only the text codec reads
BINNED_BY = {"auto": "codec.kind auto, for the built-in model or a checkpoint with codec.json",
             "binned": "codec.kind: binned"}


def build_codec(config: ServiceConfig) -> Codec:
    """BinnedCodec for the built-in model (or a checkpoint that ships codec.json), else a TextCodec."""
    path = config.model.path
    kind = config.codec.kind
    if kind == "auto":
        kind = "binned" if path is None or (Path(path) / "codec.json").is_file() else "text"
    # (`is not None`, not `or`: an empty template is refused for its missing newline, not swapped for the default)
    templates = {name: value for name in TEMPLATE_KEYS if (value := getattr(config.codec, name)) is not None}
    if kind == "binned":
        if templates:  # a template the binned codec never reads would be believed in effect (review261 #2)
            keys = " and ".join(f"codec.{name}" for name in templates)
            raise ConfigError(f"{keys} {'apply' if len(templates) > 1 else 'applies'} only to the text codec (a "
                              f"Hugging Face model's); this model's codec is binned ({BINNED_BY[config.codec.kind]}),"
                              f" which reads no template: remove it, or serve a text model (--model DIR)")
        if path is None:
            return load_builtin_codec()
        spec = Path(path) / "codec.json"
        if not spec.is_file():
            raise ConfigError(f"codec.kind: binned needs {spec} (the tick codec a `flashtick train` checkpoint "
                              f"ships); a text model takes codec.kind: text (or auto)")
        return load_codec(Path(path))  # with the checkpoint's calibration.json, when it ships one
    if path is None:
        raise ConfigError("codec.kind: text needs model.path (a Hugging Face checkpoint with a tokenizer)")
    return TextCodec(load_tokenizer(Path(path)), TextCodecConfig(**templates), end_tokens=eos_token_ids(Path(path)))


def eos_token_ids(path: Path) -> set[int]:
    """The end-of-sequence ids a checkpoint declares in config.json and generation_config.json (an int or a
    list each: Llama 3 instruct models end a turn with one of several); generation stops at any of them."""
    ids: set[int] = set()
    for name in ("config.json", "generation_config.json"):
        file = path / name
        value = json.loads(read_text(file)).get("eos_token_id") if file.is_file() else None
        ids.update(v for v in (value if isinstance(value, list) else [value]) if type(v) is int and v >= 0)
    return ids

def load_tokenizer(path: Path) -> Any:
    """The checkpoint's own tokenizer, from its files only (never the hub), or an error that says what to do."""
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise ConfigError(f"{path}: no tokenizer files ({', '.join(TOKENIZER_FILES)}): the text codec writes ticks "
                          f"as text and needs the model's own tokenizer; copy them from where the checkpoint "
                          f"came from (save_pretrained of its tokenizer writes them)")
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    # transformers' own warnings on the config it reads for the tokenizer (ids past the vocabulary, a model_type
    # it does not know) are silenced while it loads, the verbosity restored after: errors are one line, ours
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        return AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as e:  # transformers raises many types, with multi-line messages
        reason = " ".join(str(e).split()) or type(e).__name__
        raise ConfigError(f"{path}: cannot load its tokenizer: {reason}") from None
    finally:
        hf_logging.set_verbosity(verbosity)


def load_model_and_codec(config: ServiceConfig) -> tuple[LlamaModel, Codec]:
    """The model and the codec that feeds it, checked against each other; the codec first (it is cheap)."""
    if config.model.path is not None:
        # a missing directory is named as such, not as a missing tokenizer; an unsupported model (GPT-2, a GELU MLP)
        # is refused before transformers reads its config for the tokenizer and warns about what it found there
        model_config(Path(config.model.path), read_config(Path(config.model.path)))
    codec = build_codec(config)
    device = config.model.device
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"model.device {quoted(device)}: this torch ({torch.__version__}) sees no CUDA device (a CPU "
                          f"build, or no GPU visible): use model.device cpu")
    bound_kernel_cache(config.model.kernel_cache)  # before the model's first oneDNN kernel, which reads it
    model = load_model(config.model.path, getattr(torch, config.model.dtype), device, config.model.weights)
    vocab = model.config.vocab_size
    if codec.vocab_size > vocab:
        what = "the tokenizer" if isinstance(codec, TextCodec) else "codec.json"
        raise ConfigError(f"{config.model.path}: {what} has {codec.vocab_size} tokens but the model's vocab_size is "
                          f"{vocab}: it does not belong to this model")
    if outside := [t for t in config.scheduler.header if not 0 <= t < vocab]:
        verb = "is not a token id" if len(outside) == 1 else "are not token ids"
        raise ConfigError(f"scheduler.header: {outside[:5]} {verb} of this model (ids 0..{vocab - 1}; vocab_size "
                          f"{vocab})")
    return model, codec


def answer_heads(config: ServiceConfig, codec: Codec) -> dict[str, Any]:
    """The checkpoint's answer heads (answer_head.json, written by `flashtick train`), part of its answers;
    none for a checkpoint without them (the built-in model, a text model). A damaged file is a ConfigError."""
    try:
        return read_head(Path(config.model.path) if config.model.path else BUILTIN_MODEL_DIR, codec)
    except ValueError as e:
        raise ConfigError(str(e)) from None
