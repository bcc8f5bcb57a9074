"""The decimals a price read from text is written with (`decimals`), to which the project rounds its own arithmetic
on prices: a price shifted by an offset (shifted_prices.shifted: -37.63 + 46 is 8.37, not binary floating point's
8.369999999999997) and a quote's mid (Tick.mid: 1.08497/1.08499 is 1.08498, not 1.0849799999999998), so a price
logged, exported, answered or written into a text model's prompt has the vendor's decimals. A module of its own
because connectors/ticks.py computes the mid and the offset's module imports it.
"""

from __future__ import annotations


def decimals(value: float) -> int:
    """The decimal places of a float's shortest repr, which a price read from text has as written: 8.37 -> 2,
    1.5e-05 -> 6, 46.0 -> 1, 1e+16 -> -16."""
    mantissa, _, exponent = repr(value).partition("e")
    return len(mantissa.partition(".")[2]) - int(exponent or 0)
