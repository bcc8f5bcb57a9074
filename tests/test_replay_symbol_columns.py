"""Symbol columns as exchanges name them (JPX's `Code`, HKEX's `Stock Code`, BSE's `SC_CODE`, a generic `Name`), and
a note when every row goes to one stream while an unread column looks like instruments' identifiers. Every fixture
is written here, from code, into tmp_path."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

from engine.quoting import quoted

from connectors.cautions import Caution
from connectors.file_names import symbol_in_name
from connectors.replay import FileReplay
from conftest import drain


def two_stocks(header: str, first: str = "7203", second: str = "9434") -> str:
    rows = "".join(f"2026-03-10T09:00:{i:02d},{(first, second)[i % 2]},{(3450, 988)[i % 2] + i},100\n"
                   for i in range(10))
    return header + rows


@pytest.mark.parametrize("column", ["Code", "Stock Code", "Security Code", "Local Code", "SC_CODE", "Ticker Code"])
def test_exchange_code_columns_name_the_streams(tmp_path: Path, column: str) -> None:
    path = tmp_path / "jpx.csv"
    path.write_text(two_stocks(f"Time,{column},Price,Volume\n"))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert {t.stream for t in ticks} == {"7203", "9434"}
    assert [t.price for t in ticks if t.stream == "9434"] == [989.0, 991.0, 993.0, 995.0, 997.0]
    assert not any("look like instruments" in n for n in replay.notes)


def test_a_name_column_of_several_short_names_names_the_streams(tmp_path: Path) -> None:
    path = tmp_path / "jp.csv"
    path.write_text(two_stocks("Time,Name,Price,Volume\n", "Toyota", "SoftBank"))
    replay = FileReplay(path)
    assert {t.stream for t in drain(replay)} == {"Toyota", "SoftBank"}
    assert any('streams from column "Name"' in n for n in replay.notes)
    # one name (a file of one instrument): the file's stream, as before
    (tmp_path / "one.csv").write_text(two_stocks("Time,Name,Price,Volume\n", "Toyota", "Toyota"))
    assert {t.stream for t in drain(FileReplay(tmp_path / "one.csv"))} == {"one"}


def test_one_stream_beside_an_unread_identifier_column_is_said(tmp_path: Path) -> None:
    path = tmp_path / "day.csv"
    path.write_text(two_stocks("Time,Issue,Price,Volume\n", "AAA1", "BBB2"))
    replay = FileReplay(path)
    assert {t.stream for t in drain(replay)} == {"day"}
    caution = next(n for n in replay.cautions if "look like instruments" in n)
    assert 'column "Issue" holds several values (AAA1, BBB2' in caution and "--columns stream=Issue" in caution
    # a full map without a stream gets it too, and so does one that names the stream: a name is no instrument
    full = FileReplay(path, columns={"ts": "Time", "price": "Price", "size": "Volume"})
    assert any("--columns stream=Issue" in n for n in full.notes)
    named = FileReplay(path, columns={"ts": "Time", "price": "Price", "size": "Volume", "stream": "ALL"})
    assert any('one stream, ALL, the name the map gives it, but column "Issue"' in n for n in named.cautions)
    # integer codes under an identifier's name, in a Parquet file
    pl.read_csv(path).rename({"Issue": "issue_id"}).with_columns(
        pl.col("issue_id").str.slice(3).cast(pl.Int64)).write_parquet(tmp_path / "day.parquet")
    assert any('column "issue_id" holds several values (1, 2' in n for n in FileReplay(tmp_path / "day.parquet").notes)


def test_unique_ids_flags_and_sides_are_no_identifiers(tmp_path: Path) -> None:
    """A B/S column under a name no map reads (`Aggr`) is sides, never proposed as the streams (review231 #4)."""
    path = tmp_path / "trades.csv"
    path.write_text("time,trade_id,price,qty,is_best_match,Aggr\n" + "".join(
        f"2026-03-10T09:00:{i:02d},T{i},100.5,1,{('True', 'False')[i % 2]},{'BS'[i // 3 % 2]}\n" for i in range(10)))
    replay = FileReplay(path)
    assert len(drain(replay)) == 10
    assert not any("look like instruments" in n for n in replay.notes)


def test_an_order_id_column_is_never_suggested_as_the_streams(tmp_path: Path) -> None:
    """A trade file of one instrument with an order id (three partial fills each): its 40 ids repeat, so they
    looked like instruments and the caution said to read a stream per order (--columns stream=id). Its ids trade
    at the instrument's one price level, 40 values to it: no instruments, nothing suggested, as an integer or a
    text id, while two stocks' codes at their own levels still are."""
    rows = [(i // 3, 1723161283000 + i * 250, 60_000.0 + (i * 7 % 5) * 0.1, 0.01 + i % 4 / 1000) for i in range(120)]
    orders = pl.DataFrame(rows, schema=["id", "time", "price", "qty"], orient="row")
    orders.write_csv(tmp_path / "BTCUSDT-orders.csv")
    orders.with_columns(order_code=pl.format("O-{}", "id")).drop("id").write_csv(tmp_path / "BTCUSDT-codes.csv")
    for name in ("BTCUSDT-orders.csv", "BTCUSDT-codes.csv"):
        replay = FileReplay(tmp_path / name)
        assert {t.stream for t in drain(replay)} == {"BTCUSDT"}
        assert not any("look like instruments" in n or "stream=" in n for n in replay.cautions), replay.cautions
    path = tmp_path / "day.csv"
    path.write_text(two_stocks("Time,Issue,Price,Volume\n", "AAA1", "BBB2"))
    assert any("--columns stream=Issue" in n for n in FileReplay(path).cautions)


def test_long_numeric_token_ids_are_offered_as_the_streams(tmp_path: Path) -> None:
    """Review248 #1: Polymarket's token ids (71 digits: polars infers i128 and cannot hold them) of two markets, at
    0.20 and 0.70, interleaved in one stream said nothing, while the same ids as short text got both cautions. A
    column of long numeric ids now gets them too, its values shown by their ends, and reads as given."""
    ids = ("11862165566757345985240476164489718219056735011698825377388402888080786",
           "69236923620077691027083946871148646972011131466059644796654161903044970")
    path = tmp_path / "poly_two_markets.csv"
    path.write_text("timestamp,asset_id,price,size,side\n" + "".join(
        f"{1730815200000 + i * 5000},{ids[i // 3 % 2]},{(0.20, 0.70)[i // 3 % 2] + i % 3 / 100:.2f},10,BUY\n"
        for i in range(60)))
    replay = FileReplay(path)
    assert {t.stream for t in drain(replay)} == {"poly_two_markets"}
    split = next(n for n in replay.cautions if "two series at different price levels" in n)
    assert 'column "asset_id" (1186216556...080786, 6923692362...044970, ...)' in split, split
    assert "--columns stream=asset_id" in split
    one = next(n for n in replay.cautions if "look like instruments" in n)
    assert "--columns stream=asset_id" in one
    given = FileReplay(path, columns={"stream_col": "asset_id"})
    assert {t.stream for t in drain(given)} == set(ids)  # every digit kept
    assert not any("look like instruments" in n or "two series" in n for n in given.cautions)


def test_a_fixed_stream_over_a_symbol_column_of_two_contracts_is_cautioned(tmp_path: Path) -> None:
    """Tardis' Deribit trades of a perpetual and a future 1,500 apart, given one stream name: their prices would
    alternate in it, so the unread `symbol` column is named, while the flags beside it are not instruments."""
    path = tmp_path / "deribit_trades_2024-01-02_BTC.csv"
    path.write_text("exchange,symbol,timestamp,local_timestamp,id,side,price,amount,is_best_match\n" + "".join(
        f"deribit,{('BTC-PERPETUAL', 'BTC-27MAR26')[i % 2]},{1704153600000000 + i * 1000},"
        f"{1704153600000000 + i * 1000 + 50},{i},buy,{42000.5 + 1500 * (i % 2)},10,{('True', 'true')[i // 5 % 2]}\n"
        for i in range(20)))
    for columns in ({"stream": "BTC-PERP"}, {"ts": "timestamp", "price": "price", "size": "amount",
                                             "stream": "BTC-PERP"}):
        replay = FileReplay(path, columns=columns)
        assert {t.stream for t in drain(replay)} == {"BTC-PERP"}
        cautions = [c for c in replay.cautions if "look like instruments" in c]
        assert len(cautions) == 1 and 'column "symbol" holds several values (BTC-PERPETUAL, BTC-27MAR26' in \
            cautions[0] and "--columns stream=symbol" in cautions[0], replay.cautions
    # detected, the symbol column names the streams, and a True/true flag column is never called instruments
    replay = FileReplay(path)
    assert {t.stream for t in drain(replay)} == {"BTC-PERPETUAL", "BTC-27MAR26"}
    flags = tmp_path / "BTCUSDT-trades.csv"
    flags.write_text("time,price,qty,is_best_match\n" + "".join(
        f"{1704153600000 + i},42000.5,1,{('True', 'true', 'TRUE')[i % 3]}\n" for i in range(12)))
    assert not any("look like instruments" in c for c in FileReplay(flags, columns={"stream": "BTCUSDT"}).cautions)


def roll(contract_column: str, contracts: tuple[str, str] = ("ESZ4", "ESH5"), root: str = "ES") -> pl.DataFrame:
    """Trades of two contracts of one root during a roll, alternating: the root in `symbol`, the contract beside it
    (the first at 5760, the second at 5818)."""
    return pl.DataFrame({"timestamp": [f"2024-11-01T14:00:{i:02d}Z" for i in range(20)], "symbol": [root] * 20,
                         contract_column: [contracts[i % 2] for i in range(20)],
                         "price": [(5760.0, 5818.0)[i % 2] + 0.25 * i for i in range(20)], "size": [1] * 20})


@pytest.mark.parametrize(("column", "contracts", "suffix"), [
    ("contract", ("ESZ4", "ESH5"), ".csv"),  # review 104's file
    ("localSymbol", ("ESZ4", "ESH5"), ".parquet"),  # Interactive Brokers'
    ("RIC", ("ESZ4", "ESH5"), ".csv"),  # Refinitiv's, beside its root
    ("Ticker", ("ESZ4 Index", "ESH5 Index"), ".parquet"),  # Bloomberg's
])
def test_a_contract_column_beside_a_root_symbol_names_the_streams(tmp_path: Path, column: str,
                                                                   contracts: tuple[str, str], suffix: str) -> None:
    """Review 104 (finding 2): `symbol` ES beside `contract` ESZ4/ESH5 replayed as one stream ES, its price jumping
    58 points at each of the contracts' switches, with no note. A column whose values extend the symbol's and split
    it into several contracts is now the stream, said in a note."""
    frame = roll(column, contracts)
    path = tmp_path / f"es{suffix}"
    frame.write_csv(path) if suffix == ".csv" else frame.write_parquet(path)
    replay = FileReplay(path)
    ticks = drain(replay)
    named = {contract: contract.removesuffix(" Index") for contract in contracts}  # no yellow key (fix303 #3)
    for contract in contracts:
        assert [t.price for t in ticks if t.stream == named[contract]] == \
            frame.filter(pl.col(column) == contract)["price"].to_list()
    assert {t.stream for t in ticks} == set(named.values())
    assert (f"es{suffix}: streams from column {quoted(column)} ({', '.join(contracts)}), not \"symbol\" (ES): its "
            "values "
            f'extend those of "symbol" and split each into contracts trading at once at different price levels '
            f"(alternating 18 times, median prices 58.25 apart, moves of 0.5) (--columns stream=symbol says "
            f"otherwise)") in replay.notes
    assert {t.stream for t in drain(FileReplay(path, columns={"stream_col": "symbol"}))} == {"ES"}  # as told


def test_a_contract_column_that_does_not_extend_the_symbol_is_joined_to_it(tmp_path: Path) -> None:
    """`instrument` Z4/H5 beside `symbol` ES: joined, as a contract month is (`ES Z4`); a column of one value per
    symbol (a stock's RIC beside its ticker) splits nothing and changes nothing."""
    path = tmp_path / "es.csv"
    roll("instrument", ("Z4", "H5")).write_csv(path)
    replay = FileReplay(path)
    assert {t.stream for t in drain(replay)} == {"ES Z4", "ES H5"}
    assert ('es.csv: streams from columns "symbol" and "instrument" joined (ES with Z4, H5): "instrument" splits '
            'each "symbol" into contracts trading at once at different price levels (alternating 18 times, median '
            "prices 58.25 apart, moves of 0.5) (--columns stream=symbol says otherwise)") in replay.notes
    stocks = tmp_path / "stocks.csv"
    pl.DataFrame({"timestamp": [f"2024-11-01T14:00:{i:02d}Z" for i in range(10)],
                  "symbol": [("AAPL", "MSFT")[i % 2] for i in range(10)],
                  "ric": [("AAPL.O", "MSFT.O")[i % 2] for i in range(10)],
                  "price": [(225.0, 410.0)[i % 2] for i in range(10)], "size": [1] * 10}).write_csv(stocks)
    replay = FileReplay(stocks)
    assert {t.stream for t in drain(replay)} == {"AAPL", "MSFT"}
    assert not any("several contracts" in note for note in replay.notes)


def test_a_renamed_ticker_and_a_stock_s_venue_rics_keep_the_symbol_s_stream(tmp_path: Path) -> None:
    """Review 107 (finding 4): `ticker` FB then META beside `symbol` META, and `ric` VOD.L / VOD.BS / VOD.DE beside
    `symbol` VOD at one price level, each split one instrument into several streams, said to alternate in price.
    A rename never alternates, and venues of one stock trade at one level: the symbol stays the stream, with a note
    saying what was measured and how to split anyway."""
    n = 60
    rows = {"timestamp": [f"2024-11-01T14:{i // 60:02d}:{i % 60:02d}Z" for i in range(n)], "size": [100] * n}
    renamed = pl.DataFrame({**rows, "symbol": ["META"] * n, "ticker": ["FB"] * 30 + ["META"] * 30,
                            "price": [300.0 + 0.01 * (i % 5) for i in range(n)]})
    renamed.write_csv(tmp_path / "meta.csv")
    replay = FileReplay(tmp_path / "meta.csv")
    assert {t.stream for t in drain(replay)} == {"META"}
    assert ('meta.csv: streams from column "symbol" (META), though "ticker" (FB, META) splits some into several '
            "values: each value follows the one before and never alternates with it (a renamed ticker), so they read "
            "as one instrument (--columns stream=symbol+ticker reads a stream per value)") in replay.notes
    rics = [("VOD.L", "VOD.BS", "VOD.DE")[i % 3] for i in range(n)]
    venues = pl.DataFrame({**rows, "symbol": ["VOD"] * n, "ric": rics,
                           "price": [72.0 + 0.02 * (i // 4 % 3) for i in range(n)]})
    venues.write_csv(tmp_path / "vod.csv")
    replay = FileReplay(tmp_path / "vod.csv")
    assert {t.stream for t in drain(replay)} == {"VOD"}
    assert ('vod.csv: streams from column "symbol" (VOD), though "ric" (VOD.L, VOD.BS, VOD.DE, ...) splits some into '
            "several values: their values alternate (57 changes) at one price level (median prices 0.02 apart, "
            "moves of 0.02), so they read as one instrument (--columns stream=symbol+ric reads a stream per value)") \
        in replay.notes
    assert {t.stream for t in drain(FileReplay(tmp_path / "vod.csv", columns={"stream_col": "symbol+ric"}))} == \
        {"VOD VOD.L", "VOD VOD.BS", "VOD VOD.DE"}  # as told


def test_an_unread_column_whose_changes_jump_the_price_gets_a_caution(tmp_path: Path) -> None:
    """A column of a name detection does not know (`delivery`) splitting root ES into two contracts: the streams stay
    the symbol's, but its changes come with 58-point jumps against quarter-point moves, so a caution names it and
    the map that reads it. A venue column whose changes move the price no more than usual is not cautioned."""
    n = 60  # the contracts in runs of three trades, a quarter point apart
    frame = pl.DataFrame({"timestamp": [f"2024-11-01T14:00:{i:02d}Z" for i in range(n)], "symbol": ["ES"] * n,
                          "delivery": [("ESZ4", "ESH5")[i // 3 % 2] for i in range(n)],
                          "price": [(5760.0, 5818.0)[i // 3 % 2] + 0.25 * (i % 3) for i in range(n)],
                          "size": [1] * n, "venue": [("XCME", "XCBT")[i % 2] for i in range(n)]})
    path = tmp_path / "es.csv"
    frame.write_csv(path)
    replay = FileReplay(path)
    assert {t.stream for t in drain(replay)} == {"ES"}
    caution = next(note for note in replay.notes if '"delivery"' in note)
    assert caution.startswith('es.csv: column "delivery" (ESZ4, ESH5, ...) is not read, and where it changes within a '
                              "stream (19 times) the price jumps by ")
    assert caution.endswith("interleaved in one stream? If so, read the column as part of the stream: --columns "
                            "stream=symbol+delivery")
    assert not any('column "venue" (' in note for note in replay.notes)
    one_level = frame.with_columns(price=pl.Series([5760.0 + 0.25 * (i % 4) for i in range(n)]))
    one_level.write_csv(path)  # both values at one level (two venues of one contract, say): nothing said
    assert not any("'delivery'" in note for note in FileReplay(path).notes)


def hk_day(path: Path, day: int, price: float, rows: int = 12) -> Path:
    """A day of one Hong Kong stock's trades at about `price`, in a file named as a vendor names it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("Time,Price,Volume\n" + "".join(
        f"2024-06-{day:02d} 09:30:{i:02d}.5,{price + 0.2 * (i % 3):.2f},{100 * (1 + i % 4)}\n" for i in range(rows)))
    return path


@pytest.mark.parametrize(("name", "stream"), [
    ("0700_HK.csv", "0700_HK"), ("0700.HK.csv", "0700.HK"), ("005930_KS.csv", "005930_KS"),
    ("7203_JT_bbg.csv", "7203_JT"), ("7203 JT Equity.csv", "7203 JT"), ("HKG_0700_trades.csv", "HKG_0700"),
    # as before: a code alone, or with Yahoo's Tokyo suffix T, is the file's whole name
    ("7203.csv", "7203"), ("7203.T.csv", "7203.T"), ("7203_T.csv", "7203_T"),
    ("HK/0700.csv", "0700"),  # in a folder named by its exchange: the code, not the folder
])
def test_a_numeric_stock_code_and_its_exchange_name_the_stream(tmp_path: Path, name: str, stream: str) -> None:
    """The exchange code beside a numeric stock code (0700_HK.csv) is no ticker: read as one, every stock of an
    exchange would replay as one stream HK."""
    replay = FileReplay(hk_day(tmp_path / name, 3, 380.0))
    assert {t.stream for t in drain(replay)} == {stream}
    said = [n for n in replay.notes if "stream" in n and "from the" in n]
    stem = Path(name).name.removesuffix(".csv")
    assert said == ([] if stream == stem else
                    [f"{name}: stream {stream}, from the file name {quoted(stem)} (--columns stream_name=NAME to name "
                     "it otherwise)"])


def test_chinese_vendors_per_stock_files_name_a_stream_each(tmp_path: Path) -> None:
    """review433 #13: Wind's and Tushare's per-stock files (600519.SH.csv, 601318.SH.csv) were all one stream SH,
    different stocks interleaved into one session; JoinQuant's MIC suffixes and Futu's prefix alike."""
    names = ("600036.SH", "600519.SH", "601318.SH", "830799.BJ", "600519.XSHG", "000001.XSHE", "SH.600519")
    for name in names:
        (tmp_path / f"{name}.csv").touch()
    assert [symbol_in_name(tmp_path / f"{name}.csv") for name in names] == [
        (name, f"file name {quoted(name)}") for name in names]


def capture_trades(path: Path, price: float) -> Path:
    """Trades in the binance-trades preset's layout (a collector's capture: local_ts_ns, price, qty, side)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    t0 = 1_717_378_200_000_000_000  # 2024-06-03 01:30 UTC, 09:30 in Hong Kong
    path.write_text("local_ts_ns,trade_id,price,qty,aggressor_side\n" + "".join(
        f"{t0 + i * 500_000_000},{100 + i},{price + 0.2 * (i % 3):.2f},{100 * (1 + i % 4)},{'buy' if i % 2 else 'sell'}"
        f"\n" for i in range(12)))
    return path


@pytest.mark.parametrize("spec", [None, "binance-trades", {"preset": "binance-trades", "ts_unit": "ns"}])
def test_a_preset_layout_names_a_numeric_code_in_an_exchange_folder_by_the_code(tmp_path: Path, spec) -> None:
    # fix160: detected, the preset's layout took the folder's name (HK) and --preset its default (BTCUSDT)
    for name in ("HK/0700.csv", "HK_stocks/0700.csv", "HK/2024-06-03/0700.csv"):
        replay = FileReplay(capture_trades(tmp_path / name, 380.0), columns=spec)
        assert {t.stream for t in drain(replay)} == {"0700"}, (name, replay.notes)
        assert not any("stream HK" in n or "stream BTCUSDT" in n for n in replay.notes), replay.notes
    # a capture's file of no instrument still takes its folder's name (the preset's default, given by name)
    capture = capture_trades(tmp_path / "ETHUSDT" / "trades.csv", 2650.0)
    assert {t.stream for t in drain(FileReplay(capture, columns=spec))} == {"ETHUSDT"}


def test_two_stocks_files_give_two_streams_and_one_stream_of_both_is_cautioned(tmp_path: Path) -> None:
    """Tencent on one day, HSBC on the next: two streams by their names. Given one stream (a name holding the
    exchange alone), their prices 5.8-fold apart get a caution, as two files over one time do."""
    tencent, hsbc = hk_day(tmp_path / "0700_HK.csv", 3, 380.0), hk_day(tmp_path / "0005_HK.csv", 4, 65.0)
    replay = FileReplay([tencent, hsbc])
    assert {t.stream for t in drain(replay)} == {"0700_HK", "0005_HK"}
    assert not replay.cautions
    merged = FileReplay([tencent, hsbc], columns={"stream": "HK"})
    (caution,) = merged.cautions
    assert caution.startswith(f"one stream HK from two files whose prices differ 5.8-fold: two instruments? "
                              f"{tencent}'s prices lie near 380.2 and {hsbc}'s, after it, near 65.2; "), caution
    assert "Give each file its own stream in a replay list (an entry's columns: {stream: NAME})" in caution
    # one instrument's days, and its trades beside its quotes, are no concern
    next_day = hk_day(tmp_path / "0700_HK_next.csv", 4, 395.0)
    quotes = tmp_path / "0700_HK_bbo.csv"
    quotes.write_text("Time,Bid,Ask\n" + "".join(f"2024-06-03 09:30:{i:02d}.7,380.0,380.2\n" for i in range(12)))
    assert not FileReplay([tencent, next_day, quotes], columns={"stream": "HK"}).cautions


def test_prices_levels_are_compared_as_the_price_offset_lifts_them(tmp_path: Path) -> None:
    """A roll-adjusted contract fed with --price-offset (CL near 1.1 lifted by 40 after a day at 41.1 lifted too):
    the levels read are 81.1 and 41.1, no instruments apart. Compared raw (41.1 against 1.1) they were cautioned
    37-fold apart, a false "two instruments?" on a feed the offset had set right."""
    early, late = hk_day(tmp_path / "CLK0_a.csv", 3, 40.9), hk_day(tmp_path / "CLK0_b.csv", 4, 0.9)
    for offset in (40, {"CLK*": 40}, "CLK0=40"):
        assert not FileReplay([early, late], columns={"stream": "CLK0", "price_offset": offset}).cautions, offset
    (caution,) = FileReplay([early, late], columns={"stream": "CLK0"}).cautions
    assert "differ 37.4-fold: two instruments?" in caution, caution


def test_an_option_contract_s_premium_may_move_many_fold_between_days(tmp_path: Path) -> None:
    """An out-of-the-money option at 0.10 one day and 0.45 the next is one contract: no caution."""
    def day(name: str, date: str, premium: float) -> Path:
        (tmp_path / name).write_text("timestamp,underlying,expiry,strike,right,price,size\n" + "".join(
            f"{date}T14:30:{i:02d}Z,SPY,2024-01-19,500,C,{premium + 0.01 * (i % 2):.2f},1\n" for i in range(5)))
        return tmp_path / name

    replay = FileReplay([day("opt_0102.csv", "2024-01-02", 0.10), day("opt_0103.csv", "2024-01-03", 0.45)])
    assert len({t.stream for t in drain(replay)}) == 1
    assert not replay.cautions


def test_contracts_that_follow_one_another_are_a_roll_and_split_the_stream(tmp_path: Path) -> None:
    """Review 150 (finding 3): `Contract` ESH4 then ESM4 beside `Symbol` ES (a roll with no overlap) was called "a
    renamed ticker" and read as one stream ES, its 55-point step at the roll scored as a move. Values that read as
    futures contracts are a roll: a stream per contract, said so; a contract month as YYYYMM beside a root too."""
    n = 20
    rows = {"timestamp": [f"2024-03-13T14:{i // 60:02d}:{i % 60:02d}Z" for i in range(n)], "size": [1] * n,
            "symbol": ["ES"] * n, "price": [5150.0 + 55 * (i >= 10) + 0.25 * (i % 2) for i in range(n)]}
    pl.DataFrame({**rows, "contract": ["ESH4"] * 10 + ["ESM4"] * 10}).write_csv(tmp_path / "es.csv")
    replay = FileReplay(tmp_path / "es.csv")
    assert {t.stream for t in drain(replay)} == {"ESH4", "ESM4"}
    # the column named once (it read "from column 'contract': 'contract' (ESH4, ESM4) changes")
    assert ('es.csv: streams from column "contract" (ESH4, ESM4), whose values change from one contract to the '
            'next within "symbol" (ES): a futures roll (ESH4 -> ESM4), median prices 55 apart, moves of 0.25, so each '
            "contract is a stream (--columns stream=symbol reads them as one, its step at the roll scored as a move)"
            ) in replay.notes, replay.notes
    assert not any("renamed ticker" in note for note in replay.notes)
    pl.DataFrame({**rows, "contract": ["202403"] * 10 + ["202406"] * 10}).write_csv(tmp_path / "months.csv")
    replay = FileReplay(tmp_path / "months.csv")
    assert {t.stream for t in drain(replay)} == {"ES 202403", "ES 202406"}
    assert ('months.csv: streams from columns "symbol" and "contract" joined (ES with 202403, 202406), the '
            "contracts changing from one to the next: a futures roll (202403 -> 202406), ") in "\n".join(replay.notes)


def es_roll(path: Path, header: str, month_of, rows: int = 60, daily: bool = False) -> Path:
    """ES, 202403 then 202406 (a roll mid-file, the June contract 55 points above), as trades or as daily bars;
    `month_of(contract, time)` gives a row's month column."""
    lines = []
    for i in range(rows):
        contract = "202403" if i < rows // 2 else "202406"
        price = (5150.0 if contract == "202403" else 5205.0) + 0.25 * (i % 5)
        when = (date(2024, 1, 2) + timedelta(days=i)) if daily else datetime(2024, 3, 11, 14, 30) + timedelta(seconds=i)
        bar = f"{price - 1:.2f},{price + 2:.2f},{price - 2:.2f}," if daily else ""
        lines.append(f"ES,{month_of(contract, when)},{when.isoformat()},{bar}{price:.2f},{1 + i % 3}\n")
    bars = "Open,High,Low,Close" if daily else "Price"
    path.write_text(f"{header},{'Date' if daily else 'Timestamp'},{bars},Volume\n" + "".join(lines))
    return path


@pytest.mark.parametrize(("header", "daily"), [("Product,Month", False), ("Product,Month", True),
                                               ("Symbol,Month", False), ("Product,Contract Month", False),
                                               ("Product,Expiry", True)])
def test_a_product_and_its_contract_month_roll_mid_file_into_a_stream_per_contract(tmp_path: Path, header: str,
                                                                                   daily: bool) -> None:
    # fix160: `Product`,`Month` (ES, 202403 then 202406) was one stream named after the file, its 55-point roll
    # scored as a move, without a word
    replay = FileReplay(es_roll(tmp_path / "es_export.csv", header, lambda contract, when: contract, daily=daily))
    ticks = drain(replay)
    assert [t.stream for t in ticks] == ["ES 202403"] * 30 + ["ES 202406"] * 30, replay.notes
    root, month = header.split(",")
    assert f"stream={root}+{month}" in replay.notes[0], replay.notes
    if month == "Month":
        said = next(n for n in replay.notes if "futures roll" in n)
        assert said.startswith(f'es_export.csv: streams from columns {quoted(root)} and "Month" joined (ES with '
                               '202403, '
                               f"202406), the contracts changing from one to the next: a futures roll (202403 -> "
                               f"202406), median prices 55 apart"), said
        assert not any("from the file name" in n for n in replay.notes)


def test_a_calendar_month_column_in_bars_is_no_contract(tmp_path: Path) -> None:
    # each daily bar's own month (202401, 202402, ...) beside the product: one instrument, as before
    path = es_roll(tmp_path / "ES_daily.csv", "Product,Month", lambda contract, when: when.strftime("%Y%m"),
                   daily=True)
    replay = FileReplay(path)
    assert {t.stream for t in drain(replay)} == {"ES"}
    assert not any("Month" in n and "stream" in n for n in replay.notes), replay.notes
    # and months as numbers 1..12 beside a symbol column: no contract either
    month_numbers = es_roll(tmp_path / "bars.csv", "Symbol,Month", lambda contract, when: when.month, daily=True)
    replay = FileReplay(month_numbers)
    assert {t.stream for t in drain(replay)} == {"ES"}
    assert not any("'Month'" in n for n in replay.notes), replay.notes


def test_an_order_type_column_is_never_suggested_as_the_streams(tmp_path: Path) -> None:
    """Review 163 (finding 4): Kraken's trade history with its header, a layout docs/replay.md lists as needing no
    options, was told on every run that `market/limit` (m/l: the order type) looked like instruments, with advice
    that would split one instrument into streams `m` and `l`. A column of m/l, or of order-type words, is no
    instrument; `buy/sell` (b/s) stays the taker's side."""
    t0 = 1704153600
    path = tmp_path / "XBTUSD_history.csv"
    path.write_text("price,volume,time,buy/sell,market/limit,miscellaneous\n" + "".join(
        f"{42000 + (i % 9) * 0.1:.1f},{0.0123 + i / 10000:.8f},{t0 + i * 0.9 + 0.1234:.4f},{'bsb'[i % 3]},"
        f"{'mll'[i % 3]},\n" for i in range(200)))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert {t.stream for t in ticks} == {"XBTUSD"} and len(ticks) == 200
    assert [t.side for t in ticks[:3]] == ["buy", "sell", "buy"]
    assert not any("look like instruments" in c or "stream=" in c for c in replay.cautions), replay.cautions
    # order types spelled out under a name detection does not know
    words = tmp_path / "BTCUSD-fills.csv"
    words.write_text("time,price,qty,kind_of_order\n" + "".join(
        f"{t0 * 1000 + i},42000.5,1,{('Market', 'limit', 'STOP_LIMIT')[i % 3]}\n" for i in range(30)))
    replay = FileReplay(words)
    assert len(drain(replay)) == 30
    assert not any("look like instruments" in c for c in replay.cautions), replay.cautions


def test_a_sierra_chart_export_names_its_stream_without_the_suffix_and_no_price_column_as_instruments(
        tmp_path: Path) -> None:
    """Review242 (finding 3): Sierra Chart's text export separates cells with `, `, so every number is text with a
    space before it; the run warned that `Open` (6850.25, 6850.50, ...) looked like instruments and offered
    --columns stream=Open, and the stream was `ESZ26-CME.scid_BarData`, the export suffix left in."""
    start = datetime(2026, 11, 30, 8, 30)
    rows = "".join(f"{start + timedelta(seconds=i):%Y/%m/%d}, {start + timedelta(seconds=i):%H:%M:%S}.000, "
                   f"{6850 + i % 4 * 0.25:.2f}, {6850.25 + i % 4 * 0.25:.2f}, {6850 + i % 4 * 0.25:.2f}, "
                   f"{6850 + i % 4 * 0.25:.2f}, {1 + i % 9}, 1, 0, 1\n" for i in range(60))
    header = "Date, Time, Open, High, Low, Last, Volume, NumberOfTrades, BidVolume, AskVolume\n"
    for name in ("ESZ26-CME.scid_BarData.txt", "ESZ26-CME.dly_BarData.txt"):
        (tmp_path / name).write_text(header + rows)
        replay = FileReplay(tmp_path / name, columns={"tz": "America/Chicago"})
        ticks = drain(replay)
        assert len(ticks) == 60 and {t.stream for t in ticks} == {"ESZ26-CME"}
        assert [t.price for t in ticks[:4]] == [6850.0, 6850.25, 6850.5, 6850.75]
        assert not any("look like instruments" in c or "stream=Open" in c for c in replay.cautions), replay.cautions
    # a code column written as text with a space before it still names instruments under its name
    codes = tmp_path / "two_codes.csv"
    codes.write_text("timestamp, Code, price, size\n" + "".join(
        f"2026-03-10T09:00:{i:02d}, {(7203, 9434)[i % 2]}, {(3450, 988)[i % 2] + i}, 100\n" for i in range(10)))
    replay = FileReplay(codes)
    assert {t.stream for t in drain(replay)} == {"7203", "9434"}


@pytest.mark.parametrize("folder", ["hk", "XHKG", "HKEX", "TSE", "JPX", "Tokyo", "TSE/2024-06-03", "stocks"])
@pytest.mark.parametrize("spec", [None, "binance-trades"])
def test_a_numeric_file_name_is_its_stock_whatever_folder_holds_it(tmp_path: Path, folder: str, spec) -> None:
    """review 174, finding 1: only a list of upper-case exchange codes (HK, JT, ...) was known, so in `hk/`,
    `XHKG/`, `TSE/2024-06-03/` every stock of the folder was one stream, the folder's (or --preset's BTCUSDT)."""
    paths = [capture_trades(tmp_path / folder / "0700.csv", 380.0), capture_trades(tmp_path / folder / "0005.csv",
                                                                                   65.0)]
    replay = FileReplay(paths, columns=spec)
    assert {t.stream for t in drain(replay)} == {"0700", "0005"}, replay.notes
    assert not replay.cautions and not any("BTCUSDT" in n for n in replay.notes), replay.notes


def test_a_numeric_file_name_in_a_date_s_shape(tmp_path: Path) -> None:
    """A code in a date's shape is one in an exchange's folder or beside a code; alone it may be a day's file, and
    the numbered files of a pair's folder are its parts: the folder names them."""
    for name in ("hk/2020.csv", "stocks/2020.csv"):
        capture_trades(tmp_path / "stocks" / "0700.csv", 380.0)
        assert {t.stream for t in drain(FileReplay(capture_trades(tmp_path / name, 8.5)))} == {"2020"}
    assert {t.stream for t in drain(FileReplay(capture_trades(tmp_path / "AAPL" / "2024" / "0102.csv", 185.0)))} \
        == {"AAPL"}
    parts = [capture_trades(tmp_path / "ETHUSDT" / f"{n:03d}.csv", 2650.0) for n in (0, 1, 700)]
    assert {t.stream for t in drain(FileReplay(parts))} == {"ETHUSDT"}


def test_a_symbol_column_names_the_stream_over_a_numeric_file_name(tmp_path: Path) -> None:
    path = tmp_path / "XHKG" / "0700.csv"
    path.parent.mkdir()
    path.write_text("Time,Symbol,Price,Volume\n" + "".join(
        f"2024-06-03 09:30:{i:02d}.5,{('0700', '0005')[i % 2]},{(380.0, 65.0)[i % 2]},100\n" for i in range(12)))
    assert {t.stream for t in drain(FileReplay(path))} == {"0700", "0005"}


def moex_trades(header: str = "TRADENO;TRADEDATE;TRADETIME;SECID;SHORTNAME;PRICE;QUANTITY;BUYSELL\n") -> str:
    """MOEX ISS's trades as its CSV export writes them: `;`, a decimal comma, two SECIDs interleaved, B/S sides."""
    rows = "".join(f"{9000 + i};2024-01-03;10:00:{i:02d};{('SBER', 'LKOH')[i % 2]};{('Sber', 'Lukoil')[i % 2]};"
                   f"{('271,45', '6890,50')[i % 2]};{i + 1};{'BS'[i // 2 % 2]}\n" for i in range(12))
    return header + rows


def test_moex_secid_names_the_streams_and_buysell_the_sides(tmp_path: Path) -> None:
    """review231 #2, #4: SECID was no stream column (SBER at 271 and LKOH at 6890 replayed as one series, with a
    caution), and BUYSELL was left unread and proposed as the instrument column (--columns stream=BUYSELL)."""
    path = tmp_path / "moex_trades_20240103.csv"
    path.write_text(moex_trades())
    replay = FileReplay(path, columns={"ts": "TRADEDATE+TRADETIME", "tz": "Europe/Moscow"})
    ticks = drain(replay)
    assert {t.stream for t in ticks} == {"SBER", "LKOH"}
    assert [t.price for t in ticks if t.stream == "LKOH"] == [6890.5] * 6
    assert [t.side for t in ticks][:4] == ["buy", "buy", "sell", "sell"]
    assert not any("look like instruments" in n or "stream=BUYSELL" in n for n in replay.notes)
    # QUIK's exports spell it SECCODE
    (tmp_path / "quik.csv").write_text(moex_trades().replace("SECID", "SECCODE", 1))
    assert {t.stream for t in drain(FileReplay(tmp_path / "quik.csv", columns={"ts": "TRADEDATE+TRADETIME"}))} == \
        {"SBER", "LKOH"}


def upbit_trades(markets: tuple[str, ...] = ("KRW-BTC", "KRW-ETH")) -> list[dict]:
    """Upbit's /v1/trades/ticks records, newest first: `market` names the pair, `ask_bid` the taker's order side."""
    rows = [{"market": markets[i % len(markets)], "timestamp": 1704153600000 + i * 10,
             "trade_price": (58_000_000.0, 3_187_000.0)[i % 2] + i, "trade_volume": 0.5,
             "ask_bid": ("ASK", "BID", "BID")[i % 3], "sequential_id": i} for i in range(12)]
    return rows[::-1]


def test_upbit_market_names_the_streams_and_ask_bid_the_sides(tmp_path: Path) -> None:
    """review231 #2, #4: a two-market Upbit dump was refused as naming no instrument (whose suggested stream_name
    merged the markets); ask_bid was unread and proposed as the instrument column. ASK: the taker sold."""
    path = tmp_path / "upbit_trades_20240102.json"
    path.write_text(json.dumps(upbit_trades()))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert {t.stream for t in ticks} == {"KRW-BTC", "KRW-ETH"}
    assert [t.side for t in ticks][:6] == ["sell", "buy", "buy", "sell", "buy", "buy"]
    assert [t.price for t in ticks if t.stream == "KRW-ETH"][:2] == [3_187_001.0, 3_187_003.0]
    assert not any("look like instruments" in n for n in replay.notes)
    # a `market` of venues is not the stream: the file's name is
    venue = tmp_path / "KRW-BTC_trades.json"
    venue.write_text(json.dumps(upbit_trades(("UPBIT",))))
    assert {t.stream for t in drain(FileReplay(venue))} == {"KRW-BTC"}


def bithumb_history(types: list[str]) -> str:
    """Bithumb's public transaction_history response: KST text times, numbers as text, `type` bid or ask."""
    rows = [{"transaction_date": f"2024-01-02 09:00:{i:02d}", "type": kind, "units_traded": f"0.{i + 1:04d}",
             "price": f"{58_010_000 + 1000 * (i % 3)}", "total": "0"} for i, kind in enumerate(types)]
    return json.dumps({"status": "0000", "data": rows})


def test_bithumb_type_of_bid_and_ask_is_the_takers_side_and_other_types_stay_unread(tmp_path: Path) -> None:
    """review231: Bithumb's `type` (bid: the taker bought, ask: the taker sold) needed `side=type` with a side_map;
    a `type` of bid and ask alone is read as that side now, with a note. A `type` of other values (order types, or
    kinds of rows of which bid and ask are two) is read as before: no side."""
    path = tmp_path / "bithumb_BTC_KRW.json"
    path.write_text(bithumb_history(["bid", "ask", "ask", "bid", "ask", "bid"]))
    columns = {"ts": "transaction_date", "size": "units_traded", "tz": "Asia/Seoul"}
    replay = FileReplay(path, columns=columns)
    ticks = drain(replay)
    assert [t.side for t in ticks] == ["buy", "sell", "sell", "buy", "sell", "buy"]
    assert ticks[0].ts == int(datetime.fromisoformat("2024-01-02T00:00:00+00:00").timestamp()) * 10**9
    assert ticks[0].size == 0.0001
    assert any("column \"type\" holds bid and ask alone: read as the taker's side" in n for n in replay.notes)
    for other in (["limit", "market", "limit"], ["bid", "ask", "trade", "trade"]):
        path.write_text(bithumb_history(other))
        replay = FileReplay(path, columns=columns)
        assert {t.side for t in drain(replay)} == {None}
        assert not any("taker's side" in n for n in replay.notes)


def test_bithumb_transaction_history_as_its_api_writes_it_reads_without_a_map(tmp_path: Path) -> None:
    """review250: Bithumb's transaction history (transaction_date, type, units_traded, price, total, as its API
    reference documents the response) was refused ("no time column"), and with its time mapped every trade had size
    1: `transaction_date` holding date-times is the time and `units_traded` beside it the size. Its times are Korea
    time: the UTC note names --tz Asia/Seoul. A bare-date `transaction_date` (an account statement's) is no time,
    and `units_traded` beside another time (Bithumb's ticker: a running total) is no trade's size."""
    path = tmp_path / "bithumb_BTC_KRW.json"
    path.write_text(bithumb_history(["bid", "ask", "ask", "bid", "ask", "bid"]))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [t.size for t in ticks] == [0.0001, 0.0002, 0.0003, 0.0004, 0.0005, 0.0006]
    assert [t.side for t in ticks] == ["buy", "sell", "sell", "buy", "sell", "buy"]
    assert ticks[0].ts == int(datetime.fromisoformat("2024-01-02T09:00:00+00:00").timestamp()) * 10**9
    assert any("carry no UTC offset" in n and "--tz Asia/Seoul" in n for n in replay.notes), replay.notes
    korea = drain(FileReplay(path, columns={"tz": "Asia/Seoul"}))
    assert korea[0].ts == int(datetime.fromisoformat("2024-01-02T00:00:00+00:00").timestamp()) * 10**9
    csv = tmp_path / "bithumb_ETH_KRW.csv"
    csv.write_text("transaction_date,type,units_traded,price,total\n"
                   "2022-02-08 23:28:13,bid,0.0034,53221000,180951\n2022-02-08 23:28:40,bid,0.0312,53219000,1660432\n"
                   "2022-02-08 23:29:02,ask,0.12,53218000,6386160\n")
    assert [(t.size, t.side) for t in drain(FileReplay(csv))] == [(0.0034, "buy"), (0.0312, "buy"), (0.12, "sell")]
    statement = tmp_path / "statement.csv"
    statement.write_text("transaction_date,units_traded,price\n2022-02-08,3,101.5\n2022-02-09,2,101.7\n")
    with pytest.raises(ValueError, match="no time column"):
        FileReplay(statement)
    ticker = tmp_path / "ticker.csv"
    ticker.write_text("timestamp,price,units_traded\n2022-02-08 23:28:13,101.5,1500.2\n"
                      "2022-02-08 23:28:14,101.6,1500.9\n")
    assert {t.size for t in drain(FileReplay(ticker))} == {1.0}


def test_a_rest_dump_refused_names_the_column_of_instruments(tmp_path: Path) -> None:
    """A dump whose records name their instruments under no known name: the refusal names that column, never a
    fixed stream name that would merge them."""
    path = tmp_path / "trades.json"
    path.write_text(json.dumps([{("issue" if k == "market" else k): v for k, v in r.items()} for r in upbit_trades()]))
    with pytest.raises(ValueError, match=r'column "issue" holds several values .* --columns stream=issue') as e:
        FileReplay(path)
    assert "stream_name" not in str(e.value)


def test_a_suggested_column_that_needs_quoting_is_quoted_to_paste(tmp_path: Path) -> None:
    """Review248 #9: a Nord Pool-style file's caution proposed `--columns stream=Delivery Start (CET)`, a shell
    syntax error when pasted (a space, parentheses). Every suggested --columns is now one shell word
    (connectors/shell_words.py), and pasted as printed it reads a stream per delivery period."""
    import shlex

    from connectors.map_options import map_from_options

    path = tmp_path / "nordpool.csv"
    path.write_text("Trade Time (CET);Delivery Start (CET);Delivery End (CET);Price (EUR);Volume (MW);Trade ID\n" +
                    "".join(f"2024-03-30 08:{i:02d}:00;2024-03-30 {10 + i % 4}:00:00;2024-03-30 {11 + i % 4}:00:00;"
                            f"{110 + i % 4 * 5 + i % 3 / 10:.2f};1.5;{9000 + i}\n" for i in range(40)))
    caution = next(n for n in FileReplay(path).cautions if "look like instruments" in n)
    assert "give --columns 'stream=Delivery Start (CET)' (a stream per value" in caution, caution
    words = shlex.split(caution.split("give ")[1].split(" (a stream")[0])
    assert words == ["--columns", "stream=Delivery Start (CET)"]
    streams = {t.stream for t in drain(FileReplay(path, columns=map_from_options(columns=words[1], detect=True)))}
    assert len(streams) == 4


def test_integer_codes_of_mixed_widths_are_cautioned_as_shorn_of_their_zeros(tmp_path: Path) -> None:
    """review433 #1: a vendor's CSV saved again by pandas holds `code` 1, 300750, 600519 as numbers; the stream
    `1` (000001 shorn of its zeros) was read without a word. Codes of one width (JPX's 7203, 9434) are not said."""
    rows = {"time": [f"2024-12-02 09:30:0{i}" for i in range(6)], "price": [11.5, 180.3, 1688.0] * 2}
    for codes, said in (([1, 300750, 600519], True), ([7203, 9434, 6758], False)):
        path = tmp_path / f"codes_{said}.parquet"
        pl.DataFrame({"code": codes * 2, **rows}).write_parquet(path)
        replay = FileReplay(path, columns={"tz": "Asia/Shanghai"})
        assert {t.stream for t in drain(replay)} == set(map(str, codes))
        shorn = [n for n in replay.notes if "holds numbers, not text" in n]
        assert len(shorn) == int(said) and all(isinstance(n, Caution) for n in shorn), replay.notes
        assert not said or f'column "code", the streams, holds numbers, not text: codes of 1 to 6 digits (1, ..., ' \
            f"600519)" in shorn[0]


def test_an_ice_commodity_beside_its_contract_months_names_the_streams(tmp_path: Path) -> None:
    """ICE's `Commodity`, `Contract Month` (Brent Jan25 and Feb25 trading at once): the advice named streams `Jan25`
    and `Feb25`, which would merge Brent's Jan25 with WTI's (review441 #5). The commodity is the product it is."""
    rows = [f"25/11/2024 08:00:{i // 2:02d},Brent,{'Feb25' if i % 2 else 'Jan25'},"
            f"{73.0 - 0.35 * (i % 2) + i // 2 % 2 * 0.01:.2f},{i + 1}" for i in range(40)]
    (tmp_path / "ice_brent.csv").write_text("Trade Date/Time,Commodity,Contract Month,Price,Quantity\n" +
                                            "\n".join(rows) + "\n")
    replay = FileReplay(tmp_path / "ice_brent.csv", columns={"ts": "Trade Date/Time"})
    assert {t.stream for t in drain(replay)} == {"Brent Jan25", "Brent Feb25"}
    # at one price level the months name no streams, but the advice that would keeps the commodity
    (tmp_path / "ice_brent.csv").write_text("Trade Date/Time,Commodity,Contract Month,Price,Quantity\n" + "\n".join(
        f"25/11/2024 08:00:{i // 2:02d},Brent,{'Feb25' if i % 2 else 'Jan25'},73.0{i % 3},1" for i in range(40)))
    (caution,) = FileReplay(tmp_path / "ice_brent.csv", columns={"ts": "Trade Date/Time"}).cautions
    assert "give --columns 'stream=Commodity+Contract Month'" in caution, caution
