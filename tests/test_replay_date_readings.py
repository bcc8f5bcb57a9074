"""Date text that reads more than one way, read the way the file's own rows show or refused with what they show:
US dates with dashes (`12-04-2026`: 4 December), settled as slash dates are; a day-first first date settled by later
rows with a column map given and with a decimal comma before the milliseconds (B3's `10:00:06,896`); the refusal's
example the reading the file's unambiguous rows support; and two-digit years (`04-Dec-26`, `04.12.26`) read, with
their century said. Every file is written here, from code, into tmp_path."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from engine.quoting import quoted

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain, ns

DASHED = "%m-%d-%Y %H:%M:%S%.f"


def timed_rows(path: Path, header: str, days: tuple[int, ...], row: str, per_day: int = 30, year: int = 2026) -> Path:
    """A file of `per_day` rows each of these days of December `year` from 10:00, 10 s apart: `row` formatted with
    the row's datetime as `t` and its number as `i`."""
    times = [datetime(year, 12, d, 10) + timedelta(seconds=10 * i) for d in days for i in range(per_day)]
    path.write_text(header + "\n" + "".join(row.format(t=t, i=i) + "\n" for i, t in enumerate(times)),
                    encoding="utf-8")
    return path


def test_a_dashed_us_date_is_settled_month_first_by_a_later_row(tmp_path: Path) -> None:
    """`12-04-2026` was read as 12 April with no word and the `12-14-2026` rows rejected: it is 4 December."""
    path = timed_rows(tmp_path / "us_dash.csv", "Timestamp,Symbol,Price,Size", (4, 7, 14),
                      "{t:%m-%d-%Y %H:%M:%S},XYZ,100.{i:02d},100")
    replay = FileReplay(path, columns={"tz": "America/New_York"})
    ticks = drain(replay)
    assert dict(replay.rejected) == {}
    assert ticks[0].ts == ns("2026-12-04T15:00:00+00:00") and ticks[-1].ts == ns("2026-12-14T15:04:50+00:00")
    assert f'us_dash.csv: its first date ("12-04-2026 10:00:00") reads two ways; its later rows read only as ' \
           f'"{DASHED}" (--ts-format says otherwise)' in replay.notes
    # a date column and a time column alike
    path = timed_rows(tmp_path / "us_dash_2.csv", "Date,Time,Symbol,Price,Size", (4, 14),
                      "{t:%m-%d-%Y},{t:%H:%M:%S},XYZ,100.{i:02d},100")
    assert drain(FileReplay(path))[0].ts == ns("2026-12-04T10:00:00+00:00")
    # and day first, settled the other way
    path = timed_rows(tmp_path / "eu_dash.csv", "Timestamp,Symbol,Price,Size", (4, 14),
                      "{t:%d-%m-%Y %H:%M:%S},XYZ,100.{i:02d},100")
    assert drain(FileReplay(path))[0].ts == ns("2026-12-04T10:00:00+00:00")


def test_dashed_dates_that_never_settle_are_refused_with_both_readings(tmp_path: Path) -> None:
    """A file whose days are all <= 12 was read wholly day-first with 0 rejected and no warning."""
    path = timed_rows(tmp_path / "us_dash.csv", "Timestamp,Symbol,Price,Size", (4, 7),
                      "{t:%m-%d-%Y %H:%M:%S},XYZ,100.{i:02d},100")
    with pytest.raises(ValueError, match="a date that reads more than one way") as refused:
        FileReplay(path)
    assert str(refused.value).endswith(
        f'give the one it is, --ts-format "%d-%m-%Y %H:%M:%S%.f" or --ts-format "{DASHED}": every date of its '
        f"first 60 rows reads both ways")
    assert drain(FileReplay(path, columns={"ts_format": DASHED}))[0].ts == ns("2026-12-04T10:00:00+00:00")


