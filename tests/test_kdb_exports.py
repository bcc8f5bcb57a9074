"""kdb+/q exports read as q writes them (review324): a date column beside a q time or timespan in Parquet (pykx's
and arrowkdb's Time and Duration types) to the ns, q's timestamp text (`2019.02.04D09:30:00.123456789`) and
timespans (`0D09:30:00.123`) in CSV without a hand-written format, and HDB partition folders (`2019.02.04/`) as
each file's day. Every fixture is a real CSV or Parquet file written here and read by the real replay."""

from __future__ import annotations

from datetime import date, datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from conftest import drain
from connectors.replay import FileReplay

DAY = date(2019, 2, 4)
OPEN_NS = int(datetime(2019, 2, 4, 9, 30, tzinfo=timezone.utc).timestamp()) * 10**9
# sub-second parts of three rows at each precision q and its exporters write (time32[ms], time64[us], time64[ns])
FRACTIONS = {"ms": [265_000_000, 370_000_000, 372_000_000],
             "us": [265_336_000, 370_773_000, 372_437_000],
             "ns": [265_336_495, 370_773_435, 372_437_508]}


def trades(clock: list, **extra: list) -> pl.DataFrame:
    return pl.DataFrame({**extra, "time": clock, "sym": ["AAPL", "MSFT", "GE"], "price": [170.0, 105.01, 9.49],
                         "size": [500, 100, 200]})


def read(paths: list[Path], columns: dict | None = None) -> tuple[list, FileReplay]:
    replay = FileReplay(paths, columns=columns)
    return drain(replay), replay


@pytest.mark.parametrize("precision", ["ms", "us", "ns"])
def test_a_parquet_date_beside_a_q_time_keeps_every_sub_second_digit(tmp_path: Path, precision: str) -> None:
    fractions = FRACTIONS[precision]
    clock = pl.Series("time", [(9 * 3600 + 30 * 60) * 10**9 + part for part in fractions]).cast(pl.Time)  # ns
    frame = trades([None] * 3, date=[DAY] * 3).with_columns(clock)
    assert frame.schema["time"] == pl.Time and frame.schema["date"] == pl.Date
    path = tmp_path / "trade.parquet"
    frame.write_parquet(path)
    ticks, replay = read([path])
    assert [t.ts for t in ticks] == [OPEN_NS + part for part in fractions]
    assert any("2019-02-04 09:30:00.265" in note for note in replay.notes)  # the note quotes the full time


@pytest.mark.parametrize("unit", ["ms", "us", "ns"])
def test_a_parquet_timespan_beside_a_date_is_its_time_of_day(tmp_path: Path, unit: str) -> None:
    fractions = FRACTIONS[unit]
    spans = pl.Series("time", [(9 * 3600 + 30 * 60) * 10**9 + part for part in fractions]) \
        .cast(pl.Duration("ns")).cast(pl.Duration(unit))
    frame = trades([None] * 3, date=[DAY] * 3).with_columns(spans)
    path = tmp_path / "trade.parquet"
    frame.write_parquet(path)
    ticks, _ = read([path], None)
    assert [t.ts for t in ticks] == [OPEN_NS + part for part in fractions]


def test_a_parquet_timespan_takes_its_day_from_an_hdb_partition_folder(tmp_path: Path) -> None:
    folder = tmp_path / "2019.02.04"
    folder.mkdir()
    spans = pl.Series("time", [(9 * 3600 + 30 * 60) * 10**9 + part for part in FRACTIONS["ns"]]) \
        .cast(pl.Duration("ns"))
    trades([None] * 3).with_columns(spans).write_parquet(folder / "trade.parquet")
    ticks, replay = read([folder / "trade.parquet"], {"date": "file_name"})
    assert [t.ts for t in ticks] == [OPEN_NS + part for part in FRACTIONS["ns"]]
    assert any('from its folder "2019.02.04"' in note for note in replay.notes)


def test_q_timestamp_text_is_read_to_the_ns_without_a_format(tmp_path: Path) -> None:
    path = tmp_path / "trade.csv"
    path.write_text("time,sym,price,size,ex,cond\n2019.02.04D09:30:00.265336495,AAPL,170,500,Z,@\n"
                    "2019.02.04D09:30:00.370773435,MSFT,105.01,100,P, \n2019.02.04D09:30:00.372437508,GE,9.49,200,K,\n")
    ticks, _ = read([path])
    assert [t.ts for t in ticks] == [OPEN_NS + part for part in FRACTIONS["ns"]]


