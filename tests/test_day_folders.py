"""Per-day folders of a capture (`BTCUSDT/2024-08-08/trades.csv`): a detected file's stream was named after its
date folder, so two days of one instrument were two streams, each day a fresh session and its own scores (review
115, finding 2). A day's folder is skipped for the one above it, in a plain file's path and a zip's alike."""

from __future__ import annotations

import zipfile
from pathlib import Path

import polars as pl
import pytest

from engine.quoting import quoted

from connectors.day_folders import folder_chain, is_day_folder, is_kind_folder
from connectors.replay import FileReplay

T0 = 1_723_161_254_087_896_567
DAYS = ("2024-08-08", "2024-08-09")


def capture_days(top: Path) -> list[Path]:
    """Our Binance capture's trades.csv (no symbol column), one a day, in top/DAY/."""
    paths = []
    for day, day_start in zip(DAYS, (T0, T0 + 86_400 * 10**9)):
        (top / day).mkdir(parents=True)
        pl.DataFrame({"local_ts_ns": [day_start + i for i in range(3)], "price": [61828.25, 61828.5, 61828.0],
                      "qty": [0.01] * 3, "aggressor_side": ["sell", "buy", "sell"]}).write_csv(top / day / "trades.csv")
        paths.append(top / day / "trades.csv")
    return paths


def streams_of(replay: FileReplay) -> set[str]:
    streams = set()
    while not replay.done:
        streams |= {t.stream for t in replay.next_batch(64)}
    return streams


def test_two_days_of_one_instrument_are_one_stream_named_by_the_folder_above_them(tmp_path: Path) -> None:
    replay = FileReplay(capture_days(tmp_path / "BTCUSDT"))
    assert streams_of(replay) == {"BTCUSDT"}
    # (said once for the two days' files: review284 #6)
    assert any(n.startswith('2 files: stream BTCUSDT, from the folder name "BTCUSDT" (--columns '
                            "stream_name=NAME to name it otherwise) (") and n.endswith("2024-08-09/trades.csv)")
               for n in replay.notes), replay.notes


def test_without_an_instrument_the_days_share_the_folder_above_them_and_no_other_symbol_is_proposed(
        tmp_path: Path) -> None:
    replay = FileReplay(capture_days(tmp_path / "session7"))  # (`capture/` says what it holds: passed over)
    assert streams_of(replay) == {"session7"}
    said = [n for n in replay.notes if "the name of its folder" in n]
    assert said[0].endswith(
        '2024-08-08/trades.csv: stream session7, the name of its folder above the day folder(s) "2024-08-08": no '
        "symbol column, and neither the file's name nor its folder's names an instrument (the files of one folder "
        "are one stream, its days' folders' files too; --columns stream_name=NAME names it, NAME the instrument's "
        "symbol)")
    assert not any("ETHUSDT" in n for n in replay.notes)


def test_a_zip_in_a_day_folder_keeps_the_instrument_folder_above_it(tmp_path: Path) -> None:
    for path in capture_days(tmp_path / "ETHUSDT"):
        with zipfile.ZipFile(path.with_suffix(".zip"), "w") as archive:
            archive.write(path, "trades.csv")
        path.unlink()
    replay = FileReplay([tmp_path / "ETHUSDT" / day / "trades.zip" for day in DAYS])
    assert streams_of(replay) == {"ETHUSDT"}
    replay.close()


@pytest.mark.parametrize("name, day", [("2024-08-08", True), ("20240808", True), ("08", True),
                                       ("date=2024-08-08", True), ("2024-Aug-08", True), ("08aug2024", True),
                                       ("BTCUSDT", False), ("capture", False), ("symbol=BTCUSDT", False),
                                       ("aug-data", False)])
def test_day_folder_names(name: str, day: bool) -> None:
    assert is_day_folder(name) is day


def test_folder_chain_stops_at_the_named_folder(tmp_path: Path) -> None:
    assert folder_chain(tmp_path / "BTCUSDT" / "2024" / "08" / "x.zip") == ("BTCUSDT", "2024", "08")
    assert folder_chain(tmp_path / "BTCUSDT" / "trades" / "x.zip") == ("BTCUSDT", "trades")
    assert folder_chain(tmp_path / "x.zip") == (tmp_path.name,)


def kind_folder_days(top: Path, kind: str) -> list[Path]:
    """The same capture laid out as top/KIND/DAY.csv: a folder per kind of data, a file per day."""
    (top / kind).mkdir(parents=True)
    paths = []
    for path in capture_days(top / "days"):
        paths.append(path.rename(top / kind / f"{path.parent.name}.csv"))
    return paths


