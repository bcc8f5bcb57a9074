"""What a feed author's two likeliest slips get back on `_rejects/` (review310 #6, #11): a ts counted in ms or us
(a venue's own times, `time.time() * 1000`) is refused as ts_unit naming the probable unit, while streams on a clock
of their own (a test's 1, 2, 3) keep working; and a Deribit, Bybit, BitMEX or OKX message sent as the venue sent it
is told the wire name of each field and where its capture can be replayed instead. Real sockets, a real server."""

from __future__ import annotations

import time

import msgpack

from wire_client import T0, fresh_stream, stats, trade, wait_stats, wait_until
from wire_server import clients, server  # noqa: F401 (fixtures)


def _refusals(rejects, feed, message: object, count: int = 1) -> list[dict]:
    n = len(rejects.kept)
    feed.send(msgpack.packb(message))
    return [payload for _, payload in rejects.until(lambda got: len(got) >= n + count)[n:n + count]]


def test_ts_in_ms_or_us_is_refused_naming_the_unit(clients) -> None:
    control, sub, push = clients
    ctl, feed, rejects = control(), push(), sub("_rejects/")
    before = stats(ctl)["rejected"].get("ts_unit", 0)
    ms, us = fresh_stream("MSNOW"), fresh_stream("USNOW")
    now_ms = int(time.time() * 1000)
    refused = _refusals(rejects, feed, [trade(ms, now_ms), trade(ms, now_ms + 1)], 2)
    assert [(r["reason"], r["stream"]) for r in refused] == [("ts_unit", ms)] * 2
    assert refused[0]["error"].startswith(f"ts_unit: ts {now_ms} reads as 1970-01-01T00:")
    assert "ts is in nanoseconds since the epoch; this looks like milliseconds" in refused[0]["error"]
    assert "send ts x 1,000,000" in refused[0]["error"]
    refused, = _refusals(rejects, feed, trade(us, int(time.time() * 1e6)))
    assert refused["reason"] == "ts_unit" and "this looks like microseconds" in refused["error"]
    # a stream whose ticks are epoch ns: a later ms tick (of any day) is the unit's slip, not just ts_backwards
    ns = fresh_stream("NSFIRST")
    feed.send(msgpack.packb(trade(ns, T0)))
    refused, = _refusals(rejects, feed, trade(ns, 1_733_097_600_000))
    assert refused["reason"] == "ts_unit" and "(2024-12-02T00:00:00Z read so)" in refused["error"]
    after = wait_stats(ctl, lambda st: st["rejected"].get("ts_unit", 0) - before == 4)
    assert ctl.ok("health")["status"] == "serving" and after["rejected"]["ts_unit"] == before + 4
    # nothing of the refused streams was accepted; the ns stream's tick was
    held = ctl.ok("streams")["streams"]
    assert ms not in held and us not in held and held[ns]["last_ts"] == T0


def test_a_kdb_timestamp_sent_as_its_long_is_refused_naming_q_epoch(clients) -> None:
    """review324 #5: a q bridge's `"j"$.z.p` counts ns from 2000-01-01, so read from 1970 today's tick is ~1996's."""
    control, sub, push = clients
    ctl, feed, rejects = control(), push(), sub("_rejects/")
    q_epoch = 946_684_800 * 10**9
    s = fresh_stream("QLONG")
    q_long = time.time_ns() - q_epoch
    refused, = _refusals(rejects, feed, trade(s, q_long))
    assert refused["reason"] == "ts_unit" and refused["stream"] == s
    assert "looks like ns since 2000-01-01, q's epoch" in refused["error"]
    assert f"send ts + {q_epoch:,}" in refused["error"]
    # the same stream sent right is taken: nothing of the refused tick held it
    feed.send(msgpack.packb(trade(s, q_long + q_epoch)))
    wait_until(lambda: (ctl.ok("streams", streams=[s])["streams"].get(s) or {}).get("last_ts") == q_long + q_epoch)


