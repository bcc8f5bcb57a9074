"""review336 #6, #7, #11: DTN IQFeed's clock is US Eastern, whatever --tz another file of the run needs, and its
day is the feed's own (its `T,` time stamp lines, else the Most Recent Trade Date a capture selects) before the
one its file's name holds. Each capture is written here as IQFeed's port 5009 sends it."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import drain, ns
from connectors.map_options import map_from_options
from connectors.replay import FileReplay

FIELDS = ("S,CURRENT UPDATE FIELDNAMES,Symbol,Most Recent Trade,Most Recent Trade Size,Most Recent Trade Time,"
          "Most Recent Trade Date,Total Volume,Bid,Bid Size,Ask,Ask Size,Message Contents\n")


def capture(path: Path, day: str, stamp: str | None = None) -> Path:
    """A summary, then a trade at 10:00:00.5 ET and a bid change at 10:00:01; `day` in Most Recent Trade Date."""
    path.write_text(FIELDS + (f"T,{stamp} 10:00:00\n" if stamp else "") +
                    f"P,@ESZ26,6849.75,1,09:59:59.100000,{day},100000,6849.50,20,6849.75,30,\n"
                    f"Q,@ESZ26,6850.00,2,10:00:00.500000,{day},100002,6849.50,20,6849.75,30,C\n"
                    f"Q,@ESZ26,6850.00,2,10:00:00.500000,{day},100002,6849.75,5,6850.00,30,b\n")
    return path


def test_a_capture_selecting_most_recent_trade_date_is_read_on_that_day(tmp_path: Path) -> None:
    replay = FileReplay(capture(tmp_path / "capture_l1.txt", "11/30/2026"))  # no `T,` line, no date in its name
    assert [t.ts for t in drain(replay)][0] == ns("2026-11-30T10:00:00.5-05:00")
    assert any(n.startswith("capture_l1.txt: the day is 2026-11-30, from its lines' Most Recent Trade Date (its "
                            "name holds none)") for n in replay.notes), replay.notes


def test_a_capture_with_no_date_anywhere_names_every_way_to_give_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no `T,YYYYMMDD HH:MM:SS` time stamp line \(the feed sends one a second\), "
                                         r"no Most Recent Trade Date field .* --columns date=YYYY-MM-DD"):
        FileReplay(capture(tmp_path / "capture_l1.txt", ""))


def test_the_feeds_clock_wins_over_a_trade_date_in_the_files_name(tmp_path: Path) -> None:
    """A CME session file named by its trade date (Monday) opens Sunday 18:00 ET: its `T,` lines say Sunday."""
    path = tmp_path / "ESZ26_2026-11-30.txt"
    path.write_text(FIELDS + "T,20261129 18:00:00\n"
                    "P,@ESZ26,6849.75,1,17:59:59.100000,11/29/2026,100000,6849.50,20,6849.75,30,\n"
                    "Q,@ESZ26,6850.00,2,18:00:00.500000,11/29/2026,100002,6849.50,20,6849.75,30,C\n")
    replay = FileReplay(path)
    assert [t.ts for t in drain(replay)] == [ns("2026-11-29T18:00:00.5-05:00")]
    assert any("the day is 2026-11-29, from its first `T,` time stamp line (the feed's clock), not its name's "
               "2026-11-30" in n and "--date 2026-11-30" in n for n in replay.notes), replay.notes


def test_a_tz_for_the_other_files_of_a_run_leaves_iqfeeds_eastern_clock_alone(tmp_path: Path) -> None:
    iqfeed = capture(tmp_path / "ESZ26.txt", "11/30/2026", stamp="20261130")
    jpx = tmp_path / "nk225m.csv"
    jpx.write_text("Time,Symbol,Price,Volume\n2026-11-30 09:00:00,NK225M,38000,1\n")
    replay = FileReplay([iqfeed, jpx], columns=map_from_options(tz="Asia/Tokyo", detect=True))
    ticks = drain(replay)
    assert [t.ts for t in ticks if t.stream == "@ESZ26"][0] == ns("2026-11-30T10:00:00.5-05:00")
    assert [t.ts for t in ticks if t.stream == "NK225M"] == [ns("2026-11-30T09:00:00+09:00")]
    said = "\n".join(replay.notes)
    assert "ESZ26.txt: its times are its format's clock, America/New_York, so --tz Asia/Tokyo" in said
    assert "Asia/Tokyo, day" not in said  # the IQFeed file's read-as note names its own zone
    assert "read as ts=time (us_after_midnight, America/New_York, day 2026-11-30)" in said
    alone = FileReplay(iqfeed, columns=map_from_options(tz="Asia/Tokyo", detect=True))  # one file: the same
    assert [t.ts for t in drain(alone)][0] == ns("2026-11-30T10:00:00.5-05:00")
