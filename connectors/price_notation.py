"""How a file writes its prices, beyond decimals: CME's 32nds of Treasury futures, CBOT grains' eighths of a cent,
and yields named as such.

`110-16+` and `110'165` are 110 and 16.5/32 (110.515625). Read as numbers they are no number at all, or, with an
apostrophe and three digits, 110165: an apostrophe grouping thousands as Swiss numbers write them (`1'234.50`).
A column map's `price_format: 32nds` (--price-format 32nds) reads them (`fractional_price`); without it a column
whose cells look like 32nds is said in a caution (`fractional_facts`, `fractional_caution`), never read as
thousands in silence. Grains (corn, wheat, soybeans, oats) are quoted in cents and eighths of a cent: `450'4` is
450 4/8 (450.5), futures ticking in quarters ('2, '4, '6), options and mini contracts in eighths ('1 to '7); some
vendors write a dash, `450-4`. `price_format: eighths` reads them (EIGHTHS); a cell of that shape that a map
reads otherwise is named in its row's reject (`unread_price_hint`) and, at the start of a run, in the caution 32nds
get. A price column named as a yield (`bid_yield`) replays as the yield it holds, whose "up" is the price's down:
said too (`yield_caution`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

import polars as pl

from connectors.cautions import Caution
from connectors.column_map import ColumnMap
from connectors.column_names import names_a_yield
from connectors.map_vocabulary import PRICE_FIELDS, THIRTY_SECONDS, THIRTY_SECONDS_FORM, WHOLE_AND_FRACTION
from connectors.number_separators import SPACE_GROUPED
from engine.quoting import quoted

# the last mark: a part of a 32nd (map_vocabulary.py's THIRTY_SECONDS), its spaces stripped
PARTS = {"": 0.0, "0": 0.0, "1": 0.125, "2": 0.25, "3": 0.375, "5": 0.5, "6": 0.625, "7": 0.75, "8": 0.875, "+": 0.5,
         "1/4": 0.25, "1/2": 0.5, "3/4": 0.75, "1/8": 0.125, "3/8": 0.375, "5/8": 0.625, "7/8": 0.875,
         "\u00bc": 0.25, "\u00bd": 0.5, "\u00be": 0.75}
# What a price in 32nds looks like to a reader of decimals: a handle of 2 or 3 digits, an apostrophe or a dash,
# a 32nd (00-31) and maybe its part. `110'165` is also 110,165 grouped by an apostrophe (SPACE_GROUPED)...
LOOKS_LIKE_32NDS = (r"^[+-]?\d{2,3}['\u2019-]([0-2]\d|3[01])([0-35-8+]| ?[\u00bc\u00bd\u00be]| [13]/4| 1/2| [1357]/8)?"
                    r"$|^[+-]?\d{2,3} \d{1,3}/(32|64|128)$")  # (or a whole and a fraction: `110 16/32`)
# ...while a dash, a `+`, two digits after the apostrophe or a fraction cannot group thousands: such a cell is
# 32nds for sure
NOT_THOUSANDS = r"(-|\+$|['\u2019]\d{2}$|/)"
APOSTROPHE = "['\u2019]"


# CBOT grains: a handle in cents, an apostrophe or a dash, and one digit of eighths of a cent (0-7)
EIGHTHS = r"^([+-]?)(\d+)['\u2019-]([0-7])$"
EIGHTHS_FORM = "HANDLE'EIGHTHS or HANDLE-EIGHTHS, one digit 0 to 7: 450'4 (450.5), 450'2, 450'6, 450-4; or a decimal"
LOOKS_LIKE_EIGHTHS = r"^[+-]?\d{1,5}['\u2019-]\d$"
FRACTIONAL_FORMS = {"32nds": f"32nds ({THIRTY_SECONDS_FORM})", "eighths": f"eighths of a cent ({EIGHTHS_FORM})"}


def fractional_price(text: pl.Expr, otherwise: pl.Expr, price_format: str) -> pl.Expr:
    """A price cell in 32nds (THIRTY_SECONDS) or eighths (EIGHTHS), by `price_format`, as its decimal value; a
    cell whose digits an apostrophe or a dash splits otherwise is malformed (null: its row rejected as
    missing_field, never `110'168` read as thousands); any other cell as `otherwise` reads it (a decimal)."""
    pattern = EIGHTHS if price_format == "eighths" else THIRTY_SECONDS
    part = lambda i: text.str.extract(pattern, i)  # noqa: E731
    handle, fraction = part(2).cast(pl.Float64), part(3).cast(pl.Float64)
    if price_format == "eighths":
        value = handle + fraction / 8
    else:
        part_of = part(4).fill_null("").str.strip_chars(" ")
        value = handle + (fraction + part_of.replace_strict(PARTS, return_dtype=pl.Float64)) / 32
    signed = pl.when(part(1) == "-").then(-value).otherwise(value)
    if price_format == "32nds":  # `110 16/32`, `110 31/64`: a whole and its fraction
        signed = pl.when(text.str.contains(WHOLE_AND_FRACTION)).then(_whole_and_fraction(text)).otherwise(signed)
        pattern = f"{pattern}|{WHOLE_AND_FRACTION}"
    return pl.when(text.str.contains(pattern)).then(signed) \
        .when(text.str.contains(r"\d['\u2019-]\d")).then(None).otherwise(otherwise)


def _whole_and_fraction(text: pl.Expr) -> pl.Expr:
    """A cell written as a whole and a fraction (WHOLE_AND_FRACTION: `110 16/32`) as its decimal value; null where
    the numerator is the denominator or past it (`110 40/32`: malformed, its row rejected)."""
    sign, whole, numerator, denominator = (text.str.extract(WHOLE_AND_FRACTION, i) for i in range(1, 5))
    numerator, denominator = numerator.cast(pl.Float64), denominator.cast(pl.Float64)
    value = whole.cast(pl.Float64) + numerator / denominator
    return pl.when(numerator >= denominator).then(None).when(sign == "-").then(-value).otherwise(value)


def fractional_facts(raw: Mapping[str, pl.Expr]) -> list[pl.Expr]:
    """Aggregates over each text price column (tick field -> its cells, stripped) that `fractional_caution` reads:
    how many cells look like 32nds, how many of those cannot be thousands, how many are grouped by an apostrophe
    at all, and the first that looks like 32nds; how many look like eighths, and the first."""
    exprs = []
    for field, cells in raw.items():
        looks, eighths = cells.str.contains(LOOKS_LIKE_32NDS), cells.str.contains(LOOKS_LIKE_EIGHTHS)
        exprs += [looks.sum().alias(f"_32_{field}_looks"),
                  (looks & cells.str.contains(NOT_THOUSANDS)).sum().alias(f"_32_{field}_sure"),
                  (looks & cells.str.contains(SPACE_GROUPED)).sum().alias(f"_32_{field}_thousands"),
                  cells.str.contains(APOSTROPHE).sum().alias(f"_32_{field}_grouped"),
                  cells.filter(looks).first().alias(f"_32_{field}_first"),
                  cells.filter(looks & cells.str.contains(SPACE_GROUPED)).first().alias(f"_32_{field}_big"),
                  cells.filter(looks & cells.str.contains(NOT_THOUSANDS)).first().alias(f"_32_{field}_sure_first"),
                  eighths.sum().alias(f"_8_{field}_looks"), cells.filter(eighths).first().alias(f"_8_{field}_first")]
    return exprs


# what a caution calls each notation, and the prefix of its facts (fractional_facts)
NOTATIONS = {"32nds": ("CME's 32nds of Treasury futures", "_32_"),
             "eighths": ("CBOT grains' cents and eighths of a cent", "_8_")}


def fractional_caution(path: Path, cmap: ColumnMap, facts: Mapping[str, Any]) -> list[str]:
    """A caution for the price columns whose cells look like a fractional notation (`NOTATIONS`) that the map's
    price_format does not read, one per notation: CME 32nds where some cells cannot be thousands (`117'03`,
    `110-16+`) or every apostrophe-grouped cell reads as 32nds (`110'165`s alone); CBOT eighths (`450'4`), which
    are no number at all. A column of Swiss numbers (`1'234.50`, `12'345`) says nothing; price_format: decimal
    says the cells are numbers (those that are not are rejected, each reject naming the notation)."""
    if cmap.price_format == "decimal":
        return []
    return [said for notation in NOTATIONS if notation != cmap.price_format
            and (said := _notation_caution(path, cmap, facts, notation))]


def refuse_mixed_32nds(path: Path, cmap: ColumnMap, facts: Mapping[str, Any]) -> None:
    """A ValueError for a price column read without a price_format in which some cells are 32nds for sure (`110'16`,
    `110-16+`: no number grouped in thousands) and others read as numbers 1000 times too large (`110'165` as 110165):
    replayed, the run would answer on such prices with no row refused to show it (review242: exit 0 on them)."""
    if cmap.price_format is not None:
        return
    for field in PRICE_FIELDS:
        if (facts.get(f"_32_{field}_sure") or 0) and (facts.get(f"_32_{field}_thousands") or 0):
            sure, big = facts[f"_32_{field}_sure_first"], facts[f"_32_{field}_big"]
            raise ValueError(
                f"{path.name}: column {quoted(getattr(cmap, field))} holds prices in CME's 32nds of Treasury futures "
                f"({quoted(sure)} is {_decimal_of(sure)} in 32nds, and no number), and "
                f"{facts[f'_32_{field}_thousands']} of its cells would read as decimals 1000 times too large "
                f"({quoted(big)} as {_thousands(big)}): give --price-format 32nds (column-map key price_format: "
                "32nds; docs/replay.md#prices-in-32nds), or price_format: decimal if they are numbers grouped in "
                "thousands")


def _notation_caution(path: Path, cmap: ColumnMap, facts: Mapping[str, Any], notation: str) -> str:
    name, prefix = NOTATIONS[notation]
    columns, first, big, looks_total, thousands = [], None, None, 0, 0
    seen: set[str] = set()  # a column read as price, bid and ask (Bloomberg's `Value`, quote_sides) is named once
    for field in PRICE_FIELDS:
        if getattr(cmap, field) in seen:
            continue
        seen.add(getattr(cmap, field))
        looks = facts.get(f"{prefix}{field}_looks") or 0
        # an eighth (one digit after the mark) is never a number; a 32nd with an apostrophe may be thousands
        if looks and (notation == "eighths" or facts[f"_32_{field}_sure"] or looks == facts[f"_32_{field}_grouped"]):
            columns.append(f"{quoted(getattr(cmap, field))} ({looks} cells)")
            first, looks_total = first or facts[f"{prefix}{field}_first"], looks_total + looks
            if notation == "32nds" and cmap.price_format is None:  # read as a fraction, no cell is thousands
                big, thousands = big or facts[f"_32_{field}_big"], thousands + facts[f"_32_{field}_thousands"]
    if not columns:
        return ""
    read_as = f"read as {cmap.price_format}" if cmap.price_format else "read as decimals"
    if not thousands:
        read = f"they are no {'prices' if cmap.price_format else 'numbers'} (their rows rejected)"
    elif thousands == looks_total:
        read = (f"they are 1000 times too large ({quoted(big)} read as {_thousands(big)}: an apostrophe grouping "
                "thousands)")
    else:
        read = (f"{thousands} of them are 1000 times too large ({quoted(big)} read as {_thousands(big)}: an "
                f"apostrophe grouping thousands) and the others no numbers (their rows rejected)")
    # (a dash or a `+` groups no thousands: price_format: decimal is offered only where an apostrophe could)
    grouped = "; if they are numbers grouped in thousands, price_format: decimal" if thousands else ""
    value = _decimal_of(first) if notation == "32nds" else _eighths_of(first)
    return Caution(f"{path.name}: {'columns' if len(columns) > 1 else 'column'} {', '.join(columns)} "
                   f"{'hold' if len(columns) > 1 else 'holds'} prices written like {name} ({quoted(first)} is {value} "
                   f"in {notation}); {read_as}, {read}. If they are {notation}, give --price-format {notation} "
                   f"(column-map key price_format: {notation}; docs/replay.md#prices-in-32nds){grouped}")


def _thousands(cell: str) -> str:
    return f"{float(re.sub(APOSTROPHE, '', cell)):g}"


def _decimal_of(cell: str) -> str:
    if whole := re.match(WHOLE_AND_FRACTION, cell):
        sign, handle, numerator, denominator = whole.groups()
        value = int(handle) + int(numerator) / int(denominator)
        return f"{'-' if sign == '-' else ''}{value:.10g}"
    found = re.match(THIRTY_SECONDS, cell)
    if found is None:
        return "not"
    sign, handle, thirty_seconds_, fraction = found.groups()
    value = int(handle) + (int(thirty_seconds_) + PARTS[(fraction or "").strip(" ")]) / 32
    return f"{'-' if sign == '-' else ''}{value:.10g}"


def unread_price_hint(text: str | None, cmap: ColumnMap | None) -> str:
    """What a price cell that did not read says of its notation: the forms 32nds take when the map reads them,
    the option when the cell looks like 32nds and the map does not."""
    if text is None or cmap is None:
        return ""
    cell = text.strip()
    if cmap.price_format in FRACTIONAL_FORMS:
        said = f", nor a price in {FRACTIONAL_FORMS[cmap.price_format]}"
        if cmap.price_format == "32nds" and re.match(LOOKS_LIKE_EIGHTHS, cell):
            said += "; if it is a grain futures price in eighths of a cent, give --price-format eighths"
        return said
    if cmap.price_format is not None or not re.search(r"\d['\u2019-]\d|\d/\d", cell):
        return ""
    if re.match(LOOKS_LIKE_32NDS, cell):
        return "; if it is a futures price in 32nds, give --price-format 32nds (docs/replay.md#prices-in-32nds)"
    if re.match(LOOKS_LIKE_EIGHTHS, cell):
        return (f"; if it is a grain futures price in cents and eighths of a cent ({cell} is {_eighths_of(cell)}), "
                f"give --price-format eighths (docs/replay.md#prices-in-32nds)")
    # a fraction of no form read (`110-33`): the forms that are
    return (f"; --price-format reads fractional prices in {FRACTIONAL_FORMS['32nds']} or in "
            f"{FRACTIONAL_FORMS['eighths']} (docs/replay.md#prices-in-32nds)")


def _eighths_of(cell: str) -> str:
    found = re.match(EIGHTHS, cell)
    if found is None:
        return "no price in eighths: its digit after the mark is 0 to 7"
    sign, handle, eighths = found.groups()
    return f"{'-' if sign == '-' else ''}{int(handle) + int(eighths) / 8:g}"


def yield_columns(cmap: ColumnMap) -> list[str]:
    """The price, bid and ask columns whose names say they hold yields (`bid_yield`, `yld`, `YTM`)."""
    return [column for field in PRICE_FIELDS if (column := getattr(cmap, field)) is not None
            and names_a_yield(column)]


def yield_caution(path: Path, cmap: ColumnMap, crossed_rows: int = 0) -> list[str]:
    """A caution for price columns named as yields: replayed as prices, their "up" is a yield up, a price down;
    and, when the file has quotes whose bid is above the ask (``crossed_rows``), that they are rejected: never
    for a map that took the ask yield as the bid (bid=ask_yield, ask=bid_yield), whose quotes are not crossed."""
    if not (named := yield_columns(cmap)):
        return []
    quotes = (f"; a yield quote's bid is above its ask, so its quotes ({crossed_rows} here) are rejected as "
              f"crossed_quote" if crossed_rows and (cmap.bid in named or cmap.ask in named) else "")
    said = f"column {quoted(named[0])} is named as a yield" if len(named) == 1 else \
        f"columns {' and '.join(map(quoted, named))} are named as yields"
    return [Caution(f"{path.name}: {said}: replayed as prices, an answer's up means the yield went up (the bond's "
                    f"price down){quotes}. Convert yields to prices to replay prices "
                    f"(docs/replay.md#yield-quoted-instruments)")]
