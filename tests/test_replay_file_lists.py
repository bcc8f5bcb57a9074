"""Several files replayed together: a replay list gives each file its own column map, stream name and keep filter;
files of several venues feeding one stream get a note naming every file, and two files over the same times a
caution. Every fixture is written here, from code, into tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import drain, ns
from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from connectors.ticks import Tick


def test_a_replay_list_gives_each_file_its_own_map_from_the_command_line(tmp_path: Path) -> None:
    # Interactive Brokers' API names for trades and quotes of one stock: one map cannot read both files
    folder = tmp_path / "ib"
    folder.mkdir()
    (folder / "AAPL_BID_ASK_20240102.csv").write_text("time,priceBid,priceAsk,sizeBid,sizeAsk\n"
                                                      "2024-01-02 14:30:00+00:00,185.49,185.51,300,700\n")
    (folder / "trades.csv").write_text("time,tickAttribLast,price,size\n"
                                       '2024-01-02 14:30:01+00:00,"TickAttribLast(pastLimit=False)",185.5,100\n')
    (tmp_path / "list.yaml").write_text("replay:\n  - path: ib/AAPL_BID_ASK_20240102.csv\n"
                                        "  - path: ib/trades.csv\n    columns: {ts: time, price: price, size: size, "
                                        "stream: AAPL}\n")
    t0 = ns("2024-01-02T14:30:00+00:00")
    assert drain(FileReplay(tmp_path / "list.yaml")) == [  # paths from the list's folder; the time's unit detected
        Tick("AAPL", t0, "quote", bid=185.49, ask=185.51, bid_size=300, ask_size=700),
        Tick("AAPL", t0 + 10**9, "trade", price=185.5, size=100)]
    (tmp_path / "bad.yaml").write_text("replay:\n  - {path: ib/trades.csv, colums: {ts: time}}\n")
    with pytest.raises(ValueError, match=r'entry 1 needs path and may have columns; got keys "colums" and "path"'):
        FileReplay(tmp_path / "bad.yaml")
    (tmp_path / "other.yaml").write_text("files: [a.csv]\n")
    with pytest.raises(ValueError, match="one key, replay"):
        FileReplay(tmp_path / "other.yaml")
    # --columns' inline stream_name= written in an entry: the YAML key named, not a hint to use a replay list
    (tmp_path / "inline.yaml").write_text("replay:\n  - {path: ib/trades.csv, columns: {stream_name: AAPL}}\n")
    with pytest.raises(ValueError) as refused:
        FileReplay(tmp_path / "inline.yaml")
    said = str(refused.value)
    assert said.startswith(f"{folder / 'trades.csv'}: its columns: unknown column-map key \"stream_name\" "
                           f"(stream_name is the inline --columns spelling; in YAML a fixed stream is stream: NAME, a "
                           f"stream column stream_col: COLUMN)") and "replay list gives" not in said, said
    (tmp_path / "own.yaml").write_text("replay:\n  - {path: ib/trades.csv, columns: {bid: priceBid}}\n")
    with pytest.raises(ValueError, match="bid and ask must be mapped together") as refused:
        FileReplay(tmp_path / "own.yaml")  # the entry's own map does not fit its file: not "the keys for every file"
    assert "apply to every file" not in str(refused.value)
    with pytest.raises(ValueError, match=r"apply to every file; a replay list gives each file its own map"):
        FileReplay(folder / "trades.csv", columns={"bid": "priceBid"})
    (tmp_path / "map.yaml").write_text("ts: time\nstream_name: AAPL\nprice: price\nsize: size\n")
    with pytest.raises(ValueError, match=r"map.yaml: unknown column-map key \"stream_name\" \(stream_name is "
                                         r"the inline --columns spelling; in YAML a fixed stream is stream: NAME"):
        map_from_options(columns=str(tmp_path / "map.yaml"))


def test_files_of_several_venues_feeding_one_stream_get_a_note(tmp_path: Path) -> None:
    (tmp_path / "BTCUSDT-trades-2024-01-02.csv").write_text(
        "4500000000,42500.1,0.053,2252.5,1704153601000,true,true\n")  # Binance spot, header-less
    (tmp_path / "tardis_trades.csv").write_text(
        "exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n"
        "binance-futures,BTCUSDT,1704153601100000,1704153601200000,1,buy,42510.1,0.5\n")
    (tmp_path / "tardis_quotes.csv").write_text(
        "exchange,symbol,timestamp,local_timestamp,ask_amount,ask_price,bid_price,bid_amount\n"
        "binance-futures,BTCUSDT,1704153601150000,1704153601250000,1.5,42510.2,42510.0,2.5\n")
    (tmp_path / "BTCUSDT2024-01-02.csv").write_text(
        "timestamp,symbol,side,size,price,tickDirection,trdMatchID,grossValue,homeNotional,foreignNotional\n"
        "1704153601.5,BTCUSDT,Buy,0.1,42520.5,PlusTick,abc,1,0.1,4252\n")  # Bybit's derivatives history
    files = [tmp_path / n for n in ("BTCUSDT-trades-2024-01-02.csv", "tardis_trades.csv", "BTCUSDT2024-01-02.csv")]
    replay = FileReplay(files)
    # spot keeps its name; the two perpetuals are BTCUSDT_PERP (docs/replay.md, Derivatives' streams), which the
    # files of two venues feed
    assert {t.stream for t in drain(replay)} == {"BTCUSDT", "BTCUSDT_PERP"}
    note = next(n for n in replay.notes if n.startswith("stream BTCUSDT_PERP is fed by files of 2 venues"))
    assert "bybit (BTCUSDT2024-01-02.csv)" in note and "binance-futures (tardis_trades.csv)" in note
    assert "replay list" in note and not any(n.startswith("stream BTCUSDT is fed") for n in replay.notes)
    assert replay.cautions == [note]  # and said again at the end of a run
    # one venue's trades and quotes are one market: no note
    assert not any("venues" in n for n in FileReplay([tmp_path / "tardis_trades.csv",
                                                      tmp_path / "tardis_quotes.csv"]).notes)
    # the fix the note names: a stream per file in a replay list
    (tmp_path / "list.yaml").write_text("replay:\n"
                                        "  - {path: BTCUSDT-trades-2024-01-02.csv}\n"
                                        "  - {path: tardis_trades.csv}\n"
                                        "  - {path: BTCUSDT2024-01-02.csv, columns: {stream: BYBIT-BTCUSDT}}\n")
    replay = FileReplay(tmp_path / "list.yaml")
    assert {t.stream for t in drain(replay)} == {"BTCUSDT", "BTCUSDT_PERP", "BYBIT-BTCUSDT"}
    assert not any("venues" in n for n in replay.notes)


def test_the_several_venues_note_names_every_file_feeding_the_stream(tmp_path: Path) -> None:
    """Four days of Binance spot, a Tardis.dev Bybit spot day and two files whose layout names no venue: each file
    is named."""
    days = [tmp_path / f"BTCUSDT-trades-2024-01-0{day}.csv" for day in range(2, 6)]
    for day, path in enumerate(days):
        path.write_text(f"{4500000000 + day},42500.1,0.053,2252.5,{1704153601000 + day * 86_400_000},true,true\n")
    (tmp_path / "bybit_spot.csv").write_text(
        "exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n"
        "bybit-spot,BTCUSDT,1704153601500000,1704153601600000,1,buy,42520.5,0.1\n")
    plain = [tmp_path / "mine.csv", tmp_path / "theirs.csv"]
    for i, path in enumerate(plain):
        path.write_text(f"timestamp,symbol,price,size\n{1704153602000 + i},BTCUSDT,42501.5,1\n")
    replay = FileReplay([*days, tmp_path / "bybit_spot.csv", *plain])
    note = next(n for n in replay.notes if n.startswith("stream BTCUSDT is fed by files of 2 venues"))
    assert f"binance ({', '.join(p.name for p in days)})" in note and "bybit-spot (bybit_spot.csv)" in note
    assert "; and 2 file(s) of no known venue (mine.csv, theirs.csv)" in note


def test_okx_liquidations_left_out_by_a_keep_filter_in_a_replay_list(tmp_path: Path) -> None:
    (tmp_path / "okx.csv").write_text("instId,tradeId,px,sz,side,ts,isLiquidation\n"
                                      "BTC-USDT-SWAP,1,42500.1,2,buy,1704153601000,false\n"
                                      "BTC-USDT-SWAP,2,42400.0,50,sell,1704153601500,true\n")
    (tmp_path / "list.yaml").write_text("replay:\n  - {path: okx.csv, columns: {keep: {isLiquidation: [false]}}}\n")
    replay = FileReplay(tmp_path / "list.yaml")
    assert [t.price for t in drain(replay)] == [42500.1] and dict(replay.rejected) == {"filtered_out": 1}


def test_two_files_feeding_one_stream_over_the_same_times_get_a_caution(tmp_path: Path) -> None:
    """Two vendors' EURUSD quotes merged by time interleave into one stream in silence; days that follow each
    other, and one market's trades beside its quotes, are the normal case: no caution."""
    def quotes(name: str, day: int, start_s: int) -> Path:
        rows = [f"2026-11-{day:02d}T00:00:{start_s + i:02d}Z,EURUSD,1.1600{i},1.1601{i}" for i in range(5)]
        (tmp_path / name).write_text("timestamp,symbol,bid,ask\n" + "\n".join(rows) + "\n")
        return tmp_path / name

    duka, truefx = quotes("duka.csv", 2, 0), quotes("truefx.csv", 2, 2)
    replay = FileReplay([duka, truefx])
    assert len(drain(replay)) == 10
    (caution,) = replay.cautions
    assert caution.startswith(f"stream EURUSD fed by both {duka} and {truefx}, whose times overlap (2026-11-02T"
                              f"00:00:02Z to 2026-11-02T00:00:04Z): their ticks interleave into one stream"), caution
    assert "give each its own stream in a replay list (an entry's columns: {stream: NAME})" in caution
    assert not FileReplay([duka, quotes("next_day.csv", 3, 0)]).cautions  # one file after the other
    (tmp_path / "trades.csv").write_text("timestamp,symbol,price,size\n2026-11-02T00:00:01Z,EURUSD,1.16005,1\n"
                                         "2026-11-02T00:00:03Z,EURUSD,1.16006,2\n")
    assert not FileReplay([duka, tmp_path / "trades.csv"]).cautions  # one market's quotes and trades
    assert len(FileReplay([duka, truefx], streams=["EUR*"]).cautions) == 1  # selected: still said
    assert not FileReplay([(duka, {"stream": "EURUSD.DUKA"}), truefx]).cautions  # named apart


