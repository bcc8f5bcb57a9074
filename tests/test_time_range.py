"""--from / --to: a replay or backtest of an event-time range of the files, exactly as of the files cut to it by
hand; the rows left out counted; an empty, reversed or unreadable range refused in one line."""

from __future__ import annotations

import argparse
import json
from datetime import date
from pathlib import Path

import polars as pl
import pytest

from conftest import drain, tiny_tick_checkpoint
from connectors.replay import FileReplay
from connectors.synthetic import SyntheticConfig, SyntheticMarket
from connectors.ticks import utc_text
from connectors.time_range import TimeRange, parse_time
from engine.service.cli import main

QUERIES = """
queries:
  - {name: dir20, streams: ["*"], question: direction_20, kind: choice, trigger: {ticks: 5}}
  - {name: move50, streams: ["*"], question: move_bps_50, kind: expectation, trigger: {interval: 2s}}
"""


@pytest.fixture(scope="module")
def market(tmp_path_factory) -> tuple[Path, list]:
    root = tmp_path_factory.mktemp("range")
    ticks = SyntheticMarket(SyntheticConfig(seed=5)).next_batch(1200)
    pl.DataFrame([t.to_wire() for t in ticks]).write_parquet(root / "ticks.parquet")
    return root, ticks


def test_a_time_is_iso_text_in_utc_unless_it_says_its_offset_or_ns_since_the_epoch() -> None:
    assert parse_time("2024-01-02") == 1_704_153_600 * 10**9
    assert parse_time("2024-01-02T01:00:00+01:00") == parse_time("2024-01-02 00:00:00Z") == parse_time("2024-01-02")
    assert parse_time("2024-01-02T00:00:00.25") == 1_704_153_600_250_000_000
    assert parse_time("1704153600000000001") == 1_704_153_600_000_000_001
    assert parse_time("2024-01-02T00:00:00.000000001Z") == parse_time(utc_text(1_704_153_600_000_000_001))
    with pytest.raises(ValueError, match=r'--from "monday" is not a time: give ISO 8601'):
        TimeRange.of("monday", None)
    with pytest.raises(ValueError, match=r"--from 2024-01-03T00:00:00Z is not before --to 2024-01-02T00:00:00Z: "
                                         r"the range is reversed"):
        TimeRange.of("2024-01-03", "2024-01-02")
    with pytest.raises(ValueError, match="the range is empty"):
        TimeRange.of("2024-01-02", "2024-01-02")


def test_a_range_reads_what_a_file_cut_by_hand_holds_and_counts_the_rest(market, tmp_path: Path) -> None:
    """From inclusive, to exclusive, by each tick's own time, in Parquet (the range in the lazy query) and in CSV
    of ISO text and of float epoch seconds (checked tick by tick after a wider query)."""
    root, ticks = market
    start, end = ticks[300].ts, ticks[900].ts  # tick 300 in, tick 900 out (times are distinct here)
    kept = [t for t in ticks if start <= t.ts < end]
    frame = pl.DataFrame([t.to_wire() for t in ticks])
    frame.with_columns((pl.col("ts") / 1e9).alias("ts")).write_csv(tmp_path / "seconds.csv")
    for path in (root / "ticks.parquet", tmp_path / "seconds.csv"):
        replay = FileReplay(path, time_range=TimeRange(start, end))
        got = drain(replay)
        if path.suffix == ".parquet":
            assert got == kept
            assert replay.plans[0].range_dropped is not None  # pushed down: no row outside reached Python
        else:  # a float of seconds is 100 ns coarse: the cut is by the times as read, the same ticks
            assert [(t.stream, t.price) for t in got] == [(t.stream, t.price) for t in kept]
        assert replay.range_left_out == len(ticks) - len(kept) and replay.rejected == {}
    only_from = FileReplay(root / "ticks.parquet", time_range=TimeRange(start=end))
    assert drain(only_from) == ticks[900:] and only_from.range_left_out == 900


