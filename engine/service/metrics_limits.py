"""The /metrics endpoint's limits on its connections: how long a request may take to come, how many connections
are served at once, how often the serving thread polls. The server enforces them (engine/service/metrics.py) and the
help of the endpoint's own counters quotes them (engine/service/metrics_text.py): their own module, so that both read
the one value without either importing the other's module back.
"""

from __future__ import annotations

METRICS_POLL_S = 0.1  # a stop's shutdown() waits for the serving thread's next poll (http.server's default: 0.5 s)
# Each connection holds a thread while it is open: a client that opens many and sends nothing (or a byte at a time)
# would hold hundreds of threads and descriptors. A scraper sends its request at once and the reply is small, so a
# connection whose whole request has not come this long after its accept is closed (a deadline, not a time-out per
# read: one byte every 2 s held a connection for ever), and past this many open at once the oldest one still
# sending its request is closed to make room for a new one (counted), so a scrape gets in while they trickle
METRICS_REQUEST_TIMEOUT_S = 5.0
METRICS_MAX_CONNECTIONS = 16
