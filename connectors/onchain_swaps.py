"""On-chain swap exports (a Uniswap v3 pool's Swap events as Dune, BigQuery or an archive node write them) read
with a column map alone, no converter: the keys a DEX user needs, checked when the map is built
(`check_swap_keys`, from connectors/map_checks.py) and applied to each value's expression (`swap_value`, from
connectors/row_exprs.py).

* `size_scale`: the file's sizes are real sizes times this (token base units: 1e18 for WETH's wei, 1e6 for USDC);
  with `token_decimals` and no size_scale, 10 ** the base token's decimals.
* `price_format: sqrt_price_x96`: the price column is the pool's sqrtPriceX96 after the swap, so token1 per
  token0 in base units is (sqrtPriceX96 / 2**96) ** 2; `token_decimals: [d0, d1]` (both tokens', `6/18` inline)
  makes it whole tokens (x 10 ** (d0 - d1)), and `base_token` (0 or 1) says which token is priced: 1 inverts it
  (USDC/WETH's pool, token1 WETH: USDC per WETH).
* `signed_size: pool`: the size is a pool-side amount (Uniswap's amount0/amount1: positive, the pool received it;
  negative, the pool paid it out), so a negative amount of the base token is a trader's buy, the opposite of
  `signed_size: true` (Bitfinex's trader-side sign).
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from engine.quoting import quoted

if TYPE_CHECKING:  # polars is imported where an expression is built (a file replay): the
    import polars as pl  # service's config imports this module, and each shard's and CLI start paid it

SQRT_PRICE_X96 = "sqrt_price_x96"  # a price_format
POOL_SIGN = "pool"  # a signed_size value
Q96 = 2.0 ** 96
SIZE_FIELDS = ("size", "bid_size", "ask_size")


def check_swap_keys(cmap: Any) -> None:
    """size_scale, token_decimals and base_token checked and made their values (`cmap`: a ColumnMap being built,
    set as its __post_init__ sets its keys); a ValueError names the key and what it takes."""
    decimals = _decimals(cmap.token_decimals)
    object.__setattr__(cmap, "token_decimals", decimals)
    if cmap.base_token is not None:
        if str(cmap.base_token).strip() not in ("0", "1"):
            raise ValueError(f"base_token is the pool's token priced and sized, 0 (token0) or 1 (token1), got "
                             f"{quoted(cmap.base_token)}")
        object.__setattr__(cmap, "base_token", int(str(cmap.base_token).strip()))
    if cmap.price_format == SQRT_PRICE_X96 and (decimals is None or cmap.base_token is None):
        raise ValueError("price_format sqrt_price_x96 needs token_decimals (token0's and token1's, e.g. 6/18 for "
                         "USDC/WETH) and base_token (0 or 1: the token priced, in units of the other)")
    if cmap.size_scale is None and decimals is not None and cmap.base_token is not None:
        object.__setattr__(cmap, "size_scale", 10.0 ** decimals[cmap.base_token])
    if cmap.size_scale is not None:
        try:
            scale = float(cmap.size_scale)
        except (TypeError, ValueError):
            scale = math.nan
        if not 0 < scale < math.inf:
            raise ValueError(f"size_scale must be a number > 0 (the file's sizes are real sizes times it, e.g. 1e18 "
                             f"for a token of 18 decimals in base units), got {quoted(cmap.size_scale)}")
        object.__setattr__(cmap, "size_scale", scale)


def _decimals(value: Any) -> tuple[int, int] | None:
    """token_decimals as (token0's, token1's): a list of two, or text `6/18` (inline --columns splits at commas)."""
    if value is None:
        return None
    parts = re.split(r"[/\s:]+", value.strip()) if isinstance(value, str) else list(value) \
        if isinstance(value, (list, tuple)) else []
    try:
        decimals = tuple(int(str(p).strip()) for p in parts)
    except ValueError:
        decimals = ()
    if len(decimals) != 2 or not all(0 <= d <= 36 for d in decimals):
        raise ValueError(f"token_decimals is the pool's two tokens' decimals, token0's then token1's (6/18 for "
                         f"USDC/WETH; a YAML list [6, 18]), got {quoted(value)}")
    return decimals[0], decimals[1]


def swap_value(key: str, col: pl.Expr, cmap: Any) -> pl.Expr:
    """A value's expression with the map's swap keys applied: sizes scaled (and a pool-side sign turned to the
    trader's), a sqrtPriceX96 made the base token's price."""
    import polars as pl

    if key in SIZE_FIELDS and cmap.size_scale is not None:
        col = col.cast(pl.Float64) / cmap.size_scale
    if key == "size" and cmap.signed_size == POOL_SIGN:
        col = -col  # the pool paid out the base token (negative): the trader bought it
    if key == "price" and cmap.price_format == SQRT_PRICE_X96:
        d0, d1 = cmap.token_decimals
        token1_per_token0 = (col.cast(pl.Float64) / Q96).pow(2) * 10.0 ** (d0 - d1)
        col = token1_per_token0 if cmap.base_token == 0 else 1.0 / token1_per_token0
    return col
