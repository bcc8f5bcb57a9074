"""Several session windows in one `hours` (review375 #1): Tokyo's two sessions around its lunch break kept, the
break left out, given as repeated --hours, one text or a replay list's YAML list; JPX's past-24 notation for its
night session (review375 #8). Every file is written here, into tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import drain, ns
from connectors.hours_window import Hours
from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from engine.service.cli import main

# one TSE stock's day, Tokyo wall clock (UTC+9, no summer time): a print in each session, in the lunch break and
# after the close
TSE_ROWS = {"08:59:00": 2500, "09:00:00": 2501, "11:29:59": 2502, "11:45:00": 2503, "12:30:00": 2504,
            "14:59:59": 2505, "15:10:00": 2506}
KEPT = [2501, 2502, 2504, 2505]
QUERIES = "queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, trigger: batch}\n"


def tse_day(path: Path) -> Path:
    path.write_text("time,code,price,volume\n" + "".join(
        f"2024-04-05 {clock},7203.T,{price},100\n" for clock, price in TSE_ROWS.items()))
    return path


def test_two_windows_keep_both_sessions_and_leave_the_lunch_break_out(tmp_path: Path) -> None:
    path = tse_day(tmp_path / "tse_20240405.csv")
    for hours in ("09:00-11:30,12:30-15:00", "09:00-11:30, 12:30-15:00", "09:00-11:30 12:30-15:00",
                  ["09:00-11:30", "12:30-15:00"]):
        replay = FileReplay(path, columns=map_from_options(detect=True, tz="Asia/Tokyo", hours=hours))
        assert [t.price for t in drain(replay)] == KEPT, hours  # 11:45 (lunch), 08:59 and 15:10 left out
        assert dict(replay.rejected) == {"filtered_out": 3}, hours
        said = hours if isinstance(hours, str) else ", ".join(hours)
        assert replay.notes[0].endswith(f"hours {said}"), replay.notes[0]
        assert f"ts at 08:59:00 Asia/Tokyo is outside the hours kept ({said})" in \
            replay.rejected.examples["filtered_out"]
    # the zone written after the windows is every window's
    replay = FileReplay(path, columns={"hours": "09:00-11:30,12:30-15:00 Asia/Tokyo", "tz": "Asia/Tokyo"})
    assert [t.price for t in drain(replay)] == KEPT


def test_a_replay_list_takes_a_list_of_windows(tmp_path: Path) -> None:
    tse_day(tmp_path / "tse_20240405.csv")
    (tmp_path / "list.yaml").write_text(
        "replay:\n  - path: tse_20240405.csv\n    columns: {tz: Asia/Tokyo, hours: ['09:00-11:30', '12:30-15:00']}\n")
    replay = FileReplay(tmp_path / "list.yaml")
    assert [t.price for t in drain(replay)] == KEPT
    assert replay.rejected["filtered_out"] == 3


def test_repeated_hours_on_the_command_line_keep_every_window(tmp_path: Path, capsys) -> None:
    """A second --hours replaced the first (the morning dropped, exit 0): now both windows are kept."""
    path = tse_day(tmp_path / "tse_20240405.csv")
    (tmp_path / "q.yaml").write_text(QUERIES)
    assert main(["backtest", str(path), "--tz", "Asia/Tokyo", "--hours", "09:00-11:30", "--hours", "12:30-15:00",
                 "--queries", str(tmp_path / "q.yaml"), "--out", str(tmp_path / "a.parquet")]) == 0
    err = capsys.readouterr()
    said = err.out + err.err
    assert "hours 09:00-11:30, 12:30-15:00" in said, said
    assert "replayed 4 ticks (0 rejected, 3 left out by a filter)" in said, said


def test_windows_that_cannot_be_read_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="name several zones"):
        Hours.parse("09:00-11:30 Asia/Tokyo, 12:30-15:00 Asia/Hong_Kong")
    with pytest.raises(ValueError, match="hours must be a time-of-day window START-END, or several"):
        Hours.parse("9:30 to 16:00")
    with pytest.raises(ValueError, match="is an empty window"):
        Hours.parse("09:00-11:30,12:30-12:30")
    with pytest.raises(ValueError, match="ends after its start and within 24 hours of it"):
        Hours.parse("20:00-45:00")
    with pytest.raises(ValueError, match="unknown time zone"):
        Hours.parse("09:00-11:30,12:30-15:00 Asia/Tokio")
    # one zone written after each window is the same clock: taken
    assert Hours.parse("09:00-11:30 Asia/Tokyo, 12:30-15:00 Asia/Tokyo") == Hours(
        ((32400, 41400), (45000, 54000)), "Asia/Tokyo")


def test_jpx_past_24_notation_keeps_the_night_session(tmp_path: Path) -> None:
    """JPX writes Osaka's night session as 16:30-30:00 (06:00 the next day): it was refused as no window."""
    path = tmp_path / "nk225.csv"
    path.write_text("time,symbol,price,size\n"
                    "2024-04-04T07:00:00Z,NK225M2406,39000,1\n"   # 16:00 JST: before the open
                    "2024-04-04T07:30:00Z,NK225M2406,39005,1\n"   # 16:30 JST: the open
                    "2024-04-04T20:59:00Z,NK225M2406,39010,1\n"   # 05:59 JST the next day
                    "2024-04-04T21:00:00Z,NK225M2406,39015,1\n")  # 06:00 JST: the close, excluded
    assert Hours.parse("16:30-30:00") == Hours.parse("16:30-06:00")
    kept = drain(FileReplay(path, columns={"hours": "16:30-30:00 Asia/Tokyo"}))
    assert [(t.ts, t.price) for t in kept] == [(ns("2024-04-04T07:30:00+00:00"), 39005),
                                                (ns("2024-04-04T20:59:00+00:00"), 39010)]
