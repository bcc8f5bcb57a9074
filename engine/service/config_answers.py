"""The `answers` section of the service config: what is published (adapted or the model's own answer) and the
pause in a stream's event times past which an answer gets no realised label.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.quoting import quoted_choices
from engine.service.config_error import ConfigError
from queries.limits import excerpt  # values as YAML writes them: got true, got null (not True, None)

ADAPT_MODES = ("online", "off")


@dataclass(frozen=True)
class AnswersSection:
    # online: a named tick question's answers (direction, volatility, move) are mixed, per stream and query, with
    # that stream's own realised class frequencies (queries/adapt.py), which is what is published, with the
    # model's own distribution beside it (`model_probs`); off: the model's answer is published as it is
    adapt: str | bool = "online"  # a bool only as YAML 1.1 reads a bare off / on: made "off" / "online" below
    # an answer whose label horizon crosses a pause in its stream's event times this long or longer (a weekend, a
    # night, a halt) gets no realised label: live scores, the adaptation and backtest scores leave it out
    # (backtest --session-gap); None: a horizon counts ticks whatever time passes between them
    session_gap_s: float | None = None

    def __post_init__(self) -> None:
        if isinstance(self.adapt, bool):  # YAML 1.1 reads a bare `off` (and `on`) as a boolean
            object.__setattr__(self, "adapt", "online" if self.adapt else "off")
        if self.adapt not in ADAPT_MODES:
            raise ConfigError(f"answers.adapt must be one of {quoted_choices(ADAPT_MODES)}, got {excerpt(self.adapt)}")
        gap = self.session_gap_s
        if gap is not None and (isinstance(gap, bool) or not isinstance(gap, (int, float)) or not 0 < gap < math.inf):
            raise ConfigError(f"answers.session_gap_s must be a number of seconds > 0 (or null: off), got "
                              f"{excerpt(gap)}")

    @property
    def session_gap_ns(self) -> int | None:
        return None if self.session_gap_s is None else int(round(self.session_gap_s * 1e9))
