"""The service: everything between the engine core and the outside world.

Server (ZeroMQ sockets), control ops, the tick pipeline (ticks -> engine, shared by
the server and backtests), backtest, demo, CLI, clients, metrics, the service
config, and the built-in tick model's training (train, with datasets: real tick files
from a caller-given directory). These are the only engine modules that import
``connectors`` and ``queries``.
"""
