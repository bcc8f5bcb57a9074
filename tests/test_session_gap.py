"""Labels across a pause in event time (a weekend, a night, a split between two sessions): with a session gap
(backtest/evaluate --session-gap, answers.session_gap_s) no answer's label spans a longer pause, chunked still
equals batch by batch, live scores and the adaptation end their labels there too; without it a note counts the
scored answers labelled across a pause of over an hour; a split-like step across a pause gets a caution."""

from __future__ import annotations

import functools
import random
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import tiny_tick_checkpoint
from connectors.builtin import load_builtin_codec
from connectors.labels import NO_LABEL, label_series, spanned_gaps
from connectors.price_steps import PriceStep, lasting_steps, pinned_prices, price_steps, split_like_steps
from connectors.ticks import encode, quote, trade
from engine.service.backtest import run_backtest as plotted_run_backtest
from engine.service.cli import main
from engine.service.config import ConfigError, ServiceConfig
from engine.service.pipeline import TickPipeline
from queries.yaml_loader import load_queries

# without the calibration plot, about half of a short run's time: no test here reads it (the CLI's: --no-plot)
run_backtest = functools.partial(plotted_run_backtest, plot=False)

QUERIES = """
queries:
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: batch}
  - {name: move50, streams: ["*"], question: move_bps_50, kind: expectation, trigger: batch}
"""
HOUR = 3_600_000_000_000
FRIDAY_21H = 1_704_488_400_000_000_000  # 2024-01-05T21:00:00Z, an hour before the FX close
WEEKEND = 48 * HOUR


def fx_week(ticks_each_side: int = 120, seed: int = 1) -> list:
    """EURUSD quotes 15 s apart: from 21:00 on Friday (half an hour of them by default, the close at 22:00), then
    from Sunday's reopen two days later, 40 pips higher. (Every label crossing the weekend needs no more ticks than
    the horizons'; 240 a side took twice the forwards of the module's backtests.)"""
    rng = random.Random(seed)
    out, mid = [], 1.0940
    for i in range(2 * ticks_each_side):
        ts = FRIDAY_21H + i * 15_000_000_000 + (WEEKEND if i >= ticks_each_side else 0)
        mid += 0.0040 if i == ticks_each_side else rng.choice((-1, 1)) * 0.00002
        out.append(quote("EURUSD", ts, round(mid - 0.00005, 6), round(mid + 0.00005, 6), 1.0, 1.0))
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("session_gap")
    checkpoint = tiny_tick_checkpoint(root / "model", seed=3, max_position_embeddings=256)
    (root / "q.yaml").write_text(QUERIES)
    ticks = fx_week()
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "week.parquet")
    return root, checkpoint, ticks


def config(checkpoint: Path, session_gap_s: float | None = None) -> ServiceConfig:
    return ServiceConfig.from_dict({"model": {"path": str(checkpoint)}, "kv": {"cells": 8192, "block_size": 16},
                                    "answers": {"session_gap_s": session_gap_s}})


def spans_the_weekend(table: pl.DataFrame, horizons: dict[str, int], ticks_before: int) -> pl.Series:
    """Per answer row: whether its label horizon (ticks `ticks`..`ticks` + h, 1-based) reaches past Friday's
    last tick."""
    horizon = pl.col("query").replace_strict(horizons, return_dtype=pl.Int64)
    return table.select((pl.col("ticks") <= ticks_before) & (pl.col("ticks") + horizon > ticks_before)).to_series()


