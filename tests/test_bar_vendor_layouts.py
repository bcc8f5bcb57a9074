"""Bar files in the layouts a bar-data user gets them in (review307): yfinance's MultiIndex download (CSV with its
header rows, Parquet with tuple-named columns, one ticker or two), Binance's REST klines and Polygon's aggregates
as the JSON their endpoints answer, and the notes that say how the bars were stamped. Every file is written here,
in the vendor's own layout, and replayed without options unless the test is about one."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from conftest import drain, ns, tiny_tick_checkpoint
from connectors.map_options import parse_inline
from connectors.replay import FileReplay
from connectors.ticks import Tick
from connectors.time_range import TimeRange
from engine.service.cli import main
from test_vendor_files_without_options import QUERIES

YF_ROWS = [  # Datetime, then Close, High, Low, Open, Volume: yfinance's column order
    ("2024-01-02 09:30:00-05:00", 184.91, 185.03, 184.79, 185.00, 47065),
    ("2024-01-02 09:31:00-05:00", 184.78, 184.93, 184.71, 184.91, 38324),
    ("2024-01-02 09:32:00-05:00", 184.72, 184.80, 184.67, 184.78, 35035),
]


def yf_csv(rows: list[tuple], tickers: list[str]) -> str:
    """What `yf.download(tickers, interval="1m").to_csv()` writes (yfinance >= 0.2.51): fields over tickers."""
    fields = ["Close", "High", "Low", "Open", "Volume"]
    head = ["Price," + ",".join(f for f in fields for _ in tickers),
            "Ticker," + ",".join(t for _ in fields for t in tickers),
            "Datetime" + "," * (len(fields) * len(tickers))]
    lines = []
    for row in rows:
        cells = [row[0]]
        for i in range(len(fields)):
            for k, _ in enumerate(tickers):
                value = row[1 + i] * (2 if k else 1)
                cells.append(str(int(value)) if fields[i] == "Volume" else f"{value:.2f}")
        lines.append(",".join(cells))
    return "\n".join(head + lines) + "\n"


def test_yfinance_multiindex_csv_reads_the_close_by_name_not_by_position(tmp_path: Path) -> None:
    path = tmp_path / "AAPL_yf.csv"
    path.write_text(yf_csv(YF_ROWS, ["AAPL"]))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert ticks == [Tick("AAPL", ns(r[0].replace(" ", "T")), "trade", price=r[1], size=r[5]) for r in YF_ROWS]
    assert replay.notes[0].startswith("AAPL_yf.csv: yfinance's download layout (a pandas MultiIndex: its 3 header "
                                      "rows): read by the columns' names, not by their position")
    assert replay.rejected.total() == 0


def test_yfinance_two_tickers_become_two_streams(tmp_path: Path) -> None:
    path = tmp_path / "yf_two.csv"
    path.write_text(yf_csv(YF_ROWS, ["AAPL", "MSFT"]))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.stream, t.price, t.size) for t in ticks[:2]] == [("AAPL", 184.91, 47065), ("MSFT", 369.82, 94130)]
    assert len(ticks) == 6 and {t.stream for t in ticks} == {"AAPL", "MSFT"}
    assert "one stream per ticker (AAPL, MSFT)" in replay.notes[0]


def test_yfinance_group_by_ticker_csv_reads_as_the_default_layout(tmp_path: Path) -> None:
    """`yf.download(["AAPL","MSFT"], group_by="ticker").to_csv()`: the tickers' header row first, then the fields'
    (each ticker's Open,High,Low,Close,Volume together): read by name, as the default layout is (review315 #4)."""
    fields = ["Open", "High", "Low", "Close", "Volume"]
    at = {"Close": 1, "High": 2, "Low": 3, "Open": 4, "Volume": 5}  # (YF_ROWS's order)
    tickers = ["AAPL", "MSFT"]
    lines = ["Ticker," + ",".join(t for t in tickers for _ in fields), "Price," + ",".join(fields * len(tickers)),
             "Datetime" + "," * (len(fields) * len(tickers))]
    for row in YF_ROWS:
        lines.append(",".join([row[0], *(str(int(row[at[f]] * (k + 1))) if f == "Volume" else
                                         f"{row[at[f]] * (k + 1):.2f}" for k in range(2) for f in fields)]))
    path = tmp_path / "yf_byticker.csv"
    path.write_text("\n".join(lines) + "\n")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.stream, t.price, t.size) for t in ticks] == [
        (ticker, pytest.approx(round(r[1] * (k + 1), 2)), r[5] * (k + 1)) for r in YF_ROWS
        for k, ticker in enumerate(tickers)]
    assert "one stream per ticker (AAPL, MSFT)" in replay.notes[0] and replay.rejected.total() == 0


