"""What the built-in questions mean on a bar file, said when one is read (review307 #2, #12): a question's horizon
counts bars, and the two bucketed in bps (`volatility_50`, `move_bps_50`: connectors/questions.py) have buckets
sized for 50 ticks (vhigh above 10 bps, moves beyond +/-8 bps), which 50 one-minute bars, let alone 50 days,
outgrow on most instruments: their labels then land in the end buckets (saturated, connectors/saturation.py) and
their answers say little. Said up front, with the file's bar spacing, so that a bar user asks the direction
questions of bars; docs/replay.md ("Bars and the built-in questions") says what else can be done.
"""

from __future__ import annotations

from dataclasses import replace

from connectors.bar_lengths import shown_length
from connectors.bar_stamps import spacing_ns
from connectors.durations import duration_text
from connectors.file_plan import FilePlan
from connectors.questions import DEFAULT_QUESTIONS

DIRECTIONS = tuple(spec.name for spec in DEFAULT_QUESTIONS if spec.kind == "direction")
DAY = 86400 * 10**9
BPS_QUESTIONS = tuple(spec for spec in DEFAULT_QUESTIONS if spec.kind in ("move", "volatility"))


def with_bar_questions_note(plan: FilePlan) -> FilePlan:
    """A bar file's plan with the note on what the built-in questions mean at its spacing; others as they are."""
    if not plan.bars or (spacing := spacing_ns(plan)) is None:
        return plan
    horizons = ", ".join(f"{spec.name} {spec.horizon} bars ({horizon_span(spec.horizon, spacing)})"
                         for spec in DEFAULT_QUESTIONS if spec.horizon >= 1)
    edges = "; ".join(f"{spec.name}'s outer buckets beyond {spec.edges[-1]:g} bps" for spec in BPS_QUESTIONS)
    return replace(plan, notes=(*plan.notes, (
        f"{plan.path.name}: its bars are {shown_length(spacing)} apart (the median step): a question's horizon "
        f"counts bars ({horizons}). {' and '.join(spec.name for spec in BPS_QUESTIONS)} are "
        f"bucketed in bps sized for ticks ({edges}), which so many bars outgrow on most instruments: expect them "
        f"saturated; {' and '.join(DIRECTIONS)} ask a sign and read at any spacing. The built-in model was trained "
        f"on ticks, never on bars (docs/replay.md, \"Bars and the built-in questions\")")))


def horizon_span(count: int, spacing: int) -> str:
    """What ``count`` rows ``spacing`` ns apart (a stream's ordinary spacing) span, as the bar reader's note and
    the backtest's note on a sampled series both say it: a daily series' in trading days (its weekends and
    holidays are no rows, so 20 daily rows are about four weeks, not 20 calendar days), others about the time."""
    return f"{count} trading days" if spacing == DAY else f"about {duration_text(count * spacing)}"
