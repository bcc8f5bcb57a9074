"""US equities consolidated-tape files as a black-box reviewer found them misread (review 77): WRDS TAQ's share
classes (SYM_SUFFIX), joined stream columns with empty parts, cancels and corrections by reference, regular trading
hours, sale conditions, a run stopped early, '/' renamed onto a name already in the file; cancels and
corrections in TR_CORR, quotes' BIDSIZ/ASKSIZ and a 0 bid meaning no bid. Every fixture is written
here, from code, into tmp_path."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain

TAQ_HEADER = "DATE,TIME_M,EX,SYM_ROOT,SYM_SUFFIX,TR_SCOND,SIZE,PRICE,TR_CORR,TR_SEQNUM\n"
TAQ_TRADES = TAQ_HEADER + (  # two classes of Berkshire 1,500 times apart, and a common stock without a suffix
    "20240305,09:30:00.100000000,Q,BRK,A,@,1,615030.0,00,1\n"
    "20240305,09:30:00.200000000,Q,BRK,B,@,100,410.02,00,2\n"
    "20240305,09:30:00.300000000,Q,AAPL,,@,100,170.10,00,3\n"
    "20240305,09:30:00.400000000,Q,BRK,A,@  I,2,615040.0,00,4\n"
    "20240305,09:30:00.500000000,Q,BRK,B,@,200,410.05,00,5\n")
US_0930 = 1709649000_000_000_000  # 2024-03-05 09:30 New York (14:30 UTC)


def test_taq_share_classes_are_streams_of_their_own(tmp_path: Path) -> None:
    path = tmp_path / "taq_trades.csv"
    path.write_text(TAQ_TRADES)
    replay = FileReplay(path, columns={"tz": "America/New_York"})
    ticks = drain(replay)
    assert [(t.stream, t.price) for t in ticks] == [("BRK.A", 615030.0), ("BRK.B", 410.02), ("AAPL", 170.1),
                                                     ("BRK.A", 615040.0), ("BRK.B", 410.05)]
    assert ticks[0].ts == US_0930 + 100_000_000
    assert "stream=SYM_ROOT+SYM_SUFFIX" in replay.notes[0]
    assert any("share class's suffix" in n and "BRK.B" in n for n in replay.notes)
    # the map the note prints reads the same streams when given; a Parquet copy's null suffix is no part either
    given = map_from_options(columns="ts=DATE+TIME_M,stream=SYM_ROOT+SYM_SUFFIX,price=PRICE,size=SIZE")
    assert [t.stream for t in drain(FileReplay(path, columns=given))] == [t.stream for t in ticks]
    pl.read_csv(path, schema_overrides={"SYM_SUFFIX": pl.String}).write_parquet(tmp_path / "taq.parquet")
    assert pl.read_parquet(tmp_path / "taq.parquet")["SYM_SUFFIX"].null_count() == 1
    parquet = FileReplay(tmp_path / "taq.parquet", columns={"tz": "America/New_York"})
    assert [t.stream for t in drain(parquet)] == [t.stream for t in ticks]
    assert dict(parquet.rejected) == {}


def test_joined_stream_columns_leave_empty_parts_out(tmp_path: Path) -> None:
    path = tmp_path / "trades.csv"
    path.write_text("ts,root,venue,price,size\n"
                    f"{US_0930},AAPL,,170.1,100\n"
                    f"{US_0930 + 1},BRK,B,410.0,100\n"
                    f'{US_0930 + 2},AAPL," ",170.2,100\n'
                    f"{US_0930 + 3},,,170.3,100\n")
    replay = FileReplay(path, columns=map_from_options(columns="ts=ts,stream=root+venue,price=price,size=size"))
    assert [t.stream for t in drain(replay)] == ["AAPL", "BRK B", "AAPL"]
    assert dict(replay.rejected) == {"missing_stream": 1}  # every part empty: no stream, said as such


def test_nbbo_best_sizes_are_read(tmp_path: Path) -> None:
    path = tmp_path / "nbbo.csv"
    path.write_text("DATE,TIME_M,EX,SYM_ROOT,SYM_SUFFIX,BEST_BID,BEST_BIDSIZ,BEST_ASK,BEST_ASKSIZ,QU_COND\n"
                    "20240305,09:30:00.971949456,N,BRK,B,409.86,1,409.88,3,R\n")
    replay = FileReplay(path, columns={"tz": "America/New_York"})
    assert [(t.stream, t.bid, t.ask, t.bid_size, t.ask_size) for t in drain(replay)] == [
        ("BRK.B", 409.86, 409.88, 1.0, 3.0)]
    assert not any("looks like bid_size" in n for n in replay.notes)


ACTIONS = ("timestamp,symbol,trade_id,orig_trade_id,price,size,action\n"
           f"{US_0930},AAPL,1,,170.02,100,NEW\n"
           f"{US_0930 + 10**9},AAPL,2,,1700.8,100,NEW\n"
           f"{US_0930 + 2 * 10**9},AAPL,,2,1700.8,100,CANCEL\n"
           f"{US_0930 + 3 * 10**9},AAPL,3,1,170.05,100,CORRECT\n")


def test_cancels_and_corrections_by_reference_are_said_and_a_keep_leaves_them_out(tmp_path: Path) -> None:
    path = tmp_path / "actions.csv"
    path.write_text(ACTIONS)
    replay = FileReplay(path)
    assert len(drain(replay)) == 4  # not applied: each row replays as a trade
    note = next(n for n in replay.cautions if "by reference are not applied" in n)
    assert 'column "action" marks rows that amend an earlier trade (CANCEL, CORRECT)' in note
    assert 'column "orig_trade_id" refers rows to earlier trades (1, 2, ...)' in note
    assert "keep: {action: [NEW]}" in note
    # the keep the note names leaves them out; so does keeping the rows whose reference column is empty
    kept = drain(FileReplay([{"path": str(path), "columns": {"keep": {"action": ["NEW"]}}}]))
    assert [t.price for t in kept] == [170.02, 1700.8]
    empty = FileReplay([{"path": str(path), "columns": {"keep": {"orig_trade_id": [""]}}}])
    assert [t.price for t in drain(empty)] == [170.02, 1700.8]
    assert dict(empty.rejected) == {"filtered_out": 2}
    assert "holds 2, which the map's keep leaves out (it keeps \"\")" in empty.rejected.examples["filtered_out"]
    # a LULD halt and its resume are status rows with no price: the keep given lists the actions of trades only
    (tmp_path / "halted.csv").write_text(ACTIONS + f"{US_0930 + 4 * 10**9},AAPL,,,,,HALT\n"
                                                   f"{US_0930 + 5 * 10**9},AAPL,,,,,RESUME\n")
    assert any("keep: {action: [NEW]}" in n for n in FileReplay(tmp_path / "halted.csv").cautions)  # review430 #5
    # a reference column alone (no action column) is said too; a file with neither gets no such note
    pl.read_csv(path).drop("action").write_csv(tmp_path / "refs.csv")
    assert any("keep: {orig_trade_id: [\"\"]}" in n for n in FileReplay(tmp_path / "refs.csv").notes)
    pl.read_csv(path).drop("action", "orig_trade_id").write_csv(tmp_path / "plain.csv")
    assert not any("by reference" in n for n in FileReplay(tmp_path / "plain.csv").notes)


def test_hours_keep_regular_trading_hours_across_a_summer_time_change(tmp_path: Path) -> None:
    # epoch ns (UTC): 13:45 UTC is 08:45 New York in March before the change (EST), 09:45 after it (EDT)
    path = tmp_path / "quotes.csv"
    path.write_text("sip_timestamp,ticker,bid_price,ask_price,bid_size,ask_size\n"
                    "1709646300000000000,AAPL,170.0,170.02,1,1\n"     # 2024-03-05 13:45 UTC: 08:45 EST, out
                    "1709649000000000000,AAPL,170.1,170.12,1,1\n"     # 2024-03-05 14:30 UTC: 09:30 EST, in
                    "1709668800000000000,AAPL,170.2,170.22,1,1\n"     # 2024-03-05 20:00 UTC: 15:00 EST, in
                    "1709672400000000000,AAPL,170.3,170.32,1,1\n"     # 2024-03-05 21:00 UTC: 16:00 EST, out
                    "1710942300000000000,AAPL,171.0,171.02,1,1\n")    # 2024-03-20 13:45 UTC: 09:45 EDT, in
    replay = FileReplay(path, columns=map_from_options(detect=True, hours="09:30-16:00 America/New_York"))
    assert [t.bid for t in drain(replay)] == [170.1, 170.2, 171.0]
    assert dict(replay.rejected) == {"filtered_out": 2}
    assert "ts at 08:45:00 America/New_York is outside the hours kept (09:30-16:00 America/New_York)" in \
        replay.rejected.examples["filtered_out"]
    assert "hours 09:30-16:00 America/New_York" in replay.notes[0]
    # a window without a zone takes the map's tz; with neither, it is refused before the run
    with pytest.raises(ValueError, match="write the zone after the window"):
        FileReplay(path, columns={"hours": "09:30-16:00"})
    with pytest.raises(ValueError, match="hours must be a time-of-day window"):
        map_from_options(detect=True, hours="9:30 to 16:00")
    # times that carry their zone (`...Z`) with --tz for every file: the window is on --tz's clock (it was refused,
    # saying the times named no zone)
    aware = tmp_path / "aware.csv"
    aware.write_text("timestamp,symbol,price,size\n"
                     "2024-03-05T14:30:00Z,AAPL,170.1,1\n2024-03-05T21:00:00Z,AAPL,170.2,1\n")
    replay = FileReplay(aware, columns={"tz": "America/New_York", "hours": "09:30-16:00"})
    assert [t.price for t in drain(replay)] == [170.1] and dict(replay.rejected) == {"filtered_out": 1}
    assert any('(the hours kept, "09:30-16:00 America/New_York", are on its wall clock)' in n for n in replay.notes)
    taq = tmp_path / "taq.csv"
    taq.write_text(TAQ_HEADER + "20240305,08:00:00.0,Q,AAPL,,@,1,170.0,00,1\n"
                                "20240305,09:30:00.0,Q,AAPL,,@,1,170.1,00,2\n")
    assert [t.price for t in drain(FileReplay(taq, columns={"tz": "America/New_York", "hours": "09:30-16:00"}))] \
        == [170.1]


def test_sale_conditions_are_said_for_polygon_and_generic_columns(tmp_path: Path) -> None:
    path = tmp_path / "poly.csv"
    path.write_text("ticker,conditions,correction,exchange,id,participant_timestamp,price,sequence_number,"
                    "sip_timestamp,size,tape\n"
                    f'AAPL,"12,37",0,4,1,{US_0930},170.01,0,{US_0930 + 100},5,3\n'
                    f"AAPL,12,0,4,2,{US_0930 + 1000},170.02,1,{US_0930 + 1100},100,3\n")
    note = next(n for n in FileReplay(path).notes if "sale conditions are not read" in n)
    assert '"conditions" holds "12", "12,37"' in note and "compares whole cells" in note
    (tmp_path / "iso.csv").write_text("timestamp,symbol,price,size,sale_condition\n"
                                      "2024-03-05T09:30:00-05:00,BRK.B,410.01,100,@\n"
                                      "2024-03-05T09:30:01-05:00,BRK.B,410.02,5,@ I\n")
    assert any('"sale_condition" holds "@", "@ I"' in n for n in FileReplay(tmp_path / "iso.csv").notes)


def test_a_list_of_conditions_in_parquet_or_pandas_is_read_as_its_codes_joined(tmp_path: Path) -> None:
    """review390 #1: Polygon's trades saved to Parquet hold `conditions` as list<int32> (and `pd.DataFrame` of its
    REST results as Python lists): the advisory sale-conditions note cast the list to text and polars' error
    stopped the file. A list of values reads as a CSV cell writes it (`12,37`), as a JSON line's does: the note
    names it and a keep compares it. Lists of lists or of records, whatever heuristic their names meet (a side, a
    venue, a contract month, a correction), have no text: read by no map and no note, never a stop."""
    rows = 4
    frame = pl.DataFrame({
        "ticker": ["AAPL"] * rows, "sip_timestamp": [US_0930 + i * 1000 for i in range(rows)],
        "price": [170.01, 170.02, 170.03, 170.04], "size": [5, 100, 37, 1],
        "conditions": pl.Series([[12, 37], [], None, [37]], dtype=pl.List(pl.Int32)),
        **{name: pl.Series([[{"a": i}] for i in range(rows)]) for name in ("side", "exchange", "status")},
        **{name: pl.Series([[[i]] for i in range(rows)]) for name in ("contract_month", "qualifiers", "correction")}})
    frame.write_parquet(tmp_path / "poly.parquet")
    replay = FileReplay(tmp_path / "poly.parquet")
    assert [t.price for t in drain(replay)] == [170.01, 170.02, 170.03, 170.04] and not replay.rejected
    note = next(n for n in replay.notes if "sale conditions are not read" in n)
    assert '"conditions" holds "12,37", "37"' in note and "compares whole cells" in note
    kept = FileReplay([{"path": str(tmp_path / "poly.parquet"), "columns": {"keep": {"conditions": ["12,37"]}}}])
    assert [t.price for t in drain(kept)] == [170.01] and dict(kept.rejected) == {"filtered_out": 3}
    pd = pytest.importorskip("pandas", reason="pandas is not installed (the test extra installs it)")
    listed = pd.DataFrame({c: frame[c].to_list() for c in ("ticker", "sip_timestamp", "price", "size")})
    listed["conditions"] = [[12, 37], [], None, [37]]  # as pd.DataFrame(resp["results"]) holds them
    replay = FileReplay.from_frame(listed)
    assert len(drain(replay)) == rows
    assert any('"conditions" holds "12,37", "37"' in n for n in replay.notes)


def test_a_keep_filter_shows_its_values_as_given(tmp_path: Path) -> None:
    path = tmp_path / "taq_trades.csv"
    path.write_text(TAQ_TRADES)
    replay = FileReplay([{"path": str(path), "columns": {"tz": "America/New_York", "keep": {"TR_SCOND": ["@   "]}}}])
    assert len(drain(replay)) == 4
    example = replay.rejected.examples["filtered_out"]
    assert "holds \"@  I\", which the map's keep leaves out (it keeps \"@   \"; compared without spaces at their " \
           "ends: @)" in example
    assert "no trades" not in example  # an odd lot left out is a trade, just not one the filter keeps


def test_a_run_stopped_early_counts_only_the_rejects_before_its_stop(tmp_path: Path) -> None:
    path = tmp_path / "nbbo.csv"
    rows = [f"20240305,09:30:{i // 100:02d}.{i % 100:02d}0000000,N,AAPL,,170.0,1,170.02,1,R\n" for i in range(300)]
    rows[250] = "20240305,09:30:02.500000000,N,AAPL,,0,0,0,0,R\n"  # no bid, no offer: rejected, far past the stop
    path.write_text("DATE,TIME_M,EX,SYM_ROOT,SYM_SUFFIX,BID,BIDSIZ,ASK,ASKSIZ,QU_COND\n" + "".join(rows))
    replay = FileReplay(path, columns={"tz": "America/New_York"})
    assert len(replay.next_batch(20)) == 20
    assert dict(replay.rejected) == {}
    assert len(replay.next_batch(1000)) == 279  # the other 299 - 20
    assert dict(replay.rejected) == {"no_market": 1}


def test_a_slash_renamed_onto_a_name_the_file_writes_is_a_caution(tmp_path: Path) -> None:
    path = tmp_path / "names.csv"
    path.write_text("timestamp,symbol,price,size\n"
                    f"{US_0930},BF/B,48.0,100\n{US_0930 + 1},BF-B,4800.0,100\n{US_0930 + 2},EUR/USD,1.08,1\n")
    replay = FileReplay(path)
    assert {t.stream for t in drain(replay)} == {"BF-B", "EUR-USD"}
    assert any('"BF/B" and "BF-B" both replay as "BF-B"' in n for n in replay.cautions)
    assert not any("EUR" in n for n in replay.cautions)


WRDS_NBBO = ("DATE,TIME_M,EX,SYM_ROOT,SYM_SUFFIX,BID,BIDSIZ,ASK,ASKSIZ,QU_COND,BEST_BID,BEST_BIDSIZ,BEST_ASK,"
             "BEST_ASKSIZ,QU_SEQNUM\n"
             "20240701,9:30:00.000000000,Q,AAPL,,189.99,3,190.03,4,R,190.00,10,190.01,12,1000\n"
             "20240701,9:30:00.370000000,K,AAPL,,189.98,3,190.02,4,R,190.01,10,190.02,12,1001\n")
NY_0930_JULY = 1719840600_000_000_000  # 2024-07-01 09:30 New York, EDT: 13:30 UTC


def test_wrds_taq_times_are_read_in_new_york_summer_time_included(tmp_path: Path) -> None:
    """Review 115 (finding 15): WRDS's TAQ files (NBBO, quotes, trades) write New York wall-clock times without an
    offset; they were read as UTC, a 09:30 open at 05:30 New York time. Read in America/New_York with a note
    (EDT in July, EST in March before the change), unless --tz says otherwise."""
    nbbo = tmp_path / "wrds_nbbo.csv"
    nbbo.write_text(WRDS_NBBO)
    replay = FileReplay(nbbo)
    ticks = drain(replay)
    assert [t.ts for t in ticks] == [NY_0930_JULY, NY_0930_JULY + 370_000_000] and ticks[0].bid == 190.0
    assert "wrds_nbbo.csv: its times (DATE+TIME_M) read as New York wall-clock times (America/New_York, summer " \
           "time included), the zone TAQ writes them in (--tz ZONE says otherwise)" in replay.notes
    assert not any("read as UTC" in n for n in replay.notes)
    ctm = tmp_path / "taq_trades.csv"  # daily TAQ's trades (ctm), in March before the change: EST
    ctm.write_text(TAQ_TRADES)
    trades = FileReplay(ctm)
    assert drain(trades)[0].ts == US_0930 + 100_000_000
    assert any("read as New York wall-clock times" in n for n in trades.notes)
    # the regular session by New York's clock, with no --tz: the detected zone is the window's
    taq = tmp_path / "taq.csv"
    taq.write_text(TAQ_HEADER + "20240305,08:00:00.0,Q,AAPL,,@,1,170.0,00,1\n"
                                "20240305,09:30:00.0,Q,AAPL,,@,1,170.1,00,2\n")
    assert [t.price for t in drain(FileReplay(taq, columns={"hours": "09:30-16:00"}))] == [170.1]
    # a TAQ-like export (SYMBOL,DATE,TIME_M) too
    like = tmp_path / "trades_export.csv"
    like.write_text("SYMBOL,DATE,TIME_M,PRICE,SIZE,EX\nAAPL,20240305,09:30:00.100,170.1,100,Q\n")
    assert drain(FileReplay(like))[0].ts == US_0930 + 100_000_000
    # --tz says otherwise: taken, and no note says New York
    utc = FileReplay(nbbo, columns={"tz": "UTC"})
    assert drain(utc)[0].ts == NY_0930_JULY - 4 * 3600 * 10**9
    assert not any("New York wall-clock" in n for n in utc.notes)
    # times of another layout (no TAQ column) are still read as UTC, with the note that says so
    plain = tmp_path / "plain.csv"
    plain.write_text("date,time,symbol,price,size\n20240305,09:30:00.100,AAPL,170.1,100\n")
    other = FileReplay(plain)
    assert drain(other)[0].ts == US_0930 - 5 * 3600 * 10**9 + 100_000_000
    assert any("read as UTC" in n for n in other.notes)


@pytest.mark.parametrize("lead", ["", "0"])
def test_taq_clock_digits_beside_a_date_are_read_and_a_count_past_the_day_is_refused(tmp_path: Path,
                                                                                      lead: str) -> None:
    """review390 #2: WRDS's `TIME_M` as integer clock digits (`93000100000000`: 09:30:00.1, HHMMSS and nine digits,
    a leading zero kept or lost) beside `DATE` was refused, and the refusal's `ns_after_midnight` read every time
    25.8 h after midnight, the next day, with no word. The digits are read as NYSE's `Time` is (hhmmss_ns); a map's
    count after midnight of a day or more is refused naming the unit of its digits."""
    path = tmp_path / "taq_trades.csv"
    path.write_text(TAQ_HEADER + "".join(f"20240305,{lead}9300{i}100000000,Q,AAPL,,@,100,170.1{i},00,{i}\n"
                                         for i in range(3)))
    replay = FileReplay(path)
    assert [t.ts for t in drain(replay)] == [US_0930 + i * 10**9 + 10**8 for i in range(3)]
    assert any(f"HHMMSSfffffffff ({lead}93000100000000 is 09:30:00.1), too large for a count after midnight, read "
               "as hhmmss_ns" in n for n in replay.notes), replay.notes
    with pytest.raises(ValueError, match=r'column "TIME_M" is read as ns_after_midnight, but 93002100000000 ns after '
                                         r'midnight is 25:50:02.1, past its day .*: its values as a wall clock\'s '
                                         r'digits, .*: --columns ts=DATE\+TIME_M --ts-unit hhmmss_ns \(docs'):
        FileReplay(path, columns={"ts": "DATE+TIME_M", "ts_unit": "ns_after_midnight"})
    with pytest.raises(ValueError, match=r"Give --columns ts=DATE\+TIME_M --ts-unit hhmmss_ns"):
        FileReplay(path, columns={"ts": "DATE"})
    with pytest.raises(ValueError, match=r"past its day .* --columns ts=TIME_M --ts-unit hhmmss_ns \(docs"):
        FileReplay(path, columns={"ts": "TIME_M", "ts_unit": "ns_after_midnight", "date": "2024-03-05"})
    # a count of seconds past 24:00 beside a calendar date: another unit, or a trade date's night session
    (tmp_path / "counts.csv").write_text("date,secs,price,size\n20240305,34200,1.0,1\n20240305,90000,1.1,1\n")
    with pytest.raises(ValueError, match=r"90000 seconds after midnight is 25:00:00, past its day .*--ts-unit "
                                         r"hhmmss; a finer count: --ts-unit ms_after_midnight; .*trade_date=date"):
        FileReplay(tmp_path / "counts.csv", columns={"ts": "date+secs", "ts_unit": "seconds_after_midnight"})


WRDS_CORRECTED_TRADES = ("DATE,TIME_M,EX,SYM_ROOT,SYM_SUFFIX,TR_SCOND,SIZE,PRICE,TR_CORR,TR_SEQNUM\n"
              "2024-01-02,09:30:00.123456789,Q,AAPL,,@ F,100,185.64,00,1001\n"
              "2024-01-02,09:30:00.223456789,N,AAPL,,@,200,185.65,01,1002\n"
              "2024-01-02,09:30:01.000000000,P,AAPL,,@,300,999.99,08,1003\n"
              "2024-01-02,09:30:02.000000000,P,AAPL,,@,300,185.70,12,1004\n")


WRDS_NBBO_QUOTES = ("DATE,TIME_M,EX,SYM_ROOT,SYM_SUFFIX,BID,BIDSIZ,ASK,ASKSIZ,QU_COND,NATBBO_IND\n"
              "2024-01-02,09:30:00.123456789,Q,AAPL,,185.60,3,185.62,5,R,4\n"
              "2024-01-02,09:30:00.223456789,N,AAPL,,0,0,185.63,2,R,4\n"
              "2024-01-02,09:30:00.323456789,N,AAPL,,0,0,0,0,R,4\n")


def test_taq_cancelled_and_corrected_prints_are_left_out_and_counted(tmp_path: Path) -> None:
    path = tmp_path / "taq_trades.csv"
    path.write_text(WRDS_CORRECTED_TRADES)
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [185.64, 185.65]  # 08 (a cancel) and 12 (a correction) left out
    assert dict(replay.rejected) == {"filtered_out": 2}
    note = next(n for n in replay.notes if "TR_CORR" in n and "cancelled" in n)
    assert "(08, 12)" in note and "TR_CORR 00, 01" in note
    assert any('sale conditions are not read ("TR_SCOND" holds' in n for n in replay.notes)
    # the map the note gives reads every print
    full = note.split("--columns ")[1].split(")")[0]
    assert len(drain(FileReplay(path, columns=map_from_options(columns=full)))) == 4
    # a Parquet copy holding the marks as numbers filters the same
    pl.read_csv(path).write_parquet(tmp_path / "taq_trades.parquet")
    replay = FileReplay(tmp_path / "taq_trades.parquet")
    assert [t.price for t in drain(replay)] == [185.64, 185.65]


def test_the_taq_keep_the_note_gives_keeps_the_regular_prints_of_a_csv_and_a_parquet_copy(tmp_path: Path) -> None:
    """A Parquet copy holding TR_CORR as numbers was filtered with the integer keep [0, 1], shown as `TR_CORR 0, 1`
    and `keep TR_CORR in 0|1`: pasted into a map file and used on the CSV copy, whose cells are compared as written
    (`00`), that keep read no print. The note now gives the keep as a map file holds it, TAQ's own marks quoted, and
    that line pasted into a map file keeps the two regular prints of either copy, as detection does."""
    csv = tmp_path / "taq_trades.csv"
    csv.write_text(WRDS_CORRECTED_TRADES)
    parquet = tmp_path / "taq_trades.parquet"
    pl.read_csv(csv).write_parquet(parquet)
    assert pl.read_parquet(parquet).schema["TR_CORR"] == pl.Int64  # the marks as numbers: 0, 1, 8, 12
    for copy in (csv, parquet):
        replay = FileReplay(copy)
        assert [t.price for t in drain(replay)] == [185.64, 185.65]
        note = next(n for n in replay.notes if "TR_CORR" in n and "cancelled" in n)
        assert "only regular prints (TR_CORR 00, 01) are read" in note, note
        pasted = note.split("the regular ones only with ")[1].split(" in its file")[0]
        assert pasted == 'keep: {TR_CORR: ["00", "01"]}'
        full = note.split("--columns ")[1].split(")")[0]
        map_file = tmp_path / f"{copy.suffix[1:]}_map.yaml"
        map_file.write_text("".join(f"{k}: {v}\n" for k, v in (p.split("=") for p in full.split(",")))
                            + "tz: America/New_York\n" + pasted + "\n")
        for other in (csv, parquet):  # the keep read off either copy's note, on both copies
            kept = FileReplay(other, columns=map_from_options(columns=str(map_file)))
            assert [t.price for t in drain(kept)] == [185.64, 185.65], (copy, other)
            assert dict(kept.rejected) == {"filtered_out": 2}


def test_a_taq_csv_whose_tr_corr_lost_its_leading_zero_compares_the_codes_by_value(tmp_path: Path) -> None:
    """review390 #3: a WRDS CSV re-saved by polars, pandas or Excel writes TR_CORR 00 as `0`: compared as text, every
    regular print was called corrected and none was read. Codes written as numbers compare by value, as a Parquet
    copy's do; the keep holds the file's spellings beside TAQ's own, so the map file the note gives reads it too."""
    path = tmp_path / "taq_trades.csv"
    path.write_text(WRDS_CORRECTED_TRADES)
    pl.read_csv(path).write_csv(path)
    assert path.read_text().splitlines()[1].endswith(",0,1001")  # the re-saved copy: 00 written 0
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [185.64, 185.65] and dict(replay.rejected) == {"filtered_out": 2}
    note = next(n for n in replay.notes if "TR_CORR" in n and "cancelled" in n)
    assert "(12, 8)" in note and 'keep: {TR_CORR: ["00", "01", "0", "1"]}' in note, note
    full = note.split("--columns ")[1].split(")")[0]
    kept = FileReplay([{"path": str(path), "columns": {**dict(p.split("=") for p in full.split(",")),
                                                       "keep": {"TR_CORR": ["00", "01", "0", "1"]}}}])
    assert [t.price for t in drain(kept)] == [185.64, 185.65]
    (tmp_path / "regular.csv").write_text(WRDS_CORRECTED_TRADES.replace(",08,", ",00,").replace(",12,", ",01,")
                                          .replace(",00,", ",0,").replace(",01,", ",1,"))
    regular = FileReplay(tmp_path / "regular.csv")
    assert len(drain(regular)) == 4 and not regular.rejected
    assert not any("TR_CORR" in n for n in regular.notes)


