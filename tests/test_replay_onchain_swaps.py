"""On-chain swap exports (review325 #2, #3): blocks sharing one timestamp ordered by a composite sequence
(`block_number+log_index`), nothing left out for a log_index that restarts in every block, and stats() counting
what was really released. Files written in the test as BigQuery's and Dune's exports write them."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.map_options import map_from_options
from connectors.replay import FileReplay
from conftest import drain

# an L2 chain's swaps: blocks 241000007 and 241000009 share 23:54:12, and log_index restarts in each block
ARB_TRADES = (
    "block_number,block_timestamp,log_index,tx_hash,price,size,side,symbol\n"
    "241000003,2024-08-08 23:54:11 UTC,41,0x3ed0,2680.087514,0.435125603,sell,WETH-USDC\n"
    "241000007,2024-08-08 23:54:12 UTC,63,0x734e,2680.45361,0.557030186,buy,WETH-USDC\n"
    "241000007,2024-08-08 23:54:12 UTC,90,0x9a1c,2680.41,0.1,sell,WETH-USDC\n"
    "241000009,2024-08-08 23:54:12 UTC,42,0x5b2f,2680.3,0.2,sell,WETH-USDC\n"
    "241000009,2024-08-08 23:54:12 UTC,63,0x77d0,2680.2,0.3,sell,WETH-USDC\n"
    "241000012,2024-08-08 23:54:13 UTC,5,0x11aa,2680.5,1.5,buy,WETH-USDC\n")
COLUMNS = "ts=block_timestamp,price=price,size=size,side=side,stream=symbol"


def test_a_composite_sequence_keeps_every_swap_in_block_order(tmp_path: Path) -> None:
    path = tmp_path / "arb_trades.csv"
    path.write_text(ARB_TRADES)
    for spec in (map_from_options(columns=COLUMNS, sequence="block_number+log_index"),
                 map_from_options(columns=COLUMNS + ",sequence=block_number+log_index")):
        replay = FileReplay(path, columns=spec)
        ticks = drain(replay)
        assert [(t.price, t.size) for t in ticks] == [(2680.087514, 0.435125603), (2680.45361, 0.557030186),
                                                      (2680.41, 0.1), (2680.3, 0.2), (2680.2, 0.3), (2680.5, 1.5)]
        assert replay.stats()["emitted"] == 6 and replay.found_notes == []  # no gaps looked for in block+index


def test_a_restarting_log_index_keeps_its_swaps_and_says_to_join_the_block(tmp_path: Path) -> None:
    path = tmp_path / "arb_trades.csv"
    path.write_text(ARB_TRADES)
    replay = FileReplay(path, columns=map_from_options(columns=COLUMNS, sequence="log_index"))
    ticks = drain(replay)
    assert sorted(t.size for t in ticks) == [0.1, 0.2, 0.3, 0.435125603, 0.557030186, 1.5]  # none left out
    assert replay.stats()["emitted"] == len(ticks) == 6
    said = next(n for n in replay.found_notes if "with other values" in n)
    assert "line 6 (WETH-USDC, number 63)" in said and "--sequence block_number+log_index" in said


def test_a_resent_swap_is_left_out_and_stats_count_only_the_ticks_released(tmp_path: Path) -> None:
    path = tmp_path / "arb_trades.csv"
    lines = ARB_TRADES.splitlines(keepends=True)
    path.write_text("".join(lines + [lines[4]]))  # block 241000009's log 42 captured twice
    replay = FileReplay(path, columns=map_from_options(columns=COLUMNS, sequence="block_number+log_index"))
    ticks = drain(replay)
    assert len(ticks) == 6
    assert replay.stats() == {"emitted": 6, "rejected": {}, "left_out": {"sequence_repeat": 1}, "done": True}
    assert "(WETH-USDC, number 241000009+42)" in replay.found_notes[0]


def test_a_sequence_of_three_columns_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="sequence names a column, or two joined by"):
        map_from_options(columns=COLUMNS + ",sequence=a+b+c")
