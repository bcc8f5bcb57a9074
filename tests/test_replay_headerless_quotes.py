"""Header-less files of a time and two numbers: HistData's tick files (known by their name) are always bid, ask and
volume in EST without summer time, whatever the spread of their first rows; any other file's two numbers are a
quote when the second is above the first by under 20% (an exotic's reopen), a price and a size otherwise. Real
files in tmp_path, read by FileReplay (the reader the CLI uses)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.replay import FileReplay
from conftest import drain


def utc_ns(text: str) -> int:
    return round(datetime.fromisoformat(text + "+00:00").timestamp() * 10**6) * 1000


def reopen_rows(time_text: str) -> str:
    """USDTRY at the Sunday reopen: 30 rows 0.65 TRY wide (2%), then 30 rows 0.016 wide."""
    wide = [(31.776, 32.426)] * 30
    tight = [(32.101 + i / 1000, 32.117 + i / 1000) for i in range(30)]
    return "".join(f"{time_text(i)},{bid:.5f},{ask:.5f},0\n" for i, (bid, ask) in enumerate(wide + tight))


def histdata(tmp_path: Path, month: str = "202401", day: str = "20240107 17") -> Path:
    path = tmp_path / f"DAT_ASCII_USDTRY_T_{month}.csv"
    path.write_text(reopen_rows(lambda i: f"{day}00{i:02d}{100 + i:03d}"))
    return path


def test_a_histdata_tick_file_is_quotes_in_est_whatever_its_first_spreads(tmp_path: Path) -> None:
    replay = FileReplay(histdata(tmp_path))
    ticks = drain(replay)
    assert len(ticks) == 60 and all(t.kind == "quote" and t.price is None for t in ticks)
    assert (ticks[0].stream, ticks[0].bid, ticks[0].ask) == ("USDTRY", 31.776, 32.426)
    assert ticks[0].ts == utc_ns("2024-01-07T22:00:00.100")  # 17:00 EST
    assert "read as HistData's tick layout, as its file name says" in replay.notes[0]
    assert any("its times read in Etc/GMT+5 (EST all year, no summer time)" in note for note in replay.notes)
    assert not any(isinstance(note, Caution) for note in replay.notes)


def test_a_tz_given_for_a_histdata_file_wins_and_one_with_summer_time_is_cautioned(tmp_path: Path) -> None:
    path = histdata(tmp_path, "201907", "20190702 03")
    new_york = FileReplay(path, columns={"tz": "America/New_York"})
    assert drain(new_york)[0].ts == utc_ns("2019-07-02T07:00:00.100")  # as asked: EDT, an hour early
    cautions = [note for note in new_york.notes if isinstance(note, Caution)]
    assert len(cautions) == 1 and "--tz America/New_York changes its clocks for summer time, but HistData writes " \
                                  "its times in EST all year" in cautions[0] and "--tz Etc/GMT+5" in cautions[0]
    utc = FileReplay(path, columns={"tz": "UTC"})
    assert drain(utc)[0].ts == utc_ns("2019-07-02T03:00:00.100")
    assert not any(isinstance(note, Caution) or "Etc/GMT+5" in note for note in utc.notes)


def test_two_numbers_the_second_under_20_percent_above_the_first_are_a_quote(tmp_path: Path) -> None:
    path = tmp_path / "usdtry_reopen.csv"  # no vendor's name: the general rule
    path.write_text(reopen_rows(lambda i: f"2024-01-07T22:00:{i:02d}Z"))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert all(t.kind == "quote" for t in ticks) and (ticks[0].bid, ticks[0].ask) == (31.776, 32.426)
    assert "(--csv-names time,bid,ask,column_4)" in replay.notes[0]


def test_a_price_and_a_size_far_apart_or_the_size_below_stay_a_trade(tmp_path: Path) -> None:
    for name, rows in (("far.csv", [(10.0, 13.0), (10.01, 12.5)] * 10),  # the size 25-30% above the price
                       ("below.csv", [(101.5, 97.0), (101.6, 95.0)] * 10)):  # the size a few % below it
        path = tmp_path / name
        path.write_text("".join(f"2024-01-02T09:30:{i:02d}Z,{a},{b},0\n" for i, (a, b) in enumerate(rows)))
        ticks = drain(FileReplay(path))
        assert all(t.kind == "trade" for t in ticks) and (ticks[0].price, ticks[0].size) == rows[0]


def deals(tmp_path: Path, name: str, sizes: tuple[str, ...]) -> Path:
    """USD/JPY deals: a price of 3 decimals moving a pip at a time, a size from `sizes` just above it (~6%)."""
    path = tmp_path / name
    path.write_text("".join(f"2024-01-02 08:00:{i:02d}.{i * 7:03d},{141.234 + (i % 5) / 1000:.3f},{sizes[i % 4]}\n"
                            for i in range(40)))
    return path


def test_whole_sizes_just_above_a_decimal_price_are_a_trade_not_a_wide_quote(tmp_path: Path) -> None:
    replay = FileReplay(deals(tmp_path, "USDJPY_deals.csv", ("150", "145", "160", "155")))
    ticks = drain(replay)
    assert all(t.kind == "trade" for t in ticks) and (ticks[0].price, ticks[0].size) == (141.234, 150.0)
    assert "read as a time, a price and a size (the second number whole where the first is not" in replay.notes[0]
    assert "--csv-names time,bid,ask reads a quote" in replay.notes[0]
    assert "(--csv-names time,price,size)" in replay.notes[0]


def test_a_quote_over_1_percent_wide_on_most_rows_is_cautioned_with_the_trade_reading(tmp_path: Path) -> None:
    replay = FileReplay(deals(tmp_path, "USDJPY_wide.csv", ("150.5", "145.25", "160.5", "155.5")))
    ticks = drain(replay)
    assert all(t.kind == "quote" for t in ticks)  # decimal sizes: nothing tells them from an ask, so it says so
    cautions = [note for note in replay.notes if isinstance(note, Caution)]
    assert len(cautions) == 1 and "read as a quote, though most of its first rows are over 1% wide" in cautions[0]
    assert "--csv-names time,price,size reads them so" in cautions[0]
    reopen = tmp_path / "usdtry_reopen.csv"  # the exotic's 2% reopen is still a quote, cautioned the same way
    reopen.write_text(reopen_rows(lambda i: f"2024-01-07T22:00:{i:02d}Z"))
    replay = FileReplay(reopen)
    drain(replay)
    assert any(isinstance(note, Caution) and "time,price,size,column_4" in note for note in replay.notes)


def near_deals(tmp_path: Path, name: str, first: float) -> Path:
    """Deals of 150 lots at a price of 3 decimals from `first` up a pip or two at a time: within 1% of the size."""
    path = tmp_path / name
    path.write_text("".join(f"2024-01-02T09:30:{i:02d}Z,{first + 0.017 * i:.3f},150\n" for i in range(20)))
    return path


def test_whole_sizes_within_1_percent_of_the_price_on_both_sides_of_it_are_a_trade(tmp_path: Path) -> None:
    """150 lots at 149.912 to 150.235 were read as quotes (ask first, as most rows have the second below): within
    1%, nothing told the size from a quote's other side. A size below its price on some rows, above on others,
    is no quote's side, which keeps its order."""
    replay = FileReplay(near_deals(tmp_path, "USDJPY_deals.csv", 149.912))
    ticks = drain(replay)
    assert len(ticks) == 20 and all(t.kind == "trade" for t in ticks)
    assert (ticks[0].price, ticks[0].size, ticks[-1].price) == (149.912, 150.0, 150.235)
    assert "the second number whole where the first is not, and below it on 14 of the first 20 rows, above it " \
           "on 6: a size near its price, not a quote's other side" in replay.notes[0]
    assert "--csv-names time,bid,ask reads a quote" in replay.notes[0] and not replay.cautions


