"""NYSE's own Daily TAQ files as a US equities engineer found them misread (review355): the NBBO file's
Best_Bid_Price/Best_Offer_Price, the trades' Trade Correction Indicator, the 15-digit HHMMSSxxxxxxxxx `Time` whose
day is only in the file's name (EQY_US_ALL_TRADE_20240308), New York times, the END trailer; and a zoned --hours
over naive times read as UTC. Headers are byte-exact as review355 built them; every file is written here."""

from __future__ import annotations

import argparse
import gzip
import io
import re
import sys
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest

from connectors.cautions import Caution
from connectors.option_names import MARKED, is_option_name
from connectors.map_options import map_from_options
from connectors.name_dates import compact_dates
from connectors.replay import FileReplay
from engine.service.backtest_report import unscored_stream_lines
from connectors.futures_codes import derivative_kind as kind_of
from engine.service.market_caveat import stream_caveat
from engine.service.rejections import rejected_in_one_line, rejected_lines
from engine.service.stdin_files import spool_streams
from conftest import drain

TRADE_HEADER = ("Time|Exchange|Symbol|Sale Condition|Trade Volume|Trade Price|Trade Stop Stock Indicator|Trade "
                "Correction Indicator|Sequence Number|Trade Id|Source of Trade|Trade Reporting Facility|Participant "
                "Timestamp|Trade Reporting Facility TRF Timestamp|Trade Through Exempt Indicator\n")
NBBO_HEADER = ("Time|Exchange|Symbol|Bid_Price|Bid_Size|Offer_Price|Offer_Size|Quote_Condition|Sequence_Number|"
               "National_BBO_Ind|FINRA_BBO_Indicator|FINRA_ADF_MPID_Indicator|Quote_Cancel_Correction|"
               "Source_Of_Quote|Best_Bid_Quote_Condition|Best_Bid_Exchange|Best_Bid_Price|Best_Bid_Size|"
               "Best_Bid_FINRA_Market_Maker_ID|Best_Offer_Quote_Condition|Best_Offer_Exchange|Best_Offer_Price|"
               "Best_Offer_Size|Best_Offer_FINRA_Market_Maker_ID|LULD_Indicator|LULD_NBBO_Indicator|"
               "SIP_Generated_Message_Identifier|Participant_Timestamp|FINRA_ADF_Timestamp|"
               "Security_Status_Indicator\n")
QUOTE_HEADER = ("Time|Exchange|Symbol|Bid_Price|Bid_Size|Offer_Price|Offer_Size|Quote_Condition|Sequence_Number|"
                "National_BBO_Ind|FINRA_BBO_Indicator|FINRA_ADF_MPID_Indicator|Quote_Cancel_Correction|"
                "Source_Of_Quote|Retail_Interest_Indicator|Short_Sale_Restriction_Indicator|LULD_BBO_Indicator|"
                "SIP_Generated_Message_Identifier|National_BBO_LULD_Indicator|Participant_Timestamp|"
                "FINRA_ADF_Timestamp|FINRA_ADF_Market_Participant_Quote_Indicator|Security_Status_Indicator\n")
TRADES = TRADE_HEADER + (
    "040125562680053|B|SPY|@F I|13|262.95||00|1001|1001|C||040125562679553||0\n"
    "093000100000000|J|IBM|@   |100|216.84||00|1002|1002|C||093000099999500||0\n"
    "103000100000000|J|IBM|@   |100|216.90||10|1003|1003|C||103000099999500||0\n"
    "103000100000007|J|IBM|@   |100|217.84||12|1004|1004|C||103000099999507||0\n"
    "143000000000000|N|BRK B|@   |100|410.02||00|1005|1005|C||142959999999500||0\n"
    "END|20240308|5\n")


def _ns(clock: str, day: str = "2024-03-08") -> int:
    """Epoch ns of a New York wall-clock time (HH:MM:SS.fffffffff) of `day`."""
    whole, fraction = clock.split(".")
    wall = datetime.fromisoformat(f"{day}T{whole}").replace(tzinfo=ZoneInfo("America/New_York"))
    return int(wall.timestamp()) * 10**9 + int(fraction)


