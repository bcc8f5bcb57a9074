"""Tokens a model's training never met, and the streams whose ticks carry one (review410 #1).

A token that never occurs in a model's training data keeps the embedding it was initialised with, so ticks encoded
with it are read as noise: the built-in model never saw `event:trade`, a trade without a side (every trade of its
synthetic, BTCUSDT and EURUSD data carried its aggressor side), and on a feed of such trades its `surprise` reads
~25-42 nats a tick, its own direction and move answers go near-constant. Which tokens those are is the model's
card's to say (TRAINING.md, a line of its own: ``- Never trained: `event:trade` (what it is, what to do)``), not
this code's: the card writers (train_builtin.py, finetune_card.py) name the event tokens no tick of their
training data held (`never_trained_line`), so a model trained on such ticks names none. `UntrainedTokens`
watches the ticks a run takes (the pipeline's, for `serve` and `backtest`; `evaluate`'s streams), says the first
stream that carries such a token once, in one line, and keeps which streams did for the ``untrained_token`` caveat
of their answers and replies.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from connectors.cautions import Caution
from engine.quoting import quoted
from engine.service.market_caveat import MODEL_CARD

UNTRAINED_TOKEN = "untrained_token"
# the card's line: the token names in backticks, then what a user sees of them and what to do
NEVER_TRAINED = re.compile(r"^- Never trained: ((?:`[^`]+`,? ?)+)(.+)$")
NAMED = 3  # streams a health reply's caveat names, the rest counted


def never_trained(model_dir: Path | str | None, codec: Any) -> dict[int, str]:
    """Token id -> what the model's card says of it, for each token its `- Never trained:` lines name that is in
    the codec's vocabulary; {} for a card without such a line, or a model without a card (a Hugging Face one)."""
    from engine.models.loader import BUILTIN_MODEL_DIR

    names = getattr(codec, "names", None)  # (a binned codec's vocabulary; a text codec has none to name)
    if not names:
        return {}
    try:
        card = (Path(model_dir or BUILTIN_MODEL_DIR) / MODEL_CARD).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    ids = {name: i for i, name in enumerate(names)}
    said = {}
    # (a card's line runs on over the indented lines under it)
    lines = [" ".join(entry.split()) for entry in re.split(r"\n(?=\S)", card)]
    for found in filter(None, map(NEVER_TRAINED.match, lines)):
        for name in re.findall(r"`([^`]+)`", found[1]):
            if name in ids:
                said[ids[name]] = f"{name} {found[2].strip()}"
    return said


def never_trained_line(names: list[str]) -> str:
    """A model card's line naming the tokens its training data never held (`train_data.untrained_events`), as
    `never_trained` reads it back, with a newline; "" for none."""
    if not names:
        return ""
    tokens = ", ".join(f"`{name}`" for name in names)
    it, its = ("it", "its embedding is") if len(names) == 1 else ("them", "their embeddings are")
    return (f"- Never trained: {tokens}: no tick of the data above encodes to {it}, so {its} as initialised "
            f"and ticks that carry {it} read as noise (`surprise` far above a trained token's, the model's own "
            f"answers near-constant): a model trained on such ticks reads them (`flashtick train FILES --out DIR`, "
            f"then `--model DIR`; docs/model.md, \"Tokens never trained\")\n")


class UntrainedTokens:
    """The tokens a model never trained on (`never_trained`) and the streams whose ticks carried one since they
    started (dropped with their context: `drop`). ``say`` is told the first such stream, once."""

    def __init__(self, model_dir: Path | str | None, codec: Any, say: Callable[[str], None]) -> None:
        self.said = never_trained(model_dir, codec)
        self.ids = frozenset(self.said)
        self.streams: dict[str, int] = {}  # stream -> the first such token its ticks carried
        self.say = say

    def accepted(self, stream: str, tokens: Iterable[int]) -> None:
        """Ticks of ``stream`` taken, as their ``tokens``: the first stream to carry an untrained token is said."""
        if not self.ids or stream in self.streams or self.ids.isdisjoint(tokens):
            return
        first = not self.streams
        self.streams[stream] = token = next(token for token in tokens if token in self.ids)
        if first:
            self.say(Caution(self._text(f"stream {quoted(stream)}", token)))

    def drop(self, stream: str) -> None:
        self.streams.pop(stream, None)

    def caveat(self, stream: str) -> list[dict[str, str]]:
        """The ``untrained_token`` caveat of ``stream``'s answers, when its ticks carried such a token."""
        if stream not in self.streams:
            return []
        return [{"kind": UNTRAINED_TOKEN, "text": self._text(f"stream {quoted(stream)}", self.streams[stream])}]

    def held_caveat(self) -> list[dict[str, str]]:
        """A `health` reply's ``untrained_token`` caveat: the first streams held whose ticks carried such a token."""
        if not self.streams:
            return []
        first = list(self.streams)[:NAMED]
        more = f" and {len(self.streams) - NAMED} more" if len(self.streams) > NAMED else ""
        named = f"stream{'s' if len(self.streams) > 1 else ''} {', '.join(map(quoted, first))}{more}"
        return [{"kind": UNTRAINED_TOKEN, "text": self._text(named, self.streams[first[0]])}]

    def _text(self, named: str, token: int) -> str:
        return f"{named} sent a token this model never met in training ({MODEL_CARD}): {self.said[token]}"
