"""NinjaTrader 8 exports as a futures trader's platform writes them (no header, `;`): tick files whose first rows
hold a bad quote, minute bars, one-sided `.Bid.txt` / `.Ask.txt` files and times without a fraction. Every
fixture is written here, from code, into tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.replay import FileReplay
from connectors.ticks import Tick
from conftest import drain, ns

T0 = ns("2026-03-01T17:00:00+00:00")


def write_ticks(path: Path, first_row: str) -> None:
    # `yyyyMMdd HHmmss fffffff;last;bid;ask;volume`: one bad row at the open, then twenty good ones
    rows = [first_row] + [f"20260301 1700{i:02d} 0000000;{6850 + 0.25 * (i % 2):.2f};6850.00;6850.25;{i % 3 + 1}"
                          for i in range(1, 21)]
    path.write_text("\n".join(rows) + "\n")


@pytest.mark.parametrize("first_row, reason", [
    ("20260301 170000 0000000;6849.75;0;6850.00;1", "missing_field"),  # no bid at the open
    ("20260301 170000 0000000;6849.75;6850.25;6850.00;1", "crossed_quote"),
])
def test_one_bad_quote_among_the_first_rows_is_rejected_not_a_reason_to_misread_the_file(
        tmp_path: Path, first_row: str, reason: str) -> None:
    path = tmp_path / "ES 03-26.Last.txt"
    write_ticks(path, first_row)
    replay = FileReplay(path)
    ticks = drain(replay)
    assert "--csv-names time,price,bid,ask,size" in replay.notes[0]
    assert dict(replay.rejected) == {reason: 1}
    # the bad row's trade is kept; every other row is its quote, then its trade
    assert ticks[0] == Tick("ES 03-26", T0, "trade", price=6849.75, size=1)
    assert ticks[1:3] == [Tick("ES 03-26", T0 + 10**9, "quote", bid=6850.0, ask=6850.25),
                          Tick("ES 03-26", T0 + 10**9, "trade", price=6850.25, size=2)]
    assert len(ticks) == 1 + 2 * 20


def test_a_time_and_more_numbers_than_it_reads_is_refused_not_read_in_part(tmp_path: Path) -> None:
    # a time and four numbers that are neither last/bid/ask/size nor a bar: columns 2-3 alone would drop two
    path = tmp_path / "unknown.txt"
    path.write_text("".join(f"20260301 1700{i:02d};{100 + i};{7 * i + 3};{50 - i};{i * i}\n" for i in range(10)))
    with pytest.raises(ValueError, match=r"layout cannot be guessed: give its 5 columns in order with --csv-names"):
        FileReplay(path)


def test_minute_bars_read_as_bars_stamped_at_their_end(tmp_path: Path) -> None:
    path = tmp_path / "ES 03-26.Last.txt"
    path.write_text("20260301 170100;6849.75;6851.00;6849.50;6850.25;120\n"
                    "20260301 170200;6850.25;6850.75;6849.75;6850.00;80\n"
                    "20260301 170300;6850.00;6850.00;6850.00;6850.00;0\n")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert ticks == [Tick("ES 03-26", T0 + 60 * 10**9, "trade", price=6850.25, size=120),
                     Tick("ES 03-26", T0 + 120 * 10**9, "trade", price=6850.0, size=80),
                     Tick("ES 03-26", T0 + 180 * 10**9, "trade", price=6850.0, size=0)]
    assert "--csv-names time,open,high,low,close,volume" in replay.notes[0]
    bars = next(n for n in replay.notes if "read as bars" in n)
    assert "NinjaTrader stamps a bar with its end" in bars
    assert not any(t.kind == "quote" for t in ticks)


@pytest.mark.parametrize("side", ["Bid", "Ask"])
def test_a_one_sided_export_is_refused_with_the_last_file_named(tmp_path: Path, side: str) -> None:
    path = tmp_path / f"ES 03-26.{side}.txt"
    path.write_text("20260301 170000 0000000;6849.75;3\n20260301 170001 0000000;6850.00;2\n")
    with pytest.raises(ValueError, match=rf'best {side.lower()} alone .* Replay "ES 03-26\.Last\.txt" instead'):
        FileReplay(path)


def test_seconds_without_a_fraction_are_one_reading_not_a_two_way_date(tmp_path: Path) -> None:
    path = tmp_path / "ES.txt"
    path.write_text("20260301 170100;6849.75;6850.00\n20260301 170200;6850.25;6850.50\n")
    ticks = drain(FileReplay(path))
    assert [(t.ts, t.bid, t.ask) for t in ticks] == [(T0 + 60 * 10**9, 6849.75, 6850.0),
                                                     (T0 + 120 * 10**9, 6850.25, 6850.5)]
    # a date that reads as two days is still refused
    (tmp_path / "us.txt").write_text("03/01/2026 17:01:00,6849.75,6850.00\n03/02/2026 17:01:00,6850.25,6850.50\n")
    with pytest.raises(ValueError, match="reads more than one way"):
        drain(FileReplay(tmp_path / "us.txt"))


def test_a_row_whose_price_is_no_number_keeps_its_quote(tmp_path: Path) -> None:
    path = tmp_path / "ES 03-26.Last.txt"
    path.write_text("20260301 170000 0000000;6850.00;6849.75;6850.00;1\n"
                    "20260301 170001 0000000;abc;6849.75;6850.00;2\n"
                    "20260301 170002 0000000;6850.25;6850.00;6850.25;1\n")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert Tick("ES 03-26", T0 + 10**9, "quote", bid=6849.75, ask=6850.0) in ticks
    assert [t.ts for t in ticks if t.kind == "trade"] == [T0, T0 + 2 * 10**9]
    assert dict(replay.rejected) == {"missing_field": 1}
    example = replay.rejected.examples["missing_field"]
    assert "line 2: missing_field: price is missing beside size 2" in example
    assert example.endswith('(column "price": "abc" is not a number)')
