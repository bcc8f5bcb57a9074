"""A price offset (--price-offset) shifts prices to the decimals the file's price and the offset are written with:
-37.63 + 46 was binary floating point's 8.369999999999997, logged, exported and answered so. CSV files and DBN
records (its own fixed point, shifted by the book reducer) alike; real files in tmp_path, read by FileReplay."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from conftest import drain
from connectors.price_offsets import checked_price_offset, offset_of, shown_offset
from connectors.replay import FileReplay
from connectors.shifted_prices import offset_option


def test_a_shifted_price_keeps_the_decimals_of_the_price_and_the_offset(tmp_path: Path) -> None:
    path = tmp_path / "cl_neg.csv"
    path.write_text("timestamp,symbol,price,size\n2020-04-20T18:29:00Z,CLK0,-37.63,5\n"
                    "2020-04-20T18:30:00Z,CLK0,-0.02,5\n2020-04-20T18:31:00Z,CLK0,10.01,5\n"
                    "2020-04-20T18:32:00Z,CLK0,0.000015,5\n")
    for offset, expected in ((46, [8.37, 45.98, 56.01, 46.000015]),
                             (46.125, [8.495, 46.105, 56.135, 46.125015]),
                             ({"CLK0": 0.1}, [None, 0.08, 10.11, 0.100015])):  # -37.53: rejected, as <= 0
        replay = FileReplay(path, columns={"price_offset": offset})
        prices = [t.price for t in drain(replay)]
        assert prices == [p for p in expected if p is not None], offset


def test_shifted_quotes_too(tmp_path: Path) -> None:
    path = tmp_path / "spread.csv"
    path.write_text("timestamp,symbol,bid,ask\n2024-01-02T15:00:00Z,CLF5-CLG5,-0.07,-0.05\n"
                    "2024-01-02T15:00:01Z,CLF5-CLG5,0.11,0.13\n")
    ticks = drain(FileReplay(path, columns={"price_offset": 1.1}))
    assert [(t.bid, t.ask) for t in ticks] == [(1.03, 1.05), (1.21, 1.23)]


def test_a_dbn_record_s_shifted_price_keeps_its_decimals(tmp_path: Path) -> None:
    dbn = pytest.importorskip("databento_dbn", reason="the dbn extra is not installed")
    from test_replay_dbn import MAR5, NS, trade, write_dbn
    path = write_dbn(tmp_path / "cl.dbn", dbn.Schema.MBO, [trade(1001, MAR5, 0, price=-37_630_000_000),
                                                            trade(1001, MAR5 + NS, 0, price=10_010_000_000)])
    replay = FileReplay(path, columns={"price_offset": 46})
    assert [t.price for t in drain(replay)] == [8.37, 56.01]


def power_periods(tmp_path: Path, periods: int) -> Path:
    """An intraday power file with a stream per delivery period, each trading below zero once (-40 - its index)."""
    path = tmp_path / f"power_{periods}.csv"
    path.write_text("TradeTime,DeliveryStart,Price,Volume\n" + "".join(
        f"2024-05-12T08:{i:02d}:{j * 10:02d}Z,2024-05-12T{10 + i // 4:02d}:{i % 4 * 15:02d}:00Z,"
        f"{(-40 - i) if j == 0 else 20 + j},1.0\n" for i in range(periods) for j in range(3)))
    return path


def test_offset_advice_for_many_streams_is_pasteable(tmp_path: Path) -> None:
    """Review248 #6: an EPEX file of 28 delivery periods below zero got three --price-offset options and '(and one
    for each of the 25 more)', though docs/replay.md promises options to paste. Up to 10 streams, every one's option
    is listed; past them, the one number that lifts them all, which replays every row."""
    columns = {"ts": "TradeTime", "price": "Price", "size": "Volume", "stream_col": "DeliveryStart"}
    few = FileReplay(power_periods(tmp_path, 5), columns=columns)
    drain(few)
    said = few.rejected.examples["nonpositive_price"]
    assert said.count("--price-offset '") == 5 and "more)" not in said, said
    assert "--price-offset '2024-05-12T11:00:00Z=45'" in said
    many = FileReplay(power_periods(tmp_path, 28), columns=columns)
    drain(many)
    said = many.rejected.examples["nonpositive_price"]
    assert "to lift all 28 streams above zero, --price-offset 68 (one number for every stream" in said, said
    assert "and one for each" not in said
    lifted = FileReplay(power_periods(tmp_path, 28), columns={**columns, "price_offset": 68})
    assert len(drain(lifted)) == 84 and not lifted.rejected


def test_offset_advice_and_its_step_caution_are_in_prices_as_read(tmp_path: Path) -> None:
    """review390 #8, #9: a calendar spread at -63.125 .. -58 in Databento's fixed point (x 1e9) was advised
    `--price-offset 'ESZ5-ESH6=63125000001'`, its lowest measured before price_scale; pasted, every answer of the
    stream was flat. And a stream wholly below zero had no step between prices above zero, so the caution that an
    offset makes one step thousands of bps never came. Both are measured on the prices as read."""
    prices = [-63.125, -62.875, -60.5, -58.0]
    path = tmp_path / "spread.csv"
    path.write_text("ts_event,symbol,price,size\n" + "".join(
        f"{1763130600 * 10**9 + i},ESZ5-ESH6,{round(p * 1e9)},1\n" for i, p in enumerate(prices)))
    columns = {"ts": "ts_event", "stream_col": "symbol", "price": "price", "size": "size", "price_scale": 1e9}
    refused = FileReplay(path, columns=columns)
    drain(refused)
    said = refused.rejected.examples["nonpositive_price"]
    assert "the lowest price in the files: ESZ5-ESH6 -63.125: to lift each stream above zero, --price-offset " \
           "'ESZ5-ESH6=64'" in said, said
    lifted = FileReplay(path, columns={**columns, "price_offset": {"ESZ5-ESH6": 64}})
    assert [t.price for t in drain(lifted)] == [0.875, 1.125, 3.5, 6.0]
    assert any("lifts ESZ5-ESH6's lowest price -63.125 to 0.875, where one step of its price (0.25) is 2857 bps"
               in n for n in lifted.notes), lifted.notes


@pytest.mark.parametrize("stream", ["SPOT|SE3", "ES[H27]", "CLK0"])
def test_an_offset_option_names_its_stream_as_the_option_reads_it(stream: str) -> None:
    """verify55 R1: a stream named with a '|' (which joins several offsets) was advised `--price-offset 'A|B=17'`,
    refused when pasted; a glob character made the name a pattern of other streams too. Pasted as a shell hands it
    over, then joined with another as the option joins repeats, the advice shifts that stream alone."""
    pasted = shlex.split(offset_option(stream, 17))[1]
    offset = checked_price_offset(f"{pasted}|FR=2")
    assert offset_of(offset, stream) == 17 and offset_of(offset, "FR") == 2
    assert offset_of(offset, "SPOTxSE3") == offset_of(offset, "ESH") == 0
    assert checked_price_offset(shown_offset(offset)) == offset  # as a checkpoint's reading record writes it back