def test_spanned_gaps_and_labels_end_at_a_longer_pause() -> None:
    ts = np.array([0, 1, 2, 10, 11, 12], dtype=np.int64) * HOUR  # a 8-hour pause between ticks 2 and 3
    assert spanned_gaps(ts, 2, 2 * HOUR).tolist() == [False, True, True, False, False, False]
    assert spanned_gaps(ts, 2, HOUR).tolist() == [True, True, True, True, False, False]  # an hour's pause too
    assert not spanned_gaps(ts, 2, 9 * HOUR).any()
    spec = load_builtin_codec().questions["direction_5"].spec
    marks = np.linspace(100.0, 101.0, 12)
    times = np.array([0, 1, 2, 3, 4, 5, 30, 31, 32, 33, 34, 35], dtype=np.int64) * HOUR // 2
    plain = label_series(spec, marks)
    gapped = label_series(spec, marks, ts=times, session_gap_ns=HOUR)  # half-hour ticks, a 12.5 h pause
    crossing = spanned_gaps(times, 5, HOUR)
    assert crossing.sum() == 5 and (gapped[crossing] == NO_LABEL).all()
    assert (gapped[~crossing] == plain[~crossing]).all() and (plain[crossing] != NO_LABEL).all()


def test_the_weekend_is_noted_without_the_option_and_left_unscored_with_it(setup) -> None:
    root, checkpoint, ticks = setup
    horizons = {"dir20": 20, "move50": 50}
    plain = run_backtest(config(checkpoint), [root / "week.parquet"], root / "q.yaml", root / "plain.parquet",
                         progress=False)
    table = pl.read_parquet(root / "plain.parquet")
    spanning = table.filter(spans_the_weekend(table, horizons, len(ticks) // 2) & pl.col("correct").is_not_null())
    assert spanning.height > 0  # Friday's last answers scored against Sunday's reopen
    summary = plain.summary()
    assert (f"note: {spanning.height} scored answers (dir20 {spanning.filter(pl.col('query') == 'dir20').height}, "
            f"move50 {spanning.filter(pl.col('query') == 'move50').height}) are labelled across a pause of an "
            f"hour or more") in summary
    assert "the widest: EURUSD, 2 days from 2024-01-05T21:29:45Z to 2024-01-07T21:30:00Z" in summary
    assert "--session-gap 1h leaves such answers unscored" in summary

    gapped = {}
    for name, chunked in [("chunked", True), ("batches", False)]:
        report = run_backtest(config(checkpoint, 3600), [root / "week.parquet"], root / "q.yaml",
                              root / f"{name}.parquet", progress=False, chunked=chunked)
        gapped[name] = pl.read_parquet(root / f"{name}.parquet").sort(["query", "stream", "seq"])
    table = gapped["chunked"]
    across = spans_the_weekend(table, horizons, len(ticks) // 2)
    assert table.filter(across)["realised"].null_count() == across.sum() == spanning.height
    kept = table.filter(~across).join(pl.read_parquet(root / "plain.parquet"), on=["query", "stream", "seq"])
    assert kept.height == table.height - across.sum() and kept["realised"].equals(kept["realised_right"])
    summary = report.summary()
    assert "labelled across a pause" not in summary
    assert (f"note: --session-gap 1h (answers.session_gap_s): {spanning.height} answers (dir20 "
            f"{spanning.filter(pl.col('query') == 'dir20').height}, move50 "
            f"{spanning.filter(pl.col('query') == 'move50').height}) have a label horizon across a pause of 1h or "
            f"more") \
        in summary
    exact = ["query", "stream", "seq", "ticks", "data_ts", "realised", "correct"]
    assert gapped["chunked"].select(exact).equals(gapped["batches"].select(exact))  # chunked == tick group by group


def test_a_query_whose_every_answer_crosses_a_pause_says_so_not_that_it_has_no_label(setup) -> None:
    """With a session gap shorter than every pause between ticks, no named question's answer is scored: the
    summary said "a free-text question and a surprise score have no such label" of dir20 and move50, which do
    have one. It now says how many answers crossed a pause longer than the gap, and the rest the file's end left
    unlabelled; a surprise score keeps the no-label reason."""
    root, checkpoint, ticks = setup
    surprise = '  - {name: nll, streams: ["*"], kind: surprise, trigger: batch}\n'
    (root / "q_surprise.yaml").write_text(QUERIES + surprise)
    report = run_backtest(config(checkpoint, 1), [root / "week.parquet"], root / "q_surprise.yaml",
                          root / "every.parquet", progress=False)
    table = pl.read_parquet(root / "every.parquet")
    assert table.filter(pl.col("query") != "nll")["correct"].null_count() == table.height - \
        table.filter(pl.col("query") == "nll").height  # every tick 15 s apart: a 1 s gap leaves nothing scored
    summary = report.summary()
    for name, question, horizon in (("dir20", "direction_20", 20), ("move50", "move_bps_50", 50)):
        answered = table.filter((pl.col("query") == name) & pl.col("probs").is_not_null()).height
        assert answered == len(ticks)
        assert (f"note: {name}: no answer scored: {question} is scored on the next {horizon} ticks of the answer's "
                f"stream, and {answered - horizon} of its {answered} answers had those ticks cross a pause of "
                f"--session-gap 1s or more (answers.session_gap_s); the other {horizon} are within {horizon} ticks of "
                f"their stream's last tick (the file ends before their horizon): such an answer is not scored"
                ) in summary, summary
    assert "note: nll: no answer scored: an answer is scored against what the ticks after it did" in summary
    assert summary.count("have no such label") == 1


def test_the_cli_option_sets_the_config_key_and_is_checked(setup, capsys) -> None:
    root, checkpoint, _ = setup
    assert main(["backtest", str(root / "week.parquet"), "--model", str(checkpoint), "--queries",
                 str(root / "q.yaml"), "--out", str(root / "cli.parquet"), "--quiet", "--no-plot", "--session-gap",
                 "90m"]) == 0
    assert "note: --session-gap 90m (answers.session_gap_s):" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["backtest", str(root / "week.parquet"), "--out", str(root / "x.parquet"), "--session-gap", "soon"])
    assert "--session-gap: must be a duration such as 1h" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="answers.session_gap_s must be a number of seconds > 0"):
        ServiceConfig.from_dict({"answers": {"session_gap_s": 0}})


def test_live_scores_and_the_adaptation_end_labels_at_the_session_gap(setup) -> None:
    """answers.session_gap_s: a live answer whose horizon crosses the weekend is counted `across_gap`, never scored,
    and the adaptation is fed no label from it (its mix then differs from one fed the weekend's move). (The module's
    tiny model: the labels, and the adaptation fed them, are the scores' whichever model answers.)"""
    _, checkpoint, _ = setup
    ticks = fx_week(120)
    published = {}
    for gap in (None, 3600):
        pipeline = TickPipeline(config(checkpoint, gap))
        pipeline.register_queries(load_queries(QUERIES, questions=pipeline.codec.questions))
        answers = []
        for i in range(0, len(ticks), 4):
            assert pipeline.ingest_message(encode(ticks[i : i + 4])) == []
            answers += pipeline.run_until_idle()
        published[gap] = {(a.query, a.version): a.value["probs"] for a in answers}
        scores = pipeline.scores.summary()["dir20"]
        if gap is None:
            assert scores["across_gap"] == 0 and scores["unscorable"] == 0
        else:  # the dir20 answers at ticks 101..120 have a horizon across the weekend (ticks 120 -> 121)
            assert scores["across_gap"] == len([v for q, v in published[gap] if q == "dir20" and 100 < v <= 120])
            assert scores["across_gap"] > 0 and scores["unscorable"] == 0
    late = [key for key in published[None] if key[0] == "dir20" and key[1] > 150]
    assert any(published[None][key] != published[3600][key] for key in late)


@pytest.fixture(scope="module")
def long_week(setup) -> Path:
    """A longer week for evaluate and train: the weekend falls in the test part of a 20/20/60 split (at its
    middle), with a train part longer than train's 63-tick window (350 a side: 700 took twice the forwards)."""
    path = setup[0] / "long_week.parquet"
    pl.DataFrame([t.to_wire() for t in fx_week(350, seed=2)]).write_parquet(path)
    return path


def test_evaluate_notes_labels_across_a_pause_and_leaves_them_out_with_the_option(setup, long_week, capsys) -> None:
    _, checkpoint, _ = setup
    # (the module's tiny model: the notes are the labels', whichever model answers; the built-in one cost ~4x)
    common = ["evaluate", str(checkpoint), str(long_week), "--split", "20/20/60", "--max-points",
              "2000", "--resamples", "10", "--threads", "1", "--json"]
    assert main(common) == 0
    said = capsys.readouterr()
    assert "scored answer points are labelled across a pause of an hour or more" in said.err
    assert "--session-gap 1h leaves such points unscored" in said.err
    assert main([*common, "--session-gap", "1h"]) == 0
    assert "labelled across a pause" not in capsys.readouterr().err


def split_session(stream: str, start: int, price: float, n: int, rng: random.Random) -> list:
    """n trades a second apart around `price` (a cent's moves)."""
    return [trade(stream, start + i * 1_000_000_000, round(price + rng.choice((-1, 0, 1)) * 0.01, 2), 100.0)
            for i in range(n)]


def test_a_split_between_two_sessions_gets_a_caution(setup) -> None:
    root, checkpoint, _ = setup
    rng = random.Random(4)
    friday, monday = 1_772_807_400_000_000_000, 1_773_063_000_000_000_000  # 2026-03-06 14:30Z, 2026-03-09 13:30Z
    # (75 trades a session: the typical move a step is judged against needs no more; 150 took twice the forwards)
    ticks = split_session("BF B", friday, 45.00, 75, rng) + split_session("BF B", monday, 22.50, 75, rng)
    ticks += split_session("KO", friday, 60.00, 75, rng) + split_session("KO", monday, 60.60, 75, rng)  # +1%
    ticks.sort(key=lambda t: t.ts)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "split.parquet")
    report = run_backtest(config(checkpoint), [root / "split.parquet"], root / "q.yaml", root / "split_a.parquet",
                          progress=False)
    cautions = [line for line in report.summary().splitlines() if line.startswith("warning: ")]
    assert len(cautions) == 1, cautions  # BF B, not KO's overnight move of 1%
    assert cautions[0].startswith("warning: BF B: its price stepped x0.5 across a pause of 2.96 days in event time "
                                  "(2026-03-06T14:31:14Z to 2026-03-09T13:30:00Z)")
    assert "near 1/2 (a 2-for-1 split, or a data error?)" in cautions[0]
    assert "split-adjusted files are expected (docs/replay.md)" in cautions[0]
    assert "scored as that move (--session-gap 1h leaves them unscored)" in cautions[0]
    report = run_backtest(config(checkpoint, 3600), [root / "split.parquet"], root / "q.yaml",
                          root / "split_b.parquet", progress=False)
    assert "the answers whose label horizon spans it are left unscored (--session-gap 1h)" in report.summary()


