"""Answer evaluation: a QuerySpec + the codec -> probe tokens, and probe logits -> an answer value.

Two ways a question reaches the model:
- a *named codec question* (the built-in tick model: ``question: direction_20``):
  one probe of the question's tokens; the answer is the next-token
  distribution restricted to that question's answer tokens, read through the
  question's calibration: softmax(z / temperature + bias) over its answer
  logits z (`calibrated_probs`, the one place this is computed; the defaults
  give exactly softmax(z));
- *text* (any Hugging Face model with a TextCodec): the question text is
  tokenized; each choice is tokenized as it follows the question and scored as a whole
  sequence (sum of its tokens' log-probabilities after the question), one probe
  per choice, all in the same forward. When every choice is one token a single
  probe serves them all.

Answer values are plain dicts (msgpack-able):
    choice       {"answer": label, "probs": {label: p}}
    expectation  {"expected": x, "probs": {label: p}}
    generate     {"text": str, "tokens": [ids]}
    surprise     {"nll": nats}  (of the latest chunk's tokens, from the ingest forward)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from engine.quoting import quoted
from queries.codec import CodecQuestion, QueryCodec
from queries.spec import QuerySpec


class QueryCompileError(ValueError):
    """A query that cannot be asked of this model/codec, with the reason."""


@dataclass(frozen=True)
class CompiledQuery:
    spec: QuerySpec
    question: tuple[int, ...]  # tokens appended after the session's committed prefix
    labels: tuple[str, ...] = ()
    answer_ids: tuple[int, ...] = ()  # one token per label: read from the question's last row
    candidates: tuple[tuple[int, ...], ...] = ()  # multi-token labels: one probe each
    values: tuple[float, ...] = ()  # per label, for expectation
    temperature: float = 1.0  # named codec questions: the checkpoint's calibration (see calibrated_probs)
    bias: tuple[float, ...] = ()  # per label, in `labels` order; () = zeros
    # how many of the session's last tokens the question's first tokens stand in for (QueryCodec.question_overlap)
    overlap: int = 0

    @property
    def probes(self) -> list[list[int]]:
        if self.candidates:
            return [list(self.question) + list(c) for c in self.candidates]
        return [list(self.question)] if self.spec.kind != "surprise" else []

    @property
    def logits(self) -> str | int:
        """Rows needed per probe: the last row, or the rows that predict a candidate's tokens."""
        if self.candidates:
            return max(len(c) for c in self.candidates) + 1
        return "last"


def compile_query(spec: QuerySpec, codec: QueryCodec) -> CompiledQuery:
    """Resolve a spec against the serving codec; raises QueryCompileError when it cannot be asked."""
    if spec.kind == "surprise":
        return CompiledQuery(spec, ())
    named = codec.questions.get(spec.question) if spec.names_question else None
    if named is not None:
        return _compile_named(spec, named)
    if spec.question_tokens is not None:
        question = tuple(spec.question_tokens)
        outside = next((i for i, t in enumerate(question) if t >= codec.vocab_size), None)
        if outside is not None:  # it would fail the whole forward it is batched into
            raise QueryCompileError(f"query {quoted(spec.name)}: question_tokens[{outside}] = {question[outside]} is "
                                    f"not below the vocabulary size {codec.vocab_size}")
        overlap = 0  # ids given: appended after the session's tokens as written
    else:
        question, overlap = tuple(_tokenize(codec, spec.question, spec.name)), codec.question_overlap
    if spec.kind == "generate":
        return CompiledQuery(spec, question, overlap=overlap)
    labels = spec.labels
    if not labels:
        needs = "values (label: number)" if spec.kind == "expectation" else "choices"
        raise QueryCompileError(f"query {quoted(spec.name)}: a free-text {spec.kind} query needs {needs}")
    candidates = tuple(tuple(_tokenize(codec, label, spec.name, as_label=True)) for label in labels)
    if spec.question is not None and spec.question_tokens is None:
        _warn_merged_labels(codec, spec, labels)
    if spec.scored_as is not None:
        scored_labels(spec, codec)
    values = tuple(spec.values[label] for label in labels) if spec.kind == "expectation" else ()
    if all(len(c) == 1 for c in candidates) and len({c[0] for c in candidates}) == len(candidates):
        return CompiledQuery(spec, question, labels, answer_ids=tuple(c[0] for c in candidates), values=values,
                             overlap=overlap)
    return CompiledQuery(spec, question, labels, candidates=candidates, values=values, overlap=overlap)


