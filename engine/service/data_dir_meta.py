"""A data directory's record of what its logs were written with, checked at every start, in two files:

    DATA_DIR/meta.json          what makes the logged tokens the ticks they are: the model, its weights' fingerprint,
                                the codec (a text codec's tokenizer and encoding), the ingest price offset. A start
                                with another of them is refused: its sessions and answers belong to that one.
    DATA_DIR/written_with.json  what only moves the numbers computed from those tokens (model.dtype, the linears'
                                format, the answer-changing settings), noted when a start changes one, and the
                                release that last opened the directory (`flashtick` version and commit).

Two files because every release before 0.2.0 compares each key of meta.json with its own and refuses the directory
for a key it does not write (review321 #3: one start of a later release added `dtype`, `linear_weights` and
`settings` to meta.json, and a rollback to the release before was refused as "another model"). meta.json keeps the
keys those releases write (`model`, `codec`, `weights`; `tokenizer`, `text_encoding` for a text model) and
`ingest_price_offset`, which a release that cannot take it must refuse; the rest lives beside it, which they ignore.
A directory whose meta.json holds the moved keys (written by 0.1.0 builds after 2026-12-04) has them moved out at
its next start, so that every earlier release opens it again.
"""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path
from typing import Any

from engine.service.answer_settings import ANSWER_SETTINGS, RESOLVED_AT_START, settings_changed, shown
from engine.service.config import ConfigError
from engine.service.model_digest import MODEL_DIGEST, files_changed
from engine.service.private_dirs import private
from engine.service.release import recorded_release, this_release
from engine.text_files import ENCODING, read_text
from engine.quoting import quoted

WRITTEN_WITH = "written_with.json"  # beside meta.json
RELEASE = "release"  # written_with.json's record of the release that last opened the directory
# meta.json's keys: those every release compares (see the module's docstring) and the price offset
META_KEYS = frozenset({"model", "codec", "weights", "tokenizer", "text_encoding", "ingest_price_offset"})

# What a change of a meta.json key means, said when a restart is refused for it (the others name themselves)
_META_CHANGES = {"text_encoding": "the same ticks now encode to other tokens: this flashtick writes or tokenizes a "
                                  "tick's line otherwise than the one that wrote the directory (the encoding before "
                                  "the colon, e.g. a SentencePiece tokenizer's lines as continuations; the digest "
                                  "after it covers number formatting), so replaying its logged ticks would build "
                                  "other sessions than its live run had",
                "ingest_price_offset": "its logged ticks hold prices shifted at ingest by the model's training "
                                       "--price-offset, `health`'s ingest_price_offset: under another offset its "
                                       "sessions and `ticklog export` would read them at other levels"}

# keys a restart may change, said at the start rather than refused: the logged ticks replay into the same tokens and
# sessions, only the numbers computed from them differ (an operator comparing answers across the restart must know
# why they do); the change is recorded, so the next start says nothing. Key -> (config key, what differs)
_META_NOTED = {"dtype": ("model.dtype", "that precision's rounding"),
               "linear_weights": ("model.weights", "the linears' rounding (their weight format, engine/models/"
                                                   "linear.py)")}
SETTINGS = "settings"  # answer_settings.ANSWER_SETTINGS, noted a key at a time as _META_NOTED's are


def read_record(meta: Path) -> dict[str, Any]:
    """meta.json and written_with.json beside it as one record (what a start compares; {} for neither). A moved key
    still in meta.json was written there by a release before 0.2.0 after this one recorded its own, so it wins, and
    the release recorded is not the last one that opened the directory."""
    side = meta.with_name(WRITTEN_WITH)
    record = _read_side(side) if side.is_file() else {}
    keys = _read_meta(meta) if meta.is_file() else {}
    if set(keys) - META_KEYS:  # (and so the release recorded beside it is no longer the last that opened it)
        record.pop(RELEASE, None)
    return record | keys


