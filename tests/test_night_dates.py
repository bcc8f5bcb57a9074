"""A night session exported as times of day with its date in the file name (review375 #2): the rows after
midnight are the next calendar day's, in file order, not the morning before the open re-sorted ahead of it. Every
file is written here, into tmp_path."""

from __future__ import annotations

from pathlib import Path

from conftest import drain, ns
from connectors.map_options import map_from_options
from connectors.replay import FileReplay

# Osaka's night session on 2024-04-04 (JST, UTC+9): 16:30 to 06:00 the next morning
NIGHT = [("16:30:53.094", 39200), ("23:59:42.885", 39210), ("00:00:23.689", 39220), ("05:59:47.255", 39230)]
EXPECTED = [ns("2024-04-04T16:30:53.094+09:00"), ns("2024-04-04T23:59:42.885+09:00"),
            ns("2024-04-05T00:00:23.689+09:00"), ns("2024-04-05T05:59:47.255+09:00")]


def night_file(folder: Path, streams: tuple[str, ...] = ("NK225M2406",)) -> Path:
    path = folder / "NK225M2406_night_20240404.csv"
    path.write_text("time,code,price,volume\n" + "".join(
        f"{clock},{stream},{price},1\n" for stream in streams for clock, price in NIGHT))  # sorted by stream
    return path


def test_the_rows_after_midnight_are_on_the_next_day_in_file_order(tmp_path: Path) -> None:
    path = night_file(tmp_path)
    replay = FileReplay(path, columns=map_from_options(detect=True, date="file_name", tz="Asia/Tokyo"))
    assert [t.ts for t in drain(replay)] == EXPECTED
    said = " ".join(replay.notes)
    assert ("its times of day run past midnight, so its date 2024-04-04 is the day the session opens: 2 row(s) "
            "after the clock wraps (23:59 to 00:00), the first at line 4, are read on the next calendar day") in \
        said, said
    assert "not in time order" not in said, said  # (they were re-sorted, the morning first, blaming the file)


def test_an_hours_window_across_midnight_says_which_rows_are_the_next_days(tmp_path: Path) -> None:
    path = night_file(tmp_path)
    for hours in ("16:30-06:00", "16:30-30:00", "08:45-15:45,16:30-30:00 Asia/Tokyo"):
        replay = FileReplay(path, columns=map_from_options(detect=True, date="file_name", tz="Asia/Tokyo",
                                                           hours=hours))
        assert [t.ts for t in drain(replay)] == EXPECTED, hours
        assert f"before 06:00, the end of the hours window across midnight ({hours})" in " ".join(replay.notes)


def test_each_stream_wraps_on_its_own_in_a_file_sorted_by_stream(tmp_path: Path) -> None:
    path = night_file(tmp_path, ("NK225M2406", "NK225M2409"))
    replay = FileReplay(path, columns=map_from_options(detect=True, date="file_name", tz="Asia/Tokyo"))
    ticks = drain(replay)
    for stream in ("NK225M2406", "NK225M2409"):  # the second's evening stays on the 4th
        assert [t.ts for t in ticks if t.stream == stream] == EXPECTED, stream


def test_a_day_session_and_a_newest_first_night_are_read_as_before(tmp_path: Path) -> None:
    day = tmp_path / "7203_20240405.csv"
    day.write_text("time,code,price,volume\n09:00:00,7203.T,2500,100\n14:59:00,7203.T,2501,100\n")
    replay = FileReplay(day, columns=map_from_options(detect=True, date="file_name", tz="Asia/Tokyo"))
    assert [t.ts for t in drain(replay)] == [ns("2024-04-05T09:00:00+09:00"), ns("2024-04-05T14:59:00+09:00")]
    assert not any("past midnight" in note for note in replay.notes)
    newest = tmp_path / "night_20240404.csv"  # its clock never steps back 12 hours: no wrap to read
    newest.write_text("time,code,price,volume\n00:10:00,X,1,1\n00:00:00,X,2,1\n23:50:00,X,3,1\n")
    replay = FileReplay(newest, columns=map_from_options(detect=True, date="file_name", tz="Asia/Tokyo"))
    drain(replay)
    assert not any("past midnight" in note for note in replay.notes)
