"""Real market data files as Ticks, split in time for training and evaluation.

The data is not shipped with the package (vendor terms unchecked): every loader
takes the data directory from its caller, `load_real` returns [] when the
directory does not hold the data sets, and callers skip. Each data set is one
stream; the held-out slice is the *later* part in time.

* `BTCUSDT`, `ETHUSDT` - Binance spot trades + best bid/offer, merged on the
  collector clock (`local_ts_ns`; the exchange clock runs ~1.27 s apart, never mixed).
* `EURUSD` - Dukascopy top-of-book quotes (sizes in millions of EUR).
* `BTCUSDT-trades`, `ETHUSDT-trades` - the Binance trades alone, as a feed without quotes looks (20 ticks
  of it span far more time than 20 ticks of trades and quotes: its labels differ).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from connectors.ticks import InvalidTick, Tick, validate
from engine.quoting import quoted_words
from engine.rust_paths import rust_path

HELDOUT_FRACTION = 0.2


@dataclass
class RealDataset:
    """One real stream, its train part and its later held-out part."""

    name: str
    ticks: list[Tick]
    rejected: int

    def split(self, heldout_fraction: float = HELDOUT_FRACTION) -> tuple[list[Tick], list[Tick]]:
        if not 0 < heldout_fraction < 1:
            raise ValueError(f"heldout_fraction must be in (0, 1), got {heldout_fraction}")
        cut = int(len(self.ticks) * (1 - heldout_fraction))
        return self.ticks[:cut], self.ticks[cut:]


def data_available(data_dir: Path) -> bool:
    return (data_dir / "binance-btcusdt-spot").is_dir() and (data_dir / "dukascopy-eurusd").is_dir()


def _validated(name: str, rows: list[dict]) -> RealDataset:
    ticks, rejected = [], 0
    for row in rows:
        try:
            ticks.append(validate(row))
        except InvalidTick:
            rejected += 1
    return RealDataset(name, ticks, rejected)


def load_btcusdt(data_dir: Path) -> RealDataset:
    return load_binance(data_dir / "binance-btcusdt-spot", "BTCUSDT")


def load_ethusdt(data_dir: Path) -> RealDataset:
    return load_binance(data_dir / "binance-ethusdt-spot", "ETHUSDT")


def load_binance(d: Path, name: str, quotes: bool = True) -> RealDataset:
    trades = pl.read_csv(rust_path(d / "trades.csv")).select(
        pl.col("local_ts_ns").alias("ts"),
        pl.lit("trade").alias("kind"),
        pl.col("price"),
        pl.col("qty").alias("size"),
        pl.col("aggressor_side").alias("side"),
    )
    parts = [trades]
    if quotes:  # the trades-only sets never read the quotes file
        parts.append(pl.read_parquet(rust_path(d / "bbo.parquet")).select(
            pl.col("local_ts_ns").alias("ts"),
            pl.lit("quote").alias("kind"),
            pl.col("bid_px").alias("bid"),
            pl.col("ask_px").alias("ask"),
            pl.col("bid_qty").alias("bid_size"),
            pl.col("ask_qty").alias("ask_size"),
        ))
    # Stable sort: same-ns events keep file order, trades before quotes (concat order).
    merged = pl.concat(parts, how="diagonal").sort("ts", maintain_order=True)
    rows = [{k: v for k, v in r.items() if v is not None} | {"stream": name} for r in merged.iter_rows(named=True)]
    return _validated(name, rows)


def load_eurusd(data_dir: Path) -> RealDataset:
    df = pl.read_parquet(rust_path(data_dir / "dukascopy-eurusd" / "eurusd_ticks_2019-02-04_05.parquet")).select(
        pl.col("timestamp_utc").cast(pl.Int64).alias("ts"),
        pl.col("bid"),
        pl.col("ask"),
        pl.col("bid_volume").alias("bid_size"),
        pl.col("ask_volume").alias("ask_size"),
    )
    rows = [r | {"stream": "EURUSD", "kind": "quote"} for r in df.iter_rows(named=True)]
    return _validated("EURUSD", rows)


LOADERS = {"BTCUSDT": (load_btcusdt, "binance-btcusdt-spot"), "ETHUSDT": (load_ethusdt, "binance-ethusdt-spot"),
           "EURUSD": (load_eurusd, "dukascopy-eurusd"),
           "BTCUSDT-trades": (lambda d: load_binance(d / "binance-btcusdt-spot", "BTCUSDT", quotes=False),
                              "binance-btcusdt-spot"),
           "ETHUSDT-trades": (lambda d: load_binance(d / "binance-ethusdt-spot", "ETHUSDT", quotes=False),
                              "binance-ethusdt-spot")}
INSTRUMENTS = ("BTCUSDT", "ETHUSDT", "EURUSD")  # one set each; the "-trades" sets are views of the first two
DEFAULT_SETS = ("BTCUSDT", "EURUSD")  # what the v1 built-in model was trained on (ETHUSDT came later)


def load_real(data_dir: Path, names: tuple[str, ...] = DEFAULT_SETS) -> list[RealDataset]:
    """The named real data sets, in that order (`LOADERS`), or [] when ``data_dir`` does not hold the
    default ones; a named set whose folder is missing is an error, not a silent omission."""
    unknown = [n for n in names if n not in LOADERS]
    if unknown:
        raise ValueError(f"unknown data sets {quoted_words(unknown)}; known: {quoted_words(sorted(LOADERS))}")
    if not data_available(data_dir):
        return []
    missing = [LOADERS[n][1] for n in names if not (data_dir / LOADERS[n][1]).is_dir()]
    if missing:
        raise FileNotFoundError(f"{data_dir} lacks {quoted_words(missing)}")
    return [LOADERS[n][0](data_dir) for n in names]