def test_split_like_steps_need_a_pause_a_split_ratio_and_a_step_beyond_the_typical_move() -> None:
    ts = np.array([0, 1, 2, 3, 4, 30, 31, 32, 33, 34], dtype=np.int64) * HOUR
    halved = np.array([100.0, 100.1, 99.9, 100.0, 100.1, 50.0, 50.1, 49.9, 50.0, 50.1])
    [step] = split_like_steps("X", ts, halved)
    assert (str(step.ratio), step.before_ts, step.after_ts) == ("1/2", 4 * HOUR, 30 * HOUR)
    assert split_like_steps("X", np.arange(10, dtype=np.int64) * 60_000_000_000, halved) == []  # no pause: no session
    assert split_like_steps("X", ts, np.where(np.arange(10) < 5, halved, halved * 1.2)) == []  # x0.6: no split ratio
    noisy = np.array([100.0, 80.0, 120.0, 90.0, 100.0, 50.0, 70.0, 40.0, 50.0, 60.0])  # moves of 20% a tick
    assert split_like_steps("X", ts, noisy) == []


def test_a_split_ratio_is_one_of_the_prices_as_written_not_shifted_by_the_price_offset() -> None:
    """verify55 R3: CL settles 56.98 -> 25 (x0.439, no split's) read with --price-offset 38 step x0.663 shifted, and
    were told a 3-for-2 split. The ratio is the written prices'; none where some are at or below zero."""
    ts = np.array([0, 1, 2, 3, 4, 30, 31, 32, 33, 34], dtype=np.int64) * HOUR
    settles = np.array([57.1, 56.9, 57.0, 56.98, 57.05, 25.0, 25.1, 24.9, 25.05, -37.63])
    assert not [s for s in price_steps("CL1", ts, settles + 38, 38.0) if isinstance(s, PriceStep)]
    halved = np.array([100.0, 100.1, 99.9, 100.0, 100.1, 50.0, 50.1, 49.9, 50.0, 50.1])
    [split] = [s for s in price_steps("X", ts, halved + 10, 10.0) if isinstance(s, PriceStep)]  # x0.545 shifted
    assert str(split.ratio) == "1/2" and "x0.5 " in split.caution(None)


