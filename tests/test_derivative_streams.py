"""A derivatives market's instrument is a stream of its own beside the spot pair of the same name (review310 #4):
Binance USD-M's BTCUSDT replays as BTCUSDT_PERP wherever the input says which market it is, names that already say
their contract are kept, spot names never change, and a fixed stream given merges on purpose. Every fixture is
written here, from code, into tmp_path."""

from __future__ import annotations

from pathlib import Path

from conftest import drain
from connectors.derivative_streams import derivative_name
from connectors.replay import FileReplay

SPOT_TRADES = "4500000000,42500.1,0.053,2252.5,1704153601000,true,true\n"  # data.binance.vision spot, no header
FUTURES_TRADES = "1,42510.1,0.5,21255.05,1704153601100,false\n"  # its USD-M trades: no is_best_match


def test_the_naming_rule_keeps_names_that_say_their_contract() -> None:
    assert derivative_name("BTCUSDT") == "BTCUSDT_PERP"
    assert derivative_name("BTCUSDT_PERP") == "BTCUSDT_PERP"
    for kept in ("BTCUSD_PERP", "BTCUSDT_240329", "BTC-PERPETUAL", "BTC-USD-SWAP", "BTC-29MAR24",
                 "BTC-27DEC24-60000-C", "BTC-240329-40000-P", "BTCUSDH24", "PF_XBTUSD"):
        assert derivative_name(kept) == kept


def test_binance_usdm_files_are_a_stream_apart_from_spot(tmp_path: Path) -> None:
    spot = tmp_path / "spot" / "daily" / "trades" / "BTCUSDT"
    um = tmp_path / "futures" / "um" / "daily" / "trades" / "BTCUSDT"
    cm = tmp_path / "futures" / "cm" / "daily" / "trades" / "BTCUSD_PERP"
    for folder in (spot, um, cm):
        folder.mkdir(parents=True)
    (spot / "BTCUSDT-trades-2024-01-02.csv").write_text(SPOT_TRADES)
    (um / "BTCUSDT-trades-2024-01-02.csv").write_text(FUTURES_TRADES)
    (cm / "BTCUSD_PERP-trades-2024-01-02.csv").write_text("1,42490.5,3,0.007,1704153601200,true\n")
    files = [spot / "BTCUSDT-trades-2024-01-02.csv", um / "BTCUSDT-trades-2024-01-02.csv",
             cm / "BTCUSD_PERP-trades-2024-01-02.csv"]
    replay = FileReplay(files)
    ticks = drain(replay)
    assert {(t.stream, t.price) for t in ticks} == {("BTCUSDT", 42500.1), ("BTCUSDT_PERP", 42510.1),
                                                    ("BTCUSD_PERP", 42490.5)}
    assert any("stream BTCUSDT_PERP, not BTCUSDT" in n and "stream_name=BTCUSDT" in n for n in replay.notes)
    assert not any("venues" in n for n in replay.notes)  # no longer one stream of two markets
    # the header-less USD-M layout says its market without the folder too (the binance-futures-trades preset)
    (tmp_path / "BTCUSDT-trades-2024-01-03.csv").write_text(FUTURES_TRADES)
    assert {t.stream for t in drain(FileReplay(tmp_path / "BTCUSDT-trades-2024-01-03.csv"))} == {"BTCUSDT_PERP"}


def test_tardis_rows_are_named_by_their_exchange(tmp_path: Path) -> None:
    (tmp_path / "mixed.csv").write_text(
        "exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n"
        "binance,BTCUSDT,1704153601000000,1704153601100000,1,buy,42500.1,0.5\n"
        "binance-futures,BTCUSDT,1704153601100000,1704153601200000,2,sell,42510.1,0.5\n"
        "binance-futures,BTCUSDT_240329,1704153601150000,1704153601250000,3,buy,43010.0,0.1\n"
        "bybit,BTCUSDT,1704153601200000,1704153601300000,4,buy,42511.0,0.2\n"
        "bybit,BTCUSDH24,1704153601210000,1704153601310000,5,buy,43020.0,100\n"
        "bybit-spot,ETHUSDT,1704153601220000,1704153601320000,6,buy,2350.5,1\n"
        "deribit,BTC-PERPETUAL,1704153601300000,1704153601400000,7,sell,42505.0,10\n"
        "okex-swap,BTC-USD-SWAP,1704153601400000,1704153601500000,8,buy,42506.0,1\n")
    assert [t.stream for t in drain(FileReplay(tmp_path / "mixed.csv"))] == [
        "BTCUSDT", "BTCUSDT_PERP", "BTCUSDT_240329", "BTCUSDT_PERP", "BTCUSDH24", "ETHUSDT", "BTC-PERPETUAL",
        "BTC-USD-SWAP"]
    # a Tardis.dev file's name says its exchange too
    (tmp_path / "binance-futures_trades_2024-01-02_BTCUSDT.csv").write_text(
        "exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n"
        "binance-futures,BTCUSDT,1704153601100000,1704153601200000,2,sell,42510.1,0.5\n")
    replay = FileReplay(tmp_path / "binance-futures_trades_2024-01-02_BTCUSDT.csv")
    assert [t.stream for t in drain(replay)] == ["BTCUSDT_PERP"]
    assert any("a binance-futures file, a derivatives market" in n for n in replay.notes)


def test_a_fixed_stream_given_merges_on_purpose(tmp_path: Path) -> None:
    (tmp_path / "BTCUSDT-trades-2024-01-02.csv").write_text(SPOT_TRADES)
    (tmp_path / "BTCUSDT-trades-2024-01-03.csv").write_text(FUTURES_TRADES.replace("1704153601100", "1704240001100"))
    (tmp_path / "tardis.csv").write_text(
        "exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n"
        "binance-futures,BTCUSDT,1704326401100000,1704326401200000,2,sell,42510.1,0.5\n")
    (tmp_path / "list.yaml").write_text("replay:\n"
                                        "  - {path: BTCUSDT-trades-2024-01-02.csv}\n"
                                        "  - {path: BTCUSDT-trades-2024-01-03.csv, columns: {stream: BTCUSDT}}\n"
                                        "  - {path: tardis.csv, columns: {stream: BTCUSDT}}\n")
    replay = FileReplay(tmp_path / "list.yaml")
    assert [t.stream for t in drain(replay)] == ["BTCUSDT"] * 3
    # the merge is still said: files of two venues feed it
    assert any(n.startswith("stream BTCUSDT is fed by files of 2 venues") for n in replay.notes)
