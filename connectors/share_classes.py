"""One share class written two ways across a replay's files: a trades file's `BF B` or `BRK/B` (CQS's and CMS's
symbology) beside a quotes file's `BF.B` or `BRK.B` (TAQ's, Nasdaq's). Replayed as they are they make a trades-only
and a quotes-only stream of one instrument, and a trades-only stream gets worse answers (README). Said, as a
caution, with how to give them one name; which is right the files cannot tell."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any, Sequence

from connectors.cautions import Caution
from connectors.file_overlaps import tick_kinds
from connectors.file_plan import source_path
from connectors.stream_selection import StreamSelection
from connectors.ticks import QUOTE, TRADE
from engine.quoting import quoted

SHARE_CLASS_SEPARATOR = re.compile(r"[. /-]")  # BRK.B, BRK B, BRK/B (replayed as BRK-B), BRK-B


def share_class_spellings(plans: Sequence[Any], spans: Sequence[dict[str, tuple[int, int]]],
                          selection: StreamSelection | None = None) -> list[str]:
    """A caution per pair of streams whose names differ only in a share class's separator, one fed only trades and
    the other only quotes. `spans`: each plan's streams (`file_overlaps.time_spans`)."""
    kinds: dict[str, set[str]] = defaultdict(set)
    files: dict[str, list[str]] = defaultdict(list)
    for plan, plan_spans in zip(plans, spans):
        for stream in plan_spans:
            if selection is None or selection.matches(stream):
                kinds[stream] |= tick_kinds(plan)
                files[stream].append(source_path(plan).name)
    spellings: dict[str, list[str]] = defaultdict(list)
    for stream in sorted(kinds):
        spellings[SHARE_CLASS_SEPARATOR.sub(".", stream)].append(stream)
    notes = []
    for names in spellings.values():
        trades = next((n for n in names if kinds[n] == {TRADE}), None)
        quotes = next((n for n in names if kinds[n] == {QUOTE}), None)
        if trades is None or quotes is None:
            continue
        notes.append(Caution(
            f"streams {quoted(trades)} (trades only: {', '.join(files[trades][:2])}) and {quoted(quotes)} (quotes "
            f"only: {', '.join(files[quotes][:2])}) differ only in the share class's separator: if they are one "
            f"instrument, its trades and quotes replay as two streams, each answered without the other. Give them "
            f"one name: a replay list entry for a file of that one instrument, columns: {{stream: {quotes}}}; a "
            f"file of several instruments renamed in the file first (docs/replay.md)"))
    return notes