def test_a_price_unit_change_and_levels_far_apart_are_steps_inside_a_file_as_across_files() -> None:
    """review440 #1: a pence file that goes on in pounds steps x0.01 across the night; its ratio is no split's, so
    it went unsaid (two files with the same rows got a caution). A step of a price unit is said as one, a level
    3-fold apart near no ratio as two files' are, and a unit's step inside a session names the unit, not a roll."""
    ts = np.array([0, 1, 2, 3, 4, 30, 31, 32, 33, 34], dtype=np.int64) * HOUR
    pence = np.array([72.5, 72.52, 72.48, 72.5, 72.52, 72.5, 72.52, 72.48, 72.5, 72.52])
    [unit] = split_like_steps("VOD.L", ts, np.where(np.arange(10) < 5, pence, pence / 100))
    assert str(unit.ratio) == "1/100" and "a change of price unit" in unit.caution(None)
    assert "write the later prices x100" in unit.caution(None)
    [fils] = split_like_steps("KFH.KW", ts, np.where(np.arange(10) < 5, pence, pence * 1000))  # dinars, then fils
    assert str(fils.ratio) == "1000" and "write the earlier prices x1/1000" in fils.caution(None)
    [level] = split_like_steps("VOD.L", ts, np.where(np.arange(10) < 5, pence, pence / 5))
    assert level.ratio is None and "3-fold or more and near no split ratio (two instruments" in level.caution(None)
    # an option's premium may move 100-fold in a night (price_levels leaves its files out too)
    assert split_like_steps("AAPL  261218C00150000", ts, np.where(np.arange(10) < 5, pence, pence / 100)) == []
    minutes = np.arange(100, dtype=np.int64) * 60_000_000_000
    walk = 72.5 + np.tile([0.0, 0.02, -0.02, 0.01], 25)
    [midday] = lasting_steps("VOD.L", minutes, np.where(np.arange(100) < 50, walk, walk / 100))
    assert "(x1/100: a change of price unit" in midday.caution(None) and "roll" not in midday.caution(None)


