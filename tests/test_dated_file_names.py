"""Files of one instrument a day named by their date alone, in a folder named after the instrument in any
spelling (`trades/aapl/20240301.parquet`, `BRK.B/2024-03-01.csv.gz`): the date names a day, never the stream, so
each folder is one stream over all its days. Read by the date, every instrument of a day was one stream and each
day a new one (review382 #1); only folders of upper-case letters (`AAPL/`) and crypto pairs (`btcusdt/`) worked."""

from __future__ import annotations

import gzip
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from connectors.day_folders import date_name
from connectors.replay import FileReplay

DAYS = ("20240301", "20240304")


def ticks_by_stream(replay: FileReplay) -> Counter[str]:
    counts: Counter[str] = Counter()
    while not replay.done:
        counts.update(t.stream for t in replay.next_batch(64))
    return counts


def write_parquet_day(path: Path, day: str, rows: int, price: float) -> Path:
    """A vendor's day of trades (Polygon's flat files' columns): sip_timestamp as datetime[us, UTC]."""
    start = datetime(int(day[:4]), int(day[4:6]), int(day[6:]), 14, 30, tzinfo=timezone.utc)
    path.parent.mkdir(parents=True, exist_ok=True)
    pl.DataFrame({"sip_timestamp": [start.replace(second=i) for i in range(rows)],
                  "price": [price + i * 0.01 for i in range(rows)], "size": [100] * rows}).with_columns(
        pl.col("sip_timestamp").cast(pl.Datetime("us", "UTC"))).write_parquet(path)
    return path


def write_gzip_csv_day(path: Path, iso_day: str, rows: int, price: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["timestamp,price,size,side"] + [f"{iso_day}T14:30:{i:02d}.000000Z,{price + i * 0.01:.2f},100,buy"
                                             for i in range(rows)]
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    return path


@pytest.mark.parametrize("folders", [("aapl", "msft"), ("BRK.B", "BF.B", "brk-b", "aapl")])
def test_parquet_days_in_ticker_folders_of_any_spelling_are_one_stream_per_folder(tmp_path: Path,
                                                                                    folders: tuple[str, ...]) -> None:
    paths = [write_parquet_day(tmp_path / "trades" / folder / f"{day}.parquet", day, 5 + n, 100.0 * (n + 1))
             for n, folder in enumerate(folders) for day in DAYS]
    replay = FileReplay(paths)
    counts = ticks_by_stream(replay)
    assert counts == {folder: 2 * (5 + n) for n, folder in enumerate(folders)}, counts
    assert not any("stream 2024" in n or "stream_name=2024" in n for n in replay.notes), replay.notes
    said = [n for n in replay.notes if n.startswith(f"2 files: stream {folders[0]}, from the folder name")]
    assert said and "the file's name is a date, which names a day, not an instrument" in said[0], replay.notes


def test_gzip_csv_days_with_iso_names_in_ticker_folders_are_one_stream_per_folder(tmp_path: Path) -> None:
    paths = [write_gzip_csv_day(tmp_path / folder / f"{day}.csv.gz", day, 4, price)
             for folder, price in (("aapl", 170.0), ("msft", 410.0), ("BRK.B", 400.0))
             for day in ("2024-03-01", "2024-03-04")]
    # a browser's second copy of a day and a vendor's `trades_` prefix name no stream either
    paths.append(write_gzip_csv_day(tmp_path / "aapl" / "2024-03-05 (1).csv.gz", "2024-03-05", 4, 171.0))
    paths.append(write_gzip_csv_day(tmp_path / "msft" / "trades_20240305.csv.gz", "2024-03-05", 4, 411.0))
    assert ticks_by_stream(FileReplay(paths)) == {"aapl": 12, "msft": 12, "BRK.B": 8}


def test_upper_case_and_crypto_folders_read_as_before(tmp_path: Path) -> None:
    paths = [write_gzip_csv_day(tmp_path / folder / "2024-03-01.csv.gz", "2024-03-01", 3, 100.0)
             for folder in ("AAPL", "btcusdt")]
    assert ticks_by_stream(FileReplay(paths)) == {"AAPL": 3, "BTCUSDT": 3}


@pytest.mark.parametrize("name", ["20240301", "01032024", "03012024", "2024-03-01", "2024_03_01", "2024.03.01",
                                  "01-03-2024", "03.01.2024", "2024-03", "202403", "01Mar2024", "2024-03-11 (1)"])
def test_date_names(name: str) -> None:
    assert date_name(name)


@pytest.mark.parametrize("name", ["aapl", "BRK.B", "0700", "600519", "005930", "12345678901", "2024-13-45",
                                  "session7", "99999999"])
def test_names_that_are_no_date(name: str) -> None:
    assert not date_name(name)


def test_a_dated_file_whose_path_names_no_instrument_is_its_folders_stream_with_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # ~/data/20240301.csv: past `data/`, only the home folder
    paths = [write_gzip_csv_day(tmp_path / "data" / f"{day}.csv.gz", day, 3, 100.0) for day in ("2024-03-01",
                                                                                             "2024-03-04")]
    replay = FileReplay(paths)
    assert ticks_by_stream(replay) == {"data": 6}
    warned = [c for c in replay.cautions if "for want of a name: the file's name is a date" in c]
    assert len(warned) == 2 and "--columns stream_name=NAME" in warned[0], replay.cautions
