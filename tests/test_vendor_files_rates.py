"""Rates files as a fixed-income user brings them: Treasury futures in CME's 32nds (`110-16+`, `110'165`), which
read as decimals were rejected or read 1000 times too large (an apostrophe taken as Swiss thousands), cash
Treasuries quoted in yield, and a price offset for one stream of several. Every fixture is written here."""

from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain

HEADER = "timestamp,symbol,price,size\n"


def trades(path: Path, *prices: str, symbol: str = "ZNH6") -> Path:
    rows = "".join(f"2026-03-02T14:30:0{i}.000Z,{symbol},{price},1\n" for i, price in enumerate(prices))
    path.write_text(HEADER + rows)
    return path


def test_price_format_32nds_reads_every_cme_form_and_plain_decimals(tmp_path: Path) -> None:
    path = trades(tmp_path / "zn.csv", "110-16", "110-16+", "110-162", "110-165", "110-167", "110'165", "110'16",
                  "110.5", "-0-05+")
    replay = FileReplay(path, columns=map_from_options(price_format="32nds", detect=True))
    assert [t.price for t in drain(replay)] == [110.5, 110.515625, 110.5078125, 110.515625, 110.5234375,
                                               110.515625, 110.5, 110.5]  # -0-05+ is no price > 0: rejected
    assert dict(replay.rejected) == {"nonpositive_price": 1}
    assert "price_format=32nds" in replay.notes[0] and not replay.cautions
    # a quote's bid and ask too, from a Parquet file's text columns
    pl.DataFrame({"timestamp": ["2026-03-02T14:30:00Z"], "symbol": ["ZBH6"], "bid": ["117'31"],
                  "ask": ["118-00+"]}).write_parquet(tmp_path / "zb.parquet")
    quotes = FileReplay(tmp_path / "zb.parquet", columns={"price_format": "32nds"})
    assert [(t.bid, t.ask) for t in drain(quotes)] == [(117.96875, 118.015625)]


def test_price_format_32nds_reads_quarters_written_as_fractions_and_refuses_other_fractions(tmp_path: Path) -> None:
    """A 2-year note's screen writes `99-31 3/4` or `99-31¾` for 31.75/32: refused as no price before, as much a
    quarter of a 32nd as `99-317`; its eighths as `99-31 1/8` too. A fraction after `+`, no space before `3/4`, or
    a fraction of no 32nd's part (`2/4`) stay refused."""
    quarters = ["99-31 1/4", "99-31 1/2", "99-31 3/4", "99-31\u00bc", "99-31 \u00bd", "99'31\u00be", "99-31 1/8",
                "99-31 7/8"]
    refused = ["99-31 2/8", "99-31+ 1/4", "99-313/4", "99-31 2/4"]
    replay = FileReplay(trades(tmp_path / "tu.csv", *quarters, *refused, symbol="TUM6"),
                        columns={"price_format": "32nds"})
    assert [t.price for t in drain(replay)] == [99 + (31 + q) / 32 for q in (0.25, 0.5, 0.75, 0.25, 0.5, 0.75,
                                                                                0.125, 0.875)]
    assert dict(replay.rejected) == {"missing_field": 4}
    assert '"99-31 2/8" is not a number, nor a price in 32nds' in replay.rejected.examples["missing_field"]
    assert "a fraction 1/4, 1/2, 3/4 (\u00bc, \u00bd, \u00be)" in replay.rejected.examples["missing_field"]
    # without the key, a column of them is said to look like 32nds, as `99-317` is
    unread = FileReplay(trades(tmp_path / "tu2.csv", "99-31 3/4", "99-31\u00bc", symbol="TUM6"))
    assert not drain(unread) and '("99-31 3/4" is 99.9921875 in 32nds)' in unread.cautions[0]


