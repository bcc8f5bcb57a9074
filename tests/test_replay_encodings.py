"""Text that is not UTF-8 (Japanese exports' Shift_JIS, Western Windows tools' Windows-1252): said, with the likely
encoding and the command that converts it, in a caution and in the refusals its misread column names cause.
Every fixture is written here, from code, into tmp_path."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from connectors.replay import FileReplay
from test_vendor_files import drain

JAPANESE = "時刻,銘柄コード,約定値,出来高\n2026-03-10T09:00:00,7203,3450,100\n"


def test_a_shift_jis_file_is_named_with_the_command_that_converts_it(tmp_path: Path) -> None:
    path = tmp_path / "jpx.csv"
    path.write_bytes(JAPANESE.encode("cp932"))
    with pytest.raises(ValueError, match=r"cannot detect the column layout.*its text is not UTF-8 \(line 1\): it "
                                         r"reads as Shift_JIS \(cp932\); convert it first, e.g. iconv -f cp932 -t "
                                         r"utf-8 jpx.csv > utf8_jpx.csv"):
        FileReplay(path)
    named = {"ts": "時刻", "stream_col": "銘柄コード", "price": "約定値", "size": "出来高"}
    with pytest.raises(ValueError, match=r"the column map needs .*which the file lacks.*iconv -f cp932"):
        FileReplay(path, columns=named)
    converted = tmp_path / "utf8_jpx.csv"  # as the command would write it
    converted.write_text(JAPANESE)
    assert [(t.stream, t.price) for t in drain(FileReplay(converted, columns=named))] == [("7203", 3450.0)]
    gzipped = tmp_path / "jpx.csv.gz"
    gzipped.write_bytes(gzip.compress(JAPANESE.encode("cp932")))
    with pytest.raises(ValueError, match=r"reads as Shift_JIS \(cp932\)"):
        FileReplay(gzipped)


def test_a_windows_1252_file_that_reads_is_read_with_a_caution(tmp_path: Path) -> None:
    path = tmp_path / "de.csv"
    path.write_bytes("Zeit,Kurs,Stück,Börse\n2024-01-02T09:00:00,171.32,10,Xetra\n".encode("cp1252"))
    replay = FileReplay(path, columns={"ts": "Zeit", "price": "Kurs", "size": "Kurs"})
    assert len(drain(replay)) == 1
    (caution,) = replay.cautions
    assert "its text is not UTF-8 (line 1): it reads as Windows-1252" in caution and "iconv -f cp1252" in caution
    plain = tmp_path / "plain.csv"
    plain.write_text("Zeit,Kurs,Stück\n2024-01-02T09:00:00,171.32,10\n")
    assert FileReplay(plain, columns={"ts": "Zeit", "price": "Kurs", "size": "Stück"}).cautions == []
