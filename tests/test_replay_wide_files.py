"""A CSV of thousands of columns (review309 #3): read in time linear in its width, not a query per column over the
whole frame; a file wider than replay reads is refused before any read costs its width."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from connectors.csv_dialect import MAX_COLUMNS
from connectors.replay import replay_ticks


def wide_csv(path: Path, extra: int) -> Path:
    """`extra` columns a vendor export carries (empty, constant), then the tick's own, and three trades."""
    names = [f"c{i}" for i in range(extra)]
    head = ",".join([*names, "timestamp", "symbol", "price", "size"])
    rows = [",".join([*("x" if i % 2 else "" for i in range(extra)), f"{1722000000000 + 100 * n}", "BTCUSDT",
                      f"{61000.5 + n}", f"0.0{n + 1}"]) for n in range(3)]
    path.write_text("\n".join([head, *rows]) + "\n")
    return path


def queries_to_read(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, list]:
    """How many polars queries reading the file runs (each one costs the frame's width), and its ticks."""
    count = [0]
    collect = pl.LazyFrame.collect

    def counted(self: pl.LazyFrame, *args: object, **kwargs: object) -> pl.DataFrame:
        count[0] += 1
        return collect(self, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(pl.LazyFrame, "collect", counted)
        ticks = list(replay_ticks(path))
    return count[0], ticks


def test_a_wide_csv_runs_as_many_queries_as_a_narrow_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    narrow, narrow_ticks = queries_to_read(wide_csv(tmp_path / "narrow.csv", 40), monkeypatch)
    wide, wide_ticks = queries_to_read(wide_csv(tmp_path / "wide.csv", 4000), monkeypatch)
    assert wide == narrow  # was one query per column more: 4,000 x the frame's width
    assert wide_ticks == narrow_ticks and [t.size for t in wide_ticks] == [0.01, 0.02, 0.03]


def test_a_csv_wider_than_replay_reads_is_refused_by_name(tmp_path: Path) -> None:
    path = wide_csv(tmp_path / "too_wide.csv", MAX_COLUMNS)
    with pytest.raises(ValueError, match=rf"^{path}: line 1 has 10,004 columns, over the 10,000 replay reads"):
        list(replay_ticks(path))