def test_taq_quotes_read_their_sizes_and_a_zero_bid_is_a_one_sided_quote(tmp_path: Path) -> None:
    path = tmp_path / "taq_nbbo.csv"
    path.write_text(WRDS_NBBO_QUOTES)
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.bid, t.ask, t.bid_size, t.ask_size) for t in ticks] == [(185.6, 185.62, 3.0, 5.0)]
    # never nonpositive_price: 0 is no bid; 0 and 0 is no market (a LULD pause), counted apart (review355 #12)
    assert dict(replay.rejected) == {"missing_field": 1, "no_market": 1}
    example = replay.rejected.examples["missing_field"]
    assert "line 3" in example and "a one-sided quote (no bid)" in example and "price-offset" not in example
    halt = replay.rejected.examples["no_market"]
    assert "line 4" in halt and "no bid and no offer" in halt and "fill_quotes" not in halt


def test_an_unread_column_that_looks_like_a_quote_size_is_named(tmp_path: Path) -> None:
    path = tmp_path / "quotes.csv"
    path.write_text("timestamp,symbol,bid,ask,bid_depth_lots,ask_depth_lots\n"
                    "2024-01-02T09:30:00Z,AAPL,185.6,185.62,3,5\n")
    replay = FileReplay(path)
    assert len(drain(replay)) == 1
    assert any('"bid_depth_lots" looks like bid_size, "ask_depth_lots" looks like ask_size, not read' in n
               for n in replay.notes)


