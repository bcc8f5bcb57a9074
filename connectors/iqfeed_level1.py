"""DTN IQFeed's live Level 1 messages saved as a file (a capture of its port 5009 in protocol 6.x): `Q,` updates and
`P,` summaries of a symbol's whole Level 1 state, their fields those the `S,CURRENT UPDATE FIELDNAMES` line names
(or `S,SELECT UPDATE FIELDS` chose; by default Symbol, Most Recent Trade, Most Recent Trade Size, Most Recent
Trade Time, Most Recent Trade Market Center, Total Volume, Bid, Bid Size, Ask, Ask Size, Open, High, Low, Close,
Message Contents, Most Recent Trade Conditions), among the feed's `S,`, `T,` (time stamp), `F,` (fundamental),
`n,` (symbol not found) and `E,` (error) lines. Replay does not read them: they are snapshots, not ticks (each
repeats the last trade beside a changed bid or ask, and Most Recent Trade Time has no date), and read as a CSV they
were taken for a header-less file of some other shape. `level1_refusal` says so, and what to do instead: IQFeed's
tick history (connectors/iqfeed_ticks.py) reads, and a feed handler can send the live updates as ticks."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

HEAD_BYTES = 1 << 16  # of the file's text: its first messages lie in them
FIELD_LINES = ("S,CURRENT UPDATE FIELDNAMES,", "S,SELECT UPDATE FIELDS,")
# the first fields of the feed's messages: a Level 1 update or summary, a system message, a time stamp, a
# fundamental message, a symbol not found, an error
_MESSAGE = re.compile(r"^(?:[QP],[^,\s]+,|S,[A-Z ]+(,|$)|T,\d{8} \d\d:\d\d:\d\d|F,[^,\s]+,|n,[^,\s]+|E,)")
_UPDATE = re.compile(r"^[QP],[^,\s]+,")


def level1_refusal(path: Path) -> str | None:
    """Why a text file of IQFeed's Level 1 messages is not replayed, and what to do; None for any other file: one
    whose first lines are not all the feed's messages, or hold no update, summary nor field list."""
    try:
        with (gzip.open if path.name.lower().endswith(".gz") else open)(path, "rb") as f:
            head = f.read(HEAD_BYTES)
    except (OSError, EOFError):
        return None  # (the read itself says what is wrong with the file)
    text = head.decode("utf-8", "replace").splitlines()
    text = text[:-1] if len(head) == HEAD_BYTES else text  # (a line cut by the read is no message's shape)
    lines = [line.strip() for line in text if line.strip()][:200]
    if not lines or not all(_MESSAGE.match(line) for line in lines):
        return None
    fields = next((line.split(",")[2:] for line in lines if line.startswith(FIELD_LINES)), None)
    updates = sum(bool(_UPDATE.match(line)) for line in lines)
    if fields is None and not updates:
        return None
    named = f", its fields {', '.join(f for f in fields if f)}" if fields else ""
    # only the kinds the file holds (review315 #7: two `Q,` lines were said as updates "and `P,` summaries")
    kinds = [f"{n} `{kind},` {what}" for kind, what in (("Q", "update(s)"), ("P", "summary(ies)"))
             if (n := sum(line.startswith(kind + ",") for line in lines))]
    held = f"{' and '.join(kinds)} among its first {len(lines)} lines" if kinds else \
        f"its field list among its first {len(lines)} lines"
    return (f"{path}: DTN IQFeed live Level 1 messages ({held}{named}): replay does not read them. Each is a "
            f"snapshot of a symbol's Level 1 state, not a tick: it repeats the last trade beside a changed bid or "
            f"ask, and its Most Recent Trade Time has no date. To replay these symbols, request their tick history "
            f"from IQFeed's lookup port (`HTT,SYMBOL,BEGIN,END,,,,1` or `HTX,SYMBOL,N`) and save its lines: replay "
            f"reads those as trades with the quotes they met, in US Eastern time. To serve them live, have the "
            f"feed handler send each update's trade and quote as ticks to `flashtick serve`'s ingest socket "
            f"(docs/wire-protocol.md)")