B3_MAP = "ts=Data+Hora,price=Preço,size=Quantidade,stream=Ativo"


@pytest.mark.parametrize("header, clock, columns", [
    ("Data;Hora;Ativo;Preço;Quantidade", "{t:%H:%M:%S},123", B3_MAP),  # B3: a map, a decimal comma
    ("Data;Hora;Ativo;Preço;Quantidade", "{t:%H:%M:%S}.123", B3_MAP),  # a map, a point
    ("Data;Hora;Ativo;Preço;Quantidade", "{t:%H:%M:%S}", B3_MAP),  # a map, no fraction
    ("Date;Time;Symbol;Price;Size", "{t:%H:%M:%S},123", None),  # detected, a decimal comma
])
def test_a_day_first_date_is_settled_by_later_rows_with_a_map_and_with_a_decimal_comma(
        tmp_path: Path, header: str, clock: str, columns: str | None) -> None:
    """`11/12/2026` followed by `14/12/2026` was refused (offering the month-first reading, which reads
    11 December as 12 November) when a map named the time column or the time had a comma before its fraction."""
    path = timed_rows(tmp_path / "b3.csv", header, (11, 14), "{t:%d/%m/%Y};" + clock + ";WINZ26;128.350,00;10")
    spec = map_from_options(columns=columns, tz="America/Sao_Paulo") if columns else {"tz": "America/Sao_Paulo"}
    replay = FileReplay(path, columns=spec)
    ticks = drain(replay)
    assert dict(replay.rejected) == {}
    fraction = 0.123 if "123" in clock else 0
    assert ticks[0].ts == ns("2026-12-11T13:00:00+00:00") + round(fraction * 1e9)
    assert ticks[-1].ts == ns("2026-12-14T13:04:50+00:00") + round(fraction * 1e9)
    assert any('its later rows read only as "%d/%m/%Y %H:%M:%S%.f"' in note for note in replay.notes)


def test_the_refusal_offers_the_reading_the_files_unambiguous_rows_support(tmp_path: Path) -> None:
    """A row no reading reads keeps the file unsettled; the refusal's example is then the day-first reading that its
    `14/12` rows support, not the month-first one listed first."""
    path = timed_rows(tmp_path / "b3.csv", "Data;Hora;Ativo;Preço;Quantidade", (11, 14),
                      "{t:%d/%m/%Y};{t:%H:%M:%S},123;WINZ26;128.350,00;10")
    path.write_text(path.read_text() + "14/12/2026;n/d;WINZ26;128.350,00;10\n")
    with pytest.raises(ValueError, match="reads more than one way") as refused:
        FileReplay(path, columns=map_from_options(columns=B3_MAP))
    said = str(refused.value)
    assert said.endswith('give the one it is, --ts-format "%d/%m/%Y %H:%M:%S%.f": of its first 61 rows, 30 read '
                         'only so ("14/12/2026 10:00:00,123" and more); 1 of them read no way')
    proposed = re.search(r'give the one it is, --ts-format "([^"]+)"', said)[1]
    replay = FileReplay(path, columns=map_from_options(columns=B3_MAP, ts_format=proposed))
    assert drain(replay)[0].ts == ns("2026-12-11T10:00:00.123+00:00")
    assert dict(replay.rejected) == {"missing_field": 1}
    # rows that read only month first and rows that read only day first: both, and why
    path = timed_rows(tmp_path / "mixed.csv", "Date;Time;Symbol;Price;Size", (11,),
                      "{t:%d/%m/%Y};{t:%H:%M:%S};WINZ26;128.350,00;10")
    path.write_text(path.read_text() + "14/12/2026;10:00:00;WINZ26;1;1\n12/15/2026;10:00:00;WINZ26;1;1\n")
    with pytest.raises(ValueError, match="reads more than one way") as refused:
        FileReplay(path)
    assert '--ts-format "%m/%d/%Y %H:%M:%S%.f" or --ts-format "%d/%m/%Y %H:%M:%S%.f": of its first 32 rows, some ' \
           'read only as "%m/%d/%Y %H:%M:%S%.f" ("12/15/2026 10:00:00") and others only as "%d/%m/%Y %H:%M:%S%.f" ' \
           '("14/12/2026 10:00:00"): dates written both ways' in str(refused.value)


