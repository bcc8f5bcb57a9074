"""Where the built-in tick model ships: engine/models/builtin (config.json, model.safetensors, codec.json)."""

from __future__ import annotations

from pathlib import Path

from connectors.codec import BinnedCodec

_BUILTIN = Path(__file__).resolve().parent.parent / "engine" / "models" / "builtin"


def builtin_model_dir() -> Path:
    """Directory of the built-in model, loadable by LlamaForCausalLM.from_pretrained and the engine loader."""
    return _BUILTIN


def load_builtin_codec() -> BinnedCodec:
    """The BinnedCodec the built-in model was trained with (from its codec.json)."""
    path = _BUILTIN / "codec.json"
    if not path.is_file():
        raise FileNotFoundError(f"built-in codec spec missing at {path}; run python -m engine.service.train")
    return BinnedCodec.from_json(path.read_text())