def _read_meta(meta: Path) -> dict[str, Any]:
    """meta.json's keys; a damaged one (empty or cut: what a host crash leaves on a filesystem that journals no
    data) refuses the start naming it and the ways on (review392 #8: the JSON parser's bare message, no file)."""
    try:
        keys = json.loads(read_text(meta))
    except (ValueError, UnicodeDecodeError) as e:  # (JSONDecodeError is a ValueError)
        keys = e
    if isinstance(keys, dict):
        return keys
    what = f"{type(keys).__name__}: {keys}" if isinstance(keys, Exception) else f"a JSON {type(keys).__name__}"
    raise ConfigError(f"data directory {meta.parent}: {meta.name} is damaged ({what}, {meta.stat().st_size} bytes; "
                      f"a host crash can leave it empty or cut). It records the model, weights and codec that wrote "
                      f"the logged ticks, so a start checks them against its own. Restore it from a backup, or, "
                      f"when this start's model is the one that wrote the directory, write {{}} in it (not delete "
                      f"it: a folder without one is taken for the user's own): this start records its own and "
                      f"replays the logged ticks with them unchecked")


def _read_side(side: Path) -> dict[str, Any]:
    """written_with.json's keys; a damaged one is said and read as empty: it only records what moves the numbers
    and the release that last opened the directory, which this start writes again."""
    try:
        record = json.loads(read_text(side))
    except (ValueError, UnicodeDecodeError) as e:
        record = e
    if isinstance(record, dict):
        return record
    _say(f"data directory {side.parent}: {side.name} is damaged ({record}); it only records the release that last "
         f"opened the directory and the settings its answers were computed under: written again now, changes of "
         f"model.dtype, model.weights or answer settings since the last start not said")
    return {}


def check_meta(path: Path, written_by: dict[str, Any]) -> str | None:
    """Refuses (ConfigError) a data directory whose meta.json (``path``) names another model, weights or codec than
    ``written_by`` (log_provenance.written_by); notes a change of what only moves the numbers, and of the release;
    then records ``written_by`` and this release in the two files. Returns what changed in the model's files
    (model_changed) when their full digest differs from the one recorded, else None: the caller starts a new epoch."""
    now = written_by | {RELEASE: this_release().record()}
    if not path.is_file():
        _write(path, now)
        return None
    before = read_record(path)
    # a key the directory lacks was added by a later version: recorded now, not a difference
    changes = [k for k in sorted(set(before) | set(written_by)) if k in before and k != RELEASE
               and before[k] != written_by.get(k)]
    noted = [k for k in changes if (k in _META_NOTED or k in (SETTINGS, MODEL_DIGEST)) and k in written_by]
    if differ := [k for k in changes if k not in noted]:
        _refuse(path, before, written_by, differ)
    model_change = model_changed(before.get(MODEL_DIGEST), written_by[MODEL_DIGEST]) if MODEL_DIGEST in noted else None
    for setting, then, value, differ_by in _noted_changes(before, written_by, noted):
        _say(f"data directory {path.parent}: its logged answers were computed under {setting} {shown(then)}, this "
             f"start computes under {shown(value)}: answers after the restart (those it owes included) may differ "
             f"from the logged ones by {differ_by}")
    if "linear_weights" in written_by and "linear_weights" not in before:  # (review321 #9)
        _say(f"data directory {path.parent} was written by {recorded_release(before.get(RELEASE))}, which did not "
             f"record the format its linears computed in: answers after the restart (those it owes included) may "
             f"differ from the ones it published at float rounding (this start computes under model.weights "
             f"{written_by['linear_weights']}, which is recorded now)")
    if before.get(RELEASE) != now[RELEASE]:
        _say(f"data directory {path.parent} was last opened by {recorded_release(before.get(RELEASE))}; this is "
             f"flashtick {this_release()}, which records it now (docs/upgrading.md: what carries over, and rolling "
             f"back)")
    if "text_encoding" in written_by and "text_encoding" not in before:
        _say(f"data directory {path.parent} does not say how its text codec encoded ticks (written before meta.json "
             f"recorded text_encoding): its logged ticks are taken as encoded the way this flashtick encodes them "
             f"({written_by['text_encoding']}), which is recorded now. A directory written before the text codec "
             f"wrote SentencePiece lines as continuations and floats without exponents (docs/model.md) may replay "
             f"into other tokens than its live run had: start it over on a fresh --data-dir if so")
    _write(path, before | now | _resolved_kept(before, written_by))
    return model_change


