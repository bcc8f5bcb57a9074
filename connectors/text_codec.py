"""`TextCodec`, the codec of any Hugging Face LM: one text line per tick (connectors/text_templates.py writes it),
tokenized line by line, so a stream's tokens are the concatenation of per-tick encodings.

The other implementation of the codec seam (connectors/codec.py holds the interface and the tick-native
`BinnedCodec`).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from connectors.codec import Codec
from connectors.questions import DEFAULT_QUESTIONS, Question, QuestionSpec
from connectors.text_templates import SAMPLE_FIELDS, TEMPLATE_FIELDS, TextCodecConfig, template_values
from connectors.ticks import QUOTE, TRADE, Tick


@dataclass
class TextState:
    last_ts: int | None = None
    ticks: int = field(default=0)


# Ticks whose tokens a data directory records (TextCodec.encoding_record): a stream's first line and later ones,
# both kinds, a missing field, sub-millisecond gaps and floats a formatting change would write otherwise (exponents)
_RECORDED_TICKS = (
    Tick("X", 1_700_000_000_000_000_000, TRADE, price=100.5, size=2.0, side="buy"),
    Tick("X", 1_700_000_000_001_234_567, QUOTE, bid=100.25, ask=100.75),
    Tick("X", 1_700_000_000_001_300_000, QUOTE, bid=0.00009, ask=0.00011, bid_size=3.0, ask_size=4.0),
    Tick("X", 1_700_000_002_000_000_000, TRADE, price=1.23e-05, size=1e16, side="sell"),
    Tick("X", 1_700_000_002_000_000_000, TRADE, price=12345.678, size=0.5),
)


# Text a piece is encoded after when the tokenizer treats the start of a text apart (below): every tick line ends with
# one, so a line, a question or a label in a prompt follows text like it, never the start of the text.
CONTINUATION_ANCHOR = "\n"


class TextCodec(Codec):
    """One line of text per tick, each tokenized as its own piece with a Hugging Face tokenizer.

    `tokenizer` is a `transformers` tokenizer or a `tokenizers.Tokenizer`; special
    tokens are never added, so stream tokens = concatenation of per-line tokens
    and a session's prefix never changes when more ticks arrive. `end_tokens`: ids that end a
    generated answer besides the tokenizer's own eos (a checkpoint's config may list more).

    SentencePiece-style tokenizers (Llama 2, Mistral: a Metaspace pre-tokenizer, or the legacy Prepend("▁")
    normalizer) write a space before the start of a text, so a line tokenized on its own would begin with a
    "▁" that the same line inside a prompt does not have. Llama 3's and Qwen2's byte-level BPE pre-tokenize
    `\\s*[\\r\\n]+` as one piece, so a question starting with a newline after a line's is one "ĊĊ" token
    inside the prompt, not two. `encoding` says how lines and labels are tokenized, chosen once here from
    sample prompts: ``plain`` (each on its own) or ``continuation`` (a stream's first line as the start of the
    text, every other line and label after `CONTINUATION_ANCHOR`, whose tokens are dropped);
    `question_overlap` > 0 says a question is tokenized after the anchor, its tokens kept, and its probe stands
    in for the anchor's `question_overlap` tokens that end the line before it. Either way the concatenation
    equals the tokenizer's tokens of the concatenated text; a tokenizer no such choice serves is warned about.
    """

    def __init__(self, tokenizer: Any, config: TextCodecConfig | None = None, end_tokens: Iterable[int] = ()) -> None:
        self.tokenizer = tokenizer
        self.config = config or TextCodecConfig()
        eos = getattr(tokenizer, "eos_token_id", None)
        self.end_tokens = frozenset(end_tokens) | (frozenset() if eos is None else {eos})
        self.questions: Mapping[str, Question] = MappingProxyType({})  # questions are free text
        # ... whose choices a query may map to a named question's realised labels (`scored_as`): the built-in
        # questions, but the regime (its ground truth exists on synthetic data only)
        self.scored_questions: Mapping[str, QuestionSpec] = MappingProxyType(
            {q.name: q for q in DEFAULT_QUESTIONS if q.kind != "regime"})
        # Count added tokens too: they are valid ids the model must embed.
        if hasattr(tokenizer, "get_vocab_size"):  # tokenizers.Tokenizer
            self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        else:  # transformers tokenizer
            self.vocab_size = len(tokenizer)
        self._anchor = self._raw_tokens(CONTINUATION_ANCHOR)
        self.encoding, self.question_overlap = self._choose_encoding()
        # decoded once: a generate answer's text is decoded again at every token it adds (its stop strings)
        self._anchor_text = self.tokenizer.decode(self._anchor) if self.encoding == "continuation" else ""

    def _choose_encoding(self) -> tuple[str, int]:
        """The first (encoding, question overlap) under which every sample prompt's pieces are the tokenizer's
        tokens of the whole prompt: ``plain``, then ``continuation``, then ``plain`` with questions overlapping the
        anchor that ends the line before them; ``plain`` with a warning when none is."""
        prompts = [(prompt, self._raw_tokens("".join(text for text, _ in prompt))) for prompt in self._sample_prompts()]
        for encoding, overlap in (("plain", 0), ("continuation", 0), ("plain", len(self._anchor))):
            if all(self._piece_tokens(prompt, encoding, overlap) == whole for prompt, whole in prompts):
                return encoding, overlap
        warnings.warn("this tokenizer gives a tick line, question or label inside a prompt other tokens than any "
                      "piece-by-piece encoding of flashtick does (a piece merges with the text before it), so "
                      "answers differ from a forward over tokenizer(prompt): write templates whose lines end in a "
                      "letter or digit before their newline, questions that start with a newline or a letter and "
                      "labels that start with a space (docs/model.md, TextCodec)", stacklevel=2)
        return "plain", 0

    def _sample_prompts(self) -> list[list[tuple[str, str]]]:
        """Prompts as (piece, role) lists: lines of both kinds (and with every field missing) after one another,
        and each of them before a question, with and without its leading newline, and a label."""
        missing = {name: None for name in SAMPLE_FIELDS}
        lines = [(self.render_values(values, template), "line") for values in (SAMPLE_FIELDS, missing)
                 for template in (self.config.trade_template, self.config.quote_template)]
        first = [(lines[0][0], "first")]
        questions = [[("\nWill the price rise? Answer:", "question"), (" yes", "label")],
                     [("Will the price rise? Answer:", "question"), (" no", "label")]]
        return [first + lines] + [first + [line] + question for line in lines for question in questions]

    def _piece_tokens(self, prompt: list[tuple[str, str]], encoding: str, overlap: int) -> list[int]:
        """A prompt's tokens as ``encoding`` and ``overlap`` give its pieces (see `_sample_prompts`)."""
        tokens: list[int] = []
        for text, role in prompt:
            if role == "question" and overlap:
                tokens = tokens[:-overlap] + self._raw_tokens(CONTINUATION_ANCHOR + text)
            else:
                tokens += self._tokens(text, encoding, at_start=role == "first")
        return tokens

    def fingerprint(self) -> str:
        """A digest of the tokenizer itself (vocabulary, merges, normalisation): tokenizers of one size differ."""
        backend = getattr(self.tokenizer, "backend_tokenizer", self.tokenizer)
        text = (backend.to_str() if hasattr(backend, "to_str")
                else json.dumps(sorted(self.tokenizer.get_vocab().items())))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def encoding_record(self) -> str:
        """How this code writes and tokenizes ticks, beyond the tokenizer's files and the templates: the encoding
        chosen at load and a digest of the tokens a few fixed ticks encode to (number formatting, gaps, a first
        line and later ones). A data directory records it: code that encodes its logged ticks otherwise is told."""
        state = self.new_state()
        tokens = [self.encode(tick, state) for tick in _RECORDED_TICKS]
        return f"{self.encoding}:{hashlib.sha256(json.dumps(tokens).encode()).hexdigest()[:16]}"

    def new_state(self) -> TextState:
        return TextState()

    def render(self, tick: Tick, state: TextState) -> str:
        gap_ms = 0.0 if state.last_ts is None else (tick.ts - state.last_ts) / 1e6
        values = {k: getattr(tick, k) for k in TEMPLATE_FIELDS if k not in ("mid", "gap_ms")}
        values["mid"] = tick.mid
        values["gap_ms"] = f"{gap_ms:.{self.config.gap_decimals}f}"
        tpl = self.config.quote_template if tick.kind == QUOTE else self.config.trade_template
        return self.render_values(values, tpl)

    @staticmethod
    def render_values(values: Mapping[str, Any], template: str) -> str:
        """``template`` with ``values``: floats positional without a format spec, a missing one (None) as `?`."""
        return template.format(**template_values(values))

    def _raw_tokens(self, text: str) -> list[int]:
        out = self.tokenizer.encode(text, add_special_tokens=False)
        return list(out.ids) if hasattr(out, "ids") else list(out)

    def tokenize(self, text: str, at_start: bool = False) -> list[int]:
        """Tokens of ``text`` as they are inside a prompt: at its start with ``at_start``, else after a line."""
        return self._tokens(text, self.encoding, at_start)

    def _tokens(self, text: str, encoding: str, at_start: bool) -> list[int]:
        """``text``'s tokens under ``encoding``. A piece whose tokens after the anchor do not begin with the
        anchor's own (the two merged) is tokenized on its own."""
        if encoding == "plain" or at_start:
            return self._raw_tokens(text)
        tokens = self._raw_tokens(CONTINUATION_ANCHOR + text)
        if tokens[: len(self._anchor)] != self._anchor:
            return self._raw_tokens(text)
        return tokens[len(self._anchor):]

    def encode(self, tick: Tick, state: TextState) -> list[int]:
        line = self.render(tick, state)
        at_start = state.ticks == 0
        state.last_ts = tick.ts
        state.ticks += 1
        return self.tokenize(line, at_start)

    def question_tokens(self, text: str) -> list[int]:
        """Tokens of a question's text as they are after a stream's ticks: with `question_overlap`, they begin with
        the tokens that stand in for the last `question_overlap` tokens of the stream (its line's newline)."""
        if self.question_overlap:
            return self._raw_tokens(CONTINUATION_ANCHOR + text)
        return self.tokenize(text)

    def label_tokens(self, text: str) -> list[int]:
        """Tokens of a choice's (or a value's) label, as they are after the question."""
        return self.tokenize(text)

    def decode(self, tokens: Sequence[int]) -> str:
        """Text of generated tokens as they read after a prompt (with ``continuation``, a leading space a
        tokenizer's decoder drops at the start of a text is kept)."""
        if self.encoding == "plain":
            return self.tokenizer.decode(list(tokens))
        text = self.tokenizer.decode(self._anchor + list(tokens))
        if text.startswith(self._anchor_text):
            return text[len(self._anchor_text):]
        return self.tokenizer.decode(list(tokens))