def test_whole_sizes_within_1_percent_above_the_price_are_a_quote_with_a_caution(tmp_path: Path) -> None:
    """All below the size (149.412 to 149.735 beside 150), a trade's price and size and a half-tick quote's
    sides (bid X.5, ask X+1) look alike but for the size holding still: read as a quote, cautioned; the half-tick
    quote, whose ask moves with its bid, gets no caution."""
    replay = FileReplay(near_deals(tmp_path, "USDJPY_below.csv", 149.412))
    assert all(t.kind == "quote" for t in drain(replay))
    assert replay.cautions == [
        "USDJPY_below.csv: read as a quote, though on most of its first rows the second number is written whole "
        "where the first has decimals, and it takes 1 value to the first's 20: a size holding still beside a moving "
        "price looks so; if its two numbers are a trade's price and size, --csv-names time,price,size reads them so"]
    half = tmp_path / "half_ticks.csv"
    half.write_text("".join(f"2024-01-02T09:30:{i:02d}Z,{100 + i // 4}.5,{101 + i // 4}\n" for i in range(20)))
    quotes = FileReplay(half)
    ticks = drain(quotes)
    assert all(t.kind == "quote" for t in ticks) and (ticks[0].bid, ticks[0].ask) == (100.5, 101.0)
    assert not quotes.cautions


