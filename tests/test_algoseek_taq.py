"""Algoseek's US equity TAQ CSV (`Date,Timestamp,EventType,Ticker,Price,Quantity,Exchange,Conditions`, one row per
event, its kind in EventType): trades and the national best bid and offer read right, with --preset algoseek-taq,
detected by its header, and an event column spelled as Algoseek spells it read as a row-kind column in any file.
Every file is written here into tmp_path (review322 #2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.replay import FileReplay
from conftest import drain

HEADER = "Date,Timestamp,EventType,Ticker,Price,Quantity,Exchange,Conditions"
ROWS = ("20240102,09:30:00.100,QUOTE BID NB,AAPL,185.50,300,NASDAQ,00000001",
        "20240102,09:30:00.150,QUOTE BID,AAPL,185.40,900,BATS,00000001",  # a venue's bid below the national best
        "20240102,09:30:00.200,QUOTE ASK NB,AAPL,185.52,200,ARCA,00000001",
        "20240102,09:30:00.250,QUOTE ASK,AAPL,185.60,100,EDGX,00000001",  # a venue's ask above it
        "20240102,09:30:00.300,TRADE,AAPL,185.52,100,NASDAQ,@",
        "20240102,09:30:00.400,QUOTE BID NB,AAPL,185.51,500,NASDAQ,00000001",
        "20240102,09:30:00.500,TRADE NB,AAPL,185.51,50,ARCA,@",
        "20240102,09:30:00.600,TRADE CANCELLED,AAPL,185.51,50,ARCA,@")
NEW_YORK_0930 = 1_704_205_800_000_000_000  # 2024-01-02 09:30 in New York: 14:30 UTC
MS = 1_000_000


def taq_file(tmp_path: Path, header: str = HEADER, rows: tuple[str, ...] = ROWS) -> Path:
    path = tmp_path / "AAPL.csv"
    path.write_text("\n".join((header, *rows)) + "\n")
    return path


def test_the_preset_reads_trades_and_the_national_best_quote(tmp_path: Path) -> None:
    path = taq_file(tmp_path)
    for spec in ("algoseek-taq", None):  # by name, and detected by its header
        replay = FileReplay(path, columns=spec)
        ticks = drain(replay)
        assert [(t.kind, (t.ts - NEW_YORK_0930) // MS) for t in ticks] == \
            [("quote", 200), ("trade", 300), ("quote", 400), ("trade", 500)], spec
        # the quotes are the national best: the venues' own bid 185.40 and ask 185.60 never show, not even as the
        # side a quote row takes from the stream's previous one
        assert [(t.bid, t.ask, t.bid_size, t.ask_size) for t in ticks if t.kind == "quote"] == \
            [(185.50, 185.52, 300, 200), (185.51, 185.52, 500, 200)], spec
        assert [(t.price, t.size) for t in ticks if t.kind == "trade"] == [(185.52, 100), (185.51, 50)], spec
        # the first bid has no ask before it; the venues' quotes and the cancelled trade are left out and counted
        assert dict(replay.rejected) == {"missing_field": 1, "filtered_out": 3}, spec


def test_detection_names_the_preset_and_says_how_quotes_are_read(tmp_path: Path) -> None:
    replay = FileReplay(taq_file(tmp_path), columns=None)
    drain(replay)
    note = next(n for n in replay.notes if "no column map given" in n)
    assert "preset algoseek-taq" in note
    assert "quote_sides=EventType" in note and "bid=Price" not in note


def test_an_event_type_column_of_another_layout_reads_its_quote_rows_as_quotes(tmp_path: Path) -> None:
    # Algoseek's marks under a layout no preset has (no Exchange or Conditions column): detection reads the
    # EventType column's quote rows as quote sides, not as trades at the bid and the ask
    rows = [",".join(r.split(",")[:6]) for r in ROWS[:5]]
    path = taq_file(tmp_path, "Date,Timestamp,EventType,Ticker,Price,Quantity", tuple(rows))
    replay = FileReplay(path, columns=None)
    ticks = drain(replay)
    assert [t.kind for t in ticks] == ["quote", "quote", "trade"]  # the first two: a bid with no ask before it
    assert (ticks[-2].bid, ticks[-2].ask) == (185.40, 185.60)
    assert any("column \"EventType\" marks each row's one field" in n for n in replay.notes)


def test_quote_sides_over_marks_it_does_not_know_is_refused_naming_them(tmp_path: Path) -> None:
    # review322 #3: a map's quote_sides over marks outside its vocabulary rejected 3 rows in 4 as having "neither
    # 'price' nor 'bid'/'ask'"; the map is refused instead, naming the marks unmatched and the values seen
    rows = ("20240102,09:30:00.100,QUOTE BID,AAPL,185.50,300,NASDAQ,1",
            "20240102,09:30:00.200,ROTATION ASK,AAPL,185.52,200,ARCA,1",
            "20240102,09:30:00.300,TRADE,AAPL,185.52,100,NASDAQ,@",
            "20240102,09:30:00.400,NO_QUOTE BID,AAPL,0,0,NASDAQ,1")
    path = taq_file(tmp_path, rows=rows)
    columns = {"ts": "Date+Timestamp", "ts_format": "%Y%m%d %H:%M:%S%.f", "stream_col": "Ticker", "price": "Price",
               "size": "Quantity", "quote_sides": "EventType"}  # as --columns FILE.yaml gives it
    with pytest.raises(ValueError) as refused:
        FileReplay(path, columns=columns)
    message = str(refused.value)
    assert '"NO_QUOTE BID", "ROTATION ASK" are none it knows' in message
    assert "values seen: NO_QUOTE BID, QUOTE BID, ROTATION ASK, TRADE" in message
    assert "keep: {EventType: [...]}" in message
    # the marks a keep leaves out are no concern: the rest read, those rows counted as filtered_out
    replay = FileReplay(path, columns=columns | {"keep": {"EventType": ["QUOTE BID", "TRADE"]}})
    assert [t.kind for t in drain(replay)] == ["trade"]
    assert dict(replay.rejected) == {"missing_field": 1, "filtered_out": 2}
