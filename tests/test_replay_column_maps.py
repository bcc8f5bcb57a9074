"""Column maps a user writes, short or full: a map that names a few columns refines the detected layout and says
which keys it was given, a full map reads only what it names and says what it leaves unread, a time unit given
that does not fit is said, never wrapped, and a YAML map's fixed stream is told apart from a stream column. Every
fixture is written here, from code, into tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import drain, ns
from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from connectors.ticks import Tick
from engine.service.cli import main

N = 24  # rows of a fixture of many symbols


def test_csv_names_alone_refine_the_detected_date_and_time_columns(tmp_path: Path) -> None:
    # Kibot-style: no header; the names say which columns are the date and the time (it was refused)
    path = tmp_path / "IBM.txt"
    path.write_text("01/13/2024,09:30:02,38.12,500\n01/13/2024,09:30:03,38.13,100\n")
    spec = map_from_options(names=["date", "time", "price", "size"], detect=True)
    ticks = drain(FileReplay(path, columns=spec))
    assert [t.ts for t in ticks] == [ns("2024-01-13T09:30:02+00:00"), ns("2024-01-13T09:30:03+00:00")]


def test_a_map_of_the_time_column_alone_and_two_digit_years(tmp_path: Path) -> None:
    (tmp_path / "trace.csv").write_text("CUSIP,Bond Sym ID,Execution Date,Execution Time,Price,Quantity,Yield,Side\n"
                                        "912828YK0,UST,20240308,09:30:20,99.538460,5000000,4.1882,B\n")
    spec = map_from_options(columns="ts=Execution Date+Execution Time", detect=True)
    assert drain(FileReplay(tmp_path / "trace.csv", columns=spec)) == [
        Tick("912828YK0", ns("2024-03-08T09:30:20+00:00"), "trade", price=99.53846, size=5000000, side="buy")]
    (tmp_path / "ig.csv").write_text("Date,Time,Bid,Offer\n08/03/24,08:00:03,7699.4,7700.4\n")
    with pytest.raises(ValueError, match=r'"%d/%m/%y %H:%M:%S%.f" or "%m/%d/%y %H:%M:%S%.f"'):
        FileReplay(tmp_path / "ig.csv")  # not '%Y/%m/%d', which read the year 8
    spec = map_from_options(ts_format="%d/%m/%y %H:%M:%S", tz="Europe/London", detect=True)
    assert [t.ts for t in drain(FileReplay(tmp_path / "ig.csv", columns=spec))] == [ns("2024-03-08T08:00:03+00:00")]


def test_a_refined_layout_says_which_keys_were_given(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("time,symbol,price,qty\n2024-01-02 09:30:00.1,AAPL,190.1,100\n")
    replay = FileReplay(tmp_path / "t.csv", columns=map_from_options(detect=True, tz="America/New_York"))
    assert len(drain(replay)) == 1
    assert replay.notes[0].startswith("t.csv: detected, with the keys given (tz); read as ts=time (datetime, "
                                      "America/New_York)"), replay.notes[0]


def test_times_in_a_unit_too_small_are_refused_not_wrapped(tmp_path: Path) -> None:
    """Milliseconds read as seconds pass int64 nanoseconds: they were wrapped modulo 2**64 into some other date
    inside 1990..2200 (no note, no rejection); now the CSV is refused naming the unit, a Parquet file's rows are
    rejected as ts_out_of_range with the note."""
    import polars as pl

    rows = "".join(f"{1717421400000 + 100 * i},AAPL,{190 + 0.01 * i:.2f},100\n" for i in range(5))
    (tmp_path / "t.csv").write_text("time,symbol,price,size\n" + rows)
    pl.read_csv(tmp_path / "t.csv").write_parquet(tmp_path / "t.parquet")
    spec = map_from_options(columns="ts=time,price=price,size=size,stream=symbol", ts_unit="s", detect=True)
    with pytest.raises(ValueError, match="past the year 2262.*give --ts-unit ms"):
        FileReplay(tmp_path / "t.csv", columns=spec)
    replay = FileReplay(tmp_path / "t.parquet", columns=spec)
    assert drain(replay) == [] and dict(replay.rejected) == {"ts_out_of_range": 5}
    assert 'if column "time" counts ms, give --ts-unit ms' in replay.notes[0]


def test_a_full_map_names_the_tick_columns_it_leaves_unread(tmp_path: Path) -> None:
    """A map naming the time and a price is read as given, and a size or side column it leaves out was dropped
    without a word: now a note names each, with the key that reads it."""
    (tmp_path / "t.csv").write_text("time,px,qty,side\n2024-03-01T09:30:00Z,100.01,5,buy\n"
                                    "2024-03-01T09:30:01Z,100.02,3,sell\n")
    replay = FileReplay(tmp_path / "t.csv", columns=map_from_options(columns="ts=time,price=px", detect=True))
    t0 = ns("2024-03-01T09:30:00+00:00")
    assert drain(replay)[0] == Tick("t", t0, "trade", price=100.01, size=1.0)  # as given: size 1, no side
    assert 't.csv: the column map reads only the columns it names; "qty" looks like size; "side" looks like side, ' \
           "not read (name it in the map to read it, e.g. --columns ...,size=qty)" in replay.notes, replay.notes
    replay = FileReplay(tmp_path / "t.csv", columns=map_from_options(columns="ts=time,price=px,size=qty,side=side",
                                                                     detect=True))
    assert drain(replay)[0] == Tick("t", t0, "trade", price=100.01, size=5, side="buy")
    assert not any("reads only" in n for n in replay.notes), replay.notes


def test_a_unit_given_that_does_not_fit_is_said_so_not_read_from_the_first_time(tmp_path: Path) -> None:
    import polars as pl

    pl.DataFrame({"time": [1717421400000000000 + i for i in range(3)], "price": [190.0] * 3, "size": [1] * 3}) \
        .write_parquet(tmp_path / "t.parquet")
    spec = map_from_options(columns="ts=time,price=price,size=size", ts_unit="ms", detect=True)
    replay = FileReplay(tmp_path / "t.parquet", columns=spec)
    assert drain(replay) == [] and dict(replay.rejected) == {"ts_out_of_range": 3}
    example = replay.rejected.examples["ts_out_of_range"]
    assert "the unit given is ms" in example and "--ts-unit ns" in example
    assert "first time's magnitude" not in example


def test_a_fixed_stream_named_as_a_column_is_refused_with_the_key_that_reads_the_column(tmp_path: Path) -> None:
    """In YAML `stream:` is one fixed name and `stream_col:` a column (inline: stream_name= and stream=): a YAML map
    written `stream: symbol` for a file of many symbols would put them all in one stream called "symbol"."""
    (tmp_path / "multi.csv").write_text("time,symbol,price,size\n" + "".join(
        f"2024-01-02T00:00:{i:02d}Z,{'AB'[i % 2]},{100 + 100 * (i % 2)},1\n" for i in range(N)))
    (tmp_path / "map.yaml").write_text("ts: time\nts_unit: datetime\nstream: symbol\nprice: price\nsize: size\n")
    with pytest.raises(ValueError, match=r'names one fixed stream, "symbol", which is also a column of the file.*'
                                         r"stream_col: symbol \(inline: --columns ...,stream=symbol\)"):
        FileReplay(tmp_path / "multi.csv", columns=map_from_options(columns=str(tmp_path / "map.yaml")))
    assert main(["backtest", str(tmp_path / "multi.csv"), "--columns", str(tmp_path / "map.yaml"), "--out",
                 str(tmp_path / "a.parquet")]) == 2
    (tmp_path / "map.yaml").write_text("ts: time\nts_unit: datetime\nstream_col: symbol\nprice: price\nsize: size\n")
    columns = map_from_options(columns=str(tmp_path / "map.yaml"))
    assert {t.stream for t in drain(FileReplay(tmp_path / "multi.csv", columns=columns))} == {"A", "B"}
