"""A line of junk between a CSV's rows (`xxxx`, a crashed writer's run of NULs) reads in polars as a row of empty
cells, as a blank line does: it was skipped as one, a line lost without a word. It is rejected as missing_field,
counted and named by its line; blank lines (spaces, separators alone) are still skipped. Real files, the real
reader and the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import engine_dir
from connectors.replay import FileReplay
from engine.service.cli import main

T0 = 1_700_000_000_000  # ms

QUERIES = "queries:\n  - {name: dir5, streams: ['*'], question: direction_5, kind: choice, trigger: {ticks: 5}}\n"


def trades_with_junk(path: Path) -> Path:
    """40 trades; line 5 is `xxxx`, line 9 a run of NULs, and blank lines of three kinds lie among them."""
    lines = ["ts,symbol,price,size,side"]
    lines += [f"{T0 + 10 * i},BTCUSDT,{42000 + i % 7}.5,1,{'buy' if i % 2 else 'sell'}" for i in range(40)]
    lines.insert(4, "xxxx")  # line 5
    lines.insert(8, "\0" * 64)  # line 9
    lines.insert(12, "")
    lines.insert(20, "   ")
    lines.insert(30, ",,,,")
    path.write_bytes(("\n".join(lines) + "\n\n").encode())
    return path


def drained(replay: FileReplay) -> int:
    ticks = 0
    while not replay.done:
        ticks += len(replay.next_batch(512))
    return ticks


def test_junk_lines_are_rejected_by_line_and_blank_lines_skipped(tmp_path: Path) -> None:
    path = trades_with_junk(tmp_path / "trades.csv")
    replay = FileReplay(path)
    assert drained(replay) == 40
    assert dict(replay.rejected) == {"missing_field": 2}
    assert replay.rejected.examples["missing_field"] == (
        f"{path} line 5: missing_field: the line holds \"xxxx\", nothing that reads as a cell of the file's 5 columns "
        f"(a junk line between rows: a stray word, a crashed writer's NULs?): no tick")
    # the NUL line is the second: alone in a file, it is the first named
    lines = path.read_text().split("\n")
    path.write_text("\n".join(line for line in lines if line != "xxxx"))
    replay = FileReplay(path)
    assert drained(replay) == 40 and dict(replay.rejected) == {"missing_field": 1}
    assert replay.rejected.examples["missing_field"].startswith(
        f"{path} line 8: missing_field: the line holds 64 NUL character(s) alone, nothing that reads")


def test_a_junk_line_as_the_first_row_or_a_short_row_anywhere_is_one_reject(tmp_path: Path) -> None:
    """Review 115 (finding 1): `oops` as the first data line decided how the time column reads ('not ISO 8601':
    the whole file refused); a row of 2 of 5 fields is a missing_field reject too, named by its line."""
    path = trades_with_junk(tmp_path / "trades.csv")
    lines = [line for line in path.read_text().split("\n") if line and line.strip(", \0") and line != "xxxx"]
    lines.insert(1, "oops")  # line 2: the first data line
    path.write_text("\n".join(lines) + "\n")
    replay = FileReplay(path)
    assert drained(replay) == 40 and dict(replay.rejected) == {"missing_field": 1}
    assert replay.rejected.examples["missing_field"].startswith(f'{path} line 2: missing_field: the line holds "oops"')
    assert any("read as ts=ts (ms)" in n for n in replay.notes)
    lines.insert(30, f"{T0 + 999},BTCUSDT")  # line 31: 2 of 5 fields
    path.write_text("\n".join(lines) + "\n")
    replay = FileReplay(path)
    assert drained(replay) == 40 and dict(replay.rejected) == {"missing_field": 2}
    assert f"{path} line 31: missing_field: field \"price\" is required" in replay.rejected.examples["missing_field"]


def test_a_last_line_of_words_is_a_footer_not_junk(tmp_path: Path) -> None:
    """Barchart's footer after a file whose times are numbers: left out as a footer (filtered_out), as after one
    whose times are text, never a junk line's missing_field."""
    path = tmp_path / "bars.csv"
    path.write_text(f"ts,symbol,price,size\n{T0},ES,5000.25,3\n{T0 + 10},ES,5000.5,1\n"
                    f"Downloaded from Barchart.com as of 03-06-2026 04:34pm CST\n")
    replay = FileReplay(path)
    assert drained(replay) == 2 and dict(replay.rejected) == {"filtered_out": 1}
    assert replay.rejected.examples["filtered_out"].startswith(f"{path} line 4: filtered_out: a footer line")


def test_a_file_without_junk_rejects_nothing(tmp_path: Path) -> None:
    path = trades_with_junk(tmp_path / "trades.csv")
    path.write_text("\n".join(line for line in path.read_text().split("\n") if line != "xxxx" and "\0" not in line))
    replay = FileReplay(path)
    assert drained(replay) == 40 and not replay.rejected


@pytest.fixture(scope="module")
def engine_files(tmp_path_factory) -> Path:
    return engine_dir(tmp_path_factory.mktemp("junk"), QUERIES)


def test_backtest_counts_a_junk_line_and_names_it_first(engine_files: Path, tmp_path: Path, capsys) -> None:
    path = trades_with_junk(tmp_path / "trades.csv")
    code = main(["backtest", str(path), "--queries", str(engine_files / "q.yaml"), "--out", str(tmp_path / "a.parquet"),
                 "--config", str(engine_files / "engine.yaml")])
    shown = capsys.readouterr()
    out = shown.out + shown.err
    assert code == 0, out
    assert "replayed 40 ticks (2 rejected)" in out
    assert f'rejected missing_field: 2 (first: {path} line 5: missing_field: the line holds "xxxx"' in out