def test_daily_taq_trades_read_with_no_options(tmp_path: Path) -> None:
    """#3, #4, #5 with detection alone: the clock digits, the day from the name, New York's zone, said in notes;
    #2: Trade Correction Indicator's cancel (10) and correction (12) left out as TAQ's TR_CORR's are; #9: the
    END trailer is no row (no stream `5`, nothing rejected)."""
    path = tmp_path / "EQY_US_ALL_TRADE_20240308.txt"
    path.write_text(TRADES)
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.stream, t.price) for t in ticks] == [("SPY", 262.95), ("IBM", 216.84), ("BRK B", 410.02)]
    assert ticks[0].ts == _ns("04:01:25.562680053")  # EST: 09:01:25.562680053Z
    assert ticks[2].ts == _ns("14:30:00.000000000")
    assert dict(replay.rejected) == {"filtered_out": 2}
    notes = " | ".join(replay.notes)
    assert 'column "Time" holds a clock\'s digits' in notes and "read as ts_unit hhmmss_ns" in notes
    assert "the day is 2024-03-08, from the file name, times in America/New_York" in notes
    assert "read as New York wall-clock times" in notes and "read as UTC" not in notes
    assert 'column "Trade Correction Indicator" marks cancelled and corrected prints (10, 12)' in notes
    assert 'its last line, "END|20240308|5", is a trailer' in notes
    # the map the correction note prints reads every print, the cancel and the correction too, at the same times
    full = notes.split("a map given in full reads every print (--columns '")[1].split("'")[0]
    assert full == "ts=Time,stream=Symbol,price=Trade Price,size=Trade Volume,ts_unit=hhmmss_ns,date=file_name"
    every = drain(FileReplay(path, columns=map_from_options(columns=full)))
    assert len(every) == 5 and every[0].ts == ticks[0].ts
    # the keys the review gave read the same ticks, and a --tz given wins over New York
    given = FileReplay(path, columns={"ts_unit": "hhmmss_ns", "date": "file_name", "tz": "America/New_York"})
    assert [t.ts for t in drain(given)] == [t.ts for t in ticks]
    utc = FileReplay(path, columns={"tz": "UTC"})
    assert drain(utc)[0].ts == _ns("04:01:25.562680053") - 5 * 3600 * 10**9


def test_daily_taq_time_without_a_day_is_refused_naming_the_options(tmp_path: Path) -> None:
    path = tmp_path / "trades.txt"
    path.write_text(TRADES)
    with pytest.raises(ValueError) as refused:
        drain(FileReplay(path))
    said = str(refused.value)
    assert "its times are a clock's digits, HHMMSSxxxxxxxxx (ts_unit hhmmss_ns)" in said
    assert "seconds after midnight" not in said
    assert "--ts-unit hhmmss_ns --date YYYY-MM-DD --tz America/New_York" in said
    ticks = drain(FileReplay(path, columns={"date": "2024-03-08"}))
    assert ticks[0].ts == _ns("04:01:25.562680053")


def test_a_zoned_hours_window_over_naive_times_read_as_utc_warns(tmp_path: Path) -> None:
    """#4: the window's zone is not taken for the times' (explicit), but a warning names --tz."""
    path = tmp_path / "trades.csv"
    path.write_text("time,symbol,price,size\n2024-03-08 09:31:00,ABC,10.0,100\n2024-03-08 15:32:00,ABC,10.1,100\n")
    replay = FileReplay(path, columns={"hours": "09:30-16:00 America/New_York"})
    assert [t.price for t in drain(replay)] == [10.1]  # 15:32 UTC is 10:32 in New York: read as UTC, as said
    warned = [n for n in replay.notes if isinstance(n, Caution) and "hours window" in n]
    assert len(warned) == 1 and "give --tz America/New_York" in warned[0]
    zoned = FileReplay(path, columns={"hours": "09:30-16:00 America/New_York", "tz": "America/New_York"})
    assert len(drain(zoned)) == 2 and not any("hours window" in n for n in zoned.notes)


