"""Numbers whose separators read two ways (`3,450`: 3450 or 3.45; `1.200`: 1200 or 1.2): a file's other cells tell
which, else its delimiter does, and a note says how they were read and how to state the other reading. Every
fixture is written here, from code, into tmp_path."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain

JPX_HEADER = "Date\tTime\tCode\tPrice\tVolume\n"


def jpx_rows(count: int = 40) -> str:
    """Toyota (7203) around 3,450 yen and 9434 crossing 1,000 yen, sizes grouped (`3,000`) where they are big."""
    rows = []
    for i in range(count):
        clock = f"09:00:{i:02d}.000"
        rows.append(f"2026/03/10\t{clock}\t7203\t{3450 + i % 3:,}\t500\n")
        rows.append(f"2026/03/10\t{clock}\t9434\t{990 + i:,}\t{3000:,}\n")
    return "".join(rows)


def test_grouping_commas_in_a_tab_file_are_thousands_not_decimals(tmp_path: Path) -> None:
    path = tmp_path / "jpx.txt"
    path.write_text(JPX_HEADER + jpx_rows())
    replay = FileReplay(path, columns=map_from_options(columns="stream=Code", tz="Asia/Tokyo", detect=True))
    ticks = drain(replay)
    assert dict(replay.rejected) == {}
    toyota = [t.price for t in ticks if t.stream == "7203"]
    crossing = [t.price for t in ticks if t.stream == "9434"]
    assert toyota[:3] == [3450.0, 3451.0, 3452.0]
    assert crossing[8:12] == [998.0, 999.0, 1000.0, 1001.0]  # never 999, 1.0, 1.001
    assert {t.size for t in ticks if t.stream == "9434"} == {3000.0}
    note = next(n for n in replay.notes if "commas grouping thousands" in n)
    assert '"3,450" is 3450, not 3.45' in note and "decimal=comma" in note


def test_quoted_grouped_cells_read_alike(tmp_path: Path) -> None:
    path = tmp_path / "quoted.txt"
    path.write_text(JPX_HEADER + '2026/03/10\t09:00:00.000\t7203\t"3,450"\t500\n'
                                 '2026/03/10\t09:00:01.000\t9434\t988\t"3,000"\n')
    ticks = drain(FileReplay(path, columns={"stream_col": "Code"}))
    assert [(t.price, t.size) for t in ticks] == [(3450.0, 500.0), (988.0, 3000.0)]


def test_dots_grouping_whole_numbers_in_a_semicolon_file(tmp_path: Path) -> None:
    """`988`-style whole sizes beside `3.450`s tell nothing of the prices; the time's `,100` tells a decimal comma."""
    path = tmp_path / "de.csv"
    path.write_text("Date;Time;Code;Price;Volume\n10.03.2026;09:00:00,100;SAP;3.450;100\n"
                    "10.03.2026;09:00:01,100;SAP;1.200;200\n")
    replay = FileReplay(path, columns={"stream_col": "Code"})
    assert [t.price for t in drain(replay)] == [3450.0, 1200.0]
    note = next(n for n in replay.notes if "numbers read with" in n)
    assert 'as the time "09:00:00,100" shows' in note and '"3.450" is 3450, not 3.45' in note
    assert "decimal=point" in note
    # the key the note names reads the other way
    said = FileReplay(path, columns={"stream_col": "Code", "decimal": "point"})
    assert [t.price for t in drain(said)] == [3.45, 1.2]
    assert not any("numbers read with" in n for n in said.notes)


