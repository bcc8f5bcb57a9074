"""benchmarks/tick_model_quality.py end to end on tiny synthetic files laid out as the shared data sets, with a
tiny model of the built-in recipe standing in for the built-in one: real training, fine-tuning and scoring."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import polars as pl
import pytest

from benchmarks.tick_model_quality import ROWS, Settings, caveats, main, report
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.evaluate import EvalOptions
from engine.service.train_builtin import train, write_training_md
from engine.service.train_config import TrainConfig

TINY = TrainConfig(hidden=32, intermediate=64, layers=1, heads=2, kv_heads=1, window_ticks=15, max_positions=64,
                   steps=2, batch=2, warmup=1, questions_per_window=8, synthetic_ticks=2000, max_minutes=1.0)
TINY_FINETUNE = ("--steps", "2", "--batch", "2", "--eval-every", "1", "--patience", "1", "--max-points", "150",
                 "--resamples", "20")


def write_shared_layout(data_dir: Path, n: int = 1100) -> None:
    """Three synthetic streams written as the shared data sets' files (Binance trades + bbo, Dukascopy quotes):
    about 1,150 ticks each (the fine-tune's 60/10/30 split needs 1,008 in BTCUSDT's stream): each row's scores are
    checked against the others' on the same ticks, not against a level."""
    streams = SyntheticMarket(SyntheticConfig(seed=7)).generate(5 * n).by_stream()
    (btc, _), (eth, _), (eur, _) = list(streams.values())[:3]
    for folder, ticks in (("binance-btcusdt-spot", btc), ("binance-ethusdt-spot", eth)):
        (data_dir / folder).mkdir(parents=True)
        trades = [t for t in ticks if t.is_trade]
        pl.DataFrame({"local_ts_ns": [t.ts for t in trades], "event_ts_ms": [t.ts // 10**6 for t in trades],
                      "trade_ts_ms": [t.ts // 10**6 for t in trades], "trade_id": list(range(len(trades))),
                      "price": [t.price for t in trades], "qty": [t.size for t in trades],
                      "aggressor_side": [t.side for t in trades],
                      "is_buyer_maker": [int(t.side == "sell")
                                         for t in trades]}).write_csv(data_dir / folder / "trades.csv")
        quotes = [t for t in ticks if not t.is_trade]
        pl.DataFrame({"local_ts_ns": [t.ts for t in quotes], "event_ts_ms": pl.Series([None] * len(quotes),
                                                                                      dtype=pl.Int64),
                      "update_id": list(range(len(quotes))), "bid_px": [t.bid for t in quotes],
                      "bid_qty": [t.bid_size for t in quotes], "ask_px": [t.ask for t in quotes],
                      "ask_qty": [t.ask_size for t in quotes]}).write_parquet(data_dir / folder / "bbo.parquet")
    (data_dir / "dukascopy-eurusd").mkdir()
    quotes = [t for t in eur if not t.is_trade]
    pl.DataFrame({"timestamp_utc": pl.Series([t.ts for t in quotes]).cast(pl.Datetime("ns", "UTC")),
                  "bid": [t.bid for t in quotes], "ask": [t.ask for t in quotes],
                  "bid_volume": [t.bid_size for t in quotes], "ask_volume": [t.ask_size for t in quotes]}
                 ).write_parquet(data_dir / "dukascopy-eurusd" / "eurusd_ticks_2019-02-04_05.parquet")


def expected_bar(questions: dict, predictor: str = "model") -> dict:
    sc = {q: r["scores"] for q, r in questions.items()}
    m = lambda q, k: sc[q][predictor][k]  # noqa: E731
    return {"brier_le_prior_all": all(m(q, "brier") <= sc[q]["prior"]["brier"] for q in sc),
            "accuracy_ge_majority_all": all(m(q, "accuracy") >= sc[q]["majority"]["accuracy"] for q in sc),
            "direction_acc_ge_logistic": {q: m(q, "accuracy") >= sc[q]["logistic"]["accuracy"]
                                          for q in ("direction_5", "direction_20")},
            "brier_lt_logistic": {q: m(q, "brier") < sc[q]["logistic"]["brier"] for q in ("direction_5",
                                                                                          "direction_20")}}


def test_report_scores_every_row_on_the_same_ticks_and_reuses_its_models(tmp_path: Path) -> None:
    data = tmp_path / "data"
    write_shared_layout(data)
    # the built-in recipe, tiny, on synthetic + BTCUSDT alone (the real one's EURUSD too): BTCUSDT gets a
    # leave-one-out zero-shot row, ETHUSDT and EURUSD, never seen, are their own (one leave-one-out training and
    # calibration fewer: each was ~15% of this test's CPU)
    builtin = tmp_path / "builtin"
    cfg = dataclasses.replace(TINY, real_sets=("BTCUSDT",), mix=(0.5, 0.5))
    stats = train(cfg, builtin, lambda _: None, data)
    write_training_md(cfg, stats, builtin, "tiny built-in stand-in")
    s = Settings(data, tmp_path / "models", builtin=builtin, loo_recipe=TINY, finetune_minutes=1.0,
                 finetune_extra=TINY_FINETUNE, evaluation=EvalOptions(max_points=150, resamples=20, adapt_history=200),
                 loo_calibration=EvalOptions(max_points=300))  # (--calibrate-only's 10,000 points a stream: 45% of it)
    result = json.loads(json.dumps(report(s, log=lambda _: None, command="test")))  # what the JSON file holds

    assert {"command", "machine", "threads", "instruments", "bar"} <= set(result)
    assert set(result["instruments"]) == {"BTCUSDT", "ETHUSDT", "EURUSD"}
    for name, rows in result["instruments"].items():
        assert set(rows) == set(ROWS)
        tests = {tuple(r["test_ticks"]["test"]) for r in rows.values()}
        assert len(tests) == 1, (name, tests)  # every row scored on the same ticks
        (start, stop), n = tests.pop(), rows["builtin"]["test_ticks"]["ticks"]
        assert start == int(n * 0.7) + 50 and stop == n
        for row, r in rows.items():
            assert {"model_dir", "how_trained", "test_ticks", "questions"} <= set(r)
            assert {"direction_5", "direction_20", "volatility_50", "move_bps_50"} <= set(r["questions"])
            assert result["bar"][name][row].items() >= expected_bar(r["questions"]).items(), (name, row)
            # and for what serving publishes (answers.adapt: online), adapted from the test part's start
            assert result["bar_adapted"][name][row].items() >= expected_bar(r["questions"], "adapted").items()
            assert result["bar_adapted_history"][name][row].items() >= expected_bar(r["questions"],
                                                                                   "adapted_history").items()
        tuned = rows["fine_tuned"]["how_trained"]
        (parts,) = tuned["parts"].values()
        assert parts["validation"][1] <= int(n * 0.7) and "--split 60/10/30" in tuned["command"]
        zero = rows["zero_shot"]
        if name != "BTCUSDT":  # the built-in model never saw it: it is its own zero-shot row, scored once
            assert zero["model_dir"] == str(builtin) and zero["questions"] == rows["builtin"]["questions"]
        else:
            assert zero["model_dir"] == str(s.models_dir / f"loo_{name}")
            assert name not in zero["how_trained"]["trained_on"] and name not in zero["calibration_source"]
            how = zero["how_trained"]
            assert how["steps"] == 2 and "--calibrate-only" in how["calibration_command"]
            assert how["calibration_options"]["max_points"] == 300  # recorded, as the command does not say it

    weights = s.models_dir / "loo_BTCUSDT" / "model.safetensors"
    before = weights.stat().st_mtime_ns
    again = report(s, ("BTCUSDT",), log=lambda _: None)
    assert weights.stat().st_mtime_ns == before  # reused, not retrained
    assert again["instruments"]["BTCUSDT"]["zero_shot"]["questions"] == \
        result["instruments"]["BTCUSDT"]["zero_shot"]["questions"]


def test_the_zero_shot_caveat_says_what_this_run_measured_not_a_fixed_budget() -> None:
    """The caveat ended "(a 23-min budget on a busier CPU)" whatever the machine; now each training's own pace."""
    zero = {"steps": 400, "schedule_steps": 400, "optimisation_minutes": 8.0, "stopped": "steps done",
            "config": {"max_minutes": 12.0}}
    rows = {"zero_shot": {"model_dir": "loo", "how_trained": zero},
            "builtin": {"model_dir": "builtin", "how_trained": {"steps": 385, "optimisation_minutes": 23.0}}}
    (said, *_) = caveats({"instruments": {"BTCUSDT": rows}})
    assert said.endswith("the built-in model got 385 steps in 23.0 min (16.7 steps/min, against zero_shot's 50.0)")
    rows["builtin"]["how_trained"]["optimisation_minutes"] = float("nan")  # a card without its time
    assert caveats({"instruments": {"BTCUSDT": rows}})[0].endswith("385 steps, its time not recorded")


def test_a_caveat_without_a_training_time_says_so_and_prints_no_number() -> None:
    """A card without its optimisation time read "in nan min"; now the caveat says the time is not recorded."""
    nan = float("nan")
    zero = {"steps": 400, "schedule_steps": 400, "optimisation_minutes": nan, "stopped": "steps done",
            "config": {"max_minutes": 12.0}}
    rows = {"zero_shot": {"model_dir": "loo", "how_trained": zero},
            "builtin": {"model_dir": "builtin", "how_trained": {"steps": 385, "optimisation_minutes": nan}}}
    (said, *_) = caveats({"instruments": {"BTCUSDT": rows}})
    assert said == ("BTCUSDT zero_shot: 400 of a 400-step schedule, its time not recorded under a 12-min budget "
                    "(steps done); the built-in model got 385 steps, its time not recorded")
    rows["zero_shot"]["model_dir"] = "builtin"  # zero_shot is the built-in model itself
    (said, *_) = caveats({"instruments": {"BTCUSDT": rows}})
    assert said == "BTCUSDT zero_shot is the built-in model itself (385 steps, its time not recorded)"
    assert "nan" not in " ".join(caveats({"instruments": {"BTCUSDT": rows}}))

def test_without_the_shared_data_it_says_so_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    main(["--data-dir", str(tmp_path / "absent"), "--out", str(tmp_path / "out.json")])
    assert "skipped" in capsys.readouterr().out and not (tmp_path / "out.json").exists()
