"""Epoch counts written as text with a unit suffix (`1723161255342ms`): `--ts-format '%sms'` read the digits as
seconds, and seconds x 1e9 wrapped int64 into year-2211 times that replayed and scored without a word (review 108).
Now `%sms`/`%sus`/`%sns` read a count of that unit, any `%s` time outside 1970..2200 is a reject naming its row,
and the error on such text names the option that reads it."""
from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

import polars as pl
import pytest

from connectors.epoch_counts import TEXT_COUNT, decimal_text_ns, is_text_count, whole_count
from connectors.replay import FileReplay
from connectors.tick_times import check_ts
from connectors.ticks import InvalidTick
from engine.service.cli import main
from conftest import drain

FIRST_MS = 1_723_161_255_342  # 2024-08-08 23:54:15.342 UTC


def epoch_text_file(path: Path, cells: list[str]) -> Path:
    path.write_text("time,symbol,price,size\n" + "".join(f"{c},BTCUSDT,{61837 + i % 5},0.5\n"
                                                         for i, c in enumerate(cells)))
    return path


def test_a_count_of_ms_with_its_suffix_reads_exactly_with_percent_s_ms(tmp_path: Path) -> None:
    path = epoch_text_file(tmp_path / "trades.csv", [f"{FIRST_MS + 275 * i}ms" for i in range(300)])
    replay = FileReplay(path, columns={"ts_format": "%sms"})
    ticks = replay.next_batch(10_000)
    assert [t.ts for t in ticks] == [(FIRST_MS + 275 * i) * 1_000_000 for i in range(300)]
    assert not replay.rejected
    assert not any("UTC offset" in note for note in replay.notes)  # an epoch count is an instant: no zone to say


def test_a_percent_s_time_past_2200_is_a_reject_naming_its_row_never_a_wrapped_time(tmp_path: Path) -> None:
    seconds = [f"{FIRST_MS // 1000 + i}s" for i in range(300)]
    seconds[150] = f"{FIRST_MS + 150_000}s"  # a count of ms among seconds: x 1e9 wrapped to 2211
    path = epoch_text_file(tmp_path / "mixed.csv", seconds)
    replay = FileReplay(path, columns={"ts_format": "%ss"})
    ticks = replay.next_batch(10_000)
    assert len(ticks) == 299 and max(t.ts for t in ticks) < 1_800_000_000 * 10**9
    assert replay.rejected == {"missing_field": 1}
    assert replay.rejected.examples["missing_field"] == (
        f'{path} line 152: missing_field: field "ts" is required (column "time": "{FIRST_MS + 150_000}s": '
        f"{FIRST_MS + 150_000} s since the epoch, which is not in 1970..2200 (at its magnitude it counts ms))")


def test_percent_s_on_ms_text_is_refused_with_the_option_that_reads_it(tmp_path: Path, capsys) -> None:
    path = epoch_text_file(tmp_path / "trades.csv", [f"{FIRST_MS + 275 * i}ms" for i in range(300)])
    out = tmp_path / "a.parquet"
    for given, said in (([], 'an epoch count with its unit written after it: give --ts-format "%sms"'),
                        (["--ts-format", "%s"], '--ts-format "%s" reads no time in 1970..2200 from it: give '
                                                '--ts-format "%sms"')):
        capsys.readouterr()
        assert main(["backtest", str(path), *given, "--out", str(out), "--quiet", "--max-ticks", "50"]) == 2
        assert f'column "time" holds "{FIRST_MS}ms": {said}' in capsys.readouterr().err
        assert not out.exists()
    plain = epoch_text_file(tmp_path / "plain.csv", [f"x{FIRST_MS + i}" for i in range(3)])
    with pytest.raises(ValueError, match="not ISO 8601"):  # other text: the strftime advice as before
        FileReplay(plain)


GATE_COLUMNS = {"ts": "create_time_ms", "ts_unit": "ms", "stream_col": "currency_pair", "price": "price",
                "size": "amount", "side": "side"}
# Gate.io's own API v4 examples: /spot/my_trades' create_time_ms, the websocket spot.trades' (4 digits past the ms)
GATE_CELLS = ["1548000000123.456", "1606292218213.4578", f"{FIRST_MS}.000", f"{FIRST_MS + 58}", f"{FIRST_MS + 300}.5"]
GATE_NS = [1_548_000_000_123_456_000, 1_606_292_218_213_457_800, FIRST_MS * 10**6, (FIRST_MS + 58) * 10**6,
           (FIRST_MS + 300) * 10**6 + 500_000]


def gate_csv(path: Path, cells: list[str]) -> Path:
    path.write_text("create_time_ms,currency_pair,side,amount,price\n" + "".join(
        f"{c},BTC_USDT,buy,0.01,6000{i % 10}.1\n" for i, c in enumerate(cells)))
    return path