@pytest.mark.parametrize("separator", [";", "\t"])
def test_a_file_that_cannot_tell_is_refused_naming_the_cell_and_the_key(tmp_path: Path, separator: str) -> None:
    """Every price one group of three digits, whole sizes under a thousand, times without a fraction: 3.45 or
    3450 is a guess either way, 1000 times off if wrong, so the run stops before reading and names the key."""
    path = tmp_path / "ambiguous.txt"
    path.write_text(separator.join(["Date", "Time", "Code", "Price", "Volume"]) + "\n" + "".join(
        separator.join(["2026/03/10", f"09:00:0{i}", "7203", price, "500"]) + "\n"
        for i, price in enumerate(["3,450", "3,455"] if separator == "\t" else ["3.450", "3.455"])))
    with pytest.raises(ValueError) as refused:
        FileReplay(path, columns={"stream_col": "Code"})
    cell, comma, point = ("3,450", [3.45, 3.455], [3450.0, 3455.0]) if separator == "\t" else \
        ("3.450", [3450.0, 3455.0], [3.45, 3.455])
    said = str(refused.value)
    assert f'column "Price"\'s "{cell}" reads two ways' in said and "no cell of the file's prices, sizes or times" \
        in said and "--columns ...,decimal=point" in said and "--columns ...,decimal=comma" in said
    for decimal, prices in (("comma", comma), ("point", point)):
        inline = map_from_options(columns=f"stream=Code,decimal={decimal}", detect=True)
        assert [t.price for t in drain(FileReplay(path, columns=inline))] == prices


def test_a_column_the_map_does_not_read_does_not_decide_the_prices(tmp_path: Path) -> None:
    """review373 #1: a German Eurex export's contract month `06.2025` (a point, were it a number) beside whole index
    points with a thousands dot (`22.962`) and a time with a decimal comma: the prices are 22962, not 22.962."""
    path = tmp_path / "fdax_whole.csv"
    rows = [("08:00:01,356", "06.2025", "22.962", "12"), ("08:00:03,171", "03.2025", "22.801", "8"),
            ("08:00:04,848", "06.2025", "22.963", "3")]
    path.write_text("Datum;Zeit;Produkt;Verfall;Kurs;Menge\n" + "".join(
        f"13.03.2025;{clock};FDAX;{month};{price};{size}\n" for clock, month, price, size in rows))
    replay = FileReplay(path, columns={"tz": "Europe/Berlin"})
    assert [(t.price, t.size) for t in drain(replay)] == [(22962.0, 12.0), (22801.0, 8.0), (22963.0, 3.0)]
    note = next(n for n in replay.notes if "numbers read with" in n)
    assert "06.2025" not in note and 'as the time "08:00:01,356" shows' in note and '"22.962" is 22962' in note
    # the export's usual `22.962,0` reads as well, the month column beside it notwithstanding
    path.write_text(path.read_text().replace(";12\n", ",0;12\n").replace(";8\n", ",5;8\n").replace(";3\n", ",0;3\n"))
    assert [t.price for t in drain(FileReplay(path, columns={"tz": "Europe/Berlin"}))] == [22962.0, 22801.5, 22963.0]


def test_a_semicolon_file_with_decimal_points_is_told_by_its_times(tmp_path: Path) -> None:
    """review373 #7: Euronext's `10.450` (3 decimals) in a `;` file whose times write `09:00:00.331`: 10.45."""
    path = tmp_path / "euronext_semicolon_point.csv"
    path.write_text("Date;Time;Symbol;ISIN;Price;Volume\n"
                    "28/03/2025;09:00:00.331;ORA;FR0000133308;10.450;150\n"
                    "28/03/2025;09:00:01.909;ORA;FR0000133308;10.445;3000\n")
    replay = FileReplay(path, columns={"tz": "Europe/Paris"})
    assert [(t.price, t.size) for t in drain(replay)] == [(10.45, 150.0), (10.445, 3000.0)]
    note = next(n for n in replay.notes if "numbers read with" in n)
    assert 'a decimal point' in note and '"10.450" is 10.45, not 10450' in note and "decimal=comma" in note


def test_each_number_column_is_read_by_its_own_cells(tmp_path: Path) -> None:
    """A price column of `10.45`s (a point) beside sizes of `1.500` and `250` (dots grouping): each by its own."""
    path = tmp_path / "mixed_columns.csv"
    path.write_text("time;symbol;price;size\n2026-03-10 09:00:00;ORA;10.45;1.500\n"
                    "2026-03-10 09:00:01;ORA;10.455;250\n")
    replay = FileReplay(path)
    assert [(t.price, t.size) for t in drain(replay)] == [(10.45, 1500.0), (10.455, 250.0)]
    notes = [n for n in replay.notes if "numbers read with" in n]
    assert any('column "size": numbers read with a decimal comma' in n for n in notes)
    assert any('column "price": numbers read with a decimal point' in n and '"10.455" is 10.455' in n for n in notes)