def test_yfinance_multiindex_parquet_reads_its_tuple_named_columns(tmp_path: Path) -> None:
    frame = pl.DataFrame({"Datetime": [r[0] for r in YF_ROWS]}).with_columns(
        pl.col("Datetime").str.to_datetime("%Y-%m-%d %H:%M:%S%z").dt.convert_time_zone("America/New_York"))
    for i, field in enumerate(["Close", "High", "Low", "Open", "Volume"]):
        frame = frame.with_columns(pl.Series(str((field, "AAPL")), [r[1 + i] for r in YF_ROWS]))
    frame.write_parquet(tmp_path / "AAPL_yf.parquet")
    ticks = drain(FileReplay(tmp_path / "AAPL_yf.parquet"))
    assert [(t.stream, t.price, t.size) for t in ticks] == [("AAPL", r[1], r[5]) for r in YF_ROWS]


def test_inline_columns_name_a_column_with_a_comma() -> None:
    assert parse_inline("ts=Datetime,price=('Close', 'AAPL'),size=\"Volume, AAPL\",stream_name=AAPL") == {
        "ts": "Datetime", "price": "('Close', 'AAPL')", "size": "Volume, AAPL", "stream": "AAPL"}
    with pytest.raises(ValueError, match="inside double quotes.*YAML form"):
        parse_inline("price=Close, AAPL")


def test_a_multirow_header_of_other_names_is_refused_without_a_positional_fix(tmp_path: Path) -> None:
    path = tmp_path / "sheet.csv"
    path.write_text(yf_csv(YF_ROWS, ["AAPL"]).replace("Ticker,", "Symbol,", 1))  # not yfinance's: no reshaping
    with pytest.raises(ValueError) as refused:
        FileReplay(path)
    assert '"Datetime,Close AAPL,High AAPL,Low AAPL,Open AAPL,Volume AAPL"' in str(refused.value)
    assert "tail -n" not in str(refused.value)


def test_binance_rest_klines_json_replays_at_each_close_time(tmp_path: Path) -> None:
    t0 = 1704326400000
    bars = [[t0 + i * 60_000, "42000.0", "42010.0", "41990.0", f"{42000.5 + i}", "5.4", t0 + (i + 1) * 60_000 - 1,
             "226858.1", 540, "2.7", "113429.0", "0"] for i in range(3)]
    (tmp_path / "BTCUSDT_klines.json").write_text(json.dumps(bars))
    replay = FileReplay(tmp_path / "BTCUSDT_klines.json")
    assert drain(replay) == [Tick("BTCUSDT", (t0 + (i + 1) * 60_000 - 1) * 1_000_000, "trade", price=42000.5 + i,
                                  size=5.4) for i in range(3)]
    bar_note = next(n for n in replay.notes if "read as bars" in n)
    assert "stamped with its \"close_time\" column, the bar's end" in bar_note  # review307 #11: no start warning
    assert "most vendors" not in bar_note and "NinjaTrader" not in " ".join(replay.notes)
    assert any("Binance REST klines (/api/v3/klines)" in n for n in replay.notes)