def test_decimal_text_of_ms_reads_exactly_as_ns_in_json_csv_and_parquet(tmp_path: Path, capsys) -> None:
    """fix278 #3 read Gate.io's `create_time_ms` with a `.000` tail; fix280 made any other fraction of a ms a
    reject, so Gate.io's own files ("1548000000123.456") were refused (review295 #2). A fraction of a ms (or us) is
    a finer clock's digits: read exactly to the ns, as decimal seconds are, in every file kind, detected or mapped."""
    (tmp_path / "gate.jsonl").write_text("".join(
        f'{{"create_time_ms": "{c}", "currency_pair": "BTC_USDT", "side": "buy", "amount": "0.01", '
        f'"price": "6000{i}.1"}}\n' for i, c in enumerate(GATE_CELLS)))
    pl.DataFrame({"create_time_ms": GATE_CELLS, "currency_pair": ["BTC_USDT"] * 5, "side": ["buy"] * 5,
                  "amount": [0.01] * 5, "price": [60000.1 + i for i in range(5)]}).write_parquet(tmp_path / "g.parquet")
    for path in (tmp_path / "gate.jsonl", gate_csv(tmp_path / "gate.csv", GATE_CELLS), tmp_path / "g.parquet"):
        for columns in (GATE_COLUMNS, None):
            replay = FileReplay(path, columns=columns)
            assert sorted(t.ts for t in replay.next_batch(100)) == sorted(GATE_NS), (path, columns)
            assert not replay.rejected
    us = gate_csv(tmp_path / "us.csv", [f"{FIRST_MS * 1000 + i}.5" for i in range(5)])
    replay = FileReplay(us, columns=GATE_COLUMNS | {"ts_unit": "us"})
    assert [t.ts for t in replay.next_batch(100)] == [(FIRST_MS * 1000 + i) * 1000 + 500 for i in range(5)]
    out = tmp_path / "a.parquet"
    assert main(["backtest", str(tmp_path / "gate.csv"), "--out", str(out), "--quiet", "--max-ticks", "50"]) == 0


def test_a_ms_column_of_whole_counts_then_decimal_ones_reads_every_row_exactly(tmp_path: Path) -> None:
    """fix302 #6: a CSV's ms column was read as text only when its first value had a point, so whole counts first
    and a later `1712345678123.456` made that row a reject (missing_field). The whole column decides now: mixed
    whole and decimal ms read exactly, detected or mapped, wherever the first decimal stands (row 2 or 3,000)."""
    for whole_first in (1, 3000):
        cells = [str(FIRST_MS + 7 * i) for i in range(whole_first)] + ["1712345678123.456", f"{FIRST_MS + 9}",
                                                                       "1712345679001.5", f"{FIRST_MS}.000"]
        expected = [(FIRST_MS + 7 * i) * 10**6 for i in range(whole_first)] + [
            1_712_345_678_123_456_000, (FIRST_MS + 9) * 10**6, 1_712_345_679_001_500_000, FIRST_MS * 10**6]
        path = gate_csv(tmp_path / f"mixed-{whole_first}.csv", cells)
        for columns in (GATE_COLUMNS, None):
            replay = FileReplay(path, columns=columns)
            ticks = replay.next_batch(10_000)
            assert sorted(t.ts for t in ticks) == sorted(expected), (whole_first, columns)
            assert not replay.rejected


def test_a_fraction_of_a_ns_stays_a_reject_that_names_it(tmp_path: Path, capsys) -> None:
    """A count of ns reads a `.000` tail as the integer; a fraction of a ns is no clock's: a reject, named."""
    first_ns = FIRST_MS * 10**6
    cells = [f"{first_ns + 58 * i}.000" for i in range(4)] + [f"{first_ns + 300}.5"]
    replay = FileReplay(gate_csv(tmp_path / "gate.csv", cells), columns=GATE_COLUMNS | {"ts_unit": "ns"})
    assert [t.ts for t in replay.next_batch(100)] == [first_ns + 58 * i for i in range(4)]
    assert replay.rejected == {"missing_field": 1}
    assert f'"{first_ns + 300}.5" holds a fraction of a ns after the point' in \
        replay.rejected.examples["missing_field"]
    fractions = gate_csv(tmp_path / "fractions.csv", [f"{first_ns + i}.25" for i in range(5)])
    out = tmp_path / "a.parquet"
    assert main(["backtest", str(fractions), "--columns", ",".join(f"{k}={v}" for k, v in GATE_COLUMNS.items()),
                 "--ts-unit", "ns", "--out", str(out), "--quiet", "--max-ticks", "50"]) == 2
    assert f"column \"create_time_ms\" holds \"{first_ns}.25\", a fraction of a ns after the point" in \
        capsys.readouterr().err and not out.exists()