def model_changed(then: Any, now: dict[str, Any]) -> str:
    """What differs in the model's files between the digest a data directory recorded (ModelDigest.record, or
    something damaged) and this start's, in words: `health`'s `model_changed` and the start's note say it."""
    if not isinstance(then, dict) or not isinstance(then.get("files"), dict):
        return f"model files now {now['digest'][:16]} (the recorded digest is unreadable)"
    return (f"model files {str(then.get('digest'))[:16]} -> {now['digest'][:16]}: "
            f"{'; '.join(files_changed(then['files'], now['files']))}")


def _refuse(path: Path, before: dict[str, Any], written_by: dict[str, Any], differ: list[str]) -> None:
    changed = ", ".join(f"{k}: {quoted(before.get(k))} -> {quoted(written_by.get(k))}" for k in differ)
    why = "".join(f" ({k}: {_META_CHANGES[k]})" for k in differ if k in _META_CHANGES)
    raise ConfigError(f"data directory {path.parent} was written by another model, weights or codec ({changed})"
                      f"{why}; its sessions and answers belong to that one. Use another --data-dir, move this one "
                      f"away, or restart with what wrote it. To carry its ticks over to this model: `flashtick "
                      f"ticklog export {path.parent} --out ticks.parquet`, then `flashtick feed replay "
                      f"ticks.parquet` into this service on another --data-dir (docs/durability.md, Reading the "
                      f"tick log back)")


def _noted_changes(before: dict[str, Any], written_by: dict[str, Any],
                   noted: list[str]) -> list[tuple[str, Any, Any, str]]:
    """(config key, value then, value now, what answers differ by) of each noted change; the dtype's note covers the
    linears' format it brings: one cause, one line."""
    said = [(_META_NOTED[k][0], before[k], written_by[k], _META_NOTED[k][1])
            for k in noted if k in _META_NOTED and not (k == "linear_weights" and "dtype" in noted)]
    if SETTINGS in noted:
        said += [(key, then, now, ANSWER_SETTINGS[key])
                 for key, then, now in settings_changed(before[SETTINGS], written_by[SETTINGS])]
    return said


def _resolved_kept(before: dict[str, Any], written_by: dict[str, Any]) -> dict[str, Any]:
    """The settings as rewritten: a setting resolved where the engine runs (RESOLVED_AT_START) that this start
    writes unresolved (null: a sharded front door before its shards said theirs) keeps the value recorded, so a
    rewrite for another key never erases it ({} when there are no settings to merge)."""
    if not isinstance(before.get(SETTINGS), dict) or SETTINGS not in written_by:
        return {}
    kept = {key: before[SETTINGS][key] for key in RESOLVED_AT_START
            if written_by[SETTINGS].get(key, 0) is None and before[SETTINGS].get(key) is not None}
    return {SETTINGS: written_by[SETTINGS] | kept}


def _write(path: Path, record: dict[str, Any]) -> None:
    """``record`` split into meta.json (META_KEYS) and written_with.json (the rest), each rewritten only when it
    changed; written_with.json first, so meta.json never lacks a moved key that is nowhere else."""
    for target, part in ((path.with_name(WRITTEN_WITH), {k: v for k, v in record.items() if k not in META_KEYS}),
                         (path, {k: v for k, v in record.items() if k in META_KEYS})):
        text = json.dumps(part, indent=2) + "\n"
        if target.is_dir():  # (said as the part in the way: data_dir_open.unusable_part)
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(target))
        if target.is_file() and read_text(target) == text:
            continue
        temporary = target.with_name(target.name + ".tmp")
        with open(temporary, "w", encoding=ENCODING, opener=private) as f:
            f.write(text)
        temporary.replace(target)  # (a start killed mid-write leaves the old file whole)


def _say(line: str) -> None:
    print(f"flashtick: note: {line}", file=sys.stderr, flush=True)

