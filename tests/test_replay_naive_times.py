"""review260: times with no UTC offset are read as UTC, and docs/replay.md promises a note saying so, but only the
time column detection read as text got it. A `--columns` map's time column, a date column beside HHMMSSfff clock
digits (KRX's) and a Parquet datetime column of no time zone read Tokyo and Seoul times as UTC (9 h off) without a
word. One place (connectors/naive_time_zones.py) tells naive times read with no zone, on every layout. Real files
in tmp_path, read by FileReplay (the reader backtest, feed replay and train use)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Callable

import polars as pl
import pytest

from connectors.replay import FileReplay
from conftest import drain

START = datetime(2026, 6, 1, 9, 0)  # 09:00 in Tokyo or Seoul: 00:00 UTC
TIMES = [START + timedelta(seconds=1.1 * i) for i in range(200)]  # (enough for KRX digits to tell a clock)


def utc_ns(moment: datetime) -> int:
    return int((moment - datetime(1970, 1, 1)) / timedelta(microseconds=1)) * 1000


def japanese_header(tmp_path: Path) -> Path:
    path = tmp_path / "min_map.csv"
    path.write_text("約定日時,価格,数量\n" + "".join(f"{t:%Y-%m-%d %H:%M:%S.%f},{2800 + i % 3},100\n"
                                               for i, t in enumerate(TIMES)))
    return path


def krx_digits(tmp_path: Path) -> Path:
    path = tmp_path / "krx.csv"
    path.write_text("date,time,code,price,volume\n" + "".join(
        f"{t:%Y%m%d},{int(f'{t:%H%M%S}{t.microsecond // 1000:03d}')},005930,{1250000 + 1000 * (i % 3)},5\n"
        for i, t in enumerate(TIMES)))
    return path


def naive_parquet(tmp_path: Path) -> Path:
    path = tmp_path / "tse_naive.parquet"
    pl.DataFrame({"ts": TIMES, "symbol": ["7203.T"] * len(TIMES), "price": [2800.0 + i % 3 for i in range(len(TIMES))],
                  "size": [100.0] * len(TIMES)}).write_parquet(path)
    return path


LAYOUTS = [(japanese_header, {"ts": "約定日時", "price": "価格", "size": "数量"}, "Asia/Tokyo"),
           (krx_digits, None, "Asia/Seoul"), (naive_parquet, None, "Asia/Tokyo")]


@pytest.mark.parametrize("write, columns, zone", LAYOUTS, ids=["full_map", "date_and_clock_digits", "parquet"])
def test_naive_times_read_as_utc_are_said_on_every_layout(tmp_path: Path, write, columns: dict | None,
                                                          zone: str) -> None:
    path = write(tmp_path)
    replay = FileReplay(path, columns=columns)
    assert drain(replay)[0].ts == utc_ns(START)  # as UTC, as the docs say, ...
    said = [n for n in replay.notes if "carry no UTC offset and are read as UTC" in n]
    assert len(said) == 1 and said[0].startswith(f"{path.name}: its times (") and "--tz" in said[0], replay.notes
    local = FileReplay(path, columns={**(columns or {}), "tz": zone})  # ... and --tz reads their zone, said no more
    assert drain(local)[0].ts == utc_ns(START - timedelta(hours=9))
    assert not any("UTC offset" in n for n in local.notes), local.notes


def test_a_full_map_over_utc_named_or_epoch_times_gets_no_naive_note(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("time_utc,epoch,px,qty\n" + "".join(f"{t:%Y-%m-%d %H:%M:%S},{utc_ns(t)},{100 + i},1\n"
                                                        for i, t in enumerate(TIMES)))
    for ts in ("time_utc", "epoch"):
        replay = FileReplay(path, columns={"ts": ts, "price": "px", "size": "qty"})
        assert drain(replay)[0].ts == utc_ns(START)
        assert not any("UTC offset" in n for n in replay.notes), replay.notes


def krx_stamps(path: Path) -> Path:
    """A Korean stock's ticks stamped `20260601 090007300`, the digits HistData writes too, in Seoul time."""
    path.write_text("time,price,volume\n" + "".join(
        f"{t:%Y%m%d %H%M%S}{t.microsecond // 1000:03d},{1250000 + 1000 * (i % 3)},5\n"
        for i, t in enumerate(TIMES)))
    return path


