"""Text that is not UTF-8 (Japanese exports' Shift_JIS, Chinese ones' GBK, Western Windows tools' Windows-1252),
wherever in the file it first is: said, with its line, the likely encoding and the command that converts it, in a
caution (the file read on, its odd bytes replaced) and in the refusals its misread column names cause. Lines
ended by \\r alone (classic Mac OS): read through a copy ended by \\n, as UTF-16 is read through a UTF-8 one.
Every fixture is written here, from code, into tmp_path."""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from connectors.replay import FileReplay
from conftest import drain

JAPANESE = "時刻,銘柄コード,約定値,出来高\n2026-03-10T09:00:00,7203,3450,100\n"


def test_a_shift_jis_file_is_read_as_shift_jis_with_a_note_that_names_the_command(tmp_path: Path,
                                                                                  monkeypatch) -> None:
    """Its text read in the encoding it is told to be in (it was refused: its names read as UTF-8 were mojibake); the
    note names the encoding first, and the command that converts it by the path as given, shell-quoted."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my exports").mkdir()
    path = Path("my exports/jpx.csv")
    path.write_bytes(JAPANESE.encode("cp932"))
    replay = FileReplay(path)
    assert [(t.stream, t.price, t.size) for t in drain(replay)] == [("7203", 3450.0, 100.0)]
    note = next(n for n in replay.notes if "Shift_JIS" in n)
    assert note.startswith("jpx.csv: its text is Shift_JIS (cp932), not UTF-8 (from line 1), and is read as such; "
                           "were its names or symbols to read wrong, convert it to UTF-8 first, e.g. iconv -f cp932 "
                           "-t utf-8 'my exports/jpx.csv' > 'my exports/utf8_jpx.csv'"), note
    assert replay.cautions == []
    gzipped = tmp_path / "jpx.csv.gz"
    gzipped.write_bytes(gzip.compress(JAPANESE.encode("cp932")))
    assert [t.price for t in drain(FileReplay(gzipped))] == [3450.0]
    zipped = tmp_path / "my exports" / "jpx.zip"  # a member is named as unpacked, never by our temporary folder
    with zipfile.ZipFile(zipped, "w") as archive:
        archive.writestr("jpx.csv", JAPANESE.encode("cp932"))
    unzipped = FileReplay(zipped)
    assert [t.price for t in drain(unzipped)] == [3450.0]
    assert any("iconv -f cp932 -t utf-8 jpx.csv > utf8_jpx.csv" in n for n in unzipped.notes), unzipped.notes


def test_a_windows_1252_export_is_read_as_windows_1252(tmp_path: Path) -> None:
    """review373 #3: German Excel's `CSV (Trennzeichen-getrennt)` is Windows-1252; read as UTF-8, `Stück` was no
    size column and every trade had size 1. Read in its encoding, its sizes are the file's."""
    path = tmp_path / "xetra.csv"
    path.write_bytes("Datum;Uhrzeit;Wertpapier;Kurs;Stück;Börse\r\n28.03.2025;09:00:00,175529;SIEMENS;212,35;2.000;"
                     "Xetra\r\n28.03.2025;09:00:01,175529;SIEMENS;212,40;350;Xetra\r\n".encode("cp1252"))
    replay = FileReplay(path, columns={"tz": "Europe/Berlin"})
    assert [(t.stream, t.price, t.size) for t in drain(replay)] == [("SIEMENS", 212.35, 2000.0),
                                                                    ("SIEMENS", 212.4, 350.0)]
    assert replay.cautions == [] and not replay.rejected
    assert any("xetra.csv: its text is Windows-1252, not UTF-8" in n for n in replay.notes), replay.notes
    assert any("size=Stück" in n for n in replay.notes)
    plain = tmp_path / "plain.csv"
    plain.write_text("Zeit,Kurs,Stück\n2024-01-02T09:00:00,171.32,10\n")
    said = FileReplay(plain, columns={"ts": "Zeit", "price": "Kurs", "size": "Stück"})
    assert said.cautions == [] and not any("UTF-8" in n for n in said.notes)


