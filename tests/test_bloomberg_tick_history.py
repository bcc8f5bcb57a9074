"""fix374 (review374 #3, #5, #6, #7): Bloomberg tick histories as Excel users save them. `Type` written
`Trade`/`Bid`/`Ask` made the file trades only (its quotes left out as filtered_out); a first row holding the
security alone (`CLK0 Comdty,,,`) was skipped and the stream named after the download (`export (1)`); the
terminal's own header `Dates,Type,Value,Size` was refused with an example map that the file would refuse too; and a
BID above the last ASK (one side moving before the other's row) was rejected as crossed_quote with a "column
misread?" warning. Real files in tmp_path, read by FileReplay (the reader the CLI uses)."""

from __future__ import annotations

import shlex
from collections import Counter
from pathlib import Path

import pytest

from connectors.layout import NoTickLayout
from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain

# one side moves before the other: BID 10.02 comes while the last ASK is 10.01, its ASK 10.03 on the next row
ROWS = [("13:00:01", "BID", "10.00", 5), ("13:00:01", "ASK", "10.01", 5), ("13:00:02", "TRADE", "10.01", 1),
        ("13:00:03", "BID", "10.02", 7), ("13:00:03", "ASK", "10.03", 8), ("13:00:04", "TRADE", "10.03", 2),
        ("13:00:05", "ASK", "10.01", 3), ("13:00:05", "BID", "10.00", 4), ("13:00:06", "TRADE", "10.00", 1)]


def _table(header: str = "Dates,Type,Value,Size", case=str.upper) -> str:
    return header + "\n" + "".join(f"4/20/2020 {t},{case(kind)},{value},{size}\n" for t, kind, value, size in ROWS)


def _wires(path: Path, columns=None) -> tuple[list[dict], FileReplay]:
    replay = FileReplay(path, columns=columns)
    return [t.to_wire() for t in drain(replay)], replay


def test_the_terminals_own_header_is_read_without_a_map_as_a_price_column_is(tmp_path: Path) -> None:
    value, price = tmp_path / "CLM0 Comdty.csv", tmp_path / "price" / "CLM0 Comdty.csv"
    value.write_text(_table())
    price.parent.mkdir()
    price.write_text(_table("Date,Type,Price,Size"))
    ticks, replay = _wires(value)
    assert ticks == _wires(price)[0]
    assert Counter(t["kind"] for t in ticks) == {"trade": 3, "quote": 3}
    assert any("price=Value, size=Size, quote_sides=Type" in note for note in replay.notes), replay.notes


@pytest.mark.parametrize("case", [str.title, str.lower], ids=["Title", "lower"])
def test_row_marks_in_any_case_read_as_bloombergs_capitals(tmp_path: Path, case) -> None:
    upper, other = tmp_path / "CLM0.csv", tmp_path / "other" / "CLM0.csv"
    upper.write_text(_table())
    other.parent.mkdir()
    other.write_text(_table(case=case))
    ticks, replay = _wires(other)
    assert ticks == _wires(upper)[0] and Counter(t["kind"] for t in ticks) == {"trade": 3, "quote": 3}
    assert "filtered_out" not in str(replay.notes)
    marks = ", ".join(case(m) for m in ("TRADE",))
    assert any(f"its {marks} rows are trades" in note for note in replay.notes), replay.notes


def test_lower_case_bid_and_ask_alone_stay_a_takers_side(tmp_path: Path) -> None:
    """Bithumb's `type` of bid and ask alone names its takers' sides: no quote rows, whatever other files do."""
    path = tmp_path / "bithumb.csv"
    path.write_text("transaction_date,type,price,units_traded\n" + "".join(
        f"2024-07-01 09:00:0{i},{('bid', 'ask')[i % 2]},{100 + i},1\n" for i in range(6)))
    ticks, _ = _wires(path)
    assert [t["side"] for t in ticks] == ["buy", "sell"] * 3 and {t["kind"] for t in ticks} == {"trade"}


def test_a_cross_made_by_one_side_moving_first_is_left_out_not_rejected(tmp_path: Path) -> None:
    path = tmp_path / "CLM0 Comdty.csv"
    path.write_text(_table())
    ticks, replay = _wires(path)
    quotes = [(t["bid"], t["ask"]) for t in ticks if t["kind"] == "quote"]
    # the crossed books (10.02 over 10.01; 10.01 under 10.02) never replay; the next row of the other side does
    assert quotes == [(10.0, 10.01), (10.02, 10.03), (10.0, 10.01)]
    assert dict(replay.rejected) == {"missing_field": 1, "filtered_out": 2}  # the first side, before any other
    assert "one side of the book moved before the other's row came" in replay.rejected.examples["filtered_out"]
    assert "crossed_quote" not in dict(replay.rejected)


def test_a_cross_in_a_quote_with_both_sides_on_its_row_is_still_rejected(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text("time,symbol,bid,ask\n2024-07-01T09:00:00Z,X,10.00,10.01\n2024-07-01T09:00:01Z,X,10.02,10.01\n")
    _, replay = _wires(path)
    assert dict(replay.rejected) == {"crossed_quote": 1}


def test_the_security_alone_on_the_first_row_names_the_stream(tmp_path: Path) -> None:
    first, second = tmp_path / "export (1).csv", tmp_path / "export (2).csv"
    first.write_text("CLK0 Comdty,,,\n" + _table("Date,Type,Price,Size"))
    second.write_text('"CLM0 Comdty",,,\n' + _table("Date,Type,Price,Size"))
    ticks, replay = _wires([first, second])
    assert {t["stream"] for t in ticks} == {"CLK0", "CLM0"}
    assert any('stream CLK0, the security its first line names alone, above the header ("CLK0 Comdty", less its '
               'yellow key)' in note for note in replay.notes), replay.notes


def test_a_banner_title_without_a_yellow_key_names_no_stream(tmp_path: Path) -> None:
    path = tmp_path / "prices.csv"
    path.write_text("Kursdaten Export,,,\n" + _table("Date,Type,Price,Size"))
    ticks, _ = _wires(path)
    assert {t["stream"] for t in ticks} == {"prices"}


def test_the_refusals_example_map_is_one_that_reads_the_file(tmp_path: Path) -> None:
    path = tmp_path / "CLM0 Comdty.csv"
    path.write_text(_table("Dates,Type,Last Tick,Size"))
    with pytest.raises(NoTickLayout) as refused:
        drain(FileReplay(path))
    message = str(refused.value)
    assert "--columns 'price=Last Tick'" in message, message
    given = shlex.split(message.split("e.g. ", 1)[1].split(" (", 1)[0])[1]
    ticks, _ = _wires(path, map_from_options(columns=given, detect=True))
    renamed = tmp_path / "renamed" / "CLM0 Comdty.csv"
    renamed.parent.mkdir()
    renamed.write_text(_table())
    assert ticks == _wires(renamed)[0] and len(ticks) == 6
