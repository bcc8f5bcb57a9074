"""Whether a standing query fits the positions a session keeps free for probes (`scheduler.probe_reserve`):
compiled, and refused at registration with the number to raise when its question (and generated answer) is
longer, rather than failing unseen whenever a stream's window is nearly full."""

from __future__ import annotations

import math

from connectors.codec import Codec
from engine.context_rolls import ContextWindow
from queries.probe_answers import CompiledQuery, QueryCompileError, compile_query
from queries.spec import QuerySpec


def compile_fitting(spec: QuerySpec, codec: Codec, probe_reserve: int,
                    window: ContextWindow | None = None) -> CompiledQuery:
    """``compile_query``, refused when the query's probe (with a generated answer) is longer than the positions a
    session keeps free past its tokens (``scheduler.probe_reserve``): whenever a stream's window is nearly full its
    answers would fail, and so be missing, with nothing said to its subscribers. ``window``: the sessions' window
    where it is known (the refusal then says what this window can fit)."""
    query = compile_query(spec, codec)
    generated = spec.max_tokens or 0 if spec.kind == "generate" else 0
    # (a question that stands in for the session's last `overlap` tokens reaches that many fewer past them)
    need = max((len(probe) for probe in query.probes), default=0) - query.overlap + generated
    if need > probe_reserve:
        what = "question and answer take" if generated else "question takes"
        raise QueryCompileError(f"its {what} {need} tokens, more than scheduler.probe_reserve ({probe_reserve}) "
                                f"keeps free past a stream's tokens: {_reserve_advice(need, window)}")
    return query


def _reserve_advice(need: int, window: ContextWindow | None) -> str:
    """What makes room for a probe of ``need`` tokens: a larger probe_reserve where the window fits one beside the
    sink and the tokens a roll keeps (sink + kept + reserve below the window: ContextWindow.fit refuses a start
    otherwise), else a smaller keep_fraction with it, else a shorter question. Advising the reserve alone sent a user
    to a start that refused it and advised a smaller one (review432 #1)."""
    if window is None:
        return (f"raise scheduler.probe_reserve to at least {need} (it must stay below the window), or shorten the "
                f"question")
    size, sink, keep = window.window, window.sink, window.keep
    room = size - sink - keep - 1  # the largest reserve this window fits beside the sink and the kept tokens
    if need <= room:
        return (f"raise scheduler.probe_reserve to at least {need} (the window of {size} positions fits up to {room} "
                f"beside the {keep} tokens a roll keeps), or shorten the question")
    shape = f"the window of {size} positions" + (f" (sink {sink})" if sink else "")
    kept = size - sink - need - 1  # the tokens a roll could keep beside a reserve of `need`
    fraction = math.floor(100 * kept / size) / 100
    if fraction > 0:
        return (f"{shape} fits a reserve of {room} at most beside the {keep} tokens a roll keeps: shorten the question "
                f"to {room} tokens, or set scheduler.probe_reserve: {need} with keep_fraction: {fraction:g} (a roll "
                f"then keeps {int(size * fraction)} tokens of context)")
    return (f"{shape} cannot hold it beside a stream's context: shorten the question to {room} tokens (the reserve "
            f"this window fits beside the {keep} tokens a roll keeps), or serve a model with more positions")
