"""`serve`'s log lines with a severity on every one (review351 #14): `flashtick: WARNING: ticks refused ...`, or
with `log.format: json` one JSON object a line, `{"ts", "level", "event", "fields": {"source", "message"}}`.

The service's lines are plain prints to stderr from many modules (log_lines.py says why), so the level is put on
the stream, as --log-timestamps puts its stamp (in text, every line but the three that tools parse, `flashtick 0.2.0
(...) starting (...)`, `flashtick serving ingest=...` and `flashtick stopped: ...`, kept as they were, INFO in
json): a line that names its own level (`flashtick: warning: ...`,
`flashtick serve: error: ...`, `note:`) keeps it; any other gets the level of the first pattern of LEVELS its
message starts with, else INFO. The table is the one place that decides what an operator must act on: WARNING is
lost or late data, a resource running out, a client refused; ERROR is a failure of the service itself.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from typing import TextIO

from engine.service.log_lines import WrappedStream, utc_stamp

# (pattern on the message after `flashtick[ COMMAND]: `, level, event): first match wins
LEVELS: list[tuple[re.Pattern[str], str, str]] = [(re.compile(pattern), level, event) for pattern, level, event in [
    (r"engine step failed|metrics: a request .* failed|ZAP request failed", "ERROR", "service_error"),
    (r"log\.dir .*write failed before replaying", "ERROR", "log_dir_full"),  # (a start on a full disk: exit 7)
    (r"(the |answer log: ).*writable again after", "INFO", "log_writable"),
    (r"ticks refused \(log_unavailable\)|could not log|answer log: .*(cannot|refus)", "WARNING", "log_unavailable"),
    (r"log\.\w+ .*exceeds? the size of the filesystem", "WARNING", "retention_past_disk"),
    (r"could not keep the streams' clock offsets", "WARNING", "clock_offsets_unkept"),
    # a stream's ticks refused far behind: its feed's clock stepped back (feed_clock), or a stale message (review411
    # #2's line: nothing to do). Before `behind` and `refused`: both lines name them
    (r"stream .*refused as ts_backwards.*clock stepped back", "WARNING", "feed_clock"),
    (r"stream .*refused as ts_backwards.*stale or replayed message", "INFO", "stale_ticks"),
    (r"behind", "WARNING", "behind"),
    (r"catching up after the restart", "WARNING", "catching_up"),
    (r"KV thrash over", "INFO", "kv_thrash_over"),
    (r"KV thrash", "WARNING", "kv_thrash"),
    (r"KV pool too small", "WARNING", "kv_pool_small"),
    (r"answers stale", "WARNING", "answers_stale"),
    (r"ticks refused as late|refused", "WARNING", "refused"),
    (r"stopped reading at limits\.drain_s", "WARNING", "drain_cut_short"),
    (r"feed .*(lost|not connected|disconnected)", "WARNING", "feed_lost"),
    (r"clock|accepted a tick stamped", "WARNING", "feed_clock"),
    (r"dropped a control reply|no file descriptor", "WARNING", "resource_exhausted"),
    (r"recovering after an unclean stop", "WARNING", "unclean_stop"),
    (r"recovering after a stop cut short", "INFO", "stop_cut_short"),  # (a second signal: no crash, review412 #12)
    (r"the engine loop (has not|did not) turn", "WARNING", "stalled"),
    (r"caught up", "INFO", "caught_up"),
    (r"answers fresh again", "INFO", "answers_fresh"),
    (r"expired", "INFO", "streams_expired"),
    (r"recovered", "INFO", "recovered"),
    (r"serving", "INFO", "serving"),
]]
# a line that names its level itself: `flashtick: warning: ...`, `flashtick serve: error: ...`
_OWN_LEVEL = {"error": "ERROR", "warning": "WARNING", "note": "INFO", "info": "INFO"}
_LINE = re.compile(r"(?P<source>flashtick(?: [a-z][\w-]*)?): (?:(?P<own>error|warning|note|info|ERROR|WARNING|INFO):"
                   r" )?(?P<message>.*)", re.S)
FORMATS = ("text", "json")
_LIFECYCLE = re.compile(r"flashtick (?:(?P<starting>\S+ \(.*\) starting \()|(?P<serving>serving )"
                        r"|(?P<stopped>stopped: ))")
LIFECYCLE_EVENTS = ("starting", "serving", "stopped")


def leveled(line: str) -> tuple[str, str, str, str]:
    """(source, level, event, message) of one log line (no newline)."""
    lifecycle = _LIFECYCLE.match(line)
    if lifecycle is not None:  # the start, ready and stop lines, which tools parse: as they are
        return "", "INFO", lifecycle.lastgroup or "message", line
    found = _LINE.fullmatch(line)
    if found is None:  # (a library's warning, a traceback's line)
        return "", "WARNING" if "warning" in line.lower() else "INFO", "message", line
    source, message = found.group("source"), found.group("message")
    event = next((e for pattern, _, e in LEVELS if pattern.match(message)), "message")
    if found.group("own"):
        return source, _OWN_LEVEL[found.group("own").lower()], event, message
    level = next((lv for pattern, lv, _ in LEVELS if pattern.match(message)), "INFO")
    return source, level, event, message


class LeveledLines(WrappedStream):  # (flush: a line not ended yet waits for its newline)
    """A text stream that writes each whole line to ``stream`` with its level: `source: LEVEL: message` (``fmt``
    text), or one JSON object (json), stamped with the time. Safe across threads; a line written in pieces waits
    for its newline."""

    def __init__(self, stream: TextIO, fmt: str = "text", stamp: bool = False) -> None:
        self._stream, self.fmt, self._stamp = stream, fmt, stamp
        self._pending = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        with self._lock:
            self._pending += text
            *lines, self._pending = self._pending.split("\n")
            if lines:
                self._stream.write("".join(self._formatted(line) + "\n" for line in lines))
        return len(text)

    def _formatted(self, line: str) -> str:
        if not line.strip():
            return line
        source, level, event, message = leveled(line)
        if self.fmt == "json":
            return json.dumps({"ts": utc_stamp(), "level": level, "event": event,
                               "fields": {"source": source or "flashtick", "message": message}}, ensure_ascii=False)
        if event in LIFECYCLE_EVENTS and not source:  # `flashtick 0.2.0 ... starting`, `flashtick serving ...`,
            text = message  # `flashtick stopped: ...`: the lines tools parse, as they were
        else:
            text = f"{source}: {level}: {message}" if source else f"{level}: {message}"
        return (utc_stamp() + " " if self._stamp else "") + text


def level_the_log(fmt: str = "text") -> None:
    """`serve`'s stderr leveled in ``fmt`` from here on (cli.main puts the plain stream back as it returns); over
    --log-timestamps' stamping, which it takes over (a JSON line carries its time as `ts`, not before its brace)."""
    from engine.service.log_lines import TimestampedLines

    if isinstance(sys.stderr, LeveledLines):
        sys.stderr.fmt = fmt
        return
    stamped = isinstance(sys.stderr, TimestampedLines)
    inner = sys.stderr._stream if stamped else sys.stderr  # type: ignore[union-attr]
    sys.stderr = LeveledLines(inner, fmt, stamp=stamped)  # type: ignore[assignment]
