"""Which window a text model's sessions have, why, and what its answers attended: one function decides the cause
(scheduler.window, the pool, max_position_embeddings, a Mistral model's sliding_window) and `serve`'s start line, a
backtest's summary and the error for a window too large all say it; a window of fewer than ~32 ticks is warned
about; a backtest's answers file carries each answer's context_tokens and context_ticks (as an ask's reply does).
Real tiny checkpoints built from configs, a real file, a real `serve` process."""

from __future__ import annotations

import polars as pl
import pytest

from conftest import tiny_text_checkpoint
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.cli import main
from engine.service.config import ServiceConfig
from engine.service.pipeline import TickPipeline
from test_kv_pool_size import ENDPOINTS, serve_lines

QUERY = """
queries:
  - {name: up, streams: ["*"], kind: choice, question: "\\nUp? Answer:", choices: [" yes", " no"], trigger: {ticks: 4}}
"""
SLIDING = "its sliding_window, below its max_position_embeddings of 1024"


@pytest.fixture(scope="module")
def mistral(tmp_path_factory):
    """A Mistral checkpoint of 1,024 positions whose sliding_window of 160 caps its sessions' window."""
    return tiny_text_checkpoint(tmp_path_factory.mktemp("mistral") / "m", "mistral", sliding_window=160)


def _backtest(model, tmp_path, capsys) -> tuple[str, pl.DataFrame]:
    ticks = SyntheticMarket(SyntheticConfig(seed=2)).next_batch(160)
    rows = [{"timestamp": t.ts, "symbol": t.stream, "price": t.price or t.mid, "size": t.size or 1.0} for t in ticks]
    pl.DataFrame(rows).write_csv(tmp_path / "trades.csv")
    (tmp_path / "q.yaml").write_text(QUERY)
    code = main(["backtest", str(tmp_path / "trades.csv"), "--model", str(model), "--queries", str(tmp_path / "q.yaml"),
                 "--out", str(tmp_path / "a.parquet"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, pl.read_parquet(tmp_path / "a.parquet")


def test_a_backtest_says_its_window_and_each_answer_its_context(mistral, tmp_path, capsys) -> None:
    out, answers = _backtest(mistral, tmp_path, capsys)
    line = next(line for line in out.splitlines() if line.startswith("context: "))
    assert line.startswith(f"context: each session's window 160 tokens (the model's positions: {SLIDING}, at most "
                           f"what the pool holds")
    assert "context_ticks and context_tokens in the answers file" in line
    warning = next(line for line in out.splitlines()
                   if line.startswith("warning: each session's window of 160 tokens holds about "))
    # review385 #2: it named a key that does not exist (model.text) and a larger scheduler.window, which this
    # model's sliding_window refuses
    assert warning.endswith("answers see little history; a model with more positions or shorter lines "
                            "(codec.trade_template, codec.quote_template) holds more"), warning
    assert answers["context_ticks"].null_count() == 0 and answers["context_tokens"].null_count() == 0
    assert (answers["context_ticks"] <= answers["ticks"]).all() and (answers["context_tokens"] <= 160).all()
    for _, stream in answers.sort("ticks").group_by("stream"):
        # before a stream's first roll an answer attended every tick so far; after it, fewer than that
        rolled = stream.filter(pl.col("context_ticks") < pl.col("ticks"))
        assert rolled.height and rolled["ticks"].min() > stream["ticks"].min()
        whole = stream.filter(pl.col("ticks") < rolled["ticks"].min())
        assert (whole["context_ticks"] == whole["ticks"]).all()
        assert whole["context_tokens"].is_sorted() and whole["context_tokens"].n_unique() == whole.height


def test_the_few_ticks_warning_advises_only_what_widens_the_window() -> None:
    """A window below the model's positions: the key that set it (scheduler.window, else the pool's) up to them;
    a tick model's lines have no template to shorten."""
    from engine.service.answer_context import few_ticks_warning

    set_by_key = few_ticks_warning(256, 20, positions=2048, explicit=True, text=True)
    assert set_by_key.endswith("a model with more positions, a larger scheduler.window (up to the model's 2048 "
                               "positions) or shorter lines (codec.trade_template, codec.quote_template) holds more")
    by_pool = few_ticks_warning(64, 4, positions=512, explicit=False, text=False)
    assert by_pool.endswith("a model with more positions or a larger KV pool (kv.cells or kv.bytes) (up to the "
                            "model's 512 positions) holds more")
    assert few_ticks_warning(64, 4, positions=64, explicit=False, text=False).endswith(
        "answers see little history; a model with more positions holds more")
    assert few_ticks_warning(4096, 20, positions=4096, explicit=False, text=True) is None


def test_a_long_window_gives_no_warning_and_every_tick_as_context(tmp_path, capsys) -> None:
    out, answers = _backtest(tiny_text_checkpoint(tmp_path / "llama", "llama3",
                                                    max_position_embeddings=4096), tmp_path, capsys)
    line = next(line for line in out.splitlines() if line.startswith("context: "))
    assert "its max_position_embeddings" in line and "warning" not in out
    assert (answers["context_ticks"] == answers["ticks"]).all()


def test_serve_and_the_window_error_name_the_sliding_window(mistral, tmp_path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text(f"model: {{path: {mistral}}}\nlog: {{enabled: false}}\n{ENDPOINTS}")
    lines, _ = serve_lines(config)
    said = [line for line in lines if "KV pool" in line]
    assert len(said) == 1 and (f"each session's window: 160 tokens (the model's positions: {SLIDING}, at most what "
                               f"the pool holds: scheduler.window sets it); it holds ") in said[0], lines
    assert any(line.startswith("flashtick: WARNING: each session's window of 160 tokens holds about ")
               for line in lines), lines
    with pytest.raises(ValueError, match=rf"scheduler.window 512 is past the model's 160 positions \({SLIDING}; "):
        TickPipeline(ServiceConfig.from_dict({"model": {"path": str(mistral)}, "scheduler": {"window": 512},
                                              "log": {"enabled": False}}))
