"""Exports of exchanges outside the US, read as their vendors write them: Indian vendors' last traded price and
quantity (`LTP`, `LTQ`, beside `TTQ`, the day's running total, which is no trade's size). Real files in tmp_path,
read by FileReplay (the reader the CLI uses)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from connectors.replay import FileReplay
from test_vendor_files import drain


def utc_ns(text: str) -> int:
    return round(datetime.fromisoformat(text).timestamp() * 10**6) * 1000


def test_indian_vendors_ltp_and_ltq_are_the_price_and_size_and_ttq_is_left_unread(tmp_path: Path) -> None:
    path = tmp_path / "nse_ltp.csv"
    path.write_text("Symbol,Time (IST),LTP,LTQ,TTQ\n"
                    "NIFTY26DECFUT,2026-12-03 09:15:00.250,24510.05,75,75\n"
                    "NIFTY26DECFUT,2026-12-03 09:15:10.250,24510.10,150,225\n")
    replay = FileReplay(path, columns={"tz": "Asia/Kolkata"})
    ticks = drain(replay)
    assert [(t.ts, t.price, t.size) for t in ticks] == [(utc_ns("2026-12-03T03:45:00.250+00:00"), 24510.05, 75),
                                                        (utc_ns("2026-12-03T03:45:10.250+00:00"), 24510.10, 150)]
    assert replay.rejected == {}
    assert any("price=LTP" in note and "size=LTQ" in note for note in replay.notes)
    # the names written out in full
    spelled = tmp_path / "nse_spelled.csv"
    spelled.write_text("Symbol,Time,Last Traded Price,Last Traded Qty,TTQ\n"
                       "RELIANCE,2026-12-03T09:15:00+05:30,2950.05,5,5\n")
    assert [(t.price, t.size) for t in drain(FileReplay(spelled))] == [(2950.05, 5)]