def test_nbbo_file_reads_best_bid_and_offer_not_the_participants(tmp_path: Path) -> None:
    """#1: the NBBO columns (Best_Bid_Price, Best_Offer_Price and their sizes), with the note naming the quoting
    participant's columns not read; the trailer skipped."""
    path = tmp_path / "EQY_US_ALL_NBBO_20240311.txt"
    path.write_text(NBBO_HEADER + (
        "093000387682509|P|AAPL|100.07|2|100.12|1|R|5001|4| | | |C|R|Q|100.09|3|    |R|N|100.10|4|    |A| | |"
        "093000000000000|||\n"
        "093030719117539|P|MSFT|100.72|2|100.77|1|R|5002|4| | | |C|R|Q|100.74|3|    |R|N|100.75|4|    |A| | |"
        "093030000000000|||\n"
        "END|20240311|2\n"))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.stream, t.bid, t.ask, t.bid_size, t.ask_size) for t in ticks] == [
        ("AAPL", 100.09, 100.10, 3.0, 4.0), ("MSFT", 100.74, 100.75, 3.0, 4.0)]
    assert ticks[0].ts == _ns("09:30:00.387682509", "2024-03-11")  # EDT, the Monday after the change
    assert dict(replay.rejected) == {}
    note = next(n for n in replay.notes if "quotes read from Best_Bid_Price/Best_Offer_Price" in n)
    assert "not from Bid_Price, Offer_Price, Bid_Size, Offer_Size beside them" in note
    assert "--columns bid=Bid_Price,ask=Offer_Price,bid_size=Bid_Size,ask_size=Offer_Size" in note


@pytest.mark.parametrize("name,found", [
    ("EQY_US_ALL_TRADE_20240308", {"2024-03-08"}), ("AAPL_TRADES_20240102", {"2024-01-02"}),
    ("ticks_20101990", set()),  # 2010-10-19 or 20.10.1990: ambiguous, no day
    ("part_18991231", set()), ("trades_20241301", set()), ("id_202403081", set()),  # out of range, no date, 9 digits
])
def test_compact_dates_in_names(name: str, found: set[str]) -> None:
    assert compact_dates(name) == found


def test_date_file_name_reads_nyse_names_and_refuses_two_days(tmp_path: Path) -> None:
    """#5: `--date file_name` over several days' files, each its own day from its YYYYMMDD."""
    monday = tmp_path / "EQY_US_ALL_TRADE_20240311.txt"
    monday.write_text(TRADE_HEADER + "040136578740312|Y|IBM|@  I|3|216.03||00|1001|1001|C||040136578739812||0\n")
    keys = {"ts_unit": "hhmmss_ns", "date": "file_name", "tz": "America/New_York"}
    assert drain(FileReplay(monday, columns=keys))[0].ts == _ns("04:01:36.578740312", "2024-03-11")  # EDT
    two = tmp_path / "EQY_US_ALL_TRADE_20240308_20240311.txt"
    two.write_text(monday.read_text())
    with pytest.raises(ValueError, match="several dates"):
        drain(FileReplay(two, columns=keys))


def test_halt_quotes_are_no_market_apart_from_the_misread_column_warning(tmp_path: Path) -> None:
    """#12: a LULD pause's 0/0 quotes (zero sizes) are `no_market`, counted apart; however many, they set off no
    "is a column read as the file means it?" warning, and their reject suggests no fill_quotes."""
    path = tmp_path / "EQY_US_ALL_NBBO_20240308.txt"
    row = "{}|P|MSFT|{}|{}|{}|{}|{}|{}|2| | | |C||||||{}|||\n"
    path.write_text(QUOTE_HEADER + row.format("093000000000000", "401.00", 2, "401.02", 1, "R", 1, "092959999999700")
                    + "".join(row.format(f"1030{i:02d}000000000", "0.00", 0, "0.00", 0, "H", i + 2,
                                         f"1030{i:02d}000000000") for i in range(10)))
    replay = FileReplay(path, columns={"tz": "America/New_York"})
    assert [t.bid for t in drain(replay)] == [401.0]
    assert dict(replay.rejected) == {"no_market": 10}
    assert "fill_quotes" not in replay.rejected.examples["no_market"]
    lines = rejected_lines(dict(replay.rejected), dict(replay.rejected.examples), accepted=1)
    assert not any(line.startswith("warning") for line in lines)
    assert any(line.startswith("  rejected no_market: 10") for line in lines)
    assert rejected_in_one_line({"no_market": 10}, 1).startswith("note:")
    assert rejected_lines({"missing_field": 10}, {}, accepted=1)[0].startswith("warning")  # bad data still warns