def test_price_format_32nds_reads_a_whole_and_a_fraction_and_names_the_key_without_it(tmp_path: Path) -> None:
    """`110 16/32` and `110 31/64`, the plainest way to write a Treasury price, were neither read with
    --price-format 32nds nor pointed at it without (review441 #4). A numerator past its denominator stays refused."""
    path = trades(tmp_path / "zn.csv", "110 16/32", "110 31/64", "109 127/128", "-0 4/32", "110 40/32")
    replay = FileReplay(path, columns={"price_format": "32nds"})
    assert [t.price for t in drain(replay)] == [110.5, 110.484375, 109.9921875]
    assert dict(replay.rejected) == {"nonpositive_price": 1, "missing_field": 1}
    unread = FileReplay(path)
    assert not drain(unread) and '("110 16/32" is 110.5 in 32nds)' in unread.cautions[0]
    assert "give --price-format 32nds" in unread.cautions[0]


def test_price_format_32nds_reads_the_2_year_notes_eighths_of_a_32nd(tmp_path: Path) -> None:
    """ZT and Z3N tick in eighths of a 32nd, the third digit the part in thousandths cut to one digit: 1, 2, 3, 5,
    6, 7, 8 (review242: 51% of a ZT file's quotes were refused). Converted by hand: 104-161 = 104 + 16.125/32."""
    path = tmp_path / "zt.csv"
    path.write_text("timestamp,symbol,bid,ask\n2026-11-30T13:30:00Z,ZTH7,104-161,104-162\n"
                    "2026-11-30T13:30:01Z,ZTH7,104-163,104-165\n2026-11-30T13:30:02Z,ZTH7,104-166,104-167\n"
                    "2026-11-30T13:30:03Z,ZTH7,104-167,104-168\n2026-11-30T13:30:04Z,ZTH7,104-16,104'161\n")
    replay = FileReplay(path, columns={"price_format": "32nds"})
    assert [(t.bid, t.ask) for t in drain(replay)] == [
        (104.50390625, 104.5078125),   # 16.125/32, 16.25/32
        (104.51171875, 104.515625),    # 16.375/32, 16.5/32
        (104.51953125, 104.5234375),   # 16.625/32, 16.75/32
        (104.5234375, 104.52734375),   # 16.75/32, 16.875/32
        (104.5, 104.50390625)]         # 16/32, 16.125/32 with an apostrophe
    assert not replay.rejected and not replay.cautions


def test_a_malformed_price_in_32nds_is_rejected_by_its_row_with_the_forms_named(tmp_path: Path) -> None:
    path = trades(tmp_path / "zn.csv", "110-16", "110-33", "110'164", "110-1", "110-17")
    replay = FileReplay(path, columns={"price_format": "32nds"})
    assert [t.price for t in drain(replay)] == [110.5, 110.53125]
    assert dict(replay.rejected) == {"missing_field": 3}
    example = replay.rejected.examples["missing_field"]
    assert "zn.csv line 3: " in example and '"110-33" is not a number, nor a price in 32nds (HANDLE-32NDS' in example
    with pytest.raises(ValueError, match="price_format must be one of"):
        FileReplay(path, columns={"price_format": "64ths"})