def test_a_size_column_not_found_is_a_caution_naming_the_columns_that_may_hold_it(tmp_path: Path) -> None:
    """A price series of size 1 is what a file without sizes is; one with a column that may hold them (a size word
    its names do not know) says so in a warning, naming the option, not in a note."""
    path = tmp_path / "prices.csv"
    path.write_text("time,price,Handelsvolumen\n2024-01-02T09:00:00Z,171.32,10\n2024-01-02T09:00:01Z,171.3,5\n")
    replay = FileReplay(path)
    assert [t.size for t in drain(replay)] == [1.0, 1.0]
    (caution,) = replay.cautions
    assert 'each price is read as a trade of size 1, yet "Handelsvolumen" is not read' in caution
    assert "--columns size=Handelsvolumen" in caution
    series = tmp_path / "series.csv"
    series.write_text("time,price,venue\n2024-01-02T09:00:00Z,171.32,X\n")
    quiet = FileReplay(series)
    assert quiet.cautions == [] and any("no size column: each price is a trade of size 1" in n for n in quiet.notes)


def test_a_gzipped_windows_1252_file_is_named_with_a_command_that_decompresses_it_first(tmp_path: Path) -> None:
    """iconv reads the bytes it is given: for a .csv.gz those are gzip's, so the command the note gives pipes
    `gunzip -c` into it (it named the compressed file itself, which converts to garbage). And one umlaut alone
    (`St\\xfcck`: no whole pair of high bytes) is Windows-1252, not GBK (it was named GBK, `iconv -f gbk`)."""
    path = tmp_path / "de trades.csv.gz"
    path.write_bytes(gzip.compress("Zeit,Kurs,Stück\n2024-01-02T09:00:00,171.32,10\n".encode("cp1252")))
    replay = FileReplay(path, columns={"ts": "Zeit", "price": "Kurs", "size": "Stück"})
    assert [t.size for t in drain(replay)] == [10.0]
    note = next(n for n in replay.notes if "Windows-1252" in n)
    assert (f"convert it to UTF-8 first, e.g. gunzip -c '{path}' | iconv -f cp1252 -t utf-8 > "
            f"'{tmp_path / 'utf8_de trades.csv'}'" in note), note


def test_a_windows_1252_name_first_written_past_the_header_and_the_first_64_kib_is_read_as_windows_1252(
        tmp_path: Path) -> None:
    # a Euronext export: ASCII header and rows, then `Société Générale` at line 1,500 (past the first 64 KiB)
    name = lambda i: "Société Générale" if i >= 1498 else "GLE"  # noqa: E731
    rows = [f"23/10/2026;09:{i // 60 % 60:02d}:{i % 60:02d};{name(i)};32,{10 + i % 50:02d};100;Euronext Paris"
            for i in range(1600)]
    path = tmp_path / "gle.csv"
    path.write_bytes(("Date;Time;Name;Price;Volume;Venue\r\n" + "\r\n".join(rows) + "\r\n").encode("cp1252"))
    assert path.read_bytes().index(b"\xe9") > 1 << 16
    replay = FileReplay(path, columns={"tz": "Europe/Paris", "stream_col": "Name"})
    ticks = drain(replay)
    assert len(ticks) == 1600 and replay.rejected == {} and replay.cautions == []
    assert {t.stream for t in ticks} == {"GLE", "Société Générale"}
    assert any(n.startswith("gle.csv: its text is Windows-1252, not UTF-8 (from line 1500)") for n in replay.notes)


