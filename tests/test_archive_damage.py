"""A month of daily files as a download folder has them (review382 #2, #3): a `.csv.gz` cut short by a download
that died refuses the run by default, saying that --skip-bad-files exists; with it that file is left out, named at
the start, again at the end and in the run record, and every other file replays. A day under two names, byte for
byte (a browser's `2024-03-11 (1).csv.gz`), is read once with a warning naming both, while days that only overlap
(a day beginning with the last trades of the one before) keep their repeated-trades handling. Real files, the real
CLI on the tiny model."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from conftest import drain, engine_dir
from connectors.cautions import Caution
from connectors.replay import FileReplay
from connectors.unreadable_files import UnreadableFile
from engine.service.cli import main

QUERIES = "queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, trigger: {ticks: 5}}\n"
DAYS = ("2024-03-04", "2024-03-05", "2024-03-06")
ROWS = 300
pytestmark = pytest.mark.xdist_group("test_archive_damage")


def trade_lines(day: str, first_id: int, rows: int) -> list[str]:
    return [f"{day}T14:{30 + i // 60:02d}:{i % 60:02d}.000000Z,{100 + (i * 7 % 11) * 0.01:.2f},{1 + i % 3},"
            f"{'buy' if i % 2 else 'sell'},{first_id + i}" for i in range(rows)]


def gzip_day(path: Path, lines: list[str]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(("timestamp,price,size,side,trade_id\n" + "\n".join(lines) + "\n").encode(),
                                   mtime=0))
    return path


def archive(top: Path) -> list[Path]:
    """Three days of AAPL, each its own trade ids."""
    return [gzip_day(top / "AAPL" / f"{day}.csv.gz", trade_lines(day, 1000 * n, ROWS)) for n, day in enumerate(DAYS)]


def cut_short(path: Path) -> Path:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) * 6 // 10])  # a download that died at 60%
    return path


def test_a_truncated_gzip_among_others_is_refused_saying_the_option(tmp_path: Path) -> None:
    cut = cut_short(archive(tmp_path)[1])
    with pytest.raises(UnreadableFile) as refused:
        FileReplay(tmp_path)
    said = str(refused.value)
    assert said.startswith(f"{cut}: its compressed data ends early") and "looks truncated" in said, said
    assert "--skip-bad-files" in said, said


def test_one_truncated_file_alone_is_refused_without_the_option(tmp_path: Path) -> None:
    days = archive(tmp_path)
    cut = cut_short(days[0])
    for skip in (False, True):  # one file given: nothing else to replay, so refused either way
        with pytest.raises(UnreadableFile) as refused:
            FileReplay(cut, skip_bad_files=skip)
        assert str(refused.value).startswith(f"{cut}: its compressed data ends early"), refused.value
        assert "--skip-bad-files" not in str(refused.value)
    with pytest.raises(ValueError, match="nothing to replay: no file given could be read"):
        FileReplay([cut, cut_short(days[1])], skip_bad_files=True)


def test_skip_bad_files_leaves_out_the_truncated_and_damaged_files_and_reads_the_rest(tmp_path: Path) -> None:
    days = archive(tmp_path)
    cut = cut_short(days[1])
    damaged = gzip_day(tmp_path / "AAPL" / "2024-03-07.csv.gz", trade_lines("2024-03-07", 5000, ROWS))
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a byte changed on the way
    damaged.write_bytes(bytes(data))
    stump = tmp_path / "AAPL" / "2024-03-08.parquet"
    stump.write_bytes(b"PAR1" + b"\x00" * 40)  # a Parquet file without its footer
    replay = FileReplay(tmp_path, skip_bad_files=True)
    assert len(drain(replay)) == 2 * ROWS  # every row of the two good days, none of the others
    skipped = dict(replay.skipped_files)
    assert set(skipped) == {str(cut), str(damaged), str(stump)}, skipped
    assert "ends early" in skipped[str(cut)] and "damaged" in skipped[str(damaged)], skipped
    cautions = [c for c in replay.cautions if "Skipped (--skip-bad-files)" in c]
    assert len(cautions) == 3 and all(isinstance(c, Caution) for c in cautions), replay.cautions


def test_a_day_under_two_names_is_read_once_and_an_overlap_keeps_its_repeats(tmp_path: Path) -> None:
    days = archive(tmp_path)
    copy = tmp_path / "AAPL" / "2024-03-05 (1).csv.gz"
    shutil.copyfile(days[1], copy)
    # the next day begins with the last 5 trades of this one (an export page that overlaps): replayed as given
    gzip_day(tmp_path / "AAPL" / "2024-03-07.csv.gz",
             trade_lines(DAYS[2], 2000, ROWS)[-5:] + trade_lines("2024-03-07", 3000, ROWS))
    replay = FileReplay(tmp_path)
    assert len(drain(replay)) == 4 * ROWS + 5
    assert replay.skipped_files == [(str(copy), f"the same bytes as {days[1]}")]
    same = [c for c in replay.cautions if "its bytes are those of" in c]
    assert same == [f"{copy}: its bytes are those of {days[1]} (the same SHA-256): the same data under two names "
                    f"(a re-download, a copy?); read once, from {days[1].name}, so that its ticks are not replayed "
                    f"twice"], replay.cautions
    repeats = [c for c in replay.notes if "repeat trades of" in c]
    assert len(repeats) == 1 and "2024-03-07.csv.gz" in repeats[0] and "(1)" not in repeats[0], repeats


def test_the_same_bytes_as_two_instruments_files_stay_two_streams(tmp_path: Path) -> None:
    """Bytes alike under two instrument folders are read as the two streams they name: not the same day twice."""
    lines = trade_lines(DAYS[0], 0, 20)
    gzip_day(tmp_path / "aapl" / f"{DAYS[0]}.csv.gz", lines)
    gzip_day(tmp_path / "msft" / f"{DAYS[0]}.csv.gz", lines)
    replay = FileReplay(tmp_path)
    assert sorted({t.stream for t in drain(replay)}) == ["aapl", "msft"] and replay.skipped_files == []


@pytest.fixture(scope="module")
def engine_files(tmp_path_factory) -> Path:
    return engine_dir(tmp_path_factory.mktemp("damage"), QUERIES)


def test_backtest_skip_bad_files_names_the_file_at_start_end_and_in_the_record(engine_files: Path, tmp_path: Path,
                                                                               capsys) -> None:
    cut = cut_short(archive(tmp_path / "arch")[2])
    out = tmp_path / "a.parquet"
    command = ["backtest", str(tmp_path / "arch"), "--queries", str(engine_files / "q.yaml"), "--out", str(out),
               "--config", str(engine_files / "engine.yaml"), "--no-plot"]
    assert main(command) == 2
    assert "--skip-bad-files" in capsys.readouterr().err
    assert main([*command, "--skip-bad-files"]) == 0
    stdout, err = capsys.readouterr()
    assert f"replayed {2 * ROWS} ticks" in stdout, stdout
    assert f"warning: {cut}: its compressed data ends early" in err, err
    assert f"warning (said above too): {cut}: its compressed data ends early" in stdout + err, stdout + err
    record = json.loads(out.with_name("a.manifest.json").read_text())["run"]
    assert [s["file"] for s in record["skipped_files"]] == [str(cut)], record["skipped_files"]
    assert str(cut) not in {f["path"] for f in record["files"]}
