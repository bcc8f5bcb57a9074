"""A checkpoint records how `train` read its files, --tz and --split among them (trained_on.reading): `evaluate`
of the same checkpoint and files without those options reads and splits them as training did, saying so, and an
option given otherwise is said as a mismatch; `backtest --model` of the training files reads them alike."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import polars as pl
import pytest

from engine.service.checkpoint_notes import compared_reading
from engine.service.cli import main
from engine.service.reading_record import READING_OPTIONS, reading_mismatch
from test_stream_selection import TINY

NEW_YORK = ZoneInfo("America/New_York")
TICKS = 1400


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Path, list[str]]:
    """Trades written as naive New York wall-clock text and quotes as epoch ns (UTC), one a second each: read as
    UTC, every trade lands hours before the quotes it printed against. A tiny model trained with --tz and --split."""
    root = tmp_path_factory.mktemp("reading")
    rng = np.random.default_rng(5)
    mids = 100 + np.cumsum(rng.normal(0, 0.02, TICKS))
    start = datetime(2026, 3, 10, 9, 30, tzinfo=NEW_YORK)
    times = [start + timedelta(seconds=i) for i in range(TICKS)]
    pl.DataFrame({"ts": [int(t.timestamp()) * 1_000_000_000 for t in times], "symbol": ["AAA"] * TICKS,
                  "bid": np.round(mids - 0.01, 2), "ask": np.round(mids + 0.01, 2)}).write_parquet(root / "q.parquet")
    pl.DataFrame({"timestamp": [(t + timedelta(milliseconds=500)).strftime("%Y-%m-%d %H:%M:%S.%f") for t in times],
                  "symbol": ["AAA"] * TICKS, "price": np.round(mids + rng.choice([-0.01, 0.01], TICKS), 2),
                  "size": [100] * TICKS}).write_csv(root / "t.csv")
    files = [str(root / "t.csv"), str(root / "q.parquet")]
    assert main(["train", *files, "--out", str(root / "m"), *TINY, "--steps", "1", "--batch", "1", "--max-points",
                 "64", "--resamples", "10", "--quiet", "--json", "--tz", "America/New_York",
                 "--split", "64/18/18"]) == 0
    return root, files


def evaluated(capsys, root: Path, files: list[str], *options: str) -> tuple[dict, str]:
    assert main(["evaluate", str(root / "m"), *files, "--max-points", "64", "--resamples", "10", "--threads", "1",
                 "--json", *options]) == 0
    out, err = capsys.readouterr()
    return {key: value for key, value in json.loads(out).items() if key not in ("seconds", "split", "argv")}, err


def test_the_checkpoint_records_tz_and_split(trained, capsys) -> None:
    root, _ = trained
    capsys.readouterr()
    reading = json.loads((root / "m" / "evaluation.json").read_text())["trained_on"]["reading"]
    assert reading == {"tz": "America/New_York", "split": "64/18/18"}


def test_evaluate_reads_and_splits_the_training_files_as_trained(trained, capsys) -> None:
    root, files = trained
    capsys.readouterr()
    given, err = evaluated(capsys, root, files, "--tz", "America/New_York", "--split", "64/18/18")
    assert "as this model was trained" not in err and "trained on files read with" not in err
    as_trained, err = evaluated(capsys, root, files)
    assert ("note: reading the files with --tz America/New_York, --split 64/18/18, as this model was trained "
            "(its evaluation.json; give the option to read them otherwise)") in err
    assert "trained on files read with" not in err
    assert as_trained == given  # the same parts, points and numbers
    assert as_trained["streams"]["AAA"]["test"] == given["streams"]["AAA"]["test"]
    trained_parts = json.loads((root / "m" / "evaluation.json").read_text())["streams"]["AAA"]
    assert {part: as_trained["streams"]["AAA"][part] for part in ("train", "validation", "test")} == \
        {part: trained_parts[part] for part in ("train", "validation", "test")}


def test_an_other_tz_given_is_said_and_read(trained, capsys) -> None:
    root, files = trained
    capsys.readouterr()
    as_trained, _ = evaluated(capsys, root, files)
    as_utc, err = evaluated(capsys, root, files, "--tz", "UTC")
    assert ("note: this model was trained on files read with --tz America/New_York; these files are read with "
            "--tz UTC: times read otherwise than in training") in err
    assert "reading the files with --split 64/18/18, as this model was trained" in err
    assert as_utc != as_trained


def test_backtest_of_the_training_files_reads_them_as_trained(trained, capsys, tmp_path: Path) -> None:
    root, files = trained
    capsys.readouterr()
    assert main(["backtest", *files, "--model", str(root / "m"), "--max-ticks", "200", "--quiet", "--threads", "1",
                 "--out", str(tmp_path / "a.parquet")]) == 0
    err = capsys.readouterr().err
    assert "flashtick backtest: note: reading the files with --tz America/New_York, as this model was trained" in err
    assert "--split" not in err.split("as this model was trained")[0]  # a backtest has no split to take
    assert "trained on files read with" not in err


def test_another_files_own_layout_is_no_mismatch_with_trainings(trained, tmp_path: Path) -> None:
    """review433 #10: a Tokyo file read with --tz Asia/Tokyo by a model trained on New York files read with --tz
    America/New_York was said to make scores that "do not compare": each file's zone is its own (trained_options
    takes the layout only for the training files), prices read otherwise still are a mismatch."""
    root, files = trained
    other = tmp_path / "tokyo.csv"
    other.write_text("timestamp,symbol,price,size\n2026-03-11 09:00:00.5,7203,2800,100\n")
    recorded = {"tz": "America/New_York", "split": "64/18/18"}
    now = {"tz": "Asia/Tokyo", "split": "64/18/18"}
    assert reading_mismatch(recorded, now, compared_reading(root / "m", [other], READING_OPTIONS)) is None
    assert "--tz Asia/Tokyo: times read otherwise than in training" in reading_mismatch(
        recorded, now, compared_reading(root / "m", [Path(f) for f in files], READING_OPTIONS))
    assert "--price-offset 10" in reading_mismatch(recorded, {**now, "price_offset": "10"},
                                                   compared_reading(root / "m", [other], READING_OPTIONS))
