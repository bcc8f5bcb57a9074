"""The caveat of a spot-trained model answering a derivatives stream (review310 #7): a stream whose name says a
perpetual, a dated future, a swap or an option (by connectors/derivative_streams.py's rule: `BTCUSDT_PERP`,
`BTC-PERPETUAL`, `BTC-USD-SWAP`, `BTC-29MAR24`, `BTC-27DEC24-60000-C`), served by a model whose card (TRAINING.md
beside its weights) lists training data of spot markets only. Funding, basis, expiry and an option's premium are
nothing such a model learnt, so its answers there are out of its training's distribution. Said at `serve`'s start
and in the `caveats` of ask, get and health replies (reply_caveats.py)."""

from __future__ import annotations

import re
from pathlib import Path

from connectors.option_names import MARKED, is_option_name

SPOT_TRAINED_MODEL = "spot_trained_model"
MODEL_CARD = "TRAINING.md"
# what a card's data lines say of a derivatives market, when it trained on one
DERIVATIVE_WORDS = re.compile(r"(?i)perp|swap|future|option|delivery|[-_]\d{6}\b|-[CP]\b")
DATA_START = re.compile(r"^- Data\b")
DATA_END = re.compile(r"^- (Training|Final|Serving|Model|Steps|Seed|Hardware)\b")  # the card's next top-level line


def kind_of(stream: str) -> str | None:
    """What derivative a stream's name says it is ("an option", "a perpetual", ...), None for any other name."""
    if not re.search(MARKED, stream):
        return None
    if is_option_name(stream):  # BTC-27DEC24-60000-C, OSI's `AAPL  261218C00150000`, Polygon's `O:AAPL...`
        return "an option"
    if re.search(r"(?i)perp", stream):
        return "a perpetual"
    return "a swap" if re.search(r"(?i)swap", stream) else "a dated future"


def card_data(model_dir: Path | str | None) -> str | None:
    """The data lines of a model's card (from `- Data` to the card's next top-level line); None without a card."""
    from engine.models.loader import BUILTIN_MODEL_DIR

    card = Path(model_dir or BUILTIN_MODEL_DIR) / MODEL_CARD
    try:
        lines = card.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    start = next((i for i, line in enumerate(lines) if DATA_START.match(line)), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if DATA_END.match(lines[i])), len(lines))
    return "\n".join(lines[start:end])


def spot_only(model_dir: Path | str | None) -> bool:
    """Whether the model's card lists training data and none of it is a derivatives market's."""
    data = card_data(model_dir)
    return data is not None and not DERIVATIVE_WORDS.search(data)


def start_note() -> str:
    """`serve`'s start line for a spot-trained model."""
    return (f"this model's card ({MODEL_CARD}) lists training data of spot markets only: a stream whose name says "
            f"a perpetual, future, swap or option (BTCUSDT_PERP, BTC-PERPETUAL, BTC-USD-SWAP, BTC-29MAR24, "
            f"BTC-27DEC24-60000-C) is out of its training's distribution, and ask, get and health replies about one "
            f"carry a {SPOT_TRAINED_MODEL} caveat (docs/model.md)")


def stream_caveat(streams: list[str], count: int | None = None) -> dict[str, str] | None:
    """The caveat for the derivative streams among ``streams`` (the first three named), None when there is none;
    ``count``: how many there are in all, when ``streams`` holds only the first of them (`health`'s, from the
    stream table's ``derivatives``). For a spot-trained model only (the caller asks `spot_only`)."""
    named = [(stream, kind) for stream in streams if (kind := kind_of(stream)) is not None]
    if not named:
        return None
    total = len(named) if count is None else count
    said = "; ".join(f"{stream} is {kind}" for stream, kind in named[:3]) + \
        (f"; and {total - 3} more" if total > 3 else "")
    return {"kind": SPOT_TRAINED_MODEL, "text": (
        f"by {'its name' if total == 1 else 'their names'}, {said}: this model was trained on spot markets only "
        f"(its card, {MODEL_CARD}): funding, "
        f"basis, expiry and an option's premium are nothing it learnt, so its answers there are out of its "
        f"training's distribution (docs/model.md)")}