def test_prices_that_look_like_32nds_without_the_key_are_a_caution_said_at_start_and_end(tmp_path: Path) -> None:
    """`110'165` read as Swiss thousands (110165) replayed 1000x too large with no note; a column mixing `117'03`
    (no number), `117'315` (117315) and `117.125` jumped 1000x inside one stream. Now each is a caution."""
    zn = FileReplay(trades(tmp_path / "zn.csv", "110'165", "110'160", "110'172"))
    assert [t.price for t in drain(zn)] == [110165.0, 110160.0, 110172.0]  # as read: the caution says so
    [caution] = zn.cautions
    assert caution == ("zn.csv: column \"price\" (3 cells) holds prices written like CME's 32nds of Treasury futures "
                       "(\"110'165\" is 110.515625 in 32nds); read as decimals, they are 1000 times too large "
                       "(\"110'165\" read as 110165: an apostrophe grouping thousands). If they are 32nds, give "
                       "--price-format 32nds (column-map key price_format: 32nds; docs/replay.md#prices-in-32nds); if "
                       "they are numbers grouped in thousands, price_format: decimal")
    # some cells 32nds for sure (`117'03`), others read 1000x: refused, not replayed on them (review242 finding 4)
    with pytest.raises(ValueError, match=r"zb.csv: column \"price\" holds prices in CME's 32nds of Treasury futures "
                                         r"\(\"117'03\" is 117.09375 in 32nds, and no number\), and 1 of its cells "
                                         r"would read as decimals 1000 times too large \(\"117'315\" as 117315\): "
                                         r"give --price-format 32nds"):
        FileReplay(trades(tmp_path / "zb.csv", "117'03", "117'315", "117.125", symbol="ZBH6"))
    zb = FileReplay(tmp_path / "zb.csv", columns={"price_format": "decimal"})  # said to be thousands: read so
    assert [t.price for t in drain(zb)] == [117315.0, 117.125]
    assert '"117\'03" is not a number' in zb.rejected.examples["missing_field"]
    dashes = FileReplay(trades(tmp_path / "dash.csv", "110-16+", "110-17"))
    assert not drain(dashes) and "they are no numbers (their rows rejected)" in dashes.cautions[0]
    # price_format: decimal says they are thousands: read so, nothing to caution
    decimal = FileReplay(tmp_path / "zn.csv", columns={"price_format": "decimal"})
    assert [t.price for t in drain(decimal)] == [110165.0, 110160.0, 110172.0] and not decimal.cautions


def test_a_quote_and_trade_row_whose_bid_and_price_do_not_read_names_the_bid_not_the_size(tmp_path: Path) -> None:
    """Review242 (finding 4): a row of bid `110'16`, ask `110'165`, price `110'16` and a size was rejected as
    "fields ['size'] not allowed in a quote", pointing at the size; the file then replayed at 110,165-level
    prices, exit 0. Now the file is refused naming --price-format 32nds, and a row whose bid does not read beside
    an ask that does names the bid and the option."""
    path = tmp_path / "zn.csv"
    path.write_text("timestamp,symbol,bid,ask,price,size\n2026-11-30T13:30:00.650Z,ZNH7,110'16,110'165,110'16,98\n"
                    "2026-11-30T13:30:01.284Z,ZNH7,110'165,110'17,110'17,10\n"
                    "2026-11-30T13:30:02.284Z,ZNH7,110'165,110'167,110'165,10\n")
    with pytest.raises(ValueError, match=r"zn.csv: column \"price\" holds prices in CME's 32nds .* give --price-format "
                                         r"32nds \(column-map key price_format: 32nds"):
        FileReplay(path)
    assert [(t.bid, t.ask) for t in drain(FileReplay(path, columns={"price_format": "32nds"})) if t.kind == "quote"] \
        == [(110.5, 110.515625), (110.515625, 110.53125), (110.515625, 110.5234375)]
    dashes = tmp_path / "zn_dash.csv"
    dashes.write_text("timestamp,symbol,bid,ask,price,size\n2026-11-30T13:30:00Z,ZNH7,110-16,110.5,110-16,98\n"
                      "2026-11-30T13:30:01Z,ZNH7,110.5,110.6,110.6,10\n")
    replay = FileReplay(dashes)
    assert [(t.kind, t.price, t.bid, t.ask) for t in drain(replay)] == [("quote", None, 110.5, 110.6),
                                                                        ("trade", 110.6, None, None)]
    assert dict(replay.rejected) == {"missing_field": 2}  # the row's quote (no bid) and its trade (no price)
    example = replay.rejected.examples["missing_field"]
    assert 'line 2: missing_field: field "bid" is required (column "bid": "110-16" is not a number; if it is a ' \
           "futures price in 32nds, give --price-format 32nds" in example, example
    assert "unknown_field" not in dict(replay.rejected)


