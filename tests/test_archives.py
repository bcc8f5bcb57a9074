"""Zipped tick files, as vendors ship them (Binance's public data, OKX's history): read like the one file inside."""

from __future__ import annotations

import gzip
import re
import zipfile
import zlib
from pathlib import Path

import pytest

from conftest import tiny_tick_checkpoint
from connectors.json_objects import read_lines
from connectors.replay import FileReplay
from engine.service.backtest import BacktestInterrupted, run_backtest
from engine.service.cli import main
from engine.service.config import ServiceConfig

ROOT = Path(__file__).resolve().parents[1]


def binance_public_trades(path: Path, rows: int = 400, bad_row: int | None = None,
                          start_ms: int = 1_704_067_200_000) -> None:
    """Header-less like data.binance.vision's files: id,price,qty,quote_qty,time(ms),is_buyer_maker,is_best_match."""
    lines, price, ts = [], 42_000.0, start_ms
    for i in range(rows):
        price += (-0.5, 0.0, 0.5)[i * 7 % 3]
        ts += 1 + i * 13 % 90
        shown = "not-a-price" if i == bad_row else f"{price:.2f}"
        lines.append(f"{i},{shown},0.01,{price * 0.01:.4f},{ts},{('True', 'False')[i % 2]},True")
    path.write_text("\n".join(lines) + "\n")


def zipped(archive: Path, *members: Path) -> Path:
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
        for member in members:
            z.write(member, member.name)
    return archive


def test_a_zip_of_one_binance_file_reads_as_that_file(tmp_path: Path) -> None:
    csv = tmp_path / "BTCUSDT-trades-2024-01-01.csv"
    binance_public_trades(csv, bad_row=150)
    (tmp_path / "dl").mkdir()
    archive = zipped(tmp_path / "dl" / "BTCUSDT-trades-2024-01-01.zip", csv)
    plain, packed = FileReplay(csv), FileReplay(archive)
    plain_ticks, packed_ticks = plain.next_batch(10_000), packed.next_batch(10_000)
    assert packed_ticks == plain_ticks and len(packed_ticks) == 399 and packed_ticks[0].stream == "BTCUSDT"
    assert packed.notes[0] == "BTCUSDT-trades-2024-01-01.zip: read BTCUSDT-trades-2024-01-01.csv, its one file"
    assert packed.notes[1:] == plain.notes
    # a bad row is located in the archive the user gave, and the replay is fingerprinted by it, not by the copy
    assert packed.rejected.examples["missing_field"].startswith(f"{archive} (BTCUSDT-trades-2024-01-01.csv inside) "
                                                                f"line 151")
    assert FileReplay(archive).snapshot()["fingerprint"] == packed.snapshot()["fingerprint"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """engine.yaml over the tiny tick model, beside it: the archive is the subject here, not the model (the built-in
    one's forwards were a sixth of the three backtests below)."""
    root = tmp_path_factory.mktemp("tiny")
    checkpoint = tiny_tick_checkpoint(root / "model")
    (root / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 8192, block_size: 16}}\n")
    return checkpoint


def test_cli_backtest_and_resume_of_a_zip(tmp_path: Path, capsys, tiny_model: Path) -> None:
    csv = tmp_path / "ETHUSDT-trades-2024-01-01.csv"
    binance_public_trades(csv, rows=600)
    archive = zipped(tmp_path / "ETHUSDT-trades-2024-01-01.zip", csv)
    out = tmp_path / "answers.parquet"
    assert main(["backtest", str(archive), "--out", str(out), "--quiet",
                 "--config", str(tiny_model.parent / "engine.yaml")]) == 0
    err = capsys.readouterr().err
    assert "read ETHUSDT-trades-2024-01-01.csv, its one file" in err and "stream ETHUSDT" in err
    assert out.stat().st_size > 0
    # a resume is keyed on the archive, not on its copy (unpacked again elsewhere): an interrupted run continues
    config = ServiceConfig.from_dict({"model": {"path": str(tiny_model)}, "kv": {"cells": 8192, "block_size": 16}})
    queries = ROOT / "queries" / "examples" / "tick_model.yaml"
    polls = iter(range(10**9))
    with pytest.raises(BacktestInterrupted):
        run_backtest(config, [archive], queries, tmp_path / "cut.parquet", progress=False,
                     stop=lambda: next(polls) >= 100)
    report = run_backtest(config, [archive], queries, tmp_path / "cut.parquet", progress=False, resume=True)
    assert report.resumed_at > 0 and report.ticks == 600


