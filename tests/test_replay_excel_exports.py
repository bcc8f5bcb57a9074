"""Files as Excel and European vendor tools write them (review259): `;` separators, decimal commas, dd.mm.yyyy
dates with a `HH:MM:SS,mmm` clock in a column of its own, a stray `;` that a once-touched cell leaves. A row with
a stray separator is rejected as extra_fields and the rest of the file read, whatever the file's times (its own
UTC offset beside --tz for the local-time files). Real files in tmp_path, read by FileReplay (the reader the CLI
uses)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from engine.quoting import quoted

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain, ns

HEADER = "Date;Time;Symbol;Price;Volume;Side"


def given(columns: str, **keys: str) -> dict:
    """The map the command line makes of --columns and its other options, refining each file's detected layout."""
    return map_from_options(columns=columns, detect=True, **keys)


def german_rows(n: int) -> list[str]:
    """`n` trades of a German Excel export, 250 ms apart from 09:00 CEST on 3 April 2024."""
    return [f"03.04.2024;09:00:{i // 4:02d},{i % 4 * 250:03d};BTCUSDT;61.836,{i:02d};0,00{i % 9 + 1};sell"
            for i in range(n)]


@pytest.mark.parametrize("stray", [",", ",x"])
def test_a_stray_separator_in_a_file_of_utc_times_read_with_tz_is_no_crash(tmp_path: Path, stray: str) -> None:
    # --tz is for the naive-time files of the run; this vendor file's times end in Z, so it is read without it,
    # and that second read once ended the run with polars' "Consider setting 'truncate_ragged_lines=True'". A
    # separator that ends the row leaves an empty cell, read as nothing; one before a cell rejects the row
    path = tmp_path / "eth_utc_stray.csv"
    rows = [f"2024-04-03T07:00:{i:02d}.000Z,ETHUSDT,{2700 + i}.50,0.0{i % 9 + 1},buy" for i in range(30)]
    rows[20] += stray
    path.write_text("timestamp,symbol,price,size,side\n" + "\n".join(rows) + "\n")
    replay = FileReplay(path, columns={"tz": "Europe/Berlin"})
    ticks = drain(replay)
    assert ticks[0].ts == ns("2024-04-03T07:00:00+00:00")
    if stray == ",":
        assert len(ticks) == 30 and dict(replay.rejected) == {}
    else:
        assert len(ticks) == 29 and dict(replay.rejected) == {"extra_fields": 1}
        assert "eth_utc_stray.csv line 22" in str(replay.rejected.examples["extra_fields"])
    assert any("carry their own UTC offset, so --tz Europe/Berlin (for naive times) is not applied" in note
               for note in replay.notes)


@pytest.mark.parametrize("stray", [";", ";x"])
@pytest.mark.parametrize("stray_row", [0, 1, 5])
def test_one_stray_separator_in_the_first_rows_of_a_decimal_comma_file_keeps_its_header(tmp_path: Path,
                                                                                        stray_row: int,
                                                                                        stray: str) -> None:
    # with one sample row longer, `;` counted as no separator of the table, the decimal comma still did, and the
    # header (no commas) was skipped as a one-line banner: "its first line is data, not a header", whole file refused
    rows = german_rows(30)
    rows[stray_row] += stray
    path = tmp_path / "de_stray.csv"
    path.write_text("\r\n".join([HEADER, *rows]) + "\r\n")
    replay = FileReplay(path, columns={"tz": "Europe/Berlin"})
    ticks = drain(replay)
    assert ticks[-1].ts == ns("2024-04-03T07:00:07.250+00:00") and not any("banner" in n for n in replay.notes)
    if stray == ";":  # an empty last cell: the row is read
        assert len(ticks) == 30 and dict(replay.rejected) == {}
        return
    assert len(ticks) == 29 and dict(replay.rejected) == {"extra_fields": 1}
    assert f"de_stray.csv line {stray_row + 2}" in str(replay.rejected.examples["extra_fields"])
    assert ticks[0].price == (61836.01 if stray_row == 0 else 61836.00)


