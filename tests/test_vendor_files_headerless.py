"""Header-less vendor files black-box reviewers found misread: Kraken's and Bitfinex's REST trades, Binance's older
futures trades and a month whose time unit changes inside the file, a row with a stray field, and the refusals
that name the preset or the columns by position. Every fixture is written here, from code, into tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from test_vendor_files_taq import WRDS_CORRECTED_TRADES  # one of the files a map for every file must fit
from conftest import drain


def test_kraken_trades_with_decimal_epoch_seconds_need_no_options(tmp_path: Path) -> None:
    path = tmp_path / "XBTUSD.csv"
    path.write_text("1704153601.4989,41997.7,0.09579104\n1704153602.1234,41998.1,0.5\n")
    ticks = drain(FileReplay(path))
    assert [(t.stream, t.ts, t.price, t.size) for t in ticks] == [
        ("XBTUSD", 1704153601_498900000, 41997.7, 0.09579104), ("XBTUSD", 1704153602_123400000, 41998.1, 0.5)]


def test_older_binance_futures_trades_without_a_header_or_is_best_match(tmp_path: Path) -> None:
    path = tmp_path / "BTCUSDT-trades-2024-01-02.csv"
    path.write_text("4500000000,42500.1,0.053,2252.5,1704153601000,true\n"
                    "4500000001,42500.2,0.01,425.0,1704153601005,false\n")
    replay = FileReplay(path)
    assert [(t.stream, t.ts, t.price, t.side) for t in drain(replay)] == [
        ("BTCUSDT_PERP", 1704153601_000000000, 42500.1, "sell"),
        ("BTCUSDT_PERP", 1704153601_005000000, 42500.2, "buy")]  # the USD-M perpetual, apart from spot's BTCUSDT
    assert any("preset binance-futures-trades" in n for n in replay.notes)


def test_a_row_with_a_stray_field_is_a_counted_reject_with_its_line(tmp_path: Path) -> None:
    rows = [f"2024-01-02T00:00:{i:02d}Z,BTC,{42000 + i}.5,1" for i in range(1, 31)]
    rows[19] += ",extra"  # line 21 of the file
    (tmp_path / "trades.csv").write_text("timestamp,symbol,price,size\n" + "\n".join(rows) + "\n")
    replay = FileReplay(tmp_path / "trades.csv")
    assert len(drain(replay)) == 29
    assert dict(replay.rejected) == {"extra_fields": 1}
    assert "trades.csv line 21: extra_fields: the row has 5 fields" in replay.rejected.examples["extra_fields"]
    # without a header (a blank line counts as a line, as polars counts it), and in a file's first lines
    (tmp_path / "XBTUSD.csv").write_text("1704153601,41997.7,0.1\n\n1704153602,41998.1,0.5,7\n1704153603,41998.2,0.5\n"
                                         "1704153604,41998.3,0.5\n")
    replay = FileReplay(tmp_path / "XBTUSD.csv")
    assert [t.price for t in drain(replay)] == [41997.7, 41998.2, 41998.3]
    assert "XBTUSD.csv line 3: extra_fields" in replay.rejected.examples["extra_fields"]


def test_refusals_name_the_file_and_the_preset_a_few_bad_rows_hid(tmp_path: Path) -> None:
    path = tmp_path / "BTCUSDT-trades-2024-01-02.csv"  # spot trades whose second row lost its time
    path.write_text("4500000000,42500.1,0.053,2252.5,1704153601000,true,true\n"
                    "4500000001,42500.2,0.01,425.0,,false,true\n"
                    "4500000002,42500.3,0.01,425.0,1704153601009,false,true\n")
    with pytest.raises(ValueError, match="--preset binance-public-trades reads it"):
        FileReplay(path)
    replay = FileReplay(path, columns="binance-public-trades")
    assert [t.price for t in drain(replay)] == [42500.1, 42500.3] and dict(replay.rejected) == {"missing_field": 1}
    # keys given for every file, one of which lacks a column they name: the file is named
    (tmp_path / "taq.csv").write_text(WRDS_CORRECTED_TRADES)
    (tmp_path / "XBTUSD.csv").write_text("1704153601,41997.7,0.1\n")
    spec = map_from_options(columns="stream=EX+SYM_ROOT", detect=True)
    with pytest.raises(ValueError, match=r'XBTUSD\.csv: the map reads "EX" and "SYM_ROOT"'):
        FileReplay([tmp_path / "taq.csv", tmp_path / "XBTUSD.csv"], columns=spec)


def test_a_time_unit_that_changes_inside_a_file_is_said(tmp_path: Path) -> None:
    path = tmp_path / "BTCUSDT-trades-2024-12.csv"  # Binance's ms, then us from 2025-01-01, concatenated
    path.write_text("4500000000,42500.1,0.053,2252.5,1735689599000,true,true\n"
                    "4500000001,42500.2,0.053,2252.5,1735689600000001,true,true\n")
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [42500.1]
    example = replay.rejected.examples["ts_out_of_range"]
    assert "line 2" in example and "read as ms" in example and "this one is us" in example


T0 = 1704153600  # 2024-01-02T00:00:00Z


def test_rest_trades_saved_without_a_header_read_their_time_by_its_values(tmp_path: Path) -> None:
    """Review 163 (finding 5): Kraken's REST trades saved as `price,volume,time` were refused with their price
    called seconds after midnight, and Bitfinex's `ID,MTS,AMOUNT,PRICE` with its trade id called `time`. The time
    is the column whose values are a present-day epoch in ms (or decimal seconds), not an id that would read as
    2017 in seconds: Kraken's reads as a time and two numbers, Bitfinex's as its layout, sides from AMOUNT's sign."""
    (tmp_path / "XBTUSD_pvt.csv").write_text("".join(
        f"{42000 + (i % 9) * 0.1:.1f},{0.0123 + i / 1000:.8f},{T0 + i * 0.9 + 0.1234:.4f}\n" for i in range(40)))
    replay = FileReplay(tmp_path / "XBTUSD_pvt.csv")
    kraken = drain(replay)
    assert len(kraken) == 40 and (kraken[1].stream, kraken[1].ts, kraken[1].price, kraken[1].size) == (
        "XBTUSD", (T0 + 1) * 10**9 + 23_400_000, 42000.1, 0.0133)
    assert replay.notes[0] == ("XBTUSD_pvt.csv: no header row; read as a time and two numbers (--csv-names "
                               "price,size,time): ts=time (s), stream_name=XBTUSD, price=price, size=size")
    (tmp_path / "tBTCUSD_rest.csv").write_text("".join(
        f"{1500000000 + i},{(T0 + i) * 1000},{(-1) ** (i // 3) * (0.001 + i / 1000):.8f},{42000 + i % 9}\n"
        for i in range(40)))
    replay = FileReplay(tmp_path / "tBTCUSD_rest.csv")
    bitfinex = drain(replay)
    assert len(bitfinex) == 40 and dict(replay.rejected) == {}
    assert [(t.stream, t.ts, t.price, t.size, t.side) for t in bitfinex[2:4]] == [
        ("BTCUSD", (T0 + 2) * 10**9, 42002.0, 0.003, "buy"), ("BTCUSD", (T0 + 3) * 10**9, 42003.0, 0.004, "sell")]
    assert ("tBTCUSD_rest.csv: no header row; read as Bitfinex's trades: an id, a time in ms, a signed amount "
            "(negative: a sell) and a price (--csv-names ID,MTS,AMOUNT,PRICE): ts=MTS (ms), stream_name=BTCUSD, "
            "price=PRICE, size=AMOUNT, signed_size (negative: a sell)") in replay.notes


