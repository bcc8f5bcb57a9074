"""--max-rejected-share: a replay that rejected more of the ticks it read than the user allows ends with exit status
1, "partial" (exit_codes.PARTIAL), for a scheduler that alerts on statuses: the rows rejected were said, but a run
that lost a third of its rows exited 0 like a whole one (review337 #8). Without the option nothing changes: rejected
rows are said and never change the status. `backtest`, `feed replay`, `train` and `evaluate` take it.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping

from engine.quoting import quoted
from engine.service.exit_codes import PARTIAL

FILTERED_OUT = "filtered_out"  # rows a filter (--streams, --hours, a keep) left out on purpose: not rejected
# quotes of bid 0 and ask 0 (a halt, a LULD pause): the market's state as the venue sent it, read but no bad row
NO_MARKET = "no_market"


def add_max_rejected_share(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-rejected-share", type=_share, default=None, metavar="F",
                        help="exit with status 1 (partial; docs/cli.md) when more than this share (0 to 1) of the "
                             "ticks read from the files were rejected (rows a filter left out do not count): the "
                             "run's work is done and kept all the same. Default: none, rejected rows are said and "
                             "never change the exit status")


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a share from 0 to 1 (0.05: 5%), got {quoted(text)}") from None
    if math.isnan(value) or not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"a share from 0 to 1 (0.05: 5%), got {quoted(text)}")
    return value


def rejected_share_status(rejected: Mapping[str, int], taken: int, limit: float | None, command: str,
                          refused_after: int = 0) -> int | None:
    """PARTIAL, said on stderr, when the ticks rejected (``rejected``: by reason, as the reading counts them, a
    filter's left out among them but not counted; ``refused_after``: taken, then refused by the engine, a feed's)
    are more than ``limit`` of the ticks read (``taken`` plus those rejected); None within it, or without a limit.
    The rows a filter left out count on neither side: one ticker of a whole-market file (`--streams AAPL` of
    10,000 tickers) would otherwise dilute its rejects until no share ever passed the limit (review430 #9). Quotes
    of no market (NO_MARKET) were read but are no bad rows: they count among the ticks read, not the rejected, so a
    halt day does not fail a strict limit over quotes the venue really sent."""
    if limit is None:
        return None
    rejected_rows = sum(n for reason, n in rejected.items() if reason != FILTERED_OUT)
    no_market = rejected.get(NO_MARKET, 0)
    lost = rejected_rows - no_market + refused_after
    read = taken + rejected_rows
    if read == 0 or lost / read <= limit:
        return None
    filtered = rejected.get(FILTERED_OUT, 0)
    apart = [f"the {filtered:,} a filter left out not counted"] if filtered else []
    apart += [f"{no_market:,} quotes of no market, a halt's, read and not counted as rejected"] if no_market else []
    said_apart = f" ({'; '.join(apart)})" if apart else ""
    print(f"{command}: partial: {lost:,} of the {read:,} ticks read{said_apart} ({lost / read:.1%}) were rejected, "
          f"over --max-rejected-share {limit:g}: what the run did is kept, and it exits {PARTIAL} (partial)",
          file=sys.stderr, flush=True)
    return PARTIAL