def test_a_dbn_range_builds_the_book_from_before_it(tmp_path: Path) -> None:
    """A DBN file is decoded whole: an order resting from before --from is the top of book inside the range."""
    dbn = pytest.importorskip("databento_dbn", reason="the dbn extra is not installed")
    from test_replay_dbn import ESH6, MAR5, NS, PX, trade, write_dbn

    def add(order: int, ts: int, side: object, quarters: int) -> object:
        return dbn.MBOMsg(publisher_id=1, instrument_id=ESH6, ts_event=ts, order_id=order, price=quarters * PX,
                          size=2, action=dbn.Action.ADD, side=side, ts_recv=ts, flags=dbn.F_LAST)

    path = write_dbn(tmp_path / "es.dbn", dbn.Schema.MBO, [
        add(1, MAR5, dbn.Side.BID, 27200), add(2, MAR5 + NS, dbn.Side.ASK, 27204),
        trade(ESH6, MAR5 + 10 * NS, 27204), add(3, MAR5 + 11 * NS, dbn.Side.ASK, 27203),
        trade(ESH6, MAR5 + 20 * NS, 27203)], {"ESH6": [(date(2026, 3, 1), date(2026, 3, 9), ESH6)]})
    replay = FileReplay(path, time_range=TimeRange(MAR5 + 10 * NS, MAR5 + 20 * NS))
    assert [(t.kind, t.price, t.bid, t.ask) for t in drain(replay)] == [
        ("trade", 6801.0, None, None), ("quote", None, 6800.0, 6800.75)]
    assert replay.range_left_out == 2  # the first quote and the last trade (a record making no tick is no row)
    with pytest.raises(ValueError, match=r"--to 2026-03-05T14:30:00Z holds none of the files' ticks: they run "
                                         r"from 2026-03-05T14:30:00Z to 2026-03-05T14:30:20Z"):
        FileReplay(path, time_range=TimeRange(end=MAR5))


def test_a_backtest_of_a_range_answers_as_one_of_the_file_cut_to_it(market, tmp_path: Path, capsys) -> None:
    root, ticks = market
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    (tmp_path / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 16384, block_size: 16}}\n")
    (tmp_path / "q.yaml").write_text(QUERIES)
    start, end = ticks[200].ts, ticks[1000].ts
    cut = pl.read_parquet(root / "ticks.parquet").filter(pl.col("ts") >= start, pl.col("ts") < end)
    cut.write_parquet(tmp_path / "cut.parquet")
    common = ["--queries", str(tmp_path / "q.yaml"), "--config", str(tmp_path / "engine.yaml"), "--quiet"]
    assert main(["backtest", str(tmp_path / "cut.parquet"), "--out", str(tmp_path / "by_hand.parquet"), *common]) == 0
    capsys.readouterr()
    assert main(["backtest", str(root / "ticks.parquet"), "--from", utc_text(start), "--to", utc_text(end),
                 "--out", str(tmp_path / "ranged.parquet"), "--test-from", "0.5", *common]) == 0
    printed = capsys.readouterr().out
    ranged, by_hand = pl.read_parquet(tmp_path / "ranged.parquet"), pl.read_parquet(tmp_path / "by_hand.parquet")
    # `row` counts from each file's first row: the cut file's rows are the range's, shifted by the rows before it
    shift = pl.read_parquet(root / "ticks.parquet").filter(pl.col("ts") < start).height
    assert ranged["row"].equals(by_hand["row"] + shift)
    assert ranged.height > 100 and ranged.drop("row").equals(by_hand.drop("row"))
    assert f"replayed {cut.height} ticks" in printed
    assert f"  range --from {utc_text(start)} --to {utc_text(end)}: {len(ticks) - cut.height} row(s) of the files " \
           f"outside it left out" in printed
    # --test-from says where it split each stream, in time: its first scored answer's
    split = next(line for line in printed.splitlines() if line.startswith("  split"))
    firsts = {}
    for stream, ticks_seen, data_ts in ranged.select("stream", "ticks", "data_ts").rows():
        if ticks_seen > int(cut.filter(pl.col("stream") == stream).height * 0.5):
            firsts[stream] = min(firsts.get(stream, data_ts), data_ts)
    assert split == "  split (each stream's first scored answer, UTC): " + ", ".join(
        f"{stream} {utc_text(ts)}" for stream, ts in sorted(firsts.items()))
    # a range the files do not reach, and one reversed: one line each, exit 2, before the model loads
    assert main(["backtest", str(root / "ticks.parquet"), "--from", "2099-01-01", "--out",
                 str(tmp_path / "none.parquet"), *common]) == 2
    assert "--from 2099-01-01T00:00:00Z holds none of the files' ticks: they run from" in capsys.readouterr().err
    assert main(["backtest", str(root / "ticks.parquet"), "--from", "2024-01-02", "--to", "2024-01-01", "--out",
                 str(tmp_path / "none.parquet"), *common]) == 2
    assert "the range is reversed" in capsys.readouterr().err


