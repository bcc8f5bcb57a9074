"""The service: everything between the engine core and the outside world.

Server (ZeroMQ sockets), control ops, the tick pipeline (ticks -> engine, shared by
the server and backtests), backtest, demo, CLI, clients, metrics and the service
config. These are the only engine modules that import ``connectors`` and ``queries``.
"""
