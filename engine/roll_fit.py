"""Whether a session's roll fits its window, and the scheduler settings that make a window of a given size fit.

Apart from engine/settings.py (which takes its defaults from here) so that a refusal in engine/models/config.py
(a Qwen2 sliding window) can name settings that work without the model config importing the scheduler's.
"""

from __future__ import annotations

DEFAULT_KEEP_FRACTION = 0.5  # SchedulerConfig.keep_fraction's default
DEFAULT_PROBE_RESERVE = 64  # SchedulerConfig.probe_reserve's default
SMALL_WINDOW_KEEP = 0.25  # the keep_fraction advised for a window the default roll does not fit


def roll_fits(window: int, sink: int, keep_fraction: float, probe_reserve: int) -> bool:
    """Whether a session's roll fits a window of ``window`` positions: the sink, the kept tokens and
    probe_reserve below it (engine/context_rolls.py ContextWindow.fit refuses a window where they do not)."""
    return sink + int(window * keep_fraction) + probe_reserve < window


def settings_for_window(window: int, sink: int = 0, probe_reserve: int = DEFAULT_PROBE_RESERVE,
                        keep_fraction: float = DEFAULT_KEEP_FRACTION) -> str | None:
    """The scheduler keys, as a config's YAML writes them, with which a roll fits a window of ``window`` positions: the
    window alone where ``keep_fraction`` (the config's, else the default) does, else a quarter kept and a
    probe_reserve of at most half of what the sink leaves; None where no such settings fit (a sink of most of the
    window)."""
    if roll_fits(window, sink, keep_fraction, probe_reserve):
        return f"scheduler: {{window: {window}}}"
    reserve = min(probe_reserve, (window - sink) // 2)
    if reserve <= 0 or not roll_fits(window, sink, SMALL_WINDOW_KEEP, reserve):
        return None
    return f"scheduler: {{window: {window}, probe_reserve: {reserve}, keep_fraction: {SMALL_WINDOW_KEEP}}}"
