"""CURVE authentication: key files and the server's client allow-list (ZAP); a client's side is connectors/handshake.py.

Key files come in two formats, both accepted wherever a key file is asked for:
  * a zmq.auth certificate (``zmq.auth.create_certificates`` or ``flashtick keygen``):
    ``NAME.key`` holds the public key, ``NAME.key_secret`` the public and the secret key;
  * a bare z85 key (40 characters), as ``zmq.curve_keypair()`` returns it; a secret
    key alone is enough, its public key is derived from it.

The allow-list is a directory of client ``*.key`` certificates, read once when
the server starts. A ZAP handler on its own thread (pyzmq's ThreadAuthenticator,
on the server's own ZeroMQ context) answers each CURVE handshake: a key in the
directory passes, any other is refused (ZAP status 400) and counted. The
engine thread never sees a refused client.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping
from pathlib import Path

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils import z85

from engine.path_words import user_path
from connectors.handshake import monitor_event
from engine.quoting import quoted
from engine.service.private_dirs import make_private_dirs

Z85_KEY_LENGTH = 40
MAX_DENIALS_LOGGED = 10  # distinct refusals said on stderr (a client retries its handshake: each said once)


class KeyFileError(ValueError):
    """A key file that cannot be used, naming the file and the reason."""


def read_public_key(path: str | Path) -> bytes:
    """The z85 public key in `path`: a certificate (public or secret) or a bare z85 public key."""
    public, _secret = _read(path)
    if public is None:
        raise KeyFileError(f"{path}: holds a secret key only; give the public key file (or a *.key_secret certificate)")
    return public


def read_server_public_key(path: str | Path) -> bytes:
    """The server's z85 public key as a client reads it (``--server-key``): from its public ``*.key`` or a bare
    public key, never from a file that holds the server's secret key, which belongs on the server alone."""
    public, secret = _read(path)
    if secret is not None:
        raise KeyFileError(f"{path}: holds a secret key: a client needs the server's public key only (the *.key "
                           f"beside it, not the *.key_secret); keep the secret key on the server")
    if public is None:  # (a bare key is read as public: this is for a certificate without one)
        raise KeyFileError(f"{path}: holds no public key; give the server's public *.key file")
    return public


def read_keypair(path: str | Path) -> tuple[bytes, bytes]:
    """(public, secret) z85 keys from a ``*.key_secret`` certificate or a bare z85 secret key file."""
    public, secret = _read(path, bare_is_secret=True)
    if secret is None:
        raise KeyFileError(f"{path}: holds no secret key (give the *.key_secret file, not the public *.key)")
    derived = zmq.curve_public(secret)
    if public is not None and public != derived:
        raise KeyFileError(f"{path}: its public key does not belong to its secret key")
    return derived, secret


def server_keypair(secret_file: str | Path, public_file: str | Path | None = None) -> tuple[bytes, bytes]:
    """The server's (public, secret) keys; a public key file, when given, must match the secret key."""
    public, secret = read_keypair(secret_file)
    if public_file is not None and read_public_key(public_file) != public:
        raise KeyFileError(f"curve.server_public_key_file: {public_file} is not the public key of "
                           f"curve.server_secret_key_file {secret_file}")
    return public, secret


def _read(path: str | Path, bare_is_secret: bool = False) -> tuple[bytes | None, bytes | None]:
    try:  # `~/keys/client.key_secret` from Python as from --client-key (path_words.user_path)
        text = user_path(path).read_bytes()
    except OSError as e:
        raise KeyFileError(f"{path}: cannot read key file: {e.strerror}") from None
    if b"public-key" in text or b"secret-key" in text:  # a zmq.auth certificate (ZPL text)
        public, secret = (_cert_field(text, name) for name in (b"public-key", b"secret-key"))
        return (_checked(path, public) if public is not None else None,
                _checked(path, secret) if secret is not None else None)
    key = _checked(path, text.strip())
    return (None, key) if bare_is_secret else (key, None)


def _cert_field(text: bytes, name: bytes) -> bytes | None:
    """`name = "value"` of a zmq.auth certificate (the curve section's lines)."""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(name) and b"=" in line:
            return line.split(b"=", 1)[1].strip(b" \t'\"")
    return None