def test_a_tight_quote_file_gets_no_spread_caution(tmp_path: Path) -> None:
    path = tmp_path / "eurusd.csv"
    path.write_text("".join(f"2024-01-02T09:30:{i:02d}Z,{1.08412 + i / 1e5:.5f},{1.08414 + i / 1e5:.5f}\n"
                            for i in range(30)))
    replay = FileReplay(path)
    assert all(t.kind == "quote" for t in drain(replay))
    assert not any(isinstance(note, Caution) for note in replay.notes)


def test_histdata_minute_bars_and_ticks_read_the_same_written_time_as_the_same_instant(tmp_path: Path) -> None:
    """HistData documents both its M1 bars and its ticks in EST without summer time: bars were read as UTC, 5 h
    off the ticks of the same pair and month."""
    ticks = tmp_path / "DAT_ASCII_EURUSD_T_202403.csv"
    ticks.write_text("".join(f"20240308 1601{i:02d}000,1.0841{i % 10},1.0842{i % 10},0\n" for i in range(30)))
    bars = tmp_path / "DAT_ASCII_EURUSD_M1_202403.csv"
    bars.write_text("".join(f"20240308 16{i + 1:02d}00;1.084120;1.084240;1.084030;1.084150;0\n" for i in range(30)))
    yearly = tmp_path / "DAT_ASCII_EURUSD_M1_2024.csv"  # a past year's file: one per year
    yearly.write_text(bars.read_text())
    read = {path.name: FileReplay(path) for path in (ticks, bars, yearly)}
    first = {name: drain(replay)[0] for name, replay in read.items()}
    assert {t.ts for t in first.values()} == {utc_ns("2024-03-08T21:01:00")}  # 16:01 EST
    assert first[bars.name].kind == "trade" and first[bars.name].price == 1.08415
    for name in (bars.name, yearly.name):
        notes = read[name].notes
        assert "read as HistData's minute bars, as its file name says" in notes[0]
        assert any("its times read in Etc/GMT+5 (EST all year, no summer time)" in note for note in notes)
        assert not any("read as UTC" in note for note in notes)
    summer = FileReplay(bars, columns={"tz": "America/New_York"})  # as for its ticks: --tz wins, with a caution
    assert drain(summer)[0].ts == utc_ns("2024-03-08T21:01:00")  # EST until 10 March: the same here
    assert any(isinstance(note, Caution) and "HistData writes its times in EST all year" in note
               for note in summer.notes)


def test_histdata_metatrader_and_ninjatrader_minute_bars_are_read_in_its_zone_too(tmp_path: Path) -> None:
    """HistData's MetaTrader export (`2024.03.08,16:01,...`: date and time in two columns) was refused, its
    NinjaTrader export (the generic ASCII layout) read as UTC: HistData documents both in EST all year."""
    bar = "1.084120{0}1.084240{0}1.084030{0}1.084150{0}0\n"
    mt = tmp_path / "DAT_MT_EURUSD_M1_2024.csv"
    mt.write_text("".join(f"2024.03.08,16:{i + 1:02d},{bar.format(',')}" for i in range(30)))
    nt = tmp_path / "DAT_NT_EURUSD_M1_202403.csv"
    nt.write_text("".join(f"20240308 16{i + 1:02d}00;{bar.format(';')}" for i in range(30)))
    read = {path.name: FileReplay(path) for path in (mt, nt)}
    for name, replay in read.items():
        first = drain(replay)[0]
        assert (first.ts, first.kind, first.price) == (utc_ns("2024-03-08T21:01:00"), "trade", 1.08415)  # 16:01 EST
        assert "read as HistData's minute bars, as its file name says" in replay.notes[0]
        assert any("its times read in Etc/GMT+5 (EST all year, no summer time)" in note for note in replay.notes)
    assert "(--csv-names date,time,open,high,low,close,volume): ts=date+time" in read[mt.name].notes[0]
    summer = FileReplay(mt, columns={"tz": "America/New_York"})  # --tz wins, with the caution ticks get
    assert drain(summer)[0].ts == utc_ns("2024-03-08T21:01:00")
    assert any(isinstance(note, Caution) and "HistData writes its times in EST all year" in note
               for note in summer.notes)
    # MetaTrader's own export, not named as HistData's: the same layout, its times read as UTC with the usual note
    assert_own_export_read_as_utc(tmp_path / "EURUSD1.csv", mt, "MetaTrader bars: a date, a time and a bar's open")