def test_a_gbk_export_is_read_as_gbk_not_windows_1252(tmp_path: Path) -> None:
    # a CTP export: an ASCII header, a name column in GBK (GB2312's pairs of high bytes)
    rows = "".join(f"20261127,21:00:{i:02d},cu2601,沪铜2601,{78250 + 10 * (i % 9)},5\n" for i in range(30))
    path = tmp_path / "cu.csv"
    path.write_bytes(("Date,Time,Symbol,Name,Price,Volume\n" + rows).encode("gbk"))
    replay = FileReplay(path, columns={"tz": "Asia/Shanghai", "stream_col": "Name"})
    assert [(t.stream, t.price) for t in drain(replay)][:2] == [("沪铜2601", 78250.0), ("沪铜2601", 78260.0)]
    assert any("cu.csv: its text is GBK (cp936), not UTF-8 (from line 2)" in n and "iconv -f gbk -t utf-8" in n
               for n in replay.notes)
    # Chinese column names in GBK: read by their names, as the UTF-8 file's are
    header = "成交时间,代码,成交价,数量\n"
    named = tmp_path / "cu_cn.csv"
    named.write_bytes((header + "2026-11-30 09:00:00,cu2601,78250,5\n").encode("gbk"))
    assert [(t.stream, t.price, t.size) for t in drain(FileReplay(named))] == [("cu2601", 78250.0, 5.0)]
    # Windows-1252's accented letters decode as GBK too, into CJK noise: told apart, as Shift_JIS is
    latin = tmp_path / "latin.csv"
    latin.write_bytes("Zeit,Kurs,Stück,Börse\n2024-01-02T09:00:00,171.32,10,Xetra\n".encode("cp1252"))
    latin_read = FileReplay(latin, columns={"ts": "Zeit", "price": "Kurs"})
    assert any("its text is Windows-1252" in n for n in latin_read.notes)


@pytest.mark.parametrize("codec, header, name, said, iconv", [
    ("gbk", "时间,代码,名称,价格,成交量", "阿里巴巴－ＳＷ", "GBK (cp936)", "gbk"),
    ("big5hkscs", "時間,代碼,名稱,價格,成交量", "騰訊控股", "Big5 (Traditional Chinese, with HKSCS)", "big5-hkscs"),
])
def test_gbk_and_big5_exports_are_told_apart_and_read(tmp_path: Path, codec: str, header: str, name: str, said: str,
                                                      iconv: str) -> None:
    """review375 #5: a Hong Kong export in GBK (full-width `－ＳＷ` in its names) or in Big5-HKSCS was called
    Windows-1252, whose `iconv -f cp1252` gave mojibake. Each is named as it is, read, and the command it names
    gives its text back."""
    rows = "".join(f"2024-04-05 09:30:{i:02d}.385,9988.HK,{name},72.{i % 9},{100 * (i + 1)}\n" for i in range(20))
    path = tmp_path / "hk.csv"
    path.write_bytes((header + "\n" + rows).encode(codec))
    replay = FileReplay(path, columns={"tz": "Asia/Hong_Kong", "stream_col": header.split(",")[2]})
    ticks = drain(replay)
    assert [(t.stream, t.price, t.size) for t in ticks[:2]] == [(name, 72.0, 100.0), (name, 72.1, 200.0)]
    note = next(n for n in replay.notes if "not UTF-8" in n)
    assert note.startswith(f"hk.csv: its text is {said}, not UTF-8 (from line 1)") and f"iconv -f {iconv} " in note
    assert path.read_bytes().decode({"gbk": "gb18030"}.get(iconv, iconv.replace("-", ""))) == header + "\n" + rows


def test_a_text_whose_encoding_cannot_be_told_is_refused_with_the_command_first(tmp_path: Path) -> None:
    """One `€` alone (Windows-1252's, or Windows-1251's `Ђ`): no reading is sure, so none is taken; the refusal says
    so first and names both commands (it was read as UTF-8, the byte replaced, with a caution)."""
    path = tmp_path / "eur.csv"
    path.write_bytes("time,Preis (€),size\n2024-01-02T10:00:00Z,1.5,2\n".encode("cp1252"))
    with pytest.raises(ValueError, match=re.escape(f"{path}: its text is not UTF-8 (line 1): it reads as ")) as e:
        FileReplay(path)
    assert "iconv -f cp1252" in str(e.value) and "then replay the converted file" in str(e.value)


