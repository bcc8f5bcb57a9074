"""Why a backtest's checkpoint (answer_parts.py) is not resumed, in words a user can act on: a manifest damaged (a
field missing or of another type), or a run key that differs from this run's: files added, removed, reordered,
edited or read another way, queries, config settings or options, each named as the command line names it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from connectors.labels import session_gap_text
from connectors.shell_words import shell_word
from engine.quoting import quoted
from engine.service.answer_settings import settings_changed
from engine.service.model_digest import files_changed
from engine.service.release import recorded_release, same_release, this_release

KEY_WORDS = {  # what each part of a run's key stands for, in the words of the command line
    "files": "files, or ways of reading them (a column map, --preset, --tz, --date, --ts-unit)",
    "file_sizes_and_times": "file contents (sizes or modification times)",
    "file_contents": "file contents (their bytes, docs/replay.md)",
    "queries": "queries (--queries)", "model": "model files (--model)",
    "config": "config (--model, --config: the model or engine settings)",
    "batch_ms": "--batch-ms", "max_ticks": "--max-ticks", "context_roll_rule": "context roll rule",
    "session_gap_ns": "--session-gap (answers.session_gap_s)"}
# a file map's keys that are options of their own on the command line (the others come from --columns or --preset)
MAP_OPTIONS = {"tz": "--tz", "date": "--date", "ts_unit": "--ts-unit", "ts_format": "--ts-format",
               "names": "--csv-names", "price_offset": "--price-offset", "price_format": "--price-format",
               "zero_bid": "--zero-bid",
               "hours": "--hours", "preset": "--preset", "streams": "--streams", "from": "--from", "to": "--to"}
FILES_KEYS = {"files", "file_sizes_and_times", "file_contents"}  # said together by _files_differ
# keys a checkpoint written by an older flashtick may lack: it is resumed unchecked on them, as it was written
LATER_KEYS = {"file_contents", "settings", "config_values"}
# Engine settings the 0.1.0 builds lacked, which this release's config digest covers with their defaults: a
# checkpoint of one of them (no release, no config_values recorded) differs in `config` with the same config file or
# none (review321 #4). Those of every 0.1.0 build; and those the 2026-12-04 build lacked too (its key has no settings)
KEYS_SINCE_0_1_0 = ("limits.max_new_streams_per_message", "limits.max_new_streams_per_s",
                    "scheduler.roll_inside_forward")
KEYS_SINCE_2026_12_04 = ("model.kernel_cache", "limits.control_queue_bytes", "answers.session_gap_s")
SHOWN_FILES = 5  # files named in a refusal; the rest counted

# what a manifest must hold to be resumed: each field's type and, for the refusal, what it is in words
MANIFEST_FIELDS: dict[str, tuple[type, str]] = {
    "key": (dict, "the run's files, queries and options"), "consumed": (int, "the ticks its parts cover"),
    "parts": (list, "the names of its part files"), "answers": (int, "the answers in them"),
    "last_seq": (dict, "each topic's last seq")}
TYPE_WORDS = {dict: "a JSON object", int: "a whole number >= 0", list: "a list of file names"}


def manifest_damage(manifest: Any) -> str | None:
    """What makes a manifest read as JSON unusable, in words (a field missing, or of another type); None if whole."""
    if not isinstance(manifest, dict):
        return f"it holds {type(manifest).__name__}, not a JSON object"
    for name, (kind, what) in MANIFEST_FIELDS.items():
        if name not in manifest:
            return f"it has no {quoted(name)} field ({what})"
        value = manifest[name]
        fits = isinstance(value, kind) and not isinstance(value, bool) and (kind is not int or value >= 0) and (
            kind is not list or all(isinstance(part, str) for part in value))
        if not fits:
            return f"its {quoted(name)} field ({what}) is {json.dumps(value)[:60]}, not {TYPE_WORDS[kind]}"
    written = manifest.get("written")  # (a manifest from before the answers file was whole has none)
    if written is not None and not (isinstance(written, dict) and all(
            type(written.get(k)) is int for k in ("rows", "size", "mtime_ns"))):
        return f"its 'written' field (the answers file's rows, size and time) is {json.dumps(written)[:60]}"
    return None


def refuse_changed_key(directory: Path, manifest: dict[str, Any], key: dict[str, Any], readings: list | None) -> None:
    """Raises ValueError, naming what differs, when the checkpoint ``manifest`` in ``directory`` was written by a run
    with another key than ``key`` (``readings``: how this run reads each file, FileReplay.readings). A checkpoint of
    another release is told so, with the way forward that works: start over, or finish it with that release."""
    before = manifest.get("key", {})
    if _sampled_digests(before.get("file_contents")):  # (not comparable with whole-file SHA-256s: as if unrecorded)
        before = {k: v for k, v in before.items() if k != "file_contents"}
    changed = [k for k in key if before.get(k) != as_json(key[k]) and (k in before or k not in LATER_KEYS)]
    if not changed:
        return
    upgrade = " (written by a flashtick that rolled sessions elsewhere)" if "context_roll_rule" in changed else ""
    files = FILES_KEYS & set(changed)
    said = _files_differ(manifest, key, as_json(readings or [])) if files else []
    if {"settings", "config_values"} & set(changed):  # (the config's parts: said in its words, each key named)
        changed = [k for k in changed if k not in ("settings", "config_values")] + (
            [] if "config" in changed else ["config"])
    # another release's own settings or rolls differ from any config the user can give now: said as the release's
    other = not same_release(manifest.get("release")) and bool({"config", "context_roll_rule"} & set(changed))
    named = ", ".join(said + [_config_words(before, key, other) if k == "config" else
                              _model_words(before.get(k), key[k]) if k == "model" else
                              KEY_WORDS.get(k, k) + _key_values(before.get(k), key[k], k)
                              for k in changed if k not in files])
    if other:
        raise ValueError(_other_release(directory, manifest, named))
    if "model" in changed:  # (review349 #1: one answers file never holds two models' answers)
        raise ValueError(f"{directory} was written by a backtest with different {named}{upgrade}; its answers so far "
                         f"came from the model's files as they were then, and the rest would come from these. Resume "
                         f"with the model files it was made with, or start over: delete {directory} and run the "
                         f"command again without --resume")
    raise ValueError(f"{directory} was written by a backtest with different {named}{upgrade}; "
                     f"resume with the same files, queries, config and options, or delete it to start over")


def _config_words(before: dict[str, Any], key: dict[str, Any], other_release: bool) -> str:
    """The config's part of a refusal: each key that differs, then and now, where the checkpoint recorded them;
    else the answer-changing settings that differ, and for a checkpoint of a release before 0.2.0, the settings it
    did not have (whose defaults alone move the digest)."""
    then, now = before.get("config_values"), as_json(key.get("config_values") or {})
    if isinstance(then, dict) and now:
        differ = [(k, then.get(k), now.get(k)) for k in sorted(set(then) | set(now)) if then.get(k) != now.get(k)]
        shown = "; ".join(f"{k} {_then_now(a, b)}" for k, a, b in differ[:SHOWN_FILES])
        more = f"; and {len(differ) - SHOWN_FILES} more" if len(differ) > SHOWN_FILES else ""
        what = "engine settings" if other_release else KEY_WORDS["config"]
        return f"{what} ({shown}{more})" if differ else what
    if not other_release:
        return KEY_WORDS["config"] + _settings_differ(before, key)
    lacked = KEYS_SINCE_0_1_0 + (() if "settings" in before else KEYS_SINCE_2026_12_04)
    had = ", ".join(f"{k} {json.dumps(now[k])}" for k in lacked if k in now)
    return (f"engine settings{_settings_differ(before, key)} (its config digest covers the settings of that release; "
            f"this one has settings it had not, which the digest takes at their defaults even with the same --config "
            f"or none: {had})")


def _sampled_digests(contents: Any) -> bool:
    """Whether a checkpoint's `file_contents` holds the 16-digit digests a flashtick before review349 took (of a
    file's first 64 MiB and blocks past it), which a whole file's SHA-256 cannot be compared with."""
    return isinstance(contents, list) and any(isinstance(row, list) and len(row) == 2 and isinstance(row[1], str)
                                              and len(row[1]) == 16 for row in contents)


def _model_words(then: Any, now: dict[str, Any]) -> str:
    """The model's part of a refusal: the files that differ, or that the checkpoint recorded no digest of them."""
    if not isinstance(then, dict) or not isinstance(then.get("files"), dict):
        return (f"{KEY_WORDS['model']} (the checkpoint records no digest of them: written by a flashtick that "
                f"fingerprinted only part of the weights, so it cannot show these are the files its answers came from)")
    return f"{KEY_WORDS['model']} ({'; '.join(files_changed(then['files'], now['files']))})"