def test_a_zip_of_several_days_replays_them_merged_in_time(tmp_path: Path) -> None:
    """A month's archive of daily files (as some vendors ship) reads as those files given in its order."""
    day1, day2 = tmp_path / "SOLUSDT-trades-2024-01-01.csv", tmp_path / "SOLUSDT-trades-2024-01-02.csv"
    binance_public_trades(day1)
    binance_public_trades(day2, start_ms=1_704_153_600_000)
    archive = zipped(tmp_path / "SOLUSDT-trades-2024-01.zip", day1, day2)
    packed = FileReplay(archive)
    assert packed.next_batch(10_000) == FileReplay([day1, day2]).next_batch(10_000)
    assert [n for n in packed.notes if n.startswith("SOLUSDT-trades-2024-01.zip")] == [
        "SOLUSDT-trades-2024-01.zip: read SOLUSDT-trades-2024-01-01.csv, file 1 of 2",
        "SOLUSDT-trades-2024-01.zip: read SOLUSDT-trades-2024-01-02.csv, file 2 of 2"]


def test_an_empty_zip_a_name_twice_or_not_a_zip_is_refused_by_name(tmp_path: Path) -> None:
    a = tmp_path / "a.csv"
    binance_public_trades(a)
    with pytest.raises(ValueError, match="holds no files"):
        FileReplay(zipped(tmp_path / "empty.zip"))
    with zipfile.ZipFile(tmp_path / "twice.zip", "w") as z:
        z.write(a, "x/a.csv")
        z.write(a, "y/a.csv")
    with pytest.raises(ValueError, match='holds "a.csv" in more than one folder'):
        FileReplay(tmp_path / "twice.zip")
    (tmp_path / "fake.zip").write_text("id,price\n1,2\n")
    with pytest.raises(ValueError, match="not a readable zip archive"):
        FileReplay(tmp_path / "fake.zip")
    with pytest.raises(FileNotFoundError):
        FileReplay(tmp_path / "missing.zip")


def test_a_replay_is_a_context_manager_that_removes_its_unpacked_files(tmp_path: Path) -> None:
    csv = tmp_path / "BTCUSDT-trades-2024-01-01.csv"
    binance_public_trades(csv)
    archive = zipped(tmp_path / "BTCUSDT-trades-2024-01-01.zip", csv)
    with FileReplay(archive) as replay:
        unpacked = replay.plans[0].path
        assert unpacked.is_file() and len(replay.next_batch(10_000)) == 400
    assert not unpacked.exists() and replay.done


def test_a_replay_refused_partway_removes_what_it_unpacked(tmp_path: Path, monkeypatch) -> None:
    """An archive unpacked, then the next file refused (no tick layout) or a --streams pattern matching none:
    the unpacked copy stayed in the temporary folder for as long as the exception was held (a `pytest.raises`, a
    caller that logs it), and past the process where a cycle kept it. The refusal now removes it first."""
    import tempfile

    csv = tmp_path / "BTCUSDT-trades-2024-01-01.csv"
    binance_public_trades(csv)
    archive = zipped(tmp_path / "BTCUSDT-trades-2024-01-01.zip", csv)
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    with pytest.raises(ValueError, match="cannot detect the column layout of .*bad.csv") as refused:
        FileReplay([archive, tmp_path / "bad.csv"])
    assert list((tmp_path / "tmp").iterdir()) == [], refused  # the exception still held
    with pytest.raises(ValueError, match="NOPE") as refused:
        FileReplay(archive, streams=["NOPE"])
    assert list((tmp_path / "tmp").iterdir()) == [], refused
    with FileReplay(archive):  # where it unpacks while it lives
        assert len(list((tmp_path / "tmp").iterdir())) == 1


