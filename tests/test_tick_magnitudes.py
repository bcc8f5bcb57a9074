"""Prices and sizes of magnitudes no instrument reaches (a 1e300 price, 1e-300, an unset uint64's 2**64 - 1) are
refused by the one tick check, from a replayed file as from the wire (tests/test_wire_raw.py), counted under their
own reasons with the row named (review283 #4: they were accepted, logged and answered)."""

from __future__ import annotations

from pathlib import Path

from conftest import drain
from connectors.replay import FileReplay
from engine.service.cli import main

T0 = 1793692800_000_000_000


def test_a_files_absurd_prices_and_sizes_are_refused_and_counted(tmp_path: Path, capsys) -> None:
    rows = [(70.0 + i % 3 * 0.01, 5) for i in range(40)]
    rows[10] = (1e300, 5)  # a corrupt print
    rows[11] = (1e-300, 5)
    rows[12] = (70.0, 2**64 - 1)  # an unset uint64 quantity
    rows[13] = (2**64 - 1, 5)
    csv = tmp_path / "efp.csv"
    csv.write_text("ts,symbol,price,size\n" + "".join(f"{T0 + i * 10**9},EFP.BRN,{p!r},{s}\n"
                                                     for i, (p, s) in enumerate(rows)))
    replay = FileReplay(csv)
    ticks = drain(replay)
    assert len(ticks) == 36 and max(t.price for t in ticks) < 71 and max(t.size for t in ticks) == 5
    assert dict(replay.rejected) == {"price_out_of_range": 3, "size_out_of_range": 1}
    assert replay.rejected.examples["price_out_of_range"].startswith(
        f"{csv} line 12: price_out_of_range: price must be within [1e-12, 1e+15], got 1e+300"), replay.rejected
    assert "size must be below 1e+18, got 1.8446744073709552e+19" in replay.rejected.examples["size_out_of_range"]
    assert main(["backtest", str(csv), "--out", str(tmp_path / "a.parquet"), "--quiet", "--threads", "1"]) == 0
    assert "replayed 36 ticks (4 rejected)" in capsys.readouterr().out
