"""Tick files as vendors ship them, read with no column map or a short one: ISO times with UTC offsets,
non-ISO time text, semicolon CSVs with a BOM, CRLF, quotes and blank lines, header names in other cases,
B/A/N and BUY/SELL sides, gzip, FX pairs written EUR/USD, Parquet with zoned times, categorical symbols,
float32 prices and nulls. Every file is a real file written into tmp_path."""

from __future__ import annotations

import gzip
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from conftest import drain, ns, tiny_tick_checkpoint
from connectors.replay import ColumnMap, FileReplay
from engine.service.cli import main

QUERIES = "queries:\n  - {name: dir5, streams: ['*'], question: direction_5, kind: choice, trigger: {ticks: 2}}\n"


def test_equities_iso_times_with_offsets_detected_and_backtested(tmp_path: Path, capsys) -> None:
    (tmp_path / "taq.csv").write_text(
        "timestamp,symbol,exchange,price,size,conditions\n"
        "2024-06-03T09:30:00.123456-04:00,AAPL,Q,192.31,100,@ F\n"
        "2024-06-03T13:30:00.223456Z,AAPL,N,192.32,200,@\n"
        "2024-06-03T15:30:00.323456+02:00,MSFT,Q,415.10,50,@ I\n"
        "2024-06-03T09:30:01-04:00,MSFT,P,415.12,10,@ F I\n")
    replay = FileReplay(tmp_path / "taq.csv")
    ticks = drain(replay)
    assert [(t.stream, t.ts) for t in ticks] == [
        ("AAPL", ns("2024-06-03T13:30:00.123456+00:00")), ("AAPL", ns("2024-06-03T13:30:00.223456+00:00")),
        ("MSFT", ns("2024-06-03T13:30:00.323456+00:00")), ("MSFT", ns("2024-06-03T13:30:01+00:00"))]
    assert replay.notes[0] == ("taq.csv: no column map given; read as ts=timestamp (datetime), stream=symbol, "
                               "price=price, size=size")
    assert replay.notes[1].startswith('taq.csv: sale conditions are not read ("conditions" holds "@", "@ F", ')
    assert len(replay.notes) == 2
    with pytest.raises(ValueError, match="carries its UTC offset.*drop it .files of both kinds in one run: a replay "
                                         "list gives each file its own map"):
        FileReplay(tmp_path / "taq.csv", columns={"ts": "timestamp", "ts_unit": "datetime", "tz": "America/New_York",
                                                  "stream_col": "symbol", "price": "price", "size": "size"})

    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    (tmp_path / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 4096, block_size: 16}}\n")
    (tmp_path / "q.yaml").write_text(QUERIES)
    code = main(["backtest", str(tmp_path / "taq.csv"), "--queries", str(tmp_path / "q.yaml"), "--quiet",
                 "--config", str(tmp_path / "engine.yaml"), "--out", str(tmp_path / "a.parquet")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "replayed 4 ticks (0 rejected)" in out and "note: taq.csv: no column map given" in err
    assert set(pl.read_parquet(tmp_path / "a.parquet")["stream"]) == {"AAPL", "MSFT"}


def test_fx_quotes_with_slashed_pairs_and_a_time_format(tmp_path: Path, capsys) -> None:
    (tmp_path / "fx.csv").write_text(
        "DateTime,Pair,Bid,Ask\n"
        "20240603 09:30:00.123,EUR/USD,1.08501,1.08503\n"
        "20240603 09:30:01.012,GBP/USD,1.27601,1.27604\n"
        "20240603 09:30:00.456,EUR/USD,1.08502,1.08505\n")
    columns = {"ts": "DateTime", "stream_col": "Pair", "bid": "Bid", "ask": "Ask"}
    with pytest.raises(ValueError, match=r'holds "20240603 09:30:00.123", which is not ISO 8601.*--ts-format'):
        FileReplay(tmp_path / "fx.csv", columns=columns | {"ts_unit": "datetime"})
    replay = FileReplay(tmp_path / "fx.csv", columns=columns | {"ts_format": "%Y%m%d %H:%M:%S%.f"})
    ticks = drain(replay)
    assert [(t.stream, t.kind, t.ts) for t in ticks] == [
        ("EUR-USD", "quote", ns("2024-06-03T09:30:00.123+00:00")),
        ("EUR-USD", "quote", ns("2024-06-03T09:30:00.456+00:00")),
        ("GBP-USD", "quote", ns("2024-06-03T09:30:01.012+00:00"))]
    assert replay.sorted_files == [tmp_path / "fx.csv"]
    assert any("EUR/USD as EUR-USD" in n for n in replay.notes)
    assert main(["feed", "replay", str(tmp_path / "fx.csv"), "--columns", "ts=DateTime,stream=Pair,bid=Bid,ask=Ask",
                 "--ts-unit", "ms", "--endpoint", "tcp://127.0.0.1:1"]) == 2
    assert 'holds "20240603 09:30:00.123", not a number of ms since the epoch' in capsys.readouterr().err


def test_semicolon_csv_with_bom_crlf_quotes_blank_lines_and_loose_header(tmp_path: Path) -> None:
    rows = ['"Time";" Symbol ";"Price";"Amount";"Side"']
    rows += [f'"{1_717_236_000_000 + 250 * i}";"BTC-USD";"{67000 + i}.25";"0.5";"{s}"'
             for i, s in enumerate(["BUY", "Sell", "b", "S", "A", "N", "buy"])]
    (tmp_path / "crypto.csv").write_bytes(("\ufeff" + "\r\n".join(rows) + "\r\n\r\n\r\n").encode())
    columns = {"ts": "time", "ts_unit": "ms", "stream_col": "symbol", "price": "price", "size": "amount",
               "side": "side"}
    for replay in (FileReplay(tmp_path / "crypto.csv", columns=columns), FileReplay(tmp_path / "crypto.csv")):
        ticks = drain(replay)
        assert dict(replay.rejected) == {}
        assert [t.side for t in ticks] == ["buy", "sell", "buy", "sell", "sell", None, "buy"]
        assert (ticks[0].ts, ticks[0].price, ticks[0].stream) == (1_717_236_000_000 * 10**6, 67000.25, "BTC-USD")
    (tmp_path / "ticks.tsv").write_text("time\tprice\tsize\n1717236000.5\t10.5\t1\n1717236001.25\t10.75\t2\n")
    ticks = drain(FileReplay(tmp_path / "ticks.tsv"))
    assert [(t.stream, t.ts) for t in ticks] == [("ticks", 1_717_236_000_500_000_000), ("ticks",
                                                                                        1_717_236_001_250_000_000)]


def test_futures_ns_integers_with_databento_sides_gzipped(tmp_path: Path) -> None:
    t0 = 1_733_149_800_000_000_123
    text = "ts_event,symbol,price,size,side\n" + "".join(
        f"{t0 + i * 37_000_001},ESZ6,{6050.25 + 0.25 * (i % 3)},{1 + i},{'BAN'[i % 3]}\n" for i in range(6))
    with gzip.open(tmp_path / "glbx.csv.gz", "wt") as f:
        f.write(text)
    replay = FileReplay(tmp_path / "glbx.csv.gz")
    ticks = drain(replay)
    assert [t.side for t in ticks] == ["buy", "sell", None] * 2
    assert ticks[1].ts == t0 + 37_000_001 and {t.stream for t in ticks} == {"ESZ6"}
    assert "ts=ts_event (ns)" in replay.notes[0]
    with gzip.open(tmp_path / "nosym.csv.gz", "wt") as f:
        f.write("time,price,size\n1717236000000,1.5,2\n")
    assert [(t.stream, t.ts) for t in drain(FileReplay(tmp_path / "nosym.csv.gz"))] == [
        ("nosym", 1_717_236_000_000 * 10**6)]  # the stream is the name without .csv.gz; ms from the magnitude


def test_parquet_with_zoned_times_categorical_symbols_float32_and_nulls(tmp_path: Path) -> None:
    start = datetime(2024, 6, 3, 9, 30)
    pl.DataFrame({
        "Timestamp": pl.datetime_range(start, start.replace(microsecond=300_000), "100ms", time_unit="ns",
                                       time_zone="America/New_York", eager=True),
        "Ticker": pl.Series(["AAPL", "MSFT", "AAPL", "MSFT"]).cast(pl.Categorical),
        "Bid": pl.Series([192.31, 415.1, None, 415.11], dtype=pl.Float32),
        "Ask": pl.Series([192.32, 415.12, 192.33, 415.13], dtype=pl.Float32),
    }).write_parquet(tmp_path / "nbbo.parquet")
    replay = FileReplay(tmp_path / "nbbo.parquet")
    ticks = drain(replay)
    base = ns("2024-06-03T13:30:00+00:00")
    assert [(t.stream, t.ts) for t in ticks] == [("AAPL", base), ("MSFT", base + 100_000_000),
                                                 ("MSFT", base + 300_000_000)]
    assert ticks[0].bid == pytest.approx(192.31, abs=1e-4)
    assert dict(replay.rejected) == {"missing_field": 1}
    assert "ts=Timestamp (datetime), stream=Ticker, bid=Bid, ask=Ask" in replay.notes[0]


def test_time_column_in_the_wrong_unit_is_named_with_the_fix(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("time,sym,px,qty\n1717236000123,X,1.5,1\n1717236000456,X,1.5,1\n")
    columns = {"ts": "time", "stream_col": "sym", "price": "px", "size": "qty"}
    replay = FileReplay(tmp_path / "t.csv", columns=columns)  # a map as written: its unit read from the column
    assert [t.ts for t in drain(replay)] == [1717236000123_000_000, 1717236000456_000_000]
    assert replay.notes == ['t.csv: column "time" read as ms since the epoch, as its first value shows (--ts-unit or '
                            "--ts-format to say otherwise)"]
    replay = FileReplay(tmp_path / "t.csv", columns=ColumnMap.from_dict(columns))  # ns: 1970, said in a note
    assert replay.notes == ["t.csv: the first time, 1717236000123 ns since the epoch, is not in 1990..2200: if "
                            'column "time" counts ms, give --ts-unit ms']
    with pytest.raises(ValueError, match=r'holds "1717236000123", a number: give its epoch unit, e.g. --ts-unit ms'):
        FileReplay(tmp_path / "t.csv", columns=columns | {"ts_unit": "datetime"})
    assert FileReplay(tmp_path / "t.csv", columns=columns | {"ts_unit": "ms", "price": "PX"}).notes == []


def test_rejected_rows_say_what_to_do(tmp_path: Path) -> None:
    # a price with grouping commas ("12,345.67", quoted) reads as 12345.67; one that is no number is refused
    (tmp_path / "t.csv").write_text('time,symbol,price,size,side\n1717236000000,X,"12,345.67",1,buy\n'
                                    "1717236000001,X,1.5,1,hold\n1717236000002,_X,1.5,1,buy\n1717236000003,X,1.5,1,S\n"
                                    "1717236000004,X,n/a,1,buy\n")
    replay = FileReplay(tmp_path / "t.csv")
    assert [(t.price, t.side) for t in drain(replay)] == [(12345.67, "buy"), (1.5, "sell")]
    examples = replay.rejected.examples
    assert examples["missing_field"].endswith('(column "price": "n/a" is not a number)')  # the cell, quoted
    assert 'got "hold" (column "side"; map other side values with side_map' in examples["unknown_side"]
    # the symbol column's own value: one fixed stream_name would merge every symbol into one stream
    assert "(column \"symbol\"; the file's own value: fix it at the source, or name the streams by other columns" \
        in examples["bad_stream"] and "not stream_name=NAME" in examples["bad_stream"]


def test_date_and_time_in_two_columns(tmp_path: Path) -> None:
    (tmp_path / "kibot.csv").write_text("Date;Time;Price;Volume\n06/03/2024;09:30:00;192.31;100\n"
                                        "06/03/2024;09:30:01.5;192.32;200\n")
    columns = {"ts": "Date+Time", "ts_format": "%m/%d/%Y %H:%M:%S%.f", "tz": "America/New_York",
               "stream": "AAPL", "price": "Price", "size": "Volume"}
    ticks = drain(FileReplay(tmp_path / "kibot.csv", columns=columns))
    assert [t.ts for t in ticks] == [ns("2024-06-03T13:30:00+00:00"), ns("2024-06-03T13:30:01.5+00:00")]
    with pytest.raises(ValueError, match="joins date and time columns"):
        FileReplay(tmp_path / "kibot.csv", columns=columns | {"ts_unit": "ms", "ts_format": None, "tz": None})


def test_a_time_that_does_not_read_is_quoted_and_a_dst_gap_named_only_in_a_zone_that_has_one(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("time,price,size\n2024-01-02 09:30:00,1.5,1\nsoon,1.5,1\n")
    for zone, dst in (("EST", False), ("America/New_York", True)):
        replay = FileReplay(tmp_path / "t.csv", columns={"tz": zone})
        drain(replay)
        example = replay.rejected.examples["missing_field"]
        assert '(column "time": "soon" is not a time the map reads' in example
        assert ("DST" in example) is dst


def test_files_detected_alike_get_one_note_with_their_count(tmp_path: Path) -> None:
    """review267: one identical `FILE: no column map given; read as ...` note per file (503 stderr lines for 500
    files) buried the notes that matter; now one per layout, with the count and the first names, and a file read
    otherwise keeps its own line."""
    files = []
    for i in range(5):
        files.append(tmp_path / f"CL_{i:04d}.csv")
        files[-1].write_text(f"timestamp,symbol,price,size\n{1_788_273_000_000_000_000 + i * 10**12},CL,70.01,1\n")
    odd = tmp_path / "CL_odd.csv"
    odd.write_text("ts_ms,ticker,px,qty\n1788283000000,CL,70.02,2\n")
    notes = FileReplay([*files, odd]).notes
    read_as = "no column map given; read as ts=timestamp (ns), stream=symbol, price=price, size=size"
    assert f"5 files: {read_as} (CL_0000.csv, CL_0001.csv, CL_0002.csv, ... 2 more)" in notes, notes
    assert not any(note.startswith("CL_000") for note in notes), notes
    assert sum("no column map given" in note for note in notes) == 2  # and the odd one's own
    assert any(note.startswith("CL_odd.csv: no column map given; read as ts=ts_ms (ms)") for note in notes), notes
