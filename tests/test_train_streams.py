"""Which streams `flashtick train` trained on, and what train, evaluate and backtest --model say of them: the
streams its split left out, the streams whose training ticks overlap another's test slice, the in-sample notes,
one minimum part size for train and evaluate. CSV files of futures-like streams written here, a real tiny model."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from connectors.ticks import utc_text
from engine.service.cli import main
from engine.service.evaluation_report import format_table

pytestmark = pytest.mark.xdist_group("train_streams")

TINY = ["--from-scratch", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
        "--intermediate", "64", "--window-ticks", "63", "--threads", "1"]
QUICK = ["--max-points", "64", "--resamples", "10", "--threads", "1"]
HOUR_US = 3_600_000_000
START_US = 1_792_967_139_445_317  # 2026-10-26, as a CME-style export stamps it in epoch microseconds

# stream -> (ticks, first hour, last hour): FRONT rolls into BACK, SPREAD trades between them; THIN (a deferred
# month) and MID are too short for the 70/15/15 split of a 63-tick window (parts of 64 ticks: 757 ticks)
STREAMS: dict[str, tuple[int, float, float]] = {
    "FRONT": (1000, 0, 60), "BACK": (1000, 20, 100), "SPREAD": (1000, 10, 80), "THIN": (100, 0, 100),
    "MID": (250, 0, 100)}


def stream_times(name: str) -> np.ndarray:
    n, first, last = STREAMS[name]
    return START_US + (np.linspace(first, last, n, endpoint=False) * HOUR_US).astype(np.int64)


def thin_validation(ticks: int, points: tuple[int, int, int, int]) -> str:
    """train --no-head's note on a validation part too small to calibrate on (one stream, 70/15/15): it changes
    what the shipped answers mean, so `train --quiet` says it too (finetune_data.validation_note). No head was asked
    for, so the note does not blame the split for its absence."""
    counts = ", ".join(f"{name} ({n})" for name, n in zip(("direction_5", "direction_20", "volatility_50"), points))
    return (f"flashtick train: note: the validation part is small: its {ticks} ticks (--split 70/15/15, 1 stream) hold "
            f"fewer labelled answer points than the 200 a question's answer calibration is fitted on for {counts} "
            f"and move_bps_50 ({points[3]}): their answers ship uncalibrated, and early stopping watches the loss on "
            f"windows of those {ticks} ticks alone; a larger validation part (--split) or more ticks fits them\n")


def write_csv(path: Path, streams: dict[str, tuple[int, float, float]] = STREAMS) -> Path:
    rng = np.random.default_rng(7)
    rows = []
    for name in streams:
        n = streams[name][0]
        times = START_US + (np.linspace(streams[name][1], streams[name][2], n, endpoint=False) * HOUR_US).astype(
            np.int64)
        if name == "SPREAD":  # a calendar spread: below zero on 4 rows of 7, all through the file
            prices = 0.02 * (np.arange(n) % 7 - 3) + rng.choice([-0.005, 0.0, 0.005], n)
        else:
            prices = 60 + np.cumsum(rng.choice([-0.01, 0.0, 0.01], n))
        for ts, price in zip(times, prices):
            rows.append((int(ts), name, round(float(price), 3), int(rng.integers(1, 9)), rng.choice(["buy", "sell"])))
    rows.sort()
    path.write_text("ts_us,symbol,price,size,aggressor_side\n" + "".join(f"{t},{s},{p},{q},{a}\n"
                                                                          for t, s, p, q, a in rows))
    return path


def two_stocks_as_one(folder: Path) -> list[Path]:
    """Two stocks' files of one symbol (prices near 300 and near 60, over the same seconds): read as one stream,
    with the reading's cautions "two instruments?" and "whose times overlap"."""
    rng = np.random.default_rng(5)
    files = []
    for name, level, offset in (("a.csv", 300.0, 0), ("b.csv", 60.0, 5)):
        prices = level + np.cumsum(rng.choice([-0.05, 0.0, 0.05], 500))
        rows = "".join(f"{START_US + k * 1_000_000 + offset},HK,{p:.2f},100,{'buy' if k % 3 else 'sell'}\n"
                       for k, p in enumerate(prices))
        files.append(folder / name)
        files[-1].write_text("ts_us,symbol,price,size,aggressor_side\n" + rows)
    return files


def dir20_queries(folder: Path, trigger: str = "batch") -> Path:
    """A queries file of tick_model.yaml's dir20 alone (its trigger too: every batch): for the runs whose checks are
    the reading's and the in-sample notes, which no query changes (the example's four answered 3x the answers, each
    adapted online: most of a run's time). The runs that check notes alone, never an answer's count, ask it every
    ``trigger`` ticks instead: the notes come from the ticks' spans, and an answer a tick was most of a run."""
    queries = folder / f"dir20_{trigger}.yaml"
    queries.write_text("queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, "
                       f"trigger: {trigger}}}\n")
    return queries


def never_trained_on(stream: str) -> str:
    """evaluate's warning of a stream the `trained` fixture's model never trained on (review443 #2), its newline too."""
    return (f'flashtick evaluate: warning: stream "{stream}" is not among the streams this model was trained on '
            f'("BACK", "FRONT", "SPREAD": its evaluation.json\'s trained_on.streams): its answers there, calibrated '
            f"and blended by answer heads fitted on those streams, are outside what it learnt, so read its scores "
            f"there as of another instrument (a model trained on this one's ticks: flashtick train; docs/model.md, "
            f"Streams trained on)\n")