OSI_NAMES = ("AAPL  261218C00150000", "O:AAPL261218C00150000", "SPY   241220P00520000", "BRK.B 261218C00500000")


@pytest.mark.parametrize("name", OSI_NAMES)
def test_osi_and_polygon_option_symbols_are_options_by_their_name(name: str) -> None:
    """#10: OCC/OSI's and Polygon's symbols are options wherever a name decides it: the spot-trained model's caveat
    and the rule that marks a derivative's name."""
    assert is_option_name(name) and kind_of(name) == "an option"
    caveat = stream_caveat([name, "AAPL"])
    assert caveat is not None and f"by its name, {name} is an option" in caveat["text"]
    assert re.search(MARKED, name)


@pytest.mark.parametrize("name", ("AAPL", "BRK.B", "BF B", "SPY", "ESZ4"))
def test_stocks_are_no_options(name: str) -> None:
    assert not is_option_name(name) and kind_of(name) != "an option"


def _days(path: Path, day: str, prices: dict[str, float]) -> Path:
    path.write_text("timestamp,symbol,price,size\n" + "".join(
        f"{day}T{14 + i // 60:02d}:{i % 60:02d}:00Z,{symbol},{price + i * 0.01:.2f},1\n"
        for symbol, price in prices.items() for i in range(5)))
    return path


def test_option_contracts_get_no_two_instruments_caution_and_stocks_get_it_in_plain_words(tmp_path: Path) -> None:
    """#10: premiums move many-fold in a day, so contracts named as options are left out of the caution that two
    files of one stream hold two instruments; where streams get it, its wording counts them."""
    options = FileReplay([_days(tmp_path / "o1.csv", "2026-11-30", {OSI_NAMES[0]: 1.2, OSI_NAMES[2]: 0.5}),
                          _days(tmp_path / "o2.csv", "2026-12-01", {OSI_NAMES[0]: 6.5, OSI_NAMES[2]: 3.1})])
    assert len(drain(options)) == 20 and not options.cautions
    stocks = FileReplay([_days(tmp_path / "s1.csv", "2026-11-30", {"ABC": 10.0, "XYZ": 20.0}),
                         _days(tmp_path / "s2.csv", "2026-12-01", {"ABC": 50.0, "XYZ": 100.0})])
    drain(stocks)
    (caution,) = stocks.cautions
    assert caution.startswith("2 streams, ABC, XYZ, each from two files whose prices differ"), caution
    assert "one streams" not in caution


HALTED = TRADES.replace("143000000000000|N|BRK B|@   |100|410.02|", "143000000000000|N|BRK B|@   |100||")  # no price


def test_files_as_nyse_ships_them_are_read_by_their_content_in_place(tmp_path: Path) -> None:
    """#8: `EQY_US_ALL_TRADE_20240308` (no extension) and its `.gz` read as the CSV they hold, through a link (no
    copy), every message naming the file as given; a file of other bytes is still refused by its type."""
    plain = tmp_path / "EQY_US_ALL_TRADE_20240308"
    plain.write_text(HALTED)
    packed = tmp_path / "gz" / "EQY_US_ALL_TRADE_20240308.gz"
    packed.parent.mkdir()
    packed.write_bytes(gzip.compress(HALTED.encode()))
    for path in (plain, packed):
        replay = FileReplay(path)
        assert [t.stream for t in drain(replay)] == ["SPY", "IBM"], path
        assert f"{path}: its name says no kind of file replay reads; its content does: read as " in \
            " | ".join(replay.notes)
        example = replay.rejected.examples["missing_field"]
        assert example.startswith(f"{path} line 6: missing_field"), example
        assert "flashtick-named-" not in " | ".join([*replay.notes, example])
        replay.close()
    binary = tmp_path / "blob"
    binary.write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(ValueError, match="unsupported file type"):
        drain(FileReplay(binary))


