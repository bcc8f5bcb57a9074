"""How an answer reads on a terminal: one message on one line (`flashtick subscribe`) and the live table of the
latest answer per topic (`subscribe` on a terminal, `flashtick demo`). Stream names are shown escaped, never as
terminal control."""

from __future__ import annotations

import json
from typing import Any

from connectors.ticks import shown_name


def format_answer(payload: dict) -> str:
    value = payload.get("value", {})
    if "expected" in value:
        return f"E={value['expected']:+.3f}"
    if "answer" in value:
        return f"{value['answer']} ({value['probs'][value['answer']]:.2f})"
    if "nll" in value and value["nll"] is not None:
        return f"nll={value['nll']:.2f}"
    return str(value.get("text", value))[:40]


def format_line(topic: str, payload: dict) -> str:
    """One message on one line: an answer's topic, seq, ticks seen and answer; other topics as key=value."""
    topic = shown_name(topic)  # a stream name must not drive the terminal, nor read as another
    if "query" in payload and "value" in payload:
        return f"{topic:<28}{payload['seq']:>7}{payload['version']:>9}  {format_answer(payload)}"
    fields = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in sorted(payload.items()))
    return f"{topic:<28}{fields}"


def render_table(table: dict[str, dict], out: Any, title: str = "") -> None:
    """A live table of the latest answer per topic (redrawn in place on a terminal)."""
    lines = [title] if title else []
    lines.append(f"{'query':<12}{'stream':<12}{'seq':>6}{'ticks':>8}  answer")
    for topic in sorted(table):
        p = table[topic]
        lines.append(f"{p['query']:<12}{shown_name(p['stream']):<12}{p['seq']:>6}{p['version']:>8}  {format_answer(p)}")
    if out.isatty():
        out.write("\x1b[H\x1b[2J" + "\n".join(lines) + "\n")
    else:
        out.write("\n".join(lines) + "\n\n")
    out.flush()