def test_swiss_thousands_still_read_where_they_cannot_be_32nds(tmp_path: Path) -> None:
    path = tmp_path / "smi.csv"
    path.write_text("timestamp;symbol;price;size\n2026-03-02T09:00:00Z;SMI;12'034.50;1\n"
                    "2026-03-02T09:00:01Z;SMI;12'000;1\n2026-03-02T09:00:02Z;SMI;11'987;1\n")
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [12034.5, 12000.0, 11987.0]
    assert not replay.cautions  # 12'000 alone reads as 32nds too, beside numbers that cannot


def test_yield_named_columns_are_a_caution_and_their_crossed_quotes_say_why(tmp_path: Path) -> None:
    path = tmp_path / "ust10y.csv"
    path.write_text("timestamp,symbol,bid_yield,ask_yield\n2026-03-02T14:30:00Z,UST10Y,4.2150,4.2050\n")
    with pytest.raises(ValueError, match=r'"bid_yield", "ask_yield" are named as yields, which replay does not '
                                         r"read as prices \(a yield up is a price down\)"):
        FileReplay(path)
    mapped = map_from_options(columns="ts=timestamp,stream=symbol,bid=bid_yield,ask=ask_yield")
    replay = FileReplay(path, columns=mapped)
    assert not drain(replay) and dict(replay.rejected) == {"crossed_quote": 1}
    assert "a yield quote's bid is above its ask: convert yields to prices" in replay.rejected.examples[
        "crossed_quote"]
    assert replay.cautions == [
        "ust10y.csv: columns \"bid_yield\" and \"ask_yield\" are named as yields: replayed as prices, an answer's up "
        "means the yield went up (the bond's price down); a yield quote's bid is above its ask, so its quotes (1 "
        "here) are rejected as crossed_quote. Convert yields to prices to replay prices "
        "(docs/replay.md#yield-quoted-instruments)"]
    # the ask yield taken as the bid: no quote is crossed, so the caution says no rejects (it did, start and end)
    swapped = FileReplay(path, columns=map_from_options(
        columns="ts=timestamp,stream=symbol,bid=ask_yield,ask=bid_yield"))
    assert [(t.bid, t.ask) for t in drain(swapped)] == [(4.205, 4.215)] and not swapped.rejected
    assert "crossed_quote" not in swapped.cautions[0] and "an answer's up means the yield went up" in \
        swapped.cautions[0]
    camel = tmp_path / "camel.csv"  # BidYield is bid_yield (camel case was read as one word: no caution)
    camel.write_text("timestamp,symbol,BidYield,AskYield\n2026-03-02T14:30:00Z,UST10Y,4.2150,4.2050\n")
    with pytest.raises(ValueError, match=r'"BidYield", "AskYield" are named as yields'):
        FileReplay(camel)


def test_a_per_stream_price_offset_shifts_only_the_streams_it_names(tmp_path: Path, capsys) -> None:
    path = tmp_path / "cme.csv"
    path.write_text(HEADER + "2026-03-02T14:30:00Z,ZNH6,110.5,1\n2026-03-02T14:30:01Z,ZNH6-ZNM6,-0.171875,1\n"
                             "2026-03-02T14:30:02Z,6E/H6,1.085,1\n")
    columns = map_from_options(price_offset="ZNH6-ZNM6=10|6E/H6=1|ZBH6=2", detect=True)
    replay = FileReplay(path, columns=columns)
    assert [(t.stream, t.price) for t in drain(replay)] == [
        ("ZNH6", 110.5), ("ZNH6-ZNM6", 9.828125), ("6E-H6", 2.085)]  # a name's '/' is the stream's '-'
    assert "price_offset=ZNH6-ZNM6=10|6E-H6=1|ZBH6=2" in replay.notes[0]
    assert replay.found_notes == ['price_offset names stream(s) "ZBH6", which the files never hold: not shifted '
                                  "(their streams: 6E-H6, ZNH6, ZNH6-ZNM6)"]
    from engine.service.cli import main

    assert main(["feed", "replay", str(path), "--price-offset", "5", "--price-offset", "ZNH6-ZNM6=10"]) == 2
    assert "--price-offset is one number for every stream, or STREAM=X for each" in capsys.readouterr().err
    # one stream, two offsets (the last silently won): which was meant cannot be told
    for twice in ("ZNH6-ZNM6=10|ZNH6-ZNM6=20", {"ZNH6-ZNM6": 10, "ZNH6/ZNM6": 20}):
        with pytest.raises(ValueError, match='price_offset gives stream "ZNH6-ZNM6" two offsets, 10 and 20'):
            FileReplay(path, columns={"price_offset": twice})