def _other_release(directory: Path, manifest: dict[str, Any], named: str) -> str:
    """The refusal of a checkpoint written by another flashtick release: what differs, and what works."""
    record = manifest.get("release")
    if isinstance(record, dict) and isinstance(record.get("version"), str):
        commit = record.get("commit")
        with_it = (f"a checkout of its commit {commit[:8]}" if isinstance(commit, str) else
                   f"pip install flashtick=={record['version']}")
    else:
        with_it = "a checkout of the commit it ran from, or the 0.1.0 package it was installed from"
    return (f"{directory} was written by a backtest of {recorded_release(record)}, and this is flashtick "
            f"{this_release()}: its checkpoint differs in {named}; a resume must match them, or its answers so far "
            f"would mix two releases' computations. Start over: delete {directory} and run the command again without "
            f"--resume; or finish it with the release that wrote it ({with_it}) and "
            f"the same command with --resume (docs/upgrading.md)")


def _then_now(then: Any, now: Any, show: Callable[[Any], str] = quoted) -> str:
    """A changed value's two sides, as a refusal says them, quoted as JSON writes them: `"A" then, not given now`."""
    said = lambda value: "not given" if value is None else show(value)  # noqa: E731
    return f"{said(then)} then, {said(now)} now"


def _key_values(then: Any, now: Any, key: str = "") -> str:
    """A changed run-key option's values (`--batch-ms`: ` (100 then, 50 now)`; a session gap as --session-gap
    takes it: ` (not given then, 1ms now)`); nothing for a digest."""
    if key == "session_gap_ns":
        return f" ({_then_now(then, now, session_gap_text)})"
    plain = lambda value: value is None or isinstance(value, (int, float))  # noqa: E731
    return f" ({_then_now(then, now, lambda v: f'{v:g}')})" if plain(then) and plain(now) else ""