def test_the_same_day_given_twice_is_said_to_be_identical_rows_not_two_sources(tmp_path: Path) -> None:
    """review267: a `.csv` beside its `.csv.gz` (or the day re-downloaded as Parquet) got the generic caution about
    two vendors' overlapping times, though every row was the same: now said as identical rows, both files named,
    and still both read (nothing dropped in silence)."""
    import gzip

    import polars as pl

    rows = [f"2026-09-02T14:30:{i:02d}.5Z,ES,{6000 + i % 3 * 0.25:.2f},{1 + i % 4}" for i in range(20)]
    day = tmp_path / "ES_2026-09-02.csv"
    day.write_text("timestamp,symbol,price,size\n" + "\n".join(rows) + "\n")
    gzipped = tmp_path / "ES_2026-09-02.csv.gz"
    gzipped.write_bytes(gzip.compress(day.read_bytes(), mtime=0))
    again = tmp_path / "ES_2026-09-02_redownload.parquet"
    pl.read_csv(day, try_parse_dates=True).write_parquet(again)
    for other in (gzipped, again):
        replay = FileReplay([day, other])
        assert len(drain(replay)) == 40  # both read: said, not dropped
        (caution,) = replay.cautions
        span = "from 2026-09-02T14:30:00.500000000Z to 2026-09-02T14:30:19.500000000Z"
        assert caution.startswith(f"stream ES: {day} and {other} hold identical rows {span} (20 rows, their times, "
                                  f"prices and sizes alike): the same data given twice"), caution
        assert "replay one of them" in caution and "two vendors" not in caution
    (tmp_path / "other.csv").write_text("timestamp,symbol,price,size\n" + "\n".join(rows[:-1]) + "\n"
                                        "2026-09-02T14:30:19.5Z,ES,6001.00,1\n")  # one row differs: two sources
    (caution,) = FileReplay([day, tmp_path / "other.csv"]).cautions
    assert "whose times overlap" in caution and "identical" not in caution