def assert_own_export_read_as_utc(own: Path, histdata_file: Path, layout: str) -> None:
    """A platform's own bar export, in the layout of HistData's `histdata_file` but not named as HistData's:
    read as `layout` says, its times as UTC with the usual note."""
    own.write_text(histdata_file.read_text().replace(",0\n", ",12\n"))
    replay = FileReplay(own)
    assert drain(replay)[0].ts == utc_ns("2024-03-08T16:01:00")
    assert f"read as {layout}" in replay.notes[0]
    assert any("carry no UTC offset and are read as UTC" in note for note in replay.notes)


def test_histdata_metastock_bars_and_ninjatrader_ticks_are_read_in_its_zone_by_one_name_rule(tmp_path: Path) -> None:
    """HistData's MetaStock M1 export (`EURUSD,202403081601,...`) was refused, its NinjaTrader last prices
    (`20240308 160100;1.084150;0`) read as UTC, and its NinjaTrader bid and ask files as trades in UTC: HistData
    documents every export in EST all year (histdata.com/?p=21). Its one-side files are NinjaTrader's `.Bid.txt`
    shape, refused as those are, naming the files that carry both sides and the zone a full map needs."""
    bar = "1.084120,1.084240,1.084030,1.084150,0\n"
    ms = tmp_path / "DAT_MS_EURUSD_M1_2024.csv"
    ms.write_text("".join(f"EURUSD,2024030816{i + 1:02d},{bar}" for i in range(30)))
    last = tmp_path / "DAT_NT_EURUSD_T_LAST_202403.csv"
    last.write_text("".join(f"20240308 1601{i:02d};{1.08415 + (i % 5) / 10**5:.6f};0\n" for i in range(30)))
    for path, kind in ((ms, "minute bars"), (last, "last prices")):
        replay = FileReplay(path)
        first = drain(replay)[0]
        assert (first.ts, first.kind, first.price, first.stream) == (
            utc_ns("2024-03-08T21:01:00"), "trade", 1.08415, "EURUSD")  # 16:01 EST
        assert f"read as HistData's {kind}, as its file name says" in replay.notes[0]
        assert any("its times read in Etc/GMT+5 (EST all year, no summer time)" in note for note in replay.notes)
    assert "(--csv-names symbol,time,open,high,low,close,volume): ts=time (datetime, %Y%m%d%H%M, Etc/GMT+5), " \
           "stream=symbol" in FileReplay(ms).notes[0]
    summer = FileReplay(last, columns={"tz": "America/New_York"})  # --tz wins, with the caution the others get
    assert drain(summer)[0].ts == utc_ns("2024-03-08T21:01:00")
    assert any(isinstance(note, Caution) and "HistData writes its times in EST all year" in note
               for note in summer.notes)
    for side in ("BID", "ASK"):
        one = tmp_path / f"DAT_NT_EURUSD_T_{side}_202403.csv"
        one.write_text(last.read_text())
        with pytest.raises(ValueError) as refused:
            FileReplay(one)
        assert f"a NinjaTrader export of the best {side.lower()} alone" in str(refused.value)
        assert "Replay HistData's DAT_ASCII_EURUSD_T_202403.csv instead" in str(refused.value)
        assert "with --tz Etc/GMT+5" in str(refused.value)
        given = ColumnMap(ts="time", ts_unit="auto", names=("time", "price", "size"), price="price", size="size",
                          tz="Etc/GMT+5")
        assert drain(FileReplay(one, columns=given))[0].ts == utc_ns("2024-03-08T21:01:00")  # what it names
    assert_own_export_read_as_utc(tmp_path / "EURUSD_M1.csv", ms, "MetaStock bars: a symbol, a time (YYYYMMDDHHMM)")


