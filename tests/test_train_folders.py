"""`flashtick train` reads a folder and a pattern no shell expanded as the files they stand for, as backtest,
feed replay and evaluate do (connectors/input_paths.py): `train FOLDER` said "FOLDER: no such file". And a
checkpoint's files are matched as the files read: `evaluate` of a folder holding the files a model was trained on
did not say its test slice was inside them. A real tiny model trained through the CLI on two days of one
instrument's trades, a CSV a day, written here."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

from engine.service.cli import main

pytestmark = pytest.mark.xdist_group("train_folders")

TINY = ["--from-scratch", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
        "--intermediate", "64", "--window-ticks", "63", "--threads", "1", "--steps", "1", "--batch", "1"]
QUICK = ["--max-points", "64", "--resamples", "10", "--threads", "1"]
DAY_ROWS = 450  # two days: 900 ticks, past the 757 a 70/15/15 split of a 63-tick window needs
START_US = 1_792_967_139_445_317


def write_days(folder: Path) -> list[Path]:
    """Two days of AAA's trades, a CSV each, and a readme beside them (not a tick file: skipped, said)."""
    folder.mkdir()
    rng = np.random.default_rng(11)
    prices = 60 + np.cumsum(rng.choice([-0.01, 0.0, 0.01], 2 * DAY_ROWS))
    files = []
    for day in range(2):
        rows = range(day * DAY_ROWS, (day + 1) * DAY_ROWS)
        path = folder / f"AAA-2026-10-2{6 + day}.csv"
        path.write_text("ts_us,symbol,price,size,aggressor_side\n" + "".join(
            f"{START_US + i * 60_000_000},AAA,{prices[i]:.2f},{1 + i % 5},{'buy' if i % 3 else 'sell'}\n"
            for i in rows))
        files.append(path)
    (folder / "README.md").write_text("a day of AAA's trades a file\n")
    return files


def train(files: list[str], out: Path, *options: str) -> tuple[int, str, str]:
    """`flashtick train FILES --out OUT` on the tiny model: (exit status, stdout, stderr)."""
    out_text, err_text = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out_text), contextlib.redirect_stderr(err_text):
        rc = main(["train", *files, "--out", str(out), *TINY, *QUICK, *options])
    return rc, out_text.getvalue(), err_text.getvalue()


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[Path, list[Path], Path, Path, str]:
    """(the folder, its two CSVs, a tiny model trained on the CSVs given one by one, one trained on the folder,
    the folder's training's stderr); both read with --streams AAA, a layout option a checkpoint records."""
    root = tmp_path_factory.mktemp("train_folders")
    files = write_days(root / "days")
    rc, _, err = train([str(f) for f in files], root / "by_files", "--streams", "AAA")
    assert rc == 0, err
    rc, _, folder_err = train([str(root / "days")], root / "by_folder", "--streams", "AAA")
    assert rc == 0, folder_err
    return root / "days", files, root / "by_files", root / "by_folder", folder_err


def test_train_reads_a_folder_and_a_quoted_pattern_as_their_files(models, tmp_path: Path) -> None:
    folder, files, by_files, by_folder, err = models
    assert (f"flashtick train: note: {folder}: a folder, read as its 2 files in the order of their paths "
            f"(AAA-2026-10-26.csv, AAA-2026-10-27.csv); skipped README.md: not tick files") in err, err
    parts = json.loads((by_files / "evaluation.json").read_text())["streams"]
    folder_record = json.loads((by_folder / "evaluation.json").read_text())
    assert folder_record["streams"] == parts  # the same ticks, split alike
    assert folder_record["trained_on"]["files"] == [str(f.resolve()) for f in files]  # the files, not the folder
    rc, _, err = train([f"{folder}/AAA-*.csv"], tmp_path / "by_pattern", "--streams", "AAA")
    assert rc == 0, err
    assert (f"flashtick train: note: {folder}/AAA-*.csv: a pattern, read as the 2 files it matches, sorted "
            f"(AAA-2026-10-26.csv, AAA-2026-10-27.csv)") in err, err
    assert json.loads((tmp_path / "by_pattern" / "evaluation.json").read_text())["streams"] == parts


def evaluate_err(model: Path, files: list[str]) -> str:
    """`flashtick evaluate MODEL FILES` with a test slice from 50%, inside the 85% trained and validated on."""
    out_text, err_text = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out_text), contextlib.redirect_stderr(err_text):
        rc = main(["evaluate", str(model), *files, "--split", "37/13/50", *QUICK])
    assert rc == 0, err_text.getvalue()
    return err_text.getvalue()


def test_evaluate_of_a_folder_or_pattern_holding_the_training_files_says_they_were_trained_on(models) -> None:
    folder, files, by_files, by_folder, _ = models
    for given in (str(folder), f"{folder}/AAA-*.csv"):
        err = evaluate_err(by_files, [given])
        assert (f"note: this model was trained and validated on the first 85% of the ticks of stream AAA in {given}; "
                f"the test slice starts at 50%, inside it: those scores are not out of sample") in err, err
        # they are its training files: read as training read them (its --streams), said
        assert "note: reading the files with --streams AAA, as this model was trained" in err, err
    err = evaluate_err(by_folder, [str(f) for f in files])  # and the other way round
    assert (f"note: this model was trained and validated on the first 85% of the ticks of stream AAA in "
            f"{files[0]}, {files[1]}; the test slice starts at 50%") in err, err


def test_train_still_refuses_what_it_cannot_read_before_any_work(models, tmp_path: Path) -> None:
    folder = models[0]
    rc, _, err = train([f"{folder}/BBB-*.csv"], tmp_path / "none")
    assert rc == 6 and f"error: no file matches '{folder}/BBB-*.csv': no data yet (a pattern that names no" in err, err
    rc, _, err = train([str(folder / "AAA-2026-10-28.csv")], tmp_path / "missing")
    assert rc == 2 and f"error: replay file not found: {folder / 'AAA-2026-10-28.csv'}" in err, err
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "notes.pdf").write_bytes(b"%PDF-1.4")
    rc, _, err = train([str(tmp_path / "docs")], tmp_path / "docs_model")
    assert rc == 2 and f"error: {tmp_path / 'docs'} is a folder holding no tick file (only notes.pdf)" in err, err
    assert not any(p.exists() for p in (tmp_path / "none", tmp_path / "missing", tmp_path / "docs_model"))
