"""A text codec's line templates: which tick fields a template may name, how their values are written (floats
positionally, a missing one as `?`) and the check, when a config is built, that each template can write a tick.

Apart from connectors/text_codec.py because this is what a user writes in a config (`TextCodecConfig`) and what
its errors say, while the codec itself is about tokenizing the lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from engine.quoting import quoted, quoted_words

TEMPLATE_FIELDS = ("stream", "ts", "kind", "price", "size", "side", "bid", "ask", "bid_size", "ask_size", "mid",
                   "gap_ms")


class _Missing:
    """A field the tick does not carry (a quote's sizes, a trade's bid): written `?` whatever the format spec, never
    Python's `None` in a model's prompt."""

    def __format__(self, spec: str) -> str:
        return "?"

    def __str__(self) -> str:
        return "?"


MISSING = _Missing()


class _Positional(float):
    """A tick's float that, written without a format spec, reads as a trader writes it: positional, shortest digits
    (`0.00009`, `100.5`, `2.0`), never Python's exponent form (`9e-05`, `1e+16`). A template's own format spec
    (`{size:.8f}`, `{price:e}`) is applied as Python applies it."""

    def __format__(self, spec: str) -> str:
        if spec:  # a plain float, so a spec it cannot take is refused naming `float`, not this class
            return format(float(self), spec)
        text = repr(float(self))
        if "e" not in text:  # also nan and inf, which have no positional form
            return text
        positional = format(Decimal(text), "f")  # the same shortest digits, without the exponent
        return positional if "." in positional else positional + ".0"


def positional(value: float) -> str:
    """``value`` as a trader writes it: positional, the shortest digits that read back as it (`600000.04`,
    `0.00001245`), never rounded to a few significant digits nor in exponent form."""
    return format(_Positional(value))


def template_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """What a template is formatted with: floats written positionally, a missing value (None) as `?`."""
    return {key: MISSING if value is None else _Positional(value) if type(value) is float else value
            for key, value in values.items()}


def _field_refusal(tpl: str, values: Mapping[str, Any]) -> str | None:
    """The first field of `tpl` its value cannot be written with (`{size:d}` of a float), said with the field's type
    and a spec that type takes; None when each field alone can be written."""
    import string

    written = template_values(values)
    for _, name, spec, conversion in string.Formatter().parse(tpl):
        if name is None:
            continue
        one = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
        try:
            one.format(**written)
        except (ValueError, TypeError, IndexError, KeyError) as e:
            kind, works = {float: ("a float", ".2f"), int: ("an int of ns", "d")}.get(type(values[name]),
                                                                                     ("text", ">8"))
            return f"{one}: {name} is {kind}, which that spec cannot write ({e}); write e.g. {{{name}:{works}}}"
    return None


# What each field is when given, for checking a template before any tick comes: text, an int (ns), floats
SAMPLE_FIELDS = {"stream": "BTCUSDT", "ts": 1_700_000_000_000_000_000, "kind": "trade", "price": 100.5, "size": 2.0,
                  "side": "buy", "bid": 100.25, "ask": 100.75, "bid_size": 3.0, "ask_size": 4.0, "mid": 100.5,
                  "gap_ms": "0.0"}


@dataclass(frozen=True)
class TextCodecConfig:
    """Line templates (str.format fields: see TEMPLATE_FIELDS); each must end with a newline. A float field
    without a format spec is written positionally (`0.00009`, not `9e-05`); one with a spec as str.format writes it."""

    trade_template: str = "T {side} {price} x {size} +{gap_ms}ms\n"
    quote_template: str = "Q {bid}/{ask} {bid_size}x{ask_size} +{gap_ms}ms\n"
    gap_decimals: int = 1

    def __post_init__(self) -> None:
        import string

        for name in ("trade_template", "quote_template"):
            tpl = getattr(self, name)
            if not tpl.endswith("\n"):
                raise ValueError(f"{name} must end with a newline so lines stay separate, got {quoted(tpl)}")
            try:
                fields = [f for _, f, _, _ in string.Formatter().parse(tpl) if f is not None]
            except ValueError as e:  # `{price` unclosed, a lone `}`: named by its key, as every template error
                raise ValueError(f"{name} {quoted(tpl)} is not a format string: {e} (write a literal brace as {{{{ or "
                                 f"}}}})") from None
            bad = [f for f in fields if f not in TEMPLATE_FIELDS]
            if bad:
                raise ValueError(f"{name} uses unknown fields {quoted_words(bad)}; allowed: "
                                 f"{quoted_words(TEMPLATE_FIELDS)}")
            try:  # a format spec the values cannot take ({size:d} of a float) fails here, not on every tick
                tpl.format(**template_values(SAMPLE_FIELDS))
            except (ValueError, TypeError, IndexError, KeyError) as e:
                which = _field_refusal(tpl, SAMPLE_FIELDS) or (
                    f"{type(e).__name__}: {e} (price, size, bid, ask, sizes and mid are floats, ts an int of ns, "
                    f"gap_ms, stream, kind and side text)")
                raise ValueError(f"{name} {quoted(tpl)} cannot write a tick: {which}") from None
        if self.gap_decimals < 0:
            raise ValueError(f"gap_decimals must be >= 0, got {self.gap_decimals}")