def _checked(path: str | Path, key: bytes) -> bytes:
    try:
        if len(key) != Z85_KEY_LENGTH:
            raise ValueError
        z85.decode(key)
    except ValueError:
        raise KeyFileError(f"{path}: not a CURVE key file (expected a zmq.auth certificate or a "
                           f"{Z85_KEY_LENGTH}-character z85 key)") from None
    return key


def allowed_client_keys(directory: str | Path) -> dict[bytes, Path]:
    """The public keys of the ``*.key`` certificates in `directory`, each with its file."""
    folder = Path(directory)
    if not folder.is_dir():
        raise KeyFileError(f"curve.clients_dir: {folder} is not a directory")
    keys = {read_public_key(p): p for p in sorted(folder.glob("*.key"))}
    if not keys:
        raise KeyFileError(f"curve.clients_dir: {folder} holds no client certificate (*.key), so every client "
                           "would be refused; add one with `flashtick keygen NAME --dir DIR`")
    return keys


class ClientAllowList(ThreadAuthenticator):
    """The server's ZAP handler: CURVE clients whose public key is in `keys` pass, others are refused.

    It counts into `counters` (``auth_allowed``, ``auth_denied``, ``auth_errors``)
    and says on stderr which keys it refused (the first few). A ZAP request it
    cannot handle is refused, never left unanswered: an unanswered request would
    stall that handshake.
    """

    def __init__(self, context: zmq.Context, keys: dict[bytes, Path], counters: MutableMapping[str, int]) -> None:
        super().__init__(context)
        self.counters = counters
        for name in ("auth_allowed", "auth_denied", "auth_errors"):
            counters[name] = 0
        self.certs["*"] = {key: True for key in keys}  # what configure_curve(domain="*", location=DIR) would load
        self._denials_said: set[bytes] = set()  # refusals' texts (naming the key) said so far

    async def handle_zap_message(self, msg: list[bytes]) -> None:
        try:
            await super().handle_zap_message(msg)
        except Exception as e:  # keep the handler alive: refuse this one and go on
            self.counters["auth_errors"] += 1
            print(f"flashtick: ZAP request failed: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            if len(msg) > 1:
                try:
                    self._send_zap_reply(msg[1], b"500", b"internal error")
                except zmq.ZMQError:
                    pass

    def _send_zap_reply(self, request_id: bytes, status_code: bytes, status_text: bytes,
                        user_id: str = "anonymous") -> None:
        super()._send_zap_reply(request_id, status_code, status_text, user_id)
        if status_code == b"200":
            self.counters["auth_allowed"] += 1
            return
        self.counters["auth_denied"] += 1  # handshakes: a refused client retries, each retry counted
        if status_text not in self._denials_said and len(self._denials_said) < MAX_DENIALS_LOGGED:
            self._denials_said.add(status_text)
            more = " (its retries, and other keys past this one, are only counted: stats auth_denied)" \
                if len(self._denials_said) == MAX_DENIALS_LOGGED else " (its retries are only counted)"
            print(f"flashtick: refused a client: {status_text.decode(errors='replace')}{more}",
                  file=sys.stderr, flush=True)

    async def _authenticate_curve(self, domain: str, client_key: bytes) -> tuple[bool, bytes]:
        allowed, reason = await super()._authenticate_curve("*", client_key)
        if not allowed:
            # the server names each socket's ZAP domain flashtick-NAME (engine/service/server.py `_socket`)
            where = domain.removeprefix("flashtick-") if domain.startswith("flashtick-") else None
            reason = (b"unknown client key " + z85.encode(client_key)
                      + (f" on the {where} socket".encode() if where else b""))
        return allowed, reason


def keygen(directory: str | Path, name: str) -> tuple[Path, Path]:
    """Write NAME.key (public) and NAME.key_secret (public + secret) in `directory`; refuses to overwrite. A folder
    made for them is the user's alone (0700), as a data directory is: it holds a secret key."""
    # '' made hidden .key files, '.' and '..' hidden ..key ones: a key an allow-list folder's `ls` does not show
    if not name or name.startswith(".") or os.sep in name or (os.altsep and os.altsep in name):
        raise ValueError(f"NAME {quoted(name)} must be a file name stem without a path separator, not starting with "
                         "\".\", e.g. server or alice: give the folder with --dir")
    folder = Path(directory)
    make_private_dirs(folder)
    public, secret = folder / f"{name}.key", folder / f"{name}.key_secret"
    for path in (public, secret):
        if path.exists():
            raise FileExistsError(f"{path} exists; not overwriting a key")
    made = zmq.auth.create_certificates(folder, name)
    Path(made[1]).chmod(0o600)
    return Path(made[0]), Path(made[1])



class FailedHandshakes:
    """The server side of handshakes the ZAP handler never sees: a client without CURVE keys (the NULL mechanism)
    connecting to a CURVE socket, or a peer that is not a ZeroMQ client of that socket's kind, fails before any
    key is checked. ZeroMQ drops such a connection without a word; its socket monitor says so, and this counts it
    (``handshakes_failed``, with ``auth_denied`` in stats) and names the socket on stderr for the first few.

    A peer whose first bytes are no ZeroMQ greeting at all (random bytes, an HTTP request) gets no handshake event
    from libzmq, only its connection accepted and dropped: such a connection is one that ends with no handshake
    event of its own. The events name a connection (its fd) on accept and drop only, so the handshake events seen
    while several connections wait for theirs are matched by count (``_Waiting``): each drop is said the moment
    none of the waiting connections can have had one, and the count is exact once those that waited are gone."""

    FAILED = zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    EVENTS = FAILED | zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_ACCEPTED | \
        zmq.EVENT_DISCONNECTED

    def __init__(self, sockets: dict[str, zmq.Socket], counters: MutableMapping[str, int]) -> None:
        self.counters = counters
        counters["handshakes_failed"] = 0
        self._monitors = {name: sock.get_monitor_socket(self.EVENTS) for name, sock in sockets.items()}
        self._waiting = {name: _Waiting() for name in sockets}
        self._said = 0

    def poll(self) -> None:
        """Count (and say, the first few) the failed handshakes since the last call."""
        for name, monitor in self._monitors.items():
            waiting = self._waiting[name]
            while monitor.poll(0):
                message = monitor_event(monitor.recv_multipart())
                event = message["event"]
                if event == zmq.EVENT_ACCEPTED:
                    waiting.accepted(message["value"])
                elif event == zmq.EVENT_DISCONNECTED:
                    if waiting.dropped(message["value"]):
                        self._failed(name, "a peer that is not a ZeroMQ client (its first bytes were no ZeroMQ "
                                           "greeting: random bytes, HTTP, a scanner)")
                else:  # (one handshake event a connection)
                    waiting.concluded()
                    if event & self.FAILED:
                        # (libzmq reports the same client as PROTOCOL or NO_DETAIL by timing: one text for both)
                        self._failed(name, "a client without CURVE keys or with a wrong --server-key (give it the "
                                           "server's public key and its own --client-key), or a peer that is not "
                                           "a ZeroMQ client of this socket's kind")

    def _failed(self, name: str, why: str) -> None:
        self.counters["handshakes_failed"] += 1
        if self._said < MAX_DENIALS_LOGGED:
            self._said += 1
            more = " (later ones are only counted: stats handshakes_failed)" if self._said == MAX_DENIALS_LOGGED else ""
            print(f"flashtick: refused a client on the {name} socket: its handshake failed: {why}{more}",
                  file=sys.stderr, flush=True)

    def close(self) -> None:
        for monitor in self._monitors.values():
            monitor.close(linger=0)
        self._monitors = {}


class _Waiting:
    """One socket's connections accepted and waiting for their handshake event (by fd), and how many handshake
    events came that no drop has yet accounted for (``concluded_unmatched``, fewer than the connections waiting)."""

    def __init__(self) -> None:
        self.fds: set[int] = set()
        self.concluded_unmatched = 0

    def accepted(self, fd: int) -> None:
        self.fds.add(fd)

    def concluded(self) -> None:
        self.concluded_unmatched += 1
        if self.concluded_unmatched >= len(self.fds):  # every waiting connection has had its event
            self.fds.clear()
            self.concluded_unmatched = 0

    def dropped(self, fd: int) -> bool:
        """Whether the connection ``fd``, dropped now, ended without a handshake event (as the events tell)."""
        if fd not in self.fds:
            return False  # (its handshake had concluded)
        self.fds.discard(fd)
        if self.concluded_unmatched == 0:
            return True
        self.concluded_unmatched -= 1  # which waiting one had the event cannot be told: counted by the rest
        return False
