"""Clock digits in one time column beside a date in the file's name (review375 #6): `90016599` is 09:00:16.599, an
Asian vendor's clock, not epoch seconds of 1972; with --date, an epoch column is refused in the words of what was
given, not of a ts_unit nobody gave. Every file is written here, into tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import drain, ns
from connectors.map_options import map_from_options
from connectors.replay import FileReplay

# a morning of one Tokyo stock: HHMMSSfff without the leading zero, minutes and seconds all over 0..59
CLOCKS = [f"{h}{m:02d}{s:02d}{ms:03d}" for h, m, s, ms in
          [(9, m, (7 * m) % 60, (37 * m) % 1000) for m in range(0, 60, 3)] + [(10, 15, 59, 999), (11, 29, 0, 1)]]


def digits_file(path: Path) -> Path:
    path.write_text("time,code,price,volume\n" + "".join(f"{c},9984.T,{8889 + i % 3},100\n"
                                                         for i, c in enumerate(CLOCKS)))
    return path


def expected(day: str) -> list[int]:
    return [ns(f"{day}T{int(c[:-7]):02d}:{c[-7:-5]}:{c[-5:-3]}.{c[-3:]}+09:00") for c in CLOCKS]


@pytest.mark.parametrize("date", [None, "file_name", "2024-04-08"])
def test_clock_digits_beside_a_dated_name_are_read_on_that_day(tmp_path: Path, date: str | None) -> None:
    path = digits_file(tmp_path / "tse_digits_20240405.csv")
    replay = FileReplay(path, columns=map_from_options(detect=True, tz="Asia/Tokyo", date=date))
    assert [t.ts for t in drain(replay)] == expected("2024-04-08" if date == "2024-04-08" else "2024-04-05")
    said = " ".join(replay.notes)
    assert ('column "time" holds a wall clock\'s digits, HHMMSSfff (90000000 is 09:00:00; no minute or second of its '
            'values passes 59), not epoch s (which put 90000000 in 1972): read as ts_unit hhmmss_ms of') in said, said
    assert "not applied" not in said and "1972-" not in said  # (--tz was dropped, the times ran from 1972)


def test_without_a_day_or_with_real_epoch_times_nothing_changes(tmp_path: Path) -> None:
    undated = digits_file(tmp_path / "tse_digits.csv")  # no day to read a clock on: epoch, with the 1980 warning
    replay = FileReplay(undated)
    assert drain(replay)[0].ts == 90_000_000 * 10**9
    assert not any("wall clock's digits" in n for n in replay.notes)
    epoch = tmp_path / "ep_20240405.csv"
    epoch.write_text("time,code,price,volume\n1712275216,9984.T,8889,2500\n1712275217,9984.T,8890,2500\n")
    assert [t.ts for t in drain(FileReplay(epoch))] == [1712275216 * 10**9, 1712275217 * 10**9]


def test_a_date_given_for_epoch_times_is_refused_naming_the_detected_unit(tmp_path: Path) -> None:
    """The refusal said `got ts_unit="s", date="file_name"`, blaming a ts_unit the user never gave."""
    epoch = tmp_path / "ep_20240405.csv"
    epoch.write_text("time,code,price,volume\n1712275216,9984.T,8889,2500\n1712275217,9984.T,8890,2500\n")
    with pytest.raises(ValueError) as refused:
        FileReplay(epoch, columns=map_from_options(detect=True, date="file_name"))
    said = str(refused.value)
    assert 'date "file_name" (--date) gives the day of times of day, but column "time" holds "1712275216", which ' \
           'detection reads as epoch s' in said, said
    assert "--ts-unit hhmmss, hhmmss_ms" in said and 'got ts_unit="s"' not in said