@pytest.mark.parametrize("precision", ["ms", "us", "ns"])
def test_a_csv_q_date_beside_a_q_time_or_timespan_keeps_its_digits(tmp_path: Path, precision: str) -> None:
    digits = {"ms": 3, "us": 6, "ns": 9}[precision]
    for prefix in ("", "0D"):  # a q time (`t`) or a timespan (`n`), as `save` writes each
        path = tmp_path / f"trade{prefix}.csv"
        rows = [f"2019.02.04,{prefix}09:30:00.{str(part).zfill(9)[:digits]},{sym},1,1"
                for part, sym in zip(FRACTIONS[precision], ["AAPL", "MSFT", "GE"])]
        path.write_text("date,time,sym,price,size\n" + "\n".join(rows) + "\n")
        ticks, _ = read([path])
        assert [t.ts for t in ticks] == [OPEN_NS + part for part in FRACTIONS[precision]], prefix


def test_an_rdb_timespan_reads_on_the_date_given_with_or_without_its_format(tmp_path: Path) -> None:
    path = tmp_path / "rdb_trade.csv"
    path.write_text("time,sym,price,size\n0D09:30:00.265336495,AAPL,170.0,500\n0D09:30:00.370773435,MSFT,105.01,100\n")
    expected = [OPEN_NS + part for part in FRACTIONS["ns"][:2]]
    for extra in ({}, {"ts_format": "0D%H:%M:%S%.f"}, {"ts_format": "%H:%M:%S%.f"}):
        ticks, _ = read([path], {"date": "2019-02-04", **extra})
        assert [t.ts for t in ticks] == expected, extra
    with pytest.raises(ValueError, match="a time of day without a date: give the day with --date"):
        read([path])  # no date anywhere: asked for, not "drop date"


def test_hdb_partition_folders_named_the_q_way_give_each_file_its_day(tmp_path: Path) -> None:
    for day in ("2019.02.04", "2019.02.05"):
        (tmp_path / day).mkdir()
        (tmp_path / day / "trade.csv").write_text("time,sym,price,size\n09:30:00.265,AAPL,170,100\n")
    ticks, replay = read([tmp_path], {"date": "file_name"})
    assert sorted(t.ts for t in ticks) == [OPEN_NS + 265_000_000 + k * 86_400 * 10**9 for k in (0, 1)]
    assert any('from its folder "2019.02.05"' in note for note in replay.notes)


def test_a_q_date_in_a_file_name_is_its_day(tmp_path: Path) -> None:
    path = tmp_path / "trade.2019.02.04.csv"
    path.write_text("time,sym,price,size\n09:30:00.265,AAPL,170,100\n")
    ticks, _ = read([path], {"date": "file_name"})
    assert [t.ts for t in ticks] == [OPEN_NS + 265_000_000]


@pytest.mark.parametrize("year", [2019, 2024])
def test_a_q_epoch_long_column_is_warned_of_and_read_with_ns_since_2000(tmp_path: Path, year: int) -> None:
    q_epoch = 946_684_800 * 10**9
    opening = int(datetime(year, 2, 4, 14, 30, tzinfo=timezone.utc).timestamp()) * 10**9  # 09:30 in New York
    path = tmp_path / "trade.parquet"
    trades([opening - q_epoch + part - 5 * 3600 * 10**9 for part in FRACTIONS["ns"]]).write_parquet(path)
    ticks, replay = read([path])  # read from 1970: 30 years early (1989, 1994), warned of with the option
    assert [t.ts for t in ticks] == [opening - q_epoch + part - 5 * 3600 * 10**9 for part in FRACTIONS["ns"]]
    warned, = [c for c in replay.cautions if "q's epoch" in c]
    assert f"it is {year}-02-04T09:30:00.265336495Z" in warned and "give --ts-unit ns_since_2000" in warned
    ticks, replay = read([path], {"ts_unit": "ns_since_2000", "tz": "America/New_York"})
    assert [t.ts for t in ticks] == [opening + part for part in FRACTIONS["ns"]]
    assert not [c for c in replay.cautions if "q's epoch" in c]


