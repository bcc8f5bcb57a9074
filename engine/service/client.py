"""Clients of a running flashtick service: the control socket and the answer topics.

    with ControlClient("tcp://127.0.0.1:5557") as control:
        control.call("register", yaml=open("queries.yaml").read(), source="queries.yaml")
        print(control.call("ask", stream="BTCUSDT", query="dir20"))

    with AnswerSubscriber("tcp://127.0.0.1:5556", ["dir20/"]) as answers:
        answers.wait_ready()                     # the subscription has reached the server
        message = answers.recv(timeout_s=5)      # (topic, answer), or None on time-out

    with GaplessSubscriber(answers_ep, control, ["dir20/"], last_seqs=saved) as answers:
        answers.wait_ready()                     # subscribed, and caught up after the saved seqs
        topic, answer = answers.recv()           # every answer once, in seq order per topic
        saved = answers.last_seq                 # keep it to resume after a restart (yours or the service's)

Against a CURVE server both take `server_public_key=` (z85) and, when the
server has an allow-list, `client_keypair=(public, secret)`; see engine/service/auth.py.
A refused handshake is reported as such instead of a silent wait.

The clients live in a module each: control_client.py (ControlClient and its errors), answer_subscriber.py and
gapless_subscriber.py; this module is their public import, the one docs/wire-protocol.md names (so user code
and the tests import them from here, as before the split).
"""

from __future__ import annotations

from engine.service.answer_subscriber import AnswerSubscriber
from engine.service.control_client import (ControlBusy, ControlClient, ControlDropped, ControlError, ControlTimeout,
                                           ControlUnreachable)
from engine.service.gapless_subscriber import GaplessSubscriber

__all__ = ["AnswerSubscriber", "ControlBusy", "ControlClient", "ControlDropped", "ControlError", "ControlTimeout",
           "ControlUnreachable", "GaplessSubscriber"]