def test_standard_input_rejects_name_standard_input_not_its_temporary_copy(tmp_path: Path, monkeypatch) -> None:
    """#8: `zcat ... | flashtick backtest -` is copied to a temporary file, removed at the end: its rejects and its
    refusals name standard input."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(HALTED.encode())))
    args = argparse.Namespace(files=["-"], command_name="flashtick backtest")
    spool_streams(args)
    copy = Path(args.files[0])
    with pytest.raises(ValueError) as refused:
        drain(FileReplay(copy))
    assert str(refused.value).startswith("standard input: its times are a clock's digits"), refused.value
    replay = FileReplay(copy, columns={"date": "2024-03-08"})
    assert len(drain(replay)) == 2
    assert replay.rejected.examples["missing_field"].startswith("standard input line 6: missing_field")


CONDITIONED = TRADE_HEADER + "".join(
    f"0930{i:02d}000000000|N|AAPL|{condition}|{size}|170.{i:02d}||00|{i}|{i}|C||0930{i:02d}000000000||0\n"
    for i, (condition, size) in enumerate([("@   ", 100), ("@  I", 37), ("@F  ", 200), ("@F I", 5), ("@O X", 500),
                                           ("@ T ", 100)]))


def test_keep_tests_leave_out_by_a_character_or_by_value(tmp_path: Path) -> None:
    """#11: TAQ's sale conditions hold a character per condition: `not_contains: [I]` leaves out every odd lot,
    whatever else the cell holds; `not` leaves out the values listed; `contains` keeps only cells holding one. A
    Parquet copy filters alike; an unknown test is refused by its name."""
    path = tmp_path / "EQY_US_ALL_TRADE_20240308.txt"
    path.write_text(CONDITIONED)
    odd_lots = FileReplay(path, columns={"keep": {"Sale Condition": {"not_contains": ["I"]}}})
    assert [t.size for t in drain(odd_lots)] == [100, 200, 500, 100]
    assert dict(odd_lots.rejected) == {"filtered_out": 2}
    assert any("keep Sale Condition not containing I" in n for n in odd_lots.notes)
    assert "(it keeps not containing I)" in odd_lots.rejected.examples["filtered_out"]
    listed = FileReplay(path, columns={"keep": {"Sale Condition": {"not": ["@  I", "@O X"]}}})
    assert [t.size for t in drain(listed)] == [100, 200, 5, 100]
    sweeps = FileReplay(path, columns={"keep": {"Sale Condition": {"contains": ["F", "T"], "not_contains": ["I"]}}})
    assert [t.size for t in drain(sweeps)] == [200, 100]
    pl.read_csv(path, separator="|").write_parquet(tmp_path / "t.parquet")  # Time as integers (no leading 0)
    copy = FileReplay(tmp_path / "t.parquet", columns={"keep": {"Sale Condition": {"not_contains": ["I"]}},
                                                       "date": "2024-03-08"})
    ticks = drain(copy)
    assert [t.size for t in ticks] == [100, 200, 500, 100] and ticks[0].ts == _ns("09:30:00.000000000")
    with pytest.raises(ValueError, match=r"unknown test \"exclude\"; a column's tests are not, contains, not_contains"):
        FileReplay(path, columns={"keep": {"Sale Condition": {"exclude": ["I"]}}})


def test_by_stream_unscored_notes_count_the_streams_and_name_a_few() -> None:
    """#14: a sparse universe's streams that scored none of a query's answers: one note per reason, a count and
    the first few names, not a line of every name."""
    why = "direction_5 is scored on the next 5 ticks of the answer's stream"
    sparse = {"dir5": {f"Z{i:03d}": why for i in range(285)} | {"BF B": "another reason"}, "up": {"Z000": why}}
    lines = unscored_stream_lines(sparse)
    assert lines == [f"note: dir5 on 285 streams (Z000, Z001, Z002 and 282 others); up on Z000: no answer scored: "
                     f"{why}", "note: dir5 on BF B: no answer scored: another reason"]
