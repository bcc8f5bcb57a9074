"""Bar files (OHLC/OHLCV) as vendors publish them, each replayed as one trade per bar at its close: Binance's
public klines (no header; ms, and us from 2025), a Yahoo-style daily CSV, Polygon/Massive's aggregates flat files
(Parquet, ns starts) and a minute-bar CSV with a UTC offset. Read without options, asserting the ticks and the
note that says they are bars; the klines also through `flashtick backtest`. Every fixture is written here."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from conftest import drain, ns, tiny_tick_checkpoint
from connectors.replay import FileReplay
from connectors.ticks import Tick
from engine.service.backtest import rejected_lines
from engine.service.cli import main
from test_vendor_files_without_options import QUERIES

KLINE_T0_MS = 1704153600000  # 2024-01-02T00:00:00Z


def klines(n: int, t0: int, step: int) -> list[list[str]]:
    """Binance's public kline rows: open_time, open, high, low, close, volume, close_time, quote_volume, count,
    taker_buy_volume, taker_buy_quote_volume, ignore; times in the unit of t0/step."""
    rows = []
    for i in range(n):
        close = 42000.0 + 0.5 * i
        rows.append([str(t0 + i * step), f"{close - 1:.2f}", f"{close + 3:.2f}", f"{close - 4:.2f}", f"{close:.2f}",
                     f"{10 + i / 8:.5f}", str(t0 + (i + 1) * step - 1), "1.0", str(100 + i), "5.0", "1.0", "0"])
    return rows


@pytest.mark.parametrize("unit_ns", [1_000_000, 1_000])  # ms, and us as Binance writes them from 2025
def test_binance_public_klines_replay_one_trade_per_bar_at_its_close_time(tmp_path: Path, unit_ns: int) -> None:
    per_ms = 1_000_000 // unit_ns
    path = tmp_path / "BTCUSDT-1m-2024-01-02.csv"
    path.write_text("".join(",".join(row) + "\n" for row in klines(30, KLINE_T0_MS * per_ms, 60_000 * per_ms)))
    replay = FileReplay(path)
    ticks = drain(replay)
    bar_ns = 60_000_000_000
    assert ticks[0] == Tick("BTCUSDT", ns("2024-01-02T00:00:00+00:00") + bar_ns - unit_ns, "trade",
                            price=42000.0, size=10.0)
    assert ticks[-1].price == 42014.5 and ticks[-1].size == 10 + 29 / 8 and len(ticks) == 30
    assert [b.ts - a.ts for a, b in zip(ticks, ticks[1:])] == [bar_ns] * 29
    assert "read as preset binance-public-klines" in replay.notes[0] and "ts=close_time" in replay.notes[0]


def test_yahoo_style_daily_bars_read_at_the_close_with_their_volume(tmp_path: Path) -> None:
    days = pl.date_range(pl.date(2020, 1, 2), pl.date(2020, 1, 31), eager=True)
    bars = pl.DataFrame({"Date": days, "Open": [75.0 + i for i in range(len(days))],
                         "High": [76.5 + i for i in range(len(days))], "Low": [74.0 + i for i in range(len(days))],
                         "Close": [75.25 + i for i in range(len(days))],
                         "Adj Close": [74.9 + i for i in range(len(days))],
                         "Volume": [10_000_000 + i for i in range(len(days))]})
    bars.write_csv(tmp_path / "AAPL.csv")
    replay = FileReplay(tmp_path / "AAPL.csv")
    ticks = drain(replay)
    assert ticks[0] == Tick("AAPL", ns("2020-01-02T00:00:00+00:00"), "trade", price=75.25, size=10_000_000)
    assert [t.price for t in ticks] == bars["Close"].to_list()
    assert replay.notes[0] == ("AAPL.csv: no column map given; read as ts=Date (datetime), stream_name=AAPL, "
                               "price=Close, size=Volume")
    assert replay.notes[1].startswith("AAPL.csv: read as bars: each row is one trade at its close (Close, size "
                                      'Volume, no side), stamped with its "Date" column')


def test_polygon_aggregates_parquet_and_minute_bars_with_an_offset(tmp_path: Path) -> None:
    start = ns("2024-03-04T14:30:00+00:00")
    pl.DataFrame({"ticker": ["AAPL", "MSFT"] * 5, "volume": [1000 + i for i in range(10)],
                  "open": [170.0 + i for i in range(10)], "close": [170.5 + i for i in range(10)],
                  "high": [171.0 + i for i in range(10)], "low": [169.5 + i for i in range(10)],
                  "window_start": [start + (i // 2) * 60_000_000_000 for i in range(10)],
                  "transactions": [50 + i for i in range(10)]}).write_parquet(tmp_path / "2024-03-04.parquet")
    replay = FileReplay(tmp_path / "2024-03-04.parquet")
    ticks = drain(replay)
    assert ticks[:2] == [Tick("AAPL", start, "trade", price=170.5, size=1000),
                         Tick("MSFT", start, "trade", price=171.5, size=1001)]
    assert "ts=window_start (ns), stream=ticker, price=close, size=volume" in replay.notes[0]
    assert "read as bars" in replay.notes[1]
    (tmp_path / "es_1min.csv").write_text("Datetime,Open,High,Low,Close,Volume\n"
                                          "2024-03-04 09:31:00-05:00,5100.25,5101.0,5099.75,5100.5,1200\n"
                                          "2024-03-04 09:32:00-05:00,5100.5,5102.0,5100.0,5101.75,900\n")
    assert drain(FileReplay(tmp_path / "es_1min.csv")) == [
        Tick("es_1min", ns("2024-03-04T14:31:00+00:00"), "trade", price=5100.5, size=1200),
        Tick("es_1min", ns("2024-03-04T14:32:00+00:00"), "trade", price=5101.75, size=900)]


def test_a_series_of_prices_without_sizes_reads_as_trades_of_size_one(tmp_path: Path) -> None:
    (tmp_path / "spx.csv").write_text("Date,Close\n2024-03-04,5130.95\n2024-03-05,5078.65\n")
    replay = FileReplay(tmp_path / "spx.csv")
    assert drain(replay) == [Tick("spx", ns("2024-03-04T00:00:00+00:00"), "trade", price=5130.95, size=1.0),
                             Tick("spx", ns("2024-03-05T00:00:00+00:00"), "trade", price=5078.65, size=1.0)]
    assert "no size column: each price is a trade of size 1" in replay.notes[1]
    (tmp_path / "mid.csv").write_text("timestamp,symbol,price\n1709560800000,EURUSD,1.0851\n")
    assert drain(FileReplay(tmp_path / "mid.csv")) == [
        Tick("EURUSD", 1709560800000 * 1_000_000, "trade", price=1.0851, size=1.0)]
    # beside quotes a price without its size is ambiguous: refused, naming the fix
    with pytest.raises(ValueError, match="price without size beside bid and ask"):
        FileReplay(tmp_path / "mid.csv", columns={"ts": "timestamp", "price": "price", "bid": "price",
                                                  "ask": "price"})


def test_klines_backtest_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    (tmp_path / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 4096, block_size: 16}}\n")
    (tmp_path / "q.yaml").write_text(QUERIES)
    path = tmp_path / "ETHUSDT-1m-2024-01-02.csv"
    path.write_text("".join(",".join(row) + "\n" for row in klines(120, KLINE_T0_MS, 60_000)))
    code = main(["backtest", str(path), "--queries", str(tmp_path / "q.yaml"), "--out", str(tmp_path / "a.parquet"),
                 "--config", str(tmp_path / "engine.yaml"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "replayed 120 ticks (0 rejected)" in out
    answers = pl.read_parquet(tmp_path / "a.parquet")
    assert answers.height == 31 and set(answers["stream"]) == {"ETHUSDT"}  # dir5 at the first tick, then every 4


def test_oanda_candles_flattened_read_as_bars(tmp_path: Path) -> None:
    """OANDA's v20 candles as pandas flattens them (`mid.o` .. `mid.c`, or `bid.c` and `ask.c` with price=BA): a
    trade at each mid close, or a quote at each bid/ask close, with a note that they are bars."""
    (tmp_path / "EUR_USD_M1.csv").write_text(
        "complete,volume,time,mid.o,mid.h,mid.l,mid.c\n"
        "true,120,2024-03-01T09:30:00.000000000Z,1.08501,1.08530,1.08490,1.08520\n"
        "true,98,2024-03-01T09:31:00.000000000Z,1.08520,1.08540,1.08500,1.08510\n")
    replay = FileReplay(tmp_path / "EUR_USD_M1.csv")
    t0 = ns("2024-03-01T09:30:00+00:00")
    assert drain(replay) == [Tick("EUR-USD", t0, "trade", price=1.0852, size=120),
                             Tick("EUR-USD", t0 + 60 * 10**9, "trade", price=1.0851, size=98)]
    assert any(n.startswith("EUR_USD_M1.csv: read as bars: each row is one trade at its close (mid.c, size volume")
               for n in replay.notes), replay.notes
    (tmp_path / "EUR_USD_BA.csv").write_text(
        "complete,volume,time,bid.o,bid.h,bid.l,bid.c,ask.o,ask.h,ask.l,ask.c\n"
        "true,120,2024-03-01T09:30:00Z,1.08501,1.08530,1.08490,1.08520,1.08511,1.08540,1.08500,1.08530\n")
    replay = FileReplay(tmp_path / "EUR_USD_BA.csv")
    assert drain(replay) == [Tick("EUR-USD", t0, "quote", bid=1.0852, ask=1.0853)]
    assert any("read as bid/ask bars: each row is one quote at their closes (bid.c, ask.c)" in n
               for n in replay.notes), replay.notes


CBOE_INTERVALS = ("underlying_symbol,quote_datetime,root,expiration,strike,option_type,open,high,low,close,"
                  "trade_volume,bid_size,bid,ask_size,ask,underlying_bid,underlying_ask\n")


def cboe_interval(minute: int, right: str, close: float, volume: int) -> str:
    """A Cboe DataShop-style interval row of SPXW's 4700 contract: OHLC all 0 and volume 0 when nothing traded."""
    ohlc = ",".join(f"{p:.4f}" for p in (close, close + 0.05 if close else 0, close, close))
    return (f"^SPX,2024-01-02 09:{30 + minute:02d}:00,SPXW,2024-01-19,4700.000,{right},{ohlc},{volume},"
            f"10,1.4500,12,1.5500,4742.10,4742.60\n")