def test_polygon_aggregates_json_replays_one_trade_per_bar(tmp_path: Path) -> None:
    t0 = 1704205800000
    results = [{"v": 47065.0 + i, "vw": 184.95, "o": 185.0, "c": 184.9 + i, "h": 185.1, "l": 184.7,
                "t": t0 + i * 60_000, "n": 941} for i in range(3)]
    (tmp_path / "aggs.json").write_text(json.dumps({"ticker": "AAPL", "queryCount": 3, "resultsCount": 3,
                                                    "adjusted": True, "results": results, "status": "OK"}))
    replay = FileReplay(tmp_path / "aggs.json")
    assert drain(replay) == [Tick("AAPL", (t0 + i * 60_000) * 1_000_000, "trade", price=184.9 + i,
                                  size=47065.0 + i) for i in range(3)]
    assert any("Polygon aggregates (/v2/aggs)" in n for n in replay.notes)
    assert any("read as bars" in n and '"t" column' in n for n in replay.notes)
    (tmp_path / "AAPL_aggs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))  # jq's bar a line
    assert [(t.stream, t.price) for t in drain(FileReplay(tmp_path / "AAPL_aggs.jsonl"))] == [
        ("AAPL", 184.9 + i) for i in range(3)]


def kline_lines(n: int, t0_ms: int = 1704153600000) -> list[str]:
    """Binance public klines, no header: bar i closes at 42000 + i."""
    return [f"{t0_ms + i * 60_000},42000.0,42010.0,41990.0,{42000 + i}.0,{1 + i}.5,{t0_ms + (i + 1) * 60_000 - 1},"
            f"1.0,10,0.5,1.0,0" for i in range(n)]


def test_a_bar_file_with_bars_appended_again_replays_each_bar_once(tmp_path: Path) -> None:
    lines = kline_lines(10)
    path = tmp_path / "BTCUSDT-1m-2024-01-02.csv"
    path.write_text("\n".join(lines + lines[-3:]) + "\n")  # a re-download's last 3 bars appended
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [t.price for t in ticks] == [42000.0 + i for i in range(10)]
    assert replay.rejected == {"filtered_out": 3}
    caution = next(n for n in replay.notes if "repeat the time of a later bar" in n)
    assert caution.startswith("BTCUSDT-1m-2024-01-02.csv: 3 bar(s) repeat the time of a later bar of their stream "
                              "(3 with the same values (a re-download appended))")
    assert "the first: " in caution and "line 8 (2024-01-02T00:07:59.999000000Z), repeated at line 11" in caution


def test_a_revised_daily_bar_replays_its_last_values_and_ticks_keep_their_repeats(tmp_path: Path) -> None:
    (tmp_path / "AAPL.csv").write_text("Date,Open,High,Low,Close,Volume\n2024-01-02,185,186,184,185.5,100\n"
                                       "2024-01-03,185.5,186,184,184.25,200\n2024-01-03,185.5,186,184,184.5,210\n")
    replay = FileReplay(tmp_path / "AAPL.csv")
    assert [(t.price, t.size) for t in drain(replay)] == [(185.5, 100), (184.5, 210)]
    assert any("1 with other values (a revised bar)" in n for n in replay.notes)
    (tmp_path / "trades.csv").write_text("ts,symbol,price,size\n2024-01-02T10:00:00Z,AAPL,185.5,100\n"
                                         "2024-01-02T10:00:00Z,AAPL,185.5,100\n")
    replay = FileReplay(tmp_path / "trades.csv")  # two trades of one time are two trades: both replayed
    assert len(drain(replay)) == 2 and not any("repeat the time" in n for n in replay.notes)


@pytest.mark.parametrize("name, stream", [("BATS_AAPL, 1.csv", "AAPL"), ("NASDAQ_MSFT, 1D.csv", "MSFT"),
                                          ("aapl_us_d.csv", "AAPL.US"), ("EURUSD1.csv", "EURUSD"),
                                          ("EURUSD60.csv", "EURUSD"), ("EURUSD_M1.csv", "EURUSD"),
                                          ("AAPL_1m.csv", "AAPL")])
def test_a_bar_exports_name_gives_its_symbol_without_the_vendors_words(tmp_path: Path, name: str,
                                                                       stream: str) -> None:
    (tmp_path / name).write_text("time,open,high,low,close,Volume\n1704205800,185.0,185.1,184.7,184.9,47065\n"
                                 "1704205860,184.9,184.95,184.7,184.8,38324\n")
    replay = FileReplay(tmp_path / name)
    assert {t.stream for t in drain(replay)} == {stream}
    assert any(f"stream {stream}, from the file name" in n and "left out" in n for n in replay.notes)


def test_two_tradingview_exports_are_two_streams(tmp_path: Path) -> None:
    for name, price in (("BATS_AAPL, 1.csv", 184.9), ("BATS_MSFT, 1.csv", 369.8)):
        (tmp_path / name).write_text(f"time,open,high,low,close,Volume\n1704205800,{price},{price},{price},{price},1\n")
    ticks = drain(FileReplay([tmp_path / "BATS_AAPL, 1.csv", tmp_path / "BATS_MSFT, 1.csv"]))
    assert sorted((t.stream, t.price) for t in ticks) == [("AAPL", 184.9), ("MSFT", 369.8)]


def test_stooqs_vol_is_the_bars_size(tmp_path: Path) -> None:
    times = [f"{9 + (30 + 5 * i) // 60:02d}{(30 + 5 * i) % 60:02d}00" for i in range(24)]  # 093000 .. 112500
    (tmp_path / "aapl_us_5.txt").write_text(
        "<TICKER>,<PER>,<DATE>,<TIME>,<OPEN>,<HIGH>,<LOW>,<CLOSE>,<VOL>,<OPENINT>\n" +
        "".join(f"AAPL.US,5,20240102,{t},185.0,185.2,184.9,{185 + i % 3},{1200 - 40 * (i % 5)},0\n"
                for i, t in enumerate(times)))
    replay = FileReplay(tmp_path / "aapl_us_5.txt")
    assert [(t.stream, t.price, t.size) for t in drain(replay)][:3] == [
        ("AAPL.US", 185, 1200), ("AAPL.US", 186, 1160), ("AAPL.US", 187, 1120)]
    assert any("size=<VOL>" in n for n in replay.notes) and not any("no size column" in n for n in replay.notes)


def test_start_stamped_bars_stamped_at_their_close_and_cut_there(tmp_path: Path) -> None:
    rows = "".join(f"{1704205800 + 60 * i},185.0,185.1,184.7,{185 + i},{100 + i}\n" for i in range(5))
    (tmp_path / "BATS_AAPL, 1.csv").write_text("time,open,high,low,close,Volume\n" + rows)
    minute = 60 * 10**9
    start = 1704205800 * 10**9
    as_written = drain(FileReplay(tmp_path / "BATS_AAPL, 1.csv"))
    assert [t.ts for t in as_written] == [start + i * minute for i in range(5)]
    replay = FileReplay(tmp_path / "BATS_AAPL, 1.csv", columns=parse_inline("bar_stamp=close"))
    assert [(t.ts, t.price) for t in drain(replay)] == [(start + (i + 1) * minute, 185 + i) for i in range(5)]
    assert any("stamped at their close (bar_stamp close)" in n and '1m, from the period "1" its file name' in n
               for n in replay.notes)
    # --from/--to cut at the close stamps: [14:32, 14:34) holds the bars that closed then, started at 14:31, 14:32
    cut = FileReplay(tmp_path / "BATS_AAPL, 1.csv", columns=parse_inline("bar_stamp=close"),
                     time_range=TimeRange(start + 2 * minute, start + 4 * minute))
    assert [t.price for t in drain(cut)] == [186, 187]


def test_an_adjusted_close_reads_as_bars_and_a_bar_stamp_no_bar_uses_is_said(tmp_path: Path) -> None:
    """Yahoo's `Adj Close` as the price (review430 #1): the file is bars all the same, so --bar-stamp close moves
    each daily close to the day's end and the holiday's nulls are left out; a tick file given the stamp says so."""
    (tmp_path / "SPY.csv").write_text("Date,Open,High,Low,Close,Adj Close,Volume\n2024-01-12,1,1,1,10,9.5,5\n"
                                      "2024-01-15,null,null,null,null,null,null\n2024-01-16,1,1,1,11,10.5,5\n")
    replay = FileReplay(tmp_path / "SPY.csv", columns=parse_inline("price=Adj Close,bar_stamp=close"))
    assert [(t.ts, t.price) for t in drain(replay)] == [(ns("2024-01-13T00:00:00+00:00"), 9.5),
                                                        (ns("2024-01-17T00:00:00+00:00"), 10.5)]
    assert dict(replay.rejected) == {"filtered_out": 1}  # the holiday, no missing_field
    (tmp_path / "trades.csv").write_text("ts,price,size\n1704205800,185.0,10\n1704205801,185.1,20\n")
    ticks = FileReplay(tmp_path / "trades.csv", columns=parse_inline("bar_stamp=close"))
    assert drain(ticks)[0].ts == 1704205800 * 10**9
    assert any("bar_stamp close" in c and "not read as bars" in c for c in ticks.cautions), ticks.notes


def test_bar_length_given_and_the_files_spacing(tmp_path: Path) -> None:
    (tmp_path / "bars.csv").write_text("Date,Open,High,Low,Close,Volume\n2024-01-02,1,1,1,10,5\n2024-01-03,1,1,1,11,5\n"
                                       "2024-01-05,1,1,1,12,5\n")
    day = 86400 * 10**9
    replay = FileReplay(tmp_path / "bars.csv", columns=parse_inline("bar_stamp=close"))  # spacing: 1 day, a median
    assert [t.ts for t in drain(replay)] == [ns("2024-01-03T00:00:00+00:00") + i for i in (0, day, 3 * day)]
    given = FileReplay(tmp_path / "bars.csv", columns=parse_inline("bar_stamp=close,bar_length=6h"))
    assert drain(given)[0].ts == ns("2024-01-02T06:00:00+00:00")
    with pytest.raises(ValueError, match="bar_length is a bar's length"):
        FileReplay(tmp_path / "bars.csv", columns=parse_inline("bar_stamp=close,bar_length=6 hours"))
    with pytest.raises(ValueError, match="give bar_stamp=close too"):
        FileReplay(tmp_path / "bars.csv", columns=parse_inline("bar_length=1d"))


def test_files_of_one_bar_per_stream_are_stamped_by_their_spacing_across_the_files(tmp_path: Path) -> None:
    """Polygon's day aggregates, a file a day of one bar per ticker (review430 #8): no file's own spacing gives the
    length, the files' together do (a day); a file alone is refused naming a day's length, not a minute's."""
    header = "ticker,volume,open,close,high,low,window_start,transactions\n"
    starts = [ns(f"2024-01-0{day}T05:00:00+00:00") for day in (2, 3)]
    for day, start in zip(("2024-01-02", "2024-01-03"), starts):
        (tmp_path / f"{day}.csv").write_text(header + f"AAPL,10,1,1.5,2,1,{start},3\nMSFT,10,1,2.5,3,1,{start},3\n")
    replay = FileReplay(tmp_path, columns=parse_inline("bar_stamp=close"))
    day = 86400 * 10**9
    assert sorted({t.ts for t in drain(replay)}) == [start + day for start in starts]
    assert any("1d, from the spacing of its streams' bars across the files" in n for n in replay.notes)
    with pytest.raises(ValueError, match="--bar-length 1d for a bar a day"):
        FileReplay(tmp_path / "2024-01-02.csv", columns=parse_inline("bar_stamp=close"))


def test_backtest_of_bars_stamped_at_their_close_from_the_command_line(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    (tmp_path / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 4096, block_size: 16}}\n")
    (tmp_path / "q.yaml").write_text(QUERIES)
    path = tmp_path / "BATS_AAPL, 1.csv"
    path.write_text("time,open,high,low,close,Volume\n" + "".join(
        f"{1704205800 + 60 * i},185.0,185.1,184.7,{185 + (i % 7) / 10},{100 + i}\n" for i in range(60)))
    code = main(["backtest", str(path), "--columns", "bar_stamp=close", "--from", "2024-01-02T14:40:00Z",
                 "--queries", str(tmp_path / "q.yaml"), "--out", str(tmp_path / "a.parquet"),
                 "--config", str(tmp_path / "engine.yaml"), "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    # bars starting 14:30 .. 15:29 close 14:31 .. 15:30: from 14:40 on, the bars that started at 14:39 and after
    assert "replayed 51 ticks (0 rejected)" in out
    answers = pl.read_parquet(tmp_path / "a.parquet")
    assert set(answers["stream"]) == {"AAPL"}
    assert answers["data_ts"].min() >= ns("2024-01-02T14:40:00+00:00")
    assert "bars stamped at their close (bar_stamp close)" in err


def test_a_yfinance_file_with_its_upper_header_rows_cut_off_is_refused_not_read_by_position(tmp_path: Path) -> None:
    path = tmp_path / "AAPL_yf-table.csv"
    path.write_text("\n".join(yf_csv(YF_ROWS, ["AAPL"]).splitlines()[2:]) + "\n")  # tail -n +3
    with pytest.raises(ValueError, match='its header names only its first column \\("Datetime"\\)'):
        FileReplay(path)
