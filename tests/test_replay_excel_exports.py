"""Files as Excel and European vendor tools write them (review259): `;` separators, decimal commas, dd.mm.yyyy
dates with a `HH:MM:SS,mmm` clock in a column of its own, a stray `;` that a once-touched cell leaves. A row with
a stray separator is rejected as extra_fields and the rest of the file read, whatever the file's times (its own
UTC offset beside --tz for the local-time files). Real files in tmp_path, read by FileReplay (the reader the CLI
uses)."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.replay import FileReplay
from conftest import drain, ns

HEADER = "Date;Time;Symbol;Price;Volume;Side"


def german_rows(n: int) -> list[str]:
    """`n` trades of a German Excel export, 250 ms apart from 09:00 CEST on 3 April 2024."""
    return [f"03.04.2024;09:00:{i // 4:02d},{i % 4 * 250:03d};BTCUSDT;61.836,{i:02d};0,00{i % 9 + 1};sell"
            for i in range(n)]


def test_a_stray_separator_in_a_file_of_utc_times_read_with_tz_rejects_that_row(tmp_path: Path) -> None:
    # --tz is for the naive-time files of the run; this vendor file's times end in Z, so it is read without it,
    # and that second read once ended the run with polars' "Consider setting 'truncate_ragged_lines=True'"
    path = tmp_path / "eth_utc_stray.csv"
    rows = [f"2024-04-03T07:00:{i:02d}.000Z,ETHUSDT,{2700 + i}.50,0.0{i % 9 + 1},buy" for i in range(30)]
    rows[20] += ","
    path.write_text("timestamp,symbol,price,size,side\n" + "\n".join(rows) + "\n")
    replay = FileReplay(path, columns={"tz": "Europe/Berlin"})
    ticks = drain(replay)
    assert len(ticks) == 29 and ticks[0].ts == ns("2024-04-03T07:00:00+00:00")
    assert dict(replay.rejected) == {"extra_fields": 1}
    assert "eth_utc_stray.csv line 22" in str(replay.rejected.examples["extra_fields"])
    assert any("carry their own UTC offset, so --tz Europe/Berlin (for naive times) is not applied" in note
               for note in replay.notes)


@pytest.mark.parametrize("stray_row", [0, 1, 5])
def test_one_stray_separator_in_the_first_rows_of_a_decimal_comma_file_rejects_that_row(tmp_path: Path,
                                                                                        stray_row: int) -> None:
    # with one sample row longer, `;` counted as no separator of the table, the decimal comma still did, and the
    # header (no commas) was skipped as a one-line banner: "its first line is data, not a header", whole file refused
    rows = german_rows(30)
    rows[stray_row] += ";"
    path = tmp_path / "de_stray.csv"
    path.write_text("\r\n".join([HEADER, *rows]) + "\r\n")
    replay = FileReplay(path, columns={"tz": "Europe/Berlin"})
    ticks = drain(replay)
    assert len(ticks) == 29 and dict(replay.rejected) == {"extra_fields": 1}
    assert f"de_stray.csv line {stray_row + 2}" in str(replay.rejected.examples["extra_fields"])
    assert ticks[0].price == (61836.01 if stray_row == 0 else 61836.00)
    assert ticks[-1].ts == ns("2024-04-03T07:00:07.250+00:00") and not any("banner" in n for n in replay.notes)