def test_a_whole_thousand_beside_one_group_tells_the_mark_is_no_group(tmp_path: Path) -> None:
    """`3000` written without grouping beside `1.200`: the dot is no thousands mark, so `1.200` is 1.2."""
    path = tmp_path / "ungrouped.csv"
    path.write_text("time;symbol;price;size\n2026-03-10 09:00:00;X;1.200;5\n2026-03-10 09:00:01;X;3000;5\n")
    assert [t.price for t in drain(FileReplay(path))] == [1.2, 3000.0]


def test_decimal_commas_are_said_in_a_note(tmp_path: Path) -> None:
    path = tmp_path / "xetra.csv"
    path.write_text("Time;Symbol;Price;Size\n02.01.2024 09:00:00,100;SAP;171,32;1.000\n"
                    "02.01.2024 09:00:01,100;SAP;171,325;10\n")
    replay = FileReplay(path)
    assert [(t.price, t.size) for t in drain(replay)] == [(171.32, 1000.0), (171.325, 10.0)]
    note = next(n for n in replay.notes if "numbers read with" in n)
    assert 'a decimal comma, dots grouping thousands (as "171,32" shows)' in note and "decimal=point" in note


def test_a_decimal_key_that_is_no_separator_word_is_refused() -> None:
    with pytest.raises(ValueError, match=r"decimal is a CSV's decimal separator, comma or point .*got \",\""):
        map_from_options(columns={"ts": "t", "price": "p", "size": "s", "decimal": ","})


@pytest.mark.parametrize("separator, rows", [
    (";", ["1 234,50", "1\u00a0234,75", "1\u202f235,00"]),  # French: spaces (Excel's no-break ones), decimal comma
    (",", ["\"1'234.50\"", "1'234.75", "1\u2019235.00"]),  # Swiss: apostrophes, decimal point
])
def test_thousands_grouped_by_spaces_or_apostrophes_read_as_numbers(tmp_path: Path, separator: str,
                                                                    rows: list[str]) -> None:
    path = tmp_path / "grouped.csv"
    path.write_text(f"time{separator}price{separator}size\n" + "".join(
        f"2026-03-01 17:00:0{i}{separator}{price}{separator}{i + 1}\n" for i, price in enumerate(rows))
        + f"2026-03-01 17:00:09{separator}1 2 3{separator}1\n")
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [1234.5, 1234.75, 1235.0]
    # a cell that is still no number is rejected with its text quoted
    assert dict(replay.rejected) == {"missing_field": 1}
    assert replay.rejected.examples["missing_field"].endswith('(column "price": "1 2 3" is not a number)')


def test_quoted_decimal_commas_in_a_comma_delimited_file_are_read(tmp_path: Path) -> None:
    """A cell of a comma-delimited file holds a comma only quoted: `"61837,63"` is a decimal comma, not a group."""
    path = tmp_path / "comma_decimal.csv"
    path.write_text('timestamp,symbol,price,size\n2024-08-08 23:54:15.342Z,BTCUSDT,"61837,63","0,02000"\n'
                    '2024-08-08 23:54:15.617Z,BTCUSDT,"61837,5","1,00000"\n')
    replay = FileReplay(path)
    assert [(t.price, t.size) for t in drain(replay)] == [(61837.63, 0.02), (61837.5, 1.0)]
    note = next(n for n in replay.notes if "numbers read with" in n)
    assert 'decimal comma (as the quoted "61837,63" shows' in note and "decimal=point" in note


def test_quoted_one_group_cells_in_a_comma_delimited_file_are_told_by_the_name_or_refused(tmp_path: Path) -> None:
    """review440 #12: `"1,234"` quoted in a comma-delimited file (a German locale's save) reads two ways like `3,450`
    in a tab file: `Kurs` tells a decimal comma, with a note; under `Price` nothing tells, so the run stops."""
    rows = "".join(f'2024-10-25 09:00:0{i},TEST3,"1,2{34 + i}",600\n' for i in range(3))
    german, english = tmp_path / "kurs.csv", tmp_path / "price.csv"
    german.write_text("Zeitstempel,Symbol,Kurs,Menge\n" + rows)
    english.write_text("Time,Symbol,Price,Size\n" + rows)
    replay = FileReplay(german)
    assert [t.price for t in drain(replay)] == [1.234, 1.235, 1.236]
    note = next(n for n in replay.notes if "numbers read with" in n)
    assert 'as the column name "Kurs"' in note and '"1,234" is 1.234, not 1234' in note
    with pytest.raises(ValueError, match=r'column "Price"\'s "1,234" reads two ways'):
        FileReplay(english)