def test_yahoo_null_rows_of_closed_days_are_skipped_with_one_note_not_rejected(tmp_path: Path) -> None:
    """Yahoo writes a market holiday as its date and nulls (`2024-01-15,null,...`): a closed day, not a bar whose
    close is missing. Skipped as holding no bar (filtered_out, left out) with one note; a bar that has values but no
    close is still rejected."""
    path = tmp_path / "AAPL.csv"
    path.write_text("Date,Open,High,Low,Close,Adj Close,Volume\n"
                    "2024-01-11,185.21,186.12,183.62,185.59,184.80,49128400\n"
                    "2024-01-12,186.06,186.74,185.19,185.92,185.13,40444700\n"
                    "2024-01-15,null,null,null,null,null,null\n"
                    "2024-01-16,182.16,184.26,180.93,183.63,182.85,65603000\n"
                    "2024-01-17,181.27,182.93,180.30,,181.90,47317400\n"
                    "2024-02-19,null,null,null,null,null,null\n"
                    "2024-02-20,181.79,182.43,180.00,181.56,180.79,53665600\n")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [t.price for t in ticks] == [185.59, 185.92, 183.63, 181.56]
    assert dict(replay.rejected) == {"filtered_out": 2, "missing_field": 1}  # the bar without its close
    example = replay.rejected.examples["filtered_out"]
    assert example.startswith(f"{path} line 4: filtered_out: a closed day"), example
    said = [note for note in replay.notes if "closed day" in note]
    assert said == ["AAPL.csv: 2 rows hold a date and nulls alone (the first 2024-01-15T00:00:00Z): the vendor's way "
                    "to write a closed day (a market holiday), skipped as holding no bar (counted as left out, "
                    "filtered_out), not rejected"], replay.notes
    lines = rejected_lines(dict(replay.rejected), replay.rejected.examples)
    assert any(line.strip().startswith("left out filtered_out: 2") for line in lines), lines