def _settings_differ(before: dict[str, Any], key: dict[str, Any]) -> str:
    """The answer-changing settings (answer_settings.py) a config differs in, as a refusal adds them to its words:
    ` (answers.adapt "online" then, "off" now)`; nothing when none differs, or the checkpoint did not record them."""
    changed = settings_changed(before.get("settings") or {}, as_json(key.get("settings") or {}))
    return f" ({'; '.join(f'{k} {_then_now(then, now)}' for k, then, now in changed)})" if changed else ""


def as_json(value: Any) -> Any:
    """As a manifest holds it: tuples as lists, anything else JSON cannot write as its text."""
    return json.loads(json.dumps(value, default=str))


def _shown(paths: list[str]) -> str:
    more = f", and {len(paths) - SHOWN_FILES} more" if len(paths) > SHOWN_FILES else ""
    return ", ".join(paths[:SHOWN_FILES]) + more


def _files_differ(manifest: dict[str, Any], key: dict[str, Any], readings: list) -> list[str]:
    """What differs in the files, in words: files added or removed, the same files in another order (ties go to
    the earlier file), contents changed, or a file read another way (the option named). A checkpoint written
    before it recorded how each file is read cannot tell that last one: it says every way it may differ."""
    was_stats = manifest.get("key", {}).get("file_sizes_and_times") or []
    now_stats = as_json(key["file_sizes_and_times"])
    was, now = list(dict.fromkeys(row[0] for row in was_stats)), list(dict.fromkeys(row[0] for row in now_stats))
    said = []
    if added := [p for p in now if p not in was]:
        said.append(f"files (added: {_shown(added)})")
    if removed := [p for p in was if p not in now]:
        said.append(f"files (removed: {_shown(removed)})")
    if not added and not removed and was != now:
        first = next(i for i, (p, q) in enumerate(zip(now, was)) if p != q)
        said.append(f"file order (file {first + 1} was {was[first]}, now {now[first]}: equal times replay in "
                    f"the order the files are given)")
    sizes = {row[0]: row[1:] for row in was_stats}
    digests = dict(manifest.get("key", {}).get("file_contents") or [])
    now_digests = dict(as_json(key.get("file_contents") or []))
    edited = [row[0] for row in now_stats if row[0] in sizes and sizes[row[0]] != row[1:]]
    # (a file touched or copied since, its size and whole-file SHA-256 the same: review407 #2 called it "different
    # file contents"; the checkpoint keeps its time, which `touch` gives back)
    touched = {row[0]: sizes[row[0]][1] for row in now_stats if row[0] in edited and sizes[row[0]][0] == row[1]
               and digests.get(row[0]) is not None and digests.get(row[0]) == now_digests.get(row[0])}
    if changed_bytes := [path for path in edited if path not in touched]:
        said.append(f"file contents (size or modification time changed: {_shown(list(dict.fromkeys(changed_bytes)))})")
    if touched:
        path, mtime_ns = next(iter(touched.items()))
        said.append(f"file modification times (the same bytes by their SHA-256, touched or copied since: "
                    f"{_shown(list(touched))}; `touch -d @{mtime_ns / 1e9:.9f} {shell_word(path)}` gives "
                    f"{'it' if len(touched) == 1 else 'the first'} back the time the checkpoint recorded)")
    if rewritten := [p for p, digest in as_json(key.get("file_contents") or [])
                     if p in digests and len(digests[p]) == len(digest) and digests[p] != digest and p not in edited]:
        said.append(f"file contents (the same size and modification time, other bytes: "
                    f"{_shown(list(dict.fromkeys(rewritten)))}: corrected in place, or copied over keeping its time?)")
    if "readings" not in manifest:
        reordered = bool(added or removed) or was != now  # explains the fingerprint; else reading may differ
        fingerprint_moved = manifest.get("key", {}).get("files") != key["files"]
        return said + ([KEY_WORDS["files"]] if fingerprint_moved and not reordered else [])
    before = {name: reading for name, reading in manifest["readings"]}
    files_by_change: dict[str, list[str]] = {}  # one option changed for every file is said once
    for name, reading in readings:
        old = before.get(name)
        if old is None or old == reading:
            continue
        keys = sorted(k for k in set(old) | set(reading) if old.get(k) != reading.get(k))
        change = "; ".join(f"{MAP_OPTIONS.get(k, f'the column map key {k}')} {_then_now(old.get(k), reading.get(k))}"
                           for k in keys)
        files_by_change.setdefault(change, []).append(name)
    return said + [f"ways of reading {_shown(names)} ({change})" for change, names in files_by_change.items()]
