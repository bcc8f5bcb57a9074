"""What a control request must be, and the errors a control op raises: a request is one msgpack map of str keys
with a str `op`, its text UTF-8, no key given twice, after at most a few small routing frames. The checks and the
field readers here are shared by the serving loop, the control ops and the replies sent while the service starts."""

from __future__ import annotations

from collections.abc import Callable, Container
from typing import Any, NamedTuple

import zmq

from connectors.stream_names import check_normalized
from connectors.ticks import InvalidTick, NotMsgpack, RepeatedKeys, check_stream, read_msgpack, wire_type, wire_value
from engine.stream_patterns import did_you_mean
from engine.quoting import quoted
from queries.limits import clip
from queries.spec_errors import MAX_LISTED, UnknownQueryError

ERROR_REPLY_CHARS = (MAX_LISTED + 1) * 500  # a control error: room for every listed query's own (clipped) message
MAX_ENVELOPE_FRAMES = 4  # frames a control request may carry before it, to come back with the reply
MAX_ENVELOPE_FRAME_BYTES = 256  # (a routing id is at most 255 bytes)
GENERATED_ROUTING_ID_BYTES = 5  # libzmq's own routing ids: a zero byte (reserved to it), then a uint32


def envelope_problem(envelope: list[bytes]) -> str | None:
    """Why the frames before a control request (the routing id ROUTER put first, then the client's own) are not
    echoed with its reply; None when they are."""
    frames = envelope[1:]
    if len(frames) > MAX_ENVELOPE_FRAMES:
        return (f"a request came with {len(frames)} frames before it, over {MAX_ENVELOPE_FRAMES}: send the request "
                f"as the last frame after at most {MAX_ENVELOPE_FRAMES} (a REQ socket's one empty frame)")
    if any(len(frame) > MAX_ENVELOPE_FRAME_BYTES for frame in frames):
        longest = max(len(frame) for frame in frames)
        return (f"a frame before the request is {longest} bytes, over {MAX_ENVELOPE_FRAME_BYTES}: frames before the "
                f"request come back with the reply, and are for routing (a REQ socket's empty frame), not data")
    return None


def refused_envelope(envelope: list[bytes]) -> list[bytes]:
    """The frames that come back with the reply to a request whose frames `envelope_problem` refuses: the routing
    id ROUTER added, and a REQ socket's empty delimiter when one comes next (a REQ client drops a reply without
    it, and would wait for ever)."""
    return envelope[:2] if len(envelope) > 1 and envelope[1] == b"" else envelope[:1]


def read_control_request(sock: zmq.Socket, flags: int = 0) -> list[bytes]:
    """A control request's frames as ROUTER ``sock`` reads them, the routing id first, with the routing id its
    client announced where libzmq gives one of its own instead (review444 #1). ZMQ_ROUTER_HANDOVER renames the
    connection whose id a new one takes, to a generated id (a zero byte, then 4 more): a request the old one had
    sent and the service had not read yet (it was in a forward) came out under that name, and its reply, owed to
    the client that now holds the id, went nowhere. The connection's ZMTP metadata keeps the id it announced, as a
    C string: an id that is not UTF-8 keeps the generated one (its reply is dropped and counted), and one with a
    zero byte comes cut at it (docs/wire-protocol.md asks for text ids)."""
    frames = sock.recv_multipart(flags, copy=False)
    routing_id = frames[0].bytes
    if len(routing_id) == GENERATED_ROUTING_ID_BYTES and routing_id[0] == 0:
        try:
            routing_id = frames[-1].get("Identity").encode() or routing_id  # ("": a client that set none)
        except (zmq.ZMQError, UnicodeDecodeError):  # (no metadata, an inproc peer; an id that is not text)
            pass
    return [routing_id, *(frame.bytes for frame in frames[1:])]


MAX_SOURCE_CHARS = 64
class ControlOp(NamedTuple):
    """What a client can do with an op, as the start's warning of a control socket other hosts reach says it, and the
    keys its request takes."""

    effect: str  # "changes" (what the service serves or keeps), "computes" (a forward on demand) or "reads"
    does: str  # a change's or computation's own words; a read's, what it reads
    keys: dict[str, type] = {}  # the request's keys it reads, beside COMMON_KEYS: each one's type (check_fields)
    required: tuple[str, ...] = ()  # ... those every request of it gives (the others: nil or left out, alike)


COMMON_KEYS = ("op", "id")  # every request's: `id` comes back on the reply