def test_a_decimal_comma_cell_that_did_not_read_names_the_decimal_key(tmp_path: Path) -> None:
    """A decimal point elsewhere keeps the comma a group mark; the reject of a `0,5` names the key that reads it."""
    path = tmp_path / "mixed.csv"
    path.write_text('timestamp,symbol,price,size\n2024-08-08 23:54:15.342Z,BTCUSDT,61837.5,1\n'
                    '2024-08-08 23:54:15.617Z,BTCUSDT,"61837,63",2\n')
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [61837.5]
    assert replay.rejected.examples["missing_field"].endswith(
        '"61837,63" is not a number; --columns ...,decimal=comma if the comma is its decimal mark)')


def test_spreadsheet_serial_dates_with_a_decimal_comma_are_read(tmp_path: Path) -> None:
    path = tmp_path / "eu_excel.csv"
    path.write_text("Dates;LAST_PRICE;VOLUME\n45512,9960109028;61.837,63;0,02000\n"
                    "45512,9960140856;61.837,64;0,04800\n")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.ts // 10**6, t.price, t.size) for t in ticks] == [(1723161255342, 61837.63, 0.02),
                                                                 (1723161255617, 61837.64, 0.048)]
    assert any("read as spreadsheet serial dates" in n for n in replay.notes)


def test_epoch_seconds_with_a_decimal_comma_are_read_as_the_prices_beside_them(tmp_path: Path) -> None:
    """`1733312345,123` in a semicolon file of `61.837,63` prices: the prices read, the times not ("not ISO 8601:
    give its format"). Epoch seconds are never grouped, so their one comma is the decimal, read to the ns exactly,
    detected or given (ts_unit=s)."""
    path = tmp_path / "eu_epoch.csv"
    path.write_text("Time;Price;Size\n1733312345,123;61.837,63;0,02000\n1733312345,5;61.837,64;0,04800\n"
                    "1733312346,000000001;61.837,65;0,5\n")
    expected = [(1733312345_123_000_000, 61837.63, 0.02), (1733312345_500_000_000, 61837.64, 0.048),
                (1733312346_000_000_001, 61837.65, 0.5)]
    for columns in (None, {"ts": "Time", "ts_unit": "s", "price": "Price", "size": "Size"}):
        replay = FileReplay(path, columns=columns)
        assert [(t.ts, t.price, t.size) for t in drain(replay)] == expected, replay.rejected
        assert not replay.rejected
    assert "read as ts=Time (s)" in FileReplay(path).notes[0]


def test_parquet_text_numbers_read_as_csv_cells_with_the_decimal_key(tmp_path: Path) -> None:
    """Numbers stored as text in Parquet: grouping commas read, and `decimal` says which mark is the decimal."""
    times = ["2024-08-08T19:54:15.342-04:00", "2024-08-08T19:54:15.617-04:00"]
    grouped = tmp_path / "grouped.parquet"
    pl.DataFrame({"timestamp": times, "symbol": ["BTCUSDT"] * 2, "price": ["61,837.63", " 61,837.5 "],
                  "size": ["0.02", "1,000"]}).write_parquet(grouped)
    assert [(t.price, t.size) for t in drain(FileReplay(grouped))] == [(61837.63, 0.02), (61837.5, 1000.0)]
    european = tmp_path / "european.parquet"
    pl.DataFrame({"timestamp": times, "symbol": ["BTCUSDT"] * 2, "price": ["61.837,63", "61.837,5"],
                  "size": ["0,02", "1"]}).write_parquet(european)
    unread = FileReplay(european)
    assert drain(unread) == [] and "decimal=comma if the comma is its decimal mark" in \
        unread.rejected.examples["missing_field"]
    said = FileReplay(european, columns=map_from_options(columns="decimal=comma", detect=True))
    assert [(t.price, t.size) for t in drain(said)] == [(61837.63, 0.02), (61837.5, 1.0)]
