"""Datetime text whose UTC offset is spelt as an exporter writes it (BigQuery's ` UTC`, ` GMT`, `+0000`), and
files whose naive and offset-carrying times are mixed: the outcome is the same whichever kind the first row is
(each naive row rejected, named by its line), never polars' own multi-line error. Real files in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.column_map import ColumnMap
from connectors.file_facts import unparsed_times
from connectors.replay import FileReplay
from conftest import drain

TIMES = ["2024-08-08 23:54:14.087896", "2024-08-08 23:54:14.347673", "2024-08-08 23:54:15"]
TRUE_NS = [1723161254087896000, 1723161254347673000, 1723161255000000000]


def write(path: Path, times: list[str]) -> Path:
    rows = "".join(f"{t},BTC-USD,{61837 + i},0.5\n" for i, t in enumerate(times))
    path.write_text("time,symbol,price,size\n" + rows)
    return path


@pytest.mark.parametrize("suffix", [" UTC", " GMT", " utc", "+0000", "Z", "+00:00"])
def test_a_time_with_offset_zero_by_any_spelling_reads_as_utc(tmp_path: Path, suffix: str) -> None:
    replay = FileReplay(write(tmp_path / "bq.csv", [t + suffix for t in TIMES]))
    assert [tick.ts for tick in drain(replay)] == TRUE_NS and replay.rejected == {}
    assert not any("carry no UTC offset" in note for note in replay.notes)


def test_naive_rows_are_rejected_by_line_whichever_kind_of_row_comes_first(tmp_path: Path) -> None:
    naive_first = write(tmp_path / "naive_first.csv", [TIMES[0], TIMES[1] + "Z", TIMES[2] + "+02:00"])
    offset_first = write(tmp_path / "offset_first.csv", [TIMES[1] + "Z", TIMES[0], TIMES[2] + "+02:00"])
    for path, naive_line in ((naive_first, 2), (offset_first, 3)):
        replay = FileReplay(path)
        assert [tick.ts for tick in drain(replay)] == [TRUE_NS[2] - 2 * 3600 * 10**9, TRUE_NS[1]]  # time order
        assert replay.rejected == {"missing_field": 1}
        assert replay.rejected.examples["missing_field"].endswith(
            f'{path.name} line {naive_line}: missing_field: field "ts" is required (column "time": '
            f"\"{TIMES[0]}\" lacks the UTC offset the file's other times carry (the first of them: "
            f'"{TIMES[1]}Z"), so it is no instant: write the row with its offset)')
        assert not any("carry no UTC offset and are read as UTC" in note for note in replay.notes)


def test_tz_for_all_files_is_left_off_a_file_with_offsets_whichever_kind_of_row_comes_first(tmp_path: Path) -> None:
    said = []
    for name, times in (("naive_first.csv", [TIMES[0], TIMES[1] + " UTC"]), ("utc_first.csv", [TIMES[1] + " UTC",
                                                                                                TIMES[0]])):
        replay = FileReplay(write(tmp_path / name, times), columns={"tz": "UTC"})  # as --tz UTC is given
        assert [tick.ts for tick in drain(replay)] == [TRUE_NS[1]] and replay.rejected == {"missing_field": 1}
        said.append(replay.notes[0].removeprefix(name))
    assert said[0] == said[1] == ": its times carry their own UTC offset, so --tz UTC (for naive times) is not " \
                                 "applied to it"


def test_a_given_format_still_reads_the_utc_suffix_itself(tmp_path: Path) -> None:
    path = write(tmp_path / "bq.csv", [t + " UTC" for t in TIMES[:2]])
    replay = FileReplay(path, columns={"ts_format": "%Y-%m-%d %H:%M:%S%.f UTC"})
    assert [tick.ts for tick in drain(replay)] == TRUE_NS[:2]


def test_a_read_polars_stops_is_said_in_one_line_with_the_file_column_value_and_option() -> None:
    error = RuntimeError("`strptime` / `to_datetime` was called with no format\n\nThis was previously allowed")
    cmap = ColumnMap(ts="time", ts_unit="datetime", stream="X", price="p", size="s")
    said = unparsed_times(Path("f.csv"), cmap, "2024-08-08 23:54:14 UTC", error)
    assert "\n" not in said and said.startswith('f.csv: its times could not be read (column "time", e.g. '
                                                '"2024-08-08 23:54:14 UTC": `strptime` / `to_datetime` was called')
    assert "--ts-format" in said
