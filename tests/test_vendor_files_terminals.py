"""Terminal exports read as the analyst who saved them means them (review291): Bloomberg's error cells in a ticker
column, its tick dumps and field mnemonics, LSEG's `GMT Offset` as `+05:30`, title blocks above the header, a full
map's unread size. Every fixture is written here, from code, into tmp_path."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from engine.quoting import quoted

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain, ns


def test_a_bloomberg_error_cell_in_the_ticker_column_is_a_reject_not_a_stream(tmp_path: Path) -> None:
    path = tmp_path / "bbg.csv"
    tickers = ["VOD LN Equity", "#N/A N/A", "VOD LN Equity", "#N/A Invalid Security", "#VALUE!", "VOD LN Equity"]
    path.write_text("Ticker,Time,Last Price,Volume\n" + "".join(
        f"{t},2024-07-01 08:00:0{i},{72.5 + i / 100:.2f},100\n" for i, t in enumerate(tickers)))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert Counter(t.stream for t in ticks) == {"VOD LN": 3}  # less its yellow key, as a file's name (fix303 #3)
    assert dict(replay.rejected) == {"missing_stream": 3}
    first = replay.rejected.examples["missing_stream"]
    assert "line 3" in first and '"#N/A N/A" is a spreadsheet or terminal error value' in first


def test_an_lseg_gmt_offset_written_as_hours_and_minutes_is_read_as_that_offset(tmp_path: Path) -> None:
    header = "#RIC,Domain,Date-Time,GMT Offset,Type,Price,Volume,Bid Price,Bid Size,Ask Price,Ask Size\n"
    rows = [("09:15:00.1", "+05:30", "+5.5", "Quote,,,3100.05,10,3100.50,12"),
            ("09:15:00.2", "+05:30", "+5.5", "Trade,3100.50,5,,,,"),
            ("09:30:00.6", "-04:00", "-4", "Trade,161.19,7,,,,"),
            ("09:30:00.7", "-0400", "-4", "Trade,161.20,7,,,,")]
    written, hours = tmp_path / "clock.csv", tmp_path / "hours.csv"
    written.write_text(header + "".join(f"RELI.NS,Market Price,2024-07-01T{t},{o},{r}\n" for t, o, _, r in rows))
    hours.write_text(header + "".join(f"RELI.NS,Market Price,2024-07-01T{t},{h},{r}\n" for t, _, h, r in rows))
    ticks = [t.to_wire() for t in drain(FileReplay(written))]
    assert ticks == [t.to_wire() for t in drain(FileReplay(hours))]
    assert [t["ts"] for t in ticks[:1]] == [ns("2024-07-01T03:45:00.100+00:00")]


def test_a_full_map_with_a_time_and_price_detection_does_not_know_names_the_size_it_leaves_unread(
        tmp_path: Path) -> None:
    path = tmp_path / "capiq.csv"  # Capital IQ's `Pricing Date`, `Share Price`: no names detection reads
    path.write_text("Pricing Date,Share Price,Volume\n" + "".join(
        f"2024-07-0{day}T16:30:00Z,{72.5 + day / 10:.2f},{day * 100000}\n" for day in range(1, 6)))
    replay = FileReplay(path, columns=map_from_options(columns="ts=Pricing Date,price=Share Price"))
    assert {t.size for t in drain(replay)} == {1.0}  # read as given, but not without a word
    assert any('"Volume" looks like size, not read' in note for note in replay.notes)


BLOOMBERG_TICKS = [("08:00:00.000", "ASK", 72.54, 300), ("08:00:00.000", "BID", 72.50, 200),
                   ("08:00:01.000", "TRADE", 72.52, 100), ("08:00:01.500", "BID", 72.51, 400),
                   ("08:00:02.000", "BEST_ASK", 72.53, 500), ("08:00:03.000", "TRADE", 72.53, 700)]


def test_a_bloomberg_tick_dump_replays_its_bid_and_ask_rows_as_quotes(tmp_path: Path) -> None:
    dump, plain = tmp_path / "VOD LN.csv", tmp_path / "plain" / "VOD LN.csv"
    dump.write_text("time,type,value,size\n" + "".join(
        f"2024-07-01 {t},{kind},{value},{size}\n" for t, kind, value, size in BLOOMBERG_TICKS))
    plain.parent.mkdir()
    cells = {"TRADE": "{v},{s},,,,", "BID": ",,{v},,{s},", "ASK": ",,,{v},,{s}", "BEST_ASK": ",,,{v},,{s}"}
    plain.write_text("time,price,size,bid,ask,bid_size,ask_size\n" + "".join(
        f"2024-07-01T{t}Z,{cells[kind].format(v=value, s=size)}\n" for t, kind, value, size in BLOOMBERG_TICKS))
    columns = "ts=time,price=price,size=size,bid=bid,ask=ask,bid_size=bid_size,ask_size=ask_size,fill_quotes=true"
    expected = [t.to_wire() for t in drain(FileReplay(plain, columns=map_from_options(columns=columns)))]
    assert Counter(t["kind"] for t in expected) == {"quote": 3, "trade": 2}
    # as the refusal without a map advises: `--columns price=...`
    replay = FileReplay(dump, columns=map_from_options(columns="price=value", detect=True))
    assert [t.to_wire() for t in drain(replay)] == expected
    assert dict(replay.rejected) == {"missing_field": 1}  # the first side, before any of the other
    assert any("column \"type\" marks each row's one field" in note for note in replay.notes)
    full = map_from_options(columns="ts=time,price=value,size=size,quote_sides=type")
    assert [t.to_wire() for t in drain(FileReplay(dump, columns=full))] == expected


def test_a_full_map_over_a_bloomberg_tick_dump_is_refused_naming_quote_sides(tmp_path: Path) -> None:
    dump = tmp_path / "GBPUSD.csv"
    dump.write_text("time,type,value,size\n" + "".join(
        f"2024-07-01 {t},{kind},{value},{size}\n" for t, kind, value, size in BLOOMBERG_TICKS if kind != "TRADE"))
    with pytest.raises(ValueError, match="add quote_sides=type to read them as quotes"):
        drain(FileReplay(dump, columns=map_from_options(columns="ts=time,price=value,size=size")))


def test_bloomberg_field_mnemonics_are_detected_as_the_fields_they_name(tmp_path: Path) -> None:
    path = tmp_path / "bdh.csv"
    path.write_text("Dates,PX_LAST,PX_VOLUME,PX_BID,PX_ASK\n" + "".join(
        f"2024-07-01T08:0{i}:00Z,{72.5 + i / 100:.2f},{(i + 1) * 1000},{72.49 + i / 100:.2f},{72.53 + i / 100:.2f}\n"
        for i in range(5)))
    mapped = map_from_options(columns="ts=Dates,price=PX_LAST,size=PX_VOLUME,bid=PX_BID,ask=PX_ASK")
    expected = [t.to_wire() for t in drain(FileReplay(path, columns=mapped))]
    assert Counter(t["kind"] for t in expected) == {"quote": 5, "trade": 5}
    assert [t.to_wire() for t in drain(FileReplay(path))] == expected


def test_a_quoted_table_below_a_title_line_reads_as_the_unquoted_one_does(tmp_path: Path) -> None:
    rows = [f"2024-07-01,08:00:0{i}.5,{72.5 + i / 100:.2f},{(i + 1) * 100}" for i in range(6)]
    quoted, plain = tmp_path / "factset.csv", tmp_path / "plain" / "factset.csv"
    plain.parent.mkdir()
    quoted.write_text('FactSet Research Systems\n"Date","Time","Price","Volume"\n' + "".join(
        ",".join(f'"{cell}"' for cell in row.split(",")) + "\n" for row in rows))
    plain.write_text("FactSet Research Systems\nDate,Time,Price,Volume\n" + "".join(row + "\n" for row in rows))
    replay = FileReplay(quoted)
    assert [t.to_wire() for t in drain(replay)] == [t.to_wire() for t in drain(FileReplay(plain))]
    assert any('"FactSet Research Systems", is no CSV row' in note for note in replay.notes)


def test_a_title_block_holding_dates_is_refused_with_the_command_that_removes_it(tmp_path: Path) -> None:
    path = tmp_path / "report.csv"  # no BDH block (that names its Security): a title of dates and numbers
    path.write_text("Report,Minute bars,\nStart Date,7/1/2024,\nEnd Date,7/1/2024,\nPeriodicity,1 Min,\n,,\n"
                    "Dates,LAST_PRICE,VOLUME\n" + "".join(f"7/1/2024 08:{i:02d},72.5,1000\n" for i in range(20)))
    for columns in (None, map_from_options(columns="ts=Dates,price=LAST_PRICE,size=VOLUME")):
        with pytest.raises(ValueError, match=r'header looks to be line 6 \("Dates,LAST_PRICE,VOLUME"\).*'
                                             r"tail -n \+6 .*report.csv > report-table.csv"):
            drain(FileReplay(path, columns=columns))


BDH_TITLE = "Security,{security},\nStart Date,7/15/2024,\nEnd Date,7/15/2024,\nPeriodicity,1 Min,\n,,\n"


@pytest.mark.parametrize("security", ["VOD LN Equity", "ESZ4 Index"])
def test_a_bdh_title_block_names_the_stream_of_a_file_without_a_ticker_column(tmp_path: Path, security: str) -> None:
    # fix303 #3: the block was refused, and the table cut from it (as the refusal advised) named no security
    table = "Dates,LAST_PRICE,VOLUME\n" + "".join(f"7/15/2024 08:{i:02d},72.5,1000\n" for i in range(20))
    path, named = tmp_path / "bdh.csv", tmp_path / "named" / f"{security}.csv"
    path.write_text(BDH_TITLE.format(security=security) + table)
    named.parent.mkdir()
    named.write_text(table)
    replay = FileReplay(path)
    ticks = [t.to_wire() for t in drain(replay)]
    assert len(ticks) == 20 and ticks == [t.to_wire() for t in drain(FileReplay(named))]
    assert {t["stream"] for t in ticks} == {security.rsplit(" ", 1)[0]}
    assert any("are a Bloomberg BDH export's title block, skipped" in note for note in replay.notes), replay.notes
    assert any(f"the security its BDH title block names ({quoted(security)}, less its yellow key)" in note
               for note in replay.notes)
    mapped = FileReplay(path, columns=map_from_options(columns="ts=Dates,price=LAST_PRICE,size=VOLUME"))
    assert [t.to_wire() for t in drain(mapped)] == ticks
    # a ticker column names the streams, the block's security aside
    path.write_text(BDH_TITLE.format(security=security) + "Dates,Ticker,LAST_PRICE,VOLUME\n" + "".join(
        f"7/15/2024 08:{i:02d},{'BARC LN Equity' if i % 2 else security},72.5,1000\n" for i in range(20)))
    assert Counter(t.stream for t in drain(FileReplay(path))) == {"BARC LN": 10, security.rsplit(" ", 1)[0]: 10}


def test_a_bdh_sheet_of_securities_side_by_side_is_refused_saying_one_security_per_file(tmp_path: Path) -> None:
    table = "Dates,PX_LAST,PX_VOLUME,PX_LAST,PX_VOLUME\n7/1/2024,72.50,1000000,214.1,2000000\n" \
            "7/2/2024,72.80,1100000,215.3,2100000\n7/15/2024,72.90,1200000,215.9,2200000\n"
    wide, cut = tmp_path / "bdh_wide.csv", tmp_path / "bdh_cut.csv"
    wide.write_text(",VOD LN Equity,,BARC LN Equity,\n" + table)
    cut.write_text(table)  # the tickers' line removed: still two securities, never read as the first alone
    with pytest.raises(ValueError, match=r"repeats PX_LAST, PX_VOLUME under the names above it \(VOD LN Equity, "
                                         r"BARC LN Equity\): a sheet of several securities side by side"):
        drain(FileReplay(wide))
    with pytest.raises(ValueError, match='repeats "PX_LAST", "PX_VOLUME": a sheet of several securities'):
        drain(FileReplay(cut))


@pytest.mark.parametrize(("name", "stream"), [("VOD LN Equity", "VOD LN"), ("7203 JT Equity", "7203 JT"),
                                              ("ESZ4 Index", "ESZ4"), ("EURUSD Curncy", "EURUSD"),
                                              ("TY1 Comdty", "TY1"), ("SPX Index", "SPX")])
def test_a_bloomberg_security_as_a_file_name_loses_its_yellow_key_whichever_it_is(tmp_path: Path, name: str,
                                                                                    stream: str) -> None:
    path = tmp_path / f"{name}.csv"
    path.write_text("time,price,size\n2024-07-01T08:00:00Z,72.5,100\n2024-07-01T08:00:01Z,72.52,100\n")
    assert {t.stream for t in drain(FileReplay(path))} == {stream}


def test_a_factset_tick_export_reads_its_last_price_and_volume_as_trades_beside_the_quotes(tmp_path: Path) -> None:
    # fix303 #2: `Last Price` was left unread beside bid/ask, for want of a size: `Last Volume` was no size name
    path = tmp_path / "AAPL-US.csv"
    path.write_text("Date,Time,Last Price,Last Volume,Bid Price,Ask Price,Bid Size,Ask Size\n"
                    "06/13/2024,09:30:00.123,192.10,100,192.09,192.11,300,200\n"
                    "06/13/2024,09:30:00.456,,,192.10,192.12,400,100\n"
                    "06/13/2024,09:30:01.001,192.12,50,192.10,192.12,400,50\n")
    replay = FileReplay(path)
    ticks = [(t.kind, t.ts, t.price, t.size, t.bid, t.ask) for t in drain(replay)]
    at = [ns(f"2024-06-13T09:30:{s}+00:00") for s in ("00.123", "00.456", "01.001")]
    assert ticks == [("quote", at[0], None, None, 192.09, 192.11), ("trade", at[0], 192.10, 100.0, None, None),
                     ("quote", at[1], None, None, 192.10, 192.12),
                     ("quote", at[2], None, None, 192.10, 192.12), ("trade", at[2], 192.12, 50.0, None, None)]
    assert not replay.rejected
    assert any("price=Last Price, size=Last Volume, bid=Bid Price" in note for note in replay.notes), replay.notes


def test_a_ticker_columns_yellow_keys_name_the_streams_a_file_name_does(tmp_path: Path) -> None:
    # fix303 #3: cells `ESZ4 Index`, `AAPL US Equity` kept the key while a file so named lost it: two streams
    rows = [("ESZ4 Index", 5912.25), ("AAPL US Equity", 221.5), ("ESZ4 Index", 5912.5), ("AAPL US Equity", 221.6)]
    column = tmp_path / "bbg.csv"
    column.write_text("Ticker,Time,Last Price,Volume\n" + "".join(
        f"{name},2024-07-01 14:00:0{i},{price},10\n" for i, (name, price) in enumerate(rows)))
    replay = FileReplay(column)
    by_column = [(t.stream, t.ts, t.price) for t in drain(replay)]
    assert Counter(stream for stream, _, _ in by_column) == {"ESZ4": 2, "AAPL US": 2}
    assert any("replay without their yellow key (`ESZ4 Index` as ESZ4" in note for note in replay.notes)
    by_name = []
    for security in ("ESZ4 Index", "AAPL US Equity"):
        path = tmp_path / f"{security}.csv"
        path.write_text("Time,Last Price,Volume\n" + "".join(
            f"2024-07-01 14:00:0{i},{price},10\n" for i, (name, price) in enumerate(rows) if name == security))
        by_name += [(t.stream, t.ts, t.price) for t in drain(FileReplay(path))]
    assert sorted(by_column) == sorted(by_name)


LSEG_HEADER = "#RIC,Domain,Date-Time,GMT Offset,Type,Price,Volume,Bid Price,Bid Size,Ask Price,Ask Size\n"


def lseg_rows(ric: str, price: float, start: int) -> list[tuple[str, str]]:
    """One RIC's rows in time order, a quote then a trade, every 7 s from 08:00:`start`: (time, line)."""
    out = []
    for i in range(6):
        at = f"2024-07-01T08:{(start + 7 * i) // 60:02d}:{(start + 7 * i) % 60:02d}.{i}00000000Z"
        cells = f"Trade,{price + i / 100:.2f},100,,,," if i % 2 else \
            f"Quote,,,{price - 0.01:.2f},10,{price + 0.01:.2f},12"
        out.append((at, f"{ric},Market Price,{at},+1,{cells}\n"))
    return out


