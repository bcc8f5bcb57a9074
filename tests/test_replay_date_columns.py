"""Date columns taken for the time: an integer YYYYMMDD `trade_date` beside ns after midnight (a TAQ-derived
layout) is joined to that time of day, never read as epoch seconds (every tick on 1970-08-23); without such a
time beside it the file is refused naming the map that reads it; times that still look misread (all one time,
before 1980) and an exchange trade date joined to a time of day (evening rows a day late) are said as warnings.
Every fixture is a real CSV or Parquet file written here, read by the real replay and the real backtest."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest

from engine.quoting import quoted

from conftest import drain, engine_dir, shared_tiny_tick_checkpoint
from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from engine.service.cli import main

UTC, NEW_YORK, CHICAGO = timezone.utc, ZoneInfo("America/New_York"), ZoneInfo("America/Chicago")
OPEN_NS = (9 * 3600 + 30 * 60) * 10**9  # 09:30 after midnight, in ns
QUERIES = "queries:\n  - {name: dir5, streams: ['*'], question: direction_5, kind: choice, trigger: {ticks: 5}}\n"


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> Path:
    """engine.yaml (the tiny tick model, built once a worker: the backtests here only read it) and q.yaml."""
    return engine_dir(tmp_path_factory.mktemp("engine"), QUERIES,
                      checkpoint=shared_tiny_tick_checkpoint(tmp_path_factory))


def equity_rows(n: int = 40, days: tuple[int, ...] = (20240603, 20240604)) -> pl.DataFrame:
    """TAQ-derived trades: an integer trade date and ns after midnight New York time under names detection does not
    know as a time, a venue column between them and the symbol, two same-ns prints at the open."""
    return pl.DataFrame({
        "trade_date": [day for day in days for _ in range(n)],
        "ts_ns_et": [OPEN_NS + (0 if i < 2 else i * 10**9) for _ in days for i in range(n)],
        "sym": "AAPL", "venue": "XNAS", "px": [190.0 + i % 7 * 0.01 for _ in days for i in range(n)],
        "qty": [100 + i for _ in days for i in range(n)]})


def write(frame: pl.DataFrame, path: Path) -> Path:
    frame.write_csv(path) if path.suffix == ".csv" else frame.write_parquet(path)
    return path


def new_york_ns(day: int, after_midnight_ns: int) -> int:
    midnight = datetime(day // 10000, day // 100 % 100, day % 100, tzinfo=NEW_YORK)
    return int(midnight.timestamp()) * 10**9 + after_midnight_ns


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
@pytest.mark.parametrize("column, scale", [("ts_ns_et", 1), ("msm", 10**6), ("secs", 10**9)])
def test_an_integer_trade_date_is_joined_to_the_time_of_day_beside_it_never_read_as_epoch_seconds(
        tmp_path: Path, suffix: str, column: str, scale: int) -> None:
    rows = equity_rows().with_columns((pl.col("ts_ns_et") // scale).alias("ts_ns_et")).rename({"ts_ns_et": column})
    path = write(rows, tmp_path / f"eq{suffix}")
    replay = FileReplay(path, columns={"tz": "America/New_York"})
    ticks = drain(replay)
    assert [t.ts for t in ticks] == [new_york_ns(d, t * scale) for d, t in zip(rows["trade_date"], rows[column])]
    assert ticks[0].ts == int(datetime(2024, 6, 3, 13, 30, tzinfo=UTC).timestamp()) * 10**9  # 09:30 EDT
    unit = {1: "ns_after_midnight", 10**6: "ms_after_midnight", 10**9: "seconds_after_midnight"}[scale]
    said = "\n".join(replay.notes)
    assert 'column "trade_date" holds dates (YYYYMMDD, 20240603 first), not a time since the epoch' in said
    assert (f"read joined to {quoted(column)}, the integer column beside it, whose values are times of one day in "
            f"{unit}") in said
    assert f"read as ts=trade_date+{column} ({unit}, America/New_York)" in said
    assert any("holds dates" in caution for caution in replay.cautions)  # said again at a run's end
    assert "1970" not in said.replace("every tick would fall in 1970", "")


def test_the_backtest_of_a_trade_date_and_ns_file_answers_at_the_real_times(engine: Path, tmp_path: Path,
                                                                            capsys) -> None:
    path = write(equity_rows(), tmp_path / "eq_small.csv")
    out = tmp_path / "bt.parquet"
    assert main(["backtest", str(path), "--queries", str(engine / "q.yaml"), "--config", str(engine / "engine.yaml"),
                 "--out", str(out), "--quiet", "--tz", "America/New_York"]) == 0
    err = capsys.readouterr().err
    assert "read as ts=trade_date+ts_ns_et (ns_after_midnight, America/New_York)" in err
    assert "its times count from the epoch" not in err  # the old misreading, stated as fact
    answered = pl.read_parquet(out)["data_ts"]
    assert answered.min() >= new_york_ns(20240603, OPEN_NS) and answered.max() <= new_york_ns(20240604, 10**14)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_trade_date_with_no_time_of_day_beside_it_is_refused_naming_the_map_that_reads_it(
        engine: Path, tmp_path: Path, suffix: str, capsys) -> None:
    rows = equity_rows().select("trade_date", "sym", "px", "qty")
    path = write(rows, tmp_path / f"dates{suffix}")
    with pytest.raises(ValueError) as refused:
        FileReplay(path)
    said = str(refused.value)
    assert 'column "trade_date" holds dates (YYYYMMDD, 20240603 first), not a time since the epoch' in said
    assert "--columns ts=trade_date+TIME --ts-unit ns_after_midnight" in said
    assert "--ts-unit datetime --ts-format %Y%m%d" in said  # a date alone: a row a day
    assert main(["backtest", str(path), "--queries", str(engine / "q.yaml"), "--config", str(engine / "engine.yaml"),
                 "--out", str(tmp_path / "bt.parquet"), "--quiet"]) == 2
    assert "--columns ts=trade_date+TIME --ts-unit ns_after_midnight" in capsys.readouterr().err


def test_a_bar_file_with_yyyymmdd_dates_alone_reads_a_bar_a_day_never_its_open_as_a_clock(tmp_path: Path) -> None:
    """Interactive Brokers' daily bars (`date` 20240102) read as Yahoo's dates do (review430 #2), and an open written
    whole and under 86,400 (185.0) is a price, not the seconds after midnight of each row's day."""
    for opening in ("370.69", "185.0"):
        path = tmp_path / "AAPL_ib_daily.csv"
        path.write_text("date,open,high,low,close,volume,average,barCount\n"
                        f"20240102,{opening},390.0,180.0,185.5,500000,185.2,30000\n"
                        f"20240103,{opening},390.0,180.0,186.5,400000,186.2,20000\n")
        replay = FileReplay(path)
        assert [(t.ts, t.price) for t in drain(replay)] == [(1704153600 * 10**9, 185.5), (1704240000 * 10**9, 186.5)]
        assert any("read as each bar's day (--ts-unit datetime --ts-format %Y%m%d)" in n for n in replay.notes)


def test_a_map_naming_the_date_as_the_time_is_refused_with_the_exact_columns(tmp_path: Path) -> None:
    path = write(equity_rows(), tmp_path / "eq.csv")
    with pytest.raises(ValueError, match=r"Give --columns ts=trade_date\+ts_ns_et --ts-unit ns_after_midnight"):
        FileReplay(path, columns={"ts": "trade_date", "stream_col": "sym", "price": "px", "size": "qty"})
    with pytest.raises(ValueError, match=r"Give --columns ts=trade_date\+ts_ns_et --ts-unit ns_after_midnight"):
        FileReplay(path, columns={"ts": "trade_date"})  # the time column alone named: the rest detected
    # the joined map given reads it, and so does --ts-unit s for whoever wants epoch seconds, warned
    joined = FileReplay(path, columns={"ts": "trade_date+ts_ns_et", "ts_unit": "ns_after_midnight",
                                       "tz": "America/New_York", "stream_col": "sym", "price": "px", "size": "qty"})
    assert drain(joined)[0].ts == new_york_ns(20240603, OPEN_NS)
    as_seconds = FileReplay(write(equity_rows(days=(20240603,)), tmp_path / "one_day.csv"), columns={"ts_unit": "s"})
    assert {t.ts for t in drain(as_seconds)} == {20240603 * 10**9}
    cautions = "\n".join(as_seconds.cautions)
    assert 'every one of its 40 timed rows has the same time, 1970-08-23T06:23:23Z (column "trade_date" read as s ' \
           "since the epoch)" in cautions
    assert 'its times start at 1970-08-23T06:23:23Z, before 1980 (column "trade_date" read as s since the epoch)' \
        in cautions


def test_a_column_named_as_a_date_is_no_count_of_epoch_units_unless_it_holds_present_day_times(
        tmp_path: Path) -> None:
    days = pl.DataFrame({"date": [19877, 19878], "symbol": "X", "price": [1.0, 2.0], "size": 1.0})  # days since 1970
    with pytest.raises(ValueError, match=r'column "date" is named as a date \(19877 first\), not a time since the '
                                         r"epoch"):
        FileReplay(write(days, tmp_path / "days.csv"))
    epoch_seconds = days.with_columns(pl.Series("date", [1717400000, 1717400001]))  # Bitstamp's `date`
    assert [t.ts for t in drain(FileReplay(write(epoch_seconds, tmp_path / "epoch.csv")))] == \
        [1717400000 * 10**9, 1717400001 * 10**9]


def test_a_date_and_clock_written_as_one_number_is_read_as_the_wall_clock(tmp_path: Path) -> None:
    """review433 #7: Chinese vendors' `datetime` 20241202093003000 (YYYYMMDDHHMMSSmmm) was read as epoch us (2611),
    every row rejected; --ts-format alone was refused for the unit detection guessed."""
    stamps = pl.DataFrame({"code": "600519.SH", "datetime": [20241202093003000, 20241202093006500], "price": 1688.0,
                           "qty": 100})
    path = write(stamps, tmp_path / "dt.csv")
    first = int(datetime(2024, 12, 2, 1, 30, 3, tzinfo=timezone.utc).timestamp()) * 10**9
    for keys in ({"tz": "Asia/Shanghai"}, {"tz": "Asia/Shanghai", "ts_format": "%Y%m%d%H%M%S%3f"}):
        replay = FileReplay(path, columns=keys)
        assert [t.ts for t in drain(replay)] == [first, first + 3_500_000_000], keys
    assert any('"datetime" holds a date and a wall clock\'s digits as one number, YYYYMMDDHHMMSSmmm (2024120209300300'
               '0), not a count since the epoch: read as --ts-unit datetime --ts-format %Y%m%d%H%M%S%3f' in note
               for note in FileReplay(path, columns={"tz": "Asia/Shanghai"}).notes)
    with pytest.raises(ValueError, match=r"read as epoch ms, no tick would fall on its date. Give --ts-unit "
                                         r"datetime --ts-format %Y%m%d%H%M%S "):
        FileReplay(write(stamps.with_columns(pl.col("datetime") // 1000), tmp_path / "s.csv"),
                   columns={"ts": "datetime", "stream_col": "code", "price": "price", "size": "qty"})


def test_a_time_before_1980_in_a_detected_epoch_column_is_warned(tmp_path: Path) -> None:
    old = pl.DataFrame({"timestamp": [86_400 + i for i in range(5)], "symbol": "X", "price": 1.0, "size": 1.0})
    replay = FileReplay(write(old, tmp_path / "old.parquet"))
    drain(replay)
    assert any('its times start at 1970-01-02T00:00:00Z, before 1980 (column "timestamp" read as s since the epoch)'
               in caution for caution in replay.cautions)
    assert not any("same time" in caution for caution in replay.cautions)


def cme_rows(calendar: bool, date_name: str = "Trade Date") -> pl.DataFrame:
    """CL trades every 20 minutes from Sunday's 17:00 CT open to Wednesday's 16:00 close, with the CME's
    16:00-17:00 break, stamped with the exchange trade date (an evening carries the next business day's) or, with
    `calendar`, the calendar date, beside Chicago wall-clock text."""
    start = datetime(2026, 10, 25, 17, tzinfo=CHICAGO)
    moments = [start + timedelta(minutes=20 * i) for i in range(71 * 3)]  # to Wednesday 15:40
    moments = [m for m in moments if m.astimezone(CHICAGO).hour != 16]
    local = [m.astimezone(CHICAGO) for m in moments]
    trade_dates = [d.date() + timedelta(days=d.hour >= 17) for d in local]
    return pl.DataFrame({
        date_name: [(d.date() if calendar else t).strftime("%Y%m%d") for d, t in zip(local, trade_dates)],
        "Time": [d.strftime("%H:%M:%S.%f") for d in local], "Contract": "CLZ6",
        "Price": [60.0 + i % 9 * 0.01 for i in range(len(local))], "Quantity": 1,
        "truth": [int(m.timestamp()) * 10**9 for m in moments]})


def test_a_bare_date_column_whose_times_wrap_within_a_date_is_read_as_a_trade_date(tmp_path: Path) -> None:
    """`Date` holding trade dates, each date's rows in session order (the evening from 17:00 CT first, then 00:00 to
    16:00): no calendar date's times wrap so within a date, so its evening rows are read on the day before."""
    rows = cme_rows(calendar=False, date_name="Date")
    replay = FileReplay(write(rows.drop("truth"), tmp_path / "cl_tradedate.csv"), columns={"tz": "America/Chicago"})
    assert rows["truth"].is_sorted()
    assert [t.ts for t in drain(replay)] == rows["truth"].to_list()  # before: the 63 evening rows a day late
    said = "\n".join(replay.notes)
    assert 'column "Date" holds exchange trade (session) dates, not calendar dates: within a date its times run ' \
           "from the evening open through midnight to the day session, in file order: its 63 row(s) at or after " \
           '17:00 in "Time" (the evening open, after the daily pause from 15:40)' in said, said
    assert "not in time order" not in said
    assert not replay.cautions, replay.cautions
    # the same trades with the calendar date (times ascending within each date) are read as before, no note
    calendar = cme_rows(calendar=True, date_name="Date")
    replay = FileReplay(write(calendar.drop("truth"), tmp_path / "cl_calendar.csv"), columns={"tz": "America/Chicago"})
    assert [t.ts for t in drain(replay)] == calendar["truth"].to_list()
    assert not any("trade (session) date" in note or "not in time order" in note for note in replay.notes)
    # sorted by date then time, a trade date is a calendar date to the eye: read as written, nothing said
    by_time = rows.sort("Date", "Time", maintain_order=True)
    replay = FileReplay(write(by_time.drop("truth"), tmp_path / "cl_by_time.csv"), columns={"tz": "America/Chicago"})
    assert len(drain(replay)) == rows.height
    assert not any("trade (session) date" in note for note in replay.notes)


def test_a_bare_date_column_whose_wrap_is_not_clean_is_read_as_written_with_a_caution(tmp_path: Path) -> None:
    """One evening row out of order besides the wraps: not the clean signature of a trade date, so the file is
    read as written, and the caution names what reads it right."""
    rows = cme_rows(calendar=False, date_name="Date")
    swapped = pl.concat([rows[:3], rows[4:5], rows[3:4], rows[5:]])  # 18:00 before 17:40 on Sunday's evening
    replay = FileReplay(write(swapped.drop("truth"), tmp_path / "cl_shuffled.csv"), columns={"tz": "America/Chicago"})
    evening = [int(clock[:2]) >= 17 for clock in rows["Time"]]
    day_late = [truth + 86_400 * 10**9 * late for truth, late in zip(rows["truth"], evening)]
    assert [t.ts for t in drain(replay)] == sorted(day_late)
    said = "\n".join(replay.notes)
    assert "(a trade date's evening rows a day late, as said next)" in said
    caution = next(c for c in replay.cautions if "trade (session) date" in c)
    assert '3 time(s) in file order step back by 12 to 24 h between rows of one "Date"' in caution
    assert "Give a calendar date column, or a full timestamp column (--columns ts=...;" in caution
    assert "or say it is a trade date, read with its evening rows on the day before: --columns ...,trade_date=Date " \
           "(or name the column 'Trade Date' in the file's header)" in caution
    # as the caution says: the same rows under `Trade Date` read at their real times
    renamed = FileReplay(write(swapped.drop("truth").rename({"Date": "Trade Date"}), tmp_path / "cl_renamed.csv"),
                         columns={"tz": "America/Chicago"})
    assert [t.ts for t in drain(renamed)] == rows["truth"].to_list()


def two_venue_rows() -> pl.DataFrame:
    """ES (CME: 18:00-17:00 New York time) and Brent (ICE: 20:00-18:00 New York time) every 20 minutes from
    Sunday's opens to Tuesday's closes, in one file, each row stamped with its product's trade date (an evening
    carries the next day's), in time order. Each pauses while the other trades: over the whole file, no pause."""
    rows = []
    for symbol, open_hour, close_hour in (("ESZ6", 18, 17), ("BRNF7", 20, 18)):
        moment, end = datetime(2026, 10, 25, open_hour, tzinfo=NEW_YORK), datetime(2026, 10, 27, close_hour,
                                                                                  tzinfo=NEW_YORK)
        while moment < end:
            if not close_hour <= moment.hour < open_hour:
                trade_date = moment.date() + timedelta(days=moment.hour >= open_hour)
                rows.append((trade_date.strftime("%Y%m%d"), moment.strftime("%H:%M:%S"), symbol,
                             int(moment.timestamp()) * 10**9))
            moment += timedelta(minutes=20)
    return pl.DataFrame(rows, schema=["Trade Date", "Time", "Symbol", "truth"], orient="row") \
        .with_columns(Price=pl.lit(100.0), Volume=pl.lit(1)).sort("truth", maintain_order=True)


def test_a_trade_date_file_of_two_products_finds_each_streams_evening_open(tmp_path: Path) -> None:
    rows = two_venue_rows()
    replay = FileReplay(write(rows.drop("truth"), tmp_path / "es_brent.csv"), columns={"tz": "America/New_York"})
    ticks = drain(replay)
    assert [t.ts for t in ticks] == rows["truth"].to_list()  # before: no open over the file, every row a day late
    said = "\n".join(replay.notes)
    assert "its 60 row(s) at or after their stream's evening open in \"Time\" (each stream's own, after its daily " \
           "pause: 18:00 for ESZ6 (after the pause from 16:40); 20:00 for BRNF7 (after the pause from 17:40))" \
           in said, said
    assert "not in time order" not in said


def test_a_thin_stream_of_a_trade_date_file_takes_the_files_open(tmp_path: Path) -> None:
    """A back month's three trades show no pause of their own: its evening trade is read on the day before by the
    open found over the whole file (the front month's), as before the open was found per stream."""
    rows = cme_rows(calendar=False)
    sunday_evening = rows.filter(pl.col("Time") == "18:00:00.000000").head(1)  # Sunday 18:00 CT, Monday's date
    morning = rows.filter(pl.col("Time").is_in(["09:00:00.000000", "10:40:00.000000"])).head(2)
    back = pl.concat([sunday_evening, morning]).with_columns(Contract=pl.lit("CLF7"))
    both = pl.concat([rows, back]).sort("truth", maintain_order=True)
    replay = FileReplay(write(both.drop("truth"), tmp_path / "cl_two_months.csv"), columns={"tz": "America/Chicago"})
    ticks = drain(replay)
    assert [t.ts for t in ticks if t.stream == "CLF7"] == back["truth"].to_list()
    assert [t.ts for t in ticks] == both["truth"].to_list()
    said = "\n".join(replay.notes)  # (fix281 #5: said borrowed, and from which stream)
    assert "(the evening open, after the daily pause from 15:40; CLF7's borrowed from CLZ6)" in said, said
    # a stream that is no contract takes the open of the whole file's times, said so
    block = both.with_columns(Contract=pl.col("Contract").replace("CLF7", "CL-BLOCK"))
    replay = FileReplay(write(block.drop("truth"), tmp_path / "cl_block.csv"), columns={"tz": "America/Chicago"})
    assert [t.ts for t in drain(replay)] == both["truth"].to_list()
    said = "\n".join(replay.notes)
    assert "(the evening open, after the daily pause from 15:40; CL-BLOCK's borrowed from the whole file's times)" \
        in said, said
    assert any('its 64 row(s) at or after 17:00 in "Time"' in note for note in replay.notes), replay.notes


def test_a_column_named_trade_date_reads_its_evening_rows_on_the_day_before_in_either_order(tmp_path: Path) -> None:
    rows = cme_rows(calendar=False)
    for order, written in (("datamine", rows), ("sorted", rows.sort("Trade Date", "Time", maintain_order=True))):
        replay = FileReplay(write(written.drop("truth"), tmp_path / f"cl_{order}.csv"),
                            columns={"tz": "America/Chicago"})
        assert [t.ts for t in drain(replay)] == rows["truth"].to_list(), order
        said = "\n".join(replay.notes)
        assert 'column "Trade Date" is an exchange trade (session) date: its 63 row(s) at or after 17:00 in "Time" ' \
               "(the evening open, after the daily pause from 15:40) are its evening session, read on the calendar " \
               "day before their trade date" in said, said
        assert not any("trade (session) date" in caution for caution in replay.cautions), replay.cautions
    # a column named so that holds calendar dates (a Sunday's evening rows): read as written, and said
    calendar = cme_rows(calendar=True)
    replay = FileReplay(write(calendar.drop("truth"), tmp_path / "cl_calendar.csv"), columns={"tz": "America/Chicago"})
    assert [t.ts for t in drain(replay)] == calendar["truth"].to_list()
    assert any('column "Trade Date" is named as a trade date, but 21 of its rows at or after 17:00' in note and
               "read as calendar dates, as written" in note for note in replay.notes), replay.notes


def cme_holiday_rows(halted: bool, date_name: str = "Trade Date") -> pl.DataFrame:
    """ES trades every 20 minutes around 4 July 2024 in DataMine's order: trade date 07-03 from Tuesday's 17:00 CT
    open, then 07-05, whose evening opens on Wednesday 07-03 (no 07-04 trade date) and runs through Thursday to
    Friday's close; on the Thursday halted from 12:00 to 17:00 (CME's holiday hours), or, not ``halted``, trading
    through its 16:00-17:00 pause."""
    start = datetime(2024, 7, 2, 17, tzinfo=CHICAGO)
    local = [(start + timedelta(minutes=20 * i)).astimezone(CHICAGO) for i in range(3 * 72)]  # to Friday 16:40
    thursday = date(2024, 7, 4)
    local = [t for t in local if t.date() == thursday and not (halted and 12 <= t.hour < 17) or
             t.date() != thursday and t.hour != 16]
    return pl.DataFrame({
        date_name: ["20240703" if t < datetime(2024, 7, 3, 17, tzinfo=CHICAGO) else "20240705" for t in local],
        "Time": [t.strftime("%H:%M:%S") for t in local], "Symbol": "ESU4", "Price": 5500.25, "Volume": 1,
        "truth": [int(t.timestamp()) * 10**9 for t in local]})


def test_a_trade_date_that_skips_a_holiday_keeps_the_files_evenings_and_reads_its_own_on_the_day_it_ran(
        tmp_path: Path) -> None:
    """review411 #13: a holiday session trading through the daily pause hid the file's evening open, so every
    evening, the normal 07-03 one too, was read a day late, even under an explicit `trade_date` map, with a caution
    asking to name the column `Trade Date` that already was. Its rows, passing two midnights in file order, are
    read back from the trade date by the midnights still to come: the Wednesday evening on the Wednesday."""
    through, halted = cme_holiday_rows(halted=False), cme_holiday_rows(halted=True, date_name="Session")
    named = FileReplay(write(through.drop("truth"), tmp_path / "es_july.csv"), columns={"tz": "America/Chicago"})
    mapped = FileReplay(write(halted.drop("truth"), tmp_path / "es_session.csv"),
                        columns={"ts": "Session+Time", "trade_date": "Session", "tz": "America/Chicago"})
    for replay, rows in ((named, through), (mapped, halted)):
        assert [t.ts for t in drain(replay)] == rows["truth"].to_list()
        said = "\n".join(replay.notes)
        assert "read on the calendar day before their trade date; the session(s) of trade date 20240705 pass two " \
               "midnights or more in file order (a trade date that skips an exchange holiday)" in said, said
        assert not replay.cautions, replay.cautions
    # a column named so whose times never pause (no evening open to tell): read as written, and not told to be named so
    round_the_clock = through.filter(pl.col("Trade Date") == "20240705")
    replay = FileReplay(write(round_the_clock.drop("truth"), tmp_path / "es_no_pause.csv"),
                        columns={"tz": "America/Chicago"})
    drain(replay)
    said = "\n".join(replay.cautions)
    assert "Its name or the map says it is a trade date, but its times of day show no daily pause" in said, said
    assert "name the column 'Trade Date'" not in said


def test_a_cme_trade_date_file_sorted_by_trade_date_then_time_replays_the_sunday_open_first(tmp_path: Path) -> None:
    """ORDER BY trade_date, time (a SQL export's, a spreadsheet sort's): within a trade date the day session comes
    before the evening of the day before. UTC stamps worked by hand: CST is UTC-6 in December."""
    evening = [f"2026-12-07,{17 + i // 3}:{i % 3 * 20:02d}:05,ESZ6,6849.75,3\n" for i in range(21)]  # 17:00:05..
    path = tmp_path / "ES_tradedate_sorted.csv"
    path.write_text("Trade Date,Time,Symbol,Price,Volume\n"
                    "2026-12-07,00:00:30,ESZ6,6850.25,1\n"   # Monday 00:00:30 CT
                    "2026-12-07,15:59:00,ESZ6,6851.00,2\n"   # Monday's close
                    + "".join(evening) +                      # Sunday's evening, every 20 min from the open
                    "2026-12-07,23:59:59,ESZ6,6850.00,4\n"   # Sunday, a second before midnight
                    "2026-12-08,00:10:00,ESZ6,6852.00,5\n"   # Tuesday 00:10 CT
                    "2026-12-08,17:00:00,ESZ6,6851.50,6\n")  # Monday's evening open
    ticks = drain(FileReplay(path, columns={"tz": "America/Chicago"}))
    stamps = [(t.ts, t.size) for t in ticks]
    assert stamps[0] == (utc_ns("2026-12-06T23:00:05"), 3.0)  # the Sunday 17:00 CT open first, not after Monday
    assert stamps[20] == (utc_ns("2026-12-07T05:40:05"), 3.0)  # Sunday 23:40:05 CT
    assert stamps[21:] == [(utc_ns("2026-12-07T05:59:59"), 4.0), (utc_ns("2026-12-07T06:00:30"), 1.0),
                           (utc_ns("2026-12-07T21:59:00"), 2.0), (utc_ns("2026-12-07T23:00:00"), 6.0),
                           (utc_ns("2026-12-08T06:10:00"), 5.0)]


def _es_trade_dates(evening_first: bool, back_month: bool) -> str:
    """Three trade dates of ESM4 every 20 min (evening first, DataMine's order, or day session first), and a thin
    back month ESU4 whose two rows a day are written 35 min late (after the ESM4 rows of their hour)."""
    lines = ["Trade Date,Time,Symbol,Price,Size"]
    hours = [*range(17, 24), *range(0, 16)] if evening_first else [*range(0, 16), *range(17, 24)]
    for day in ("2024-06-04", "2024-06-05", "2024-06-06"):
        for h in hours:
            lines += [f"{day},{h:02d}:{m:02d}:00,ESM4,{5300 + m / 20:.2f},1" for m in (0, 20, 40)]
            lines += [f"{day},{h:02d}:05:00,ESU4,5350.25,1"] if back_month and h in (18, 10) else []
    return "\n".join(lines) + "\n"


def test_the_not_in_time_order_note_names_the_rows_out_of_order_not_the_moved_evenings(tmp_path: Path) -> None:
    """review295 #4: evening rows written first are in order once read on the day before; the 6 rows out of order
    were a thin back month's, yet the note blamed "each trade date's evening rows after its day session"."""
    def order_note(text: str, name: str) -> str:
        (tmp_path / name).write_text(text)
        return "\n".join(n for n in FileReplay(tmp_path / name).notes if "not in time order" in n)

    said = order_note(_es_trade_dates(evening_first=True, back_month=True), "es.csv")
    assert "6 row(s) earlier than the row before them, by up to 35 min (rows of ESU4, written out of time order: " \
           "the evening rows read on the day before are in order)" in said, said
    assert "evening rows after its day session" not in said
    assert order_note(_es_trade_dates(evening_first=True, back_month=False), "es_m4.csv") == ""
    # day session first: the move steps back to each evening's first row (3), said so; ESU4's 6 named beside them
    said = order_note(_es_trade_dates(evening_first=False, back_month=False), "es_day_first.csv")
    assert "(each trade date's evening rows after its day session, read on the day before as said above)" in said
    said = order_note(_es_trade_dates(evening_first=False, back_month=True), "es_day_first_u4.csv")
    assert "9 row(s) earlier than the row before them" in said and "(3 of them each trade date's evening rows after " \
           "its day session, read on the day before as said above; the others rows of ESU4)" in said, said


def utc_ns(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()) * 10**9


def test_rows_merged_from_two_sources_are_not_taken_for_a_trade_date(tmp_path: Path) -> None:
    rows = cme_rows(calendar=True)
    merged = pl.concat([rows[1::2], rows[::2]])  # two sources' rows one after the other: steps back of days
    replay = FileReplay(write(merged.drop("truth"), tmp_path / "merged.csv"), columns={"tz": "America/Chicago"})
    assert sorted(t.ts for t in drain(replay)) == sorted(rows["truth"])
    assert any("newest first, or merged from several sources" in note for note in replay.notes)
    assert not any("trade (session) date" in note for note in replay.notes)


def test_a_round_the_clock_file_sorted_by_stream_is_not_taken_for_a_trade_date(tmp_path: Path) -> None:
    start = datetime(2024, 6, 3, tzinfo=UTC)
    moments = [start + timedelta(minutes=30 * i) for i in range(48)]  # one calendar day, 00:00 to 23:30 UTC
    rows = pl.DataFrame({"Date": [m.strftime("%Y%m%d") for pair in ("EURUSD", "USDJPY") for m in moments],
                         "Time": [m.strftime("%H:%M:%S") for pair in ("EURUSD", "USDJPY") for m in moments],
                         "Symbol": [pair for pair in ("EURUSD", "USDJPY") for _ in moments],
                         "Price": 1.08, "Size": 1.0})
    replay = FileReplay(write(rows, tmp_path / "fx_by_symbol.csv"))
    assert len(drain(replay)) == 96
    # each stream's rows in order, one stream's after the other's: said as that, no disorder (fix303 #4)
    assert any("its rows are grouped by stream, each of its 2 streams' rows in time order" in note
               for note in replay.notes), replay.notes
    assert not any("trade (session) date" in note or "merged from several sources" in note for note in replay.notes)


def test_a_date_type_column_is_not_touched(tmp_path: Path) -> None:
    rows = pl.DataFrame({"date": [date(2024, 6, 3)] * 3, "time_ns": [OPEN_NS + i for i in range(3)],
                         "symbol": "X", "price": 1.0, "size": 1.0})
    replay = FileReplay(write(rows, tmp_path / "typed.parquet"))
    assert [t.ts for t in drain(replay)] == [int(datetime(2024, 6, 3, tzinfo=UTC).timestamp()) * 10**9 + OPEN_NS + i
                                             for i in range(3)]
    assert not any("holds dates" in note for note in replay.notes)


def test_a_date_column_beside_nanoseconds_after_midnight_reads_each_rows_day(tmp_path: Path) -> None:
    frame = pl.DataFrame({"DATE": ["2026-03-06", "2026-03-06", "2026-03-09"],
                          "TIME_NS": [14_423_874_757_847, 14_423_874_757_999, 34_200_000_000_001],
                          "SYMBOL": ["AAPL"] * 3, "PRICE": [185.1, 185.2, 185.3], "SIZE": [1, 2, 3]})
    frame.write_parquet(tmp_path / "ticks.parquet")
    frame.write_csv(tmp_path / "ticks.csv")
    want = [1772755200_000000000 + 14_423_874_757_847, 1772755200_000000000 + 14_423_874_757_999,
            1773014400_000000000 + 34_200_000_000_001]  # 2026-03-06 and 2026-03-09 at midnight UTC, + the time
    for name in ("ticks.parquet", "ticks.csv"):
        replay = FileReplay(tmp_path / name)  # detected: not ms since the epoch (every row out of range)
        assert [t.ts for t in drain(replay)] == want
        assert any("column \"TIME_NS\" read as ns after midnight of each row's day in column \"DATE\"" in n
                   for n in replay.notes)
        # the map written out, with and without its unit, reads the same
        spec = "ts=DATE+TIME_NS,price=PRICE,size=SIZE,stream=SYMBOL"
        assert [t.ts for t in drain(FileReplay(tmp_path / name, columns=map_from_options(columns=spec)))] == want
        given = map_from_options(columns=spec, ts_unit="ns_after_midnight")
        assert [t.ts for t in drain(FileReplay(tmp_path / name, columns=given))] == want
    # TAQ's YYYYMMDD dates, microseconds by the column's name
    (tmp_path / "us.csv").write_text("date,time_us,symbol,price,size\n20260306,34200000001,AAPL,185.1,1\n")
    assert [t.ts for t in drain(FileReplay(tmp_path / "us.csv"))] == [1772755200_000000000 + 34_200_000_001_000]


def test_epoch_seconds_joined_to_their_microseconds_read_as_one_time(tmp_path: Path) -> None:
    """Review242 (finding 5): Rithmic stamps a trade with `ssboe` (epoch seconds) and `usecs`; `ts=ssboe+usecs` was
    taken as a date joined to a time of day, read 1796049000 as a date and rejected every row. Now the part's
    unit comes from its name (or --ts-unit ms/us/ns), in JSON lines and CSV alike."""
    records = [{"template_id": 150, "symbol": "ESZ6", "trade_price": 6850.0 + i * 0.25, "trade_size": 5,
                "ssboe": 1796049000 + i // 2, "usecs": [250_000, 999_999, 1][i % 3]} for i in range(4)]
    expected = [(1796049000 + i // 2) * 10**9 + [250_000, 999_999, 1][i % 3] * 1000 for i in range(4)]
    path = tmp_path / "rithmic_last_trades.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in records))
    mapped = "price=trade_price,size=trade_size,stream=symbol"
    replay = FileReplay(path, columns=map_from_options(columns=f"ts=ssboe+usecs,{mapped}"))
    assert [t.ts for t in drain(replay)] == expected  # 2026-11-30T14:30:00.250000Z, ...
    assert any('column "ssboe" holds 1796049000, a count of s since the epoch (2026-11-30T14:30:00Z), and column '
               '"usecs" the us of each second, as its name says: read as one time' in note for note in replay.notes)
    csv = tmp_path / "rithmic.csv"
    pl.DataFrame(records).write_csv(csv)
    given = FileReplay(csv, columns=map_from_options(columns=f"ts=ssboe+usecs,{mapped}", ts_unit="us"))
    assert [t.ts for t in drain(given)] == expected
    # a part whose name says no unit, and no --ts-unit: refused, naming the option
    renamed = tmp_path / "parts.csv"
    pl.DataFrame(records).rename({"usecs": "frac"}).write_csv(renamed)
    with pytest.raises(ValueError, match=r'ts "ssboe\+frac": column "ssboe" holds 1796049000, a count of s since the '
                                         r'epoch \(2026-11-30T14:30:00Z\), not a date: give the unit "frac" counts '
                                         r"within each second, --ts-unit ms or us, to read the two as one time "
                                         r"\(a part in ns: --ts-unit ns, read so when the part's name says ns"):
        FileReplay(renamed, columns=map_from_options(columns=f"ts=ssboe+frac,{mapped}"))
    # a part of a second or more is no part: that row rejected, named
    late = tmp_path / "late.jsonl"
    late.write_text(json.dumps({**records[0], "usecs": 1_000_000}) + "\n" + json.dumps(records[1]) + "\n")
    replay = FileReplay(late, columns=map_from_options(columns=f"ts=ssboe+usecs,{mapped}"))
    assert [t.ts for t in drain(replay)] == expected[1:2] and dict(replay.rejected) == {"missing_field": 1}


def test_epoch_ms_joined_to_a_part_is_refused_with_a_pasteable_columns_option(tmp_path: Path) -> None:
    """A first column of epoch ms is a whole time already: the refusal's `--columns` is quoted by the one helper
    every note uses (connectors/shell_words.py), so a column name with a space stays one shell word."""
    path = tmp_path / "ms.csv"
    pl.DataFrame({"epoch ms": [1796049000123], "usecs": [1], "px": [1.0], "qty": [1]}).write_csv(path)
    with pytest.raises(ValueError, match=r"a whole time already: give --columns 'ts=epoch ms' --ts-unit ms"):
        FileReplay(path, columns=map_from_options(columns="ts=epoch ms+usecs,price=px,size=qty"))
    plain = tmp_path / "plain.csv"
    pl.DataFrame({"ssboe": [1796049000123], "usecs": [1], "px": [1.0], "qty": [1]}).write_csv(plain)
    with pytest.raises(ValueError, match=r"a whole time already: give --columns ts=ssboe --ts-unit ms"):
        FileReplay(plain, columns=map_from_options(columns="ts=ssboe+usecs,price=px,size=qty"))


@pytest.mark.parametrize("date_name", ["Trade Date", "Date"])
def test_a_thin_back_month_beside_two_products_takes_its_products_open(tmp_path: Path, date_name: str) -> None:
    """Review272 #2: ES and Brent pause at different hours, so no open shows over the whole file, and a back
    month's three trades (Sunday 18:30 with Monday's date, then Monday 09:00 and 10:00) show none of their own.
    Under `Trade Date` its evening trade stayed a day late ("1 stream(s) whose times do not run through midnight");
    under a bare `Date` its step back vetoed the wrap and the WHOLE file was read as calendar dates (282 rows a day
    late). The back month now takes its product's open (ESZ6's 18:00), the file reads as trade dates either way."""
    rows = two_venue_rows()
    back = pl.DataFrame([("20261026", clock, "ESH7", int(datetime(2026, 10, day, hour, minute,
                                                                  tzinfo=NEW_YORK).timestamp()) * 10**9)
                         for clock, day, hour, minute in (("18:30:00", 25, 18, 30), ("09:00:00", 26, 9, 0),
                                                          ("10:00:00", 26, 10, 0))],
                        schema=["Trade Date", "Time", "Symbol", "truth"], orient="row", schema_overrides={
                            "truth": pl.Int64}).with_columns(Price=pl.lit(101.0), Volume=pl.lit(1))
    both = pl.concat([rows, back]).sort("truth", maintain_order=True).rename({"Trade Date": date_name})
    replay = FileReplay(write(both.drop("truth"), tmp_path / "es_brent_back.csv"), columns={"tz": "America/New_York"})
    ticks = drain(replay)
    assert [t.ts for t in ticks if t.stream == "ESH7"] == back["truth"].to_list()
    assert [t.ts for t in ticks] == both["truth"].to_list()
    said = "\n".join(replay.notes)
    # fix281 #5: the open ESH7 took from ESZ6 is said borrowed, not listed as if ESH7 had shown it
    assert "(each stream's own, or one it borrowed, after its daily pause: 18:00 for ESZ6, ESH7 (after the pause " \
           "from 16:40; ESH7's borrowed from ESZ6); 20:00 for BRNF7 (after the pause from 17:40))" in said, said
    assert "whose times do not run through midnight" not in said
    # a thin stream that is no contract (no product to take an open from) tells nothing against the others' wrap:
    # they are read as trade dates, it as written
    other = both.with_columns(Symbol=pl.col("Symbol").replace("ESH7", "ES-BLOCK"))
    replay = FileReplay(write(other.drop("truth"), tmp_path / "es_brent_block.csv"), columns={"tz": "America/New_York"})
    ticks = drain(replay)
    assert [t.ts for t in ticks if t.stream != "ES-BLOCK"] == rows["truth"].to_list()
    assert any("1 stream(s) whose times do not run through midnight: as written" in n for n in replay.notes)


def test_a_map_key_says_a_column_is_a_trade_date_as_the_trade_date_header_does(tmp_path: Path) -> None:
    """fix281 #3: the only way to mark a trade-date column under a map was to rename its header `Trade Date` (the
    caution said so). `trade_date: COLUMN` reads the same ticks as the renamed header, with the same note, under a
    full map and a refinement of a detected layout; a column the file lacks is refused by name, and a `ts` that
    does not join that date to a time of day is refused naming the map that does."""
    rows = cme_rows(calendar=False, date_name="Session")
    renamed = FileReplay(write(rows.drop("truth").rename({"Session": "Trade Date"}), tmp_path / "cl_renamed.csv"),
                         columns={"tz": "America/Chicago"})
    expected = drain(renamed)
    assert [t.ts for t in expected] == rows["truth"].to_list()
    path = write(rows.drop("truth"), tmp_path / "cl_session.csv")
    full = {"ts": "Session+Time", "stream_col": "Contract", "price": "Price", "size": "Quantity",
            "tz": "America/Chicago"}
    before = FileReplay(path, columns=full)  # as before the key: the evening rows a day late, and a caution
    assert [t.ts for t in drain(before)] != rows["truth"].to_list()
    assert any("--columns ...,trade_date=Session" in caution for caution in before.cautions), before.cautions
    for columns in ({**full, "trade_date": "Session"},
                    {"ts": "Session+Time", "trade_date": "Session", "tz": "America/Chicago"}):
        replay = FileReplay(path, columns=columns)
        assert [(t.ts, t.stream, t.price, t.size) for t in drain(replay)] == \
            [(t.ts, t.stream, t.price, t.size) for t in expected], columns
        assert any('column "Session" is an exchange trade (session) date: its 63 row(s) at or after 17:00 in "Time"'
                   in note for note in replay.notes), replay.notes
        assert not replay.cautions, replay.cautions
    with pytest.raises(ValueError, match=r'the column map needs "TradeDay", which the file lacks '
                                         r"\(--columns trade_date=TradeDay\)"):
        FileReplay(path, columns={"trade_date": "TradeDay", "tz": "America/Chicago"})
    with pytest.raises(ValueError, match=r"trade_date names the date column that ts joins to a time of day "
                                         r'\(DATE\+TIME\), got ts="Time": --columns '
                                         r"ts=Session\+Time,trade_date=Session"):
        FileReplay(path, columns={**full, "ts": "Time", "trade_date": "Session"})


def test_a_trade_date_file_of_night_sessions_alone_finds_its_evening_open(tmp_path: Path) -> None:
    """fix327 #6: a file of JPX night sessions alone (17:00 to 06:00 JST, no day session) has no pause after noon,
    only its morning close to its evening open: no open was found, and its evening rows read a day late. Its open
    is now that pause's end; the rows past midnight stay on their trade date. UTC stamps by hand: JST is UTC+9."""
    lines = ["Trade Date,Time,Symbol,Price,Volume"]
    for day in ("2026-12-08", "2026-12-09"):  # Tuesday's and Wednesday's night sessions, from the evening before
        lines += [f"{day},{h:02d}:{m:02d}:00,NK225M,{39000 + h},1" for h in (*range(17, 24), *range(0, 6))
                  for m in (0, 20, 40)] + [f"{day},06:00:00,NK225M,39006,1"]
    path = tmp_path / "NK225M_night.csv"
    path.write_text("\n".join(lines) + "\n")
    replay = FileReplay(path, columns={"tz": "Asia/Tokyo"})
    stamps = [t.ts for t in drain(replay)]
    assert len(stamps) == 80 and stamps == sorted(stamps)
    assert stamps[0] == utc_ns("2026-12-07T08:00:00")  # Monday 17:00 JST: the evening before trade date Dec 8
    assert stamps[20] == utc_ns("2026-12-07T14:40:00")  # Monday 23:40 JST
    assert stamps[21] == utc_ns("2026-12-07T15:00:00")  # Tuesday 00:00 JST, on its trade date
    assert stamps[39] == utc_ns("2026-12-07T21:00:00")  # Tuesday's 06:00 close
    assert stamps[40] == utc_ns("2026-12-08T08:00:00")  # Tuesday 17:00 JST: trade date Dec 9's evening
    said = "\n".join(replay.notes)
    assert 'column "Trade Date" is an exchange trade (session) date: its 42 row(s) at or after 17:00 in "Time" ' \
           "(the evening open, after the daily pause from 06:00) are its evening session" in said, said
