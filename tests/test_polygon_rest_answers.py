"""Polygon's aggregates answers as a user saves them (review315 #1, #2, #5): the grouped daily answer of a whole
market (each bar's symbol in its own `T`), pages of one query saved one after another (`curl ... >> AAPL.json`
over the `next_url` pages, compact or pretty-printed), and a valid answer with no bars (a holiday). Every file is
written here in Polygon's own layout and replayed without options."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import drain
from connectors.replay import FileReplay
from engine.service.cli import main
from test_vendor_files_without_options import QUERIES

DAY_MS = 86_400_000
T0 = 1704229200000  # 2024-01-02 21:00 UTC, the grouped daily bars' stamp


def grouped_day(day: int) -> dict:
    """/v2/aggs/grouped/locale/us/market/stocks/{date}: one bar per ticker, no top-level ticker."""
    results = [{"T": ticker, "v": 1e6 + day, "vw": base, "o": base, "c": base + day, "h": base + 2, "l": base - 2,
                "t": T0 + day * DAY_MS, "n": 100} for ticker, base in (("AAPL", 185.0), ("MSFT", 370.0))]
    return {"queryCount": 2, "resultsCount": 2, "adjusted": True, "results": results, "status": "OK",
            "request_id": f"r{day}"}


def minute_page(first: int, count: int, next_url: bool) -> dict:
    results = [{"v": 1000 + i, "vw": 185.0, "o": 185.0, "c": 185.0 + i / 100, "h": 185.1, "l": 184.9,
                "t": 1704205800000 + i * 60_000, "n": 12} for i in range(first, first + count)]
    page = {"ticker": "AAPL", "queryCount": count, "resultsCount": count, "adjusted": True, "results": results,
            "status": "OK", "request_id": f"p{first}"}
    return page | ({"next_url": f"https://api.polygon.io/v2/aggs/ticker/AAPL/range/1/minute/c/{first}"}
                   if next_url else {})


def test_grouped_daily_reads_one_stream_per_bar_ticker(tmp_path: Path) -> None:
    path = tmp_path / "grouped_2024-01-02.json"
    path.write_text(json.dumps(grouped_day(0)))
    replay = FileReplay(path)
    assert [(t.stream, t.price, t.ts) for t in drain(replay)] == [
        ("AAPL", 185.0, T0 * 1_000_000), ("MSFT", 370.0, T0 * 1_000_000)]
    assert replay.rejected == {}
    assert any("else each bar's T (grouped daily)" in n for n in replay.notes), replay.notes
    assert not any("repeat the time" in n for n in replay.notes), replay.notes  # (two instruments, not revisions)
    # one bar per ticker at the day's stamp is the market's snapshot, not a misread time (a stream's rows at one are)
    assert not any("same time" in c for c in replay.cautions), replay.cautions


def test_grouped_daily_files_of_several_days_backtest_per_ticker(tmp_path: Path, capsys) -> None:
    # 10 days (40 before: each file's planning was most of the test's CPU): each ticker's 10 bars still give
    # answers scored 5 ticks on, and the folder's note still elides the names past its first and last three
    for day in range(10):
        (tmp_path / f"grouped_{day:02d}.json").write_text(json.dumps(grouped_day(day)))
    (tmp_path / "q.yaml").write_text(QUERIES)
    assert main(["backtest", str(tmp_path), "--queries", str(tmp_path / "q.yaml"), "--out",
                 str(tmp_path / "a.parquet"), "--quiet", "--threads", "1"]) == 0
    assert "replayed 20 ticks (0 rejected)" in capsys.readouterr().out


@pytest.mark.parametrize("indent", [None, 2])
def test_polygon_pages_saved_one_after_another_read_as_one_answer(tmp_path: Path, indent) -> None:
    path = tmp_path / "AAPL.json"
    pages = [minute_page(0, 5, True), minute_page(5, 5, True), minute_page(10, 3, False)]
    path.write_text("".join(json.dumps(page, indent=indent) + "\n" for page in pages))
    replay = FileReplay(path)
    ticks = drain(replay)
    assert [(t.stream, t.price) for t in ticks] == [("AAPL", pytest.approx(185.0 + i / 100)) for i in range(13)]
    assert [t.ts for t in ticks] == [(1704205800000 + i * 60_000) * 1_000_000 for i in range(13)]
    assert replay.rejected == {}


def test_an_empty_polygon_answer_is_a_day_without_bars_not_a_failed_download(tmp_path: Path, capsys) -> None:
    empty = tmp_path / "AAPL_2024-01-01.json"
    empty.write_text(json.dumps({"ticker": "AAPL", "queryCount": 0, "resultsCount": 0, "adjusted": True,
                                 "status": "OK", "request_id": "r"}))
    full = tmp_path / "AAPL_2024-01-02.json"
    full.write_text(json.dumps(minute_page(0, 60, False)))
    (tmp_path / "q.yaml").write_text(QUERIES)
    assert main(["backtest", str(empty), str(full), "--queries", str(tmp_path / "q.yaml"), "--out",
                 str(tmp_path / "a.parquet"), "--quiet", "--threads", "1"]) == 0
    out, err = capsys.readouterr()
    assert "replayed 60 ticks (0 rejected)" in out
    assert (f"note: {empty.name}: a Polygon aggregates answer with no bars (resultsCount 0, status OK: a day "
            f"without trading): nothing to replay from it") in err, err
    assert "failed download" not in err and "Download it again" not in err, err


def test_an_empty_json_answer_is_skipped_with_its_true_reason_alone(tmp_path: Path) -> None:
    """fix327 #6: an empty Polygon answer's skip said "a header alone or zero bytes" beside its reader's true note
    (resultsCount 0); it now says the skip with that note alone, while a CSV of a header alone keeps its reason and
    an empty JSON array (no reader's note) is said to be a JSON answer of no records."""
    empty = tmp_path / "AAPL_2024-01-01.json"
    empty.write_text(json.dumps({"ticker": "AAPL", "queryCount": 0, "resultsCount": 0, "adjusted": True,
                                 "status": "OK", "request_id": "r"}))
    full = tmp_path / "AAPL_2024-01-02.json"
    full.write_text(json.dumps(minute_page(0, 60, False)))
    header_only = tmp_path / "AAPL_2024-01-03.csv"
    header_only.write_text("timestamp,price,size\n")
    replay = FileReplay([empty, full, header_only])
    assert len(drain(replay)) == 60
    notes = [str(note) for note in replay.notes]
    assert f"{empty.name}: a Polygon aggregates answer with no bars (resultsCount 0, status OK: a day without " \
           f"trading): nothing to replay from it" in notes, notes
    assert f"{empty}: no data rows; skipped" in notes, notes
    assert f"{header_only}: no data rows; skipped (a header alone or zero bytes: a day left out)" in notes, notes
    assert not any(note.startswith(str(empty)) and "header alone" in note for note in notes), notes