def scored_labels(spec: QuerySpec, codec: QueryCodec) -> dict[str, str] | None:
    """A scored_as query's choice -> label of its named question, checked against what the codec scores (the
    QueryCompileError names the question or label that does not fit); None without scored_as."""
    if spec.scored_as is None or spec.choices is None:
        return None
    question = codec.scored_questions.get(spec.scored_as.question)
    if question is None:
        known = ", ".join(codec.scored_questions)
        raise QueryCompileError(f"query {quoted(spec.name)}: scored_as {quoted(spec.scored_as.question)} is not a "
                                f"question this model's answers can be scored as "
                                + (f"(one of {known})" if known else "(a tick model's query names its question)"))
    try:
        return spec.scored_as.mapping(spec.choices, question.labels)
    except ValueError as e:
        raise QueryCompileError(f"query {quoted(spec.name)}: {e}") from None


def _compile_named(spec: QuerySpec, named: CodecQuestion) -> CompiledQuery:
    labels = tuple(spec.labels or named.labels)
    unknown = [label for label in labels if label not in named.answers]
    if unknown:
        raise QueryCompileError(f"query {quoted(spec.name)}: {', '.join(map(quoted, unknown))} "
                                f"{'is not an answer' if len(unknown) == 1 else 'are not answers'} of "
                                f"{quoted(spec.question)} (answers: {', '.join(map(quoted, named.answers))})")
    values: tuple[float, ...] = ()
    if spec.kind == "expectation":
        source = spec.values or named.values
        if not source:
            raise QueryCompileError(f"query {quoted(spec.name)}: question {quoted(spec.question)} has no values; give "
                                    f"`values`")
        values = tuple(float(source[label]) for label in labels)
    if spec.kind == "generate":
        return CompiledQuery(spec, tuple(named.tokens))
    cal = named.calibration
    by_label = dict(zip(named.labels, cal.bias))  # a query may ask a subset of the labels, in its own order
    bias = tuple(float(by_label[label]) for label in labels) if by_label else ()
    return CompiledQuery(spec, tuple(named.tokens), labels, tuple(named.answers[lbl] for lbl in labels), values=values,
                         temperature=float(cal.temperature), bias=bias)


def _warn_merged_labels(codec: QueryCodec, spec: QuerySpec, labels: Sequence[str]) -> None:
    """Warn of labels the tokenizer merges with the question's end in the whole prompt (Llama 3's and Qwen2's take
    ":up" as one token after "Answer:"): each is scored by tokens the model would not write there."""
    question = codec.question_tokens(spec.question)
    merged = [label for label in labels if (whole := codec.question_tokens(spec.question + label)) is not None
              and whole != question + codec.label_tokens(label)]
    if merged:
        warnings.warn(f"query {quoted(spec.name)}: the tokenizer reads label(s) {', '.join(map(quoted, merged))} "
                      f"otherwise after its question than in the whole prompt (merged with the question's end): such "
                      f"a label is scored by tokens the model would not write there; start each with a space "
                      f"({quoted(' ' + merged[0].lstrip())}) or end the question with one", stacklevel=3)


def _tokenize(codec: QueryCodec, text: str | None, query: str, as_label: bool = False) -> list[int]:
    """``text`` (a question, or with ``as_label`` a choice's or value's label) as the model's tokens."""
    tokens = None if text is None else codec.label_tokens(text) if as_label else codec.question_tokens(text)
    if tokens is None and as_label:
        raise QueryCompileError(
            f"query {quoted(query)}: label {quoted(text)} is free text, which a tick model cannot read: choices and "
            f"values written as text need a text model; a tick model answers its named questions (question: one of "
            f"{', '.join(sorted(codec.questions))}), with choices or values among their answers"
        )
    if tokens is None:
        raise QueryCompileError(
            f"query {quoted(query)}: question {quoted(text)} is not a question of this model's codec, and a tick model "
            f"cannot read free text: it answers {', '.join(sorted(codec.questions))}"
        )
    if not tokens:
        raise QueryCompileError(f"query {quoted(query)}: {quoted(text)} tokenizes to nothing")
    return tokens