def test_cboe_intervals_without_trades_are_left_out_not_refused_as_prices_of_zero(tmp_path: Path) -> None:
    path = tmp_path / "UnderlyingOptionsIntervals_60sec_2024-01-02.csv"
    rows = [cboe_interval(i // 2, "CP"[i % 2], 1.50 if i % 3 == 0 else 0.0, 3 if i % 3 == 0 else 0) for i in range(8)]
    path.write_text(CBOE_INTERVALS + "".join(rows))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [t.kind for t in ticks].count("quote") == 8 and [t.price for t in ticks if t.kind == "trade"] == [1.5] * 3
    assert dict(replay.rejected) == {"filtered_out": 5}  # each bar's quote replays; its empty trade does not
    example = replay.rejected.examples["filtered_out"]
    assert example.startswith(f"{path} line 3: filtered_out: no trade in this interval (close 0, trade_volume 0)")
    assert "price-offset" not in example
    assert any("a bar of close 0 and trade_volume 0 is an interval without trades" in note for note in replay.notes)


def test_a_price_of_zero_that_traded_is_refused_and_the_warning_says_its_share_of_ticks(tmp_path: Path) -> None:
    path = tmp_path / "intervals.csv"  # a bar that traded at 0: bad data, refused, without --price-offset advice
    path.write_text(CBOE_INTERVALS + cboe_interval(0, "C", 0.0, 4) + "".join(
        cboe_interval(i, "C", 1.5, 2) for i in range(1, 8)))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert len(ticks) == 15 and dict(replay.rejected) == {"nonpositive_price": 1}
    assert "price-offset" not in replay.rejected.examples["nonpositive_price"]
    warning = rejected_lines(dict(replay.rejected), replay.rejected.examples, len(ticks))[0]
    assert warning.startswith("warning: nonpositive_price 1 (6%) of the 16 ticks read rejected")  # 8 rows, 16 ticks
    # a whole price column at or below zero where it trades (a spread at 0): the offset is the way
    (tmp_path / "spread.csv").write_text("ts,symbol,price,size\n1704205800000000000,CAL,0,5\n"
                                         "1704205800000000001,CAL,0,3\n")
    spread = FileReplay(tmp_path / "spread.csv")
    drain(spread)
    assert "every trade price of" in spread.rejected.examples["nonpositive_price"]
    assert spread.rejected.examples["nonpositive_price"].endswith(
        "an offset (--price-offset) shifts them above zero; the lowest price in the files: CAL 0: to lift each "
        "stream above zero, --price-offset 'CAL=1' (docs/replay.md)")
    # zeros on many rows, none below (a power market's hours at 0): the offset is named too
    (tmp_path / "power.csv").write_text("timestamp,symbol,price,size\n" + "".join(
        f"2026-11-02T{i // 60:02d}:{i % 60:02d}:00Z,EPEX:DE H13,{0.0 if i % 2 else 1.5 + i},1\n" for i in range(40)))
    power = FileReplay(tmp_path / "power.csv")
    assert len(drain(power)) == 20 and dict(power.rejected) == {"nonpositive_price": 20}
    assert power.rejected.examples["nonpositive_price"].endswith(
        f"; 20 of the 40 trade prices of {tmp_path / 'power.csv'} are zero or below, too many to be bad prints: for an "
        f"instrument that trades there (a power market's hours at 0), an offset (--price-offset) shifts them above "
        f"zero; the lowest price in the files: EPEX:DE H13 0: to lift each stream above zero, --price-offset "
        f"'EPEX:DE H13=1' (docs/replay.md)")


def test_a_trailing_empty_column_makes_no_bars(tmp_path: Path) -> None:
    path = tmp_path / "excel_trades.csv"  # Excel's CSVs end each line with the separator: a column named ""
    path.write_text("time,symbol,price,size,\n2024-01-02T09:30:00Z,AAPL,185.5,100,\n"
                    "2024-01-02T09:30:01Z,AAPL,185.6,200,\n")
    replay = FileReplay(path)
    assert [(t.price, t.size) for t in drain(replay)] == [(185.5, 100.0), (185.6, 200.0)]
    assert not any("bars" in note for note in replay.notes)


def test_bars_whose_close_is_named_last_are_read_as_bars(tmp_path: Path) -> None:
    # Sierra Chart's bar export: the close is `Last`
    path = tmp_path / "ESH26.csv"
    path.write_text("Date, Time, Open, High, Low, Last, Volume, NumberOfTrades, BidVolume, AskVolume\n"
                    "2026/3/2, 09:30:00, 6850.00, 6851.00, 6849.50, 6850.25, 120, 40, 60, 60\n"
                    "2026/3/2, 09:31:00, 6850.25, 6850.75, 6849.75, 6850.00, 80, 30, 50, 30\n")
    replay = FileReplay(path)
    assert [(t.price, t.size) for t in drain(replay)] == [(6850.25, 120), (6850.0, 80)]
    assert any("read as bars: each row is one trade at its close (Last, size Volume" in n for n in replay.notes)


def test_a_footer_line_is_left_out_as_no_tick(tmp_path: Path) -> None:
    """Barchart's download ends with `Downloaded from Barchart.com as of ...`: it was rejected as a tick missing its
    time (a 9% warning and a DST hint); a last row that is a line of words is a footer, filtered_out."""
    path = tmp_path / "esh26_intraday-5min.csv"
    path.write_text("Time,Open,High,Low,Last,Change,%Chg,Volume\n"
                    "2026-03-06 09:30,6850.00,6851.00,6849.50,6850.25,0.25,0.00%,120\n"
                    "2026-03-06 09:35,6850.25,6850.75,6849.75,6850.00,-0.25,0.00%,80\n"
                    '"Downloaded from Barchart.com as of 03-06-2026 04:34pm CST"\n')
    replay = FileReplay(path)
    assert [(t.price, t.size) for t in drain(replay)] == [(6850.25, 120), (6850.0, 80)]
    assert dict(replay.rejected) == {"filtered_out": 1}
    assert 'a footer line ("Downloaded from Barchart.com as of 03-06-2026 04:34pm CST"), no tick' in \
        replay.rejected.examples["filtered_out"]
    # a last row of data whose time does not read is still a reject, not a footer
    path.write_text("Time,Open,High,Low,Last,Change,%Chg,Volume\n"
                    "2026-03-06 09:30,6850.00,6851.00,6849.50,6850.25,0.25,0.00%,120\n"
                    "bad time,6850.25,6850.75,6849.75,6850.00,-0.25,0.00%,80\n")
    replay = FileReplay(path)
    assert len(drain(replay)) == 1 and dict(replay.rejected) == {"missing_field": 1}


def test_zero_prints_of_a_spread_trading_a_few_steps_above_zero_name_the_price_offset(tmp_path: Path) -> None:
    """Review 104 (finding 5): a calendar spread trading at 1/64..6/64 printed 0.0 nine times, fewer than the 10
    that make zeros "a market that trades there": they were dropped with no --price-offset hint, as a lone 0 of an
    outright is. 0 one step below a stream's other prices is a price: the hint is given. An outright far from zero
    (ZN at 110) keeps its lone 0 as bad data, without the hint."""
    rows = ["timestamp,symbol,price,size"]
    for i in range(200):
        spread = 0.0 if i % 25 == 7 else (1 + i % 6) / 64  # 8 zeros among 1/64..6/64
        rows.append(f"2024-12-02T14:{i // 60:02d}:{i % 60:02d}Z,ZNH5-ZNM5,{spread},10")
        outright = 0.0 if i == 50 else 110.5 + (i % 9 - 4) / 64
        rows.append(f"2024-12-02T14:{i // 60:02d}:{i % 60:02d}.5Z,ZNH5,{outright},5")
    path = tmp_path / "zn_spread.csv"
    path.write_text("\n".join(rows) + "\n")
    replay = FileReplay(path)
    drain(replay)
    assert replay.rejected.by_stream["nonpositive_price"] == {"ZNH5-ZNM5": 8, "ZNH5": 1}
    example = replay.rejected.examples["nonpositive_price"]
    assert example.startswith(f'{path} line 16: nonpositive_price: price must be > 0, got 0.0 (column "price")')
    # the offset to paste lifts the spread alone: ZNH5's lone 0 lifted by 1 would be a price of 1 in a market at 110
    assert example.endswith("; ZNH5-ZNM5's other trade prices lie within 10 price steps of zero (a spread), where 0 "
                            "is a price, not bad data: an offset (--price-offset) shifts them above zero; the lowest "
                            "price in the files: ZNH5-ZNM5 0: to lift each stream above zero, --price-offset "
                            "'ZNH5-ZNM5=1' (docs/replay.md)"), example
    outright = tmp_path / "zn.csv"  # the outright alone: its lone 0 is bad data, no hint
    outright.write_text("\n".join(row for row in rows if ",ZNH5," in row or row.startswith("timestamp")) + "\n")
    alone = FileReplay(outright)
    drain(alone)
    assert dict(alone.rejected) == {"nonpositive_price": 1}
    assert "price-offset" not in alone.rejected.examples["nonpositive_price"]
    unnamed = tmp_path / "spread_only.csv"  # no stream column: the file's one stream trades near zero
    unnamed.write_text("\n".join(row.replace(",ZNH5-ZNM5", "") for row in rows if "ZNH5-ZNM5" in row) + "\n")
    unnamed.write_text("timestamp,price,size\n" + unnamed.read_text())
    one = FileReplay(unnamed)
    drain(one)
    assert dict(one.rejected) == {"nonpositive_price": 8}
    assert "where 0 is a price, not bad data: an offset (--price-offset) shifts them above zero; the lowest price in " \
           "the files: spread_only 0: to lift each stream above zero, --price-offset 'spread_only=1'" in \
           one.rejected.examples["nonpositive_price"]
