"""Values from numpy, pandas, polars and `datetime` as the plain Python values the wire carries (`plain`), and what
to send for one that stays unsendable (`unsendable_hint`, `time_hint`). Ticks and requests built in Python take
what a DataFrame hands out: numpy scalars, arrays (`df.symbol.unique()`), pandas Timestamps, the datetimes of
polars' `to_dicts()` and the `Decimal`s of a DECIMAL column (a database's NUMERIC, polars' Decimal).

Apart from connectors/ticks.py because the tick builders (`trade`, `quote`) and the wire payload's msgpack hook
(connectors/wire_payload.py, for `FeedClient.send` and `ControlClient` requests) share it; neither imports numpy,
pandas nor polars (the clients stay light), so their types are told by their module's name.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)


def plain(value: Any) -> Any:
    """A numpy scalar (numpy.int64 from a DataFrame, numpy.float32) as the Python int/float/str it holds, a numpy
    datetime64 and an aware datetime (a pandas Timestamp, polars' `to_dicts()` of a Datetime column) as int ns since
    the epoch, an array (numpy, a pandas Series, Index or array, a polars Series) as the list of its values (each
    made plain as msgpack packs it), a Decimal as its int or nearest float; anything else as it is (a naive datetime
    names no instant: it stays, refused)."""
    library = type(value).__module__.partition(".")[0]
    if library == "numpy":
        if type(value).__name__ == "datetime64":  # any unit, exactly, as int ns
            # (.item() gives an int for ns but a datetime for us, what polars' to_numpy() hands out); NaT stays NaT
            nanoseconds = value.astype("datetime64[ns]")
            return value if nanoseconds != nanoseconds else nanoseconds.astype("int64").item()
        if getattr(value, "ndim", 0) >= 1:  # its items as numpy scalars: a datetime64[us] array's stay exact
            return list(value)
        return value.item() if hasattr(value, "item") else value
    if library == "pandas" and hasattr(value, "tolist"):  # a Series, an Index, an ExtensionArray (Series.unique())
        return [plain(item) for item in value.tolist()]
    if library == "pandas" and type(value).__name__ == "NAType":  # a nullable column's missing value (Int64's):
        return None  # nil, a field left out, as NaN in a float column is
    if library == "polars" and hasattr(value, "to_list"):  # a Series
        return value.to_list()
    if isinstance(value, Decimal):  # msgpack has no decimal: a whole one as the int it is (exact: ts, seq), else
        # the nearest float, what file replay reads a DECIMAL price column as (NaN stays NaN: refused as NaN)
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
        return float("nan") if value.is_nan() else float(value)
    if isinstance(value, datetime) and value == value and value.utcoffset() is not None:  # (pandas' NaT != NaT)
        # exact: the datetime's microseconds, and a pandas Timestamp's nanosecond beside them
        return (value - _EPOCH) // _MICROSECOND * 1000 + getattr(value, "nanosecond", 0)
    return value


def unsendable_hint(value: Any) -> str:
    """What to send instead of a value `plain` leaves unsendable, for its refusal; "" when there is nothing to add."""
    if isinstance(value, (set, frozenset)) or hasattr(value, "__next__"):
        return ": send a list of its values, sorted(...) or list(...)"
    return time_hint(value)


def time_hint(value: Any) -> str:
    """Why a datetime `plain` leaves as it is is no time the wire takes, and what to send; "" for any other value."""
    if not isinstance(value, datetime) and type(value).__name__ not in ("datetime64", "NaTType"):
        return ""
    if value != value:
        return ": NaT, a missing time (pandas' and numpy's), is no time; leave such rows out"
    return (": a datetime without a time zone names no instant; give it its zone (tz_localize(\"UTC\"), "
            "datetime.replace(tzinfo=...)) or send int ns since the epoch (polars: pl.col(\"ts\").dt.epoch(\"ns\"))")
