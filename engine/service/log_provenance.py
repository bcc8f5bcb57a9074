"""What a data directory's logs depend on (its meta.json's `written_by`): the model, a fingerprint of its weights,
and the codec (for a text codec its tokenizer and how this code encodes with it). A restart with another of them
would read the logged tokens as other ticks, so the data directory is checked against this at every start."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import torch

from connectors.codec import BinnedCodec, Codec
from connectors.price_offsets import shown_offset
from connectors.text_codec import TextCodec
from engine.models import BUILTIN_MODEL_DIR
from engine.models.linear import resolve_format
from engine.models.loader import default_weights
from engine.service.answer_settings import answer_settings
from engine.service.config import ModelSection, ServiceConfig
from engine.service.file_samples import update_with_blocks
from engine.service.model_digest import MODEL_DIGEST, model_digest
from engine.service.reading_record import INGEST_PRICE_OFFSET, ingest_price_offset
from engine.settings import WEIGHT_FORMATS


def written_by(config: ServiceConfig, codec: Codec, window: int | None = None) -> dict[str, Any]:
    """What a data directory's logs depend on: the model and the codec that turned ticks into tokens (for a
    text codec also the tokenizer itself: two of one vocabulary size give other tokens for the same tick; and
    how this code encodes with it, `text_encoding`: another flashtick may write or tokenize the same line otherwise)."""
    model_dir = checkpoint_dir(config.model.path)
    meta = {"model": config.model.model_id, "codec": codec_fingerprint(codec),
            "weights": weights_fingerprint(model_dir),
            # every byte of every file that moves an answer (model_digest.py): written_with.json, where a change is
            # said and starts a new epoch; `weights` above is the sampled one every release compares (review349 #2)
            MODEL_DIGEST: model_digest(model_dir).record(),
            # (a change of either is said, not refused: data_dir_open._META_NOTED)
            "dtype": config.model.dtype, "linear_weights": linear_format(config.model),
            # (each noted when changed, as dtype is; the window as the engine resolved it, where one did: `window`)
            "settings": answer_settings(config) | ({"scheduler.window": window} if window is not None else {})}
    if isinstance(codec, TextCodec):
        meta |= {"tokenizer": codec.fingerprint(), "text_encoding": codec.encoding_record()}
    # the logged ticks hold prices shifted by it at ingest: `ticklog export` takes it off again. Written only when
    # there is one, so a flashtick before this key still opens a directory of a model without an offset
    if (offset := ingest_price_offset(config.model.path)) is not None:
        meta[INGEST_PRICE_OFFSET] = shown_offset(offset)
    return meta


def checkpoint_dir(path: str | None) -> Path:
    """The directory a model is loaded from: ``model.path``, or the built-in model's own for none."""
    return Path(path) if path else BUILTIN_MODEL_DIR


def codec_fingerprint(codec: Codec) -> str:
    """The codec's class and a digest of its spec: two codecs alike turn the same tick into the same tokens."""
    spec = codec.to_json() if isinstance(codec, BinnedCodec) else repr((dataclasses.asdict(codec.config),
                                                                        codec.vocab_size))
    return f"{type(codec).__name__}:{hashlib.sha256(spec.encode()).hexdigest()[:16]}"


def linear_format(model: ModelSection) -> str:
    """The format the model's linears compute in (engine/models/linear.py): ``model.weights``, or the one
    ``model.dtype`` gives when it is null; ``torch`` (nn.Linear as loaded) where none is chosen, and on CUDA, where
    the format is not applied. Recorded, not ``model.weights`` as written: null and its dtype's format compute alike,
    and ``float32`` is made concrete for this CPU (float32-onednn or float32-mkl: the same name computes otherwise on
    another vendor's CPU, and float32-onednn written out computes as float32 does here)."""
    if model.device != "cpu":
        return "torch"
    weights = model.weights or default_weights(getattr(torch, model.dtype)) or "torch"
    return resolve_format(weights) if weights in WEIGHT_FORMATS else weights


def weights_fingerprint(model_dir: Path, edge: int = 1 << 20) -> str:
    """meta.json's `weights`: each weights file's name, size and its first and last MiB. Sampled: it tells a
    retrained model (every tensor changes), not a fine-tune of one layer or a recalibration; model_digest.py's full
    digest does, and is the model's identity in records and answers. Kept because every release compares it."""
    digest = hashlib.sha256()
    for path in sorted(p for p in model_dir.iterdir() if p.suffix in (".safetensors", ".bin", ".pt", ".pth")):
        size = path.stat().st_size
        digest.update(f"{path.name}:{size}:".encode())
        with open(path, "rb") as f:
            update_with_blocks(digest, f, size, edge, 2)
    return digest.hexdigest()[:16]
