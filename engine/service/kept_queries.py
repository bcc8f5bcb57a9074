"""The standing queries a data directory keeps across restarts: DATA_DIR/queries.yaml and, beside it,
queries.state.json (the registry's versions, each query's digest, the registration marks), both replaced atomically
on every register and unregister and read back on start; and the configured queries file (`serve --queries`)
applied on top of what a restart restored."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from engine.quoting import quoted
from engine.service.log_lines import named_few
from engine.service.registration_marks import RegistrationMarks
from engine.service.private_dirs import private
from queries.registry import Registry
from queries.spec import QuerySpec, QuerySpecError, dump_queries
from queries.yaml_loader import load_queries, located_in, no_query, read_queries_file


class RestoredQueries(NamedTuple):
    """What ``DataDir.restore_queries`` brought back: the registration marks, and the queries it registered afresh."""

    marks: RegistrationMarks
    reregistered: set[str]


class ConfiguredQueries(NamedTuple):
    """The configured queries file, read and checked (`configured_queries`): its text and its queries."""

    text: str
    specs: list[QuerySpec]


def configured_queries(path: str, registry: Registry) -> ConfiguredQueries:
    """The configured queries file read and every query in it checked, before the data directory is made or
    locked: a file a start refuses leaves no data directory behind."""
    text = read_queries_file(path, registry.limits)
    specs = load_queries(text, path, registry.questions, registry.limits, registry.answerable)
    if not specs:  # a file given to serve, so an empty one is a mistake: refused as `register` refuses it
        raise no_query(path, "the service would answer nothing; give a file that lists the standing queries")
    return ConfiguredQueries(text, specs)


# where a kept query came from (queries.state.json's `origins`): the queries file a start was given, or a
# `register` over the control socket; a state written before origins were recorded says neither (None)
FROM_FILE, LIVE = "file", "live"


def register_changed(path: str, registry: Registry, forget_query: Callable[[str], None],
                     configured: ConfiguredQueries | None = None,
                     origins: dict[str, str] | None = None) -> list[str]:
    """The configured queries file (``configured``: as `configured_queries` read it; None: read now) on top of what
    a restart restored: a query that is new or differs is (re)registered and starts afresh (``forget_query`` drops
    its old answers); one that is unchanged keeps its answers, seqs and trigger state. Returns the names
    (re)registered. ``origins`` (the data directory's, restored): the file's queries are recorded as from it, and
    the kept queries it does not list are said by where they came from."""
    text, specs = configured or configured_queries(path, registry)
    kept_origins = dict(origins or {})  # (as restored: what the unlisted ones are said by)
    if origins is not None:
        origins.update(dict.fromkeys((spec.name for spec in specs), FROM_FILE))
    changed = [spec for spec in specs if registry.current(spec.name) != spec]
    # a spec kept from before the stop that the file's replaces (often one re-registered live): said, not silent
    replaced = {spec.name: registry.query_version(spec.name) for spec in changed if spec.name in registry}
    # one the data directory did not keep while it kept a registry (often one unregistered live): said too, or a
    # query the user stopped would come back publishing at an unrelated restart without a word
    added_back = [spec.name for spec in changed if spec.name not in registry] if registry.version else []
    if changed or any(registry.current(spec.name).to_dict() != spec.to_dict() for spec in specs):
        try:  # (an unchanged one written otherwise, `1000ms` for `1s`: shown as the file writes it, its state kept)
            registry.register(specs)
        except QuerySpecError as e:  # a topic a restored query owns, say: located in the file like its other problems
            raise located_in(e, text, path, registry.limits) from None
        for spec in changed:
            forget_query(spec.name)
    for name, old in replaced.items():
        print(f"flashtick: query {quoted(name)}: the spec in {path} replaces the one kept in the data directory "
              f"(query_version {old} -> {registry.query_version(name)}; registered live, or the file changed) and "
              f"starts afresh: a start applies its queries file on top of what was kept", file=sys.stderr, flush=True)
    for name in added_back:
        print(f"flashtick: query {quoted(name)}: in {path} but not among the queries kept in the data directory "
              f"(unregistered live, or new in the file): registered: a start applies its queries file on top of what "
              f"was kept (to keep it stopped, take it out of the file)", file=sys.stderr, flush=True)
    _say_kept_unlisted(path, registry, {spec.name for spec in specs}, kept_origins)
    return [spec.name for spec in changed]


# how the start line says each origin of a kept query its queries file does not list
_KEPT_HOW = {LIVE: "registered live (op register)",
             FROM_FILE: "listed by an earlier queries file, taken out of it since",
             None: "registered live, or listed by an earlier queries file"}  # (a state from before origins)


def _say_kept_unlisted(path: str, registry: Registry, listed: set[str], origins: dict[str, str]) -> None:
    """The queries a start serves that its queries file does not list: kept in the data directory, as every
    registration is. An operator who took one out of the file and restarted expected it gone, and heard nothing
    (review189 #4): each is named, with where it came from (``origins``: one registered live is kept on purpose,
    one dropped from the file likely not) and how to stop it, a line per origin."""
    kept = sorted(spec.name for spec in registry.list() if spec.name not in listed)
    for origin, how in _KEPT_HOW.items():
        names = [name for name in kept if origins.get(name) == origin]
        if names:
            print(f"flashtick: {len(names)} quer{'y' if len(names) == 1 else 'ies'} kept in the data directory "
                  f"(queries.yaml: {how}) and not in {path}: {named_few(names)}: still served, as a start applies "
                  f"its queries file on top of what was kept (to stop one: flashtick unregister NAME)",
                  file=sys.stderr, flush=True)


def write_queries_files(queries_path: Path, state_path: Path, yaml_text: str, registry: Registry,
                        marks: RegistrationMarks, origins: dict[str, str]) -> None:
    """The registered queries, then their versions, registration marks and origins (``origins``: FROM_FILE or
    LIVE, where known), each replaced atomically (a crash leaves the old or the new file, whole). A kill between
    the two renames leaves the new queries beside the old versions, so the state also records the queries file's
    digest and each query's: ``read_query_versions`` tells a query the state does not describe and gives it a
    fresh version."""
    specs = registry.list()
    snap = {"version": registry.version, "versions": {s.name: registry.query_version(s.name) for s in specs},
            "marks": marks.to_json(), "file_sha256": _sha256(yaml_text),
            "digests": {s.name: spec_digest(s) for s in specs},
            "origins": {s.name: origins[s.name] for s in specs if s.name in origins}}
    for path, text in ((queries_path, yaml_text), (state_path, json.dumps(snap))):
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8", opener=private) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def read_query_versions(queries_path: Path, state_path: Path, registry: Registry, specs: list[QuerySpec],
                        text: str) -> RestoredQueries:
    """The versions and marks of queries.state.json (``state_path``) put back on ``specs`` (DataDir.restore_queries
    registered them from ``queries_path``, whose ``text`` they are)."""
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
        version = int(state["version"])
        versions = {str(k): int(v) for k, v in state["versions"].items()}
        marks = RegistrationMarks.from_json(state["marks"])
        digests = state.get("digests")  # (absent: a state written before they were recorded)
    except FileNotFoundError:
        return RestoredQueries(RegistrationMarks(), set())
    except (ValueError, KeyError, TypeError, AttributeError) as e:  # damaged: every query owes as before
        print(f"flashtick: {state_path} is unreadable ({type(e).__name__}: {e}); query versions restart "
              f"and answers owed are computed for every stream", file=sys.stderr, flush=True)
        return RestoredQueries(RegistrationMarks(), set())
    described = digests is not None and state.get("file_sha256") == _sha256(text)  # the fast path: all agree
    stale = set() if described else {
        s.name for s in specs if s.name not in versions
        or (isinstance(digests, dict) and digests.get(s.name) != spec_digest(s))}
    gone = set(versions) - {s.name for s in specs}
    if stale or gone:
        version += 1  # what the lost register/unregister made it: a version no other spec was published under
        for name in stale:
            versions[name] = version
            marks.removed(name)
        what = [f"{', '.join(sorted(stale))} registered afresh"] if stale else []
        what += [f"{', '.join(sorted(gone))} unregistered"] if gone else []
        print(f"flashtick: {queries_path.name} and {state_path.name} disagree (a register or unregister "
              f"was cut short, or the file was edited): {'; '.join(what)} at registry version {version}",
              file=sys.stderr, flush=True)
    registry.restore_versions(version, versions)
    return RestoredQueries(marks, stale)


def read_origins(state_path: Path) -> dict[str, str]:
    """Where each kept query came from, as queries.state.json records it. A state written before origins were
    recorded gives none: a query of it is neither taken as the file's nor as live, since either guess would tell
    the operator the wrong story of a query the file no longer lists; a register or a start's file records it."""
    try:
        origins = json.loads(state_path.read_text(encoding="utf-8")).get("origins") or {}
        return {str(k): v for k, v in origins.items() if v in (FROM_FILE, LIVE)}
    except (OSError, ValueError, AttributeError):  # (missing or damaged: read_query_versions says so)
        return {}


def spec_digest(spec: QuerySpec) -> str:
    """A query's identity as its saved YAML says it (a period as written: `1.5m` and `90s` differ): the same spec
    saved, the same digest."""
    return _sha256(dump_queries([spec]))[:16]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