@pytest.mark.parametrize("rows", [40, 200_000])  # cut inside the first lines read, and deep inside the data
def test_a_truncated_gzip_file_is_named_and_said_to_be_cut_short(tmp_path: Path, rows: int, capsys) -> None:
    """An interrupted download of a `.csv.gz`: gzip's and polars' own errors name no file; a backtest and a feed
    replay say which one, and why."""
    plain = tmp_path / "BTCUSDT-trades-2024-01-01.csv"
    binance_public_trades(plain, rows)
    whole = gzip.compress(plain.read_bytes())
    cut = tmp_path / "BTCUSDT-trades-2024-01-01.csv.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=f"^{cut}: its compressed data ends early .*looks truncated "
                                         r"\(an interrupted download\?\)"):
        FileReplay(cut)
    for command in (["backtest", str(cut), "--out", str(tmp_path / "a.parquet"), "--quiet"],
                    ["feed", "replay", str(cut), "--endpoint", "tcp://127.0.0.1:1"]):
        assert main(command) != 0
        assert f"error: {cut}: its compressed data ends early" in capsys.readouterr().err
    lines = tmp_path / "BTCUSDT-trades.jsonl.gz"  # a websocket capture cut short: read whole, so cut alike
    whole = gzip.compress("".join(f'{{"T": {1_704_067_200_000 + i}, "p": "42000.5", "q": "0.01"}}\n'
                                  for i in range(rows // 10)).encode())
    lines.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=f"^{lines}: its compressed data ends early .*looks truncated"):
        FileReplay(lines)


def test_a_truncated_jsonl_gz_is_read_a_chunk_at_a_time_and_names_its_last_whole_line(tmp_path: Path) -> None:
    """fix327 #3: a `.jsonl.gz` is split into lines as it decompresses (its text never held whole beside its
    lines); one cut short is said as before, and names its last line read whole, just before the cut."""
    text = "".join(f'{{"T": {1_704_067_200_000 + i}, "p": "42000.5", "q": "0.01", "i": {i}}}\n'
                   for i in range(300_000)).encode()  # ~17 MB of text: many chunks
    whole = gzip.compress(text)
    cut = tmp_path / "BTCUSDT-trades.jsonl.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    cut_inside = zlib.decompressobj(31).decompress(cut.read_bytes()).count(b"\n") + 1  # all that can be had
    assert 1 < cut_inside < 300_000
    with pytest.raises(ValueError) as refused:
        FileReplay(cut)
    said = str(refused.value)
    assert said.startswith(f"{cut}: its compressed data ends early (")
    last_whole = int(re.search(r"its last line read whole is line ([\d,]+)\)", said)[1].replace(",", ""))
    assert cut_inside - 2_000 < last_whole < cut_inside  # (gzip drops what its read that finds the cut decompressed)
    assert "looks truncated (an interrupted download?)" in said
    whole_file = tmp_path / "ETHUSDT-trades.jsonl.gz"  # the same lines whole: every one read, in order
    whole_file.write_bytes(whole)
    assert read_lines(whole_file) == text.split(b"\n")[:-1]


@pytest.mark.parametrize("rows, at", [(400, 200), (200_000, -1)])  # an invalid code early; a failed CRC at the end
def test_a_corrupt_gzip_file_is_named_and_said_to_be_damaged(tmp_path: Path, rows: int, at: int, capsys) -> None:
    """A `.csv.gz` whose bytes changed (not cut): backtest and evaluate stopped with zlib's or gzip's own words
    (`Error -3 while decompressing data: invalid distance too far back`, `CRC check failed 0x... != 0x...`) and no
    file named; now named and said to be damaged."""
    plain = tmp_path / "BTCUSDT-trades-2024-01-01.csv"
    binance_public_trades(plain, rows)
    data = bytearray(gzip.compress(plain.read_bytes(), mtime=0))
    start = at if at >= 0 else len(data) * 3 // 4
    for i in range(start, start + 40):  # bytes flipped inside the compressed data
        data[i] ^= 0x5A
    corrupt = tmp_path / "BTCUSDT-trades-2024-01-01.csv.gz"
    corrupt.write_bytes(bytes(data))
    said_damaged(corrupt, tmp_path, capsys)


def said_damaged(corrupt: Path, tmp_path: Path, capsys) -> None:
    """backtest and evaluate of a compressed file whose bytes changed stop, naming it and saying it is damaged."""
    model = tiny_tick_checkpoint(tmp_path / "model")
    for command in (["backtest", str(corrupt), "--out", str(tmp_path / "a.parquet"), "--quiet"],
                    ["evaluate", str(model), str(corrupt), "--quiet", "--threads", "1"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert f"error: {corrupt}: its compressed data is damaged (" in err, err
        assert "the file is corrupt (a download or a disk that changed its bytes?): download it again" in err


@pytest.mark.parametrize("compression", [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED])
def test_a_zip_member_whose_crc_fails_is_named_and_said_to_be_damaged(tmp_path: Path, compression: int,
                                                                       capsys) -> None:
    """fix280 #3: a zip whose member's bytes changed stopped backtest and evaluate with zipfile's own words
    (`Bad CRC-32 for file '...csv'`) and no archive named; now named and said to be damaged, as a `.csv.gz` is."""
    plain = tmp_path / "BTCUSDT-trades-2024-01-01.csv"
    binance_public_trades(plain, 2000)
    archive = tmp_path / "BTCUSDT-trades-2024-01-01.zip"
    with zipfile.ZipFile(archive, "w", compression) as z:
        z.write(plain, plain.name)
    data = bytearray(archive.read_bytes())
    at = data.index(b"\n1,") + 1 if compression == zipfile.ZIP_STORED else len(data) // 2
    data[at] = ord("7") if compression == zipfile.ZIP_STORED else data[at] ^ 0x01  # the data changed, not cut
    archive.write_bytes(bytes(data))
    said_damaged(archive, tmp_path, capsys)


def test_a_truncated_zip_archive_is_said_to_be_cut_short(tmp_path: Path) -> None:
    binance_public_trades(tmp_path / "BTCUSDT-trades-2024-01-01.csv", 2000)
    archive = zipped(tmp_path / "BTCUSDT-trades-2024-01-01.zip", tmp_path / "BTCUSDT-trades-2024-01-01.csv")
    archive.write_bytes(archive.read_bytes()[:3000])
    with pytest.raises(ValueError, match="not a readable zip archive .*looks truncated"):
        FileReplay(archive)


def test_members_that_are_no_tick_files_are_skipped_with_a_note(tmp_path: Path) -> None:
    """A `.DS_Store` (Finder's Compress) or a vendor's README.txt stopped the whole run (review 108): skipped now,
    named in a note; the ticks are the plain files' ticks."""
    day = tmp_path / "BTCUSDT-trades-2024-01-01.csv"
    binance_public_trades(day)
    readme = tmp_path / "README.txt"
    readme.write_text("Vendor X tick export\nFields: time (UTC), price, size\nLicence: internal use only.\n")
    with zipfile.ZipFile(tmp_path / "mac.zip", "w") as z:
        z.write(day, f"BTCUSDT/{day.name}")
        z.writestr("BTCUSDT/.DS_Store", b"\x00\x00\x00\x01Bud1")
        z.writestr("notes.pdf", b"%PDF-1.4")
    packed = FileReplay(tmp_path / "mac.zip")
    assert packed.next_batch(10_000) == FileReplay(day).next_batch(10_000)
    assert f"{tmp_path / 'mac.zip'}: skipped BTCUSDT/.DS_Store, notes.pdf inside: not tick files (replay reads " \
           f".parquet" in packed.notes[0]
    assert "mac.zip: read BTCUSDT/BTCUSDT-trades-2024-01-01.csv, its one file" in packed.notes
    vendor = FileReplay(zipped(tmp_path / "vendor.zip", day, readme))
    assert vendor.next_batch(10_000) == FileReplay(day).next_batch(10_000)
    assert f"{tmp_path / 'vendor.zip'} (README.txt inside): skipped: a text file whose columns hold no tick " \
           f"layout (a readme?): columns found [\"Vendor X tick export\"]; no time column among them" in vendor.notes


def test_an_archive_of_no_ticks_or_a_failing_data_member_stops_named(tmp_path: Path) -> None:
    day, readme = tmp_path / "ETHUSDT-trades-2024-01-01.csv", tmp_path / "README.txt"
    binance_public_trades(day)
    readme.write_text("Vendor X tick export\nFields: time (UTC), price, size\nLicence: internal use only.\n")
    with pytest.raises(ValueError, match=r"cannot detect the column layout of .*readme.zip \(README.txt inside\)"):
        FileReplay(zipped(tmp_path / "readme.zip", readme))  # nothing else read: the text may be the ticks
    with zipfile.ZipFile(tmp_path / "junk.zip", "w") as z:
        z.writestr(".DS_Store", b"\x00")
    with pytest.raises(ValueError, match=r"junk.zip: the zip archive holds no tick file, only .DS_Store; replay "):
        FileReplay(tmp_path / "junk.zip")
    prose = tmp_path / "prose.csv"  # named as data: its failure is the run's
    prose.write_text(readme.read_text())
    with pytest.raises(ValueError, match=r"cannot detect the column layout of .*both.zip \(prose.csv inside\)"):
        FileReplay(zipped(tmp_path / "both.zip", day, prose))


def test_a_tar_archive_is_refused_as_one_with_the_command_that_extracts_it(tmp_path: Path, capsys) -> None:
    import tarfile

    day = tmp_path / "BTCUSDT-trades-2024-01-01.csv"
    binance_public_trades(day)
    with tarfile.open(tmp_path / "vendor.tar.gz", "w:gz") as tar:
        tar.add(day, day.name)
    assert main(["backtest", str(tmp_path / "vendor.tar.gz"), "--out", str(tmp_path / "a.parquet"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'vendor.tar.gz'}: a tar archive (.tar.gz), which replay does not unpack: extract it (tar xf " \
           f"{tmp_path / 'vendor.tar.gz'}) and give the files inside, or give them zipped (.zip)" in err