def halt_csv(path: Path, seed: int = 13) -> None:
    """An ES file as vendors stamp it: prints from 14:00 to 16:00 and 17:00 to 19:00, the last and first on the
    bounds of CME's hour-long maintenance halt, so the pause is exactly 1 h."""
    rng = random.Random(seed)
    lines, price = ["Timestamp,Symbol,Price,Volume"], 5150.0
    for start in (14, 17):
        seconds = [0.0, *sorted(rng.uniform(1, 7199) for _ in range(198)), 7200.0]
        for s in seconds:
            price += rng.choice((-0.25, 0.0, 0.25))
            clock = f"{start + int(s) // 3600:02d}:{int(s) % 3600 // 60:02d}:{s % 60:09.6f}"
            lines.append(f"2024-03-13 {clock},ESM4,{price:.2f},{rng.randint(1, 9)}")
    path.write_text("\n".join(lines) + "\n")


def test_a_halt_of_exactly_the_session_gap_is_cut_and_an_hour_pause_is_noted(setup, capsys) -> None:
    """CME's 16:00-17:00 CT halt with prints stamped on its bounds is a pause of exactly 1 h: `--session-gap 1h`
    (the help's example for a halt) cut nothing there and the note on labels across a pause of over an hour stayed
    silent, so every answer before the halt was scored against the reopen. A pause of the gap's length now cuts."""
    root, checkpoint, _ = setup
    halt_csv(root / "ESM4_halt.csv")
    ts = np.array([0, HOUR, 2 * HOUR], dtype=np.int64)
    assert spanned_gaps(ts, 1, HOUR).tolist() == [True, True, False]
    common = ["backtest", str(root / "ESM4_halt.csv"), "--tz", "America/Chicago", "--model", str(checkpoint),
              "--queries", str(root / "q.yaml"), "--quiet", "--no-plot", "--threads", "1"]
    assert main([*common, "--out", str(root / "halt_plain.parquet")]) == 0
    out = capsys.readouterr().out
    assert "are labelled across a pause of an hour or more in their stream's event times (1 such pause; the " \
           "widest: ESM4, 60 min from 2024-03-13T21:00:00Z to 2024-03-13T22:00:00Z)" in out, out
    assert main([*common, "--out", str(root / "halt_cut.parquet"), "--session-gap", "1h"]) == 0
    out = capsys.readouterr().out
    table = pl.read_parquet(root / "halt_cut.parquet")
    crossing = table.filter((pl.col("ticks") <= 200) & (pl.col("ticks") + pl.col("query").replace_strict(
        {"dir20": 20, "move50": 50}, return_dtype=pl.Int64) > 200))
    assert crossing.height == 70 and crossing["realised"].null_count() == 70
    assert "note: --session-gap 1h (answers.session_gap_s): 70 answers (dir20 20, move50 50) have a label horizon " \
           "across a pause of 1h or more" in out, out


