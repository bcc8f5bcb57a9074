"""The config keys that change the numbers published from the same ticks, past the model, its weights and codec
(meta.json refuses a change of those) and its precision (model.dtype, model.weights: meta.json's own `dtype` and
`linear_weights`, noted by data_dir_open). One list: `serve` records them in its data directory's meta.json and a
restart under other values says each; a backtest's resume key and its provenance record hold them.

Left out, as how fast rather than what: model.threads (the last float bits, said by a backtest resume), the budgets
(kv.*, scheduler.max_batch_tokens, ...: which forward computes a tick, not its answer)."""

from __future__ import annotations

from typing import Any

from engine.service.config import ServiceConfig

_ROLLS = "where sessions roll and how much context an answer sees (the logged ticks rebuild them under the new value)"

# dotted config key -> what answers computed under another value differ by (the end of the restart's note)
ANSWER_SETTINGS: dict[str, str] = {
    "answers.adapt": "the adaptation: whether the published probs mix in each stream's realised class frequencies",
    "answers.session_gap_s": "the realised labels the adaptation learns from (a horizon across a longer pause has "
                             "none)",
    "scheduler.window": _ROLLS,
    "scheduler.keep_fraction": _ROLLS,
    "scheduler.sink_tokens": _ROLLS,
    "scheduler.probe_reserve": _ROLLS,
    "model.device": "the device's kernels' rounding",
}


def answer_settings(config: ServiceConfig) -> dict[str, Any]:
    """Each of ANSWER_SETTINGS with its value in `config` (JSON values: a tuple as a list)."""
    values = {}
    for key in ANSWER_SETTINGS:
        section, name = key.split(".")
        value = getattr(getattr(config, section), name)
        values[key] = list(value) if isinstance(value, tuple) else value
    return values


def shown(value: Any) -> str:
    """A setting's value as its YAML reads: null for None."""
    return "null" if value is None else str(value)


# settings whose null is resolved where the engine runs (scheduler.window: the model's positions, capped to the
# pool): a data directory records the value resolved, so `null` and the number it resolves to are no change; a null
# recorded unresolved (an older flashtick; a sharded front door, which holds no engine) is compared with nothing
RESOLVED_AT_START = frozenset({"scheduler.window"})


def settings_changed(before: dict[str, Any], now: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(key, value then, value now) of each setting both record with another value (a key one lacks was added by
    a later flashtick: recorded now, not a change; nor is an unresolved null of RESOLVED_AT_START's)."""
    return [(key, before[key], now[key]) for key in now if key in before and before[key] != now[key]
            and not (key in RESOLVED_AT_START and None in (before[key], now[key]))]