def test_q_long_nulls_sent_by_a_bridge_are_named_as_q_nulls(clients) -> None:
    _, sub, push = clients
    feed, rejects = push(), sub("_rejects/")
    s = fresh_stream("QNULL")
    refused = _refusals(rejects, feed, [trade(s, -(2**63)), {**trade(s, T0), "size": -(2**63)}], 2)
    assert [r["reason"] for r in refused] == ["ts_out_of_range", "negative_size"]
    assert all("q's long null, 0N / 0Np: no value" in r["error"] for r in refused), refused


def test_streams_on_a_clock_of_their_own_keep_working(clients) -> None:
    """Small counts (a test's, a simulation's) are no present-day time in any unit; once a stream runs on them, a
    later count that happens to read as today in ms is its own clock's next tick."""
    control, sub, push = clients
    ctl, feed = control(), push()
    s = fresh_stream("REL")
    now_ms = int(time.time() * 1000)
    feed.send(msgpack.packb([trade(s, 1), trade(s, 2), trade(s, 3), trade(s, now_ms)]))
    wait_until(lambda: (ctl.ok("streams", streams=[s])["streams"].get(s) or {}).get("last_ts") == now_ms)
    assert ctl.ok("streams", streams=[s])["streams"][s]["ticks"] == 4


def test_a_venues_raw_websocket_message_is_told_what_to_send(clients) -> None:
    _, sub, push = clients
    feed, rejects = push(), sub("_rejects/")
    raw = [({"jsonrpc": "2.0", "method": "subscription", "params": {
                "channel": "trades.BTC-PERPETUAL.raw", "data": [{
                    "trade_seq": 1, "trade_id": "1", "timestamp": 1704153601000, "price": 42500.5, "amount": 10,
                    "direction": "buy", "instrument_name": "BTC-PERPETUAL"}]}},
            "(the keys of a Deribit JSON-RPC subscription message (its trades in params.data): the wire's are "
            "stream (instrument_name), ts (timestamp), price, size (amount), side (direction); send each trade as a "
            "tick of its own: timestamp counts ms"),
           ({"topic": "publicTrade.BTCUSDT", "type": "snapshot", "ts": 1704153601000, "data": [{
               "T": 1704153601000, "s": "BTCUSDT", "S": "Buy", "v": "0.001", "p": "42500.50", "i": "x"}]},
            "(the keys of a Bybit v5 message (publicTrade's trades in data): the wire's are stream (s), ts (T), "
            "price (p), size (v), side (S)"),
           ({"table": "trade", "action": "insert", "data": [{
               "timestamp": "2024-01-02T00:00:01.000Z", "symbol": "XBTUSD", "side": "Buy", "size": 100,
               "price": 42500.5}]},
            "(the keys of a BitMEX message (its trade table's rows in data): the wire's are stream (symbol), ts "
            "(timestamp), price, size, side")]
    for message, said in raw:
        refused, = _refusals(rejects, feed, message)
        assert refused["reason"] == "missing_stream" and said in refused["error"], refused
        assert "`flashtick feed replay FILE` (docs/replay.md)" in refused["error"]


def test_a_table_sent_as_columns_is_told_to_send_rows(clients) -> None:
    """review324 #8: a q bridge's dict of lists (pykx `.py()` of a table) is refused once, naming the rows to send."""
    control, sub, push = clients
    ctl, feed, rejects = control(), push(), sub("_rejects/")
    s = fresh_stream("QCOLS")
    columns = {"stream": [s, s], "ts": [T0, T0 + 1], "price": [101.0, 101.5], "size": [1.0, 2.0]}
    for message in (columns, {"columns": columns}):
        refused, = _refusals(rejects, feed, message)
        assert refused["reason"] == "not_a_map" and "a table sent as columns" in refused["error"], refused
        assert "send a list of rows" in refused["error"]
    rows = [dict(zip(columns, row)) for row in zip(*columns.values())]  # what the refusal says to send: taken
    feed.send(msgpack.packb(rows))
    wait_until(lambda: (ctl.ok("streams", streams=[s])["streams"].get(s) or {}).get("ticks") == 2)