def mac_trades(rows: int, bad_row: int | None = None) -> list[str]:
    """A trades CSV's lines (header first); ``bad_row``: that data row's price is not a number."""
    t0 = 1_704_200_000_000
    return ["timestamp,symbol,price,size,side"] + [
        f"{t0 + i * 250},BTCUSDT,{'x' if i == bad_row else f'{42000 + (i * 7) % 13}.5'},0.{i % 9 + 1},"
        f"{'buy' if i % 3 else 'sell'}" for i in range(rows)]


def test_a_csv_whose_lines_end_in_cr_alone_reads_as_its_lines(tmp_path: Path) -> None:
    """Polars ends lines at \\n only: a CSV of a few trades ended by \\r alone was one line to it (the sniffer, which
    reads \\r as a line end, saw rows; polars a header alone), and `backtest` / `evaluate` failed with a bare
    'unsupported operand type(s) for *: "NoneType" and "int"'; a long one was refused, "line 1 is longer than
    131,072 characters". It reads as the same file ended by \\n, said in a note, its rows named by the user's
    file and line; so does its .csv.gz, and such a file in a zip."""
    import zipfile

    lines = mac_trades(40, bad_row=2)
    unix, mac = tmp_path / "unix" / "BTCUSDT.csv", tmp_path / "mac" / "BTCUSDT.csv"
    unix.parent.mkdir()
    mac.parent.mkdir()
    unix.write_bytes("\n".join(lines).encode() + b"\n")
    mac.write_bytes("\r".join(lines).encode() + b"\r")
    want = drain(FileReplay(unix))
    assert len(want) == 39
    replay = FileReplay(mac)
    assert drain(replay) == want
    assert replay.notes[0] == "BTCUSDT.csv: lines ended by \\r alone (classic Mac OS), read as lines ended by \\n"
    assert replay.rejected.examples["missing_field"].startswith(f"{mac} line 4")  # the file the user gave
    gzipped = tmp_path / "mac" / "BTCUSDT.csv.gz"
    gzipped.write_bytes(gzip.compress(mac.read_bytes()))
    assert drain(FileReplay(gzipped)) == want
    with zipfile.ZipFile(tmp_path / "mac" / "BTCUSDT.zip", "w") as archive:
        archive.write(mac, "BTCUSDT.csv")
    zipped = FileReplay(tmp_path / "mac" / "BTCUSDT.zip")
    assert drain(zipped) == want
    # said as the plain file's copy is (fix160: the zip's note named the member alone)
    assert zipped.notes[0] == ("BTCUSDT.zip: read BTCUSDT.csv, its one file: lines ended by \\r alone (classic Mac "
                               "OS), read as lines ended by \\n")


def test_a_long_csv_whose_lines_end_in_cr_alone_is_copied_a_chunk_at_a_time(tmp_path: Path, monkeypatch) -> None:
    """Past MAX_LINE_CHARS (all of it one line to polars) it is read too, its copy made without holding it (the
    chunk lowered here, so a file of a few MB shows it). The file replayed is just past the bound (replaying the
    copy's 120,000 rows tick by tick cost seconds and showed nothing more); the copy's memory is shown on ~5 MB."""
    import tracemalloc

    from connectors import archives, csv_dialect

    past_the_bound = tmp_path / "past" / "BTCUSDT.csv"
    past_the_bound.parent.mkdir()
    past_the_bound.write_bytes("\r".join(mac_trades(4_000)).encode() + b"\r")
    assert past_the_bound.stat().st_size > csv_dialect.MAX_LINE_CHARS  # one line to polars, longer than the bound
    ticks = drain(FileReplay(past_the_bound))
    assert len(ticks) == 4_000 and ticks[-1].ts == (1_704_200_000_000 + 3_999 * 250) * 10**6
    lines = mac_trades(120_000)  # ~5 MB
    mac = tmp_path / "BTCUSDT.csv"
    mac.write_bytes("\r".join(lines).encode() + b"\r")
    monkeypatch.setattr(archives, "COPY_CHARS", 64 << 10)
    needed = archives.text_copy_needed(mac)  # (outside the bound: its UTF-8 check reads 1 MiB chunks, then is cached)
    tracemalloc.start()
    try:
        copy = archives.Unpacked.text_copy(mac, needed)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20 and copy.paths[0].read_bytes() == "\n".join(lines).encode() + b"\n"
    copy.close()


