"""The `ingest` section of the service config: what `serve` does with live ticks before the engine sees them: the
venue-to-desk stream names (``rename``, exact or by a pattern, and ``slashes``: connectors/stream_renames.py), the
late-tick policy (``reorder_window_ms``: hold each stream's newest
ticks that long and release them in event-time order, as file replay sorts a file), and the thresholds of the
feed-clock warnings (a stream's clock ahead of this machine's, two clocks interleaving on one stream).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from connectors.stream_names import MAX_STREAM_BYTES, check_normalized, check_stream
from connectors.stream_renames import SLASH_POLICIES, rename_pattern
from connectors.tick_sequences import SEQ_SCOPES
from connectors.tick_errors import InvalidTick
from engine.service.config_error import ConfigError
from engine.yaml_files import yaml_kind
from queries.limits import excerpt  # values as YAML writes them: got true, got null (not True, None)
from engine.quoting import quoted

MAX_REORDER_WINDOW_MS = 60_000.0  # a minute: past it answers are so late that a window is the wrong tool
MAX_RENAMES = 100_000  # names in ingest.rename (a venue's whole symbol list fits; a mistake of a file does not)


@dataclass(frozen=True)
class IngestSection:
    # venue symbol -> the stream name the engine keeps (`BTC-USD: BTC.coinbase`), applied to every raw and
    # tokenized tick read on the ingest socket and on endpoints.feeds before any check
    # (or by a pattern, each `*` some text: `"*/*": "*-*.lmax"`, `EUR/USD` -> `EUR-USD.lmax`)
    rename: dict = field(default_factory=dict)
    # a '/' in a live stream's name: "refuse" it (bad_stream: BTC-USD may be another venue's name) or "dash" it,
    # `EUR/USD` -> `EUR-USD`, as file replay reads one (the shared rule); after rename, for a name it left alone
    slashes: str = "refuse"
    # hold each stream's ticks this long (wall clock) and release them in event-time order: a tick late by less
    # than the window is placed, not refused as ts_backwards; every answer comes this much later. 0: off
    reorder_window_ms: float = 0.0
    reorder_max_ticks: int = 100_000  # ticks held at once, all streams; past it a stream's held ticks go at once
    # a stream whose ticks are stamped more than this ahead of this machine's clock is flagged (`streams`, health)
    clock_ahead_warn_ms: float = 250.0
    # between two heartbeats, a stream with at least this share of its ticks refused as ts_backwards (and 10 of
    # them) is said in the log and in health: two clocks interleave on it (two feeds under one name)
    late_share_warn: float = 0.05
    # what one `seq` numbering counts: "stream" (a venue's per-instrument number) or "feed" (one counter across the
    # instruments of a feed, as US SIPs, OPRA and TAQ's Sequence Number count): gaps and numberings begun again are
    # then counted per feed (the message's topic frame), repeats still per stream (connectors/tick_sequences.py)
    seq_scope: str = "stream"

    def __post_init__(self) -> None:
        for name, top in (("reorder_window_ms", MAX_REORDER_WINDOW_MS), ("clock_ahead_warn_ms", math.inf)):
            value = getattr(self, name)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not 0 <= value < top:
                raise ConfigError(f"ingest.{name} must be a finite number of milliseconds >= 0"
                                  f"{f' and below {top:g}' if top < math.inf else ''}, got {value}")
        value = self.late_share_warn
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not 0 < value <= 1:
            raise ConfigError(f"ingest.late_share_warn must be a share in (0, 1], got {value}")
        value = self.reorder_max_ticks
        if isinstance(value, int) and not isinstance(value, bool) and not 0 < value < 10**9:
            raise ConfigError(f"ingest.reorder_max_ticks must be an integer > 0 (and below 1e9), got {value}")
        check_renames(self.rename)
        if self.slashes not in SLASH_POLICIES:
            raise ConfigError(f"ingest.slashes must be {' or '.join(map(quoted, SLASH_POLICIES))} (a '/' in a live "
                              f"stream's name refused, or read as '-' as file replay reads it: EUR/USD -> EUR-USD), "
                              f"got {excerpt(self.slashes)}")
        if self.seq_scope not in SEQ_SCOPES:
            raise ConfigError(f"ingest.seq_scope must be {' or '.join(map(quoted, SEQ_SCOPES))} (what one seq "
                              f"numbering counts: a stream's ticks, or a feed's across its instruments), got "
                              f"{excerpt(self.seq_scope)}")

    @property
    def reorder_window_ns(self) -> int:
        return round(self.reorder_window_ms * 1e6)


def check_renames(rename: Any) -> None:
    """``ingest.rename``: a mapping of venue names to stream names, the names kept valid as the wire's (connectors'
    check_stream, in NFC), no name renamed to itself, and no chain (a -> b, b -> c would read b two ways)."""
    if not isinstance(rename, dict):
        raise ConfigError(f"ingest.rename must be a mapping of venue names to stream names "
                          f"(`BTC-USD: BTC.coinbase`), got {yaml_kind(rename)}")
    if len(rename) > MAX_RENAMES:
        raise ConfigError(f"ingest.rename holds {len(rename)} names, more than {MAX_RENAMES}")
    for source, target in rename.items():
        # the venue's name is matched as sent, before the wire's name rules (so `BTC/USD`, which they refuse, can
        # be renamed); the name the engine keeps follows them
        if not isinstance(source, str) or not source or len(source) > MAX_STREAM_BYTES * 4:
            raise ConfigError(f"ingest.rename: a venue name must be a non-empty string, got {excerpt(source)}")
        try:
            if isinstance(target, str) and "*" in source:  # a pattern: its name checked with each '*' as a letter
                rename_pattern(source, target)
                check_normalized(check_stream(target.replace("*", "x")))
            else:
                check_normalized(check_stream(target))
        except InvalidTick as e:
            raise ConfigError(f"ingest.rename: {quoted(source)} -> {excerpt(target)}: not a valid stream name "
                              f"({e})") from None
        except ValueError as e:  # (a pattern's '*' that do not pair: InvalidTick is a ValueError, caught first)
            raise ConfigError(f"ingest.rename: {e}") from None
        if source == target:
            raise ConfigError(f"ingest.rename renames {quoted(source)} to itself: leave it out")
        if target in rename:
            then = quoted(rename[target])
            raise ConfigError(f"ingest.rename renames {quoted(source)} to {quoted(target)}, which it renames in turn "
                              f"to {then}: a name is renamed once; map {quoted(source)} to {then}")
