"""The codec of the built-in tick model, which ships in engine/models/builtin (engine.models.BUILTIN_MODEL_DIR)."""

from __future__ import annotations

from connectors.codec import BinnedCodec
from engine.models import BUILTIN_MODEL_DIR


def load_builtin_codec() -> BinnedCodec:
    """The BinnedCodec the built-in model was trained with (from its codec.json)."""
    path = BUILTIN_MODEL_DIR / "codec.json"
    if not path.is_file():
        raise FileNotFoundError(f"built-in codec spec missing at {path}; run python -m engine.service.train")
    return BinnedCodec.from_json(path.read_text())