@pytest.mark.parametrize("written, upper, read_as", [("{t:%d-%b-%y %H:%M:%S}", False, "%d-%b-%y %H:%M:%S%.f"),
                                                     ("{t:%d-%b-%y %H:%M:%S}", True, "%d-%b-%y %H:%M:%S%.f"),
                                                     ("{t:%d.%m.%y %H:%M:%S}", False, "%d.%m.%y %H:%M:%S%.f")])
def test_a_two_digit_year_is_read_with_its_century_said(tmp_path: Path, written: str, upper: bool,
                                                        read_as: str) -> None:
    """`04-Dec-26` (NSE's, LSEG's), `04-DEC-26`, `04.12.26` were refused with an example (`%Y%m%d ...`) that
    does not read them."""
    path = timed_rows(tmp_path / "nse.csv", "Datetime,Symbol,Price,Volume", (4,), written + ",RELIANCE,2950.{i:02d},5")
    if upper:  # NSE's bhavcopies: `04-DEC-26`
        path.write_text(path.read_text().replace("Dec", "DEC"))
    replay = FileReplay(path, columns={"tz": "Asia/Kolkata"})
    ticks = drain(replay)
    assert dict(replay.rejected) == {}
    assert ticks[0].ts == ns("2026-12-04T04:30:00+00:00")
    assert f"datetime, {read_as}, Asia/Kolkata" in replay.notes[0]
    assert any(note.startswith("nse.csv: its dates write the year in two digits (") and note.endswith(
        "): read as 2026, as polars reads %y: 00-69 as 2000-2069, 70-99 as 1970-1999") for note in replay.notes)


def test_a_two_digit_years_refusal_gives_a_format_that_reads_it(tmp_path: Path) -> None:
    """Given a format that does not read it, the refusal repeated that format as its example; given none, the
    12-hour clock is read by that format."""
    path = timed_rows(tmp_path / "nse.csv", "Datetime,Symbol,Price,Volume", (4,),
                      "{t:%d-%b-%y %I:%M:%S %p},RELIANCE,2950.{i:02d},5")
    with pytest.raises(ValueError, match="which is not ISO 8601") as refused:
        drain(FileReplay(path, columns={"ts_format": "%Y%m%d %H:%M:%S%.f"}))
    proposed = re.search(r'--ts-format "([^"]+)"', str(refused.value))[1]
    assert proposed == "%d-%b-%y %I:%M:%S%.f %p"
    for given in (proposed, None):
        replay = FileReplay(path, columns={"ts_format": given} if given else None)
        assert drain(replay)[0].ts == ns("2026-12-04T10:00:00+00:00")
    assert any("%d-%b-%y %I:%M:%S%.f %p" in note for note in replay.notes), replay.notes


def twelve_hour_rows(path: Path, times: list[datetime], fraction: str = "") -> Path:
    """A US equity export on a 12-hour clock, as review196 wrote it: `03/13/2024,11:50:00 AM,IBM,100.00,100`."""
    path.write_text("Date,Time,Symbol,Price,Volume\n" + "".join(
        f"{t:%m/%d/%Y},{t:%I:%M:%S}{fraction} {t:%p},IBM,{100 + 0.01 * (i % 7):.2f},100\n"
        for i, t in enumerate(times)), encoding="utf-8")
    return path


