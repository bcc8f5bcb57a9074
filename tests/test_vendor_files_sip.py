"""US equities files as a black-box reviewer with SIP trades and NBBO quotes found them misread (review 113): a WRDS
NBBO file read from the quoting venue's columns, a second clock left unsaid, one share class under two vendors'
symbols, cancels whose busted trade still replays, and the regular-hours window that dropped the closing auction.
Every fixture is written here, from code, into tmp_path."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import polars as pl

from connectors.replay import FileReplay
from conftest import drain
from test_vendor_files_taq import ACTIONS

WRDS_NBBO_HEADER = ("DATE,TIME_M,EX,SYM_ROOT,SYM_SUFFIX,BID,BIDSIZ,ASK,ASKSIZ,QU_COND,BEST_BIDEX,BEST_BID,"
                    "BEST_BIDSIZ,BEST_ASKEX,BEST_ASK,BEST_ASKSIZ,NATBBO_IND\n")


def test_a_wrds_nbbo_file_is_read_from_its_best_columns_and_says_which_it_left(tmp_path: Path) -> None:
    path = tmp_path / "wrds_nbbo.csv"
    # venue N quotes wide, venue Q is the NBBO all along: each row holds the quoting venue's and the NBBO
    path.write_text(WRDS_NBBO_HEADER + "".join(
        f"20260310,9:45:0{i}.123456789,{'QN'[i % 2]},BRK,B,{'480.2' if i % 2 == 0 else '480.0'},3,"
        f"{'480.22' if i % 2 == 0 else '480.5'},2,R,Q,480.2,5,Q,480.22,4,4\n" for i in range(6)))
    replay = FileReplay(path, columns={"tz": "America/New_York"})
    ticks = drain(replay)
    assert {(t.stream, t.bid, t.ask, t.bid_size, t.ask_size) for t in ticks} == {("BRK.B", 480.2, 480.22, 5.0, 4.0)}
    assert "bid=BEST_BID, ask=BEST_ASK, bid_size=BEST_BIDSIZ, ask_size=BEST_ASKSIZ" in replay.notes[0]
    said = next(n for n in replay.notes if "not from" in n)
    assert "BID, ASK, BIDSIZ, ASKSIZ" in said and "--columns bid=BID,ask=ASK,bid_size=BIDSIZ,ask_size=ASKSIZ" in said
    # the map the note gives reads the venue's quotes
    given = FileReplay(path, columns={"bid": "BID", "ask": "ASK", "bid_size": "BIDSIZ", "ask_size": "ASKSIZ",
                                      "tz": "America/New_York"})
    assert [(t.bid, t.ask) for t in drain(given)][:2] == [(480.2, 480.22), (480.0, 480.5)]


def test_a_best_quote_beside_the_venues_sizes_gets_one_note_that_never_offers_them(tmp_path: Path) -> None:
    """review295 #5: Cboe DataShop's UnderlyingOptionsTrades (best_bid/best_ask read, no best sizes) drew a note
    offering `--columns ...,bid_size=bid_size,ask_size=ask_size` beside one saying those are the quoting venue's,
    not the NBBO's. One note: the venue's sizes are not read, and the quotes replay without sizes."""
    path = tmp_path / "UnderlyingOptionsTrades_2024-06-03.csv"
    path.write_text("underlying_symbol,quote_datetime,sequence_number,root,expiration,strike,option_type,"
                    "exchange_id,trade_size,trade_price,trade_condition_id,canceled_trade_condition_id,best_bid,"
                    "best_ask,trade_iv,trade_delta,underlying_bid,underlying_ask,number_of_exchanges,exchange,"
                    "bid_size,bid,ask_size,ask\n" + "".join(
                        f"SPY,2024-06-03 09:30:{i:02d}.000,{1000 + i},SPY,2024-06-21,530.000,C,4,1,{5 + i / 100:.2f},"
                        f"18,0,{4.99 + i / 100:.2f},{5.01 + i / 100:.2f},0.12,0.5,529.9,530.0,1,4,10,"
                        f"{4.99 + i / 100:.2f},10,{5.01 + i / 100:.2f}\n" for i in range(40)))
    replay = FileReplay(path)
    quotes = [t for t in drain(replay) if t.bid is not None]
    assert quotes and all(t.bid_size is None and t.ask_size is None for t in quotes)
    sizes = [n for n in replay.notes if "bid_size" in n and "read as ts=" not in n]
    assert len(sizes) == 1 and "not from bid, ask, bid_size, ask_size beside them (each row's quoting venue's" in \
        sizes[0] and sizes[0].endswith("so its quotes replay without sizes"), sizes
    assert not any("looks like bid_size" in n for n in replay.notes), replay.notes


def test_a_file_of_only_best_or_only_plain_quote_columns_gets_no_such_note(tmp_path: Path) -> None:
    best = tmp_path / "nbbo.csv"
    best.write_text("DATE,TIME_M,SYM_ROOT,BEST_BID,BEST_BIDSIZ,BEST_ASK,BEST_ASKSIZ\n"
                    "20260310,9:45:00.1,AAPL,170.1,1,170.2,3\n")
    plain = tmp_path / "quotes.csv"
    plain.write_text("DATE,TIME_M,EX,SYM_ROOT,BID,BIDSIZ,ASK,ASKSIZ\n20260310,9:45:00.1,Q,AAPL,170.1,1,170.2,3\n")
    for path, bid in ((best, "BEST_BID"), (plain, "BID")):
        replay = FileReplay(path, columns={"tz": "America/New_York"})
        assert [(t.bid, t.ask) for t in drain(replay)] == [(170.1, 170.2)]
        assert f"bid={bid}," in replay.notes[0]
        assert not any("not from" in n for n in replay.notes)


WRDS_CQM_HEADER = "DATE,TIME_M,EX,SYM_ROOT,SYM_SUFFIX,BID,BIDSIZ,ASK,ASKSIZ,QU_COND,QU_SEQNUM,NATBBO_IND,QU_CANCEL\n"


def wrds_cqm(path: Path, venues: str) -> Path:
    """WRDS's consolidated quotes (cqm): each row one exchange's own quote, EX its one-letter code; AAPL quoted by
    `venues` in turn (Z a cent lower, P a cent wider), BRK.B by Q alone."""
    rows = []
    for i in range(24):
        ex = venues[i % len(venues)]
        bid = 180.10 + 0.01 * (i % 3) - 0.01 * (ex == "Z")
        rows.append(f"20240102,9:30:{i:02d}.123456789,{ex},AAPL,,{bid:.2f},3,{bid + 0.02 + 0.01 * (ex == 'P'):.2f},2,"
                    f"R,{1000 + i},0,\n")
        if i % 6 == 0:
            rows.append(f"20240102,9:30:{i:02d}.223456789,Q,BRK,B,480.10,1,480.30,1,R,{2000 + i},0,\n")
    path.write_text(WRDS_CQM_HEADER + "".join(rows))
    return path


def test_a_wrds_cqm_file_whose_exchange_changes_within_a_stream_gets_the_venue_caution(tmp_path: Path) -> None:
    replay = FileReplay(wrds_cqm(tmp_path / "cqm_20240102.csv", "NPQZ"), columns={"tz": "America/New_York"})
    assert {t.stream for t in drain(replay)} == {"AAPL", "BRK.B"}
    said = next(n for n in replay.notes if "each stream mixes them" in n)
    assert said.startswith('cqm_20240102.csv: column "EX" holds 4 venues (N, P, Q, Z) and each stream mixes them: its '
                           "quotes are each venue's own (a consolidated quote file, as WRDS's cqm), and the venue "
                           "changes 23 times within a stream in its first rows (in 1 of 2 streams)"), said
    assert "--columns stream=EX+SYM_ROOT+SYM_SUFFIX" in said and said in replay.cautions
    # the map the caution gives: a stream per venue, each its own quotes
    per_venue = FileReplay(tmp_path / "cqm_20240102.csv", columns={"stream_col": "EX+SYM_ROOT+SYM_SUFFIX",
                                                                   "tz": "America/New_York"})
    assert {t.stream for t in drain(per_venue)} == {"N AAPL", "P AAPL", "Q AAPL", "Z AAPL", "Q BRK.B"}


def test_a_cqm_file_of_one_venue_per_stream_and_an_nbbo_file_get_no_venue_caution(tmp_path: Path) -> None:
    one_venue = FileReplay(wrds_cqm(tmp_path / "cqm_one.csv", "N"), columns={"tz": "America/New_York"})
    drain(one_venue)  # AAPL on N alone, BRK.B on Q: two venues in the file, one in each stream
    nbbo = tmp_path / "wrds_nbbo.csv"  # EX the venue whose quote set the NBBO, read from BEST_*
    nbbo.write_text(WRDS_NBBO_HEADER + "".join(f"20260310,9:45:0{i}.1,{'QN'[i % 2]},BRK,B,480.2,3,480.22,2,R,Q,"
                                               f"480.2,5,Q,480.22,4,4\n" for i in range(6)))
    for replay in (one_venue, FileReplay(nbbo, columns={"tz": "America/New_York"})):
        assert not any("each stream mixes them" in n for n in replay.notes), replay.notes


def test_a_second_clock_column_is_named_with_the_map_that_reads_it(tmp_path: Path) -> None:
    sip = [datetime(2026, 3, 10, 13, 30, tzinfo=timezone.utc) + timedelta(milliseconds=i) for i in range(5)]
    path = tmp_path / "exch_and_sip.parquet"
    pl.DataFrame({"exchange_time": [s - timedelta(microseconds=300) for s in sip], "sip_timestamp": sip,
                  "symbol": ["GOOGL"] * 5, "price": [175.0 + 0.01 * i for i in range(5)],
                  "size": [100] * 5}).write_parquet(path)
    replay = FileReplay(path)
    first = drain(replay)[0].ts
    assert "ts=exchange_time" in replay.notes[0]
    said = next(n for n in replay.notes if "another clock" in n)
    assert '"sip_timestamp"' in said and "--columns ts=sip_timestamp" in said
    on_sip = FileReplay(path, columns={"ts": "sip_timestamp"})
    assert drain(on_sip)[0].ts == first + 300_000
    assert not any("another clock" in n for n in on_sip.notes)  # a map names its time column: nothing to say


def share_class_files(tmp_path: Path, trade_symbols: list[str], quote_symbols: list[str]) -> tuple[Path, Path]:
    ts = [f"2026-03-10T14:30:{i:02d}Z" for i in range(20)]
    trades, quotes = tmp_path / "trades_cqs.csv", tmp_path / "nbbo_taq.csv"
    pl.DataFrame({"timestamp": ts, "symbol": [trade_symbols[i % len(trade_symbols)] for i in range(20)],
                  "price": [45.0 + 0.01 * (i % 3) for i in range(20)], "size": [100] * 20}).write_csv(trades)
    pl.DataFrame({"timestamp": ts, "symbol": [quote_symbols[i % len(quote_symbols)] for i in range(20)],
                  "bid": [44.99] * 20, "ask": [45.02] * 20, "bid_size": [100] * 20,
                  "ask_size": [100] * 20}).write_csv(quotes)
    return trades, quotes


def test_one_share_class_spelt_two_ways_in_trades_and_quotes_files_is_a_caution(tmp_path: Path) -> None:
    trades, quotes = share_class_files(tmp_path, ["BF B", "BRK/B"], ["BF.B", "BRK.B"])
    replay = FileReplay([trades, quotes])
    assert sorted({(t.stream, t.kind) for t in drain(replay)}) == [
        ("BF B", "trade"), ("BF.B", "quote"), ("BRK-B", "trade"), ("BRK.B", "quote")]
    said = [n for n in replay.notes if "share class's separator" in n]
    assert len(said) == 2 and all(type(n).__name__ == "Caution" for n in said)
    assert '"BF B" (trades only: trades_cqs.csv) and "BF.B" (quotes only: nbbo_taq.csv)' in said[0]
    assert '"BRK-B" (trades only: trades_cqs.csv) and "BRK.B"' in said[1]
    assert "columns: {stream: BF.B}" in said[0]
    # the way the caution gives: a replay list entry naming the one instrument's trades as its quotes
    (tmp_path / "one").mkdir()
    one, _ = share_class_files(tmp_path / "one", ["BF B"], ["BF.B"])
    named = FileReplay([(one, {"stream": "BF.B"}), quotes])
    assert {t.stream for t in drain(named) if t.kind == "trade"} == {"BF.B"}
    assert not any("share class's separator" in n for n in named.notes)


def test_two_spellings_that_are_not_one_trades_only_and_one_quotes_only_stream_are_no_caution(tmp_path: Path) -> None:
    # BF.B has both kinds already; BRKB (no separator) is another name than BRK.B
    trades, quotes = share_class_files(tmp_path, ["BF B", "BF.B", "BRKB"], ["BF.B", "BRK.B"])
    replay = FileReplay([trades, quotes])
    drain(replay)
    assert not any("share class's separator" in n for n in replay.notes)


def test_the_cancel_caution_counts_the_trades_its_keep_filter_leaves_in(tmp_path: Path) -> None:
    path = tmp_path / "actions.csv"
    path.write_text(ACTIONS)  # trade 2 (a 10x print) cancelled, trade 1 corrected: both referred to
    note = next(n for n in FileReplay(path).cautions if "by reference are not applied" in n)
    assert "keep: {action: [NEW]}" in note
    assert "leaves in the 2 trades they refer to (trade_id 1 at 170.02, 2 at 1700.8): they replay as read" in note
    kept = drain(FileReplay([{"path": str(path), "columns": {"keep": {"action": ["NEW"]}}}]))
    assert [t.price for t in kept] == [170.02, 1700.8]  # as the caution says: the busted print is in
    # references to trades the file does not hold (an earlier day's): nothing left in to count
    pl.read_csv(path).with_columns(pl.col("orig_trade_id") + 100).write_csv(tmp_path / "elsewhere.csv")
    note = next(n for n in FileReplay(tmp_path / "elsewhere.csv").cautions if "by reference" in n)
    assert "leaves in" not in note


def test_the_regular_hours_window_the_docs_give_keeps_the_closing_auction_print(tmp_path: Path) -> None:
    path = tmp_path / "trades_et.csv"
    path.write_text("timestamp,symbol,price,size\n"
                    "2026-03-06 09:30:00.000,GOOGL,175.00,450000\n"     # the opening cross
                    "2026-03-06 15:59:59.999,GOOGL,175.10,100\n"
                    "2026-03-06 16:00:00.000,GOOGL,175.20,800000\n"     # the closing cross, stamped 16:00:00
                    "2026-03-06 16:00:02.500,GOOGL,175.20,2000\n"       # a closing print a little late
                    "2026-03-06 16:05:00.000,GOOGL,175.30,100\n")       # after hours (Form T)
    docs = (Path(__file__).parents[1] / "docs" / "replay.md").read_text()
    window = "09:30-16:01 America/New_York"
    assert f"--hours '{window}'" in docs
    replay = FileReplay(path, columns={"tz": "America/New_York", "hours": window})
    assert [t.size for t in drain(replay)] == [450000, 100, 800000, 2000]
    assert dict(replay.rejected) == {"filtered_out": 1}
    # the end is excluded: to the minute, 16:00 leaves the close out; to the second, 16:00:01 keeps a 16:00:00 print
    assert [t.size for t in drain(FileReplay(path, columns={"tz": "America/New_York", "hours": "09:30-16:00"}))] \
        == [450000, 100]
    assert [t.size for t in drain(FileReplay(path, columns={"tz": "America/New_York", "hours": "09:30-16:00:01"}))] \
        == [450000, 100, 800000]