def test_feed_replay_says_the_rows_its_range_left_out(market, capsys) -> None:
    """`feed replay --from`: the files' mistakes are said before the engine is reached; a range holding none of
    the ticks is one of them."""
    root, ticks = market
    assert main(["feed", "replay", str(root / "ticks.parquet"), "--from", "2099-01-01",
                 "--endpoint", "tcp://127.0.0.1:9"]) == 2
    assert "holds none of the files' ticks" in capsys.readouterr().err


def test_an_integer_time_in_seconds_ms_or_us_is_refused_naming_the_ns_and_iso_time_it_meant() -> None:
    """`--from 1710052200` (epoch seconds) was read as ns, a time in January 1970: a --to so read held none of the
    ticks and said nothing of units, a --from so read held all of them."""
    for given, unit in (("1710052200", "seconds"), ("1710052200000", "milliseconds"),
                        ("1710052200000000", "microseconds")):
        with pytest.raises(ValueError) as refused:
            TimeRange.of(given, None)
        assert str(refused.value).startswith(f"--from {given} looks like epoch {unit}: give ns (1710052200000000000) "
                                             f"or ISO 8601 (2024-03-10T06:30:00Z); as ns it is 1970-01-"), refused
    assert TimeRange.of(None, "1710052200000000000").end == 1_710_052_200 * 10**9
    assert TimeRange.of("0", "1000").start == 0  # small ns (a simulation's clock) stay ns


def test_a_naive_iso_time_beside_tz_is_read_on_its_clock_and_says_so(market, capsys) -> None:
    """review375 #8: `--tz Australia/Sydney --from 2024-04-05` cut at UTC's midnight, dropping the session's first
    hour; a time without an offset is now on --tz's clock (a desk's day is its market's), said in a note."""
    root, _ = market
    feed = ["feed", "replay", str(root / "ticks.parquet"), "--endpoint", "tcp://127.0.0.1:9", "--tz",
            "America/New_York"]
    assert main([*feed, "--from", "2099-01-01T09:30", "--to", "2099-01-02T00:00Z"]) == 2
    err = capsys.readouterr().err
    assert ("flashtick feed replay: note: --from 2099-01-01T09:30 read on America/New_York's clock, as --tz gives "
            "it for the files' times (--from 2099-01-01T14:30:00Z --to 2099-01-02T00:00:00Z;") in err, err
    assert "--from 2099-01-01T14:30:00Z --to 2099-01-02T00:00:00Z holds none of the files' ticks" in err, err
    assert main([*feed, "--from", "2099-01-01T09:30-05:00"]) == 2
    assert ": note: " not in capsys.readouterr().err
    assert main([*feed[:-2], "--from", "2099-01-01T09:30"]) == 2  # no --tz: UTC, nothing to say
    err = capsys.readouterr().err
    assert ": note: " not in err and "--from 2099-01-01T09:30:00Z holds none" in err, err


