"""Reading a JSON-lines tick file vs its CSV twin: the same seeded trades (prices and sizes as strings, as
exchanges send them) written both ways, and as an OKX websocket capture (ticks in arrays under `data`, a few per
message, made one row each), each read end to end by FileReplay (detection, the JSON file's one parse into its
Parquet copy, and every tick validated), in one run; ticks/s of each and their ratios to the CSV.

    python -m benchmarks.replay_json_lines              # 200,000 lines
    python -m benchmarks.replay_json_lines --lines 1000000
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from pathlib import Path

import polars as pl

from benchmarks.common import add_output_arguments, machine, output_dir, write_json
from connectors.replay import FileReplay

T0_MS = 1_704_153_600_000


def trades(lines: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    price, out = 43000.0, []
    for i in range(lines):
        price = max(1.0, price + rng.choice((-0.1, 0.0, 0.1)))
        out.append({"ts": T0_MS + 10 * i, "symbol": ("BTCUSDT", "ETHUSDT")[i % 2], "price": f"{price:.2f}",
                    "qty": f"{rng.randint(1, 5000) / 1000:.3f}", "side": rng.choice(("buy", "sell"))})
    return out


def okx_messages(rows: list[dict], per_message: int = 4) -> list[dict]:
    """The trades as OKX sends them: `per_message` ticks in each message's data, its arg naming the channel."""
    ticks = [{"instId": r["symbol"].replace("USDT", "-USDT"), "tradeId": str(i), "px": r["price"], "sz": r["qty"],
              "side": r["side"], "ts": str(r["ts"]), "count": "1"} for i, r in enumerate(rows)]
    return [{"arg": {"channel": "trades", "instId": "BTC-USDT"}, "data": ticks[i:i + per_message]}
            for i in range(0, len(ticks), per_message)]


def read_all(path: Path) -> int:
    with FileReplay(path, chunk_rows=8192) as replay:
        ticks = 0
        while not replay.done:
            ticks += len(replay.next_batch(8192))
    return ticks


def best_rate(path: Path, reps: int) -> tuple[float, int]:
    """The best ticks/s of `reps` reads, after a warm-up read."""
    ticks, best = read_all(path), float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        read_all(path)
        best = min(best, time.perf_counter() - start)
    return ticks / best, ticks


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--reps", type=int, default=3)
    add_output_arguments(parser)
    args = parser.parse_args(argv)
    rows = trades(args.lines)
    with tempfile.TemporaryDirectory() as folder:
        jsonl, csv, okx = Path(folder) / "trades.jsonl", Path(folder) / "trades.csv", Path(folder) / "okx.jsonl"
        jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
        okx.write_text("".join(json.dumps(m) + "\n" for m in okx_messages(rows)))
        pl.DataFrame(rows).write_csv(csv)
        csv_rate, csv_ticks = best_rate(csv, args.reps)
        json_rate, json_ticks = best_rate(jsonl, args.reps)
        okx_rate, okx_ticks = best_rate(okx, args.reps)
    assert csv_ticks == json_ticks == okx_ticks == args.lines, (csv_ticks, json_ticks, okx_ticks)
    path = write_json("replay_json_lines", {"lines": args.lines, "jsonl_ticks_per_s": json_rate,
                                            "csv_ticks_per_s": csv_rate, "ratio": json_rate / csv_rate,
                                            "okx_capture_ticks_per_s": okx_rate, "okx_ratio": okx_rate / csv_rate,
                                            "machine": machine()}, output_dir(args))
    print(f"replay read, {args.lines} trades: jsonl {json_rate:,.0f} ticks/s, csv {csv_rate:,.0f} ticks/s, "
          f"okx capture {okx_rate:,.0f} ticks/s; jsonl/csv {json_rate / csv_rate:.2f}, "
          f"okx/csv {okx_rate / csv_rate:.2f}  [{path}]")

if __name__ == "__main__":
    main()
