"""The codec of a tick-model checkpoint directory (codec.json and, when present, calibration.json), and of
the built-in model, which ships in engine/models/builtin (engine.models.BUILTIN_MODEL_DIR)."""

from __future__ import annotations

from pathlib import Path

from connectors.calibration import read_calibration
from connectors.codec import BinnedCodec
from engine.models import BUILTIN_MODEL_DIR
from engine.text_files import read_text


def load_codec(model_dir: Path) -> BinnedCodec:
    """A checkpoint's BinnedCodec with the answer calibration fitted to its weights (none: uncalibrated)."""
    path = Path(model_dir) / "codec.json"
    if not path.is_file():
        raise FileNotFoundError(f"no codec.json in {model_dir}")
    text = read_text(path)  # (a file that is not UTF-8 is refused there, naming it)
    try:
        codec = BinnedCodec.from_json(text)
    except ValueError as e:  # (a JSON syntax error too): which checkpoint's file, as calibration.json's are said
        raise ValueError(f"{path}: {e}") from None
    return codec.with_calibration(read_calibration(Path(model_dir)))


def load_builtin_codec() -> BinnedCodec:
    """The BinnedCodec the built-in model was trained with (from its codec.json), with its calibration."""
    if not (BUILTIN_MODEL_DIR / "codec.json").is_file():
        raise FileNotFoundError(f"built-in codec spec missing at {BUILTIN_MODEL_DIR / 'codec.json'}; "
                                f"run python -m engine.service.train_builtin")
    return load_codec(BUILTIN_MODEL_DIR)
