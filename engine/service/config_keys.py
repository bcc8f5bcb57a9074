"""A config section's keys and values as the file writes them, checked by the loader (engine/service/config.py):
an unknown key refused by name with the nearest spelling, a value of the wrong YAML type named with the type wanted
(and why YAML read it so: `1e9` is text to YAML 1.1).
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import Callable
from typing import Any

from engine.quoting import quoted
from engine.service.config_error import ConfigError, keyed
from engine.service.config_limits import MAX_LIMIT
from engine.stream_patterns import did_you_mean
from engine.yaml_files import yaml_kind
from queries.limits import excerpt  # values as YAML writes them: got true, got null (not True, None)

_TYPE_WORDS = {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false",
               "dict": "a mapping", "None": "null", "tuple[int, ...]": "a list of integers",
               "tuple[str, ...]": "a list of strings"}


def _fits(value: Any, kind: str) -> bool:
    if kind in ("int", "float") and isinstance(value, bool):
        return False
    if kind.startswith("tuple["):
        item = kind[len("tuple["):].split(",")[0]
        return isinstance(value, tuple) and all(_fits(v, item) for v in value)
    types = {"int": int, "float": (int, float), "str": str, "bool": bool, "dict": dict, "None": type(None)}
    return kind not in types or isinstance(value, types[kind])


def check_types(values: dict, section_type: type, where: str) -> None:
    """Each key's value against its field's annotation (`int | None`, `tuple[str, ...]`, ...), so `heartbeat_s:
    fast` or `cells: "4096"` is refused by name here, not met as a TypeError deep in the service."""
    annotations = {f.name: str(f.type) for f in dataclasses.fields(section_type)}
    for key, value in values.items():
        kinds = [k.strip() for k in annotations[key].split("|")]
        if any(k.startswith("Literal[") for k in kinds) or any(_fits(value, k) for k in kinds):
            continue
        if isinstance(value, datetime.date) and "str" in kinds:  # YAML reads 2024-03-01 as a date; the section
            continue                                             # turns it back into text
        wanted = " or ".join(_TYPE_WORDS.get(k, k) for k in kinds)
        hint = ""
        if isinstance(value, str) and EXPONENT_AS_TEXT.match(value.strip()) and float(value).is_integer() \
                and abs(float(value)) < MAX_LIMIT:
            # PyYAML (YAML 1.1) reads a float only with a dot and a signed exponent: 1e9 and 1.5e9 are text
            hint = f" (YAML reads {value} as text: write {int(float(value))}, or drop the quotes if it is quoted)"
        elif isinstance(value, str) and EXPONENT_AS_TEXT.match(value.strip()):
            hint = f" (YAML reads {value} as text: write {quoted(float(value))}, or drop the quotes if it is quoted)"
        elif isinstance(value, str) and _fits(_number(value), kinds[0]):
            hint = " (quoted in the YAML: drop the quotes)"
        raise ConfigError(f"{where}.{key} must be {wanted}, got {excerpt(value)}{hint}")


EXPONENT_AS_TEXT = re.compile(r"^[-+]?\d+(\.\d*)?[eE][-+]?\d+$")  # a number YAML 1.1 may read as text


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return None


def built_section(name: str, section_type: type, value: Any, source: str,
                  check: Callable[[dict[str, Any]], None] | None = None) -> Any:
    """Section ``name`` of a config document (``value``) as its dataclass, each refusal a ConfigError naming the key,
    after ``source``: a mapping, no unknown key, ``check`` (the section's checks across its keys), the dataclass's
    own checks, each value of its field's type."""
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: section {quoted(name)} must be a mapping, got {yaml_kind(value)}")
    reject_unknown(value, {f.name for f in dataclasses.fields(section_type)}, source, f"section {quoted(name)}")
    if check is not None:
        check(value)
    value = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items()}
    # a quoted number is refused by its type first, with the hint to drop the quotes, for every numeric key alike:
    # the section's own checks name the range wanted, not why "1" is not 1 (review442 #1: model.threads)
    quoted_numbers = {k: v for k, v in value.items() if isinstance(v, str) and _number(v.strip()) is not None}
    if quoted_numbers:  # unquoted, would it pass the section's own checks? if not, say their range as well
        try:
            section_type(**{**value, **{k: _number(v.strip()) for k, v in quoted_numbers.items()}})
        except ValueError as e:  # (`threads: "0"`: dropping the quotes alone would meet a second refusal)
            if any(key in str(e) for key in quoted_numbers):
                raise ConfigError(f"{source}: {keyed(name, section_type, str(e))} (and quoted in the YAML: a "
                                  f"number is written without quotes)") from None
        except TypeError:  # (another key's wrong type: named below)
            pass
    check_types(quoted_numbers, section_type, f"{source}: {name}")
    try:  # the section's own checks speak first; a wrong type they let through is named after them
        section = section_type(**value)
    except ValueError as e:
        raise ConfigError(f"{source}: {keyed(name, section_type, str(e))}") from None
    except TypeError as e:  # a comparison or sum on a wrong type, most likely
        check_types(value, section_type, f"{source}: {name}")
        raise ConfigError(f"{source}: {name}: {e}") from None
    check_types(value, section_type, f"{source}: {name}")
    return section


def reject_unknown(raw: dict, allowed: Any, source: str, where: str) -> None:
    unknown = [k for k in raw if k not in allowed]
    if not unknown:
        return
    # (here, not at the top: a client command reading --config's endpoints never meets a column map's key, and the
    # column map's modules are a tenth of a second of its start: config_document.py)
    from connectors.column_map import MAP_KEYS, inline_spelling

    key = unknown[0]
    # the nearest key of this level first: `replay: {stream: [...]}` is a typo of `streams`, not a column map's key
    hint = did_you_mean([str(key)], [str(k) for k in allowed])
    if where == "section \"replay\"" and key in MAP_KEYS:  # replay.hours or replay.price_format: a column map's key
        example = f"replay: {{columns: {{{key}: ...}}}}"
        hint += f" (as a column map's key, {quoted(key)} goes under replay.columns: {example})" if hint else \
            f"; {quoted(key)} is a column map's key: give it under replay.columns ({example})"
    if where == "replay.columns":
        hint += inline_spelling([str(key)])
    raise ConfigError(f"{source}: unknown key {quoted(key)} in {where} (allowed: {', '.join(sorted(allowed))}){hint}")