def test_a_float_column_of_whole_ms_reads_exactly(tmp_path: Path) -> None:
    """fix280 #2: a Parquet float64 column of whole ms was scaled as a float (1723161255342.0 * 1e6 is 128 ns
    off); whole units now scale as an int, as an integer column's do."""
    times = [FIRST_MS + 58 * i for i in range(5)]
    pl.DataFrame({"create_time_ms": [float(t) for t in times], "currency_pair": ["BTC_USDT"] * 5,
                  "side": ["buy"] * 5, "amount": [0.01] * 5, "price": [60000.1 + i for i in range(5)]}
                 ).write_parquet(tmp_path / "gate.parquet")
    replay = FileReplay(tmp_path / "gate.parquet", columns=GATE_COLUMNS)
    assert [t.ts for t in replay.next_batch(100)] == [t * 1_000_000 for t in times]
    assert not replay.rejected



def test_scientific_notation_reads_exactly_in_every_unit() -> None:
    """review411 #6: `1.709967603e9` s had its fraction cut to 9 digits with the exponent in them, read as
    1709967603 ns (1970, replayed first, nothing rejected), and a CSV's ms column with a lone `1.709967601e12` was
    read as Int64, that row rejected. The point is moved now, exactly, whatever the unit and wherever such a cell
    stands; such a column is read as text."""
    cells = {"s": ["1709967600", "1.7099676005e9", "17099676011234567891e-10", "1.709967602E+09"],
             "ms": ["1709967600000", "1.709967600500e12", "1.7099676011234567891e12", "1709967602000"],
             "us": ["1709967600000000", "1.7099676005e15", "1709967601123456.7891", "1.709967602e15"],
             "ns": ["1709967600000000000", "1.7099676005e18", "1709967601123456789", "1.709967602e18"]}
    expected = [1_709_967_600 * 10**9, 1_709_967_600_500_000_000, 1_709_967_601_123_456_789, 1_709_967_602 * 10**9]
    for unit, column in cells.items():
        reading = whole_count(pl.col("t")) if unit == "ns" else decimal_text_ns(pl.col("t"), unit)
        assert pl.DataFrame({"t": column}).select(reading).to_series().to_list() == expected, unit
    assert [is_text_count(cell) for cell in ("1709967600000", "1.709967601e12", "17099676E5", "1709967600.5")] == \
        [False, True, True, True]
    assert re.search(TEXT_COUNT, "1.709967601e12") and not re.search(TEXT_COUNT, "1709967601e12x")


Y2300_S = 10_413_792_000  # 2300-01-01T00:00:00Z in s
PAST_2262 = ("2300-01-01T00:00:00Z, past 2262-04-11T23:47:16.854775807Z, the last time int64 nanoseconds since the "
             "epoch hold")


def test_a_time_past_2262_is_ts_out_of_range_in_every_form(tmp_path: Path) -> None:
    """review411 #5: past 2262, epoch seconds (text), a Parquet datetime[us] and an ns count past int64 in a CSV
    were missing_field ("not a time the map reads"), a file of such seconds alone refused with "if it counts s,
    give --ts-unit s" under --ts-unit s, while ms and us counts were ts_out_of_range. One rule for all now, in one
    wording that names the time and the limit (a count scaled in Python, as the wire's, with its digits)."""
    seconds = epoch_text_file(tmp_path / "s.csv", [str(FIRST_MS // 1000 + i) for i in range(3)] + [str(Y2300_S)])
    pl.DataFrame({"time": [datetime(2024, 8, 8), datetime(2300, 1, 1)], "symbol": ["B", "B"], "price": [1.0, 2.0],
                  "size": [1.0, 1.0]}, schema_overrides={"time": pl.Datetime("us")}
                 ).write_parquet(tmp_path / "us.parquet")
    ns = epoch_text_file(tmp_path / "ns.csv", [str(FIRST_MS * 10**6), str(2**63 - 1), str(2**63), str(2**64 - 1)])
    only = epoch_text_file(tmp_path / "only.csv", [str(Y2300_S + i) for i in range(3)])
    for path, unit, read, out in ((seconds, "s", 3, 1), (tmp_path / "us.parquet", "datetime", 1, 1), (ns, "ns", 2, 2),
                                  (only, "s", 0, 3)):
        replay = FileReplay(path, columns={"ts_unit": unit})
        assert len(drain(replay)) == read and replay.rejected == {"ts_out_of_range": out}, path
        assert "past 2262-04-11T23:47:16.854775807Z" in replay.rejected.examples["ts_out_of_range"], path
    assert PAST_2262 in replay.rejected.examples["ts_out_of_range"]
    with pytest.raises(InvalidTick, match=rf"got {Y2300_S * 10**9} \({PAST_2262}\)"):
        check_ts({"ts": Y2300_S * 10**9})
    with pytest.raises(InvalidTick, match="ts_out_of_range"):  # (a float's division overflowed: OverflowError)
        check_ts({"ts": 10**400})
