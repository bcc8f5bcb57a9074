"""The product's correctness bar: a session advanced in chunks and then probed gives the logits
of transformers' own stateless forward over the full sequence."""

from __future__ import annotations

import random

import pytest
import torch

from conftest import FAMILIES, hf_logits, tiny_engine, tiny_hf_model
from engine.session import Session

TOL = 1e-4  # fp32, max abs diff over all logits


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("seed", [0, 1])
def test_chunked_advance_then_probe_matches_transformers(family: str, seed: int) -> None:
    hf = tiny_hf_model(family, seed=seed)
    rng = random.Random(seed)
    tokens = [rng.randrange(hf.config.vocab_size) for _ in range(400)]
    question = tokens[-16:]
    reference = hf_logits(hf, tokens)  # (400, vocab)
    engine, session = tiny_engine(hf), Session("s")
    done = 0
    while done < len(tokens) - len(question):
        n = min(rng.randint(1, 64), len(tokens) - len(question) - done)
        got = engine.advance(session, tokens[done : done + n], logits="all")
        assert (got - reference[done : done + n]).abs().max().item() <= TOL
        done += n
    probed = engine.probe(session, question)
    assert probed.shape == (16, hf.config.vocab_size)
    assert (probed - reference[done:]).abs().max().item() <= TOL


def test_bf16_session_tracks_fp32() -> None:
    hf = tiny_hf_model("llama3")
    tokens = [t % 150 for t in range(3, 200)]
    engine_fp32, fp32 = tiny_engine(hf), Session("a")
    engine_bf16, bf16 = tiny_engine(hf.to(torch.bfloat16)), Session("b")
    assert engine_bf16.runner.kv.tensor.dtype == torch.bfloat16
    engine_fp32.advance(fp32, tokens[:150])
    engine_bf16.advance(bf16, tokens[:150])
    a, b = engine_fp32.probe(fp32, tokens[150:]), engine_bf16.probe(bf16, tokens[150:])
    assert torch.isfinite(b).all()
    # bf16 keeps ~3 significant digits; the argmax agrees almost everywhere
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() > 0.9
