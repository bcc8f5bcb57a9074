"""The caveat of a spot-trained model answering a derivatives stream (review310 #7): a stream whose name says a
perpetual, a dated future, a swap or an option (by connectors/futures_codes.py's rule, the one `health`'s list of
derivative streams uses: `BTCUSDT_PERP`, `BTC-PERPETUAL`, `BTC-USD-SWAP`, `BTC-29MAR24`, an exchange's contract code
`ESM4`, `FDXM5`, `NK225M2406`, a spread of two `CLZ4-CLF5`, `FESX 12.2024`, `FDXc1`, `BTC-27DEC24-60000-C`), served
by a model whose card (TRAINING.md beside its weights) lists training data of spot markets only: its words name no
derivatives market and its streams (`- `NAME`: ... ticks`, as `flashtick train` writes them) no derivative by that
rule. Funding, basis,
expiry and an option's premium are nothing such a model learnt, so its answers there are out of its training's
distribution. Said at `serve`'s start and in the `caveats` of ask, get and health replies (reply_caveats.py), and by
a backtest of such streams, among its warnings (``backtest_caveat``; review431 #5: the offline run, where a desk
decides whether to trust the model, said nothing of it); a model trained on derivatives gets no such caveat, and
`serve`'s start says what it was trained on."""

from __future__ import annotations

import re
from pathlib import Path

from connectors.futures_codes import derivative_kind

SPOT_TRAINED_MODEL = "spot_trained_model"
MODEL_CARD = "TRAINING.md"
# what a card's data lines say of a derivatives market, when it trained on one
DERIVATIVE_WORDS = re.compile(r"(?i)perp|swap|future|option|delivery|[-_]\d{6}\b|-[CP]\b")
DATA_START = re.compile(r"^- Data\b")
DATA_END = re.compile(r"^- (Training|Final|Serving|Model|Steps|Seed|Hardware)\b")  # the card's next top-level line


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


# a stream trained on, as a card of `flashtick train` lists it under its split: "  - `CLK0`: 2444 ticks; ..."
CARD_STREAM = re.compile(r"^\s+- `([^`]+)`: \d")


def trained_derivatives(model_dir: Path | str | None) -> list[tuple[str, str]]:
    """The streams a model's card lists as trained on whose names say a derivative, with what each is."""
    data = card_data(model_dir) or ""
    return [(found[1], kind) for line in data.splitlines()
            if (found := CARD_STREAM.match(line)) and (kind := derivative_kind(found[1])) is not None]


def spot_only(model_dir: Path | str | None) -> bool:
    """Whether the model's card lists training data and none of it is a derivatives market's."""
    data = card_data(model_dir)
    return data is not None and not DERIVATIVE_WORDS.search(data) and not trained_derivatives(model_dir)


def start_note(model_dir: Path | str | None = None) -> str | None:
    """`serve`'s start line on the markets a model was trained on: a spot-trained one's caveat and the names it is
    given on (the rule's shapes: futures_codes.py), or what a model trained on derivatives was trained on (review374
    #10: a CL model fine-tuned on CLK0 was called spot-trained); None for a model whose card says neither."""
    if spot_only(model_dir):
        return (f"this model's card ({MODEL_CARD}) lists training data of spot markets only: a stream whose name "
                f"says a perpetual, future, swap or option (BTCUSDT_PERP, BTC-PERPETUAL, BTC-USD-SWAP, BTC-29MAR24, "
                f"an exchange's futures code such as ESM4, FDXM5, NK225M2406 or a spread CLZ4-CLF5, a product and "
                f"its month FESX 12.2024, a continuation RIC FDXc1, "
                f"BTC-27DEC24-60000-C, India's NIFTY24DECFUT and NIFTY24DEC24000CE) is out of its training's "
                f"distribution, and ask, get and health replies about one carry a {SPOT_TRAINED_MODEL} caveat "
                f"(docs/model.md)")
    if not (trained := trained_derivatives(model_dir)):
        return None
    named = ", ".join(f"{stream} ({kind})" for stream, kind in trained[:3]) + \
        (f" and {len(trained) - 3} more" if len(trained) > 3 else "")
    return (f"this model's card ({MODEL_CARD}) lists training data of {named}: not spot markets only, so no reply "
            f"carries the {SPOT_TRAINED_MODEL} caveat; its answers on other instruments (spot markets, other "
            f"contracts) are outside what it was trained on (docs/model.md)")


def stream_caveat(streams: list[str], count: int | None = None) -> dict[str, str] | None:
    """The caveat for the derivative streams among ``streams`` (the first three named), None when there is none;
    ``count``: how many there are in all, when ``streams`` holds only the first of them (`health`'s, from the
    stream table's ``derivatives``). For a spot-trained model only (the caller asks `spot_only`)."""
    named = [(stream, kind) for stream in streams if (kind := derivative_kind(stream)) is not None]
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


def backtest_caveat(model_dir: Path | str | None, streams: list[str]) -> str | None:
    """A backtest's warning of a spot-trained model answering the derivative streams among ``streams``, in the
    words of the live caveat (``stream_caveat``); None where the model is no spot-trained one or none is."""
    caveat = stream_caveat(streams) if spot_only(model_dir) else None
    return None if caveat is None else f"{SPOT_TRAINED_MODEL}: {caveat['text']}"