@pytest.mark.parametrize("name, hint", [("005930.KS.csv", "e.g. --tz Asia/Seoul (the zone of 005930.KS's exchange)"),
                                        ("samsung_ticks.csv", "--tz ZONE (the IANA zone of their exchange: "
                                                              "nothing in the file names its market)"),
                                        ("DAT_ASCII_EURUSD_T_202606.csv", "--tz Etc/GMT+5 (HistData's files are in "
                                                                          "EST")])
def test_the_histdata_hint_is_for_files_named_as_histdatas_only(tmp_path: Path, name: str, hint: str) -> None:
    """review260 #3: `20260601 090007300` stamps got the HistData hint (--tz Etc/GMT+5, US EST) by their format alone,
    in a Korean `005930.KS.csv`; docs/replay.md tells HistData's files by their names. Others get the general hint,
    naming the zone of the exchange a stock code's suffix names."""
    replay = FileReplay(krx_stamps(tmp_path / name))
    assert drain(replay)[0].ts == utc_ns(START)
    said = [n for n in replay.notes if "carry no UTC offset and are read as UTC" in n]
    assert len(said) == 1 and hint in said[0], replay.notes
    assert ("HistData" in said[0]) == name.startswith("DAT_")


def csv_of(path: Path, header: str, row: Callable[[int, datetime], str]) -> Path:
    """A CSV of TIMES, a row each as `row(i, time)` writes it."""
    path.write_text(header + "\n" + "".join(row(i, t) + "\n" for i, t in enumerate(TIMES)))
    return path


def serial_dates(tmp_path: Path) -> Path:
    """Bloomberg's BDH export: spreadsheet serial dates (days since 1899-12-30), Tokyo's wall clock."""
    return csv_of(tmp_path / "bdh.csv", "Dates,Ticker,Last,Volume",
                  lambda i, t: f"{(t - datetime(1899, 12, 30)) / timedelta(days=1):.9f},7203,{2800 + i % 3},100")


def after_midnight(tmp_path: Path) -> Path:
    return csv_of(tmp_path / "day_ns.csv", "day,ns,symbol,px,qty",
                  lambda i, t: f"{t:%Y%m%d},{(t - datetime(t.year, t.month, t.day)) // timedelta(microseconds=1)}000,"
                               f"7203,{2800 + i % 3},100")


COUNTED = [(serial_dates, {"ts": "Dates", "ts_unit": "excel_days", "stream_col": "Ticker", "price": "Last",
                           "size": "Volume"}, 'column "Dates" read as spreadsheet serial dates'),
           (after_midnight, {"ts": "day+ns", "ts_unit": "ns_after_midnight", "stream_col": "symbol", "price": "px",
                             "size": "qty"}, "column \"ns\" read as ns after midnight of each row's day in column "
                                             '"day"')]


@pytest.mark.parametrize("write, columns, said", COUNTED, ids=["serial_dates", "ns_after_midnight"])
def test_counted_times_under_a_full_map_are_said_read_as_utc(tmp_path: Path, write, columns: dict,
                                                             said: str) -> None:
    """fix274 #3: serial dates and counts after midnight got the note of the zone they were read in only when the
    layout was detected; a full `--columns` map read Tokyo's times as UTC without a word."""
    path = write(tmp_path)
    for given in (columns, None):  # the full map, and the same file detected (serial dates only) as before
        if given is None and write is after_midnight:
            continue
        replay = FileReplay(path, columns=given)
        assert abs(drain(replay)[0].ts - utc_ns(START)) < 10**6
        notes = [n for n in replay.notes if said in n]
        assert len(notes) == 1 and "UTC" in notes[0] and "--tz ZONE" in notes[0], replay.notes
    local = FileReplay(path, columns={**columns, "tz": "Asia/Tokyo"})
    assert abs(drain(local)[0].ts - utc_ns(START - timedelta(hours=9))) < 10**6
    assert any(said in n and "Asia/Tokyo" in n for n in local.notes), local.notes


