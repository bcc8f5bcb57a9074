"""The service's own topics on its answers socket, beside the queries' answer topics: `_rejects/` carries each tick
it refused, `_heartbeat/` its heartbeats. One definition for the service that publishes them and the clients that
subscribe to them (a feed's RejectWatch, the answer subscribers); it sits in connectors because connectors sit
below the service.
"""

REJECTS_TOPIC = "_rejects/"
HEARTBEAT_TOPIC = "_heartbeat/"