def test_rows_that_end_with_the_separator_are_read_as_the_rows_without_it(tmp_path: Path) -> None:
    # a broker export ends every data line with `;`, its header not: the empty last cell is no data, yet every row
    # was rejected as extra_fields ("its cells cannot be told apart")
    clean, trailing = tmp_path / "de.csv", tmp_path / "de_alltrail.csv"
    clean.write_text("\r\n".join([HEADER, *german_rows(30)]) + "\r\n")
    trailing.write_text("\r\n".join([HEADER, *(row + ";" for row in german_rows(30))]) + "\r\n")
    expected = drain(FileReplay(clean, columns={"tz": "Europe/Berlin"}))
    replay = FileReplay(trailing, columns={"tz": "Europe/Berlin"})
    assert drain(replay) == expected and len(expected) == 30 and dict(replay.rejected) == {}
    assert ("de_alltrail.csv: 30 row(s) end with a separator past its 6 columns (an empty last cell, as Excel and "
            "broker exports write): read without it") in replay.notes


def test_a_hand_edited_sheet_keeps_its_rows_ending_with_a_separator_and_rejects_one_with_a_cell_past_them(
        tmp_path: Path) -> None:
    path = tmp_path / "us_trail.csv"
    path.write_text("timestamp,symbol,price,size,side\n"
                    "2024-04-03T07:00:00Z,BTCUSDT,61836.5,0.001,buy,\n"
                    "2024-04-03T07:00:01Z,BTCUSDT,61837.5,0.002,sell\n"
                    "2024-04-03T07:00:02Z,BTCUSDT,61838.5,0.003,buy,,\n"
                    "2024-04-03T07:00:03Z,BTCUSDT,61839.5,0.004,buy,oops\n"
                    "2024-04-03T07:00:04Z,BTCUSDT,61840.5,0.005,sell\n")
    replay = FileReplay(path)
    assert [(t.price, t.size, t.side) for t in drain(replay)] == [
        (61836.5, 0.001, "buy"), (61837.5, 0.002, "sell"), (61838.5, 0.003, "buy"), (61840.5, 0.005, "sell")]
    assert dict(replay.rejected) == {"extra_fields": 1}
    assert "us_trail.csv line 5: extra_fields" in str(replay.rejected.examples["extra_fields"])


def test_a_dotted_clock_with_a_decimal_comma_reads_with_the_format_written_and_the_one_proposed(
        tmp_path: Path) -> None:
    # Italian, Danish and Finnish locales write `09.00.00,250`: a decimal comma was read as a point only after a
    # colon, so neither the documented `%S,%3f` nor `%S%.f` read it, and the refusal proposed no format
    path = tmp_path / "it_dotclock.csv"
    path.write_text("timestamp;symbol;price;size\r\n" + "".join(
        f"03/04/2024 09.00.{i // 4:02d},{i % 4 * 250:03d};BTCUSDT;61.836,63;0,001\r\n" for i in range(8)))
    expected = [ns("2024-04-03T07:00:00+00:00") + i * 250_000_000 for i in range(8)]
    with pytest.raises(ValueError, match="a date that reads more than one way") as refused:
        FileReplay(path, columns={"tz": "Europe/Rome"})
    assert '--ts-format "%d/%m/%Y %H.%M.%S%.f"' in str(refused.value)
    for fmt in ("%d/%m/%Y %H.%M.%S,%3f", "%d/%m/%Y %H.%M.%S%.f"):
        replay = FileReplay(path, columns={"ts_format": fmt, "tz": "Europe/Rome"})
        assert [t.ts for t in drain(replay)] == expected and dict(replay.rejected) == {}, fmt
    # a two-digit year's date before a comma and a colon clock is no dotted clock: read as before
    joined = tmp_path / "comma_gap.csv"
    joined.write_text("timestamp;symbol;price;size\r\n03.04.24,09:00:00;BTCUSDT;61.836,63;0,001\r\n")
    assert [t.ts for t in drain(FileReplay(joined, columns={"ts_format": "%d.%m.%y,%H:%M:%S"}))] == [
        ns("2024-04-03T09:00:00+00:00")]