def test_a_parquet_text_quote_in_32nds_is_named_by_its_text_not_as_an_empty_side(tmp_path: Path) -> None:
    """A Parquet file's text bid column holding `110-15+`: the reject said "empty, or not a number" and offered
    fill_quotes (for sides left empty); it quotes the cell and points to --price-format 32nds."""
    path = tmp_path / "znq.parquet"
    pl.DataFrame({"timestamp": ["2026-03-02T14:30:00Z", "2026-03-02T14:30:01Z"], "symbol": ["ZNH6"] * 2,
                  "bid_px": ["110-15+", "110-16"], "ask_px": ["110-16", "110-16+"], "bid_sz": [1.0, 1.0],
                  "ask_sz": [2.0, 2.0]}).write_parquet(path)
    replay = FileReplay(path)
    assert not drain(replay) and dict(replay.rejected) == {"missing_field": 2}
    example = replay.rejected.examples["missing_field"]
    assert '(column "bid_px": "110-15+" is not a number; if it is a futures price in 32nds, give --price-format ' \
           "32nds" in example and "fill_quotes" not in example, example
    assert [(t.bid, t.ask) for t in drain(FileReplay(path, columns={"price_format": "32nds"}))] == [
        (110.484375, 110.5), (110.5, 110.515625)]


def test_a_zero_side_of_a_spread_crossing_zero_names_the_offset_and_is_a_price_with_one(tmp_path: Path) -> None:
    """A calendar spread's quotes through zero: the 0.00 bid was rejected as a one-sided quote with no word of
    --price-offset, which the negative rows' reject named for the same cause. With an offset the 0 is a price."""
    path = tmp_path / "clspread_q.csv"
    path.write_text("timestamp,symbol,bid,ask\n2026-03-10T13:00:00Z,CLM6-N6,0.02,0.03\n"
                    "2026-03-10T13:00:01Z,CLM6-N6,0.00,0.01\n2026-03-10T13:00:02Z,CLM6-N6,-0.01,0.00\n"
                    "2026-03-10T13:00:03Z,CLM6-N6,-0.02,-0.01\n")
    plain = FileReplay(path)
    assert len(drain(plain)) == 1 and dict(plain.rejected) == {"missing_field": 1, "nonpositive_price": 2}
    assert plain.rejected.examples["missing_field"].endswith(  # its quotes lie near zero: named by the stream
        "a one-sided quote (no bid), which the engine does not take (a quote has both sides) (an option nobody bids, "
        "whose 0 bid is a price: --zero-bid price, or zero_bid: price in the column map) (column \"bid\"; CLM6-N6's "
        "other quotes lie within 10 price steps of zero (a spread), where 0 is a price, not a missing side: an offset "
        "(--price-offset) shifts them above zero, e.g. --price-offset 'CLM6-N6=1' (docs/replay.md))")
    assert "lift each stream above zero, --price-offset 'CLM6-N6=1'" in plain.rejected.examples["nonpositive_price"]
    shifted = FileReplay(path, columns=map_from_options(price_offset="1", detect=True))
    assert [(t.bid, t.ask) for t in drain(shifted)] == [(1.02, 1.03), (1.0, 1.01), (0.99, 1.0), (0.98, 0.99)]
    assert not shifted.rejected