# Every op the control socket serves (a handler ``_op_NAME`` each): the unknown-op error lists them, and the warning
# of an exposed control socket says what each lets a stranger do (exposure.py), so a new op is said there too; a key
# a handler reads is listed here with its type, or its requests get a note that it was ignored (unused_keys_note)
CONTROL_OPS = {
    "register": ControlOp("changes", "register queries (replacing any of the same name)",
                          {"yaml": str, "source": str}, ("yaml",)),
    "unregister": ControlOp("changes", "unregister queries", {"name": str, "names": list}),
    "list": ControlOp("reads", "queries"),
    "get": ControlOp("reads", "cached answers", {"query": str, "stream": str}, ("query", "stream")),
    "ask": ControlOp("computes", "have questions computed on any stream",
                     {"stream": str, "query": str, "spec": dict, "kind": str, "max_stale_ticks": int}, ("stream",)),
    "answers": ControlOp("reads", "answers published", {"topic": str, "after": int, "limit": int}, ("topic", "after")),
    "topics": ControlOp("reads", "topics", {"prefix": str, "after": str}),
    "streams": ControlOp("reads", "streams' ticks held",
                         {"streams": list, "after": str, "drain": bool, "sort": str, "limit": int}),
    "stats": ControlOp("reads", "counters"),
    "health": ControlOp("reads", "health"),
    "forget": ControlOp("changes", "forget streams (session, cached answers and ordering guard, written to the tick "
                                   "log: a restart forgets them too)",
                        {"stream": str, "streams": list, "pattern": str, "dry_run": bool}),
}
MAX_UNUSED_NAMED = 4  # unused keys a note names (a request may carry thousands)


def unused_keys_note(request: dict) -> str | None:
    """The `note` of a reply to a request (checked: str keys, a str `op`) with keys its op does not take, naming
    them and, for each close to one it takes, that key: `key 'max_stale' ignored: op 'ask' takes no such key (...);
    did you mean 'max_stale_ticks'?`; None when it has none, or its op is unknown (refused already). Noted, not
    refused: a request that worked stays served (docs/wire-protocol.md, *Compatibility*), and a client sending an
    optional key a later version added is served by an earlier one (review285 #3: an `ask` with `max_stale`, the
    CLI flag's name, was computed, not read from the cache, without a word)."""
    op = CONTROL_OPS.get(request["op"])
    if op is None:
        return None
    unused = [key for key in request if key not in op.keys and key not in COMMON_KEYS]
    if not unused:
        return None
    named = ", ".join(quoted(key) for key in unused[:MAX_UNUSED_NAMED])
    more = f" and {len(unused) - MAX_UNUSED_NAMED} more" if len(unused) > MAX_UNUSED_NAMED else ""
    takes = f"its keys: {', '.join(op.keys)}; and id" if op.keys else "it takes none but id"
    meant = did_you_mean([key[:64] for key in unused[:MAX_UNUSED_NAMED]], op.keys)  # (a close one: a misspelling)
    return (f"{'key' if len(unused) == 1 else 'keys'} {named}{more} ignored: op {quoted(request['op'])} takes no such "
            f"key ({takes}){meant}")


def noted(obj: dict, note: str | None) -> dict:
    """A reply ``obj`` with ``note`` added to a successful one (after a note of its own op's, joined by "; ")."""
    if note is None or not obj.get("ok"):
        return obj
    return {**obj, "note": f"{obj['note']}; {note}" if obj.get("note") else note}


def what_control_clients_can_do() -> str:
    """Every op's effect in one phrase, changes first: "register queries (...), ..., and read its queries, ..."."""
    acts = [op.does for effect in ("changes", "computes") for op in CONTROL_OPS.values() if op.effect == effect]
    reads = [op.does for op in CONTROL_OPS.values() if op.effect == "reads"]
    return ", ".join(acts) + f", and read its {', '.join(reads[:-1])} and {reads[-1]}"


class ControlError(ValueError):
    """A control request that cannot be served; the message goes back to the sender, with ``reason`` (a client
    tells by it a request to fix from one to send again later)."""

    reason = "bad_request"


class ControlStopping(ControlError):
    """A request read while the service stops (limits.drain_s): refused at once, so a client tells "going down"
    from "hung" and sends it again once the service is back (review376 #12)."""

    reason = "stopping"


class ControlBusy(ControlError):
    """A request refused for now (too many waiting): the same request, sent again later, is served."""

    reason = "busy"


class ControlUnknownStream(ControlError):
    """A request naming a stream the service holds no tick of (a misspelt name, or one that never sent): its own
    reason, so a client tells it from a malformed request without reading the text."""

    reason = "unknown_stream"