def test_a_date_and_a_time_column_under_names_of_any_language_are_read_as_one_time(tmp_path: Path) -> None:
    # `Datum;Zeit`: no time column was found ("Name its columns with a column map, e.g. --columns ts=time,..."),
    # and `Date;Heure` was read as the date alone, its refusal proposing a date-only --ts-format
    clean = tmp_path / "de.csv"
    clean.write_text("\r\n".join([HEADER, *german_rows(8)]) + "\r\n")
    expected = [t.ts for t in drain(FileReplay(clean, columns={"tz": "Europe/Berlin"}))]
    german = tmp_path / "de_headers.csv"
    german.write_text("\r\n".join(["Datum;Zeit;Symbol;Kurs;Menge;Richtung", *german_rows(8)]) + "\r\n")
    detected = FileReplay(german, columns={"tz": "Europe/Berlin"})  # fix274 #1: Kurs, Menge, Richtung are known names
    assert [t.ts for t in drain(detected)] == expected and dict(detected.rejected) == {}
    replay = FileReplay(german, columns=given("price=Kurs,size=Menge", tz="Europe/Berlin"))
    assert [t.ts for t in drain(replay)] == expected and dict(replay.rejected) == {}
    assert any("read as ts=Datum+Zeit (datetime, %d.%m.%Y %H:%M:%S%.f, Europe/Berlin)" in n for n in replay.notes)
    french = tmp_path / "fr.csv"
    french.write_text("\r\n".join(["Date;Heure;Symbole;Prix;Quantité;Sens", *(
        row.replace("03.04.2024", "03/04/2024") for row in german_rows(8))]) + "\r\n")
    with pytest.raises(ValueError, match=r'column "Date\+Heure" holds "03/04/2024 09:00:00,000", a date that reads '
                                         r"more than one way") as refused:
        FileReplay(french, columns=given("price=Prix,size=Quantité", tz="Europe/Paris"))
    assert '--ts-format "%d/%m/%Y %H:%M:%S%.f"' in str(refused.value)
    replay = FileReplay(french, columns=given("price=Prix,size=Quantité", tz="Europe/Paris",
                                                  ts_format="%d/%m/%Y %H:%M:%S%.f"))
    assert [t.ts for t in drain(replay)] == expected


def test_a_date_column_mapped_alone_names_the_time_of_day_beside_it(tmp_path: Path) -> None:
    # the map says ts=Date: the refusal of its two-way date, and the caution once a date-only format reads it
    # (every tick at midnight), name `Heure` and the map that reads both
    path = tmp_path / "fr.csv"
    path.write_text("\r\n".join(["Date;Heure;Symbole;Prix;Quantité;Sens", *(
        row.replace("03.04.2024", "03/04/2024") for row in german_rows(8))]) + "\r\n")
    joined = ('"Heure", the column after it, holds the times of day ("09:00:00,000"), which the date alone leaves '
              "out (every tick at its day's midnight): --columns ts=Date+Heure with ")
    with pytest.raises(ValueError, match="a date that reads more than one way") as refused:
        FileReplay(path, columns=given("ts=Date,price=Prix,size=Quantité", tz="Europe/Paris"))
    assert str(refused.value).endswith(f'; {joined}--ts-format "%m/%d/%Y %H:%M:%S%.f" or --ts-format '
                                       f'"%d/%m/%Y %H:%M:%S%.f" reads both')
    replay = FileReplay(path, columns=given("ts=Date,price=Prix,size=Quantité", tz="Europe/Paris",
                                                ts_format="%d/%m/%Y"))
    assert len(drain(replay)) == 8
    assert (f'fr.csv: column "Date" holds dates alone ("03/04/2024"); {joined}--ts-format "%d/%m/%Y %H:%M:%S%.f" '
            f"reads both") in replay.notes


@pytest.mark.parametrize("name, offset, fixed", [("MEZ", "+01:00", "Etc/GMT-1"), ("MESZ", "+02:00", "Etc/GMT-2")])
def test_tz_written_as_the_german_names_of_cet_and_cest_is_answered_as_a_header_naming_them_is(
        name: str, offset: str, fixed: str) -> None:
    # --tz MEZ got "did you mean 'MET'?" (an IANA legacy name) and --tz MESZ only IANA examples, while a header
    # `Time (MEZ)` got Berlin's clock and the fixed offset
    said = (f"unknown time zone tz={quoted(name)}; {name} is Europe/Berlin's {offset}, but its times may be that "
            f"zone's clock, summer time included: give --tz Europe/Berlin (its clock) or --tz {fixed} ({offset} all "
            "year)")
    with pytest.raises(ValueError) as refused:
        given("price=Kurs", tz=name)
    assert str(refused.value) == said
    with pytest.raises(ValueError, match=f"unknown time zone \"{name}\"; {name} is Europe/Berlin's"):
        given("price=Kurs", hours=f"09:00-17:30 {name}")


