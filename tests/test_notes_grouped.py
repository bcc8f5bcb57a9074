"""Per-file notes said alike of many files are one line (review382 #5): a folder of daily files whose times carry
their own offset gave one `--tz ... is not applied to it` note per file (34 of them), a Tardis folder one `another
clock, not read` note per file, and data.binance.vision's daily files two notes each (a year of 5 symbols: 3,650
lines) where folder-named streams already got one line. Real files of a folder, read as the CLI reads them."""

from __future__ import annotations

import gzip
from pathlib import Path

from connectors.cautions import Caution
from connectors.layout_notes import alike_reads_once
from connectors.replay import FileReplay

DAYS = [f"2024-03-{d:02d}" for d in range(1, 13)]


def offset_days(top: Path) -> list[Path]:
    """Twelve days of two symbols whose ISO times carry their `Z`."""
    paths = []
    for symbol in ("AAPL", "MSFT"):
        for day in DAYS:
            path = top / symbol / f"{day}.csv.gz"
            path.parent.mkdir(parents=True, exist_ok=True)
            rows = [f"{day}T14:30:{i:02d}.000000Z,{100 + i * 0.01:.2f},10" for i in range(5)]
            path.write_bytes(gzip.compress(("timestamp,price,size\n" + "\n".join(rows) + "\n").encode()))
            paths.append(path)
    return paths


def test_the_tz_note_of_a_folder_of_offset_times_is_one_line(tmp_path: Path) -> None:
    offset_days(tmp_path)
    notes = FileReplay(tmp_path, columns={"tz": "America/New_York"}).notes
    tz = [n for n in notes if "is not applied to it" in n]
    assert len(tz) == 1 and tz[0].startswith("24 files: its times carry their own UTC offset, so --tz "
                                             "America/New_York (for naive times) is not applied to it ("), notes
    assert tz[0].endswith(", ... 21 more)"), tz
    assert len(notes) <= 6, notes  # the folder, the tz note, and a map and a stream note per symbol


def test_tardis_days_say_their_second_clock_once(tmp_path: Path) -> None:
    for n, day in enumerate(DAYS[:5]):
        start = 1709251200000000 + n * 86_400_000_000
        for symbol in ("BTCUSDT", "ETHUSDT"):
            rows = [f"binance,{symbol},{start + i * 1000},{start + i * 1000 + 500},{i},buy,{60000 + i},0.1"
                    for i in range(5)]
            (tmp_path / f"binance_trades_{day}_{symbol}.csv").write_text(
                "exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n" + "\n".join(rows) + "\n")
    notes = FileReplay(tmp_path).notes
    clock = [n for n in notes if 'also has time column "local_timestamp"' in n]
    assert len(clock) == 1 and clock[0].startswith("10 files: also has time column"), notes


def test_binance_daily_files_say_each_symbols_reading_once(tmp_path: Path) -> None:
    for symbol in ("BTCUSDT", "ETHUSDT"):
        for n, day in enumerate(DAYS[:6]):
            start = 1709251200000 + n * 86_400_000
            rows = [f"{i},{60000 + i}.5,0.01,600.0,{start + i},{'true' if i % 2 else 'false'},true" for i in range(5)]
            (tmp_path / f"{symbol}-trades-{day}.csv").write_text("\n".join(rows) + "\n")
    notes = FileReplay(tmp_path).notes
    streams = [n for n in notes if "from the file names" in n]
    assert [n.split(" (")[0] for n in streams] == ["6 files: stream BTCUSDT, from the file names",
                                                   "6 files: stream ETHUSDT, from the file names"], notes
    assert len([n for n in notes if "no header row" in n]) == 2, notes
    assert len(notes) == 5, notes  # the folder's note besides


def test_a_caution_and_a_note_of_one_file_stay_apart() -> None:
    notes = ["a.csv: side read as the maker's", Caution("a.csv: two venues in one stream"),
             Caution("b.csv: two venues in one stream"), "b.csv: side read as the maker's", "c.csv: another note"]
    assert alike_reads_once(notes) == ["2 files: side read as the maker's (a.csv, b.csv)", notes[1], notes[2],
                                       "c.csv: another note"]