def test_the_full_map_the_taq_note_prints_reads_new_york_times_as_detection_does(tmp_path: Path) -> None:
    """Review272 #3: the map the TR_CORR note prints (`--columns ts=DATE+TIME_M,...`), inline or in a map file with
    the keep line the note gives, read TAQ's naive times as UTC, 09:30 New York at 09:30Z (5 h early in January),
    where detection reads 14:30Z. A full map naming TAQ's own time columns and no tz now reads them in New York's
    zone with detection's note; a tz given wins."""
    path = tmp_path / "taq_trades.csv"
    path.write_text(WRDS_CORRECTED_TRADES)
    detected = FileReplay(path)
    first = drain(detected)[0].ts
    assert first == 1704205800_123456789  # 2024-01-02T14:30:00.123456789Z
    note = next(n for n in detected.notes if "TR_CORR" in n and "cancelled" in n)
    full = note.split("--columns ")[1].split(")")[0]
    map_file = tmp_path / "taq_map.yaml"
    map_file.write_text("".join(f"{k}: {v}\n" for k, v in (p.split("=") for p in full.split(",")))
                        + note.split("the regular ones only with ")[1].split(" in its file")[0] + "\n")
    zone_note = ("taq_trades.csv: its times (DATE+TIME_M) read as New York wall-clock times (America/New_York, "
                 "summer time included), the zone TAQ writes them in (--tz ZONE says otherwise)")
    for columns, prints in ((full, 4), (str(map_file), 2)):
        mapped = FileReplay(path, columns=map_from_options(columns=columns))
        ticks = drain(mapped)
        assert (ticks[0].ts, len(ticks)) == (first, prints), columns
        assert zone_note in mapped.notes and not any("read as UTC" in n for n in mapped.notes), mapped.notes
    utc = FileReplay(path, columns=map_from_options(columns=full, tz="UTC"))
    assert drain(utc)[0].ts == 1704187800_123456789 and zone_note not in utc.notes  # 09:30Z, as --tz UTC says
