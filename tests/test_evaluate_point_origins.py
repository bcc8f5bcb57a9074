"""`evaluate --points-out` (and `train`'s) names each answer point's tick by `file` and `row`, as a backtest's answers
do (engine/service/tick_origins.py): a CSV with rejected rows and a Parquet file merged by time, two streams in each.
Real files written here, a real tiny model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import tiny_tick_checkpoint
from engine.service.cli import main

ROWS = 1200  # per file
BAD = {5: "", 90: "-1", 91: "", 700: "abc"}  # the CSV's data row -> the price written there: rows it rejects
QUICK = ["--threads", "1", "--resamples", "20", "--max-points", "100000", "--split", "60/40"]


def _rows(file: int, walk: np.ndarray) -> list[dict]:
    """A file's rows: streams A and B interleaved, the two files' ticks a millisecond apart in turn (so a stream's
    ticks come from both), prices a random walk (labels both ways)."""
    rows = []
    for row in range(ROWS):
        ts = 1_700_000_000_000_000_000 + row * 2_000_000 + file * 1_000_000
        price = f"{walk[2 * row + file]:.4f}"
        if file == 0:
            price = BAD.get(row, price)
        rows.append({"ts": ts, "stream": "AB"[row % 2], "price": price, "size": 1})
    return rows


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("point_origins")
    tiny_tick_checkpoint(root / "model", max_position_embeddings=256)  # a 63-tick window
    walk = 100 + np.cumsum(np.random.default_rng(5).normal(0, 0.02, 2 * ROWS)).round(4)
    pl.DataFrame(_rows(0, walk)).write_csv(root / "day.csv")
    pl.DataFrame(_rows(1, walk)).with_columns(pl.col("price").cast(pl.Float64)).write_parquet(root / "day.parquet")
    return root


def _frames(root: Path) -> list[pl.DataFrame]:
    return [pl.read_csv(root / "day.csv", schema_overrides={"price": pl.String}),
            pl.read_parquet(root / "day.parquet").with_columns(pl.col("price").cast(pl.String))]


def _stream_ticks(root: Path) -> dict[str, list[tuple[int, int]]]:
    """Each stream's ticks in replay order, worked out here from the files: (file, row), rejected rows left out."""
    ticks = sorted((ts, file, row, stream) for file, frame in enumerate(_frames(root))
                   for row, (ts, stream, price) in enumerate(frame.select("ts", "stream", "price").iter_rows())
                   if price not in (None, "", "abc") and float(price) > 0)
    out: dict[str, list[tuple[int, int]]] = {}
    for _, file, row, stream in ticks:
        out.setdefault(stream, []).append((file, row))
    return out


def _check_points(points: pl.DataFrame, out: Path, root: Path) -> None:
    """Every point's file and row are its tick's: the stream's tick-th tick, and the row holds its stream and time."""
    assert points.columns[:4] == ["stream", "tick", "file", "row"]
    assert points.height and points["file"].null_count() == points["row"].null_count() == 0
    files = [Path(f["path"]) for f in json.loads(pl.read_parquet_metadata(out)["flashtick"])["files"]]
    assert files == [(root / "day.csv").resolve(), (root / "day.parquet").resolve()]
    expected = _stream_ticks(root)
    frames = _frames(root)
    for stream, tick, file, row, data_ts in points.select("stream", "tick", "file", "row", "data_ts").iter_rows():
        assert expected[stream][tick] == (file, row)
        assert frames[file].row(row, named=True)["ts"] == data_ts and frames[file]["stream"][row] == stream
    assert set(points["file"]) == {0, 1}  # both files' rows among them
    assert points.filter(pl.col("file") == 0)["row"].max() > max(BAD)  # past the rejected rows


def test_evaluate_points_name_the_file_and_row_of_their_tick(setup: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "points.parquet"
    assert main(["evaluate", str(setup / "model"), str(setup / "day.csv"), str(setup / "day.parquet"), *QUICK,
                 "--json", "--quiet", "--points-out", str(out)]) == 0, capsys.readouterr().err
    result = json.loads(capsys.readouterr().out)
    points = pl.read_parquet(out)
    _check_points(points, out, setup)
    # the metadata is the run's record, the one --json and the manifest beside the file hold
    assert json.loads(pl.read_parquet_metadata(out)["flashtick"]) == json.loads(json.dumps(result["run"]))
    assert json.loads(out.with_suffix(".manifest.json").read_text())["run"] == result["run"]


def test_train_points_name_the_file_and_row_of_their_tick(setup: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "points.parquet"
    assert main(["train", str(setup / "day.csv"), str(setup / "day.parquet"), "--out", str(tmp_path / "m"),
                 "--from-scratch", "--hidden", "32", "--layers", "1", "--heads", "2", "--kv-heads", "1",
                 "--intermediate", "64", "--window-ticks", "63", "--steps", "2", "--batch", "1", "--eval-every", "2",
                 *QUICK, "--quiet", "--points-out", str(out)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    _check_points(pl.read_parquet(out), out, setup)
    assert json.loads(pl.read_parquet_metadata(out)["flashtick"])["command"] == "train"