def test_an_lseg_file_grouped_by_ric_gets_no_note_of_disorder(tmp_path: Path) -> None:
    # fix303 #4: each RIC's rows in time order, one RIC after another, were said to be "newest first, or merged
    # from several sources"
    rows = lseg_rows("VOD.L", 72.5, 0) + lseg_rows("BARC.L", 210.1, 3)
    grouped, merged = tmp_path / "grouped.csv", tmp_path / "merged.csv"
    grouped.write_text(LSEG_HEADER + "".join(line for _, line in rows))
    merged.write_text(LSEG_HEADER + "".join(line for _, line in sorted(rows)))
    replay = FileReplay(grouped)
    assert [t.to_wire() for t in drain(replay)] == [t.to_wire() for t in drain(FileReplay(merged))]
    assert not [n for n in replay.notes if "newest first" in n or "not in time order" in n], replay.notes
    assert any("its rows are grouped by stream, each of its 2 streams' rows in time order" in n for n in replay.notes)
    # a RIC whose own rows step back is out of order: said as before, never called grouped
    swapped = rows[:2] + rows[3:4] + rows[2:3] + rows[4:]
    disorder = tmp_path / "disorder.csv"
    disorder.write_text(LSEG_HEADER + "".join(line for _, line in swapped))
    notes = FileReplay(disorder).notes
    assert any("newest first, or merged from several sources" in n for n in notes), notes
    assert not any("grouped by stream" in n for n in notes)
