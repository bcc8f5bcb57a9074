"""`flashtick evaluate --points-out` and `--batch-ms`: the answer points behind evaluate's table, written so that
every column recomputes from them, and scored where a backtest of the same files and model answers. Real files
written here, a real tiny model, the real backtest."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import tiny_tick_checkpoint
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from engine.service.cli import main
from engine.service.evaluation_points import batch_last_ticks

BURST = 8  # ticks of one burst, 0.1 ms apart; bursts 37 ms apart (so a 100 ms batch holds two or three)
QUICK = ["--threads", "1", "--resamples", "20", "--max-points", "100000"]
# one worker takes the file under `--dist loadgroup`: its module fixtures (a model, two 4,000-tick files, two
# evaluate runs) are built once
pytestmark = pytest.mark.xdist_group("test_evaluate_points")


def write_ticks(path: Path, n: int, bursty: bool) -> Path:
    """Synthetic ticks of four streams; ``bursty``: re-stamped in bursts of BURST ticks (about 60% of each stream's
    ticks within 1 ms of its next), as an aggressive order's fills are."""
    ticks = SyntheticMarket(SyntheticConfig(seed=3)).generate(n).ticks
    rows = [t.to_wire() for t in ticks]
    if bursty:
        for i, row in enumerate(rows):
            row["ts"] = ticks[0].ts + (i // BURST) * 37_000_000 + (i % BURST) * 100_000
    pl.DataFrame(rows).write_parquet(path)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("points")
    # a 63-tick window: each stream's parts need 64 ticks, not 256 (757 ticks a stream: the fewest of these four
    # streams holds 859)
    return {"model": tiny_tick_checkpoint(folder / "model", max_position_embeddings=256),
            "bursty": write_ticks(folder / "bursty.parquet", 4000, bursty=True),
            "plain": write_ticks(folder / "plain.parquet", 4000, bursty=False)}


@pytest.fixture(scope="module")
def plain_table(files: dict[str, Path]) -> str:
    """What `evaluate MODEL plain.parquet` prints (its table), run once: two tests read it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["evaluate", str(files["model"]), str(files["plain"]), *QUICK]) == 0
    return out.getvalue()


@pytest.fixture(scope="module")
def plain_points(files: dict[str, Path], tmp_path_factory) -> tuple[list[str], dict, Path]:
    """(the command, its --json result, its --points-out file) of `evaluate MODEL plain.parquet --json --points-out
    POINTS --seed 7`, run once: two tests read it (the seed moves the bootstrap's intervals alone, no score)."""
    out = tmp_path_factory.mktemp("plain_points") / "points.parquet"
    command = ["evaluate", str(files["model"]), str(files["plain"]), *QUICK, "--json", "--points-out", str(out),
               "--seed", "7"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
        assert main(command) == 0
    return command, json.loads(printed.getvalue()), out


def recomputed(points: pl.DataFrame, question: str, column: str) -> tuple[float, float, int]:
    """Accuracy (first most likely label on ties) and Brier of one column, from the file alone."""
    rows = points.filter(pl.col("question") == question)
    labels = rows["labels"][0].to_list()
    y = np.array([labels.index(label) for label in rows["realised"]])
    p = np.array(rows[column].to_list())
    return float((p.argmax(axis=1) == y).mean()), float(np.square(p - np.eye(len(labels))[y]).sum(axis=1).mean()), \
        len(y)


def test_every_column_of_evaluate_recomputes_from_its_points_file(files: dict[str, Path], plain_table: str,
                                                                   plain_points: tuple[list[str], dict, Path]) -> None:
    _, result, out = plain_points
    points = pl.read_parquet(out)
    assert {"stream", "tick", "data_ts", "question", "labels", "realised", "model", "adapted", "prior", "majority",
            "logistic"} <= set(points.columns)
    assert result["questions"] and set(points["question"]) == set(result["questions"])
    for question, r in result["questions"].items():
        for column, score in r["scores"].items():
            accuracy, brier, n = recomputed(points, question, column)
            assert n == r["n"] and accuracy == pytest.approx(score["accuracy"], abs=1e-12), (question, column)
            assert brier == pytest.approx(score["brier"], abs=1e-12), (question, column)
    # each row's tick is the tick it names in the file (a stream's ticks in time order), its data_ts that tick's
    ticks = pl.read_parquet(files["plain"]).with_columns(pl.int_range(pl.len()).over("stream").alias("tick"))
    joined = points.join(ticks.select("stream", "tick", pl.col("ts").alias("file_ts")), on=["stream", "tick"])
    assert joined.height == points.height and (joined["data_ts"] == joined["file_ts"]).all()
    # the table printed is the same numbers
    row = next(line for line in plain_table.splitlines() if line.startswith("direction_20 "))
    accuracy, brier, n = recomputed(points, "direction_20", "model")
    assert row.split()[1:3] == [str(n), f"{accuracy:.3f}"] and f"{brier:.3f}" in row.split()


def test_train_writes_the_points_of_its_own_table(files: dict[str, Path], tmp_path: Path, capsys) -> None:
    out = tmp_path / "points.parquet"
    assert main(["train", str(files["plain"]), "--out", str(tmp_path / "m"), "--from-scratch", "--hidden", "32",
                 "--layers", "1", "--heads", "2", "--kv-heads", "1", "--intermediate", "64", "--window-ticks", "63",
                 "--steps", "2", "--batch", "1", "--eval-every", "2", *QUICK, "--quiet", "--points-out",
                 str(out)]) == 0
    capsys.readouterr()
    evaluation = json.loads((tmp_path / "m" / "evaluation.json").read_text())
    points = pl.read_parquet(out)
    for question, r in evaluation["questions"].items():
        accuracy, brier, n = recomputed(points, question, "model")
        assert (n, accuracy, brier) == (r["n"], pytest.approx(r["scores"]["model"]["accuracy"], abs=1e-12),
                                        pytest.approx(r["scores"]["model"]["brier"], abs=1e-12))


def test_batch_ms_scores_the_ticks_a_backtest_answers_at_with_its_labels(files: dict[str, Path], tmp_path: Path,
                                                                        capsys) -> None:
    points_file, answers = tmp_path / "points.parquet", tmp_path / "answers.parquet"
    assert main(["evaluate", str(files["model"]), str(files["bursty"]), *QUICK, "--json", "--batch-ms", "100",
                 "--points-out", str(points_file)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["answer_points"]["batch_ms"] == 100
    queries = tmp_path / "dir20.yaml"
    queries.write_text("queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, "
                       "trigger: batch}\n")
    assert main(["backtest", str(files["bursty"]), "--model", str(files["model"]), "--queries", str(queries),
                 "--out", str(answers), "--test-from", "0.85", "--batch-ms", "100", "--threads", "1",
                 "--quiet"]) == 0
    capsys.readouterr()
    points = pl.read_parquet(points_file).filter(pl.col("question") == "direction_20")
    backtest = pl.read_parquet(answers).filter(pl.col("realised").is_not_null())
    assert len(result["streams"]) == 4 and points.height > 50
    for stream, part in result["streams"].items():
        start, stop = part["test"]
        # a backtest answer's `ticks` counts the stream's ticks up to it: the answer after tick index ticks - 1
        answered = backtest.filter((pl.col("stream") == stream) & (pl.col("ticks") > start)
                                   & (pl.col("ticks") <= stop)).sort("ticks")
        scored = points.filter(pl.col("stream") == stream).sort("tick")
        assert answered.height == scored.height > 0, stream
        assert (answered["ticks"] - 1).to_list() == scored["tick"].to_list(), stream
        assert answered["data_ts"].to_list() == scored["data_ts"].to_list(), stream
        assert answered["realised"].to_list() == scored["realised"].to_list(), stream
    # and without --batch-ms, every labelled tick: mid-burst ones too
    assert main(["evaluate", str(files["model"]), str(files["bursty"]), *QUICK, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["questions"]["direction_20"]["n"] > 3 * points.height


def test_the_cut_is_the_backtests_event_time_batches() -> None:
    ts = np.array([0, 50, 99, 100, 101, 250, 399, 400], dtype=np.int64)  # batches [0,100) [100,200) [200,300) ...
    assert batch_last_ticks(ts, 100).tolist() == [False, False, True, False, True, True, True, True]
    assert batch_last_ticks(np.zeros(0, dtype=np.int64), 100).tolist() == []


def test_a_bursty_test_part_gets_a_note_that_a_backtest_scores_differently(files: dict[str, Path], plain_table: str,
                                                                           capsys) -> None:
    assert main(["evaluate", str(files["model"]), str(files["bursty"]), *QUICK]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("answer points: "))
    assert line.startswith("answer points: every labelled tick of the test part; note: ")
    assert "within 1 ms of the next" in line and "--batch-ms 100 scores those points instead" in line
    assert "answer points: every labelled tick of the test part\n" in plain_table  # no burst, no note
    assert main(["evaluate", str(files["model"]), str(files["bursty"]), *QUICK, "--batch-ms", "100"]) == 0
    assert "answer points: the last tick of each 100 ms event-time batch of the test part, where `backtest " \
           "--batch-ms 100` answers" in capsys.readouterr().out


def test_bad_batch_ms_and_points_out_are_refused_before_the_run(files: dict[str, Path], tmp_path: Path,
                                                                capsys) -> None:
    assert main(["evaluate", str(files["model"]), str(files["plain"]), "--batch-ms", "0"]) == 2
    assert "--batch-ms must be a number of milliseconds > 0, got 0" in capsys.readouterr().err
    assert main(["evaluate", str(files["model"]), str(files["plain"]), "--points-out",
                 str(tmp_path / "missing" / "p.parquet")]) == 2
    assert "no directory" in capsys.readouterr().err


def test_a_batch_ms_past_the_test_part_names_the_option_and_writes_no_points(files: dict[str, Path], tmp_path: Path,
                                                                              capsys) -> None:
    # said "no question has a realised answer in both the train and the test part", and wrote an empty Parquet
    points = tmp_path / "huge.parquet"
    assert main(["evaluate", str(files["model"]), str(files["plain"]), *QUICK, "--batch-ms", "100000000",
                 "--points-out", str(points)]) == 2
    err = capsys.readouterr().err
    assert "nothing to score: --batch-ms 100000000 leaves no labelled batch end in the test part (its span: " \
        in err, err
    assert " in its longest stream; " in err and "labelled ticks without --batch-ms)" in err, err
    assert not points.exists()


def test_evaluate_records_what_made_its_scores_as_a_backtest_does(files: dict[str, Path],
                                                                 plain_points: tuple[list[str], dict, Path]) -> None:
    """`evaluate` wrote no provenance record (a backtest writes one: run_record.py): its scores could not be told
    from another model's, file's or option's. Its --json now holds `run` (version, the model's weights and codec
    fingerprints, each file's size, time and content digest as a backtest's record has them, the reading and the
    scoring options), and --points-out a `.manifest.json` beside it with the same record; both with `argv`, the
    command line, beside the record as a backtest's manifest has it."""
    from engine.service.model_digest import model_digest
    from engine.service.run_record import MANIFEST_SUFFIX

    command, result, out = plain_points
    run = result["run"]
    assert result["argv"] == ["flashtick", *command]
    assert json.loads(out.with_suffix(MANIFEST_SUFFIX).read_text()) == {"run": run, "argv": ["flashtick", *command],
                                                                        "points": out.name}
    plain = files["plain"]
    assert run["command"] == "evaluate" and run["flashtick"]
    assert run["files"] == [{"path": str(plain.resolve()), "size": plain.stat().st_size,
                             "mtime_ns": plain.stat().st_mtime_ns, "digest": run["files"][0]["digest"]}]
    assert run["files"][0]["digest"] and run["model"]["digest"] == model_digest(files["model"]).digest
    assert run["model"]["codec"].startswith("BinnedCodec:") and run["model"]["path"] == str(files["model"])
    assert run["options"]["seed"] == 7 and run["options"]["threads"] == 1 and run["options"]["resamples"] == 20
    assert run["options"]["split"] == "70/15/15" and isinstance(run["reading"], dict)


def test_evaluate_skip_bad_files_leaves_a_cut_file_out_and_its_record_names_it(files: dict[str, Path],
                                                                              tmp_path: Path) -> None:
    """review382 #2: `evaluate` over many files takes --skip-bad-files as backtest does; its record says which."""
    stump = tmp_path / "cut.parquet"
    stump.write_bytes(files["plain"].read_bytes()[:2000])  # a copy cut short: no footer
    command = ["evaluate", str(files["model"]), str(files["plain"]), str(stump), *QUICK, "--json"]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(command) == 2
    assert "--skip-bad-files" in err.getvalue(), err.getvalue()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()) as err:
        assert main([*command, "--skip-bad-files"]) == 0
    assert f"warning: {stump}: cannot read it as .parquet" in err.getvalue(), err.getvalue()
    run = json.loads(printed.getvalue())["run"]
    assert [s["file"] for s in run["skipped_files"]] == [str(stump)], run.get("skipped_files")
    assert [f["path"] for f in run["files"]] == [str(files["plain"].resolve())]
