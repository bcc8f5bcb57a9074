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


# a Uniswap v3 USDC/WETH 0.05% pool's Swap events as BigQuery (and an archive node's export) write them: token0
# USDC (6 decimals), token1 WETH (18), signed pool-side amounts in base units, sqrtPriceX96 after each swap
BIGQUERY_SWAPS = (
    "block_number,block_timestamp,tx_hash,log_index,sender,recipient,amount0,amount1,sqrtPriceX96,liquidity,tick\n"
    "20490001,2024-08-08 23:54:23 UTC,0x1749a0b5,35,0x3fc91a3a,0x3fc91a3a,-7305031282,2727121710685378896,"
    "1530425535373675810262459858611080,11343817662724950520,197384\n"
    "20490003,2024-08-08 23:54:47 UTC,0xb42f6750,8,0x3fc91a3a,0x3fc91a3a,2007590892,-748701686111929443,"
    "1530399895833987159570095450553403,10136299543421340198,197384\n"
    "20490003,2024-08-08 23:54:47 UTC,0xc0ffee00,9,0x3fc91a3a,0x3fc91a3a,-268000000000,100000000000000000000,"
    "1530599895833987159570095450553403,10136299543421340198,197386\n")
SWAP_MAP = ("ts=block_timestamp,price=sqrtPriceX96,size=amount1,signed_size=pool,price_format=sqrt_price_x96,"
            "token_decimals=6/18,base_token=1,stream_name=WETH-USDC,sequence=block_number+log_index")


def test_a_uniswap_swap_export_reads_its_price_size_and_side_from_a_column_map(tmp_path: Path) -> None:
    path = tmp_path / "univ3_usdc_weth_005_swaps.csv"
    path.write_text(BIGQUERY_SWAPS)
    replay = FileReplay(path, columns=map_from_options(columns=SWAP_MAP))
    ticks = drain(replay)
    assert dict(replay.rejected) == {}  # 100 WETH (1e20 wei, past int64) is no size_out_of_range once scaled
    assert [(t.stream, t.ts, round(t.price, 6), round(t.size, 9), t.side) for t in ticks] == [
        ("WETH-USDC", 1723161263000000000, 2679.999795, 2.727121711, "sell"),  # the pool took WETH: sold
        ("WETH-USDC", 1723161287000000000, 2680.089594, 0.748701686, "buy"),  # the pool paid WETH out: bought
        ("WETH-USDC", 1723161287000000000, 2679.389238, 100.0, "sell")]  # (exact: 2679.3892378...)
    # the same map in YAML, a list of decimals, token0 priced instead: WETH per USDC, sizes in USDC
    yaml_map = tmp_path / "swaps.yaml"
    yaml_map.write_text("ts: block_timestamp\nprice: sqrtPriceX96\nsize: amount0\nsigned_size: pool\n"
                        "price_format: sqrt_price_x96\ntoken_decimals: [6, 18]\nbase_token: 0\n"
                        "stream: USDC-WETH\n")
    ticks = drain(FileReplay(path, columns=map_from_options(columns=str(yaml_map))))
    assert [(round(t.price * weth, 6), t.size, t.side) for t, weth in zip(ticks, (2679.999795, 2680.089594))] == [
        (1.0, 7305.031282, "buy"), (1.0, 2007.590892, "sell")]  # the pool paid USDC out: a buy of USDC


def test_swap_keys_are_checked_by_name() -> None:
    with pytest.raises(ValueError, match="needs token_decimals .* and base_token"):
        map_from_options(columns="ts=block_timestamp,price=sqrtPriceX96,size=amount1,price_format=sqrt_price_x96")
    with pytest.raises(ValueError, match="token_decimals is the pool's two tokens' decimals"):
        map_from_options(columns=SWAP_MAP.replace("6/18", "6"))
    with pytest.raises(ValueError, match="size_scale must be a number > 0"):
        map_from_options(columns="ts=block_timestamp,price=price,size=amount1,size_scale=wei")
    with pytest.raises(ValueError, match="base_token is the pool's token priced"):
        map_from_options(columns=SWAP_MAP.replace("base_token=1", "base_token=WETH"))


def test_dune_and_bigquery_block_times_are_detected_as_the_time_column(tmp_path: Path) -> None:
    dune = tmp_path / "dune_weth_usdc_trades.csv"
    dune.write_text("evt_block_number,evt_index,evt_tx_hash,price,size,side,symbol,evt_block_time\n"
                    "20490001,35,0x1749a0b5,2679.999795,2.727121711,sell,WETH-USDC,2024-08-08 23:54:23.000 UTC\n"
                    "20490003,8,0xb42f6750,2680.089594,0.748701686,buy,WETH-USDC,2024-08-08 23:54:47.000 UTC\n")
    replay = FileReplay(dune)
    assert [(t.stream, t.ts, t.price, t.side) for t in drain(replay)] == [
        ("WETH-USDC", 1723161263000000000, 2679.999795, "sell"), ("WETH-USDC", 1723161287000000000, 2680.089594, "buy")]
    assert "ts=evt_block_time" in replay.notes[0]
    raw = tmp_path / "swaps.csv"
    raw.write_text(BIGQUERY_SWAPS)
    # sqrtPriceX96 mapped as a price without its price_format: each row refused, saying where its reading is
    replay = FileReplay(raw, columns=map_from_options(
        columns="ts=block_timestamp,price=sqrtPriceX96,size=amount1,stream_name=WETH-USDC"))
    assert drain(replay) == [] and "docs/replay.md#on-chain-swaps" in replay.rejected.examples["price_out_of_range"]


def test_a_raw_swap_export_without_a_map_is_refused_naming_the_keys_that_read_it(tmp_path: Path) -> None:
    path = tmp_path / "univ3_usdc_weth_005_swaps.csv"
    path.write_text(BIGQUERY_SWAPS)
    with pytest.raises(ValueError, match=r'read so far: ts=block_timestamp.*"sqrtPriceX96" is a Uniswap v3 pool.s '
                                         r"price: a map reads it with price_format=sqrt_price_x96"):
        FileReplay(path)


def test_the_cli_price_format_option_reads_a_swap_export_as_the_map_key_does(tmp_path: Path) -> None:
    """`--price-format sqrt_price_x96` was refused by the CLI's choices though the map's key takes it."""
    from engine.service.cli_parser import build_parser
    from engine.service.cli_reading import column_map_of

    path = tmp_path / "univ3_usdc_weth_005_swaps.csv"
    path.write_text(BIGQUERY_SWAPS)
    args = build_parser().parse_args(["backtest", str(path), "--out", str(tmp_path / "a.parquet"), "--price-format",
                                      "sqrt_price_x96", "--columns",
                                      SWAP_MAP.replace("price_format=sqrt_price_x96,", "")])
    ticks = drain(FileReplay(path, columns=column_map_of(args)))
    assert [(round(t.price, 6), t.side) for t in ticks] == [(2679.999795, "sell"), (2680.089594, "buy"),
                                                            (2679.389238, "sell")]
