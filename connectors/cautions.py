"""Cautions: the notes on how a file was read that a run repeats at its end (sides that may be the maker's,
venues mixed in one stream, times that look misread). Their own module because nearly every reading step makes
them (layout detection, content notes, planning, replay) and none of those should import another to say one.
"""

from __future__ import annotations

from typing import Any, Iterable


class Caution(str):
    """A note on a reading that may change what the data means (sides taken as the aggressor's where a vendor's
    are the maker's, venues mixed in one stream): a run says it again at its end, where a summary that reads as
    a success would otherwise bury it among the notes at the start."""


class StreamCaution(Caution):
    """A caution about some streams of a file alone (``streams``: a delivery hour's contracts merged): a run whose
    selection (--streams) leaves every one of them out does not say it, as its advice was followed (verify55 R6)."""

    streams: frozenset[str]

    def __new__(cls, text: str, streams: Iterable[str] = ()) -> StreamCaution:
        caution = super().__new__(cls, text)
        caution.streams = frozenset(streams)
        return caution


def about_replayed(note: str, selection: Any) -> bool:
    """Whether a run whose ``selection`` (a StreamSelection; None: every stream) picks its streams says ``note``:
    every note but a StreamCaution whose streams it leaves out."""
    return not isinstance(note, StreamCaution) or selection is None or any(map(selection.matches, note.streams))


def labelled(line: str) -> str:
    """A reading's note as first printed: `warning:` before a Caution, as the end of a run says it again (`warning
    (said above too):`), so a user scanning the start of the output for warnings finds it; `note:` before another."""
    return f"{'warning' if isinstance(line, Caution) else 'note'}: {line}"
