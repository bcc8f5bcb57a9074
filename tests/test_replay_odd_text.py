"""Odd CSV text (review309 #6, #7): a quote left open is refused in one line naming the file and the line where it
opened (not polars' 24 lines echoing the file); a header whose line holds a \\r alone (`size\\r\\r1722...`, text
converted twice) is read as two lines, its first row kept with its size."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.replay import FileReplay, replay_ticks

HEADER = "timestamp,symbol,price,size"
ROWS = ["1722000000100,BTCUSDT,61001.5,0.02", "1722000000200,BTCUSDT,61002.5,0.03"]


def test_a_quote_left_open_is_refused_in_one_line_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "quote_unbalanced.csv"
    path.write_text("\n".join([HEADER, '1722000000000,"BTCUSDT,61000.5,0.01', *ROWS]) + "\n")
    with pytest.raises(ValueError) as refused:
        list(replay_ticks(path))
    said = str(refused.value)
    assert said.startswith(f"{path}: line 2 opens a quote (\") that no later line closes") and "\n" not in said
    assert "infer_schema_length" not in said and "61001.5" not in said  # neither polars' advice nor the file's rows


def test_quotes_that_close_are_read_as_before(tmp_path: Path) -> None:
    path = tmp_path / "quoted.csv"
    path.write_text("\n".join([HEADER, '1722000000000,"BTCUSDT",61000.5,0.01', *ROWS]) + "\n")
    assert [t.price for t in replay_ticks(path)] == [61000.5, 61001.5, 61002.5]


def test_a_lone_cr_in_the_header_line_keeps_the_first_row_and_its_sizes(tmp_path: Path) -> None:
    path = tmp_path / "crlf_mixed.csv"
    path.write_bytes(f"{HEADER}\r\r1722000000000,BTCUSDT,61000.5,0.01\r\n".encode() + "\n".join(ROWS).encode() + b"\n")
    replay = FileReplay(path)
    ticks = replay.next_batch(100)
    assert [(t.price, t.size) for t in ticks] == [(61000.5, 0.01), (61001.5, 0.02), (61002.5, 0.03)]
    assert "crlf_mixed.csv: a line end of \\r alone inside its first line" in replay.notes[0]
    assert not any("no size column" in str(note) for note in replay.notes)
    assert replay.rejected == {}


def test_a_doubled_cr_before_each_newline_is_read_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "crcrlf.csv"
    path.write_bytes("\r\r\n".join([HEADER, "1722000000000,BTCUSDT,61000.5,0.01", *ROWS]).encode() + b"\r\r\n")
    replay = FileReplay(path)
    assert [t.size for t in replay.next_batch(100)] == [0.01, 0.02, 0.03]
    assert not any("line end" in str(note) for note in replay.notes)
