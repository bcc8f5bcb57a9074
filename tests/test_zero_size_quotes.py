"""Quotes of size 0 (indicative: an FX venue's around the 17:00 New York rollover) are read as any quote, and a file
where more than a few percent of the quotes have one is said once, naming --hours to leave the rollover out; a
window given reads the rollover out and the note no longer names it (review379 #5). Real CSV files written here,
read by FileReplay (the reader the CLI uses)."""

from __future__ import annotations

from pathlib import Path

from connectors.replay import FileReplay
from conftest import drain

HEADER = "timestamp,symbol,bid,ask,bid_size,ask_size\n"


def rollover_csv(path: Path) -> Path:
    """EURUSD one quote a minute 21:30-22:29 UTC (16:30-17:29 in New York's winter); 21:59-22:05 sizes 0, wide."""
    rows = []
    for minute in range(60):
        hh, mm = 21 + (30 + minute) // 60, (30 + minute) % 60
        rolling = (hh, mm) >= (21, 59) and (hh, mm) <= (22, 5)
        bid, ask, size = (1.0940, 1.0950, 0.0) if rolling else (1.09431, 1.09433, 1000000.0)
        rows.append(f"2024-01-09T{hh:02d}:{mm:02d}:00.000000Z,EURUSD,{bid:.5f},{ask:.5f},{size},{size}\n")
    path.write_text(HEADER + "".join(rows))
    return path


def test_zero_size_quotes_are_read_and_noted_once_with_the_way_to_leave_the_rollover_out(tmp_path: Path) -> None:
    replay = FileReplay(rollover_csv(tmp_path / "lmax.csv"))
    ticks = drain(replay)
    assert len(ticks) == 60 and not replay.rejected and sum(t.bid_size == 0 for t in ticks) == 7
    notes = [note for note in replay.notes if "size of 0" in note]
    assert notes == ["lmax.csv: 7 of its 60 quotes (12%) have a bid or ask size of 0: indicative quotes (a venue's "
                     "price no one stands behind, as around the 17:00 New York rollover), read as any quote: each "
                     "sets the mark (its mid) and the labels after it. To leave the rollover out, --hours "
                     "'17:10-40:55 America/New_York' keeps 17:10 to 16:55 the next day (docs/replay.md, zero-size "
                     "quotes)"], replay.notes
    kept = FileReplay(tmp_path / "lmax.csv", columns={"hours": "17:10-40:55 America/New_York"})
    ticks = drain(kept)
    assert all(t.bid_size > 0 for t in ticks) and dict(kept.rejected) == {"filtered_out": 15}  # 16:55-17:09 NY
    assert not any("--hours '17:10" in note for note in kept.notes)


def test_a_stray_zero_size_quote_is_no_note(tmp_path: Path) -> None:
    rows = [f"2024-01-09T10:{m:02d}:00Z,EURUSD,1.09431,1.09433,{0.0 if m == 5 else 1e6},1000000.0\n" for m in range(60)]
    (tmp_path / "q.csv").write_text(HEADER + "".join(rows))
    replay = FileReplay(tmp_path / "q.csv")
    assert len(drain(replay)) == 60 and not any("size of 0" in note for note in replay.notes)


def test_an_options_no_bid_side_is_no_indicative_quote_rejected_or_taken_as_a_price(tmp_path: Path) -> None:
    """An option's quotes whose bid is 0 at size 0 (nobody bids) are one-sided: rejected, or with --zero-bid price
    taken with the 0 bid as a price; either way their size of 0 is no indicative quote, and no FX rollover note is
    said (review410 #8: 101 such quotes were counted as indicative, the same rows then rejected)."""
    rows = [f"2025-12-01T15:00:{s:02d}Z,SPY   251219C00900000,{bid:.2f},{bid + 0.05:.2f},{0 if bid == 0 else 10},20\n"
            for s, bid in enumerate([0.0, 0.0, 0.05] * 10)]
    (tmp_path / "opt.csv").write_text(HEADER + "".join(rows))
    for columns, taken in ((None, 10), ({"zero_bid": "price"}, 30)):
        replay = FileReplay(tmp_path / "opt.csv", columns=columns)
        assert len(drain(replay)) == taken and not any("size of 0" in note for note in replay.notes), replay.notes