def test_a_time_the_tz_clock_repeats_or_skips_is_said_with_the_reading_taken(capsys) -> None:
    """review411 #9: `--from 2024-11-03T01:30 --tz America/New_York` (01:30 comes twice) was read at the first pass,
    and a skipped 02:30 as 03:30 EDT, without a word; the note now says which reading was taken and, for a repeated
    time, the offset that picks the other (--test-from alike)."""
    from connectors.time_range import wall_clock_caveat
    from engine.service.cli_reading import time_range_of
    from engine.service.test_start import test_start_of

    zone = "America/New_York"
    args = argparse.Namespace(command_name="flashtick backtest", tz=zone, time_from="2024-03-10T02:30",
                              time_to="2024-11-03T01:30")
    time_range = time_range_of(args)
    assert (utc_text(time_range.start), utc_text(time_range.end)) == ("2024-03-10T07:30:00Z", "2024-11-03T05:30:00Z")
    err = capsys.readouterr().err
    assert "; --from 2024-03-10T02:30 is skipped by America/New_York's clock (it goes forward over it): read at the " \
           "offset before, -05:00, 2024-03-10T07:30:00Z (03:30:00 on its clock after the change)" in err, err
    assert "; --to 2024-11-03T01:30 comes twice on America/New_York's clock (it goes back then): read at its first " \
           "pass, -04:00, 2024-11-03T05:30:00Z; give 2024-11-03T01:30-05:00 for the second" in err, err
    assert parse_time("2024-11-03T01:30-05:00") == time_range.end + 3600 * 10**9  # the offset said: the second pass
    assert test_start_of("2024-11-03 01:45:00.5", zone, "flashtick evaluate").text() == "2024-11-03T05:45:00.500000000Z"
    assert "flashtick evaluate: note: --test-from 2024-11-03 01:45:00.5 comes twice on America/New_York's clock" \
           in capsys.readouterr().err
    assert wall_clock_caveat("2024-11-03T02:30", zone) is None and wall_clock_caveat("2024-11-03T01:30Z", zone) is None


def test_a_bare_date_with_tz_is_that_zones_midnight_summer_time_included() -> None:
    # Sydney: AEDT (+11) on 2024-04-05, AEST (+10) from 2024-04-07 03:00
    sydney = TimeRange.of("2024-04-05", "2024-04-08", "Australia/Sydney")
    assert (utc_text(sydney.start), utc_text(sydney.end)) == ("2024-04-04T13:00:00Z", "2024-04-07T14:00:00Z")
    assert TimeRange.of("2024-04-05T00:00Z", None, "Australia/Sydney").start == TimeRange.of("2024-04-05", None).start


def test_a_reading_option_given_twice_with_two_values_is_a_usage_error(market, capsys) -> None:
    """review375 #1: argparse kept the last of two values and dropped the first silently (a second --hours
    dropped the morning session, exit 0); a window is now added, a one-value option given twice refused."""
    root, _ = market
    feed = ["feed", "replay", str(root / "ticks.parquet"), "--endpoint", "tcp://127.0.0.1:9"]
    for twice, said in ((["--tz", "Asia/Tokyo", "--tz", "Asia/Hong_Kong"], '--tz: given again ("Asia/Hong_Kong" after '
                                                                         '"Asia/Tokyo")'),
                        (["--from", "2024-01-02", "--from", "2024-01-03"], "--from: given again"),
                        (["--date", "2024-01-02", "--date", "2024-01-03"], "--date: given again"),
                        (["--sequence", "seq", "--no-sequence"], '--no-sequence: given again (--no-sequence after '
                                                                  '"seq")')):
        with pytest.raises(SystemExit) as usage:
            main([*feed, *twice])
        assert usage.value.code == 2
        err = capsys.readouterr().err
        assert said in err and "give it once" in err, err
    # the same value twice drops nothing: taken
    assert main([*feed, "--tz", "UTC", "--tz", "UTC", "--from", "2099-01-01"]) == 2
    assert "holds none of the files' ticks" in capsys.readouterr().err



