"""A lone print (a fat finger: ten times the level for one trade, then back) is said as a caution naming the stream,
the count and the first's line, time and price, and replayed as read; a genuine jump that stays, a fast market,
a print the map's keep filter leaves out and the shared real data get none. Real files in tmp_path (and
../shared/data), read by the real replay."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from connectors.price_units import two_levels
from connectors.replay import FileReplay
from connectors.ticks import TRADE
from conftest import drain

N = 400
BAD = 200  # the row of the fat finger (line 202 of the CSV)


def walk(seed: int = 7, volatility: float = 0.0004) -> np.ndarray:
    """A trade price's random walk around 61,800 with a bid-ask bounce, in cents."""
    rng = np.random.default_rng(seed)
    mid = 61_800 * np.exp(np.cumsum(rng.standard_t(3, N) * volatility))
    return np.round(mid + rng.choice([-0.005, 0.005], N), 2)


def trades_file(path: Path, prices: np.ndarray, **columns: list) -> Path:
    pl.DataFrame({"timestamp": [f"2024-08-09T00:{i // 60:02d}:{i % 60:02d}.250Z" for i in range(N)],
                  "symbol": "BTCUSDT", "price": prices, "size": 0.01, **columns}).write_csv(path)
    return path


def lone_notes(replay: FileReplay) -> list[str]:
    return [note for note in replay.notes if "lone print" in note]


def test_a_fat_finger_print_is_said_with_its_stream_line_time_and_price_and_replayed(tmp_path: Path) -> None:
    prices = walk()
    prices[BAD] = round(prices[BAD] * 10, 2)
    replay = FileReplay(trades_file(tmp_path / "trades.csv", prices))
    ticks = drain(replay)
    assert len(ticks) == N and ticks[BAD].price == prices[BAD]  # said, not dropped: the user decides
    [said] = lone_notes(replay)
    assert said in replay.cautions  # said again at the end of a run
    assert said.startswith("trades.csv: 1 lone print(s) far from both neighbours, which agree with each other (a fat "
                           "finger or bad print?): BTCUSDT 1. The first, line 202 (BTCUSDT, "
                           "2024-08-09T00:03:20.250000000Z), a trade price of "
                           f"{prices[BAD]:.10g} between {prices[BAD - 1]:.10g} and {prices[BAD + 1]:.10g}: "), said
    assert "write the file without those rows (line 202), or leave them out with a keep filter" in said


def test_a_jump_that_stays_and_a_fast_market_get_no_caution(tmp_path: Path) -> None:
    jump = walk()
    jump[BAD:] = np.round(jump[BAD:] * 1.10, 2)  # 10% up at one trade, and trading there on
    fast = walk(seed=11, volatility=0.004)  # ten times as volatile, heavy tailed
    fast[BAD:] = np.round(fast[BAD:] * 0.9, 2)
    halfway = walk()
    halfway[BAD], halfway[BAD + 1:] = halfway[BAD] * 10, np.round(halfway[BAD + 1:] * 5, 2)  # retraces halfway
    for name, prices in (("jump", jump), ("fast", fast), ("halfway", halfway)):
        replay = FileReplay(trades_file(tmp_path / f"{name}.csv", prices))
        assert len(drain(replay)) == N and lone_notes(replay) == [], name


def test_a_bad_print_the_keep_filter_leaves_out_is_not_said(tmp_path: Path) -> None:
    prices = walk()
    prices[BAD] = round(prices[BAD] * 10, 2)
    marks = ["00"] * N
    marks[BAD] = "07"  # TAQ's TR_CORR: the print was cancelled, and the layout reads regular prints only
    replay = FileReplay(trades_file(tmp_path / "taq.csv", prices, TR_CORR=marks))
    assert len(drain(replay)) == N - 1 and lone_notes(replay) == []
    assert replay.rejected["filtered_out"] == 1


def test_a_bad_quote_is_said_by_its_mid(tmp_path: Path) -> None:
    bids = walk(seed=3)
    asks = bids + 0.01
    bids[BAD], asks[BAD] = bids[BAD] / 10, asks[BAD] / 10
    pl.DataFrame({"timestamp": [f"2024-08-09T00:{i // 60:02d}:{i % 60:02d}.250Z" for i in range(N)],
                  "symbol": "BTCUSDT", "bid": bids, "ask": asks}).write_parquet(tmp_path / "bbo.parquet")
    replay = FileReplay(tmp_path / "bbo.parquet")
    [said] = lone_notes(replay)
    assert "BTCUSDT 1. The first, row 201 (BTCUSDT, 2024-08-09T00:03:20.250000000Z), a quote's mid of " in said


@pytest.mark.parametrize("name", ["binance-btcusdt-spot/trades.csv", "binance-btcusdt-spot/bbo.parquet",
                                  "binance-ethusdt-spot/trades.csv", "binance-ethusdt-spot/bbo.parquet",
                                  "dukascopy-eurusd/eurusd_ticks_2019-02-04_05.parquet"])
