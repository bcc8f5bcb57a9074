"""The service client commands on the standing queries: `register`, `unregister` and `list`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from engine.path_words import NotRead, file_not_found
from engine.service.cli_common import control_client, printable_json
from engine.text_files import read_text


def cmd_register(args: argparse.Namespace) -> None:
    from engine.service.client import ControlDropped, ControlError

    text = _queries_text(args.file)
    with control_client(args) as control:  # the file name, so errors read `my_queries.yaml:12: ...`
        try:
            reply = control.call("register", yaml=text, source=args.file.name)
        except ControlDropped as e:  # a request over limits.max_control_bytes: ZeroMQ drops the connection, and
            size = len(text.encode())  # "the service restarted? ask again" would loop for ever
            if size < LARGE_REGISTER_BYTES:
                raise
            raise ControlError(f"{args.file}: the connection dropped on a register of {size:,} bytes: a service drops "
                               f"a control request over its limits.max_control_bytes ({4 << 20:,} by default), and "
                               f"holds a query document to limits.max_yaml_bytes ({256 << 10:,} by default): a "
                               f"queries file is a few kB; split it or cut what it repeats") from e
        except ControlError as e:  # the service names only the file (a client's path means nothing there): the
            # user is shown the path as given, as serve and backtest name a queries file
            located = re.sub(rf"(?m)^{re.escape(args.file.name)}(?=:)", lambda _: str(args.file), str(e))
            raise type(e)(located, e.reason) from None  # its kind kept: a service not there is exit 4, not 2
    replaced, unchanged = reply.get("replaced"), reply.get("unchanged")  # (absent from an older server)
    print(f"registered {names_said(reply['registered'])} (registry version {reply['version']})" + (
        f"; replaced {names_said(replaced)} (the earlier spec of each no longer answers)" if replaced else "") + (
        f"; unchanged {names_said(unchanged)} (the same spec as registered: its answers, seqs, trigger state and "
        f"adaptation go on)" if unchanged else ""))
    for note in reply.get("notes", ()):  # (a query whose streams match none held now: a typo, an unescaped glob)
        print(f"flashtick register: note: {note}", file=sys.stderr)


LARGE_REGISTER_BYTES = 1 << 20  # a register this large whose connection drops was dropped for its size, not a restart


def _queries_text(path: Path) -> str:
    """The text of the queries file ``path`` (UTF-8 whatever the locale, as serve --queries reads it); one that is
    not there, or that the OS refuses to read (a folder, a mode that denies this user), said as every input is."""
    if not path.exists():
        raise file_not_found("queries file", path)
    try:
        return read_text(path)
    except OSError as e:  # (a folder was "not found": review442 #5)
        raise NotRead(path, e) from None


def check_unregister(args: argparse.Namespace) -> None:
    """`unregister` names at least one query (the parser's usage error: `check_usage`)."""
    if not args.names and args.file is None:
        raise ValueError("name the queries to remove, or give --file FILE for every query a queries file names")


def cmd_unregister(args: argparse.Namespace) -> None:
    from queries.yaml_loader import query_lines

    names = list(args.names)
    if args.file is not None:
        names += query_lines(_queries_text(args.file), str(args.file))
    names = list(dict.fromkeys(names))
    with control_client(args) as control:  # one change, however many: one name a call rewrote the saved queries
        reply = control.call("unregister", **({"name": names[0]} if len(names) == 1 else {"names": names}))
    print(f"unregistered {names_said(names)} (registry version {reply['version']})")


MAX_NAMES_SAID = 30  # a register/unregister of a large file names this many, then counts the rest


def names_said(names: list[str]) -> str:
    """Query names on one line: the first MAX_NAMES_SAID, then how many more (a file of 900 was one 8 kB line)."""
    more = len(names) - MAX_NAMES_SAID
    return ", ".join(names[:MAX_NAMES_SAID]) + (f" and {more} more" if more > 0 else "")


def cmd_list(args: argparse.Namespace) -> None:
    from connectors.ticks import shown_name

    with control_client(args) as control:
        reply = control.call("list")
    if args.json:  # with the model answering them, as their answers name it (a service before 0.2.0 says none)
        listed = {key: reply[key] for key in ("queries", "version", "model", "model_digest") if key in reply}
        print(printable_json(listed, sort_keys=True, indent=2))
        return
    rows = [(shown_name(q["name"]), q["kind"], _shown(_question_text(q)), _trigger_text(q["trigger"]),
             ",".join(_listed_stream(s) for s in q["streams"])) for q in reply["queries"]]
    # each column as wide as its widest value (at least as wide as it always was): `interval:1500ms` or a long
    # name shifted the columns after it on its own line only
    widths = [max([least, *(len(row[i]) for row in rows)]) for i, least in enumerate((16, 12, 16, 12))]
    for row in rows:
        print(" ".join(value.ljust(width) for value, width in zip(row, widths)) + " " + row[-1])
    print(f"{len(reply['queries'])} queries (registry version {reply['version']})")


def _listed_stream(name: str) -> str:
    """A query's stream (name or glob) in `list`'s comma-joined column: as shown_name shows it, and in quotes when
    it holds a comma, so `ES,NQ` cannot be read as two streams."""
    from connectors.ticks import shown_name

    shown = shown_name(name)
    return repr(name) if "," in name and shown == name else shown


def _shown(text: str) -> str:
    """Free text from the service (a question, JSON-quoted), printable: each non-printable character (ESC, a bidi
    override) escaped as Python writes it, so it cannot move the terminal's cursor or forge an output line. Names
    are shown by connectors.ticks.shown_name."""
    return text if text.isprintable() else "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _question_text(spec: dict[str, Any]) -> str:
    """A codec question's name as it is; free text quoted on one line (it often starts with a newline)."""
    question = spec.get("question")
    if question is None:
        return f"{len(spec['question_tokens'])} tokens" if spec.get("question_tokens") else "-"
    if question.isidentifier():
        return question
    text = json.dumps(question, ensure_ascii=False)
    return text if len(text) <= 40 else text[:36] + '..."'


def _trigger_text(raw: Any) -> str:
    """batch, on_demand, ticks:50, interval:1.5m (the YAML forms, on one line, the period as written). A trigger
    this client cannot read (a kind a newer server knows) is shown as the server sent it, in JSON, never a Python
    repr (review336 #10): `on_fill:{"side": "buy"}`, `null`, `{"ticks": 50, "interval": 1000000000}`, so one query
    never fails the whole list and what is shown can be written back into a queries file."""
    from queries.trigger import Trigger

    try:
        return Trigger.parse(raw).text()
    except ValueError:
        if isinstance(raw, dict) and len(raw) == 1 and isinstance(next(iter(raw)), str):
            (kind, period), = raw.items()  # one kind and its period, as `ticks:50` is shown
            return _shown(f"{kind}:{period if isinstance(period, str) else _json_text(period)}")
        return _shown(raw if isinstance(raw, str) else _json_text(raw))


def _json_text(value: Any) -> str:
    """``value`` (msgpack-decoded) as JSON writes it, whole; what JSON has no form for (bytes) as errors quote it."""
    from engine.quoting import quoted

    return json.dumps(value, ensure_ascii=False, default=quoted)
