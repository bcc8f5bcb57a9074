"""Why a tick is refused: `REASONS`, the stable machine-readable codes (counter labels, `_rejects/` payloads), and
`InvalidTick`, the one exception every check raises with one of them and a human message.

Apart from connectors/ticks.py because every check (stream names, timestamps, msgpack reading, the tick fields)
raises it, and those live in modules of their own.
"""

from __future__ import annotations

from engine.quoting import quoted

REASONS = (
    "not_a_map",
    "missing_stream",
    "bad_stream",
    "missing_field",
    "ts_not_int",
    "ts_out_of_range",
    "unknown_kind",
    "ambiguous_kind",
    "unknown_field",
    "wrong_type",
    "duplicate_key",  # a map with one key twice (msgpack allows it; which value was meant cannot be told)
    "nonfinite_price",
    "nonpositive_price",
    "nonfinite_size",
    "negative_size",
    "price_out_of_range",  # a price, bid or ask outside PRICE_RANGE (connectors/ticks.py): a unit error, a corrupt feed
    "size_out_of_range",  # a size at or above MAX_SIZE (ditto)
    "unknown_side",
    "crossed_quote",
    "no_market",  # a quote of bid 0 and ask 0: no bid and no offer (a halt, a LULD pause): the market's state
    "ts_backwards",
    "seq_out_of_range",  # a `seq` outside [0, 2**64)
    "ts_in_future",  # live service only: ts further ahead of its wall clock than limits.max_ts_ahead_s
    "ts_unit",  # live service only: ts counted in s, ms or us, not ns (tick_times.check_ts_unit)
    "unencodable",  # valid, but the codec failed on it (a codec bug: the tick is refused, the service goes on)
    "bad_msgpack",
    "oversize",
    "bad_framing",  # a whole message: 3 frames or more, or [ticks, ticks] (engine/service/ingest_reading.py)
    "empty_list",  # a whole message that holds an empty list: no tick taken
    "bad_tokens",
    "stopping",  # a whole message read after a stop's limits.drain_s ran out: not taken (engine/service/stop_drain.py)
    "stream_refused",
    "overloaded",
    "log_unavailable",
    "filtered_out",  # file replay only: a row a column map's `keep` leaves out (not a trade)
    "extra_fields",  # file replay only: a CSV row with more fields than the file's columns
    "not_json",  # file replay only: a JSON-lines file's line that is not a JSON object
    "error_value",  # file replay only: a number cell holding a spreadsheet's or terminal's error value (`#N/A N/A`)
    "wide_quote",  # file replay only: a header-less file's quote whose ask is past 1.2x its bid (quote_widths.py)
    "truncated_line",  # file replay only: a CSV's last line, without its newline, short of fields (cut_lines.py)
)


# what only file replay refuses (its rows, before anything is sent): never a live service's counter
FILE_REPLAY_REASONS = frozenset({"filtered_out", "extra_fields", "not_json", "error_value", "wide_quote",
                                 "truncated_line"})
SERVICE_REASONS = tuple(reason for reason in REASONS if reason not in FILE_REPLAY_REASONS)


class InvalidTick(ValueError):
    """A tick that was rejected; `reason` is one of REASONS (stable, for counters).

    `stream` is the tick's stream once it got far enough to have a valid one, else None.
    """

    def __init__(self, reason: str, message: str, stream: str | None = None) -> None:
        if reason not in REASONS:  # a typo here would silently split a counter
            raise KeyError(f"unknown reason code {quoted(reason)}")
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message
        self.stream = stream
