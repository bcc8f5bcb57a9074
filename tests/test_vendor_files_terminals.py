"""Terminal exports read as the analyst who saved them means them (review291): Bloomberg's error cells in a ticker
column, its tick dumps and field mnemonics, LSEG's `GMT Offset` as `+05:30`, title blocks above the header, a full
map's unread size. Every fixture is written here, from code, into tmp_path."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from connectors.replay import FileReplay
from conftest import drain, ns


def test_a_bloomberg_error_cell_in_the_ticker_column_is_a_reject_not_a_stream(tmp_path: Path) -> None:
    path = tmp_path / "bbg.csv"
    tickers = ["VOD LN Equity", "#N/A N/A", "VOD LN Equity", "#N/A Invalid Security", "#VALUE!", "VOD LN Equity"]
    path.write_text("Ticker,Time,Last Price,Volume\n" + "".join(
        f"{t},2024-07-01 08:00:0{i},{72.5 + i / 100:.2f},100\n" for i, t in enumerate(tickers)))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert Counter(t.stream for t in ticks) == {"VOD LN Equity": 3}
    assert dict(replay.rejected) == {"missing_stream": 3}
    first = replay.rejected.examples["missing_stream"]
    assert "line 3" in first and "'#N/A N/A' is a spreadsheet or terminal error value" in first


def test_an_lseg_gmt_offset_written_as_hours_and_minutes_is_read_as_that_offset(tmp_path: Path) -> None:
    header = "#RIC,Domain,Date-Time,GMT Offset,Type,Price,Volume,Bid Price,Bid Size,Ask Price,Ask Size\n"
    rows = [("09:15:00.1", "+05:30", "+5.5", "Quote,,,3100.05,10,3100.50,12"),
            ("09:15:00.2", "+05:30", "+5.5", "Trade,3100.50,5,,,,"),
            ("09:30:00.6", "-04:00", "-4", "Trade,161.19,7,,,,"),
            ("09:30:00.7", "-0400", "-4", "Trade,161.20,7,,,,")]
    written, hours = tmp_path / "clock.csv", tmp_path / "hours.csv"
    written.write_text(header + "".join(f"RELI.NS,Market Price,2024-07-01T{t},{o},{r}\n" for t, o, _, r in rows))
    hours.write_text(header + "".join(f"RELI.NS,Market Price,2024-07-01T{t},{h},{r}\n" for t, _, h, r in rows))
    ticks = [t.to_wire() for t in drain(FileReplay(written))]
    assert ticks == [t.to_wire() for t in drain(FileReplay(hours))]
    assert [t["ts"] for t in ticks[:1]] == [ns("2024-07-01T03:45:00.100+00:00")]