@pytest.mark.parametrize("fraction", ["", ".000"])
def test_a_12_hour_clock_whose_first_date_reads_one_way_is_read(tmp_path: Path, fraction: str) -> None:
    """`03/13/2024 11:50:00 AM` (13: no month) was refused, 'no row's time could be read', while the same rows
    after 50 dated 03/08 (two ways) were read: both read now, month first, noon and after it right."""
    times = [datetime(2024, 3, 13, 11, 50) + timedelta(seconds=10 * i) for i in range(600)]  # across noon
    one_way = twelve_hour_rows(tmp_path / "ampm_13.csv", times, fraction)
    two_way = twelve_hour_rows(tmp_path / "ampm_08first.csv", [t.replace(day=8) for t in times[:50]] + times[50:],
                               fraction)
    replay = FileReplay(one_way, columns={"tz": "America/New_York"})
    ticks = drain(replay)
    assert dict(replay.rejected) == {} and len(ticks) == 600
    assert ticks[0].ts == ns("2024-03-13T15:50:00+00:00") and ticks[60].ts == ns("2024-03-13T16:00:00+00:00")
    assert ticks[-1].ts == ns("2024-03-13T17:29:50+00:00")  # 01:29:50 PM
    assert any("Date+Time (datetime, %m/%d/%Y %I:%M:%S%.f %p, America/New_York)" in note for note in replay.notes)
    settled = drain(FileReplay(two_way, columns={"tz": "America/New_York"}))
    assert [t.ts for t in settled[50:]] == [t.ts for t in ticks[50:]]
    # an all-AM file too, and without a zone (UTC)
    morning = twelve_hour_rows(tmp_path / "am_only.csv", times[:60], fraction)
    assert [t.ts for t in drain(FileReplay(morning))][::59] == [ns("2024-03-13T11:50:00+00:00"),
                                                               ns("2024-03-13T11:59:50+00:00")]


DMY, MDY, YMD = ("%d-%m-%y %H:%M:%S%.f", "%m-%d-%y %H:%M:%S%.f", "%y-%m-%d %H:%M:%S%.f")


@pytest.mark.parametrize("written, year, days, read_as", [
    ("{t:%m-%d-%y %H:%M:%S}", 2026, (4, 14), MDY),  # `12-14-26`: no month 14 (day- and year-first out)
    ("{t:%d-%m-%y %H:%M:%S}", 1999, (4, 13), DMY),  # `04-12-99`: no day 99 (year-first out); `13-12-99`: no month 13
    ("{t:%y-%m-%d %H:%M:%S}", 1999, (4, 13), YMD)])  # `99-12-04`: a field > 31 is a year
def test_a_dashed_two_digit_year_is_read_the_way_the_files_rows_settle(tmp_path: Path, written: str, year: int,
                                                                        days: tuple[int, ...], read_as: str) -> None:
    """Review 174, finding 7: `04-12-26 09:15:00` was refused as not ISO 8601 with an example, `%Y%m%d ...`, that
    reads no dashed date. A dashed date with a two-digit year reads day-first, month-first and year-first; the
    file's rows settle it as they settle `12-04-2026` (only one reading reads them all), said in a note."""
    path = timed_rows(tmp_path / "dashed.csv", "Date,Price,Qty", days, written + ",2500.{i:02d},10", year=year)
    replay = FileReplay(path)
    ticks = drain(replay)
    assert dict(replay.rejected) == {}
    assert ticks[0].ts == ns(f"{year}-12-04T10:00:00+00:00")
    assert ticks[-1].ts == ns(f"{year}-12-{days[-1]}T10:04:50+00:00")
    assert f"datetime, {read_as})" in replay.notes[0], replay.notes
    assert any(note.startswith("dashed.csv: its dates write the year in two digits (") and
               note.endswith(f"read as {year}, as polars reads %y: 00-69 as 2000-2069, 70-99 as 1970-1999")
               for note in replay.notes), replay.notes