def test_a_backtest_test_from_a_time_scores_the_answers_from_then_on(market, tmp_path: Path, capsys) -> None:
    """`backtest --test-from TIME` (review382 #9): the answers whose data time is then or later are scored, the same
    instant for every stream, not a share of each stream's ticks; the summary says which."""
    root, ticks = market
    checkpoint = tiny_tick_checkpoint(tmp_path / "model")
    (tmp_path / "engine.yaml").write_text(f"model: {{path: {checkpoint}}}\nkv: {{cells: 16384, block_size: 16}}\n")
    (tmp_path / "q.yaml").write_text(QUERIES)
    cut = ticks[700].ts
    out = tmp_path / "timed.parquet"
    assert main(["backtest", str(root / "ticks.parquet"), "--out", str(out), "--queries", str(tmp_path / "q.yaml"),
                 "--config", str(tmp_path / "engine.yaml"), "--quiet", "--test-from", utc_text(cut)]) == 0
    printed = capsys.readouterr().out
    assert f"scored: the answers from {utc_text(cut)} on (--test-from, UTC event time; 'in slice' counts " \
           f"them)" in printed, printed
    answers = pl.read_parquet(out)
    scores = {s["query"]: s for s in json.loads(out.with_suffix(".scores.json").read_text())}
    later = answers.filter(pl.col("data_ts") >= cut)
    assert 0 < later.height < answers.height
    for query, score in scores.items():  # 'in slice': the answers from the cut on, every stream alike
        assert score["answers"] == later.filter(pl.col("query") == query).height, query
    assert json.loads(out.with_suffix(".manifest.json").read_text())["run"]["test_from"] == utc_text(cut)


def test_a_python_caller_gives_times_as_a_notebook_holds_them(market) -> None:
    """review384 #5: `time_range=(start, end)` failed deep in the replay (a tuple has no `overlaps`), and
    `TimeRange.of` and `test_from` took text alone (a pandas Timestamp, a datetime, numpy's int64 and datetime64
    raised AttributeError, a date ValueError). Each is read as its instant; a naive one as UTC, as the CLI reads it;
    anything else is a TypeError naming what is accepted."""
    from datetime import datetime, timedelta, timezone

    import numpy as np

    from engine.service.backtest import run_backtest
    from engine.service.config import ServiceConfig
    from engine.service.test_start import TestStart, test_start_given

    root, ticks = market
    start, end = ticks[300].ts, ticks[900].ts
    text = utc_text(start)
    aware = datetime.fromtimestamp(start // 10**9, timezone(timedelta(hours=-5))) + timedelta(
        microseconds=start % 10**9 // 1000)  # the same instant on New York's winter clock
    for held in (text, start, np.int64(start), aware, aware.astimezone(timezone.utc).replace(tzinfo=None),
                 np.datetime64(start, "ns")):
        assert TimeRange.of(held, None).start // 1000 == start // 1000, held  # (a datetime holds microseconds)
        assert test_start_given(held).ns // 1000 == start // 1000  # (an int is ns: no fraction is one)
    replay = FileReplay(root / "ticks.parquet", time_range=(np.datetime64(start, "ns"), utc_text(end)))
    assert drain(replay) == [t for t in ticks if start <= t.ts < end]
    assert test_start_given(0.5) == 0.5 and test_start_given("test") == "test"
    assert test_start_given(TestStart(start)) == TestStart(start)
    with pytest.raises(TypeError, match=r"--from: expected ISO 8601 text .* a numpy datetime64, got float"):
        TimeRange.of(1.5, None)
    with pytest.raises(TypeError, match=r"time_range: expected a TimeRange, a \(start, end\) pair of"):
        run_backtest(ServiceConfig(), root / "ticks.parquet", QUERIES, root / "never.parquet", time_range=start)
    with pytest.raises(TypeError, match=r"test_from \(--test-from\) must be a fraction in \(0, 1\), an event time"):
        run_backtest(ServiceConfig(), root / "ticks.parquet", QUERIES, root / "never.parquet", test_from=[0.5])


def test_a_pandas_timestamp_keeps_its_ns() -> None:
    pd = pytest.importorskip("pandas", reason="pandas is not installed (the test extra installs it)")
    ns = 1_723_161_660_000_000_007
    assert TimeRange.of(pd.Timestamp(ns, unit="ns", tz="America/New_York"), pd.Timestamp(ns + 1)).start == ns
    with pytest.raises(ValueError, match=r"^--from is NaT \(no time\)$"):  # (pandas' own "NaTType does not support")
        TimeRange.of(pd.NaT, None)
