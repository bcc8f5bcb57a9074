"""The `curve` section of the service config: CURVE encryption of the sockets and, with a clients directory,
authentication of the clients.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.service.config_error import ConfigError
from queries.limits import excerpt  # values as YAML writes them: got true, got null (not True, None)

@dataclass(frozen=True)
class CurveSection:
    """CURVE encryption and authentication (key files: zmq.auth certificates or bare z85 keys).

    `enabled` encrypts control and answers and authenticates the server;
    `clients_dir` also authenticates clients: only those whose public key is a
    ``*.key`` certificate in that directory get through (ZAP); `ingest` puts the
    ingest socket under the same rules (feeds then need the server's public key).
    """

    enabled: bool = False
    server_secret_key_file: str | None = None
    server_public_key_file: str | None = None  # optional: derived from the secret key
    clients_dir: str | None = None  # allowed client certificates (*.key); None: any client with the server key
    ingest: bool = False  # CURVE on the ingest socket too

    def __post_init__(self) -> None:
        for name in ("enabled", "ingest"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"curve.{name} must be true or false, got {excerpt(getattr(self, name))}")
        for name in ("server_secret_key_file", "server_public_key_file", "clients_dir"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"curve.{name} must be a path, got {excerpt(value)}")
        if self.enabled and not self.server_secret_key_file:
            raise ConfigError("curve.enabled needs server_secret_key_file (a *.key_secret certificate or a z85 key)")
        if not self.enabled and (self.clients_dir is not None or self.ingest):
            key = "clients_dir" if self.clients_dir is not None else "ingest"
            raise ConfigError(f"curve.{key} needs curve.enabled: true (and the server's key files)")