def test_backtest_and_evaluate_read_a_csv_whose_lines_end_in_cr_alone(tmp_path: Path, capsys) -> None:
    """Through the commands a user runs: both failed with a bare TypeError (exit 2) before. The backtest reads 60
    trades (the bug is in reading the file, whatever its length; 1,300 cost it ~6 s of model steps), evaluate
    1,300 (its default split needs 1,184 ticks)."""
    from engine.service.cli import main

    short = tmp_path / "short" / "BTCUSDT.csv"
    short.parent.mkdir()
    short.write_bytes("\r".join(mac_trades(60)).encode() + b"\r")
    assert main(["backtest", str(short), "--out", str(tmp_path / "a.parquet"), "--quiet"]) == 0
    assert "lines ended by \\r alone (classic Mac OS), read as lines ended by \\n" in capsys.readouterr().err
    mac = tmp_path / "BTCUSDT.csv"
    mac.write_bytes("\r".join(mac_trades(1300)).encode() + b"\r")
    assert main(["evaluate", "builtin", str(mac)]) == 0
    assert "test slice (70/15/15) of 1 stream" in capsys.readouterr().out


# FXCM's tick files as shipped: `DateTime,Bid,Ask`, CRLF lines, UTF-16 little-endian with its mark, gzipped
FXCM = "DateTime,Bid,Ask\r\n" + "".join(f"01/15/2024 22:00:{i:02d}.{i * 37 % 1000:03d},147.{120 + i},147.{124 + i}\r\n"
                                        for i in range(40))
UTF16_FORMS = {"bom_le": lambda text: text.encode("utf-16-le").join((b"\xff\xfe", b"")),
               "bom_be": lambda text: text.encode("utf-16-be").join((b"\xfe\xff", b"")),
               "le": lambda text: text.encode("utf-16-le"), "be": lambda text: text.encode("utf-16-be")}


@pytest.mark.parametrize("form", list(UTF16_FORMS))
def test_utf16_text_reads_the_same_as_a_csv_a_csv_gz_and_in_a_zip(tmp_path: Path, form: str) -> None:
    """Review 188, finding 2: FXCM's `.csv.gz` of UTF-16 was refused (`columns found ['\\ufffd\\ufffdD\\x00a...']`)
    as Windows-1252, with an `iconv -f cp1252` command that wrote the NULs into its copy; the same bytes read as a
    `.csv` and in a `.zip`. The UTF-16 check read the gzip's own bytes, not its text."""
    utf16_read_in_each_form(tmp_path, "USDJPY", UTF16_FORMS[form](FXCM))


def utf16_read_in_each_form(tmp_path: Path, stem: str, data: bytes, columns: dict[str, str] | None = None) -> None:
    """UTF-16 `data` as a .csv, a .csv.gz and in a .zip: each read through its UTF-8 copy, with no caution, and the
    same ticks, FXCM's 40."""
    (tmp_path / f"{stem}.csv").write_bytes(data)
    (tmp_path / f"{stem}.csv.gz").write_bytes(gzip.compress(data))
    with zipfile.ZipFile(tmp_path / f"{stem}.zip", "w") as archive:
        archive.writestr(f"{stem}.csv", data)
    read = {}
    for suffix in (".csv", ".csv.gz", ".zip"):
        replay = FileReplay(tmp_path / f"{stem}{suffix}", columns=columns)
        read[suffix] = [(t.stream, t.ts, t.bid, t.ask) for t in drain(replay)]
        assert replay.cautions == [] and dict(replay.rejected) == {}, (suffix, replay.cautions)
        assert any("UTF-16 text, read as UTF-8" in note for note in replay.notes), (suffix, replay.notes)
    assert len(read[".csv"]) == 40 and read[".csv"][0][2:] == (147.12, 147.124)
    assert read[".csv.gz"] == read[".csv"] == read[".zip"]


