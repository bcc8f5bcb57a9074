"""A Hugging Face checkpoint flashtick does not run is refused in one line, its own, with the next step: no warning
of transformers' about the config before it (GPT-2's ids past the vocabulary, an unknown model_type), and the GELU
and Qwen2 sliding-window refusals say which families or settings do work. A real `backtest` process each (forked
warm, tests/forked_cli.py: transformers' warnings come at the config's load, in the child, onto its stderr)."""

from __future__ import annotations

import json

import pytest

from conftest import tiny_text_checkpoint
from forked_cli import cli_run


def _backtest_stderr(model, tmp_path) -> tuple[int, list[str]]:
    (tmp_path / "t.csv").write_text("timestamp,symbol,price,size\n1700000000000000000,X,100.5,1\n")
    (tmp_path / "q.yaml").write_text("queries: [{name: s, streams: ['*'], kind: surprise}]\n")
    done = cli_run(["backtest", str(tmp_path / "t.csv"), "--model", str(model), "--queries", str(tmp_path / "q.yaml"),
                    "--out", str(tmp_path / "a.parquet"), "--quiet"], capture_output=True, text=True, timeout=300)
    return done.returncode, [line for line in done.stderr.splitlines() if line.strip()]


def _edited(model, **changes):
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, **changes}))
    return model


@pytest.mark.parametrize("case", ["gpt2", "unknown model_type", "gelu", "qwen2 sliding window"])
def test_a_refused_checkpoint_says_one_line_and_the_next_step(tmp_path, case: str) -> None:
    model = tmp_path / "model"
    if case == "gpt2":  # its bos/eos ids (50256) lie past this vocabulary: transformers warned twice
        from transformers import GPT2Config, GPT2LMHeadModel

        tiny_text_checkpoint(model, "llama3")
        GPT2LMHeadModel(GPT2Config(vocab_size=300, n_embd=32, n_layer=1, n_head=2)).save_pretrained(model)
        expected = 'model_type "gpt2" (GPT2LMHeadModel) is not supported: flashtick runs Llama-family decoders'
    elif case == "unknown model_type":  # transformers warned it instantiates a model of another type
        _edited(tiny_text_checkpoint(model, "llama3"), model_type="llamax")
        expected = 'model_type "llamax" (LlamaForCausalLM) is not supported'
    elif case == "gelu":
        _edited(tiny_text_checkpoint(model, "llama3"), hidden_act="gelu_pytorch_tanh")
        expected = ('only SiLU MLPs are supported, config has hidden_act "gelu_pytorch_tanh": flashtick runs Llama '
                    "2/3, Mistral and Qwen2/2.5 checkpoints")
    else:
        _edited(tiny_text_checkpoint(model, "qwen2-tied"), use_sliding_window=True, sliding_window=128,
                max_window_layers=1)
        expected = ("use_sliding_window: false in config.json with `scheduler: {window: 128, probe_reserve: 64, "
                    "keep_fraction: 0.25}` in flashtick's config gives this model's answers")
    code, lines = _backtest_stderr(model, tmp_path)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(f"flashtick backtest: error: {model / 'config.json'}: ") and expected in lines[0], lines


def test_a_qwen2_config_whose_layers_never_slide_is_told_false_is_the_same_model(tmp_path) -> None:
    from engine.models.config import ModelConfig

    config = json.loads((tiny_text_checkpoint(tmp_path, "qwen2-tied") / "config.json").read_text())
    with pytest.raises(ValueError, match=r"its max_window_layers \(2\) >= num_hidden_layers \(2\), so no layer "
                                         r"slides and use_sliding_window: false in config.json is the same model"):
        ModelConfig.from_hf({**config, "use_sliding_window": True, "max_window_layers": 2})


def test_a_classifier_checkpoint_is_refused_as_what_it_is(tmp_path) -> None:
    """review432 #3: a LlamaForSequenceClassification (score.weight, no lm_head) was refused as "no lm_head.weight
    and tie_word_embeddings is false", which sent a user to tie_word_embeddings; its architectures say what it is."""
    from engine.models.config import ModelConfig

    config = json.loads((tiny_text_checkpoint(tmp_path, "llama3") / "config.json").read_text())
    with pytest.raises(ValueError, match=r"^architectures LlamaForSequenceClassification is not a causal language "
                                         r"model: .* serve a \.\.\.ForCausalLM checkpoint .* LlamaForCausalLM\)$"):
        ModelConfig.from_hf({**config, "architectures": ["LlamaForSequenceClassification"]})
    assert ModelConfig.from_hf({**config, "architectures": None}).model_type == "llama"  # (the built-in lists none)


@pytest.mark.parametrize("sliding_window", [64, 128, 4096])
def test_the_qwen2_sliding_window_refusal_names_settings_that_work_as_given(tmp_path, sliding_window: int) -> None:
    """review385 #4: it advised scheduler.window at most 64, which the default probe_reserve (64) then refused; the
    scheduler settings it names now fit the window as written (the check ContextWindow.fit makes)."""
    import re

    import yaml

    from engine.models.config import ModelConfig
    from engine.roll_fit import roll_fits
    from engine.settings import SchedulerConfig

    config = json.loads((tiny_text_checkpoint(tmp_path, "qwen2-tied") / "config.json").read_text())
    with pytest.raises(ValueError) as refused:
        ModelConfig.from_hf({**config, "use_sliding_window": True, "max_window_layers": 1,
                             "sliding_window": sliding_window})
    (advised,) = re.findall(r"with `(scheduler: \{[^`]*\})` in flashtick's config", str(refused.value))
    scheduler = SchedulerConfig(**yaml.safe_load(advised)["scheduler"])
    assert scheduler.window == sliding_window
    assert roll_fits(scheduler.window, scheduler.sink_tokens, scheduler.keep_fraction, scheduler.probe_reserve)
    assert (advised == f"scheduler: {{window: {sliding_window}}}") == (sliding_window == 4096)  # defaults fit it


def test_the_settings_a_window_refusal_advises_keep_the_configs_keep_fraction() -> None:
    """A window whose roll does not fit with the config's keep_fraction (0.8 of 200) was advised `scheduler: {window:
    200}`, the window it has, with the 0.8 that fails still in force; the advice now sets a keep_fraction that fits."""
    from engine.roll_fit import roll_fits, settings_for_window

    assert settings_for_window(200, 0, 64) == "scheduler: {window: 200}"  # (the default 0.5 fits)
    advised = settings_for_window(200, 0, 64, keep_fraction=0.8)
    assert advised == "scheduler: {window: 200, probe_reserve: 64, keep_fraction: 0.25}" and roll_fits(200, 0, 0.25, 64)


def test_loading_a_tokenizer_restores_transformers_verbosity(tmp_path) -> None:
    from transformers.utils import logging as hf_logging

    from engine.service.model_and_codec import load_tokenizer

    tiny_text_checkpoint(tmp_path, "llama3")
    before = hf_logging.get_verbosity()
    hf_logging.set_verbosity_info()
    try:
        load_tokenizer(tmp_path)
        assert hf_logging.get_verbosity() == hf_logging.INFO
    finally:
        hf_logging.set_verbosity(before)
