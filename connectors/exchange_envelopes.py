"""Websocket messages whose ticks sit where no table reading reaches them, rewritten line by line into the one
shape the JSON-lines reader unwraps, `{"channel": ..., "data": [tick, ...]}` (connectors/json_lines.py, then
connectors/exchange_shapes.py's ARRAY_SHAPES read them by their channel and keys):

* Coinbase Advanced Trade (`wss://advanced-trade-ws.coinbase.com`): every message is `{"channel", "timestamp",
  "sequence_num", "events": [...]}`; `market_trades` events hold `trades` (each with its own `time`), `ticker`
  events hold `tickers` (the best bid and ask with their quantities, and no time of their own: the message's
  `timestamp` stamps them). A ticker's last `price` is left out: it is the trade the market_trades channel sends.
* Kraken v1 `spread` (the top of book): `[channelID, [bid, ask, timestamp, bidVolume, askVolume], "spread",
  "XBT/USD"]`, a message a line as its `trade` arrays are (those: connectors/json_objects.py).

Any other line is kept as it was. A file is looked at only when its first lines show one of these layouts.
"""

from __future__ import annotations

import json
from typing import Any

SNIFF_LINES = 50  # of a file's first lines: one of them shows the layout (after acks and heartbeats)
# Kraken v1 spread's array, named as its docs name each value (the time named as the trade arrays' is, `time`)
KRAKEN_V1_SPREAD = ("bid", "ask", "time", "bidVolume", "askVolume")
# a Coinbase Advanced Trade ticker's fields read (its 24 h statistics and last price are not ticks)
ADVANCED_TICKER = ("product_id", "best_bid", "best_bid_quantity", "best_ask", "best_ask_quantity")


def unwrapped_messages(lines: list[bytes]) -> list[bytes]:
    """The lines with Coinbase Advanced Trade envelopes and Kraken v1 spread arrays as `{"channel", "data"}`
    messages; the same list when the file's first lines hold neither."""
    head = [line for line in lines[:SNIFF_LINES] if line.strip()]
    advanced = any(b'"events"' in line and b'"channel"' in line for line in head)
    spread = any(line.lstrip().startswith(b"[") and b'"spread"' in line for line in head)
    if not advanced and not spread:
        return lines
    return [_unwrapped(line) for line in lines]


def _unwrapped(line: bytes) -> bytes:
    text = line.strip()
    if not text or text[:1] not in (b"{", b"["):
        return line
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return line  # rejected as not_json where the lines are read
    message = _advanced_trade(value) if isinstance(value, dict) else _kraken_spread(value)
    return line if message is None else json.dumps(message).encode()


def _advanced_trade(value: dict[str, Any]) -> dict[str, Any] | None:
    """A Coinbase Advanced Trade message as `{"channel", "data": [...]}` (trades, or tickers stamped with the
    message's timestamp); an ack or a heartbeat with `data` empty; None for any other object."""
    events = value.get("events")
    if not isinstance(value.get("channel"), str) or not isinstance(events, list):
        return None
    data: list[dict[str, Any]] = []
    for event in events:
        if not isinstance(event, dict):
            continue
        data += [dict(trade) for trade in event.get("trades") or () if isinstance(trade, dict)]
        data += [{key: ticker.get(key) for key in ADVANCED_TICKER} | {"time": value.get("timestamp")}
                 for ticker in event.get("tickers") or () if isinstance(ticker, dict)]
    message = {key: v for key, v in value.items() if key not in ("events", "timestamp")}
    return message | {"data": data}


def _kraken_spread(value: Any) -> dict[str, Any] | None:
    """A Kraken v1 spread message as `{"channelID", "channel": "spread", "pair", "data": [quote]}`; None for any
    other array."""
    if not (isinstance(value, list) and len(value) == 4 and isinstance(value[0], int) and value[2] == "spread"
            and isinstance(value[3], str) and isinstance(value[1], list)
            and len(value[1]) >= len(KRAKEN_V1_SPREAD)):
        return None
    quote = dict(zip(KRAKEN_V1_SPREAD, (str(v) for v in value[1])))
    return {"channelID": value[0], "channel": "spread", "pair": value[3], "data": [quote]}
