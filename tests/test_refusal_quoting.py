"""A refusal names what the user typed or must type as JSON writes it (engine/quoting.py): `"qty"`, `"ns", "us" or
"ms"`, `["a", "b"]`, never as Python prints a list, a tuple or a str (`['qty']`, `('ns', 'us')`, `'x'`), which a log
reader in another language, or a user pasting the value back into YAML or a shell, reads wrong. Real refusals of real
parts: a CSV written here, column maps, a codec's question spec, a checkpoint's answer head file, a model config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connectors.map_options import map_from_options
from connectors.questions import QuestionSpec
from connectors.replay import FileReplay
from engine.models.config import ModelConfig
from engine.quoting import quoted_choices, quoted_list, quoted_words
from engine.service.features import FEATURES, HEAD_FILE, HEAD_FORMAT, read_head

PYTHON_NOTATION = ("['", "('", "{'", " '", "\"'")  # a Python list, tuple, dict or str repr, inside a message


def _refusal(call) -> str:
    with pytest.raises(ValueError) as refused:
        call()
    return str(refused.value)


def test_several_values_are_said_as_json_writes_them() -> None:
    assert quoted_list(["x", 'a "b"', 3]) == '["x", "a \\"b\\"", 3]'
    assert quoted_words(("ns",)) == '"ns"' and quoted_words([]) == "none"
    assert quoted_words(("ns", "us", "ms")) == '"ns", "us" and "ms"'
    assert quoted_choices(("trade", "quote")) == '"trade" or "quote"'


def test_real_refusals_quote_what_they_name_in_json_not_python(tmp_path: Path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("ts,symbol,price,size\n1717200000000000000,BTC,100.5,1\n")
    head_dir = tmp_path / "checkpoint"
    head_dir.mkdir()
    (head_dir / HEAD_FILE).write_text(json.dumps({"format": HEAD_FORMAT, "source": "test", "features": list(FEATURES),
                                                  "questions": {}, "temperature": 2.0}))
    refusals = {
        "a column map naming a column the file lacks": (
            lambda: FileReplay(csv, columns={"ts": "time", "price": "price", "size": "qty"}),
            ['the column map needs "time" and "qty", which the file lacks',
             'columns found: "ts", "symbol", "price", "size"']),
        "a bad ts unit": (lambda: map_from_options(ts_unit="minutes", detect=True),
                          ['ts_unit must be one of "ns", "us", "ms", "s", ', 'got "minutes"']),
        "a bad price format": (lambda: map_from_options(price_format="fractions", detect=True),
                               ['price_format must be one of "decimal", "32nds", "eighths" or "sqrt_price_x96"',
                                'got "fractions"']),
        "an unknown column-map option": (lambda: map_from_options(detect=True, tick_size=0.5),
                                         ['unknown column-map option(s) "tick_size"']),
        "an unknown answer head key": (lambda: read_head(head_dir),
                                       ['unknown keys "temperature" (known: "format", "source", "features" and '
                                        '"questions")']),
        "an unknown question kind": (
            lambda: QuestionSpec(name="d5", kind="trend", horizon=5, labels=("down", "flat", "up"), description=""),
            ['question "d5": kind must be one of "direction", "regime", "volatility" or "move", got "trend"']),
        "an unknown question spec key": (
            lambda: QuestionSpec.from_dict({"name": "d5", "kind": "direction", "horizon": 5, "temperature": 2,
                                            "labels": ["down", "flat", "up"], "description": ""}),
            ['unknown question spec keys "temperature" (known: "description", "edges", ']),
        "a model type flashtick does not run": (
            lambda: ModelConfig.from_hf({"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}),
            ['model_type "gpt2" (GPT2LMHeadModel) is not supported', '"llama", "mistral" or "qwen2"']),
    }
    for what, (call, said) in refusals.items():
        message = _refusal(call)
        assert all(part in message for part in said), (what, message)
        assert not [notation for notation in PYTHON_NOTATION if notation in message], (what, message)
