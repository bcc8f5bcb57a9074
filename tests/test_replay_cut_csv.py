"""A plain CSV cut mid-row (a download that died: its last line has no newline and fewer fields than its columns)
is read up to that line, which is rejected as truncated_line, and the file is named as probably truncated in a
warning; a last line that is whole, newline or not, is read as any other (review382 #7). Real files in tmp_path,
read by FileReplay (the reader the CLI uses)."""

from __future__ import annotations

from pathlib import Path

from connectors.cautions import Caution
from connectors.replay import FileReplay
from conftest import drain

ROWS = (
    "timestamp,price,size,side,trade_id\n"
    "2024-03-04T14:30:00.100000Z,170.25,100,buy,1001\n"
    "2024-03-04T14:30:01.200000Z,170.26,50,sell,1002\n"
    "2024-03-04T14:30:02.300000Z,170.24,200,buy,1003\n"
)


def test_a_csv_cut_mid_row_is_read_to_its_cut_and_named_probably_truncated(tmp_path: Path) -> None:
    path = tmp_path / "2024-03-04.csv"
    path.write_bytes((ROWS + "2024-03-04T16:51:35.284962Z,17").encode())
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [t.price for t in ticks] == [170.25, 170.26, 170.24]
    assert dict(replay.rejected) == {"truncated_line": 1}
    example = replay.rejected.examples["truncated_line"]
    assert "2024-03-04.csv line 5: truncated_line: the file's last line ends without a newline" in example
    cautions = [note for note in replay.notes if isinstance(note, Caution)]
    assert len(cautions) == 1 and cautions[0].startswith('2024-03-04.csv: its last line ("2024-03-04T16:51:35.28'), \
        cautions
    assert "holds 2 of its 5 fields: the file is probably truncated" in cautions[0]


def test_a_whole_last_line_without_its_newline_is_read_as_any_row(tmp_path: Path) -> None:
    path = tmp_path / "2024-03-05.csv"
    path.write_bytes((ROWS + "2024-03-04T14:30:03.400000Z,170.27,10,sell,1004").encode())
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [170.25, 170.26, 170.24, 170.27] and not replay.rejected
    assert not any("truncated" in note for note in replay.notes)


def test_a_short_last_line_ended_by_its_newline_is_a_bad_row_not_a_cut_file(tmp_path: Path) -> None:
    path = tmp_path / "2024-03-06.csv"
    path.write_bytes((ROWS + "2024-03-04T14:30:03.400000Z,170.27\n").encode())
    replay = FileReplay(path)
    assert len(drain(replay)) == 3 and "truncated_line" not in replay.rejected and sum(replay.rejected.values()) == 1
    assert not any("truncated" in note for note in replay.notes)


def test_a_footer_without_its_newline_is_the_footer_not_a_cut_file(tmp_path: Path) -> None:
    """Barchart's footer as a download's last line, no newline after it: left out as the footer it is (filtered_out),
    neither rejected as truncated_line nor the file called truncated."""
    path = tmp_path / "esh26_intraday-5min.csv"
    path.write_bytes(("Time,Open,High,Low,Last,Change,%Chg,Volume\n"
                      "2026-03-06 09:30,6850.00,6851.00,6849.50,6850.25,0.25,0.00%,120\n"
                      "2026-03-06 09:35,6850.25,6850.75,6849.75,6850.00,-0.25,0.00%,80\n"
                      '"Downloaded from Barchart.com as of 03-06-2026 04:34pm CST"').encode())
    replay = FileReplay(path)
    assert [(t.price, t.size) for t in drain(replay)] == [(6850.25, 120), (6850.0, 80)]
    assert dict(replay.rejected) == {"filtered_out": 1}
    assert not any("truncated" in note for note in replay.notes)
