"""Prediction-market files as a data engineer brought them (review248): Kalshi's market snapshots (a last price and
the day's running volume every 15 s) and contracts that settle at 0. Every fixture is written here, from code,
into tmp_path."""

from __future__ import annotations

import shlex
from pathlib import Path

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain

KALSHI = "KXFEDDECISION-24DEC-H0"


def kalshi_snapshots(rows: int = 90) -> str:
    """A snapshot every 15 s; a trade (volume up by 7) after every third one only."""
    lines = ["ticker,ts,yes_bid,yes_ask,no_bid,no_ask,last_price,volume,open_interest\n"]
    for i in range(rows):
        bid, volume = 40 + i % 5, 11 + 7 * (i // 3)
        lines.append(f"{KALSHI},2024-11-05T14:{i // 4:02d}:{i % 4 * 15:02d}Z,{bid},{bid + 1},{99 - bid},{100 - bid},"
                     f"{bid + i // 3 % 2},{volume},{5000 + volume}\n")
    return "".join(lines)


def test_a_running_total_volume_is_said_with_the_map_that_reads_the_quotes(tmp_path: Path) -> None:
    """Review248 #3: a snapshot file read as price=last_price, size=volume replayed every snapshot as a trade sized
    by the day's running total, two thirds of them after no new trade, with yes_bid/yes_ask unread and unsaid. A size
    that never decreases is now a caution naming the quote columns and the map that reads them, which works."""
    path = tmp_path / "kalshi_snapshots.csv"
    path.write_text(kalshi_snapshots())
    replay = FileReplay(path)
    caution = next(n for n in replay.cautions if "running total" in n)
    assert 'column "volume", read as the size, never decreases within a stream (11 to 214 over 90 rows; 60 of ' \
           "them unchanged)" in caution, caution
    assert "its quote columns are not read (yes_bid, yes_ask, no_bid, no_ask)" in caution
    suggested = caution.split("To read the snapshots as quotes: ")[1].split(";")[0]
    assert suggested == "--columns ts=ts,stream=ticker,bid=yes_bid,ask=yes_ask"
    quotes = FileReplay(path, columns=map_from_options(columns=shlex.split(suggested)[1]))
    ticks = drain(quotes)
    assert len(ticks) == 90 and {(t.bid, t.ask) for t in ticks[:2]} == {(40.0, 41.0), (41.0, 42.0)}
    assert not any("running total" in n for n in quotes.notes)
    # trade sizes that rise and fall are no running total; nor is a total that resets each day (once) said less
    trades = tmp_path / "trades.csv"
    trades.write_text("ts,symbol,price,size\n" + "".join(
        f"2024-11-05T14:00:{i:02d}Z,X,{40 + i % 3},{(5, 9, 2, 7)[i % 4]}\n" for i in range(60)))
    assert not any("running total" in n for n in FileReplay(trades).notes)
    two_days = tmp_path / "two_days.csv"
    two_days.write_text(kalshi_snapshots() + "".join(kalshi_snapshots().replace("2024-11-05", "2024-11-06")
                                                     .splitlines(keepends=True)[1:]))
    assert any("never decreases within a stream" in n for n in FileReplay(two_days).cautions)


def test_a_snapshot_files_book_levels_are_its_quotes_and_the_caution_names_the_first(tmp_path: Path) -> None:
    """review433 #2: A-share Level-1 snapshots' bid_price1..5/ask_price1..5 were no quote columns: unread, and the
    running-total caution suggested `bid=BID,ask=ASK`. The first level is read as the quote; a map of trades alone
    gets the caution naming it."""
    path = tmp_path / "ashare_l1.csv"
    path.write_text("code,time,last_price,volume,bid_price1,bid_price2,ask_price1,ask_price2,bid_volume1,ask_volume1\n"
                    + "".join(f"000001.SZ,2024-12-02T01:{30 + i // 60}:{i % 60:02d}Z,{11.5 + i % 2 * 0.01:.2f},"
                              f"{300 + 100 * (i // 3)},11.49,11.48,11.51,11.52,900,800\n" for i in range(90)))
    detected = FileReplay(path)
    quote = next(t for t in drain(detected) if t.bid is not None)
    assert (quote.bid, quote.ask, quote.bid_size, quote.ask_size) == (11.49, 11.51, 900, 800)
    trades_only = FileReplay(path, columns={"ts": "time", "stream_col": "code", "price": "last_price",
                                            "size": "volume"})
    for replay, unread in ((detected, "bid_price2, ask_price2"), (trades_only, "bid_price1, bid_price2, ask_price1, "
                                                                               "ask_price2")):
        caution = next(n for n in replay.cautions if "running total" in n)
        assert f"its quote columns are not read ({unread})" in caution
        assert "To read the snapshots as quotes: --columns ts=time,stream=code,bid=bid_price1,ask=ask_price1;" \
            in caution, caution


def test_a_probability_priced_contract_settling_at_0_is_no_spread(tmp_path: Path) -> None:
    """Review248 #5: a Polymarket token trading at 0.01-0.30 and ending with a print at 0.0 (it resolved NO) was
    refused as 'a spread' whose 0 is a price, with the advice --price-offset 'TOKEN=1' (0.01-0.99 shifted to
    1.01-1.99, every bps answer measured against a level that does not exist). The reject now calls it a
    settlement, left out rightly, and advises no offset; a spread whose zeros trade between its prices still gets
    one."""
    rows = "".join(f"{1730815200000 + i * 7000},NO-TOKEN-71321,{(0.02, 0.03, 0.01, 0.04)[i % 4]},10,BUY\n"
                   for i in range(40))
    path = tmp_path / "poly_settle0.csv"
    path.write_text("timestamp,asset_id,price,size,side\n" + rows + "1730815480000,NO-TOKEN-71321,0.0,1000,SELL\n")
    replay = FileReplay(path, columns={"stream_col": "asset_id"})
    assert len(drain(replay)) == 40 and dict(replay.rejected) == {"nonpositive_price": 1}
    said = replay.rejected.examples["nonpositive_price"]
    assert "NO-TOKEN-71321's other trade prices all lie within 0 to 1 and this 0 comes after them" in said, said
    assert "settling at 0" in said and "a spread" not in said and "--price-offset '" not in said
    # the same prices with the 0 among them: a spread at zero, lifted by the offset as before
    spread = tmp_path / "spread.csv"
    lines = rows.splitlines(keepends=True)
    spread.write_text("timestamp,asset_id,price,size,side\n" + "".join(lines[:20]) +
                      "1730815336000,NO-TOKEN-71321,0.0,10,SELL\n" + "".join(lines[20:]))
    again = FileReplay(spread, columns={"stream_col": "asset_id"})
    drain(again)
    assert "(a spread)" in again.rejected.examples["nonpositive_price"]
    assert "--price-offset 'NO-TOKEN-71321=1'" in again.rejected.examples["nonpositive_price"]


def kalshi_trades(header: str, sides: tuple[str, str] = ("yes", "no")) -> str:
    """A Kalshi contract's trades in cents (1-4: it is resolving NO), then its settlement print at 0."""
    rows = "".join(f"2024-11-05T14:{i // 4:02d}:{i % 4 * 15:02d}Z,{KALSHI},{(2, 3, 1, 4)[i % 4]},10,"
                   f"{sides[i % 3 == 0]}\n" for i in range(40))
    return header + rows + f"2024-11-05T15:00:00Z,{KALSHI},0,1000,{sides[1]}\n"


def test_a_prediction_markets_cents_settling_at_0_is_no_spread(tmp_path: Path) -> None:
    """Prices in cents (Kalshi's 1-99) lie within [0, 100], which holds spreads quoted in points too: a contract
    trading at 1-4 cents and settling at 0 was told its 0 is a spread's price, with --price-offset 'KX...=1'. Where
    the file's columns (Kalshi's yes_price) or the map's side_map of yes / no say it is a prediction market, the 0 is
    its settlement and no offset is advised; the same cents under plain names and no such map keep the advice."""
    kalshi = tmp_path / "kalshi_trades.csv"
    kalshi.write_text(kalshi_trades("created_time,ticker,yes_price,count,taker_side\n"))
    by_columns = FileReplay(kalshi, columns={"ts": "created_time", "price": "yes_price", "size": "count",
                                             "stream_col": "ticker"})  # (no side map: Kalshi's column says it)
    plain = tmp_path / "trades.csv"
    plain.write_text(kalshi_trades("time,symbol,px,qty,side\n"))
    by_map = FileReplay(plain, columns={"ts": "time", "price": "px", "size": "qty", "stream_col": "symbol",
                                        "side": "side", "side_map": {"yes": "buy", "no": "sell"}})
    for replay in (by_columns, by_map):
        assert len(drain(replay)) == 40 and dict(replay.rejected) == {"nonpositive_price": 1}
        said = replay.rejected.examples["nonpositive_price"]
        assert f"{KALSHI}'s other trade prices all lie within 0 to 100 (a prediction market's cents) and this 0 " \
               f"comes after them" in said, said
        assert "settling at 0" in said and "a spread" not in said and "--price-offset '" not in said
    # the same cents as a spread's points: nothing says it is a contract, so its 0 is a price there
    points = tmp_path / "spread.csv"
    points.write_text(kalshi_trades("time,symbol,px,qty,side\n", sides=("buy", "sell")))
    spread = FileReplay(points, columns={"ts": "time", "price": "px", "size": "qty", "stream_col": "symbol",
                                         "side": "side"})
    drain(spread)
    assert "(a spread)" in spread.rejected.examples["nonpositive_price"]
    assert f"--price-offset '{KALSHI}=1'" in spread.rejected.examples["nonpositive_price"]


def test_kalshis_yes_no_taker_side_is_the_outcome_bought_under_an_inline_map(tmp_path: Path) -> None:
    """Review272 #5: Kalshi's trades under `--columns price=yes_price,size=count,stream_col=ticker` had detection
    add side=taker_side, whose yes/no were read as buy/sell words: every row rejected (unknown_side 'yes'). In a
    prediction market's file yes/no is the outcome the taker bought, read as the docs' map reads it: buying yes is
    a buy of the yes contract whose price is read, buying no a sell of it; the note says so."""
    path = tmp_path / "kalshi.csv"
    path.write_text("trade_id,ticker,count,yes_price,no_price,taker_side,created_time\n" + "".join(
        f"t{i},{KALSHI},{i % 7 + 1},{(2, 3, 1, 4)[i % 4]},{100 - (2, 3, 1, 4)[i % 4]},{('yes', 'no')[i % 3 == 0]},"
        f"2024-11-05T14:{i // 4:02d}:{i % 4 * 15:02d}Z\n" for i in range(40)))
    replay = FileReplay(path, columns=map_from_options(columns="price=yes_price,size=count,stream_col=ticker",
                                                         detect=True))
    ticks = drain(replay)
    assert not replay.rejected and len(ticks) == 40
    assert [t.side for t in ticks[:4]] == ["sell", "buy", "buy", "sell"]
    said = "\n".join(replay.notes)
    assert "side=taker_side (the outcome the taker bought: yes = buy, no = sell of the yes contract)" in said, said
    # yes/no under plain names, nothing saying it is a prediction market: still no side words (told, not guessed)
    plain = tmp_path / "plain.csv"
    plain.write_text(path.read_text().replace("yes_price,no_price", "px,other"))
    other = FileReplay(plain, columns=map_from_options(columns="price=px,size=count,stream_col=ticker", detect=True))
    drain(other)
    assert "unknown_side" in other.rejected


def test_bar_volumes_that_rise_and_trades_whose_first_rows_rise_get_no_running_total_caution(tmp_path: Path) -> None:
    """fix327 #6: a bar file's volume is the bar's own: a session of steadily rising bar volumes got the running-
    total caution. Bars are never cautioned; other files are only when their sizes never fall over the whole file,
    not just over the rows sampled first."""
    bars = tmp_path / "AAPL_1min.csv"
    bars.write_text("timestamp,open,high,low,close,volume\n" + "".join(
        f"2024-11-05T14:{i // 60:02d}:{i % 60:02d}Z,{100 + i % 3},{101 + i % 3},{99 + i % 3},{100 + i % 2},"
        f"{1000 + 50 * i}\n" for i in range(120)))
    replay = FileReplay(bars)
    assert len(drain(replay)) == 120
    assert not any("running total" in n or "never decreases" in n for n in replay.notes), replay.notes
    from connectors.file_scans import SAMPLE_ROWS
    rising_first = tmp_path / "trades.csv"  # a total's name, rising over the rows sampled, then rising and falling
    with rising_first.open("w") as f:
        f.write("ts,symbol,price,volume\n")
        for i in range(SAMPLE_ROWS + 60_000):  # falls on half the last rows: more than a day's reset a rise
            size = i + 1 if i < SAMPLE_ROWS else (5, 9, 2, 7)[i % 4]
            f.write(f"{1730815200000 + i},X,{40 + i % 3},{size}\n")
    assert not any("never decreases" in n for n in FileReplay(rising_first).notes)
    total = tmp_path / "snapshots.csv"  # a running total to the end: said, with the whole file's rows
    with total.open("w") as f:
        f.write("ts,symbol,price,volume\n")
        f.writelines(f"{1730815200000 + i},X,{40 + i % 3},{i + 1}\n" for i in range(SAMPLE_ROWS + 20_000))
    caution = next(n for n in FileReplay(total).cautions if "never decreases" in n)
    assert f"(1 to {SAMPLE_ROWS + 20_000:,} over {SAMPLE_ROWS + 20_000:,} rows; 0 of them unchanged)" in caution
