"""fix374 (review375 #4, review374 #11): what a file's name and first bytes say. A name in a script without
capitals (`トヨタ自動車_20240405.csv`) kept its date in the stream, so each day was a stream of its own where
`TOYOTA_20240405.csv`'s days were one; and a workbook that lost its `.xlsx` (an e-mail attachment) was refused as
`unsupported file type ""`, no word of a workbook. Real files in tmp_path, read by FileReplay (the reader the CLI
uses)."""

from __future__ import annotations

import zipfile
from collections import Counter
from pathlib import Path

import pytest

from connectors.replay import FileReplay
from conftest import drain


def _day(path: Path, day: str) -> Path:
    path.write_text("time,price,volume\n" + "".join(
        f"{day}T09:00:{i:02d},{2800 + i},{100 * (i + 1)}\n" for i in range(10)), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["トヨタ自動車", "삼성전자", "贵州茅台", "TOYOTA"])
def test_the_date_beside_a_name_in_any_script_is_no_part_of_its_stream(tmp_path: Path, name: str) -> None:
    files = [_day(tmp_path / f"{name}_{d.replace('-', '')}.csv", d) for d in ("2024-04-05", "2024-04-08")]
    replay = FileReplay(files, columns={"tz": "Asia/Tokyo"})
    assert Counter(t.stream for t in drain(replay)) == {name: 20}
    # (the two days' notes said once: review382 #5)
    assert any(note.startswith(f"2 files: stream {name}, from the file names (") and f"{name}_20240405.csv" in note
               for note in replay.notes), replay.notes


def test_a_latin_name_in_lower_case_keeps_its_whole_stem_as_before(tmp_path: Path) -> None:
    path = _day(tmp_path / "société_20240405.csv", "2024-04-05")
    assert {t.stream for t in drain(FileReplay(path))} == {"société_20240405"}


def _workbook(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return path


XLSX = {"[Content_Types].xml": "<Types/>", "xl/workbook.xml": "<workbook/>", "xl/worksheets/sheet1.xml": "<sheet/>"}


def test_a_workbook_without_its_extension_is_said_to_be_one(tmp_path: Path) -> None:
    path = _workbook(tmp_path / "CLK0 from Jim", XLSX)
    with pytest.raises(ValueError) as refused:
        drain(FileReplay(path))
    message = str(refused.value)
    assert "an Excel workbook (.xlsx) by its content" in message and "name it CLK0 from Jim.xlsx" in message
    assert "Save As > 'CSV UTF-8'" in message and 'unsupported file type ""' not in message


def test_an_opendocument_sheet_and_a_zip_without_their_extensions_are_named(tmp_path: Path) -> None:
    ods = _workbook(tmp_path / "ticks_ods", {"mimetype": "application/vnd.oasis.opendocument.spreadsheet",
                                            "content.xml": "<office/>"})
    with pytest.raises(ValueError, match=r"an OpenDocument spreadsheet \(\.ods\) by its content"):
        drain(FileReplay(ods))
    archive = _workbook(tmp_path / "ticks_zip", {"a.csv": "time,price\n2024-01-02T00:00:00Z,1\n"})
    with pytest.raises(ValueError, match="a zip archive by its content, though its name lacks .zip: name it "
                                         "ticks_zip.zip"):
        drain(FileReplay(archive))


def test_a_workbook_named_as_a_csv_is_said_to_be_one(tmp_path: Path) -> None:
    """polars' own words were "found more fields than defined in 'Schema'", of the zip's bytes read as text."""
    path = _workbook(tmp_path / "CLK0.csv", XLSX)
    with pytest.raises(ValueError) as refused:
        drain(FileReplay(path))
    assert "an Excel workbook (.xlsx) by its content" in str(refused.value) and "its name says .csv" in str(
        refused.value) and "name it CLK0.xlsx" in str(refused.value)


def _zstd(data: bytes) -> bytes:
    """`data` as one zstd frame of one raw block (RFC 8878): what `zstd` writes of text it cannot shrink."""
    assert len(data) < 256  # the frame's content size in its one byte
    header = (0xFD2FB528).to_bytes(4, "little") + bytes([0x20, len(data)])  # single segment, no checksum
    return header + (1 | len(data) << 3).to_bytes(3, "little") + data  # the last block, raw


def test_a_zstd_compressed_csv_is_refused_with_the_commands_that_read_it(tmp_path: Path) -> None:
    """review390 #4: Databento's CSV downloads are `.csv.zst`, refused as `unsupported file type ".zst"`, no way in.
    Replay has no zstd decoder of its own for a CSV (a `.dbn.zst` is decoded by DBN's reader), so the refusal names
    the commands that decompress it and what standard input loses."""
    path = tmp_path / "glbx-mdp3-20251114.trades.csv.zst"
    path.write_bytes(_zstd(b"ts_event,symbol,price,size\n1763130600000000000,ESZ5,5012.25,1\n"))
    with pytest.raises(ValueError) as refused:
        FileReplay(path)
    said = str(refused.value)
    plain = tmp_path / "glbx-mdp3-20251114.trades.csv"
    assert said.startswith(f"{path}: compressed with zstd, which replay does not decompress (but for .dbn.zst)")
    assert f"zstd -d {path} (writes {plain}, read under its own name)" in said
    assert f"zstd -dc {path} | gzip > {plain}.gz" in said
    assert f"zstd -dc {path} | flashtick backtest - --out ..., read as standard input: no --resume" in said
