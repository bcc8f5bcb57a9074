"""Times written with a zone's name or an offset after a name (US exports' `EST`/`EDT`, Dukascopy's `Local time`
`GMT+0100`): read at the offset they name, never read as UTC with the name dropped; a zone's clock (`ET`) and names
of no one offset are refused with the --tz and the format that read them; the format an error proposes is built
from the value it quotes. Real files in tmp_path, read by FileReplay (the reader the CLI uses)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest

from engine.quoting import quoted

from connectors.column_map import ColumnMap
from connectors.replay import FileReplay
from connectors.utc_offsets import tz_for_name, zone_writing
from conftest import drain

HOUR_NS = 3600 * 10**9


def utc_ns(text: str) -> int:
    return round(datetime.fromisoformat(text + "+00:00").timestamp() * 10**6) * 1000


def trades(path: Path, times: list[str]) -> Path:
    path.write_text("timestamp,symbol,price,size\n" + "".join(f"{t},XYZ,{175 + i},1\n" for i, t in enumerate(times)))
    return path


@pytest.mark.parametrize("name, hours", [("EST", -5), ("EDT", -4), ("CST", -6), ("CDT", -5), ("MST", -7),
                                         ("MDT", -6), ("PST", -8), ("PDT", -7)])
def test_a_us_zone_abbreviation_is_read_at_its_offset(tmp_path: Path, name: str, hours: int) -> None:
    replay = FileReplay(trades(tmp_path / "t.csv", [f"2026-03-06 09:30:00.250 {name}", f"2026-03-06 09:31:00 {name}"]))
    assert [t.ts for t in drain(replay)] == [utc_ns("2026-03-06T09:30:00.250") - hours * HOUR_NS,
                                             utc_ns("2026-03-06T09:31:00") - hours * HOUR_NS]
    assert replay.rejected == {} and not any("UTC offset" in note for note in replay.notes)


def test_est_and_edt_across_the_dst_change_and_a_tz_given_beside_them(tmp_path: Path) -> None:
    path = trades(tmp_path / "t.csv", ["2026-03-06 09:30:00.000 EST", "2026-03-09 09:30:00.000 EDT"])
    right = [utc_ns("2026-03-06T14:30:00"), utc_ns("2026-03-09T13:30:00")]
    assert [t.ts for t in drain(FileReplay(path))] == right
    # a --tz for every file (a wrong one even) leaves times that carry their offset as they are, saying so
    chicago = FileReplay(path, columns={"tz": "America/Chicago"})
    assert [t.ts for t in drain(chicago)] == right
    assert "carry their own UTC offset, so --tz America/Chicago (for naive times) is not applied" in chicago.notes[0]


def test_a_format_reading_the_name_with_percent_z_applies_its_offset(tmp_path: Path) -> None:
    path = trades(tmp_path / "t.csv", ["03/06/2026 09:30:00 EST", "03/09/2026 09:30:00 EDT"])
    replay = FileReplay(path, columns={"ts_format": "%m/%d/%Y %H:%M:%S %Z"})
    assert [t.ts for t in drain(replay)] == [utc_ns("2026-03-06T14:30:00"), utc_ns("2026-03-09T13:30:00")]
    assert not any("carry no UTC offset" in note for note in replay.notes)
    assert any('its times ("03/06/2026 09:30:00 EST") carry their UTC offset, which the format reads '
               "(%m/%d/%Y %H:%M:%S %Z): read at each row's own offset" in note for note in replay.notes)


@pytest.mark.parametrize("name, zone", [("PDT", "America/Los_Angeles"), ("MST", "America/Denver"),
                                        ("AKST", "America/Anchorage"), ("HST", "Pacific/Honolulu")])
def test_a_us_zone_names_tz_is_its_markets_city(name: str, zone: str) -> None:
    """The --tz a note or a refusal proposes for a US zone's name was the first zone in IANA's order that writes it:
    America/Ensenada for PST, America/Boise for MST, America/Adak for HST (session 54's left-alone item)."""
    assert tz_for_name(name) == f"--tz {zone}" and zone_writing([name]) == zone


def test_a_percent_z_name_of_no_known_offset_is_refused_with_the_format_and_tz_that_read_it(tmp_path: Path) -> None:
    path = trades(tmp_path / "t.csv", ["2026-07-06 09:30:00 BST", "2026-07-06 09:31:00 BST"])
    with pytest.raises(ValueError, match='reads "BST" .* with %Z, .* its times would be read as UTC') as refused:
        drain(FileReplay(path, columns={"ts_format": "%Y-%m-%d %H:%M:%S %Z"}))
    assert '("%Y-%m-%d %H:%M:%S%.f BST") and give its zone with --tz Europe/London' in str(refused.value)
    with pytest.raises(ValueError, match="not ISO 8601") as unread:
        drain(FileReplay(path))
    assert '--ts-format "%Y-%m-%d %H:%M:%S%.f BST" and its zone with --tz Europe/London' in str(unread.value)
    fixed = FileReplay(path, columns={"ts_format": "%Y-%m-%d %H:%M:%S%.f BST", "tz": "Europe/London"})
    assert drain(fixed)[0].ts == utc_ns("2026-07-06T08:30:00")
    # %Z with the zone that writes the name reads it at the offset that zone writes it for
    zoned = FileReplay(path, columns={"ts_format": "%Y-%m-%d %H:%M:%S %Z", "tz": "Europe/London"})
    assert drain(zoned)[0].ts == utc_ns("2026-07-06T08:30:00")


@pytest.mark.parametrize("name, right", [
    ("BST", "2024-07-01T08:00:00"),  # London's summer time, +01:00
    ("WIB", "2024-07-01T02:00:00"),  # Jakarta's, +07:00
])
def test_every_format_and_tz_a_zone_name_refusal_proposes_reads_the_file(tmp_path: Path, name: str,
                                                                         right: str) -> None:
    """The proposal was built from a US name found inside the word (`EST` of `CEST`, `AEST`): `C%Z` (refused, as
    %Z read no CEST), then `CCEST` (which reads nothing), and `--tz ZONE`. The whole word is now text, the zone
    is named, and following the refusal reads the times right, with `%Z` in the user's format too (CEST, AEST
    and the other ZONE_NAMES are now read at their offsets: test_replay_non_us_exports.py)."""
    path = trades(tmp_path / "t.csv", [f"2024-07-01 09:00:00.000 {name}", f"2024-07-01 09:00:01.000 {name}"])
    for columns in (None, {"ts_format": f"%Y-%m-%d %H:%M:%S%.f {name[:-3]}%Z"}):
        with pytest.raises(ValueError) as refused:
            drain(FileReplay(path, columns=columns))
        said = str(refused.value)
        fmt = re.search(r'in the format \("([^"]+)"\)|e\.g\. --ts-format "([^"]+)"', said)
        fmt = fmt[1] or fmt[2]
        assert fmt == f"%Y-%m-%d %H:%M:%S%.f {name}", said
        tz = re.search(r"--tz (\S+)", said)[1]
        replay = FileReplay(path, columns={"ts_format": fmt, "tz": tz})
        assert [t.ts for t in drain(replay)] == [utc_ns(right), utc_ns(right) + 10**9] and replay.rejected == {}


@pytest.mark.parametrize("name, zone", [("ET", "America/New_York"), ("CT", "America/Chicago")])
def test_a_zones_clock_name_is_read_in_that_zone_as_a_headers_is(tmp_path: Path, name: str, zone: str) -> None:
    """` ET` names New York's clock, EST or EDT by the date: no offset, so it was refused, naming the --tz and the
    format that read it, where a header's `Time (ET)` is read in that zone. Read so now, with a note naming what
    reads it; a `%Z` in a given format still refuses it (polars would drop the name and read UTC)."""
    path = trades(tmp_path / "t.csv", [f"2026-03-06 09:30:00.000 {name}", f"2026-03-09 09:30:00.000 {name}"])
    with pytest.raises(ValueError, match=f'"{name}" .*the clock of {zone}.* --tz {zone}'):
        drain(FileReplay(path, columns={"ts_format": "%Y-%m-%d %H:%M:%S%.f %Z"}))
    shift = 5 if name == "ET" else 6
    right = [utc_ns("2026-03-06T09:30:00") + shift * HOUR_NS, utc_ns("2026-03-09T09:30:00") + (shift - 1) * HOUR_NS]
    replay = FileReplay(path)
    assert [t.ts for t in drain(replay)] == right and replay.rejected == {}
    said = f"t.csv: its times are written with {name}, the clock of {zone}: read in that zone, summer time " \
           f'included (--ts-format "%Y-%m-%d %H:%M:%S%.f {name}" --tz {zone})'
    assert said in replay.notes and not any("read as UTC" in note for note in replay.notes), replay.notes
    given = FileReplay(path, columns={"ts_format": f"%Y-%m-%d %H:%M:%S%.f {name}", "tz": zone})
    assert [t.ts for t in drain(given)] == right


def test_tws_bars_with_two_spaces_before_the_time_and_the_zone_after_it_read_in_that_zone(tmp_path: Path) -> None:
    """Interactive Brokers' TWS writes `20240102  09:30:00 US/Eastern` (two spaces): read in its zone as the
    one-space form is, where no format was built for it and the file was refused (review430 #10)."""
    path = trades(tmp_path / "t.csv", ["20240102  09:30:00 US/Eastern", "20240311  09:30:00 US/Eastern"])
    replay = FileReplay(path)
    assert [t.ts for t in drain(replay)] == [utc_ns("2024-01-02T14:30:00"), utc_ns("2024-03-11T13:30:00")]
    assert any('--ts-format "%Y%m%d  %H:%M:%S%.f US/Eastern" --tz US/Eastern' in n for n in replay.notes)


@pytest.mark.parametrize("written", ["03/06/2026 03:30:00 PM ET", "2026-03-06 3:30:00 PM America/New_York"])
def test_a_headerless_files_times_with_their_zone_are_read_as_a_headers_are(tmp_path: Path, written: str) -> None:
    """session 36: `... PM ET` (or an IANA name) after the time was read only under a header; a header-less file of
    such times was refused as a layout that cannot be guessed. Its time column is found by the rule that reads them
    under a header, and read by it: the same instants, the same note; a date that reads two ways is refused alike."""
    second = written.replace("03/06", "03/16").replace("-03-06", "-03-16")  # New York on summer time from 03-08
    right = [utc_ns("2026-03-06T20:30:00"), utc_ns("2026-03-16T19:30:00")]
    rows = "".join(f"{t},{175 + i}.25,{100 + i}\n" for i, t in enumerate([written, second]))
    (tmp_path / "header").mkdir(), (tmp_path / "bare").mkdir()
    (tmp_path / "header" / "XYZ.csv").write_text("time,price,size\n" + rows)
    (tmp_path / "bare" / "XYZ.csv").write_text(rows)
    notes = []
    for folder in ("header", "bare"):
        replay = FileReplay(tmp_path / folder / "XYZ.csv")
        assert [(t.stream, t.ts, t.price, t.size) for t in drain(replay)] == [("XYZ", right[0], 175.25, 100.0),
                                                                              ("XYZ", right[1], 176.25, 101.0)]
        notes.append([n for n in replay.notes if "its times are written with" in n])
    assert notes[0] == notes[1] and len(notes[0]) == 1 and "--tz America/New_York" in notes[0][0], notes
    if written.startswith("03/06"):  # 03/06 reads as March 6 or June 3: refused, header or not, with both formats
        for folder, head in (("header", "time,price,size\n"), ("bare", "")):
            (tmp_path / folder / "XYZ.csv").write_text(head + rows.replace("03/06", "03/02").replace("03/16", "03/04"))
            with pytest.raises(ValueError, match=r'more than one way .* --ts-format "%m/%d/%Y %I:%M:%S%.f %p ET"'):
                drain(FileReplay(tmp_path / folder / "XYZ.csv"))


def dukascopy_local(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.write_text("Local time,Ask,Bid,AskVolume,BidVolume\n" + "".join(
        f"{day} {clock},1.14427,1.14425,3.50,1.00\n" for day, clock in rows))
    return path


def test_dukascopys_local_time_export_is_detected_and_read_at_each_rows_offset(tmp_path: Path) -> None:
    path = dukascopy_local(tmp_path / "EURUSD_Ticks_Local_31.03.2024.csv", [
        ("31.03.2024", "01:59:59.500 GMT+0100"), ("31.03.2024", "03:00:00.250 GMT+0200")])  # the clocks go forward
    right = [utc_ns("2024-03-31T00:59:59.500"), utc_ns("2024-03-31T01:00:00.250")]
    for columns in (None, "dukascopy"):
        replay = FileReplay(path, columns=columns)
        ticks = drain(replay)
        assert [t.ts for t in ticks] == right and replay.rejected == {}
        assert (ticks[0].stream, ticks[0].bid, ticks[0].ask, ticks[0].bid_size) == ("EURUSD", 1.14425, 1.14427, 1.0)
        assert "ts=Local time (datetime, %d.%m.%Y %H:%M:%S%.f GMT%z)" in " ".join(replay.notes)
        assert not any("carry no UTC offset" in note for note in replay.notes)


def test_a_given_offset_format_is_said_read_at_each_rows_offset_quoting_the_raw_cell(tmp_path: Path) -> None:
    path = dukascopy_local(tmp_path / "EURUSD_Ticks_Local_04.02.2019.csv", [("04.02.2019", "09:00:00.071 GMT+0100")])
    for extra in ({}, {"tz": "Europe/Zurich"}):
        replay = FileReplay(path, columns={"ts": "Local time", "ts_format": "%d.%m.%Y %H:%M:%S%.f GMT%z", **extra})
        assert [t.ts for t in drain(replay)] == [utc_ns("2019-02-04T08:00:00.071")]
        said = [note for note in replay.notes if "UTC offset" in note]
        assert not any("carry no UTC offset" in note or "GMT+01'" in note for note in said)
        assert any('its times ("04.02.2019 09:00:00.071 GMT+0100") carry their UTC offset, which the format reads '
                   "(%d.%m.%Y %H:%M:%S%.f GMT%z): read at each row's own offset" in note for note in said)


@pytest.mark.parametrize("value, right", [
    ("04.02.2019 09:00 EET", "2019-02-04T07:00:00"),  # day-first dots, no seconds, a zone's name (+02:00)
    ("20190204 090000071 UTC", "2019-02-04T09:00:00.071"),  # HistData's digits, a zone after them
])
def test_the_not_iso_error_proposes_a_format_built_from_the_value_it_quotes(tmp_path: Path, value: str,
                                                                           right: str) -> None:
    path = trades(tmp_path / "t.csv", [value])
    with pytest.raises(ValueError, match="which is not ISO 8601") as refused:
        drain(FileReplay(path))
    assert f"holds {quoted(value)}" in str(refused.value)
    proposed = re.search(r'--ts-format "([^"]+)"', str(refused.value))[1]
    assert [t.ts for t in drain(FileReplay(path, columns={"ts_format": proposed}))] == [utc_ns(right)]


def test_a_date_of_two_readings_is_refused_with_formats_that_read_its_12_hour_clock(tmp_path: Path) -> None:
    path = trades(tmp_path / "t.csv", ["03/06/2026 9:30:00 PM", "03/06/2026 9:31:00 PM"])
    with pytest.raises(ValueError, match="reads more than one way") as refused:
        drain(FileReplay(path))
    assert '("%m/%d/%Y %I:%M:%S%.f %p" or "%d/%m/%Y %I:%M:%S%.f %p")' in str(refused.value)
    ticks = drain(FileReplay(path, columns={"ts_format": "%m/%d/%Y %I:%M:%S%.f %p"}))
    assert ticks[0].ts == utc_ns("2026-03-06T21:30:00")


def test_a_header_less_files_iso_times_with_a_zone_name_read_as_a_headered_files(tmp_path: Path) -> None:
    rows = ["2024-03-08 09:30:00.123 EST,XYZ,175.1,100", "2024-03-08 09:30:01.5 EST,XYZ,175.2,200",
            "2024-03-11 09:30:02 EDT,XYZ,175.3,100"]  # the clocks went forward on the 10th
    headerless = tmp_path / "headerless.csv"
    headerless.write_text("".join(f"{row}\n" for row in rows))
    headered = tmp_path / "headered.csv"
    headered.write_text("timestamp,symbol,price,size\n" + "".join(f"{row}\n" for row in rows))
    replay = FileReplay(headerless)
    ticks = drain(replay)
    assert [t.ts for t in ticks] == [utc_ns("2024-03-08T14:30:00.123"), utc_ns("2024-03-08T14:30:01.500"),
                                     utc_ns("2024-03-11T13:30:02")]
    assert [t.ts for t in ticks] == [t.ts for t in drain(FileReplay(headered))]
    assert [(t.stream, t.price, t.size) for t in ticks] == [("XYZ", 175.1, 100), ("XYZ", 175.2, 200),
                                                            ("XYZ", 175.3, 100)]
    assert replay.rejected == {}
    assert any("no header row; read as a time and two numbers" in note for note in replay.notes)


def test_cst_is_read_as_us_central_said_once_and_a_tz_writing_cst_reads_it_as_that_zone(tmp_path: Path) -> None:
    # China Standard Time (+08:00) and Cuba's (-05:00) are written CST too: US Central's, as US exports mean it, with
    # a note naming the reading and the --tz of the others, once for the file however many rows carry it
    path = trades(tmp_path / "t.csv", ["2024-03-08 09:30:00.123 CST", "2024-03-08 09:31:00 CST",
                                       "2024-03-08 09:32:00 EST"])
    replay = FileReplay(path)  # (replayed in time order: EST's 09:32 first)
    assert [t.ts for t in drain(replay)] == [utc_ns("2024-03-08T14:32:00"), utc_ns("2024-03-08T15:30:00.123"),
                                             utc_ns("2024-03-08T15:31:00")]
    said = [note for note in replay.notes if "CST" in note]
    assert said == ["t.csv: its times are written with CST, read as US Central Standard Time (-06:00); China Standard "
                    "Time (+08:00) and Cuba's standard time (-05:00) are written CST too: if they are one of those, "
                    "give --tz Asia/Shanghai (or America/Havana)"]
    # --tz of a zone that writes CST reads it as that zone does; EST beside it keeps its own offset
    for columns in ({"tz": "Asia/Shanghai"}, {"ts": "timestamp", "price": "price", "size": "size",
                                              "stream_col": "symbol", "tz": "Asia/Shanghai"}):
        shanghai = FileReplay(path, columns=columns)
        assert [t.ts for t in drain(shanghai)] == [utc_ns("2024-03-08T01:30:00.123"), utc_ns("2024-03-08T01:31:00"),
                                                   utc_ns("2024-03-08T14:32:00")]
        assert "t.csv: its times' CST read as Asia/Shanghai (the tz given) writes it, +08:00" in shanghai.notes
        assert not any("US Central" in note or "not applied" in note for note in shanghai.notes)
    havana = FileReplay(path, columns={"tz": "America/Havana"})
    assert drain(havana)[0].ts == utc_ns("2024-03-08T14:30:00.123")
    # a --tz that writes no CST is for naive times, as beside EST: not applied, and CST stays US Central
    new_york = FileReplay(path, columns={"tz": "America/New_York"})
    assert drain(new_york)[1].ts == utc_ns("2024-03-08T15:30:00.123")
    assert any("so --tz America/New_York (for naive times) is not applied" in note for note in new_york.notes)
    assert any("read as US Central Standard Time (-06:00)" in note for note in new_york.notes)


def test_pst_and_cdt_name_other_zones_too_and_unshared_names_get_no_note(tmp_path: Path) -> None:
    path = trades(tmp_path / "t.csv", ["2024-01-08 09:30:00 PST", "2024-07-08 09:31:00 CDT"])  # (PST in winter)
    replay = FileReplay(path)
    assert [t.ts for t in drain(replay)] == [utc_ns("2024-01-08T17:30:00"), utc_ns("2024-07-08T14:31:00")]
    assert any("written with PST, read as US Pacific Standard Time (-08:00); Philippine Standard Time (+08:00) is "
               "written PST too: if they are that, give --tz Asia/Manila" in note for note in replay.notes)
    assert any("written with CDT, read as US Central Daylight Time (-05:00); Cuba's summer time (-04:00) is written "
               "CDT too: if they are that, give --tz America/Havana" in note for note in replay.notes)
    manila = FileReplay(path, columns={"tz": "Asia/Manila"})
    assert drain(manila)[0].ts == utc_ns("2024-01-08T01:30:00")
    plain = FileReplay(trades(tmp_path / "u.csv", ["2024-07-08 09:30:00 EDT", "2024-07-08 09:31:00 MST"]))
    drain(plain)
    assert not any("written with" in note for note in plain.notes)


@pytest.mark.parametrize("name, us_zone, other, other_hours, us_hours", [
    ("CST", "America/Chicago", "Asia/Shanghai", 8, -6), ("PST", "America/Los_Angeles", "Asia/Manila", 8, -8)])
def test_cst_or_pst_on_a_us_summer_date_is_refused_naming_the_likely_zone_and_both_tz(
        tmp_path: Path, name: str, us_zone: str, other: str, other_hours: int, us_hours: int) -> None:
    """A US clock writes CDT (PDT) from March to November: `09:00 CST` on a July date was read as US Central, a
    note beside it, where China's CST is 14 h from it. Refused unless --tz names a zone that writes the name; each
    --tz the refusal names reads the file as it says. A US file across the change (CST, then CDT) is read."""
    path = trades(tmp_path / "t.csv", [f"2024-07-01 09:00:00.000 {name}", f"2024-07-01 09:00:01.000 {name}"])
    for columns in (None, {"tz": "America/New_York"}):  # a --tz that writes no CST leaves it refused
        with pytest.raises(ValueError) as refused:
            drain(FileReplay(path, columns=columns))
        said = str(refused.value)
        assert f"t.csv: 2 of its times are written with {name} on dates when US " in said
        assert f"keeps summer time (from 2024-07-01), when a US clock writes {name[0]}DT: they are likely " in said
        assert f"(+0{other_hours}:00); give --tz {other} to read them so, or --tz {us_zone} to read them as US " in said
    for zone, hours in ((other, other_hours), (us_zone, us_hours)):
        assert f"--tz {zone}" in said
        replay = FileReplay(path, columns={"tz": zone})
        assert drain(replay)[0].ts == utc_ns("2024-07-01T09:00:00") - hours * HOUR_NS and replay.rejected == {}
    across = trades(tmp_path / "u.csv", [f"2024-03-08 09:30:00 {name}", f"2024-03-11 09:30:00 {name[0]}DT"])
    assert len(drain(FileReplay(across))) == 2


def test_est_on_a_us_summer_date_keeps_its_offset_with_a_note_whose_reading_works(tmp_path: Path) -> None:
    """EST names -05:00 all year (HistData-style feeds, Panama's clock write it so): on a July date it is read so,
    not refused, with a note once per file; the format and --tz the note names read it as New York's clock."""
    path = trades(tmp_path / "t.csv", ["2024-07-01 09:00:00.000 EST", "2024-07-01 09:00:01.000 EST"])
    replay = FileReplay(path)
    assert drain(replay)[0].ts == utc_ns("2024-07-01T14:00:00")
    said = [note for note in replay.notes if "New York keeps summer time" in note]
    assert said == ["t.csv: 2 of its times are written with EST on dates when New York keeps summer time (from "
                    "2024-07-01), when its clock writes EDT: read at EST's -05:00, as feeds that write EST all year "
                    "mean it; if they are New York's clock, give --ts-format '%Y-%m-%d %H:%M:%S%.f EST' --tz "
                    "America/New_York"]
    new_york = FileReplay(path, columns={"ts_format": "%Y-%m-%d %H:%M:%S%.f EST", "tz": "America/New_York"})
    assert drain(new_york)[0].ts == utc_ns("2024-07-01T13:00:00")
    assert not any("New York keeps summer time" in note for note in new_york.notes)
    winter = FileReplay(trades(tmp_path / "u.csv", ["2024-01-02 09:00:00 EST"]))
    drain(winter)
    assert not any("summer time" in note for note in winter.notes)


@pytest.mark.parametrize("meridiem", ["AM", "PM", "am"])
def test_a_12_hour_clocks_am_pm_is_no_zone_name_in_the_refusal(tmp_path: Path, meridiem: str) -> None:
    path = trades(tmp_path / "t.csv", [f"04/12/26 9:15:00 {meridiem}", f"04/12/26 9:15:01 {meridiem}"])
    with pytest.raises(ValueError, match="a date that reads more than one way") as refused:
        drain(FileReplay(path))
    assert "--tz" not in str(refused.value) and "read as text" not in str(refused.value)
    assert '"%m/%d/%y %I:%M:%S%.f %p"' in str(refused.value)


def test_a_12_hour_clock_followed_by_a_zone_name_reads_as_the_24_hour_clock_with_it(tmp_path: Path) -> None:
    """`9:30:00 PM EST` was refused with a proposed format, where `21:30:00 EST` read at EST's offset: AM/PM between
    the clock and the name hid the name. The same rules now read both (EST -05:00, EDT -04:00, an offset after a
    name), and a --tz beside them is for naive times: not applied, said, as beside the 24-hour clock's."""
    twelve = trades(tmp_path / "pm.csv", ["2024-03-08 9:30:00 PM EST", "2024-07-08 09:30:00.123 AM EDT",
                                          "2024-07-09 12:15:00 pm EDT"])
    twenty_four = trades(tmp_path / "h24.csv", ["2024-03-08 21:30:00 EST", "2024-07-08 09:30:00.123 EDT",
                                                "2024-07-09 12:15:00 EDT"])
    right = [utc_ns("2024-03-09T02:30:00"), utc_ns("2024-07-08T13:30:00.123"), utc_ns("2024-07-09T16:15:00")]
    for path in (twelve, twenty_four):
        replay = FileReplay(path)
        assert [t.ts for t in drain(replay)] == right and replay.rejected == {}, path
        chicago = FileReplay(path, columns={"tz": "America/Chicago"})
        assert [t.ts for t in drain(chicago)] == right
        assert f"{path.name}: its times carry their own UTC offset, so --tz America/Chicago (for naive times) is not " \
               f"applied to it" in chicago.notes, chicago.notes
    assert any("(%Y-%m-%d %I:%M:%S%.f %p %Z): read at each row's own offset" in note
               for note in FileReplay(twelve).notes)
    dukascopy = trades(tmp_path / "duka.csv", ["04.02.2019 9:00:00 PM GMT+0100"])
    assert [t.ts for t in drain(FileReplay(dukascopy))] == [utc_ns("2019-02-04T20:00:00")]


@pytest.mark.parametrize("written", ["ET", "America/New_York"])
def test_a_12_hour_clock_followed_by_its_zones_clock_or_key_is_read_in_that_zone(tmp_path: Path, written: str) -> None:
    """`09:30:00.123 AM ET` and `04:00:00 PM America/New_York` were refused with a proposed format: read now in the
    zone they name, as a header's `Time (ET)` is (summer time included: EDT after 10 March). A --tz for every file
    is for naive times: not applied, said; a map given in full naming another zone is refused."""
    path = trades(tmp_path / "t.csv", [f"2024-03-08 09:30:00.123 AM {written}", f"2024-03-11 04:00:00 PM {written}"])
    right = [utc_ns("2024-03-08T14:30:00.123"), utc_ns("2024-03-11T20:00:00")]
    replay = FileReplay(path)
    assert [t.ts for t in drain(replay)] == right and replay.rejected == {}
    assert any(f'(--ts-format "%Y-%m-%d %I:%M:%S%.f %p {written}" --tz America/New_York)' in note
               for note in replay.notes), replay.notes
    chicago = FileReplay(path, columns={"tz": "America/Chicago"})
    assert [t.ts for t in drain(chicago)] == right
    assert "t.csv: its times carry their own zone, so --tz America/Chicago (for naive times) is not applied to it" \
        in chicago.notes, chicago.notes
    whole = ColumnMap(ts="timestamp", ts_unit="datetime", stream_col="symbol", price="price", size="size",
                      tz="America/Chicago")
    with pytest.raises(ValueError, match='carries its zone .*tz="America/Chicago" is for naive times'):
        drain(FileReplay(path, columns=whole))
