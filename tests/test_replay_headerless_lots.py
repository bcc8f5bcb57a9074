"""A header-less CSV of a time and two numbers whose second is a trade's size in round lots (a Treasury blotter:
`2024-01-02 13:30:02.045000,99.523438,100`, 100-lots within 1% of a bond at 99.5 on most rows) is read as trades,
the layout weighed over every sampled row; a real two-price quote file still reads as quotes, and a header-less
quote row whose ask is past 1.2x its bid is rejected as wide_quote, counted, not replayed (review379 #1).
Byte-exact fixtures written to tmp_path, read by FileReplay (the reader the CLI uses)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.cautions import Caution
from connectors.replay import FileReplay
from conftest import drain

# a bond desk's trade blotter: time, decimal price in 1/128ths, lot (100 on most rows, 250, 500, 1000)
BLOTTER = (
    "2024-01-02 13:30:02.045000,99.523438,100\n"
    "2024-01-02 13:30:04.488000,99.523438,100\n"
    "2024-01-02 13:30:06.415000,99.515625,1000\n"
    "2024-01-02 13:30:06.671000,99.507812,100\n"
    "2024-01-02 13:30:08.427000,99.507812,100\n"
    "2024-01-02 13:30:08.658000,99.5,100\n"
    "2024-01-02 13:30:09.189000,99.507812,100\n"
    "2024-01-02 13:30:11.180000,99.515625,100\n"
    "2024-01-02 13:30:12.098000,99.515625,100\n"
    "2024-01-02 13:30:15.023000,99.507812,1000\n"
    "2024-01-02 13:30:17.436000,99.515625,100\n"
    "2024-01-02 13:30:18.673000,99.515625,100\n"
    "2024-01-02 13:30:20.704000,99.523438,250\n"
    "2024-01-02 13:30:20.980000,99.53125,100\n"
    "2024-01-02 13:30:23.700000,99.523438,100\n"
    "2024-01-02 13:30:26.350000,99.515625,100\n"
    "2024-01-02 13:30:27.534000,99.523438,100\n"
    "2024-01-02 13:30:30.157000,99.523438,100\n"
    "2024-01-02 13:30:31.835000,99.53125,1000\n"
    "2024-01-02 13:30:34.464000,99.523438,100\n"
    "2024-01-02 13:30:36.820000,99.53125,500\n"
    "2024-01-02 13:30:36.923000,99.523438,100\n"
    "2024-01-02 13:30:37.994000,99.523438,1000\n"
    "2024-01-02 13:30:38.683000,99.523438,100\n"
    "2024-01-02 13:30:39.638000,99.53125,100\n"
    "2024-01-02 13:30:40.655000,99.523438,100\n"
    "2024-01-02 13:30:41.569000,99.53125,250\n"
    "2024-01-02 13:30:42.969000,99.523438,500\n"
    "2024-01-02 13:30:45.388000,99.515625,100\n"
    "2024-01-02 13:30:46.415000,99.507812,500\n"
)

# a half-point-wide bond quote and a tight one, the ask written whole: quotes, not sizes
QUOTES = (
    "2024-01-02 13:30:02.045000,99.5,100\n"
    "2024-01-02 13:30:04.488000,99.515625,100\n"
    "2024-01-02 13:30:06.415000,99.523438,99.6\n"
    "2024-01-02 13:30:06.671000,99.53125,100\n"
    "2024-01-02 13:30:08.427000,99.5,100\n"
    "2024-01-02 13:30:08.658000,99.507812,100\n"
    "2024-01-02 13:30:09.189000,99.523438,99.6\n"
    "2024-01-02 13:30:11.180000,99.515625,1000\n"
    "2024-01-02 13:30:12.098000,99.5,100\n"
    "2024-01-02 13:30:15.023000,99.53125,100\n"
)


def test_a_trade_blotter_of_round_lots_is_read_as_price_and_size(tmp_path: Path) -> None:
    path = tmp_path / "UST10Y_trades.csv"
    path.write_bytes(BLOTTER.encode())
    replay = FileReplay(path)
    ticks = drain(replay)
    assert len(ticks) == 30 and dict(replay.rejected) == {}
    assert all(t.kind == "trade" and t.bid is None for t in ticks)
    assert [(t.price, t.size) for t in ticks[:3]] == [(99.523438, 100.0), (99.523438, 100.0), (99.515625, 1000.0)]
    assert sorted({t.size for t in ticks}) == [100.0, 250.0, 500.0, 1000.0]
    said = replay.notes[0]
    assert "no header row; read as a time, a price and a size" in said and "(--csv-names time,price,size)" in said
    assert "100, 250, 500, 1000: round lots" in said and "on 9 of the 30 rows sampled it is at least 2x" in said
    assert "--csv-names time,bid,ask reads a quote" in said
    assert not any(isinstance(note, Caution) for note in replay.notes)


def test_the_blotter_named_as_quotes_rejects_each_row_wider_than_the_guess_allows(tmp_path: Path) -> None:
    path = tmp_path / "UST10Y_trades.csv"
    path.write_bytes(BLOTTER.encode())
    replay = FileReplay(path, columns={"names": ["time", "bid", "ask"]})
    ticks = drain(replay)
    assert all(t.kind == "quote" and t.ask <= 1.2 * t.bid for t in ticks)
    assert len(ticks) == 21 and dict(replay.rejected) == {"wide_quote": 9}
    example = replay.rejected.examples["wide_quote"]
    assert "UST10Y_trades.csv line 3: wide_quote: ask 1000.0 is 10.05x its bid 99.515625, past the 20%" in example


def test_a_two_price_quote_file_with_its_ask_whole_still_reads_as_quotes(tmp_path: Path) -> None:
    path = tmp_path / "ty_quotes.csv"
    path.write_bytes(QUOTES.encode())
    replay = FileReplay(path)
    ticks = drain(replay)
    assert "no header row; read as a time and two numbers (--csv-names time,bid,ask)" in replay.notes[0]
    assert all(t.kind == "quote" for t in ticks) and (ticks[0].bid, ticks[0].ask) == (99.5, 100.0)
    # its one fat-fingered ask (1000 on a 99.5 bond) is no market: rejected by its own reason, the rest replayed
    assert len(ticks) == 9 and dict(replay.rejected) == {"wide_quote": 1}
    assert "line 8: wide_quote: ask 1000.0 is 10.05x its bid 99.515625" in replay.rejected.examples["wide_quote"]


def test_a_whole_second_number_far_from_the_first_that_repeats_no_lot_is_refused_naming_both_readings(
        tmp_path: Path) -> None:
    rows = [f"2024-01-02 13:30:{i:02d}.000000,99.5,{100 + i}\n" for i in range(14)]
    rows += [f"2024-01-02 13:31:{i:02d}.000000,99.5,{250 + 17 * i}\n" for i in range(6)]
    path = tmp_path / "mixed.csv"
    path.write_bytes("".join(rows).encode())
    with pytest.raises(ValueError) as refused:
        FileReplay(path)
    said = str(refused.value)
    assert "its two numbers read as neither a quote nor a trade" in said
    assert "on 6 of the 20 rows sampled it is at least 2x the first (99.5 / 250)" in said
    assert "--csv-names time,price,size reads a trade's price and size, --csv-names time,bid,ask a quote" in said
