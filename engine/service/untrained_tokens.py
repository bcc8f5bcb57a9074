"""Tokens a model's training never met, and the streams whose ticks carry one (review410 #1).

A token that never occurs in a model's training data keeps the embedding it was initialised with, so ticks encoded
with it are read as noise: the built-in model never saw `event:trade`, a trade without a side (every trade of its
synthetic, BTCUSDT and EURUSD data carried its aggressor side), and on a feed of such trades its `surprise` reads
~25-42 nats a tick, its own direction and move answers go near-constant. Which tokens those are is the model's
card's to say (TRAINING.md, a line of its own: ``- Never trained: `event:trade` (what it is, what to do)``), not
this code's: the card writers (train_builtin.py, finetune_card.py) name the event tokens no tick of their
training data held (`never_trained_line`), so a model trained on such ticks names none. `UntrainedTokens`
watches the ticks a run takes (the pipeline's, for `serve` and `backtest`; `evaluate`'s streams), counts per stream
its ticks and those that carry such a token, says the first stream whose ticks carry it materially once, in one
line (`serve`'s log; a backtest and `evaluate` name every such stream once their ticks are read: `held_caveat`,
review440 #7), and gives the ``untrained_token`` caveat to the answers and replies of the streams that do. A
handful among many (an auction's side-less print in a day of sided trades, review433 #4) is no stream of such ticks.
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
# A stream's ticks carry an untrained token materially when this share of them or more do, and this many or every one
# so far: a fully side-less feed from its first tick, never an auction's print or two among thousands of sided trades
UNTRAINED_SHARE = 0.05
UNTRAINED_TICKS = 10


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


class StreamTicks:
    """A stream's ticks since it started, those that carried an untrained token, and the first such token."""

    def __init__(self) -> None:
        self.ticks = 0
        self.untrained = 0
        self.token: int | None = None

    @property
    def material(self) -> bool:
        """Whether its ticks carry an untrained token materially (UNTRAINED_SHARE, UNTRAINED_TICKS)."""
        return self.untrained >= UNTRAINED_SHARE * self.ticks and self.untrained > 0 and \
            (self.untrained >= UNTRAINED_TICKS or self.untrained == self.ticks)


class UntrainedTokens:
    """The tokens a model never trained on (`never_trained`) and, per stream since it started (dropped with its
    context: `drop`), its ticks and those that carried one. ``say`` is told once of the first stream whose ticks
    carry one materially, UNTRAINED_TICKS of them at least (None: nothing said as ticks come)."""

    def __init__(self, model_dir: Path | str | None, codec: Any, say: Callable[[str], None] | None) -> None:
        self.said = never_trained(model_dir, codec)
        self.ids = frozenset(self.said)
        # a tick's event token (`event:buy`, `event:q_same`, ...): one a tick, what its ticks are counted by
        self.events = frozenset(i for i, name in enumerate(getattr(codec, "names", None) or ())
                                if name.startswith("event:")) if self.ids else frozenset()
        self.counts: dict[str, StreamTicks] = {}
        self.say: Callable[[str], None] | None = say  # (None once said)

    def accepted(self, stream: str, tokens: Iterable[int]) -> None:
        """Ticks of ``stream`` taken, as their ``tokens``, counted; said of the first stream whose ticks carry an
        untrained token materially."""
        if not self.ids:
            return
        counts = self.counts.setdefault(stream, StreamTicks())
        for token in tokens:
            if token in self.events:
                counts.ticks += 1
            if token in self.ids:
                counts.untrained += 1
                counts.token = token if counts.token is None else counts.token
        if self.say is not None and counts.material and counts.untrained >= UNTRAINED_TICKS:
            self.say(Caution(self._text(f"stream {quoted(stream)}", counts.token)))
            self.say = None

    def drop(self, stream: str) -> None:
        self.counts.pop(stream, None)

    @property
    def streams(self) -> dict[str, int]:
        """Stream -> the first untrained token of those whose ticks carry one materially."""
        return {stream: counts.token for stream, counts in self.counts.items() if counts.material}

    def caveat(self, stream: str) -> list[dict[str, str]]:
        """The ``untrained_token`` caveat of ``stream``'s answers, when its ticks carry such a token materially."""
        counts = self.counts.get(stream)
        if counts is None or not counts.material:
            return []
        return [{"kind": UNTRAINED_TOKEN, "text": self._text(f"stream {quoted(stream)}", counts.token)}]

    def held_caveat(self) -> list[dict[str, str]]:
        """A `health` reply's ``untrained_token`` caveat: the first streams held whose ticks carry such a token."""
        if not (streams := self.streams):
            return []
        first = list(streams)[:NAMED]
        more = f" and {len(streams) - NAMED} more" if len(streams) > NAMED else ""
        named = f"stream{'s' if len(streams) > 1 else ''} {', '.join(map(quoted, first))}{more}"
        return [{"kind": UNTRAINED_TOKEN, "text": self._text(named, streams[first[0]])}]

    def _text(self, named: str, token: int) -> str:
        return f"{named} sent a token this model never met in training ({MODEL_CARD}): {self.said[token]}"
