"""Exports of exchanges outside the US, read as their vendors write them: Indian vendors' last traded price and
quantity (`LTP`, `LTQ`, beside `TTQ`, the day's running total, which is no trade's size); a map naming every column
of a German export, whose note on its time names the zone given. Real files in tmp_path, read by FileReplay (the
reader the CLI uses)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from connectors.column_map import map_from_options
from connectors.replay import FileReplay
from test_vendor_files import drain


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
    assert ("xetra_de.csv: column 'Datum+Zeit' read as datetime, %d.%m.%Y %H:%M:%S%.f, as its first value shows, in "
            "Europe/Berlin (the tz given) (--ts-unit or --ts-format to say otherwise)") in replay.notes
