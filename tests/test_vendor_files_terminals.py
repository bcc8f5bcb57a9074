"""Terminal exports read as the analyst who saved them means them (review291): Bloomberg's error cells in a ticker
column, its tick dumps and field mnemonics, LSEG's `GMT Offset` as `+05:30`, title blocks above the header, a full
map's unread size. Every fixture is written here, from code, into tmp_path."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from connectors.replay import FileReplay
from conftest import drain


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