NOTES_ONLY = "{ticks: 25}"  # dir20_queries' trigger for the runs whose checks are notes alone


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, Path, str, str]:
    """(the CSV, a tiny model trained on it with the spread shifted above zero, train's stdout, its stderr)."""
    root = tmp_path_factory.mktemp("train_streams")
    csv = write_csv(root / "futures.csv")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["train", str(csv), "--out", str(root / "model"), *TINY, "--steps", "2", "--batch", "2",
                   "--eval-every", "1", "--price-offset", "SPREAD=1", *QUICK])
    assert rc == 0, err.getvalue()
    return csv, root / "model", out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def at_the_split(trained, tmp_path_factory) -> tuple[Path, str]:
    """(the answers file, the summary printed) of `backtest CSV --model M --test-from 0.85` (the checkpoint's own
    split, the files read as they are), run once: two tests read it. Its checks are dir20's: it asks dir20 alone."""
    csv, model, _, _ = trained
    folder = tmp_path_factory.mktemp("at_the_split")
    out, printed = folder / "bt.parquet", io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        assert main(["backtest", str(csv), "--model", str(model), "--threads", "1", "--quiet", "--no-plot", "--out",
                     str(out), "--test-from", "0.85", "--queries", str(dir20_queries(folder))]) == 0
    return out, printed.getvalue()


def test_train_says_the_streams_it_left_out_at_its_end(trained) -> None:
    """A stream too short to split was left out silently: only the model card said so."""
    _, model, out, err = trained
    said = ["flashtick train: note: left out MID: 250 ticks leave its validation and test parts under 64 "
            "ticks", "flashtick train: note: left out THIN: 100 ticks leave its validation and test parts under 64 "
            "ticks"]
    assert err.splitlines()[-2:] == said, err
    card = (model / "TRAINING.md").read_text()
    assert all(line.replace("flashtick train: note: ", "  - ") in card for line in said)
    assert "direction_20" in out and "THIN" not in out


def test_every_stream_whose_training_runs_past_another_s_test_start_is_named(trained, tmp_path: Path) -> None:
    """The note named the first pair only (BACK past FRONT's test start), not the spread, whose training ticks
    run past FRONT's test start too; and not that BACK's run past SPREAD's."""
    _, model, _, err = trained
    overlap = ("BACK's and SPREAD's training ticks run past the start of FRONT's test slice; BACK's training ticks run "
               "past the start of SPREAD's test slice (they cover the same hours): if they move together, those test "
               "slices are not fully out of sample")
    assert f"flashtick train: note: {overlap}" in err, err
    assert overlap in (model / "TRAINING.md").read_text()
    # seven streams from the same hour, each 1.5 times as long as the one before: every longer one's training
    # ticks run past a shorter one's test start; named four to a test slice, four test slices, then counted
    many = {f"S{k}": (400, 0, 10 * 1.5**k) for k in range(7)}
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        assert main(["evaluate", str(model), str(write_csv(tmp_path / "seven.csv", many)), "--split", "40/30/30",
                     *QUICK]) == 0
    note = next(line for line in err.getvalue().splitlines() if "training ticks run past" in line)
    assert note.startswith("flashtick evaluate: note: S1's, S2's, S3's, S4's and 2 more streams' training ticks run "
                           "past the start of S0's test slice; S2's, S3's, S4's, S5's and 1 more stream's training "
                           "ticks run past the start of S1's test slice; S3's, S4's, S5's and S6's training ticks run "
                           "past the start of S2's test slice; S4's, S5's and S6's training ticks run past the start "
                           "of S3's test slice; and so for 2 more streams' test slices (they cover the same hours)"), \
        note


def test_consecutive_contracts_get_each_stream_s_parts_and_a_true_note(trained, tmp_path: Path, capsys) -> None:
    """H4 then M4 (the roll: M4's ticks all after H4's last): the one "parts" line spanned both streams, so the
    parts looked overlapping (validation starting before training ended), and the note said M4's training ticks
    "cover the same hours" as H4's test slice, which they do not: they come after it. Each stream's own parts are
    printed, and the note says the model saw later data."""
    _, model, _, _ = trained
    csv = write_csv(tmp_path / "roll.csv", {"H4": (1000, 0, 30), "M4": (1000, 31, 60)})
    assert main(["evaluate", str(model), str(csv), *QUICK]) == 0
    out, err = capsys.readouterr()
    assert ("flashtick evaluate: note: M4's training ticks come after H4's test slice begins (the model saw later "
            "data): if they move together, that test slice is not fully out of sample") in err, err
    assert "same hours" not in err
    lines = out.splitlines()
    at = lines.index("parts (UTC event times), each stream's own (the split is per stream, in tick order):")
    for line, (name, first, last) in zip(lines[at + 1 : at + 3], (("H4", 0, 30), ("M4", 31, 60))):
        assert line.startswith(f"  {name}: train {utc_text(START_US * 1000 + first * HOUR_US * 1000)} to "), line
        assert line.count(";") == 2 and "test" in line
    assert not any(line.startswith("parts (UTC event times): ") for line in lines)


