"""What the query layer needs of the serving codec, as Protocols.

queries/ must not import connectors/, so the codec's query-side surface is
declared here and connectors' codecs (BinnedCodec, TextCodec) satisfy it
structurally. Every codec answers every member; a codec that cannot do
something says so through the member's result, never by lacking the member.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from queries.codec_questions import NamedQuestion


class AnswerCalibration(Protocol):
    """How a checkpoint's answer logits z are read: softmax(z / temperature + bias), one bias per label
    in the question's label order (empty: zeros). Fitted per checkpoint (connectors/calibration.py)."""

    @property
    def temperature(self) -> float: ...

    @property
    def bias(self) -> Sequence[float]: ...


@runtime_checkable
class CodecQuestion(NamedQuestion, Protocol):
    """A named question as the codec tokenized it: probe `tokens`, one answer token per label, and the
    calibration its answers are read with."""

    @property
    def calibration(self) -> AnswerCalibration: ...

    @property
    def tokens(self) -> Sequence[int]: ...

    @property
    def answers(self) -> Mapping[str, int]: ...  # label -> answer token id


@runtime_checkable
class QueryCodec(Protocol):
    """The serving codec, seen from queries: named questions, free-text tokenizing, decoding."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def questions(self) -> Mapping[str, CodecQuestion]:
        """Named questions by name; empty for a codec whose questions are free text."""
        ...

    @property
    def scored_questions(self) -> Mapping[str, NamedQuestion]:
        """The named questions a free-text choice query may be scored as (`scored_as`): a text model's; empty for a
        tick model, whose queries name their question."""
        ...

    @property
    def end_tokens(self) -> frozenset[int]:
        """Token ids that end a generated answer (the model's end of sequence); empty when there are none."""
        ...

    @property
    def question_overlap(self) -> int:
        """How many of a stream's last tokens a free-text question's tokens stand in for: the probe is evaluated
        after the session's tokens less these (a tokenizer that merges the question's start into the line's end)."""
        ...

    def question_tokens(self, text: str) -> list[int] | None:
        """Probe tokens of a free-text question, as it follows a stream's ticks; None when the codec
        cannot tokenize free text (ask one of `questions` by name instead)."""
        ...

    def label_tokens(self, text: str) -> list[int] | None:
        """Tokens of a free-text answer choice or value label, as it follows the question; None as above."""
        ...

    def decode(self, tokens: Sequence[int]) -> str:
        """Readable text of generated tokens."""
        ...