def test_the_shared_real_data_has_no_lone_prints(shared_data: Path, name: str) -> None:
    # the largest there: a BTCUSDT sweep's print 8 USDT off and back, 7.4 usual large moves (the caution takes 50)
    assert lone_notes(FileReplay(shared_data / name)) == []


def two_levels_notes(replay: FileReplay) -> list[str]:
    return [note for note in replay.notes if "between the two levels is scored as a move" in note]


def test_prices_at_two_levels_in_one_stream_are_said_and_a_fat_finger_is_not(tmp_path: Path) -> None:
    """review440 #2, #4: pence beside pounds in one stream, trades against quotes (LSE's GBp trades, GBP quotes) or
    one column's cells (Excel's `£0.7250` beside `72.50`), replayed as +-99% moves without a word. Each gets a
    caution naming the stream, the levels and the first line; one fat finger (a lone print) is no second level."""
    pence = walk() / 1000  # around 61.8
    mixed = np.where(np.arange(N) % 3 == 0, np.round(pence / 100, 4), pence)
    replay = FileReplay(trades_file(tmp_path / "mixed.csv", mixed))
    [said] = two_levels_notes(replay)
    assert said.startswith("mixed.csv: BTCUSDT's trade prices jump about 100-fold from one tick to the next 266 "
                           "times in 399 (the first, line 3: ") and "a price unit's ratio apart" in said, said
    quote = np.arange(N) % 2 == 0  # a quote in pounds, then a trade in pence
    quoted = trades_file(tmp_path / "kinds.csv", [None if q else p for q, p in zip(quote, pence)],
                         bid=[(p - 0.01) / 100 if q else None for q, p in zip(quote, pence)],
                         ask=[(p + 0.01) / 100 if q else None for q, p in zip(quote, pence)])
    [said] = two_levels_notes(FileReplay(quoted))
    assert said.startswith("kinds.csv: BTCUSDT's trades print about 100-fold above the quotes they met (200 of 200 "
                           "trades; the first, line 3: "), said
    fat = walk()
    fat[BAD] *= 10
    assert two_levels_notes(FileReplay(trades_file(tmp_path / "fat.csv", fat))) == []


def hourly_trades(prices: np.ndarray) -> pl.DataFrame:
    """One stream's trades an hour apart as lone_prints.priced_rows gives them (two_levels' input)."""
    hours = np.arange(len(prices))
    return pl.DataFrame({"stream": "X", "kind": TRADE, "_row": hours, "_ts": hours * 3_600 * 10**9, "value": prices})


def test_a_power_market_near_zero_is_no_second_unit_and_fils_beside_dinars_are() -> None:
    """verify55 R2: an auction's hours at 0.01 or 15 EUR/MWh beside 75 jump 3-fold and more back and forth, but by
    ratios all over, never one unit's: no caution. Levels a unit's ratio apart (1,000: fils beside dinars) get one."""
    rng = np.random.default_rng(5)
    power = np.round(rng.uniform(40, 95, 200), 2)
    power[rng.random(200) < 0.15] = 0.01  # surplus solar hours at the floor, OMIE's 75 -> 0.01
    power[rng.random(200) < 0.05] = 15.0  # ENTSO-E FR's 81.07 -> 15
    assert two_levels(hourly_trades(power)) == []
    fils = 61.8 * np.exp(np.cumsum(rng.normal(0, 0.001, 200)))  # a Kuwaiti stock's price in dinars
    fils[::4] *= 1000  # one cell in four in fils
    [mixed] = two_levels(hourly_trades(fils))
    assert mixed.interleaved and round(mixed.fold) == 1000 and mixed.count == 99, mixed  # in and out


def test_the_advice_to_read_the_trades_alone_keeps_them_by_the_kind_column_and_works(tmp_path: Path) -> None:
    """verify55 R4: the caution advised a map of the trades' columns, which leaves LSEG's Type unread: followed,
    every quote row was rejected as missing_field. It gives the keep on Type; followed, the quotes are filtered."""
    quote = np.arange(N) % 2 == 0
    pence = walk() / 1000
    path = trades_file(tmp_path / "lseg.csv", [None if q else p for q, p in zip(quote, pence)],
                       bid=[(p - 0.01) / 100 if q else None for q, p in zip(quote, pence)],
                       ask=[(p + 0.01) / 100 if q else None for q, p in zip(quote, pence)],
                       Type=["Quote" if q else "Trade" for q in quote])
    [said] = two_levels_notes(FileReplay(path))
    assert "read one kind only: --columns FILE.yaml with keep: {Type: [Trade]} reads the trades alone" in said, said
    followed = FileReplay(path, columns={"keep": {"Type": ["Trade"]}})
    assert len(drain(followed)) == N // 2 and dict(followed.rejected) == {"filtered_out": N // 2}
    assert two_levels_notes(followed) == []