def test_evaluate_refuses_a_stream_too_short_with_train_s_minimum(trained, capsys) -> None:
    """evaluate split with parts of one tick: its suggested --split 49/51 left a one-tick test slice, an empty
    table, a blank verdict and exit 0. It now takes train's minimum part (the model's window and a tick), and
    its refusal does not speak of training."""
    csv, model, _, _ = trained
    for split in ("70/15/15", "49/51"):
        assert main(["evaluate", str(model), str(csv), "--streams", "THIN", "--split", split, *QUICK]) == 2
        out, err = capsys.readouterr()
        assert out == "" and "error: no stream is long enough to split: THIN: 100 ticks leave its" in err, err
        assert "parts under 64 ticks" in err and "no split works for THIN's 100 ticks" in err, err
    assert main(["evaluate", str(model), str(csv), "--streams", "MID", *QUICK]) == 2
    err = capsys.readouterr().err
    assert "MID: 250 ticks leave its validation and test parts under 64 ticks" in err  # as train said
    offered = re.search(r"or --split ([\d/]+), whose parts of MID's 250 ticks are each at least 64 ticks\)", err)
    assert offered and "training" not in err and "--steps" not in err, err
    assert main(["evaluate", str(model), str(csv), "--streams", "MID", "--split", offered[1], *QUICK]) == 0
    out, err = capsys.readouterr()
    rows = [line.split()[0] for line in out.splitlines()[2:6]]
    assert rows == ["direction_5", "direction_20", "volatility_50", "move_bps_50"], out  # every question scored
    verdict = [line for line in out.splitlines() if line.startswith("verdict: ")]
    assert verdict and all(len(line) > len("verdict: ") for line in verdict), out
    assert "model: answers not calibrated (the validation part" not in out, out
    assert "trained and validated on" not in err, err  # MID was never trained on


def test_a_table_with_no_question_has_no_calibration_line_and_no_blank_verdict() -> None:
    """"model: answers not calibrated (the validation part of ...)" was said of an empty table, and of questions
    the checkpoint's calibration has no fit for, as if that part had calibrated them."""
    source = "the validation part of the training files"
    table = format_table({"questions": {}, "calibration_source": source})
    assert "verdict" not in table and "model:" not in table, table
    ci = {"diff": 0.0, "lo": -0.01, "hi": 0.01}
    scores = {name: {"accuracy": 0.5, "brier": 0.6} for name in ("model", "prior", "majority", "logistic")}
    unfitted = {"n": 300, "blocks": 20, "scores": scores, "model_minus": {"logistic": {"accuracy": ci, "brier": ci}},
                "answer_calibration": {"temperature": 1.0, "bias": [0.0] * 3, "points": 0}}
    table = format_table({"questions": {"direction_5": unfitted}, "calibration_source": source})
    assert (f"model: answers not calibrated: the checkpoint's calibration (from {source}) covers none of these "
            f"questions") in table, table


def test_the_in_sample_notes_name_the_streams_trained_on_and_the_default_split_it_was_trained_with(
        trained, tmp_path: Path, capsys) -> None:
    """"trained and validated on the first 85% of futures.csv" was said of a stream the split left out: the note
    names the streams the checkpoint trained on (kept in its evaluation.json); a checkpoint from before they were
    kept says what it did.

    And `evaluate --split 50/50` of a model trained on the default split said "this model was trained with no
    --split": it was trained with --split 70/15/15, which the checkpoint records by recording none. (One evaluate
    run of the same command makes both checks.)"""
    csv, model, _, _ = trained
    recorded = json.loads((model / "evaluation.json").read_text())["trained_on"]["streams"]
    assert sorted(recorded) == ["BACK", "FRONT", "SPREAD"]
    assert recorded["BACK"] == int(stream_times("BACK")[849]) * 1000  # its validation part's last tick, ns
    assert main(["evaluate", str(model), str(csv), "--split", "50/50", *QUICK]) == 0
    err = capsys.readouterr().err
    assert (f"note: this model was trained and validated on the first 85% of the ticks of streams BACK, FRONT, SPREAD "
            f"in {csv}; the test slice starts at 50%, inside it") in err, err
    assert ("note: this model was trained with --split 70/15/15 (the default); this run takes --split 50/0/50"
            in err), err
    assert "no --split" not in err, err
    # review443 #2: MID, which the split left out of training, is scored here (50/50 splits it): said once
    assert err.count('stream "MID" is not among the streams this model was trained on ("BACK", "FRONT", '
                     '"SPREAD": ') == 1, err
    older = tmp_path / "older"
    shutil.copytree(model, older)
    evaluation = json.loads((older / "evaluation.json").read_text())
    del evaluation["trained_on"]["streams"]
    (older / "evaluation.json").write_text(json.dumps(evaluation))
    assert main(["evaluate", str(older), str(csv), "--split", "50/50", *QUICK]) == 0
    assert f"note: this model was trained and validated on the first 85% of {csv}; the test slice" in \
        capsys.readouterr().err