def test_a_refused_header_less_file_names_its_columns_by_position(tmp_path: Path) -> None:
    """A layout no guess reads (Kraken's 7-column REST arrays; Bitfinex's with no sell among its first rows) is
    refused with --csv-names naming the epoch column `time` and each column said by position with what it looks
    like; a price is never called seconds after midnight beside an epoch time."""
    (tmp_path / "XBTUSD_rest.csv").write_text("".join(
        f"{42000 + i % 9}.1,0.{i + 1:04d},{T0 + i}.1234,{'bs'[i % 2]},{'ml'[i % 2]},,{70000000 + i}\n"
        for i in range(20)))
    with pytest.raises(ValueError) as refused:
        FileReplay(tmp_path / "XBTUSD_rest.csv")
    said = str(refused.value)
    assert "--csv-names c1,c2,time,c4,c5,c6,c7 " in said and "seconds after midnight" not in said, said
    assert ("its columns: 1 (42000.1) a number; 2 (0.0001) a number; 3 (1704153600.1234) a time, seconds since the "
            "epoch (2024-01-02T00:00:00.123400000Z); 4 (b) text; 5 (m) text; 6 () empty; 7 (70000000) a number") \
        in said, said
    (tmp_path / "tBTCUSD_buys.csv").write_text("".join(
        f"{1500000000 + i},{(T0 + i) * 1000},0.5,{42000 + i % 9}\n" for i in range(20)))
    with pytest.raises(ValueError) as refused:
        FileReplay(tmp_path / "tBTCUSD_buys.csv")
    said = str(refused.value)
    assert "--csv-names c1,time,c3,c4 " in said, said
    assert ("its columns: 1 (1500000000) an integer: an id, or seconds since the epoch (2017-07-14T02:40:00Z); "
            "2 (1704153600000) a time, ms since the epoch (2024-01-02T00:00:00Z); 3 (0.5) a number; 4 (42000) a "
            "number. If it holds Bitfinex's trades (no sell among its first rows, so AMOUNT's sign does not tell): "
            "--csv-names ID,MTS,AMOUNT,PRICE") in said, said


def test_kibot_date_and_time_of_day_columns_read_as_one_time(tmp_path: Path) -> None:
    """Kibot's header-less minute bars and ticks write the date and the time of day apart (review430 #7): read as
    one time, each bar at its own minute, where the date alone put a day's bars at its midnight and left out all
    but the last of them as revised bars; the order the dates read in is still settled by a day past the 12th."""
    days = ("01/12/2024", "01/16/2024")
    bars = tmp_path / "QQQ.txt"
    bars.write_text("".join(f"{day},09:3{m},400.00,400.10,399.90,400.0{m},100{m}\n" for day in days for m in range(3)))
    replay = FileReplay(bars)
    ticks = drain(replay)
    minute = 60 * 10**9
    assert [t.ts for t in ticks] == [day + m * minute for day in (1705051800 * 10**9, 1705397400 * 10**9)
                                     for m in range(3)]  # 09:30 .. 09:32 UTC on each day
    assert [t.price for t in ticks] == [400.0, 400.01, 400.02] * 2 and not dict(replay.rejected)
    assert replay.readings()[0][1]["ts"] == "date+time"
    quotes = tmp_path / "IBM.txt"  # Kibot's ticks: date, time, price, bid, ask, size
    quotes.write_text("".join(f"{day},09:30:0{s},161.20,161.19,161.21,100\n" for day in days for s in range(2)))
    assert [t.ts for t in drain(FileReplay(quotes)) if t.kind == "trade"] == [
        1705051800 * 10**9, 1705051801 * 10**9, 1705397400 * 10**9, 1705397401 * 10**9]