class ControlUnknownQuery(ControlError):
    """A request naming a query that is not registered (a misspelt name, or one another client unregistered): its
    own reason, as a stream's, so a client re-registers or says "query removed" without reading the text
    (review308 #5)."""

    reason = "unknown_query"


class ControlShardLost(ControlError):
    """An ask whose stream's shard is lost (with --shards): sent again once the shard is back, it is served."""

    reason = "shard_lost"


def unpack_request(payload: bytes) -> Any:
    """The request as decoded, read as leniently as ticks are (keys of any type, text that is not UTF-8, a key
    given twice): `check_request` then says what is wrong with it, and the reply still carries its `id`."""
    if not payload:  # said as ingest says it, not as msgpack's "ends inside a value"
        raise ControlError("request is an empty frame: a request is one msgpack map with a string \"op\"")
    try:
        return read_msgpack(payload)
    except NotMsgpack as err:
        raise ControlError(f"request is {err}") from None


def request_or_none(payload: bytes) -> Any:
    """The request as `unpack_request` decodes it, or None when it is not msgpack: for the error reply to a request
    refused for another reason first (the frames before it, a service still starting), which still echoes its
    `id` (the payload is bounded: ZeroMQ drops one over limits.max_control_bytes unread)."""
    try:
        return unpack_request(payload)
    except ControlError:
        return None


def sendable(text: str) -> str:
    """An error that quotes text which was not UTF-8 (decoded with surrogates), escaped: a reply must pack."""
    return text.encode("utf-8", "backslashreplace").decode()


def refusal(e: ValueError | LookupError) -> tuple[str, str]:
    """The `reason` and `error` of the reply to a request its op refused with ``e``: one engine's, and a shard's
    for an ask it refused (carried back as they are, so the front door's reply is one engine's)."""
    reason = e.reason if isinstance(e, ControlError) else \
        "unknown_query" if isinstance(e, UnknownQueryError) else "bad_request"
    # (a KeyError's own words, not the repr str() gives them; a registration's error lists up to MAX_LISTED invalid
    # queries, each clipped on its own)
    said = str(e.args[0]) if isinstance(e, KeyError) and len(e.args) == 1 else str(e)
    return reason, sendable(clip(said or type(e).__name__, ERROR_REPLY_CHARS))


NO_ID = object()  # a request whose id cannot be echoed (not a map, no id, its id given twice or not UTF-8)


def request_id(request: Any) -> Any:
    """The `id` a reply echoes, or NO_ID."""
    if not isinstance(request, dict) or "id" not in request:
        return NO_ID
    if isinstance(request, RepeatedKeys) and "id" in request.repeated:
        return NO_ID  # which of its ids the client waits for cannot be told
    return NO_ID if _first_bad_text(request["id"]) is not None else request["id"]  # (a str of it must pack)


def _first_bad_text(value: Any, where: str = "") -> tuple[str, str] | None:
    """Where in ``value`` (a decoded request or part of it) the first str that is not valid UTF-8 is, and its
    bytes as sent (escaped); None when there is none. A walk with a stack: msgpack nests deeper than Python
    recurses."""
    stack = [(where, value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode()
            except UnicodeEncodeError:  # decoded with surrogates: the bytes were not UTF-8
                return path, quoted(item.encode("utf-8", "surrogateescape"))
        elif isinstance(item, dict):
            stack.extend((f"{path}.{key}" if path else str(key), v) for key, v in item.items())
            stack.extend((f"{path} (a key)", key) for key in item if isinstance(key, str))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(item))
    return None


def _first_repeated_keys(value: Any) -> tuple[str, list[Any]] | None:
    """Where in a decoded request a map gives a key more than once, and those keys; None when none does."""
    stack = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, RepeatedKeys):
            return path, item.repeated
        if isinstance(item, dict):
            stack.extend((f"{path}.{key}" if path else str(key), v) for key, v in item.items())
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(item))
    return None


def check_request(request: Any) -> dict:
    """A decoded request that is a map of str keys, each given once, whose text is UTF-8 and whose `op` is a str;
    raises ControlError saying which rule it breaks (text quoted escaped: a reply must pack)."""
    if not isinstance(request, dict):
        raise ControlError(f"request must be a msgpack map with a string \"op\", got {wire_value(request)}")
    for key in request:
        if type(key) is not str:
            raise ControlError(f"request keys must be msgpack str, got {wire_value(key)}"
                               + (": pack text as str, not bin" if isinstance(key, bytes) else ""))
    if (repeated := _first_repeated_keys(request)) is not None:
        path, keys = repeated
        listed = ", ".join(quoted(key, 32) for key in keys[:8])
        where = f" (in {quoted(path)})" if path else ""
        raise ControlError(f"key {listed} given more than once in the request{where}: which value was meant cannot "
                           f"be told (msgpack allows a repeated key; the engine refuses it, as in ticks)")
    if (bad := _first_bad_text(request)) is not None:
        path, sent = bad
        raise ControlError(f"request field {quoted(path)} holds a str that is not valid UTF-8 ({sent}): "
                           f"msgpack str is UTF-8 text")
    if not isinstance(request.get("op"), str):
        raise ControlError(f"request must be a msgpack map with a string \"op\", got \"op\" as "
                           f"{wire_value(request.get('op'))}")
    return request