def test_backtest_states_the_trained_part_in_event_times_when_its_positions_do_not_map(trained, tmp_path: Path,
                                                                                       capsys) -> None:
    """Read with another --price-offset than the one it was trained with (2, not 1), the files are read otherwise:
    training's tick positions ("trained and validated on its ticks before 850") are not taken to be this run's.
    Said in event times, of the streams trained on; a --test-from past the trained part in time is not called in
    sample. (Without the option, a backtest of the training files reads them as trained; one too small to lift the
    spread, 0.03, would leave holes in it, which a backtest refuses: test_zero_crossings.py.)"""
    csv, model, _, _ = trained
    argv = ["backtest", str(csv), "--model", str(model), "--threads", "1", "--quiet", "--no-plot", "--queries",
            str(dir20_queries(tmp_path, NOTES_ONLY))]
    assert main([*argv, "--out", str(tmp_path / "a.parquet"), "--price-offset", "SPREAD=2"]) == 0
    err = capsys.readouterr().err
    note = next(line for line in err.splitlines() if "not out of sample" in line)
    assert note.startswith("flashtick backtest: note: this model was trained and validated on the first 85% of the "
                           "ticks of streams BACK, FRONT, SPREAD in "), note
    back = stream_times("BACK") * 1000
    assert (f"(stream BACK: scored from {utc_text(int(back[0]))}, trained and validated on its ticks up to "
            f"{utc_text(int(back[849]))}, UTC event times: this run reads the files otherwise than training did, so "
            f"training's tick positions do not map onto its ticks)") in note, note
    assert "THIN" not in note and "MID" not in note and "scored from its tick" not in note
    # 90% of the spread's ticks is after its trained part in time, as are the others'
    assert main([*argv, "--out", str(tmp_path / "b.parquet"), "--test-from", "0.9", "--price-offset",
                 "SPREAD=2"]) == 0
    assert "not out of sample" not in capsys.readouterr().err
    # read as trained, the positions are this run's and said so, as before
    assert main([*argv, "--out", str(tmp_path / "c.parquet"), "--price-offset", "SPREAD=1", "--test-from", "0.5"]) == 0
    err = capsys.readouterr().err
    assert "(stream BACK: scored from its tick 500, trained and validated on its ticks before 850)" in err, err


