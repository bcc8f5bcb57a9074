"""ENTSO-E's bidding zones as streams: the older export names its zone in a header (`BZN|DE-LU`, its cells empty),
the newer one in an `Area` column whose cells write it alike; both replay as the zone, `DE-LU`, so that one zone is
one stream whichever layout reached the file, and a name pasted into --streams or --price-offset holds no `|`, which
joins several offsets (verify55 R1)."""

from __future__ import annotations

import re

import polars as pl

BIDDING_ZONE = re.compile(r"^BZN\|\s*([^\s/|][^/|]*?)\s*$")  # the zone after its area type


def zone_of_area(cells: pl.Expr) -> pl.Expr:
    """A column of stream names with each ENTSO-E area's type left out (`BZN|DE-LU` -> `DE-LU`); others as they are."""
    return cells.str.replace(BIDDING_ZONE.pattern, "${1}")
