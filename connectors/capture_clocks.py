"""Captures of one market split over files read on two clocks: a file stamped with the receive time its lines begin
with (hftbacktest's `RECV_NS {json}`; a Binance spot bookTicker capture, which has no other time) beside a file of
the same capture stamped with the exchange's own time while its lines hold the receive time too. A collector's clock
is off the exchange's by more than the network's delay (1.27 s in the shared BTCUSDT capture), so merged by time each
quote lands that far from the trades it came with: a look-ahead in a backtest, said as a caution naming the option
that puts every file on the receive clock.
"""

from __future__ import annotations

from typing import Any, Sequence

from connectors import json_lines
from connectors.cautions import Caution
from connectors.exchange_shapes import lead_said
from connectors.file_plan import FilePlan
from connectors.json_objects import RECEIVED
from connectors.stream_selection import shown
from engine.quoting import quoted


def two_clocks(plans: Sequence[Any], spans: Sequence[dict[str, tuple[int, int]]]) -> list[str]:
    """A caution per pair of captures of one stream (`spans`: each plan's streams, connectors/file_overlaps.py's
    `time_spans`) where one is stamped with its lines' receive time and the other, holding that time too, with the
    exchange's."""
    received, exchange = [], []
    for plan, plan_spans in zip(plans, spans):
        if not isinstance(plan, FilePlan) or RECEIVED not in plan.schema or not json_lines.is_json_lines(plan.path):
            continue
        (received if plan.columns.ts == RECEIVED else exchange).append((plan, set(plan_spans)))
    notes = []
    for plan, streams in exchange:
        for other, other_streams in received:
            if common := sorted(streams & other_streams):
                notes.append(_caution(plan, other, common))
    return notes


def _caution(plan: FilePlan, other: FilePlan, streams: list[str]) -> Caution:
    shape = json_lines.table(plan.path).shape
    lead = shape.exchange_lead_ms if shape is not None and shape.columns is not None and \
        shape.columns.ts == plan.columns.ts else None
    by = "" if lead is None else f", which runs {lead_said(lead)} its receive time (median)"
    named = f"stream {streams[0]}" if len(streams) == 1 else f"streams {shown(streams)} ({len(streams)})"
    return Caution(f"{named} read on two clocks: {plan.given_name} stamped with the exchange's time "
                   f"{quoted(plan.columns.ts)}{by}, {other.given_name} with the receive time its lines begin with "
                   f"({quoted(RECEIVED)}), which {plan.given_name} holds too: merged by time, ticks that came together "
                   f"land that far apart (a look-ahead in a backtest); --columns "
                   f"ts={RECEIVED} reads every file on the receive clock, the one they share")
