"""FX files as a black-box reviewer from an FX desk found them misread (review 114): several liquidity providers'
quotes merged into one stream without a word, and the dukascopy preset naming any file's ticks EURUSD. Every
fixture is written here, from code, into tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.quoting import quoted

from connectors.replay import FileReplay
from conftest import drain

# three providers' EURUSD quotes, each a few tenths of a pip from the others
PROVIDER_OFFSETS = {"LP1": 0.0, "LP2": 0.00003, "LP3": -0.00002}


def provider_quotes(path: Path, column: str, providers: list[str]) -> Path:
    rows = []
    for i in range(30):
        provider = providers[i % len(providers)]
        bid = 1.09200 + 0.00001 * (i % 4) + PROVIDER_OFFSETS.get(provider, 0.0)
        rows.append(f"2024-01-03T09:00:{i:02d}.154Z,EURUSD,{provider},{bid:.5f},{bid + 0.00004:.5f},1000000,1000000\n")
    path.write_text(f"timestamp,symbol,{column},bid,ask,bid_size,ask_size\n" + "".join(rows))
    return path


@pytest.mark.parametrize("column", ["lp", "liquidity_provider", "provider", "LP Name", "bank", "ecn", "source",
                                    "maker"])
def test_a_liquidity_provider_column_gets_the_note_a_venue_column_gets(tmp_path: Path, column: str) -> None:
    path = provider_quotes(tmp_path / "eurusd_lp_quotes.csv", column, ["LP1", "LP2", "LP3"])
    replay = FileReplay(path)
    assert {t.stream for t in drain(replay)} == {"EURUSD"}
    said = next(n for n in replay.notes if "each stream mixes them" in n)
    assert f"column {quoted(column)} holds 3 venues (LP1, LP2, LP3)" in said and "liquidity providers" in said
    assert f"--columns stream={column}+symbol" in said
    # the map the note gives: a stream per provider
    per_provider = FileReplay(path, columns={"stream_col": f"{column}+symbol"})
    assert {t.stream for t in drain(per_provider)} == {"LP1 EURUSD", "LP2 EURUSD", "LP3 EURUSD"}


def test_a_provider_named_column_of_flags_or_sides_is_no_venue(tmp_path: Path) -> None:
    # review 115 (finding 13): `maker` of buyer/seller says whose order rested (a side), not who quoted
    for column, values in (("maker", ["true", "false"]), ("maker", ["buy", "sell"]), ("source", ["1", "0"]),
                           ("maker", ["buyer", "seller"]), ("maker", ["Buyer", "Seller"]), ("maker", ["B", "S"]),
                           ("maker", ["True", "False"])):
        replay = FileReplay(provider_quotes(tmp_path / f"eurusd_{column}.csv", column, values))
        drain(replay)
        assert not any("each stream mixes them" in n for n in replay.notes), (column, values)


def maker_trades(path: Path, column: str, makers: list[str]) -> Path:
    rows = "".join(f"2024-01-03T09:00:{i:02d}.154Z,BTCUSD,{42000 + i % 5},0.5,{makers[i % len(makers)]}\n"
                   for i in range(20))
    path.write_text(f"timestamp,symbol,price,size,{column}\n" + rows)
    return path


@pytest.mark.parametrize(("column", "makers"), [("maker", ["buyer", "seller"]), ("Maker", ["Buyer", "Seller"]),
                                                ("maker_side", ["B", "S"]), ("maker", ["b", "s", ""])])
def test_a_maker_column_of_buyer_or_seller_gives_the_aggressors_side(tmp_path: Path, column: str,
                                                                     makers: list[str]) -> None:
    # the buyer's order rested (maker buyer, or b): the seller aggressed; an empty cell is a trade of no side
    replay = FileReplay(maker_trades(tmp_path / "btcusd_trades.csv", column, makers))
    ticks = drain(replay)
    flipped = {"buyer": "sell", "seller": "buy", "b": "sell", "s": "buy", "": None}
    assert [t.side for t in ticks] == [flipped[makers[i % len(makers)].lower()] for i in range(20)]
    said = next(n for n in replay.notes if "no column map given" in n)
    assert f"side={column} (the maker's role, read flipped: buyer = sell, seller = buy)" in said
    assert not any("each stream mixes them" in n for n in replay.notes)


@pytest.mark.parametrize(("column", "makers"), [("maker_side", ["buy", "sell"]), ("Maker", ["Sell", "Buy", ""])])
def test_a_maker_column_of_buy_or_sell_is_the_makers_side_read_flipped(tmp_path: Path, column: str,
                                                                       makers: list[str]) -> None:
    # fix160: Coinbase's `maker_side` of buy/sell is the resting order's side: a maker sell means the taker bought
    replay = FileReplay(maker_trades(tmp_path / "btcusd_trades.csv", column, makers))
    ticks = drain(replay)
    flipped = {"buy": "sell", "sell": "buy", "": None}
    assert [t.side for t in ticks] == [flipped[makers[i % len(makers)].lower()] for i in range(20)]
    said = next(n for n in replay.notes if "no column map given" in n)
    assert f"side={column} (the maker's side, read flipped: buy = sell, sell = buy)" in said


def test_a_maker_column_in_a_quotes_file_is_left_unread(tmp_path: Path) -> None:
    # a quote has no aggressor: a `maker` of buy/sell beside bid and ask is no side of anything, and no venue
    replay = FileReplay(provider_quotes(tmp_path / "eurusd_quotes.csv", "maker", ["buy", "sell"]))
    ticks = drain(replay)
    assert {t.kind for t in ticks} == {"quote"} and {t.side for t in ticks} == {None}
    assert not any("maker" in n for n in replay.notes), replay.notes


def test_a_maker_column_of_other_values_is_read_as_before(tmp_path: Path) -> None:
    # liquidity providers' names under `maker` are no side: no side read, the venue note as before
    replay = FileReplay(maker_trades(tmp_path / "btcusd_lp.csv", "maker", ["LP1", "LP2"]))
    assert {t.side for t in drain(replay)} == {None}
    assert any('column "maker" holds 2 venues (LP1, LP2)' in n for n in replay.notes)
    assert not any("side=maker" in n for n in replay.notes)


def test_a_tapes_exchange_codes_are_said_as_each_venues_own_quotes_and_a_providers_short_codes_as_providers(
        tmp_path: Path) -> None:
    # a tape's prints are one market's (test_vendor_files_row_meanings), but its quotes are each venue's own, no NBBO
    tape = FileReplay(provider_quotes(tmp_path / "eurusd_ex.csv", "exchange", ["N", "Q", "P"]))
    drain(tape)
    said = next(n for n in tape.notes if "each stream mixes them" in n)
    assert "its quotes are each venue's own" in said and "liquidity providers" not in said
    banks = FileReplay(provider_quotes(tmp_path / "eurusd_bank.csv", "bank", ["GS", "DB", "JP"]))
    drain(banks)
    assert any('column "bank" holds 3 venues (DB, GS, JP)' in n for n in banks.notes)


DUKASCOPY_EXPORT = "Gmt time,Ask,Bid,AskVolume,BidVolume\n" + "".join(
    f"02.01.2024 00:00:{i:02d}.142,141.25{i % 3},141.24{i % 3},1.5,2.25\n" for i in range(5))


def test_the_dukascopy_preset_names_a_file_of_no_symbol_by_its_name_never_eurusd(tmp_path: Path) -> None:
    path = tmp_path / "ticks_export.csv"  # a USDJPY export saved under a name of one's own
    path.write_text(DUKASCOPY_EXPORT)
    replay = FileReplay(path, columns="dukascopy")
    ticks = drain(replay)
    assert {t.stream for t in ticks} == {"ticks_export"} and ticks[0].bid == 141.24
    assert any("stream ticks_export, the file's name" in n and "--columns stream_name=" in n for n in replay.notes)
    assert not any("EURUSD" in n or "stream_name=None" in n for n in replay.notes)
    # a name that holds the pair names the stream, as detection does; stream_name= names it whatever the file
    named = tmp_path / "USDJPY_Ticks_02.01.2024-02.01.2024.csv"
    named.write_text(DUKASCOPY_EXPORT)
    assert {t.stream for t in drain(FileReplay(named, columns="dukascopy"))} == {"USDJPY"}
    given = FileReplay(path, columns={"preset": "dukascopy", "stream": "USDJPY.DUKA"})
    assert {t.stream for t in drain(given)} == {"USDJPY.DUKA"}


@pytest.mark.parametrize("column", ["mid", "mid_price", "Midpoint", "MID RATE"])
def test_a_mid_only_feed_is_a_price_series_said_as_such(tmp_path: Path, column: str) -> None:
    """An FX or rates feed of mid prices alone (review150 finding 6) was refused, "no price (trades) nor bid and ask
    (quotes)": its mid is read as the price of size-1 trades, with a note that says so and what a model trained on
    trades and quotes makes of it. Beside a bid and an ask the mid is not read; with neither, still refused."""
    path = tmp_path / "usdjpy_mid.csv"
    path.write_text(f"time_utc,ccy_pair,{column}\n" + "".join(
        f"2024-06-03 00:00:{i:02d}.250,USD/JPY,{157.123 + 0.001 * (i % 3):.3f}\n" for i in range(6)))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.stream, t.kind, t.price, t.size) for t in ticks[:2]] == [("USD-JPY", "trade", 157.123, 1.0),
                                                                        ("USD-JPY", "trade", 157.124, 1.0)]
    assert (f"usdjpy_mid.csv: column {quoted(column)} read as the price of a series of trades of size 1: mid prices, "
            "with neither trades nor bid and ask beside them; a model trained on trades and quotes (the built-in one) "
            f"reads it as a feed of trades only, and answers worse on one (docs/model.md, \"A feed of trades only\")"
            ) in replay.notes
    assert not any("no size column" in note for note in replay.notes)
    quotes = tmp_path / "quotes.csv"
    quotes.write_text(f"time_utc,ccy_pair,bid,ask,{column}\n2024-06-03 00:00:01,USD/JPY,157.122,157.124,157.123\n")
    assert [(t.kind, t.bid, t.ask) for t in drain(FileReplay(quotes))] == [("quote", 157.122, 157.124)]
    neither = tmp_path / "neither.csv"
    neither.write_text("time_utc,ccy_pair,spread\n2024-06-03 00:00:01,USD/JPY,0.002\n")
    with pytest.raises(ValueError, match=r"no price \(trades\) nor bid and ask \(quotes\) among them"):
        FileReplay(neither)
