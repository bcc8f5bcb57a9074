"""The streams a `flashtick train` checkpoint trained on (its evaluation.json's `trained_on.streams`), and what a run
says of a stream it scores or serves that is not among them (review443 #2: a model trained on ETHUSDT alone was
scored on BTCUSDT, and on EURUSD FX, and served on BTCUSDT, with no word, so a user could not tell a broken model
from an instrument it never saw). Its answers there, and the answer calibration and heads fitted on the streams it
trained on, are applied outside what it learnt: `evaluate` and `backtest` say so once, among their cautions; `serve`
says what it trained on at its start and gives the ``untrained_stream`` caveat to `ask` and `get` replies about such
a stream and to `health` while it holds one (the stream table keeps them as they come and go: `not_trained_on`).
Streams are matched as instruments (`ETH-USDT` is ETHUSDT: builtin_in_sample.instrument_key). A model that records
no streams (the built-in model, a Hugging Face one, a checkpoint from before they were kept) gets no such word.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from connectors.cautions import Caution
from engine.quoting import quoted
from engine.service.builtin_in_sample import instrument_key
from engine.service.reading_record import checkpoint_evaluation

UNTRAINED_STREAM = "untrained_stream"
NAMED = 3  # streams a line names, the rest counted


class TrainedStreams:
    """The streams a checkpoint trained on, read from its evaluation.json once (``names``: None where it records
    none, and then every stream counts as trained on)."""

    def __init__(self, model_path: Path | str | None) -> None:
        evaluation = checkpoint_evaluation(Path(model_path)) if model_path is not None else None
        recorded = ((evaluation or {}).get("trained_on") or {}).get("streams")
        self.names = sorted(map(str, recorded)) if isinstance(recorded, dict) and recorded else None
        self._keys = frozenset(map(instrument_key, self.names or ()))

    def trained(self, stream: str) -> bool:
        """Whether the model trained on ``stream``'s instrument (True for a model that records none)."""
        return self.names is None or instrument_key(stream) in self._keys

    @property
    def check(self) -> Callable[[str], bool] | None:
        """``trained``, for the stream table to keep the held streams not trained on (its ``trained_on``); None for
        a model that records no streams: none to keep."""
        return None if self.names is None else self.trained

    def note(self, streams: Iterable[str]) -> Caution | None:
        """`evaluate`'s and `backtest`'s caution naming the streams among ``streams`` the model never trained on (in
        name order); None when there is none."""
        untrained = sorted(stream for stream in streams if not self.trained(stream))
        return Caution(self.text(untrained[:NAMED], len(untrained))) if untrained else None

    def caveat(self, streams: list[str], count: int | None = None) -> list[dict[str, str]]:
        """The ``untrained_stream`` caveat of a reply about ``streams`` (an ask's or get's one; `health`: the first
        held streams not trained on, and ``count``, how many are held); [] when none is one."""
        untrained = [stream for stream in streams if not self.trained(stream)]
        if not untrained:
            return []
        return [{"kind": UNTRAINED_STREAM, "text": self.text(untrained[:NAMED], count or len(untrained))}]

    def start_note(self) -> str | None:
        """`serve`'s start line on the streams the model trained on; None for a model that records none."""
        if self.names is None:
            return None
        return (f"this model was trained on {self._named(self.names, len(self.names))} (its evaluation.json's "
                f"trained_on.streams): its answers on any other, and ask, get and health replies about one, carry an "
                f"{UNTRAINED_STREAM} caveat (docs/model.md, Streams trained on)")

    def text(self, untrained: list[str], count: int) -> str:
        """The words of the note and the caveat: ``untrained``, the first of ``count`` streams not trained on."""
        are = "is" if count == 1 else "are"
        trained = ", ".join(map(quoted, self.names[:NAMED])) + self._more(len(self.names))
        return (f"{self._named(untrained, count)} {are} not among the streams this model was trained on ({trained}: "
                f"its evaluation.json's trained_on.streams): its answers there, calibrated and blended by answer heads "
                f"fitted on those streams, are outside what it learnt, so read its scores there as of another "
                f"instrument (a model trained on this one's ticks: flashtick train; docs/model.md, Streams trained on)")

    def _named(self, streams: list[str], count: int) -> str:
        return f"stream{'s' * (count > 1)} {', '.join(map(quoted, streams[:NAMED]))}{self._more(count)}"

    @staticmethod
    def _more(count: int) -> str:
        return f" and {count - NAMED} more" if count > NAMED else ""