def test_a_stream_row_with_no_answer_scored_says_why(trained, at_the_split: tuple[Path, str], tmp_path: Path,
                                                    capsys) -> None:
    """--test-from 0.85 --by-stream: THIN's 15 answers after its 85th tick all lie within direction_20's horizon
    of its last tick; its row showed dashes and no reason. Without --by-stream (the same --test-from, the files read
    as they are: THIN's ticks as here) no stream row is printed, and no note of them. The queries are the
    example's (tick_model.yaml) dir20 and vol50, whose rows and notes are checked (its move50 asked at every tick,
    half the run's answers, is not)."""
    csv, model, _, _ = trained
    queries = tmp_path / "dir20_vol50.yaml"
    queries.write_text("queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, "
                       "trigger: batch}\n  - {name: vol50, streams: ['*'], question: volatility_50, kind: choice, "
                       "trigger: {ticks: 50}}\n")
    argv = ["backtest", str(csv), "--model", str(model), "--threads", "1", "--quiet", "--no-plot", "--price-offset",
            "SPREAD=1", "--test-from", "0.85", "--queries", str(queries), "--out", str(tmp_path / "a.parquet")]
    assert main([*argv, "--by-stream"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  THIN +15 +0 +- ", out, re.M), out
    assert ("note: dir20 on THIN: no answer scored: direction_20 is scored on the next 20 ticks of the answer's "
            "stream, and no answer here had more than 14 after it") in out, out
    assert re.search(r"vol50 on [^:]*THIN", out) and "on FRONT" not in out  # (streams of one reason on one line)
    import polars as pl

    answers, said = at_the_split
    thin = pl.read_parquet(answers).filter((pl.col("query") == "dir20") & (pl.col("stream") == "THIN"))
    after = thin.filter(pl.col("ticks") > 85)
    assert after.height == 15 and after["realised"].null_count() == 15  # THIN's answers in slice: none labelled
    assert "on THIN: no answer scored" not in said and not re.search(r"^  THIN ", said, re.M)  # no rows, no note


def test_a_chain_of_short_series_is_summed_up_in_one_line_even_under_quiet(trained, tmp_path: Path, capsys) -> None:
    """An option chain (one underlying, many series of a few ticks): train said a line per series left out (1,556)
    and nothing under --quiet, evaluate's refusal named every series (44 KB on one line), and train's table did not
    say what it trained on. Now one line (how many, shortest and longest, the longest few named), under --quiet
    too; --verbose names each; train's first line says the streams trained on (evaluate's says the streams scored)."""
    chain = {"SPY": (1000, 0, 60), **{f"SPY   241220C00{450 + k}000": (3 + 4 * k, 0, 60) for k in range(6)}}
    csv = write_csv(tmp_path / "chain.csv", chain)
    argv = ["train", str(csv), *TINY, "--steps", "1", "--batch", "1", "--no-head", *QUICK]
    summed = ("left out 6 of the 7 streams are too short to split (3 to 23 ticks; this split needs 757 ticks in a "
              "stream, each part at least 64), left out: SPY   241220C00455000 (23), SPY   241220C00454000 (19), "
              "SPY   241220C00453000 (15) and 3 more")
    for flags in ([], ["--quiet"]):
        assert main([*argv, "--out", str(tmp_path / f"m{len(flags)}"), *flags]) == 0
        out, err = capsys.readouterr()
        assert out.startswith("trained 1 step (steps done) on 1 stream (SPY) in "), out
        assert [line for line in err.splitlines() if "left out" in line] == [f"flashtick train: note: {summed}"], err
        # under --quiet the summed-up line, and the thin validation part's note (SPY's 1,000 ticks): what the
        # answers mean, not progress
        assert not flags or err == thin_validation(100, (95, 80, 50, 50)) + f"flashtick train: note: {summed}\n", err
    assert main([*argv, "--out", str(tmp_path / "m2"), "--quiet", "--verbose"]) == 0
    err = capsys.readouterr().err
    assert err.count("flashtick train: note: left out SPY   241220C00") == 6, err
    assert "flashtick train: note: left out SPY   241220C00450000: 3 ticks leave its train and validation and " \
           "test parts under 64 ticks" in err, err
    assert all(f"left out SPY   241220C00{450 + k}000: " in (tmp_path / "m0" / "TRAINING.md").read_text()
               for k in range(6))  # the model card names each
    assert "- Losses: last 1 training step next-token" in (tmp_path / "m0" / "TRAINING.md").read_text()
    # evaluate: the same line; a refusal of the series alone sums them up, and --verbose names each
    _, model, _, _ = trained
    assert main(["evaluate", str(model), str(csv), "--quiet", *QUICK]) == 0
    # (and, review443 #2, that the futures model never trained on SPY)
    assert capsys.readouterr().err == f"flashtick evaluate: note: {summed}\n{never_trained_on('SPY')}"
    series = ["--streams", "SPY   2412*"]
    assert main(["evaluate", str(model), str(csv), *series, *QUICK]) == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("flashtick evaluate: error: no stream is long enough to split: its 6 streams hold 3 to 23 "
                            "ticks (the longest: SPY   241220C00455000 (23), SPY   241220C00454000 (19), SPY   "
                            "241220C00453000 (15) and 3 more; --verbose names each) (this split needs 757 ticks"), error
    assert main(["evaluate", str(model), str(csv), *series, "--verbose", *QUICK]) == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert all(f"SPY   241220C00{450 + k}000: {3 + 4 * k} ticks leave its" in error for k in range(6)), error


def test_train_and_evaluate_under_quiet_say_the_rows_their_reading_rejected_in_one_line(trained, tmp_path: Path,
                                                                                         capsys) -> None:
    """`train --quiet` (and `evaluate --quiet`) said nothing of the rows the files' reading rejected: a model trained
    on a file 6% of whose rows were dropped (a misread column, most likely) passed as trained on all of it. Without
    --quiet a line per reason and the warning are said; under --quiet one line, the warning's share with it."""
    csv = write_csv(tmp_path / "spy.csv", {"SPY": (1000, 0, 60)})
    header, *rows = csv.read_text().splitlines()
    rows = [re.sub(r",\d+,(buy|sell)$", r",-1,\1", row) if i % 16 == 0 else row for i, row in enumerate(rows)]
    csv.write_text("\n".join([header, *rows]) + "\n")  # 63 of the 1,000 rows with a negative size
    argv = ["train", str(csv), *TINY, "--steps", "1", "--batch", "1", "--no-head", *QUICK]
    assert main([*argv, "--out", str(tmp_path / "m0")]) == 0
    err = capsys.readouterr().err
    assert "rejected negative_size: 63 (" in err and "negative_size 63 (6%) of the 1000 ticks read" in err, err
    said = ("warning: 63 of the 1000 ticks read rejected (negative_size 63), left out of every answer and score: "
            "negative_size 6% of them, is a column read as the file means it? (without --quiet: the first such row; "
            "docs/replay.md)")
    assert main([*argv, "--out", str(tmp_path / "m1"), "--quiet"]) == 0
    assert capsys.readouterr().err == thin_validation(91, (86, 71, 41, 41)) + f"flashtick train: {said}\n"
    _, model, _, _ = trained
    assert main(["evaluate", str(model), str(csv), "--quiet", *QUICK]) == 0
    assert capsys.readouterr().err == f"flashtick evaluate: {said}\n{never_trained_on('SPY')}"


def test_train_says_rows_its_streams_left_out_as_left_out_and_runs_on_backtests_thread_count(tmp_path: Path,
                                                                                           capsys) -> None:
    """Review 104: `train --streams FRONT --quiet` called the other streams' rows, left out on purpose, "rejected"
    (backtest says "left out by a filter"), and `--threads` defaulted to torch's (every core of a shared machine)
    where backtest's is model.threads' 1. Both now as backtest's, and --help says the default."""
    import torch

    csv = write_csv(tmp_path / "futures.csv", {name: STREAMS[name] for name in ("FRONT", "BACK")})
    threads = torch.get_num_threads()
    torch.set_num_threads(2)  # as torch's default on a machine of two cores or more
    try:
        argv = ["train", str(csv), *TINY[:TINY.index("--threads")], "--steps", "1", "--batch", "1",
                "--no-head", "--max-points", "64", "--resamples", "10", "--streams", "FRONT", "--quiet"]
        assert main([*argv, "--out", str(tmp_path / "m")]) == 0
        assert torch.get_num_threads() == 1  # what it trained on
    finally:
        torch.set_num_threads(threads)
    err = capsys.readouterr().err
    assert err == thin_validation(100, (95, 80, 50, 50)) + (
        "flashtick train: note: 1000 of the 2000 ticks read left out by a filter (--streams, --from/--to, --hours or "
        "a map's keep: not an error)\n"), err
    for command in ("train", "evaluate"):
        with pytest.raises(SystemExit), contextlib.redirect_stdout(io.StringIO()) as help_text:
            main([command, "--help"])
        assert "torch CPU threads (default 1, as backtest's" in " ".join(help_text.getvalue().split())


def test_train_and_evaluate_under_quiet_say_the_readings_cautions_once_and_train_json_keeps_them(
        trained, tmp_path: Path, capsys) -> None:
    """Review 174, finding 3: two stocks' files read as one stream (prices near 300 and near 60, over the same
    seconds) scored direction_5 at accuracy 1.000 and Brier 0.000, and `train --quiet` / `evaluate --quiet` said
    nothing: the reading's cautions ("two instruments?", "fed by both ... whose times overlap") went with its plain
    notes. They change what the scores mean: said under --quiet, once each; the plain notes stay quiet.

    `train --json` said no caution (its stderr is quiet for a script) and its record had none of the reading's:
    two stocks read as one stream ("two instruments?") left no trace in what a script reads. The record's
    `cautions` now holds each line as train says it on stderr without --json (under --quiet: the run above), in the
    same order."""
    files = two_stocks_as_one(tmp_path)
    paths = [str(f) for f in files]
    runs = {"train": ["train", *paths, *TINY, "--steps", "1", "--batch", "1", "--no-head", *QUICK, "--overwrite",
                      "--out", str(tmp_path / "m")],
            "evaluate": ["evaluate", str(trained[1]), *paths, *QUICK]}
    said: dict[str, dict[bool, list[str]]] = {}
    for command, argv in runs.items():
        said[command] = {}
        for flags in ([], ["--quiet"]):
            assert main([*argv, *flags]) == 0
            said[command][bool(flags)] = lines = capsys.readouterr().err.splitlines()
            merged = [line for line in lines if "two instruments?" in line]
            assert len(merged) == 1, (command, flags, lines)
            assert merged[0].startswith(f"flashtick {command}: warning: one stream HK from two files whose prices "
                                        f"differ 5.0-fold: two instruments? "), merged
            assert sum("whose times overlap" in line for line in lines) == 1, (command, flags, lines)
        # the reading's plain notes ("no column map given; read as ...", "reading the files with ...") stay quiet
        quiet, plain = said[command][True], said[command][False]
        assert set(quiet) < set(plain), (command, said[command])
        assert not any("read as" in line or "reading the files with" in line for line in quiet), quiet
    # train --quiet --json: the same cautions in its record, none on stderr
    printed = [line.removeprefix("flashtick train: ") for line in said["train"][True]]
    assert main([*runs["train"], "--quiet", "--json"]) == 0
    out, err = capsys.readouterr()
    cautions = json.loads(out)["cautions"]
    assert err == "" and cautions == printed, (cautions, printed)
    assert any(line.startswith("warning: one stream HK from two files whose prices differ 5.0-fold: two "
                               "instruments? ") for line in cautions), cautions


def test_scores_on_a_copy_of_the_training_ticks_are_called_in_sample(trained, tmp_path: Path, capsys) -> None:
    """The in-sample note fired only when a run read the training FILE itself: the same ticks as Parquet, or the
    first 60% of the rows exported again, scored the model on what it was trained and validated on without a word.
    It now compares each stream's scored event times with the span the checkpoint trained and validated on (its
    evaluation.json), whatever the file is called; the same ticks moved 200 hours later are out of sample."""
    import polars as pl

    csv, model, _, _ = trained
    starts = json.loads((model / "evaluation.json").read_text())["trained_on"]["stream_starts"]
    assert starts["BACK"] == int(stream_times("BACK")[0]) * 1000
    table = pl.read_csv(csv)
    copy, head, later = tmp_path / "futures.parquet", tmp_path / "futures_head.csv", tmp_path / "futures_later.csv"
    table.write_parquet(copy)
    table.head(int(table.height * 0.6)).write_csv(head)
    table.with_columns(pl.col("ts_us") + 200 * HOUR_US).write_csv(later)
    # the copy's default test slice comes after what it saw; of the head's streams only FRONT is long enough
    for data, split, name in ((copy, "50/20/30", "BACK"), (head, "70/15/15", "FRONT")):
        assert main(["evaluate", str(model), str(data), "--split", split, *QUICK]) == 0
        note = next(line for line in capsys.readouterr().err.splitlines() if "not out of sample" in line)
        times = stream_times(name) * 1000
        assert note.startswith(f"flashtick evaluate: note: this model was trained and validated on stream {name}'s "
                               f"ticks from "
                               f"{utc_text(int(times[0]))} up to {utc_text(int(times[849]))} (UTC event times, its "
                               f"evaluation.json), and the test slice of {name} runs from "), note
        assert "these files are not the training files, but their ticks are the ones it saw" in note, note
    assert main(["evaluate", str(model), str(later), *QUICK]) == 0
    assert "not out of sample" not in capsys.readouterr().err
    argv = ["backtest", "--model", str(model), "--threads", "1", "--quiet", "--no-plot", "--max-ticks", "2000",
            "--queries", str(dir20_queries(tmp_path, NOTES_ONLY))]
    assert main([*argv, str(copy), "--out", str(tmp_path / "copy.parquet")]) == 0
    note = next(line for line in capsys.readouterr().err.splitlines() if "not out of sample" in line)
    assert note.startswith("flashtick backtest: note: this model was trained and validated on stream "), note
    assert "and the scored span of " in note, note
    assert main([*argv, str(later), "--out", str(tmp_path / "later.parquet")]) == 0
    assert "not out of sample" not in capsys.readouterr().err


def test_backtest_test_from_at_the_split_scores_evaluate_s_test_part(trained, at_the_split: tuple[Path, str],
                                                                     tmp_path: Path, capsys) -> None:
    """review226 #3: `backtest --test-from 0.85` of a model trained on the default 70/15/15 scored the 50-tick gap
    before the test part too (6800 of 8000, where evaluate's test part starts at 6850), though the docs said
    `evaluate --batch-ms 100` scores the same points. At the checkpoint's own split it now cuts each stream it
    trained on at its test part's first tick: both score the same (stream, tick) points."""
    import polars as pl

    csv, model, _, _ = trained
    parts = json.loads((model / "evaluation.json").read_text())["streams"]
    (out, said), points = at_the_split, tmp_path / "points.parquet"
    assert "(--test-from 0.85; 'in slice' counts them): on the streams the model was trained on, from its test " \
           "part's first tick, after the gap its training left before it, as `flashtick evaluate` scores it" in said
    assert main(["evaluate", str(model), str(csv), "--batch-ms", "100", "--points-out", str(points), "--resamples",
                 "10", "--threads", "1"]) == 0  # (every point: no --max-points)
    capsys.readouterr()
    answers = pl.read_parquet(out).filter((pl.col("query") == "dir20") & pl.col("stream").is_in(list(parts)))
    scored = answers.filter(pl.col("realised").is_not_null()).with_columns(tick=pl.col("ticks") - 1)
    tested = {name: part["test"][0] for name, part in parts.items()}
    scored = scored.filter(pl.col("tick") >= pl.col("stream").replace_strict(tested, return_dtype=pl.Int64))
    evaluated = pl.read_parquet(points).filter(pl.col("question") == "direction_20")
    assert scored.height > 100 and sorted(scored.select("stream", "tick").rows()) == \
        sorted(evaluated.select("stream", "tick").rows())
    # what the backtest scored is exactly that: its scores count those points
    summary = json.loads(out.with_suffix(".scores.json").read_text())
    others = pl.read_parquet(out).filter((pl.col("query") == "dir20") & ~pl.col("stream").is_in(list(parts)))
    cuts = {name: int(STREAMS[name][0] * 0.85) for name in ("THIN", "MID")}  # not trained on: the fraction's cut
    others = others.filter(pl.col("realised").is_not_null() & (pl.col("ticks") > pl.col("stream").replace_strict(
        cuts, return_dtype=pl.Int64)))
    assert next(s for s in summary if s["query"] == "dir20")["scored"] == scored.height + others.height


def _scored_dir20(answers: Path, parts: dict[str, Any]) -> int:
    """How many dir20 answers a backtest --test-from at the tiny checkpoint's split scores: each stream it trained
    on from its test part's first tick (evaluate's), the others (THIN, MID) after the first 85% of their ticks."""
    import polars as pl

    cuts = {name: part["test"][0] for name, part in parts.items()} | {
        name: int(STREAMS[name][0] * 0.85) for name in STREAMS if name not in parts}  # (answer at tick = ticks - 1)
    scored = pl.read_parquet(answers).filter((pl.col("query") == "dir20") & pl.col("realised").is_not_null())
    return scored.filter(pl.col("ticks") - 1 >= pl.col("stream").replace_strict(cuts, return_dtype=pl.Int64)).height


def test_backtest_test_from_test_scores_the_checkpoint_s_own_test_part(trained, tmp_path: Path, capsys) -> None:
    """fix239: `--test-from` cut at evaluate's test part only when given the checkpoint's exact split share (0.85 of
    70/15/15, which a user must work out); `--test-from test` reads it from the checkpoint's evaluation.json."""
    csv, model, _, _ = trained
    parts = json.loads((model / "evaluation.json").read_text())["streams"]
    out = tmp_path / "bt.parquet"
    assert main(["backtest", str(csv), "--model", str(model), "--threads", "1", "--quiet", "--no-plot", "--out",
                 str(out), "--test-from", "test", "--queries", str(dir20_queries(tmp_path, "{ticks: 5}"))]) == 0
    # (dir20 asked every 5 ticks, not every batch: a fifth of the answers, ~10 of them in each trained stream's gap
    # before its test part, which a cut at the plain 85% would score)
    captured = capsys.readouterr()
    assert ("flashtick backtest: note: --test-from test: this model was trained and validated on the first 85% of "
            "each stream's ticks (its evaluation.json): scoring the answers after them, as --test-from 0.85"
            in captured.err), captured.err
    assert "(--test-from 0.85; 'in slice' counts them): on the streams the model was trained on, from its test " \
           "part's first tick" in captured.out, captured.out
    summary = json.loads(out.with_suffix(".scores.json").read_text())
    assert next(s for s in summary if s["query"] == "dir20")["scored"] == _scored_dir20(out, parts) > 20
    assert json.loads(out.with_suffix(".manifest.json").read_text())["run"]["test_from"] == 0.85  # what it ran


def test_run_backtest_at_the_checkpoint_s_split_scores_its_test_part_and_says_what_is_in_sample(
        trained, tmp_path: Path) -> None:
    """review267: `run_backtest(..., test_from="test")` raised a raw TypeError (`'<' not supported between 'int'
    and 'str'`) though the docs say its keywords mirror the CLI's; the model is chosen with ServiceConfig.from_dict
    (docs/replay.md "From Python"). review420 #7: `test_from=0.85`, the number "test" stands for, cut at the plain
    85% (the gap training left scored too), where `backtest --test-from 0.85` cuts at each trained stream's test
    part: both now score what `--test-from test` scores. review420 #6: the in-sample notes were the CLI's alone;
    run_backtest says them (checked here on this run's report, at a cut inside the trained part)."""
    from engine.service.backtest import run_backtest
    from engine.service.backtest_in_sample import in_sample_notes, reads_as_trained
    from engine.service.config import ServiceConfig

    csv, model, _, _ = trained
    parts = json.loads((model / "evaluation.json").read_text())["streams"]
    queries = tmp_path / "q.yaml"
    queries.write_text("queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, "
                       "trigger: {ticks: 5}}\n")
    config = ServiceConfig.from_dict({"model": {"path": str(model)}})
    out, notes, as_trained = tmp_path / "api.parquet", [], {"price_offset": {"SPREAD": 1}}
    report = run_backtest(config, csv, queries, out, test_from=0.85, progress=False, plot=False, columns=as_trained,
                          note=notes.append)
    scored = next(score for score in report.scores if score.query == "dir20")
    assert scored.scored == _scored_dir20(out, parts) > 20  # each trained stream cut at its own test part
    assert json.loads(out.with_suffix(".manifest.json").read_text())["run"]["test_from"] == 0.85
    assert report.in_sample == [] and not any("out of sample" in line for line in notes), notes
    # review443 #2: THIN and MID, which its split left out, were answered by a model that never trained on them
    untrained = 'streams "MID", "THIN" are not among the streams this model was trained on ("BACK", "FRONT", "SPREAD": '
    assert [line for line in report.cautions if line.startswith(untrained)] == \
        [line for line in notes if line.startswith(untrained)] != [], notes
    from engine.service.trained_streams import TrainedStreams  # matched as instruments; the built-in model: none

    assert TrainedStreams(model).note(["front", "S-P-R-E-A-D"]) is None and TrainedStreams(None).note(["THIN"]) is None
    assert reads_as_trained(str(model), as_trained, None, None)  # the price offset training read the files with
    assert not reads_as_trained(str(model), {"price_offset": {"SPREAD": 2}}, None, None)
    earlier = dataclasses.replace(report, test_from=0.5)  # the CLI's note at --test-from 0.5, in its words
    assert in_sample_notes(earlier, [csv], None, same_reading=True) == [
        f"this model was trained and validated on the first 85% of the ticks of streams BACK, FRONT, SPREAD in {csv}, "
        f"and --test-from 0.5 (stream BACK: scored from its tick 500, trained and validated on its ticks before 850): "
        f"the scores below are not out of sample (give --test-from 0.85 or later, over the whole files)"]
    # review443 #1: a fine-tune of this model (its evaluation.json records it as its base, as `train --base` does)
    # scored on ticks the model trained on is not out of sample either, however its own training lies
    from engine.service.base_lineage import base_record

    child = tmp_path / "child"
    child.mkdir()
    (child / "evaluation.json").write_text(json.dumps({"trained_on": {"files": [], "seen_end": 0.85,
                                                                      "base": base_record(model)}}))
    back = stream_times("BACK") * 1000
    inside = dataclasses.replace(report, model_path=str(child), split_times={"BACK": int(back[500])},
                                 split_ends={"BACK": int(back[999])})
    assert in_sample_notes(inside, [csv], None, same_reading=True) == [
        f"this model's weights descend from {model.resolve()} (its base), which trained and was validated on stream "
        f"BACK's ticks from {utc_text(int(back[0]))} to {utc_text(int(back[849]))} (UTC event times), and the "
        f"scored span of BACK runs from {utc_text(int(back[500]))} to {utc_text(int(back[999]))}, inside them: "
        f"fine-tuning starts from what those ticks taught, so the scores are not out of sample (give a --test-from "
        f"after that span's end)"]
    later = dataclasses.replace(inside, split_times={"BACK": int(back[850])})
    assert in_sample_notes(later, [csv], None, same_reading=True) == []
    said = []  # "test" is the number it stands for, said before anything else is checked, as the CLI's
    with pytest.raises(ValueError, match="is the input"):
        run_backtest(config, csv, queries, csv, test_from="test", progress=False, note=said.append)
    assert said == ["--test-from test: this model was trained and validated on the first 85% of each stream's ticks "
                    "(its evaluation.json): scoring the answers after them, as --test-from 0.85"]
    with pytest.raises(ValueError, match=r'^test_from \(--test-from\) must be a fraction in \(0, 1\), an event time '
                                         r'\(ISO 8601 text such as "2024-03-15", .* or a TestStart\) or "test" '
                                         r'.*got "tset"'):
        run_backtest(config, csv, queries, tmp_path / "b.parquet", test_from="tset", progress=False)


def test_backtest_test_from_test_refuses_a_model_that_records_no_split(trained, tmp_path: Path, capsys) -> None:
    """No split recorded (the built-in model; a checkpoint without its evaluation.json): one line naming why and the
    fraction to give instead, exit 2, before any tick is read; a misspelling is a usage error naming `test`."""
    csv, model, _, _ = trained
    bare = tmp_path / "bare"
    shutil.copytree(model, bare)
    (bare / "evaluation.json").unlink()
    common = [str(csv), "--threads", "1", "--quiet", "--out", str(tmp_path / "bt.parquet")]
    assert main(["backtest", *common, "--test-from", "test"]) == 2
    err = capsys.readouterr().err
    assert ("flashtick backtest: error: --test-from test scores the model's own test part, and the built-in model "
            "records no split (no evaluation.json: it trained on a synthetic market and the first 80% of the ticks of "
            "the shared BTCUSDT and EURUSD sets, docs/model.md; any other instrument is out of sample): give a "
            "fraction of each stream's ticks instead, e.g. --test-from 0.8") in err, err
    assert main(["backtest", *common, "--model", str(bare), "--test-from", "test"]) == 2
    err = capsys.readouterr().err
    assert (f"flashtick backtest: error: --test-from test scores the model's own test part, and {bare} records no "
            f"split: {bare / 'evaluation.json'} (written by `flashtick train`) is missing or unreadable: give a "
            f"fraction of each stream's ticks instead, e.g. --test-from 0.85") in err, err
    assert not (tmp_path / "bt.parquet").exists() and "Traceback" not in err
    with pytest.raises(SystemExit) as usage:
        main(["backtest", *common, "--model", str(model), "--test-from", "tset"])
    assert usage.value.code == 2
    assert ("argument --test-from: expected a fraction of each stream's ticks in (0, 1), e.g. 0.7, or an event time, "
            "e.g. 2024-03-13, or \"test\" (the model's own test part), got \"tset\"") in capsys.readouterr().err
