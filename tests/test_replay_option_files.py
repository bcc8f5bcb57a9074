"""Equity option files as an options desk has them: NBBO quote files whose empty side is no bid (one-sided
quotes, counted, never filled from an earlier quote), a stream selection over a chain, contracts named the
same however a cell writes them, and Cboe DataShop-style interval bars with no trade. Every fixture is written
here, as CSV and, where the point is that both read alike, as Parquet."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain

SPY = "SPY   261218C00600000"  # OCC symbols: the root padded to six characters
AAPL = "AAPL  261218C00195000"
T0 = 1797604200000000000
NBBO_HEADER = "timestamp,symbol,bid,ask,bid_size,ask_size\n"


def nbbo_rows(empty_bids_from: int, n: int) -> str:
    """`n` quote rows of SPY's contract, the bid empty (no bid) on every other row from row `empty_bids_from`."""
    rows = []
    for i in range(n):
        no_bid = i >= empty_bids_from and i % 2 == 0
        rows.append(f"{T0 + i * 100_000_000},{SPY},{'' if no_bid else '0.05'},0.10,{'' if no_bid else 10},20\n")
    return "".join(rows)


def test_an_empty_side_of_a_quote_file_is_a_one_sided_quote_in_csv_and_parquet(tmp_path: Path) -> None:
    csv = tmp_path / "spy_nbbo.csv"
    csv.write_text(NBBO_HEADER + f"{T0},{SPY},0.05,0.10,10,20\n{T0 + 10**8},{SPY},,0.10,,20\n"
                   f"{T0 + 2 * 10**8},{SPY},,0.08,,20\n{T0 + 3 * 10**8},{SPY},,0.07,,25\n"
                   f"{T0 + 4 * 10**8},{SPY},0.03,0.07,5,25\n")
    replay = FileReplay(csv)
    ticks = drain(replay)
    assert [(t.bid, t.ask) for t in ticks] == [(0.05, 0.10), (0.03, 0.07)]  # no 0.05 bid invented
    assert dict(replay.rejected) == {"missing_field": 3}
    example = replay.rejected.examples["missing_field"]
    assert example.startswith(f"{csv} line 3: missing_field: bid is empty beside ask 0.1: a one-sided quote (no bid)")
    assert not any("leave bid or ask empty" in note for note in replay.notes)
    parquet = tmp_path / "spy_nbbo.parquet"
    pl.read_csv(csv, schema_overrides={"symbol": pl.String}).write_parquet(parquet)
    from_parquet = FileReplay(parquet)
    assert drain(from_parquet) == ticks and from_parquet.rejected == replay.rejected
    assert "a one-sided quote (no bid)" in from_parquet.rejected.examples["missing_field"]
    # the user who knows the file writes only what changed says so
    filled = FileReplay(csv, columns=map_from_options(columns="fill_quotes=true", detect=True))
    assert [t.bid for t in drain(filled)] == [0.05, 0.05, 0.05, 0.05, 0.03] and not filled.rejected


def test_where_the_first_empty_side_falls_does_not_change_how_a_file_reads(tmp_path: Path) -> None:
    early, late = tmp_path / "early.csv", tmp_path / "late.csv"
    early.write_text(NBBO_HEADER + nbbo_rows(2, 80))
    late.write_text(NBBO_HEADER + nbbo_rows(60, 80))
    for path, one_sided in ((early, 39), (late, 10)):
        replay = FileReplay(path)
        assert len(drain(replay)) == 80 - one_sided and dict(replay.rejected) == {"missing_field": one_sided}


def test_an_unreadable_side_is_not_called_one_sided(tmp_path: Path) -> None:
    path = tmp_path / "quotes.csv"
    path.write_text(NBBO_HEADER + f"{T0},{SPY},0.05,0.10,10,20\n{T0 + 1},{SPY},n/a,0.10,,20\n")
    replay = FileReplay(path)
    assert len(drain(replay)) == 1 and dict(replay.rejected) == {"missing_field": 1}
    example = replay.rejected.examples["missing_field"]
    assert "field \"bid\" is required" in example and "one-sided" not in example and "not a number" in example


