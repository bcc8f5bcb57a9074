"""Whether a standing query fits the positions a session keeps free for probes (`scheduler.probe_reserve`):
compiled, and refused at registration with the number to raise when its question (and generated answer) is
longer, rather than failing unseen whenever a stream's window is nearly full."""

from __future__ import annotations

from connectors.codec import Codec
from queries.probe_answers import CompiledQuery, QueryCompileError, compile_query
from queries.spec import QuerySpec


def compile_fitting(spec: QuerySpec, codec: Codec, probe_reserve: int) -> CompiledQuery:
    """``compile_query``, refused when the query's probe (with a generated answer) is longer than the positions a
    session keeps free past its tokens (``scheduler.probe_reserve``): whenever a stream's window is nearly full its
    answers would fail, and so be missing, with nothing said to its subscribers."""
    query = compile_query(spec, codec)
    generated = spec.max_tokens or 0 if spec.kind == "generate" else 0
    # (a question that stands in for the session's last `overlap` tokens reaches that many fewer past them)
    need = max((len(probe) for probe in query.probes), default=0) - query.overlap + generated
    if need > probe_reserve:
        what = "question and answer take" if generated else "question takes"
        raise QueryCompileError(f"its {what} {need} tokens, more than scheduler.probe_reserve ({probe_reserve}) "
                                f"keeps free past a stream's tokens: raise scheduler.probe_reserve to at least {need} "
                                f"(it must stay below the window), or shorten the question")
    return query