def register_source(request: dict) -> str:
    """The name errors of a registration quote: the client's file name, sanitised, else control:register."""
    if request.get("source") is None:
        return "control:register"
    name = request["source"].replace("\\", "/").rsplit("/", 1)[-1]  # a file name, not a path
    name = "".join(c for c in name if c.isascii() and (c.isalnum() or c in "._-+"))[:MAX_SOURCE_CHARS]
    return name or "control:register"


def request_field(request: dict, name: str, kind: type) -> Any:
    """The field ``name`` of a request, which must be given as ``kind`` (str, int but not bool, dict: a msgpack
    map, ...), else ControlError: `op "get" needs "stream" as str (got int 7)`."""
    value = request.get(name)
    if not _is_of(value, kind):
        got = "it was left out" if name not in request else f"got {wire_value(value)}"
        raise ControlError(f"op {quoted(request.get('op'))} needs {quoted(name)} as {_wire_name(kind)} ({got})")
    return value


def check_fields(request: dict) -> None:
    """A request of a known op (check_request'ed) whose op's required keys are given, and whose every key the op
    takes is of its type or nil (an optional field sent as nil is one left out); ControlError otherwise. Checked
    before its op reads any name, so a malformed request is `bad_request` whatever it names (review391 #1: `get` of
    stream 7 was `unknown_query` when its query's name was not registered)."""
    op = CONTROL_OPS[request["op"]]
    for name in op.required:
        request_field(request, name, op.keys[name])
    for name, kind in op.keys.items():
        value = request.get(name)
        if value is not None and not _is_of(value, kind):
            raise ControlError(f"op {quoted(request['op'])} takes {quoted(name)} as {_wire_name(kind)} or nil "
                               f"(got {wire_value(value)})")


def _is_of(value: Any, kind: type) -> bool:
    return isinstance(value, kind) and not (kind is int and isinstance(value, bool))  # True is no seq or count


def _wire_name(kind: type) -> str:
    return wire_type(kind())  # (str -> str, dict -> map, ...: the msgpack name of an empty one)


def held_name(name: str, held: Container[str], renamed: Callable[[str], str] | None) -> str:
    """The stream a client's ``name`` is: the name itself where held (a tick log from before a rename restored it),
    else as live ingest reads its ticks (``renamed``: ingest.rename and ingest.slashes, `EUR/USD` -> `EUR-USD.lmax`)."""
    return name if renamed is None or name in held else renamed(name)


def asked_stream(request: dict, held: Container[str] = (), renamed: Callable[[str], str] | None = None) -> str:
    """The `stream` of a `get`, an `ask` or a `forget`, refused (`bad_request`) when no stream can have that name
    (the rules ingest holds ticks to: a `/`, a leading `_`, ..., and Unicode NFC), with the rule and, for a `/`,
    the name file replay gives it, for a name not in NFC the form to send: such a name never has an answer, and a
    client polling it must not read "none yet" for ever (review243 #2: a wire `get` of `BTC/USDT` replied
    `answer: null` with no hint; review260 #2: an NFD `パナソニック` too). A name `held` (a tick log from before the
    NFC rule restored it) is asked as it is; another is first read as live ingest reads its ticks (``renamed``:
    `serve`'s ingest.rename and ingest.slashes, so `get EUR/USD` finds the stream `EUR/USD` ticks went to, review379
    #7). The one check for `get`, `ask`, `forget` and the CLI."""
    stream = held_name(request_field(request, "stream", str), held, renamed)
    try:
        check_stream(stream, 1 << 16)  # (the rule: a name over limits.max_stream_bytes may be a restart's, logged)
        if stream not in held:
            check_normalized(stream)
    except InvalidTick as e:
        live = ("; serve's ingest.slashes: dash (or an ingest.rename pattern, \"*/*\": \"*-*\") reads such names so "
                "live" if "/" in stream else "")  # (the wire's refusal is kept short: said here, where one asks)
        raise ControlError(f"{quoted(stream)} cannot be a stream: {e}{live}") from None
    return stream