def test_metatrader_ticks_without_brackets_still_carry_the_unchanged_side(tmp_path: Path) -> None:
    path = tmp_path / "EURUSD.csv"  # a MetaTrader tick export saved by a script: its names without the <>
    path.write_text("Date\tTime\tBid\tAsk\tLast\tVolume\tFlags\n"
                    "2024.01.02\t09:30:00.351\t1.09403\t1.09415\t\t\t6\n"
                    "2024.01.02\t09:30:00.420\t1.09401\t\t\t\t2\n")
    replay = FileReplay(path)
    assert [(t.bid, t.ask) for t in drain(replay)] == [(1.09403, 1.09415), (1.09401, 1.09415)]
    assert not replay.rejected and any("leave bid or ask empty" in note for note in replay.notes)


def test_rows_of_unselected_streams_are_filtered_out_whatever_else_is_wrong(tmp_path: Path) -> None:
    path = tmp_path / "chain.csv"
    path.write_text(NBBO_HEADER + f"{T0},{SPY},0.05,0.10,10,20\n"
                    f"{T0},{AAPL},0.00,0.05,0,20\n"  # no bid, written 0
                    f"{T0 + 1},{AAPL},,0.05,,20\n"  # no bid, left empty
                    f"{T0 + 2},{AAPL},0.10,0.05,3,20\n"  # crossed
                    f"{T0 + 3},{SPY},,0.10,,20\n")  # a selected stream's one-sided quote: missing_field
    replay = FileReplay(path, streams=["SPY *"])
    assert [t.stream for t in drain(replay)] == [SPY]
    assert dict(replay.rejected) == {"filtered_out": 3, "missing_field": 1}
    assert f"{path} line 6" in replay.rejected.examples["missing_field"]
    assert "not among the streams selected" in replay.rejected.examples["filtered_out"]


def test_a_contract_is_one_stream_however_its_strike_and_right_are_written(tmp_path: Path) -> None:
    rows = [("150", "C"), ("150.0", "c"), ("150.00", "Call"), ("150.50", "CALL"), ("150.5", "put"), ("0150.500", " P "),
            (".500", "p"), ("100.00", "Put")]
    path = tmp_path / "opra.csv"
    path.write_text("ts_ns,underlying,expiry,strike,right,price,size\n" + "".join(
        f"{T0 + i},SPY,2024-01-19,{strike},{right},1.50,1\n" for i, (strike, right) in enumerate(rows)))
    names = ["SPY 2024-01-19 150 C"] * 3 + ["SPY 2024-01-19 150.5 C"] + ["SPY 2024-01-19 150.5 P"] * 2 + \
        ["SPY 2024-01-19 0.5 P", "SPY 2024-01-19 100 P"]
    assert [t.stream for t in drain(FileReplay(path))] == names
    # a Parquet file's float strikes (always 150.0) and Cboe's 150.000 name the same contracts
    parquet = tmp_path / "opra.parquet"
    pl.DataFrame({"ts_ns": [T0, T0 + 1, T0 + 2], "underlying": ["SPY"] * 3, "expiry": ["2024-01-19"] * 3,
                  "strike": [150.0, 150.5, 0.5], "right": ["C", "C", "P"], "price": [1.5] * 3, "size": [1] * 3}
                 ).write_parquet(parquet)
    assert [t.stream for t in drain(FileReplay(parquet))] == [names[0], names[3], names[6]]
    cboe = tmp_path / "cboe.csv"
    cboe.write_text("underlying_symbol,quote_datetime,root,expiration,strike,option_type,trade_size,trade_price\n"
                    "^SPX,2024-01-02 09:30:00.000,SPXW,2024-01-19,4700.000,C,18,1.50\n")
    assert [t.stream for t in drain(FileReplay(cboe))] == ["SPXW 2024-01-19 4700 C"]


