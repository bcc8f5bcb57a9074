"""What a published answer carries beyond its cached form (``Answer.to_wire``): its `data_age_ms` and
`clock_offset_ms` and its `caveats` (the server's ``_published_fields``). They are fixed once, when the answer is
kept (before it is logged and published), and kept with it: the published payload, the gap-fill history (the
`answers` op) and the answer log (in a record of their own beside the answer's: answer_log.py), and so the history a
restart reads back, hold the same values, byte for byte. A gap-filled answer had carried none of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import msgpack

from queries.cache import Answer

MAX_WAITING = 100_000  # fields kept for answers not published yet (each is published in the step that kept it)


class Kept(NamedTuple):
    """An answer as kept: ``packed``, its msgpack form as the history keeps it, its published ``fields`` included."""

    packed: bytes
    fields: dict[str, Any]


class PublishedFields:
    """``of``: the server's fields for an answer (None: no server, nothing added); ``kept`` an answer as kept,
    ``take`` its fields when it is published."""

    def __init__(self) -> None:
        self.of: Callable[[Answer], dict[str, Any]] | None = None
        self._waiting: dict[tuple[str, int], dict[str, Any]] = {}  # (topic, seq) -> the fields it is published with

    def kept(self, answer: Answer) -> Kept:
        """``answer`` as the history and the answer log keep it, with the fields it is published with."""
        fields = self.of(answer) if self.of is not None else {}
        if fields:
            if len(self._waiting) >= MAX_WAITING:  # (answers kept and never published: none expected)
                self._waiting.clear()
            self._waiting[(answer.topic, answer.seq)] = fields
        return Kept(msgpack.packb({**answer.to_wire(), **fields}, use_bin_type=True), fields)

    def take(self, answer: Answer) -> dict[str, Any] | None:
        """The fields ``answer`` was kept with (None: kept before the server told ``of``)."""
        return self._waiting.pop((answer.topic, answer.seq), None)