def test_prices_written_with_a_currency_sign_read_as_the_numbers_with_a_note(tmp_path: Path) -> None:
    # Excel's currency format writes `61.836,63 €`: every row was rejected, "'61.836,63 €' is not a number"; and
    # fix274 #4: an ISO code that every cell of the column writes (`61.836,63 EUR`) is read as the sign is, said so
    clean, signed, coded = tmp_path / "de.csv", tmp_path / "euro_sign.csv", tmp_path / "eur_code.csv"
    rows = german_rows(8)
    clean.write_text("\r\n".join([HEADER, *rows]) + "\r\n")
    signed.write_text("\r\n".join([HEADER, *(";".join(c + " €" if i == 3 else c for i, c in enumerate(r.split(";")))
                                             for r in rows)]) + "\r\n")
    coded.write_text(signed.read_text().replace(" €", " EUR"))
    for path, kind, unit in ((signed, "sign", "€"), (coded, "code", "EUR")):
        replay = FileReplay(path, columns={"tz": "Europe/Berlin"})
        assert drain(replay) == drain(FileReplay(clean, columns={"tz": "Europe/Berlin"}))
        assert dict(replay.rejected) == {}
        assert (f'{path.name}: numbers written with a currency {kind}, read without it: "Price" ("61.836,00 {unit}") '
                "(a unit is noted, not applied: values are read as written)") in replay.notes
    # two currencies in one column are no numbers of one unit: each row rejected; review440 #4: the reject counts
    # both codes, never advising their removal (which reads GBX's pence beside GBP's pounds as one series)
    mixed = tmp_path / "eur_usd.csv"
    mixed.write_text(coded.read_text().replace("01 EUR", "01 USD"))
    replay = FileReplay(mixed, columns={"tz": "Europe/Berlin"})
    assert drain(replay) == [] and dict(replay.rejected) == {"missing_field": 8}
    assert str(replay.rejected.examples["missing_field"]).endswith(
        '"61.836,00 EUR" is not a number; the column writes 2 units after its numbers ("EUR" in 7 cells, "USD" in 1 '
        "cell, of its first rows): its prices are in 2 units, so removing them would read those as one series, each "
        "step between them a move: write every cell in one unit before the replay)")
    # a sign on some cells only (`£0.7250` beside bare pence) is counted in the note
    some = tmp_path / "some_signed.csv"
    some.write_text(signed.read_text().replace("01 €", "01"))
    assert 'read without it: "Price" ("61.836,00 €", on 7 of its 8 cells, the others bare: two units?)' in \
        " ".join(FileReplay(some, columns={"tz": "Europe/Berlin"}).notes)


def test_a_currency_code_after_comma_grouped_numbers_is_read_and_a_magnitude_word_is_not(tmp_path: Path) -> None:
    path = tmp_path / "usd.csv"
    path.write_text("time,symbol,price,size\n" + "".join(
        f'2024-04-03T07:00:0{i}Z,SPX,"{5_200 + i:,}.50 USD",{i + 1}\n' for i in range(8)))
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [5200.5 + i for i in range(8)] and dict(replay.rejected) == {}
    assert any('usd.csv: numbers written with a currency code, read without it: "price" ("5,200.50 USD")' in n
               for n in replay.notes), replay.notes
    millions = tmp_path / "mio.csv"  # `1,5 MIO`: millions, never read as 1.5
    millions.write_text(path.read_text().replace(".50 USD", ".50 MIO"))
    replay = FileReplay(millions)
    assert drain(replay) == [] and dict(replay.rejected) == {"missing_field": 8}


def test_a_workbook_is_refused_with_the_save_as_csv_that_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "ticks.xlsx"
    path.write_bytes(b"PK\x05\x06" + b"\0" * 18)  # an empty zip, as a workbook starts
    with pytest.raises(ValueError, match=r'unsupported file type ".xlsx"; replay reads .*; save the sheet as CSV '
                                         r"first \(Excel: File > Save As > 'CSV UTF-8'"):
        FileReplay(path)


def test_the_note_on_decimal_commas_names_the_no_break_spaces_that_group_thousands(tmp_path: Path) -> None:
    # a French export's `61 837,63`: the note said "dots grouping thousands"
    path = tmp_path / "fr.csv"
    path.write_text("\r\n".join([HEADER, *(row.replace("61.836", "61\u00a0836") for row in german_rows(8))]) + "\r\n")
    replay = FileReplay(path, columns={"tz": "Europe/Paris"})
    assert [t.price for t in drain(replay)][:2] == [61836.0, 61836.01]
    assert any("numbers read with a decimal comma, no-break spaces grouping thousands" in n for n in replay.notes)


