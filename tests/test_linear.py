"""The CPU linear formats (engine/models/linear.py) against F.linear, and a bf16-weights engine
against the fp32 one on the same checkpoint."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from conftest import tiny_hf_model
from engine.engine import Engine
from engine.kv_cache import CacheSpec
from engine.models import from_hf_model
from engine.models.linear import OneDNNBf16Linear, TransposedLinear, bf16_linear_supported, prepare_linears
from engine.runner import ModelRunner
from engine.session import Session

needs_bf16 = pytest.mark.skipif(not bf16_linear_supported(), reason="no oneDNN bf16 on this CPU")


@pytest.mark.parametrize("rows", [1, 3, 16, 100])
@pytest.mark.parametrize("bias", [False, True])
def test_transposed_linear_equals_f_linear(rows: int, bias: bool) -> None:
    torch.manual_seed(rows)
    linear = nn.Linear(96, 200, bias=bias)
    x = torch.randn(rows, 96)
    torch.testing.assert_close(TransposedLinear(linear)(x), F.linear(x, linear.weight, linear.bias),
                               atol=1e-5, rtol=1e-5)


@needs_bf16
@pytest.mark.parametrize("rows", [1, 3, 16, 100])
@pytest.mark.parametrize("bias", [False, True])
def test_bf16_linear_is_bf16_products_with_fp32_sums(rows: int, bias: bool) -> None:
    torch.manual_seed(rows)
    linear = nn.Linear(96, 200, bias=bias)
    x = torch.randn(rows, 96)
    got = OneDNNBf16Linear(linear)(x)
    assert got.dtype == torch.float32 and got.shape == (rows, 200)
    b = None if linear.bias is None else linear.bias.bfloat16().float()
    expected = F.linear(x.bfloat16().float(), linear.weight.bfloat16().float(), b)  # exact products, fp32 sums
    torch.testing.assert_close(got, expected.bfloat16().float(), atol=1e-2, rtol=1e-2)  # result rounded to bf16


def test_prepare_linears_swaps_every_linear_and_rejects_unknown_formats() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.Sequential(nn.Linear(8, 2)))
    prepare_linears(model, "float32")
    assert [type(m) for m in model.modules() if type(m) in (nn.Linear, TransposedLinear)] == [TransposedLinear] * 2
    with pytest.raises(ValueError, match="weights must be one of"):
        prepare_linears(model, "int8")


@needs_bf16
def test_bf16_weights_engine_tracks_fp32() -> None:
    hf = tiny_hf_model("llama3")
    tokens = [t % 150 for t in range(3, 200)]
    logits = {}
    for weights in ("float32", "bfloat16"):
        runner = ModelRunner(from_hf_model(hf, weights=weights), CacheSpec(block_size=16, cells=1024))
        assert runner.kv.tensor.dtype == torch.float32  # activations and KV stay fp32
        engine, session = Engine(runner), Session(weights)
        engine.advance(session, tokens[:150])
        logits[weights] = engine.probe(session, tokens[150:])
    diff = (logits["bfloat16"] - logits["float32"]).abs().max().item()
    assert diff < 0.05, diff
    assert (logits["bfloat16"].argmax(-1) == logits["float32"].argmax(-1)).float().mean() > 0.9
