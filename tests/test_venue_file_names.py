"""Crypto venues' instrument names in a file's name (review 163, finding 1): Deribit's perpetual, dated future and
options, OKX's swap beside its spot pair, Kraken Futures' PF_ beside Kraken's spot pair, and a venue's name before
the instrument are each their own stream, named whole, with the rest of the name (its date) left out and said.
Cut to their coins they were one stream, and a second file fed live was left out as held, with exit 0."""

from __future__ import annotations

import random
from pathlib import Path

from conftest import drain, serving
from connectors.replay import FileReplay
import test_cli
from test_cli import config, run, wait_for

T0 = 1704153600000  # 2024-01-02T00:00:00Z, ms
checkpoint = test_cli.checkpoint  # the tiny tick model's fixture, built once per module


def trades(path: Path, base: float, n: int = 40, header: str = "timestamp,price,amount,direction") -> Path:
    """Deribit-style trades (ms), a price walk from ``base``, a second apart."""
    rng = random.Random(path.name)
    rows = [f"{T0 + i * 1000 + rng.randint(0, 999)},{base + rng.choice([-0.5, 0, 0.5]) * i:.1f},"
            f"{rng.choice([10, 20])},{rng.choice(['buy', 'sell'])}" for i in range(n)]
    path.write_text(header + "\n" + "\n".join(rows) + "\n")
    return path


def streams_of(tmp_path: Path, *names: str) -> tuple[dict[str, int], list[str]]:
    replay = FileReplay([trades(tmp_path / f"{name}.csv", 42000.0 + 900 * i) for i, name in enumerate(names)])
    counts: dict[str, int] = {}
    for tick in drain(replay):
        counts[tick.stream] = counts.get(tick.stream, 0) + 1
    return counts, replay.notes


def test_a_perpetual_a_dated_future_and_options_are_streams_of_their_own(tmp_path: Path) -> None:
    counts, notes = streams_of(tmp_path, "BTC-PERPETUAL_2024-01-02", "BTC-29MAR24_2024-01-02",
                               "SOL_USDC-27DEC24-150-C", "SOL_USDC-27DEC24-200-P", "BTC_USDC-PERPETUAL")
    assert counts == {"BTC-PERPETUAL": 40, "BTC-29MAR24": 40, "SOL_USDC-27DEC24-150-C": 40,
                      "SOL_USDC-27DEC24-200-P": 40, "BTC_USDC-PERPETUAL": 40}
    assert ('BTC-29MAR24_2024-01-02.csv: stream BTC-29MAR24, from the file name "BTC-29MAR24_2024-01-02": the dated '
            "future's name, \"_2024-01-02\" left out (--columns stream_name=NAME to name it otherwise)") in notes, notes


def test_a_day_written_as_a_contract_date_is_no_dated_future(tmp_path: Path) -> None:
    # futures are delivered on Fridays: a stock's days (a Tuesday, a Wednesday) stay one stream
    counts, _ = streams_of(tmp_path, "AAPL-02JAN24", "AAPL-03JAN24", "ETH-27DEC24", "BTC-USD-240329")
    assert counts == {"AAPL": 80, "ETH-27DEC24": 40, "BTC-USD-240329": 40}


def test_a_fridays_day_beside_the_weeks_other_days_is_no_dated_future(tmp_path: Path) -> None:
    # 05JAN24 is a Friday: alone it reads as a contract, but beside Thursday's file of the same root it is a day
    counts, _ = streams_of(tmp_path, "AAPL-04JAN24", "AAPL-05JAN24", "BTC-05JAN24", "BTC-12JAN24")
    assert counts == {"AAPL": 80, "BTC-05JAN24": 40, "BTC-12JAN24": 40}


def test_a_swap_beside_its_spot_pair_and_kraken_futures_beside_spot_are_four_streams(tmp_path: Path) -> None:
    counts, notes = streams_of(tmp_path, "BTC-USDT-SWAP-2024-01-02", "BTC-USDT-2024-01-02", "PF_XBTUSD_2024-01-02",
                               "XBTUSD_2024-01-02")
    assert counts == {"BTC-USDT-SWAP": 40, "BTC-USDT": 40, "PF_XBTUSD": 40, "XBTUSD": 40}
    assert any("stream PF_XBTUSD, from the file name \"PF_XBTUSD_2024-01-02\": the Kraken Futures contract's name"
               in n for n in notes), notes


def test_a_venue_name_before_the_instrument_and_the_date_after_it_are_left_out(tmp_path: Path) -> None:
    # each day was a stream of its own (okx-ETH-USDT-2024-01-02), said in no note
    counts, notes = streams_of(tmp_path, "okx-ETH-USDT-2024-01-02", "okx-ETH-USDT-2024-01-03",
                               "okx_BTC-USDT-SWAP_2024-01-02", "deribit_ETH-PERPETUAL_trades_20240102")
    assert counts == {"ETH-USDT": 80, "BTC-USDT-SWAP": 40, "ETH-PERPETUAL": 40}
    assert ('okx_BTC-USDT-SWAP_2024-01-02.csv: stream BTC-USDT-SWAP, from the file name "okx_BTC-USDT-SWAP_2024-01-02"'
            ": the swap's name, \"okx_\" and \"_2024-01-02\" left out (--columns stream_name=NAME to name it otherwise)"
            ) in notes, notes
    assert "2 files: stream ETH-USDT, from the file names (--columns stream_name=NAME to name it otherwise) " \
           "(okx-ETH-USDT-2024-01-02.csv, okx-ETH-USDT-2024-01-03.csv)" in notes, notes  # (said once: review382 #5)


def test_a_future_fed_after_the_perpetual_is_taken_whole_and_a_file_left_out_nearly_whole_is_said(
        checkpoint, tmp_path: Path, capsys) -> None:
    perp = trades(tmp_path / "BTC-PERPETUAL_2024-01-02.csv", 42000.0)
    future = trades(tmp_path / "BTC-29MAR24_2024-01-02.csv", 42900.0)
    with serving(config(checkpoint, tmp_path)) as server:
        ends = ["--endpoint", server.endpoints["ingest"], "--answers", server.endpoints["answers"], "--control",
                server.endpoints["control"]]
        for path, held in ((perp, 40), (future, 80)):  # the future's ticks were left out as the perpetual's
            code, _, err = run(capsys, "feed", "replay", str(path), *ends)
            assert code == 0 and "sent 40 ticks" in err and "not sent" not in err, err
            wait_for(lambda: server.pipeline.ticks_in == held, 120.0)
        # the same day under the perpetual's name (a map naming it): all but its ticks after the perpetual's last
        # are left out as held, exit 0 by design (docs/wire-protocol.md), and the summary says so plainly
        later = tmp_path / "later.csv"
        later.write_text("timestamp,price,amount,direction\n" + "".join(
            f"{T0 + i * 1000},{42900.0 + i % 3},10,buy\n" for i in [*range(40), 50]))  # the last past the perp's
        code, _, err = run(capsys, "feed", "replay", str(later), "--columns", "stream_name=BTC-PERPETUAL", *ends)
        assert code == 0 and "sent 1 tick" in err, err
        assert "the files' ticks of BTC-PERPETUAL were left out nearly whole (BTC-PERPETUAL: 1 of 41 sent): if " \
               "these files are not what fed it before" in err, err