@pytest.mark.parametrize("stray", ["", "x"])
def test_a_headerless_file_given_its_names_reads_rows_ending_with_a_separator(tmp_path: Path, stray: str) -> None:
    # fix274 #2: `--csv-names` over a header-less broker export whose every line ends with `;` was refused, "the
    # file has 7 columns, the names given are 6", as the header file beside it was read: the empty last cell is no
    # data, a cell there (`x`) rejects its row alone
    names = "|".join(HEADER.split(";"))
    clean, trailing = tmp_path / "de.csv", tmp_path / "de_trail.csv"
    rows = german_rows(30)
    clean.write_text("\r\n".join(rows) + "\r\n")
    trailing.write_text("\r\n".join(row + ";" + (stray if i == 3 else "") for i, row in enumerate(rows)) + "\r\n")
    expected = drain(FileReplay(clean, columns=given(f"names={names}", tz="Europe/Berlin")))
    replay = FileReplay(trailing, columns=given(f"names={names}", tz="Europe/Berlin"))
    ticks = drain(replay)
    assert len(expected) == 30 and ticks == [t for i, t in enumerate(expected) if not (stray and i == 3)]
    assert dict(replay.rejected) == ({"extra_fields": 1} if stray else {})
    assert any(f"de_trail.csv: {30 - bool(stray)} row(s) end with a separator past its 6 columns" in note
               for note in replay.notes), replay.notes


def test_a_headerless_file_with_a_column_past_the_names_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "de_more.csv"
    path.write_text("\r\n".join(row + ";XETR" for row in german_rows(30)) + "\r\n")
    with pytest.raises(ValueError, match="the file has 7 columns, the names given are 6"):
        FileReplay(path, columns=given("names=" + "|".join(HEADER.split(";")), tz="Europe/Berlin"))


BLOOMBERG_TICKS = ("Date,Type,Price,Size\n"
                   "4/20/2020 13:00,BID,1.10,5\n4/20/2020 13:00,ASK,1.12,5\n4/20/2020 13:00,TRADE,1.11,\"1,200\"\n"
                   "4/20/2020 13:01,TRADE,#N/A N/A,3\n4/20/2020 13:01,TRADE,(0.50),2\n"
                   "4/20/2020 13:02,TRADE,\"(1,037.63)\",4\n4/20/2020 13:03,TRADE,1.15,#VALUE!\n")


def test_accounting_negatives_read_as_negative_and_take_the_price_offset(tmp_path: Path) -> None:
    """review374 #2: Excel's accounting format writes -37.63 as `(37.63)`, which "Save as CSV" keeps; read as the
    negative number it is, so a price below zero is refused naming --price-offset as a written `-37.63` is, and read
    exactly with the offset (it was unknown_kind, as if the cell were empty, whatever the offset)."""
    path = tmp_path / "CLK0 acct.csv"
    path.write_text(BLOOMBERG_TICKS)
    plain = FileReplay(path)
    assert [t.price for t in drain(plain) if t.kind == "trade"] == [1.11]
    assert plain.rejected["nonpositive_price"] == 2
    said = plain.rejected.examples["nonpositive_price"]
    assert "got -0.5" in said and "--price-offset 'CLK0=1038'" in said, said
    shifted = FileReplay(path, columns=given("", price_offset="CLK0=1038"))
    assert [t.price for t in drain(shifted) if t.kind == "trade"] == [1039.11, 1037.5, 0.37]
    assert "nonpositive_price" not in shifted.rejected


def test_error_values_in_number_cells_are_rejected_by_their_own_reason_quoting_the_cell(tmp_path: Path) -> None:
    """Bloomberg's `#N/A N/A` (no value for the field) and Excel's `#VALUE!`: rejected as error_value with the cell
    quoted and its column named, not as unknown_kind or missing_field, as though the cell were empty."""
    path = tmp_path / "CLK0 acct.csv"
    path.write_text(BLOOMBERG_TICKS)
    replay = FileReplay(path, columns=given("", price_offset="CLK0=1038"))
    drain(replay)
    assert replay.rejected["error_value"] == 2 and "unknown_kind" not in replay.rejected
    said = replay.rejected.examples["error_value"]
    assert 'line 5: error_value: price "#N/A N/A" is a spreadsheet\'s or terminal\'s error value' in said, said
    assert said.endswith('(column "Price")'), said
    parquet = tmp_path / "ticks.parquet"  # a Parquet column of text numbers reads its cells alike
    pl.DataFrame({"time": ["2024-01-02T10:00:00Z", "2024-01-02T10:00:01Z"], "price": ["#N/A N/A", "(5.25)"],
                  "size": ["1", "2"]}).write_parquet(parquet)
    read = FileReplay(parquet, columns=given("", price_offset="10"))
    assert [t.price for t in drain(read)] == [4.75] and dict(read.rejected) == {"error_value": 1}