@pytest.mark.skipif(shutil.which("iconv") is None, reason="iconv is not installed: the command cannot be run")
@pytest.mark.parametrize("name, pack", [("de trades.csv", bytes), ("de trades.csv.gz", gzip.compress)])
def test_the_iconv_command_a_note_proposes_writes_a_file_that_reads(tmp_path: Path, name: str, pack) -> None:
    """The command is run as the note gives it, where the user ran ours; its copy reads alike, with no such note."""
    text = "Zeit,Kurs,Menge,Börse\n2024-01-02T09:00:00,171.32,10,Xetra\n2024-01-02T09:00:01,171.34,5,Xetra\n"
    path = tmp_path / name
    path.write_bytes(pack(text.encode("cp1252")))
    columns = {"ts": "Zeit", "price": "Kurs", "size": "Menge"}
    replay = FileReplay(path, columns=columns)
    expected = [(1704186000 * 10**9, 171.32, 10.0), (1704186001 * 10**9, 171.34, 5.0)]
    assert [(t.ts, t.price, t.size) for t in drain(replay)] == expected
    note = next(n for n in replay.notes if "Windows-1252" in n)
    command = re.search(r"e\.g\. (.+?), with the encoding it is in", note)[1]
    subprocess.run(["sh", "-c", command], cwd=tmp_path, check=True)
    converted = FileReplay(tmp_path / f"utf8_{name.removesuffix('.gz')}", columns=columns)
    assert [(t.ts, t.price, t.size) for t in drain(converted)] == expected
    assert converted.cautions == [] and not any("UTF-8" in n for n in converted.notes)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_mark_and_a_euro_in_its_header_is_utf16_not_windows_1252(tmp_path: Path,
                                                                                 encoding: str) -> None:
    """UTF-16 without a byte-order mark was told by a zero byte beside every character of its head: a `€` (0x20AC)
    in the header has none, so the file was called Windows-1252 (with an `iconv -f cp1252` command) and its columns
    not found. Told now by most characters having one, it reads as the file with a mark does, in each form."""
    utf16_read_in_each_form(tmp_path, "EURUSD", FXCM.replace("Bid,Ask", "Bid €,Ask €").encode(encoding),
                            {"ts": "DateTime", "bid": "Bid €", "ask": "Ask €"})


# a CJK vendor's header: Chinese column names, each with its unit and source, over 256 bytes in UTF-16 and nearly
# no ASCII (full-width punctuation)
CJK_NAMES = {"ts": "成交日期与时间（北京时间，精确到毫秒，按交易所原始记录，未经任何调整，数据来源：行情系统）",
             "bid": "最优买入报价（人民币元，按交易所原始记录，未经任何调整，含停牌时段，数据来源：行情系统）",
             "ask": "最优卖出报价（人民币元，按交易所原始记录，未经任何调整，含停牌时段，数据来源：行情系统）"}


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_mark_and_a_long_header_of_chinese_names_is_utf16(tmp_path: Path, encoding: str) -> None:
    """UTF-16 without a byte-order mark was told by the first 256 bytes alone: a header of Chinese column names
    fills them with characters of no zero byte, so the file was read as UTF-8 and its columns not found
    ('\\x10b\\ufffdN...'). Told now by the rows past the header too, it reads as the file with a mark does."""
    text = FXCM.replace("DateTime,Bid,Ask", ",".join(CJK_NAMES.values()))
    assert len(text.splitlines()[0].encode(encoding)) > 256
    utf16_read_in_each_form(tmp_path, "CNHJPY", text.encode(encoding), CJK_NAMES)
