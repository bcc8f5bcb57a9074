"""Event times of replayed files across clock changes and units: naive local times in the hour repeated when
summer time ends, told apart by the file's order; epoch units by magnitude. Every fixture is a real file written
here into tmp_path, read by the real replay."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

import polars as pl
import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from engine.service.backtest import BacktestReport
from engine.service.config import ServiceConfig
from conftest import drain

UTC = timezone.utc


def wall_clock_rows(zone: str, start: datetime, n: int, step_s: float, stream: str = "X") -> pl.DataFrame:
    """`n` rows every `step_s` seconds of real time from `start` (UTC), stamped with `zone`'s naive wall clock, as
    a vendor writes local times: in the hour repeated when summer time ends the clock reads 01:00..01:59 twice."""
    instants = [start + timedelta(seconds=step_s * i) for i in range(n)]
    return pl.DataFrame({
        "timestamp": [t.astimezone(ZoneInfo(zone)).replace(tzinfo=None) for t in instants],
        "ns": [int(t.timestamp() * 10**9) for t in instants],  # the truth, not read by the replay's map
        "symbol": [stream] * n, "price": [100.0 + i % 7 for i in range(n)], "size": [1.0] * n})


def read(path: Path, zone: str) -> tuple[list, list[str]]:
    replay = FileReplay(path, columns={"tz": zone})  # the layout detected, the zone given
    return drain(replay), replay.notes


FALL_BACK = {"America/New_York": datetime(2026, 11, 1, 4, tzinfo=UTC),  # 00:00 EDT; 01:00 repeats at 05:00Z, 06:00Z
             "Europe/London": datetime(2026, 10, 24, 23, tzinfo=UTC),  # 00:00 BST; 01:00 repeats at 00:00Z, 01:00Z
             "Europe/Berlin": datetime(2026, 10, 24, 23, tzinfo=UTC)}  # 01:00 CEST; 02:00 repeats at 00:00Z, 01:00Z


@pytest.mark.parametrize("zone", sorted(FALL_BACK))
@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_wall_clock_that_steps_back_in_the_repeated_hour_reads_its_second_pass_at_the_later_offset(
        tmp_path: Path, zone: str, suffix: str) -> None:
    rows = wall_clock_rows(zone, FALL_BACK[zone], 4 * 60, 60)  # 4 hours a minute apart, in order
    path = tmp_path / f"fall{suffix}"
    frame = rows.with_columns(pl.col("timestamp").dt.strftime("%Y-%m-%d %H:%M:%S")) if suffix == ".csv" else rows
    frame.drop("ns").write_csv(path) if suffix == ".csv" else frame.drop("ns").write_parquet(path)
    ticks, notes = read(path, zone)
    assert [t.ts for t in ticks] == rows["ns"].to_list()  # every instant its own: no duplicate, no empty hour
    assert [t.price for t in ticks] == rows["price"].to_list()  # in file order: the two passes not interleaved
    said = " ".join(notes)
    assert "steps back inside the hour repeated when summer time ends" in said
    assert "60 row(s) after the step back read at the second pass (the later UTC offset), 60 before it" in said
    assert "not in time order" not in said


def test_a_time_ordered_file_tells_each_streams_pass_by_any_streams_step_back(tmp_path: Path) -> None:
    """review383 #3: in a file in time order across its streams, a quiet stream's one print in the repeated hour
    after another stream stepped back was read at the first pass, an hour early, while the run's notes said both
    that the rows were out of time order and that nothing told the pass. The step back of any stream tells every
    stream's pass there; in a file of one stream after another each stream's own clock still tells its own."""
    zone, start = "America/New_York", FALL_BACK["America/New_York"]
    both = wall_clock_rows(zone, start, 240, 60, "A")  # 00:00 EDT to 02:59 EST: both passes
    once = wall_clock_rows(zone, start + timedelta(seconds=30), 90, 60, "B")  # to 01:29:30 EDT: the first pass only
    quiet = wall_clock_rows(zone, start + timedelta(hours=2, minutes=30, seconds=15), 1, 60, "C")  # 01:30:15 EST
    rows = pl.concat([both, once, quiet]).sort("ns")  # interleaved: B's and C's rows fall between A's
    rows.with_columns(pl.col("timestamp").dt.strftime("%Y-%m-%d %H:%M:%S")).drop("ns").write_csv(tmp_path / "abc.csv")
    ticks, notes = read(tmp_path / "abc.csv", zone)
    assert [(t.stream, t.ts) for t in ticks] == list(zip(rows["symbol"], rows["ns"]))  # C's print an hour later
    said = " ".join(notes)
    assert "(its streams in time order: the step back of any stream tells every stream's pass): 61 row(s) after " \
           "the step back read at the second pass (the later UTC offset), 90 before it at the first" in said, notes
    assert "no step back" not in said and "not in time order" not in said
    in_turn = pl.concat([both, once])  # one stream after the other: B's hour is told by B's own clock, or not at all
    in_turn.with_columns(pl.col("timestamp").dt.strftime("%Y-%m-%d %H:%M:%S")).drop("ns").write_csv(
        tmp_path / "ab.csv")
    ticks, notes = read(tmp_path / "ab.csv", zone)
    assert sorted((t.stream, t.ts) for t in ticks) == sorted(zip(in_turn["symbol"], in_turn["ns"]))
    said = " ".join(notes)
    assert "steps back inside the hour repeated when summer time ends in America/New_York (2026-11-01): 60 row(s) " \
           "after the step back read at the second pass" in said, notes
    assert "30 row(s) in the hour repeated" in said and "read at the first pass (the earlier instant)" in said


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_newest_first_file_reads_the_repeated_hour_oldest_first(tmp_path: Path, suffix: str) -> None:
    """A newest-first export (Bybit's, Coinbase's REST) across New York's 2024-11-03 fall-back: the repeated hour
    was told by the file's order, in which the clock never steps back there (it jumps forward from the second
    pass's 01:00 to the first pass's 01:59), so both passes read at the earlier offset and interleaved. The file is
    replayed reversed, and the hour is now told in that order: oldest first, each instant its own."""
    zone = "America/New_York"
    rows = wall_clock_rows(zone, datetime(2024, 11, 3, 4, tzinfo=UTC), 4 * 60, 60)  # 00:00 EDT on, a minute apart
    path = tmp_path / f"newest_first{suffix}"
    frame = rows.reverse().drop("ns")
    if suffix == ".csv":
        frame.with_columns(pl.col("timestamp").dt.strftime("%Y-%m-%d %H:%M:%S")).write_csv(path)
    else:
        frame.write_parquet(path)
    ticks, notes = read(path, zone)
    assert [t.ts for t in ticks] == rows["ns"].to_list()  # every instant its own, in time order
    assert [t.price for t in ticks] == rows["price"].to_list()
    said = " ".join(notes)
    assert "60 row(s) after the step back read at the second pass (the later UTC offset), 60 before it" in said
    assert "(newest first throughout); replayed reversed" in said, notes


def test_a_few_ms_of_disorder_in_the_repeated_hour_is_no_step_back(tmp_path: Path) -> None:
    zone = "America/New_York"
    text = ["2026-11-01 01:30:00.005", "2026-11-01 01:30:00.002", "2026-11-01 01:59:00", "2026-11-01 01:01:00",
            "2026-11-01 01:00:30"]  # 3 ms back (first pass); 58 min back: the second pass; 30 s back in it
    pl.DataFrame({"timestamp": text, "symbol": "X", "price": [1.0, 2.0, 3.0, 4.0, 5.0], "size": 1.0}).write_csv(
        tmp_path / "few.csv")
    ticks, notes = read(tmp_path / "few.csv", zone)
    edt, est = 4 * 3600 * 10**9, 5 * 3600 * 10**9
    wall = [int(datetime.fromisoformat(t).replace(tzinfo=UTC).timestamp() * 1000) * 10**6 for t in text]
    got = {t.price: t.ts for t in ticks}
    assert got == {1.0: wall[0] + edt, 2.0: wall[1] + edt, 3.0: wall[2] + edt, 4.0: wall[3] + est,
                   5.0: wall[4] + est}
    assert "2 row(s) after the step back read at the second pass (the later UTC offset), 3 before it" in " ".join(notes)


def test_a_first_pass_row_written_1_ms_late_across_the_step_back_stays_at_the_first_pass(tmp_path: Path) -> None:
    """review411 #7: Berlin's 02:59:59.999 CEST, written one row late after 02:00:00 CET, was read at the second
    pass, an hour late, and the sort note then reported the 60 min of disorder the reader made. A forward jump of
    more than half the shift after the step back, with a step back after it, is a late first-pass row; one with no
    step back after it (a quiet stream's gap in the second pass) stays in the second pass."""
    zone, cest, cet = "Europe/Berlin", 2 * 3600 * 10**9, 3600 * 10**9
    late = ["2024-10-27 02:59:59", "2024-10-27 02:00:00", "2024-10-27 02:59:59.999", "2024-10-27 02:00:01"]
    quiet = ["2024-10-27 02:50:00", "2024-10-27 02:10:00", "2024-10-27 02:55:00"]  # 40 min back, then 45 forward
    for name, text, offsets in (("late", late, [cest, cet, cest, cet]), ("quiet", quiet, [cest, cet, cet])):
        pl.DataFrame({"timestamp": text, "symbol": "EB", "price": [float(i + 1) for i in range(len(text))],
                      "size": 1.0}).write_csv(tmp_path / f"{name}.csv")
        ticks, notes = read(tmp_path / f"{name}.csv", zone)
        wall = [int(datetime.fromisoformat(t).replace(tzinfo=UTC).timestamp() * 1000) * 10**6 for t in text]
        assert {t.price: t.ts for t in ticks} == {i + 1.0: w - o for i, (w, o) in enumerate(zip(wall, offsets))}
        assert "by up to 60 min" not in " ".join(notes), notes


def test_a_file_of_one_pass_keeps_the_earlier_instants_and_says_how_many_rows_fell_in_the_hour(tmp_path: Path) -> None:
    zone = "America/New_York"
    rows = wall_clock_rows(zone, datetime(2026, 11, 1, 4, 30, tzinfo=UTC), 60, 60)  # 00:30..01:29 EDT
    rows.with_columns(pl.col("timestamp").dt.strftime("%Y-%m-%d %H:%M:%S")).drop("ns").write_csv(tmp_path / "one.csv")
    ticks, notes = read(tmp_path / "one.csv", zone)
    assert [t.ts for t in ticks] == rows["ns"].to_list()
    assert any("30 row(s) in the hour repeated when summer time ends in America/New_York (2026-11-01), and no step "
               "back" in note for note in notes), notes


EPOCH_S = 1_793_505_600  # 2026-11-01 04:00 UTC


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_ts_column_of_epoch_seconds_is_read_as_seconds_by_its_magnitude(tmp_path: Path, suffix: str) -> None:
    rows = pl.DataFrame({"ts": [EPOCH_S + 5 * i for i in range(20)], "symbol": "ES", "price": 100.0, "size": 1.0})
    path = tmp_path / f"ep_s{suffix}"
    rows.write_csv(path) if suffix == ".csv" else rows.write_parquet(path)
    replay = FileReplay(path)
    assert [t.ts for t in drain(replay)] == [(EPOCH_S + 5 * i) * 10**9 for i in range(20)]
    assert "read as ts=ts (s)" in replay.notes[0]
    # the wire layout's ns stay ns: as seconds, ms or us these would be no present-day time either
    pl.DataFrame({"ts": [1, 2, 3], "symbol": "W", "price": 1.0, "size": 1.0}).write_csv(tmp_path / "wire.csv")
    assert [t.ts for t in drain(FileReplay(tmp_path / "wire.csv"))] == [1, 2, 3]


def day_clock_rows(day: str, seconds: list[float]) -> pl.DataFrame:
    return pl.DataFrame({"date": [day] * len(seconds), "time": seconds, "symbol": "SAM",
                         "price": [100.0 + i % 5 for i in range(len(seconds))], "size": 1.0})


def test_a_unit_after_midnight_given_alone_refines_the_date_and_time_columns_detection_joins(tmp_path: Path) -> None:
    day_clock_rows("2027-12-31", [34200.0, 34210.123]).write_csv(tmp_path / "sam.csv")
    midnight = int(datetime(2027, 12, 31, tzinfo=UTC).timestamp()) * 10**9
    # the command line's --ts-unit alone, and the config's replay section alike
    for refined in (map_from_options(detect=True, ts_unit="seconds_after_midnight"),
                    ServiceConfig.from_dict({"replay": {"ts_unit": "seconds_after_midnight"}}).replay.column_map()):
        replay = FileReplay(tmp_path / "sam.csv", columns=refined)
        assert [t.ts for t in drain(replay)] == [midnight + 34200 * 10**9, midnight + 34210_123_000_000]
    # a file of one time column still needs the day, said when it is read
    pl.DataFrame({"time": [34200.0], "price": 1.0, "size": 1.0}).write_csv(tmp_path / "one.csv")
    with pytest.raises(ValueError, match=r"one.csv: ts_unit .* needs date"):
        FileReplay(tmp_path / "one.csv", columns=map_from_options(detect=True, ts_unit="seconds_after_midnight"))


@pytest.mark.parametrize("day, midnight_utc", [("2026-03-08", datetime(2026, 3, 8, 5, tzinfo=UTC)),  # EST
                                               ("2026-11-01", datetime(2026, 11, 1, 4, tzinfo=UTC))])  # EDT
def test_seconds_after_midnight_on_a_day_the_clocks_change_count_elapsed_time(tmp_path: Path, day: str,
                                                                              midnight_utc: datetime) -> None:
    seconds = [3000.0 + 9.5 * i for i in range(1000)]  # 00:50 to past 03:28 by the count: across the change
    day_clock_rows(day, seconds).write_csv(tmp_path / "sam.csv")
    replay = FileReplay(tmp_path / "sam.csv", columns={"tz": "America/New_York"})
    midnight = int(midnight_utc.timestamp()) * 10**9
    assert [t.ts for t in drain(replay)] == [midnight + round(s * 10**9) for s in seconds]  # no gap, no reject
    assert replay.rejected == {}


def test_tz_for_every_file_leaves_a_file_of_epoch_times_as_it_is_with_a_note(tmp_path: Path) -> None:
    """--tz over naive local times beside epoch times refused the epoch file ("'ms' counts from the epoch") where a
    file whose times carry their offset got a note: epoch times are UTC, so they keep theirs alike."""
    wall_clock_rows("America/New_York", datetime(2026, 6, 1, 13, 30, tzinfo=UTC), 3, 1).with_columns(
        pl.col("timestamp").dt.strftime("%Y-%m-%d %H:%M:%S")).drop("ns").write_csv(tmp_path / "local.csv")
    epoch_ms = [1_780_320_600_000 + 500 * i for i in range(3)]  # 2026-06-01 13:30 UTC, in ms
    pl.DataFrame({"ts": epoch_ms, "symbol": "E", "price": 1.0, "size": 1.0}).write_parquet(tmp_path / "ep.parquet")
    replay = FileReplay([tmp_path / "local.csv", tmp_path / "ep.parquet"],
                        columns=map_from_options(tz="America/New_York", hours="09:30-16:00", detect=True))
    got = [(t.stream, t.ts) for t in drain(replay)]
    assert [ts for stream, ts in got if stream == "E"] == [ms * 10**6 for ms in epoch_ms]
    assert [ts for stream, ts in got if stream == "X"] == [1_780_320_600 * 10**9 + i * 10**9 for i in range(3)]
    assert any("ep.parquet: its times count from the epoch (1970-01-01 UTC), so --tz America/New_York (for naive "
               'times) is not applied to it (the hours kept, "09:30-16:00 America/New_York"' in n for n in replay.notes)
    with pytest.raises(ValueError, match='"ms" counts from the epoch, which is UTC already'):  # the file's own map
        FileReplay([(tmp_path / "ep.parquet", {"tz": "America/New_York"})])


def test_the_out_of_order_note_counts_the_rows_and_the_largest_step_back(tmp_path: Path) -> None:
    t0 = 1_780_320_600_000  # 2026-06-01 13:30 UTC, in ms
    times = [t0 + 50 * i for i in range(300)]
    for i in (100, 150, 200, 250):  # each 3 ms before the row above it
        times[i] = times[i - 1] - 3
    times[51:55] = [times[50]] * 4  # equal times are in order
    pl.DataFrame({"timestamp_ms": times, "symbol": "OOO", "price": 1.0, "size": 1.0}).write_csv(tmp_path / "ooo.csv")
    replay = FileReplay(tmp_path / "ooo.csv")
    assert [t.ts for t in drain(replay)] == sorted(ms * 10**6 for ms in times)
    assert "ooo.csv: its rows are not in time order: 4 row(s) earlier than the row before them, by up to 3 ms (" in \
        replay.notes[1]
    # in a zone without summer time no clock goes back an hour: the note does not say one may have
    rows = wall_clock_rows("America/New_York", FALL_BACK["America/New_York"], 4 * 60, 60)
    rows.with_columns(pl.col("timestamp").dt.strftime("%Y-%m-%d %H:%M:%S")).drop("ns").write_csv(tmp_path / "ny.csv")
    ticks, notes = read(tmp_path / "ny.csv", "EST")
    assert any("not in time order: 1 row(s) earlier than the row before them, by up to 59 min" in n for n in notes)
    assert not any("summer time ends" in n for n in notes), notes


def test_hours_that_the_clocks_skip_on_a_day_are_said_not_to_exist_on_it(tmp_path: Path) -> None:
    rows = wall_clock_rows("America/New_York", datetime(2026, 3, 8, 5, tzinfo=UTC), 4 * 60, 60)  # 00:00..04:59
    rows.with_columns(pl.col("timestamp").dt.strftime("%Y-%m-%d %H:%M:%S")).drop("ns").write_csv(tmp_path / "sp.csv")
    replay = FileReplay(tmp_path / "sp.csv", columns={"tz": "America/New_York", "hours": "02:00-02:30"})
    assert drain(replay) == [] and replay.rejected == {"filtered_out": 240}
    assert replay.notes[-1] == ('sp.csv: hours "02:00-02:30" do not exist on 2026-03-08 in America/New_York: the '
                                "clocks skip them when summer time starts, so every row of that day is left out")
    replay = FileReplay(tmp_path / "sp.csv", columns={"tz": "America/New_York", "hours": "01:30-02:30"})
    assert len(drain(replay)) == 30 and not any("do not exist" in n for n in replay.notes)  # 01:30..01:59 EST


def test_a_naive_time_among_times_with_offsets_is_said_to_lack_its_offset(tmp_path: Path) -> None:
    (tmp_path / "mix.csv").write_text("timestamp,symbol,price,size\n2026-10-25T00:30:00+01:00,MIX,100,1\n"
                                      "2026-10-25T01:20:00,MIX,100.4,1\n2026-10-25T02:20:00.5+0100,MIX,100.5,1\n")
    replay = FileReplay(tmp_path / "mix.csv")
    assert len(drain(replay)) == 2 and replay.rejected == {"missing_field": 1}
    assert replay.rejected.examples["missing_field"].endswith(
        'mix.csv line 3: missing_field: field "ts" is required (column "timestamp": "2026-10-25T01:20:00" lacks the '
        "UTC offset the file's other times carry (the first of them: \"2026-10-25T00:30:00+01:00\"), so it is no "
        "instant: write the row with its offset)")


def test_the_scored_share_is_printed_with_the_digits_it_has(tmp_path: Path) -> None:
    for test_from, said in ((0.999, "99.9%"), (0.85, "85%"), (0.5, "50%")):
        report = BacktestReport(ticks=10, rejected={}, answers=0, out=tmp_path / "a.parquet", scores=[],
                                test_from=test_from)
        assert f"scored: the answers after the first {said} of each stream's ticks (--test-from {test_from:g};" in \
            report.summary()


def test_a_date_time_past_2262_is_ts_out_of_range_never_a_wrapped_time(tmp_path: Path) -> None:
    """review411 #1: ISO text past 2262 was parsed straight to datetime[ns], which polars wraps around int64: 2300
    read as 1715 (a "before 1980" warning, a sort note on a disorder not in the file), 1600 as 2184 (replayed). Such
    a row is ts_out_of_range now, naming its time and the limit, and the file's other rows read as written."""
    times = [f"2024-01-01T00:00:0{i}Z" for i in range(4)] + ["2300-01-01T00:00:00Z", "1600-01-01T00:00:00Z"] + \
        [f"2024-01-01T00:00:1{i}Z" for i in range(3)]
    path = tmp_path / "far.csv"
    path.write_text("timestamp,symbol,price,size\n" + "".join(f"{t},MXF,100.0{i},1\n" for i, t in enumerate(times)))
    replay = FileReplay(path)
    start = int(datetime(2024, 1, 1, tzinfo=UTC).timestamp()) * 10**9
    assert [t.ts for t in drain(replay)] == [start + s * 10**9 for s in (0, 1, 2, 3, 10, 11, 12)]
    assert replay.rejected == {"ts_out_of_range": 2}
    assert replay.rejected.examples["ts_out_of_range"] == (
        f"{path} line 6: ts_out_of_range: ts must be in [0, 2**63): the time is 2300-01-01T00:00:00Z, past "
        f'2262-04-11T23:47:16.854775807Z, the last time int64 nanoseconds since the epoch hold (column "timestamp")')
    assert not any("not in time order" in note or "before 1980" in note for note in replay.notes), replay.notes


def test_ticks_on_whole_minutes_sharing_them_are_cautioned_and_minute_bars_are_not(tmp_path: Path) -> None:
    """review440 #13: a tick file whose times a spreadsheet cut to the minute (`28.03.2024 08:00`) replayed without a
    word, its minute's ticks at one time; a file of a row a minute (bars) is such a clock by nature."""
    cut, bars = tmp_path / "cut.csv", tmp_path / "bars.csv"
    cut.write_text("time;symbol;price;size\n" + "".join(f"28.03.2024 08:{i // 5:02d};VOD.L;72,{50 + i % 3};100\n"
                                                        for i in range(40)))
    bars.write_text("time;symbol;price;size\n" + "".join(f"28.03.2024 08:{i:02d};VOD.L;72,{50 + i % 3};100\n"
                                                         for i in range(40)))
    [said] = [c for c in FileReplay(cut).cautions if "on a whole minute" in c]
    assert said.startswith("cut.csv: every one of its 40 timed rows is on a whole minute, 32 of them at the minute of "
                           "the row of their stream before"), said
    assert "a clock cut to the minute" in said and "dd.mm.yyyy hh:mm:ss,000" in said
    assert not any("on a whole minute" in c for c in FileReplay(bars).cautions)