def test_a_dashed_two_digit_year_the_rows_do_not_settle_is_refused_with_the_readings_that_fit(tmp_path: Path) -> None:
    """`04-12-26` then `13-12-26` (the review's file): no month 13 rules month-first out, but 13 and 26 read as a
    day and as a year alike (26 December 2013): refused with the two readings left and what ruled the third out,
    never with `%Y%m%d`. Rows whose fields are all <= 12 but the year: all three readings."""
    path = timed_rows(tmp_path / "INFY.csv", "Date,Price,Qty", (4, 13), "{t:%d-%m-%y %H:%M:%S},2500.{i:02d},10")
    with pytest.raises(ValueError, match="a date that reads more than one way") as refused:
        FileReplay(path)
    assert str(refused.value).endswith(
        f'give the one it is, --ts-format "{DMY}" or --ts-format "{YMD}": every date of its first 60 rows reads both '
        f'ways ("13-12-26 10:00:00" does not read as "{MDY}")'), refused.value
    assert "%Y" not in str(refused.value)
    assert drain(FileReplay(path, columns={"ts_format": DMY}))[0].ts == ns("2026-12-04T10:00:00+00:00")
    path = timed_rows(tmp_path / "never.csv", "Date,Price,Qty", (4, 7), "{t:%d-%m-%y %H:%M:%S},2500.{i:02d},10")
    with pytest.raises(ValueError, match="a date that reads more than one way") as refused:
        FileReplay(path)
    assert str(refused.value).endswith(f'--ts-format "{DMY}" or --ts-format "{MDY}" or --ts-format "{YMD}": every '
                                       f"date of its first 60 rows reads all 3 ways"), refused.value


def test_a_ts_format_for_one_file_of_a_run_says_how_to_give_it_to_that_file_alone(tmp_path: Path, capsys) -> None:
    """review315 #11: `--ts-format` for a FactSet export (US dates) applied to an ISO 8601 file of the same run too,
    and the refusal called the ISO stamp "not ISO 8601". It now says what the format given expected, that the
    option reaches every file, and the replay list entry that gives it to one file; that list reads both."""
    from conftest import drain
    from connectors.replay import FileReplay
    from engine.service.cli import main

    (tmp_path / "fs.csv").write_text("timestamp,symbol,price,size\n01/02/2024 09:30:00.100,AAPL,185.1,10\n"
                                     "01/02/2024 09:30:01.200,AAPL,185.2,10\n")
    (tmp_path / "iso.csv").write_text("timestamp,symbol,price,size\n2024-01-02T14:30:00Z,MSFT,370.1,5\n"
                                      "2024-01-02T14:30:01Z,MSFT,370.2,5\n")
    (tmp_path / "q.yaml").write_text("queries:\n  - {name: d, streams: ['*'], question: direction_5, kind: choice, "
                                     "trigger: {ticks: 1}}\n")
    fmt = "%m/%d/%Y %H:%M:%S%.f"
    assert main(["backtest", str(tmp_path / "fs.csv"), str(tmp_path / "iso.csv"), "--ts-format", fmt, "--queries",
                 str(tmp_path / "q.yaml"), "--out", str(tmp_path / "a.parquet"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert (f'column "timestamp" holds "2024-01-02T14:30:00Z", ISO 8601, which the format given, {quoted(fmt)}, does '
            'not '
            f"read: a --ts-format applies to every file of the run") in err, err
    assert "not ISO 8601" not in err and f"replay: [{{path: FILE, columns: {{ts_format: '{fmt}'}}}}]" in err, err
    (tmp_path / "list.yaml").write_text(f"replay:\n  - path: fs.csv\n    columns: {{ts_format: '{fmt}'}}\n"
                                        f"  - path: iso.csv\n")
    assert [(t.stream, t.ts) for t in drain(FileReplay(tmp_path / "list.yaml"))] == [
        ("AAPL", 1704187800100000000), ("AAPL", 1704187801200000000), ("MSFT", 1704205800000000000),
        ("MSFT", 1704205801000000000)]
