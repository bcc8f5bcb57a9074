"""A time column that holds an interval, as ENTSO-E's MTU writes one (`02.11.2026 00:00 - 02.11.2026 00:15`), is
read as the interval's start, with or without a format given for the whole interval; the offset advice for prices
at zero or below names the file's lowest price, also one on a row refused first for another reason (review283 #2:
the suggested --ts-format copied the first row's end as text and rejected every other row, and the advice said
`DE-LU 0` of a file whose lowest is -28.17)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from conftest import drain
from connectors.map_options import map_from_options
from connectors.replay import FileReplay

QH_START = dt.datetime(2026, 11, 2, tzinfo=dt.timezone.utc)


def entsoe_qh(path: Path, rows: int = 200) -> Path:
    """ENTSO-E's quarter-hour prices: the MTU interval, a price (some below zero)."""
    lines = ["MTU,Price"]
    for i in range(rows):
        start = QH_START + dt.timedelta(minutes=15 * i)
        end = start + dt.timedelta(minutes=15)
        lines.append(f"{start:%d.%m.%Y %H:%M} - {end:%d.%m.%Y %H:%M},{50 + i % 9 - 4:.2f}")
    path.write_text("\n".join(lines) + "\n")
    return path


def ns(when: dt.datetime) -> int:
    return int(when.timestamp()) * 1_000_000_000


@pytest.mark.parametrize("ts_format", [None, "%d.%m.%Y %H:%M - %d.%m.%Y %H:%M"])
def test_an_interval_is_read_as_its_start(tmp_path: Path, ts_format: str | None) -> None:
    csv = entsoe_qh(tmp_path / "entsoe_qh.csv")
    columns = {"ts": "MTU", "price": "Price", "stream": "DE-QH", **({"ts_format": ts_format} if ts_format else {})}
    replay = FileReplay(csv, columns=columns)
    ticks = drain(replay)
    assert dict(replay.rejected) == {}
    assert len(ticks) == 200
    assert [t.ts for t in ticks[:2]] == [ns(QH_START), ns(QH_START + dt.timedelta(minutes=15))]
    assert ticks[-1].ts == ns(QH_START + dt.timedelta(minutes=15 * 199))  # a day's last interval ends the next day


def test_the_note_says_the_start_is_read_and_a_wrong_format_gets_the_one_that_reads_every_row(tmp_path) -> None:
    csv = entsoe_qh(tmp_path / "entsoe_qh.csv")
    replay = FileReplay(csv, columns=map_from_options(None, "ts=MTU,price=Price,stream_name=DE-QH", detect=True))
    assert any('each interval ("02.11.2026 00:00 - 02.11.2026 00:15") at its start' in note
               for note in replay.notes), replay.notes
    with pytest.raises(ValueError) as refused:  # the review's pasted suggestion: the first row's end as text
        FileReplay(csv, columns={"ts": "MTU", "price": "Price", "stream": "DE-QH",
                                 "ts_format": "%d.%m.%Y %H:%M - 02.11.2026 00:15"})
    assert str(refused.value).endswith('give its format with strftime codes, e.g. --ts-format "%d.%m.%Y %H:%M"')
    from connectors.datetime_text import start_format

    assert start_format("%Y-%m-%d %H:%M - %Y-%m-%d %H:%M") == "%Y-%m-%d %H:%M"
    assert start_format("%d-%m-%Y %H:%M") == "%d-%m-%Y %H:%M"  # a dash inside a date is no interval


def test_the_offset_advice_names_the_files_lowest_price(tmp_path: Path) -> None:
    """Hourly prices at 0 on every fifth row, and the lowest, -28.17, on a row whose time does not read: that row
    is refused as missing_field, but the offset the advice gives must lift it too."""
    lines = ["timestamp,symbol,price,size"]
    for i in range(100):
        when = "n/a" if i == 40 else (dt.datetime(2026, 11, 1) + dt.timedelta(hours=i)).isoformat()
        lines.append(f"{when},DE-LU,{-28.17 if i == 40 else 0.0 if i % 5 == 0 else 30 + i % 7},1")
    csv = tmp_path / "low.csv"
    csv.write_text("\n".join(lines) + "\n")
    replay = FileReplay(csv)
    drain(replay)
    assert dict(replay.rejected) == {"nonpositive_price": 19, "missing_field": 1}
    advice = replay.rejected.examples["nonpositive_price"]
    assert "the lowest price in the files: DE-LU -28.17: to lift each stream above zero, " \
           "--price-offset 'DE-LU=29'" in advice, advice