def test_an_offset_too_small_says_the_price_read_the_shift_and_an_offset_that_would_do(tmp_path: Path) -> None:
    """CL at -37.63 with --price-offset 30: the reject said `got -0.019999999999999574` and to give an offset,
    one having been given. It says the price read, the offset, the shifted price and the offset needed."""
    path = tmp_path / "cl.csv"
    path.write_text(HEADER + "".join(f"2026-03-10T13:00:0{i}Z,{symbol},{price},1\n" for i, (symbol, price) in
                                     enumerate([("CLK0", 1.5), ("CLK0", -30.02), ("CLM6-N6", -31.5),
                                                ("CLK0", -37.63), ("CLK0", -35.0)])))
    replay = FileReplay(path, columns=map_from_options(price_offset="30", detect=True))
    assert [t.price for t in drain(replay)] == [31.5]
    assert dict(replay.rejected) == {"nonpositive_price": 4}
    assert replay.rejected.examples["nonpositive_price"] == (
        f"{path} line 3: nonpositive_price: price -30.02 shifted by the price offset 30 is -0.02, still not above "
        f'zero (column "price"); the lowest price in the files: CLK0 -37.63, CLM6-N6 -31.5: to lift them all above '
        f"zero, --price-offset 38 (docs/replay.md)")  # one number for all given: one number again
    per_stream = FileReplay(path, columns=map_from_options(price_offset="CLK0=30|CLM6-N6=40", detect=True))
    assert [t.price for t in drain(per_stream)] == [31.5, 8.5]
    assert per_stream.rejected.examples["nonpositive_price"].endswith(
        "the lowest price in the files: CLK0 -37.63: to lift each stream above zero, --price-offset 'CLK0=38' "
        "(docs/replay.md)")


