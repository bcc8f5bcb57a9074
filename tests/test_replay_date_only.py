"""Date-only columns (an exchange's settlements, a Bloomberg daily export: `05/01/2020`, `1/16/2024`) are read by the
rules a date with a time of day is (connectors/date_readings.py): a date that reads as month/day and as day/month is
settled by rows only one reading reads, else refused naming both readings with formats that read the file; never
read day-first without a word, no row dropped for being read the wrong way. Real files in tmp_path, read by
FileReplay (the CLI's reader) and by `flashtick backtest`."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import drain
from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from engine.service.cli import main

# CL's settlements from 14 April 2020, the May contract's -37.63 on the 20th
CL_SETTLES = (22.76, 20.11, 19.87, 18.27, -37.63, 10.01, 13.78, 16.50, 12.34, 14.1, 15.2, 16.0, 17.1, 16.8, 18.0,
              19.1, 18.5, 19.9, 20.4, 21.0)
TY_DAYS = ("1/2/2024", "1/3/2024", "1/4/2024", "1/5/2024", "1/8/2024", "1/16/2024", "1/17/2024")  # Bloomberg's


def weekdays(first: date, count: int) -> list[date]:
    days, day = [], first
    while len(days) < count:
        if day.weekday() < 5:
            days.append(day)
        day += timedelta(days=1)
    return days


def midnight_ns(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=timezone.utc).timestamp()) * 10**9


def day_of(ts: int) -> date:
    return datetime.fromtimestamp(ts / 1e9, timezone.utc).date()


def refusal(path: Path) -> tuple[str, list[str]]:
    """The two-way refusal reading `path` gives, and the formats it proposes."""
    with pytest.raises(ValueError, match="a date that reads more than one way") as refused:
        FileReplay(path)
    said = str(refused.value)
    return said, re.findall(r'--ts-format "([^"]+)"', said.split("give the one it is, ", 1)[1])


def cl_settlements(path: Path, written: str = "%m/%d/%Y") -> tuple[Path, list[date]]:
    days = weekdays(date(2020, 4, 14), len(CL_SETTLES))
    path.write_text("Trade Date,Contract,Settle\n" + "".join(f"{d:{written}},CLK0,{p}\n"
                                                              for d, p in zip(days, CL_SETTLES)))
    return path, days


def test_cl_settlements_are_read_month_first_every_row_with_its_date(tmp_path: Path) -> None:
    """Review 188, finding 1: 13 of the 20 rows were rejected (`'04/14/2020' is not a time the map reads`) and the 7
    whose day is <= 12 were read day-first (05/01/2020 as 5 January), with no word of the order chosen; the
    -37.63 row was rejected for its date before its price."""
    path, days = cl_settlements(tmp_path / "CL_settlements.csv")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert dict(replay.rejected) == {"nonpositive_price": 1}  # the -37.63 day, for its price
    assert [(day_of(t.ts), t.price) for t in ticks] == [(d, p) for d, p in zip(days, CL_SETTLES) if p > 0]
    assert any("ts=Trade Date (datetime, %m/%d/%Y)" in note for note in replay.notes), replay.notes
    # with the documented shift, the negative day is read too, on its own date
    shifted = drain(FileReplay(path, columns={"price_offset": 46}))
    assert [day_of(t.ts) for t in shifted] == days and shifted[4].ts == midnight_ns(date(2020, 4, 20))


def test_a_day_first_settlement_file_is_settled_day_first_by_its_rows(tmp_path: Path) -> None:
    path, days = cl_settlements(tmp_path / "settles_eu.csv", "%d/%m/%Y")  # 14/04/2020: only day-first reads it
    replay = FileReplay(path, columns={"price_offset": 46})
    assert [day_of(t.ts) for t in drain(replay)] == days and dict(replay.rejected) == {}


def test_a_bloomberg_daily_export_without_zero_padding_is_settled_by_its_later_rows(tmp_path: Path) -> None:
    """`1/2/2024` was refused as reading both ways, with formats (`%m/%d/%Y %H:%M:%S%.f`) that read no row and a
    message that said every date read both ways and none read any way; `1/16/2024` reads only month-first."""
    path = tmp_path / "TYH4_Comdty.csv"
    path.write_text("Dates,LAST_PRICE\n" + "".join(f"{d},{110.5 + i / 32}\n" for i, d in enumerate(TY_DAYS)))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert dict(replay.rejected) == {}
    assert [day_of(t.ts) for t in ticks] == [datetime.strptime(d, "%m/%d/%Y").date() for d in TY_DAYS]
    assert 'TYH4_Comdty.csv: its first date ("1/2/2024") reads two ways; its later rows read only as "%m/%d/%Y" ' \
           "(--ts-format says otherwise)" in replay.notes


@pytest.mark.parametrize("days", [("01/05/2020", "04/05/2020", "05/05/2020"), ("1/5/2020", "4/5/2020", "12/5/2020")])
def test_dates_only_no_row_settles_are_refused_with_two_formats_that_each_read_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], days: tuple[str, ...]) -> None:
    """When every date reads both ways, the refusal names '%m/%d/%Y' and '%d/%m/%Y', and each, pasted into
    `flashtick backtest`, reads every row (the date-and-time formats it gave read none)."""
    path = tmp_path / "settles.csv"
    path.write_text("Date,Symbol,Close\n" + "".join(f"{d},CLK0,{20 + i}\n" for i, d in enumerate(days)))
    said, proposals = refusal(path)
    assert said.endswith('give the one it is, --ts-format "%m/%d/%Y" or --ts-format "%d/%m/%Y": every date of its '
                         "first 3 rows reads both ways"), said
    for proposed in proposals:
        replay = FileReplay(path, columns={"ts_format": proposed})
        read = [day_of(t.ts) for t in drain(replay)]
        assert dict(replay.rejected) == {} and read == [datetime.strptime(d, proposed).date() for d in days]
        out = tmp_path / f"bt{len(proposed)}{proposed[1]}.parquet"
        assert main(["backtest", str(path), "--ts-format", proposed, "--out", str(out), "--threads", "1"]) == 0
        assert "replayed 3 ticks (0 rejected)" in capsys.readouterr().out


def test_a_row_no_reading_reads_is_counted_and_the_formats_proposed_read_the_rest(tmp_path: Path) -> None:
    """The refusal said `every date of its first N rows reads both ways; K of them read no way`: both cannot be
    true. Rows that read both ways and a row that reads neither are now counted apart."""
    path = tmp_path / "settles.csv"
    path.write_text("Date,Close\n01/05/2020,20\n04/05/2020,21\nn/a,22\n")
    said, proposals = refusal(path)
    assert said.endswith('--ts-format "%m/%d/%Y" or --ts-format "%d/%m/%Y": of its first 3 rows, 2 read both ways '
                         'and 1 no way ("n/a")'), said
    assert proposals == ["%m/%d/%Y", "%d/%m/%Y"]
    for proposed in proposals:
        replay = FileReplay(path, columns={"ts_format": proposed})
        assert len(drain(replay)) == 2 and dict(replay.rejected) == {"missing_field": 1}


@pytest.mark.parametrize("clock", ["", " 13:00:00"])
def test_a_map_that_gives_the_unit_but_no_format_reads_month_first_dates_as_detection_does(
        tmp_path: Path, clock: str) -> None:
    """With `--ts-unit datetime` and no format, polars guessed the format itself: `04/14/2020` (and
    `04/14/2020 13:00:00`) was rejected and `05/01/2020` read as 5 January. The first date's one reading is the
    format, as a detected map's is."""
    path = tmp_path / "given.csv"
    days = (date(2020, 4, 14), date(2020, 5, 1), date(2020, 5, 4))
    path.write_text("Date,Close\n" + "".join(f"{d:%m/%d/%Y}{clock},{20 + i}\n" for i, d in enumerate(days)))
    replay = FileReplay(path, columns=map_from_options(columns="ts=Date,price=Close", ts_unit="datetime"))
    assert [day_of(t.ts) for t in drain(replay)] == list(days) and dict(replay.rejected) == {}
