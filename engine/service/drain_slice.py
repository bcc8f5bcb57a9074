"""The serving loop's share of time for one socket: a flood on one socket (ingest, control, the answers socket's
subscriptions) must not keep the loop from the others, its forwards and its heartbeats, so each socket's reader
stops after this long and the loop moves on. One number, shared by every reader."""

DRAIN_SLICE_S = 0.05  # longest stretch spent draining one socket before the loop moves on (the others, a step)
