"""A price column whose header writes its unit after a known name (`Price (USD)`, LME's `Price (USD/t)`,
`Last Price [EUR]`) is that field, by the one rule that reads `Time (EET)` as the time column; MOEX ISS's
`TRADEDATE`/`TRADETIME` are a date and a time of day joined as `trade_date`/`trade_time` are (review 231,
finding 7). Real CSV files written here, read by the real replay."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import drain
from connectors.replay import FileReplay


def utc_ns(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()) * 10**9


@pytest.mark.parametrize("header", ["Price (USD)", "Price (USD/t)", "Last Price [EUR]", "px (usd)"])
def test_a_price_header_with_its_unit_is_the_price(tmp_path: Path, header: str) -> None:
    path = tmp_path / "XAU_trades.csv"
    path.write_text(f"timestamp,symbol,{header},Size\n2024-01-02T10:00:00Z,XAU,2062.5,1\n"
                    f"2024-01-02T10:00:01Z,XAU,2062.6,2\n")
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.ts, t.price, t.size) for t in ticks] == [(utc_ns("2024-01-02T10:00:00"), 2062.5, 1.0),
                                                        (utc_ns("2024-01-02T10:00:01"), 2062.6, 2.0)]
    assert f"price={header}" in "\n".join(replay.notes)


def test_lme_trade_date_time_and_price_with_its_unit(tmp_path: Path) -> None:
    """LME's `Metal` (the instrument) and `Lots` (the size) were not read: every metal went to one stream named by
    the file, each trade of size 1; they are the stream and size columns now, and the price's unit is said."""
    path = tmp_path / "LME_select_20240102.csv"
    path.write_text("Trade Date,Time,Metal,Prompt,Session,Price (USD/t),Lots\n"
                    "20240102,11:40:01.952,ZDS,3M,Ring 1,2650.00,3\n20240102,11:40:02.500,CAD,3M,Ring 1,8512.50,7\n"
                    "20240102,11:40:03.100,ZDS,3M,Ring 1,2650.50,4\n")
    replay = FileReplay(path, columns={"tz": "Europe/London"})
    ticks = drain(replay)
    assert [(t.stream, t.ts, t.price, t.size) for t in ticks] == [
        ("ZDS", utc_ns("2024-01-02T11:40:01") + 952_000_000, 2650.0, 3.0),
        ("CAD", utc_ns("2024-01-02T11:40:02") + 500_000_000, 8512.5, 7.0),
        ("ZDS", utc_ns("2024-01-02T11:40:03") + 100_000_000, 2650.5, 4.0)]
    notes = "\n".join(replay.notes)
    assert "stream=Metal, price=Price (USD/t), size=Lots" in notes
    assert '"Price (USD/t)" as the price, in USD/t (a unit is noted, not applied' in notes


def test_an_lme_file_mixing_prompts_reads_a_stream_per_metal_and_prompt(tmp_path: Path) -> None:
    """`Prompt` (3M, Cash) was not joined to `Metal`: CAD's 3M and Cash trades, two contracts ~40 $/t apart, replayed
    as one stream stepping between them. Now a file mixing prompts names CAD.3M and CAD.Cash, said in a note."""
    path = tmp_path / "LME_select_20240102.csv"
    path.write_text("Trade Date,Time,Metal,Prompt,Session,Price (USD/t),Lots\n"
                    "20240102,11:40:01.952,CAD,3M,Ring 1,8512.50,3\n20240102,11:40:02.500,CAD,Cash,Ring 1,8470.00,7\n"
                    "20240102,11:40:03.100,CAD,3M,Ring 1,8513.00,4\n20240102,11:40:04.100,ZDS,3M,Ring 1,2650.50,4\n")
    replay = FileReplay(path, columns={"tz": "Europe/London"})
    assert [(t.stream, t.price) for t in drain(replay)] == [("CAD.3M", 8512.5), ("CAD.Cash", 8470.0),
                                                            ("CAD.3M", 8513.0), ("ZDS.3M", 2650.5)]
    notes = "\n".join(replay.notes)
    assert "stream=Metal+Prompt" in notes
    assert "streams from columns \"Metal\" and \"Prompt\" joined by a '.' (CAD.3M): the file mixes prompts (3M, Cash)" \
        in notes and "--columns stream=Metal reads a metal's prompts as one stream" in notes
    # the option the note offers reads them as one, as before
    merged = FileReplay(path, columns={"tz": "Europe/London", "stream_col": "Metal"})
    assert [t.stream for t in drain(merged)] == ["CAD", "CAD", "CAD", "ZDS"]

def test_moex_tradedate_and_tradetime_are_joined(tmp_path: Path) -> None:
    path = tmp_path / "moex_SBER_trades.csv"
    path.write_text("TRADENO;TRADEDATE;TRADETIME;SECID;PRICE;QUANTITY\r\n"
                    "9000000001;2024-01-03;10:00:01;SBER;271,45;42\r\n9000000002;2024-01-03;10:00:03;SBER;271,46;5\r\n")
    replay = FileReplay(path, columns={"tz": "Europe/Moscow"})
    ticks = drain(replay)
    assert [(t.ts, t.price, t.size) for t in ticks] == [(utc_ns("2024-01-03T07:00:01"), 271.45, 42.0),
                                                        (utc_ns("2024-01-03T07:00:03"), 271.46, 5.0)]
    assert "ts=TRADEDATE+TRADETIME" in "\n".join(replay.notes)
