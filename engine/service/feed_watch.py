"""An external PUB feed the service connects to: whether its connection stands and what it brought (`stats`
`feeds`, and a log line when the connection is made or lost)."""

from __future__ import annotations

import time
from typing import Any

import zmq
from connectors.handshake import monitor_event

class FeedWatch:
    """An external PUB feed's SUB socket: whether it is connected now (ZeroMQ's socket monitor) and what it
    brought, so `stats` and the log tell a quiet publisher from one the engine never reached or lost."""

    def __init__(self, endpoint: str, sock: zmq.Socket) -> None:
        self.endpoint = endpoint
        self._sock = sock
        self._monitor = sock.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        self.connected = False
        self.connections = 0
        self.messages = 0
        self._last_read: float | None = None  # monotonic time of the last message

    def read(self) -> None:
        self.messages += 1
        self._last_read = time.monotonic()

    def changes(self) -> list[str]:
        """What changed since the last call, in words (a connection made or lost)."""
        said = []
        while self._monitor.poll(0):
            event = monitor_event(self._monitor.recv_multipart())["event"]
            if event == zmq.EVENT_CONNECTED and not self.connected:
                self.connected, self.connections = True, self.connections + 1
                said.append("connected" if self.connections == 1 else f"connected again ({self.connections} times)")
            elif event == zmq.EVENT_DISCONNECTED and self.connected:
                self.connected = False
                said.append("disconnected (the publisher stopped or restarted? ZeroMQ reconnects by itself; what it "
                            "publishes meanwhile is lost)")
        return said

    def stats(self) -> dict[str, Any]:
        idle = None if self._last_read is None else round(time.monotonic() - self._last_read, 3)
        return {"endpoint": self.endpoint, "connected": self.connected, "messages": self.messages, "idle_s": idle}

    def close(self) -> None:
        if not self._sock.closed:
            self._sock.disable_monitor()
        self._monitor.close(linger=0)
