"""`--by-stream` tables with Japanese and Chinese stream names: a name was padded by its count of characters, but
a terminal gives each of them two cells, so every number after it stood out of its column (review375 #11). The
name column is now as wide as its longest name in cells, in `backtest`'s table and in `evaluate`'s. Real CSV files
written here, a real tiny model, the real commands."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import tiny_tick_checkpoint
from engine.service.cli import main
from engine.service.text_columns import display_width, padded

NAMES = ["トヨタ自動車", "三菱ＵＦＪフィナンシャル・グループ", "腾讯控股", "7203.T"]
TICKS = 480  # each stream's: enough for evaluate's three parts of a 63-tick window


def test_display_width_counts_terminal_cells() -> None:
    assert [display_width(n) for n in NAMES] == [12, 34, 8, 6]
    assert display_width("e\u0301") == 1  # a combining accent takes no cell of its own
    assert padded("腾讯控股", 10) == "腾讯控股  " and padded("AAPL", 2) == "AAPL"


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("wide_names")
    rng = np.random.default_rng(4)
    rows = []
    for k, name in enumerate(NAMES):
        prices = np.round(100 * (k + 1) + np.cumsum(rng.choice([-0.5, 0.0, 0.5], TICKS)), 1)
        rows += [{"timestamp": 1_712_300_000_000 + 1000 * i + k, "name": name, "price": float(p), "size": 100.0}
                 for i, p in enumerate(prices)]
    path = root / "tse.csv"
    pl.DataFrame(rows).sort("timestamp").write_csv(path)
    return tiny_tick_checkpoint(root / "model", max_position_embeddings=256), path


def column_ends(lines: list[str], header: str) -> list[int]:
    """The terminal cell where each row's first number (or the header's ``header`` word) ends."""
    ends = []
    for line in lines:
        if header in line:
            ends.append(display_width(line[:line.index(header) + len(header)]))
        elif (found := re.match(r"^(.*?\S)\s+(\d+)\s", line)) is not None:
            ends.append(display_width(line[:found.end(2)]))
    return ends


def table(text: str, header: str) -> list[str]:
    """The lines of a printed table: its header and the rows under it, up to its first line of prose."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = [lines[start]]
    for line in lines[start + 1:]:
        if not re.match(r"^ *\S.*?\s+\d+\s+[\d.-]", line):
            break
        rows.append(line)
    return rows


def test_backtest_by_stream_rows_line_up_with_wide_names(files, tmp_path: Path, capsys) -> None:
    model, path = files
    assert main(["backtest", str(path), "--model", str(model), "--columns", "ts=timestamp,stream=name,price=price,"
                 "size=size", "--out", str(tmp_path / "a.parquet"), "--by-stream", "--quiet", "--threads", "1"]) == 0
    rows = table(capsys.readouterr().out, "query")
    assert sum(any(name in row for name in NAMES) for row in rows) >= 2 * len(NAMES), rows
    ends = column_ends(rows, "answers")
    assert len(ends) == len(rows) and len(set(ends)) == 1, "\n".join(rows)


def test_evaluate_by_stream_rows_line_up_with_wide_names(files, capsys) -> None:
    model, path = files
    assert main(["evaluate", str(model), str(path), "--columns", "ts=timestamp,stream=name,price=price,size=size",
                 "--by-stream", "--quiet", "--threads", "1", "--resamples", "10", "--split", "52/24/24"]) == 0
    rows = table(capsys.readouterr().out, "question")
    assert sum(any(name in row for name in NAMES) for row in rows) >= 2 * len(NAMES), rows
    ends = column_ends(rows, " n")
    assert len(ends) == len(rows) and len(set(ends)) == 1, "\n".join(rows)
