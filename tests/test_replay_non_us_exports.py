"""Exports of exchanges outside the US, read as their vendors write them: times written with their zone's name
across a summer-time change (an ASX export's `AEST`, then `AEDT`), read at each name's offset; IST, which three
zones write, read with --tz only; names no offset is known for (London's `GMT` then `BST`) refused naming them all
and the format and --tz that read them; Indian vendors' last traded price and
quantity (`LTP`, `LTQ`, beside `TTQ`, the day's running total, which is no trade's size); a map naming every column
of a German export, whose note on its time names the zone given. Real files in tmp_path, read by FileReplay (the
reader the CLI uses)."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import pytest

from engine.quoting import quoted

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain


def utc_ns(text: str) -> int:
    return round(datetime.fromisoformat(text).timestamp() * 10**6) * 1000


def test_indian_vendors_ltp_and_ltq_are_the_price_and_size_and_ttq_is_left_unread(tmp_path: Path) -> None:
    path = tmp_path / "nse_ltp.csv"
    path.write_text("Symbol,Time (IST),LTP,LTQ,TTQ\n"
                    "NIFTY26DECFUT,2026-12-03 09:15:00.250,24510.05,75,75\n"
                    "NIFTY26DECFUT,2026-12-03 09:15:10.250,24510.10,150,225\n")
    replay = FileReplay(path, columns={"tz": "Asia/Kolkata"})
    ticks = drain(replay)
    assert [(t.ts, t.price, t.size) for t in ticks] == [(utc_ns("2026-12-03T03:45:00.250+00:00"), 24510.05, 75),
                                                        (utc_ns("2026-12-03T03:45:10.250+00:00"), 24510.10, 150)]
    assert replay.rejected == {}
    assert any("price=LTP" in note and "size=LTQ" in note for note in replay.notes)
    # the names written out in full
    spelled = tmp_path / "nse_spelled.csv"
    spelled.write_text("Symbol,Time,Last Traded Price,Last Traded Qty,TTQ\n"
                       "RELIANCE,2026-12-03T09:15:00+05:30,2950.05,5,5\n")
    assert [(t.price, t.size) for t in drain(FileReplay(spelled))] == [(2950.05, 5)]


def test_a_full_maps_note_on_its_time_names_the_zone_given(tmp_path: Path) -> None:
    # a Xetra export in German: its map names every column, and its times are read in --tz's zone, as the note says
    path = tmp_path / "xetra_de.csv"
    path.write_text("Datum;Zeit;Kurs;Volumen\n27.03.2026;09:00:04,502;42.002,50;500\n"
                    "30.03.2026;09:00:12,960;42.002,00;3.200\n")
    spec = map_from_options(columns="ts=Datum+Zeit,price=Kurs,size=Volumen", tz="Europe/Berlin")
    replay = FileReplay(path, columns=spec)
    assert [t.ts for t in drain(replay)] == [utc_ns("2026-03-27T08:00:04.502+00:00"),
                                             utc_ns("2026-03-30T07:00:12.960+00:00")]  # CET, then CEST
    assert ('xetra_de.csv: column "Datum+Zeit" read as datetime, %d.%m.%Y %H:%M:%S%.f, as its first value shows, in '
            "Europe/Berlin (the tz given) (--ts-unit or --ts-format to say otherwise)") in replay.notes


def trades(path: Path, times: list[str]) -> Path:
    path.write_text("Time,Symbol,Price,Volume\n" + "".join(f"{t},APZ6,{8100 + i}.0,3\n" for i, t in enumerate(times)))
    return path


def test_an_asx_export_written_aest_then_aedt_reads_each_at_its_offset(tmp_path: Path) -> None:
    # Sydney's clocks went forward on Sunday 4 October 2026: Friday's 10:00 AEST is 00:00Z, Monday's 10:00 AEDT
    # is 23:00Z on Sunday (the refusal's recipe was a literal `AEST` in --ts-format, which read no AEDT row)
    path = trades(tmp_path / "asx.csv", ["2026-10-02 10:00:00 AEST", "2026-10-02 15:59:50 AEST",
                                         "2026-10-05 10:00:00 AEDT", "2026-10-05 10:00:10.5 AEDT"])
    right = [utc_ns("2026-10-02T00:00:00+00:00"), utc_ns("2026-10-02T05:59:50+00:00"),
             utc_ns("2026-10-04T23:00:00+00:00"), utc_ns("2026-10-04T23:00:10.5+00:00")]
    replay = FileReplay(path)
    assert [t.ts for t in drain(replay)] == right and replay.rejected == {}
    # %Z in a format reads them so too, and with the zone that writes them
    for columns in ({"ts_format": "%Y-%m-%d %H:%M:%S%.f %Z"},
                    {"ts_format": "%Y-%m-%d %H:%M:%S%.f %Z", "tz": "Australia/Sydney"}):
        replay = FileReplay(path, columns=columns)
        assert [t.ts for t in drain(replay)] == right and replay.rejected == {}


@pytest.mark.parametrize("name, offset", [
    ("ACST", "+09:30"), ("ACDT", "+10:30"), ("AWST", "+08:00"), ("NZST", "+12:00"), ("NZDT", "+13:00"),
    ("JST", "+09:00"), ("KST", "+09:00"), ("HKT", "+08:00"), ("SGT", "+08:00"), ("CET", "+01:00"),
    ("CEST", "+02:00"), ("MEZ", "+01:00"), ("MESZ", "+02:00"), ("EET", "+02:00"), ("EEST", "+03:00"),
    ("WET", "+00:00"), ("WEST", "+01:00"), ("BRT", "-03:00"), ("MSK", "+03:00")])
def test_zone_names_of_one_offset_are_read_at_it(tmp_path: Path, name: str, offset: str) -> None:
    path = trades(tmp_path / "t.csv", [f"2026-10-02 10:00:00.250 {name}", f"2026-10-05 10:00:00 {name}"])
    replay = FileReplay(path)
    assert [t.ts for t in drain(replay)] == [utc_ns(f"2026-10-02T10:00:00.250{offset}"),
                                             utc_ns(f"2026-10-05T10:00:00{offset}")]
    assert replay.rejected == {}


def test_ist_names_three_zones_and_is_read_with_the_tz_of_one(tmp_path: Path) -> None:
    path = trades(tmp_path / "nse.csv", ["2026-12-03 09:15:00.050 IST", "2026-12-03 09:15:10 IST"])
    for columns in (None, {"ts_format": "%Y-%m-%d %H:%M:%S%.f %Z"}, {"tz": "Europe/London"}):
        with pytest.raises(ValueError) as refused:
            drain(FileReplay(path, columns=columns))
        assert ("a time written with IST, which three zones write for other offsets" in str(refused.value) and
                "--tz Asia/Kolkata (+05:30), --tz Asia/Jerusalem (+02:00) or --tz Europe/Dublin (+01:00)"
                in str(refused.value)), refused.value
    india = FileReplay(path, columns={"tz": "Asia/Kolkata"})
    assert [t.ts for t in drain(india)] == [utc_ns("2026-12-03T03:45:00.050+00:00"),
                                            utc_ns("2026-12-03T03:45:10+00:00")]
    dublin = FileReplay(trades(tmp_path / "ise.csv", ["2026-07-03 09:15:00 IST"]), columns={"tz": "Europe/Dublin"})
    assert [t.ts for t in drain(dublin)] == [utc_ns("2026-07-03T08:15:00+00:00")]


def test_names_of_no_known_offset_are_refused_naming_them_all_and_the_way_to_read_them(tmp_path: Path) -> None:
    # London's clocks went back on Sunday 25 October 2026: BST (+01:00), then GMT; GMT reads, BST would not
    path = trades(tmp_path / "lse.csv", ["2026-10-23 10:00:00 BST", "2026-10-26 10:00:00 GMT"])
    with pytest.raises(ValueError) as refused:
        drain(FileReplay(path))
    said = str(refused.value)
    assert "holds times written with BST, GMT" in said and "BST names no one UTC offset known here" in said, said
    fmt, tz = re.search(r'--ts-format "([^"]+)" --tz ([\w/]+)', said).groups()
    assert (fmt, tz) == ("%Y-%m-%d %H:%M:%S%.f %Z", "Europe/London")
    replay = FileReplay(path, columns={"ts_format": fmt, "tz": tz})
    assert [t.ts for t in drain(replay)] == [utc_ns("2026-10-23T09:00:00+00:00"), utc_ns("2026-10-26T10:00:00+00:00")]
    # no row reads: every name the first rows write is named
    odd = trades(tmp_path / "odd.csv", ["2026-10-23 10:00:00 BST", "2026-10-23 10:00:01 BDST"])
    with pytest.raises(ValueError, match="no row's time could be read") as refused:
        drain(FileReplay(odd))
    assert "its first rows' times are written with BST, BDST" in str(refused.value), refused.value


@pytest.mark.parametrize("written, zone, fixed", [("BRT", "America/Sao_Paulo", "Etc/GMT+3"),
                                                  ("MEZ", "Europe/Berlin", "Etc/GMT-1"),
                                                  ("MESZ", "Europe/Berlin", "Etc/GMT-2"),
                                                  ("AEST", "Australia/Sydney", "Etc/GMT-10"),
                                                  ("ACST", "Australia/Adelaide", None)])
def test_a_header_naming_a_zone_name_of_one_offset_is_refused_naming_its_zone(tmp_path: Path, written: str,
                                                                               zone: str, fixed: str | None) -> None:
    path = tmp_path / "t.csv"
    path.write_text(f"Time ({written}),Symbol,Price,Volume\n2026-12-14 10:00:00,X,100.01,5\n")
    with pytest.raises(ValueError) as refused:
        drain(FileReplay(path))
    said = str(refused.value)
    assert f"header names zone {quoted(written)}, which is {zone}'s" in said, said
    assert f"--tz {zone} (its clock)" in said, said
    assert (f" or --tz {fixed} (" in said) == (fixed is not None), said
    replay = FileReplay(path, columns={"tz": zone})
    drain(replay)
    assert any(f"names zone {written}, {zone}'s" in note and f"read in {zone} as given" in note
               for note in replay.notes), replay.notes


def test_zone_names_after_a_12_hour_clock_are_named_too(tmp_path: Path) -> None:
    path = trades(tmp_path / "lse_pm.csv", ["2026/10/23 3:00:00 PM BST", "2026/10/26 3:00:00 PM GMT"])
    with pytest.raises(ValueError, match="written with BST, GMT") as refused:
        drain(FileReplay(path))
    fmt, tz = re.search(r'--ts-format "([^"]+)" --tz ([\w/]+)', str(refused.value)).groups()
    replay = FileReplay(path, columns={"ts_format": fmt, "tz": tz})
    assert [t.ts for t in drain(replay)] == [utc_ns("2026-10-23T14:00:00+00:00"), utc_ns("2026-10-26T15:00:00+00:00")]