def test_a_folder_named_for_the_kind_of_data_is_skipped_like_a_day_folder(tmp_path: Path) -> None:
    """`BTCUSDT/trades/2024-08-08.csv` was read as stream `trades`: the folder says what the files hold, not which
    instrument, so the one above it names the stream, as above a day's folder."""
    replay = FileReplay(kind_folder_days(tmp_path / "BTCUSDT", "trades"))
    assert streams_of(replay) == {"BTCUSDT"}
    assert any(n.startswith('2 files: stream BTCUSDT, from the folder name "BTCUSDT" (--columns '
                            "stream_name=NAME to name it otherwise) (") and n.endswith("2024-08-09.csv)")
               for n in replay.notes), replay.notes
    replay = FileReplay(kind_folder_days(tmp_path / "session7", "type=quotes"))
    assert streams_of(replay) == {"session7"}
    said = [n for n in replay.notes if "the name of its folder" in n]
    assert said[0] == ("2 files: stream session7, the name of its folder above the day or data-kind "
                       "folder(s) \"type=quotes\": no symbol column, and neither the file's name nor its folder's "
                       "names an instrument (the files of one folder are one stream, its days' folders' files "
                       "too; --columns stream_name=NAME names it, NAME the instrument's symbol) (2024-08-08.csv, "
                       "2024-08-09.csv)"), said


@pytest.mark.parametrize("name, kind", [("trades", True), ("Quotes", True), ("bbo", True), ("book", True),
                                        ("ticks", True), ("aggTrades", True), ("type=trades", True),
                                        ("BTCUSDT", False), ("capture", False), ("trades_and_quotes", False),
                                        ("2024-08-08", False)])
def test_data_kind_folder_names(name: str, kind: bool) -> None:
    assert is_kind_folder(name) is kind


@pytest.mark.parametrize("name, day", [("0700", False), ("7203", False), ("005930", False), ("600519", False),
                                       ("2024", True), ("202408", True), ("240808", True), ("0808", True),
                                       ("code=0700", False), ("123", True)])
def test_a_folder_of_digits_is_a_day_s_only_in_a_date_s_shape(name: str, day: bool) -> None:
    assert is_day_folder(name) is day


def test_a_stock_code_s_folder_above_its_days_names_the_stream(tmp_path: Path) -> None:
    """`0700/2024-05-01/trades.csv` beside `0005/...`: the code folders had no letters, so were skipped as days, and
    every stock merged into one stream named after the folder above (review 174, finding 2)."""
    paths = [*capture_days(tmp_path / "0700"), *capture_days(tmp_path / "0005")]
    for spec in (None, "binance-trades"):
        replay = FileReplay(paths, columns=spec)
        assert streams_of(replay) == {"0700", "0005"}, replay.notes
        assert any(n.startswith('2 files: stream 0700, from the folder name "0700", a stock code (--columns '
                                "stream_name=NAME to name it otherwise) (") for n in replay.notes), replay.notes
    # a year's shape is a code beside one (2020 is ANTA Sports beside Tencent); alone it is a year
    assert streams_of(FileReplay([*paths, *capture_days(tmp_path / "2020")])) == {"0700", "0005", "2020"}
    assert streams_of(FileReplay(capture_days(tmp_path / "BTCUSDT" / "2024"))) == {"BTCUSDT"}


def test_a_data_lakes_partitions_by_symbol_name_the_streams_whatever_their_shape(tmp_path: Path) -> None:
    # symbol=0700/date=.../part-0.parquet: Hive drops the partition's column from the files, so its folder names
    # them; read by its tokens a numeric code named nothing and every code's files were one stream `part-0`
    paths = []
    for key, symbol in (("symbol", "0700"), ("symbol", "0005"), ("ticker", "AAPL"), ("instrument", "ES.c.0")):
        for day, day_start in zip(DAYS, (T0, T0 + 86_400 * 10**9)):
            folder = tmp_path / "lake" / f"{key}={symbol}" / f"date={day}"
            folder.mkdir(parents=True)
            pl.DataFrame({"ts": [day_start + i for i in range(3)], "price": [10.0, 10.5, 10.25],
                          "size": [1.0] * 3}).write_parquet(folder / "part-0.parquet")
            paths.append(folder / "part-0.parquet")
    replay = FileReplay(paths)
    assert streams_of(replay) == {"0700", "0005", "AAPL", "ES.c.0"}
    assert any('stream 0700, from the folder name "symbol=0700", a partition by symbol' in n for n in replay.notes)


