"""Grain futures in CBOT's cents and eighths of a cent (`450'4` is 450 4/8 = 450.5; futures tick in quarters, '2 '4
'6, options and mini contracts in eighths, '1 to '7; some vendors write `450-4`): `--price-format eighths` reads
them, and a file of them read without it is refused with the option named. Real files in tmp_path, read by
FileReplay (the reader the CLI uses) and by the CLI itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import drain
from connectors.replay import FileReplay
from engine.service.cli import main

HEADER = "timestamp,symbol,price,size\n"


def trades(path: Path, *prices: str, symbol: str = "ZCH4") -> Path:
    path.write_text(HEADER + "".join(f"2024-01-02T14:30:{i:02d}.000Z,{symbol},{price},{i + 1}\n"
                                     for i, price in enumerate(prices)))
    return path


def test_price_format_eighths_reads_quarters_eighths_dashes_and_decimals(tmp_path: Path) -> None:
    path = trades(tmp_path / "zc.csv", "450'0", "450'2", "450'4", "450'6", "451", "1234'6", "450-4", "450.25",
                  "12'3", "-5'4")
    replay = FileReplay(path, columns={"price_format": "eighths"})
    assert [t.price for t in drain(replay)] == [450.0, 450.25, 450.5, 450.75, 451.0, 1234.75, 450.5, 450.25,
                                               12.375]
    assert dict(replay.rejected) == {"nonpositive_price": 1}  # a spread's -5'4 is read (-5.5), then refused as <= 0
    assert "price_format=eighths" in replay.notes[0]


def test_a_digit_past_seven_is_no_eighth_and_its_reject_names_the_form(tmp_path: Path) -> None:
    replay = FileReplay(trades(tmp_path / "zw.csv", "612'4", "612'8", "612'45", symbol="ZWH4"),
                        columns={"price_format": "eighths"})
    assert [t.price for t in drain(replay)] == [612.5]
    assert dict(replay.rejected) == {"missing_field": 2}
    example = replay.rejected.examples["missing_field"]
    assert "\"612'8\" is not a number, nor a price in eighths of a cent (HANDLE'EIGHTHS" in example


def test_eighths_read_without_the_option_are_refused_naming_it(tmp_path: Path) -> None:
    path = trades(tmp_path / "zs.csv", "1234'6", "1235'0", symbol="ZSH4")
    unread = FileReplay(path)
    assert not drain(unread)
    example = unread.rejected.examples["missing_field"]
    assert "(1234'6 is 1234.75), give --price-format eighths" in example
    as_32nds = FileReplay(path, columns={"price_format": "32nds"})
    assert not drain(as_32nds)
    assert "if it is a grain futures price in eighths of a cent, give --price-format eighths" in \
        as_32nds.rejected.examples["missing_field"]
    odd = FileReplay(trades(tmp_path / "odd.csv", "110-33", symbol="X"))  # a fraction of no form: the forms named
    assert not drain(odd) and "--price-format reads fractional prices in 32nds (" in \
        odd.rejected.examples["missing_field"] and "or in eighths of a cent (" in odd.rejected.examples["missing_field"]


def test_the_cli_backtests_a_grain_file_with_price_format_eighths(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture) -> None:
    prices = [f"{450 + i // 4}'{2 * (i % 4)}" for i in range(40)]
    path = trades(tmp_path / "zc.csv", *[p for p in prices])
    assert main(["backtest", str(path), "--out", str(tmp_path / "a.parquet"), "--threads", "1"]) == 2
    assert "give --price-format eighths" in capsys.readouterr().err
    assert main(["backtest", str(path), "--out", str(tmp_path / "a.parquet"), "--threads", "1",
                 "--price-format", "eighths"]) == 0
    assert "replayed 40 ticks (0 rejected)" in capsys.readouterr().out


def test_a_column_mixing_decimals_and_eighths_is_cautioned_at_the_start_as_32nds_are(tmp_path: Path) -> None:
    """A grain file mixing 450.25 and 450'4 lost its eighths' rows with only a reject to say so; now the caution
    32nds get at the start of a run names --price-format eighths and how many cells look like it."""
    path = trades(tmp_path / "zc.csv", *[f"450.{25 * (i % 4):02d}" if i % 2 == 0 else f"450'{2 * (i % 4)}"
                                         for i in range(20)])
    mixed = FileReplay(path)
    assert len(drain(mixed)) == 10 and dict(mixed.rejected) == {"missing_field": 10}
    assert mixed.cautions == [
        "zc.csv: column \"price\" (10 cells) holds prices written like CBOT grains' cents and eighths of a cent "
        "(\"450'2\" is 450.25 in eighths); read as decimals, they are no numbers (their rows rejected). If they are "
        "eighths, give --price-format eighths (column-map key price_format: eighths; docs/replay.md#prices-in-32nds)"]
    as_32nds = FileReplay(path, columns={"price_format": "32nds"})
    assert len(drain(as_32nds)) == 10
    assert [c.split("; ")[1][:40] for c in as_32nds.cautions] == ["read as 32nds, they are no prices (their"]
    read = FileReplay(path, columns={"price_format": "eighths"})
    assert len(drain(read)) == 20 and not read.cautions
    assert not FileReplay(path, columns={"price_format": "decimal"}).cautions  # decimals said: its rejects say why


def test_32nds_read_as_eighths_are_cautioned_by_the_same_rule(tmp_path: Path) -> None:
    replay = FileReplay(trades(tmp_path / "zn.csv", "110-16+", "110-17", "110.5", symbol="ZNH4"),
                        columns={"price_format": "eighths"})
    assert [t.price for t in drain(replay)] == [110.5]
    [caution] = replay.cautions
    assert "column \"price\" (2 cells) holds prices written like CME's 32nds of Treasury futures (\"110-16+\" is " \
        "110.515625 in 32nds); read as eighths, they are no prices (their rows rejected). If they are 32nds, give " \
        "--price-format 32nds" in caution


def test_bloomberg_32nds_in_one_value_column_are_named_once_and_their_rejects_name_the_option(tmp_path: Path) -> None:
    """review374 #8: Bloomberg's tick layout reads one `Value` column as the price, the bid and the ask; the caution
    named it three times, and each row was rejected as unknown_kind ("neither price nor bid/ask present"), no word of
    32nds. The caution names it once; the reject quotes the cell and names --price-format 32nds, which reads them."""
    path = tmp_path / "TYM4 Comdty.csv"
    path.write_text("Dates,Type,Value,Size\n5/14/2024 13:30:01,ASK,110-16+,901\n5/14/2024 13:30:01,BID,110-16,40\n"
                    "5/14/2024 13:30:01,TRADE,110-16,433\n5/14/2024 13:30:04,TRADE,110-15+,45\n")
    columns = {"price": "Value", "ts_format": "%m/%d/%Y %H:%M:%S"}
    replay = FileReplay(path, columns=columns)
    assert drain(replay) == []
    (caution,) = [c for c in replay.cautions if "32nds" in c]
    assert 'column "Value" (4 cells) holds prices written like CME\'s 32nds' in caution and caution.count("Value") == 1
    assert dict(replay.rejected) == {"missing_field": 4}
    said = replay.rejected.examples["missing_field"]
    assert 'line 2: missing_field: price did not read as a number (column "Value": "110-16+" is not a number; ' \
        "if it is a futures price in 32nds, give --price-format 32nds" in said, said
    read = FileReplay(path, columns={**columns, "price_format": "32nds"})
    ticks = drain(read)
    assert [t.price for t in ticks if t.kind == "trade"] == [110.5, 110.484375]
    # (the first ASK, before any BID, is a quote of one side: rejected as before, saying so)
    assert dict(read.rejected) == {"missing_field": 1} and "did not read" not in read.rejected.examples["missing_field"]
    assert [(t.bid, t.ask) for t in ticks if t.kind == "quote"] == [(110.5, 110.515625)]