def test_each_header_less_bar_layout_names_its_own_stamp(tmp_path: Path) -> None:
    """Every header-less bar layout's note said "NinjaTrader stamps a bar with its end ..., HistData, whose M1 files
    share this layout, with its start", MetaTrader's (`2024.03.08,16:01,...`) and MetaStock's (`EURUSD,202403081601,
    ...`) too, which NinjaTrader never writes. Each layout now names the platforms that write it, and a file named as
    HistData's (its DAT_NT_/DAT_ASCII_, DAT_MT_ and DAT_MS_ exports, all stamped with the bar's start) says so."""
    bar = "1.084120,1.084240,1.084030,1.084150,{volume}\n"
    rows = {"mt": [f"2024.03.08,16:{i + 1:02d},{bar}" for i in range(30)],
            "ms": [f"EURUSD,2024030816{i + 1:02d},{bar}" for i in range(30)],
            "nt": [f"20240308 16{i + 1:02d}00,{bar}" for i in range(30)]}

    EARLY = "its close shows a bar early: --columns bar_stamp=close stamps it at its close"  # noqa: N806

    def stamp(name: str, shape: str, volume: int) -> str:
        path = tmp_path / name
        path.write_text("".join(row.format(volume=volume) for row in rows[shape]))
        said = next(note for note in FileReplay(path).notes if "read as bars" in note)
        return said.split("column; ")[1].split("; a bar of")[0]

    for name, shape in (("DAT_MT_EURUSD_M1_2024.csv", "mt"), ("DAT_MS_EURUSD_M1_2024.csv", "ms"),
                        ("DAT_NT_EURUSD_M1_202403.csv", "nt"), ("DAT_ASCII_EURUSD_M1_2024.csv", "nt")):
        assert stamp(name, shape, 0) == f"HistData stamps a bar with its start ({EARLY})"
    assert stamp("EURUSD1.csv", "mt", 12) == \
        f"MetaTrader and Kibot stamp a bar with its start, as HistData's MetaTrader files do ({EARLY})"
    assert stamp("EURUSD_M1.csv", "ms", 12) == \
        f"HistData's MetaStock files, whose layout this is, stamp a bar with its start ({EARLY})"
    assert stamp("ES.Last.txt", "nt", 12) == "NinjaTrader stamps a bar with its end (its close shows when it was " \
                                             "known), HistData's M1 files in this layout with its start (its close " \
                                             "shows a bar early: --columns bar_stamp=close stamps it at its close)"
    assert not any("NinjaTrader" in stamp(name, shape, 12) for name, shape in (("a.csv", "mt"), ("b.csv", "ms")))


def test_a_histdata_tick_file_renamed_is_known_by_its_rows_and_read_in_est(tmp_path: Path) -> None:
    """review379 #6: `eurusd_jan2024.csv`, HistData's ASCII ticks under the user's name, was read as UTC (5 h off)."""
    path = tmp_path / "eurusd_jan2024.csv"
    path.write_bytes(b"20240105 150002837,1.094310,1.094330,0\n20240105 150003112,1.094320,1.094330,0\n"
                     b"20240105 150004950,1.094300,1.094320,0\n")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.kind, t.bid, t.ask) for t in ticks[:1]] == [("quote", 1.09431, 1.09433)] and len(ticks) == 3
    assert ticks[0].ts == utc_ns("2024-01-05T20:00:02.837")  # 15:00 EST, as the original DAT_ASCII_ file reads
    assert "read as HistData's tick layout, by its rows' shape" in replay.notes[0]
    assert "(--tz UTC, or their zone, if they are not HistData's)" in replay.notes[0]
    assert any("its times read in Etc/GMT+5 (EST all year, no summer time)" in note for note in replay.notes)
    as_utc = FileReplay(path, columns={"tz": "UTC"})
    assert drain(as_utc)[0].ts == utc_ns("2024-01-05T15:00:02.837")  # the override the note names


def test_the_histdata_time_shape_with_a_nonzero_last_column_is_no_histdata_file(tmp_path: Path) -> None:
    path = tmp_path / "quotes_with_volume.csv"
    path.write_bytes(b"20240105 150002837,1.094310,1.094330,5\n20240105 150003112,1.094320,1.094330,0\n")
    with pytest.raises(ValueError) as refused:  # a third number that is not 0: no layout the guess knows
        FileReplay(path)
    assert "its layout cannot be guessed" in str(refused.value) and "HistData" not in str(refused.value)