@pytest.mark.parametrize("name, column, hint", [
    ("005930.csv", None, "--tz Asia/Seoul or --tz Asia/Shanghai (a guess from the shape of 005930: 6 digits"),
    ("600519.csv", None, "--tz Asia/Seoul or --tz Asia/Shanghai (a guess from the shape of 600519: 6 digits"),
    ("7203.csv", None, "--tz Asia/Tokyo or --tz Asia/Taipei (a guess from the shape of 7203: 4 digits"),
    ("00700.csv", None, "--tz Asia/Hong_Kong (a guess from the shape of 00700: 5 digits"),
    ("ticks.csv", "005930", "--tz Asia/Seoul or --tz Asia/Shanghai (a guess from the shape of 005930"),
    ("ticks.csv", "7203", "--tz Asia/Tokyo or --tz Asia/Taipei (a guess from the shape of 7203"),
    ("ticks.csv", "AAPL", "--tz ZONE (the IANA zone of their exchange: nothing in the file names its market)")])
def test_a_bare_stock_code_gets_the_zones_its_shape_can_mean(tmp_path: Path, name: str, column: str | None,
                                                            hint: str) -> None:
    """fix281 #1: a bare code (`005930.csv`, stream `7203`) named no exchange, and the note on its naive times read
    as UTC suggested New York's zone, 13 to 14 h from where Seoul's or Tokyo's were written."""
    path = tmp_path / name
    path.write_text(f"time,{'symbol,' if column else ''}price,size\n" + "".join(
        f"{t:%Y-%m-%d %H:%M:%S},{column + ',' if column else ''}{7000 + i % 3},10\n" for i, t in enumerate(TIMES)))
    replay = FileReplay(path)
    assert drain(replay)[0].ts == utc_ns(START)
    said = [n for n in replay.notes if "carry no UTC offset and are read as UTC" in n]
    assert len(said) == 1 and said[0].endswith(")" if column != "AAPL" else hint) and hint in said[0], replay.notes
    assert "America/New_York" not in said[0]  # (review375 #7: no zone guessed where nothing names one)


@pytest.mark.parametrize("header, hint", [
    ("시간,체결가,거래량", "--tz Asia/Seoul (a guess from the script of its header, 시간: Hangul"),
    ("時刻,約定値,出来高", "--tz Asia/Tokyo (a guess from the script of its header, 約定値: Kana or a Japanese"),
    ("時間,価格,数量", "--tz Asia/Tokyo (a guess from the script of its header, 価格"),
    ("时间,成交价,成交量", "--tz Asia/Shanghai (a guess from the script of its header, 时间: simplified"),
    ("時間,成交價,成交量", "--tz Asia/Hong_Kong or --tz Asia/Taipei (a guess from the script of its header, 成交價:"),
    ("時間,成交量,收市", "--tz Asia/Shanghai or --tz Asia/Hong_Kong or --tz Asia/Taipei or --tz Asia/Tokyo (a")])
def test_a_cjk_header_gets_the_zones_its_script_can_mean(tmp_path: Path, header: str, hint: str) -> None:
    """fix294 #1: a file headed in Korean, Japanese or Chinese, with no stock code in its name or streams, got the
    note's `--tz America/New_York` example, 13 to 14 h from where its times were written."""
    path = tmp_path / "ticks.csv"
    ts, price, size = header.split(",")
    path.write_text(f"{header}\n" + "".join(f"{t:%Y-%m-%d %H:%M:%S},{7000 + i % 3},10\n"
                                            for i, t in enumerate(TIMES)))
    replay = FileReplay(path, columns={"ts": ts, "price": price, "size": size})
    assert drain(replay)[0].ts == utc_ns(START)
    said = [n for n in replay.notes if "carry no UTC offset and are read as UTC" in n]
    assert len(said) == 1 and hint in said[0] and "America/New_York" not in said[0], replay.notes