def test_an_epoch_time_out_of_1990_2200_in_every_unit_gets_a_note(tmp_path: Path) -> None:
    path = tmp_path / "trade.csv"
    path.write_text("time,sym,price,size\n8800000000000000000,AAPL,170,1\n")  # 2248 as ns: no unit reads it
    _, replay = read([path], {"ts_unit": "ns"})
    assert any("is not in 1990..2200" in note for note in replay.notes), replay.notes


def test_kdbtick_quote_sizes_are_read_and_a_quote_map_leaves_the_trade_file_beside_it_alone(tmp_path: Path) -> None:
    trade, quote = tmp_path / "trade.csv", tmp_path / "quote.csv"
    trade.write_text("time,sym,price,size,ex,cond\n2019.02.04D09:30:00.265336495,AAPL,170,500,Z,@\n")
    quote.write_text("time,sym,bid,ask,bsize,asize,ex\n2019.02.04D09:30:01.453810772,AAPL,169.99,170.01,300,400,N\n")
    ticks, replay = read([trade, quote])  # sym.q's quote schema: bsize/asize are the sizes
    assert [(t.kind, t.bid_size, t.ask_size) for t in ticks] == [("trade", None, None), ("quote", 300.0, 400.0)]
    assert any("bid_size=bsize, ask_size=asize" in note for note in replay.notes)
    assert any('sale conditions are not read ("cond" holds "@")' in note for note in replay.notes)
    quote.write_text("time,sym,bid,ask,bs,as_,ex\n2019.02.04D09:30:01.453810772,AAPL,169.99,170.01,300,400,N\n")
    ticks, replay = read([trade, quote], {"bid_size": "bs", "ask_size": "as_"})
    assert [(t.kind, t.size, t.bid_size, t.ask_size) for t in ticks] == [("trade", 500.0, None, None),
                                                                         ("quote", None, 300.0, 400.0)]
    assert 'trade.csv: --columns bid_size=bs,ask_size=as_ not applied to this file of trades, which lacks "bs", ' \
           "\"as_\": those keys read the other files' ticks" in replay.notes
    with pytest.raises(ValueError, match=r'the column map needs "bsz", which the file lacks'):
        read([trade, quote], {"bid_size": "bsz"})  # a key of the quote file's own kind it lacks: still refused


def test_q_nulls_in_a_csv_are_named_as_q_nulls_not_units(tmp_path: Path) -> None:
    path = tmp_path / "trade.csv"
    path.write_text("time,sym,price,size\n2019.02.04D09:30:00.265336495,AAPL,170,500\n"
                    "2019.02.04D09:30:00.370773435,MSFT,0n,100\n2019.02.04D09:30:00.372437508,GE,9.49,0N\n")
    ticks, replay = read([path])
    assert [t.stream for t in ticks] == ["AAPL"] and replay.rejected["missing_field"] == 2
    said = replay.rejected.examples["missing_field"]
    assert "\"0n\" is q's null: no value, as a kdb+ export writes it" in said and "Excel" not in said
    assert "after the number is a unit" not in said


def test_naive_times_of_a_us_equity_session_get_a_warning_naming_new_york(tmp_path: Path) -> None:
    path = tmp_path / "trade.csv"
    rows = [f"2019.02.04D{clock},{sym},100,1" for clock, sym in
            (("09:30:00.265", "AAPL"), ("11:00:00.000", "BRK.B"), ("15:59:59.999", "MSFT"))]
    path.write_text("time,sym,price,size\n" + "\n".join(rows) + "\n")
    _, replay = read([path])
    warned, = [c for c in replay.cautions if "US equity session" in c]
    assert "read as UTC" in warned and "give --tz America/New_York" in warned
    ticks, replay = read([path], {"tz": "America/New_York"})  # the zone given: read so, nothing said
    assert ticks[0].ts == OPEN_NS + 5 * 3600 * 10**9 + 265_000_000
    assert not [c for c in replay.cautions if "US equity session" in c]
    path.write_text("time,sym,price,size\n2019.02.04D00:00:00.994,EURUSD,1.14,1\n")  # FX around the clock: a note
    _, replay = read([path])
    assert not replay.cautions and any("read as UTC" in note for note in replay.notes)
