"""An option chain's zero bids (bid 0.00, ask 0.02: nobody bids a worthless wing) as file replay reads them: TAQ's
"no bid" by default, with the series that lost every tick named; a price with `zero_bid: price` (--zero-bid
price), in a backtest and over a real feed to a served engine; an offset of 0 refused by name; per-stream offsets
by glob; and the rows a keep filter leaves out counted under their streams apart from a stream selection's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from conftest import drain, serving
from connectors.labels import marks_of
from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from engine.service.cli import main
from engine.service.reading_record import reading_of, shown
from test_cli import config, wait_for
from test_cli import checkpoint  # noqa: F401 (fixture)

T0 = 1734359400_000_000_000
WING = "SPY   241220C00520000"  # nobody bids it: every quote 0.00 bid
NEAR = "SPY   241220C00450000"
UNDERLYING = "SPY"
HEADER = "ts,symbol,bid,ask,bid_size,ask_size\n"


def chain(path: Path) -> Path:
    """SPY quotes, a near series that bids 0 once, and a wing series that bids 0 always; a 0 ask once (no offer)."""
    rows = []
    for i in range(12):
        rows.append(f"{T0 + i * 10**9},{UNDERLYING},450.0{i % 3},450.0{i % 3 + 2},100,100\n")
        rows.append(f"{T0 + i * 10**9 + 1},{NEAR},{'0.00' if i == 5 else '1.20'},1.25,0,10\n")
        rows.append(f"{T0 + i * 10**9 + 2},{WING},0.00,{['0.01', '0.02', '0.05'][i % 3]},0,100\n")
    rows.append(f"{T0 + 12 * 10**9},{NEAR},1.20,0,10,0\n")  # a 0 ask: no offer, whatever zero_bid says
    path.write_text(HEADER + "".join(rows))
    return path


def test_zero_bids_are_no_bid_by_default_and_a_series_that_lost_every_tick_is_named(tmp_path: Path) -> None:
    csv = chain(tmp_path / "chain.csv")
    parquet = tmp_path / "chain.parquet"
    pl.read_csv(csv, schema_overrides={"symbol": pl.String}).write_parquet(parquet)
    for path in (csv, parquet):
        replay = FileReplay(path)
        assert {t.stream for t in drain(replay)} == {UNDERLYING, NEAR}
        assert dict(replay.rejected) == {"missing_field": 14}
        said = replay.rejected.streams_of()["missing_field"]
        assert said == f"{WING} 12, {NEAR} 2; {WING} lost every tick (none read)"
        assert "a one-sided quote (no bid)" in replay.rejected.examples["missing_field"]


def test_a_trade_beside_a_sealed_one_sided_book_is_told_as_a_price_limit_not_fill_quotes(tmp_path: Path) -> None:
    """review433 #5: a stock sealed at its limit-up (every trade at 11.57, bid 11.57, no ask) had its quotes rejected
    with the hint fill_quotes=true, which fills quote rows without a trade only: it changed nothing. The row's
    trade is read; the hint now says what such a book is. A quote row alone keeps the fill_quotes hint."""
    path = tmp_path / "sealed.csv"
    path.write_text("symbol,timestamp,price,size,bid,ask\n000001.SZ,2024-12-02T02:05:00Z,11.57,100,11.57,\n"
                    "000001.SZ,2024-12-02T02:05:01Z,,,11.57,\n")
    replay = FileReplay(path)
    assert [t.price for t in drain(replay)] == [11.57] and replay.rejected == {"missing_field": 2}
    sealed = replay.rejected.examples["missing_field"]
    assert sealed.endswith('(column "ask"; the row\'s trade is read, beside a book with one side: a stock sealed at '
                           "its price limit (limit-up: bids, no offers; limit-down: offers, no bids) trades so, and no "
                           "quote tick holds it)"), sealed


def test_zero_bid_price_replays_an_options_zero_bids_with_the_mark_at_half_the_ask(tmp_path: Path) -> None:
    csv = chain(tmp_path / "chain.csv")
    for columns in (map_from_options(zero_bid="price", detect=True),  # --zero-bid price
                    {"ts": "ts", "stream_col": "symbol", "bid": "bid", "ask": "ask", "zero_bid": "price"}):
        replay = FileReplay(csv, columns=columns)
        if columns.keys() == {"zero_bid"}:  # the layout detected: the note says how it is read
            assert any("zero_bid=price (a 0 bid beside an ask is a price)" in note for note in replay.notes)
        ticks = drain(replay)
        wing = [t for t in ticks if t.stream == WING]
        assert [(t.bid, t.ask) for t in wing[:3]] == [(0.0, 0.01), (0.0, 0.02), (0.0, 0.05)]
        assert list(marks_of(wing[:3])) == [0.005, 0.01, 0.025]  # mid = ask / 2: above zero, returns defined
        assert np.all(np.isfinite(np.diff(np.log(marks_of(wing)))))
        assert sum(t.stream == NEAR for t in ticks) == 12  # its 0 bid kept, its 0 ask (no offer) not
        assert dict(replay.rejected) == {"missing_field": 1}
        assert "ask is 0 beside bid 1.2: a one-sided quote (no ask)" in replay.rejected.examples["missing_field"]
    with pytest.raises(ValueError, match=r'zero_bid must be one of "no_bid" or "price".*got "keep"'):
        map_from_options(zero_bid="keep", detect=True)
    # a checkpoint trained so records it, and evaluate says it as an option
    assert reading_of({"zero_bid": "price"}) == {"zero_bid": "price"} and reading_of({"zero_bid": "no_bid"}) == {}
    assert shown({"zero_bid": "price"}, ["zero_bid"]) == "--zero-bid price"


def test_backtest_and_feed_replay_take_zero_bid_price_and_the_engine_takes_the_ticks(checkpoint, tmp_path,  # noqa: F811
                                                                                    capsys) -> None:
    csv = chain(tmp_path / "chain.csv")
    # review401 #4: the config of a service with limits.zero_bid: price reads the files' 0 bids as prices too
    (tmp_path / "price.yaml").write_text("limits: {zero_bid: price}\n")
    assert main(["backtest", str(csv), "--out", str(tmp_path / "a.parquet"), "--config", str(tmp_path / "price.yaml"),
                 "--quiet", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "replayed 36 ticks (1 rejected)" in out, out
    (tmp_path / "taq").mkdir()
    with serving(config(checkpoint, tmp_path / "taq")) as server:  # a service reading a 0 bid as TAQ's "no bid"
        code = main(["feed", "replay", str(csv), "--zero-bid", "price", "--endpoint", server.endpoints["ingest"],
                     "--answers", server.endpoints["answers"], "--control", server.endpoints["control"]])
        err = capsys.readouterr().err
        assert "missing_field" in err and "limits.zero_bid: price" in err, err  # refused, naming the service's key
        # ... and said once up front, from the service's own reading in `health`, before any quote was refused
        warning = "flashtick feed replay: warning: the files' 0 bids are read as prices (--zero-bid price), but the " \
                  "service reads a quote's 0 bid as no bid (limits.zero_bid: no_bid): it will refuse each such quote " \
                  "as missing_field; to take them, serve with limits.zero_bid: price in its config\n"
        assert err.count(warning) == 1 and err.index(warning) < err.index("missing_field"), err
        assert main(["health", "--control", server.endpoints["control"]]) == 0
        assert json.loads(capsys.readouterr().out)["zero_bid"] == "no_bid"
        code = main(["feed", "replay", str(chain(tmp_path / "chain2.csv")), "--endpoint", server.endpoints["ingest"],
                     "--answers", server.endpoints["answers"], "--control", server.endpoints["control"]])
        assert warning not in capsys.readouterr().err  # read as the service reads them: nothing to say
    base = config(checkpoint, tmp_path)
    with serving(dataclasses.replace(base, limits=dataclasses.replace(base.limits, zero_bid="price"))) as server:
        control = ["--control", server.endpoints["control"]]
        # no --zero-bid: the files are read as the service reads a wire quote (review401 #4: 13 refused unsent)
        code = main(["feed", "replay", str(csv), "--endpoint", server.endpoints["ingest"],
                     "--answers", server.endpoints["answers"], *control])
        err = capsys.readouterr().err
        assert code == 0 and "0 rejected" in err and warning not in err, err
        assert "note: the files' 0 bids beside an ask are read as prices (--zero-bid price), as the service reads " \
               "a quote's (limits.zero_bid: price)" in err, err
        wait_for(lambda: main(["stats", *control]) == 0 and json.loads(capsys.readouterr().out)["ticks_in"] == 36,
                 timeout_s=60)
        assert main(["streams", WING, *control]) == 0
        assert "ticks 12" in capsys.readouterr().out


def test_a_price_offset_of_0_is_refused_by_name_and_a_per_stream_offset_takes_globs(tmp_path: Path, capsys) -> None:
    csv = chain(tmp_path / "chain.csv")
    for offset in ("0", "0.0", f"{WING}=0"):
        with pytest.raises(ValueError, match=r"is 0, which shifts nothing: .* zero_bid: price \(--zero-bid price\)"):
            map_from_options(price_offset=offset, detect=True)
    (tmp_path / "po0.yaml").write_text("price_offset: 0\n")
    assert main(["backtest", str(csv), "--columns", str(tmp_path / "po0.yaml"), "--out", str(tmp_path / "z.parquet"),
                 "--quiet"]) == 2
    assert "price_offset is 0, which shifts nothing" in capsys.readouterr().err
    # a glob shifts the series it matches (the chain's 0 bids lifted to 0.0001), not the underlying
    replay = FileReplay(csv, columns=map_from_options(price_offset="SPY   2412*C005*=0.0001", detect=True))
    ticks = drain(replay)
    assert {t.bid for t in ticks if t.stream == WING} == {0.0001}
    assert [t.bid for t in ticks if t.stream == UNDERLYING][:2] == [450.0, 450.01]
    assert dict(replay.rejected) == {"missing_field": 2} and not replay.found_notes  # NEAR's 0 bid and 0 ask
    unmatched = FileReplay(csv, columns=map_from_options(price_offset="QQQ*=1|SPY   2412*C005*=0.0001", detect=True))
    drain(unmatched)
    assert unmatched.found_notes == [f'price_offset names stream(s) "QQQ*", which the files never hold: not shifted '
                                     f"(their streams: SPY, {NEAR}, {WING})"]


def test_rows_a_keep_filter_leaves_out_are_counted_under_their_streams_apart_from_the_selection(tmp_path) -> None:
    path = tmp_path / "trades.csv"
    rows = [(UNDERLYING, "R"), (NEAR, "R"), (NEAR, "J"), (WING, "R"), (WING, "I"), (NEAR, "R"), (UNDERLYING, "J"),
            (WING, "J")]
    path.write_text("ts,symbol,price,size,condition\n" + "".join(
        f"{T0 + i},{symbol},1.5,1,{condition}\n" for i, (symbol, condition) in enumerate(rows)))
    keep = {"keep": {"condition": ["R"]}}
    replay = FileReplay(path, columns=map_from_options(None, keep, detect=True), streams=["SPY *"])
    assert [t.stream for t in drain(replay)] == [NEAR, WING, NEAR]
    assert dict(replay.rejected) == {"filtered_out": 5}
    # the underlying's two rows (one of them also a J) are the selection's; the series' J and I rows the keep's
    assert replay.rejected.streams_of()["filtered_out"] == (f"2 of streams not selected: SPY 2; 3 by the map's "
                                                            f"keep: {WING} 2, {NEAR} 1")
    example = replay.rejected.examples["filtered_out"]
    assert example.startswith(f"{path} line 2: filtered_out: stream \"SPY\" is not among the streams selected")
    assert f"; first by the map's keep: {path} line 4: filtered_out: column \"condition\" holds J, which the map's " \
           f"keep leaves out (it keeps R)" in example
    # without a selection: the keep's rows alone, under their streams (never "rows with no stream")
    replay = FileReplay(path, columns=map_from_options(None, keep, detect=True))
    drain(replay)
    assert replay.rejected.streams_of()["filtered_out"] == f"{WING} 2, {NEAR} 1, SPY 1"
    assert "which the map's keep leaves out" in replay.rejected.examples["filtered_out"]
    # --hours' rows too: under their streams, apart from the keep's (09:30 New York is T0; a row an hour before)
    with path.open("a") as f:
        f.write(f"{T0 - 3600 * 10**9 + 9},{NEAR},1.5,1,R\n")
    replay = FileReplay(path, columns=map_from_options(None, keep, detect=True, hours="09:30-16:00 America/New_York"))
    drain(replay)
    assert replay.rejected.streams_of()["filtered_out"] == (f"1 outside the hours kept: {NEAR} 1; 4 by the map's "
                                                            f"keep: {WING} 2, {NEAR} 1, SPY 1")  # in time order
    assert "is outside the hours kept" in replay.rejected.examples["filtered_out"]
    assert "; first by the map's keep: " in replay.rejected.examples["filtered_out"]


def test_a_spread_quoted_at_zero_is_pointed_at_the_offset_as_one_that_prints_there(tmp_path: Path) -> None:
    """review208 #4: a calendar spread quoted bid 0.00 / ask 0.01 was refused as a one-sided quote with the
    options' advice alone (zero_bid: price, whose mark ask / 2 turns a tick into thousands of bps): quotes now get
    the near-zero rule trades get (one function), naming the offset to paste. A stock's 0 bid far from zero does
    not."""
    rows = []
    for i in range(60):
        bid = [0.03, 0.02, 0.01, 0.00, 0.01, 0.02][i % 6]
        rows.append(f"{T0 + i * 10**9},CLZ4-CLF5,{bid:.2f},{bid + 0.01:.2f},5,7\n")
        rows.append(f"{T0 + i * 10**9 + 1},XYZ,{'0.00' if i == 30 else '150.10'},150.12,100,100\n")
    path = tmp_path / "spread_quotes.csv"
    path.write_text(HEADER + "".join(rows))
    replay = FileReplay(path)
    drain(replay)
    assert replay.rejected.by_stream["missing_field"] == {"CLZ4-CLF5": 10, "XYZ": 1}
    example = replay.rejected.examples["missing_field"]
    assert example.startswith(f"{path} line 8: missing_field: bid is 0 beside ask 0.01: a one-sided quote"), example
    assert example.endswith("(column \"bid\"; CLZ4-CLF5's other quotes lie within 10 price steps of zero (a spread), "
                            "where 0 is a price, not a missing side: an offset (--price-offset) shifts them above "
                            "zero, e.g. --price-offset 'CLZ4-CLF5=1' (docs/replay.md))"), example
    stock = tmp_path / "stock_quotes.csv"  # the stock alone: its 0 bid is no bid, no offset named
    stock.write_text(HEADER + "".join(row for row in rows if ",XYZ," in row))
    alone = FileReplay(stock)
    drain(alone)
    assert "--price-offset" not in alone.rejected.examples["missing_field"]
    shifted = FileReplay(path, columns=map_from_options(price_offset={"CLZ4-CLF5": 1.0}, detect=True))
    assert len([t for t in drain(shifted) if t.stream == "CLZ4-CLF5"]) == 60 and shifted.rejected["missing_field"] == 1


def test_an_options_wing_quoted_at_zero_gets_the_one_sided_advice_alone(tmp_path: Path) -> None:
    """An option nobody bids (0.00/0.05) got two pieces of advice on one reject: the options' (zero_bid: price)
    and a spread's (--price-offset, as its asks lie a few steps above zero). An option is never priced below zero:
    its 0 bid is a one-sided quote, so it gets the options' advice alone, whether no bid ever came (any name) or
    its name says it is an option (OCC's, Polygon's) and it is bid a cent now and then. The same rows under a
    spread's name, bid a cent now and then, still name the offset (a 0 there is a price)."""
    replay = FileReplay(chain(tmp_path / "chain.csv"))
    drain(replay)
    example = replay.rejected.examples["missing_field"]
    assert example.endswith("a one-sided quote (no bid), which the engine does not take (a quote has both sides) (an "
                            "option nobody bids, whose 0 bid is a price: --zero-bid price, or zero_bid: price in the "
                            'column map) (column "bid")'), example

    def example_of(name: str, stream: str) -> str:
        rows = [f"{T0 + i * 10**9},{stream},{'0.01' if i % 4 == 3 else '0.00'},0.05,{i % 4 == 3:d},10\n"
                for i in range(40)]
        (tmp_path / name).write_text(HEADER + "".join(rows))
        read = FileReplay(tmp_path / name)
        drain(read)
        return read.rejected.examples["missing_field"]

    for stream in (WING, "O:SPY241220C00520000"):
        assert "--price-offset" not in example_of("wing.csv", stream) and "zero_bid: price" in example_of(
            "wing.csv", stream)
    assert "--price-offset 'CLZ4-CLF5=1'" in example_of("spread.csv", "CLZ4-CLF5")
