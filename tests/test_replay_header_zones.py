"""A time column whose header names its zone, as FX exports write it (`Time (EET)`, `Time (UTC)`, `Time (ET)`): it is
detected as the time column, its naive times are read in that zone, summer time included, and a note says so; --tz
says otherwise; Asian zones' names (`JST`) and whole-hour offsets (`UTC+9`) are zones too, one not known (`IST`) makes
the time column whose zone --tz gives; a header whose parentheses hold no zone (`Timestamp (ms)`) is a name as before.
Real files in tmp_path, read by FileReplay (the reader the CLI uses)."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo
from pathlib import Path

import pytest

from engine.quoting import quoted

from connectors.replay import FileReplay
from conftest import drain


def utc_ns(text: str) -> int:
    return round(datetime.fromisoformat(text + "+00:00").timestamp() * 10**6) * 1000


def quotes(path: Path, header: str, times: list[str]) -> Path:
    path.write_text(f"{header},Ask,Bid,AskVolume,BidVolume\n" + "".join(
        f"{t},1.1001{i + 2},1.1001{i},1.50,2.00\n" for i, t in enumerate(times)))
    return path


def test_a_time_header_naming_eet_is_the_time_column_read_in_eet_with_its_summer_time(tmp_path: Path) -> None:
    # EET is +02:00, +03:00 from the last Sunday of March (2024-03-31) to the last Sunday of October
    path = quotes(tmp_path / "EURUSD_Ticks_2024.csv", "Time (EET)", [
        "02.01.2024 00:00:00.123", "31.03.2024 02:59:59.500", "31.03.2024 04:00:00.250", "01.07.2024 00:00:01"])
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [t.ts for t in ticks] == [utc_ns("2024-01-01T22:00:00.123"), utc_ns("2024-03-31T00:59:59.500"),
                                     utc_ns("2024-03-31T01:00:00.250"), utc_ns("2024-06-30T21:00:01")]
    assert (ticks[0].stream, ticks[0].bid, ticks[0].ask, ticks[0].bid_size) == ("EURUSD", 1.1001, 1.10012, 2.0)
    assert replay.rejected == {}
    assert ('EURUSD_Ticks_2024.csv: column "Time (EET)" names its zone: its times read in EET as IANA has it, with '
            "the EU's summer time (from the last Sunday of March to the last Sunday of October); --tz ZONE says "
            "otherwise") in replay.notes
    assert not any("carry no UTC offset" in note for note in replay.notes)
    # --tz wins, and the note says the header's zone was not read
    london = FileReplay(path, columns={"tz": "Europe/London"})
    assert drain(london)[0].ts == utc_ns("2024-01-02T00:00:00.123")
    assert any('column "Time (EET)" names zone EET; its times read in Europe/London as given instead' in note
               for note in london.notes)


def test_utc_and_a_clock_named_in_the_header_and_a_date_column_beside_it(tmp_path: Path) -> None:
    utc = quotes(tmp_path / "EURUSD_utc.csv", "Time (UTC)", ["2024.07.01 00:00:00", "2024.07.01 00:01:00"])
    replay = FileReplay(utc)
    assert [t.ts for t in drain(replay)] == [utc_ns("2024-07-01T00:00:00"), utc_ns("2024-07-01T00:01:00")]
    assert 'EURUSD_utc.csv: column "Time (UTC)" names its zone: its times read as UTC' in replay.notes
    new_york = tmp_path / "SPY_trades.csv"
    new_york.write_text("Date,Time (ET),Price,Volume\n2024-01-02,09:30:00,470.5,100\n2024-07-01,09:30:00,545.1,200\n")
    replay = FileReplay(new_york)
    ticks = drain(replay)
    assert [t.ts for t in ticks] == [utc_ns("2024-01-02T14:30:00"), utc_ns("2024-07-01T13:30:00")]
    assert [(t.price, t.size) for t in ticks] == [(470.5, 100), (545.1, 200)]
    assert any('column "Time (ET)" names its zone: its times read in America/New_York' in n for n in replay.notes)


@pytest.mark.parametrize("header, cell, right", [
    ("Time (EET)", "2024-01-02T00:00:00+00:00", "2024-01-02T00:00:00"),  # its own offset: no zone moves it
    ("Timestamp (ms)", "1704153600000", "2024-01-02T00:00:00"),  # a unit, not a zone
])
def test_times_with_their_own_offset_and_parentheses_that_are_no_zone(tmp_path: Path, header: str, cell: str,
                                                                      right: str) -> None:
    path = quotes(tmp_path / "EURUSD.csv", header, [cell])
    replay = FileReplay(path)
    assert [t.ts for t in drain(replay)] == [utc_ns(right)]
    assert not any("names its zone" in note for note in replay.notes)


def trades(path: Path, header: str) -> Path:
    path.write_text(f"Symbol,{header},Last,Volume\n7203,2024-06-03 09:00:01.5,3500,100\n"
                    f"7203,2024-06-03 09:00:02.5,3501,200\n")
    return path


@pytest.mark.parametrize("header, zone, said", [
    ("Time (JST)", "Asia/Tokyo", "Asia/Tokyo"), ("Time (KST)", "Asia/Tokyo", "Asia/Seoul"),  # both +09:00
    ("Time (HKT)", "Asia/Hong_Kong", "Asia/Hong_Kong"), ("Time (SGT)", "Asia/Hong_Kong", "Asia/Singapore"),
    ("Time (UTC+9)", "Asia/Tokyo", "Etc/GMT-9 (UTC+9 all year)"),
    ("Time (GMT+9)", "Asia/Tokyo", "Etc/GMT-9 (UTC+9 all year)"),
    ("Time (UTC+09:00)", "Asia/Tokyo", "Etc/GMT-9 (UTC+09:00 all year)"),
    ("Time (GMT-5)", "America/Bogota", "Etc/GMT+5 (UTC-5 all year)"),
    ("Time (Etc/GMT-9)", "Asia/Tokyo", "Etc/GMT-9"),  # an IANA key, read as before
])
def test_a_zone_of_one_name_and_a_whole_hour_offset_in_the_header_are_read(tmp_path: Path, header: str, zone: str,
                                                                          said: str) -> None:
    """Japan's, Hong Kong's, Korea's and Singapore's names (one zone each, no summer time) and fixed UTC offsets
    were "no time column among them", --tz or not."""
    replay = FileReplay(trades(tmp_path / "ticks.csv", header))
    first = datetime(2024, 6, 3, 9, 0, 1, 500000, tzinfo=ZoneInfo(zone))
    assert [t.ts for t in drain(replay)][:1] == [round(first.timestamp() * 10**6) * 1000]
    assert f"ticks.csv: column {quoted(header)} names its zone: its times read in {said}; --tz ZONE says otherwise" \
        in replay.notes


def test_a_zone_not_known_in_the_header_makes_the_time_column_whose_zone_is_asked(tmp_path: Path) -> None:
    """`Time (IST)` (India's, Israel's, Ireland's), `Time (UTC+05:30)`: the time column, read with --tz; without it,
    refused with the column, its zone and the options that read it."""
    ist = trades(tmp_path / "ist.csv", "Time (IST)")
    with pytest.raises(ValueError) as refused:
        FileReplay(ist)
    assert str(refused.value) == (
        f'{ist}: column "Time (IST)" is its time column, and its header names zone "IST", which is none known here: '
        f"give the zone its times are in, --tz Asia/Kolkata (+05:30), --tz Asia/Jerusalem (+02:00) or --tz "
        f"Europe/Dublin (+01:00), whichever zone's IST it is; a map given in full reads it too: --columns "
        f"'ts=Time (IST),stream=Symbol,price=Last,size=Volume' --tz ZONE")
    india = utc_ns("2024-06-03T03:30:01.500")
    replay = FileReplay(ist, columns={"tz": "Asia/Kolkata"})
    assert [t.ts for t in drain(replay)][:1] == [india]
    assert 'ist.csv: column "Time (IST)" names zone IST, none known here; its times read in Asia/Kolkata as given' \
        in replay.notes
    offset = trades(tmp_path / "offset.csv", "Time (UTC+05:30)")
    with pytest.raises(ValueError, match=r'zone "UTC\+05:30", which is none known here: give the zone its times are '
                                         r"in, --tz Asia/Kolkata \(a zone at UTC\+05:30\); a map given in full reads "
                                         r"it too: --columns 'ts=Time \(UTC\+05:30\),stream=Symbol,price=Last,"
                                         r"size=Volume' --tz Asia/Kolkata$"):
        FileReplay(offset)
    # the map it names reads it: a '+' inside the header's parentheses joins no second column
    full = FileReplay(offset, columns={"ts": "Time (UTC+05:30)", "stream_col": "Symbol", "price": "Last",
                                       "size": "Volume", "tz": "Asia/Kolkata"})
    assert [t.ts for t in drain(full)][:1] == [india]


@pytest.mark.parametrize(("header", "zone", "said"), [("time (JST)", "Asia/Tokyo", "Asia/Tokyo"),
                                                      ("Time[UTC+9]", "Asia/Tokyo", "Etc/GMT-9 (UTC+9 all year)")])
def test_a_full_map_naming_a_zoned_time_column_reads_its_zone_as_detection_does(tmp_path: Path, header: str,
                                                                                 zone: str, said: str) -> None:
    """fix160: a map given in full (--columns ts=time (JST),...) read the header's zone as UTC, without a word;
    `Time[UTC+9]`, its zone in brackets, was no time column at all, and a map split it at its '+'."""
    path = trades(tmp_path / "ticks.csv", header)
    first = datetime(2024, 6, 3, 9, 0, 1, 500000, tzinfo=ZoneInfo(zone))
    note = f"ticks.csv: column {quoted(header)} names its zone: its times read in {said}; --tz ZONE says otherwise"
    full = {"ts": header, "stream_col": "Symbol", "price": "Last", "size": "Volume"}
    for spec in (None, full):
        replay = FileReplay(path, columns=spec)
        assert [t.ts for t in drain(replay)][:1] == [round(first.timestamp() * 10**6) * 1000], spec
        assert note in replay.notes, replay.notes
    # --tz still wins, said
    replay = FileReplay(path, columns={**full, "tz": "Europe/London"})
    london = datetime(2024, 6, 3, 9, 0, 1, 500000, tzinfo=ZoneInfo("Europe/London"))
    assert [t.ts for t in drain(replay)][:1] == [round(london.timestamp() * 10**6) * 1000]
    written = header.split("(")[-1].split("[")[-1][:-1]  # JST, UTC+9
    assert f"ticks.csv: column {quoted(header)} names zone {written}; its times read in Europe/London as given " \
           f"instead" in replay.notes
    # a zone none known here, in a full map without --tz: refused as detection refuses it
    ist = trades(tmp_path / "ist.csv", "Time (IST)")
    with pytest.raises(ValueError, match=r'column "Time \(IST\)" is its time column, and its header names zone '
                                         r'"IST", which is none known here'):
        FileReplay(ist, columns={**full, "ts": "Time (IST)"})