def test_a_stream_cell_with_a_stray_space_at_an_end_is_the_contract(tmp_path: Path) -> None:
    path = tmp_path / "aapl.csv"
    path.write_text(NBBO_HEADER + f'{T0},"AAPL  261218C00150000 ",1.00,1.10,5,5\n'
                    f'{T0 + 1}," AAPL  261218C00150000",1.00,1.10,5,5\n{T0 + 2},_AAPL,1.00,1.10,5,5\n')
    replay = FileReplay(path)
    assert [t.stream for t in drain(replay)] == ["AAPL  261218C00150000"] * 2  # OCC's padding inside kept
    example = replay.rejected.examples["bad_stream"]
    assert dict(replay.rejected) == {"bad_stream": 1} and "not stream_name=NAME" in example
    assert "; name the stream with --columns ...,stream_name=NAME" not in example
    # one fixed stream (no stream column): renaming it is the way
    (tmp_path / "spy.csv").write_text("timestamp,bid,ask\n1797604200000000000,1.00,1.10\n")
    named = FileReplay([(tmp_path / "spy.csv", {"ts": "timestamp", "bid": "bid", "ask": "ask", "stream": "_SPY"})])
    drain(named)
    assert "; name the stream with --columns ...,stream_name=NAME" in named.rejected.examples["bad_stream"]


DATASHOP_HEADER = ("underlying_symbol,quote_datetime,sequence_number,root,expiration,strike,option_type,trade_size,"
                   "trade_price,trade_condition_id,canceled_trade_condition_id\n")


def test_a_cboe_datashop_file_reads_its_naive_times_as_new_york_unless_tz_says_otherwise(tmp_path: Path,
                                                                                        capsys) -> None:
    """fix281 #4: Cboe DataShop's files write US Eastern times without an offset; they were read as UTC (a 09:30
    open at 04:30 New York time in winter) unless --tz America/New_York was given. Its header names the layout: read
    in New York's zone with a note, the ticks and a backtest's answers those of --tz America/New_York; a --tz given
    wins."""
    from conftest import engine_dir
    from engine.service.cli import main

    path = tmp_path / "UnderlyingOptionsTrades_2024-01-02.csv"
    path.write_text(DATASHOP_HEADER + "".join(
        f"^SPX,2024-01-02 09:{30 + i // 10:02d}:{i % 10 * 5:02d}.{i * 7 % 1000:03d},{1000 + i},SPXW,2024-01-19,"
        f"{4700 + 5 * (i % 2)}.000,{'CP'[i % 3 == 0]},{i % 4 + 1},{1.5 + 0.05 * (i % 5):.2f},0,0\n" for i in range(40)))
    replay = FileReplay(path)
    ticks = drain(replay)
    given = drain(FileReplay(path, columns={"tz": "America/New_York"}))
    assert ticks == given and ticks[0].ts == 1704205800000000000  # 2024-01-02 09:30 EST = 14:30 UTC
    said = [n for n in replay.notes if "Cboe DataShop" in n]
    assert said == [f"{path.name}: its times (quote_datetime) read as New York wall-clock times (America/New_York, "
                    f"summer time included), the zone Cboe DataShop writes them in (--tz ZONE says otherwise)"]
    assert not any("carry no UTC offset" in n for n in replay.notes), replay.notes
    chicago = FileReplay(path, columns={"tz": "America/Chicago"})
    assert [t.ts for t in drain(chicago)] == [t.ts + 3600 * 10**9 for t in ticks]  # the user's zone wins
    assert not any("Cboe DataShop" in n for n in chicago.notes), chicago.notes
    engine = engine_dir(tmp_path / "engine", "queries:\n  - {name: dir5, streams: ['*'], question: direction_5, "
                                             "kind: choice, trigger: {ticks: 5}}\n")
    answers = []
    for options in ([], ["--tz", "America/New_York"]):
        out = tmp_path / f"bt{len(options)}.parquet"
        assert main(["backtest", str(path), "--queries", str(engine / "q.yaml"), "--config",
                     str(engine / "engine.yaml"), "--out", str(out), "--quiet", *options]) == 0
        answers.append(pl.read_parquet(out).drop("answer_ts", strict=False))
    capsys.readouterr()
    assert answers[0].height > 0 and answers[0].equals(answers[1])
