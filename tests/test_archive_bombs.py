"""Decompression bombs and odd archives (review309 #1, #4): a `.zip` member or a `.csv.gz` that expands past the
limits is refused by name before it fills a disk; a zip of more files than the member limit is refused; a zip of
many small files shares one layout detection."""

from __future__ import annotations

import gzip
import tempfile
import zipfile
from pathlib import Path

import pytest

from connectors.expansion import MEMBERS_VARIABLE, RATIO_VARIABLE, UNPACKED_VARIABLE
from connectors.replay import FileReplay, replay_ticks

HEADER = b"timestamp,symbol,price,size\n1722000000000,BTCUSDT,61000.5,0.01\n"


@pytest.fixture(autouse=True)
def own_temp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Unpacked copies go under the test's own folder, so that what a refusal leaves behind can be seen."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def newline_bomb(expanded: int) -> bytes:
    """A tick file of one valid row, then `expanded` bytes of newlines (compresses ~1000:1)."""
    return HEADER + b"\n" * expanded


def test_a_zip_member_past_the_unpacked_limit_is_refused_by_name(tmp_path: Path, own_temp: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "BTCUSDT-bomb.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("BTCUSDT-trades.csv", newline_bomb(100 << 20))  # ~100 KB compressed
    assert archive.stat().st_size < 200_000
    monkeypatch.setenv(UNPACKED_VARIABLE, str(8 << 20))
    with pytest.raises(ValueError) as refused:
        list(replay_ticks(archive))
    said = str(refused.value)
    assert said.startswith(f"{archive} (BTCUSDT-trades.csv inside): ")
    assert "KiB compressed" in said and "8.0 MiB unpacked" in said and UNPACKED_VARIABLE in said
    assert list(own_temp.iterdir()) == []  # its partial copy removed at once


def test_a_gzip_past_the_ratio_is_refused_before_polars_reads_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    bomb = tmp_path / "BTCUSDT-trades.csv.gz"
    bomb.write_bytes(gzip.compress(newline_bomb(80 << 20)))
    monkeypatch.setenv(RATIO_VARIABLE, "50")  # the ratio counts past the first 64 MiB
    with pytest.raises(ValueError, match=rf"^{bomb}: .* over 50 times its compressed size .*{RATIO_VARIABLE}"):
        FileReplay(bomb)
    monkeypatch.delenv(RATIO_VARIABLE)  # the default, 200, refuses it too: ~1000:1
    with pytest.raises(ValueError, match="over 200 times"):
        FileReplay(bomb)


def test_a_bad_limit_is_refused_by_its_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gz = tmp_path / "BTCUSDT-trades.csv.gz"
    gz.write_bytes(gzip.compress(HEADER))
    monkeypatch.setenv(UNPACKED_VARIABLE, "lots")
    with pytest.raises(ValueError, match=f'{UNPACKED_VARIABLE} must be a number > 0, got "lots"'):
        FileReplay(gz)


def test_a_zip_of_more_files_than_the_limit_is_refused(tmp_path: Path, own_temp: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    archive = tmp_path / "chain.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(30):
            z.writestr(f"d/S{i}-trades.csv", f"timestamp,price,size\n{1722000000000 + i},{100 + i},1\n")
    monkeypatch.setenv(MEMBERS_VARIABLE, "20")
    with pytest.raises(ValueError, match=rf"^{archive}: the zip archive holds 30 files, over the limit of 20; .*"
                                         rf"{MEMBERS_VARIABLE}"):
        FileReplay(archive)
    assert list(own_temp.iterdir()) == []  # refused before anything is unpacked
    monkeypatch.setenv(MEMBERS_VARIABLE, "30")
    ticks = list(replay_ticks(archive))
    assert sorted(t.stream for t in ticks) == sorted(f"S{i}" for i in range(30))