def test_a_step_that_stays_gets_a_caution_naming_the_tick_the_size_and_the_way_out(setup) -> None:
    """A continuous series (one `Symbol`, no contract column) rolling CLK4 -> CLM4 in the night session, with no
    pause: the 95-cent step was scored as a move in every answer before it, without a word (review150 finding 3).
    A one-tick step many times the stream's typical move that stays gets a caution; a lone print that reverts, a
    jumpy stream and an ordinary walk do not."""
    root, checkpoint, _ = setup
    rng = random.Random(7)
    start, price, ticks = 1_713_470_400_000_000_000, 82.50, []  # 2024-04-18T20:00Z
    for i in range(400):
        price = round(price - (0.95 if i == 200 else 0.0) + rng.choice((-0.01, 0.0, 0.01)), 2)
        ticks.append(trade("CL", start + i * 5_000_000_000, price, 1.0))
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "cl.parquet")
    report = run_backtest(config(checkpoint), [root / "cl.parquet"], root / "q.yaml", root / "cl_a.parquet",
                          progress=False)
    cautions = [line for line in report.summary().splitlines() if line.startswith("warning: ")]
    assert len(cautions) == 1, cautions
    assert cautions[0].startswith("warning: CL: its price stepped from about 82.") and \
        "at its tick 201 (2024-04-18T20:16:40Z)" in cautions[0] and "(-1.22%)" in cautions[0], cautions[0]
    assert "and stayed there (a futures roll in a continuous series, or a bad back-adjust?)" in cautions[0]
    assert "read a stream per contract (--columns stream=SYMBOL+CONTRACT, then --streams to pick)" in cautions[0]
    walk = np.array([t.price for t in ticks])
    ts = np.array([t.ts for t in ticks], dtype=np.int64)
    assert [step.tick for step in lasting_steps("CL", ts, walk)] == [201]
    lone = walk.copy()
    lone[250] -= 0.95  # one bad print: back at the next tick
    assert [step.tick for step in lasting_steps("CL", ts, lone)] == [201]
    assert lasting_steps("CL", ts, np.where(np.arange(400) < 200, walk, walk + 0.95)) == []  # no step: a walk
    jumpy = walk + np.where(np.arange(400) // 20 % 2 == 1, 0.95, 0.0)  # a step up and back every 20 ticks
    assert lasting_steps("CL", ts, jumpy) == []


def test_train_and_evaluate_say_labels_across_a_pause_under_quiet(setup, long_week, tmp_path: Path, capsys) -> None:
    """--quiet quiets progress and the reading's notes, as backtest's does, not a note that changes what the scores
    mean: `train --quiet` and `evaluate --quiet` dropped the one on labels across a pause (and train's on streams
    over the same hours and a missing validation part, tests/test_train_evaluate.py)."""
    _, checkpoint, _ = setup
    week = long_week
    tiny = ["--from-scratch", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
            "--intermediate", "64", "--window-ticks", "63", "--steps", "1"]
    common = [str(week), "--split", "20/20/60", "--max-points", "2000", "--resamples", "10", "--threads", "1",
              "--quiet"]
    for argv in (["train", *common, "--out", str(tmp_path / "model"), *tiny], ["evaluate", str(checkpoint), *common]):
        assert main(argv) == 0
        err = capsys.readouterr().err
        assert f"flashtick {argv[0]}: note: " in err and "scored answer points are labelled across a pause of an " \
               "hour or more" in err, err
        assert "read as" not in err  # the reading's notes stay quiet


def test_a_stocks_halt_is_named_before_a_roll_and_a_futures_name_keeps_the_roll(setup, capsys) -> None:
    """review208 #5: AMC paused 5 minutes (an LULD halt) and reopened 10% higher: the caution said "a futures roll
    in a continuous series, or a bad back-adjust?". A pause at the step on a stream whose name is no future's names
    a halt first, with the --session-gap that cuts there; a continuous future's name (CLc1) keeps the roll."""
    root, checkpoint, _ = setup
    rng = np.random.default_rng(21)
    gaps = rng.integers(50, 1500, 400)  # (400 ticks: as many a side of the step as a lasting step is judged on)
    gaps[200] = 300_000  # ms: the halt
    ts = 1_715_695_200_000 + np.cumsum(gaps)  # 2024-05-14T14:00Z, ms
    prices = np.round(20 + np.cumsum(rng.choice([-0.01, 0, 0.01], 400)) + np.where(np.arange(400) >= 200, 2.0, 0), 2)
    lines = ["timestamp,symbol,price,size", *(f"{t},AMC,{p},100" for t, p in zip(ts, prices))]
    (root / "amc_halt.csv").write_text("\n".join(lines) + "\n")
    assert main(["backtest", str(root / "amc_halt.csv"), "--model", str(checkpoint), "--queries",
                 str(root / "q.yaml"), "--quiet", "--no-plot", "--threads", "1", "--out",
                 str(root / "amc.parquet")]) == 0
    [caution] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning: AMC")]
    assert "at its tick 201 (" in caution and "and stayed there (a trading halt's reopening (a stock's " \
           "limit-up/limit-down pause), or a futures roll in a continuous series, or a bad back-adjust?)" in caution
    assert caution.endswith("scored as that move: --session-gap 5m, since a pause of 5 min falls there, leaves them "
                            "unscored; for a roll: if the file holds the contract in a column, read a stream per "
                            "contract (--columns stream=SYMBOL+CONTRACT, then --streams to pick)"), caution
    [roll] = lasting_steps("CLc1", ts * 1_000_000, prices)
    assert "(a futures roll in a continuous series, or a bad back-adjust?)" in roll.caution(None)
    assert roll.caution(None).endswith("(--columns stream=SYMBOL+CONTRACT, then --streams to pick), or --session-gap "
                                       "5m, since a pause of 5 min falls there")
    # review433 #12: a stock's step to its limit with no pause (SZSE's stocks trade on, sealed at it) is no roll
    [limit] = lasting_steps("000001.SZ", (ts - np.where(np.arange(400) >= 200, 299_000, 0)) * 1_000_000, prices)
    assert "and stayed there (a stock's price limit (limit-up/limit-down), where the venue trades on at it or " \
           "pauses, or a bad print that stayed?): prices are replayed as the files give them; the answers whose " \
           "label horizon spans it are scored as that move" in limit.caution(None)
    assert "CONTRACT" not in limit.caution(None)
    # review433 #5: an hour sealed at the limit, every trade at one price, was said nowhere
    every_20s = 1_715_695_200 * 10**9 + np.arange(400) * 20 * 10**9  # (150 ticks: 50 min)
    sealed = np.where((np.arange(400) >= 200) & (np.arange(400) < 350), 22.0, prices)
    [pinned] = pinned_prices("000001.SZ", every_20s, sealed)
    assert pinned.ticks == 150 and pinned.caution(None).startswith(
        "000001.SZ: its price sat at 22 for 49.7 min (2024-05-14T15:06:40Z to 2024-05-14T15:56:20Z), 150 ticks")
    assert "(a price limit, limit-up or limit-down, where the venue trades on at it, or a market that did not " \
           "move?)" in pinned.caution(None)
    assert pinned_prices("000001.SZ", every_20s, prices) == [] == pinned_prices("CLc1", every_20s, sealed)


def test_a_continuous_futures_roll_across_the_night_gets_the_caution_a_stocks_gap_does_not() -> None:
    """review440 #5: LSEG's `FDXc1` rolls at the session's change; its +0.8% step across the night (160 times its
    typical move) got only the pause note, while the same step at 11:03 was warned. A future's step that stays is
    said across a pause too, with the pause note's cut; a stock's opening gap is still not."""
    rng = np.random.default_rng(5)
    gaps = rng.integers(60, 300, 400) * 10**9
    gaps[200] = 16 * 3600 * 10**9  # the night
    ts = 1_734_505_200 * 10**9 + np.cumsum(gaps)  # 2024-12-18T07:00Z
    prices = 19_400 + np.cumsum(rng.choice([-1.0, 0.0, 1.0], 400)) + np.where(np.arange(400) >= 200, 160.0, 0.0)
    [roll] = lasting_steps("FDXc1", ts, prices)
    assert roll.tick == 201 and "(a futures roll in a continuous series at the session's change, an opening gap, " \
        "or a bad back-adjust?)" in roll.caution(None), roll.caution(None)
    assert roll.caution(None).endswith("or --session-gap 1h, since a pause of 16 h falls there"), roll.caution(None)
    assert lasting_steps("SAP.DE", ts, prices) == []


def test_the_pause_note_names_the_pauses_the_scored_answers_cross_not_the_files() -> None:
    """review440 #3: `backtest --test-from` scored a last day's answers, which crossed one overnight pause; the note
    named a weekend before the slice as the widest and counted every pause of the file. The pauses counted and named
    are those the scored answers' labels cross."""
    from connectors.labels import MarkSeries
    from connectors.questions import QuestionSpec
    from connectors.ticks import Tick, TRADE
    from engine.service.session_gaps import gap_notes

    marks = MarkSeries()
    hour = 3600 * 10**9
    starts = (1_729_868_400 * 10**9, 1_729_868_400 * 10**9 + 64 * hour, 1_729_868_400 * 10**9 + 88 * hour)
    for start in starts:  # 2024-10-25T07:00Z (a Friday), Monday and Tuesday: a weekend, then a night
        for i in range(30):
            marks.append(Tick("SAPG.DE", ts=start + i * 60 * 10**9, kind=TRADE, price=200.0 + i % 3, size=1.0))
    spec = QuestionSpec("direction_5", "direction", 5, ("down", "flat", "up"), "")
    graded = pl.LazyFrame({"query": "dir5", "stream": "SAPG.DE", "ticks": list(range(50, 61)),
                           "correct": True, "probs": [[0.3, 0.4, 0.3]] * 11})  # the test slice: Monday's last 11
    [note] = gap_notes({"dir5": spec}, graded, {"SAPG.DE": marks}, None)
    assert note.startswith("5 scored answers (dir5 5) are labelled across a pause of an hour or more in their "
                           "stream's event times (1 such pause; the widest: SAPG.DE, 23.5 h from "
                           "2024-10-28T07:29:00Z to 2024-10-29T07:00:00Z)"), note
