"""A two-way date (`01/02/2024`) followed by a clock written other than `09:30:00` (dots, a comma after the date,
HHMM, a T): the refusal's proposed --ts-format values are built from the value it quotes, and each one reads every
row, in FileReplay and in `flashtick backtest` (they proposed `%m/%d/%Y %H:%M:%S%.f`, which read no row, and a T
after the date was read day-first with no word). Where no format can be built, the refusal says so and proposes
none. Real files in tmp_path."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import drain
from connectors.replay import FileReplay
from engine.service.cli import main

# the clock as written, and as Python's strptime reads it; the rows' days: 1 Feb or 2 Jan, 1 Mar or 3 Jan, ...
SHAPES = {"{d} {h:02d}.{m:02d}.00": " %H.%M.%S", "{d}, {h:02d}:{m:02d}": ", %H:%M", "{d} {h:02d}{m:02d}": " %H%M",
          "{d}T{h:02d}:{m:02d}:00": "T%H:%M:%S", "{d} {h:02d}.{m:02d}": " %H.%M"}
DAYS = ("01/02/2024", "01/03/2024", "01/04/2024")


def rows(path: Path, shape: str) -> list[str]:
    times = [shape.format(d=d, h=9 + i, m=30 + i) for i, d in enumerate(DAYS)]
    path.write_text("timestamp,symbol,price,size\n" + "".join(f'"{t}",XYZ,{175 + i},1\n' for i, t in enumerate(times)))
    return times


def utc_ns(text: str, fmt: str) -> int:
    return int(datetime.strptime(text, fmt).replace(tzinfo=timezone.utc).timestamp()) * 10**9


@pytest.mark.parametrize("shape", SHAPES)
def test_every_format_a_two_way_refusal_proposes_reads_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], shape: str) -> None:
    path = tmp_path / "t.csv"
    times = rows(path, shape)
    with pytest.raises(ValueError, match="a date that reads more than one way") as refused:
        FileReplay(path)
    said = str(refused.value)
    proposals = re.findall(r'--ts-format "([^"]+)"', said.split("give the one it is, ", 1)[1])
    assert len(proposals) == 2 and said.endswith("every date of its first 3 rows reads both ways"), said
    for proposed, day in zip(proposals, ("%m/%d/%Y", "%d/%m/%Y")):
        replay = FileReplay(path, columns={"ts_format": proposed})
        assert [t.ts for t in drain(replay)] == [utc_ns(t, day + SHAPES[shape]) for t in times], proposed
        assert dict(replay.rejected) == {}
        out = tmp_path / f"bt_{day[1]}.parquet"
        assert main(["backtest", str(path), "--ts-format", proposed, "--out", str(out), "--threads", "1"]) == 0
        assert "replayed 3 ticks (0 rejected)" in capsys.readouterr().out


def test_a_two_way_date_whose_clock_no_format_reads_proposes_none(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    rows(path, "{d} {h}h{m:02d}")
    with pytest.raises(ValueError, match="a date that reads as month/day and as day/month, in text no format built "
                                         "here reads: give the one it is with --ts-format in strftime codes") as no:
        FileReplay(path)
    assert "--ts-format '" not in str(no.value)


def test_a_one_way_date_whose_clock_no_format_reads_proposes_none(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('timestamp,symbol,price,size\n"13/02/2024 9h30",XYZ,175,1\n')
    with pytest.raises(ValueError, match=r"which is not ISO 8601: give its format with strftime codes \(no format "
                                         r"built here reads it; docs/replay.md lists the codes\)") as no:
        drain(FileReplay(path))
    assert "--ts-format '" not in str(no.value)
