"""Any tick file a user has: column maps inline or in YAML, header-less CSV, timestamp units and time zones,
Databento DBN (MBO, MBP-1) written with databento-dbn's own encoder, and the config's replay section.
Every fixture is a real file written here into tmp_path."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from engine.quoting import quoted

from conftest import drain, engine_dir, shared_tiny_tick_checkpoint
from connectors.column_map import ColumnMap
from connectors.map_options import map_from_options, parse_inline
from connectors.replay import FileReplay, replay_ticks
from engine.service.cli import main
from engine.service.config import ConfigError, ServiceConfig
from test_vendor_files_without_options import MBO_TICKS, book_ticks  # the same records exported as CSV reduce alike

QUERIES = "queries:\n  - {name: dir20, streams: ['*'], question: direction_20, kind: choice, trigger: {ticks: 5}}\n"
NS = 1_000_000_000


@pytest.fixture(scope="module")
def engine_files(tmp_path_factory) -> Path:
    """engine.yaml (the tiny tick model, built once a worker: the backtests here only read it) and q.yaml."""
    return engine_dir(tmp_path_factory.mktemp("formats"), QUERIES,
                      checkpoint=shared_tiny_tick_checkpoint(tmp_path_factory))


def vendor_trades(n: int = 120) -> pl.DataFrame:
    """A vendor layout of our own: ms epoch time, px/qty/side in words, two symbols."""
    t0 = 1_717_236_000_000  # 2024-06-01 10:00 UTC, in ms
    return pl.DataFrame({
        "time": [t0 + 250 * i for i in range(n)],
        "symbol": ["ESM4" if i % 3 else "NQM4" for i in range(n)],
        "px": [5300.0 + (i % 7) * 0.25 for i in range(n)],
        "qty": [1.0 + i % 4 for i in range(n)],
        "side": ["B" if i % 2 else "S" for i in range(n)],
    })


def test_inline_column_map_on_the_command_line(engine_files: Path, tmp_path: Path, capsys) -> None:
    vendor_trades().write_csv(tmp_path / "trades.csv")
    code = main(["backtest", str(tmp_path / "trades.csv"), "--queries", str(engine_files / "q.yaml"),
                 "--out", str(tmp_path / "a.parquet"), "--config", str(engine_files / "engine.yaml"), "--quiet",
                 "--columns", "ts=time,price=px,size=qty,stream=symbol", "--ts-unit", "ms"])
    assert code == 0, capsys.readouterr().err
    table = pl.read_parquet(tmp_path / "a.parquet")
    assert set(table["stream"]) == {"ESM4", "NQM4"}
    assert "replayed 120 ticks (0 rejected)" in capsys.readouterr().out
    assert parse_inline("ts=t,stream_name=ES,price=p,size=q,names=t|p|q") == {
        "ts": "t", "stream": "ES", "price": "p", "size": "q", "names": ("t", "p", "q")}
    for bad, why in (("ts=t,price", "not key=column"),
                     ("ts=t,colour=red", r'^--columns: unknown column-map key "colour"; known keys: stream_name, ts, '),
                     ("ts=a,ts=b", "given twice"), ("ts=t,side_map=x", "YAML form")):
        with pytest.raises(ValueError, match=why):
            parse_inline(bad)


def test_yaml_column_map_file_with_a_side_map_and_unknown_keys_named(tmp_path: Path, capsys) -> None:
    vendor_trades(10).write_parquet(tmp_path / "t.parquet")
    (tmp_path / "map.yaml").write_text("ts: time\nts_unit: ms\nstream_col: symbol\nprice: px\nsize: qty\n"
                                       "side: side\nside_map: {B: buy, S: sell}\n")
    ticks = list(replay_ticks(tmp_path / "t.parquet", columns=map_from_options(columns=str(tmp_path / "map.yaml"))))
    assert [t.side for t in ticks[:2]] == ["sell", "buy"] and ticks[0].ts == 1_717_236_000_000 * 1_000_000
    (tmp_path / "typo.yaml").write_text("ts: time\nprice: px\nsize: qty\nsyde: side\n")
    code = main(["feed", "replay", str(tmp_path / "t.parquet"), "--columns", str(tmp_path / "typo.yaml")])
    err = capsys.readouterr().err
    # said as a user reads it: the key, the keys known and the nearest (it was a Python list of each)
    assert code == 2 and f"{tmp_path / 'typo.yaml'}: unknown column-map key \"syde\"; known keys: ts, ts_unit, " in err
    assert err.endswith(', bar_stamp, bar_length, size_scale, token_decimals, base_token; did you mean "side"?\n') \
        and "['" not in err, err


def test_a_side_map_of_yes_and_no_reads_them_as_the_text_written(tmp_path: Path) -> None:
    """review226 #4: a prediction market's `taker_side` holds `yes`/`no`; `side_map: {yes: buy, no: sell}` was read
    by YAML 1.1 as {True: buy, False: sell}, every row rejected unknown_side, and the error told the user to add the
    side_map they had. Unquoted yes/no/on/off keys are now text (YAML 1.2's core schema); values are as before."""
    pl.DataFrame({"created_time": [1_717_236_000_000 + 250 * i for i in range(6)], "ticker": "KXFED",
                  "yes_price": [0.35, 0.36, 0.35, 0.34, 0.35, 0.36], "count": [5] * 6,
                  "taker_side": ["yes", "no", "yes", "yes", "no", "no"]}).write_csv(tmp_path / "kalshi.csv")
    (tmp_path / "map.yaml").write_text("ts: created_time\nts_unit: ms\nstream_col: ticker\nprice: yes_price\n"
                                       "size: count\nside: taker_side\nside_map: {yes: buy, no: sell}\n")
    ticks = list(replay_ticks(tmp_path / "kalshi.csv", columns=map_from_options(columns=str(tmp_path / "map.yaml"))))
    assert [t.side for t in ticks] == ["buy", "sell", "buy", "buy", "sell", "sell"]
    from engine.yaml_files import safe_load_unique
    assert safe_load_unique("{on: 1, off: 2, y: 3, true: 4, x: yes}") == {"on": 1, "off": 2, "y": 3, True: 4,
                                                                          "x": True}


def test_a_kalshi_trades_file_without_a_map_reads_as_the_docs_map_reads_it(tmp_path: Path) -> None:
    """fix278 #1: Kalshi's trades (created_time,ticker,yes_price,no_price,count,taker_side) without a map were
    refused with "no price ... among them". yes_price is now the price, count the size, as the docs' map reads them."""
    (tmp_path / "kalshi.csv").write_text("created_time,ticker,yes_price,no_price,count,taker_side\n" + "".join(
        f"2024-08-01T14:00:0{i}Z,KXBTC-24AUG01,{55 + i % 3},{45 - i % 3},{i + 1},{('yes', 'no')[i % 2]}\n"
        for i in range(6)))
    (tmp_path / "map.yaml").write_text("ts: created_time\nstream_col: ticker\nprice: yes_price\nsize: count\n"
                                       "side: taker_side\nside_map: {yes: buy, no: sell}\n")
    mapped = list(replay_ticks(tmp_path / "kalshi.csv", columns=map_from_options(columns=str(tmp_path / "map.yaml"))))
    detected = list(replay_ticks(tmp_path / "kalshi.csv"))
    assert detected == mapped and len(detected) == 6
    assert [(t.price, t.size, t.side) for t in detected[:2]] == [(55.0, 1.0, "buy"), (56.0, 2.0, "sell")]
    # `count` beside no prediction market's prices is no size (a bar's number of trades): not read
    (tmp_path / "bars.csv").write_text("ts,symbol,price,count\n2024-08-01T14:00:00Z,X,1.5,7\n")
    assert [t.size for t in replay_ticks(tmp_path / "bars.csv")] != [7.0]


def test_a_csvs_only_column_of_date_times_is_its_time_under_any_name(tmp_path: Path) -> None:
    """review440 #9: Euronext's `Trade Date Time` and a German `Zeitpunkt`, each the file's one column of date-times,
    were refused ("no time column among them"), as a Parquet file's only datetime column is not."""
    (tmp_path / "euronext.csv").write_text("Trade Date Time,ISIN,Symbol,Price,Quantity\n" + "".join(
        f"2024-10-25 09:00:0{i}.000,NL0010273215,ASML,{650 + i / 10},{i + 1}\n" for i in range(3)))
    (tmp_path / "de.csv").write_text("Zeitpunkt;Kurs;Menge\n" + "".join(
        f"27.10.2024 02:00:0{i};61.836,{i}0;1\n" for i in range(3)))
    assert [t.ts for t in replay_ticks(tmp_path / "euronext.csv")][1] == 1_729_846_801 * 10**9
    assert [t.ts for t in replay_ticks(tmp_path / "de.csv")][2] == 1_729_994_402 * 10**9


@pytest.mark.parametrize("suffix", ["csv", "jsonl"])
def test_gate_io_trades_without_a_map_read_as_the_docs_map_reads_them(tmp_path: Path, suffix: str) -> None:
    """fix280 #4: Gate.io's trades (id,create_time,create_time_ms,currency_pair,side,amount,price,...) without a map
    were refused with "no time column among them". create_time_ms (ms, text with a .000 tail) is now a time name."""
    rows = [{"id": str(9000 + i), "create_time": str((1_723_161_255_342 + 731 * i) // 1000),
             "create_time_ms": f"{1_723_161_255_342 + 731 * i}.000", "currency_pair": ("ETH_USDT", "BTC_USDT")[i % 2],
             "side": ("sell", "buy")[i % 2], "role": "taker", "amount": f"0.0{1 + i % 5}",
             "price": f"{60000 + i % 7}.{i}"} for i in range(8)]
    path = tmp_path / f"gate.{suffix}"
    pl.DataFrame(rows).write_csv(path) if suffix == "csv" else pl.DataFrame(rows).write_ndjson(path)
    columns = "ts=create_time_ms,ts_unit=ms,stream_col=currency_pair,price=price,size=amount,side=side"
    mapped = list(replay_ticks(path, columns=map_from_options(columns=columns)))
    detected = list(replay_ticks(path))
    assert detected == mapped and len(detected) == 8
    assert (detected[1].ts, detected[1].stream, detected[1].size, detected[1].side) == (
        1_723_161_256_073 * 1_000_000, "BTC_USDT", 0.02, "buy")


def test_keep_values_yes_and_no_in_a_map_file_and_a_replay_list_are_the_text_written(tmp_path: Path, capsys) -> None:
    """`keep: {regular: [yes]}` was read by YAML 1.1 as [True], compared as "true": it kept no row of a cell `yes`
    and the backtest stopped with every row filtered out. A column map's and a replay list's values are names,
    cells and paths: `yes`/`no`/`on`/`off` there are the text, as keys are; `fill_quotes: yes` still reads as true."""
    flags = ["yes", "no", "yes", "on", "off", "yes"]
    (tmp_path / "flags.csv").write_text("ts,symbol,price,size,regular\n" + "".join(
        f"{1_717_236_000_000 + 250 * i},X,{1 + i / 10},1,{flag}\n" for i, flag in enumerate(flags)))
    (tmp_path / "map.yaml").write_text("ts: ts\nts_unit: ms\nstream_col: symbol\nprice: price\nsize: size\n"
                                       "keep: {regular: [yes, on]}\n")
    ticks = list(replay_ticks(tmp_path / "flags.csv", columns=map_from_options(columns=str(tmp_path / "map.yaml"))))
    assert [t.price for t in ticks] == [1.0, 1.2, 1.3, 1.5]
    (tmp_path / "list.yaml").write_text("replay:\n  - path: flags.csv\n    columns: {ts: ts, ts_unit: ms, "
                                        "price: price, size: size, stream_col: symbol, keep: {regular: [no]}}\n")
    assert [t.price for t in replay_ticks(tmp_path / "list.yaml")] == [1.1]
    queries = tmp_path / "q.yaml"
    queries.write_text("queries: [{name: d, streams: ['*'], question: direction_5, kind: choice, "
                       "trigger: {ticks: 2}}]\n")
    assert main(["backtest", str(tmp_path / "flags.csv"), "--columns", str(tmp_path / "map.yaml"), "--queries",
                 str(queries), "--out", str(tmp_path / "o.parquet"), "--threads", "1"]) == 0
    assert "replayed 4 ticks (0 rejected, 2 left out by a filter)" in capsys.readouterr().out
    from engine.yaml_files import safe_load_unique
    assert safe_load_unique("{a: [yes, off], b: true, c: no}", text_words=True) == {"a": ["yes", "off"],
                                                                                    "b": "true", "c": "no"}
    assert ColumnMap(ts="ts", bid="b", ask="a", fill_quotes="yes").fill_quotes is True


def test_keep_values_with_a_leading_zero_are_the_text_written_in_each_place_a_map_is(tmp_path: Path,
                                                                                    capsys) -> None:
    """`keep: {corr: [00, 12]}` was read by YAML 1.1 as [0, 12] (`010` as 8, octal): the rows of `00` (TAQ's
    TR_CORR regular prints) were left out as filtered_out, in a map file, a replay list and a config's
    replay.columns. Every value there is the text written; a Parquet column of numbers compares by value."""
    codes = ["00", "01", "07", "010", "12"]
    (tmp_path / "corr.csv").write_text("ts,symbol,price,size,corr\n" + "".join(
        f"{1_717_236_000_000 + 250 * i},X,{1 + i / 10:.1f},1,{codes[i % 5]}\n" for i in range(10)))
    (tmp_path / "map.yaml").write_text("ts: ts\nts_unit: ms\nstream_col: symbol\nprice: price\nsize: size\n"
                                       "keep: {corr: [00, 010]}\n")
    ticks = replay_ticks(tmp_path / "corr.csv", columns=map_from_options(columns=str(tmp_path / "map.yaml")))
    assert [t.price for t in ticks] == [1.0, 1.3, 1.5, 1.8]
    (tmp_path / "list.yaml").write_text("replay:\n  - path: corr.csv\n    columns: {ts: ts, ts_unit: ms, "
                                        "price: price, size: size, stream_col: symbol, keep: {corr: [01]}}\n")
    assert [t.price for t in replay_ticks(tmp_path / "list.yaml")] == [1.1, 1.6]
    config = tmp_path / "engine.yaml"
    config.write_text("replay: {columns: {keep: {corr: [07, 12]}}}\n")
    assert ServiceConfig.load(config).replay.columns == {"keep": {"corr": ["07", "12"]}}
    queries = tmp_path / "q.yaml"
    queries.write_text("queries: [{name: d, streams: ['*'], question: direction_5, kind: choice, "
                       "trigger: {ticks: 2}}]\n")
    assert main(["backtest", str(tmp_path / "corr.csv"), "--config", str(config), "--queries", str(queries),
                 "--out", str(tmp_path / "o.parquet"), "--threads", "1"]) == 0
    assert "replayed 4 ticks (0 rejected, 6 left out by a filter)" in capsys.readouterr().out
    # a Parquet column of numbers has no text written: `01` keeps its 1s, `4` its 4.0s
    pl.DataFrame({"ts": [1_717_236_000_000 + 250 * i for i in range(6)], "price": [1.0, 1.1, 1.2, 1.3, 1.4, 1.5],
                  "size": [1.0] * 6, "corr": [0, 1, 7, 1, 12, 0], "type": [4.0, 4.0, 5.0, 4.0, 4.0, 1.0]}
                 ).write_parquet(tmp_path / "corr.parquet")
    (tmp_path / "typed.yaml").write_text("ts: ts\nts_unit: ms\nstream: X\nprice: price\nsize: size\n"
                                         "keep: {corr: [01, 12], type: [4]}\n")
    ticks = replay_ticks(tmp_path / "corr.parquet", columns=map_from_options(columns=str(tmp_path / "typed.yaml")))
    assert [t.price for t in ticks] == [1.1, 1.3, 1.4]


def test_a_stream_key_that_is_no_stream_name_says_what_to_write(tmp_path: Path, capsys) -> None:
    """`stream` is one fixed stream name. A list there (the streams a user meant to read) or a number was refused as
    "stream must be a non-empty column name or omitted": no column is meant there, and nothing said what to write."""
    vendor_trades(10).write_parquet(tmp_path / "t.parquet")
    (tmp_path / "map.yaml").write_text("ts: time\nstream: [AAPL, MSFT]\nprice: px\nsize: qty\n")
    code = main(["feed", "replay", str(tmp_path / "t.parquet"), "--columns", str(tmp_path / "map.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and "column name" not in err, err
    assert ("stream is one fixed stream name for every row (stream: AAPL); a column of stream names is "
            "stream_col: COLUMN, and the streams to read from a file of many are --streams (replay.streams); "
            'got ["AAPL", "MSFT"]') in err, err
    for bad in (7, ""):
        with pytest.raises(ValueError, match=rf"^stream is one fixed stream name .*; got {quoted(bad)}$"):
            ColumnMap(ts="time", stream=bad, price="px", size="qty")
    with pytest.raises(ValueError, match="^stream_col must be a non-empty column name"):  # the columns' wording stays
        ColumnMap(ts="time", stream_col=7, price="px", size="qty")

def test_header_less_csv_with_given_names(tmp_path: Path) -> None:
    (tmp_path / "raw.csv").write_text("1717236000.25,ES,5300.25,2\n1717236000.5,ES,5300.5,1\n1717236001,ES,x,1\n")
    cmap = map_from_options(columns="ts=t,stream=sym,price=px,size=qty", names=("t", "sym", "px", "qty"),
                            ts_unit="s")
    replay = FileReplay(tmp_path / "raw.csv", columns=cmap)
    ticks = drain(replay)
    assert [(t.stream, t.ts, t.price) for t in ticks] == [("ES", 1_717_236_000_250_000_000, 5300.25),
                                                          ("ES", 1_717_236_000_500_000_000, 5300.5)]
    assert replay.rejected == {"missing_field": 1}
    assert replay.rejected.examples["missing_field"].startswith(f"{tmp_path / 'raw.csv'} line 3: ")  # no header
    with pytest.raises(ValueError, match=r"the file has 4 columns, the names given are 3 \(t, px, qty\)"):
        FileReplay(tmp_path / "raw.csv", columns={"ts": "t", "price": "px", "size": "qty", "names": ["t", "px", "qty"]})
    with pytest.raises(ValueError, match="not among names"):
        ColumnMap(ts="t", price="px", size="qty", names=("t", "px"))


def test_seconds_after_midnight_with_a_date_and_time_zone(tmp_path: Path) -> None:
    # 08:00:00.5 on 2024-06-03 in London is 07:00:00.5 UTC (summer time); in UTC it is 08:00:00.5
    pl.DataFrame({"secs": [8 * 3600 + 0.5, 8 * 3600 + 1.25], "px": [1.0, 2.0], "qty": [1.0, 1.0]}).write_csv(
        tmp_path / "day.csv")
    base = {"ts": "secs", "ts_unit": "seconds_after_midnight", "date": "2024-06-03", "stream": "X",
            "price": "px", "size": "qty"}
    london = [t.ts for t in replay_ticks(tmp_path / "day.csv", columns=base | {"tz": "Europe/London"})]
    utc = [t.ts for t in replay_ticks(tmp_path / "day.csv", columns=base)]
    want = int(datetime(2024, 6, 3, 7, 0, 0, tzinfo=timezone.utc).timestamp()) * NS + NS // 2
    assert london == [want, want + 750_000_000] and utc == [want + 3600 * NS, want + 3600 * NS + 750_000_000]
    with pytest.raises(ValueError, match="needs date"):
        ColumnMap(ts="secs", ts_unit="seconds_after_midnight", price="px", size="qty")


def test_naive_times_in_a_time_zone_and_the_switch_to_summer_time(tmp_path: Path) -> None:
    # Chicago: 2024-03-10 02:30 does not exist (clocks jump 02:00 -> 03:00): that row is rejected, not guessed
    text = ["2024-03-10T01:59:59", "2024-03-10T02:30:00", "2024-03-10T03:00:00", "2024-07-01T09:30:00.000001"]
    pl.DataFrame({"when": text, "bid": [1.0] * 4, "ask": [1.1] * 4}).write_csv(tmp_path / "q.csv")
    pl.DataFrame({"when": [datetime.fromisoformat(x) for x in text], "bid": [1.0] * 4, "ask": [1.1] * 4}).write_parquet(
        tmp_path / "q.parquet")
    cmap = {"ts": "when", "ts_unit": "datetime", "tz": "America/Chicago", "stream": "CL", "bid": "bid", "ask": "ask"}
    for name in ("q.csv", "q.parquet"):
        replay = FileReplay(tmp_path / name, columns=cmap)
        got = [t.ts for t in drain(replay)]
        assert got == [int(datetime(2024, 3, 10, 7, 59, 59, tzinfo=timezone.utc).timestamp()) * NS,
                       int(datetime(2024, 3, 10, 8, 0, 0, tzinfo=timezone.utc).timestamp()) * NS,
                       int(datetime(2024, 7, 1, 14, 30, 0, tzinfo=timezone.utc).timestamp()) * NS + 1000], name
        assert replay.rejected == {"missing_field": 1}
        assert "line 3" in replay.rejected.examples["missing_field"] or "row 2" in replay.rejected.examples[
            "missing_field"]
    with pytest.raises(ValueError, match="epoch, which is UTC"):
        ColumnMap(ts="t", ts_unit="ms", tz="Europe/London", price="p", size="s")
    with pytest.raises(ValueError, match="unknown time zone"):
        ColumnMap(ts="t", ts_unit="datetime", tz="Europe/Londn", price="p", size="s")


def test_a_mistyped_zone_is_answered_with_the_closest_iana_names(tmp_path: Path, capsys) -> None:
    """Review224 #13: `--tz America/NewYork`, the commonest zone typo, got "use an IANA name like ..." where a
    mistyped stream or config key gets "did you mean". Every zone read from the user (--tz, a map's or the config's
    tz, --hours' zone) now names the closest (connectors/time_zones.py); one with none close gets the examples."""
    csv = tmp_path / "eq.csv"
    csv.write_text("timestamp,symbol,price,size\n2024-06-03 09:30:00.5,AAPL,190.01,5\n")
    for options, said in ((["--tz", "America/NewYork"], 'unknown time zone tz="America/NewYork"'),
                          (["--tz", "america/new york"], 'unknown time zone tz="america/new york"'),
                          (["--hours", "09:30-16:00 America/NewYork"],
                           'hours "09:30-16:00 America/NewYork": unknown time zone "America/NewYork"')):
        capsys.readouterr()
        assert main(["backtest", str(csv), *options, "--out", str(tmp_path / "z.parquet")]) == 2
        assert capsys.readouterr().err.endswith(f"\nflashtick backtest: error: {said}; did you mean "
                                                f"\"America/New_York\"?\n")
    with pytest.raises(ConfigError, match=r'replay: unknown time zone tz="Europe/Londn"; did you mean '
                                          r'"Europe/London" or '):
        ServiceConfig.from_dict({"replay": {"tz": "Europe/Londn"}})
    with pytest.raises(ValueError, match=r"tz=\"Nowhere/City\"; use an IANA name like 'Europe/London', "
                                         r"'America/New_York' or 'UTC'$"):
        ColumnMap(ts="t", ts_unit="datetime", tz="Nowhere/City", price="p", size="s")
    # review433 #8: China's and India's CST and IST were answered with US zones spelled closest (UCT, MST, HST)
    for name, zones in (("CST", "--tz America/Chicago (-06:00), --tz America/Havana (-05:00) or --tz Asia/Shanghai "
                                "(+08:00), whichever zone's CST it is"),
                        ("IST", "--tz Asia/Kolkata (+05:30), --tz Asia/Jerusalem (+02:00) or --tz Europe/Dublin "
                                "(+01:00), whichever zone's IST it is")):
        with pytest.raises(ValueError) as refused:
            ColumnMap(ts="t", ts_unit="datetime", tz=name, price="p", size="s")
        assert str(refused.value).endswith(f"; {name} is an abbreviation that zones write for their times: give "
                                           f"{zones}")


@pytest.mark.parametrize("given, named", [
    ("GMT+9", "give --tz Etc/GMT-9 (an Etc zone's sign is POSIX's, reversed: Etc/GMT+9 is -09:00)"),
    ("UTC+9", "give --tz Etc/GMT-9"), ("utc+09:00", "give --tz Etc/GMT-9"), ("UTC-5", "give --tz Etc/GMT+5"),
    ("UTC+05:30", "+05:30 all year, which no Etc zone holds: give --tz Asia/Kolkata (a zone at UTC+05:30)"),
    ("GMT+0", None), ("UTC+0", "UTC+0 is UTC: give --tz UTC")])
def test_a_utc_offset_given_as_a_zone_names_the_etc_zone_of_that_offset_not_its_reversed_spelling(
        given: str, named: str | None) -> None:
    """review411 #12: `--tz GMT+9` was answered "did you mean ... Etc/GMT+9?" (POSIX's sign: -09:00, 18 h off) and
    `UTC+9`, `UTC-5` "did you mean UTC?": fuzzy matches on the spelling. The refusal (--tz, a map's tz, --hours'
    zone) now names the zone a header `Time (UTC+9)` is read in, or one at an offset no Etc zone holds."""
    from connectors.hours_window import Hours
    from connectors.time_zones import unknown_zone_hint

    hint = unknown_zone_hint(given)
    assert hint is None if named is None else named in hint, hint  # (GMT+0 is an IANA key, read as it is)
    if named is not None:
        assert "did you mean" not in hint and "Etc/GMT+9 (" not in hint and "Etc/GMT-5 (" not in hint
        with pytest.raises(ValueError, match=re.escape(f'unknown time zone "{given}"; ')):
            Hours.parse(f"09:00-15:00 {given}")


def test_config_replay_section(engine_files: Path, tmp_path: Path, capsys) -> None:
    vendor_trades(60).write_parquet(tmp_path / "t.parquet")
    (tmp_path / "engine.yaml").write_text((engine_files / "engine.yaml").read_text() + (
        "replay:\n  columns: {ts: time, price: px, size: qty, stream_col: symbol}\n  ts_unit: ms\n  batch_ms: 250\n"))
    config = ServiceConfig.load(tmp_path / "engine.yaml")
    assert config.replay.column_map() == {"ts": "time", "price": "px", "size": "qty", "stream_col": "symbol",
                                          "ts_unit": "ms"}
    code = main(["backtest", str(tmp_path / "t.parquet"), "--queries", str(engine_files / "q.yaml"), "--out",
                 str(tmp_path / "a.parquet"), "--config", str(tmp_path / "engine.yaml"), "--quiet"])
    assert code == 0 and "replayed 60 ticks" in capsys.readouterr().out
    code = main(["backtest", str(tmp_path / "t.parquet"), "--queries", str(engine_files / "q.yaml"), "--out",
                 str(tmp_path / "b.parquet"), "--config", str(tmp_path / "engine.yaml"), "--quiet",
                 "--columns", "ts=time,price=px,size=qty,stream_name=ONE"])  # replaces the section's map; ts_unit stays
    assert code == 0 and set(pl.read_parquet(tmp_path / "b.parquet")["stream"]) == {"ONE"}
    assert "replayed 60 ticks (0 rejected)" in capsys.readouterr().out
    # as on the command line, a zone (or unit, day, ...) alone refines each file's detected layout
    assert ServiceConfig.from_dict({"replay": {"tz": "America/New_York"}}).replay.column_map() == {
        "tz": "America/New_York"}
    with pytest.raises(ConfigError, match=r'unknown key "timezone" in section "replay"'):
        ServiceConfig.from_dict({"replay": {"timezone": "UTC"}})
    with pytest.raises(ConfigError, match=r"replay: unknown time zone"):
        ServiceConfig.from_dict({"replay": {"preset": "dukascopy", "tz": "Nowhere/City"}})
    with pytest.raises(ConfigError, match=r"replay.batch_ms must be a number > 0"):
        ServiceConfig.from_dict({"replay": {"batch_ms": 0}})


# ---- Databento DBN ----

dbn = pytest.importorskip("databento_dbn", reason="the dbn extra (pip install 'flashtick[dbn]') is not installed")
T0 = 1_717_236_000_000_000_000
PX = 10**9 // 4  # a quarter point in DBN's 1e-9 fixed point


def mapping(instrument: int, symbol: str) -> object:
    return dbn.SymbolMappingMsg(publisher_id=1, instrument_id=instrument, ts_event=T0, stype_in=dbn.SType.RAW_SYMBOL,
                                stype_in_symbol=symbol, stype_out=dbn.SType.INSTRUMENT_ID,
                                stype_out_symbol=str(instrument), start_ts=T0, end_ts=T0 + 86_400 * NS)


def write_dbn(path: Path, schema: object, records: list) -> Path:
    metadata = dbn.Metadata(dataset="GLBX.MDP3", start=T0, stype_in=dbn.SType.RAW_SYMBOL,
                            stype_out=dbn.SType.INSTRUMENT_ID, schema=schema, symbols=["ESM4"])
    path.write_bytes(metadata.encode() + b"".join(bytes(r) for r in records))
    return path


def mbo(i: int, action: object, side: object, quarters: int, size: int, order: int, last: bool = True) -> object:
    return dbn.MBOMsg(publisher_id=1, instrument_id=7, ts_event=T0 + i, order_id=order, price=quarters * PX,
                      size=size, action=action, side=side, ts_recv=T0 + 10 * i, flags=dbn.F_LAST if last else 0)


def mbo_file(path: Path) -> Path:
    A, S = dbn.Action, dbn.Side
    return write_dbn(path, dbn.Schema.MBO, [
        mapping(7, "ESM4"),
        mbo(1, A.CLEAR, S.NONE, 0, 0, 0),
        mbo(2, A.ADD, S.BID, 21200, 5, 1, last=False),  # part of one event: no quote until its last record
        mbo(3, A.ADD, S.ASK, 21201, 3, 2),              # -> quote 5300.00 x 5300.25, 5 x 3
        mbo(4, A.ADD, S.BID, 21199, 9, 3),              # deeper bid: top unchanged, no quote
        mbo(5, A.TRADE, S.ASK, 21200, 2, 0),            # a sell aggressor hits the bid -> trade
        mbo(6, A.FILL, S.BID, 21200, 2, 1),             # the fill leaves the book alone ...
        mbo(7, A.CANCEL, S.BID, 21200, 2, 1),           # ... the venue's cancel takes it: 3 at the bid
        mbo(8, A.CANCEL, S.BID, 21200, 3, 1),           # the bid level empties: best bid 5299.75 x 9
        mbo(9, A.MODIFY, S.ASK, 21202, 4, 2),           # the offer moves up: 5300.50 x 4
        mbo(10, A.ADD, S.ASK, 21203, 1, 4),             # deeper offer: no quote
    ])


def test_dbn_mbo_is_reduced_to_trades_and_top_of_book(tmp_path: Path) -> None:
    replay = FileReplay(mbo_file(tmp_path / "es.mbo.dbn"))
    assert book_ticks(drain(replay), T0) == MBO_TICKS  # as the same records exported as CSV read
    assert {t.stream for t in drain(FileReplay(tmp_path / "es.mbo.dbn"))} == {"ESM4"} and not replay.rejected


def test_dbn_mbp1_and_compressed_files(tmp_path: Path) -> None:
    A, S = dbn.Action, dbn.Side

    def mbp(i: int, action: object, side: object, quarters: int, size: int, bid: int, ask: int) -> object:
        level = dbn.BidAskPair(bid_px=bid * PX if bid else dbn.UNDEF_PRICE, ask_px=ask * PX if ask else dbn.UNDEF_PRICE,
                               bid_sz=4, ask_sz=6)
        return dbn.MBP1Msg(publisher_id=1, instrument_id=9, ts_event=T0 + i, price=quarters * PX, size=size,
                           action=action, side=side, depth=0, ts_recv=T0 + 10 * i, flags=dbn.F_LAST, levels=level)

    path = write_dbn(tmp_path / "nq.dbn", dbn.Schema.MBP_1, [
        mbp(1, A.ADD, S.BID, 80000, 4, 80000, 0),      # one-sided book: no quote yet
        mbp(2, A.ADD, S.ASK, 80001, 6, 80000, 80001),  # -> quote
        mbp(3, A.TRADE, S.BID, 80001, 1, 80000, 80001),  # a buy aggressor lifts the offer -> trade
        mbp(4, A.CANCEL, S.ASK, 80001, 6, 80000, 80002),  # -> quote
    ])
    depth = write_dbn(tmp_path / "d.dbn", dbn.Schema.MBP_10, [])
    with pytest.raises(ValueError, match=r'DBN schema "mbp-10" is not supported; replay reads mbo, mbp-1, trades'):
        FileReplay(depth)
    ticks = drain(FileReplay(path))
    assert [(t.stream, t.kind, t.price or t.ask, t.side) for t in ticks] == [
        ("9", "quote", 20000.25, None), ("9", "trade", 20000.25, "buy"), ("9", "quote", 20000.5, None)]  # no symbology
    if shutil.which("zstd") is None:
        pytest.skip("the zstd command is not installed to make a compressed DBN file")
    subprocess.run(["zstd", "-q", str(path), "-o", str(tmp_path / "nq.dbn.zst")], check=True)
    assert drain(FileReplay(tmp_path / "nq.dbn.zst")) == ticks


def test_dbn_file_backtests_from_the_command_line(engine_files: Path, tmp_path: Path, capsys) -> None:
    mbo_file(tmp_path / "es.dbn")
    code = main(["backtest", str(tmp_path / "es.dbn"), "--queries", str(engine_files / "q.yaml"), "--out",
                 str(tmp_path / "a.parquet"), "--config", str(engine_files / "engine.yaml"), "--quiet"])
    assert code == 0 and "replayed 5 ticks (0 rejected)" in capsys.readouterr().out
    assert set(pl.read_parquet(tmp_path / "a.parquet")["stream"]) == {"ESM4"}
    (tmp_path / "not.dbn").write_bytes(b"definitely not DBN")
    assert main(["feed", "replay", str(tmp_path / "not.dbn")]) == 2
    err = capsys.readouterr().err
    assert "not.dbn: not a" in err and "DBN" in err and err.count("\n") == 1
    with pytest.raises(ValueError, match="fixed layout"):
        FileReplay([(tmp_path / "es.dbn", {"ts": "x", "price": "p", "size": "s"})])


def test_feed_replay_that_rejects_every_row_exits_non_zero(tmp_path: Path, capsys) -> None:
    (tmp_path / "bad.csv").write_text("time,px,qty\n1,-1,1\n2,0,1\n")
    code = main(["feed", "replay", str(tmp_path / "bad.csv"), "--columns", "ts=time,price=px,size=qty",
                 "--endpoint", "tcp://127.0.0.1:5"])  # nothing listens there: nothing is ever sent
    err = capsys.readouterr().err
    assert code == 2 and "sent 0 ticks" in err and "rejected nonpositive_price: 2 (first: " in err
    assert "every row of the files was rejected" in err
    # a map's keep that leaves every row out: said as the user's filter, not as rejected rows
    (tmp_path / "keep.yaml").write_text("ts: time\nprice: px\nsize: qty\nkeep: {qty: [7]}\n")
    code = main(["feed", "replay", str(tmp_path / "bad.csv"), "--columns", str(tmp_path / "keep.yaml"),
                 "--endpoint", "tcp://127.0.0.1:5"])
    err = capsys.readouterr().err
    assert code == 2 and "2 ticks read from the files not sent (2 of them left out by a filter)" in err, err
    assert "error: every row of the files was left out by a filter (above); nothing was sent" in err, err


def test_real_ethusdt_trades_on_the_exchange_clock_through_a_yaml_map(shared_data: Path, tmp_path: Path) -> None:
    """A map a user would write for the capture's exchange clock and buyer-maker flag: every row replays, and
    the flag gives the same aggressor as the file's own column."""
    trades = shared_data / "binance-ethusdt-spot" / "trades.csv"
    (tmp_path / "eth.yaml").write_text("ts: trade_ts_ms\nts_unit: ms\nstream: ETHUSDT\nprice: price\nsize: qty\n"
                                       "side: is_buyer_maker\nside_map: {1: sell, 0: buy}\n")
    replay = FileReplay(trades, columns=map_from_options(columns=str(tmp_path / "eth.yaml")))
    ticks = drain(replay)
    assert len(ticks) == 14_515 and not replay.rejected
    own = pl.read_csv(trades, columns=["trade_ts_ms", "aggressor_side"]).sort("trade_ts_ms", maintain_order=True)
    assert [t.side for t in ticks] == own["aggressor_side"].to_list()
    assert all(t.ts % 1_000_000 == 0 for t in ticks)
    with pytest.raises(ValueError, match='already carries time zone "UTC"'):
        FileReplay(shared_data / "dukascopy-eurusd" / "eurusd_ticks_2019-02-04_05.parquet",
                   columns=map_from_options("dukascopy", tz="Europe/London"))


def test_a_price_offset_takes_an_instrument_that_trades_at_zero_or_below(tmp_path: Path, capsys) -> None:
    """Power and spreads trade at zero and below; the tick contract wants prices > 0. `price_offset` shifts price,
    bid and ask as read (after a price_scale), in Python, on the command line and in a refined detected layout."""
    power = tmp_path / "power.csv"
    power.write_text("ExecutionTime,DeliveryProduct,Price,Quantity,Bid,Ask\n"
                     "2024-04-14T10:00:00Z,DE-H11,3.5,1.0,,\n"
                     "2024-04-14T10:00:01Z,DE-H11,0,2.0,,\n"
                     "2024-04-14T10:00:02Z,DE-H11,-12.25,0.5,,\n"
                     "2024-04-14T10:00:03Z,DE-H11,,,-13.0,-12.0\n")
    columns = {"ts": "ExecutionTime", "ts_unit": "datetime", "stream_col": "DeliveryProduct"}
    refused = FileReplay(power, columns=columns)
    assert len(drain(refused)) == 1 and refused.rejected["nonpositive_price"] == 3
    shifted = FileReplay(power, columns=columns | {"price_offset": 100})
    ticks = drain(shifted)
    assert [t.price for t in ticks[:3]] == [103.5, 100.0, 87.75] and (ticks[3].bid, ticks[3].ask) == (87.0, 88.0)
    assert not shifted.rejected
    assert "price_offset=100" in " ".join(shifted.notes)
    scaled = FileReplay([(power, {"ts": "ExecutionTime", "ts_unit": "datetime", "stream": "X", "price": "Price",
                                  "size": "Quantity", "kind": "trade", "price_scale": 10, "price_offset": 2})])
    assert [t.price for t in drain(scaled)] == pytest.approx([2.35, 2.0, 0.775])  # divided first, then shifted
    with pytest.raises(ValueError, match="price_offset must be a number"):
        ColumnMap.from_dict({"ts": "t", "price": "p", "size": "s", "price_offset": "lots"})
    out = tmp_path / "a.parquet"
    assert main(["backtest", str(power), "--columns", "ts=ExecutionTime,stream=DeliveryProduct", "--out", str(out),
                 "--quiet"]) == 0
    assert ("the files hold prices below zero (a spread, a power market): an offset (--price-offset) shifts them "
            "above zero; the lowest price in the files: DE-H11 -13: to lift each stream above zero, --price-offset "
            "'DE-H11=14' (docs/replay.md)") in capsys.readouterr().out  # the bid of the quote is the lowest
    assert main(["backtest", str(power), "--columns", "ts=ExecutionTime,stream=DeliveryProduct",
                 "--price-offset", "100", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "replayed 4 ticks (0 rejected)" in printed


@pytest.mark.parametrize("days", [("date=2026-09-01/symbol=ES", "date=2026-09-02/symbol=ES"),  # Hive partitions
                                  ("ES/2026-09-01", "ES/2026-09-02")])  # day folders
def test_date_file_name_takes_the_day_of_the_nearest_folder_that_holds_one(tmp_path: Path, days: tuple) -> None:
    """review267: a tree of day folders of time-of-day files (`part-0.csv`, `trades.csv`: no date in the name) was
    refused under --date file_name, and the advice, one --date YYYY-MM-DD, stamped every day with one date."""
    paths = []
    for folder in days:
        (tmp_path / folder).mkdir(parents=True)
        paths.append(tmp_path / folder / "trades.csv")
        paths[-1].write_text("time,price,size\n14:30:00.5,6000.25,1\n14:30:01.25,6000.5,2\n")
    replay = FileReplay(paths, columns=map_from_options(detect=True, date="file_name"))
    half_past = [int(datetime(2026, 9, day, 14, 30, tzinfo=timezone.utc).timestamp()) * NS for day in (1, 2)]
    assert [t.ts for t in drain(replay)] == [t0 + d for t0 in half_past for d in (500_000_000, 1_250_000_000)]
    dated = next(name for name in days[0].split("/") if "2026" in name)
    assert f"{paths[0]}: the day is 2026-09-01, from its folder {quoted(dated)} (--date and --tz give " \
           f"others)" in replay.notes, replay.notes
    assert not any("overlap" in note for note in replay.notes)  # each day on its own date
    flat = tmp_path / "flat" / "trades.csv"  # no date in its name nor its folders: refused, one --date not urged
    flat.parent.mkdir()
    flat.write_text(paths[0].read_text())
    with pytest.raises(ValueError, match=r"its name holds no date \(YYYY-MM-DD, q's YYYY.MM.DD or YYYYMMDD\), nor "
                                         r"does a folder above it \(date=YYYY-MM-DD/, YYYY-MM-DD/, YYYYMMDD/ or an "
                                         r"HDB's YYYY.MM.DD/\): "
                                         r"name each day's file or folder with "
                                         r"its date, or give the day with --date YYYY-MM-DD when every file given is "
                                         r"of that one day"):
        FileReplay(flat, columns=map_from_options(detect=True, date="file_name"))


def test_times_of_day_as_text_take_the_day_given(tmp_path: Path) -> None:
    path = tmp_path / "7203_2026-03-10.csv"  # one file a day: the date in its name
    path.write_text('Time,Code,Price,Volume\n09:00:00.123,7203,"3,450",100\n09:00:01.5,7203,"3,451",100\n')
    tokyo_nine = int(datetime(2026, 3, 10, 0, 0, tzinfo=timezone.utc).timestamp()) * NS  # 09:00 in Tokyo
    want = [tokyo_nine + 123_000_000, tokyo_nine + 1_500_000_000]
    for options in ({"date": "2026-03-10"}, {"date": "file_name"}, {"ts_format": "%H:%M:%S%.f", "date": "2026-03-10"},
                    {"ts_unit": "seconds_after_midnight", "date": "2026-03-10"}):
        cmap = map_from_options(detect=True, tz="Asia/Tokyo", **options)
        assert [t.ts for t in replay_ticks(path, columns=cmap)] == want, options
    for options in ({}, {"ts_format": "%H:%M:%S%.f"}):
        with pytest.raises(ValueError, match=r'holds "09:00:00.123", a time of day without a date: give the day '
                                             r"with --date file_name \(the one date each file's name, or else its "
                                             r"folder, holds"):
            FileReplay(path, columns=map_from_options(detect=True, **options))
    (tmp_path / "full.csv").write_text("Time,Price,Volume\n2026-03-10 09:00:00,3450,100\n")
    with pytest.raises(ValueError, match=r"which holds its own date: drop date"):
        FileReplay(tmp_path / "full.csv", columns=map_from_options(detect=True, date="2026-03-10"))


def test_a_format_with_a_decimal_comma_before_the_fraction(tmp_path: Path) -> None:
    path = tmp_path / "eurex.csv"
    path.write_text("Time;Price;Size\n02.01.2024 09:00:01,123;171,32;10\n")
    for fmt in ("%d.%m.%Y %H:%M:%S,%3f", "%d.%m.%Y %H:%M:%S.%3f", "%d.%m.%Y %H:%M:%S%.f"):
        (tick,) = replay_ticks(path, columns={"ts_format": fmt})
        assert tick.ts == int(datetime(2024, 1, 2, 9, 0, 1, tzinfo=timezone.utc).timestamp()) * NS + 123_000_000, fmt


def test_a_map_files_bad_number_is_shown_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Map values are read as text (`yes` is a name), so `price_scale: -1` was refused as got '-1', quotes the user
    never wrote; now as written, in a map file and inline alike, for price_scale and price_offset (per stream too)."""
    ticks = tmp_path / "t.csv"
    ticks.write_text("ts,sym,px,qty\n1717236000000,AAA,1.0,1\n")
    out = str(tmp_path / "a.parquet")
    for line, said in (("price_scale: -1", "e.g. 10000), got -1"), ("price_offset: lots", "=10), got lots"),
                       ("price_offset: {ZNH6: x}", "=10), got x"), ("price_scale: [1, 2]", 'got ["1", "2"]')):
        map_file = tmp_path / "map.yaml"
        map_file.write_text(f"ts: ts\nts_unit: ms\nstream_col: sym\nprice: px\nsize: qty\n{line}\n")
        assert main(["backtest", str(ticks), "--columns", str(map_file), "--out", out, "--quiet"]) == 2
        assert capsys.readouterr().err.rstrip().endswith(said), line
    assert main(["backtest", str(ticks), "--columns", "ts=ts,ts_unit=ms,price=px,size=qty,price_scale=-1",
                 "--out", out, "--quiet"]) == 2
    assert capsys.readouterr().err.rstrip().endswith("got -1")
