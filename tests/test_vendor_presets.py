"""Binance's public files under their presets, with and without the header row the newer dumps carry: the same
ticks either way, on one clock, and a wrong preset said with what fits. Every file is written here into tmp_path."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from connectors.column_map import PRESETS
from connectors.replay import FileReplay
from conftest import drain

T0_MS = 1_704_153_600_000  # 2024-01-02 00:00 UTC
T0_US = 1_735_776_000_000_000  # 2025-01-02 00:00 UTC: Binance's spot files count us from 2025
MS = 1_000_000
ROWS = 30
BINANCE_PRESETS = [name for name in PRESETS if name.startswith("binance-") and PRESETS[name].names is not None]
TIMES = {"time", "transact_time", "transaction_time", "event_time", "open_time", "close_time"}


def cell(column: str, row: int, start: int, step: int) -> str:
    """A plausible cell of a Binance public file's column at `row`, times from `start` every `step` units."""
    if column in TIMES:
        return str(start + row * step + (3 if column == "event_time" else 0))  # bookTicker's event after its deal
    if column.startswith("is_"):
        return "true" if row % 2 else "false"
    if "price" in column or column in ("open", "high", "low", "close"):
        return f"{42000.5 + row % 4 + (0.1 if 'ask' in column else 0):.1f}"
    if column in ("qty", "quantity", "volume", "best_bid_qty", "best_ask_qty"):
        return f"{0.5 + row % 3:.3f}"
    return str(1000 + row)  # ids, counts, quote volumes, `ignore`


def binance_file(path: Path, preset: str, header: bool, start: int = T0_MS, step: int = 100) -> Path:
    names = PRESETS[preset].names
    lines = [",".join(names)] if header else []
    lines += [",".join(cell(c, i, start, step) for c in names) for i in range(ROWS)]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("preset", BINANCE_PRESETS)
def test_a_header_less_preset_reads_a_file_with_its_header_row_too(tmp_path: Path, preset: str) -> None:
    (tmp_path / "plain").mkdir()
    plain = drain(FileReplay(binance_file(tmp_path / "plain" / "BTCUSDT-x.csv", preset, False), columns=preset))
    replay = FileReplay(binance_file(tmp_path / "BTCUSDT-x.csv", preset, True), columns=preset)
    headed = drain(replay)
    assert dict(replay.rejected) == {}  # the header row is no data row (it was rejected as missing_field)
    assert len(headed) == ROWS and headed == plain
    assert headed[0].ts // MS in (T0_MS, T0_MS + 99_999)  # ms by magnitude: 2024, not 1970 (klines: bar close)
    # the unit by magnitude still holds with a header: Binance's spot files count us from 2025
    us = drain(FileReplay(binance_file(tmp_path / "BTCUSDT-y.csv", preset, True, T0_US, 100_000), columns=preset))
    assert len(us) == ROWS and us[0].ts // 1000 in (T0_US, T0_US + 99_999_000)


def test_a_header_of_other_names_is_skipped_with_a_note(tmp_path: Path) -> None:
    path = binance_file(tmp_path / "BTCUSDT-trades.csv", "binance-futures-trades", False)
    path.write_text("trade,px,amount,notional,ts,maker\n" + path.read_text())
    replay = FileReplay(path, columns="binance-futures-trades")
    ticks = drain(replay)
    assert len(ticks) == ROWS and dict(replay.rejected) == {} and ticks[0].ts == T0_MS * MS
    assert any("its first line is a header (trade, px, amount, notional, ts, maker) that names other columns than "
               "--preset binance-futures-trades" in note for note in replay.notes), replay.notes


def test_futures_book_ticker_reads_one_clock_with_or_without_its_header(tmp_path: Path) -> None:
    """The header-less preset and the detected header file both stamp with transaction_time, the clock of aggTrades'
    transact_time, so a venue's trades and quotes keep their order; event_time (3 ms later here) is not read."""
    (tmp_path / "old").mkdir()
    headed = binance_file(tmp_path / "BTCUSDT-bookTicker-2024-01-02.csv", "binance-futures-bookticker", True)
    plain = binance_file(tmp_path / "old" / "BTCUSDT-bookTicker-2024-01-02.csv", "binance-futures-bookticker", False)
    for path in (headed, plain):
        replay = FileReplay(path)
        ticks = drain(replay)
        assert ticks[0].ts == T0_MS * MS and ticks[1].ts == (T0_MS + 100) * MS, path
        assert "ts=transaction_time (ms)" in replay.notes[0], replay.notes


@pytest.mark.parametrize("header", [False, True])
def test_a_preset_of_another_width_says_the_counts_and_the_preset_that_fits(tmp_path: Path, header: bool) -> None:
    path = binance_file(tmp_path / "BTCUSDT-aggTrades-2024-01-02.csv", "binance-public-aggtrades", header)
    with pytest.raises(ValueError) as refused:
        FileReplay(path, columns="binance-public-trades")
    said = str(refused.value)
    assert f"{path}: the file has 8 columns, --preset binance-public-trades names 7 (id, price, qty" in said
    assert "--preset binance-public-aggtrades fits it" in said and "extra_columns" not in said


def test_every_preset_is_documented_and_offered_on_the_command_line() -> None:
    from connectors.column_map import PRESETS
    from engine.service.cli import build_parser

    docs = Path(__file__).resolve().parents[1] / "docs"
    backtest = build_parser()._subparsers._group_actions[0].choices["backtest"]  # argparse keeps it private
    offered = next(a.help for a in backtest._actions if a.dest == "preset")
    for name in PRESETS:
        assert re.search(rf"^\| `{name}` +\|", (docs / "replay.md").read_text(), re.MULTILINE), name
        assert name in offered and name in (docs / "configuration.md").read_text(), name


def test_a_preset_without_detected_by_is_never_picked_by_layout_detection() -> None:
    # review322 #5: a headered preset took over detection of every file with its columns unless a second table
    # said otherwise; now a preset is picked only when its own entry says `detected_by`
    from connectors.layout import NoTickLayout, detect_columns
    from connectors.presets import detected_by

    undetected = [name for name in PRESETS if detected_by(name) is None and PRESETS[name].names is None]
    assert "coinbase-trades" in undetected
    for name in undetected:
        schema = dict.fromkeys(PRESETS[name].source_columns(), pl.String)
        try:
            detected = detect_columns(Path(f"{name}.csv"), schema)
        except NoTickLayout:
            continue
        assert detected.preset != name, name
    algoseek = dict.fromkeys(["Date", "Timestamp", "EventType", "Ticker", "Price", "Quantity", "Exchange",
                              "Conditions"], pl.String)
    assert detect_columns(Path("AAPL.csv"), algoseek).preset == "algoseek-taq"  # its detected_by: its header
    del algoseek["Conditions"]
    assert detect_columns(Path("AAPL.csv"), algoseek).preset is None