def test_files_of_one_root_named_by_contract_months_that_trade_at_once_are_a_stream_each(tmp_path: Path) -> None:
    """`CL_202501.csv` and `CL_202502.csv`, one contract each, 0.31 apart and trading at once, were one stream `CL`,
    said as "two vendors" (review441 #10); each is now its contract's stream. Months that follow each other (a
    month of one stock's trades a file) stay one stream."""
    def trades(name: str, month: int, level: float, day: int = 16) -> Path:
        rows = [f"2024-{month:02d}-{day:02d}T15:00:{i:02d}Z,{level + i % 3 * 0.01:.2f},1" for i in range(6)]
        (tmp_path / f"{name}.csv").write_text("timestamp,price,size\n" + "\n".join(rows) + "\n")
        return tmp_path / f"{name}.csv"

    for january, february in (("CL_202501", "CL_202502"), ("CL-Jan25", "CL-Feb25"), ("CL_012025_trades",
                                                                                     "CL_022025_trades")):
        replay = FileReplay([trades(january, 12, 71.0), trades(february, 12, 70.69)])
        assert {t.stream for t in drain(replay)} == {"CL 202501", "CL 202502"}, january
        assert not replay.cautions
        assert [n for n in replay.notes if "stream CL 202501, from the file name's root and contract month" in n], \
            replay.notes
        # the layout note names the streams as read, not the root alone (stream_name=CL) before the note naming them
        [read_as] = [n for n in replay.notes if "; read as " in n]
        assert "stream from the file name's root and contract month (CL YYYYMM)" in read_as, read_as
        assert "stream_name=CL," not in read_as
    stock = FileReplay([trades("AAPL_202401", 1, 185.0), trades("AAPL_202402", 2, 186.0)])
    assert {t.stream for t in drain(stock)} == {"AAPL"}