def test_the_first_run_at_prices_below_zero_says_each_streams_lowest_and_the_offsets_to_paste(tmp_path: Path,
                                                                                           capsys) -> None:
    """Review 104: CL on 2020-04-20 (CLK0 to -37.63, a spread always below zero, one at 0.00 and -0.01) without an
    offset was told a generic `--price-offset X`; the lowest price of each stream and an offset per stream came
    only after a too-small offset had been tried. The first run says them, as options to paste, which replay it."""
    from engine.service.cli import main

    rows = [("CLK0", 1.5), ("CLK0-CLM0", -4.25), ("CLM0-CLN0", 0.0), ("CLK0", -37.63), ("CLM0-CLN0", -0.01),
            ("CLM0", 18.2), ("CLK0-CLM0", -57.03), ("CLK0", 0.01), ("CLM0", 18.3)]
    path = tmp_path / "cl.csv"
    path.write_text(HEADER + "".join(f"2020-04-20T18:00:0{i}Z,{symbol},{price},1\n"
                                     for i, (symbol, price) in enumerate(rows)))
    plain = FileReplay(path)
    assert len(drain(plain)) == 4 and dict(plain.rejected) == {"nonpositive_price": 5}
    options = "--price-offset 'CLK0-CLM0=58' --price-offset 'CLK0=38' --price-offset 'CLM0-CLN0=1'"
    assert plain.rejected.examples["nonpositive_price"] == (
        f'{path} line 3: nonpositive_price: price must be > 0, got -4.25 (column "price"); the files hold prices '
        f"below zero (a spread, a power market): an offset (--price-offset) shifts them above zero; the lowest price "
        f"in the files: CLK0-CLM0 -57.03, CLK0 -37.63, CLM0-CLN0 -0.01: to lift each stream above zero, {options} "
        f"(docs/replay.md)")
    out = tmp_path / "cl.parquet"
    # CLK0 crosses zero: its rows below it would leave holes, so the run is refused (zero_crossings.py), with the
    # offsets of every stream that needs one, CLK0's and the spreads' always below zero alike
    assert main(["backtest", str(path), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "error: stream CLK0 has prices on both sides of zero" in err, err
    assert f"to lift each stream above zero, {options} (docs/replay.md); or leave it out" in err, err
    assert not out.exists()
    assert main(["backtest", str(path), "--out", str(tmp_path / "shifted.parquet"), "--quiet",
                 *shlex.split(options)]) == 0  # pasted as printed
    said = capsys.readouterr().out
    assert said.startswith("replayed 9 ticks (0 rejected)"), said


def test_reject_lines_of_backtest_and_feed_replay_say_which_streams_lost_rows(tmp_path: Path, capsys) -> None:
    """A file of several contracts said "nonpositive_price: 4" with no word of which lost rows (CLK0 below zero,
    the spread beside it fine): each reason line names its streams, the most first."""
    from engine.service.cli import main

    # (CLK0 wholly below zero and ES's lone 0 print leave no stream with holes, which a backtest would refuse:
    # zero_crossings.py)
    rows = [("CLN0", 18.2), ("ESM6", 5000.25), ("CLK0", -1.5), ("CLK0", -2.5), ("ESM6", 0.0), ("CLK0", -3.5),
            ("ESM6", 5000.5), ("CLN0", 18.3)]
    path = tmp_path / "cl.csv"
    path.write_text(HEADER + "".join(f"2026-03-10T13:00:0{i}Z,{symbol},{price},1\n"
                                     for i, (symbol, price) in enumerate(rows)))
    assert main(["backtest", str(path), "--out", str(tmp_path / "a.parquet")]) == 0
    assert (f"rejected nonpositive_price: 4 (CLK0 3, ESM6 1; CLK0 lost every tick (none read); first: {path} line 4: "
            in capsys.readouterr().out)
    replay = FileReplay(path, streams=["CLK0"])
    drain(replay)
    assert replay.rejected.streams_of() == {"nonpositive_price": "CLK0 3", "filtered_out": "ESM6 3, CLN0 2"}
    # a file of one stream says no breakdown: its one name is no news
    one = FileReplay(trades(tmp_path / "one.csv", "1.5", "-1.5"))
    drain(one)
    assert dict(one.rejected) == {"nonpositive_price": 1} and one.rejected.streams_of() == {}
    # feed replay: rows refused before sending (nothing listens at the endpoint: every row is refused anyway)
    only_bad = tmp_path / "bad.csv"
    only_bad.write_text(HEADER + "".join(f"2026-03-10T13:00:0{i}Z,{symbol},-1,1\n"
                                         for i, symbol in enumerate(["A", "B", "A", "C", "D", "E", "A", "B"])))
    assert main(["feed", "replay", str(only_bad), "--endpoint", "tcp://127.0.0.1:5", "--control", ""]) == 2
    assert "rejected nonpositive_price: 8 (A 3, B 2, C 1, 2 in 2 other streams; first: " in capsys.readouterr().err


def test_reject_lines_say_the_rows_that_named_no_stream_so_the_counts_add_up(tmp_path: Path, capsys) -> None:
    """A quote with a side at 0 is refused (missing_field) before its stream is checked: one whose symbol cell is
    empty too named no stream, and "missing_field: 5 (A 2, B 1; ...)" added up to 3. The rest is said."""
    from engine.service.cli import main

    def quotes(name: str, rows: list[tuple[str, float, float]]) -> Path:
        path = tmp_path / name
        path.write_text("timestamp,symbol,bid,ask,bid_size,ask_size\n" + "".join(
            f"2026-03-10T13:00:0{i}Z,{symbol},{bid},{ask},1,1\n" for i, (symbol, bid, ask) in enumerate(rows)))
        return path

    refused = [("A", 0, 10.5), ("B", 0, 20.5), ("", 0, 10.5), ("", 0, 10.5), ("A", 10.0, 0)]
    path = quotes("quotes.csv", refused[:4] + [("A", 10.0, 10.5), ("B", 20.0, 20.5)] + refused[4:])
    replay = FileReplay(path)
    drain(replay)
    assert dict(replay.rejected) == {"missing_field": 5}
    assert replay.rejected.streams_of() == {"missing_field": "A 2, B 1 and 2 rows with no stream"}
    said = "rejected missing_field: 5 (A 2, B 1 and 2 rows with no stream; first: "
    assert main(["backtest", str(path), "--out", str(tmp_path / "a.parquet")]) == 0
    assert said in capsys.readouterr().out
    # feed replay: rows refused before sending (nothing listens at the endpoint: every row is refused anyway)
    only_refused = quotes("refused.csv", refused)
    assert main(["feed", "replay", str(only_refused), "--endpoint", "tcp://127.0.0.1:5", "--control", ""]) == 2
    assert said in capsys.readouterr().err


def test_a_checkpoint_records_the_price_offset_it_was_trained_with_and_evaluate_reads_with_it(
        tmp_path: Path, capsys) -> None:
    """`train cl.csv --price-offset CLK0=50` then `evaluate m cl.csv` read the file unshifted: it dropped the
    rows below zero and cut other parts, in silence. The checkpoint records the option; evaluate reads with it,
    saying so, as does a backtest of the same file; an explicit other one is said as a mismatch."""
    import json

    from engine.service.cli import main
    from test_stream_selection import TINY

    # crosses zero, as CL did; 1,000 ticks (3,000 before): above the 757 that train's default split needs of a
    # stream, ~400 of them at or below zero
    walk = 2 * np.sin(np.arange(1000) / 150) + 0.5
    path = tmp_path / "cl.csv"
    path.write_text("ts_ns,symbol,price,size\n" + "".join(
        f"{1773147600_000_000_000 + i * 200_000_000},CLK0,{price:.2f},1\n" for i, price in enumerate(walk)))
    assert (walk <= 0).sum() > 100  # enough rows for unshifted reading to lose them visibly
    out = tmp_path / "m"
    assert main(["train", str(path), "--out", str(out), *TINY, "--steps", "1", "--batch", "1", "--max-points",
                 "64", "--resamples", "10", "--quiet", "--json", "--price-offset", "CLK0=50"]) == 0
    assert json.loads(capsys.readouterr().out)["reading"] == {"price_offset": "CLK0=50"}
    evaluate = ["evaluate", str(out), str(path), "--max-points", "64", "--resamples", "10", "--threads", "1"]
    assert main([*evaluate, "--json"]) == 0
    out_json, err = capsys.readouterr()
    assert "note: reading the files with --price-offset CLK0=50, as this model was trained" in err
    assert "nonpositive_price" not in json.loads(out_json)["rejected"] and "mismatch" not in err
    assert main([*evaluate, "--json", "--price-offset", "30"]) == 0
    assert ("note: this model was trained on files read with --price-offset CLK0=50; these files are read with "
            "--price-offset 30: prices read otherwise") in capsys.readouterr().err
    # a backtest of the training file reads it as trained; another offset given is said as a mismatch
    assert main(["backtest", str(path), "--model", str(out), "--out", str(tmp_path / "a.parquet"),
                 "--max-ticks", "20"]) == 0
    err = capsys.readouterr().err
    assert "flashtick backtest: note: reading the files with --price-offset CLK0=50, as this model was trained" in err
    assert "trained on files read with" not in err
    assert main(["backtest", str(path), "--model", str(out), "--out", str(tmp_path / "b.parquet"),
                 "--max-ticks", "20", "--price-offset", "30"]) == 0
    assert ("flashtick backtest: note: this model was trained on files read with --price-offset CLK0=50; these "
            "files are read with --price-offset 30") in capsys.readouterr().err