@pytest.mark.parametrize(("folder", "name", "stream", "left_out"), [
    ("delta_btc", "trades.csv", "BTC", "delta"), ("btc_delta", "trades.csv", "BTC", "delta"),
    ("bars_eth", "trades.csv", "ETH", "bars"), ("ticks-sol", "trades.csv", "SOL", "ticks"),
    ("delta_BTC", "part.csv", "BTC", "delta"), ("x", "delta_btc.csv", "BTC", "delta"),
    ("x", "raw-SOL.csv", "SOL", "raw"), ("x", "quotes_AAPL.csv", "AAPL", None),
    ("raw_btcusdt", "trades.csv", "BTCUSDT", None), ("data-eurusd", "trades.csv", "EURUSD", None),
    ("fills_lake", "trades.csv", "trades", None)])
def test_words_of_what_the_data_is_are_no_part_of_the_stream_name(tmp_path: Path, folder: str, name: str,
                                                                   stream: str, left_out: str | None) -> None:
    """fix302 #5: a folder `delta_btc` read as the pair `DELTA-BTC` (and `bars_eth` as `BARS-ETH`; `btc_delta` and
    `ticks-sol` as the file's stem, `trades`): words that say what the data is are left out around the symbol, and
    the note says which. A word naming no asset beside them (`fills`) is no symbol: the folder names none."""
    path = tmp_path / folder / name
    path.parent.mkdir()
    path.write_text("ts,price,size\n" + "".join(f"{1704153600000 + i * 1000},{100 + i / 10:.2f},1\n" for i in range(5)))
    replay = FileReplay(path)
    assert streams_of(replay) == {stream}
    if left_out is not None:
        assert any(f"stream {stream}, from the " in n and f"{quoted(left_out)} left out: what the data is" in n
                   for n in replay.notes), replay.notes


def _capture(folder: Path) -> list[Path]:
    """The review's layout: a Binance capture's trades.csv and bbo.parquet (no symbol column) in ``folder``."""
    folder.mkdir(parents=True)
    pl.DataFrame({"local_ts_ns": [T0, T0 + 2], "price": [61828.25, 61828.5], "qty": [0.01, 0.02],
                  "aggressor_side": ["sell", "buy"]}).write_csv(folder / "trades.csv")
    pl.DataFrame({"local_ts_ns": [T0 + 1], "bid_px": [61828.0], "bid_qty": [1.5], "ask_px": [61828.5],
                  "ask_qty": [0.7]}).write_parquet(folder / "bbo.parquet")
    return [folder / "trades.csv", folder / "bbo.parquet"]


def test_a_folder_named_by_what_its_data_is_is_passed_over_for_the_one_above(tmp_path: Path, monkeypatch) -> None:
    """review321 #1: `review321/data/trades.csv` and `bbo.parquet` were stream `data`, though docs/replay.md leaves
    `data` out of a file's or folder's name (a word of what the data is, never an instrument). Such a folder is
    passed over as a day's is: the folder above it names the stream, an instrument's folder is found as one, and
    when only the user's home folder (or one under the root) is left, the note says nothing names an instrument
    and how to name it."""
    replay = FileReplay(_capture(tmp_path / "review321" / "data"))
    assert streams_of(replay) == {"review321"}
    assert ('2 files: stream review321, the name of its folder above the day or data-kind folder(s) "data": no '
            "symbol column, and neither the file's name nor its folder's names an instrument") in "\n".join(
        replay.notes), replay.notes
    assert any("a flashtick before 0.2.0 named it data or the preset's default: CHANGELOG.md)" in n
               for n in replay.notes), replay.notes  # (an upgrade's renamed topics, told)

    replay = FileReplay(_capture(tmp_path / "ETHUSDT" / "raw_data"))
    assert streams_of(replay) == {"ETHUSDT"}
    assert any('stream ETHUSDT, from the folder name "ETHUSDT"' in n for n in replay.notes), replay.notes

    monkeypatch.setenv("HOME", str(tmp_path / "alice"))  # ~/data/: past `data/` is the user's home, no instrument
    replay = FileReplay(_capture(tmp_path / "alice" / "data"))
    assert streams_of(replay) == {"data"}
    assert any(n.startswith("2 files: stream data, for want of a name: no symbol column, and nothing in its path "
                            "names an instrument") and "--columns stream_name=NAME names it" in n
               for n in replay.notes), replay.notes
    named = FileReplay(tmp_path / "alice" / "data" / "trades.csv", columns={"stream": "BTCUSDT"})
    assert streams_of(named) == {"BTCUSDT"}