def answer_value(query: CompiledQuery, logits: list[torch.Tensor]) -> dict[str, Any]:
    """Turn the probes' logits into the answer of a choice or expectation query."""
    if query.candidates:
        scores = torch.stack([_sequence_logprob(rows, cand) for rows, cand in zip(logits, query.candidates)])
        if query.spec.score == "per_token":  # (labels,) mean log-probability per token: labels of unequal length
            scores = scores / torch.tensor([len(cand) for cand in query.candidates], dtype=scores.dtype)
        probs = torch.softmax(scores, dim=0)  # (labels,)
    else:
        last = logits[0][-1].float()  # (vocab,)
        # (labels,) renormalised over the answers, through the question's calibration
        probs = calibrated_probs(last[list(query.answer_ids)], query.temperature, query.bias)
    return published_value(query, probs.tolist())  # one conversion, not one float() per label (~1 us each)


def published_value(query: CompiledQuery, probs: list[float]) -> dict[str, Any]:
    """The value published for (labels,) ``probs`` in the query's order: the expectation over its values or the
    most likely label (the first maximum, as argmax), with the probabilities by label. The model's answer and
    the adapted one (engine/service/adaptation.py) are both built here, so they cannot drift apart. The
    expectation is numpy's dot, as the adapted answers (the default's) had it: a Python sum differs from it in
    the last bit on 45% of random 9-label vectors, and moved 1,188 of 1,632 adapted answers of a backtest."""
    as_dict = dict(zip(query.labels, probs))
    if query.spec.kind == "expectation":
        return {"expected": float(np.asarray(probs) @ np.asarray(query.values)), "probs": as_dict}
    return {"answer": query.labels[probs.index(max(probs))], "probs": as_dict}


def calibrated_logits(z: torch.Tensor, temperature: float | torch.Tensor = 1.0,
                      bias: Sequence[float] | torch.Tensor = ()) -> torch.Tensor:
    """z / temperature + bias over the last dim of a question's answer logits z (..., labels). With the
    defaults it returns z itself, so an uncalibrated checkpoint answers softmax(z) bit for bit. The
    calibration fit (engine/service/calibrate.py) passes tensors and differentiates through this."""
    if isinstance(temperature, torch.Tensor) or temperature != 1.0:
        z = z / temperature
    if isinstance(bias, torch.Tensor) or any(bias):
        z = z + torch.as_tensor(bias, dtype=z.dtype, device=z.device)
    return z


def calibrated_probs(z: torch.Tensor, temperature: float = 1.0, bias: Sequence[float] = ()) -> torch.Tensor:
    """Answer probabilities softmax(z / temperature + bias) over the last dim: every path that turns a named
    codec question's answer logits into probabilities (serve, backtest, ask, evaluate, benchmarks) calls this."""
    return torch.softmax(calibrated_logits(z, temperature, bias), dim=-1)


def _sequence_logprob(rows: torch.Tensor, candidate: tuple[int, ...]) -> torch.Tensor:
    """log p(candidate | prefix, question): ``rows`` are the last len+1 rows (or more) of the probe."""
    k = len(candidate)
    predicting = rows[-k - 1 : -1].float()  # (k, vocab): row j predicts candidate token j
    logp = torch.log_softmax(predicting, dim=-1)
    return logp[torch.arange(k), torch.tensor(candidate)].sum()


def next_token(logits: torch.Tensor, temperature: float, generator: torch.Generator | None) -> int:
    """Greedy at temperature 0, else a sample from the tempered distribution."""
    last = logits[-1].float()
    if temperature <= 0:
        return int(last.argmax())
    probs = torch.softmax(last / temperature, dim=-1)
    return int(torch.multinomial(probs, 1, generator=generator))


def decode(codec: QueryCodec, tokens: Sequence[int]) -> str:
    """Text of generated tokens: the tokenizer's for text codecs, token names for the tick codec."""
    return codec.decode(tokens)
